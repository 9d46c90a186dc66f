#include "runtime/workload.hpp"

#include <algorithm>

namespace wpk {

search::Workload estimate_workload(const Node& node, const std::vector<const Tensor*>& inputs) {
  search::Workload w;
  double elements = 0;
  for (const Tensor* t : inputs)
    if (t) {
      w.bytes += static_cast<double>(t->nbytes());
      elements = std::max(elements, static_cast<double>(t->numel()));
    }
  w.bytes *= 2;
  const std::string& op = node.op_type;
  const Tensor* x = inputs.empty() ? nullptr : inputs[0];
  const Tensor* b = inputs.size() > 1 ? inputs[1] : nullptr;
  if ((op == "Conv" || op == "FusedConv") && x && b && b->rank() == 4 && x->rank() == 4) {
    // Each output pixel of each output channel takes C_in/group x kH x kW products; output
    // pixels taken as input pixels (stride 1), input channels from the weights.
    const double in_channels = static_cast<double>(b->shape()[1] * node.attr_int("group", 1));
    w.flops = 2 * static_cast<double>(x->numel()) / std::max(1.0, in_channels) * static_cast<double>(b->numel());
  } else if ((op == "MatMul" || op == "FusedMatMul" || op == "Gemm") && x && b && x->rank() >= 1 && b->rank() >= 1) {
    w.flops = 2 * static_cast<double>(x->numel()) * static_cast<double>(b->shape().back());
  } else if (op == "Attention" && x && b) {
    w.flops = 4 * static_cast<double>(x->numel()) * static_cast<double>(b->numel()) / std::max<double>(1, b->shape().back());
  } else if (op == "LayerNormalization" || op == "BatchNormalization" || op == "Softmax") {
    w.flops = 8 * elements;
  } else {
    w.flops = elements;
  }
  return w;
}

}  // namespace wpk
