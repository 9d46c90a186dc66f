#pragma once
// com.wpk DepthwisePointwiseConv (graph/fused_ops.hpp) as the two FusedConv nodes it stands for,
// for the reference backend, which computes it as they do, and for backends that run it with
// their kernels for each part.
#include <vector>

#include "wpk/graph.hpp"

namespace wpk {

struct DepthwisePointwiseParts {
  Node depthwise;  // inputs X, W_dw, B_dw; output `between`
  Node pointwise;  // inputs between, W_pw, B_pw, [Z]; the pair's output
};
DepthwisePointwiseParts split_depthwise_pointwise(const Node& pair, ValueId between);

// True when the conv's attributes make it a group's pointwise part: ungrouped, unit strides and
// dilations, no padding (its weights' 1x1 shape is for the caller to check).
bool pointwise_conv_attributes(const Node& conv);

// The pair as a graph of its own: the pair's inputs as graph inputs (constants as initializers,
// shared with `graph`'s), the depthwise output as a value of known dims, then the two nodes;
// `pair_inputs` gets the values there that the pair's inputs are. Throws Error(InvalidModel) when
// the pair's input dims do not make a depthwise output.
Graph depthwise_pointwise_graph(const Node& pair, const Graph& graph, std::vector<ValueId>* pair_inputs = nullptr);

}  // namespace wpk
