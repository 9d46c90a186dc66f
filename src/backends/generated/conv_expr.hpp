#pragma once
// The convolutions the gen backend writes beyond the pointwise ones (matmul_expr.hpp): NHWC
// activations (the batch known when the kernel runs, the rest at load), any kernel size, strides,
// dilations and explicit padding, dense (one group) or depthwise (a group per channel, one output
// channel each), with the node's bias, residual and activation in the store. A tile of output
// pixels along a row by SIMD vectors of output channels; zero padding read as 0 at the borders.
#include <optional>
#include <string>

#include "backends/generated/epilogue.hpp"
#include "backends/generated/matmul_expr.hpp"
#include "codegen/schedule.hpp"

namespace wpk::gen {

// Bias: input 2, [C_out]; residual: input 3, the output's shape.
struct ConvSpec : Epilogue {
  std::int64_t h = 0, w = 0, c = 0, o = 0;  // input rows, columns, channels; output channels
  std::int64_t kh = 0, kw = 0, sh = 1, sw = 1, dh = 1, dw = 1, pad_top = 0, pad_left = 0;
  std::int64_t oh = 0, ow = 0;
  bool depthwise = false;
};

// The node as a convolution this backend writes, or why not (`why` set).
std::optional<ConvSpec> conv_spec(const Node& node, const Graph& graph, std::string& why);

// A dense conv's weights [o, c, kh, kw] in the order its generated kernel reads them, [o, kh, kw, c].
Tensor dense_conv_weights(const Tensor& w);

// The convolution as a tensor expression; its arguments: X, W, [bias], [residual], the output.
codegen::Compute conv_compute(const ConvSpec& spec);
// A tile of config.rows output pixels along a row by config.vectors vectors of channels; the
// parallel loop over output rows or over channel tiles: for any compute over NHWC axes
// {n, y, x, c} that reduces over a window (a conv, a pool).
codegen::Schedule window_schedule(const codegen::Compute& c, const MatMulConfig& config, int lanes);
// window_schedule with W packed in panels of the tile's channels.
codegen::Schedule conv_schedule(const codegen::Compute& c, const MatMulConfig& config, int lanes);

}  // namespace wpk::gen
