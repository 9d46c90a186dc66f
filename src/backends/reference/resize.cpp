// Resize (opset 10, 11-17, 18-19: axes, antialias, keep_aspect_ratio_policy, half_pixel_symmetric)
// and the deprecated Upsample (opset 7-9).
//
// Every mode is separable: each axis maps an output coordinate to a few input taps with weights,
// so the N-d resize is one 1-d pass per axis that changes size. Passes run from the innermost
// axis outwards, the order in which the ONNX reference implementation nests its interpolation,
// so results agree to the last bits. Coordinate arithmetic is in double, as in that reference.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "backends/reference/common.hpp"
#include "backends/reference/data_movement.hpp"
#include "backends/reference/misc_internal.hpp"
#include "backends/reference/registry.hpp"

namespace wpk::reference {
namespace {

enum class Mode { Nearest, Linear, Cubic };
enum class Coord {
  HalfPixel,
  HalfPixelSymmetric,
  PytorchHalfPixel,
  AlignCorners,
  Asymmetric,
  TfHalfPixelForNn,
  TfCropAndResize
};
// Simple: opset < 11, which fixed no rounding rule; like onnxruntime it truncates when
// upsampling and rounds up when downsampling.
enum class Nearest { RoundPreferFloor, RoundPreferCeil, Floor, Ceil, Simple };

struct Options {
  Mode mode = Mode::Nearest;
  Coord coord = Coord::HalfPixel;
  Nearest nearest = Nearest::RoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  // Linear and cubic filters stretched by 1/scale when downsampling, so every input sample
  // contributes (opset 18).
  bool antialias = false;
  double extrapolation = 0.0;
};

// One axis: for each output coordinate, `taps` (index, weight) pairs, or `outside` when
// tf_crop_and_resize samples beyond the input and the extrapolation value is used instead.
struct AxisPlan {
  std::int64_t in = 0, out = 0;
  int taps = 1;
  std::vector<std::int64_t> index;  // out * taps
  std::vector<double> weight;       // out * taps
  std::vector<char> outside;        // out
  bool identity = false;
};

Mode parse_mode(const KernelContext& ctx) {
  const std::string m = ctx.node().attr_string("mode", "nearest");
  if (m == "nearest") return Mode::Nearest;
  if (m == "linear" || m == "bilinear") return Mode::Linear;  // "bilinear": Upsample-1 spelling
  if (m == "cubic" && ctx.node().op_type == "Resize") return Mode::Cubic;
  ctx.fail(ErrorCode::InvalidModel, "unknown mode '" + m + "'");
}

Options parse_options(const KernelContext& ctx, bool legacy) {
  Options o;
  o.mode = parse_mode(ctx);
  if (legacy) {  // Upsample and Resize-10 have only the mode attribute
    o.coord = Coord::Asymmetric;
    o.nearest = Nearest::Simple;
    return o;
  }
  const Node& n = ctx.node();
  const std::string c = n.attr_string("coordinate_transformation_mode", "half_pixel");
  if (c == "half_pixel") o.coord = Coord::HalfPixel;
  else if (c == "half_pixel_symmetric" && ctx.opset() >= 19) o.coord = Coord::HalfPixelSymmetric;
  else if (c == "pytorch_half_pixel") o.coord = Coord::PytorchHalfPixel;
  else if (c == "align_corners") o.coord = Coord::AlignCorners;
  else if (c == "asymmetric") o.coord = Coord::Asymmetric;
  else if (c == "tf_half_pixel_for_nn") o.coord = Coord::TfHalfPixelForNn;
  else if (c == "tf_crop_and_resize") o.coord = Coord::TfCropAndResize;
  else ctx.fail(ErrorCode::InvalidModel, "unknown coordinate_transformation_mode '" + c + "'");
  const std::string nm = n.attr_string("nearest_mode", "round_prefer_floor");
  if (nm == "round_prefer_floor") o.nearest = Nearest::RoundPreferFloor;
  else if (nm == "round_prefer_ceil") o.nearest = Nearest::RoundPreferCeil;
  else if (nm == "floor") o.nearest = Nearest::Floor;
  else if (nm == "ceil") o.nearest = Nearest::Ceil;
  else ctx.fail(ErrorCode::InvalidModel, "unknown nearest_mode '" + nm + "'");
  o.cubic_a = n.attr_float("cubic_coeff_a", -0.75f);
  o.exclude_outside = n.attr_int("exclude_outside", 0) != 0;
  o.extrapolation = n.attr_float("extrapolation_value", 0.0f);
  o.antialias = ctx.opset() >= 18 && n.attr_int("antialias", 0) != 0;
  return o;
}

// Keys' cubic convolution weights for the taps at floor(x)-1 .. floor(x)+2, r = x - floor(x).
void cubic_weights(double r, double a, double* w) {
  const double s = 1 - r;
  w[0] = ((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a;
  w[1] = ((a + 2) * r - (a + 3)) * r * r + 1;
  w[2] = ((a + 2) * s - (a + 3)) * s * s + 1;
  w[3] = ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a;
}

// Keys' cubic kernel at distance d (the weights above are its values at the four taps).
double cubic_kernel(double d, double a) {
  d = std::abs(d);
  if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0;
}

// The filter's reach in input samples: 1 (linear) or 2 (cubic), stretched by 1/scale when an
// antialiased resize shrinks the axis.
double filter_scale(const Options& o, double scale) { return o.antialias ? std::min(scale, 1.0) : 1.0; }
int tap_count(const Options& o, double scale) {
  if (o.mode == Mode::Nearest) return 1;
  if (!o.antialias) return o.mode == Mode::Linear ? 2 : 4;
  const double reach = o.mode == Mode::Linear ? 1.0 : 2.0;
  const int first = static_cast<int>(std::floor(-reach / filter_scale(o, scale))) + 1;
  return 2 - 2 * first;
}

// `scale` is the scale the model gave (or out/in when it gave sizes); `resized_len` is
// scale * in, which the reference uses in place of the integer output length.
AxisPlan plan_axis(std::int64_t in, std::int64_t out, double scale, double roi_start, double roi_end,
                   const Options& o) {
  AxisPlan p;
  p.in = in;
  p.out = out;
  p.taps = tap_count(o, scale);
  p.index.assign(static_cast<std::size_t>(out * p.taps), 0);
  p.weight.assign(static_cast<std::size_t>(out * p.taps), 0.0);
  p.outside.assign(static_cast<std::size_t>(out), 0);
  const double in_len = static_cast<double>(in);
  const double resized_len = scale * in_len;
  for (std::int64_t xo = 0; xo < out; ++xo) {
    const double x = static_cast<double>(xo);
    double xi = 0;
    switch (o.coord) {
      case Coord::HalfPixel: xi = (x + 0.5) / scale - 0.5; break;
      case Coord::HalfPixelSymmetric: {
        // Centres the sampled window on the input when the integer output length is not
        // scale * in.
        const double offset = in_len / 2 * (1 - static_cast<double>(out) / resized_len);
        xi = offset + (x + 0.5) / scale - 0.5;
        break;
      }
      case Coord::PytorchHalfPixel: xi = resized_len > 1 ? (x + 0.5) / scale - 0.5 : 0; break;
      case Coord::AlignCorners: xi = resized_len == 1 ? 0 : x * (in_len - 1) / (resized_len - 1); break;
      case Coord::Asymmetric: xi = x / scale; break;
      case Coord::TfHalfPixelForNn: xi = (x + 0.5) / scale; break;
      case Coord::TfCropAndResize:
        xi = resized_len == 1 ? (roi_end - roi_start) * (in_len - 1) / 2
                              : x * (roi_end - roi_start) * (in_len - 1) / (resized_len - 1);
        xi += roi_start * (in_len - 1);
        if (xi < 0 || xi > in_len - 1) {
          p.outside[xo] = 1;
          continue;
        }
        break;
    }
    std::int64_t* idx = &p.index[xo * p.taps];
    double* w = &p.weight[xo * p.taps];
    const double fl = std::floor(xi);
    const double r = xi - fl;
    const auto base = static_cast<std::int64_t>(fl);
    if (o.mode == Mode::Nearest) {
      bool up = false;  // take floor(x) + 1 instead of floor(x)
      if (r != 0) {
        switch (o.nearest) {
          case Nearest::RoundPreferFloor: up = r > 0.5; break;
          case Nearest::RoundPreferCeil: up = r >= 0.5; break;
          case Nearest::Floor: up = false; break;
          case Nearest::Ceil: up = true; break;
          case Nearest::Simple: up = scale < 1; break;
        }
      }
      idx[0] = base + (up ? 1 : 0);
      w[0] = 1;
    } else if (o.antialias) {
      // Taps around xi, the nearer one below it first when xi is a whole number, weighted by
      // the stretched filter and normalised to sum to one.
      const std::int64_t below = r == 0 ? base - 1 : base;
      const double ratio = xi - static_cast<double>(below);
      const double fs = filter_scale(o, scale);
      const int first = 1 - p.taps / 2;
      double sum = 0;
      for (int t = 0; t < p.taps; ++t) {
        const double d = (first + t - ratio) * fs;
        idx[t] = below + first + t;
        w[t] = o.mode == Mode::Linear ? std::max(0.0, 1 - std::abs(d)) : cubic_kernel(d, o.cubic_a);
        sum += w[t];
      }
      for (int t = 0; t < p.taps; ++t) w[t] /= sum;
    } else if (o.mode == Mode::Linear) {
      idx[0] = base;
      idx[1] = base + 1;
      w[0] = 1 - r;
      w[1] = r;
    } else {
      for (int t = 0; t < 4; ++t) idx[t] = base - 1 + t;
      cubic_weights(r, o.cubic_a, w);
    }
    if (o.exclude_outside && p.taps > 1) {
      double sum = 0;
      for (int t = 0; t < p.taps; ++t) {
        if (idx[t] < 0 || idx[t] >= in) w[t] = 0;
        sum += w[t];
      }
      if (sum != 0)
        for (int t = 0; t < p.taps; ++t) w[t] /= sum;
    }
    // Taps beyond the edge repeat the edge sample (edge padding).
    for (int t = 0; t < p.taps; ++t) idx[t] = std::min(std::max<std::int64_t>(idx[t], 0), in - 1);
  }
  p.identity = in == out;
  for (std::int64_t xo = 0; xo < out && p.identity; ++xo) {
    double on_self = 0;
    for (int t = 0; t < p.taps; ++t) {
      const double w = p.weight[xo * p.taps + t];
      if (p.index[xo * p.taps + t] == xo) on_self += w;
      else if (w != 0) p.identity = false;
    }
    if (p.outside[xo] || on_self != 1) p.identity = false;
  }
  return p;
}

template <typename T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, Float16Bits>) return half_to_float(v);
  else if constexpr (std::is_same_v<T, BFloat16Bits>) return bfloat16_to_float(v);
  else return static_cast<double>(v);
}

// Integers round to nearest and saturate (interpolated values may fall between or outside them).
template <typename T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, Float16Bits>) return float_to_half(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, BFloat16Bits>) return float_to_bfloat16(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, bool>) return v != 0;
  else if constexpr (std::is_floating_point_v<T>) return static_cast<T>(v);
  else {
    if (std::isnan(v)) return T(0);
    v = std::round(v);
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

// One axis of the resize: src (shape `shape`) -> result with shape[axis] = p.out. V is the
// element type for nearest (a pure gather, exact for every dtype) and double otherwise.
template <typename V>
Tensor resize_axis(const Tensor& src, const Shape& shape, int axis, const AxisPlan& p, V extrapolation) {
  std::int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= shape[i];
  for (std::size_t i = axis + 1; i < shape.size(); ++i) inner *= shape[i];
  Shape out_shape = shape;
  out_shape[axis] = p.out;
  Tensor dst = Tensor::zeros(dtype_of<V>(), out_shape);
  const V* ps = src.data<V>();
  V* pd = dst.data<V>();
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t j = 0; j < p.out; ++j) {
      V* row = pd + (o * p.out + j) * inner;
      if (p.outside[j]) {
        for (std::int64_t i = 0; i < inner; ++i) row[i] = extrapolation;
        continue;
      }
      if constexpr (std::is_same_v<V, double>) {
        for (int t = 0; t < p.taps; ++t) {
          const double w = p.weight[j * p.taps + t];
          const V* in = ps + (o * p.in + p.index[j * p.taps + t]) * inner;
          for (std::int64_t i = 0; i < inner; ++i) row[i] += w * in[i];
        }
      } else {
        const V* in = ps + (o * p.in + p.index[j]) * inner;
        for (std::int64_t i = 0; i < inner; ++i) row[i] = in[i];
      }
    }
  return dst;
}

template <typename T>
void resize_typed(KernelContext& ctx, const Tensor& x, const std::vector<AxisPlan>& plans, const Shape& out_shape,
                  const Options& o) {
  // Every axis maps each sample onto itself (a detector resizing an image already at its size):
  // the input as it is, without the passes through double.
  if (std::all_of(plans.begin(), plans.end(), [](const AxisPlan& p) { return p.identity; })) {
    Tensor& y = ctx.allocate_output(0, x.dtype(), out_shape);
    std::copy(x.data<T>(), x.data<T>() + x.numel(), y.data<T>());
    return;
  }
  const bool gather = o.mode == Mode::Nearest;
  Shape shape = x.shape();
  Tensor cur;
  if (gather) {
    cur = x;
  } else {
    cur = Tensor::zeros(DType::Float64, shape);
    const T* px = x.data<T>();
    double* pc = cur.data<double>();
    for (std::int64_t i = 0; i < x.numel(); ++i) pc[i] = to_double(px[i]);
  }
  for (int axis = x.rank() - 1; axis >= 0; --axis) {
    const AxisPlan& p = plans[axis];
    if (p.identity) continue;
    cur = gather ? resize_axis<T>(cur, shape, axis, p, from_double<T>(o.extrapolation))
                 : resize_axis<double>(cur, shape, axis, p, o.extrapolation);
    shape[axis] = p.out;
  }
  Tensor& y = ctx.allocate_output(0, x.dtype(), out_shape);
  T* py = y.data<T>();
  if (gather) {
    const T* pc = cur.data<T>();
    for (std::int64_t i = 0; i < y.numel(); ++i) py[i] = pc[i];
  } else {
    const double* pc = cur.data<double>();
    for (std::int64_t i = 0; i < y.numel(); ++i) py[i] = from_double<T>(pc[i]);
  }
}

std::vector<double> read_floats(const Tensor& t, const KernelContext& ctx, const char* what) {
  std::vector<double> v(static_cast<std::size_t>(t.numel()));
  if (t.dtype() == DType::Float32) {
    for (std::int64_t i = 0; i < t.numel(); ++i) v[i] = t.data<float>()[i];
  } else if (t.dtype() == DType::Float64) {
    for (std::int64_t i = 0; i < t.numel(); ++i) v[i] = t.data<double>()[i];
  } else if (t.dtype() == DType::Float16) {
    for (std::int64_t i = 0; i < t.numel(); ++i) v[i] = half_to_float(t.data<Float16Bits>()[i]);
  } else {
    ctx.fail(ErrorCode::InvalidModel, std::string(what) + " must be a float tensor, got " + dtype_name(t.dtype()));
  }
  return v;
}

// Shared by Resize and Upsample once the scales or sizes of every axis are known: sizes give the
// output, scales the coordinate mapping; either may be empty (scales from sizes / in, sizes from
// floor(scale * in)).
void resize_common(KernelContext& ctx, const Options& o, const std::vector<double>& scales_in,
                   const std::vector<std::int64_t>& sizes, const std::vector<double>& roi) {
  const Tensor& x = ctx.input(0);
  const int rank = x.rank();
  const std::size_t r = static_cast<std::size_t>(rank);
  if (!scales_in.empty() && scales_in.size() != r)
    ctx.fail(ErrorCode::InvalidModel, "scales has " + std::to_string(scales_in.size()) +
                                          " elements for an input of rank " + std::to_string(rank));
  if (!sizes.empty() && sizes.size() != r)
    ctx.fail(ErrorCode::InvalidModel,
             "sizes has " + std::to_string(sizes.size()) + " elements for an input of rank " + std::to_string(rank));
  const bool crop = o.coord == Coord::TfCropAndResize;
  if (crop && !roi.empty() && roi.size() != 2 * r)
    ctx.fail(ErrorCode::InvalidModel,
             "roi has " + std::to_string(roi.size()) + " elements, expected " + std::to_string(2 * r));
  Shape out_shape(r);
  std::vector<AxisPlan> plans(r);
  std::vector<double> axis_scales(r);
  for (std::size_t d = 0; d < r; ++d) {
    const std::int64_t in = x.shape()[d];
    double scale;
    std::int64_t out;
    if (!sizes.empty()) {
      out = sizes[d];
      if (out < 0) ctx.fail(ErrorCode::InvalidArgument, "sizes has a negative entry " + std::to_string(out));
      scale = !scales_in.empty() ? scales_in[d] : in == 0 ? 1.0 : static_cast<double>(out) / static_cast<double>(in);
    } else {
      scale = scales_in[d];
      if (!(scale > 0) || !std::isfinite(scale))
        ctx.fail(ErrorCode::InvalidArgument, "scales must be positive and finite, got " + std::to_string(scale));
      const double len = std::floor(scale * static_cast<double>(in));
      if (len > static_cast<double>(std::int64_t(1) << 48))
        ctx.fail(ErrorCode::ResourceExhausted, "scale " + std::to_string(scale) + " makes the output too large");
      out = static_cast<std::int64_t>(len);
    }
    if (in == 0 && out != 0)
      ctx.fail(ErrorCode::InvalidArgument, "cannot resize an empty axis " + std::to_string(d) + " to a non-empty one");
    out_shape[d] = out;
    axis_scales[d] = scale;
  }
  // The output within the session's limits before the per-axis plans (as long as the output's
  // axes) are built for it; an empty output needs none, and one of its axes may be of any length.
  if (check_elements(out_shape, ctx.limits(), node_label(ctx.node()) + "output 0: ", x.dtype()) == 0) {
    ctx.allocate_output(0, x.dtype(), out_shape);
    return;
  }
  for (std::size_t d = 0; d < r; ++d) {
    const double roi_start = crop && !roi.empty() ? roi[d] : 0.0;
    const double roi_end = crop && !roi.empty() ? roi[d + r] : 1.0;
    plans[d] = plan_axis(x.shape()[d], out_shape[d], axis_scales[d], roi_start, roi_end, o);
  }
  dispatch_any(x.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    resize_typed<T>(ctx, x, plans, out_shape, o);
  });
}

