#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>

#include "search/strategy.hpp"

using namespace wpk::search;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const Algorithm kAll[] = {Algorithm::Grid, Algorithm::Random, Algorithm::Genetic, Algorithm::Rl};
const Algorithm kSeeded[] = {Algorithm::Random, Algorithm::Genetic, Algorithm::Rl};

// A deterministic value in [0, 1) per point and salt: the measurement noise of the synthetic
// objective and the error of the synthetic cost model.
double hash01(const Point& p, std::uint64_t salt) {
  std::uint64_t h = 0x9e3779b97f4a7c15ull ^ salt;
  for (int v : p) {
    h ^= static_cast<std::uint64_t>(v) + 0x632be59bd9b4e019ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
  }
  h ^= h >> 33;
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

double bowl(double x, double centre, double width) { return 1 + width * (x - centre) * (x - centre); }

// A kernel-like space of 15,120 points, 11,070 valid: the two tiles together must fit a cache.
const Space& tuning_space() {
  static const Space space(
      {{"tile_m", {1, 2, 4, 8, 16, 32, 64, 128}},
       {"tile_n", {1, 2, 4, 8, 16, 32, 64}},
       {"unroll", {1, 2, 3, 4, 6, 8}},
       {"threads", {1, 2, 3, 4, 5, 6, 7, 8, 9}},
       {"order", {0, 1, 2, 3, 4}}},
      [](const Space&, const Point& p) { return p[0] + p[1] <= 8; });
  return space;
}

// Knobs interact (the tiles want a shape, unroll and threads share a term, the best loop order
// depends on unroll) and there are two basins: a wide one whose floor is 10% above the optimum
// and a narrow one holding it, so greedy descent from most starts ends in the wrong one. The
// optimum sits on the constraint's edge; 2% pseudo-noise breaks ties.
double tuning_cost(const Point& p) {
  const double m = p[0] / 7.0, n = p[1] / 6.0, u = p[2] / 5.0, t = p[3] / 8.0;
  static const double order[] = {1.3, 1.1, 1.0, 1.05, 1.4};
  const double wide = 1.10 * bowl(m, 0.2, 2) * bowl(n, 0.15, 2) * bowl(m - n, 0.05, 2);
  const double narrow = bowl(m, 0.7, 8) * bowl(n, 0.6, 8) * bowl(m - n, 0.1, 8);
  double c = std::min(wide, narrow) * bowl(u, 0.4, 2) * bowl(t, 0.75, 4) * bowl(u * t, 0.3, 3);
  c *= order[p[4]] + 0.3 * u * std::abs(p[4] - 2);
  return c * (1 + 0.02 * hash01(p, 0));
}

struct Exhaustive {
  double optimum = kInf;
  std::size_t valid = 0;
};

const Exhaustive& exhaustive() {
  static const Exhaustive e = [] {
    Exhaustive r;
    const Space& s = tuning_space();
    for (std::uint64_t f = 0; f < s.size(); ++f) {
      const Point p = s.point_at(f);
      if (!s.valid(p)) continue;
      ++r.valid;
      r.optimum = std::min(r.optimum, tuning_cost(p));
    }
    return r;
  }();
  return e;
}

// The guided strategies get 15% of the trials an exhaustive grid search needs.
std::size_t guided_budget() { return exhaustive().valid * 15 / 100; }

// Ranks well on average but is up to 60% off on any one point.
struct NoisyModel : CostModel {
  double predict(const Space&, const Point& p) const override { return tuning_cost(p) * (1 + 0.6 * hash01(p, 7)); }
};
// Knows nothing: ranks points in an arbitrary fixed order. Fits any space.
struct HashModel : CostModel {
  double predict(const Space&, const Point& p) const override { return hash01(p, 5); }
};
// Ranks the worst points first.
struct AdversarialModel : CostModel {
  double predict(const Space&, const Point& p) const override { return -tuning_cost(p); }
};

// Every trial valid, no point twice.
void check_walk(const Space& space, const std::vector<Trial>& trials) {
  std::set<Point> seen;
  for (const Trial& t : trials) {
    INFO(space.describe(t.point));
    REQUIRE(space.valid(t.point));
    REQUIRE(seen.insert(t.point).second);
  }
}

struct Run {
  SearchResult result;
  std::size_t first_near = 0;  // 1-based trial that first came within 5% of the optimum; 0: none
};

Run tune(Algorithm a, std::uint64_t seed, std::size_t trials, const CostModel* model = nullptr) {
  const auto strategy = make_strategy(a, tuning_space(), seed, model);
  Run run{run_search(*strategy, tuning_cost, Budget{trials, kInf}), 0};
  check_walk(tuning_space(), run.result.trials);
  for (std::size_t i = 0; i < run.result.trials.size() && !run.first_near; ++i)
    if (run.result.trials[i].cost <= 1.05 * exhaustive().optimum) run.first_near = i + 1;
  return run;
}

// A small space with a constraint; 39 of its 60 points are valid.
Space small_space() {
  return Space({{"a", {1, 2, 3, 4}}, {"b", {0, 1, 2}}, {"c", {10, 20, 30, 40, 50}}},
               [](const Space&, const Point& p) { return (p[0] + p[2]) % 3 != 0; });
}

std::vector<Point> valid_points(const Space& s) {
  std::vector<Point> out;
  for (std::uint64_t f = 0; f < s.size(); ++f)
    if (s.valid(s.point_at(f))) out.push_back(s.point_at(f));
  return out;
}

double small_cost(const Point& p) { return 1 + p[0] + 2.0 * p[1] + 0.5 * p[2] + hash01(p, 3); }

}  // namespace

