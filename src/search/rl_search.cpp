// Policy-gradient search: one softmax over each knob's values, sampled independently, trained
// by REINFORCE on reward -log(cost). The log makes the reward scale-free (a kernel twice as fast
// earns the same step whether it runs in microseconds or seconds); the advantage is normalised
// by running estimates of the reward's mean and spread for the same reason.
#include <algorithm>
#include <cmath>

#include "search/strategies.hpp"

namespace wpk::search::detail {
namespace {

constexpr double kLearningRate = 0.3;
// Weight of the newest reward in the running baseline and spread, once past the warm-up.
constexpr double kDecay = 0.05;
// A share of every draw is uniform, so no value's probability decays to nothing before the
// policy has seen the optimum.
constexpr double kExplore = 0.05;
// Normalised advantages are clipped: one freak measurement must not undo the policy.
constexpr double kMaxAdvantage = 3.0;
// A failed point (infinite cost) scores this far below the worst finite reward seen.
constexpr double kFailurePenalty = 1.0;
// When the policy has converged its draws repeat points already seen: each run of rejections
// heats the sampling temperature so draws spread to the optimum's neighbours.
constexpr std::size_t kRejectsPerHeat = 64;
constexpr double kHeat = 1.5;
constexpr double kMaxTemperature = 16.0;

class RlSearch final : public Strategy {
 public:
  RlSearch(const Space& space, std::uint64_t seed, const CostModel* model)
      : space_(space), model_(model), rng_(seed) {
    for (const Knob& k : space.knobs()) logits_.emplace_back(k.values.size(), 0.0);
  }

  std::vector<Point> propose(std::size_t n) override {
    std::vector<Point> out;
    const std::size_t want = model_ ? n * kModelOversample : n;
    double temperature = 1.0;
    for (std::size_t rejects = 0; out.size() < want && rejects < kMaxRejects;) {
      Point p = sample(temperature);
      if (!seen_.count(p) && space_.valid(p)) {
        seen_.insert(p);
        out.push_back(std::move(p));
      } else if (++rejects % kRejectsPerHeat == 0) {
        temperature = std::min(temperature * kHeat, kMaxTemperature);
      }
    }
    if (out.size() < want) add_random_fresh(space_, rng_, seen_, want - out.size(), out);
    if (model_) keep_best_predicted(space_, *model_, n, out, seen_);
    return out;
  }

  void observe(const Point& p, double cost) override {
    seen_.insert(p);
    if (!space_.valid(p)) return;  // a stale record: nothing to learn about this space
    double reward = 0;
    cost = sanitize(cost);
    if (std::isfinite(cost)) {
      reward = -std::log(std::max(cost, 1e-300));
      worst_ = count_ ? std::min(worst_, reward) : reward;  // count_ > 0: a finite one came first
    } else if (count_) {
      reward = worst_ - kFailurePenalty;
    } else {
      return;  // a failure before any success has nothing to be compared with
    }
    update(p, advantage(reward));
  }

 private:
  double advantage(double reward) {
    if (++count_ == 1) {
      baseline_ = reward;  // the first reward is the baseline: nothing to be better than yet
      return 0.0;
    }
    // 1/count at first: the early estimates are plain averages, not biased toward zero.
    const double w = std::max(kDecay, 1.0 / static_cast<double>(count_));
    const double diff = reward - baseline_;
    baseline_ += w * diff;
    spread_ += w * (diff * diff - spread_);
    if (spread_ <= 1e-24) return 0.0;
    return std::clamp(diff / std::sqrt(spread_), -kMaxAdvantage, kMaxAdvantage);
  }

  // The gradient of log softmax at the chosen value is onehot - probs.
  void update(const Point& p, double adv) {
    if (adv == 0.0) return;
    for (std::size_t k = 0; k < logits_.size(); ++k) {
      const std::vector<double> probs = softmax(logits_[k], 1.0);
      for (std::size_t j = 0; j < probs.size(); ++j)
        logits_[k][j] += kLearningRate * adv * ((static_cast<int>(j) == p[k] ? 1.0 : 0.0) - probs[j]);
    }
  }

  Point sample(double temperature) {
    Point p(logits_.size());
    for (std::size_t k = 0; k < logits_.size(); ++k) {
      if (rng_.unit() < kExplore) {
        p[k] = rng_.index(logits_[k].size());
        continue;
      }
      const std::vector<double> probs = softmax(logits_[k], temperature);
      double u = rng_.unit();
      std::size_t j = 0;
      while (j + 1 < probs.size() && u >= probs[j]) u -= probs[j++];
      p[k] = static_cast<int>(j);
    }
    return p;
  }

  static std::vector<double> softmax(const std::vector<double>& logits, double temperature) {
    const double top = *std::max_element(logits.begin(), logits.end());
    std::vector<double> e(logits.size());
    double sum = 0;
    for (std::size_t j = 0; j < e.size(); ++j) sum += e[j] = std::exp((logits[j] - top) / temperature);
    for (double& x : e) x /= sum;
    return e;
  }

  const Space& space_;
  const CostModel* model_;
  Rng rng_;
  PointSet seen_;
  std::vector<std::vector<double>> logits_;  // [knob][value]
  std::size_t count_ = 0;                    // rewards learned from
  double baseline_ = 0;                      // running mean of the reward
  double spread_ = 0;                        // running mean of its squared deviation
  double worst_ = 0;                         // lowest finite reward seen
};

}  // namespace

std::unique_ptr<Strategy> make_rl(const Space& space, std::uint64_t seed, const CostModel* model) {
  return std::make_unique<RlSearch>(space, seed, model);
}

}  // namespace wpk::search::detail
