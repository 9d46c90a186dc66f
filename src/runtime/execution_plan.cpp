#include "runtime/execution_plan.hpp"

#include <set>

#include "wpk/session.hpp"

namespace wpk {

std::string why_unsupported(const Node& node, const Graph& graph) {
  std::string why;
  for (const Backend* b : registered_backends()) {
    why = b->why_unsupported(node, graph);
    if (why.empty()) return "";
  }
  return why;
}

std::vector<UnsupportedNode> find_unsupported(const Graph& graph) {
  std::vector<UnsupportedNode> out;
  for (const Node& n : graph.nodes()) {
    std::string why = why_unsupported(n, graph);
    if (!why.empty()) out.push_back({n.name, n.op_type, why});
  }
  return out;
}

ExecutionPlan::ExecutionPlan(const Graph& graph, const std::vector<const Backend*>& backends) {
  std::vector<std::string> problems;
  std::set<std::string> seen_ops;
  const auto& nodes = graph.nodes();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    const Backend* chosen = nullptr;
    std::string why;
    for (const Backend* b : backends) {
      why = b->why_unsupported(n, graph);
      if (why.empty()) {
        chosen = b;
        break;
      }
    }
    if (!chosen) {
      if (seen_ops.insert(n.op_type).second) problems.push_back(node_label(n) + why);
      continue;
    }
    steps_.push_back({i, chosen, chosen->prepare(n, graph), {}});
  }
  if (!problems.empty()) {
    std::string msg = problems.front();
    if (problems.size() > 1) msg += " (and " + std::to_string(problems.size() - 1) + " more unsupported op types)";
    throw Error(ErrorCode::Unsupported, msg);
  }
  // Lifetimes: a value is released after the last step that reads it, unless it is a graph
  // output or an initializer (owned by the graph).
  std::vector<int> last_use(graph.values().size(), -1);
  for (std::size_t s = 0; s < steps_.size(); ++s)
    for (ValueId v : nodes[steps_[s].node_index].inputs)
      if (v != kNoValue) last_use[v] = static_cast<int>(s);
  for (ValueId v : graph.outputs()) last_use[v] = -1;
  // Outputs nobody reads die at once.
  for (std::size_t s = 0; s < steps_.size(); ++s)
    for (ValueId v : nodes[steps_[s].node_index].outputs)
      if (v != kNoValue && last_use[v] < 0) {
        bool is_output = false;
        for (ValueId o : graph.outputs()) is_output |= (o == v);
        if (!is_output) last_use[v] = static_cast<int>(s);
      }
  for (std::size_t v = 0; v < last_use.size(); ++v)
    if (last_use[v] >= 0 && !graph.is_initializer(static_cast<ValueId>(v)))
      steps_[last_use[v]].release_after.push_back(static_cast<ValueId>(v));
}

}  // namespace wpk
