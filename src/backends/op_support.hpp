#pragma once
// Checks that more than one backend makes of a node before it offers a kernel for it: the
// constant parameters a fast kernel folds in at prepare. "" when the node qualifies, else why not.
#include <string>

#include "backends/kernel.hpp"
#include "wpk/graph.hpp"

namespace wpk {

// LayerNormalization over the last axis, with constant float32 scale (and bias) of one length,
// without the Mean/InvStdDev outputs.
std::string constant_layernorm_unsupported(const Node& node, const Graph& graph);

// The run-time input of such a layer norm, checked: float32, ending in the scale's `cols`.
const Tensor& layernorm_input(const KernelContext& ctx, std::int64_t cols);

// The activation (none or Relu) and the four parameters (scale, B, mean, var from input `first`
// on) of a BatchNorm-like com.wpk node: constant float32 vectors of one length.
std::string batchnorm_params_unsupported(const Node& node, const Graph& graph, std::size_t first);

}  // namespace wpk
