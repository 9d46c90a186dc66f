#pragma once
// The work a node does on inputs of given shapes, for the cost model (search/cost_model.hpp):
// bytes moved (its inputs read once, an output of about its largest input's size written) and
// arithmetic, counted per op family where it dominates (convolutions, products, attention,
// normalizations) and as one operation per element elsewhere. Rough by design: candidates of
// one node share it. Elements are taken as 4 bytes.
#include <vector>

#include "backends/kernel.hpp"
#include "search/cost_model.hpp"
#include "wpk/graph.hpp"

namespace wpk {

search::Workload estimate_workload(const Node& node, const InputShapes& shapes);

// The node's input shapes as the graph declares them with every symbolic dim as `size`; an
// omitted input or one whose rank or a dim is unknown as nullopt. nullopt as a whole when no
// input has a symbolic dim and `size` is not 1 (nothing to vary).
std::optional<InputShapes> shapes_with_symbolic_dims_as(const Node& node, const Graph& graph, std::int64_t size);

// The shapes of a run's inputs; an input the run passes no tensor for (a constant the kernels
// own packed copies of) as the graph declares it.
InputShapes run_input_shapes(const Node& node, const Graph& graph, const std::vector<const Tensor*>& inputs);

}  // namespace wpk
