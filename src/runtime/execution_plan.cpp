#include "runtime/execution_plan.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "graph/fused_ops.hpp"
#include "graph/subgraph.hpp"
#include "runtime/candidate_cost.hpp"
#include "runtime/control_flow.hpp"
#include "runtime/group_parts_backend.hpp"
#include "runtime/kernel_compilation.hpp"
#include "runtime/logging.hpp"
#include "runtime/run_pool.hpp"
#include "runtime/threads.hpp"
#include "runtime/workload.hpp"
#include "wpk/session.hpp"

namespace wpk {

std::string why_unsupported(const Node& node, const Graph& graph) {
  // A control-flow node's reason names what in its bodies no backend runs.
  if (is_control_flow(node)) return control_flow_backend().why_unsupported(node, graph);
  std::string why;
  for (const Backend* b : registered_backends()) {
    why = b->why_unsupported(node, graph);
    if (why.empty()) return "";
  }
  return why;
}

std::vector<UnsupportedNode> find_unsupported(const Graph& graph) {
  std::vector<UnsupportedNode> out;
  for (const Node& n : graph.nodes()) {
    std::string why = why_unsupported(n, graph);
    if (!why.empty()) out.push_back({n.name, n.op_type, why});
  }
  return out;
}

std::string node_layout(const Node& node) {
  if (node.attr_int("channels_last", 0) == 1) return "NHWC";
  static const std::set<std::string> sensitive = {
      "Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "FusedConv", "MaxPool", "AveragePool", "LpPool",
      "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool", "BatchNormalization", "InstanceNormalization", "LRN",
      "DepthToSpace", "SpaceToDepth", "MaxRoiPool", "RoiAlign", "MaxUnpool"};
  return sensitive.count(node.op_type) ? "NCHW" : "-";
}

std::string qualified_op(const Node& node) {
  if (node.domain.empty() || node.domain == "ai.onnx") return node.op_type;
  return node.domain + "." + node.op_type;
}

namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

// A kernel's family: its name before "__" ("f32_matmul" for "f32_matmul__avx512_4x32_prows");
// disabled_kernels may name it to leave out every kernel of the family.
std::string kernel_family(const std::string& kernel) { return kernel.substr(0, kernel.find("__")); }

}  // namespace

std::vector<std::string> resolve_disabled_kernels(const std::vector<std::string>& configured,
                                                  const std::vector<const Backend*>& backends) {
  std::vector<std::string> all = configured;
  if (const char* env = std::getenv("WPK_DISABLE_KERNELS")) {
    std::string item;
    for (const char* c = env;; ++c) {
      if (*c == ',' || *c == '\0') {
        if (!item.empty()) all.push_back(item);
        item.clear();
        if (*c == '\0') break;
      } else if (*c != ' ') {
        item += *c;
      }
    }
  }
  for (const std::string& entry : all) {
    const std::size_t colon = entry.find(':');
    const std::string backend = entry.substr(0, colon);
    const auto found = std::find_if(backends.begin(), backends.end(), [&](const Backend* b) { return b->name() == backend; });
    if (found == backends.end()) {
      std::vector<std::string> names;
      for (const Backend* b : backends) names.push_back(b->name());
      throw Error(ErrorCode::InvalidArgument, "disabled kernel '" + entry + "' names no backend (there are " + join(names) +
                                                  "; from SessionOptions::disabled_kernels or WPK_DISABLE_KERNELS)");
    }
    if (colon == std::string::npos) continue;
    // A kernel's name, or its family's (the name before "__"), as its backend lists them.
    const std::vector<std::string> kernels = (*found)->kernel_names();
    const std::string kernel = entry.substr(colon + 1), family = kernel_family(kernel);
    if (std::find(kernels.begin(), kernels.end(), kernel) == kernels.end() &&
        std::find(kernels.begin(), kernels.end(), family) == kernels.end())
      throw Error(ErrorCode::InvalidArgument,
                  "disabled kernel '" + entry + "' names no kernel of " + backend +
                      (kernels.empty() ? " (it has none of its own to leave out)" : " (it has " + join(kernels) + ")"));
  }
  return all;
}

