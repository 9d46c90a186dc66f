#include "graph/subgraph.hpp"

#include <memory>
#include <string>

namespace wpk {
namespace {

const Graph* body(const Node& n, const char* attribute) {
  const Attribute* a = n.find_attr(attribute);
  return a && a->kind() == Attribute::Kind::Graph ? &a->g() : nullptr;
}

std::string counts(std::size_t inputs, std::size_t outputs) {
  return std::to_string(inputs) + " inputs and " + std::to_string(outputs) + " outputs";
}

}  // namespace

std::string control_flow_signature_problem(const Node& n, std::int64_t opset) {
  const std::size_t k = captured_count(n);
  if (k > n.inputs.size()) return "its captured values do not match its inputs";
  const std::size_t own = n.inputs.size() - k;
  if (n.op_type == "If") {
    const Graph* then_b = body(n, "then_branch");
    const Graph* else_b = body(n, "else_branch");
    if (!then_b || !else_b) return "attributes 'then_branch' and 'else_branch' (graphs) are required";
    if (own != 1) return "takes one input (cond), has " + std::to_string(own);
    if (then_b->outputs().size() != n.outputs.size() || else_b->outputs().size() != n.outputs.size())
      return "has " + std::to_string(n.outputs.size()) + " outputs, then_branch " + std::to_string(then_b->outputs().size()) +
             " and else_branch " + std::to_string(else_b->outputs().size());
    for (std::size_t o = 0; o < n.outputs.size(); ++o) {
      const DType a = then_b->value(then_b->outputs()[o]).dtype, b = else_b->value(else_b->outputs()[o]).dtype;
      if (a != DType::Undefined && b != DType::Undefined && a != b)
        return "output " + std::to_string(o) + " is " + dtype_name(a) + " in then_branch but " + dtype_name(b) +
               " in else_branch";
    }
    return "";
  }
  const Graph* b = body(n, "body");
  if (!b) return "attribute 'body' (a graph) is required";
  const std::size_t bin = b->inputs().size() - std::min(b->inputs().size(), k), bout = b->outputs().size();
  if (b->inputs().size() < k) return "its body does not take the values it reads";
  if (n.op_type == "Loop") {
    if (own < 2) return "takes M, cond and the carried values";
    const std::size_t carried = own - 2;
    if (bin != 2 + carried || bout != 1 + n.outputs.size() || n.outputs.size() < carried)
      return "body has " + counts(bin, bout) + "; with " + std::to_string(carried) + " carried values it needs " +
             counts(2 + carried, 1 + n.outputs.size()) + " (the node has " + std::to_string(n.outputs.size()) + ")";
    return "";
  }
  if (n.op_type == "SequenceMap") {
    if (own < 1) return "takes a sequence";
    if (bin != own || bout != n.outputs.size())
      return "body has " + counts(bin, bout) + "; the node " + counts(own, n.outputs.size());
    return "";
  }
  if (n.op_type == "Scan") {
    const std::size_t scanned = own - (opset < 9 && own > 0 ? 1 : 0);  // opset 8: sequence_lens first
    const std::int64_t m = n.attr_int("num_scan_inputs", -1);
    if (m < 1 || static_cast<std::size_t>(m) > scanned)
      return "num_scan_inputs must be in [1, " + std::to_string(scanned) + "]";
    if (bin != scanned || bout != n.outputs.size() || bout < scanned - static_cast<std::size_t>(m))
      return "body has " + counts(bin, bout) + "; the node " + counts(scanned, n.outputs.size());
    return "";
  }
  return "not a control-flow op";
}

void strip_bodies(Graph& g) {
  for (Node& n : g.mutable_nodes())
    for (auto& [name, attr] : n.attributes) {
      if (attr.kind() != Attribute::Kind::Graph) continue;
      const Graph& body = attr.g();
      auto signature = std::make_shared<Graph>();
      signature->set_name(body.name());
      signature->set_opset(body.opset());
      for (ValueId v : body.inputs()) {
        const ValueInfo& info = body.value(v);
        signature->add_input(info.name, info.dtype, {});
        signature->mutable_value(signature->inputs().back()) = info;
      }
      for (ValueId v : body.outputs()) {
        const ValueInfo& info = body.value(v);
        if (signature->find_value(info.name) == kNoValue) signature->add_value(info);
        signature->add_output(info.name);
      }
      attr = Attribute(std::shared_ptr<const Graph>(std::move(signature)));
    }
}

}  // namespace wpk
