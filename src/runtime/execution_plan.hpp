#pragma once
// ExecutionPlan: the graph compiled into ordered steps. Each step keeps the candidates it
// prepared (backend, config, kernel: the first is the record's or the cost model's choice at the
// declared shapes; the tuner may pick another per input-shape signature), plus value lifetimes
// so intermediates are released, or their arena bytes reused, as soon as nothing reads them.
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backends/kernel.hpp"
#include "runtime/candidate_cost.hpp"

namespace wpk {

namespace codegen {
class KernelStore;
}  // namespace codegen

// A candidate prepared the first time a run asks for it rather than at load (see ExecutionPlan):
// the first caller prepares it, concurrent ones wait for that.
class DeferredKernel {
 public:
  DeferredKernel(const Graph& graph, std::size_t node_index, std::vector<std::string> disabled)
      : graph_(graph), node_index_(node_index), disabled_(std::move(disabled)) {}
  // The kernel, prepared now if it was not yet; null when it cannot be (logged once, not retried;
  // anything else thrown, out of memory say, goes to the caller and the next one tries again).
  const Kernel* get(const Backend& backend, const std::string& config) const;
  // The kernel if it has been prepared, without preparing it.
  const Kernel* peek() const { return ready_.load(std::memory_order_acquire); }

 private:
  const Graph& graph_;  // the session's, which outlives its plan
  std::size_t node_index_;
  std::vector<std::string> disabled_;
  mutable std::mutex mutex_;
  mutable bool tried_ = false;
  mutable std::unique_ptr<Kernel> kernel_;
  mutable std::atomic<const Kernel*> ready_{nullptr};
};

struct Candidate {
  const Backend* backend;
  std::unique_ptr<Kernel> kernel;  // null while a deferred candidate is not prepared
  std::string config;  // one of backend->configs(); "" when it offers none
  std::shared_ptr<DeferredKernel> deferred = nullptr;  // set for a candidate prepared at first use
  // Set for a generated kernel prepared at load whose code compiles after it
  // (PlanOptions::compile_later): true until ExecutionPlan::attach_code gives it its code. Runs
  // never pick it before.
  std::shared_ptr<std::atomic<bool>> awaiting_code = nullptr;
  bool awaiting() const { return awaiting_code && awaiting_code->load(std::memory_order_acquire); }
  // Set for an awaiting candidate kept only for large batches (the node's first choice is
  // another): false until a run's shapes rank it first (ExecutionPlan::want_code). Until then
  // nothing compiles it: a process that never runs such a batch starts no compiler for it.
  std::shared_ptr<std::atomic<bool>> code_wanted = nullptr;
  bool waits_to_be_wanted() const { return code_wanted && !code_wanted->load(std::memory_order_acquire); }
  // "reference", or "onednn(algorithm=winograd)" with a config: how tuning records and profiles
  // name it.
  std::string identity() const { return candidate_identity(*backend, config); }
  // The kernel to run: prepared at load, or a deferred one prepared now; null when it cannot be.
  const Kernel* ready() const {
    if (awaiting()) return nullptr;
    return kernel ? kernel.get() : deferred ? deferred->get(*backend, config) : nullptr;
  }
  // The kernel if it is prepared already (for its profile), without preparing it.
  const Kernel* prepared() const { return kernel ? kernel.get() : deferred ? deferred->peek() : nullptr; }
};

// How the plan prepares candidates (see ExecutionPlan).
struct PlanOptions {
  bool release_owned_constants = false;
  std::vector<std::string> disabled;  // SessionOptions::disabled_kernels, resolved
  bool every_config = false;          // tuning: every config of every backend is a candidate
  int threads = 1;                    // the session's, for the cost model
  int preparing_threads = 0;          // nodes prepared at once (0: threads)
  // Candidates other than the first (the large-batch choice, other backends' fallbacks) are
  // prepared when a run first picks them, not at load; the graph must outlive the plan.
  bool defer_alternatives = false;
  const CostCalibration* calibration = nullptr;  // this machine's refinement of the cost model
  // The identities of the candidates tuning records name for the node (given the node and its
  // offered candidates; "" where none): first the one for its declared shapes (symbolic dims as
  // 1), prepared instead of the cost model's choice there; then any others a run may pick (in
  // batch parts), prepared as alternatives.
  std::function<std::vector<std::string>(const Node&, const std::string& offered)> recorded_choices;
  // Where a generated kernel whose code the kernel store lacks is the node's choice (the cost
  // model's, or a tuning record's) and other backends than the reference run the node: false
  // leaves it out (a record's choice is compiled at load); true prepares it all the same, as the
  // step's last candidate, awaiting its code (Candidate::awaiting_code), for the session to
  // compile after load (runtime/background_compiler.hpp).
  bool compile_later = false;
  // A generated kernel the node chooses is compiled at load when the store lacks it, whatever
  // chose it (a tuning session's loop bodies: compiled after load, their code would be lost with
  // the session, and every later process would compile it again). Overrides compile_later.
  bool compile_choices = false;
  // Where generated kernels' code is found or compiled into (runtime/kernel_compilation.hpp),
  // asked once, when a prepared kernel first needs code; unset: a store private to this process.
  std::function<codegen::KernelStore*()> kernel_store;
  // A tuning session's budget: its batch compile of every configuration stops here, and the
  // configurations not compiled by then are left out of this session (a later tuning session finds
  // the ones compiled in the store and compiles the rest). Unset: no limit.
  std::optional<std::chrono::steady_clock::time_point> compile_deadline;
};

// What runs a step: which of its candidates, on how many of the run's threads (0: all of them;
// fewer leave the others idle, never more).
struct StepChoice {
  int candidate = 0;
  int threads = 0;
};
// The same candidate on the same threads as written (0, all of them, is not a count).
inline bool operator==(StepChoice a, StepChoice b) { return a.candidate == b.candidate && a.threads == b.threads; }
inline bool operator!=(StepChoice a, StepChoice b) { return !(a == b); }

struct PlanStep {
  std::size_t node_index;
  std::vector<Candidate> candidates;   // never empty; [0] the record's or cost model's choice
  // Every candidate the backends offer the node, prepared or not ("cpu(kernel=...)@1,..."): the
  // tuning records' key, the same in sessions that tune and sessions that do not.
  std::string offered;
  std::vector<ValueId> release_after;  // values whose last reader is this step
  std::string layout;                  // "NHWC", "NCHW" or "-" (see node_layout)
};

class ExecutionPlan {
 public:
  // Asks every backend for each node; throws Unsupported listing every op no backend runs.
  ExecutionPlan(const Graph& graph, const std::vector<const Backend*>& backends);
  // The same, with options. Candidates are ranked by the cost model (runtime/candidate_cost.hpp)
  // at the declared shapes before any is prepared. With every_config (tuning) all are prepared.
  // Otherwise: the one a tuning record names for the declared shapes (symbolic dims as 1), else
  // the cost model's best there; with symbolic dims, also the best at kLargeBatch among those
  // whose packed weights serve every shape (KernelProfile::shape_specific_weights) when the
  // first is predicted well behind it there; unless one of those packs the node's weights, the
  // best of each other backend too (the tuner picks among them per input shape); where an
  // input's shape is unknown even with symbolic dims (in a graph whose inputs declare every dim),
  // every candidate not generated, under defer_alternatives none but the reference prepared at
  // load. With
  // defer_alternatives, those after the first prepared one wait for a run that picks them (a
  // generated kernel's code is never deferred); a constant a deferred candidate reads stays.
  // Nodes are prepared on up to preparing_threads threads at once, with the same result as one
  // after another: the same candidates in the same order, the same constants freed.
  // With release_owned_constants, frees from `graph` each constant as soon as every candidate
  // of every step reading it owns a packed copy (Kernel::owns_input). Freeing while preparing,
  // not after, keeps a model's weights from being resident twice (as loaded and as packed) even
  // at the load peak.
  // `disabled` names candidates to leave out: "backend" for every kernel of a backend,
  // "backend:kernel" for one kernel (KernelProfile::name).
  ExecutionPlan(Graph& graph, const std::vector<const Backend*>& backends, const PlanOptions& options);
  const std::vector<PlanStep>& steps() const { return steps_; }

