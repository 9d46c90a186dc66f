// A depthwise NHWC FusedConv whose output only a pointwise one reads (MobileNet's inverted
// residual blocks: expand, depthwise 3x3, project) becomes one com.wpk DepthwisePointwiseConv
// (graph/fused_ops.hpp). Forming it decides nothing about speed: its candidates include kernels
// that run the two convs one after the other as before, beside one that computes the depthwise
// output tile by tile inside the pointwise product, and the cost model or a measurement picks.
#include "graph/group_parts.hpp"
#include "graph/fused_ops.hpp"
#include "graph/passes/match.hpp"

namespace wpk::passes {
namespace {

bool nhwc_fused_conv(const Node& n) {
  return n.domain == kWpkDomain && n.op_type == "FusedConv" && n.attr_int("channels_last", 0) == 1 &&
         n.attr_string("auto_pad", "NOTSET") == "NOTSET" && n.inputs.size() >= 3 && n.inputs[2] != kNoValue;
}

// float32 weights of these dims, held as a constant.
bool constant_weights(const Graph& g, ValueId v, const std::vector<std::int64_t>& dims) {
  const Tensor* t = g.initializer(v);
  if (!t || t->dtype() != DType::Float32 || t->rank() != static_cast<std::int64_t>(dims.size())) return false;
  for (std::size_t d = 0; d < dims.size(); ++d)
    if (dims[d] >= 0 && t->shape()[d] != dims[d]) return false;
  return true;
}

}  // namespace

bool fuse_depthwise_pointwise(Graph& g, const PassContext& ctx) {
  return rewrite_to_fixed_point(g, ctx, [&](std::size_t i, const GraphIndex& index, const StaticShapes& shapes, Rewriter& rewriter) {
    const Node& dw = g.nodes()[i];
    if (!nhwc_fused_conv(dw) || dw.inputs.size() > 3 || dw.outputs.size() != 1) return;
    const DimList* x = shapes.dims(dw.inputs[0]);
    if (!x || x->size() != 4 || !(*x)[1].is_static() || !(*x)[2].is_static() || !(*x)[3].is_static()) return;
    const std::int64_t c = (*x)[3].value;
    if (c < 1 || dw.attr_int("group", 1) != c || !constant_weights(g, dw.inputs[1], {c, 1, -1, -1}) ||
        !constant_weights(g, dw.inputs[2], {c}))
      return;
    const int r = index.sole_reader_index(dw.outputs[0]);
    if (r < 0) return;
    const Node& pw = g.nodes()[r];
    if (!nhwc_fused_conv(pw) || pw.inputs[0] != dw.outputs[0] || !pointwise_conv_attributes(pw) ||
        !constant_weights(g, pw.inputs[1], {-1, c, 1, 1}))
      return;
    const std::int64_t o = g.initializer(pw.inputs[1])->shape()[0];
    if (!constant_weights(g, pw.inputs[2], {o})) return;
    const std::vector<int> matched{static_cast<int>(i), r};
    if (!rewriter.available(matched)) return;
    Node pair = dw;
    pair.name = pw.name;
    pair.op_type = "DepthwisePointwiseConv";
    pair.inputs = {dw.inputs[0], dw.inputs[1], dw.inputs[2], pw.inputs[1], pw.inputs[2]};
    if (pw.inputs.size() > 3 && pw.inputs[3] != kNoValue) pair.inputs.push_back(pw.inputs[3]);
    pair.outputs = pw.outputs;
    if (const Attribute* a = pw.find_attr("activation")) pair.attributes.insert_or_assign("pointwise_activation", *a);
    if (const Attribute* a = pw.find_attr("activation_params")) pair.attributes.insert_or_assign("pointwise_activation_params", *a);
    rewriter.replace(matched, {std::move(pair)});
  });
}

}  // namespace wpk::passes