// `name` ("backend" or "backend:kernel") is listed itself, or its kernel's family is
// ("gen:f32_matmul" for "gen:f32_matmul__avx512_4x32_prows").
bool listed(const std::vector<std::string>& disabled, const std::string& name) {
  const auto in = [&disabled](const std::string& n) { return std::find(disabled.begin(), disabled.end(), n) != disabled.end(); };
  const std::size_t colon = name.find(':');
  return in(name) || (colon != std::string::npos && in(name.substr(0, colon + 1) + kernel_family(name.substr(colon + 1))));
}

// Whether disabled_kernels leaves out `kernel` (a profile's name; "" names none) of `backend`.
bool kernel_disabled(const std::vector<std::string>& disabled, const Backend& backend, const std::string& kernel) {
  return !kernel.empty() && listed(disabled, backend.name() + ":" + kernel);
}

const Kernel* DeferredKernel::get(const Backend& backend, const std::string& config) const {
  if (const Kernel* k = ready_.load(std::memory_order_acquire)) return k;
  std::lock_guard<std::mutex> lock(mutex_);
  if (tried_) return ready_.load(std::memory_order_relaxed);
  const Node& n = graph_.nodes()[node_index_];
  try {
    std::unique_ptr<Kernel> k = backend.prepare(n, graph_, config);
    tried_ = true;
    const std::string name = k->profile().name;
    if (kernel_disabled(disabled_, backend, name)) {
      logger().debug("{}{}:{} is disabled", node_label(n), backend.name(), name);
      return nullptr;
    }
    kernel_ = std::move(k);
    logger().debug("{}prepared {} at first use", node_label(n), candidate_identity(backend, config));
  } catch (const Error& e) {
    tried_ = true;
    logger().debug("{}backend {} failed to prepare at first use: {}", node_label(n), candidate_identity(backend, config), e.what());
    return nullptr;
  }
  ready_.store(kernel_.get(), std::memory_order_release);
  return kernel_.get();
}

ExecutionPlan::ExecutionPlan(const Graph& graph, const std::vector<const Backend*>& backends) {
  prepare_steps(graph, backends, nullptr, PlanOptions{});
}

ExecutionPlan::ExecutionPlan(Graph& graph, const std::vector<const Backend*>& backends, const PlanOptions& options) {
  prepare_steps(graph, backends, options.release_owned_constants ? &graph : nullptr, options);
}

