// Pooling: MaxPool (with Indices), AveragePool, LpPool, their Global forms, and MaxUnpool.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "backends/reference/common.hpp"
#include "backends/reference/conv_pool.hpp"
#include "backends/reference/float_buffers.hpp"

namespace wpk::reference {
namespace {

// For each padded spatial dim and output coordinate: the input coordinates its window covers
// inside the input, and how many taps fall inside input + explicit padding (the divisor of
// AveragePool with count_include_pad). Built once per call so the inner loops only read lists.
struct Taps {
  std::vector<std::vector<std::int64_t>> inside[3];
  std::vector<std::int64_t> with_pads[3];
};

std::int64_t floor_div(std::int64_t a, std::int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return -floor_div(-a, b); }

// Taps k in [0, kernel) with lo <= start + k*dilation < hi, counted without walking the kernel (a
// kernel_shape attribute can be far larger than the input).
void tap_range(std::int64_t start, std::int64_t dilation, std::int64_t kernel, std::int64_t lo, std::int64_t hi,
               std::int64_t& first, std::int64_t& last) {
  first = std::max<std::int64_t>(0, ceil_div(lo - start, dilation));
  last = std::min<std::int64_t>(kernel - 1, floor_div(hi - 1 - start, dilation));
}

Taps make_taps(const Window& w) {
  Taps t;
  for (int d = 0; d < 3; ++d) {
    t.inside[d].resize(static_cast<std::size_t>(w.out[d]));
    t.with_pads[d].assign(static_cast<std::size_t>(w.out[d]), 0);
    for (std::int64_t o = 0; o < w.out[d]; ++o) {
      const std::int64_t start = o * w.stride[d] - w.pad_begin[d];
      std::int64_t first = 0, last = 0;
      tap_range(start, w.dilation[d], w.kernel[d], 0, w.in[d], first, last);
      for (std::int64_t k = first; k <= last; ++k) t.inside[d][o].push_back(start + k * w.dilation[d]);
      tap_range(start, w.dilation[d], w.kernel[d], -w.pad_begin[d], w.in[d] + w.pad_end[d], first, last);
      t.with_pads[d][o] = std::max<std::int64_t>(0, last - first + 1);
    }
  }
  return t;
}

Shape pooled_shape(const Shape& x_shape, const Window& w) {
  Shape s = {x_shape[0], x_shape[1]};
  for (int i = 3 - w.nd; i < 3; ++i) s.push_back(w.out[i]);
  return s;
}

// Visits every (plane, output position) with the list of input offsets (within the plane) its
// window covers, and the position's count_include_pad divisor.
template <typename Visit>
void for_each_window(const Window& w, const Taps& t, std::int64_t planes, Visit&& visit) {
  std::vector<std::int64_t> offsets;
  for (std::int64_t o0 = 0; o0 < w.out[0]; ++o0)
    for (std::int64_t o1 = 0; o1 < w.out[1]; ++o1)
      for (std::int64_t o2 = 0; o2 < w.out[2]; ++o2) {
        offsets.clear();
        for (auto i0 : t.inside[0][o0])
          for (auto i1 : t.inside[1][o1])
            for (auto i2 : t.inside[2][o2]) offsets.push_back((i0 * w.in[1] + i1) * w.in[2] + i2);
        const std::int64_t with_pads = t.with_pads[0][o0] * t.with_pads[1][o1] * t.with_pads[2][o2];
        const std::int64_t out = (o0 * w.out[1] + o1) * w.out[2] + o2;
        for (std::int64_t p = 0; p < planes; ++p) visit(p, out, offsets, with_pads);
      }
}

// Column-major position (first spatial dim fastest) of a row-major offset within a plane.
std::int64_t column_major(const Window& w, std::int64_t off) {
  const std::int64_t i2 = off % w.in[2], i1 = (off / w.in[2]) % w.in[1], i0 = off / (w.in[2] * w.in[1]);
  if (w.nd == 3) return i0 + w.in[0] * (i1 + w.in[1] * i2);
  return i1 + w.in[1] * i2;  // dims 0 (and 1 for 1-D) are padding of size 1
}

template <typename T>
void max_pool_compute(const T* x, T* y, std::int64_t* indices, const Window& w, std::int64_t planes, bool col_major) {
  const Taps taps = make_taps(w);
  const std::int64_t in_size = w.in_size(), out_size = w.out_size();
  for_each_window(w, taps, planes, [&](std::int64_t p, std::int64_t o, const std::vector<std::int64_t>& offs, std::int64_t) {
    const T* xp = x + p * in_size;
    T best = std::numeric_limits<T>::lowest();
    std::int64_t best_off = offs.empty() ? 0 : offs[0];
    for (auto off : offs)
      if (xp[off] > best) {
        best = xp[off];
        best_off = off;
      }
    y[p * out_size + o] = best;
    if (indices) indices[p * out_size + o] = p * in_size + (col_major ? column_major(w, best_off) : best_off);
  });
}

Window pool_window(const KernelContext& ctx, const Tensor& x) {
  const bool ceil_mode = ctx.node().attr_int("ceil_mode", 0) != 0;
  const Window w = conv_window(ctx, x.shape(), {}, ceil_mode);
  // A pad as wide as the kernel would give windows that see only padding.
  for (int d = 0; d < 3; ++d)
    if (std::max(w.pad_begin[d], w.pad_end[d]) >= (w.kernel[d] - 1) * w.dilation[d] + 1)
      ctx.fail(ErrorCode::InvalidModel, "pads must be smaller than the (dilated) kernel");
  return w;
}

void max_pool(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Window w = pool_window(ctx, x);
  const std::int64_t storage_order = ctx.node().attr_int("storage_order", 0);
  if (storage_order != 0 && storage_order != 1) ctx.fail(ErrorCode::InvalidModel, "storage_order must be 0 or 1");
  const Shape shape = pooled_shape(x.shape(), w);
  Tensor& y = ctx.allocate_output(0, x.dtype(), shape);
  std::int64_t* indices = ctx.wants_output(1) ? ctx.allocate_output(1, DType::Int64, shape).data<std::int64_t>() : nullptr;
  if (y.numel() == 0) return;
  const std::int64_t planes = x.dim(0) * x.dim(1);
  const bool col_major = storage_order == 1;
  if (is_half_dtype(x.dtype())) {
    const std::vector<float> xf = to_float_buffer(x);
    std::vector<float> yf(static_cast<std::size_t>(y.numel()));
    max_pool_compute<float>(xf.data(), yf.data(), indices, w, planes, col_major);
    store_float_buffer(yf.data(), y);
    return;
  }
  dispatch_numeric(x.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    max_pool_compute<T>(x.data<T>(), y.data<T>(), indices, w, planes, col_major);
  });
}

// Runs a float-only pooling computation `fn(const T* x, T* y)` for float, double and 16-bit floats.
template <typename Fn>
void float_pool(KernelContext& ctx, const Tensor& x, Tensor& y, Fn&& fn) {
  if (is_half_dtype(x.dtype())) {
    const std::vector<float> xf = to_float_buffer(x);
    std::vector<float> yf(static_cast<std::size_t>(y.numel()));
    fn(xf.data(), yf.data());
    store_float_buffer(yf.data(), y);
    return;
  }
  dispatch_float(x.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    fn(x.data<T>(), y.data<T>());
  });
}

