#pragma once
// The pooling ops the gen backend writes: MaxPool, AveragePool and GlobalAveragePool over NHWC
// activations (channels_last; the batch known when the kernel runs, the rest at load), 2-D, any
// window, strides, dilations, explicit or SAME padding and ceil mode. As a tensor expression, a
// reduction over the window (the largest value, -inf in the padding; or the sum, 0 there, times
// each output position's divisor), scheduled like a depthwise conv: a tile of output pixels
// along a row by SIMD vectors of channels.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/generated/matmul_expr.hpp"
#include "backends/kernel.hpp"
#include "codegen/schedule.hpp"

namespace wpk::gen {

struct PoolSpec {
  bool max = true;  // MaxPool; else an average (AveragePool, GlobalAveragePool)
  std::string op;   // "maxpool_nhwc", "avgpool_nhwc", "global_avgpool_nhwc": the kernel's name says which
  std::int64_t h = 0, w = 0, c = 0;
  std::int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pad_top = 0, pad_left = 0;
  std::int64_t oh = 0, ow = 0;
  // An average's divisor per output position [oh, ow], as its inverse: the taps inside the input,
  // or with count_include_pad those inside the explicitly padded input. Empty for MaxPool.
  std::vector<float> inverse_counts;
};

// The node as a pool this backend writes, or why not (`why` set).
std::optional<PoolSpec> pool_spec(const Node& node, const Graph& graph, std::string& why);

// The pool as a tensor expression; its arguments: X, [the inverse counts, an average's], the
// output. Scheduled by window_schedule (conv_expr.hpp).
codegen::Compute pool_compute(const PoolSpec& spec);
// The configs worth compiling for the spec: tiles that fit the registers, no wider than the output.
std::vector<MatMulConfig> pool_configs(const PoolSpec& spec, int vector_registers, int lanes);
std::unique_ptr<Kernel> make_pool(const PoolSpec& spec, const MatMulConfig& config);

}  // namespace wpk::gen
