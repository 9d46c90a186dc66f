// Cast, CastLike, Range, NonMaxSuppression; Resize and Upsample live in resize.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backends/reference/common.hpp"
#include "backends/reference/misc_internal.hpp"
#include "backends/reference/registry.hpp"

namespace wpk::reference {
namespace {

// ---- Cast --------------------------------------------------------------------------------

// double -> float rounding toward zero with the lowest bit set when inexact ("round to odd").
// A float rounded this way still rounds correctly to float16/bfloat16, which a plain
// double -> float -> float16 chain (two round-to-nearest steps) does not always do.
float to_float_round_odd(double d) {
  float f = static_cast<float>(d);
  if (std::isnan(d) || static_cast<double>(f) == d) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u |= 1u;
  std::memcpy(&f, &u, 4);
  return f;
}

template <typename S>
float to_float_for_16bit(S v) {
  if constexpr (std::is_same_v<S, float>) return v;
  else if constexpr (std::is_same_v<S, bool>) return v ? 1.0f : 0.0f;
  else return to_float_round_odd(static_cast<double>(v));
}

// Float -> integer truncates toward zero and saturates at the target's range; NaN becomes 0.
// (ONNX leaves out-of-range results undefined; saturating keeps them deterministic.)
template <typename D>
D float_to_int(double v) {
  if (std::isnan(v)) return D(0);
  if (v <= static_cast<double>(std::numeric_limits<D>::lowest())) return std::numeric_limits<D>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<D>::max())) return std::numeric_limits<D>::max();
  return static_cast<D>(v);
}

// Integer -> narrower integer wraps modulo 2^bits, as C and numpy do; x -> bool is x != 0.
template <typename D, typename S>
D cast_value(S v) {
  if constexpr (std::is_same_v<S, Float16Bits>) return cast_value<D>(half_to_float(v));
  else if constexpr (std::is_same_v<S, BFloat16Bits>) return cast_value<D>(bfloat16_to_float(v));
  else if constexpr (std::is_same_v<D, Float16Bits>) return float_to_half(to_float_for_16bit(v));
  else if constexpr (std::is_same_v<D, BFloat16Bits>) return float_to_bfloat16(to_float_for_16bit(v));
  else if constexpr (std::is_same_v<D, bool>) return v != S(0);
  else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<S>) return float_to_int<D>(static_cast<double>(v));
  else return static_cast<D>(v);
}

void cast_to(KernelContext& ctx, DType to) {
  const Tensor& x = ctx.input(0);
  if (cast_strings(ctx, to)) return;
  if (!dtype_is_storable(to))
    ctx.fail(ErrorCode::Unsupported, "cast to data type " + std::to_string(static_cast<int>(to)) + " is not supported");
  if (to == x.dtype()) {
    ctx.set_output(0, x);
    return;
  }
  Tensor& y = ctx.allocate_output(0, to, x.shape());
  dispatch_any(x.dtype(), ctx, [&](auto src_tag) {
    using S = typename decltype(src_tag)::type;
    dispatch_any(to, ctx, [&](auto dst_tag) {
      using D = typename decltype(dst_tag)::type;
      const S* px = x.data<S>();
      D* py = y.data<D>();
      for (std::int64_t i = 0; i < x.numel(); ++i) py[i] = cast_value<D>(px[i]);
    });
  });
}

void cast(KernelContext& ctx) {
  const Attribute* a = ctx.node().find_attr("to");
  if (!a) ctx.fail(ErrorCode::InvalidModel, "attribute 'to' is missing");
  if (a->kind() != Attribute::Kind::Int) ctx.fail(ErrorCode::Unsupported, "attribute 'to' must be an int (opset >= 6)");
  const std::int64_t to = a->i();
  if (to <= 0 || to > 255) ctx.fail(ErrorCode::InvalidModel, "attribute 'to' has invalid data type " + std::to_string(to));
  cast_to(ctx, static_cast<DType>(to));
}

void cast_like(KernelContext& ctx) { cast_to(ctx, ctx.input(1).dtype()); }

// ---- Range -------------------------------------------------------------------------------

const Tensor& scalar_input(const KernelContext& ctx, std::size_t i, const char* name) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1 || t.rank() > 1)
    ctx.fail(ErrorCode::InvalidModel, std::string(name) + " must be a scalar, got shape " + shape_to_string(t.shape()));
  return t;
}

[[noreturn]] void too_long(const KernelContext& ctx) {
  ctx.fail(ErrorCode::ResourceExhausted, "the range has more than the limit of " + std::to_string(ctx.limits().max_elements) +
                                             " elements (SessionOptions::max_tensor_elements)");
}

