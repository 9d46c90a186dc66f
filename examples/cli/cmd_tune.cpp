// wpk tune MODEL [--algo ga|rl|random|grid|compare] [--budget-seconds S] [--budget-trials N] [--seed K]
//                [--threads N] [--batch B] [--dim NAME=SIZE] [--inputs DIR] [--iters K]
// Times the model on the cost model's choices alone (tuning records ignored), tunes it at load
// for the given sizes (fixed at load, so every node is tuned for them) with a progress bar on
// stderr, then times a fresh session that finds the records. Prints one row per tuned node: op
// and input shapes, winner, its configuration, speed-up over the untuned choice, whether the
// in-model check kept it; then both end-to-end medians, the two sessions timed alternately
// (random inputs, or --inputs DIR's). The records land in the cache folder, where every later session finds them.
// --algo compare measures every configuration and then says how random, GA and RL would have
// fared with 15% of those trials (SessionOptions::tuning_algorithm).
// --simulate ARCH (sm_80, sm_90): tuning for a GPU that is not here, every time modelled
// (runtime/gpu_simulation.hpp); --device is then cuda whatever it says.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "cli.hpp"
#include "runtime/gpu_simulation.hpp"

namespace wpk::cli {
namespace {

void time_runs(const Session& s, const TensorMap& inputs, int iters, std::vector<double>& times) {
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    s.run(inputs);
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
}

// Redrawn when a node finishes, else at most ten times a second.
void draw_progress(const TuningProgress& p) {
  static int last_done = -1;
  static auto last_draw = std::chrono::steady_clock::time_point();
  const auto now = std::chrono::steady_clock::now();
  if (p.nodes_done == last_done && now - last_draw < std::chrono::milliseconds(100)) return;
  last_done = p.nodes_done;
  last_draw = now;
  std::fprintf(stderr, "\rtuning: nodes %d/%d  trials %zu  best speed-up x%.2f  %.0f s left   ", p.nodes_done,
               p.nodes_total, p.trials, p.best_speedup, p.seconds_left);
  std::fflush(stderr);
}

// "onednn threads=2" -> ("onednn", "threads=2").
std::pair<std::string, std::string> split_winner(const std::string& w) {
  const std::size_t space = w.find(' ');
  if (space == std::string::npos) return {w, ""};
  return {w.substr(0, space), w.substr(space + 1)};
}

bool is_conv_or_matmul(const std::string& op) {
  for (const char* prefix : {"Conv ", "com.wpk.FusedConv ", "MatMul ", "Gemm ", "com.wpk.FusedMatMul "})
    if (op.rfind(prefix, 0) == 0) return true;
  return false;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// --algo compare: per strategy, over the conv and matmul nodes and their seeds, how far its best
// is from the grid's (gap 0.03: 3% slower) at 15% of the grid's trials.
void print_strategy_comparison(const std::vector<TunedNode>& report) {
  std::vector<std::string> algorithms;
  std::vector<std::vector<double>> gaps;
  std::vector<double> trial_shares;
  std::size_t nodes = 0;
  for (const TunedNode& n : report) {
    if (!is_conv_or_matmul(n.op) || n.strategies.empty() || !(n.grid_best_us > 0)) continue;
    ++nodes;
    trial_shares.push_back(static_cast<double>(n.strategies.front().trials) / static_cast<double>(n.trials));
    for (const TunedNode::StrategyRun& r : n.strategies) {
      const auto at = std::find(algorithms.begin(), algorithms.end(), r.algorithm);
      const std::size_t i = static_cast<std::size_t>(at - algorithms.begin());
      if (at == algorithms.end()) {
        algorithms.push_back(r.algorithm);
        gaps.emplace_back();
      }
      gaps[i].push_back(r.best_us / n.grid_best_us - 1);
    }
  }
  for (const TunedNode& n : report) {
    if (!is_conv_or_matmul(n.op) || n.strategies.empty() || !(n.grid_best_us > 0)) continue;
    std::printf("%-48s grid best %8.1fus of %3zu trials;", n.node.c_str(), n.grid_best_us, n.trials);
    for (const TunedNode::StrategyRun& r : n.strategies)
      std::printf(" %s %+.0f%%", r.algorithm.c_str(), 100 * (r.best_us / n.grid_best_us - 1));
    std::printf("\n");
  }
  std::printf("search quality on %zu conv and matmul nodes (each strategy's best against the grid's, "
              "%d seeds each, median trials %.0f%% of the grid's):\n",
              nodes, 3, 100 * median(trial_shares));
  std::printf("%-8s %12s %12s %14s\n", "strategy", "median gap", "mean gap", "within 5%");
  for (std::size_t i = 0; i < algorithms.size(); ++i) {
    double sum = 0;
    std::size_t within = 0;
    for (double g : gaps[i]) {
      sum += g;
      within += g <= 0.05;
    }
    std::printf("%-8s %11.2f%% %11.2f%% %7zu of %zu\n", algorithms[i].c_str(), 100 * median(gaps[i]),
                100 * sum / static_cast<double>(std::max<std::size_t>(1, gaps[i].size())), within, gaps[i].size());
  }
}

// --simulate ARCH: tuning for a GPU that is not here; every figure modelled.
int simulate(const std::string& path, SessionOptions options, const std::string& arch, int batch,
             const std::map<std::string, std::int64_t>& dims) {
  Graph graph = load(path);
  options.fixed_dims = input_dim_sizes(graph, batch, dims);
  const GpuSimulation sim = simulate_gpu_tuning(std::move(graph), options, arch);
  std::printf("simulated tuning for %s (sm_%d, %d multiprocessors): every time below is modelled, no GPU ran\n",
              sim.gpu.name.c_str(), sim.gpu.sm, sim.gpu.multiprocessors);
  std::printf("placement: %d of %d nodes in %d regions (modelled %.3f ms against %.3f ms all on the CPU)\n",
              sim.placement.nodes_on_gpu, sim.placement.nodes, sim.placement.regions, sim.placement.predicted_seconds * 1e3,
              sim.placement.predicted_cpu_seconds * 1e3);
  std::printf("%-44s %5s %10s %10s  %-8s %s\n", "convolution (first node)", "count", "generated", "cuDNN", "choice",
              "schedule, registers");
  double chosen = 0, library = 0;
  for (const SimulatedConv& c : sim.convs) {
    const bool generated = c.generated_seconds < c.library_seconds;
    chosen += c.repeats * std::min(c.generated_seconds, c.library_seconds);
    library += c.repeats * c.library_seconds;
    std::printf("%-44.44s %5d %8.1fus %8.1fus  %-8s %s, %d\n", c.node.c_str(), c.repeats, c.generated_seconds * 1e6,
                c.library_seconds * 1e6, generated ? "gen" : "cudnn", c.schedule.c_str(), c.registers);
  }
  std::printf("convolutions: %.3f ms with the choices, %.3f ms with cuDNN alone; %zu cubins compiled for sm_%d, %zu from "
              "the cache folder\n",
              chosen * 1e3, library * 1e3, sim.compiled, sim.gpu.sm, sim.from_cache);
  return 0;
}

}  // namespace

int cmd_tune(const Args& args) {
  const std::string path = args.positional[0];
  SessionOptions options = base_options(args);
  options.threads = args.get_int("--threads", 0, 0);
  options.tuning_algorithm = args.get("--algo", "ga");
  options.tuning_budget = args.get_int("--budget-seconds", 600, 1);
  options.tuning_trials = static_cast<std::size_t>(args.get_int("--budget-trials", 0, 0));
  options.tuning_seed = static_cast<std::uint64_t>(args.get_int("--seed", 0, 0));
  const int batch = args.get_int("--batch", 1, 1);
  const int iters = args.get_int("--iters", 20, 1);
  const auto dims = parse_dims(args);
  if (args.has("--simulate")) return simulate(path, options, args.get("--simulate", ""), batch, dims);

  Graph graph = load(path);
  options.fixed_dims = command_dim_sizes(graph, args);
  SessionOptions untuned_options = options;
  untuned_options.use_tuning_records = false;
  const Session untuned(graph, untuned_options);
  const TensorMap inputs = command_inputs(untuned, args);  // --inputs DIR, else random

  options.tuning = true;
  options.on_tuning_progress = draw_progress;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<TunedNode> report;
  TuningCheck check;
  BatchPartsCheck parts;
  int tuned_nodes = 0, threads = 0;
  std::vector<double> warm;
  // Inputs the model refuses fail here, before minutes of tuning.
  with_inputs_hint(args, [&] { time_runs(untuned, inputs, 1, warm); });
  // Preparing every configuration compiles the generated kernels the cache folder lacks, before
  // the search's first progress line: minutes on a cold folder, which must not look like a hang.
  std::fprintf(stderr, "tuning: preparing every candidate of every node (generated kernels not in the cache compile now)\n");
  std::fflush(stderr);
  {
    // Gone before the fresh session is timed: it keeps every candidate and the loaded weights.
    const Session tuned(graph, options);
    report = tuned.tuning_report();
    check = tuned.tuning_check();
    parts = tuned.batch_parts_check();
    tuned_nodes = tuned.tuned_nodes();
    threads = tuned.threads();
  }
  const double tune_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "\n");
  // Timed as a later process runs it: a fresh session that finds the records.
  SessionOptions after_options = options;
  after_options.tuning = false;
  after_options.on_tuning_progress = nullptr;
  const Session after(std::move(graph), after_options);
  // Both sessions alternately, a share of the runs at a time: a drift of the machine's speed
  // (another process, the clock) falls on both.
  constexpr int kRounds = 5;
  std::vector<double> before_times, after_times;
  time_runs(untuned, inputs, 3, warm);
  time_runs(after, inputs, 3, warm);
  for (int round = 0; round < kRounds; ++round) {
    const int n = iters / kRounds + (round < iters % kRounds ? 1 : 0);
    time_runs(untuned, inputs, std::max(n, 1), before_times);
    time_runs(after, inputs, std::max(n, 1), after_times);
  }
  const double before_ms = median(before_times), after_ms = median(after_times);

