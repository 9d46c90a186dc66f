#pragma once
// wpk::Session — a loaded, optimized, ready-to-run model.
//
//   wpk::Session s(wpk::load("model.onnx"));
//   auto out = s.run({{"input", wpk::Tensor::borrow(ptr, {1, 3, 224, 224})}});
//   const wpk::Tensor& logits = out.at("logits");
//
// Thread-safety: `run` may be called from many threads at once; each call has its own
// intermediate memory and gives the same results as a call from one thread. Runs execute on
// wpk's runner threads, which every Session of the process shares (SessionOptions::threads).
// Ownership: a Session owns its graph and weights; input tensors are borrowed for the duration of
// `run`; returned tensors own their memory (never a view of the run's arena or of an input).
// Errors: every failure, at load or in `run`, is a wpk::Error; a model or run that would cross
// SessionOptions' bounds (rank, elements, memory_limit) or run out of memory is one with code
// ResourceExhausted, raised before the allocation.
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "wpk/graph.hpp"
#include "wpk/options.hpp"
#include "wpk/tensor.hpp"

// What this header declares is libwpk's API: a shared libwpk exports it (its other symbols are
// hidden).
#pragma GCC visibility push(default)

namespace wpk {

using TensorMap = std::map<std::string, Tensor>;

// A node no registered backend can run, and why.
struct UnsupportedNode {
  std::string node;
  std::string op_type;
  std::string reason;
};
// Every node of `graph` that a Session could not run (empty when the model is fully supported).
std::vector<UnsupportedNode> find_unsupported(const Graph& graph);

class Backend;  // internal (src/backends/kernel.hpp)

// What this process has done so far, over all its sessions (a warm load does neither).
struct ProcessCounters {
  std::uint64_t measured_configurations = 0;  // kernel configurations tuning timed
  std::uint64_t compiled_kernels = 0;         // generated kernels compiled (not found in the kernel store)
};
ProcessCounters process_counters();

// One executed step (a node, possibly a fused group) of one run.
struct StepProfile {
  std::string node;
  std::string op;       // "Conv", or "com.wpk.FusedConv" outside the ONNX domain
  std::string backend;  // which backend's kernel ran it; "onednn:stream" when that kernel ran the
                        // shape on wpk's own weight-streaming code
  std::string layout;   // "NHWC" (attribute channels_last=1), "NCHW" (layout-sensitive op) or "-";
                        // "NHWC>nChw16c" when the kernel works in another layout inside
  int reorders = 0;     // layout changes this step made: 1 for a Transpose, 2 for a kernel that
                        // reorders its input and output (e.g. a Winograd convolution)
  Shape output_shape;   // of output 0
  double start_us = 0;  // from the start of the run's work (after RunProfile::queued_us)
  double duration_us = 0;
};
struct RunProfile {
  std::vector<StepProfile> steps;  // in execution order
  double total_us = 0;             // the whole run(), input checks and output copies included
  double queued_us = 0;            // of total_us, waiting for CPUs that other runs held
  // The batch ran in this many parts at once, one a thread (Session, "batch parts"); `steps` are
  // then the first part's, on its rows.
  int batch_parts = 1;
};

// Where a Session's construction went (Session::load_profile), in milliseconds. Reading the
// model file (wpk::load) comes before and is not part of it.
struct LoadProfile {
  double optimize_ms = 0;  // checks and graph rewrites (constant folding, fusion, layouts)
  double prepare_ms = 0;   // kernels prepared for every node: weights packed, code obtained
  double compile_ms = 0;   // of prepare_ms: generated kernels' code, from the kernel store or compiled
  double tune_ms = 0;      // tuning at load (SessionOptions::tuning)
  double total_ms = 0;     // the whole construction
};

// Generated kernels a session compiles after load (SessionOptions::compile_in_background), its
// control-flow bodies' included.
struct BackgroundCompilation {
  int kernels = 0;       // nodes' choices (the cost model's or a record's) the store lacked at load,
                         // and large-batch alternatives a run's shapes have wanted since
  int ready = 0;         // of those, compiled: runs choose their kernels again, with them
  int failed = 0;        // could not be compiled (the log says why): their nodes keep what they ran
  bool finished = true;  // false while the compilers run
  double seconds = 0;    // since the end of load: until finished, or until now
};

// What a Session runs: per step the node and the backend chosen, plus the memory plan of the
// most recent input-shape signature (zeros until a run has planned one).
struct StepSummary {
  std::string node;
  std::string op;  // as in StepProfile
  std::string domain;
  std::string backend;
  std::string layout;
  std::vector<std::string> fused_from;  // the model ops a fused node stands for (Node::fused_from)
  int threads = 0;  // the threads its configuration runs on; 0: all the session's (in batch
                    // parts: all of a part's one)
};
struct PlanSummary {
  std::vector<StepSummary> steps;
  bool memory_planned = false;
  std::size_t arena_bytes = 0;  // one arena holds every intermediate of a run
  std::size_t naive_bytes = 0;  // what one allocation per intermediate would take
  // The most recent run went in this many parts of its batch (RunProfile::batch_parts): the
  // steps and memory plan are then a part's.
  int batch_parts = 1;
};

// Tuning at load's in-model check (SessionOptions::tuning): the whole model run on each plan in
// one session, alternately; medians in milliseconds. All zero when no tuned choice differed from
// the untuned one.
struct TuningCheck {
  int changed = 0;     // nodes whose tuned choice (measured or from a record) was not the untuned one
  int kept = 0;        // of those, nodes that keep a tuned option
  int runners_up = 0;  // of those, nodes that keep a runner-up
  int runs = 0;        // runs of each plan in the final comparison
  double kept_ms = 0, untuned_ms = 0, every_tuned_ms = 0;
};

// Tuning at load's choice between running a batch whole, each node spread over the session's
// threads, and in parts of its rows, one part a thread at once (possible when every output row is
// computed from its input row alone and the batch divides by the threads). Both timed on the
// whole model in pairs of runs; medians in milliseconds. All zero when it was not measured.
struct BatchPartsCheck {
  int parts = 0;        // the parts it tried
  bool chosen = false;  // in parts from now on (a tuning record says so to every later session):
                        // the median of the pairs' ratios (parts / whole) is below 0.97
  int runs = 0;         // runs of each way
  double whole_ms = 0, parts_ms = 0;
  double ratio = 0;
};

// A node that tuning at load searched (SessionOptions::tuning), with what it found.
struct TunedNode {
  std::string node;
  std::string op;       // as in StepProfile, with the input shapes: "Conv float32[1, 3, 224, 224] ..."
  std::string untuned;  // the cost model's choice, as "backend[:kernel] threads=N"
  std::string winner;   // the measured winner, in the same form
  double untuned_us = 0;
  double winner_us = 0;
  std::size_t trials = 0;  // configurations measured
  // With tuning_algorithm "compare": each strategy's replay on the grid's measurements.
  struct StrategyRun {
    std::string algorithm;  // "random", "ga", "rl"
    std::uint64_t seed = 0;
    std::size_t trials = 0;  // the budget it had, the cost model's choice included
    double best_us = 0;      // the best it found
  };
  std::vector<StrategyRun> strategies;
  double grid_best_us = 0;  // the best of those measurements (the strategies' yardstick)
  // Timed inside the whole model after the search (the tuned and the untuned choices run
  // alternately), the model ran no faster with the winner: the node keeps the untuned choice,
  // and so does its tuning record.
  bool slower_in_model = false;
  // The model ran fastest with a configuration that measured next fastest alone: `winner` and
  // winner_us are that one's, and the record names it.
  bool runner_up_in_model = false;
};

struct SignaturePlan;  // runtime/plan_cache.hpp

class Session {
 public:
  explicit Session(Graph graph, SessionOptions options = {});
  ~Session();
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;

