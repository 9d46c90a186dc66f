#include "runtime/cost_calibration.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/measurement.hpp"
#include "runtime/trial_log.hpp"
#include "runtime/tuning_db.hpp"

namespace wpk {

namespace {

// The record: "calibration:<identity>[@<kernel>]|<factor>;...;call:<backend>@<threads>|<us>;..." under
// calibration_record_key(). Identities hold no '|' or ';' (trial_log.hpp) and no ':' (a
// backend's name, then its config in parentheses); numbers are printed exactly (%.17g).
constexpr const char* kCalibrationPrefix = "calibration:";
constexpr const char* kCallPrefix = "call:";
constexpr double kMaxCallUs = 1e6;

std::string backend_of(const std::string& identity) { return identity.substr(0, identity.find('(')); }

// What a factor is kept under: the identity, and after an '@' the kernel where it has a name.
std::string factor_key(const std::string& identity, const std::string& kernel) {
  return kernel.empty() ? identity : identity + "@" + kernel;
}

bool parse_number(const std::string& text, double& out) {
  char* stop = nullptr;
  out = std::strtod(text.c_str(), &stop);
  return stop != text.c_str() && *stop == '\0' && std::isfinite(out);
}

bool decode_record(const std::string& value, std::map<std::string, double>& factors,
                   std::map<std::pair<std::string, int>, double>& calls) {
  if (value.rfind(kCalibrationPrefix, 0) != 0) return false;
  std::size_t at = std::strlen(kCalibrationPrefix);
  while (at < value.size()) {
    const std::size_t end = std::min(value.find(';', at), value.size());
    const std::string item = value.substr(at, end - at);
    at = end + 1;
    const std::size_t bar = item.find('|');
    double number = 0;
    if (bar == std::string::npos || bar == 0 || !parse_number(item.substr(bar + 1), number)) return false;
    const std::string name = item.substr(0, bar);
    if (name.rfind(kCallPrefix, 0) == 0) {
      const std::size_t sign = name.rfind('@');
      const std::string backend = sign == std::string::npos ? "" : name.substr(std::strlen(kCallPrefix), sign - std::strlen(kCallPrefix));
      double threads = 0;
      if (backend.empty() || !parse_number(name.substr(sign + 1), threads) || threads < 1 || threads > 4096 ||
          threads != std::floor(threads) || number < 0 || number > kMaxCallUs)
        return false;
      calls[{backend, static_cast<int>(threads)}] = number;
    } else {
      if (number < 0.125 || number > 8.0) return false;
      factors[name] = number;
    }
  }
  return true;
}

// The trials as the fit reads them: y the measured time over the typical ratio, x the prediction.
struct FitTrial {
  std::size_t identity, group;
  double x, y;
};

struct Fit {
  std::vector<FitTrial> trials;
  std::vector<std::vector<std::size_t>> of_identity;  // trial indices
  std::vector<std::vector<std::size_t>> in_group;     // identities with a trial in the group
  std::vector<double> call;                           // per group
  std::vector<double> factor;                         // per identity
  std::vector<double> error_of;                       // per identity: its trials' summed error

  // Identity i's factor and its trials' error under the current call terms.
  void update(std::size_t i, std::vector<double>& scratch) {
    if (of_identity[i].size() >= CostCalibration::kMinTrials) {
      scratch.clear();
      // What the call term leaves of a measurement, kept above a twentieth of it: a term larger
      // than some of the identity's times must not make their share negative.
      for (std::size_t t : of_identity[i]) {
        const FitTrial& f = trials[t];
        scratch.push_back(std::max(f.y - call[f.group], 0.05 * f.y) / f.x);
      }
      factor[i] = std::clamp(median(scratch), 0.125, 8.0);
    }
    error_of[i] = 0;
    for (std::size_t t : of_identity[i]) {
      const FitTrial& f = trials[t];
      error_of[i] += std::abs(std::log((factor[i] * f.x + call[f.group]) / f.y));
    }
  }

