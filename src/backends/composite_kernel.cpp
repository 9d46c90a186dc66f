#include "backends/composite_kernel.hpp"

#include <algorithm>
#include <unordered_map>

namespace wpk {

CompositeKernel::CompositeKernel(Graph graph, std::vector<ValueId> node_inputs, std::vector<Alternatives> parts,
                                 KernelProfile profile)
    : graph_(std::move(graph)), node_inputs_(std::move(node_inputs)), parts_(std::move(parts)), profile_(std::move(profile)) {
  bool each_has_one = !parts_.empty();
  for (const Alternatives& a : parts_) each_has_one = each_has_one && !a.empty();
  if (parts_.size() != graph_.nodes().size() || !each_has_one)
    throw Error(ErrorCode::Internal, "a composite kernel needs a kernel for each node of its graph");
  owned_.assign(node_inputs_.size(), false);
  for (std::size_t i = 0; i < node_inputs_.size(); ++i) {
    const ValueId v = node_inputs_[i];
    if (v == kNoValue || !graph_.is_initializer(v)) continue;
    bool owned = true;
    for (std::size_t p = 0; p < parts_.size(); ++p)
      for (std::size_t j = 0; j < graph_.nodes()[p].inputs.size(); ++j)
        if (graph_.nodes()[p].inputs[j] == v)
          for (const auto& k : parts_[p]) owned = owned && k->owns_input(j);
    owned_[i] = owned;
  }
  for (std::size_t i = 0; i < node_inputs_.size(); ++i)
    if (owned_[i] && graph_.is_initializer(node_inputs_[i])) graph_.erase_initializer(node_inputs_[i]);
  // Values between the parts: who writes each, who reads it last; then slots by liveness.
  const std::vector<Node>& nodes = graph_.nodes();
  std::unordered_map<ValueId, std::size_t> writer, last_reader;
  for (std::size_t p = 0; p + 1 < nodes.size(); ++p)
    for (ValueId v : nodes[p].outputs) writer[v] = p;
  for (std::size_t p = 0; p < nodes.size(); ++p)
    for (ValueId v : nodes[p].inputs)
      if (writer.count(v)) last_reader[v] = p;
  last_reads_.assign(nodes.size(), {});
  for (const auto& [v, p] : last_reader) last_reads_[p].push_back(v);
  slot_.assign(nodes.size(), 0);
  std::vector<bool> busy;
  std::unordered_map<ValueId, std::size_t> slot_of;
  for (std::size_t p = 0; p + 1 < nodes.size(); ++p) {
    // The slots of values the part before read last are free now; this part's inputs are not.
    if (p > 0)
      for (ValueId v : last_reads_[p - 1]) busy[slot_of.at(v)] = false;
    std::size_t s = 0;
    while (s < busy.size() && busy[s]) ++s;
    if (s == busy.size()) busy.push_back(false);
    busy[s] = true;
    slot_[p] = s;
    for (ValueId v : nodes[p].outputs) slot_of[v] = s;
  }
}

namespace {

// The values between the parts live in buffers of the calling thread, shared by every composite
// kernel it runs: a run's nodes run one after another on one thread, so the next group finds the
// buffer in cache, as it would the run's arena, and a thread keeps only the largest it needed.
std::shared_ptr<std::vector<float>> thread_scratch(std::size_t slot, std::size_t floats) {
  thread_local std::vector<std::shared_ptr<std::vector<float>>> buffers;
  if (buffers.size() <= slot) buffers.resize(slot + 1);
  std::shared_ptr<std::vector<float>>& b = buffers[slot];
  // A tensor of an earlier run still holding it (an error path's) keeps that one to itself.
  if (!b || b.use_count() > 1 || b->size() < floats) b = std::make_shared<std::vector<float>>(floats);
  return b;
}

}  // namespace

void CompositeKernel::run(KernelContext& ctx) const {
  std::unordered_map<ValueId, Tensor> values;
  for (std::size_t i = 0; i < node_inputs_.size(); ++i)
    if (node_inputs_[i] != kNoValue && ctx.has_input(i)) values[node_inputs_[i]] = ctx.input(i);
  for (std::size_t p = 0; p < parts_.size(); ++p) {
    const Node& n = graph_.nodes()[p];
    // Inputs the kernels own are not passed (only owned constants leave the graph).
    std::vector<const Tensor*> inputs;
    for (std::size_t j = 0; j < n.inputs.size(); ++j) {
      const ValueId v = n.inputs[j];
      const Tensor* t = nullptr;
      if (v != kNoValue) {
        const auto known = values.find(v);
        t = known != values.end() ? &known->second : graph_.initializer(v);
      }
      inputs.push_back(t);
    }
    const Kernel* kernel = nullptr;
    for (const auto& k : parts_[p])
      if (k->runs(inputs)) {
        kernel = k.get();
        break;
      }
    if (!kernel)
      ctx.fail(ErrorCode::Unsupported, "no kernel of its part " + n.op_type + " runs these shapes (" + profile_.name + ")");
    for (std::size_t j = 0; j < n.inputs.size(); ++j)
      if (kernel->owns_input(j)) inputs[j] = nullptr;
    KernelContext part(n, inputs);
    part.set_opset(ctx.opset());
    part.set_limits(ctx.limits());
    const bool last = p + 1 == parts_.size();
    part.set_output_allocator([&](std::size_t o, DType dtype, const Shape& shape) -> Tensor {
      if (last) return ctx.allocate_output(o, dtype, shape);
      if (dtype != DType::Float32) ctx.fail(ErrorCode::Internal, "a composite kernel keeps float32 values between its parts");
      auto buffer = thread_scratch(slot_[p], static_cast<std::size_t>(std::max<std::int64_t>(1, shape_numel(shape))));
      return Tensor::wrap(buffer, buffer->data(), dtype, shape);
    });
    kernel->run(part);
    for (std::size_t o = 0; o < n.outputs.size() && o < part.outputs().size(); ++o) {
      if (last) {
        if (ctx.outputs().size() <= o || ctx.outputs()[o].raw() != part.outputs()[o].raw())
          ctx.set_output(o, std::move(part.outputs()[o]));
      } else {
        values[n.outputs[o]] = std::move(part.outputs()[o]);
      }
    }
    // Their buffers go back to the thread's scratch for the parts after.
    for (ValueId v : last_reads_[p]) values.erase(v);
  }
}

}  // namespace wpk
