#include "metrics.hpp"

#include <cstdio>

namespace wpk_server {
namespace {

// Upper bounds of the latency buckets, in seconds.
const double kBounds[] = {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10};
constexpr std::size_t kBucketCount = sizeof(kBounds) / sizeof(kBounds[0]);

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

void Metrics::record(const std::string& model, int status, double seconds, double queued_seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++requests_[{model, status}];
  Latency& l = latency_[model];
  if (l.buckets.empty()) l.buckets.assign(kBucketCount + 1, 0);
  std::size_t b = 0;
  while (b < kBucketCount && seconds > kBounds[b]) ++b;
  ++l.buckets[b];
  l.sum += seconds;
  l.queued_sum += queued_seconds;
  ++l.count;
}

std::string Metrics::prometheus() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  out += "# HELP wpk_requests_total Prediction requests answered, by model and HTTP status.\n";
  out += "# TYPE wpk_requests_total counter\n";
  std::uint64_t errors = 0;
  for (const auto& [key, n] : requests_) {
    out += "wpk_requests_total{model=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"} " + std::to_string(n) + "\n";
    if (key.second >= 400) errors += n;
  }
  out += "# HELP wpk_request_errors_total Prediction requests answered with a 4xx or 5xx status.\n";
  out += "# TYPE wpk_request_errors_total counter\n";
  out += "wpk_request_errors_total " + std::to_string(errors) + "\n";
  out += "# HELP wpk_request_seconds Time from a prediction request's arrival to its answer.\n";
  out += "# TYPE wpk_request_seconds histogram\n";
  for (const auto& [model, l] : latency_) {
    std::uint64_t cumulative = 0;
    for (std::size_t b = 0; b <= kBucketCount; ++b) {
      cumulative += l.buckets[b];
      const std::string le = b < kBucketCount ? number(kBounds[b]) : "+Inf";
      out += "wpk_request_seconds_bucket{model=\"" + model + "\",le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
    }
    out += "wpk_request_seconds_sum{model=\"" + model + "\"} " + number(l.sum) + "\n";
    out += "wpk_request_seconds_count{model=\"" + model + "\"} " + std::to_string(l.count) + "\n";
  }
  out += "# HELP wpk_run_queued_seconds_total Time runs waited for CPUs that other runs held.\n";
  out += "# TYPE wpk_run_queued_seconds_total counter\n";
  for (const auto& [model, l] : latency_)
    out += "wpk_run_queued_seconds_total{model=\"" + model + "\"} " + number(l.queued_sum) + "\n";
  return out;
}

}  // namespace wpk_server
