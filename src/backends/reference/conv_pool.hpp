#pragma once
// Shared by conv.cpp and pool.cpp: the sliding-window geometry (kernel, strides, dilations,
// pads, auto_pad, output size) that Conv, ConvTranspose and the pooling ops all read the same way.
#include <cstdint>
#include <vector>

#include "backends/reference/registry.hpp"

namespace wpk::reference {

void register_conv(OpTable& t);  // conv.cpp
void register_deform_conv(OpTable& t);  // deform_conv.cpp
void register_pool(OpTable& t);  // pool.cpp

// Window attributes (kernel, strides, dilations, pads) beyond this are rejected so index
// arithmetic cannot overflow int64.
constexpr std::int64_t kMaxWindowValue = std::int64_t(1) << 31;

// Geometry of a window sliding over the spatial dims, padded to exactly 3 spatial dims (a 1-D or
// 2-D op gets leading dims of size 1 with kernel 1), so one loop nest serves every rank.
struct Window {
  int nd = 0;  // spatial rank of the op itself (1..3)
  std::int64_t in[3] = {1, 1, 1};
  std::int64_t out[3] = {1, 1, 1};
  std::int64_t kernel[3] = {1, 1, 1};
  std::int64_t stride[3] = {1, 1, 1};
  std::int64_t dilation[3] = {1, 1, 1};
  std::int64_t pad_begin[3] = {0, 0, 0};  // may be negative for ConvTranspose
  std::int64_t pad_end[3] = {0, 0, 0};

  std::int64_t in_size() const { return in[0] * in[1] * in[2]; }
  std::int64_t out_size() const { return out[0] * out[1] * out[2]; }
  std::int64_t kernel_size() const { return kernel[0] * kernel[1] * kernel[2]; }
};

// Reads kernel_shape (or takes `kernel` from the weights when the attribute is absent and
// `kernel` is non-empty), strides, dilations, pads and auto_pad, and computes the output size the
// Conv/pooling way: floor((in + pads - dilated_kernel) / stride) + 1, or ceil with `ceil_mode`.
// `x_shape` is the full (N, C, spatial...) input shape.
Window conv_window(const KernelContext& ctx, const Shape& x_shape, const std::vector<std::int64_t>& kernel,
                   bool ceil_mode);

// Reads strides/dilations and validates the spatial rank; no pads/output (ConvTranspose and
// MaxUnpool compute those their own way).
Window base_window(const KernelContext& ctx, const Shape& x_shape, const std::vector<std::int64_t>& kernel);

}  // namespace wpk::reference
