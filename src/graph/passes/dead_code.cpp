// Removes nodes none of whose outputs reaches a graph output, and initializers nothing reads.
#include "graph/passes/pass.hpp"

namespace wpk::passes {

bool eliminate_dead_code(Graph& g, const PassContext&) {
  std::vector<bool> live(g.values().size(), false);
  for (ValueId v : g.outputs()) live[v] = true;
  auto& nodes = g.mutable_nodes();
  std::vector<bool> keep(nodes.size(), false);
  for (std::size_t i = nodes.size(); i-- > 0;) {  // reverse topological order
    for (ValueId v : nodes[i].outputs)
      if (v != kNoValue && live[v]) keep[i] = true;
    if (!keep[i]) continue;
    for (ValueId v : nodes[i].inputs)
      if (v != kNoValue) live[v] = true;
  }
  bool changed = false;
  std::vector<Node> kept;
  kept.reserve(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (keep[i]) kept.push_back(std::move(nodes[i]));
    else changed = true;
  }
  nodes = std::move(kept);
  std::vector<ValueId> dead_inits;
  for (const auto& kv : g.initializers())
    if (!live[kv.first]) dead_inits.push_back(kv.first);
  for (ValueId v : dead_inits) g.erase_initializer(v);
  return changed || !dead_inits.empty();
}

}  // namespace wpk::passes
