// DeformConv (opset 19), 2-D: a convolution whose every kernel tap reads the input at its
// regular position moved by a learned offset (per output position, tap and offset group),
// sampled bilinearly with zeros outside the image, and optionally scaled by a mask.
#include <algorithm>
#include <cmath>

#include "backends/reference/common.hpp"
#include "backends/reference/conv_pool.hpp"
#include "backends/reference/float_buffers.hpp"

namespace wpk::reference {
namespace {

// x[h, w] of one channel plane, bilinearly, each corner outside the plane counting as 0.
double sample(const double* plane, std::int64_t height, std::int64_t width, double h, double w) {
  const double h0 = std::floor(h), w0 = std::floor(w);
  const double dh = h - h0, dw = w - w0;
  double v = 0;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      const double y = h0 + i, x = w0 + j;
      if (y < 0 || y >= static_cast<double>(height) || x < 0 || x >= static_cast<double>(width)) continue;
      const double weight = (i ? dh : 1 - dh) * (j ? dw : 1 - dw);
      v += weight * plane[static_cast<std::int64_t>(y) * width + static_cast<std::int64_t>(x)];
    }
  return v;
}

void deform_conv(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor& offset = ctx.input(2);
  if (x.rank() != 4 || w.rank() != 4)
    ctx.fail(ErrorCode::Unsupported, "only 2-D DeformConv is supported, got input " + shape_to_string(x.shape()));
  const std::int64_t n = x.dim(0), c = x.dim(1), height = x.dim(2), width = x.dim(3);
  const std::int64_t oc = w.dim(0), kh = w.dim(2), kw = w.dim(3);
  const std::int64_t group = ctx.node().attr_int("group", 1), offset_group = ctx.node().attr_int("offset_group", 1);
  if (group < 1 || c % group != 0 || oc % group != 0 || w.dim(1) != c / group)
    ctx.fail(ErrorCode::InvalidArgument, "weights " + shape_to_string(w.shape()) + " do not fit " + std::to_string(c) +
                                             " input channels in " + std::to_string(group) + " groups");
  if (offset_group < 1 || c % offset_group != 0)
    ctx.fail(ErrorCode::InvalidArgument, "offset_group " + std::to_string(offset_group) + " does not divide the channels");
  const Window win = conv_window(ctx, x.shape(), {kh, kw}, false);
  const std::int64_t oh = win.out[1], ow = win.out[2];
  const Shape want_offset = {n, offset_group * kh * kw * 2, oh, ow};
  if (offset.shape() != want_offset)
    ctx.fail(ErrorCode::InvalidArgument, "offset must be " + shape_to_string(want_offset) + ", got " + shape_to_string(offset.shape()));
  const bool has_bias = ctx.has_input(3), has_mask = ctx.has_input(4);
  if (has_bias && ctx.input(3).numel() != oc) ctx.fail(ErrorCode::InvalidArgument, "B must have one value per output channel");
  const Shape want_mask = {n, offset_group * kh * kw, oh, ow};
  if (has_mask && ctx.input(4).shape() != want_mask)
    ctx.fail(ErrorCode::InvalidArgument, "mask must be " + shape_to_string(want_mask) + ", got " + shape_to_string(ctx.input(4).shape()));
  // Like the other reference loops, bounded: a hostile shape must not keep a run busy for hours.
  if (static_cast<double>(n * oc) * static_cast<double>(oh * ow) * static_cast<double>(w.numel() / std::max<std::int64_t>(oc, 1)) >
      static_cast<double>(std::int64_t(1) << 34))
    ctx.fail(ErrorCode::ResourceExhausted, "the convolution exceeds the reference backend's work limit");
  const std::vector<double> xv = to_double_buffer(x, ctx), wv = to_double_buffer(w, ctx), ov = to_double_buffer(offset, ctx);
  const std::vector<double> bv = has_bias ? to_double_buffer(ctx.input(3), ctx) : std::vector<double>();
  const std::vector<double> mv = has_mask ? to_double_buffer(ctx.input(4), ctx) : std::vector<double>();
  Tensor& y = ctx.allocate_output(0, x.dtype(), {n, oc, oh, ow});
  std::vector<double> yv(static_cast<std::size_t>(y.numel()), 0.0);
  const std::int64_t cg = c / group, og_channels = c / offset_group, ocg = oc / group;
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t o = 0; o < oc; ++o)
      for (std::int64_t i = 0; i < oh; ++i)
        for (std::int64_t j = 0; j < ow; ++j) {
          double acc = has_bias ? bv[o] : 0.0;
          const std::int64_t g = o / ocg;
          for (std::int64_t ci = 0; ci < cg; ++ci) {
            const std::int64_t ch = g * cg + ci, og = ch / og_channels;
            const double* plane = xv.data() + (b * c + ch) * height * width;
            for (std::int64_t p = 0; p < kh; ++p)
              for (std::int64_t q = 0; q < kw; ++q) {
                const std::int64_t tap = (og * kh + p) * kw + q;
                const double dy = ov[static_cast<std::size_t>(((b * offset_group * kh * kw * 2 + tap * 2) * oh + i) * ow + j)];
                const double dx = ov[static_cast<std::size_t>(((b * offset_group * kh * kw * 2 + tap * 2 + 1) * oh + i) * ow + j)];
                const double hy = static_cast<double>(i * win.stride[1] - win.pad_begin[1] + p * win.dilation[1]) + dy;
                const double wx = static_cast<double>(j * win.stride[2] - win.pad_begin[2] + q * win.dilation[2]) + dx;
                double v = sample(plane, height, width, hy, wx) * wv[static_cast<std::size_t>(((o * cg + ci) * kh + p) * kw + q)];
                if (has_mask) v *= mv[static_cast<std::size_t>(((b * offset_group * kh * kw + tap) * oh + i) * ow + j)];
                acc += v;
              }
          }
          yv[static_cast<std::size_t>(((b * oc + o) * oh + i) * ow + j)] = acc;
        }
  store_doubles(yv, y, ctx);
}

}  // namespace

void register_deform_conv(OpTable& t) { t.add("DeformConv", {deform_conv, 3, 5, 19}); }

}  // namespace wpk::reference
