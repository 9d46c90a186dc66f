#pragma once
// What the gen backend's kernels fuse after their sum, and the graph facts their specs read.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codegen/tensor_expr.hpp"
#include "wpk/graph.hpp"

namespace wpk::gen {

// A com.wpk node's bias (input 2), residual (input 3) and activation, as a kernel fuses them:
// act(sum + bias + residual).
struct Epilogue {
  bool bias = false;
  bool residual = false;
  std::string activation;     // fused_ops.hpp's names
  std::vector<float> params;  // activation_params
};

// Reads `node`'s activation into `e`; false (why set) when the DSL does not write it (the erf
// GELU) or its parameters are malformed.
bool read_activation(const Node& node, Epilogue& e, std::string& why);
// A Conv or com.wpk FusedConv's epilogue: a bias of shape [channels] (input 2), the residual
// (input 3) and the activation; false (why set) when this backend does not write it.
bool read_conv_epilogue(const Node& node, const Graph& graph, std::int64_t channels, Epilogue& e, std::string& why);
// The activation applied to x, NaN kept where the reference backend keeps it.
codegen::Expr activation_of(const Epilogue& e, codegen::Expr x);
// The compute's epilogue act(acc + bias[column] + residual[output index]), null when it is the
// sum alone; appends the bias ([columns]) and residual (the output's dims) buffers to `inputs`.
codegen::Expr epilogue_expr(const Epilogue& e, const codegen::Var& column, const std::vector<codegen::Var>& output_axes,
                            const std::vector<std::int64_t>& output_dims, std::vector<codegen::Buffer>& inputs);
// The residual buffer epilogue_expr appended to a compute's inputs; std::invalid_argument when it
// has none.
codegen::Buffer residual_input(const codegen::Compute& c);

// The value's shape when every dimension is static, else nullopt.
std::optional<std::vector<std::int64_t>> static_dims(const Graph& graph, ValueId v);
// float32, or not yet known.
bool is_float32(const Graph& graph, ValueId v);

}  // namespace wpk::gen
