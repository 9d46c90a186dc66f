// Transpose(Transpose(x, p1), p2) reads x once through the composed permutation: the second
// Transpose is rewritten to read x directly, or replaced by its input when the two cancel. The
// first Transpose stays while something else reads it (dead code removes it otherwise).
#include "graph/passes/match.hpp"
#include "graph/passes/static_shapes.hpp"

namespace wpk::passes {
namespace {

// The node's permutation; the default (reversing the axes) needs the rank. Empty when unknown.
std::vector<std::int64_t> perm_of(const Node& n, const StaticShapes& shapes) {
  if (n.has_attr("perm")) return n.attr_ints("perm");
  std::vector<std::int64_t> perm;
  for (int i = shapes.rank(n.inputs[0]) - 1; i >= 0; --i) perm.push_back(i);
  return perm;
}

bool is_identity(const std::vector<std::int64_t>& perm) {
  for (std::size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<std::int64_t>(i)) return false;
  return true;
}

}  // namespace

bool cancel_transposes(Graph& g, const PassContext& ctx) {
  bool changed = false;
  const std::shared_ptr<const GraphAnalyses> analyses = analyses_of(g, ctx);
  const StaticShapes& shapes = analyses->shapes;
  const GraphIndex& index = analyses->index;
  auto& nodes = g.mutable_nodes();
  for (Node& second : nodes) {
    if (!is_onnx_op(&second, "Transpose") || second.inputs.empty()) continue;
    const Node* first = index.producer(second.inputs[0]);
    if (!is_onnx_op(first, "Transpose") || first->inputs.empty()) continue;
    const auto p1 = perm_of(*first, shapes), p2 = perm_of(second, shapes);
    if (p1.empty() || p1.size() != p2.size()) continue;
    // Output axis j of the pair is axis p2[j] of the first output, which is axis p1[p2[j]] of x.
    std::vector<std::int64_t> composed;
    for (std::int64_t j : p2) {
      if (j < 0 || j >= static_cast<std::int64_t>(p1.size())) break;
      composed.push_back(p1[j]);
    }
    if (composed.size() != p1.size()) continue;
    second.inputs[0] = first->inputs[0];
    if (is_identity(composed)) {
      // Identity keeps the output's name; remove_identity forwards it unless it is a graph output.
      second.op_type = "Identity";
      second.attributes.clear();
    } else {
      second.attributes.insert_or_assign("perm", Attribute(composed));
    }
    changed = true;
  }
  return changed;
}

}  // namespace wpk::passes
