#pragma once
// Checks at the API edge: the graph a Session is built from, and the tensors given to run().
#include "wpk/graph.hpp"
#include "wpk/session.hpp"

namespace wpk {

// Graph inputs and outputs must be tensors of storable dtypes.
void check_graph_interface(const Graph& graph);
// Every input given, none unknown, dtypes equal, shapes matching the declared dims (symbolic
// dims bind consistently across inputs).
void check_run_inputs(const Graph& graph, const TensorMap& inputs);

}  // namespace wpk
