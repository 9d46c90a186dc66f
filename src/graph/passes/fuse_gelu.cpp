// Exporters write GELU out as x * 0.5 * (1 + erf(x / sqrt(2))): five or six nodes. This pass
// finds it, anchored on the Erf, in the forms torch and TF exporters produce:
//   d = Div(x, 1.4142135) or Mul(x, 0.70710678);  e = Erf(d);  a = Add(e, 1)
//   then Mul(Mul(x, a), 0.5) | Mul(Mul(x, 0.5), a) | Mul(x, Mul(a, 0.5))
// and replaces it by one com.wpk Gelu (graph/fused_ops.hpp), which runs as one pass over memory
// and lets fuse_matmul_epilogue absorb it.
#include <cmath>

#include "graph/fused_ops.hpp"
#include "graph/passes/match.hpp"
#include "graph/passes/static_shapes.hpp"

namespace wpk::passes {
namespace {

// Exported constants are float32 roundings of sqrt(2) and 1/sqrt(2); anything further away is
// another function.
bool near(float v, double want) { return std::abs(v - want) <= 1e-6; }

struct GeluMatch {
  ValueId x = kNoValue;
  std::vector<int> nodes;
  ValueId output = kNoValue;
};

// Mul(v, 0.5) in either operand order, as v's sole reader; its index or -1.
int half_of(const Graph& g, const GraphIndex& index, const StaticShapes& shapes, ValueId v) {
  const int i = index.sole_reader_index(v);
  if (i < 0 || !is_onnx_op(&g.nodes()[i], "Mul")) return -1;
  const auto c = scalar_constant(g, other_input(g.nodes()[i], v), shapes.rank(v));
  return c && *c == 0.5f ? i : -1;
}

std::optional<GeluMatch> match_gelu(const Graph& g, const GraphIndex& index, const StaticShapes& shapes, int erf_at) {
  const Node& erf = g.nodes()[erf_at];
  GeluMatch m;
  // x / sqrt(2), written as a division or a multiplication.
  const int di = index.producer_index(erf.inputs[0]);
  if (di < 0 || index.sole_reader_index(erf.inputs[0]) != erf_at) return std::nullopt;
  const Node& d = g.nodes()[di];
  if (d.inputs.size() != 2) return std::nullopt;
  // Mul may hold the constant first.
  const bool swapped = is_onnx_op(&d, "Mul") && g.is_initializer(d.inputs[0]);
  m.x = d.inputs[swapped ? 1 : 0];
  const auto c = scalar_constant(g, d.inputs[swapped ? 0 : 1], shapes.rank(m.x));
  if (!c ||
      !((is_onnx_op(&d, "Div") && near(*c, std::sqrt(2.0))) || (is_onnx_op(&d, "Mul") && near(*c, std::sqrt(0.5)))))
    return std::nullopt;
  // 1 + erf(...)
  const int ai = index.sole_reader_index(erf.outputs[0]);
  if (ai < 0 || !is_onnx_op(&g.nodes()[ai], "Add")) return std::nullopt;
  const ValueId a = g.nodes()[ai].outputs[0];
  const auto one = scalar_constant(g, other_input(g.nodes()[ai], erf.outputs[0]), shapes.rank(m.x));
  if (!one || *one != 1.0f) return std::nullopt;
  // The products with x and 0.5, in any of the three groupings.
  const int mi = index.sole_reader_index(a);
  if (mi < 0 || !is_onnx_op(&g.nodes()[mi], "Mul")) return std::nullopt;
  const Node& mul = g.nodes()[mi];
  const ValueId other = other_input(mul, a);
  m.nodes = {di, erf_at, ai, mi};
  if (other == m.x) {  // Mul(Mul(x, a), 0.5)
    const int hi = half_of(g, index, shapes, mul.outputs[0]);
    if (hi < 0) return std::nullopt;
    m.nodes.push_back(hi);
    m.output = g.nodes()[hi].outputs[0];
    return m;
  }
  const int hx = index.producer_index(other);
  if (hx >= 0 && is_onnx_op(&g.nodes()[hx], "Mul") && index.sole_reader_index(other) == mi) {
    // Mul(Mul(x, 0.5), a)
    const auto h = scalar_constant(g, other_input(g.nodes()[hx], m.x), shapes.rank(m.x));
    if (!h || *h != 0.5f) return std::nullopt;
    m.nodes.push_back(hx);
    m.output = mul.outputs[0];
    return m;
  }
  const auto half = scalar_constant(g, other, shapes.rank(a));
  if (half && *half == 0.5f) {  // Mul(x, Mul(a, 0.5))
    const int xi = index.sole_reader_index(mul.outputs[0]);
    if (xi < 0 || !is_onnx_op(&g.nodes()[xi], "Mul") || other_input(g.nodes()[xi], mul.outputs[0]) != m.x)
      return std::nullopt;
    m.nodes.push_back(xi);
    m.output = g.nodes()[xi].outputs[0];
    return m;
  }
  return std::nullopt;
}

}  // namespace

bool fuse_gelu(Graph& g, const PassContext&) {
  return rewrite_to_fixed_point(g, [&](std::size_t i, const GraphIndex& index, const StaticShapes& shapes,
                                       Rewriter& rewriter) {
    if (!is_onnx_op(&g.nodes()[i], "Erf")) return;
    const auto m = match_gelu(g, index, shapes, static_cast<int>(i));
    if (!m || !rewriter.available(m->nodes)) return;
    Node gelu;
    gelu.name = g.nodes()[i].name + "_gelu";
    gelu.op_type = "Gelu";
    gelu.domain = kWpkDomain;
    gelu.inputs = {m->x};
    gelu.outputs = {m->output};
    rewriter.replace(m->nodes, {std::move(gelu)});
  });
}

}  // namespace wpk::passes
