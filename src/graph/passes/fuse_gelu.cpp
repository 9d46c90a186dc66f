// Exporters write GELU out as x * 0.5 * (1 + erf(x / sqrt(2))): five or six nodes. This pass
// finds it, anchored on the Erf, in the forms torch and TF exporters produce:
//   d = Div(x, 1.4142135) or Mul(x, 0.70710678);  e = Erf(d);  a = Add(e, 1)
//   then Mul(Mul(x, a), 0.5) | Mul(Mul(x, 0.5), a) | Mul(x, Mul(a, 0.5))
// and GPT-2's tanh approximation, x * 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))),
// nine or ten nodes, anchored on the Tanh (x^3 as Pow(x, 3) or Mul(x, Mul(x, x))),
// and replaces it by one com.wpk Gelu (graph/fused_ops.hpp; approximate = "tanh" for the
// second), which runs as one pass over memory and lets fuse_matmul_epilogue absorb it.
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

// From `a` = 1 + f(x) (node ai, already matched), the products with x and 0.5 in any of the
// three groupings exporters write: Mul(Mul(x, a), 0.5) | Mul(Mul(x, 0.5), a) | Mul(x, Mul(a, 0.5)).
// Adds their nodes and the output to m.
bool match_products(const Graph& g, const GraphIndex& index, const StaticShapes& shapes, int ai, GeluMatch& m) {
  const ValueId a = g.nodes()[ai].outputs[0];
  const int mi = index.sole_reader_index(a);
  if (mi < 0 || !is_onnx_op(&g.nodes()[mi], "Mul")) return false;
  const Node& mul = g.nodes()[mi];
  const ValueId other = other_input(mul, a);
  m.nodes.push_back(mi);
  if (other == m.x) {  // Mul(Mul(x, a), 0.5)
    const int hi = half_of(g, index, shapes, mul.outputs[0]);
    if (hi < 0) return false;
    m.nodes.push_back(hi);
    m.output = g.nodes()[hi].outputs[0];
    return true;
  }
  const int hx = index.producer_index(other);
  if (hx >= 0 && is_onnx_op(&g.nodes()[hx], "Mul") && index.sole_reader_index(other) == mi) {
    // Mul(Mul(x, 0.5), a)
    const auto h = scalar_constant(g, other_input(g.nodes()[hx], m.x), shapes.rank(m.x));
    if (!h || *h != 0.5f) return false;
    m.nodes.push_back(hx);
    m.output = mul.outputs[0];
    return true;
  }
  const auto half = scalar_constant(g, other, shapes.rank(a));
  if (half && *half == 0.5f) {  // Mul(x, Mul(a, 0.5))
    const int xi = index.sole_reader_index(mul.outputs[0]);
    if (xi < 0 || !is_onnx_op(&g.nodes()[xi], "Mul") || other_input(g.nodes()[xi], mul.outputs[0]) != m.x)
      return false;
    m.nodes.push_back(xi);
    m.output = g.nodes()[xi].outputs[0];
    return true;
  }
  return false;
}

// Add(v, 1) in either operand order, as v's sole reader; its index or -1.
int plus_one(const Graph& g, const GraphIndex& index, const StaticShapes& shapes, ValueId v, ValueId x) {
  const int i = index.sole_reader_index(v);
  if (i < 0 || !is_onnx_op(&g.nodes()[i], "Add")) return -1;
  const auto one = scalar_constant(g, other_input(g.nodes()[i], v), shapes.rank(x));
  return one && *one == 1.0f ? i : -1;
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
  const int ai = plus_one(g, index, shapes, erf.outputs[0], m.x);
  if (ai < 0) return std::nullopt;
  m.nodes = {di, erf_at, ai};
  if (!match_products(g, index, shapes, ai, m)) return std::nullopt;
  return m;
}

// For a two-input Mul: the operand the other, a one-element constant near `want`, scales; or
// kNoValue.
ValueId scaled_by(const Graph& g, const StaticShapes& shapes, const Node& mul, double want) {
  if (!is_onnx_op(&mul, "Mul") || mul.inputs.size() != 2) return kNoValue;
  for (int c = 0; c < 2; ++c) {
    const ValueId v = mul.inputs[1 - c];
    const auto k = scalar_constant(g, mul.inputs[c], shapes.rank(v));
    if (k && near(*k, want)) return v;
  }
  return kNoValue;
}

