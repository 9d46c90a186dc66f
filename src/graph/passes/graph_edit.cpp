#include "graph/passes/pass.hpp"

namespace wpk::passes {

void replace_uses(Graph& g, ValueId from, ValueId to) {
  for (Node& n : g.mutable_nodes())
    for (ValueId& v : n.inputs)
      if (v == from) v = to;
  for (ValueId& v : g.mutable_outputs())
    if (v == from) v = to;
}

std::vector<int> count_uses(const Graph& g) {
  std::vector<int> uses(g.values().size(), 0);
  for (const Node& n : g.nodes())
    for (ValueId v : n.inputs)
      if (v != kNoValue) ++uses[v];
  return uses;
}

bool is_graph_output(const Graph& g, ValueId v) {
  for (ValueId o : g.outputs())
    if (o == v) return true;
  return false;
}

}  // namespace wpk::passes