namespace {

// See prepare_steps: how much faster at kLargeBatch a second candidate must be predicted.
constexpr double kSecondChoiceGain = 1.25;

// One (backend, config) a node is offered, described once at the declared shapes and, with
// symbolic dims, at kLargeBatch (a description may cost a library query: oneDNN's Winograd
// scratchpad).
struct Option {
  const Backend* backend;
  std::string config;
  std::string identity;
  KernelProfile at_declared;
  std::optional<KernelProfile> at_large;
  double seconds = 0;  // predicted at the declared shapes
};

// The option the cost model ranks first at the large batch among those whose packed weights serve
// every input shape (a second packing per shape beside a kept loaded copy is no way to serve
// sizes the session does not know); nullopt when none does.
std::optional<std::size_t> cheapest_for_any_shape(const std::vector<Option>& options, const Node& node,
                                                  const InputShapes& large, int threads,
                                                  const CostCalibration* calibration) {
  std::optional<std::size_t> best;
  double best_seconds = 0;
  for (std::size_t i = 0; i < options.size(); ++i) {
    if (options[i].at_large->shape_specific_weights) continue;
    const double t = predicted_seconds_on_best_threads(*options[i].backend, *options[i].at_large, options[i].identity, node,
                                                       large, threads, calibration);
    if (!best || t < best_seconds) {
      best = i;
      best_seconds = t;
    }
  }
  return best;
}

// Whether an input the graph computes has a shape shape inference could not give, not even with
// symbolic dims, in a graph whose inputs declare every dim (a number or a symbol): the size then
// comes from values, and the cost model has no workload to price at load. (Inputs with
// placeholder dims leave everything after them unknown; their nodes are planned as before.)
bool shape_unknown_at_load(const Graph& graph, const Node& n, const InputShapes& declared) {
  bool unknown = false;
  for (std::size_t i = 0; i < declared.size() && i < n.inputs.size(); ++i)
    unknown = unknown || (!declared[i] && n.inputs[i] != kNoValue);
  if (!unknown) return false;
  for (ValueId v : graph.inputs()) {
    const ValueInfo& info = graph.value(v);
    if (!info.dims) return false;
    for (const Dim& d : *info.dims)
      if (!d.is_static() && d.symbol.empty()) return false;
  }
  return true;
}

// Nodes whose preparation must stay on the thread that builds the plan: control flow prepares
// its bodies as sessions (which read that thread's body options and hold its CPUs), and a device
// region times kernels on its GPU.
bool prepares_on_calling_thread(const Node& n) {
  for (const auto& [name, a] : n.attributes)
    if (a.kind() == Attribute::Kind::Graph) return true;
  return false;
}

// Whether a generated kernel's source prints (so that it can be compiled later).
bool printable(const Kernel& kernel) {
  try {
    return kernel.source() != nullptr;
  } catch (const std::exception&) {
    return false;
  }
}

// One node's candidates, prepared; `step.candidates` empty, with `why`, when none could be.
struct PreparedNode {
  PlanStep step;
  std::string why;
  double ms = 0;  // how long preparing took, for the debug log
};

PreparedNode prepare_node(const Graph& graph, std::size_t i, const std::vector<const Backend*>& backends,
                          const PlanOptions& options, const std::function<bool(Kernel&, std::string&, bool)>& obtain_code) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::string>& disabled = options.disabled;
  const Node& n = graph.nodes()[i];
  PlanStep step{i, {}, "", {}, node_layout(n)};
  std::string why;
  std::vector<Option> options_offered;
  const InputShapes declared = *shapes_with_symbolic_dims_as(n, graph, 1);
  const std::optional<InputShapes> large = shapes_with_symbolic_dims_as(n, graph, kLargeBatch);
  const bool bf16_activations = has_bf16_activations(n, graph);
  for (const Backend* b : backends) {
    if (listed(disabled, b->name())) {
      if (why.empty()) why = "every backend that could run it is disabled (disabled_kernels)";
      continue;
    }
    if (bf16_activations && !b->takes_bf16_activations(n, graph)) {
      why = b->name() + " does not take bfloat16 activations";
      continue;
    }
    const std::string reason = b->why_unsupported(n, graph);
    if (!reason.empty()) {
      why = reason;  // the last backend's reason: the reference backend names op and opset
      continue;
    }
    std::vector<std::string> configs = b->configs(n, graph);
    if (configs.empty()) configs = {""};
    for (const std::string& c : configs) {
      Option o{b, c, candidate_identity(*b, c), candidate_profile(*b, c, n, graph, declared, options.threads), {}};
      // A disabled kernel its backend names before preparing is neither offered nor packed
      // (the others are dropped once prepared, below).
      if (kernel_disabled(disabled, *b, o.at_declared.name)) {
        why = b->name() + ":" + o.at_declared.name + " is disabled";
        continue;
      }
      o.seconds =
          predicted_seconds_on_best_threads(*b, o.at_declared, o.identity, n, declared, options.threads, options.calibration);
      if (large) o.at_large = candidate_profile(*b, c, n, graph, *large, options.threads);
      step.offered += o.identity + "@" + b->version() + ",";
      options_offered.push_back(std::move(o));
    }
  }
  // Ranked at the declared shapes; a stable sort keeps registration order among equals.
  std::stable_sort(options_offered.begin(), options_offered.end(),
                   [](const Option& a, const Option& b) { return a.seconds < b.seconds; });
  if (options_offered.size() > 1 && logger().should_log(spdlog::level::trace)) {
    std::string ranked;
    for (const Option& o : options_offered) ranked += fmt::format("{}{} {:.3g}", ranked.empty() ? "" : ", ", o.identity, o.seconds);
    logger().trace("{}ranked {}", node_label(n), ranked);
  }
  // The choice at the declared shapes: what a tuning record names, else the cost model's best;
  // first, so it is the step's default candidate.
  std::vector<std::string> recorded;
  if (options.recorded_choices && !options_offered.empty()) {
    recorded = options.recorded_choices(n, step.offered);
    const auto it = std::find_if(options_offered.begin(), options_offered.end(),
                                 [&](const Option& o) { return !recorded.empty() && o.identity == recorded.front(); });
    if (it != options_offered.end()) std::rotate(options_offered.begin(), it, it + 1);
  }
  const auto is_recorded = [&](const Option& o) {
    return std::find(recorded.begin(), recorded.end(), o.identity) != recorded.end();
  };
  // Compiling at load is the tuner's: without tuning, a generated kernel the cost model picked
  // runs from code the kernel store already holds, unless a record chose it or no library or
  // hand-written kernel runs the node (a first load takes no compiler's seconds for a guess).
  // With compile_later, one the store lacks waits for code compiled after load, a record's choice
  // too (a store emptied by a new compiler does not make the load wait for all of a model's).
  bool only_generated = true;
  for (const Option& o : options_offered)
    only_generated = only_generated && (o.backend->generates_code() || o.backend->name() == "reference");
  const auto may_compile = [&](const Option& o) {
    return options.every_config || only_generated || options.compile_choices ||
           (is_recorded(o) && !options.compile_later);
  };
  std::vector<bool> wanted(options_offered.size(), options.every_config);
  std::vector<bool> large_only(options_offered.size(), false);  // wanted for large batches alone
  // Where an input's shape is unknown until it arrives (a size the graph computes from values),
  // the ranking above priced a workload it could not see: every candidate that can wait stays,
  // unprepared, for the tuner to rank at the first run's shapes (so only the one it picks packs
  // the weights). The reference is prepared now: the node is known to run, and a pick that
  // cannot be prepared falls back on it.
  const bool wait_for_shapes =
      options.defer_alternatives && !options.every_config && shape_unknown_at_load(graph, n, declared);
  if (wait_for_shapes)
    for (std::size_t o = 0; o < options_offered.size(); ++o) wanted[o] = wanted[o] || !options_offered[o].backend->generates_code();
  if (!options_offered.empty()) {
    wanted[0] = true;
    for (std::size_t o = 1; o < options_offered.size(); ++o) wanted[o] = wanted[o] || is_recorded(options_offered[o]);
    // A second packing of the weights is worth its memory only where the first choice is
    // predicted well behind at a large batch.
    if (large)
      if (const auto best = cheapest_for_any_shape(options_offered, n, *large, options.threads, options.calibration)) {
        const auto at_large = [&](const Option& o) {
          return predicted_seconds_on_best_threads(*o.backend, *o.at_large, o.identity, n, *large, options.threads,
                                                   options.calibration);
        };
        if (at_large(options_offered[0]) > kSecondChoiceGain * at_large(options_offered[*best])) {
          large_only[*best] = !wanted[*best];
          wanted[*best] = true;
        }
      }
  }
  bool packs_weights = false;  // a prepared candidate packs per shape, beside the loaded copy
  std::vector<Candidate> awaiting;  // generated kernels whose code compiles after load, last
  const auto prepare = [&](const Option& o, bool fallback, bool for_large_batches) {
    // A fallback must be ready to run; compiling one only to stand by costs every load.
    if (fallback && o.backend->generates_code()) return;
    // Once the node has a kernel, the others wait for a run that picks them (the large-batch
    // choice, other backends' fallbacks); a generated one's code is had at load or not at all.
    const bool reference_now = wait_for_shapes && o.backend->name() == "reference";
    if (options.defer_alternatives && !options.every_config && (!step.candidates.empty() || wait_for_shapes) &&
        !reference_now && !o.backend->generates_code() && !prepares_on_calling_thread(n)) {
      step.candidates.push_back({o.backend, nullptr, o.config, std::make_shared<DeferredKernel>(graph, i, disabled)});
      return;
    }
    try {
      std::unique_ptr<Kernel> kernel = o.backend->prepare(n, graph, o.config);
      const std::string kernel_name = kernel->profile().name;
      if (kernel_disabled(disabled, *o.backend, kernel_name)) {
        why = o.backend->name() + ":" + kernel_name + " is disabled";
        return;
      }
      // A generated kernel the session will run gets its code now, so that the node's other
      // candidates and its weights are settled knowing whether it can run. Tuning prepares
      // every configuration and compiles them in one batch below.
      std::string compile_failure;
      if (kernel->recipe() && !options.every_config && !obtain_code(*kernel, compile_failure, may_compile(o))) {
        if (!may_compile(o) && options.compile_later && printable(*kernel)) {
          awaiting.push_back({o.backend, std::move(kernel), o.config});
          awaiting.back().awaiting_code = std::make_shared<std::atomic<bool>>(true);
          if (for_large_batches) awaiting.back().code_wanted = std::make_shared<std::atomic<bool>>(false);
          return;
        }
        why = o.backend->name() + ":" + kernel_name + " could not be had: " + compile_failure;
        logger().debug("{}{}", node_label(n), why);
        return;
      }
      step.candidates.push_back({o.backend, std::move(kernel), o.config});
      packs_weights = packs_weights || o.at_declared.shape_specific_weights;
    } catch (const Error& e) {
      // A backend that accepted the node but cannot prepare it is skipped, not fatal, when
      // another candidate can run the node.
      logger().debug("{}backend {} failed to prepare: {}", node_label(n), o.identity, e.what());
      const std::string msg = e.what(), label = node_label(n);
      why = msg.rfind(label, 0) == 0 ? msg.substr(label.size()) : msg;
    }
  };
  for (std::size_t o = 0; o < options_offered.size(); ++o)
    if (wanted[o]) prepare(options_offered[o], false, large_only[o]);
  // Unless a wanted candidate packs the node's weights (any other would pack another copy),
  // the best of every other backend too: the tuner picks per shape, and one of them runs the
  // shapes a kernel declines (Kernel::runs).
  // A large-batch choice waiting for its first use stands in for the fallbacks: it most likely
  // packs the weights, and it runs what the first declines.
  for (const Candidate& c : step.candidates) {
    packs_weights = packs_weights || c.deferred;
    for (std::size_t in = 0; in < n.inputs.size(); ++in) packs_weights = packs_weights || (c.kernel && c.kernel->owns_input(in));
  }
  if (!packs_weights) {
    for (std::size_t o = 0; o < options_offered.size(); ++o) {
      if (wanted[o]) continue;
      bool backend_present = false;
      for (const Candidate& c : step.candidates) backend_present = backend_present || c.backend == options_offered[o].backend;
      if (!backend_present) prepare(options_offered[o], true, false);
    }
  }
  // Behind the node's other candidates, so that until its code comes one of them runs.
  if (!step.candidates.empty())
    for (Candidate& c : awaiting) step.candidates.push_back(std::move(c));
  return {std::move(step), std::move(why), std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count()};
}

}  // namespace