TEST_CASE("algorithm names round-trip", "[search][strategy]") {
  for (Algorithm a : kAll) CHECK(parse_algorithm(algorithm_name(a)) == a);
  CHECK(std::string(algorithm_name(Algorithm::Genetic)) == "ga");
  CHECK_THROWS_AS(parse_algorithm("genetic"), std::invalid_argument);
  CHECK_THROWS_AS(parse_algorithm("GRID"), std::invalid_argument);
  CHECK_THROWS_AS(parse_algorithm(""), std::invalid_argument);
}

TEST_CASE("every strategy walks a small space exactly once, then stops", "[search][strategy]") {
  const Space s = small_space();
  REQUIRE(valid_points(s).size() == 39);
  HashModel arbitrary;
  for (Algorithm a : kAll) {
    for (const CostModel* model : {static_cast<const CostModel*>(nullptr), static_cast<const CostModel*>(&arbitrary)}) {
      if (model && (a == Algorithm::Grid || a == Algorithm::Random)) continue;
      INFO(algorithm_name(a) << (model ? " with a model" : ""));
      const auto strategy = make_strategy(a, s, 11, model);
      // Bounded, so a strategy that never runs dry fails here rather than hangs.
      const SearchResult r = run_search(*strategy, small_cost, Budget{1000, kInf});
      check_walk(s, r.trials);
      CHECK(r.trials.size() == 39);
      CHECK(strategy->propose(8).empty());
    }
  }
}

TEST_CASE("proposals are never repeated even before they are observed", "[search][strategy]") {
  NoisyModel noisy;
  // ga and rl also with a model: they rank more candidates but must still propose only as many.
  const std::pair<Algorithm, const CostModel*> cases[] = {
      {Algorithm::Grid, nullptr}, {Algorithm::Random, nullptr}, {Algorithm::Genetic, nullptr},
      {Algorithm::Rl, nullptr},   {Algorithm::Genetic, &noisy}, {Algorithm::Rl, &noisy}};
  for (const auto& [a, model] : cases) {
    INFO(algorithm_name(a) << (model ? " with a model" : ""));
    const auto strategy = make_strategy(a, tuning_space(), 5, model);
    std::set<Point> seen;
    for (int round = 0; round < 40; ++round) {
      const std::vector<Point> batch = strategy->propose(8);
      REQUIRE(batch.size() == 8);
      for (const Point& p : batch) {
        REQUIRE(tuning_space().valid(p));
        REQUIRE(seen.insert(p).second);
      }
      // Observe only every other batch: the unobserved ones must not come back either.
      if (round % 2)
        for (const Point& p : batch) strategy->observe(p, tuning_cost(p));
    }
    CHECK(strategy->propose(0).empty());
  }
}

TEST_CASE("a space with no knobs has one point", "[search][strategy]") {
  const Space s(std::vector<Knob>{});
  for (Algorithm a : kAll) {
    INFO(algorithm_name(a));
    const auto strategy = make_strategy(a, s, 1);
    CHECK(strategy->propose(4) == std::vector<Point>{Point{}});
    CHECK(strategy->propose(4).empty());
  }
}

