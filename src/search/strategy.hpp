#pragma once
// Strategies walk a Space by ask and tell: propose() names points to measure next, observe()
// hands back what each cost (seconds, lower is better; +inf for a point that failed or gave a
// wrong answer). The measuring is not theirs: the tuner measures inside the model (search never
// depends on runtime). Every strategy is deterministic given its seed and the costs it is told,
// never proposes a point it has already proposed or been told about, and proposes only valid
// points. A search resumes from earlier records by observe()-ing them before the first propose().
//
//   grid    every valid point, in point_at() order
//   random  valid points uniformly at random, without repeats
//   genetic a population of the best points seen; children by tournament selection, uniform
//           crossover and per-knob mutation; the best points survive unchanged (elitism)
//   rl      a policy (one softmax over each knob's values) trained by policy gradient
//           (REINFORCE with a running baseline) on the rewards the measured costs give
//
// With a cost model, genetic and rl rank more candidates than they propose and propose the
// best-predicted ones, so hopeless points are not measured.
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "search/space.hpp"

namespace wpk::search {

// Predicts a point's cost (any monotone scale: only the ranking is used).
class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual double predict(const Space& space, const Point& p) const = 0;
};

enum class Algorithm { Grid, Random, Genetic, Rl };
// "grid", "random", "ga", "rl"; parse_algorithm throws std::invalid_argument for other names.
const char* algorithm_name(Algorithm a);
Algorithm parse_algorithm(const std::string& name);

class Strategy {
 public:
  virtual ~Strategy() = default;
  // Up to n points not yet proposed or observed; fewer (possibly none) when the strategy has
  // nothing new to offer (the space is exhausted).
  virtual std::vector<Point> propose(std::size_t n) = 0;
  // The measured cost of a point (proposed by this strategy or restored from a record).
  virtual void observe(const Point& p, double cost) = 0;
};

// `model` may be null; it must outlive the strategy, as must `space`.
std::unique_ptr<Strategy> make_strategy(Algorithm a, const Space& space, std::uint64_t seed,
                                        const CostModel* model = nullptr);

struct Budget {
  std::size_t max_trials = std::numeric_limits<std::size_t>::max();
  double max_seconds = std::numeric_limits<double>::infinity();
};

struct Trial {
  Point point;
  double cost;
};

struct SearchResult {
  std::vector<Trial> trials;  // in the order measured (restored records not included)
  Point best;                 // empty when no point had a finite cost
  double best_cost = std::numeric_limits<double>::infinity();
};

// Runs `strategy` until the budget or the space is spent: proposes a batch, measures each point
// with `measure` (returns its cost), observes it. `history` (earlier records) is observed first
// and counts toward best but not toward the trial budget. Wall time is checked between trials.
SearchResult run_search(Strategy& strategy, const std::function<double(const Point&)>& measure, const Budget& budget,
                        const std::vector<Trial>& history = {});

}  // namespace wpk::search
