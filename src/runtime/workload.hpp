#pragma once
// The work a node does on given inputs, for the cost model (search/cost_model.hpp): bytes moved
// (its inputs read, outputs of about their size written) and arithmetic, counted per op family
// where it dominates (convolutions, products, attention, normalizations) and as one operation
// per element elsewhere. Rough by design: candidates of one node share it.
#include <vector>

#include "search/cost_model.hpp"
#include "wpk/graph.hpp"

namespace wpk {

search::Workload estimate_workload(const Node& node, const std::vector<const Tensor*>& inputs);

}  // namespace wpk