TEST_CASE("a constraint that rules out nearly everything does not hang sampling", "[search][strategy]") {
  std::vector<Knob> knobs;
  for (int i = 0; i < 12; ++i) knobs.push_back({"k" + std::to_string(i), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}});
  // 10^12 points, 91 valid: far too many to list, far too few to hit at random.
  const Space s(knobs, [](const Space&, const Point& p) {
    int sum = 0;
    for (int v : p) sum += v;
    return sum <= 2;
  });
  for (Algorithm a : kSeeded) {
    INFO(algorithm_name(a));
    const auto strategy = make_strategy(a, s, 3);
    const SearchResult r = run_search(*strategy, [](const Point&) { return 1.0; }, Budget{64, kInf});
    check_walk(s, r.trials);
    CHECK(r.trials.size() < 64);
  }
}

TEST_CASE("grid search proposes every valid point in point_at order", "[search][strategy][grid]") {
  const Space s = small_space();
  const auto strategy = make_strategy(Algorithm::Grid, s, 0);
  std::vector<Point> walked;
  // Uneven batch sizes: the cursor must resume where the last batch stopped.
  for (std::size_t n : {1, 3, 7, 2, 0, 5, 100}) {
    const std::vector<Point> batch = strategy->propose(n);
    CHECK(batch.size() == std::min<std::size_t>(n, 39 - walked.size()));
    walked.insert(walked.end(), batch.begin(), batch.end());
  }
  CHECK(walked == valid_points(s));
  CHECK(strategy->propose(1).empty());
}

TEST_CASE("grid search skips points restored from records", "[search][strategy][grid]") {
  const Space s = small_space();
  const std::vector<Point> all = valid_points(s);
  const auto strategy = make_strategy(Algorithm::Grid, s, 0);
  // One ahead of the cursor, one behind it once the first batch is out.
  strategy->observe(all[5], 1.0);
  const std::vector<Point> first = strategy->propose(3);
  CHECK(first == std::vector<Point>{all[0], all[1], all[2]});
  strategy->observe(all[1], 1.0);
  const std::vector<Point> rest = strategy->propose(100);
  REQUIRE(rest.size() == 35);
  CHECK(rest.front() == all[3]);
  CHECK(rest[2] == all[6]);
  CHECK(std::find(rest.begin(), rest.end(), all[5]) == rest.end());
}

TEST_CASE("a seed fixes the walk, and another seed changes it", "[search][strategy]") {
  NoisyModel noisy;
  for (Algorithm a : kSeeded) {
    for (const CostModel* model : {static_cast<const CostModel*>(nullptr), static_cast<const CostModel*>(&noisy)}) {
      INFO(algorithm_name(a) << (model ? " with a model" : ""));
      const Run one = tune(a, 42, 300, model);
      const Run again = tune(a, 42, 300, model);
      const Run other = tune(a, 43, 300, model);
      REQUIRE(one.result.trials.size() == 300);
      std::vector<Point> p1, p2, p3;
      for (std::size_t i = 0; i < 300; ++i) {
        p1.push_back(one.result.trials[i].point);
        p2.push_back(again.result.trials[i].point);
        p3.push_back(other.result.trials[i].point);
      }
      CHECK(p1 == p2);
      CHECK(p1 != p3);
    }
  }
}

// Best cost among the first `n` trials: the run as if its budget had been n.
double best_of_first(const Run& run, std::size_t n) {
  double best = kInf;
  for (std::size_t i = 0; i < n && i < run.result.trials.size(); ++i) best = std::min(best, run.result.trials[i].cost);
  return best;
}

