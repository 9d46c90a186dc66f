#include "backends/op_support.hpp"

namespace wpk {

std::string constant_layernorm_unsupported(const Node& node, const Graph& graph) {
  const ValueInfo& x = graph.value(node.inputs[0]);
  if (x.dtype != DType::Float32) return "input is not float32";
  if (node.domain.empty() && graph.opset() < 17) return "LayerNormalization is an opset-17 op";
  const std::int64_t axis = node.attr_int("axis", -1);
  if (axis != -1 && (!x.dims || axis != static_cast<std::int64_t>(x.dims->size()) - 1)) return "only the last axis";
  for (std::size_t o = 1; o < node.outputs.size(); ++o)
    if (node.outputs[o] != kNoValue) return "Mean/InvStdDev outputs";
  if (node.inputs.size() < 2 || node.inputs[1] == kNoValue) return "needs a scale";
  for (std::size_t i = 1; i < node.inputs.size() && i < 3; ++i) {
    if (node.inputs[i] == kNoValue) continue;
    const Tensor* t = graph.initializer(node.inputs[i]);
    if (!t || t->dtype() != DType::Float32 || t->rank() != 1) return "scale and bias must be constant float32 vectors";
  }
  // Both are read for every column the scale has (the reference reports other lengths).
  if (node.inputs.size() > 2 && node.inputs[2] != kNoValue &&
      graph.initializer(node.inputs[2])->numel() != graph.initializer(node.inputs[1])->numel())
    return "bias and scale differ in length";
  return "";
}

const Tensor& layernorm_input(const KernelContext& ctx, std::int64_t cols) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::Float32)
    ctx.fail(ErrorCode::InvalidArgument, std::string("input must be float32, got ") + dtype_name(x.dtype()));
  if (x.rank() < 1 || x.shape().back() != cols)
    ctx.fail(ErrorCode::InvalidArgument,
             "input " + shape_to_string(x.shape()) + " does not end in the scale's size " + std::to_string(cols));
  return x;
}

std::string batchnorm_params_unsupported(const Node& node, const Graph& graph, std::size_t first) {
  const std::string act = node.attr_string("activation", "");
  if (!act.empty() && act != "Relu") return "activation " + act;
  std::int64_t c = -1;
  for (std::size_t i = first; i < first + 4; ++i) {
    const Tensor* t = graph.initializer(node.inputs[i]);
    if (!t || t->dtype() != DType::Float32 || t->rank() != 1 || (c >= 0 && t->numel() != c))
      return "parameters are not constant float32 vectors of one length";
    c = t->numel();
  }
  return "";
}

}  // namespace wpk