  // Runs the model. Every graph input must be given, with its declared dtype and a shape that
  // agrees with the declared one (symbolic dimensions take any size, consistently).
  TensorMap run(const TensorMap& inputs) const;
  // The same, filling `profile` (when not null) with per-step timings of this call.
  TensorMap run(const TensorMap& inputs, RunProfile* profile) const;
  // The same, stopping with ErrorCode::Cancelled at options' deadline or cancel flag.
  TensorMap run(const TensorMap& inputs, const RunOptions& options, RunProfile* profile = nullptr) const;
  // With SessionOptions::profile: the profile of the most recent run() to finish.
  RunProfile last_profile() const;
  // What tuning at load measured and chose, node by node (empty without tuning, or when the
  // tuning records in the cache folder already had every answer).
  std::vector<TunedNode> tuning_report() const;
  // Nodes whose configuration came from measurement or a tuning record, not the cost model (a
  // node counts once, whatever its shapes).
  int tuned_nodes() const;
  TuningCheck tuning_check() const;
  BatchPartsCheck batch_parts_check() const;
  // Steps, backends and memory plan (see PlanSummary).
  PlanSummary describe() const;
  LoadProfile load_profile() const;
  // Where compiling after load stands; the wait returns once it has finished (at once when
  // nothing compiles). A benchmark waits before it times: until then runs use other kernels.
  BackgroundCompilation background_compilation() const;
  BackgroundCompilation wait_for_background_compilation() const;
  // OpenMP threads each run uses (SessionOptions::threads resolved).
  int threads() const;

