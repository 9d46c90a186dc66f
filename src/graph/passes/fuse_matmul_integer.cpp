// fuse_matmul_integer: a product as dynamic quantization writes it,
//   Mul(Cast<float>(MatMulInteger(A, B, A_zero, B_zero)), Mul(A_scale, B_scale))
// becomes com.wpk MatMulIntegerToFloat(A, B, A_scale, B_scale, A_zero, B_zero)
// (graph/fused_ops.hpp): one integer product whose accumulators are scaled as they are stored,
// instead of an int32 tensor cast and multiplied in two more passes. B is a constant 8-bit
// [K, N]; A_scale one element (DynamicQuantizeLinear's scale, or known to have one element);
// B_scale and B_zero constants of one or N elements. The DynamicQuantizeLinear that makes A
// stays: the products that read one quantized input share it.
// A convolution as dynamic quantization writes it, Mul(Cast<float>(ConvInteger(X, W, X_zero,
// W_zero)), Mul(X_scale, W_scale)), becomes com.wpk ConvIntegerToFloat(X, W, X_scale, W_scale,
// X_zero, W_zero) alike, W a constant 8-bit 4-D tensor with one scale and zero point (per-channel
// ones would not broadcast along an NCHW result's channels).
// QLinearMatMul with such a B (the QOperator form) becomes the same op and a QuantizeLinear at
// its y_scale and y_zero_point: the integer product scaled in float32 and requantized, where the
// definition requantizes a double product (one code apart at most, as QLinearConv's kernels).
#include "graph/fused_ops.hpp"
#include "graph/passes/match.hpp"

