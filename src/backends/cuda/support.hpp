#pragma once
// Which nodes the CUDA backend runs inside a device region (runtime/device_placement.hpp), decided
// from the graph alone: no device, driver or CUDA header is needed to ask.
#include <string>

#include "wpk/graph.hpp"
#include "wpk/tensor.hpp"

namespace wpk::cuda {

// "" when the CUDA backend runs `node`: its op and attributes, float32 values, static shapes.
std::string why_cuda_cannot_run(const Node& node, const Graph& graph);

// Ops whose output is their input under another shape (Reshape, Flatten, Squeeze, Unsqueeze,
// Identity): on the device they share the input's memory.
bool is_view_op(const Node& node);
// The dims of a value the backend runs on (why_cuda_cannot_run has checked they are all known).
Shape static_shape(const Graph& g, ValueId v);

// Element-wise ONNX ops the backend generates kernels for.
bool is_elementwise_op(const Node& node);

}  // namespace wpk::cuda
