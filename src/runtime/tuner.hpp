#pragma once
// Tuner: picks, per step and input-shape signature, which backend's kernel runs a node.
// With tuning off, or one candidate, the cost model's choice (search/cost_model.hpp) among the
// candidates that run these inputs (Kernel::runs), ties to the first registered. With tuning on: the tuning database's choice when it has one; otherwise each
// candidate runs on the node's real inputs (one warm-up, then timed repetitions, median), a
// candidate whose outputs differ from the reference backend's beyond tolerance is rejected, the
// fastest remaining one wins and is stored. Thread-safe (the database is; the rest is const).
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/execution_plan.hpp"
#include "runtime/tuning_db.hpp"

namespace wpk {

class Tuner {
 public:
  // `db` may be null (tuning off). `threads` is part of every key: timings depend on it.
  Tuner(const Graph& graph, const ExecutionPlan& plan, TuningDb* db, int threads);
  int choose(std::size_t step, const std::vector<const Tensor*>& inputs) const;

 private:
  int predicted_best(std::size_t step, const std::vector<const Tensor*>& inputs) const;
  int measure(std::size_t step, const std::vector<const Tensor*>& inputs, const std::string& key) const;
  std::string key_for(const PlanStep& step, const Node& node, const std::vector<const Tensor*>& inputs) const;

  const Graph& graph_;
  const ExecutionPlan& plan_;
  TuningDb* db_;
  int threads_;
};

// Candidate timings run by every Tuner of this process (tests check that a warm database
// measures nothing).
std::uint64_t tuning_measurements();

// True when `got` matches `want` closely enough to stand in for it: same dtype and shape;
// floats within 1e-3 relative plus 1e-4 of the largest |want| (summation order differs between
// backends); NaN where `want` has NaN; other types exactly.
bool outputs_agree(const Tensor& got, const Tensor& want);

}  // namespace wpk
