// Sampling at fractional positions and a small linear-algebra op: GridSample (opset 16, 4-D;
// opset 20's mode names and 5-D input), AffineGrid (opset 20), RoiAlign (opset 10 and 16) and Det (opset 11).
//
// GridSample follows the semantics the ONNX test data was generated with (PyTorch's
// grid_sample): bilinear and nearest apply the padding mode to the sampling coordinate, bicubic
// applies it to each of the 16 tap indices, because a cubic tap outside the image must read a
// border or reflected pixel rather than the clamped centre.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/reference/common.hpp"
#include "backends/reference/misc_internal.hpp"
#include "backends/reference/registry.hpp"

namespace wpk::reference {
namespace {

// Outputs sized by attributes (RoiAlign's output_height/width) must stay allocatable; sizes
// derived from existing inputs are bounded by those inputs already.
constexpr std::int64_t kMaxOutputElements = std::int64_t(1) << 31;

// Output shapes can grow past the inputs' sizes when a zero-length axis hides a huge one (a
// [1, 2^40, 0, 0] input still has 2^40 channels), so each output is checked before allocating.
void require_output_fits(const KernelContext& ctx, const Shape& shape) {
  double total = 1.0;
  for (auto d : shape) total *= static_cast<double>(d);
  if (total > static_cast<double>(std::int64_t(1) << 31))
    ctx.fail(ErrorCode::ResourceExhausted, "output shape " + shape_to_string(shape) + " is too large");
}

// ---- GridSample --------------------------------------------------------------------------

enum class Padding { Zeros, Border, Reflection };

// Mirrors `v` into [low, high] (given doubled, so half-pixel bounds stay integers), folding as
// often as needed for coordinates far outside the image.
double reflect(double v, double twice_low, double twice_high) {
  if (twice_low == twice_high) return 0.0;
  const double lo = twice_low / 2.0;
  const double span = (twice_high - twice_low) / 2.0;
  v = std::fabs(v - lo);
  const double extra = std::fmod(v, span);
  const double flips = std::floor(v / span);
  return std::fmod(flips, 2.0) == 0.0 ? extra + lo : span - extra + lo;
}

struct GridAxis {
  std::int64_t size;
  bool align_corners;
  Padding padding;

