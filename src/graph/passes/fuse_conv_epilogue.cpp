// A Conv and what follows it elementwise become one com.wpk FusedConv (graph/fused_ops.hpp):
//   Conv -> [Add(per-channel constant)] -> [Add(residual, same shape)] -> [activation]
//   = act(conv(X, W) + B + Z)
// so a backend applies bias, residual and activation while the output tile is still in
// registers instead of making three more passes over memory. ResNet blocks end in
// Conv -> Add(residual) -> Relu, MobileNetV2's in Conv -> Clip(0, 6) and Conv -> Add(residual).
// An intermediate is absorbed only when nothing else reads it and it is not a graph output.
#include "graph/fused_ops.hpp"
#include "graph/passes/match.hpp"
#include "graph/passes/static_shapes.hpp"

namespace wpk::passes {
namespace {

// A constant that adds one value per output channel: [M, 1, ...] or [1, M, 1, ...], never of
// higher rank than the output (rank `rank`), so the Add cannot grow the shape.
bool per_channel(const Tensor& t, std::int64_t m, int rank) {
  if (t.numel() != m || t.rank() > rank || t.rank() < rank - 1) return false;
  return t.dim(t.rank() - (rank - 1)) == m;  // the channel axis, 1 from the front of the output
}

// The epilogue after a Conv with `channels` outputs and weights of rank `rank`; nullopt when
// nothing follows that the fused op can take.
std::optional<Epilogue> conv_epilogue(const Graph& g, const GraphIndex& index, const StaticShapes& shapes,
                                      const Node& conv, std::int64_t channels, int rank) {
  Epilogue e = match_epilogue(g, index, shapes, conv.outputs[0],
                              [&](const Tensor& t) { return per_channel(t, channels, rank); });
  if (e.nodes.empty()) return std::nullopt;
  return e;
}

// The Conv's bias plus the absorbed per-channel constant, as a new [M] initializer.
ValueId merged_bias(Graph& g, const Node& conv, const Tensor* bias, const Tensor& extra) {
  std::vector<float> b(static_cast<std::size_t>(extra.numel()));
  for (std::size_t c = 0; c < b.size(); ++c) b[c] = (bias ? bias->data<float>()[c] : 0.0f) + extra.data<float>()[c];
  return add_constant(g, conv.name + "_bias", Tensor::from_vector(b, {static_cast<std::int64_t>(b.size())}));
}

}  // namespace

bool fuse_conv_epilogue(Graph& g, const PassContext& ctx) {
  return rewrite_to_fixed_point(g, ctx, [&](std::size_t i, const GraphIndex& index, const StaticShapes& shapes,
                                       Rewriter& rewriter) {
    const Node& conv = g.nodes()[i];
    if (!is_onnx_op(&conv, "Conv") || conv.inputs.size() < 2) return;
    // Constant float32 weights (OIHW) pin the dtype the fused kernel computes in.
    const Tensor* w = float_constant(g, conv.inputs[1]);
    const ValueId b_id = conv.inputs.size() > 2 ? conv.inputs[2] : kNoValue;
    const Tensor* b = float_constant(g, b_id);
    if (!w || w->rank() < 3 || (b_id != kNoValue && (!b || b->numel() != w->dim(0)))) return;
    auto e = conv_epilogue(g, index, shapes, conv, w->dim(0), w->rank());
    if (!e) return;
    e->nodes.push_back(static_cast<int>(i));
    if (!rewriter.available(e->nodes)) return;
    Node fused = conv;
    fused.op_type = "FusedConv";
    fused.domain = kWpkDomain;
    fused.inputs.resize(3, kNoValue);
    if (e->bias != kNoValue) fused.inputs[2] = merged_bias(g, conv, b, *g.initializer(e->bias));
    if (e->residual != kNoValue)
      fused.inputs.push_back(e->residual);
    else if (fused.inputs[2] == kNoValue)
      fused.inputs.pop_back();
    fused.outputs = {e->output};
    fused.attributes.insert_or_assign("activation", Attribute(e->activation.name));
    fused.attributes.insert_or_assign("activation_params", Attribute(e->activation.params));
    fused.attributes.insert_or_assign("channels_last", Attribute(std::int64_t{0}));
    rewriter.replace(e->nodes, {std::move(fused)});
  });
}

}  // namespace wpk::passes
