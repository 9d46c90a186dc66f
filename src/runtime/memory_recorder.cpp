#include "runtime/memory_recorder.hpp"

#include <algorithm>
#include <set>

#include "graph/fused_ops.hpp"
#include "runtime/memory_planner.hpp"

namespace wpk {
namespace {

bool overlaps(const Tensor& t, const char* data, std::size_t bytes) {
  if (t.empty() || t.nbytes() == 0 || bytes == 0 || !data) return false;
  const char* p = static_cast<const char*>(t.raw());
  return p < data + bytes && data < p + t.nbytes();
}

}  // namespace

InPlaceRule in_place_rule(const Node& node, const Backend& backend, const std::string& config) {
  static const std::set<std::string> onnx_ops = {
      "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Neg", "Abs", "Erf", "Reciprocal", "Floor",
      "Ceil", "Clip", "HardSigmoid", "HardSwish", "Elu", "Selu", "Softplus", "Softsign", "Add", "Sub", "Mul", "Div"};
  static const std::set<std::string> wpk_elementwise = {"Gelu"};
  const bool onnx = node.domain.empty() || node.domain == "ai.onnx";
  const bool wpk = node.domain == kWpkDomain;
  if ((onnx && onnx_ops.count(node.op_type)) || (wpk && wpk_elementwise.count(node.op_type))) {
    if (!backend.runs_in_place(node)) return {};
    InPlaceRule rule{std::vector<std::size_t>(node.inputs.size()), true};
    for (std::size_t i = 0; i < rule.inputs.size(); ++i) rule.inputs[i] = i;
    return rule;
  }
  if (const int z = fused_residual_input(node); z >= 0 && backend.accumulates_into_residual(node, config))
    return {{static_cast<std::size_t>(z)}, false};
  return {};
}

MemoryRecorder::MemoryRecorder(const Graph& graph, const ExecutionPlan& plan)
    : graph_(graph), plan_(plan), seen_(graph.values().size()) {}

void MemoryRecorder::on_allocate(ValueId v, const Tensor& t) {
  Seen& s = seen_[static_cast<std::size_t>(v)];
  s = Seen{static_cast<const char*>(t.raw()), t.nbytes(), true, kNoValue};
}

ValueId MemoryRecorder::root_of(ValueId v) const {
  if (v == kNoValue) return kNoValue;
  const Seen& s = seen_[static_cast<std::size_t>(v)];
  return s.allocated ? v : s.alias_root;
}

ValueId MemoryRecorder::find_root_overlapping(const Tensor& t, const Node& node) const {
  // A kernel can only hand out bytes it was given (inputs) or made in this step (outputs).
  for (ValueId u : node.inputs) {
    const ValueId r = root_of(u);
    if (r != kNoValue && overlaps(t, seen_[r].data, seen_[r].bytes)) return r;
  }
  for (ValueId w : node.outputs) {
    if (w == kNoValue || !seen_[static_cast<std::size_t>(w)].allocated) continue;
    if (overlaps(t, seen_[w].data, seen_[w].bytes)) return w;
  }
  return kNoValue;
}

void MemoryRecorder::on_step(std::size_t s, const Backend& backend, const std::string& config, const std::vector<const Tensor*>& inputs,
                             const std::vector<Tensor>& outputs) {
  const Node& node = graph_.nodes()[plan_.steps()[s].node_index];
  for (std::size_t i = 0; i < node.outputs.size() && i < outputs.size(); ++i) {
    const ValueId v = node.outputs[i];
    if (v == kNoValue) continue;
    Seen& sv = seen_[static_cast<std::size_t>(v)];
    // An output allocated and then replaced by another tensor does not live in its allocation.
    if (sv.allocated && outputs[i].raw() != sv.data) sv.allocated = false;
    if (!sv.allocated) sv.alias_root = find_root_overlapping(outputs[i], node);
  }
  note_in_place(s, node, inputs, in_place_rule(node, backend, config));
}

void MemoryRecorder::note_in_place(std::size_t s, const Node& node, const std::vector<const Tensor*>& inputs,
                                   const InPlaceRule& rule) {
  if (rule.inputs.empty() || node.outputs.empty() || node.outputs[0] == kNoValue) return;
  const ValueId v = node.outputs[0];
  const Seen& out = seen_[static_cast<std::size_t>(v)];
  if (!out.allocated) return;
  for (std::size_t j : rule.inputs) {
    if (j >= node.inputs.size() || j >= inputs.size()) continue;
    const ValueId r = root_of(node.inputs[j]);
    if (r == kNoValue || !inputs[j]) continue;
    const Seen& root = seen_[static_cast<std::size_t>(r)];
    // The input must be the whole of its root's bytes, seen from the start, and as big as the
    // output: then output element i lands exactly on input element i.
    if (inputs[j]->raw() != root.data || inputs[j]->nbytes() != out.bytes || root.bytes != out.bytes) continue;
    // Another input reading those bytes would see them overwritten before it is done, unless
    // an elementwise op reads them in the same arrangement (x * x); a broadcast view clashes.
    bool clash = false;
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      if (k == j || !inputs[k] || !overlaps(*inputs[k], root.data, root.bytes)) continue;
      clash |= !rule.elementwise || inputs[k]->raw() != inputs[j]->raw() || inputs[k]->shape() != inputs[j]->shape();
    }
    if (clash) continue;
    in_place_.push_back({static_cast<int>(s), v, r});
    return;
  }
}

void MemoryRecorder::finish(SignaturePlan& plan) const {
  const std::size_t n = seen_.size();
  // A root's bytes must outlive every view of them.
  std::vector<int> last(n, -1);
  for (std::size_t v = 0; v < n; ++v)
    if (seen_[v].allocated) last[v] = plan_.last_reader(static_cast<ValueId>(v));
  for (std::size_t v = 0; v < n; ++v) {
    const ValueId r = seen_[v].alias_root;
    if (!seen_[v].allocated && r != kNoValue) last[r] = std::max(last[r], plan_.last_reader(static_cast<ValueId>(v)));
  }
  // Requests in order of birth, so an in-place request always names an earlier one.
  std::vector<ValueId> order;
  for (std::size_t v = 0; v < n; ++v)
    if (seen_[v].allocated) order.push_back(static_cast<ValueId>(v));
  std::stable_sort(order.begin(), order.end(), [&](ValueId a, ValueId b) { return plan_.producer(a) < plan_.producer(b); });
  std::vector<int> request_of(n, -1);
  std::vector<BufferRequest> requests;
  for (ValueId v : order) {
    request_of[v] = static_cast<int>(requests.size());
    requests.push_back({seen_[v].bytes, plan_.producer(v), std::max(last[v], plan_.producer(v)), -1});
  }
  // In place only when nothing, not even a view, reads the input's bytes after this step.
  for (const InPlace& ip : in_place_)
    if (last[ip.input_root] == ip.step) requests[request_of[ip.output]].share_with = request_of[ip.input_root];

  const MemoryLayout layout = assign_offsets(requests);
  plan.memory_planned = true;
  plan.values.assign(n, ValueSlot{});
  for (ValueId v : order) {
    ValueSlot& slot = plan.values[v];
    slot.in_arena = true;
    slot.offset = layout.offsets[request_of[v]];
    slot.bytes = seen_[v].bytes;
  }
  for (std::size_t v = 0; v < n; ++v)
    if (!seen_[v].allocated) plan.values[v].alias_root = seen_[v].alias_root;
  plan.arena_bytes = layout.arena_bytes;
  plan.naive_bytes = layout.naive_bytes;
}

}  // namespace wpk