  // Grid value in [-1, 1] -> pixel coordinate. With align_corners -1 and 1 are the centres of
  // the corner pixels; without, they are the outer edges of the corner pixels.
  double unnormalize(double g) const {
    const auto n = static_cast<double>(size);
    return align_corners ? (g + 1.0) / 2.0 * (n - 1.0) : ((g + 1.0) * n - 1.0) / 2.0;
  }
  // Applies border/reflection padding to a coordinate; zeros padding leaves it for the read.
  double pad(double v) const {
    const double hi = static_cast<double>(size - 1);
    if (padding == Padding::Border) return std::min(std::max(v, 0.0), hi);
    if (padding == Padding::Reflection) {
      const auto n = static_cast<double>(size);
      v = align_corners ? reflect(v, 0.0, 2.0 * (n - 1.0)) : reflect(v, -1.0, 2.0 * n - 1.0);
      return std::min(std::max(v, 0.0), hi);
    }
    return v;
  }
};

template <typename T>
struct Plane {
  const T* p;
  std::int64_t h, w;
  // Taps outside the image read 0 (zeros padding, or the zero-weight tap past a clamped edge).
  double at(std::int64_t y, std::int64_t x) const {
    if (y < 0 || y >= h || x < 0 || x >= w) return 0.0;
    return static_cast<double>(p[y * w + x]);
  }
};

// Cubic convolution weights with A = -0.75 for the taps at floor(t)-1 .. floor(t)+2.
void cubic_weights(double t, double out[4]) {
  const double a = -0.75;
  auto near = [&](double x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };
  auto far = [&](double x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };
  out[0] = far(t + 1);
  out[1] = near(t);
  out[2] = near(1 - t);
  out[3] = far(2 - t);
}

template <typename T>
void grid_sample_typed(KernelContext& ctx, const Tensor& x, const Tensor& grid, int mode, Padding padding,
                       bool align) {
  const std::int64_t n = x.shape()[0], c = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  const std::int64_t oh = grid.shape()[1], ow = grid.shape()[2];
  Tensor& y = ctx.allocate_output(0, x.dtype(), {n, c, oh, ow});
  const T* px = x.data<T>();
  const T* pg = grid.data<T>();
  T* py = y.data<T>();
  const GridAxis ax{w, align, padding}, ay{h, align, padding};
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t i = 0; i < oh * ow; ++i) {
      const T* g = pg + (b * oh * ow + i) * 2;  // (x, y) per output pixel
      const double gx = static_cast<double>(g[0]), gy = static_cast<double>(g[1]);
      for (std::int64_t ch = 0; ch < c; ++ch) {
        const Plane<T> pl{px + (b * c + ch) * h * w, h, w};
        double v = 0.0;
        if (mode == 2) {  // bicubic: pad each tap index, not the centre
          const double fx = ax.unnormalize(gx), fy = ay.unnormalize(gy);
          const double x0 = std::floor(fx), y0 = std::floor(fy);
          double wx[4], wy[4];
          cubic_weights(fx - x0, wx);
          cubic_weights(fy - y0, wy);
          for (int r = 0; r < 4; ++r)
            for (int s = 0; s < 4; ++s) {
              const double ty = ay.pad(y0 - 1 + r), tx = ax.pad(x0 - 1 + s);
              // A NaN or huge coordinate becomes an out-of-range tap instead of an overflowing cast.
              if (!(std::fabs(ty) < 1e15 && std::fabs(tx) < 1e15)) continue;
              v += wy[r] * wx[s] * pl.at(static_cast<std::int64_t>(ty), static_cast<std::int64_t>(tx));
            }
        } else {
          const double fx = ax.pad(ax.unnormalize(gx)), fy = ay.pad(ay.unnormalize(gy));
          if (!(std::fabs(fx) < 1e15 && std::fabs(fy) < 1e15)) {
            v = 0.0;
          } else if (mode == 1) {  // nearest: round half to even, as the test data does
            v = pl.at(static_cast<std::int64_t>(std::nearbyint(fy)), static_cast<std::int64_t>(std::nearbyint(fx)));
          } else {
            const double x0 = std::floor(fx), y0 = std::floor(fy);
            const double lx = fx - x0, ly = fy - y0;
            const auto xi = static_cast<std::int64_t>(x0), yi = static_cast<std::int64_t>(y0);
            v = (1 - ly) * ((1 - lx) * pl.at(yi, xi) + lx * pl.at(yi, xi + 1)) +
                ly * ((1 - lx) * pl.at(yi + 1, xi) + lx * pl.at(yi + 1, xi + 1));
          }
        }
        py[((b * c + ch) * oh * ow) + i] = static_cast<T>(v);
      }
    }
}

// Opset 20's volumetric form: x [N, C, D, H, W], grid [N, oD, oH, oW, 3] holding (x, y, z);
// nearest or trilinear (taps outside the volume read 0 after the padding mode).
template <typename T>
void grid_sample_3d_typed(KernelContext& ctx, const Tensor& x, const Tensor& grid, int mode, Padding padding,
                          bool align) {
  const std::int64_t n = x.shape()[0], c = x.shape()[1], d = x.shape()[2], h = x.shape()[3], w = x.shape()[4];
  const std::int64_t od = grid.shape()[1], oh = grid.shape()[2], ow = grid.shape()[3];
  Tensor& y = ctx.allocate_output(0, x.dtype(), {n, c, od, oh, ow});
  const T* px = x.data<T>();
  const T* pg = grid.data<T>();
  T* py = y.data<T>();
  const GridAxis ax{w, align, padding}, ay{h, align, padding}, az{d, align, padding};
  const std::int64_t out = od * oh * ow;
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t i = 0; i < out; ++i) {
      const T* g = pg + (b * out + i) * 3;
      const double fx = ax.pad(ax.unnormalize(static_cast<double>(g[0])));
      const double fy = ay.pad(ay.unnormalize(static_cast<double>(g[1])));
      const double fz = az.pad(az.unnormalize(static_cast<double>(g[2])));
      for (std::int64_t ch = 0; ch < c; ++ch) {
        const T* vol = px + (b * c + ch) * d * h * w;
        auto at = [&](std::int64_t z, std::int64_t yy, std::int64_t xx) {
          if (z < 0 || z >= d || yy < 0 || yy >= h || xx < 0 || xx >= w) return 0.0;
          return static_cast<double>(vol[(z * h + yy) * w + xx]);
        };
        double v = 0.0;
        if (!(std::fabs(fx) < 1e15 && std::fabs(fy) < 1e15 && std::fabs(fz) < 1e15)) {
          v = 0.0;
        } else if (mode == 1) {
          v = at(static_cast<std::int64_t>(std::nearbyint(fz)), static_cast<std::int64_t>(std::nearbyint(fy)),
                 static_cast<std::int64_t>(std::nearbyint(fx)));
        } else {
          const double x0 = std::floor(fx), y0 = std::floor(fy), z0 = std::floor(fz);
          const double lx = fx - x0, ly = fy - y0, lz = fz - z0;
          for (int k = 0; k < 8; ++k) {
            const int dz = k >> 2, dy = (k >> 1) & 1, dx = k & 1;
            const double weight = (dz ? lz : 1 - lz) * (dy ? ly : 1 - ly) * (dx ? lx : 1 - lx);
            v += weight * at(static_cast<std::int64_t>(z0) + dz, static_cast<std::int64_t>(y0) + dy, static_cast<std::int64_t>(x0) + dx);
          }
        }
        py[(b * c + ch) * out + i] = static_cast<T>(v);
      }
    }
}

