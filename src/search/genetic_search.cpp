// Genetic search. The population is the best points measured so far, so elitism is structural:
// a child displaces a member only by measuring better, and the best few never leave. Children
// come from tournament selection, uniform crossover and per-knob mutation.
#include <algorithm>
#include <cmath>

#include "search/strategies.hpp"

namespace wpk::search::detail {
namespace {

constexpr std::size_t kPopulation = 24;
// Below this many finite measurements selection has too little to choose from: sample randomly.
constexpr std::size_t kMinPopulation = 16;
constexpr std::size_t kTournament = 3;
// Mutation moves a knob to a neighbouring value this often, else to any other value: knob values
// are usually ordered (tile sizes, thread counts), so a neighbour is the likelier improvement,
// while the long jumps keep the population from settling into one basin.
constexpr double kStepChance = 0.75;

class GeneticSearch final : public Strategy {
 public:
  GeneticSearch(const Space& space, std::uint64_t seed, const CostModel* model)
      : space_(space), model_(model), rng_(seed) {}

  std::vector<Point> propose(std::size_t n) override {
    const std::size_t want = model_ ? n * kModelOversample : n;
    std::vector<Point> out;
    if (population_.size() >= kMinPopulation) breed(want, out);
    // Random points before there is a population to breed from, and when a converged one
    // breeds nothing new.
    if (out.size() < want) add_random_fresh(space_, rng_, seen_, want - out.size(), out);
    if (model_) keep_best_predicted(space_, *model_, n, out, seen_);
    return out;
  }

  void observe(const Point& p, double cost) override {
    seen_.insert(p);
    cost = sanitize(cost);
    // A failed point is no parent; nor is a stale record's point this space does not allow.
    if (!std::isfinite(cost) || !space_.valid(p)) return;
    for (const Trial& m : population_)
      if (m.point == p) return;  // the same record told twice
    // After equals: among equal costs the earlier-measured point keeps its rank.
    auto at = std::upper_bound(population_.begin(), population_.end(), cost,
                               [](double c, const Trial& m) { return c < m.cost; });
    if (static_cast<std::size_t>(at - population_.begin()) >= kPopulation) return;
    population_.insert(at, Trial{p, cost});
    if (population_.size() > kPopulation) population_.pop_back();
  }

 private:
  void breed(std::size_t want, std::vector<Point>& out) {
    for (std::size_t fails = 0; out.size() < want && fails < kMaxRejects;) {
      Point c = child();
      if (!seen_.count(c) && space_.valid(c)) {
        seen_.insert(c);
        out.push_back(std::move(c));
      } else {
        ++fails;
      }
    }
  }

  // The population is sorted best first, so the lowest index drawn wins the tournament.
  const Point& select() {
    std::size_t best = population_.size();
    for (std::size_t i = 0; i < kTournament; ++i) best = std::min(best, std::size_t(rng_.index(population_.size())));
    return population_[best].point;
  }

  Point child() {
    const Point& a = select();
    const Point& b = select();
    const std::size_t k = a.size();
    Point c(k);
    for (std::size_t i = 0; i < k; ++i) c[i] = rng_.coin() ? a[i] : b[i];
    for (std::size_t i = 0; i < k; ++i)
      if (rng_.unit() * static_cast<double>(k) < 1.0) mutate(c, i);
    // A child equal to a parent or to any point seen would be wasted: change a knob or two more.
    for (int tries = 0; tries < 4 && k > 0 && (seen_.count(c) || !space_.valid(c)); ++tries)
      mutate(c, rng_.index(k));
    return c;
  }

  void mutate(Point& c, std::size_t knob) {
    const int n = static_cast<int>(space_.knobs()[knob].values.size());
    const int old = c[knob];
    if (n < 2) return;
    if (rng_.unit() < kStepChance) {
      const int step = (rng_.coin() ? 1 : -1) * (rng_.unit() < 2.0 / 3.0 ? 1 : 2);
      int v = old + step;
      if (v < 0 || v >= n) v = old - step;  // bounce off the end of the range
      v = std::clamp(v, 0, n - 1);
      if (v != old) {
        c[knob] = v;
        return;
      }
    }
    const int v = rng_.index(static_cast<std::size_t>(n - 1));
    c[knob] = v >= old ? v + 1 : v;
  }

  const Space& space_;
  const CostModel* model_;
  Rng rng_;
  PointSet seen_;
  std::vector<Trial> population_;  // best first, finite costs only, at most kPopulation
};

}  // namespace

std::unique_ptr<Strategy> make_genetic(const Space& space, std::uint64_t seed, const CostModel* model) {
  return std::make_unique<GeneticSearch>(space, seed, model);
}

}  // namespace wpk::search::detail
