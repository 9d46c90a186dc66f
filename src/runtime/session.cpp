#include "wpk/session.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>

#include "core/api_boundary.hpp"
#include "core/cpu_features.hpp"
#include "core/page_memory.hpp"
#include "backends/cuda/cuda_backend_names.hpp"
#include "backends/cuda/tuning_records.hpp"
#include "graph/batch_rows.hpp"
#include "graph/fused_ops.hpp"
#include "graph/passes/pass.hpp"
#include "graph/shape_limits.hpp"
#include "graph/subgraph.hpp"
#include "runtime/arena_pool.hpp"
#include "runtime/batch_parts.hpp"
#include "runtime/cache_key.hpp"
#include "runtime/control_flow.hpp"
#include "runtime/device_placement.hpp"
#include "runtime/executor.hpp"
#include "runtime/execution_plan.hpp"
#include "runtime/input_check.hpp"
#include "runtime/kernel_compilation.hpp"
#include "runtime/logging.hpp"
#include "runtime/memory_budget.hpp"
#include "runtime/plan_cache.hpp"
#include "runtime/run_control.hpp"
#include "runtime/run_pool.hpp"
#include "runtime/threads.hpp"
#include "runtime/in_model_check.hpp"
#include "runtime/tuner.hpp"
#include "runtime/trial_log.hpp"
#include "runtime/tuning_db.hpp"
#include "runtime/session_impl.hpp"
#include "wpk/optimizer.hpp"
#ifdef WPK_WITH_CUDA
#include "backends/cuda/device.hpp"
#include "codegen/jit/cubin_store.hpp"
#include "codegen/jit/nvrtc_compiler.hpp"
#endif

