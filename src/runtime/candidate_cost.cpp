#include "runtime/candidate_cost.hpp"

#include <algorithm>

#include "runtime/workload.hpp"
#include "search/cost_model.hpp"

namespace wpk {

std::string candidate_identity(const Backend& backend, const std::string& config) {
  return config.empty() ? backend.name() : backend.name() + "(" + config + ")";
}

KernelProfile candidate_profile(const Backend& backend, const std::string& config, const Node& node, const Graph& graph,
                                const InputShapes& shapes, int threads, const Kernel* prepared) {
  if (std::optional<KernelProfile> k = backend.describe(node, graph, config, shapes, threads)) return *k;
  return prepared ? prepared->profile() : backend.undescribed_profile(node);
}

double predicted_seconds(const KernelProfile& k, const std::string& identity, const Node& node, const InputShapes& shapes,
                         int threads, const CostCalibration* calibration) {
  search::KernelTraits traits;
  traits.vector_bits = k.vector_bits;
  traits.efficiency = k.efficiency;
  traits.work_scale = k.work_scale;
  traits.extra_bytes = k.extra_bytes;
  traits.overlaps_memory = k.overlaps_memory;
  traits.prefetched_bytes = k.prefetched_bytes;
  traits.call_seconds = k.call_seconds;
  traits.parallel_regions = k.parallel_regions;
  traits.multithreaded = k.multithreaded;
  const double seconds = k.predicted_seconds > 0 ? k.predicted_seconds
                                                : search::predict_seconds(estimate_workload(node, shapes), traits,
                                                                          search::Machine{threads});
  if (!calibration) return seconds;
  return seconds * calibration->factor(identity, k.name) + calibration->call_seconds(identity, threads);
}

double predicted_seconds_on_best_threads(const Backend& backend, const KernelProfile& profile, const std::string& identity,
                                         const Node& node, const InputShapes& shapes, int threads,
                                         const CostCalibration* calibration) {
  const double all = predicted_seconds(profile, identity, node, shapes, threads, calibration);
  if (threads <= 1 || !backend.uses_host_threads()) return all;
  return std::min(all, predicted_seconds(profile, identity, node, shapes, 1, calibration));
}

double predicted_seconds(const Backend& backend, const std::string& config, const Node& node, const Graph& graph,
                         const InputShapes& shapes, int threads, const Kernel* prepared,
                         const CostCalibration* calibration) {
  return predicted_seconds(candidate_profile(backend, config, node, graph, shapes, threads, prepared),
                           candidate_identity(backend, config), node, shapes, threads, calibration);
}

}  // namespace wpk