// v = x^3 as Pow(x, 3) or Mul(x, Mul(x, x)) (either order), each intermediate read once; adds
// the nodes to `nodes`.
bool cube_of(const Graph& g, const GraphIndex& index, const StaticShapes& shapes, ValueId v, ValueId x,
             std::vector<int>& nodes) {
  const int pi = index.producer_index(v);
  if (pi < 0) return false;
  const Node& p = g.nodes()[pi];
  if (p.inputs.size() != 2 || p.inputs[0] == kNoValue || p.inputs[1] == kNoValue) return false;
  if (is_onnx_op(&p, "Pow")) {
    const auto e = scalar_constant(g, p.inputs[1], shapes.rank(x));
    if (p.inputs[0] != x || !e || *e != 3.0f) return false;
    nodes.push_back(pi);
    return true;
  }
  if (!is_onnx_op(&p, "Mul")) return false;
  const ValueId sq = p.inputs[0] == x ? p.inputs[1] : (p.inputs[1] == x ? p.inputs[0] : kNoValue);
  const int si = sq == kNoValue ? -1 : index.producer_index(sq);
  if (si < 0 || index.sole_reader_index(sq) != pi) return false;
  const Node& square = g.nodes()[si];
  if (!is_onnx_op(&square, "Mul") || square.inputs.size() != 2 || square.inputs[0] != x || square.inputs[1] != x)
    return false;
  nodes.push_back(si);
  nodes.push_back(pi);
  return true;
}

// The tanh approximation, anchored on the Tanh:
//   s = Mul(sqrt(2/pi), Add(x, Mul(0.044715, x^3)));  t = Tanh(s);  a = Add(t, 1)
//   then the products with x and 0.5 as in the erf form (constants in either operand order).
std::optional<GeluMatch> match_gelu_tanh(const Graph& g, const GraphIndex& index, const StaticShapes& shapes,
                                         int tanh_at) {
  const Node& t = g.nodes()[tanh_at];
  const int si = index.producer_index(t.inputs[0]);
  if (si < 0 || index.sole_reader_index(t.inputs[0]) != tanh_at) return std::nullopt;
  const ValueId u = scaled_by(g, shapes, g.nodes()[si], std::sqrt(2.0 / 3.14159265358979323846));
  const int ui = u == kNoValue ? -1 : index.producer_index(u);
  if (ui < 0 || index.sole_reader_index(u) != si) return std::nullopt;
  const Node& add = g.nodes()[ui];
  if (!is_onnx_op(&add, "Add") || add.inputs.size() != 2) return std::nullopt;
  GeluMatch m;
  for (int side = 0; side < 2; ++side) {  // Add(x, w) or Add(w, x), w = 0.044715 * x^3
    const ValueId w = add.inputs[side];
    const int wi = index.producer_index(w);
    if (wi < 0 || index.sole_reader_index(w) != ui) continue;
    const ValueId cube = scaled_by(g, shapes, g.nodes()[wi], 0.044715);
    std::vector<int> nodes;
    if (cube == kNoValue || index.sole_reader_index(cube) != wi ||
        !cube_of(g, index, shapes, cube, add.inputs[1 - side], nodes))
      continue;
    m.x = add.inputs[1 - side];
    m.nodes = nodes;
    m.nodes.insert(m.nodes.end(), {wi, ui, si, tanh_at});
    break;
  }
  if (m.x == kNoValue) return std::nullopt;
  const int ai = plus_one(g, index, shapes, t.outputs[0], m.x);
  if (ai < 0) return std::nullopt;
  m.nodes.push_back(ai);
  if (!match_products(g, index, shapes, ai, m)) return std::nullopt;
  return m;
}

}  // namespace

bool fuse_gelu(Graph& g, const PassContext& ctx) {
  // Opset 20's Gelu is the same function as com.wpk's: one op for the fusions and kernels.
  bool changed = false;
  for (Node& n : g.mutable_nodes())
    if (is_onnx_op(&n, "Gelu") && g.opset() >= 20) {
      n.domain = kWpkDomain;
      changed = true;
    }
  if (changed) ctx.analyses.reset();  // the shapes pass through com.wpk Gelu only
  return rewrite_to_fixed_point(g, ctx, [&](std::size_t i, const GraphIndex& index, const StaticShapes& shapes,
                                       Rewriter& rewriter) {
    const bool erf = is_onnx_op(&g.nodes()[i], "Erf");
    if (!erf && !is_onnx_op(&g.nodes()[i], "Tanh")) return;
    const auto m = erf ? match_gelu(g, index, shapes, static_cast<int>(i))
                       : match_gelu_tanh(g, index, shapes, static_cast<int>(i));
    if (!m || !rewriter.available(m->nodes)) return;
    Node gelu;
    gelu.name = g.nodes()[i].name + "_gelu";
    gelu.op_type = "Gelu";
    gelu.domain = kWpkDomain;
    if (!erf) gelu.attributes.emplace("approximate", Attribute(std::string("tanh")));
    gelu.inputs = {m->x};
    gelu.outputs = {m->output};
    rewriter.replace(m->nodes, {std::move(gelu)});
  }) || changed;
}

}  // namespace wpk::passes
