#pragma once
// com.wpk's depth-first groups (graph/fused_ops.hpp: DepthwisePointwiseConv, ScaledPointwiseConv,
// ElementwiseChain) as the nodes they stand for: for the reference backend, which computes a
// group as they do, and for every backend that runs a group as its parts, each on its own kernel.
#include <vector>

#include "wpk/graph.hpp"

namespace wpk {

// True for the ops split_group splits.
bool is_group(const Node& node);

// How many parts split_group makes of the group (2 for the conv groups, a chain's steps); throws
// Error(InvalidModel) for a chain whose attributes make none.
std::size_t group_part_count(const Node& group);

// The group's parts in order, `between` the values they pass on (group_part_count - 1 of them):
// part i writes between[i], and the last writes the group's output. DepthwisePointwiseConv: the
// depthwise FusedConv (X, W_dw, B_dw) and the pointwise one (between, W_pw, B_pw, [Z]);
// ScaledPointwiseConv: Mul(X, S) and FusedConv(between, W, [B], [Z]); ElementwiseChain: its
// steps as ONNX ops.
std::vector<Node> split_group(const Node& group, const std::vector<ValueId>& between);

// True when the conv's attributes make it a group's pointwise part: ungrouped, unit strides and
// dilations, no padding (its weights' 1x1 shape is for the caller to check).
bool pointwise_conv_attributes(const Node& conv);

// The group as a graph of its own: the group's inputs as graph inputs (constants as initializers,
// shared with `graph`'s), the values between its parts with their dims, then the parts;
// `group_inputs` gets the values there that the group's inputs are. Throws Error(InvalidModel)
// when the group's input dims do not make the values between the parts.
Graph group_graph(const Node& group, const Graph& graph, std::vector<ValueId>* group_inputs = nullptr);

}  // namespace wpk
