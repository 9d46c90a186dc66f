#pragma once
// com.wpk's depth-first groups (graph/fused_ops.hpp: DepthwisePointwiseConv, ScaledPointwiseConv)
// as the nodes they stand for: for the reference backend, which computes a group as they do, and
// for every backend that runs a group as its parts, each on its own kernel.
#include <vector>

#include "wpk/graph.hpp"

namespace wpk {

// True for the ops split_group splits.
bool is_group(const Node& node);

// The group's parts in order: the first reads the group's first input and writes `between`, the
// last reads `between` and writes the group's output. DepthwisePointwiseConv: the depthwise
// FusedConv (X, W_dw, B_dw) and the pointwise one (between, W_pw, B_pw, [Z]); ScaledPointwiseConv:
// Mul(X, S) and FusedConv(between, W, [B], [Z]).
std::vector<Node> split_group(const Node& group, ValueId between);

// True when the conv's attributes make it a group's pointwise part: ungrouped, unit strides and
// dilations, no padding (its weights' 1x1 shape is for the caller to check).
bool pointwise_conv_attributes(const Node& conv);

// The group as a graph of its own: the group's inputs as graph inputs (constants as initializers,
// shared with `graph`'s), the value between its parts with its dims, then the parts;
// `group_inputs` gets the values there that the group's inputs are. Throws Error(InvalidModel)
// when the group's input dims do not make the value between the parts.
Graph group_graph(const Node& group, const Graph& graph, std::vector<ValueId>* group_inputs = nullptr);

}  // namespace wpk
