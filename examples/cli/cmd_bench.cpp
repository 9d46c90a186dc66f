// wpk bench MODEL [--threads N] [--batch B] [--iters K] [--warmup W] [--dim NAME=SIZE] [--inputs DIR] [--json]
//                 [--fix-dims] [--profile] [--trace FILE.json] [--tune] [--idle MS] [--clients C] [--disable PASS,...]
// Symbolic input dims stay symbolic by default: kernels compile for size 1 at load and for the
// benchmarked sizes at the first warm-up run. --fix-dims fixes the dims it sets (--batch for
// symbolic first dims, --dim by name) at load (SessionOptions::fixed_dims), so load includes
// compiling and packing for them.
// Load (file to first-run-ready session), warm-up runs, then K timed runs. --profile prints where
// the load went (parse, optimize, prepare kernels, generated code, tune) and a per-node table, --trace writes the timed runs as a Chrome trace; both time every step, which
// the plain timings do not. --tune turns tuning at load on (SessionOptions::tuning) for the
// benchmarked sizes (fixed at load). --json adds the configurations this process measured, the
// kernels it compiled and the nodes on tuned configurations. --idle sleeps MS
// after the last run and reports the CPU time other threads (OpenMP workers) spent meanwhile.
// --clients C runs the timed runs from C threads at once (K runs each), as a service's concurrent
// requests would, and adds throughput and the 99th percentile of latency.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

#include "cli.hpp"

namespace wpk::cli {
namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) o += c;
  }
  return o;
}

}  // namespace

int cmd_bench(const Args& args) {
  const std::string path = args.positional[0];
  SessionOptions options = base_options(args);
  options.threads = args.get_int("--threads", 0, 0);
  options.tuning = args.has("--tune");
  const int batch = args.get_int("--batch", 1, 1);
  const int iters = args.get_int("--iters", 20, 1);
  const int warmup = args.get_int("--warmup", 3, 0);
  const int idle_ms = args.get_int("--idle", 0, 0);
  const int clients = args.get_int("--clients", 1, 1);
  const bool profiling = args.has("--profile") || args.has("--trace");

  const auto dims = parse_dims(args);

  const auto t0 = std::chrono::steady_clock::now();
  Graph graph = load(path);
  const double parse_ms = ms_since(t0);
  // Tuning at load tunes the sizes fixed at load: --tune fixes the benchmarked ones.
  if (args.has("--fix-dims") || args.has("--tune") || options.device != Device::CPU)
    options.fixed_dims = command_dim_sizes(graph, args);
  Session session(std::move(graph), options);
  const double load_ms = ms_since(t0);
  const TensorMap inputs = command_inputs(session, args);
  // What runs once the kernels compiling after load are ready is what a long-lived process gets:
  // that is what is timed.
  const BackgroundCompilation compiled_later = session.wait_for_background_compilation();
  with_inputs_hint(args, [&] {
    for (int i = 0; i < warmup; ++i) session.run(inputs);
  });
  std::vector<double> times;
  std::vector<RunProfile> profiles(profiling ? static_cast<std::size_t>(iters) * clients : 0);
  std::mutex times_mutex;
  const auto timed_runs = [&](int client) {
    for (int i = 0; i < iters; ++i) {
      const auto t = std::chrono::steady_clock::now();
      session.run(inputs, profiling ? &profiles[static_cast<std::size_t>(client * iters + i)] : nullptr);
      const double ms = ms_since(t);
      std::lock_guard<std::mutex> lock(times_mutex);
      times.push_back(ms);
    }
  };
  const auto timed_start = std::chrono::steady_clock::now();
  if (clients == 1) {
    timed_runs(0);
  } else {
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c) threads.emplace_back(timed_runs, c);
    for (auto& t : threads) t.join();
  }
  const double runs_per_s = static_cast<double>(times.size()) / (ms_since(timed_start) / 1000);
  const double idle = idle_ms > 0 ? idle_cpu_ms(idle_ms) : 0;
  std::sort(times.begin(), times.end());
  const double median = times.size() % 2 ? times[times.size() / 2]
                                         : 0.5 * (times[times.size() / 2 - 1] + times[times.size() / 2]);
  const auto percentile = [&](double q) {
    return times[std::min(times.size() - 1, static_cast<std::size_t>(q * static_cast<double>(times.size())))];
  };
  const double p90 = percentile(0.9), p99 = percentile(0.99);
  const int threads = session.threads();
  const LoadProfile lp = session.load_profile();
  const std::string model = std::filesystem::path(path).stem().string();
  if (args.has("--json")) {
    std::printf(
        "{\"model\": \"%s\", \"runtime\": \"wpk\", \"threads\": %d, \"batch\": %d, \"load_ms\": %.3f, \"median_ms\": %.3f, "
        "\"p90_ms\": %.3f, \"min_ms\": %.3f, \"peak_rss_mb\": %.1f, \"measured_candidates\": %llu, "
        "\"compiled_kernels\": %llu, \"tuned_nodes\": %d, \"clients\": %d, \"runs_per_s\": %.2f, \"p99_ms\": %.3f, "
        "\"load_profile\": {\"parse_ms\": %.3f, \"optimize_ms\": %.3f, \"prepare_ms\": %.3f, \"compile_ms\": %.3f, "
        "\"tune_ms\": %.3f}, \"background_compile\": {\"kernels\": %d, \"ready\": %d, \"failed\": %d, \"ms\": %.1f}}\n",
        json_escape(model).c_str(), threads, batch, load_ms, median, p90, times.front(), peak_rss_mb(),
        static_cast<unsigned long long>(process_counters().measured_configurations),
        static_cast<unsigned long long>(process_counters().compiled_kernels), session.tuned_nodes(), clients, runs_per_s,
        p99, parse_ms, lp.optimize_ms, lp.prepare_ms, lp.compile_ms, lp.tune_ms, compiled_later.kernels,
        compiled_later.ready, compiled_later.failed, compiled_later.seconds * 1000);
  } else {
    std::printf("model %s  batch %d  threads %d\n", model.c_str(), batch, threads);
    std::printf("load %.1f ms  median %.3f ms  p90 %.3f ms  min %.3f ms  (%d runs after %d warm-up)  peak RSS %.1f MB\n",
                load_ms, median, p90, times.front(), iters, warmup, peak_rss_mb());
    if (compiled_later.kernels > 0)
      std::printf("compiled after load: %d of %d generated kernels in %.1f s (waited for before timing)\n",
                  compiled_later.ready, compiled_later.kernels, compiled_later.seconds);
    const PlanSummary plan = session.describe();
    if (plan.memory_planned)
      std::printf("arena %.2f MiB per run (one allocation per intermediate would take %.2f MiB)\n",
                  static_cast<double>(plan.arena_bytes) / (1 << 20), static_cast<double>(plan.naive_bytes) / (1 << 20));
    if (clients > 1)
      std::printf("%d clients: %.1f runs/s  p99 %.3f ms\n", clients, runs_per_s, p99);
    if (idle_ms > 0)
      std::printf("idle: other threads used %.3f ms of CPU in the %d ms after the last run returned\n", idle, idle_ms);
    if (args.has("--profile")) {
      std::printf("load %.1f ms: parse %.1f, optimize %.1f, prepare kernels %.1f (of which generated code %.1f), tune %.1f\n",
                  load_ms, parse_ms, lp.optimize_ms, lp.prepare_ms, lp.compile_ms, lp.tune_ms);
      print_profile_table(profiles);
    }
  }
  if (args.has("--trace")) write_chrome_trace(profiles, args.get("--trace", ""));
  return 0;
}

}  // namespace wpk::cli
