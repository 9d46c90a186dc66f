// BatchNormalization -> Relu, where the BatchNorm could not fold into a convolution before it
// (DenseNet's pre-activation layers: Concat -> BN -> ReLU -> Conv), becomes one com.wpk
// FusedBatchNorm with activation "Relu" (graph/fused_ops.hpp): one pass over the activations
// instead of two.
#include "graph/fused_ops.hpp"
#include "graph/passes/match.hpp"

namespace wpk::passes {

bool fuse_batchnorm_relu(Graph& g, const PassContext& ctx) {
  return rewrite_to_fixed_point(g, ctx, [&](std::size_t i, const GraphIndex& index, const StaticShapes&, Rewriter& rewriter) {
    const Node& bn = g.nodes()[i];
    if (!is_onnx_op(&bn, "BatchNormalization") || !is_inference_batchnorm(bn, g)) return;
    const int r = index.sole_reader_index(bn.outputs[0]);
    if (r < 0 || !is_onnx_op(&g.nodes()[r], "Relu")) return;
    const std::vector<int> matched{static_cast<int>(i), r};
    if (!rewriter.available(matched)) return;
    Node fused = bn;
    fused.op_type = "FusedBatchNorm";
    fused.domain = kWpkDomain;
    fused.outputs = {g.nodes()[r].outputs[0]};
    fused.attributes.insert_or_assign("activation", Attribute("Relu"));
    rewriter.replace(matched, {std::move(fused)});
  });
}

}  // namespace wpk::passes
