#pragma once
// Tuner: picks, per step and input-shape signature, what runs a node: which candidate kernel,
// on how many of the run's threads (StepChoice). In order:
//   1. the tuning record for this op signature and candidate set, when the database has one;
//   2. while measuring (tuning at load, SessionOptions::tuning): a search over the node's
//      configurations (search/strategy.hpp), each measured on the node's real inputs inside the
//      model (one warm-up, then timed repetitions, median); one whose outputs differ from the
//      reference backend's is rejected; the fastest is stored as a record;
//   3. otherwise the cost model's choice (search/cost_model.hpp) among the candidates that run
//      these inputs (Kernel::runs), on all threads, ties to the first registered.
// Thread-safe (the database is; the report has a lock; the rest is const).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/cost_calibration.hpp"
#include "runtime/execution_plan.hpp"
#include "runtime/measurement.hpp"
#include "runtime/tuning_db.hpp"
#include "search/strategy.hpp"
#include "wpk/session.hpp"

namespace wpk {

struct TuningSettings {
  search::Algorithm algorithm = search::Algorithm::Genetic;
  std::uint64_t seed = 0;
  std::size_t trials_per_node = 0;  // 0: every configuration, up to kDefaultTrials
  // Measure every configuration (algorithm Grid, no trial cap), then replay the other strategies
  // on those measurements (TunedNode::strategies).
  bool compare_strategies = false;
  static constexpr double kCompareTrialShare = 0.15;
  static constexpr int kCompareSeeds = 3;
  std::function<void(const TuningProgress&)> on_progress;
  static constexpr std::size_t kDefaultTrials = 64;
  // Sessions that do not tune compile the generated kernels the cost model picks after load
  // (SessionOptions::compile_in_background), so the choice a tuned one must beat may be one.
  bool untuned_compiles_later = false;
  // Told of a candidate waiting to be wanted (Candidate::code_wanted) that a run's shapes rank
  // first, as (step, candidate); meanwhile the best of the others runs.
  std::function<void(std::size_t, std::size_t)> on_code_wanted;
  // Set for the tuner of batch parts: it lists every candidate its records name per node
  // (node_choices_key, under the model's fingerprint, batch_parts.hpp model_fingerprint).
  bool lists_choices = false;
  std::string model_fingerprint;
};

// A winner must be at least this much faster than the untuned choice to replace it.
constexpr double kMinGain = 0.97;

// The thread counts tuning tries for a node of a session of `threads`: the powers of two below
// it, and itself.
std::vector<int> tuning_thread_counts(int threads);

class Tuner {
 public:
  // `db` may be null (no records). `threads` is the session's: part of every key, and the most a
  // node may use.
  // `calibration` (may be null) refines the cost model from this machine's trial logs.
  Tuner(const Graph& graph, const ExecutionPlan& plan, TuningDb* db, int threads, TuningSettings settings = {},
        const CostCalibration* calibration = nullptr);
  StepChoice choose(std::size_t step, const std::vector<const Tensor*>& inputs) const;

  // choose() measures only between these calls, and not past the deadline.
  void start_measuring(std::chrono::steady_clock::time_point deadline);
  void stop_measuring();
  std::vector<TunedNode> report() const;
  int tuned_nodes() const;

  // A step whose record or search gave it another choice than an untuned session's (in-model
  // check, runtime/in_model_check.hpp).
  struct Change {
    std::size_t step;
    StepChoice untuned;
    std::string key;                     // its tuning record
    std::vector<StepChoice> runners_up;  // the next fastest alone, by kMinGain faster than untuned (a search's)
  };
  static constexpr std::size_t kRunnersUp = 2;
  // Those among the steps of a plan the tuner chose (`chosen`, per step) while measuring.
  std::vector<Change> changes(const std::vector<StepChoice>& chosen) const;
  // What the model ran fastest with, per change (the untuned choice, or a runner-up), where it
  // was not the winner: their records name it from now on (with its time inside the model,
  // `us`), and their report rows say so.
  void settle(const std::vector<Change>& changes, const std::vector<StepChoice>& choices, const std::vector<double>& us) const;

