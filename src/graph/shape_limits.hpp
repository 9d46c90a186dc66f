#pragma once
// The load-time half of the shape bounds (core/limits.hpp): every value whose dims are known
// after optimization, and every shape a node is given as data (Reshape's target, Expand's,
// ConstantOfShape's, Tile's repeats, Resize's sizes), is checked against the session's rank
// and element limits, so that a model asking for more fails when it loads, naming the node.
// What only run time knows is checked by each kernel's output allocation.
#include "core/limits.hpp"
#include "wpk/graph.hpp"

namespace wpk {

// Throws Error(ResourceExhausted) naming the first node (or graph input) over a limit.
void check_shape_limits(const Graph& g, const ShapeLimits& limits);

}  // namespace wpk