void range(KernelContext& ctx) {
  const Tensor& ts = scalar_input(ctx, 0, "start");
  const Tensor& tl = scalar_input(ctx, 1, "limit");
  const Tensor& td = scalar_input(ctx, 2, "delta");
  const DType t = ts.dtype();
  if (tl.dtype() != t || td.dtype() != t)
    ctx.fail(ErrorCode::InvalidModel, "start, limit and delta must have the same dtype");
  if (t != DType::Float32 && t != DType::Float64 && t != DType::Int16 && t != DType::Int32 && t != DType::Int64)
    ctx.fail(ErrorCode::Unsupported, std::string("dtype ") + dtype_name(t) + " is not supported");
  dispatch_numeric(t, ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T s = ts.data<T>()[0], l = tl.data<T>()[0], d = td.data<T>()[0];
    if (d == T(0)) ctx.fail(ErrorCode::InvalidArgument, "delta must not be zero");
    std::int64_t n = 0;
    if constexpr (std::is_floating_point_v<T>) {
      const double len = std::ceil((static_cast<double>(l) - s) / d);
      if (std::isnan(len)) ctx.fail(ErrorCode::InvalidArgument, "start, limit and delta give no length (NaN)");
      if (len > static_cast<double>(ctx.limits().max_elements)) too_long(ctx);
      n = len > 0 ? static_cast<std::int64_t>(len) : 0;
    } else {
      // Unsigned differences cannot overflow where signed ones could (e.g. INT64_MIN..INT64_MAX).
      using U = std::uint64_t;
      if ((d > 0 && l > s) || (d < 0 && l < s)) {
        const U diff = d > 0 ? U(l) - U(s) : U(s) - U(l);
        const U step = d > 0 ? U(d) : U(0) - U(d);
        const U count = diff / step + (diff % step != 0 ? 1 : 0);
        if (count > static_cast<U>(ctx.limits().max_elements)) too_long(ctx);
        n = static_cast<std::int64_t>(count);
      }
    }
    Tensor& y = ctx.allocate_output(0, t, {n});
    T* py = y.data<T>();
    for (std::int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_floating_point_v<T>)
        py[i] = static_cast<T>(static_cast<double>(s) + static_cast<double>(i) * d);
      else
        py[i] = static_cast<T>(std::uint64_t(s) + std::uint64_t(i) * std::uint64_t(d));
    }
  });
}

// ---- NonMaxSuppression -------------------------------------------------------------------

struct Box {
  double y1, x1, y2, x2;
};

