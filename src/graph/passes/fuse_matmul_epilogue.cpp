// A MatMul (or a plain Gemm) and what follows it elementwise become one com.wpk FusedMatMul
// (graph/fused_ops.hpp):
//   MatMul -> [Add(bias [N])] -> [Add(residual, same shape)] -> [activation]
//   = act(MatMul(A, B) + Bias + Z)
// which is every transformer linear layer: bias + Gelu in the feed-forward block, bias + residual
// before each LayerNorm. A residual added after the activation does not fit that formula and
// stays a separate Add. Gemm is taken when it is a MatMul plus bias (transA = 0, alpha = beta =
// 1) and something follows it; a constant B under transB = 1 is transposed once, here.
// A com.wpk MatMulIntegerToFloat (a quantized linear layer) takes the same epilogue as its
// optional inputs Bias and Z and its activation attributes: the float32 bias, Gelu and
// residual that follow each of a dynamically quantized transformer's products.
#include "core/page_memory.hpp"
#include "graph/fused_ops.hpp"
#include "graph/passes/match.hpp"
#include "graph/passes/static_shapes.hpp"

namespace wpk::passes {
namespace {

struct MatMulFusion {
  ValueId a = kNoValue, b = kNoValue, bias = kNoValue, residual = kNoValue, output = kNoValue;
  const Tensor* b_to_transpose = nullptr;   // Gemm with transB = 1
  const Tensor* bias_to_reshape = nullptr;  // Gemm's C given as [1, N]
  std::vector<int> nodes;
  ActivationMatch activation;
};

// Gemm(A, B, [C]) that is MatMul(A, op(B)) + C with C a float32 [N] or [1, N] constant.
std::optional<MatMulFusion> from_gemm(const Graph& g, const StaticShapes& shapes, const Node& gemm) {
  if (gemm.inputs.size() < 2 || gemm.attr_int("transA", 0) != 0 || gemm.attr_float("alpha", 1.0f) != 1.0f ||
      gemm.attr_float("beta", 1.0f) != 1.0f || shapes.rank(gemm.inputs[0]) != 2)
    return std::nullopt;
  const Tensor* b = float_constant(g, gemm.inputs[1]);
  if (!b || b->rank() != 2) return std::nullopt;
  MatMulFusion f;
  f.a = gemm.inputs[0];
  f.b = gemm.inputs[1];
  const bool trans_b = gemm.attr_int("transB", 0) != 0;
  if (trans_b) f.b_to_transpose = b;
  const std::int64_t n = trans_b ? b->dim(0) : b->dim(1);
  if (gemm.inputs.size() > 2 && gemm.inputs[2] != kNoValue) {
    const Tensor* c = float_constant(g, gemm.inputs[2]);
    if (!c || c->numel() != n || !(c->shape() == Shape{n} || c->shape() == Shape{1, n})) return std::nullopt;
    f.bias = gemm.inputs[2];
    if (c->rank() == 2) f.bias_to_reshape = c;
  }
  return f;
}

// The epilogue after the product with N output columns: bias (unless a Gemm brought one),
// residual, activation.
void add_epilogue(const Graph& g, const GraphIndex& index, const StaticShapes& shapes, std::int64_t n, MatMulFusion& f) {
  std::function<bool(const Tensor&)> is_bias;
  if (f.bias == kNoValue) is_bias = [n](const Tensor& t) { return t.rank() == 1 && t.numel() == n && n > 0; };
  Epilogue e = match_epilogue(g, index, shapes, f.output, is_bias);
  if (e.bias != kNoValue) f.bias = e.bias;
  f.residual = e.residual;
  f.activation = std::move(e.activation);
  f.nodes.insert(f.nodes.end(), e.nodes.begin(), e.nodes.end());
  f.output = e.output;
}

std::optional<MatMulFusion> match_fusion(const Graph& g, const GraphIndex& index, const StaticShapes& shapes, int at) {
  const Node& mm = g.nodes()[at];
  if (mm.outputs.empty() || mm.outputs[0] == kNoValue) return std::nullopt;  // a product nothing reads
  std::optional<MatMulFusion> f;
  if (is_onnx_op(&mm, "Gemm")) {
    f = from_gemm(g, shapes, mm);
  } else if (is_onnx_op(&mm, "MatMul") && mm.inputs.size() == 2) {
    f = MatMulFusion{};
    f->a = mm.inputs[0];
    f->b = mm.inputs[1];
  }
  if (!f) return std::nullopt;
  f->output = mm.outputs[0];
  f->nodes = {at};
  // N, the bias length, is the last dim of B (of the product for Gemm's transposed B).
  const DimList* out = shapes.dims(mm.outputs[0]);
  const Tensor* b = float_constant(g, f->b);
  std::int64_t n = out && !out->empty() && out->back().is_static() ? out->back().value : -1;
  if (n < 0 && b && b->rank() >= 2 && !f->b_to_transpose) n = b->dim(-1);
  add_epilogue(g, index, shapes, n, *f);
  // Something must be absorbed, and a float32 constant (B or the bias) must pin the dtype. A
  // Gemm with nothing after it stays one: every backend runs it as written, its B transposed
  // too, where fusing would transpose that B here for nothing (a classifier's, at every load).
  if (f->nodes.size() == 1 || (!b && !float_constant(g, f->bias))) return std::nullopt;
  return f;
}

// MatMulIntegerToFloat without an epilogue yet, and what follows it.
void fuse_integer_product(Graph& g, const GraphIndex& index, const StaticShapes& shapes, int at, Rewriter& rewriter) {
  const Node& mm = g.nodes()[at];
  if (mm.inputs.size() != kIntegerProductBias || mm.outputs.size() != 1 || mm.outputs[0] == kNoValue) return;
  const Tensor* b = g.initializer(mm.inputs[1]);
  if (!b || b->rank() != 2) return;
  MatMulFusion f;
  f.output = mm.outputs[0];
  f.nodes = {at};
  add_epilogue(g, index, shapes, b->dim(1), f);
  if (f.nodes.size() == 1 || !rewriter.available(f.nodes)) return;
  Node fused = mm;
  if (f.bias != kNoValue || f.residual != kNoValue) fused.inputs.push_back(f.bias);
  if (f.residual != kNoValue) fused.inputs.push_back(f.residual);
  fused.outputs = {f.output};
  fused.attributes.emplace("activation", Attribute(f.activation.name));
  fused.attributes.emplace("activation_params", Attribute(f.activation.params));
  rewriter.replace(f.nodes, {std::move(fused)});
}

}  // namespace

bool fuse_matmul_epilogue(Graph& g, const PassContext& ctx) {
  return rewrite_to_fixed_point(g, ctx, [&](std::size_t i, const GraphIndex& index, const StaticShapes& shapes,
                                       Rewriter& rewriter) {
    const Node& n = g.nodes()[i];
    if (n.domain == kWpkDomain && n.op_type == "MatMulIntegerToFloat")
      return fuse_integer_product(g, index, shapes, static_cast<int>(i), rewriter);
    auto f = match_fusion(g, index, shapes, static_cast<int>(i));
    if (!f || !rewriter.available(f->nodes)) return;
    const std::string name = g.nodes()[i].name;
    if (f->b_to_transpose) f->b = add_constant(g, g.value(f->b).name + "_t", transposed_matrix(*f->b_to_transpose));
    if (const Tensor* c = f->bias_to_reshape)
      f->bias = add_constant(g, g.value(f->bias).name + "_row", c->clone().reshaped({c->numel()}));
    Node fused;
    fused.name = name;
    fused.op_type = "FusedMatMul";
    fused.domain = kWpkDomain;
    fused.inputs = {f->a, f->b, f->bias};
    if (f->residual != kNoValue)
      fused.inputs.push_back(f->residual);
    else if (f->bias == kNoValue)
      fused.inputs.pop_back();
    fused.outputs = {f->output};
    fused.attributes.emplace("activation", Attribute(f->activation.name));
    fused.attributes.emplace("activation_params", Attribute(f->activation.params));
    rewriter.replace(f->nodes, {std::move(fused)});
  });
}

}  // namespace wpk::passes