void grid_sample(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& grid = ctx.input(1);
  if (x.rank() == 5 && ctx.opset() >= 20) {
    if (grid.rank() != 5 || grid.shape()[0] != x.shape()[0] || grid.shape()[4] != 3)
      ctx.fail(ErrorCode::InvalidArgument, "grid must be [N, D_out, H_out, W_out, 3] with N = " + std::to_string(x.shape()[0]) +
                                               ", got " + shape_to_string(grid.shape()));
    if (grid.dtype() != x.dtype()) ctx.fail(ErrorCode::Unsupported, "grid and input must have the same dtype");
    const std::string mode_s = ctx.node().attr_string("mode", "linear");
    if (mode_s != "linear" && mode_s != "nearest")
      ctx.fail(ErrorCode::Unsupported, "mode '" + mode_s + "' is not supported for volumetric input (linear and nearest are)");
    const std::string pad_s = ctx.node().attr_string("padding_mode", "zeros");
    const Padding padding = pad_s == "border" ? Padding::Border : pad_s == "reflection" ? Padding::Reflection : Padding::Zeros;
    if (pad_s != "zeros" && pad_s != "border" && pad_s != "reflection")
      ctx.fail(ErrorCode::InvalidModel, "unknown padding_mode '" + pad_s + "'");
    require_output_fits(ctx, {x.shape()[0], x.shape()[1], grid.shape()[1], grid.shape()[2], grid.shape()[3]});
    dispatch_float(x.dtype(), ctx, [&](auto tag) {
      grid_sample_3d_typed<typename decltype(tag)::type>(ctx, x, grid, mode_s == "nearest" ? 1 : 0, padding,
                                                          ctx.node().attr_int("align_corners", 0) != 0);
    });
    return;
  }
  if (x.rank() != 4)
    ctx.fail(ErrorCode::Unsupported, "only 4-D (and from opset 20 5-D) input is supported, got shape " + shape_to_string(x.shape()));
  if (grid.rank() != 4 || grid.shape()[0] != x.shape()[0] || grid.shape()[3] != 2)
    ctx.fail(ErrorCode::InvalidArgument, "grid must be [N, H_out, W_out, 2] with N = " +
                                             std::to_string(x.shape()[0]) + ", got " + shape_to_string(grid.shape()));
  if (grid.dtype() != x.dtype())
    ctx.fail(ErrorCode::Unsupported, "grid and input must have the same dtype");
  // Opset 20 renamed bilinear and bicubic to linear and cubic (for any rank).
  const bool renamed = ctx.opset() >= 20;
  const std::string mode_s = ctx.node().attr_string("mode", renamed ? "linear" : "bilinear");
  int mode;
  if (mode_s == (renamed ? "linear" : "bilinear")) mode = 0;
  else if (mode_s == "nearest") mode = 1;
  else if (mode_s == (renamed ? "cubic" : "bicubic")) mode = 2;
  else ctx.fail(ErrorCode::InvalidModel, "unknown mode '" + mode_s + "'");
  const std::string pad_s = ctx.node().attr_string("padding_mode", "zeros");
  Padding padding;
  if (pad_s == "zeros") padding = Padding::Zeros;
  else if (pad_s == "border") padding = Padding::Border;
  else if (pad_s == "reflection") padding = Padding::Reflection;
  else ctx.fail(ErrorCode::InvalidModel, "unknown padding_mode '" + pad_s + "'");
  const bool align = ctx.node().attr_int("align_corners", 0) != 0;
  require_output_fits(ctx, {x.shape()[0], x.shape()[1], grid.shape()[1], grid.shape()[2]});
  dispatch_float(x.dtype(), ctx, [&](auto tag) {
    grid_sample_typed<typename decltype(tag)::type>(ctx, x, grid, mode, padding, align);
  });
}

