#pragma once
// Internal to wpk_search: the strategies' factories and the pieces they share. Nothing outside
// src/search includes this.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <unordered_set>
#include <vector>

#include "search/space.hpp"
#include "search/strategy.hpp"

namespace wpk::search::detail {

// Draws from the raw mt19937_64 output, whose sequence the standard fixes, instead of the
// std::*_distribution classes, whose algorithms it leaves to each library: a seed must give the
// same proposals whichever library built the tuner.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}
  // Uniform in [0, n), n > 0. Rejection keeps it unbiased for any n.
  std::uint64_t below(std::uint64_t n) {
    const std::uint64_t reject_under = (0 - n) % n;  // 2^64 mod n
    for (;;) {
      const std::uint64_t x = engine_();
      if (x >= reject_under) return x % n;
    }
  }
  // An index into a container of n > 0 elements.
  int index(std::size_t n) { return static_cast<int>(below(static_cast<std::uint64_t>(n))); }
  // Uniform in [0, 1) with 53 random bits.
  double unit() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  bool coin() { return (engine_() >> 63) != 0; }

 private:
  std::mt19937_64 engine_;
};

struct PointHash {
  std::size_t operator()(const Point& p) const;
};
// Only looked up, never iterated, so its unspecified order cannot leak into proposals.
using PointSet = std::unordered_set<Point, PointHash>;

// NaN (a broken measurement) ranks as a failure, so orderings on cost stay strict weak orders.
double sanitize(double cost);

// Appends to `out` up to `n` valid points not in `seen`, uniformly at random, and adds them to
// `seen`. Gives up after a bounded number of rejected draws (a constraint may rule out nearly
// everything) but then, on a space small enough to list, picks among the points left, so a
// small space is still exhausted exactly.
void add_random_fresh(const Space& space, Rng& rng, PointSet& seen, std::size_t n, std::vector<Point>& out);

// Keeps the `n` candidates the model ranks best (ties in generation order) and gives the rest
// back to `seen`, so a candidate that was ranked out may still be proposed later.
void keep_best_predicted(const Space& space, const CostModel& model, std::size_t n, std::vector<Point>& candidates,
                         PointSet& seen);

// How many more candidates than requested the model-guided strategies rank.
constexpr std::size_t kModelOversample = 4;
// Rejected draws one propose() call may spend before settling for what it has.
constexpr std::size_t kMaxRejects = 4096;

std::unique_ptr<Strategy> make_grid(const Space& space);
std::unique_ptr<Strategy> make_random(const Space& space, std::uint64_t seed);
std::unique_ptr<Strategy> make_genetic(const Space& space, std::uint64_t seed, const CostModel* model);
std::unique_ptr<Strategy> make_rl(const Space& space, std::uint64_t seed, const CostModel* model);

}  // namespace wpk::search::detail
