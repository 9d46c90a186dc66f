#pragma once
// Executor: one run of an ExecutionPlan. It owns the run's value tensors and decides where each
// output's memory comes from:
//   - unplanned (SessionOptions::plan_memory off): every output is its own zero-filled tensor;
//   - recording (first run of a signature): heap tensors, reported to a MemoryRecorder;
//   - planned: views into one arena block at the offsets of the signature's plan.
// Kernels see no difference: they allocate through KernelContext as always.
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "core/limits.hpp"
#include "runtime/execution_plan.hpp"
#include "runtime/memory_budget.hpp"
#include "runtime/memory_recorder.hpp"
#include "runtime/plan_cache.hpp"

namespace wpk {

struct RunMemory {
  const SignaturePlan* plan = nullptr;  // planned mode when it is set and memory_planned
  std::shared_ptr<void> arena;          // the block the plan's offsets point into
  MemoryRecorder* recorder = nullptr;   // recording mode
  bool poison = false;                  // 0xFF-fill intermediates the heap provides
  bool poison_outputs = false;          // the same for graph outputs (diagnostic)
  ShapeLimits limits;                   // every kernel's outputs are checked against them
  // Where the run's heap tensors are charged (each until the run drops it); none: not charged.
  RunReservation* reservation = nullptr;
};

class Executor {
 public:
  // Picks the candidate for a step in a run without a plan (the default, or tuning).
  using Chooser = std::function<StepChoice(std::size_t step, const std::vector<const Tensor*>& inputs)>;

  Executor(const Graph& graph, const ExecutionPlan& plan, RunMemory memory);
  ~Executor();  // leaves its vectors' storage to the thread's next run
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;
  void set_chooser(Chooser chooser) { chooser_ = std::move(chooser); }
  void set_profile(RunProfile* profile, std::chrono::steady_clock::time_point run_start);

  // Runs every step on the graph's inputs (already checked), one per input in graph order.
  void run(const std::vector<const Tensor*>& inputs);
  const Tensor& value(ValueId v) const { return slots_[static_cast<std::size_t>(v)]; }
  // True when `t` shares bytes with this run's arena (it must be copied before it is returned).
  bool in_arena(const Tensor& t) const;
  const std::vector<StepChoice>& choices() const { return choices_; }

 private:
  void run_step(std::size_t s);
  StepChoice choose(std::size_t s, const std::vector<const Tensor*>& inputs);
  KernelContext::OutputAllocator allocator_for(const Node& node);
  void keep_output(const Node& node, std::size_t i, Tensor t);

  const Graph& graph_;
  const ExecutionPlan& plan_;
  RunMemory memory_;
  char* arena_base_ = nullptr;
  std::size_t arena_bytes_ = 0;
  std::vector<Tensor> slots_;
  std::vector<std::int64_t> charged_;  // bytes reserved for each value's heap tensor
  std::vector<StepChoice> choices_;
  // The current step's inputs and outputs, kept from step to step (no allocation per step).
  std::vector<const Tensor*> step_inputs_;
  std::vector<Tensor> step_outputs_;
  Chooser chooser_;
  RunProfile* profile_ = nullptr;
  std::chrono::steady_clock::time_point run_start_;
};

}  // namespace wpk