TEST_CASE("ga and rl come within 5% of the optimum in 15% of the grid's trials, beating random",
          "[search][strategy][quality]") {
  const double optimum = exhaustive().optimum;
  REQUIRE(exhaustive().valid == 11070);
  const std::size_t budget = guided_budget();
  // Random search comes within 5% in 15% of the trials about a third of the time, so the guided
  // strategies are also held to a fifth of that budget, where random search averages 17% off.
  const std::size_t early = exhaustive().valid * 3 / 100;
  const std::uint64_t seeds[] = {1, 2, 3, 4, 5};
  double mean_best[3] = {0, 0, 0}, mean_early[3] = {0, 0, 0};  // ratios to the optimum
  for (std::size_t i = 0; i < 3; ++i) {
    std::vector<double> bests;
    for (std::uint64_t seed : seeds) {
      const Run run = tune(kSeeded[i], seed, budget);
      REQUIRE(run.result.trials.size() == budget);
      bests.push_back(run.result.best_cost);
      mean_best[i] += run.result.best_cost / optimum / 5;
      mean_early[i] += best_of_first(run, early) / optimum / 5;
    }
    std::sort(bests.begin(), bests.end());
    INFO(algorithm_name(kSeeded[i]) << ": median best " << bests[2] / optimum << " x the optimum, mean after "
                                    << early << " trials " << mean_early[i]);
    if (kSeeded[i] != Algorithm::Random) {
      CHECK(bests[2] <= 1.05 * optimum);
      CHECK(mean_early[i] <= 1.05);
    }
  }
  INFO("mean best / optimum: random " << mean_best[0] << ", ga " << mean_best[1] << ", rl " << mean_best[2]);
  INFO("after " << early << " trials: random " << mean_early[0] << ", ga " << mean_early[1] << ", rl "
                 << mean_early[2]);
  CHECK(mean_best[1] < mean_best[0]);
  CHECK(mean_best[2] < mean_best[0]);
  CHECK(mean_early[1] < mean_early[0]);
  CHECK(mean_early[2] < mean_early[0]);
}

TEST_CASE("ga and rl still get there when many points fail", "[search][strategy][quality]") {
  // A quarter of the points, scattered, fail to build or give wrong answers, and so does every
  // point with the thread count the unconstrained optimum wants: a strategy that does not learn
  // to avoid failures keeps going back there.
  auto measure = [](const Point& p) { return hash01(p, 11) < 0.25 || p[3] == 6 ? kInf : tuning_cost(p); };
  const Space& s = tuning_space();
  double optimum = kInf;
  for (std::uint64_t f = 0; f < s.size(); ++f)
    if (s.valid(s.point_at(f))) optimum = std::min(optimum, measure(s.point_at(f)));
  for (Algorithm a : {Algorithm::Genetic, Algorithm::Rl}) {
    std::vector<double> bests;
    for (std::uint64_t seed : {1, 2, 3}) {
      const auto strategy = make_strategy(a, s, seed);
      bests.push_back(run_search(*strategy, measure, Budget{guided_budget(), kInf}).best_cost);
    }
    std::sort(bests.begin(), bests.end());
    INFO(algorithm_name(a) << ": median best " << bests[1] / optimum << " x the optimum");
    CHECK(bests[1] <= 1.05 * optimum);
  }
}

TEST_CASE("an informative cost model gets ga and rl there sooner", "[search][strategy][model]") {
  NoisyModel noisy;
  const std::size_t budget = guided_budget();
  for (Algorithm a : {Algorithm::Genetic, Algorithm::Rl}) {
    double without = 0, with = 0;  // mean trials to come within 5%; the budget when never
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
      const Run plain = tune(a, seed, budget);
      const Run guided = tune(a, seed, budget, &noisy);
      without += (plain.first_near ? plain.first_near : budget) / 5.0;
      with += (guided.first_near ? guided.first_near : budget) / 5.0;
      CHECK(guided.result.best_cost <= plain.result.best_cost * 1.05);
    }
    INFO(algorithm_name(a) << ": mean trials to within 5%: " << without << " without the model, " << with
                           << " with it");
    CHECK(with < without);
  }
}

TEST_CASE("an adversarial cost model slows the search but breaks no rule", "[search][strategy][model]") {
  AdversarialModel adversary;
  for (Algorithm a : {Algorithm::Genetic, Algorithm::Rl}) {
    INFO(algorithm_name(a));
    const Run run = tune(a, 9, 500, &adversary);  // tune() checks validity and repeats
    CHECK(run.result.trials.size() == 500);
    CHECK(std::isfinite(run.result.best_cost));
  }
}

TEST_CASE("run_search spends exactly the trial budget", "[search][run]") {
  for (Algorithm a : kAll) {
    INFO(algorithm_name(a));
    for (std::size_t budget : {0, 1, 13, 64}) {
      std::size_t calls = 0;
      const auto strategy = make_strategy(a, tuning_space(), 2);
      const SearchResult r = run_search(
          *strategy,
          [&](const Point& p) {
            ++calls;
            return tuning_cost(p);
          },
          Budget{budget, kInf});
      CHECK(r.trials.size() == budget);
      CHECK(calls == budget);
    }
  }
}

