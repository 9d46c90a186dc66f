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
  // From `db`'s calibration record (store() keeps it current), else from every trial log of this
  // machine's environment in it (a folder tuned before the record existed); null: no calibration.
  static CostCalibration from(const TuningDb* db);
  // Computes the calibration from `db`'s trial logs and stores it as its record: sessions that
  // only look records up read that one line instead of decoding every trial log (most of a
  // tuned folder's bytes). The tuner calls it after it logs a node's trials.
  static void store(TuningDb& db);
  // Multiplies the cost model's prediction for `identity`; clamped to [1/8, 8].
  double factor(const std::string& identity) const;
  std::size_t calibrated() const { return factors_.size(); }

  static constexpr std::size_t kMinTrials = 3;

 private:
  static CostCalibration compute(const TuningDb& db);
  std::map<std::string, double> factors_;
};

}  // namespace wpk
