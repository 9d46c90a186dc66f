#pragma once
// What a Session holds (wpk/session.hpp): shared by the files that implement it.
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/jit/kernel_store.hpp"
#include "core/limits.hpp"
#include "runtime/arena_pool.hpp"
#include "runtime/background_compiler.hpp"
#include "runtime/batch_parts.hpp"
#include "runtime/cost_calibration.hpp"
#include "runtime/execution_plan.hpp"
#include "runtime/memory_budget.hpp"
#include "runtime/plan_cache.hpp"
#include "runtime/run_pool.hpp"
#include "runtime/threads.hpp"
#include "runtime/tuner.hpp"
#include "runtime/tuning_db.hpp"
#include "wpk/session.hpp"

namespace wpk {

inline double us_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

struct Session::Impl {
  Graph graph;
  SessionOptions options;
  int threads = 1;
  std::vector<ValueInfo> inputs;
  std::vector<ValueInfo> outputs;
  std::unique_ptr<ExecutionPlan> plan;
  mutable PlanCache plans;  // filled by run(), which is const: internally synchronised
  std::shared_ptr<ArenaPool> arenas;
  bool poison_outputs = false;
  std::unique_ptr<TuningDb> tuning_db;
  std::unique_ptr<codegen::KernelStore> kernels;  // generated kernels' code, in the cache folder
  std::unique_ptr<Tuner> tuner;
  CostCalibration calibration;  // from the cache folder's trial logs; the plan and tuner read it
  ShapeLimits limits;
  std::unique_ptr<MemoryBudget> budget;
  std::int64_t weight_bytes = 0;  // what the budget holds for the weights
  LoadProfile load;
  TuningCheck tuning_check;
  mutable std::mutex profile_mutex;
  RunProfile last_profile;

  // Batch parts (runtime/batch_parts.hpp): set up when the model's rows are computed apart and
  // the session has threads to spread them over.
  std::string fingerprint;       // of the model as given, for the parts' tuning records
  bool rows_apart = false;       // graph/batch_rows.hpp
  mutable PlanCache part_plans;  // a part's runs, on one thread
  std::unique_ptr<Tuner> part_tuner;
  mutable std::mutex parts_mutex;
  mutable std::map<ShapeSignature, int> parts;  // per signature, the record's choice once looked up
  BatchPartsCheck parts_check;
  mutable std::atomic<int> last_run_parts{1};  // of the most recent run (describe())
  // How long the most recent run took on its runner thread (negative before the first) and the
  // most CPUs one of its steps was given: what a caller waiting for the next run expects
  // (RunPool::execute polls for a short one, and longer for one that leaves the caller's CPU idle).
  mutable std::atomic<double> last_run_us{-1};
  mutable std::atomic<int> last_run_cpus{0};

  // Runs `run` on the process's CPUs with the session's threads, telling the pool how long the
  // last run took and on how many CPUs, and keeping this one's for the next.
  template <typename Run>
  void execute_run(const Run& run) const {
    RunPool::process().execute(
        threads,
        [&] {
          const StepCpusScope cpus;
          const auto started = std::chrono::steady_clock::now();
          run();
          last_run_us.store(us_since(started));
          last_run_cpus.store(cpus.widest());
        },
        last_run_us.load(), last_run_cpus.load());
  }

  // How many parts a run of these inputs goes in: what the tuning record for their shapes says,
  // when they can; else 1 (whole).
  int batch_parts(const std::vector<const Tensor*>& inputs) const {
    if (!rows_apart || !tuning_db) return 1;
    const int possible = possible_batch_parts(inputs, threads);
    if (possible < 2) return 1;
    const ShapeSignature signature = shape_signature(inputs);
    std::lock_guard<std::mutex> lock(parts_mutex);
    auto it = parts.find(signature);
    if (it == parts.end()) {
      if (parts.size() >= PlanCache::kMaxSignatures) parts.clear();
      const auto value = tuning_db->lookup(batch_parts_key(fingerprint, signature, threads));
      it = parts.emplace(signature, value ? parse_batch_parts(*value) : 1).first;
    }
    return it->second == possible ? possible : 1;
  }

  // Last: destroyed first, so its thread stops before anything it uses goes.
  std::unique_ptr<BackgroundCompiler> background;
};

}  // namespace wpk
