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

// Runs the plans in turn, round after round, until the limits say stop.
std::vector<Series> alternate(const std::vector<std::vector<StepChoice>>& plans, const PlanRunner& run,
                              const InModelCheckLimits& limits) {
  std::vector<Series> series(plans.size());
  const auto start = std::chrono::steady_clock::now();
  for (int round = 0; round < limits.max_pairs; ++round) {
    const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (round >= limits.min_pairs && spent >= limits.seconds * static_cast<double>(plans.size()) / 2) break;
    for (std::size_t p = 0; p < plans.size(); ++p) add(series[p], run(plans[p]), plans[p].size());
  }
  return series;
}

double median_step(const Series& s, std::size_t step) { return median(s.step_us[step]); }

// The median over rounds of what `t` saved against `u` on `step` in the same round: a machine
// that slows down for a while slows both runs of the rounds it spans.
double paired_saving(const Series& u, const Series& t, std::size_t step) {
  std::vector<double> saved;
  for (std::size_t r = 0; r < u.step_us[step].size() && r < t.step_us[step].size(); ++r)
    saved.push_back(u.step_us[step][r] - t.step_us[step][r]);
  return median(saved);
}

// The median over rounds of `t`'s run time over `u`'s in the same round.
double paired_ratio(const Series& t, const Series& u) {
  std::vector<double> ratios;
  for (std::size_t r = 0; r < u.total_us.size() && r < t.total_us.size(); ++r)
    if (u.total_us[r] > 0) ratios.push_back(t.total_us[r] / u.total_us[r]);
  return ratios.empty() ? 1.0 : median(ratios);
}

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
  for (const PlannedChange& c : changes) result.choice.push_back(c.untuned);
  if (changes.empty()) return result;
  std::vector<StepChoice> untuned = tuned;
  std::vector<bool> changed(tuned.size(), false);
  std::size_t ranks = 1;  // the tuned choice, then each runner-up
  for (const PlannedChange& c : changes) {
    untuned.at(c.step) = c.untuned;
    changed.at(c.step) = true;
    ranks = std::max(ranks, 1 + c.runners_up.size());
  }
  // Plan 0 untuned, plan r every change on its rank-r option (its last one where it has fewer).
  const auto option = [&](const PlannedChange& c, std::size_t rank) {
    return rank == 0 || c.runners_up.empty() ? tuned[c.step] : c.runners_up[std::min(rank, c.runners_up.size()) - 1];
  };
  std::vector<std::vector<StepChoice>> plans = {untuned};
  for (std::size_t rank = 0; rank < ranks; ++rank) {
    plans.push_back(tuned);
    for (const PlannedChange& c : changes) plans.back()[c.step] = option(c, rank);
  }
  const std::vector<Series> series = alternate(plans, run, limits);
  const Series& u = series[0];
  result.tuned_ms = median(series[1].total_us) / 1000;

  // Per record and rank, the time saved: its steps' own and that of their unchanged readers.
  std::map<std::string, std::vector<double>> saved_us;
  for (const PlannedChange& c : changes) {
    std::vector<double>& saved = saved_us[c.record];
    saved.resize(ranks, 0.0);
    for (std::size_t rank = 0; rank < ranks; ++rank) {
      const Series& t = series[1 + rank];
      double readers = 0;
      if (c.step < consumers.size())
        for (std::size_t r : consumers[c.step])
          if (!changed[r]) readers += paired_saving(u, t, r);
      saved[rank] += paired_saving(u, t, c.step) + readers;
      logger().debug("in-model check: {} (option {}): {:.1f} us untuned, {:.1f} us; its readers {:+.1f} us", c.node,
                     rank, median_step(u, c.step), median_step(t, c.step), -readers);
    }
  }
  // Each record's best option; records by what it saves, the least first: where the kept plan
  // does not win end to end, the weakest goes and the plan runs again (a saving misplaced
  // between two changed steps, a reader read twice), a few times, then none stays.
  std::map<std::string, std::size_t> best_rank;
  std::vector<std::pair<double, std::string>> kept_records;
  for (const auto& [record, saved] : saved_us) {
    const auto best = std::max_element(saved.begin(), saved.end());
    best_rank[record] = static_cast<std::size_t>(best - saved.begin());
    if (*best > 0) kept_records.push_back({*best, record});
  }
  std::sort(kept_records.begin(), kept_records.end());
  const auto plan_keeping = [&]() {
    std::vector<StepChoice> kept = untuned;
    for (std::size_t i = 0; i < changes.size(); ++i) {
      const PlannedChange& c = changes[i];
      result.keep[i] = std::any_of(kept_records.begin(), kept_records.end(), [&](const auto& r) { return r.second == c.record; });
      result.choice[i] = result.keep[i] ? option(c, best_rank[c.record]) : c.untuned;
      kept[c.step] = result.choice[i];
    }
    return kept;
  };
  const std::size_t records = saved_us.size();
  double kept_ms = 0, untuned_ms = median(u.total_us) / 1000, ratio = 1;
  result.pairs = static_cast<int>(u.total_us.size());
  bool accepted = false;
  for (int attempt = 0; attempt <= limits.back_offs && !kept_records.empty(); ++attempt) {
    const std::vector<StepChoice> kept = plan_keeping();
    // A plan the first runs already timed is not run again.
    const auto timed = std::find(plans.begin(), plans.end(), kept);
    if (attempt == 0 && kept_records.size() == records && timed != plans.end()) {
      const Series& k = series[static_cast<std::size_t>(timed - plans.begin())];
      kept_ms = median(k.total_us) / 1000;
      ratio = paired_ratio(k, u);
    } else {
      const std::vector<Series> again = alternate({kept, untuned}, run, limits);
      kept_ms = median(again[0].total_us) / 1000;
      untuned_ms = median(again[1].total_us) / 1000;
      ratio = paired_ratio(again[0], again[1]);
      result.pairs = static_cast<int>(again[0].total_us.size());
    }
    if (ratio <= limits.accepted_ratio) {
      accepted = true;
      break;
    }
    kept_records.erase(kept_records.begin());
  }
  result.untuned_ms = untuned_ms;
  result.ratio = accepted ? ratio : 1.0;
  if (!accepted) {
    kept_records.clear();
    kept_ms = untuned_ms;
  }
  plan_keeping();
  result.kept_ms = kept_ms;
  // Each change's time on what stays, from the first runs.
  for (std::size_t i = 0; i < changes.size(); ++i) {
    std::size_t plan = 0;
    if (result.keep[i]) plan = 1 + best_rank[changes[i].record];
    result.step_us.push_back(median_step(series[plan], changes[i].step));
  }
  return result;
}

}  // namespace wpk
