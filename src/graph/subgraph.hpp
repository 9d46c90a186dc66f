#pragma once
// Control-flow nodes (If, Loop, Scan) carry their bodies as Graph attributes. The import makes
// each body self-contained: the outer constants it reads are copied in, and the other outer
// values it reads become the node's last `captured_count` inputs and the body's last inputs, in
// the same order (graph/onnx_import.cpp).
#include <algorithm>
#include <cstddef>
#include <string>

#include "wpk/graph.hpp"

namespace wpk {

inline bool has_subgraph(const Node& n) {
  return std::any_of(n.attributes.begin(), n.attributes.end(),
                     [](const auto& kv) { return kv.second.kind() == Attribute::Kind::Graph; });
}

inline std::size_t captured_count(const Node& n) {
  const std::int64_t k = n.attr_int("__captured", 0);
  return k > 0 ? static_cast<std::size_t>(k) : 0;
}

inline bool is_control_flow(const Node& n) {
  return n.domain.empty() && (n.op_type == "If" || n.op_type == "Loop" || n.op_type == "Scan" || n.op_type == "SequenceMap");
}

// Why an If, Loop, Scan or SequenceMap node and its bodies do not fit together (input and output counts, the
// branches' dtypes), or "" when they do.
std::string control_flow_signature_problem(const Node& n, std::int64_t opset);

// Once their kernels hold the bodies as sessions of their own: replaces every Graph attribute of
// `g`'s nodes by its signature alone (inputs and outputs, no nodes or initializers), so a body's
// weights are not held twice.
void strip_bodies(Graph& g);

}  // namespace wpk
