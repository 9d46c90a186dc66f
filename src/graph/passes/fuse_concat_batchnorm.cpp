// Concat along channels -> inference BatchNormalization (+ Relu, as FusedBatchNorm) becomes one
// com.wpk ConcatBatchNorm (graph/fused_ops.hpp), which reads every concat input once and writes
// the normalised result straight into its slice of the output: the concatenated tensor is never
// built. DenseNet's pre-activation layers are this pattern (each layer concatenates all earlier
// features and normalises them), so its O(layers^2) concat copies disappear.
//
// A channel slice of an NHWC tensor is strided, and oneDNN 2.6 runs convolutions into strided
// destinations only in its reference implementation, so the producers cannot write the concat
// output themselves; the reader that normalises it anyway can. Runs after the layout pass: the
// channel axis is 3 for channels_last = 1 and 1 otherwise.
#include "graph/fused_ops.hpp"
#include "graph/passes/match.hpp"

namespace wpk::passes {
namespace {

// An inference BatchNorm whose parameters are float32.
bool is_float_batchnorm(const Node& n, const Graph& g) {
  if (!is_inference_batchnorm(n, g)) return false;
  for (std::size_t i = 1; i < 5; ++i)
    if (!float_constant(g, n.inputs[i])) return false;
  return true;
}

bool is_float_image(const Graph& g, const StaticShapes& shapes, ValueId v) {
  return g.value(v).dtype == DType::Float32 && shapes.rank(v) == 4;
}

}  // namespace

bool fuse_concat_batchnorm(Graph& g, const PassContext& ctx) {
  return rewrite_to_fixed_point(g, ctx, [&](std::size_t i, const GraphIndex& index, const StaticShapes& shapes, Rewriter& rewriter) {
    const Node& concat = g.nodes()[i];
    if (!is_onnx_op(&concat, "Concat") || concat.inputs.empty() || concat.outputs.size() != 1) return;
    const int r = index.sole_reader_index(concat.outputs[0]);
    if (r < 0) return;
    const Node& bn = g.nodes()[r];
    if (!is_float_batchnorm(bn, g) || bn.inputs[0] != concat.outputs[0]) return;
    const std::int64_t channels_last = bn.attr_int("channels_last", 0);
    const std::int64_t axis = concat.attr_int("axis", 0);
    if (channels_last != 0 && channels_last != 1) return;
    if (axis != (channels_last ? 3 : 1) && axis != (channels_last ? -1 : -3)) return;
    for (ValueId v : concat.inputs)
      if (v == kNoValue || g.is_initializer(v) || !is_float_image(g, shapes, v)) return;
    if (!is_float_image(g, shapes, concat.outputs[0])) return;
    const std::vector<int> matched{static_cast<int>(i), r};
    if (!rewriter.available(matched)) return;
    Node fused;
    fused.op_type = "ConcatBatchNorm";
    fused.domain = kWpkDomain;
    fused.name = bn.name.empty() ? concat.name : bn.name;
    fused.inputs = {bn.inputs[1], bn.inputs[2], bn.inputs[3], bn.inputs[4]};
    fused.inputs.insert(fused.inputs.end(), concat.inputs.begin(), concat.inputs.end());
    fused.outputs = {bn.outputs[0]};
    fused.attributes.insert_or_assign("epsilon", Attribute(bn.attr_float("epsilon", 1e-5f)));
    fused.attributes.insert_or_assign("channels_last", Attribute(channels_last));
    fused.attributes.insert_or_assign("activation", Attribute(bn.attr_string("activation", "")));
    rewriter.replace(matched, {std::move(fused)});
  });
}

}  // namespace wpk::passes