// Opset 18's axes: scales, sizes and roi name only these axes; the others keep their length.
std::vector<int> resize_axes(const KernelContext& ctx, int rank) {
  std::vector<int> axes;
  const Attribute* a = ctx.opset() >= 18 ? ctx.node().find_attr("axes") : nullptr;
  if (!a) {
    for (int d = 0; d < rank; ++d) axes.push_back(d);
    return axes;
  }
  return normalize_axes(a->ints(), rank, ctx);
}

template <typename T>
std::vector<T> on_every_axis(const KernelContext& ctx, const std::vector<T>& given, const std::vector<int>& axes,
                             const std::vector<T>& rest, const char* what) {
  if (given.size() != axes.size())
    ctx.fail(ErrorCode::InvalidModel, std::string(what) + " has " + std::to_string(given.size()) + " elements for " +
                                          std::to_string(axes.size()) + " axes");
  std::vector<T> full = rest;
  for (std::size_t i = 0; i < axes.size(); ++i) full[axes[i]] = given[i];
  return full;
}

void resize(KernelContext& ctx) {
  const bool legacy = ctx.opset() < 11;
  const Options o = parse_options(ctx, legacy);
  std::vector<double> scales, roi;
  std::vector<std::int64_t> sizes;
  if (legacy) {
    scales = read_floats(ctx.input(1), ctx, "scales");
    if (scales.empty()) ctx.fail(ErrorCode::InvalidModel, "scales are missing");
    resize_common(ctx, o, scales, {}, {});
    return;
  }
  // roi matters only to tf_crop_and_resize; other modes ignore whatever the model put there.
  if (o.coord == Coord::TfCropAndResize && ctx.has_input(1) && ctx.input(1).numel() > 0)
    roi = read_floats(ctx.input(1), ctx, "roi");
  if (ctx.has_input(2) && ctx.input(2).numel() > 0) scales = read_floats(ctx.input(2), ctx, "scales");
  if (ctx.has_input(3) && ctx.input(3).numel() > 0) sizes = read_shape(ctx.input(3), ctx);
  if (scales.empty() == sizes.empty())
    ctx.fail(ErrorCode::InvalidModel, "exactly one of 'scales' and 'sizes' must be given");
  const Shape& in = ctx.input(0).shape();
  const int rank = ctx.input(0).rank();
  const std::vector<int> axes = resize_axes(ctx, rank);
  const std::size_t r = static_cast<std::size_t>(rank);
  if (!scales.empty()) scales = on_every_axis(ctx, scales, axes, std::vector<double>(r, 1.0), "scales");
  if (!roi.empty()) {
    std::vector<double> starts(roi.begin(), roi.begin() + static_cast<std::ptrdiff_t>(roi.size() / 2));
    std::vector<double> ends(roi.begin() + static_cast<std::ptrdiff_t>(roi.size() / 2), roi.end());
    if (roi.size() % 2 != 0) ctx.fail(ErrorCode::InvalidModel, "roi has an odd number of elements");
    starts = on_every_axis(ctx, starts, axes, std::vector<double>(r, 0.0), "roi");
    ends = on_every_axis(ctx, ends, axes, std::vector<double>(r, 1.0), "roi");
    roi = starts;
    roi.insert(roi.end(), ends.begin(), ends.end());
  }
  if (!sizes.empty()) {
    sizes = on_every_axis(ctx, sizes, axes, std::vector<std::int64_t>(in.begin(), in.end()), "sizes");
    const std::string policy = ctx.opset() >= 18 ? ctx.node().attr_string("keep_aspect_ratio_policy", "stretch") : "stretch";
    if (policy != "stretch") {
      if (policy != "not_larger" && policy != "not_smaller")
        ctx.fail(ErrorCode::InvalidModel, "unknown keep_aspect_ratio_policy '" + policy + "'");
      // One scale for the named axes, the least (not_larger) or greatest (not_smaller) of
      // sizes / in over them, and the output rounded half up from it.
      double scale = policy == "not_larger" ? std::numeric_limits<double>::infinity() : 0.0;
      for (int d : axes) {
        if (in[d] == 0) ctx.fail(ErrorCode::InvalidArgument, "cannot keep the aspect ratio of an empty axis");
        const double s = static_cast<double>(sizes[d]) / static_cast<double>(in[d]);
        scale = policy == "not_larger" ? std::min(scale, s) : std::max(scale, s);
      }
      if (!(scale > 0)) ctx.fail(ErrorCode::InvalidArgument, "sizes give the scale " + std::to_string(scale));
      scales.assign(r, 1.0);
      for (int d : axes) {
        const double len = scale * static_cast<double>(in[d]) + 0.5;
        if (len > static_cast<double>(std::int64_t(1) << 48))
          ctx.fail(ErrorCode::ResourceExhausted, "sizes make the output too large");
        scales[d] = scale;
        sizes[d] = static_cast<std::int64_t>(len);
      }
    }
  }
  resize_common(ctx, o, scales, sizes, roi);
}

void upsample(KernelContext& ctx) {
  const Options o = parse_options(ctx, true);
  std::vector<double> scales;
  if (ctx.has_input(1)) {
    scales = read_floats(ctx.input(1), ctx, "scales");
  } else {
    for (float s : ctx.node().attr_floats("scales")) scales.push_back(s);
  }
  if (scales.empty()) ctx.fail(ErrorCode::InvalidModel, "scales are missing");
  resize_common(ctx, o, scales, {}, {});
}

}  // namespace

void register_resize(OpTable& t) {
  t.add("Resize", {resize, 1, 4, 10});
  t.add("Upsample", {upsample, 1, 2, 7});
}

}  // namespace wpk::reference
