// Evaluates nodes whose inputs are all constants once, at load time, and stores their outputs
// as initializers. Shape subgraphs on static shapes collapse this way too once Shape has a
// constant input.
#include "graph/passes/pass.hpp"
#include "graph/subgraph.hpp"

namespace wpk::passes {
namespace {
bool foldable(const Node& n, const Graph& g) {
  if (has_subgraph(n) || !n.domain.empty()) return false;  // a body runs as its own session
  // Random ops must stay random at every run.
  if (n.op_type.rfind("Random", 0) == 0 || n.op_type == "Bernoulli" || n.op_type == "Multinomial") return false;
  for (ValueId v : n.inputs)
    if (v != kNoValue && !g.is_initializer(v)) return false;
  for (ValueId v : n.outputs)
    if (v != kNoValue && is_graph_output(g, v)) return false;  // keep the graph's outputs computed by a node
  return true;
}
}  // namespace

bool fold_constants(Graph& g, const PassContext& ctx) {
  if (!ctx.evaluate) return false;
  bool changed = false;
  auto& nodes = g.mutable_nodes();
  for (std::size_t i = 0; i < nodes.size();) {
    const Node& n = nodes[i];
    if (!foldable(n, g)) {
      ++i;
      continue;
    }
    std::vector<const Tensor*> ins;
    for (ValueId v : n.inputs) ins.push_back(v == kNoValue ? nullptr : g.initializer(v));
    std::vector<Tensor> outs;
    try {
      outs = ctx.evaluate(n, ins, g.opset());
    } catch (const Error&) {
      ++i;  // left for run time, where the same error is reported with the run's context
      continue;
    }
    std::size_t bytes = 0;
    for (const Tensor& t : outs) bytes += t.nbytes();
    if (bytes > static_cast<std::size_t>(kMaxFoldedNodeBytes)) {  // views of large constants
      ++i;
      continue;
    }
    for (std::size_t o = 0; o < n.outputs.size(); ++o)
      if (n.outputs[o] != kNoValue) g.set_initializer(n.outputs[o], outs[o].is_borrowed() ? outs[o].clone() : outs[o]);
    nodes.erase(nodes.begin() + static_cast<std::ptrdiff_t>(i));
    changed = true;
  }
  return changed;
}

}  // namespace wpk::passes
