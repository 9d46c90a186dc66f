#include "runtime/executor.hpp"

#include <omp.h>

#include <cstring>
#include <optional>

#include "runtime/arena_pool.hpp"
#include "runtime/logging.hpp"
#include "runtime/run_control.hpp"
#include "runtime/threads.hpp"

namespace wpk {
namespace {

double us_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}


// A run's vectors, kept by its thread for the next: a Loop's body is a run an iteration, and
// allocating (and, for a graph's many values, consolidating the heap for) its value slots each
// time cost it as much as some of its kernels. A few per thread: runs nest (a body inside its
// node's run) but not deeply.
struct RunVectors {
  std::vector<Tensor> slots;
  std::vector<std::int64_t> charged;
  std::vector<StepChoice> choices;
  std::vector<const Tensor*> step_inputs;
  std::vector<Tensor> step_outputs;
};
constexpr std::size_t kSpareRunVectors = 4;
thread_local std::vector<RunVectors> t_spare_vectors;

}  // namespace

Executor::Executor(const Graph& graph, const ExecutionPlan& plan, RunMemory memory)
    : graph_(graph), plan_(plan), memory_(std::move(memory)) {
  if (!t_spare_vectors.empty()) {
    RunVectors& spare = t_spare_vectors.back();
    slots_ = std::move(spare.slots);
    charged_ = std::move(spare.charged);
    choices_ = std::move(spare.choices);
    step_inputs_ = std::move(spare.step_inputs);
    step_outputs_ = std::move(spare.step_outputs);
    t_spare_vectors.pop_back();
  }
  slots_.resize(graph.values().size());
  charged_.assign(graph.values().size(), 0);
  if (memory_.plan) choices_ = memory_.plan->choice;
  else choices_.assign(plan.steps().size(), StepChoice{});
  step_inputs_.reserve(plan.most_step_inputs());
  step_outputs_.reserve(plan.most_step_outputs());
  if (memory_.plan && memory_.plan->memory_planned && memory_.arena) {
    arena_base_ = static_cast<char*>(memory_.arena.get());
    arena_bytes_ = memory_.plan->arena_bytes;
  }
}

Executor::~Executor() {
  if (t_spare_vectors.size() >= kSpareRunVectors) return;
  slots_.clear();  // the run's tensors go now, the storage stays
  step_inputs_.clear();
  step_outputs_.clear();
  t_spare_vectors.push_back({std::move(slots_), std::move(charged_), std::move(choices_), std::move(step_inputs_),
                             std::move(step_outputs_)});
}

void Executor::set_profile(RunProfile* profile, std::chrono::steady_clock::time_point run_start) {
  profile_ = profile;
  run_start_ = run_start;
  if (profile_) profile_->steps.reserve(plan_.steps().size());
}

bool Executor::in_arena(const Tensor& t) const {
  if (!arena_base_ || t.empty() || t.nbytes() == 0) return false;
  const char* p = static_cast<const char*>(t.raw());
  return p < arena_base_ + arena_bytes_ && arena_base_ < p + t.nbytes();
}

void Executor::run(const std::vector<const Tensor*>& inputs) {
  for (std::size_t k = 0; k < inputs.size(); ++k) slots_[static_cast<std::size_t>(graph_.inputs()[k])] = *inputs[k];
  for (std::size_t s = 0; s < plan_.steps().size(); ++s) run_step(s);
}

StepChoice Executor::choose(std::size_t s, const std::vector<const Tensor*>& inputs) {
  if (!memory_.plan && chooser_) choices_[s] = chooser_(s, inputs);
  return choices_[s];
}

KernelContext::OutputAllocator Executor::allocator_for(const Node& node) {
  // Two pointers: small enough for std::function to hold without a heap allocation per step.
  return [this, &node](std::size_t i, DType dtype, const Shape& shape) -> Tensor {
    const ValueId v = i < node.outputs.size() ? node.outputs[i] : kNoValue;
    const bool intermediate = v != kNoValue && !plan_.is_graph_output(v);
    if (arena_base_ && intermediate) {
      const ValueSlot& slot = memory_.plan->values[static_cast<std::size_t>(v)];
      const std::size_t bytes = static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype);
      // A data-dependent shape (NonZero, ...) may need more than the first run did: heap then.
      if (slot.in_arena && bytes <= slot.bytes) {
        char* p = arena_base_ + slot.offset;
        return Tensor::wrap(memory_.arena, p, dtype, shape);
      }
    }
    if (memory_.reservation) {
      const std::int64_t bytes = shape_numel(shape) * static_cast<std::int64_t>(dtype_size(dtype));
      if (!memory_.reservation->try_reserve(bytes))  // the message only when it is needed
        memory_.reservation->budget().fail(bytes, node_label(node) + "output " + std::to_string(i) + ": ");
      if (v != kNoValue) charged_[static_cast<std::size_t>(v)] += bytes;
    }
    const bool poison = intermediate ? memory_.poison : memory_.poison_outputs;
    const bool recorded = memory_.recorder && intermediate;
    Tensor t = allocate_tensor(dtype, shape, poison, recorded);
    if (recorded) memory_.recorder->on_allocate(v, t);
    return t;
  };
}

