#pragma once
// Element types of the values a graph computes, found from its inputs and constants by a rule
// per op. Exporters rarely declare intermediate values, and backends choose kernels by dtype
// (oneDNN runs float32 only), so wpk works them out itself. wpk does not run ONNX's own shape
// inference: on hostile models it crashes inside libonnx (found by tests/fuzz/import_fuzz.cpp).
#include "wpk/graph.hpp"

namespace wpk {

// Fills the dtype of every node output the graph leaves Undefined, where the op has a rule.
// Values of ops without one stay Undefined (backends then treat the dtype as unknown).
void infer_dtypes(Graph& graph);

}  // namespace wpk
