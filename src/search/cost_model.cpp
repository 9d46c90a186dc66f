#include "search/cost_model.hpp"

#include <algorithm>

namespace wpk::search {

double predict_seconds(const Workload& w, const KernelTraits& k, const Machine& m) {
  const int threads = k.multithreaded ? std::max(1, m.threads) : 1;
  const double lanes = std::max(1, k.vector_bits / 32);
  const double compute =
      w.flops * std::max(0.0, k.work_scale) / (threads * lanes * m.flops_per_lane * std::clamp(k.efficiency, 1e-3, 1.0));
  const double bytes = std::max(0.0, w.bytes + k.extra_bytes);
  const double prefetched = std::clamp(k.prefetched_bytes, 0.0, bytes);
  const double memory = (bytes - prefetched) / (threads * m.bytes_per_second);
  const double behind = prefetched / (threads * m.bytes_per_second);
  const double fixed =
      std::max(0.0, k.call_seconds) + (threads > 1 ? std::max(1, k.parallel_regions) * m.parallel_region_seconds : 0.0);
  if (k.overlaps_memory) return fixed + std::max(compute, memory + behind);
  return fixed + compute + memory + std::max(0.0, behind - compute);
}

}  // namespace wpk::search
