#include "runtime/trial_log.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "runtime/cache_key.hpp"

namespace wpk {

std::string encode_trial_log(const std::vector<LoggedTrial>& trials) {
  std::string out = kTrialLogPrefix;
  char numbers[96];
  for (const LoggedTrial& t : trials) {
    std::snprintf(numbers, sizeof numbers, "|%d|%.3f|%.3f", t.threads, t.us, t.predicted_us);
    out += t.identity + numbers + (t.kernel.empty() ? "" : "|" + t.kernel) + ";";
  }
  return out;
}

std::vector<LoggedTrial> decode_trial_log(const std::string& text) {
  std::vector<LoggedTrial> out;
  const std::string prefix = kTrialLogPrefix;
  if (text.rfind(prefix, 0) != 0) return out;
  std::size_t at = prefix.size();
  while (at < text.size()) {
    const std::size_t end = std::min(text.find(';', at), text.size());
    const std::string item = text.substr(at, end - at);
    at = end + 1;
    const std::size_t a = item.find('|');
    if (a == std::string::npos || a == 0) continue;
    LoggedTrial t;
    t.identity = item.substr(0, a);
    const char* p = item.c_str() + a + 1;
    char* stop = nullptr;
    const long threads = std::strtol(p, &stop, 10);
    if (stop == p || *stop != '|' || threads < 1 || threads > 4096) continue;
    t.threads = static_cast<int>(threads);
    p = stop + 1;
    t.us = std::strtod(p, &stop);
    if (stop == p || std::isnan(t.us) || t.us < 0) continue;
    if (*stop == '|') {
      p = stop + 1;
      t.predicted_us = std::strtod(p, &stop);
      if (stop == p || !std::isfinite(t.predicted_us) || t.predicted_us < 0) t.predicted_us = 0;
      else if (*stop == '|') t.kernel = stop + 1;  // logs from before kernels were named end here
    }
    out.push_back(t);
  }
  return out;
}

std::string calibration_record_key() { return "cost-model-calibration-3;" + environment_key(); }

}  // namespace wpk
