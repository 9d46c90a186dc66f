#pragma once
// Checks at the API edge: the graph a Session is built from, and the tensors given to run().
#include <cstdint>
#include <map>
#include <string>

#include "wpk/graph.hpp"
#include "wpk/session.hpp"

namespace wpk {

// Graph inputs must be tensors of storable dtypes, and every node must have its first output.
void check_graph_interface(const Graph& graph);
// Every input given, none unknown, dtypes equal, shapes matching the declared dims (symbolic
// dims bind consistently across inputs).
void check_run_inputs(const Graph& graph, const TensorMap& inputs);
// SessionOptions::fixed_dims: every dim named NAME, in inputs and in the shapes the model
// declares inside, becomes SIZE. Fails on a name no input declares or a size out of [1, 2^31).
void fix_symbolic_dims(Graph& graph, const std::map<std::string, std::int64_t>& sizes);

}  // namespace wpk