void average_pool(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Window w = pool_window(ctx, x);
  const bool include_pad = ctx.node().attr_int("count_include_pad", 0) != 0;
  Tensor& y = ctx.allocate_output(0, x.dtype(), pooled_shape(x.shape(), w));
  if (y.numel() == 0) return;  // an empty batch must not size the tap lists
  const std::int64_t planes = x.dim(0) * x.dim(1), in_size = w.in_size(), out_size = w.out_size();
  const Taps taps = make_taps(w);
  float_pool(ctx, x, y, [&](const auto* px, auto* py) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(px)>>;
    for_each_window(w, taps, planes, [&](std::int64_t p, std::int64_t o, const std::vector<std::int64_t>& offs,
                                         std::int64_t with_pads) {
      const T* xp = px + p * in_size;
      T sum = 0;
      for (auto off : offs) sum += xp[off];
      const std::int64_t count = include_pad ? with_pads : static_cast<std::int64_t>(offs.size());
      py[p * out_size + o] = count > 0 ? sum / static_cast<T>(count) : T(0);
    });
  });
}

void lp_pool(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Window w = pool_window(ctx, x);
  const std::int64_t p_norm = ctx.node().attr_int("p", 2);
  if (p_norm < 1) ctx.fail(ErrorCode::InvalidModel, "p must be at least 1");
  Tensor& y = ctx.allocate_output(0, x.dtype(), pooled_shape(x.shape(), w));
  if (y.numel() == 0) return;  // an empty batch must not size the tap lists
  const std::int64_t planes = x.dim(0) * x.dim(1), in_size = w.in_size(), out_size = w.out_size();
  const Taps taps = make_taps(w);
  float_pool(ctx, x, y, [&](const auto* px, auto* py) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(px)>>;
    const T pv = static_cast<T>(p_norm);
    for_each_window(w, taps, planes, [&](std::int64_t p, std::int64_t o, const std::vector<std::int64_t>& offs,
                                         std::int64_t) {
      const T* xp = px + p * in_size;
      T sum = 0;
      for (auto off : offs) sum += std::pow(std::abs(xp[off]), pv);
      py[p * out_size + o] = std::pow(sum, T(1) / pv);
    });
  });
}

