// fold_captured_constants: a control-flow node's captured input (graph/subgraph.hpp) that is a
// constant of this graph, often only after folding (an exporter's Identity of a weight), becomes
// a constant of every body that reads it. A body then packs its weights and fuses around them
// once at load, instead of taking them as inputs at every iteration, where a product with a
// weight only known at run time cannot be packed.
#include <memory>

#include "graph/passes/pass.hpp"
#include "graph/subgraph.hpp"

namespace wpk::passes {
namespace {

// The node's Graph attributes (one for Loop and Scan, two for If).
std::vector<std::string> body_names(const Node& n) {
  std::vector<std::string> names;
  for (const auto& [name, a] : n.attributes)
    if (a.kind() == Attribute::Kind::Graph) names.push_back(name);
  return names;
}

// True when captured input j (of `captured`) can move into every body: each has at least that
// many inputs and declares it with the constant's dtype.
bool fits_every_body(const Node& n, const std::vector<std::string>& bodies, std::size_t captured, std::size_t j,
                     const Tensor& value) {
  for (const std::string& name : bodies) {
    const Graph& body = n.find_attr(name)->g();
    if (body.inputs().size() < captured) return false;
    const ValueId v = body.inputs()[body.inputs().size() - captured + j];
    if (body.value(v).dtype != value.dtype() || body.is_initializer(v)) return false;
  }
  return true;
}

bool is_graph_input(const Graph& g, ValueId v) {
  for (ValueId in : g.inputs())
    if (in == v) return true;
  return false;
}

bool fold_into_bodies(Graph& g, Node& n) {
  const std::size_t captured = captured_count(n);
  if (captured == 0 || captured > n.inputs.size()) return false;
  const std::vector<std::string> bodies = body_names(n);
  if (bodies.empty()) return false;
  std::vector<std::size_t> constant;  // positions among the captured inputs
  for (std::size_t j = 0; j < captured; ++j) {
    const ValueId v = n.inputs[n.inputs.size() - captured + j];
    // An initializer that is also a graph input is a default the caller may override.
    const Tensor* t = v == kNoValue || is_graph_input(g, v) ? nullptr : g.initializer(v);
    if (t && fits_every_body(n, bodies, captured, j, *t)) constant.push_back(j);
  }
  if (constant.empty()) return false;
  for (const std::string& name : bodies) {
    Graph body = n.find_attr(name)->g();
    const std::size_t first = body.inputs().size() - captured;
    for (std::size_t j : constant) {
      const ValueId v = body.inputs()[first + j];
      body.set_initializer(v, *g.initializer(n.inputs[n.inputs.size() - captured + j]));
    }
    auto& inputs = body.mutable_inputs();
    for (auto it = constant.rbegin(); it != constant.rend(); ++it)
      inputs.erase(inputs.begin() + static_cast<std::ptrdiff_t>(first + *it));
    n.attributes.insert_or_assign(name, Attribute(std::make_shared<const Graph>(std::move(body))));
  }
  const std::size_t first = n.inputs.size() - captured;
  for (auto it = constant.rbegin(); it != constant.rend(); ++it)
    n.inputs.erase(n.inputs.begin() + static_cast<std::ptrdiff_t>(first + *it));
  n.attributes.insert_or_assign("__captured", Attribute(static_cast<std::int64_t>(captured - constant.size())));
  return true;
}

}  // namespace

bool fold_captured_constants(Graph& g, const PassContext&) {
  bool changed = false;
  for (Node& n : g.mutable_nodes())
    if (is_control_flow(n)) changed |= fold_into_bodies(g, n);
  return changed;
}

}  // namespace wpk::passes
