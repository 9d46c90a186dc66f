#include "runtime/cost_calibration.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "runtime/measurement.hpp"
#include "runtime/trial_log.hpp"
#include "runtime/tuning_db.hpp"

namespace wpk {

namespace {

// The record: "calibration:<identity>|<factor>;..." under calibration_record_key(). Identities hold no '|'
// or ';' (trial_log.hpp); factors are printed exactly (%.17g).
constexpr const char* kCalibrationPrefix = "calibration:";

std::optional<std::map<std::string, double>> decode_record(const std::string& value) {
  if (value.rfind(kCalibrationPrefix, 0) != 0) return std::nullopt;
  std::map<std::string, double> factors;
  std::size_t at = std::strlen(kCalibrationPrefix);
  while (at < value.size()) {
    const std::size_t end = std::min(value.find(';', at), value.size());
    const std::string item = value.substr(at, end - at);
    const std::size_t bar = item.find('|');
    if (bar == std::string::npos || bar == 0) return std::nullopt;
    char* stop = nullptr;
    const double f = std::strtod(item.c_str() + bar + 1, &stop);
    if (stop == item.c_str() + bar + 1 || *stop != '\0' || !std::isfinite(f) || f < 0.125 || f > 8.0) return std::nullopt;
    factors[item.substr(0, bar)] = f;
    at = end + 1;
  }
  return factors;
}

}  // namespace

void CostCalibration::store(TuningDb& db) {
  const CostCalibration c = compute(db);
  std::string value = kCalibrationPrefix;
  for (const auto& [identity, factor] : c.factors_) {
    char f[40];
    std::snprintf(f, sizeof f, "%.17g", factor);
    value += identity + "|" + f + ";";
  }
  if (!c.factors_.empty()) value.pop_back();
  db.store(calibration_record_key(), value, 0.0, "cost model calibration, " + std::to_string(c.factors_.size()) + " candidates");
}

CostCalibration CostCalibration::from(const TuningDb* db) {
  if (!db) return {};
  if (const auto record = db->lookup(calibration_record_key()))
    if (auto factors = decode_record(*record)) {
      CostCalibration c;
      c.factors_ = std::move(*factors);
      return c;
    }
  // Records shared by the process's lookups (one version of the file) calibrate alike: computed
  // once for them, not per session (decoding every trial log of a large file took milliseconds).
  const std::shared_ptr<const TuningFile> shared = db->shared_records();
  if (!shared) return compute(*db);
  static std::mutex mutex;
  static std::map<const TuningFile*, std::pair<std::weak_ptr<const TuningFile>, CostCalibration>> known;
  std::lock_guard<std::mutex> lock(mutex);
  for (auto it = known.begin(); it != known.end();) it = it->second.first.expired() ? known.erase(it) : std::next(it);
  const auto it = known.find(shared.get());
  if (it != known.end()) return it->second.second;
  const CostCalibration c = compute(*db);
  known.emplace(shared.get(), std::make_pair(std::weak_ptr<const TuningFile>(shared), c));
  return c;
}

CostCalibration CostCalibration::compute(const TuningDb& db) {
  CostCalibration c;
  std::map<std::string, std::vector<double>> ratios;
  std::vector<double> all;
  for (const std::string& value : db.values_with_prefix(kTrialLogPrefix))
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
