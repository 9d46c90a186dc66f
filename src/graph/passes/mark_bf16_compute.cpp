// mark_bf16_compute (passes/pass.hpp): the nodes whose kernels may compute in bfloat16 under
// SessionOptions::precision = BF16: the float32 convolutions and matrix products with constant
// weights, where the bf16 dot-product instructions double the work per instruction. Everything else (norms,
// softmax, attention, elementwise) keeps float32. keep_bf16_between_products then makes the values
// that pass only between such nodes bfloat16, so they are rounded once, where they are written.
#include <vector>

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

int keep_bf16_between_products(Graph& g, const std::function<bool(const Node&)>& takes_bf16) {
  const std::vector<Node>& nodes = g.nodes();
  auto marked = [&](const Node& n) { return n.attr_string("compute_precision", "") == "bf16" && takes_bf16(n); };
  // Per value: whether every reader is a marked node reading it as input 0, and how many read it.
  std::vector<bool> only_products(g.values().size(), true);
  std::vector<int> readers(g.values().size(), 0);
  for (const Node& n : nodes)
    for (std::size_t i = 0; i < n.inputs.size(); ++i) {
      const ValueId v = n.inputs[i];
      if (v == kNoValue) continue;
      ++readers[static_cast<std::size_t>(v)];
      if (i != 0 || !marked(n)) only_products[static_cast<std::size_t>(v)] = false;
    }
  for (ValueId v : g.outputs()) only_products[static_cast<std::size_t>(v)] = false;
  int kept = 0;
  for (const Node& n : nodes) {
    // A residual stays float32: it is added to the sums in full precision.
    if (!marked(n) || has_fused_residual(n) || n.outputs.empty() || n.outputs[0] == kNoValue) continue;
    const ValueId y = n.outputs[0];
    const auto at = static_cast<std::size_t>(y);
    if (readers[at] == 0 || !only_products[at] || g.value(y).dtype != DType::Float32) continue;
    g.mutable_value(y).dtype = DType::BFloat16;
    ++kept;
  }
  return kept;
}

}  // namespace wpk::passes
