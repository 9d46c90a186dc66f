#include "runtime/tuner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "core/float_values.hpp"
#include "runtime/cache_key.hpp"
#include "runtime/logging.hpp"
#include "runtime/workload.hpp"

namespace wpk {
namespace {

std::atomic<std::uint64_t> g_measurements{0};

constexpr int kTimedReps = 5;
constexpr double kRepBudgetUs = 50000;  // a slow candidate stops repeating after this much time

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Runs one candidate on `inputs`; the outputs in `out`. Throws what the kernel throws.
double time_once(const Kernel& kernel, const Node& node, const std::vector<const Tensor*>& inputs, std::vector<Tensor>& out) {
  KernelContext ctx(node, inputs);
  const auto t0 = std::chrono::steady_clock::now();
  kernel.run(ctx);
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  out = std::move(ctx.outputs());
  return us;
}

}  // namespace

std::uint64_t tuning_measurements() { return g_measurements.load(); }

bool outputs_agree(const Tensor& got, const Tensor& want) {
  if (got.empty() || want.empty()) return got.empty() == want.empty();
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) return false;
  if (!dtype_is_float(want.dtype())) return got.nbytes() == want.nbytes() && std::memcmp(got.raw(), want.raw(), got.nbytes()) == 0;
  double scale = 0;
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    const double w = float_element(want, i);
    if (std::isfinite(w)) scale = std::max(scale, std::abs(w));
  }
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    const double w = float_element(want, i), g = float_element(got, i);
    if (std::isnan(w) || std::isnan(g)) {
      if (std::isnan(w) != std::isnan(g)) return false;
      continue;
    }
    if (std::isinf(w) || std::isinf(g)) {
      if (w != g) return false;
      continue;
    }
    if (std::abs(g - w) > 1e-3 * std::abs(w) + 1e-4 * scale) return false;
  }
  return true;
}

Tuner::Tuner(const Graph& graph, const ExecutionPlan& plan, TuningDb* db, int threads)
    : graph_(graph), plan_(plan), db_(db), threads_(threads) {}

std::string Tuner::key_for(const PlanStep& step, const Node& node, const std::vector<const Tensor*>& inputs) const {
  std::string key = op_signature(node, graph_, inputs) + ";threads=" + std::to_string(threads_) + ";backends=";
  for (const Candidate& c : step.candidates) key += c.backend->name() + "@" + c.backend->version() + ",";
  return key + ";" + environment_key();
}

int Tuner::predicted_best(std::size_t s, const std::vector<const Tensor*>& inputs) const {
  const PlanStep& step = plan_.steps()[s];
  if (step.candidates.size() < 2) return 0;
  const search::Workload work = estimate_workload(graph_.nodes()[step.node_index], inputs);
  const search::Machine machine{threads_};
  int best = -1;
  double best_seconds = 0;
  for (std::size_t c = 0; c < step.candidates.size(); ++c) {
    const Kernel& kernel = *step.candidates[c].kernel;
    if (!kernel.runs(inputs)) continue;
    const KernelProfile p = kernel.profile();
    const double seconds = search::predict_seconds(work, {p.vector_bits, p.efficiency}, machine);
    if (best < 0 || seconds < best_seconds) {  // ties: the earlier registered backend
      best = static_cast<int>(c);
      best_seconds = seconds;
    }
  }
  return best < 0 ? 0 : best;
}

int Tuner::choose(std::size_t s, const std::vector<const Tensor*>& inputs) const {
  const PlanStep& step = plan_.steps()[s];
  if (!db_ || step.candidates.size() < 2) return predicted_best(s, inputs);
  const Node& node = graph_.nodes()[step.node_index];
  const std::string key = key_for(step, node, inputs);
  if (auto winner = db_->lookup(key)) {
    for (std::size_t c = 0; c < step.candidates.size(); ++c)
      if (step.candidates[c].backend->name() == *winner && step.candidates[c].kernel->runs(inputs))
        return static_cast<int>(c);
  }
  return measure(s, inputs, key);
}

int Tuner::measure(std::size_t s, const std::vector<const Tensor*>& inputs, const std::string& key) const {
  const PlanStep& step = plan_.steps()[s];
  const Node& node = graph_.nodes()[step.node_index];
  const std::size_t n = step.candidates.size();
  // The reference backend is the oracle; without it, the default candidate is.
  std::size_t ref = 0;
  for (std::size_t c = 0; c < n; ++c)
    if (step.candidates[c].backend->name() == "reference") ref = c;

  std::vector<std::vector<Tensor>> outputs(n);
  std::vector<double> median_us(n, -1);
  for (std::size_t c = 0; c < n; ++c) {
    const Kernel& kernel = *step.candidates[c].kernel;
    if (!kernel.runs(inputs)) continue;
    g_measurements.fetch_add(1);
    try {
      double spent = time_once(kernel, node, inputs, outputs[c]);  // warm-up: caches, lazy compiles
      std::vector<double> times;
      std::vector<Tensor> scratch;
      for (int r = 0; r < kTimedReps && spent < kRepBudgetUs; ++r) {
        times.push_back(time_once(kernel, node, inputs, scratch));
        spent += times.back();
      }
      median_us[c] = times.empty() ? spent : median(times);
    } catch (const std::exception& e) {
      logger().debug("{}tuning: {} failed: {}", node_label(node), step.candidates[c].backend->name(), e.what());
    }
  }
  int best = -1;
  for (std::size_t c = 0; c < n; ++c) {
    if (median_us[c] < 0) continue;
    bool agrees = true;
    for (std::size_t o = 0; o < node.outputs.size() && agrees; ++o) {
      if (node.outputs[o] == kNoValue || c == ref) continue;
      agrees = o < outputs[c].size() && o < outputs[ref].size() && outputs_agree(outputs[c][o], outputs[ref][o]);
    }
    if (!agrees) {
      logger().debug("{}tuning: {} rejected, its result differs from {}", node_label(node),
                     step.candidates[c].backend->name(), step.candidates[ref].backend->name());
      continue;
    }
    if (best < 0 || median_us[c] < median_us[static_cast<std::size_t>(best)]) best = static_cast<int>(c);
  }
  if (best < 0) return predicted_best(s, inputs);  // nothing ran correctly: that one reports the error
  const std::string& winner = step.candidates[static_cast<std::size_t>(best)].backend->name();
  logger().debug("{}tuning: {} wins ({:.1f} us)", node_label(node), winner, median_us[static_cast<std::size_t>(best)]);
  db_->store(key, winner, median_us[static_cast<std::size_t>(best)], op_summary(node, inputs));
  return best;
}

}  // namespace wpk