// ---- RoiAlign ----------------------------------------------------------------------------

// theta [N, 2, 3] (or [N, 3, 4]) applied to the normalised coordinates of every output pixel
// (x along W, y along H, z along D; pixel centres in [-1, 1], or the corners at -1 and 1 with
// align_corners): the grid GridSample reads, [N, H, W, 2] (or [N, D, H, W, 3]).
void affine_grid(KernelContext& ctx) {
  const Tensor& theta = ctx.input(0);
  const std::vector<std::int64_t> size = read_int_list(ctx.input(1), ctx);
  if (size.size() != 4 && size.size() != 5)
    ctx.fail(ErrorCode::InvalidArgument, "size must be [N, C, H, W] or [N, C, D, H, W], got " + shape_to_string(size));
  const int spatial = static_cast<int>(size.size()) - 2;
  const std::int64_t n = size[0];
  if (theta.rank() != 3 || theta.shape()[0] != n || theta.shape()[1] != spatial || theta.shape()[2] != spatial + 1)
    ctx.fail(ErrorCode::InvalidArgument, "theta must be [" + std::to_string(n) + ", " + std::to_string(spatial) + ", " +
                                             std::to_string(spatial + 1) + "], got " + shape_to_string(theta.shape()));
  for (std::int64_t d : size)
    if (d < 0) ctx.fail(ErrorCode::InvalidArgument, "size has a negative entry " + std::to_string(d));
  const bool align = ctx.node().attr_int("align_corners", 0) != 0;
  Shape out_shape = {n};
  for (int d = 0; d < spatial; ++d) out_shape.push_back(size[2 + d]);
  out_shape.push_back(spatial);
  require_output_fits(ctx, out_shape);
  // coords[d][i]: the normalised coordinate of index i along spatial axis d (D, H, W order).
  std::vector<std::vector<double>> coords(static_cast<std::size_t>(spatial));
  for (int d = 0; d < spatial; ++d) {
    const std::int64_t len = size[2 + d];
    for (std::int64_t i = 0; i < len; ++i) {
      const double l = static_cast<double>(len), v = static_cast<double>(i);
      coords[d].push_back(align ? (len == 1 ? -1.0 : -1.0 + 2.0 * v / (l - 1)) : (2.0 * v + 1.0) / l - 1.0);
    }
  }
  dispatch_float(theta.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    Tensor& y = ctx.allocate_output(0, theta.dtype(), out_shape);
    const T* pt = theta.data<T>();
    T* py = y.data<T>();
    const std::int64_t d_len = spatial == 3 ? size[2] : 1, h_len = size[spatial], w_len = size[spatial + 1];
    for (std::int64_t b = 0; b < n; ++b) {
      const T* m = pt + b * spatial * (spatial + 1);
      for (std::int64_t z = 0; z < d_len; ++z)
        for (std::int64_t yy = 0; yy < h_len; ++yy)
          for (std::int64_t x = 0; x < w_len; ++x) {
            // Homogeneous point (x, y[, z], 1), its coordinates in the output's order.
            double p[4] = {coords[spatial - 1][x], coords[spatial - 2][yy], spatial == 3 ? coords[0][z] : 1.0, 1.0};
            for (int r = 0; r < spatial; ++r) {
              double acc = 0;
              for (int c = 0; c <= spatial; ++c) acc += static_cast<double>(m[r * (spatial + 1) + c]) * p[c];
              *py++ = static_cast<T>(acc);
            }
          }
    }
  });
}