TEST_CASE("run_search observes history first and counts it toward the best only", "[search][run]") {
  const Space s = small_space();
  const std::vector<Point> all = valid_points(s);
  std::vector<Trial> history;
  for (std::size_t i = 0; i + 1 < all.size(); ++i) history.push_back({all[i], small_cost(all[i])});
  // The best of all is in the history; the one point left is the worst.
  history[17].cost = 0.5;
  for (Algorithm a : kAll) {
    INFO(algorithm_name(a));
    const auto strategy = make_strategy(a, s, 4);
    const SearchResult r = run_search(*strategy, [](const Point&) { return 100.0; }, Budget{10, kInf}, history);
    REQUIRE(r.trials.size() == 1);
    CHECK(r.trials[0].point == all.back());
    CHECK(r.best == all[17]);
    CHECK(r.best_cost == 0.5);
  }
}

TEST_CASE("failed points are never best", "[search][run]") {
  const Point optimum_point = [] {
    const Space& s = tuning_space();
    Point best;
    for (std::uint64_t f = 0; f < s.size(); ++f)
      if (s.valid(s.point_at(f)) && (best.empty() || tuning_cost(s.point_at(f)) < tuning_cost(best)))
        best = s.point_at(f);
    return best;
  }();
  // The optimum and every point cheaper than 3x it fail: a search that finds them gets no credit.
  auto measure = [](const Point& p) { return tuning_cost(p) < 3 * exhaustive().optimum ? kInf : tuning_cost(p); };
  for (Algorithm a : kAll) {
    INFO(algorithm_name(a));
    const auto strategy = make_strategy(a, tuning_space(), 6);
    const SearchResult r = run_search(*strategy, measure, Budget{400, kInf});
    CHECK(r.trials.size() == 400);
    CHECK(std::isfinite(r.best_cost));
    CHECK(r.best_cost >= 3 * exhaustive().optimum);
    CHECK(r.best != optimum_point);
    CHECK(measure(r.best) == r.best_cost);
  }
  // All failing (NaN too): no best at all.
  const auto strategy = make_strategy(Algorithm::Rl, tuning_space(), 6);
  std::size_t calls = 0;
  const SearchResult none = run_search(
      *strategy, [&](const Point&) { return ++calls % 2 ? kInf : std::nan(""); }, Budget{50, kInf});
  CHECK(none.trials.size() == 50);
  CHECK(none.best.empty());
  CHECK(none.best_cost == kInf);
  for (const Trial& t : none.trials) CHECK(t.cost == kInf);
}

TEST_CASE("run_search stops when its time is up", "[search][run]") {
  const auto strategy = make_strategy(Algorithm::Random, tuning_space(), 8);
  auto slow = [](const Point& p) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return tuning_cost(p);
  };
  // 2 ms a trial against 40 ms: far fewer than the 1,000 trials allowed, however slow the machine.
  const SearchResult r = run_search(*strategy, slow, Budget{1000, 0.04});
  CHECK(r.trials.size() < 1000 / 2);
  CHECK(run_search(*strategy, tuning_cost, Budget{1000, 0.0}).trials.empty());
}

TEST_CASE("run_search checks the time between the trials of a batch", "[search][run]") {
  const auto strategy = make_strategy(Algorithm::Grid, tuning_space(), 0);
  auto slower = [](const Point& p) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    return tuning_cost(p);
  };
  // One trial outlasts the budget: the rest of its batch of 8 is not measured.
  CHECK(run_search(*strategy, slower, Budget{1000, 0.01}).trials.size() <= 1);
}

TEST_CASE("run_search stops when the space is spent", "[search][run]") {
  const Space s = small_space();  // a strategy keeps a reference: no temporary
  const auto strategy = make_strategy(Algorithm::Grid, s, 0);
  const SearchResult r = run_search(*strategy, small_cost, Budget{});
  CHECK(r.trials.size() == 39);
  CHECK(r.best_cost == std::min_element(r.trials.begin(), r.trials.end(), [](const Trial& x, const Trial& y) {
                         return x.cost < y.cost;
                       })->cost);
}