void Executor::keep_output(const Node& node, std::size_t i, Tensor t) {
  const ValueId v = node.outputs[i];
  if (in_arena(t)) {
    // The plan assumed what the first run did: this output at its own offset, or a view of the
    // value it viewed then. Anything else (a kernel that takes another path for other data)
    // could be overwritten while still read, so it gets its own copy.
    const ValueSlot& slot = memory_.plan->values[static_cast<std::size_t>(v)];
    bool expected = slot.in_arena && t.raw() == arena_base_ + slot.offset;
    if (!expected && slot.alias_root != kNoValue) {
      const ValueSlot& root = memory_.plan->values[static_cast<std::size_t>(slot.alias_root)];
      const char* p = static_cast<const char*>(t.raw());
      expected = root.in_arena && p >= arena_base_ + root.offset && p + t.nbytes() <= arena_base_ + root.offset + root.bytes;
    }
    if (!expected) {
      logger().debug("{}output {} left its planned arena place; copied", node_label(node), i);
      t = t.clone();
    }
  }
  slots_[static_cast<std::size_t>(v)] = std::move(t);
}

void Executor::run_step(std::size_t s) {
  const PlanStep& step = plan_.steps()[s];
  const Node& node = graph_.nodes()[step.node_index];
  std::vector<const Tensor*>& ins = step_inputs_;
  ins.clear();
  for (ValueId v : node.inputs) {
    if (v == kNoValue) {
      ins.push_back(nullptr);
      continue;
    }
    if (plan_.is_released(v)) {  // its kernel owns a packed copy
      ins.push_back(nullptr);
      continue;
    }
    const Tensor* init = graph_.initializer(v);
    ins.push_back(init ? init : &slots_[static_cast<std::size_t>(v)]);
    if (!init && slots_[static_cast<std::size_t>(v)].empty())
      throw Error(ErrorCode::Internal, node_label(node) + "input '" + graph_.value(v).name + "' was never computed");
  }
  check_run_control(node);
  const StepChoice choice = choose(s, ins);
  const Candidate& cand = step.candidates[static_cast<std::size_t>(choice.candidate)];
  const Kernel* kernel = cand.ready();  // the tuner prepared a deferred choice before choosing it
  if (!kernel) throw Error(ErrorCode::Internal, node_label(node) + "the candidate chosen, " + cand.identity() + ", has no kernel");
  KernelContext ctx(node, ins.data(), ins.size(), step_outputs_);
  ctx.set_limits(memory_.limits);
  if (arena_base_ || memory_.recorder || memory_.poison_outputs || memory_.reservation)
    ctx.set_output_allocator(allocator_for(node));

  const auto t0 = profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  try {
    std::optional<OmpThreadScope> fewer;
    if (choice.threads > 0 && choice.threads < omp_get_max_threads()) fewer.emplace(choice.threads);
    note_step_cpus(cand.backend->uses_host_threads() && kernel->multithreaded() ? omp_get_max_threads() : 1);
    kernel->run(ctx);
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::ResourceExhausted, node_label(node) + "out of memory");
  } catch (const std::exception& e) {
    throw Error(ErrorCode::Internal, node_label(node) + e.what());
  }
  if (profile_) {
    const auto t1 = std::chrono::steady_clock::now();
    Shape shape = ctx.outputs().empty() ? Shape() : ctx.outputs()[0].shape();
    std::string layout = step.layout;
    if (ctx.internal_layout()) layout += std::string(">") + ctx.internal_layout();
    const int reorders = ctx.internal_reorders() + (node.op_type == "Transpose" && node.domain.empty() ? 1 : 0);
    std::string backend = cand.identity();
    // The kernel that ran, where the backend names its own.
    const std::string kernel_name = kernel->profile().name;
    if (!kernel_name.empty()) backend += ":" + kernel_name;
    profile_->steps.push_back({node.name, qualified_op(node), std::move(backend), std::move(layout), reorders,
                               std::move(shape), us_between(run_start_, t0), us_between(t0, t1)});
  }
  if (memory_.recorder) memory_.recorder->on_step(s, *cand.backend, cand.config, ins, ctx.outputs());
  for (std::size_t o = 0; o < node.outputs.size(); ++o) {
    if (node.outputs[o] == kNoValue) continue;
    if (ctx.outputs()[o].empty())
      throw Error(ErrorCode::Internal, node_label(node) + "kernel produced no output " + std::to_string(o));
    keep_output(node, o, std::move(ctx.outputs()[o]));
  }
  for (ValueId v : step.release_after) {
    slots_[static_cast<std::size_t>(v)] = Tensor();
    std::int64_t& charged = charged_[static_cast<std::size_t>(v)];
    if (charged != 0) memory_.reservation->release(charged);
    charged = 0;
  }
}

}  // namespace wpk