  // The step that writes v, or -1 for graph inputs and initializers.
  int producer(ValueId v) const { return producer_[static_cast<std::size_t>(v)]; }
  // The last step that reads v: steps().size() for graph outputs (the caller reads them after
  // the last step), the producing step itself for values nothing reads.
  int last_reader(ValueId v) const { return last_reader_[static_cast<std::size_t>(v)]; }
  bool is_graph_output(ValueId v) const { return is_output_[static_cast<std::size_t>(v)]; }
  // The most inputs and outputs any step's node has.
  std::size_t most_step_inputs() const { return most_step_inputs_; }
  std::size_t most_step_outputs() const { return most_step_outputs_; }
  // A constant the graph no longer holds (its kernels own packed copies); runs pass nullptr.
  bool is_released(ValueId v) const { return !released_.empty() && released_[static_cast<std::size_t>(v)]; }
  std::size_t released_bytes() const { return released_bytes_; }
  // Of the construction, the time generated kernels' code took (kernel store or compiler).
  double compile_seconds() const { return compile_seconds_; }
  // The candidates awaiting their code (PlanOptions::compile_later), as (step, candidate); not
  // those that wait to be wanted.
  std::vector<std::pair<std::size_t, std::size_t>> awaiting_code() const;
  // Marks a candidate that waits to be wanted as wanted: true the first time (its code is then
  // among awaiting_code()), false if it was wanted already or never waited.
  bool want_code(std::size_t step, std::size_t candidate) const;
  // Gives an awaiting candidate its code; from then on runs may pick it. Safe while runs go on
  // (they do not look at the candidate until it stops awaiting); call it once per candidate.
  void attach_code(std::size_t step, std::size_t candidate, std::shared_ptr<const codegen::LoadedKernel> code);