 private:
  // Tells settings_.on_code_wanted of the step's candidates waiting to be wanted that these shapes
  // rank ahead of `best_seconds`.
  void want_code_if_first(std::size_t step, const InputShapes& shapes, double best_seconds) const;
  // The thread counts the cost model ranks a candidate at: all the session's, and one where the
  // candidate runs on the host's threads (on tiny tensors starting them costs more than they save).
  std::vector<int> ranked_thread_counts(const Candidate& c) const;
  // The cost model's choice among the step's candidates. as_untuned_session: among those a
  // session that does not tune would have (no generated kernel where another backend runs the
  // node, unless such a session compiles them after load) and ranked by the cost model uncalibrated, as on a
  // machine with no tuning logs: the baseline a tuned choice must beat, in isolation and in the
  // model, so a record never names a choice worse than a fresh session's (the calibration, fed by
  // isolated trials, can rank a kernel first that the model runs slower).
  StepChoice predicted_best(std::size_t step, const std::vector<const Tensor*>& inputs, bool as_untuned_session = false) const;
  // The threads a choice runs on: its own count, or all the session's (0).
  int threads_of(StepChoice c) const { return c.threads > 0 ? c.threads : threads_; }
  StepChoice search_node(std::size_t step, const std::vector<const Tensor*>& inputs, const std::string& key,
                         StepChoice untuned) const;
  // Stores the node's record under `key` and, for batch parts, adds its choice to the node's list
  // (node_choices_key).
  void store_record(const PlanStep& step, const Node& node, const std::string& key, const std::string& identity,
                    int threads, double us, const std::string& summary) const;
  void list_choice(const PlanStep& step, const Node& node, const std::string& identity) const;
  // True when `winner` still beats `untuned` by kMinGain, both measured again; their new times
  // come back in winner_us and untuned_us.
  // Replays random, GA and RL on `measured` (every point of `space`) from the untuned point.
  std::vector<TunedNode::StrategyRun> replay_strategies(const search::Space& space, const search::CostModel& model,
                                                        const std::vector<search::Trial>& measured, std::size_t step) const;
  bool confirmed(std::size_t s, const Node& node, const std::vector<const Tensor*>& inputs, StepChoice winner,
                 StepChoice untuned, double& winner_us, double& untuned_us) const;
  std::string key_for(const PlanStep& step, const Node& node, const std::vector<const Tensor*>& inputs) const;
  std::string describe(const PlanStep& step, StepChoice c) const;
  // How the caches stand when the step runs inside the model (measurement.hpp).
  CacheState cache_state(const Node& node, const std::vector<const Tensor*>& inputs) const;
  // The fused residual input whose bytes the memory plan gives step `s`'s output when candidate
  // `c` runs it (the candidate accumulates into it and no later step reads it), else -1: time_once
  // measures the candidate so.
  int residual_in_place(std::size_t s, const Node& node, const Candidate& c) const;
  void progress(std::size_t trials, double speedup) const;
  void mark_tuned(std::size_t step) const;

  const Graph& graph_;
  const ExecutionPlan& plan_;
  TuningDb* db_;
  int threads_;
  TuningSettings settings_;
  const CostCalibration* calibration_;
  std::size_t sweep_bytes_;  // what a run goes through between two runs of a step (measurement.hpp)
  std::atomic<bool> measuring_{false};
  std::chrono::steady_clock::time_point deadline_;
  mutable std::mutex report_mutex_;
  mutable std::vector<TunedNode> report_;
  mutable TuningProgress progress_;
  mutable std::vector<bool> tuned_;  // per step: a record or a search chose it
  // Per step chosen while measuring: what an untuned session runs it on, and its record.
  struct Chosen {
    StepChoice untuned;
    std::string key, summary;
    std::vector<StepChoice> runners_up;
    std::vector<double> runners_up_us;  // as measured alone
  };
  mutable std::vector<std::optional<Chosen>> chosen_;
};

// Candidate configurations measured by every Tuner of this process (tests check that a warm
// database measures nothing).
std::uint64_t tuning_measurements();


// The tuning records' key for a node: its op signature (cache_key.hpp), the session's threads,
// and every candidate the plan offered it (PlanStep::offered).
std::string tuning_key(const std::string& signature, int threads, const std::string& offered);

// The key a session looks a node's record up by at load (its declared shapes).
std::string declared_tuning_key(const Node& node, const Graph& graph, int threads, const std::string& offered);

// Records are kept per shapes and thread count, but a session prepares its candidates at load
// for its declared shapes: beside the records of batch parts (part shapes, one thread), each
// node has a list of every candidate they name, under a key without shapes or threads, so that a
// later session whose batch runs in parts prepares those too and finds each part's choice
// prepared.
std::string node_choices_key(const std::string& fingerprint, const Node& node, const std::string& offered);
std::vector<std::string> parse_node_choices(const std::string& value);
// The list with `identity` added (the most recent kNodeChoicesKept kept).
std::string add_node_choice(const std::string& value, const std::string& identity);
constexpr std::size_t kNodeChoicesKept = 6;

// A record's winner as stored ("onednn;threads=1") and parsed back: the backend's name and the
// threads (0 when the record names none: all of them).
std::string record_value(const std::string& backend, int threads);
std::pair<std::string, int> parse_record_value(const std::string& value);

}  // namespace wpk