  std::printf("%-48s %-58s %-30s %-12s %8s %8s %7s  %s\n", "node", "op and inputs", "winner", "config", "untuned", "tuned",
              "speedup", "in the model");
  int slower_in_model = 0;
  for (const TunedNode& n : report) {
    const auto [winner, config] = split_winner(n.winner);
    slower_in_model += n.slower_in_model;
    std::printf("%-48s %-58.58s %-30s %-12s %6.1fus %6.1fus %6.2fx  %s\n", n.node.c_str(), n.op.c_str(), winner.c_str(),
                config.c_str(), n.untuned_us, n.winner_us, n.untuned_us / n.winner_us,
                n.slower_in_model      ? "no faster: untuned kept"
                : n.runner_up_in_model ? "runner-up kept"
                : n.untuned == n.winner ? "-"
                                        : "kept");
  }
  if (options.tuning_algorithm == "compare") print_strategy_comparison(report);
  const int from_records = tuned_nodes - static_cast<int>(report.size());
  std::printf("%zu nodes measured, %d more from earlier tuning records (wpk cache clear to measure them again), "
              "%.1f s of tuning; %d winners ran no faster inside the model and were not kept\n",
              report.size(), std::max(0, from_records), tune_s, slower_in_model);
  if (check.changed > 0)
    std::printf("in the model (one session, %d alternating runs of each plan): %d of %d changed nodes keep a tuned option "
                "(%d a runner-up): %.3f ms, untuned %.3f ms (x%.2f); every winner %.3f ms\n",
                check.runs, check.kept, check.changed, check.runners_up, check.kept_ms, check.untuned_ms,
                check.untuned_ms / check.kept_ms, check.every_tuned_ms);
  if (parts.parts > 1)
    std::printf("the batch in %d parts at once, one a thread (%d pairs of runs): %.3f ms, whole %.3f ms, median ratio "
                "%.3f: %s\n",
                parts.parts, parts.runs, parts.parts_ms, parts.whole_ms, parts.ratio, parts.chosen ? "runs in parts" : "runs whole");
  std::printf("end to end, batch %d, %d threads (two sessions, alternately): untuned %.3f ms, tuned %.3f ms (x%.2f)\n",
              batch, threads, before_ms, after_ms, before_ms / after_ms);
  // A session with a dynamic batch prepares at load what the records of the declared sizes name
  // (symbolic dims as 1); records of other sizes serve only sessions that fix those sizes.
  const auto& fixed = after_options.fixed_dims;
  if (std::any_of(fixed.begin(), fixed.end(), [](const auto& d) { return d.second != 1; }))
    std::printf("these records serve sessions that fix the same sizes at load (SessionOptions::fixed_dims, "
                "wpk bench --fix-dims)\n");
  return 0;
}

}  // namespace wpk::cli