namespace wpk::passes {
namespace {

bool is_8bit(DType t) { return t == DType::UInt8 || t == DType::Int8; }

// A constant with one element (of rank 0 or 1: a higher rank would broadcast the product's
// shape up) or n.
bool per_tensor_or_column(const Tensor* t, std::int64_t n) {
  return t && t->rank() <= 1 && (t->numel() == 1 || t->numel() == n);
}

// True when v is sure to hold one element, at rank 0 or 1: DynamicQuantizeLinear's scale or
// zero point, or a known shape.
bool one_element(const GraphIndex& index, const StaticShapes& shapes, ValueId v) {
  const Node* p = index.producer(v);
  if (is_onnx_op(p, "DynamicQuantizeLinear") && p->outputs[0] != v) return true;
  const DimList* d = shapes.dims(v);
  if (!d || d->size() > 1) return false;
  for (const Dim& x : *d)
    if (!x.is_static() || x.value != 1) return false;
  return true;
}

// One-element constant of rank 0 or 1 (a per-tensor scale or zero point).
bool one_element_constant(const Graph& g, ValueId v) {
  const Tensor* t = g.initializer(v);
  return t && t->numel() == 1 && t->rank() <= 1;
}

// QLinearMatMul(a, a_scale, a_zero, B, b_scale, b_zero, y_scale, y_zero) with constant 2-D B.
void fold_qlinear_matmul(Graph& g, const Node& n, int at, Rewriter& rewriter) {
  if (n.inputs.size() != 8 || n.outputs.size() != 1) return;
  for (ValueId v : n.inputs)
    if (v == kNoValue) return;
  const Tensor* b = g.initializer(n.inputs[3]);
  if (!b || !is_8bit(b->dtype()) || b->rank() != 2) return;
  const DimList* a_dims = g.value(n.inputs[0]).dims ? &*g.value(n.inputs[0]).dims : nullptr;
  if (!a_dims || a_dims->size() < 2) return;  // a 1-D A drops an axis MatMulIntegerToFloat keeps
  const std::int64_t cols = b->dim(1);
  const Tensor* b_zero = g.initializer(n.inputs[5]);
  if (!per_tensor_or_column(float_constant(g, n.inputs[4]), cols) || !per_tensor_or_column(b_zero, cols) ||
      b_zero->dtype() != b->dtype())
    return;
  for (std::size_t i : {1, 2, 6, 7})
    if (!one_element_constant(g, n.inputs[i])) return;
  // float32 scales only (opset 21 allows 16-bit ones; those stay on the op as written).
  if (!float_constant(g, n.inputs[1]) || !float_constant(g, n.inputs[6]) || !rewriter.available({at})) return;
  const ValueInfo& out = g.value(n.outputs[0]);
  const ValueId product = g.add_value({unique_name(g, out.name + "_product"), DType::Float32, out.dims});
  Node fused;
  fused.op_type = "MatMulIntegerToFloat";
  fused.domain = kWpkDomain;
  fused.name = n.name;
  fused.inputs = {n.inputs[0], n.inputs[3], n.inputs[1], n.inputs[4], n.inputs[2], n.inputs[5]};
  fused.outputs = {product};
  Node q;
  q.op_type = "QuantizeLinear";
  q.name = n.name + "_requantize";
  q.inputs = {product, n.inputs[6], n.inputs[7]};
  q.outputs = {n.outputs[0]};
  rewriter.replace({at}, {std::move(fused), std::move(q)});
}

}  // namespace

bool fuse_matmul_integer(Graph& g, const PassContext& ctx) {
  return rewrite_to_fixed_point(g, ctx, [&](std::size_t i, const GraphIndex& index, const StaticShapes& shapes,
                                       Rewriter& rewriter) {
    if (is_onnx_op(&g.nodes()[i], "QLinearMatMul")) return fold_qlinear_matmul(g, g.nodes()[i], static_cast<int>(i), rewriter);
    const Node& mmi = g.nodes()[i];
    const bool conv = is_onnx_op(&mmi, "ConvInteger");
    if ((!conv && !is_onnx_op(&mmi, "MatMulInteger")) || mmi.inputs.size() != 4 || mmi.outputs.size() != 1) return;
    for (ValueId v : mmi.inputs)
      if (v == kNoValue) return;
    const Tensor* b = g.initializer(mmi.inputs[1]);
    if (!b || !is_8bit(b->dtype()) || b->rank() != (conv ? 4 : 2)) return;
    const std::int64_t n = conv ? 1 : b->dim(1);
    const Node* cast = index.sole_reader(mmi.outputs[0]);
    if (!is_onnx_op(cast, "Cast") || cast->attr_int("to", 0) != static_cast<std::int64_t>(DType::Float32)) return;
    const Node* mul = index.sole_reader(cast->outputs[0]);
    if (!is_onnx_op(mul, "Mul") || mul->inputs.size() != 2) return;
    const Node* scales = index.producer(other_input(*mul, cast->outputs[0]));
    if (!is_onnx_op(scales, "Mul") || scales->inputs.size() != 2) return;
    // Mul(A_scale, B_scale) in either order, B_scale the float constant.
    const int bi = float_constant(g, scales->inputs[1]) ? 1 : 0;
    const ValueId a_scale = scales->inputs[1 - bi], b_scale = scales->inputs[bi];
    if (!per_tensor_or_column(float_constant(g, b_scale), n) || float_constant(g, a_scale)) return;
    if (!one_element(index, shapes, a_scale) || !one_element(index, shapes, mmi.inputs[2])) return;
    const Tensor* b_zero = g.initializer(mmi.inputs[3]);
    if (!per_tensor_or_column(b_zero, n) || b_zero->dtype() != b->dtype()) return;
    std::vector<int> matched = {static_cast<int>(i), index.sole_reader_index(mmi.outputs[0]),
                                index.sole_reader_index(cast->outputs[0])};
    // The scales' product goes too when this product is its only reader.
    if (index.sole_reader(scales->outputs[0]) == mul) matched.push_back(index.producer_index(scales->outputs[0]));
    if (!rewriter.available(matched)) return;
    Node fused;
    fused.op_type = conv ? "ConvIntegerToFloat" : "MatMulIntegerToFloat";
    fused.domain = kWpkDomain;
    fused.name = mmi.name;
    if (conv) fused.attributes = mmi.attributes;  // the convolution's window
    fused.inputs = {mmi.inputs[0], mmi.inputs[1], a_scale, b_scale, mmi.inputs[2], mmi.inputs[3]};
    fused.outputs = {mul->outputs[0]};
    rewriter.replace(matched, {std::move(fused)});
  });
}

}  // namespace wpk::passes
