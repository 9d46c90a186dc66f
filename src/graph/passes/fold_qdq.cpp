// fold_qdq: quantized models in the QDQ form (what quantizers write: DequantizeLinear before and
// QuantizeLinear after each float op) become integer ops where the values between them can stay
// 8-bit:
//   Q([Relu|Clip](Conv(DQ(x), DQ(w), DQ(b))))  ->  QLinearConv(x, w, b)  (w, b constant; b at x_scale * w_scale)
//   Q(MaxPool(DQ(x)))             ->  MaxPool(x)                (Q with DQ's own scale and zero point)
//   Q([Relu|Clip](Add(DQ(a), DQ(b))))  ->  com.wpk QLinearAdd(a, b)  (a and b of one shape)
//   MatMul(DQ(a), DQ(B)), Gemm(DQ(a), DQ(B), C)  ->  com.wpk MatMulIntegerToFloat(a, B) [+ C]
//                                 (B constant, per tensor or per output column; a float result:
//                                 the integer product scaled once, where the float one rounds
//                                 each term)
// A Relu between the op and its Q folds too when the Q's zero point is its type's lowest code
// (what a quantizer gives a Relu's output): saturating there is the Relu; so does a Clip(0, max)
// whose max lies past the highest code's value. QLinearConv
// requantizes once, as Q(Conv(...)) does; MaxPool commutes with a monotonic DQ, and
// its Q then gives back the very codes. The DQs stay for any other reader (dead code goes later);
// a DQ nothing absorbs runs in float as written. Runs before constant folding, which would turn
// DQ(w) into float weights.
#include <cmath>
#include <cstring>
#include <limits>

#include "graph/fused_ops.hpp"
#include "graph/passes/match.hpp"

