#pragma once
// The cost model's seconds for one candidate of a node (search/cost_model.hpp): the node's
// workload on the given input shapes, the kernel as its backend describes it for them
// (Backend::describe), else as the prepared kernel says (Kernel::profile), else a generic kernel;
// calibrated by what this machine measured of the candidate (cost_calibration.hpp) when given one.
// The execution plan ranks a node's candidates by it before preparing any; the tuner ranks the
// prepared ones by it per input-shape signature.
#include <string>

#include "backends/kernel.hpp"
#include "runtime/cost_calibration.hpp"

namespace wpk {

// "reference", or "onednn(algorithm=winograd)" with a config: how tuning records, trial logs,
// calibration and profiles name a candidate.
std::string candidate_identity(const Backend& backend, const std::string& config);

// How `config` computes `shapes`: as its backend describes it, else as `prepared` (may be null)
// says, else a generic kernel.
KernelProfile candidate_profile(const Backend& backend, const std::string& config, const Node& node, const Graph& graph,
                                const InputShapes& shapes, int threads, const Kernel* prepared = nullptr);

// The cost model's seconds for a candidate computing as `profile`; `calibration` (may be null)
// corrects them by what this machine measured of the candidate `identity` and its backend.
double predicted_seconds(const KernelProfile& profile, const std::string& identity, const Node& node,
                         const InputShapes& shapes, int threads, const CostCalibration* calibration = nullptr);

// The least of predicted_seconds on `threads` and on one thread, for a backend whose kernels
// use the host's threads: on tiny tensors starting the threads costs more than they save, and
// the tuner's untuned choice (Tuner::predicted_best) then runs the node on one.
double predicted_seconds_on_best_threads(const Backend& backend, const KernelProfile& profile, const std::string& identity,
                                         const Node& node, const InputShapes& shapes, int threads,
                                         const CostCalibration* calibration = nullptr);

// The two together.
double predicted_seconds(const Backend& backend, const std::string& config, const Node& node, const Graph& graph,
                         const InputShapes& shapes, int threads, const Kernel* prepared = nullptr,
                         const CostCalibration* calibration = nullptr);

// The plan ranks a node's candidates at the declared shapes with symbolic dims as 1 (the size
// sessions most often run) and, when a dim is symbolic, as this (workload.hpp's
// shapes_with_symbolic_dims_as).
constexpr std::int64_t kLargeBatch = 8;

}  // namespace wpk