 private:
  void prepare_steps(const Graph& graph, const std::vector<const Backend*>& backends, Graph* release_from,
                     const PlanOptions& options);
  // Frees the constants no step still to come reads; their ids go to `freed`, for the caller to
  // erase from the graph once no other thread looks constants up in it.
  void release_if_owned(Graph& graph, std::size_t step, std::vector<int>& unowned_readers, std::vector<ValueId>& freed);
  void compute_lifetimes(const Graph& graph);

  std::vector<PlanStep> steps_;
  std::vector<int> producer_;
  std::vector<int> last_reader_;
  std::vector<bool> is_output_;
  std::vector<bool> released_;
  std::size_t most_step_inputs_ = 0, most_step_outputs_ = 0;
  std::size_t released_bytes_ = 0;
  double compile_seconds_ = 0;
  // The parts backend (runtime/group_parts_backend.hpp) bound to this plan's backends and
  // options, standing in for the registry's unbound one; candidates point at it.
  std::shared_ptr<const Backend> parts_backend_;
};

// The backends this build registers, in order of preference (explicit, no static registration).
std::vector<const Backend*> registered_backends();

// `name` ("backend" or "backend:kernel") is listed in `disabled` itself, or its kernel's family
// is ("gen:f32_matmul" for "gen:f32_matmul__avx512_4x32_prows").
bool listed(const std::vector<std::string>& disabled, const std::string& name);
// Whether `disabled` leaves out `kernel` (a profile's name; "" names none) of `backend`.
bool kernel_disabled(const std::vector<std::string>& disabled, const Backend& backend, const std::string& kernel);

// SessionOptions::disabled_kernels and $WPK_DISABLE_KERNELS (comma-separated) together; throws
// InvalidArgument for an entry whose backend part names no backend of `backends`.
std::vector<std::string> resolve_disabled_kernels(const std::vector<std::string>& configured,
                                                  const std::vector<const Backend*>& backends);

// Why no backend runs `node`, or "" when one does.
std::string why_unsupported(const Node& node, const Graph& graph);

// "NHWC" when the node has channels_last=1, "NCHW" for the other layout-sensitive ops
// (convolution, pooling, normalization over channels), "-" for the rest.
std::string node_layout(const Node& node);

// "Conv", or "com.wpk.FusedConv" for ops outside the ONNX domain.
std::string qualified_op(const Node& node);

}  // namespace wpk
