#include "search/cost_model.hpp"

#include <algorithm>

namespace wpk::search {

double predict_seconds(const Workload& w, const KernelTraits& k, const Machine& m) {
  const int threads = k.multithreaded ? std::max(1, m.threads) : 1;
  const double lanes = std::max(1, k.vector_bits / 32);
  const double compute =
      w.flops * std::max(0.0, k.work_scale) / (threads * lanes * m.flops_per_lane * std::clamp(k.efficiency, 1e-3, 1.0));
  const double memory = std::max(0.0, w.bytes + k.extra_bytes) / (threads * m.bytes_per_second);
  const double fixed = std::max(0.0, k.call_seconds) + (threads > 1 ? m.parallel_region_seconds : 0.0);
  return fixed + (k.overlaps_memory ? std::max(compute, memory) : compute + memory);
}

}  // namespace wpk::search