  const std::vector<ValueInfo>& inputs() const;
  const std::vector<ValueInfo>& outputs() const;  // in model order
  // The optimized graph this session runs. Weights a backend keeps packed in its own layout are
  // no longer held by it (initializer() returns nullptr for them) unless tuning is on, and the
  // bodies of If, Loop and Scan nodes keep their inputs and outputs only (each runs as a session
  // of its own).
  const Graph& graph() const;

 private:
  // Over a chosen backend list instead of registered_backends() (tests of dispatch and tuning).
  Session(Graph graph, SessionOptions options, const std::vector<const Backend*>& backends);
  friend struct SessionFactory;  // src/runtime/session_factory.hpp
  TensorMap run_with(const TensorMap& inputs, const RunOptions* options, RunProfile* profile) const;
  // The inputs in the order of inputs(), the outputs in the order of outputs(), without the
  // names: a control-flow body's run at each iteration (SessionFactory::run_in_order).
  std::vector<Tensor> run_in_order(const std::vector<Tensor>& inputs) const;
  // The run once its inputs are checked and its CPUs are free (the times they took, for its
  // profile): one input per graph input, in its order; the graph's outputs in its order.
  // `forced`: run on that plan's choices and memory (the in-model check of tuning at load),
  // neither looking up nor storing the signature's plan; a plan with no memory plan yet gets the
  // one this run records, as a signature's first run does.
  std::vector<Tensor> run_checked(const std::vector<const Tensor*>& inputs, const RunOptions* options, RunProfile* profile,
                                  double checks_us, double queued_us, SignaturePlan* forced = nullptr,
                                  bool batch_part = false) const;
  // The run as `parts` parts of the inputs' rows at once, one a thread, each on the plans of batch
  // parts (run_checked's batch_part); the outputs joined. Called with the session's CPUs held.
  std::vector<Tensor> run_in_parts(const std::vector<const Tensor*>& inputs, int parts, const RunOptions* options,
                                   RunProfile* profile, double checks_us, double queued_us) const;
  void tune_at_load(double budget_seconds);
  // After tuning at load: drops tuned choices the whole model does not run faster with
  // (runtime/in_model_check.hpp).
  void check_tuning_in_model(const TensorMap& inputs);
  // After that: whether this batch runs faster in parts (BatchPartsCheck), its record stored.
  void tune_batch_parts(const TensorMap& inputs, std::chrono::steady_clock::time_point deadline);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace wpk

#pragma GCC visibility pop
