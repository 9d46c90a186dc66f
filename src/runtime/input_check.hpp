#pragma once
// Checks at the API edge: the graph a Session is built from, and the tensors given to run().
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "wpk/graph.hpp"
#include "wpk/session.hpp"

namespace wpk {

// Graph inputs must be tensors of storable dtypes, and every node must have its first output.
void check_graph_interface(const Graph& graph);
// The graph's inputs in its order, each pointing into `inputs`: every input given, none unknown,
// and checked as check_bound_inputs says.
std::vector<const Tensor*> bind_run_inputs(const Graph& graph, const TensorMap& inputs);
// One tensor per graph input, in its order: dtypes equal, shapes matching the declared dims
// (symbolic dims bind consistently across inputs).
void check_bound_inputs(const Graph& graph, const std::vector<const Tensor*>& inputs);
// SessionOptions::fixed_dims: every dim named NAME, in inputs and in the shapes the model
// declares inside, becomes SIZE. Fails on a name no input declares or a size out of [1, 2^31).
void fix_symbolic_dims(Graph& graph, const std::map<std::string, std::int64_t>& sizes);

}  // namespace wpk
