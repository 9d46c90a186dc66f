// Random search: valid points uniformly at random, without repeats. The baseline the guided
// strategies must beat.
#include "search/strategies.hpp"

namespace wpk::search::detail {
namespace {

class RandomSearch final : public Strategy {
 public:
  RandomSearch(const Space& space, std::uint64_t seed) : space_(space), rng_(seed) {}

  std::vector<Point> propose(std::size_t n) override {
    std::vector<Point> out;
    add_random_fresh(space_, rng_, seen_, n, out);
    return out;
  }

  void observe(const Point& p, double) override { seen_.insert(p); }

 private:
  const Space& space_;
  Rng rng_;
  PointSet seen_;
};

}  // namespace

std::unique_ptr<Strategy> make_random(const Space& space, std::uint64_t seed) {
  return std::make_unique<RandomSearch>(space, seed);
}

}  // namespace wpk::search::detail