namespace wpk {

namespace {

bool shares_bytes(const Tensor& a, const Tensor& b) {
  if (a.empty() || b.empty() || a.nbytes() == 0 || b.nbytes() == 0) return false;
  const char* pa = static_cast<const char*>(a.raw());
  const char* pb = static_cast<const char*>(b.raw());
  return pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

// Inputs in GPU memory stay there for the device regions that read them; one that a CPU node
// reads (or the caller gets back as an output) comes to the host first. Nothing when no input is
// on the device.
std::optional<TensorMap> host_copies_where_read(const Graph& g, const TensorMap& inputs) {
  bool any = false;
  for (const auto& kv : inputs) any = any || kv.second.on_device();
  if (!any) return std::nullopt;
  bool regions = false;
  for (const Node& n : g.nodes()) regions = regions || (n.domain == kWpkDomain && n.op_type == cuda::kRegionOp);
  TensorMap out = inputs;
  for (auto& [name, t] : out) {
    if (!t.on_device()) continue;
    if (!regions)
      throw Error(ErrorCode::InvalidArgument, "input '" + name + "' is in GPU memory, but this session runs on the CPU (SessionOptions::device)");
    const ValueId v = g.find_value(name);
    bool host_reads = std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end();
    for (const Node& n : g.nodes())
      if (!(n.domain == kWpkDomain && n.op_type == cuda::kRegionOp))
        host_reads = host_reads || std::find(n.inputs.begin(), n.inputs.end(), v) != n.inputs.end();
    if (!host_reads) continue;
#ifdef WPK_WITH_CUDA
    t = cuda::copy_to_host(t);
#endif
  }
  return out;
}

// The graph's outputs in its order. Returned tensors own their memory: never the caller's input
// bytes, the session's weights, or the run's arena, which the next run reuses.
std::vector<Tensor> collect_outputs(const Graph& g, const std::vector<const Tensor*>& inputs, const Executor& exec) {
  std::vector<Tensor> out;
  out.reserve(g.outputs().size());
  for (ValueId v : g.outputs()) {
    const Tensor* init = g.initializer(v);
    Tensor t = init ? *init : exec.value(v);
    // A sequence's elements may be the caller's tensors or borrowed ones: its own copy always.
    bool aliased = init != nullptr || t.is_borrowed() || exec.in_arena(t) || t.is_sequence();
    for (const Tensor* in : inputs) aliased = aliased || shares_bytes(t, *in);
    for (const auto& kv : g.initializers()) aliased = aliased || shares_bytes(t, kv.second);
    out.push_back(aliased ? t.clone() : std::move(t));
  }
  return out;
}

bool compiles_in_background(const SessionOptions& o) {
  const char* env = std::getenv("WPK_COMPILE_IN_BACKGROUND");
  return o.compile_in_background && !(env && std::string(env) == "0");
}

TuningSettings tuning_settings(const SessionOptions& o) {
  if (!(o.tuning_budget > 0))
    throw Error(ErrorCode::InvalidArgument, "SessionOptions::tuning_budget must be > 0 seconds, got " + std::to_string(o.tuning_budget));
  TuningSettings t;
  try {
    t.compare_strategies = o.tuning_algorithm == "compare";
    t.algorithm = t.compare_strategies ? search::Algorithm::Grid : search::parse_algorithm(o.tuning_algorithm);
  } catch (const std::invalid_argument&) {
    throw Error(ErrorCode::InvalidArgument,
                "SessionOptions::tuning_algorithm must be grid, random, ga, rl or compare, got '" + o.tuning_algorithm + "'");
  }
  t.seed = o.tuning_seed;
  t.trials_per_node = o.tuning_trials;
  t.on_progress = o.on_tuning_progress;
  t.untuned_compiles_later = compiles_in_background(o);
  return t;
}

// Inputs of the shapes the session declares (symbolic dims as 1), for tuning at load: floats
// spread over [-1, 1] from a fixed sequence, everything else zero (a valid index for any table).
TensorMap declared_inputs(const std::vector<ValueInfo>& inputs) {
  TensorMap out;
  for (const ValueInfo& in : inputs) {
    Shape shape;
    if (in.dims)
      for (const Dim& d : *in.dims) shape.push_back(d.is_static() ? d.value : 1);
    Tensor t = Tensor::zeros(in.dtype, shape);
    if (in.dtype == DType::Float32)
      for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>((i * 7919) % 2001) / 1000.0f - 1.0f;
    out[in.name] = std::move(t);
  }
  return out;
}

ShapeLimits resolve_shape_limits(const SessionOptions& o, std::int64_t memory_limit) {
  if (o.max_rank < 1) throw Error(ErrorCode::InvalidArgument, "SessionOptions::max_rank must be >= 1, got " + std::to_string(o.max_rank));
  if (o.max_tensor_elements < 1)
    throw Error(ErrorCode::InvalidArgument,
                "SessionOptions::max_tensor_elements must be >= 1, got " + std::to_string(o.max_tensor_elements));
  return ShapeLimits{o.max_rank, o.max_tensor_elements, memory_limit};
}

std::int64_t initializer_bytes(const Graph& g) {
  std::int64_t bytes = 0;
  for (const auto& kv : g.initializers()) bytes += static_cast<std::int64_t>(kv.second.nbytes());
  return bytes;
}

// Whether the session places nodes on a GPU (SessionOptions::device), with the device's model.
std::optional<GpuModel> resolve_gpu(const SessionOptions& o) {
  if (o.device == Device::CPU) return std::nullopt;
  std::string why;
#ifdef WPK_WITH_CUDA
  why = cuda::why_no_cuda_device();
  if (why.empty()) {
    try {
      cuda::cublas();
      cuda::cudnn();
      if (!codegen::Nvrtc::get(&why))
        logger().warn("device cuda: {}; generated kernels come from the kernel cache only", why);
      const cuda::DeviceInfo& info = cuda::Device::get().info();
      logger().info("device {}: sm_{}, {} multiprocessors, {:.0f} GiB", info.name, info.sm, info.multiprocessors,
                    static_cast<double>(info.memory_bytes) / (1 << 30));
      return gpu_model(info.name, info.multiprocessors);
    } catch (const Error& e) {
      why = e.what();
    }
  }
#else
  why = "this build of wpk has no CUDA backend (the CUDA toolkit's headers were not found when it was built)";
#endif
  if (o.device == Device::CUDA) throw Error(ErrorCode::Unsupported, "device cuda: " + why);
  logger().warn("device auto: no GPU to use ({}); running on the CPU", why);
  return std::nullopt;
}

// The moment `seconds` after `start`, in steady_clock's own ticks.
std::chrono::steady_clock::time_point seconds_after(std::chrono::steady_clock::time_point start, double seconds) {
  return start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace

Session::Session(Graph graph, SessionOptions options)
    : Session(std::move(graph), options, registered_backends()) {}

Session::Session(Graph graph, SessionOptions options, const std::vector<const Backend*>& backends) try
    : impl_(std::make_unique<Impl>()) {
  apply_log_level(options);
  if (const std::string problem = isa_cap_problem(); !problem.empty()) throw Error(ErrorCode::InvalidArgument, problem);
  const auto t0 = std::chrono::steady_clock::now();
  impl_->threads = resolve_threads(options.threads);
  impl_->budget = std::make_unique<MemoryBudget>(resolve_memory_limit(options.memory_limit));
  impl_->limits = resolve_shape_limits(options, impl_->budget->limit());
  const std::vector<std::string> disabled = resolve_disabled_kernels(options.disabled_kernels, backends);
  impl_->weight_bytes = initializer_bytes(graph);
  impl_->budget->reserve(impl_->weight_bytes, "the model's weights: ");
  log_openmp_wait_policy();
  check_graph_interface(graph);
  impl_->fingerprint = model_fingerprint(graph);
  fix_symbolic_dims(graph, options.fixed_dims);
  // Every node must be one a backend runs, with its op's input count, before any pass looks at
  // it: passes read inputs by position and must not meet a malformed node.
  if (const auto bad = find_unsupported(graph); !bad.empty())
    throw Error(ErrorCode::Unsupported, "node '" + bad.front().node + "' (" + bad.front().op_type + "): " + bad.front().reason +
                                            (bad.size() > 1 ? " (and " + std::to_string(bad.size() - 1) + " more nodes)" : ""));
  const std::optional<GpuModel> gpu = resolve_gpu(options);
  OptimizerOptions optimizer = options.optimizer;
  if (gpu) leave_off_cpu_only_passes(optimizer);
  impl_->graph = Optimizer(optimizer).optimize(std::move(graph));
  passes::clear_compute_precision(impl_->graph);
  if (options.precision == Precision::BF16) {
    const CpuFeatures& cpu = cpu_features();
    if (cpu.avx512_bf16 || cpu.amx_bf16) {
      logger().debug("bf16: {} convolutions and products may compute in bf16", passes::mark_bf16_compute(impl_->graph));
      const Graph& g = impl_->graph;
      const int kept = passes::keep_bf16_between_products(impl_->graph, [&](const Node& n) {
        return std::any_of(backends.begin(), backends.end(),
                           [&](const Backend* b) { return !listed(disabled, b->name()) && b->takes_bf16_activations(n, g); });
      });
      logger().debug("bf16: {} values between them kept in bf16", kept);
    } else
      logger().warn("precision bf16 asked for, but this CPU has neither AVX-512 BF16 nor AMX: running float32");
  }
  if (gpu) {
    const PlacementSummary placed = place_on_gpu(impl_->graph, *gpu, impl_->threads);
    logger().info("placement on {}: {} of {} nodes in {} regions (modelled {:.2f} ms against {:.2f} ms all on the CPU)",
                  gpu->name, placed.nodes_on_gpu, placed.nodes, placed.regions, placed.predicted_seconds * 1e3,
                  placed.predicted_cpu_seconds * 1e3);
    const std::string cubins = cuda_kernel_folder(resolve_cache_dir(options.cache_dir));
    for (Node& n : impl_->graph.mutable_nodes()) {
      if (n.domain != kWpkDomain || n.op_type != cuda::kRegionOp) continue;
      n.attributes.emplace("kernel_cache", Attribute(cubins));
      std::vector<std::string> variants;
      for (const char* v : {cuda::kCublasLtVariant, cuda::kCudnnGraphVariant})
        if (listed(disabled, std::string("cuda:") + v)) variants.emplace_back(v);
      if (!variants.empty()) n.attributes.emplace("disabled_variants", Attribute(variants));
      if (!options.tuning) continue;
      // The regions search their generated kernels' schedules as the CPU's nodes do.
      n.attributes.emplace("tune_algorithm", Attribute(options.tuning_algorithm));
      n.attributes.emplace("tune_seed", Attribute(static_cast<std::int64_t>(options.tuning_seed)));
      n.attributes.emplace("tune_trials", Attribute(static_cast<std::int64_t>(options.tuning_trials ? options.tuning_trials : 16)));
    }
    if (placed.regions == 0)
      logger().warn("device {}: no node placed on the GPU (nodes need float32 values of static shapes: fix symbolic dims "
                    "with SessionOptions::fixed_dims)",
                    gpu->name);
  }
  const Graph& g = impl_->graph;
  if (impl_->threads > 1) {
    const std::string why = why_rows_depend_on_each_other(g);
    impl_->rows_apart = why.empty();
    logger().debug("batch parts: {}", why.empty() ? "every output row is computed from its input row alone" : why);
  }
  impl_->load.optimize_ms = us_since(t0) / 1000;
  // Folding may have grown the weights (within its budget); charge what the session now holds.
  impl_->budget->release(impl_->weight_bytes);
  impl_->weight_bytes = initializer_bytes(g);
  impl_->budget->reserve(impl_->weight_bytes, "the model's weights and folded constants: ");
  check_shape_limits(g, impl_->limits);
  for (ValueId v : g.inputs()) impl_->inputs.push_back(g.value(v));
  for (ValueId v : g.outputs()) impl_->outputs.push_back(g.value(v));
  if (options.tuning) {
    impl_->tuning_db = std::make_unique<TuningDb>(resolve_cache_dir(options.cache_dir));
    // A folder tuned before the calibration had its own record gets it now: sessions that only
    // look records up then skip the trial logs.
    if (impl_->tuning_db->persistent() && !impl_->tuning_db->lookup(calibration_record_key()) &&
        !impl_->tuning_db->values_with_prefix(kTrialLogPrefix).empty())
      CostCalibration::store(*impl_->tuning_db);
  } else if (options.use_tuning_records)
    impl_->tuning_db = TuningDb::open_for_lookup(resolve_cache_dir(options.cache_dir));
  // Preparing the plan packs weights and may compile kernels on the session's threads: it holds
  // CPUs like a run.
  const auto t_prepare = std::chrono::steady_clock::now();
#ifdef WPK_WITH_CUDA
  const codegen::CubinCounters cubins_before = codegen::cubin_counters();
#endif
  RunPool::process().execute(impl_->threads, [&] {
    OmpThreadScope scope(impl_->threads);  // backends may size their kernels to the thread count
    BodyOptionsScope bodies(options);       // control-flow bodies are sessions with these options
    // Device regions read and write their tuning choices in the same records as the CPU's nodes.
    cuda::TuningRecords gpu_records;
    if (TuningDb* db = impl_->tuning_db.get()) {
      gpu_records.lookup = [db](const std::string& key) { return db->lookup(key); };
      if (options.tuning)
        gpu_records.store = [db](const std::string& key, const std::string& choice, double us, const std::string& summary) {
          db->store(key, choice, us, summary);
        };
    }
    cuda::TuningRecordsScope gpu_scope(impl_->tuning_db ? &gpu_records : nullptr);
    PlanOptions plan;
    // Tuning compares candidates against the reference, which needs the weights as loaded.
    plan.release_owned_constants = !options.tuning;
    plan.disabled = disabled;
    plan.every_config = options.tuning;
    // The budget covers compiling every configuration too: a cold kernel store can take longer
    // than the search.
    if (options.tuning)
      plan.compile_deadline = seconds_after(t0, options.tuning_budget);
    plan.compile_choices = bodies.compiles_choices_at_load();
    plan.compile_later = !options.tuning && !plan.compile_choices && compiles_in_background(options);
    plan.threads = impl_->threads;
    plan.defer_alternatives = true;  // the session's graph outlives its plan
    impl_->calibration = CostCalibration::from(impl_->tuning_db.get());
    plan.calibration = &impl_->calibration;
    plan.kernel_store = [this, &options] {
      if (impl_->kernels) return impl_->kernels.get();
      const std::string folder = kernel_folder(resolve_cache_dir(options.cache_dir));
      impl_->kernels = std::make_unique<codegen::KernelStore>(folder, codegen::find_host_compiler(folder));
      if (!impl_->kernels->persistent())
        logger().info("generated kernels last for this process only: {}", impl_->kernels->why_not_persistent());
      return impl_->kernels.get();
    };
    if (TuningDb* db = impl_->tuning_db.get()) {
      // A batch fixed at load that its record sends into parts runs each part on what the part's
      // records name, at its own shapes on one thread: those candidates are prepared too. Other
      // records of the node (other batch sizes) are not: each alternative keeps the loaded
      // weights until a run picks it, and a service that fixes its sizes never runs them.
      const auto signature = declared_signature(g);
      const auto parts_value = impl_->rows_apart && signature
                                   ? db->lookup(batch_parts_key(impl_->fingerprint, *signature, impl_->threads))
                                   : std::nullopt;
      const bool in_parts = parts_value && parse_batch_parts(*parts_value) > 1;
      plan.recorded_choices = [db, &g, threads = impl_->threads, model = impl_->fingerprint, in_parts](
                                  const Node& node, const std::string& offered) {
        const auto value = db->lookup(declared_tuning_key(node, g, threads, offered));
        std::vector<std::string> named = {value ? parse_record_value(*value).first : std::string()};
        if (in_parts)
          if (const auto list = db->lookup(node_choices_key(model, node, offered)))
            for (std::string& c : parse_node_choices(*list)) named.push_back(std::move(c));
        return named;
      };
    }
    impl_->plan = std::make_unique<ExecutionPlan>(impl_->graph, backends, plan);
  });
  impl_->load.prepare_ms = us_since(t_prepare) / 1000;
#ifdef WPK_WITH_CUDA
  if (gpu) {
    const codegen::CubinCounters now = codegen::cubin_counters();
    logger().info("CUDA kernels: {} compiled, {} from the kernel cache", now.compiled - cubins_before.compiled,
                  now.loaded - cubins_before.loaded);
  }
#endif
  // The control-flow kernels hold their bodies as sessions now: the graph keeps the signatures.
  strip_bodies(impl_->graph);
  impl_->load.compile_ms = impl_->plan->compile_seconds() * 1000;
  logger().debug("freed {:.1f} MiB of weights that kernels keep packed",
                 static_cast<double>(impl_->plan->released_bytes()) / (1 << 20));
  if (impl_->plan->released_bytes() > 0) return_free_heap_pages();
  impl_->arenas = ArenaPool::create(arena_poison_from_env());
  impl_->poison_outputs = poison_outputs_from_env();
  TuningSettings settings = tuning_settings(options);
  settings.on_code_wanted = [im = impl_.get()](std::size_t step, std::size_t candidate) {
    if (!im->plan->want_code(step, candidate) || !im->background) return;
    const PlanStep& wanted = im->plan->steps()[step];
    logger().debug("{}a run's shapes rank {} first: compiling it in the background",
                   node_label(im->graph.nodes()[wanted.node_index]), wanted.candidates[candidate].identity());
    im->background->want_more();
  };
  impl_->tuner = std::make_unique<Tuner>(g, *impl_->plan, impl_->tuning_db.get(), impl_->threads, std::move(settings),
                                         &impl_->calibration);
  if (impl_->rows_apart) {
    TuningSettings parts = tuning_settings(options);
    parts.lists_choices = true;
    parts.model_fingerprint = impl_->fingerprint;
    impl_->part_tuner =
        std::make_unique<Tuner>(g, *impl_->plan, impl_->tuning_db.get(), 1, std::move(parts), &impl_->calibration);
  }
  if (impl_->kernels) {  // a plan with generated kernels opened the store; the compiler starts if any awaits
    Impl* im = impl_.get();
    im->background = std::make_unique<BackgroundCompiler>(*im->plan, *im->kernels, im->threads, [im] {
      im->plans.clear();
      im->part_plans.clear();
    });
  }
  const bool tune = options.tuning;
  // What compiling the configurations left of the budget.
  const double budget = std::max(0.0, options.tuning_budget - impl_->plan->compile_seconds());
  impl_->options = std::move(options);
  const auto t_tune = std::chrono::steady_clock::now();
  if (tune) RunPool::process().execute(impl_->threads, [&] { tune_at_load(budget); });
  impl_->load.tune_ms = tune ? us_since(t_tune) / 1000 : 0;
  impl_->load.total_ms = us_since(t0) / 1000;
  logger().debug("session ready: {} nodes, {} steps, {} threads, {:.1f} ms", g.nodes().size(), impl_->plan->steps().size(),
                 impl_->threads, us_since(t0) / 1000);
} catch (...) {
  rethrow_as_error("loading the session: ");
}

void Session::tune_at_load(double budget_seconds) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = seconds_after(start, budget_seconds);
  impl_->tuner->start_measuring(deadline);
  const TensorMap inputs = declared_inputs(impl_->inputs);
  try {
    // The whole batch's plan, whatever a record says about parts: tune_batch_parts compares.
    run_checked(bind_run_inputs(impl_->graph, inputs), nullptr, nullptr, 0, 0);
  } catch (const std::exception& e) {
    // Declared shapes a run rejects (an input of unknown rank, say): the first real run of each
    // shape then takes the records or the cost model's choice.
    logger().warn("could not tune at load: {}", e.what());
    impl_->tuner->stop_measuring();
    return;
  }
  impl_->tuner->stop_measuring();
  try {
    check_tuning_in_model(inputs);
  } catch (const std::exception& e) {
    logger().warn("tuning at load: the in-model check failed, the tuned choices stay: {}", e.what());
  }
  try {
    tune_batch_parts(inputs, deadline);
  } catch (const std::exception& e) {
    logger().warn("tuning at load: timing the batch in parts failed, it runs whole: {}", e.what());
  }
  logger().debug("tuned at load in {:.1f} ms: {} nodes measured", us_since(start) / 1000, impl_->tuner->report().size());
}

void Session::check_tuning_in_model(const TensorMap& inputs) {
  Impl& im = *impl_;
  const std::vector<const Tensor*> bound = bind_run_inputs(im.graph, inputs);
  const ShapeSignature signature = shape_signature(bound);
  const std::shared_ptr<const SignaturePlan> tuned = im.plans.find(signature);
  if (!tuned) return;
  const std::vector<Tuner::Change> changes = im.tuner->changes(tuned->choice);
  if (changes.empty()) return;
  std::vector<PlannedChange> planned;
  for (const Tuner::Change& c : changes)
    planned.push_back({c.step, c.untuned, c.key, im.graph.nodes()[im.plan->steps()[c.step].node_index].name, c.runners_up});
  // Each choice vector runs on a memory plan of its own, recorded by its first run: where values
  // share bytes depends on the kernels (one that accumulates into its residual writes over it).
  std::vector<std::shared_ptr<SignaturePlan>> plans = {std::make_shared<SignaturePlan>(*tuned)};
  const auto plan_of = [&](const std::vector<StepChoice>& choice) {
    for (const auto& p : plans)
      if (p->choice == choice) return p;
    auto p = std::make_shared<SignaturePlan>();
    p->choice = choice;
    run_checked(bound, nullptr, nullptr, 0, 0, p.get());
    plans.push_back(p);
    return p;
  };
  const PlanRunner run_plan = [&](const std::vector<StepChoice>& choice) {
    const std::shared_ptr<SignaturePlan> plan = plan_of(choice);
    RunProfile profile;
    run_checked(bound, nullptr, &profile, 0, 0, plan.get());
    return profile;
  };
  const InModelCheckResult r = check_in_model(tuned->choice, planned, step_consumers(im.graph, *im.plan), run_plan);
  std::vector<StepChoice> final_choice = tuned->choice;
  std::vector<Tuner::Change> settled;
  std::vector<StepChoice> settled_choice;
  std::vector<double> settled_us;
  TuningCheck& check = im.tuning_check;
  check = {static_cast<int>(changes.size()), 0, 0, r.pairs, r.kept_ms, r.untuned_ms, r.tuned_ms};
  for (std::size_t i = 0; i < changes.size(); ++i) {
    check.kept += r.keep[i];
    const StepChoice was = tuned->choice[changes[i].step], now = r.choice[i];
    check.runners_up += r.keep[i] && was != now;
    final_choice[changes[i].step] = now;
    if (was == now) continue;
    settled.push_back(changes[i]);
    settled_choice.push_back(now);
    settled_us.push_back(r.step_us[i]);
  }
  im.tuner->settle(settled, settled_choice, settled_us);
  im.plans.replace(signature, plan_of(final_choice));
  logger().info("tuning at load, in the model ({} runs each): {} of {} tuned choices kept; {:.3f} ms with them "
                "(x{:.3f} of untuned, paired by round), {:.3f} ms untuned, {:.3f} ms with every tuned choice",
                r.pairs, check.kept, changes.size(), r.kept_ms, r.ratio, r.untuned_ms, r.tuned_ms);
}

std::vector<TunedNode> Session::tuning_report() const {
  std::vector<TunedNode> report = impl_->tuner->report();
  if (impl_->part_tuner)
    for (TunedNode& n : impl_->part_tuner->report()) report.push_back(std::move(n));
  return report;
}
int Session::tuned_nodes() const { return impl_->tuner->tuned_nodes(); }
TuningCheck Session::tuning_check() const { return impl_->tuning_check; }
BatchPartsCheck Session::batch_parts_check() const { return impl_->parts_check; }

ProcessCounters process_counters() { return {tuning_measurements(), codegen::kernel_store_counters().compiled}; }

Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

const std::vector<ValueInfo>& Session::inputs() const { return impl_->inputs; }
const std::vector<ValueInfo>& Session::outputs() const { return impl_->outputs; }
const Graph& Session::graph() const { return impl_->graph; }
int Session::threads() const { return impl_->threads; }

TensorMap Session::run(const TensorMap& inputs) const { return run(inputs, nullptr); }

TensorMap Session::run(const TensorMap& inputs, RunProfile* profile) const { return run_with(inputs, nullptr, profile); }

TensorMap Session::run(const TensorMap& inputs, const RunOptions& options, RunProfile* profile) const {
  return run_with(inputs, &options, profile);
}

TensorMap Session::run_with(const TensorMap& inputs, const RunOptions* options, RunProfile* profile) const {
  try {
    // A bad request is turned away before it queues for CPUs.
    const auto called = std::chrono::steady_clock::now();
    const std::optional<TensorMap> moved = host_copies_where_read(impl_->graph, inputs);
    const std::vector<const Tensor*> bound = bind_run_inputs(impl_->graph, moved ? *moved : inputs);
    const double checks_us = us_since(called);
    const auto checked = std::chrono::steady_clock::now();
    std::vector<Tensor> values;
    impl_->execute_run([&] {
      const double queued_us = us_since(checked);
      const int parts = impl_->batch_parts(bound);
      impl_->last_run_parts.store(parts);
      values = parts > 1 ? run_in_parts(bound, parts, options, profile, checks_us, queued_us)
                         : run_checked(bound, options, profile, checks_us, queued_us);
    });
    TensorMap out;
    for (std::size_t k = 0; k < values.size(); ++k) out[impl_->graph.value(impl_->graph.outputs()[k]).name] = std::move(values[k]);
    return out;
  } catch (...) {
    rethrow_as_error();
  }
}

std::vector<Tensor> Session::run_in_order(const std::vector<Tensor>& inputs) const {
  try {
    std::vector<const Tensor*> bound;
    bound.reserve(inputs.size());
    for (const Tensor& t : inputs) {
      if (t.on_device())  // the named path places it, or says why it cannot
        throw Error(ErrorCode::InvalidArgument, "an input in GPU memory must be passed by name");
      bound.push_back(&t);
    }
    check_bound_inputs(impl_->graph, bound);
    std::vector<Tensor> out;
    impl_->execute_run([&] { out = run_checked(bound, nullptr, nullptr, 0, 0); });
    return out;
  } catch (...) {
    rethrow_as_error();
  }
}

std::vector<Tensor> Session::run_checked(const std::vector<const Tensor*>& inputs, const RunOptions* options,
                                         RunProfile* profile, double checks_us, double queued_us,
                                         SignaturePlan* forced, bool batch_part) const {
  const auto t0 = std::chrono::steady_clock::now();
  RunControlScope control(options);
  const Impl& im = *impl_;
  const Graph& g = im.graph;
  OmpThreadScope threads(batch_part ? 1 : im.threads);
  PlanCache& plans = batch_part ? im.part_plans : im.plans;
  const Tuner& tuner = batch_part ? *im.part_tuner : *im.tuner;
  RunProfile local;
  RunProfile* prof = profile ? profile : (im.options.profile ? &local : nullptr);
  if (prof) *prof = RunProfile{};

  const ShapeSignature signature = shape_signature(inputs);
  const std::shared_ptr<const SignaturePlan> found = forced ? nullptr : plans.find(signature);
  const SignaturePlan* known = forced ? forced : found.get();
  RunReservation reservation(im.budget.get());
  RunMemory memory;
  memory.poison = im.arenas->poison();
  memory.poison_outputs = im.poison_outputs;
  memory.limits = im.limits;
  memory.reservation = &reservation;
  std::unique_ptr<MemoryRecorder> recorder;
  if (known) {
    memory.plan = known;
    if (known->memory_planned && known->arena_bytes > 0) {
      reservation.reserve(static_cast<std::int64_t>(known->arena_bytes), "the run's arena: ");
      memory.arena = im.arenas->acquire(known->arena_bytes);
    }
  }
  if ((!known || (forced && !forced->memory_planned)) && im.options.plan_memory) {
    recorder = std::make_unique<MemoryRecorder>(g, *im.plan);
    memory.recorder = recorder.get();
  }
  Executor exec(g, *im.plan, std::move(memory));
  exec.set_profile(prof, t0);
  if (!known) exec.set_chooser([&tuner](std::size_t s, const std::vector<const Tensor*>& ins) { return tuner.choose(s, ins); });
  exec.run(inputs);

  if (!known) {
    auto plan = std::make_shared<SignaturePlan>();
    plan->choice = exec.choices();
    if (recorder) recorder->finish(*plan);
    plans.insert(signature, std::move(plan));
  } else if (forced && recorder) {
    recorder->finish(*forced);
  }

  std::vector<Tensor> out = collect_outputs(g, inputs, exec);
  if (prof) {
    prof->total_us = checks_us + queued_us + us_since(t0);
    prof->queued_us = queued_us;
    if (im.options.profile) {
      std::lock_guard<std::mutex> lock(im.profile_mutex);
      impl_->last_profile = *prof;
    }
  }
  return out;
}

LoadProfile Session::load_profile() const { return impl_->load; }
namespace {

// A session's own compilation with its bodies' (their sessions compile for themselves).
BackgroundCompilation with_bodies(BackgroundCompilation own, const ExecutionPlan& plan,
                                  const std::function<BackgroundCompilation(const Session&)>& of_body) {
  for (const PlanStep& step : plan.steps())
    for (const Candidate& c : step.candidates)
      if (const Kernel* k = c.prepared())
        for (const Session* body : k->body_sessions()) {
          const BackgroundCompilation b = of_body(*body);
          own.kernels += b.kernels;
          own.ready += b.ready;
          own.failed += b.failed;
          own.finished = own.finished && b.finished;
          own.seconds = std::max(own.seconds, b.seconds);
        }
  return own;
}

}  // namespace

BackgroundCompilation Session::background_compilation() const {
  return with_bodies(impl_->background ? impl_->background->status() : BackgroundCompilation{}, *impl_->plan,
                     [](const Session& body) { return body.background_compilation(); });
}
BackgroundCompilation Session::wait_for_background_compilation() const {
  return with_bodies(impl_->background ? impl_->background->wait() : BackgroundCompilation{}, *impl_->plan,
                     [](const Session& body) { return body.wait_for_background_compilation(); });
}

RunProfile Session::last_profile() const {
  std::lock_guard<std::mutex> lock(impl_->profile_mutex);
  return impl_->last_profile;
}

PlanSummary Session::describe() const {
  const Impl& im = *impl_;
  const int parts = im.last_run_parts.load();
  const auto latest = parts > 1 ? im.part_plans.latest() : im.plans.latest();
  PlanSummary summary;
  summary.batch_parts = parts;
  const auto& steps = im.plan->steps();
  for (std::size_t s = 0; s < steps.size(); ++s) {
    const Node& n = im.graph.nodes()[steps[s].node_index];
    const StepChoice choice = latest ? latest->choice[s] : StepChoice{};
    // A part runs on one thread: whatever count its choice names, that is all of them.
    const int threads = parts > 1 ? 0 : choice.threads;
    summary.steps.push_back({n.name, qualified_op(n), n.domain,
                             steps[s].candidates[static_cast<std::size_t>(choice.candidate)].identity(), steps[s].layout,
                             n.fused_from, threads});
  }
  if (latest && latest->memory_planned) {
    summary.memory_planned = true;
    summary.arena_bytes = latest->arena_bytes;
    summary.naive_bytes = latest->naive_bytes;
  }
  return summary;
}

}  // namespace wpk
