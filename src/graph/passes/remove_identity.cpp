// Identity, Dropout at inference and a Concat of one input forward their input: readers are
// rewired to the input and the node goes. Kept when its output is a graph output (the name must survive) or when a
// Dropout's mask output is read.
#include "graph/passes/pass.hpp"

namespace wpk::passes {
namespace {
bool is_forwarding(const Node& n, const Graph& g) {
  if (n.inputs.empty() || n.inputs[0] == kNoValue || n.outputs.empty()) return false;
  if (n.op_type == "Identity") return true;
  // A Concat of one input (exporters write them for lists of one) copies it whole.
  if (n.op_type == "Concat" && n.inputs.size() == 1 && (n.domain.empty() || n.domain == "ai.onnx")) return true;
  if (n.op_type != "Dropout") return false;
  if (n.outputs.size() > 1 && n.outputs[1] != kNoValue) return false;
  // training_mode (opset 12+) given as a constant false, or absent, means inference.
  if (n.inputs.size() > 2 && n.inputs[2] != kNoValue) {
    const Tensor* t = g.initializer(n.inputs[2]);
    if (!t || t->dtype() != DType::Bool || t->numel() != 1 || t->data<bool>()[0]) return false;
  }
  return true;
}
}  // namespace

bool remove_identity(Graph& g, const PassContext&) {
  bool changed = false;
  auto& nodes = g.mutable_nodes();
  for (std::size_t i = 0; i < nodes.size();) {
    const Node& n = nodes[i];
    if (!is_forwarding(n, g) || is_graph_output(g, n.outputs[0])) {
      ++i;
      continue;
    }
    const ValueId from = n.outputs[0], to = n.inputs[0];
    nodes.erase(nodes.begin() + static_cast<std::ptrdiff_t>(i));
    replace_uses(g, from, to);
    changed = true;
  }
  return changed;
}

}  // namespace wpk::passes
