// Grid search: every valid point in point_at() order.
#include "search/strategies.hpp"

namespace wpk::search::detail {
namespace {

class GridSearch final : public Strategy {
 public:
  explicit GridSearch(const Space& space) : space_(space), size_(space.size()) {}

  std::vector<Point> propose(std::size_t n) override {
    std::vector<Point> out;
    for (; out.size() < n && next_ < size_; ++next_) {
      Point p = space_.point_at(next_);
      // Points restored from records are skipped here rather than when observed: a record may
      // name any point, ahead of the cursor or behind it.
      if (!seen_.count(p) && space_.valid(p)) {
        seen_.insert(p);
        out.push_back(std::move(p));
      }
    }
    return out;
  }

  void observe(const Point& p, double) override { seen_.insert(p); }

 private:
  const Space& space_;
  const std::uint64_t size_;
  std::uint64_t next_ = 0;  // the next flat index to consider
  PointSet seen_;
};

}  // namespace

std::unique_ptr<Strategy> make_grid(const Space& space) { return std::make_unique<GridSearch>(space); }

}  // namespace wpk::search::detail
