// Window geometry shared by the convolution and pooling kernels, and their registration.
#include "backends/reference/conv_pool.hpp"

#include <algorithm>
#include <string>

#include "backends/reference/common.hpp"

namespace wpk::reference {
namespace {

std::vector<std::int64_t> spatial_attr(const KernelContext& ctx, const char* name, int nd, std::int64_t fallback,
                                       std::int64_t min_value) {
  std::vector<std::int64_t> v = ctx.node().attr_ints(name, std::vector<std::int64_t>(nd, fallback));
  if (static_cast<int>(v.size()) != nd)
    ctx.fail(ErrorCode::InvalidModel, std::string(name) + " has " + std::to_string(v.size()) + " values, expected " +
                                          std::to_string(nd) + " (one per spatial dim)");
  for (auto x : v)
    if (x < min_value || x > kMaxWindowValue)
      ctx.fail(ErrorCode::InvalidModel, std::string(name) + " has an invalid value " + std::to_string(x));
  return v;
}

}  // namespace

Window base_window(const KernelContext& ctx, const Shape& x_shape, const std::vector<std::int64_t>& kernel) {
  const int rank = static_cast<int>(x_shape.size());
  if (rank < 3)
    ctx.fail(ErrorCode::InvalidArgument, "input must have shape (N, C, spatial...), got " + shape_to_string(x_shape));
  if (rank > 5)
    ctx.fail(ErrorCode::Unsupported, "only 1-D, 2-D and 3-D windows are supported, input has shape " +
                                         shape_to_string(x_shape));
  Window w;
  w.nd = rank - 2;
  const int nd = w.nd;
  std::vector<std::int64_t> k = kernel;
  if (const Attribute* a = ctx.node().find_attr("kernel_shape")) {
    const std::vector<std::int64_t>& ks = a->ints();
    if (!kernel.empty() && ks != kernel)
      ctx.fail(ErrorCode::InvalidModel, "kernel_shape " + shape_to_string(ks) + " does not match the weights' " +
                                            shape_to_string(kernel));
    k = ks;
  }
  if (k.empty()) ctx.fail(ErrorCode::InvalidModel, "kernel_shape is required");
  if (static_cast<int>(k.size()) != nd)
    ctx.fail(ErrorCode::InvalidModel, "kernel_shape " + shape_to_string(k) + " does not match the input's " +
                                          std::to_string(nd) + " spatial dims");
  const auto strides = spatial_attr(ctx, "strides", nd, 1, 1);
  const auto dilations = spatial_attr(ctx, "dilations", nd, 1, 1);
  const int off = 3 - nd;
  for (int i = 0; i < nd; ++i) {
    if (k[i] < 1 || k[i] > kMaxWindowValue)
      ctx.fail(ErrorCode::InvalidModel, "kernel_shape " + shape_to_string(k) + " has an invalid size");
    w.in[off + i] = x_shape[2 + i];
    w.kernel[off + i] = k[i];
    w.stride[off + i] = strides[i];
    w.dilation[off + i] = dilations[i];
  }
  return w;
}

Window conv_window(const KernelContext& ctx, const Shape& x_shape, const std::vector<std::int64_t>& kernel,
                   bool ceil_mode) {
  Window w = base_window(ctx, x_shape, kernel);
  const int nd = w.nd;
  const int off = 3 - nd;
  const std::string auto_pad = ctx.node().attr_string("auto_pad", "NOTSET");
  std::vector<std::int64_t> pads(2 * nd, 0);
  if (auto_pad == "NOTSET") {
    pads = ctx.node().attr_ints("pads", pads);
    if (static_cast<int>(pads.size()) != 2 * nd)
      ctx.fail(ErrorCode::InvalidModel, "pads has " + std::to_string(pads.size()) + " values, expected " +
                                            std::to_string(2 * nd));
    for (auto p : pads)
      if (p < 0 || p > kMaxWindowValue) ctx.fail(ErrorCode::InvalidModel, "pads must be in [0, 2^31]");
  } else if (auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") {
    ctx.fail(ErrorCode::InvalidModel, "unknown auto_pad '" + auto_pad + "'");
  }
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  for (int i = 0; i < nd; ++i) {
    const int d = off + i;
    const std::int64_t dk = (w.kernel[d] - 1) * w.dilation[d] + 1;
    if (same) {
      // SAME keeps ceil(in / stride) outputs; the odd padding element goes to the end (UPPER)
      // or the beginning (LOWER).
      w.out[d] = (w.in[d] + w.stride[d] - 1) / w.stride[d];
      const std::int64_t total = std::max<std::int64_t>(0, (w.out[d] - 1) * w.stride[d] + dk - w.in[d]);
      w.pad_begin[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.pad_end[d] = total - w.pad_begin[d];
      continue;
    }
    w.pad_begin[d] = pads[i];
    w.pad_end[d] = pads[nd + i];
    const std::int64_t span = w.in[d] + w.pad_begin[d] + w.pad_end[d] - dk;
    if (span < 0)
      ctx.fail(ErrorCode::InvalidArgument, "input " + shape_to_string(x_shape) +
                                               " is smaller than the (dilated) kernel along spatial dim " +
                                               std::to_string(i));
    w.out[d] = (ceil_mode ? (span + w.stride[d] - 1) / w.stride[d] : span / w.stride[d]) + 1;
    // A ceil-mode window must still start inside the input or its leading padding.
    if (ceil_mode && (w.out[d] - 1) * w.stride[d] >= w.in[d] + w.pad_begin[d]) --w.out[d];
  }
  return w;
}

void register_conv_pool(OpTable& t) {
  register_conv(t);
  register_pool(t);
}

}  // namespace wpk::reference
