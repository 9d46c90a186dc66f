#pragma once
// The cost model's seconds for one candidate of a node (search/cost_model.hpp): the node's
// workload on the given input shapes, the kernel as its backend describes it for them
// (Backend::describe), else as the prepared kernel says (Kernel::profile), else a generic kernel;
// scaled by this machine's calibration of the candidate (cost_calibration.hpp) when given one.
// The execution plan ranks a node's candidates by it before preparing any; the tuner ranks the
// prepared ones by it per input-shape signature.
#include <string>

#include "backends/kernel.hpp"
#include "runtime/cost_calibration.hpp"

namespace wpk {

// `calibration` (may be null) scales it by what this machine measured of the candidate.
double predicted_seconds(const Backend& backend, const std::string& config, const Node& node, const Graph& graph,
                         const InputShapes& shapes, int threads, const Kernel* prepared = nullptr,
                         const CostCalibration* calibration = nullptr);

// True when the backend describes `config` as packing weights per input shape
// (KernelProfile::shape_specific_weights).
bool shape_specific_weights(const Backend& backend, const std::string& config, const Node& node, const Graph& graph,
                            const InputShapes& shapes, int threads);

// Input shapes for ranking at a batch guess: the declared ones with every symbolic dim as `size`
// (the plan ranks at 1, the size sessions most often run, and at kLargeBatch when a dim is
// symbolic). nullopt when no input has a symbolic dim and `size` is not 1.
std::optional<InputShapes> shapes_with_symbolic_dims_as(const Node& node, const Graph& graph, std::int64_t size);
constexpr std::int64_t kLargeBatch = 8;

}  // namespace wpk