// Bilinear read used by RoiAlign (the detection-model convention, not GridSample's): samples
// more than one pixel outside the image contribute nothing, the rest are clamped to the edge.
template <typename T>
void roi_taps(const T* plane, std::int64_t h, std::int64_t w, double y, double x, double vals[4]) {
  vals[0] = vals[1] = vals[2] = vals[3] = 0.0;
  if (!(y >= -1.0 && y <= static_cast<double>(h) && x >= -1.0 && x <= static_cast<double>(w))) return;
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  auto y0 = static_cast<std::int64_t>(y), x0 = static_cast<std::int64_t>(x);
  std::int64_t y1 = y0 + 1, x1 = x0 + 1;
  if (y0 >= h - 1) { y0 = y1 = h - 1; y = static_cast<double>(y0); }
  if (x0 >= w - 1) { x0 = x1 = w - 1; x = static_cast<double>(x0); }
  const double ly = y - static_cast<double>(y0), lx = x - static_cast<double>(x0);
  vals[0] = (1 - ly) * (1 - lx) * static_cast<double>(plane[y0 * w + x0]);
  vals[1] = (1 - ly) * lx * static_cast<double>(plane[y0 * w + x1]);
  vals[2] = ly * (1 - lx) * static_cast<double>(plane[y1 * w + x0]);
  vals[3] = ly * lx * static_cast<double>(plane[y1 * w + x1]);
}

