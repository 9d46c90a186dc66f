#pragma once
// Plain option structs with sensible defaults: an empty SessionOptions is the right choice for
// most programs.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

// What this header declares is libwpk's API: a shared libwpk exports it (its other symbols are
// hidden).
#pragma GCC visibility push(default)

namespace wpk {

enum class OptimizationLevel {
  None,   // run the graph exactly as loaded
  Basic,  // semantics-preserving cleanups: constant folding, dead code, Identity/Dropout removal
  All,    // everything wpk knows, including fusions
};

enum class LogLevel { Trace, Debug, Info, Warn, Error, Off };

// The arithmetic of convolutions and matrix products.
enum class Precision {
  FP32,  // float32 throughout
  // bfloat16 inputs and weights with float32 accumulation and output (about 3 significant
  // digits per product), the rest of the model in float32; on CPUs with AVX-512 BF16 or AMX
  // only: elsewhere the session logs one warning and runs float32.
  BF16,
};

// Where a session computes (SessionOptions::device).
enum class Device {
  CPU,   // every node on the CPU
  // Nodes the CUDA backend runs go to the GPU where the placement's cost model says it pays
  // (regions of consecutive nodes; copies only at their edges), the rest on the CPU. Needs a
  // CUDA driver with a device, cuBLAS and cuDNN 9 and NVRTC at run time, and static shapes
  // (fixed_dims for symbolic ones): a node whose shapes are not known at load stays on the CPU.
  // No device: loading fails (ErrorCode::Unsupported, saying what is missing).
  CUDA,
  Auto,  // CUDA when a device is there, else one log line and the CPU
};

struct OptimizerOptions {
  OptimizationLevel level = OptimizationLevel::All;
  std::vector<std::string> disabled_passes;  // pass names, as `wpk info --optimized` lists them
  // Bytes constant folding may create over the whole model (and at most 16 MiB per node): a
  // node whose folded outputs would cross it is left to run at run time. Negative is an error.
  std::int64_t folding_budget = std::int64_t(256) << 20;
};

// Where tuning at load stands (SessionOptions::on_tuning_progress), after each measured trial.
struct TuningProgress {
  int nodes_done = 0;       // nodes whose search has ended
  int nodes_total = 0;      // nodes with more than one configuration to choose from
  std::size_t trials = 0;   // configurations measured so far
  double best_speedup = 1;  // the largest speed-up a node has found over its untuned choice
  double seconds_left = 0;  // of SessionOptions::tuning_budget
};

// What one run() may take (Session::run's RunOptions overload).
struct RunOptions {
  // The run stops with ErrorCode::Cancelled once this time passes; checked before each node and
  // at each iteration of a Loop or Scan, so a node already running finishes first. The default
  // never passes.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // Another thread sets it to stop the run (ErrorCode::Cancelled) at the next such check; it must
  // outlive the run. Null: no flag.
  const std::atomic<bool>* cancel = nullptr;
  // Outputs that a CUDA session's device region computes (and no CPU node reads) come back in GPU
  // memory (Tensor::on_device), allocated for the caller on each run and freed with the last copy
  // of the Tensor, instead of being copied to the host. Other outputs, and every output of a CPU
  // session, stay on the host.
  bool outputs_on_device = false;
};

struct SessionOptions {
  OptimizerOptions optimizer;
  // Symbolic input dims fixed at load, by name ({{"N", 8}}): kernels compile and weights pack
  // for these sizes (a symbolic dim is otherwise taken as 1 at load and any other size compiles
  // at its first run), the optimizer sees static shapes, and run() accepts only these sizes.
  // A name no input declares, or a size below 1, is an error.
  std::map<std::string, std::int64_t> fixed_dims;
  // CPUs each run() uses; 0 = the CPUs in this process's affinity mask. Negative is an error.
  // Every run of every Session in the process shares the affinity mask's CPUs: a run waits until
  // this many are free (all of them, when this asks for more), so overlapping runs queue instead
  // of oversubscribing the cores.
  int threads = 0;
  // Intermediates live in one arena per run, laid out by value lifetimes once per input-shape
  // signature. Off: every intermediate is its own zero-filled allocation (for comparisons).
  bool plan_memory = true;
  // Every run() records per-step timings, read back with Session::last_profile().
  bool profile = false;
  // Tuning at load: for the input shapes the model declares (symbolic dims as fixed_dims says,
  // else 1), each node's configurations (candidate kernel x threads for the node) are searched
  // and measured inside the model; a configuration whose result differs from the reference
  // backend's is rejected; then the whole model runs on the winners and on the untuned choices,
  // alternately, and a winner it does not run faster with gives way to the untuned choice. The
  // choices are stored as tuning records in the cache folder. Without it
  // (and for other shapes) a node runs the record's winner when the cache folder has one, else
  // the cost model's choice. run() never measures.
  bool tuning = false;
  // Seconds the searches at load may take; past it, the nodes not yet searched keep the cost
  // model's choice (a node's search is finished or not used, never half-applied). The in-model
  // check comes after, a few seconds more (at least 5 runs of the model on each plan it
  // compares). Must be > 0.
  double tuning_budget = 600;
  // The search strategy: "grid" (every configuration), "random", "ga" (genetic), "rl"
  // (policy gradient); its seed; trials per node (0: the strategy's default, up to 64).
  // "compare" measures every configuration (as grid, whose winner it keeps), then replays random,
  // ga and rl on those measurements with 3 seeds each at 15% of the grid's trials
  // (TunedNode::strategies): how well each search would have done.
  std::string tuning_algorithm = "ga";
  std::uint64_t tuning_seed = 0;
  std::size_t tuning_trials = 0;
  // Without tuning, a generated kernel that is a node's choice (the cost model's, or a tuning
  // record's) but that the kernel store lacks is compiled after load, on a thread of its own at
  // the lowest CPU priority; the node runs another kernel until it is ready
  // (Session::background_compilation), and later sessions find it in the store. A node's
  // large-batch alternative compiles so when a run's shapes first rank it first. False: such a
  // session compiles nothing after load, those nodes run the best library or hand-written
  // kernel, and a record's generated choice is compiled at load. WPK_COMPILE_IN_BACKGROUND=0 in
  // the environment turns it off for every session.
  bool compile_in_background = true;
  // False: ignore the cache folder's tuning records (every node the cost model's choice, unless
  // tuning measures it): a baseline to compare tuning with.
  bool use_tuning_records = true;
  // Called (on the loading thread) after each measured configuration.
  std::function<void(const TuningProgress&)> on_tuning_progress;
  // Candidates to leave out: "backend" (every kernel of "cpu", "onednn", ...) or
  // "backend:kernel" (one kernel, as profiles name it: "cpu:f32_layernorm__avx2"), or a family
  // of kernels, the name before "__" ("gen:f32_matmul": every generated product). Added to the
  // comma-separated list in $WPK_DISABLE_KERNELS. A node no remaining candidate runs is an error.
  std::vector<std::string> disabled_kernels;
  // Where the tuning database lives; empty: $WPK_CACHE_DIR, else $XDG_CACHE_HOME/wpk, else
  // $HOME/.cache/wpk. An unusable folder only warns: tuning then lasts for the session.
  std::string cache_dir;
  // Bounds a model cannot cross, checked where shapes are computed (at load when the shapes are
  // known then, else at run() before anything is allocated); crossing one is an Error with code
  // ResourceExhausted naming the node. Values below 1 are an error, except memory_limit = 0.
  int max_rank = 64;
  std::int64_t max_tensor_elements = std::int64_t(1) << 32;
  // Iterations one Loop or Scan node may run in one run(): a body whose condition never turns
  // false stops here (RunOptions::deadline stops it sooner, by time).
  std::int64_t max_loop_iterations = std::int64_t(1) << 24;
  // Bytes this session may hold: weights as loaded and folded, plus what runs in flight hold for
  // intermediates (arenas, or one allocation per value while a run records its memory plan).
  // 0 = 3/4 of the machine's memory, or of the cgroup's limit when that is lower.
  std::int64_t memory_limit = 0;
  // Precision of convolutions and matrix products (see Precision). Part of every node's tuning
  // record key: bf16 and fp32 choices are measured apart.
  Precision precision = Precision::FP32;
  // CPU (default), CUDA or Auto; see Device.
  Device device = Device::CPU;
  // Log level for this session; unset means: WPK_LOG_LEVEL from the environment, else Warn.
  bool log_level_set = false;
  LogLevel log_level = LogLevel::Warn;
};

}  // namespace wpk

#pragma GCC visibility pop
