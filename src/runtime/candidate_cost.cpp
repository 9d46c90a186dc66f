#include "runtime/candidate_cost.hpp"

#include "runtime/workload.hpp"
#include "search/cost_model.hpp"

namespace wpk {

double predicted_seconds(const Backend& backend, const std::string& config, const Node& node, const Graph& graph,
                         const InputShapes& shapes, int threads, const Kernel* prepared,
                         const CostCalibration* calibration) {
  std::optional<KernelProfile> k = backend.describe(node, graph, config, shapes, threads);
  if (!k && prepared) k = prepared->profile();
  if (!k) k = KernelProfile{};
  const search::KernelTraits traits{k->vector_bits, k->efficiency, k->work_scale, k->extra_bytes, k->overlaps_memory};
  const double seconds = search::predict_seconds(estimate_workload(node, shapes), traits, search::Machine{threads});
  if (!calibration) return seconds;
  return seconds * calibration->factor(config.empty() ? backend.name() : backend.name() + "(" + config + ")");
}

bool shape_specific_weights(const Backend& backend, const std::string& config, const Node& node, const Graph& graph,
                            const InputShapes& shapes, int threads) {
  const std::optional<KernelProfile> k = backend.describe(node, graph, config, shapes, threads);
  return k && k->shape_specific_weights;
}

std::optional<InputShapes> shapes_with_symbolic_dims_as(const Node& node, const Graph& graph, std::int64_t size) {
  InputShapes out;
  bool symbolic = false;
  for (ValueId v : node.inputs) {
    if (v == kNoValue) {
      out.push_back(std::nullopt);
      continue;
    }
    if (const Tensor* t = graph.initializer(v)) {
      out.push_back(t->shape());
      continue;
    }
    const ValueInfo& info = graph.value(v);
    if (!info.dims) {
      out.push_back(std::nullopt);
      continue;
    }
    Shape s;
    bool known = true;
    for (const Dim& d : *info.dims) {
      if (d.is_static()) {
        s.push_back(d.value);
      } else if (!d.symbol.empty()) {
        s.push_back(size);
        symbolic = true;
      } else {
        known = false;
      }
    }
    out.push_back(known ? std::optional<Shape>(s) : std::nullopt);
  }
  if (!symbolic && size != 1) return std::nullopt;
  return out;
}

}  // namespace wpk