void ExecutionPlan::prepare_steps(const Graph& graph, const std::vector<const Backend*>& given, Graph* release_from,
                                  const PlanOptions& options) {
  std::vector<const Backend*> backends = given;
  for (const Backend*& b : backends)
    if (dynamic_cast<const GroupPartsBackend*>(b)) {
      parts_backend_ = std::make_shared<GroupPartsBackend>(given, options.disabled, options.threads, options.calibration);
      b = parts_backend_.get();
    }
  const std::vector<std::string>& disabled = options.disabled;
  // Readers of each constant not yet known to own it; 0 means it can go.
  std::vector<int> unowned_readers(graph.values().size(), 0);
  released_.assign(graph.values().size(), false);
  for (const Node& n : graph.nodes())
    for (ValueId v : n.inputs)
      if (v != kNoValue && graph.is_initializer(v)) ++unowned_readers[static_cast<std::size_t>(v)];
  std::vector<std::string> problems;
  std::set<std::string> seen_ops;
  KernelCompilation compilation(options.kernel_store, options.threads);
  if (options.compile_deadline) compilation.stop_compiling_at(*options.compile_deadline);
  std::mutex compilation_mutex;
  const auto obtain_code = [&](Kernel& kernel, std::string& why, bool may_compile) {
    std::lock_guard<std::mutex> lock(compilation_mutex);
    return compilation.obtain(kernel, why, may_compile);
  };
  const std::size_t count = graph.nodes().size();
  // Nodes are prepared on the session's threads at once (packing weights, creating oneDNN
  // primitives) and committed in graph order: steps_ stays ordered, and a constant is freed as
  // soon as the steps before it are settled, so the load peak stays near one copy of the weights.
  std::vector<std::optional<PreparedNode>> prepared(count);
  std::vector<ValueId> freed;  // erased from the graph once no thread reads it
  std::size_t committed = 0;
  std::mutex commit_mutex;
  const auto commit_ready = [&] {
    for (; committed < count && prepared[committed]; ++committed) {
      PreparedNode& p = *prepared[committed];
      const Node& n = graph.nodes()[committed];
      if (p.step.candidates.empty()) {
        if (seen_ops.insert(n.op_type).second) problems.push_back(node_label(n) + p.why);
      } else {
        if (logger().should_log(spdlog::level::debug)) {
          std::string names;
          for (const Candidate& c : p.step.candidates)
            names += (names.empty() ? "" : ", ") + c.identity() + (c.deferred ? " (at first use)" : "");
          logger().debug("{}prepared {} in {:.2f} ms", node_label(n), names, p.ms);
        }
        steps_.push_back(std::move(p.step));
        if (release_from) release_if_owned(*release_from, steps_.size() - 1, unowned_readers, freed);
      }
      prepared[committed].reset();
    }
  };
  std::vector<std::size_t> on_caller, shared;
  for (std::size_t i = 0; i < count; ++i) (prepares_on_calling_thread(graph.nodes()[i]) ? on_caller : shared).push_back(i);
  const int preparing = options.preparing_threads > 0 ? options.preparing_threads : options.threads;
  const int workers = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(std::max(1, preparing)), shared.size()));
  // A node starts at most this far past the last committed one: what bounds the weights packed
  // ahead of the constants the commits free, behind a slow node.
  const std::size_t look_ahead = 4 * static_cast<std::size_t>(std::max(1, workers));
  std::condition_variable commits_moved;
  std::atomic<std::size_t> next_shared{0};
  // The first node that failed: nodes after it are not needed, those before it are prepared
  // still, so the error reported is the one one thread would have met first.
  std::atomic<std::size_t> first_failure{count};
  std::vector<std::exception_ptr> errors(count);
  const auto prepare_one = [&](std::size_t i) {
    if (i > first_failure.load()) return;
    try {
      PreparedNode p = prepare_node(graph, i, backends, options, obtain_code);
      std::lock_guard<std::mutex> lock(commit_mutex);
      prepared[i] = std::move(p);
      commit_ready();
    } catch (...) {
      std::lock_guard<std::mutex> lock(commit_mutex);
      errors[i] = std::current_exception();
      if (i < first_failure.load()) first_failure = i;
    }
    commits_moved.notify_all();
  };
  const auto work = [&](bool caller) {
    if (caller)
      for (std::size_t i : on_caller) prepare_one(i);
    for (std::size_t k = next_shared++; k < shared.size(); k = next_shared++) {
      {
        std::unique_lock<std::mutex> lock(commit_mutex);
        commits_moved.wait(lock, [&] { return shared[k] < committed + look_ahead || first_failure.load() < count; });
      }
      prepare_one(shared[k]);
    }
  };
  {
    // Threads of their own, not an OpenMP team: oneDNN sizes a primitive for the threads it sees
    // when it is created (one, inside a parallel region), and runs must find it sized for theirs.
    std::vector<std::thread> helpers;
    struct JoinAll {
      std::vector<std::thread>& threads;
      ~JoinAll() {
        for (std::thread& t : threads)
          if (t.joinable()) t.join();
      }
    } join_all{helpers};
    helpers.reserve(static_cast<std::size_t>(workers));
    for (int t = 1; t < workers; ++t) {
      try {
        helpers.emplace_back([&] {
          RunPool::HeldCpusScope held;  // they prepare for the plan's builder, which holds the CPUs
          OmpThreadScope omp(options.threads);
          work(false);
        });
      } catch (...) {
        break;  // no thread to be had: the others, and this one, do the work
      }
    }
    work(true);
  }
  // No thread reads the graph now: the freed constants' entries go, whatever happened.
  if (release_from)
    for (ValueId v : freed) release_from->erase_initializer(v);
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  if (!problems.empty()) {
    std::string msg = problems.front();
    if (!disabled.empty()) msg += " (candidates left out by disabled_kernels: " + join(disabled) + ")";
    if (problems.size() > 1) msg += " (and " + std::to_string(problems.size() - 1) + " more unsupported op types)";
    throw Error(ErrorCode::Unsupported, msg);
  }
  compilation.obtain_all(steps_, graph);
  compilation.report();
  compile_seconds_ = compilation.seconds();
  compute_lifetimes(graph);
}