Box make_box(const double* b, bool center) {
  if (center) {  // [x_center, y_center, width, height]
    return {b[1] - b[3] / 2, b[0] - b[2] / 2, b[1] + b[3] / 2, b[0] + b[2] / 2};
  }
  // [y1, x1, y2, x2] with any diagonal pair of corners
  return {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
}

double area(const Box& b) { return (b.y2 - b.y1) * (b.x2 - b.x1); }

// Intersection over union of a and b, whose areas are given.
double iou(const Box& a, double area_a, const Box& b, double area_b) {
  const double ih = std::min(a.y2, b.y2) - std::max(a.y1, b.y1);
  if (ih <= 0) return 0;
  const double iw = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
  if (iw <= 0) return 0;
  const double inter = ih * iw;
  const double uni = area_a + area_b - inter;
  return uni > 0 ? inter / uni : 0;
}

// The boxes a class has kept so far. A candidate is suppressed by any kept box it overlaps by
// more than the threshold, which needs some vertical overlap: kept in order of their top edge,
// only those whose top lies within the tallest kept box's height above the candidate's top, and
// above its bottom, are compared (a detector's thousands of candidates against its hundreds kept,
// most of them elsewhere in the image or, offset per class, in another class's region). Boxes
// with NaN coordinates have no order: then every kept box is compared.
class KeptBoxes {
 public:
  void clear(bool ordered) {
    boxes_.clear();
    ordered_ = ordered;
    tallest_ = 0;
  }
  std::int64_t size() const { return static_cast<std::int64_t>(boxes_.size()); }

  bool suppresses(const Box& b, double b_area, double threshold) const {
    auto first = boxes_.begin(), last = boxes_.end();
    if (ordered_) {
      // A margin far above double rounding keeps boxes whose bottom might still pass b's top.
      const double reach = tallest_ + 1e-9 * (std::abs(b.y1) + tallest_) + 1e-300;
      first = std::lower_bound(boxes_.begin(), boxes_.end(), b.y1 - reach,
                               [](const Kept& k, double y) { return k.box.y1 < y; });
      last = std::lower_bound(first, boxes_.end(), b.y2, [](const Kept& k, double y) { return k.box.y1 < y; });
    }
    for (auto k = first; k != last; ++k)
      if (iou(b, b_area, k->box, k->area) > threshold) return true;
    return false;
  }

  void add(const Box& b, double b_area) {
    const Kept k{b, b_area};
    if (!ordered_) {
      boxes_.push_back(k);
      return;
    }
    boxes_.insert(std::upper_bound(boxes_.begin(), boxes_.end(), b.y1, [](double y, const Kept& x) { return y < x.box.y1; }), k);
    tallest_ = std::max(tallest_, b.y2 - b.y1);
  }

 private:
  struct Kept {
    Box box;
    double area;
  };
  std::vector<Kept> boxes_;
  bool ordered_ = true;
  double tallest_ = 0;
};

std::vector<double> read_as_double(const Tensor& t, const KernelContext& ctx, const char* name) {
  std::vector<double> v(static_cast<std::size_t>(t.numel()));
  if (t.dtype() == DType::Float32) std::copy(t.data<float>(), t.data<float>() + t.numel(), v.begin());
  else if (t.dtype() == DType::Float64) std::copy(t.data<double>(), t.data<double>() + t.numel(), v.begin());
  else ctx.fail(ErrorCode::Unsupported, std::string(name) + " must be float32 or float64, got " + dtype_name(t.dtype()));
  return v;
}

void non_max_suppression(KernelContext& ctx) {
  const Tensor& tb = ctx.input(0);
  const Tensor& ts = ctx.input(1);
  if (tb.rank() != 3 || tb.shape()[2] != 4)
    ctx.fail(ErrorCode::InvalidArgument, "boxes must have shape [batches, boxes, 4], got " + shape_to_string(tb.shape()));
  if (ts.rank() != 3 || ts.shape()[0] != tb.shape()[0] || ts.shape()[2] != tb.shape()[1])
    ctx.fail(ErrorCode::InvalidArgument, "scores shape " + shape_to_string(ts.shape()) + " does not match boxes shape " +
                                             shape_to_string(tb.shape()));
  const std::int64_t center_attr = ctx.node().attr_int("center_point_box", 0);
  if (center_attr != 0 && center_attr != 1)
    ctx.fail(ErrorCode::InvalidModel, "center_point_box must be 0 or 1, got " + std::to_string(center_attr));
  std::int64_t max_out = 0;
  if (ctx.has_input(2) && ctx.input(2).numel() > 0) max_out = read_int_list(ctx.input(2), ctx)[0];
  const double iou_th = ctx.has_input(3) && ctx.input(3).numel() > 0 ? read_scalar_as_double(ctx.input(3), ctx) : 0.0;
  const bool has_score_th = ctx.has_input(4) && ctx.input(4).numel() > 0;
  const double score_th = has_score_th ? read_scalar_as_double(ctx.input(4), ctx) : 0.0;
  if (!(iou_th >= 0 && iou_th <= 1))
    ctx.fail(ErrorCode::InvalidArgument, "iou_threshold must be in [0, 1], got " + std::to_string(iou_th));

  const std::vector<double> boxes = read_as_double(tb, ctx, "boxes");
  const std::vector<double> scores = read_as_double(ts, ctx, "scores");
  const std::int64_t n_batch = tb.shape()[0], n_box = tb.shape()[1], n_class = ts.shape()[1];
  std::vector<std::int64_t> picked;  // (batch, class, box) triples
  std::vector<std::int64_t> order;
  std::vector<Box> batch_boxes(static_cast<std::size_t>(n_box));
  std::vector<double> areas(static_cast<std::size_t>(n_box));
  KeptBoxes kept;
  for (std::int64_t b = 0; b < n_batch && max_out > 0; ++b) {
    // A batch's boxes and their areas, made once.
    bool any_nan = false;
    for (std::int64_t i = 0; i < n_box; ++i) {
      const Box& x = batch_boxes[i] = make_box(boxes.data() + (b * n_box + i) * 4, center_attr == 1);
      areas[i] = area(x);
      any_nan = any_nan || std::isnan(x.y1) || std::isnan(x.y2) || std::isnan(x.x1) || std::isnan(x.x2);
    }
    for (std::int64_t c = 0; c < n_class; ++c) {
      const double* sc = scores.data() + (b * n_class + c) * n_box;
      order.clear();
      for (std::int64_t i = 0; i < n_box; ++i)
        if (!has_score_th || sc[i] > score_th) order.push_back(i);
      // Highest score first; equal scores keep box order.
      std::stable_sort(order.begin(), order.end(), [&](std::int64_t i, std::int64_t j) { return sc[i] > sc[j]; });
      kept.clear(!any_nan);
      for (std::int64_t i : order) {
        if (kept.size() >= max_out) break;
        if (kept.suppresses(batch_boxes[i], areas[i], iou_th)) continue;
        kept.add(batch_boxes[i], areas[i]);
        picked.insert(picked.end(), {b, c, i});
      }
    }
  }
  const auto n = static_cast<std::int64_t>(picked.size() / 3);
  Tensor& y = ctx.allocate_output(0, DType::Int64, {n, 3});
  std::copy(picked.begin(), picked.end(), y.data<std::int64_t>());
}

}  // namespace

void register_misc(OpTable& t) {
  t.add("Cast", {cast, 1, 1, 6});
  t.add("CastLike", {cast_like, 2, 2, 15});
  t.add("Range", {range, 3, 3, 11});
  t.add("NonMaxSuppression", {non_max_suppression, 2, 5, 10});
  register_resize(t);
  register_quantize(t);
  register_signal(t);
  register_sampling(t);
  register_qlinear(t);
  register_random(t);
  register_sequence(t);
  register_strings(t);
  register_tfidf(t);
}

}  // namespace wpk::reference
