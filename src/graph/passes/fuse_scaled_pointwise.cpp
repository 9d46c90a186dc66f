// An NHWC pointwise FusedConv whose input is a Mul of an activation by a per-channel gate
// (EfficientNet's squeeze-and-excitation: the gate scales the depthwise output, the projection
// conv reads the product alone) becomes one com.wpk ScaledPointwiseConv (graph/fused_ops.hpp).
// Forming it decides nothing about speed: its candidates include the Mul and the conv on their
// own kernels one after the other, as before, beside one that scales each input tile inside the
// product, and the cost model or a measurement picks.
#include "graph/fused_ops.hpp"
#include "graph/group_parts.hpp"
#include "graph/passes/match.hpp"

namespace wpk::passes {
namespace {

bool static_dim(const Dim& d, std::int64_t v) { return d.is_static() && d.value == v; }

// The gate's dims fit [N, 1, 1, C] (N one, or the activation's batch) against the activation's
// [N, H, W, C], so that it scales whole images channel by channel.
bool per_image_channel_gate(const DimList& gate, const DimList& x, std::int64_t channels) {
  if (gate.size() != 4 || !static_dim(gate[1], 1) || !static_dim(gate[2], 1) || !static_dim(gate[3], channels)) return false;
  const Dim &n = gate[0], &batch = x[0];
  return static_dim(n, 1) || (n.is_static() && n.value == batch.value) || (!n.symbol.empty() && n.symbol == batch.symbol);
}

}  // namespace

bool fuse_scaled_pointwise(Graph& g, const PassContext& ctx) {
  return rewrite_to_fixed_point(g, ctx, [&](std::size_t i, const GraphIndex& index, const StaticShapes& shapes, Rewriter& rewriter) {
    const Node& conv = g.nodes()[i];
    if (conv.domain != kWpkDomain || conv.op_type != "FusedConv" || conv.attr_int("channels_last", 0) != 1 ||
        conv.attr_string("auto_pad", "NOTSET") != "NOTSET" || conv.outputs.size() != 1 || conv.inputs.size() < 2 ||
        !pointwise_conv_attributes(conv))
      return;
    const Tensor* w = float_constant(g, conv.inputs[1]);
    if (!w || w->rank() != 4 || w->shape()[2] != 1 || w->shape()[3] != 1) return;
    const std::int64_t c = w->shape()[1];
    const int m = index.producer_index(conv.inputs[0]);
    if (m < 0 || index.sole_reader_index(conv.inputs[0]) != static_cast<int>(i)) return;
    const Node& mul = g.nodes()[static_cast<std::size_t>(m)];
    if (!is_onnx_op(&mul, "Mul") || mul.inputs.size() != 2 || mul.outputs.size() != 1) return;
    for (int x_at : {0, 1}) {
      const ValueId x = mul.inputs[x_at], gate = mul.inputs[1 - x_at];
      const DimList* x_dims = shapes.dims(x);
      const DimList* gate_dims = shapes.dims(gate);
      if (!x_dims || !gate_dims || x_dims->size() != 4 || !static_dim((*x_dims)[3], c) || g.is_initializer(x) ||
          !per_image_channel_gate(*gate_dims, *x_dims, c) || g.value(x).dtype != DType::Float32 ||
          g.value(gate).dtype != DType::Float32)
        continue;
      const std::vector<int> matched{m, static_cast<int>(i)};
      if (!rewriter.available(matched)) return;
      Node group = conv;
      group.op_type = "ScaledPointwiseConv";
      group.inputs = {x, gate, conv.inputs[1], conv.inputs.size() > 2 ? conv.inputs[2] : kNoValue};
      if (has_fused_residual(conv)) group.inputs.push_back(conv.inputs[3]);
      rewriter.replace(matched, {std::move(group)});
      return;
    }
  });
}

}  // namespace wpk::passes
