#pragma once
// The cost model refined from what this machine measured: for each candidate (identity, as
// tuning records name it) with enough logged trials (trial_log.hpp), how much slower or faster
// than predicted it ran, relative to every candidate's typical ratio (the nominal machine's
// absolute speed cancels out). Only candidates their backends describe (Backend::describe) are
// logged with a prediction; the others, and a candidate never measured, keep factor 1.
#include <map>
#include <string>

namespace wpk {

class TuningDb;

class CostCalibration {
 public:
  CostCalibration() = default;
  // From every trial log of this machine's environment in `db` (may be null: no calibration).
  static CostCalibration from(const TuningDb* db);
  // Multiplies the cost model's prediction for `identity`; clamped to [1/8, 8].
  double factor(const std::string& identity) const;
  std::size_t calibrated() const { return factors_.size(); }

  static constexpr std::size_t kMinTrials = 3;

 private:
  std::map<std::string, double> factors_;
};

}  // namespace wpk
