#include "backends/op_support.hpp"

#include "graph/fused_ops.hpp"

namespace wpk {
namespace {

bool is_8bit_type(DType t) { return t == DType::UInt8 || t == DType::Int8; }

// QLinearConv's inputs, then QLinearConvAdd's (graph/fused_ops.hpp).
enum QLinearConvInput : std::size_t {
  X = 0, XScale, XZero, W, WScale, WZero, YScale, YZero, Bias,
  R = kQLinearConvAddResidual, RScale, RZero, SumScale, SumZero
};

}  // namespace

std::string qlinear_conv_params_unsupported(const Node& node, const Graph& graph) {
  if (node.inputs.size() < 8) return "missing inputs";
  const DType x = graph.value(node.inputs[X]).dtype;
  if (!is_8bit_type(x)) return "input is not uint8 or int8";
  const Tensor* w = constant_input(node, graph, W);
  if (!w || w->dtype() != DType::Int8 || w->rank() != 4) return "weights are not a constant 4-D int8 tensor";
  for (std::size_t i : {XScale, YScale}) {
    const Tensor* s = constant_input(node, graph, i);
    if (!s || s->dtype() != DType::Float32 || s->numel() != 1) return "scales are not constant float32 scalars";
  }
  const Tensor* w_scale = constant_input(node, graph, WScale);
  if (!w_scale || w_scale->dtype() != DType::Float32 || (w_scale->numel() != 1 && w_scale->numel() != w->shape()[0]))
    return "weight scale is not a constant float32 scalar or [C_out]";
  const Tensor* x_zero = constant_input(node, graph, XZero);
  const Tensor* y_zero = constant_input(node, graph, YZero);
  if (!x_zero || x_zero->numel() != 1 || x_zero->dtype() != x || !y_zero || y_zero->numel() != 1 ||
      !is_8bit_type(y_zero->dtype()))
    return "zero points are not constant 8-bit scalars";
  const Tensor* w_zero = constant_input(node, graph, WZero);
  if (!w_zero || w_zero->dtype() != DType::Int8) return "weight zero point is not a constant int8 tensor";
  for (std::int64_t i = 0; i < w_zero->numel(); ++i)
    if (w_zero->data<std::int8_t>()[i] != 0) return "weight zero point is not 0";
  if (node.inputs.size() > Bias && node.inputs[Bias] != kNoValue) {
    const Tensor* b = constant_input(node, graph, Bias);
    if (!b || b->dtype() != DType::Int32 || b->numel() != w->shape()[0]) return "bias is not a constant int32 [C_out]";
  }
  if (fused_residual_input(node) == static_cast<int>(R)) {
    if (node.inputs.size() != SumZero + 1) return "needs 14 inputs";
    for (std::size_t i : {RScale, SumScale}) {
      const Tensor* s = constant_input(node, graph, i);
      if (!s || s->dtype() != DType::Float32 || s->numel() != 1) return "scales are not constant float32 scalars";
    }
    const Tensor* sum_zero = constant_input(node, graph, SumZero);
    const Tensor* r_zero = constant_input(node, graph, RZero);
    if (!sum_zero || sum_zero->numel() != 1 || !is_8bit_type(sum_zero->dtype()) || !r_zero || r_zero->numel() != 1 ||
        r_zero->dtype() != sum_zero->dtype() || graph.value(node.inputs[R]).dtype != sum_zero->dtype())
      return "the residual and the sum are not of one 8-bit dtype with constant scalar zero points";
  }
  return "";
}

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

void check_integer_product_input(const KernelContext& ctx, DType a_type, std::int64_t k) {
  const Tensor& a = ctx.input(0);
  const Tensor& as = ctx.input(2);
  const Tensor& az = ctx.input(4);
  if (a.dtype() != a_type || a.rank() < 1 || a.shape().back() != k)
    ctx.fail(ErrorCode::InvalidArgument, std::string("A must be ") + dtype_name(a_type) + " [..., " + std::to_string(k) +
                                             "], got " + dtype_name(a.dtype()) + " " + shape_to_string(a.shape()));
  if (as.dtype() != DType::Float32 || as.numel() != 1 || az.dtype() != a_type || az.numel() != 1)
    ctx.fail(ErrorCode::InvalidArgument, "A_scale must be one float32 and A_zero one element of A's dtype");
}

}  // namespace wpk