std::vector<std::pair<std::size_t, std::size_t>> ExecutionPlan::awaiting_code() const {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  for (std::size_t s = 0; s < steps_.size(); ++s)
    for (std::size_t c = 0; c < steps_[s].candidates.size(); ++c)
      if (steps_[s].candidates[c].awaiting() && !steps_[s].candidates[c].waits_to_be_wanted()) out.emplace_back(s, c);
  return out;
}

bool ExecutionPlan::want_code(std::size_t step, std::size_t candidate) const {
  const Candidate& c = steps_.at(step).candidates.at(candidate);
  return c.awaiting() && c.code_wanted && !c.code_wanted->exchange(true, std::memory_order_acq_rel);
}

void ExecutionPlan::attach_code(std::size_t step, std::size_t candidate, std::shared_ptr<const codegen::LoadedKernel> code) {
  Candidate& c = steps_.at(step).candidates.at(candidate);
  if (!c.awaiting()) throw Error(ErrorCode::Internal, "attach_code: the candidate is not awaiting code");
  c.kernel->set_code(std::move(code));
  c.awaiting_code->store(false, std::memory_order_release);
}

void ExecutionPlan::release_if_owned(Graph& graph, std::size_t s, std::vector<int>& unowned_readers,
                                     std::vector<ValueId>& freed) {
  const auto& nodes = graph.nodes();
  const Node& n = nodes[steps_[s].node_index];
  for (std::size_t i = 0; i < n.inputs.size(); ++i) {
    const ValueId v = n.inputs[i];
    if (v == kNoValue || !graph.is_initializer(v)) continue;
    int& left = unowned_readers[static_cast<std::size_t>(v)];
    bool all_own = true;
    for (const Candidate& c : steps_[s].candidates) all_own = all_own && c.kernel && c.kernel->owns_input(i);
    if (!all_own) {
      left = -1;  // a reader needs the loaded tensor: keep it for good
      continue;
    }
    if (left <= 0 || --left > 0) continue;
    bool is_output = false;
    for (ValueId o : graph.outputs()) is_output |= o == v;
    if (is_output) continue;
    released_bytes_ += graph.initializer(v)->nbytes();
    // Its bytes go now; its entry once the other threads no longer look constants up.
    *graph.mutable_initializer(v) = Tensor();
    freed.push_back(v);
    released_[static_cast<std::size_t>(v)] = true;
  }
}