// Global pools reduce every spatial position of each (n, c) plane.
enum class GlobalKind { Average, Max, Lp };

template <GlobalKind kind>
void global_pool(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2)
    ctx.fail(ErrorCode::InvalidArgument, "input must have shape (N, C, spatial...), got " + shape_to_string(x.shape()));
  Shape shape(x.shape().size(), 1);
  shape[0] = x.dim(0);
  shape[1] = x.dim(1);
  const std::int64_t planes = x.dim(0) * x.dim(1);
  const std::int64_t size = planes == 0 ? 0 : x.numel() / planes;
  if (kind == GlobalKind::Max && size == 0) ctx.fail(ErrorCode::InvalidArgument, "cannot take the max of an empty plane");
  const std::int64_t p_norm = kind == GlobalKind::Lp ? ctx.node().attr_int("p", 2) : 1;
  if (p_norm < 1) ctx.fail(ErrorCode::InvalidModel, "p must be at least 1");
  Tensor& y = ctx.allocate_output(0, x.dtype(), shape);
  auto run = [&](const auto* px, auto* py) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(px)>>;
    for (std::int64_t p = 0; p < planes; ++p) {
      const T* xp = px + p * size;
      if (kind == GlobalKind::Max) {
        py[p] = *std::max_element(xp, xp + size);
      } else if (kind == GlobalKind::Average) {
        double sum = 0;
        for (std::int64_t i = 0; i < size; ++i) sum += static_cast<double>(xp[i]);
        py[p] = static_cast<T>(size > 0 ? sum / static_cast<double>(size) : 0.0);
      } else {
        double sum = 0;
        for (std::int64_t i = 0; i < size; ++i)
          sum += std::pow(std::abs(static_cast<double>(xp[i])), static_cast<double>(p_norm));
        py[p] = static_cast<T>(std::pow(sum, 1.0 / static_cast<double>(p_norm)));
      }
    }
  };
  if (kind == GlobalKind::Max && !is_half_dtype(x.dtype())) {
    dispatch_numeric(x.dtype(), ctx, [&](auto tag) {
      using T = typename decltype(tag)::type;
      run(x.data<T>(), y.data<T>());
    });
    return;
  }
  float_pool(ctx, x, y, run);
}

