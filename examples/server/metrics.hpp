#pragma once
// The server's counters, served at GET /metrics in the Prometheus text format: requests by model
// and status, a latency histogram, and the time runs waited for CPUs. Requests for a model the
// server does not have count under model "-", so a client cannot grow the label set.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace wpk_server {

class Metrics {
 public:
  void record(const std::string& model, int status, double seconds, double queued_seconds);
  std::string prometheus() const;

 private:
  struct Latency {
    std::vector<std::uint64_t> buckets;  // one per kBounds entry, then +Inf
    double sum = 0;
    double queued_sum = 0;
    std::uint64_t count = 0;
  };
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::uint64_t> requests_;
  std::map<std::string, Latency> latency_;
};

}  // namespace wpk_server