void ExecutionPlan::compute_lifetimes(const Graph& graph) {
  const std::size_t n_values = graph.values().size();
  const int end = static_cast<int>(steps_.size());
  producer_.assign(n_values, -1);
  last_reader_.assign(n_values, -1);
  is_output_.assign(n_values, false);
  for (ValueId v : graph.outputs()) is_output_[static_cast<std::size_t>(v)] = true;
  const auto& nodes = graph.nodes();
  for (std::size_t s = 0; s < steps_.size(); ++s) {
    const Node& n = nodes[steps_[s].node_index];
    most_step_inputs_ = std::max(most_step_inputs_, n.inputs.size());
    most_step_outputs_ = std::max(most_step_outputs_, n.outputs.size());
    for (ValueId v : n.inputs)
      if (v != kNoValue) last_reader_[static_cast<std::size_t>(v)] = static_cast<int>(s);
    for (ValueId v : n.outputs)
      if (v != kNoValue) producer_[static_cast<std::size_t>(v)] = static_cast<int>(s);
  }
  for (std::size_t v = 0; v < n_values; ++v) {
    if (is_output_[v]) last_reader_[v] = end;
    else if (last_reader_[v] < 0) last_reader_[v] = producer_[v];  // nobody reads it: dies at birth
  }
  // A value is released after its last reader, unless the caller reads it (graph output) or the
  // graph owns it (initializer).
  for (std::size_t v = 0; v < n_values; ++v) {
    const int last = last_reader_[v];
    if (last >= 0 && last < end && !graph.is_initializer(static_cast<ValueId>(v)))
      steps_[static_cast<std::size_t>(last)].release_after.push_back(static_cast<ValueId>(v));
  }
}

}  // namespace wpk
