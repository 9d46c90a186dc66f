// mark_bf16_compute (passes/pass.hpp): the nodes whose kernels may compute in bfloat16 under
// SessionOptions::precision = BF16: the float32 convolutions and matrix products, where the
// bf16 dot-product instructions double the work per instruction. Everything else (norms,
// softmax, attention, elementwise) keeps float32.
#include "graph/fused_ops.hpp"
#include "graph/passes/pass.hpp"

namespace wpk::passes {

int mark_bf16_compute(Graph& g) {
  int marked = 0;
  for (Node& n : g.mutable_nodes()) {
    const bool onnx = n.domain.empty() || n.domain == "ai.onnx";
    const bool wpk_op = n.domain == kWpkDomain;
    const bool product = (onnx && (n.op_type == "Conv" || n.op_type == "MatMul" || n.op_type == "Gemm")) ||
                         (wpk_op && (n.op_type == "FusedConv" || n.op_type == "FusedMatMul"));
    if (!product || n.inputs.empty() || n.outputs.empty() || g.value(n.outputs[0]).dtype != DType::Float32) continue;
    n.attributes.insert_or_assign("compute_precision", Attribute(std::string("bf16")));
    ++marked;
  }
  return marked;
}

}  // namespace wpk::passes
