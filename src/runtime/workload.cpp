#include "runtime/workload.hpp"

#include <algorithm>

namespace wpk {
namespace {

double elements(const Shape& s) {
  double n = 1;
  for (std::int64_t d : s) n *= static_cast<double>(d);
  return n;
}

}  // namespace

std::optional<InputShapes> shapes_with_symbolic_dims_as(const Node& node, const Graph& graph, std::int64_t size) {
  InputShapes out;
  bool symbolic = false;
  for (ValueId v : node.inputs) {
    if (v == kNoValue) {
      out.push_back(std::nullopt);
      continue;
    }
    if (const Tensor* t = graph.initializer(v)) {
      out.push_back(t->shape());
      continue;
    }
    const ValueInfo& info = graph.value(v);
    if (!info.dims) {
      out.push_back(std::nullopt);
      continue;
    }
    Shape s;
    bool known = true;
    for (const Dim& d : *info.dims) {
      if (d.is_static()) {
        s.push_back(d.value);
      } else if (!d.symbol.empty()) {
        s.push_back(size);
        symbolic = true;
      } else {
        known = false;
      }
    }
    out.push_back(known ? std::optional<Shape>(s) : std::nullopt);
  }
  if (!symbolic && size != 1) return std::nullopt;
  return out;
}

InputShapes run_input_shapes(const Node& node, const Graph& graph, const std::vector<const Tensor*>& inputs) {
  InputShapes out = *shapes_with_symbolic_dims_as(node, graph, 1);
  for (std::size_t i = 0; i < out.size() && i < inputs.size(); ++i)
    if (inputs[i]) out[i] = inputs[i]->shape();
  return out;
}

search::Workload estimate_workload(const Node& node, const InputShapes& shapes) {
  search::Workload w;
  double largest = 0;
  for (const auto& s : shapes)
    if (s) {
      w.bytes += 4 * elements(*s);
      largest = std::max(largest, elements(*s));
    }
  w.bytes += 4 * largest;
  const std::string& op = node.op_type;
  const Shape* x = !shapes.empty() && shapes[0] ? &*shapes[0] : nullptr;
  // The quantized conv's weights are its input 3.
  const bool quantized_conv = op == "QLinearConv" || op == "QLinearConvAdd";
  const std::size_t weights = quantized_conv ? 3 : 1;
  const Shape* b = shapes.size() > weights && shapes[weights] ? &*shapes[weights] : nullptr;
  if ((op == "Conv" || op == "FusedConv" || op == "ConvIntegerToFloat" || quantized_conv) && x && b && b->size() == 4 &&
      x->size() == 4) {
    // Each output pixel of each output channel takes C_in/group x kH x kW products; output
    // pixels taken as input pixels over the strides.
    const double in_channels = static_cast<double>((*b)[1] * node.attr_int("group", 1));
    double stride = 1;
    for (std::int64_t s : node.attr_ints("strides", {1, 1})) stride *= static_cast<double>(std::max<std::int64_t>(1, s));
    w.flops = 2 * elements(*x) / std::max(1.0, in_channels) * elements(*b) / stride;
  } else if (op == "DepthwisePointwiseConv" && x && b && x->size() == 4 && b->size() == 4 && shapes.size() > 3 && shapes[3] &&
             !shapes[3]->empty()) {
    // The depthwise output's elements take kH x kW products each, then C_out each.
    double stride = 1;
    for (std::int64_t s : node.attr_ints("strides", {1, 1})) stride *= static_cast<double>(std::max<std::int64_t>(1, s));
    const double between = elements(*x) / stride;
    w.flops = 2 * between * static_cast<double>((*b)[2] * (*b)[3] + shapes[3]->front());
  } else if (op == "ScaledPointwiseConv" && x && shapes.size() > 2 && shapes[2] && !shapes[2]->empty()) {
    // A product per input element (the scale), then C_out products each.
    w.flops = elements(*x) * static_cast<double>(1 + 2 * shapes[2]->front());
  } else if ((op == "MatMul" || op == "FusedMatMul" || op == "Gemm" || op == "MatMulIntegerToFloat") && x && b &&
             !x->empty() && !b->empty()) {
    const bool trans_b = op == "Gemm" && node.attr_int("transB", 0) == 1 && b->size() == 2;
    w.flops = 2 * elements(*x) * static_cast<double>(trans_b ? b->front() : b->back());
  } else if (op == "Attention" && x && b && !b->empty()) {
    w.flops = 4 * elements(*x) * elements(*b) / std::max<double>(1, static_cast<double>(b->back()));
  } else if (op == "ElementwiseChain") {
    w.flops = largest * static_cast<double>(std::max<std::size_t>(1, node.attr_ints("operands").size() / 2));
  } else if (op == "LayerNormalization" || op == "BatchNormalization" || op == "Softmax") {
    w.flops = 8 * largest;
  } else {
    w.flops = largest;
  }
  return w;
}

}  // namespace wpk