template <typename T>
void roi_align_typed(KernelContext& ctx, const Tensor& x, const Tensor& rois, const std::vector<std::int64_t>& batch,
                     std::int64_t oh, std::int64_t ow) {
  const Node& node = ctx.node();
  const std::string mode = node.attr_string("mode", "avg");
  if (mode != "avg" && mode != "max") ctx.fail(ErrorCode::InvalidModel, "unknown mode '" + mode + "'");
  const std::int64_t ratio = node.attr_int("sampling_ratio", 0);
  if (ratio < 0 || ratio > 1024)
    ctx.fail(ErrorCode::InvalidModel, "sampling_ratio must be in [0, 1024], got " + std::to_string(ratio));
  const double scale = node.attr_float("spatial_scale", 1.0f);
  // Opset 10 had no attribute and behaved as output_half_pixel; 16 made half_pixel the default.
  const std::string ctm =
      node.attr_string("coordinate_transformation_mode", ctx.opset() >= 16 ? "half_pixel" : "output_half_pixel");
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    ctx.fail(ErrorCode::InvalidModel, "unknown coordinate_transformation_mode '" + ctm + "'");
  const bool half = ctm == "half_pixel";
  const std::int64_t n = x.shape()[0], c = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  const std::int64_t nr = rois.shape()[0];
  Tensor& y = ctx.allocate_output(0, x.dtype(), {nr, c, oh, ow});
  const T* pr = rois.data<T>();
  T* py = y.data<T>();
  for (std::int64_t r = 0; r < nr; ++r) {
    const std::int64_t b = batch[static_cast<std::size_t>(r)];
    if (b < 0 || b >= n)
      ctx.fail(ErrorCode::InvalidArgument, "batch index " + std::to_string(b) + " is outside [0, " +
                                               std::to_string(n) + ")");
    const double off = half ? 0.5 : 0.0;
    const double x1 = static_cast<double>(pr[r * 4]) * scale - off, y1 = static_cast<double>(pr[r * 4 + 1]) * scale - off;
    const double x2 = static_cast<double>(pr[r * 4 + 2]) * scale - off, y2 = static_cast<double>(pr[r * 4 + 3]) * scale - off;
    double rw = x2 - x1, rh = y2 - y1;
    // The legacy mode forces at least a 1x1 region so malformed boxes still sample something.
    if (!half) { rw = std::max(rw, 1.0); rh = std::max(rh, 1.0); }
    if (!std::isfinite(rw) || !std::isfinite(rh) || !std::isfinite(x1) || !std::isfinite(y1))
      ctx.fail(ErrorCode::InvalidArgument, "roi " + std::to_string(r) + " is not finite");
    const double bh = rh / static_cast<double>(oh), bw = rw / static_cast<double>(ow);
    // Adaptive sampling takes about one sample per input pixel; the cap keeps a huge box from
    // turning into an unbounded loop.
    auto grid_n = [&](double bin) {
      if (ratio > 0) return ratio;
      return static_cast<std::int64_t>(std::min(std::ceil(std::max(bin, 0.0)), 1024.0));
    };
    const std::int64_t gh = grid_n(bh), gw = grid_n(bw);
    const double count = static_cast<double>(std::max<std::int64_t>(gh * gw, 1));
    for (std::int64_t ch = 0; ch < c; ++ch) {
      const T* plane = x.data<T>() + (b * c + ch) * h * w;
      for (std::int64_t ph = 0; ph < oh; ++ph)
        for (std::int64_t pw = 0; pw < ow; ++pw) {
          double acc = 0.0;
          bool first = true;
          for (std::int64_t iy = 0; iy < gh; ++iy) {
            const double sy = y1 + static_cast<double>(ph) * bh + (static_cast<double>(iy) + 0.5) * bh / static_cast<double>(gh);
            for (std::int64_t ix = 0; ix < gw; ++ix) {
              const double sx = x1 + static_cast<double>(pw) * bw + (static_cast<double>(ix) + 0.5) * bw / static_cast<double>(gw);
              double v[4];
              roi_taps(plane, h, w, sy, sx, v);
              if (mode == "avg") {
                acc += v[0] + v[1] + v[2] + v[3];
              } else {
                // Max mode takes the largest weighted tap, as the reference implementations do.
                const double m = std::max(std::max(v[0], v[1]), std::max(v[2], v[3]));
                acc = first ? m : std::max(acc, m);
                first = false;
              }
            }
          }
          py[((r * c + ch) * oh + ph) * ow + pw] = static_cast<T>(mode == "avg" ? acc / count : acc);
        }
    }
  }
}

