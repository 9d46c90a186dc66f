#include "runtime/cost_calibration.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/measurement.hpp"
#include "runtime/trial_log.hpp"
#include "runtime/tuning_db.hpp"

namespace wpk {

CostCalibration CostCalibration::from(const TuningDb* db) {
  CostCalibration c;
  if (!db) return c;
  std::map<std::string, std::vector<double>> ratios;
  std::vector<double> all;
  for (const std::string& value : db->values_with_prefix(kTrialLogPrefix))
    for (const LoggedTrial& t : decode_trial_log(value)) {
      if (!std::isfinite(t.us) || !(t.us > 0) || !(t.predicted_us > 0)) continue;
      const double r = t.us / t.predicted_us;
      ratios[t.identity].push_back(r);
      all.push_back(r);
    }
  if (all.empty()) return c;
  const double typical = median(all);
  for (const auto& [identity, r] : ratios)
    if (r.size() >= kMinTrials) c.factors_[identity] = std::clamp(median(r) / typical, 0.125, 8.0);
  return c;
}

double CostCalibration::factor(const std::string& identity) const {
  const auto it = factors_.find(identity);
  return it == factors_.end() ? 1.0 : it->second;
}

}  // namespace wpk
