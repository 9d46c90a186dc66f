// fold_pad: a Pad that adds zeros around the spatial dims only, read by nothing but a Conv or an
// AveragePool, becomes that op's own padding: exporters write AveragePool with
// count_include_pad=1 as Pad + AveragePool (Inception v3: 9 of them; DenseNet-121's transitions
// add a Pad of nothing), and each Pad copies its whole input. A Pad that adds nothing goes.
// Kept: other modes (reflect, edge), a non-zero value, padding of N or C, negative pads (crops),
// ceil_mode pools and MaxPool (which pads with -inf, not zeros).
#include <optional>

#include "graph/passes/match.hpp"

namespace wpk::passes {
namespace {

// The pads of a constant-mode, zero-value Pad ([x1_begin, x2_begin, ..., x1_end, ...]), when
// known and none negative (constant_pad_amounts declines a Pad of named axes); nullopt otherwise.
std::optional<std::vector<std::int64_t>> zero_pads(const Node& n, const Graph& g) {
  if (n.inputs.empty() || n.inputs[0] == kNoValue || n.attr_string("mode", "constant") != "constant") return std::nullopt;
  auto pads = constant_pad_amounts(n, g);
  if (!pads) return std::nullopt;
  if (n.has_attr("pads")) {  // opset < 11: the value is an attribute too
    if (n.attr_float("value", 0.0f) != 0.0f) return std::nullopt;
  } else {
    if (n.inputs.size() > 2 && n.inputs[2] != kNoValue) {
      const Tensor* v = g.initializer(n.inputs[2]);
      if (!v || v->numel() != 1 || v->dtype() != DType::Float32 || v->data<float>()[0] != 0.0f) return std::nullopt;
    }
  }
  if (pads->empty() || pads->size() % 2 != 0) return std::nullopt;
  for (std::int64_t p : *pads)
    if (p < 0) return std::nullopt;
  return pads;
}

bool all_zero(const std::vector<std::int64_t>& v) {
  for (std::int64_t x : v)
    if (x != 0) return false;
  return true;
}

// The consumer's pads plus the Pad's spatial ones, when the consumer can take them.
std::optional<std::vector<std::int64_t>> merged_pads(const Node& c, const std::vector<std::int64_t>& pad) {
  const std::size_t rank = pad.size() / 2;
  if (rank < 3 || pad[0] != 0 || pad[1] != 0 || pad[rank] != 0 || pad[rank + 1] != 0) return std::nullopt;
  if (!c.domain.empty() || c.attr_string("auto_pad", "NOTSET") != "NOTSET") return std::nullopt;
  const std::size_t spatial = rank - 2;
  std::vector<std::int64_t> pads = c.attr_ints("pads", std::vector<std::int64_t>(2 * spatial, 0));
  if (pads.size() != 2 * spatial) return std::nullopt;
  if (c.op_type == "AveragePool") {
    // Zeros counted in every window's divisor: count_include_pad, which is also what the pool's
    // own zero-width padding amounts to.
    if (c.attr_int("ceil_mode", 0) != 0) return std::nullopt;
    if (c.attr_int("count_include_pad", 0) == 0 && !all_zero(pads)) return std::nullopt;
  } else if (c.op_type != "Conv") {
    return std::nullopt;
  }
  for (std::size_t d = 0; d < spatial; ++d) {
    pads[d] += pad[2 + d];
    pads[spatial + d] += pad[rank + 2 + d];
  }
  return pads;
}

// Folds or removes the first Pad it can; false when there is none. Each edit changes the node
// list, so the next one starts from a fresh index.
bool fold_one_pad(Graph& g) {
  const GraphIndex index(g);
  auto& nodes = g.mutable_nodes();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const auto pad = zero_pads(nodes[i], g);
    const ValueId out = nodes[i].outputs.empty() ? kNoValue : nodes[i].outputs[0];
    if (!pad || out == kNoValue || is_graph_output(g, out)) continue;
    if (!all_zero(*pad)) {
      const int reader = index.sole_reader_index(out);
      if (reader < 0) continue;
      Node& consumer = nodes[static_cast<std::size_t>(reader)];
      const auto pads = consumer.inputs[0] == out ? merged_pads(consumer, *pad) : std::nullopt;
      if (!pads) continue;
      consumer.attributes.insert_or_assign("pads", Attribute(*pads));
      if (consumer.op_type == "AveragePool") consumer.attributes.insert_or_assign("count_include_pad", Attribute(std::int64_t{1}));
      if (consumer.fused_from.empty()) consumer.fused_from = {consumer.op_type};
      consumer.fused_from.insert(consumer.fused_from.begin(), "Pad");
    }
    const ValueId in = nodes[i].inputs[0];
    nodes.erase(nodes.begin() + static_cast<std::ptrdiff_t>(i));
    replace_uses(g, out, in);
    return true;
  }
  return false;
}

}  // namespace

bool fold_pad(Graph& g, const PassContext&) {
  bool changed = false;
  while (fold_one_pad(g)) changed = true;
  return changed;
}

}  // namespace wpk::passes
