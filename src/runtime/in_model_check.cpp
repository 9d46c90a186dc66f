#include "runtime/in_model_check.hpp"

#include <algorithm>
#include <chrono>
#include <map>

#include "wpk/error.hpp"
#include "runtime/logging.hpp"
#include "runtime/measurement.hpp"

namespace wpk {
namespace {

struct Series {
  std::vector<std::vector<double>> step_us;  // per step, one time a run
  std::vector<double> total_us;
};

void add(Series& series, const RunProfile& p, std::size_t steps) {
  if (p.steps.size() != steps)
    throw Error(ErrorCode::Internal, "in-model check: a run profiled " + std::to_string(p.steps.size()) + " steps of " +
                                         std::to_string(steps));
  series.step_us.resize(steps);
  for (std::size_t s = 0; s < steps; ++s) series.step_us[s].push_back(p.steps[s].duration_us);
  series.total_us.push_back(p.total_us);
}

// Runs `a` and `b` alternately (a first) until the limits say stop.
std::pair<Series, Series> alternate(const std::vector<StepChoice>& a, const std::vector<StepChoice>& b,
                                    const PlanRunner& run, const InModelCheckLimits& limits) {
  Series sa, sb;
  const auto start = std::chrono::steady_clock::now();
  for (int pair = 0; pair < limits.max_pairs; ++pair) {
    const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (pair >= limits.min_pairs && spent >= limits.seconds) break;
    add(sa, run(a), a.size());
    add(sb, run(b), b.size());
  }
  return {std::move(sa), std::move(sb)};
}

double median_step(const Series& s, std::size_t step) { return median(s.step_us[step]); }

}  // namespace

std::vector<std::vector<std::size_t>> step_consumers(const Graph& graph, const ExecutionPlan& plan) {
  const auto& steps = plan.steps();
  std::map<ValueId, std::size_t> producer;
  for (std::size_t s = 0; s < steps.size(); ++s)
    for (ValueId v : graph.nodes()[steps[s].node_index].outputs)
      if (v != kNoValue) producer[v] = s;
  std::vector<std::vector<std::size_t>> consumers(steps.size());
  for (std::size_t s = 0; s < steps.size(); ++s)
    for (ValueId v : graph.nodes()[steps[s].node_index].inputs) {
      const auto p = producer.find(v);
      if (p == producer.end()) continue;
      std::vector<std::size_t>& readers = consumers[p->second];
      if (readers.empty() || readers.back() != s) readers.push_back(s);
    }
  return consumers;
}

InModelCheckResult check_in_model(const std::vector<StepChoice>& tuned, const std::vector<PlannedChange>& changes,
                                  const std::vector<std::vector<std::size_t>>& consumers, const PlanRunner& run,
                                  InModelCheckLimits limits) {
  InModelCheckResult result;
  result.keep.assign(changes.size(), false);
  if (changes.empty()) return result;
  std::vector<StepChoice> untuned = tuned;
  std::vector<bool> changed(tuned.size(), false);
  for (const PlannedChange& c : changes) {
    untuned.at(c.step) = c.untuned;
    changed.at(c.step) = true;
  }
  const auto [t, u] = alternate(tuned, untuned, run, limits);
  result.tuned_ms = median(t.total_us) / 1000;

  // Time saved per record: the steps' own and that of their unchanged readers.
  std::map<std::string, double> saved_us;
  for (const PlannedChange& c : changes) {
    result.untuned_step_us.push_back(median_step(u, c.step));
    const double own = median_step(u, c.step) - median_step(t, c.step);
    double readers = 0;
    if (c.step < consumers.size())
      for (std::size_t r : consumers[c.step])
        if (!changed[r]) readers += median_step(u, r) - median_step(t, r);
    logger().debug("in-model check: {}: {:.1f} us untuned, {:.1f} tuned; its readers {:+.1f} us", c.node,
                   median_step(u, c.step), median_step(t, c.step), -readers);
    saved_us[c.record] += own + readers;
  }
  // Records by what they save, the least first: where the kept plan does not win end to end,
  // the weakest goes and the plan runs again (a saving misplaced between two changed steps, a
  // reader read twice), a few times, then none stays.
  std::vector<std::pair<double, std::string>> kept_records;
  for (const auto& [record, saved] : saved_us)
    if (saved > 0) kept_records.push_back({saved, record});
  std::sort(kept_records.begin(), kept_records.end());
  const auto plan_keeping = [&]() {
    std::vector<StepChoice> kept = untuned;
    for (std::size_t i = 0; i < changes.size(); ++i) {
      result.keep[i] = std::any_of(kept_records.begin(), kept_records.end(),
                                   [&](const auto& r) { return r.second == changes[i].record; });
      if (result.keep[i]) kept[changes[i].step] = tuned[changes[i].step];
    }
    return kept;
  };
  double kept_ms = result.tuned_ms, untuned_ms = median(u.total_us) / 1000;
  result.pairs = static_cast<int>(t.total_us.size());
  bool accepted = false;
  for (int attempt = 0; attempt <= limits.back_offs && !kept_records.empty(); ++attempt) {
    const std::vector<StepChoice> kept = plan_keeping();
    if (kept_records.size() < saved_us.size() || attempt > 0) {  // else the runs above compared it
      const auto [k, u2] = alternate(kept, untuned, run, limits);
      kept_ms = median(k.total_us) / 1000;
      untuned_ms = median(u2.total_us) / 1000;
      result.pairs = static_cast<int>(k.total_us.size());
    }
    if (kept_ms < untuned_ms) {
      accepted = true;
      break;
    }
    kept_records.erase(kept_records.begin());
  }
  result.untuned_ms = untuned_ms;
  if (!accepted) {
    kept_records.clear();
    plan_keeping();
    kept_ms = untuned_ms;
  }
  result.kept_ms = kept_ms;
  return result;
}

}  // namespace wpk
