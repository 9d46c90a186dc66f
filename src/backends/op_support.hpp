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

// QLinearConv's (and com.wpk QLinearConvAdd's) parameters as the integer kernels fold them in: 8-bit
// input, constant 4-D int8 weights with zero point 0, constant float32 scalar scales (the
// weights' per tensor or per output channel), constant 8-bit scalar zero points, an optional
// constant int32 bias [C_out]; the residual and the sum of one 8-bit dtype.
std::string qlinear_conv_params_unsupported(const Node& node, const Graph& graph);

// com.wpk MatMulIntegerToFloat's run-time A, A_scale and A_zero (inputs 0, 2, 4) against the
// kernel's A dtype and B's k rows: fails naming the node when they do not fit.
void check_integer_product_input(const KernelContext& ctx, DType a_type, std::int64_t k);

}  // namespace wpk