namespace wpk::passes {
namespace {

bool is_8bit(DType t) { return t == DType::UInt8 || t == DType::Int8; }

// A DequantizeLinear writing v, and its input, scale and zero point.
struct Dequantize {
  ValueId q = kNoValue, scale = kNoValue, zero = kNoValue;
  std::int64_t axis = 1;
};

std::optional<Dequantize> dequantize_of(const GraphIndex& index, ValueId v) {
  const Node* n = index.producer(v);
  if (!is_onnx_op(n, "DequantizeLinear") || n->inputs.size() < 3 || n->inputs[1] == kNoValue || n->inputs[2] == kNoValue)
    return std::nullopt;
  if (n->attr_int("block_size", 0) != 0) return std::nullopt;
  return Dequantize{n->inputs[0], n->inputs[1], n->inputs[2], n->attr_int("axis", 1)};
}

// One-element float32 scale / 8-bit zero point initializers.
const Tensor* scalar_scale(const Graph& g, ValueId v) {
  const Tensor* t = g.initializer(v);
  return t && t->dtype() == DType::Float32 && t->numel() == 1 && std::isfinite(t->data<float>()[0]) &&
                 t->data<float>()[0] > 0
             ? t
             : nullptr;
}
const Tensor* scalar_zero(const Graph& g, ValueId v) {
  const Tensor* t = g.initializer(v);
  return t && is_8bit(t->dtype()) && t->numel() == 1 ? t : nullptr;
}

// True when two quantization parameter values hold the same single number of the same dtype.
bool same_constant(const Graph& g, ValueId a, ValueId b) {
  if (a == b) return true;
  const Tensor *ta = g.initializer(a), *tb = g.initializer(b);
  return ta && tb && ta->dtype() == tb->dtype() && ta->numel() == 1 && tb->numel() == 1 &&
         std::memcmp(ta->raw(), tb->raw(), dtype_size(ta->dtype())) == 0;
}

// The QuantizeLinear that is v's only reader (v not a graph output), with scalar parameters.
const Node* sole_quantize(const Graph& g, const GraphIndex& index, ValueId v) {
  const Node* q = index.sole_reader(v);
  if (!is_onnx_op(q, "QuantizeLinear") || q->inputs.size() < 3 || q->inputs[0] != v) return nullptr;
  if (q->attr_int("block_size", 0) != 0 || q->attr_int("saturate", 1) != 1 || q->has_attr("output_dtype"))
    return nullptr;
  if (!scalar_scale(g, q->inputs[1]) || !scalar_zero(g, q->inputs[2])) return nullptr;
  return q;
}

// An initializer's one float, or a Constant node's: this pass runs before constant folding turns
// those into initializers.
std::optional<float> constant_float(const Graph& g, const GraphIndex& index, ValueId v) {
  const Tensor* t = g.initializer(v);
  const Node* n = index.producer(v);
  if (!t && is_onnx_op(n, "Constant") && n->has_attr("value") && n->attributes.at("value").kind() == Attribute::Kind::Tensor)
    t = &n->attributes.at("value").t();
  if (!t || t->dtype() != DType::Float32 || t->numel() != 1) return std::nullopt;
  return t->data<float>()[0];
}

// Clip's [min, max] when known at load (attributes before opset 11, inputs after).
std::optional<std::pair<float, float>> constant_clip_bounds(const Graph& g, const GraphIndex& index, const Node& clip) {
  float lo = std::numeric_limits<float>::lowest(), hi = std::numeric_limits<float>::max();
  if (g.opset() < 11) return std::make_pair(clip.attr_float("min", lo), clip.attr_float("max", hi));
  for (std::size_t i = 1; i < clip.inputs.size() && i < 3; ++i) {
    if (clip.inputs[i] == kNoValue) continue;
    const auto v = constant_float(g, index, clip.inputs[i]);
    if (!v) return std::nullopt;
    (i == 1 ? lo : hi) = *v;
  }
  return std::make_pair(lo, hi);
}

// The Q that ends an op's group: the sole reader of its output v, or of a Relu or Clip that is
// v's sole reader when saturating to that Q's codes clips as it does. Fills `matched` with their indices.
const Node* group_end(const Graph& g, const GraphIndex& index, ValueId v, std::vector<int>& matched) {
  if (const Node* q = sole_quantize(g, index, v)) {
    matched.push_back(index.sole_reader_index(v));
    return q;
  }
  const Node* act = index.sole_reader(v);
  const bool relu = is_onnx_op(act, "Relu"), clip = is_onnx_op(act, "Clip");
  if ((!relu && !clip) || act->outputs.size() != 1) return nullptr;
  const Node* q = sole_quantize(g, index, act->outputs[0]);
  if (!q) return nullptr;
  const Tensor& z = *g.initializer(q->inputs[2]);
  const bool u8 = z.dtype() == DType::UInt8;
  const bool lowest = u8 ? z.data<std::uint8_t>()[0] == 0 : z.data<std::int8_t>()[0] == -128;
  if (!lowest) return nullptr;
  if (clip) {
    // Clip(0, max) when the codes saturate below max: max rounds to the highest code.
    const auto bounds = constant_clip_bounds(g, index, *act);
    const float scale = g.initializer(q->inputs[1])->data<float>()[0];
    // Past 254.5, not at it: Q(254.5 steps) rounds to even, 254, where saturating gives 255.
    if (!bounds || bounds->first != 0.0f || !(bounds->second / scale > 254.5f)) return nullptr;
  }
  matched.push_back(index.sole_reader_index(v));
  matched.push_back(index.sole_reader_index(act->outputs[0]));
  return q;
}

// Conv's weights DQ(w): constant int8 [C_out, ...] with scale and zero point per tensor or per
// output channel (axis 0).
bool constant_weights(const Graph& g, const Dequantize& w) {
  const Tensor* q = g.initializer(w.q);
  const Tensor* s = g.initializer(w.scale);
  const Tensor* z = g.initializer(w.zero);
  if (!q || !s || !z || !is_8bit(q->dtype()) || q->rank() < 3 || s->dtype() != DType::Float32 || z->dtype() != q->dtype())
    return false;
  if (s->numel() == 1) return z->numel() == 1;
  const std::int64_t axis = w.axis < 0 ? w.axis + q->rank() : w.axis;
  return axis == 0 && s->rank() == 1 && s->numel() == q->dim(0) && z->shape() == s->shape();
}

// Conv's bias DQ(b): constant int32 [C_out], zero point 0, scale x_scale * w_scale per channel
// (as QLinearConv reads an int32 bias), to float32 rounding.
bool bias_matches(const Graph& g, const Dequantize& b, float x_scale, const Tensor& w_scale, std::int64_t channels) {
  const Tensor* q = g.initializer(b.q);
  const Tensor* s = g.initializer(b.scale);
  const Tensor* z = g.initializer(b.zero);
  if (!q || !s || !z || q->dtype() != DType::Int32 || q->numel() != channels || s->dtype() != DType::Float32 ||
      z->dtype() != DType::Int32 || (s->numel() != 1 && s->numel() != channels))
    return false;
  for (std::int64_t i = 0; i < z->numel(); ++i)
    if (z->data<std::int32_t>()[i] != 0) return false;
  for (std::int64_t c = 0; c < channels; ++c) {
    const float want = x_scale * w_scale.data<float>()[w_scale.numel() == 1 ? 0 : c];
    const float have = s->data<float>()[s->numel() == 1 ? 0 : c];
    if (!(std::fabs(have - want) <= 1e-6f * std::fabs(want))) return false;
  }
  return true;
}

void fold_conv(const Graph& g, const GraphIndex& index, const Node& conv, int at, Rewriter& rewriter) {
  if (conv.inputs.size() < 2 || conv.outputs.size() != 1) return;
  const auto x = dequantize_of(index, conv.inputs[0]);
  const auto w = dequantize_of(index, conv.inputs[1]);
  if (!x || !w || !scalar_scale(g, x->scale) || !scalar_zero(g, x->zero) || !constant_weights(g, *w)) return;
  const Tensor& w_q = *g.initializer(w->q);
  const ValueId b_id = conv.inputs.size() > 2 ? conv.inputs[2] : kNoValue;
  std::optional<Dequantize> b;
  if (b_id != kNoValue) {
    b = dequantize_of(index, b_id);
    if (!b || !bias_matches(g, *b, g.initializer(x->scale)->data<float>()[0], *g.initializer(w->scale), w_q.dim(0)))
      return;
  }
  std::vector<int> matched = {at};
  const Node* q = group_end(g, index, conv.outputs[0], matched);
  if (!q || !rewriter.available(matched)) return;
  Node fused;
  fused.op_type = "QLinearConv";
  fused.name = conv.name;
  fused.attributes = conv.attributes;
  fused.inputs = {x->q, x->scale, x->zero, w->q, w->scale, w->zero, q->inputs[1], q->inputs[2]};
  if (b) fused.inputs.push_back(b->q);
  fused.outputs = {q->outputs[0]};
  rewriter.replace(matched, {std::move(fused)});
}

void fold_max_pool(const Graph& g, const GraphIndex& index, const Node& pool, int at, Rewriter& rewriter) {
  if (pool.inputs.empty() || pool.outputs.size() != 1) return;  // no Indices output
  const auto x = dequantize_of(index, pool.inputs[0]);
  if (!x || !scalar_scale(g, x->scale) || !scalar_zero(g, x->zero)) return;
  const Node* q = sole_quantize(g, index, pool.outputs[0]);
  if (!q || !same_constant(g, q->inputs[1], x->scale) || !same_constant(g, q->inputs[2], x->zero)) return;
  const std::vector<int> matched = {at, index.sole_reader_index(pool.outputs[0])};
  if (!rewriter.available(matched)) return;
  Node folded = pool;
  folded.inputs = {x->q};
  folded.outputs = {q->outputs[0]};
  rewriter.replace(matched, {std::move(folded)});
}

void fold_add(const Graph& g, const GraphIndex& index, const StaticShapes& shapes, const Node& add, int at,
              Rewriter& rewriter) {
  if (add.inputs.size() != 2 || add.outputs.size() != 1 || !shapes.same_shape(add.inputs[0], add.inputs[1])) return;
  const auto a = dequantize_of(index, add.inputs[0]);
  const auto b = dequantize_of(index, add.inputs[1]);
  if (!a || !b) return;
  for (const Dequantize* d : {&*a, &*b})
    if (!scalar_scale(g, d->scale) || !scalar_zero(g, d->zero)) return;
  std::vector<int> matched = {at};
  const Node* q = group_end(g, index, add.outputs[0], matched);
  if (!q || !rewriter.available(matched)) return;
  Node fused;
  fused.op_type = "QLinearAdd";
  fused.domain = kWpkDomain;
  fused.name = add.name;
  fused.inputs = {a->q, a->scale, a->zero, b->q, b->scale, b->zero, q->inputs[1], q->inputs[2]};
  fused.outputs = {q->outputs[0]};
  rewriter.replace(matched, {std::move(fused)});
}

// B of a product: constant 8-bit [K, N] (or [N, K] read transposed) with a scale and zero point
// per tensor or per output column.
bool constant_product_weights(const Graph& g, const Dequantize& b, bool transposed) {
  const Tensor* q = g.initializer(b.q);
  const Tensor* s = g.initializer(b.scale);
  const Tensor* z = g.initializer(b.zero);
  if (!q || !s || !z || !is_8bit(q->dtype()) || q->rank() != 2 || s->dtype() != DType::Float32 || z->dtype() != q->dtype())
    return false;
  if (s->numel() == 1) return z->numel() == 1;
  const std::int64_t axis = b.axis < 0 ? b.axis + 2 : b.axis;
  const std::int64_t column_axis = transposed ? 0 : 1;
  return axis == column_axis && s->rank() == 1 && s->numel() == q->dim(column_axis) && z->shape() == s->shape();
}

void fold_product(Graph& g, const GraphIndex& index, const Node& n, int at, Rewriter& rewriter) {
  const bool gemm = n.op_type == "Gemm";
  if (n.inputs.size() < 2 || n.outputs.size() != 1) return;
  if (gemm && (n.attr_int("transA", 0) != 0 || n.attr_float("alpha", 1.0f) != 1.0f || n.attr_float("beta", 1.0f) != 1.0f))
    return;
  const bool trans_b = gemm && n.attr_int("transB", 0) != 0;
  const auto a = dequantize_of(index, n.inputs[0]);
  const auto b = dequantize_of(index, n.inputs[1]);
  if (!a || !b || !scalar_scale(g, a->scale) || !scalar_zero(g, a->zero) || !constant_product_weights(g, *b, trans_b)) return;
  if (!rewriter.available({at})) return;
  ValueId weights = b->q;
  if (trans_b) weights = add_constant(g, g.value(b->q).name + "_transposed", transposed_matrix(*g.initializer(b->q)));
  Node product;
  product.op_type = "MatMulIntegerToFloat";
  product.domain = kWpkDomain;
  product.name = n.name;
  product.inputs = {a->q, weights, a->scale, b->scale, a->zero, b->zero};
  const ValueId c = gemm && n.inputs.size() > 2 ? n.inputs[2] : kNoValue;
  if (c == kNoValue) {
    product.outputs = {n.outputs[0]};
    rewriter.replace({at}, {std::move(product)});
    return;
  }
  const ValueInfo& out = g.value(n.outputs[0]);
  const ValueId unbiased = g.add_value({unique_name(g, out.name + "_product"), DType::Float32, out.dims});
  product.outputs = {unbiased};
  Node add;
  add.op_type = "Add";
  add.name = n.name + "_bias";
  add.inputs = {unbiased, c};
  add.outputs = {n.outputs[0]};
  rewriter.replace({at}, {std::move(product), std::move(add)});
}

}  // namespace

bool fold_qdq(Graph& g, const PassContext& ctx) {
  const bool changed = rewrite_to_fixed_point(g, ctx, [&](std::size_t i, const GraphIndex& index, const StaticShapes& shapes,
                                                     Rewriter& rewriter) {
    const Node& n = g.nodes()[i];
    if (is_onnx_op(&n, "Conv")) fold_conv(g, index, n, static_cast<int>(i), rewriter);
    else if (is_onnx_op(&n, "MaxPool")) fold_max_pool(g, index, n, static_cast<int>(i), rewriter);
    else if (is_onnx_op(&n, "Add")) fold_add(g, index, shapes, n, static_cast<int>(i), rewriter);
    else if (is_onnx_op(&n, "MatMul") || is_onnx_op(&n, "Gemm")) fold_product(g, index, n, static_cast<int>(i), rewriter);
  });
  // The DQs of the weights folded here are read by nothing now: they go before constant folding
  // would dequantize every weight for nothing.
  if (changed) eliminate_dead_code(g, ctx);
  return changed;
}

}  // namespace wpk::passes
