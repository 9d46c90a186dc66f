#include "search/strategy.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "search/strategies.hpp"

namespace wpk::search {

const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::Grid: return "grid";
    case Algorithm::Random: return "random";
    case Algorithm::Genetic: return "ga";
    case Algorithm::Rl: return "rl";
  }
  return "?";
}

Algorithm parse_algorithm(const std::string& name) {
  for (Algorithm a : {Algorithm::Grid, Algorithm::Random, Algorithm::Genetic, Algorithm::Rl})
    if (name == algorithm_name(a)) return a;
  throw std::invalid_argument("search: unknown algorithm '" + name + "' (grid, random, ga, rl)");
}

std::unique_ptr<Strategy> make_strategy(Algorithm a, const Space& space, std::uint64_t seed, const CostModel* model) {
  switch (a) {
    case Algorithm::Grid: return detail::make_grid(space);
    case Algorithm::Random: return detail::make_random(space, seed);
    case Algorithm::Genetic: return detail::make_genetic(space, seed, model);
    case Algorithm::Rl: return detail::make_rl(space, seed, model);
  }
  throw std::invalid_argument("search: bad algorithm");
}

SearchResult run_search(Strategy& strategy, const std::function<double(const Point&)>& measure, const Budget& budget,
                        const std::vector<Trial>& history) {
  SearchResult result;
  auto consider = [&result](const Point& p, double cost) {
    if (std::isfinite(cost) && cost < result.best_cost) {
      result.best = p;
      result.best_cost = cost;
    }
  };
  for (const Trial& t : history) {
    strategy.observe(t.point, t.cost);
    consider(t.point, t.cost);
  }
  // Batches keep a population-based strategy's generations small enough to learn from between
  // them while not asking for one point at a time.
  constexpr std::size_t kBatch = 8;
  const auto start = std::chrono::steady_clock::now();
  auto out_of_time = [&] {
    const std::chrono::duration<double> spent = std::chrono::steady_clock::now() - start;
    return !(spent.count() < budget.max_seconds);
  };
  while (result.trials.size() < budget.max_trials && !out_of_time()) {
    const std::vector<Point> batch = strategy.propose(std::min(kBatch, budget.max_trials - result.trials.size()));
    if (batch.empty()) break;
    // A batch larger than asked for still gets no more trials than the budget allows.
    for (std::size_t i = 0; i < batch.size() && result.trials.size() < budget.max_trials; ++i) {
      if (i > 0 && out_of_time()) return result;
      const double cost = detail::sanitize(measure(batch[i]));
      strategy.observe(batch[i], cost);
      consider(batch[i], cost);
      result.trials.push_back({batch[i], cost});
    }
  }
  return result;
}

namespace detail {

std::size_t PointHash::operator()(const Point& p) const {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (int v : p) h = (h ^ static_cast<std::uint32_t>(v)) * 0x100000001b3ull;
  return static_cast<std::size_t>(h ^ (h >> 29));
}

double sanitize(double cost) { return std::isnan(cost) ? std::numeric_limits<double>::infinity() : cost; }

void add_random_fresh(const Space& space, Rng& rng, PointSet& seen, std::size_t n, std::vector<Point>& out) {
  const std::vector<Knob>& knobs = space.knobs();
  std::size_t added = 0;
  for (std::size_t rejects = 0; added < n && rejects < kMaxRejects;) {
    Point p(knobs.size());
    for (std::size_t i = 0; i < knobs.size(); ++i) p[i] = rng.index(knobs[i].values.size());
    if (!seen.count(p) && space.valid(p)) {
      seen.insert(p);
      out.push_back(std::move(p));
      ++added;
    } else {
      ++rejects;
    }
  }
  // Past this many points listing them costs more than giving up on the rare ones left.
  constexpr std::uint64_t kListLimit = std::uint64_t{1} << 20;
  if (added == n || space.size() > kListLimit) return;
  std::vector<std::uint64_t> left;
  for (std::uint64_t flat = 0; flat < space.size(); ++flat) {
    const Point p = space.point_at(flat);
    if (!seen.count(p) && space.valid(p)) left.push_back(flat);
  }
  // A partial Fisher-Yates shuffle: the first picks are a uniform sample of what is left.
  for (std::size_t i = 0; i < left.size() && added < n; ++i, ++added) {
    std::swap(left[i], left[i + rng.below(left.size() - i)]);
    Point p = space.point_at(left[i]);
    seen.insert(p);
    out.push_back(std::move(p));
  }
}

void keep_best_predicted(const Space& space, const CostModel& model, std::size_t n, std::vector<Point>& candidates,
                         PointSet& seen) {
  if (candidates.size() <= n) return;
  std::vector<std::pair<double, std::size_t>> ranked;
  ranked.reserve(candidates.size());
  for (std::size_t i = 0; i < candidates.size(); ++i)
    ranked.emplace_back(sanitize(model.predict(space, candidates[i])), i);
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Point> kept;
  for (std::size_t r = 0; r < ranked.size(); ++r) {
    Point& p = candidates[ranked[r].second];
    if (r < n) {
      kept.push_back(std::move(p));
    } else {
      seen.erase(p);
    }
  }
  candidates = std::move(kept);
}

}  // namespace detail
}  // namespace wpk::search