void roi_align(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& rois = ctx.input(1);
  const Tensor& bi = ctx.input(2);
  if (x.rank() != 4) ctx.fail(ErrorCode::InvalidArgument, "X must be 4-D, got " + shape_to_string(x.shape()));
  if (rois.rank() != 2 || rois.shape()[1] != 4)
    ctx.fail(ErrorCode::InvalidArgument, "rois must be [num_rois, 4], got " + shape_to_string(rois.shape()));
  if (rois.dtype() != x.dtype()) ctx.fail(ErrorCode::InvalidArgument, "rois must have the same dtype as X");
  if (bi.rank() != 1 || bi.shape()[0] != rois.shape()[0])
    ctx.fail(ErrorCode::InvalidArgument, "batch_indices must be [num_rois], got " + shape_to_string(bi.shape()));
  const std::vector<std::int64_t> batch = read_int_list(bi, ctx);
  const std::int64_t oh = ctx.node().attr_int("output_height", 1), ow = ctx.node().attr_int("output_width", 1);
  if (oh < 1 || ow < 1 || oh > kMaxOutputElements || ow > kMaxOutputElements)
    ctx.fail(ErrorCode::InvalidModel, "output_height and output_width must be positive and not huge");
  const double total = static_cast<double>(rois.shape()[0]) * static_cast<double>(x.shape()[1]) *
                       static_cast<double>(oh) * static_cast<double>(ow);
  if (total > static_cast<double>(kMaxOutputElements))
    ctx.fail(ErrorCode::InvalidArgument, "output of " + std::to_string(total) + " elements is too large");
  dispatch_float(x.dtype(), ctx, [&](auto tag) {
    roi_align_typed<typename decltype(tag)::type>(ctx, x, rois, batch, oh, ow);
  });
}

// ---- Det ---------------------------------------------------------------------------------

// LU decomposition with partial pivoting: the determinant is the product of the pivots, negated
// once per row swap. Pivoting on the largest magnitude keeps the elimination stable.
template <typename T>
void det_typed(const Tensor& x, Tensor& y, std::int64_t m) {
  const std::int64_t batches = m == 0 ? y.numel() : x.numel() / (m * m);
  std::vector<double> a(static_cast<std::size_t>(m * m));
  const T* px = x.data<T>();
  T* py = y.data<T>();
  for (std::int64_t b = 0; b < batches; ++b) {
    for (std::int64_t i = 0; i < m * m; ++i) a[static_cast<std::size_t>(i)] = static_cast<double>(px[b * m * m + i]);
    double det = 1.0;
    for (std::int64_t k = 0; k < m && det != 0.0; ++k) {
      std::int64_t piv = k;
      for (std::int64_t i = k + 1; i < m; ++i)
        if (std::fabs(a[i * m + k]) > std::fabs(a[piv * m + k])) piv = i;
      if (a[piv * m + k] == 0.0) { det = 0.0; break; }  // singular
      if (piv != k) {
        for (std::int64_t j = 0; j < m; ++j) std::swap(a[k * m + j], a[piv * m + j]);
        det = -det;
      }
      det *= a[k * m + k];
      for (std::int64_t i = k + 1; i < m; ++i) {
        const double f = a[i * m + k] / a[k * m + k];
        for (std::int64_t j = k + 1; j < m; ++j) a[i * m + j] -= f * a[k * m + j];
      }
    }
    py[b] = static_cast<T>(det);
  }
}

void det(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int r = x.rank();
  if (r < 2 || x.shape()[r - 1] != x.shape()[r - 2])
    ctx.fail(ErrorCode::InvalidArgument, "input must be [..., M, M], got " + shape_to_string(x.shape()));
  const std::int64_t m = x.shape()[r - 1];
  const Shape out_shape(x.shape().begin(), x.shape().end() - 2);
  require_output_fits(ctx, out_shape);
  dispatch_float(x.dtype(), ctx, [&](auto tag) {
    Tensor& y = ctx.allocate_output(0, x.dtype(), out_shape);
    det_typed<typename decltype(tag)::type>(x, y, m);
  });
}

}  // namespace

void register_sampling(OpTable& t) {
  t.add("GridSample", {grid_sample, 2, 2, 16});
  t.add("AffineGrid", {affine_grid, 2, 2, 20});
  t.add("RoiAlign", {roi_align, 3, 3, 10});
  t.add("Det", {det, 1, 1, 11});
}

}  // namespace wpk::reference
