#pragma once
// The cost model refined from what this machine measured (the trial logs, trial_log.hpp). Each
// trial is compared with its prediction relative to every trial's typical ratio (the nominal
// machine's absolute speed cancels out), and the calibrated prediction of a candidate is
//   factor(identity) * predicted + call_us(backend, threads)
// - factor: per candidate (identity, as tuning records name it) and kernel (the one its backend
//   describes for the node: a config string names a product's kernel and a conv's alike) with
//   enough logged trials, how much slower or faster than predicted it ran;
// - call_us: per backend and thread count, the fixed cost of a call the model does not see
//   (a library's primitive dispatch, a team of threads shrunk and grown, a generated kernel's
//   entry): on the smallest nodes measured times sit far above anything proportional to their
//   work. It is fitted with the factors, each backend's the value (from a doubling series) that
//   makes its trials' predictions closest to their measurements (mean absolute log error), and
//   only larger than the smallest work it has a trial of (above that, a term would price the
//   backend's small nodes by how far the large ones' predictions miss).
// Only candidates their backends describe (Backend::describe) are logged with a prediction;
// the others, and a candidate never measured, keep factor 1 and no call term.
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace wpk {

class TuningDb;
struct LoggedTrial;

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
  // The calibration these trials give (what from() computes from a folder's trial logs).
  static CostCalibration fit(const std::vector<LoggedTrial>& trials);

  // Multiplies the cost model's prediction for `identity` running `kernel` (its described
  // profile's name, "" where none); clamped to [1/8, 8].
  double factor(const std::string& identity, const std::string& kernel = "") const;
  // Seconds (nominal machine, like the predictions) added to the prediction of a call of
  // `identity`'s backend on `threads` threads: its own fitted term at that count, else the one
  // at the nearest count below (else above) it; 0 where the backend has none.
  double call_seconds(const std::string& identity, int threads) const;
  std::size_t calibrated() const { return factors_.size(); }

  static constexpr std::size_t kMinTrials = 3;

 private:
  std::map<std::string, double> factors_;
  std::map<std::pair<std::string, int>, double> call_us_;  // (backend, threads) -> microseconds
};

}  // namespace wpk
