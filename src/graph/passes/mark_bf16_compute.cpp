// mark_bf16_compute (passes/pass.hpp): the nodes whose kernels may compute in bfloat16 under
// SessionOptions::precision = BF16: the float32 convolutions and matrix products with constant
// weights, where the bf16 dot-product instructions double the work per instruction. Everything else (norms,
// softmax, attention, elementwise) keeps float32.
#include "graph/fused_ops.hpp"
#include "graph/passes/pass.hpp"

namespace wpk::passes {

void clear_compute_precision(Graph& g) {
  for (Node& n : g.mutable_nodes()) n.attributes.erase("compute_precision");
}

int mark_bf16_compute(Graph& g) {
  int marked = 0;
  for (Node& n : g.mutable_nodes()) {
    const bool onnx = n.domain.empty() || n.domain == "ai.onnx";
    const bool wpk_op = n.domain == kWpkDomain;
    const bool product = (onnx && (n.op_type == "Conv" || n.op_type == "MatMul" || n.op_type == "Gemm")) ||
                         (wpk_op && (n.op_type == "FusedConv" || n.op_type == "FusedMatMul" ||
                                     n.op_type == "DepthwisePointwiseConv" || n.op_type == "ScaledPointwiseConv"));
    // Constant weights (input 1; the scaled conv's input 2): products of two activations
    // (attention's) stay float32.
    const std::size_t weights = wpk_op && n.op_type == "ScaledPointwiseConv" ? 2 : 1;
    if (!product || n.inputs.size() <= weights || n.outputs.empty() || !g.initializer(n.inputs[weights]) ||
        g.value(n.outputs[0]).dtype != DType::Float32)
      continue;
    n.attributes.insert_or_assign("compute_precision", Attribute(std::string("bf16")));
    ++marked;
  }
  return marked;
}

}  // namespace wpk::passes
