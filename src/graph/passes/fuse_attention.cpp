// Scaled dot-product attention as transformer exporters write it:
//   s = MatMul(Q, Transpose(K0)) [/ c or * c] [+ mask];  y = MatMul(Softmax(s, last axis), V)
// becomes com.wpk Attention(Q, K, V, [mask]) with scale = 1/c or c (graph/fused_ops.hpp), so a
// backend can run it without writing the [.., S, T] scores out. The Transpose must swap the last
// two axes of K = Transpose(K0, perm with its last two entries swapped): that perm is emitted
// as a Transpose of its own (none when it is the identity), usually the head split (0, 2, 1, 3)
// that the exporter folded into the key transpose.
#include "graph/fused_ops.hpp"
#include "graph/passes/match.hpp"
#include "graph/passes/static_shapes.hpp"

namespace wpk::passes {
namespace {

struct AttentionMatch {
  std::vector<int> nodes;
  ValueId q = kNoValue, k0 = kNoValue, v = kNoValue, mask = kNoValue, output = kNoValue;
  std::vector<std::int64_t> k_perm;  // K = Transpose(k0, k_perm); empty for K = k0
  float scale = 1.0f;
};

bool softmax_over_last_axis(const Graph& g, const Node& n, int rank) {
  if (!is_onnx_op(&n, "Softmax") || rank < 1) return false;
  // Before opset 13 Softmax flattens from `axis` on, which is the last axis alone only there.
  const std::int64_t axis = n.attr_int("axis", g.opset() < 13 ? 1 : -1);
  return axis == -1 || axis == rank - 1;
}

// `mask` broadcasts to the scores' shape without growing it.
bool fits_scores(const StaticShapes& shapes, ValueId mask, ValueId scores) {
  const DimList *m = shapes.dims(mask), *s = shapes.dims(scores);
  if (!m || !s || m->size() > s->size()) return false;
  for (std::size_t i = 0; i < m->size(); ++i) {
    const Dim& md = (*m)[i];
    if (!(md.is_static() && md.value == 1) && !same_dim(md, (*s)[s->size() - m->size() + i])) return false;
  }
  return true;
}

// Q, K and V of equal rank and equal batch dims, as backends expect of Attention.
bool same_batch(const StaticShapes& shapes, const DimList& k_dims, ValueId q, ValueId v) {
  const DimList *qd = shapes.dims(q), *vd = shapes.dims(v);
  if (!qd || !vd || qd->size() < 2 || qd->size() != k_dims.size() || qd->size() != vd->size()) return false;
  for (std::size_t i = 0; i + 2 < qd->size(); ++i)
    if (!same_dim((*qd)[i], k_dims[i]) || !same_dim((*qd)[i], (*vd)[i])) return false;
  return true;
}

// v is MatMul(...), or Div/Mul(MatMul(...), constant).
bool computes_scores(const Graph& g, const GraphIndex& index, ValueId v) {
  const Node* n = index.producer(v);
  if (is_onnx_op(n, "Div") || is_onnx_op(n, "Mul"))
    for (ValueId in : n->inputs)
      if (!g.is_initializer(in)) return is_onnx_op(index.producer(in), "MatMul");
  return is_onnx_op(n, "MatMul");
}

std::optional<AttentionMatch> match_attention(const Graph& g, const GraphIndex& index, const StaticShapes& shapes,
                                              int softmax_at) {
  const Node& softmax = g.nodes()[softmax_at];
  AttentionMatch m;
  m.nodes = {softmax_at};
  // Backwards from the Softmax: [+ mask], [scale], MatMul(Q, K^T).
  ValueId s = softmax.inputs[0];
  const int scores_rank = shapes.rank(s);
  if (!softmax_over_last_axis(g, softmax, scores_rank) || index.sole_reader_index(s) != softmax_at) return std::nullopt;
  int at = index.producer_index(s);
  if (at >= 0 && is_onnx_op(&g.nodes()[at], "Add") && g.nodes()[at].inputs.size() == 2) {
    const Node& add = g.nodes()[at];
    // The scores are the operand computed by the product (maybe scaled); the other is the mask.
    const int scores_at = computes_scores(g, index, add.inputs[0]) ? 0 : 1;
    s = add.inputs[scores_at];
    m.mask = add.inputs[1 - scores_at];
    if (!fits_scores(shapes, m.mask, s) || index.sole_reader_index(s) != at) return std::nullopt;
    m.nodes.push_back(at);
    at = index.producer_index(s);
  }
  if (at >= 0 && (is_onnx_op(&g.nodes()[at], "Div") || is_onnx_op(&g.nodes()[at], "Mul"))) {
    const Node& op = g.nodes()[at];
    const bool div = op.op_type == "Div";
    const bool const_first = !div && g.is_initializer(op.inputs[0]);
    const auto c = scalar_constant(g, op.inputs[const_first ? 0 : 1], scores_rank);
    if (!c || *c == 0.0f) return std::nullopt;
    m.scale = div ? static_cast<float>(1.0 / *c) : *c;
    s = op.inputs[const_first ? 1 : 0];
    if (index.sole_reader_index(s) != at) return std::nullopt;
    m.nodes.push_back(at);
    at = index.producer_index(s);
  }
  if (at < 0 || !is_onnx_op(&g.nodes()[at], "MatMul")) return std::nullopt;
  m.nodes.push_back(at);
  m.q = g.nodes()[at].inputs[0];
  const Node* kt = index.producer(g.nodes()[at].inputs[1]);
  if (!is_onnx_op(kt, "Transpose") || !kt->has_attr("perm")) return std::nullopt;
  // K^T = Transpose(k0, p) swaps K's last two axes, so K = Transpose(k0, p with them swapped).
  m.k0 = kt->inputs[0];
  m.k_perm = kt->attr_ints("perm");
  if (m.k_perm.size() < 2 || static_cast<int>(m.k_perm.size()) != scores_rank) return std::nullopt;
  std::swap(m.k_perm[m.k_perm.size() - 1], m.k_perm[m.k_perm.size() - 2]);
  bool identity = true;
  for (std::size_t i = 0; i < m.k_perm.size(); ++i) identity = identity && m.k_perm[i] == static_cast<std::int64_t>(i);
  if (identity) m.k_perm.clear();
  // Forwards from the Softmax: the product with V.
  const int pv = index.sole_reader_index(softmax.outputs[0]);
  if (pv < 0 || !is_onnx_op(&g.nodes()[pv], "MatMul") || g.nodes()[pv].inputs[0] != softmax.outputs[0])
    return std::nullopt;
  m.v = g.nodes()[pv].inputs[1];
  m.output = g.nodes()[pv].outputs[0];
  m.nodes.push_back(pv);
  // K's dims are K^T's with the last two swapped.
  const DimList* kt_dims = shapes.dims(g.nodes()[at].inputs[1]);
  if (!kt_dims || kt_dims->size() < 2) return std::nullopt;
  DimList k_dims = *kt_dims;
  std::swap(k_dims[k_dims.size() - 1], k_dims[k_dims.size() - 2]);
  if (!same_batch(shapes, k_dims, m.q, m.v)) return std::nullopt;
  return m;
}

}  // namespace

bool fuse_attention(Graph& g, const PassContext& ctx) {
  return rewrite_to_fixed_point(g, ctx, [&](std::size_t i, const GraphIndex& index, const StaticShapes& shapes,
                                       Rewriter& rewriter) {
    if (!is_onnx_op(&g.nodes()[i], "Softmax")) return;
    const auto m = match_attention(g, index, shapes, static_cast<int>(i));
    if (!m || !rewriter.available(m->nodes)) return;
    const std::string name = g.nodes()[i].name + "_attention";
    std::vector<Node> replacement;
    ValueId k = m->k0;
    if (!m->k_perm.empty()) {
      Node t;
      t.name = name + "_k";
      t.op_type = "Transpose";
      t.inputs = {m->k0};
      k = g.add_value({unique_name(g, name + "_k"), DType::Undefined, std::nullopt});
      t.outputs = {k};
      t.attributes.emplace("perm", Attribute(m->k_perm));
      replacement.push_back(std::move(t));
    }
    Node att;
    att.name = name;
    att.op_type = "Attention";
    att.domain = kWpkDomain;
    att.inputs = {m->q, k, m->v};
    if (m->mask != kNoValue) att.inputs.push_back(m->mask);
    att.outputs = {m->output};
    att.attributes.emplace("scale", Attribute(m->scale));
    replacement.push_back(std::move(att));
    rewriter.replace(m->nodes, std::move(replacement));
  });
}

}  // namespace wpk::passes