// MaxUnpool scatters X into zeros at the flat positions MaxPool's Indices reported.
void max_unpool(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  if (ind.dtype() != DType::Int64) ctx.fail(ErrorCode::InvalidModel, "indices must be int64");
  if (ind.shape() != x.shape())
    ctx.fail(ErrorCode::InvalidArgument, "indices " + shape_to_string(ind.shape()) + " and input " +
                                             shape_to_string(x.shape()) + " differ in shape");
  Window w = base_window(ctx, x.shape(), {});
  std::vector<std::int64_t> pads = ctx.node().attr_ints("pads", std::vector<std::int64_t>(2 * w.nd, 0));
  if (static_cast<int>(pads.size()) != 2 * w.nd) ctx.fail(ErrorCode::InvalidModel, "pads needs two values per spatial dim");
  // Indices address the unpooled tensor of the inferred size; an explicit output_shape pads (or
  // crops) that tensor at the end of each spatial dim.
  Shape inferred = {x.dim(0), x.dim(1)};
  for (int i = 0; i < w.nd; ++i) {
    const int a = 3 - w.nd + i;
    const std::int64_t s = (w.in[a] - 1) * w.stride[a] + w.kernel[a] - pads[i] - pads[w.nd + i];
    if (s < 0) ctx.fail(ErrorCode::InvalidModel, "pads exceed the unpooled size");
    inferred.push_back(s);
  }
  Shape shape = inferred;
  if (ctx.has_input(2)) {
    shape = read_shape(ctx.input(2), ctx);
    if (shape.size() != x.shape().size() || shape[0] != x.dim(0) || shape[1] != x.dim(1))
      ctx.fail(ErrorCode::InvalidArgument, "output_shape " + shape_to_string(shape) + " does not fit input " +
                                               shape_to_string(x.shape()));
    for (auto d : shape)
      if (d < 0) ctx.fail(ErrorCode::InvalidArgument, "output_shape has a negative dim");
  }
  const std::int64_t inferred_n = shape_numel(inferred);
  const auto in_strides = contiguous_strides(inferred), out_strides = contiguous_strides(shape);
  auto target = [&](std::int64_t index) {
    if (index < 0 || index >= inferred_n)
      ctx.fail(ErrorCode::InvalidArgument, "index " + std::to_string(index) + " is outside the unpooled tensor " +
                                               shape_to_string(inferred));
    if (shape == inferred) return index;
    std::int64_t out = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) {
      const std::int64_t coord = index / in_strides[d];
      index %= in_strides[d];
      if (coord >= shape[d])
        ctx.fail(ErrorCode::InvalidArgument, "an index falls outside output_shape " + shape_to_string(shape));
      out += coord * out_strides[d];
    }
    return out;
  };
  Tensor& y = ctx.allocate_output(0, x.dtype(), shape);
  const std::int64_t* pi = ind.data<std::int64_t>();
  const std::int64_t n = y.numel();
  dispatch_any(x.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* py = y.data<T>();
    const T* px = x.data<T>();
    std::fill(py, py + n, T{});
    for (std::int64_t i = 0; i < x.numel(); ++i) py[target(pi[i])] = px[i];
  });
}

}  // namespace

void register_pool(OpTable& t) {
  t.add("MaxPool", {max_pool, 1, 1, 1});
  t.add("AveragePool", {average_pool, 1, 1, 1});
  t.add("LpPool", {lp_pool, 1, 1, 1});
  t.add("GlobalAveragePool", {global_pool<GlobalKind::Average>, 1, 1, 1});
  t.add("GlobalMaxPool", {global_pool<GlobalKind::Max>, 1, 1, 1});
  t.add("GlobalLpPool", {global_pool<GlobalKind::Lp>, 1, 1, 2});
  t.add("MaxUnpool", {max_unpool, 2, 3, 9});
}

}  // namespace wpk::reference