  // The mean absolute log error over every trial, the identities of `group` brought up to date.
  double error_after_changing(std::size_t group, std::vector<double>& scratch) {
    for (std::size_t i : in_group[group]) update(i, scratch);
    double sum = 0;
    for (double e : error_of) sum += e;
    return sum / static_cast<double>(trials.size());
  }
};

// Every trial of every log in `db`.
std::vector<LoggedTrial> logged_trials(const TuningDb& db) {
  std::vector<LoggedTrial> trials;
  for (const std::string& value : db.values_with_prefix(kTrialLogPrefix)) {
    std::vector<LoggedTrial> some = decode_trial_log(value);
    trials.insert(trials.end(), some.begin(), some.end());
  }
  return trials;
}

}  // namespace

CostCalibration CostCalibration::fit(const std::vector<LoggedTrial>& logged) {
  CostCalibration c;
  std::vector<const LoggedTrial*> usable;
  std::vector<double> ratios;
  for (const LoggedTrial& t : logged)
    if (std::isfinite(t.us) && t.us > 0 && t.predicted_us > 0) {
      usable.push_back(&t);
      ratios.push_back(t.us / t.predicted_us);
    }
  if (usable.empty()) return c;
  const double typical = median(ratios);
  std::map<std::string, std::size_t> identities;
  std::map<std::pair<std::string, int>, std::size_t> groups;
  Fit fit;
  for (const LoggedTrial* trial : usable) {
    const LoggedTrial& t = *trial;
    const std::size_t id = identities.emplace(factor_key(t.identity, t.kernel), identities.size()).first->second;
    const std::size_t group = groups.emplace(std::make_pair(backend_of(t.identity), t.threads), groups.size()).first->second;
    if (id == fit.of_identity.size()) fit.of_identity.emplace_back();
    fit.of_identity[id].push_back(fit.trials.size());
    fit.trials.push_back({id, group, t.predicted_us, t.us / typical});
  }
  fit.call.assign(groups.size(), 0.0);
  fit.factor.assign(identities.size(), 1.0);
  fit.error_of.assign(identities.size(), 0.0);
  fit.in_group.resize(groups.size());
  for (std::size_t id = 0; id < fit.of_identity.size(); ++id) {
    std::vector<bool> seen(groups.size(), false);
    for (std::size_t t : fit.of_identity[id]) seen[fit.trials[t].group] = true;
    for (std::size_t g = 0; g < groups.size(); ++g)
      if (seen[g]) fit.in_group[g].push_back(id);
  }
  // A call term is told apart from a factor only by trials whose predicted work is smaller than
  // it: where every trial of a backend is larger, a term would price the backend's small nodes,
  // none of them measured, by its large ones' prediction errors.
  std::vector<double> smallest_work(groups.size(), std::numeric_limits<double>::infinity());
  for (const FitTrial& t : fit.trials) smallest_work[t.group] = std::min(smallest_work[t.group], t.x);
  std::vector<double> scratch;
  for (std::size_t id = 0; id < fit.of_identity.size(); ++id) fit.update(id, scratch);
  // Each backend's call term in turn, the others held, twice over: 0, then a doubling series
  // from a quarter of a microsecond; ties keep the smaller term.
  double best_error = fit.error_after_changing(0, scratch);
  for (int pass = 0; pass < 2; ++pass)
    for (std::size_t g = 0; g < groups.size(); ++g) {
      double best = fit.call[g];
      for (double term = 0; term <= 512; term = term == 0 ? 0.25 : 2 * term) {
        if (term > 0 && term <= smallest_work[g]) continue;
        fit.call[g] = term;
        const double e = fit.error_after_changing(g, scratch);
        if (e < best_error) best_error = e, best = term;
      }
      fit.call[g] = best;
      fit.error_after_changing(g, scratch);
    }
  for (const auto& [identity, id] : identities)
    if (fit.of_identity[id].size() >= kMinTrials) c.factors_[identity] = fit.factor[id];
  for (const auto& [group, g] : groups)
    if (fit.call[g] > 0) c.call_us_[group] = fit.call[g];
  return c;
}

void CostCalibration::store(TuningDb& db) {
  const CostCalibration c = fit(logged_trials(db));
  std::string value = kCalibrationPrefix;
  char number[40];
  for (const auto& [identity, factor] : c.factors_) {
    std::snprintf(number, sizeof number, "%.17g", factor);
    value += identity + "|" + number + ";";
  }
  for (const auto& [group, us] : c.call_us_) {
    std::snprintf(number, sizeof number, "%.17g", us);
    value += kCallPrefix + group.first + "@" + std::to_string(group.second) + "|" + number + ";";
  }
  if (value.back() == ';') value.pop_back();
  db.store(calibration_record_key(), value, 0.0,
           "cost model calibration, " + std::to_string(c.factors_.size()) + " candidates, " +
               std::to_string(c.call_us_.size()) + " call terms");
}

CostCalibration CostCalibration::from(const TuningDb* db) {
  if (!db) return {};
  if (const auto record = db->lookup(calibration_record_key())) {
    CostCalibration c;
    if (decode_record(*record, c.factors_, c.call_us_)) return c;
  }
  const auto compute = [](const TuningDb& from) { return fit(logged_trials(from)); };
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

double CostCalibration::factor(const std::string& identity, const std::string& kernel) const {
  const auto it = factors_.find(factor_key(identity, kernel));
  return it == factors_.end() ? 1.0 : it->second;
}

double CostCalibration::call_seconds(const std::string& identity, int threads) const {
  const std::string backend = backend_of(identity);
  const auto first = call_us_.lower_bound({backend, 0});
  if (first == call_us_.end() || first->first.first != backend) return 0.0;
  // The entry at `threads` or the nearest count below it, else the backend's smallest count.
  auto it = call_us_.upper_bound({backend, threads});
  const double us = it == first ? first->second : std::prev(it)->second;
  return us * 1e-6;
}

}  // namespace wpk
