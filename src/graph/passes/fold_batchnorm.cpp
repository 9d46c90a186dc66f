// BatchNormalization at inference is a per-channel affine map y = (x - mean) * s + beta with
// s = scale / sqrt(var + eps). Right after a Conv or a Gemm (or a 2-D MatMul) with constant
// weights it folds into them: W'[c] = W[c] * s[c] and B'[c] = (B[c] - mean[c]) * s[c] + beta[c],
// so the normalization costs nothing at run time. Weights are written as new initializers,
// since the old ones may be shared with other nodes.
#include <cmath>

#include "core/page_memory.hpp"
#include "graph/passes/match.hpp"
#include "graph/passes/static_shapes.hpp"

namespace wpk::passes {
namespace {

// Per channel: y = x * s + shift, from constant float32 [C] parameters.
struct ChannelAffine {
  std::vector<double> s, mean, beta;
};

std::optional<ChannelAffine> inference_affine(const Graph& g, const GraphIndex& index, const Node& bn,
                                              std::int64_t channels) {
  if (bn.inputs.size() != 5 || bn.attr_int("training_mode", 0) != 0 || bn.attr_int("spatial", 1) != 1)
    return std::nullopt;
  for (std::size_t o = 1; o < bn.outputs.size(); ++o)  // training statistics nobody may read
    if (bn.outputs[o] != kNoValue && (!index.readers(bn.outputs[o]).empty() || is_graph_output(g, bn.outputs[o])))
      return std::nullopt;
  const Tensor* p[4];
  for (int i = 0; i < 4; ++i) {
    p[i] = float_constant(g, bn.inputs[1 + i]);
    if (!p[i] || p[i]->rank() != 1 || p[i]->numel() != channels) return std::nullopt;
  }
  const double eps = bn.attr_float("epsilon", 1e-5f);
  ChannelAffine a;
  for (std::int64_t c = 0; c < channels; ++c) {
    a.s.push_back(p[0]->data<float>()[c] / std::sqrt(double(p[3]->data<float>()[c]) + eps));
    a.mean.push_back(p[2]->data<float>()[c]);
    a.beta.push_back(p[1]->data<float>()[c]);
  }
  return a;
}

// w with element i multiplied by s[channel], where channel = (i / inner) % s.size().
Tensor scaled(const Tensor& w, const std::vector<double>& s, std::int64_t inner) {
  Tensor out = long_lived_zeros(DType::Float32, w.shape());
  const float* src = w.data<float>();
  float* dst = out.data<float>();
  const auto channels = static_cast<std::int64_t>(s.size());
  for (std::int64_t i = 0; i < w.numel(); ++i) dst[i] = static_cast<float>(src[i] * s[(i / inner) % channels]);
  return out;
}

// The folded bias: (b - mean) * s + beta, with b the layer's own bias (one value or one per channel).
Tensor folded_bias(const Tensor* b, const ChannelAffine& a, double b_factor) {
  std::vector<float> out;
  for (std::size_t c = 0; c < a.s.size(); ++c) {
    const double own = b ? b_factor * b->data<float>()[b->numel() == 1 ? 0 : c] : 0.0;
    out.push_back(static_cast<float>((own - a.mean[c]) * a.s[c] + a.beta[c]));
  }
  return Tensor::from_vector(out, {static_cast<std::int64_t>(out.size())});
}

// Conv(x, W, [B]) -> BN  =>  Conv(x, W', B').
std::optional<Node> fold_into_conv(Graph& g, const GraphIndex& index, const Node& conv, const Node& bn) {
  const Tensor* w = float_constant(g, conv.inputs.size() > 1 ? conv.inputs[1] : kNoValue);
  if (!w || w->rank() < 3) return std::nullopt;
  const std::int64_t channels = w->dim(0);
  const ValueId b_id = conv.inputs.size() > 2 ? conv.inputs[2] : kNoValue;
  const Tensor* b = float_constant(g, b_id);
  if (b_id != kNoValue && (!b || b->rank() != 1 || b->numel() != channels)) return std::nullopt;
  const auto a = inference_affine(g, index, bn, channels);
  if (!a) return std::nullopt;
  Node folded = conv;
  folded.inputs = {conv.inputs[0],
                   add_constant(g, g.value(conv.inputs[1]).name + "_bnfold", scaled(*w, a->s, w->numel() / channels)),
                   add_constant(g, conv.name + "_bnfold_bias", folded_bias(b, *a, 1.0))};
  folded.outputs = {bn.outputs[0]};
  return folded;
}

// Gemm(A, B, [C]) -> BN, or MatMul(A, B) -> BN on a 2-D A  =>  Gemm(A, B', C') with beta = 1.
std::optional<Node> fold_into_gemm(Graph& g, const GraphIndex& index, const StaticShapes& shapes, const Node& mm,
                                   const Node& bn) {
  const bool gemm = mm.op_type == "Gemm";
  if (!gemm && shapes.rank(mm.inputs[0]) != 2) return std::nullopt;  // BN's channel axis is 1
  const Tensor* w = float_constant(g, mm.inputs.size() > 1 ? mm.inputs[1] : kNoValue);
  if (!w || w->rank() != 2) return std::nullopt;
  const bool trans_b = gemm && mm.attr_int("transB", 0) != 0;
  const std::int64_t channels = trans_b ? w->dim(0) : w->dim(1);
  const ValueId c_id = gemm && mm.inputs.size() > 2 ? mm.inputs[2] : kNoValue;
  const Tensor* c = float_constant(g, c_id);
  // C broadcasts over rows: one value, or one per column ([N] or [1, N]).
  if (c_id != kNoValue && (!c || !(c->numel() == 1 || (c->numel() == channels && c->dim(-1) == channels))))
    return std::nullopt;
  const auto a = inference_affine(g, index, bn, channels);
  if (!a) return std::nullopt;
  Node folded = mm;
  folded.op_type = "Gemm";
  folded.attributes.insert_or_assign("beta", Attribute(1.0f));
  const double beta = gemm ? mm.attr_float("beta", 1.0f) : 1.0;
  folded.inputs = {mm.inputs[0],
                   add_constant(g, g.value(mm.inputs[1]).name + "_bnfold", scaled(*w, a->s, trans_b ? w->dim(1) : 1)),
                   add_constant(g, mm.name + "_bnfold_bias", folded_bias(c, *a, beta))};
  folded.outputs = {bn.outputs[0]};
  return folded;
}

}  // namespace

bool fold_batchnorm(Graph& g, const PassContext& ctx) {
  return rewrite_to_fixed_point(g, ctx, [&](std::size_t i, const GraphIndex& index, const StaticShapes& shapes,
                                       Rewriter& rewriter) {
    const Node& bn = g.nodes()[i];
    if (!is_onnx_op(&bn, "BatchNormalization") || bn.inputs.empty()) return;
    const int p = index.producer_index(bn.inputs[0]);
    if (p < 0 || index.sole_reader_index(bn.inputs[0]) != static_cast<int>(i)) return;
    if (!rewriter.available({p, static_cast<int>(i)})) return;
    const Node& layer = g.nodes()[p];
    std::optional<Node> folded;
    if (is_onnx_op(&layer, "Conv"))
      folded = fold_into_conv(g, index, layer, bn);
    else if (is_onnx_op(&layer, "Gemm") || is_onnx_op(&layer, "MatMul"))
      folded = fold_into_gemm(g, index, shapes, layer, bn);
    if (!folded) return;
    rewriter.replace({p, static_cast<int>(i)}, {std::move(*folded)});
  });
}

}  // namespace wpk::passes
