// Reference kernels that select elements by value: OneHot, TopK, NonZero, Compress, Unique.
// Registered from register_index_ops.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "backends/reference/common.hpp"
#include "backends/reference/data_movement.hpp"
#include "backends/reference/registry.hpp"

namespace wpk::reference {
namespace {

// A total order for sorting: NaN above every number and equal to every other NaN, so sorts
// stay well defined (std::sort on a partial order is undefined behaviour).
template <typename T>
bool total_less(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return a < b;
}

// Calls f(keys) where keys[i] is element i of `t` as a comparable value: the element itself for
// numeric dtypes, float for float16/bfloat16.
template <typename F>
void with_sort_keys(const Tensor& t, const KernelContext& ctx, F&& f) {
  if (t.dtype() == DType::Float16 || t.dtype() == DType::BFloat16) {
    std::vector<float> keys(static_cast<std::size_t>(t.numel()));
    for (std::int64_t i = 0; i < t.numel(); ++i)
      keys[i] = t.dtype() == DType::Float16 ? half_to_float(t.data<Float16Bits>()[i]) : bfloat16_to_float(t.data<BFloat16Bits>()[i]);
    return f(static_cast<const float*>(keys.data()));
  }
  dispatch_numeric(t.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    f(t.data<T>());
  });
}

void one_hot(KernelContext& ctx) {
  const Tensor& indices = ctx.input(0);
  const Tensor& values = ctx.input(2);
  const double depth_d = read_scalar_as_double(ctx.input(1), ctx);
  if (!(depth_d >= 1) || depth_d > 9.0e18) ctx.fail(ErrorCode::InvalidArgument, "depth " + std::to_string(depth_d) + " is invalid");
  const std::int64_t depth = static_cast<std::int64_t>(depth_d);
  if (values.numel() != 2) ctx.fail(ErrorCode::InvalidModel, "values must hold [off_value, on_value]");
  const int r = indices.rank();
  const int axis = normalize_axis(ctx.node().attr_int("axis", -1), r + 1, ctx);
  Shape out = indices.shape();
  out.insert(out.begin() + axis, depth);
  Tensor& y = ctx.allocate_output(0, values.dtype(), out);
  const double bound = static_cast<double>(depth);  // depth truncated, as the classes are
  // Class of each index; -1 for values outside [-depth, depth), which get no on_value.
  std::vector<std::int64_t> cls(static_cast<std::size_t>(indices.numel()));
  dispatch_numeric(indices.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = indices.data<T>();
    for (std::int64_t i = 0; i < indices.numel(); ++i) {
      const double v = static_cast<double>(p[i]);
      if (!(v >= -bound && v < bound)) {
        cls[i] = -1;
        continue;
      }
      std::int64_t c = static_cast<std::int64_t>(v);
      cls[i] = c < 0 ? c + depth : c;
    }
  });
  const std::int64_t outer = dims_product(indices.shape(), 0, axis);
  const std::int64_t inner = dims_product(indices.shape(), axis, indices.shape().size());
  dispatch_width(values.dtype(), ctx, [&](auto w) {
    constexpr std::size_t W = decltype(w)::value;
    unsigned char* dst = bytes_of(y);
    const unsigned char* off = bytes_of(values);
    const unsigned char* on = off + W;
    for (std::int64_t i = 0; i < y.numel(); ++i) copy_elem<W>(dst + i * W, off);
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t i = 0; i < inner; ++i) {
        const std::int64_t c = cls[o * inner + i];
        if (c >= 0) copy_elem<W>(dst + ((o * depth + c) * inner + i) * W, on);
      }
  });
}

void top_k(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() == 0) ctx.fail(ErrorCode::InvalidArgument, "input must have rank >= 1");
  const int axis = normalize_axis(ctx.node().attr_int("axis", -1), x.rank(), ctx);
  std::int64_t k = 0;
  if (ctx.has_input(1)) {
    const auto kv = read_int_list(ctx.input(1), ctx);
    if (kv.size() != 1) ctx.fail(ErrorCode::InvalidModel, "K must hold exactly one value");
    k = kv[0];
  } else {
    if (!ctx.node().has_attr("k")) ctx.fail(ErrorCode::InvalidModel, "K is required");
    k = ctx.node().attr_int("k", 0);
  }
  const std::int64_t dim = x.shape()[axis];
  if (k < 0 || k > dim)
    ctx.fail(ErrorCode::InvalidArgument, "k = " + std::to_string(k) + " is out of range [0, " + std::to_string(dim) + "]");
  const bool largest = ctx.node().attr_int("largest", 1) != 0;
  // sorted=0 allows any order; sorted output is one such order.
  Shape out = x.shape();
  out[axis] = k;
  Tensor& values = ctx.allocate_output(0, x.dtype(), out);
  Tensor* indices = ctx.wants_output(1) ? &ctx.allocate_output(1, DType::Int64, out) : nullptr;
  const std::int64_t outer = dims_product(x.shape(), 0, axis);
  const std::int64_t inner = dims_product(x.shape(), axis + 1, x.shape().size());
  const std::size_t elem = dtype_size(x.dtype());
  with_sort_keys(x, ctx, [&](const auto* keys) {
    std::vector<std::int64_t> order(static_cast<std::size_t>(dim));
    for (std::int64_t o = 0; o < outer; ++o) {
      for (std::int64_t i = 0; i < inner; ++i) {
        const std::int64_t base = o * dim * inner + i;
        auto key = [&](std::int64_t j) { return keys[base + j * inner]; };
        // Equal values keep the lower index first.
        auto before = [&](std::int64_t a, std::int64_t b) {
          const auto ka = key(a), kb = key(b);
          if (largest ? total_less(kb, ka) : total_less(ka, kb)) return true;
          if (largest ? total_less(ka, kb) : total_less(kb, ka)) return false;
          return a < b;
        };
        std::iota(order.begin(), order.end(), 0);
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        for (std::int64_t j = 0; j < k; ++j) {
          const std::int64_t dst = o * k * inner + j * inner + i;
          std::memcpy(bytes_of(values) + dst * elem, bytes_of(x) + (base + order[j] * inner) * elem, elem);
          if (indices) indices->data<std::int64_t>()[dst] = order[j];
        }
      }
    }
  });
}

// Whether each element of `t` is nonzero (for every dtype, by value: -0.0 counts as zero).
std::vector<unsigned char> nonzero_mask(const Tensor& t, const KernelContext& ctx) {
  std::vector<unsigned char> mask(static_cast<std::size_t>(t.numel()));
  dispatch_any(t.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = t.data<T>();
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (std::is_same_v<T, Float16Bits> || std::is_same_v<T, BFloat16Bits>)
        mask[i] = (p[i].bits & 0x7fff) != 0;
      else
        mask[i] = p[i] != T(0);
    }
  });
  return mask;
}

void non_zero(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto mask = nonzero_mask(x, ctx);
  const std::int64_t nnz = std::count(mask.begin(), mask.end(), 1);
  // A scalar is treated as a 1-element vector, as numpy does.
  const Shape shape = x.rank() == 0 ? Shape{1} : x.shape();
  const int r = static_cast<int>(shape.size());
  Tensor& y = ctx.allocate_output(0, DType::Int64, {r, nnz});
  std::int64_t* py = y.data<std::int64_t>();
  std::int64_t n = 0;
  if (r == 1) {  // the positions themselves
    for (std::int64_t i = 0; i < x.numel(); ++i)
      if (mask[i]) py[n++] = i;
    return;
  }
  std::vector<std::int64_t> coord(static_cast<std::size_t>(r), 0);
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    if (mask[i]) {
      for (int a = 0; a < r; ++a) py[a * nnz + n] = coord[a];
      ++n;
    }
    for (int a = r - 1; a >= 0; --a) {
      if (++coord[a] < shape[a]) break;
      coord[a] = 0;
    }
  }
}

void compress(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& cond = ctx.input(1);
  if (cond.dtype() != DType::Bool) ctx.fail(ErrorCode::InvalidModel, "condition must be bool");
  if (cond.rank() != 1) ctx.fail(ErrorCode::InvalidModel, "condition must be 1-D");
  const bool has_axis = ctx.node().has_attr("axis");
  const int axis = has_axis ? normalize_axis(ctx.node().attr_int("axis", 0), x.rank(), ctx) : 0;
  // Without an axis the input is compressed as a flat vector.
  const Shape in_shape = has_axis ? x.shape() : Shape{x.numel()};
  const std::int64_t dim = in_shape[axis];
  std::vector<std::int64_t> kept;
  const bool* c = cond.data<bool>();
  for (std::int64_t j = 0; j < cond.numel(); ++j) {
    if (!c[j]) continue;
    if (j >= dim)
      ctx.fail(ErrorCode::InvalidArgument, "condition selects position " + std::to_string(j) + " but the axis has size " +
                                               std::to_string(dim));
    kept.push_back(j);
  }
  Shape out = in_shape;
  out[axis] = static_cast<std::int64_t>(kept.size());
  Tensor& y = ctx.allocate_output(0, x.dtype(), out);
  const std::int64_t outer = dims_product(in_shape, 0, axis);
  const std::size_t chunk = static_cast<std::size_t>(dims_product(in_shape, axis + 1, in_shape.size())) * dtype_size(x.dtype());
  if (chunk == 0) return;
  unsigned char* dst = bytes_of(y);
  for (std::int64_t o = 0; o < outer; ++o)
    for (auto j : kept) {
      std::memcpy(dst, bytes_of(x) + (o * dim + j) * chunk, chunk);
      dst += chunk;
    }
}

void unique(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const bool sorted = ctx.node().attr_int("sorted", 1) != 0;
  const bool has_axis = ctx.node().has_attr("axis");
  if (has_axis && x.rank() == 0) ctx.fail(ErrorCode::InvalidArgument, "axis is given but the input is a scalar");
  const int axis = has_axis ? normalize_axis(ctx.node().attr_int("axis", 0), x.rank(), ctx) : 0;
  // Items are the elements of the flattened input, or the slices along `axis`: item i is `outer`
  // runs of `inner` elements, starting at (o * n + i) * inner.
  const Shape in_shape = has_axis ? x.shape() : Shape{x.numel()};
  const std::int64_t n = in_shape[axis];
  const std::int64_t outer = dims_product(in_shape, 0, axis);
  const std::int64_t inner = dims_product(in_shape, axis + 1, in_shape.size());

  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::vector<std::int64_t> group_of_sorted(static_cast<std::size_t>(n));  // group id per position in `order`
  std::int64_t groups = 0;
  with_sort_keys(x, ctx, [&](const auto* keys) {
    // Three-way lexicographic comparison of two items.
    auto compare = [&](std::int64_t a, std::int64_t b) {
      for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t e = 0; e < inner; ++e) {
          const auto ka = keys[(o * n + a) * inner + e], kb = keys[(o * n + b) * inner + e];
          if (total_less(ka, kb)) return -1;
          if (total_less(kb, ka)) return 1;
        }
      return 0;
    };
    // Stable, so each group starts with its first occurrence.
    std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return compare(a, b) < 0; });
    for (std::int64_t i = 0; i < n; ++i) {
      if (i > 0 && compare(order[i - 1], order[i]) != 0) ++groups;
      group_of_sorted[i] = groups;
    }
    if (n > 0) ++groups;
  });
  // Per group: first occurrence and count; then the output position of each group.
  std::vector<std::int64_t> first(static_cast<std::size_t>(groups), -1), counts(static_cast<std::size_t>(groups), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t g = group_of_sorted[i];
    if (first[g] < 0) first[g] = order[i];
    ++counts[g];
  }
  std::vector<std::int64_t> out_order(static_cast<std::size_t>(groups));  // groups in output order
  std::iota(out_order.begin(), out_order.end(), 0);
  if (!sorted) std::sort(out_order.begin(), out_order.end(), [&](std::int64_t a, std::int64_t b) { return first[a] < first[b]; });
  std::vector<std::int64_t> position(static_cast<std::size_t>(groups));
  for (std::int64_t p = 0; p < groups; ++p) position[out_order[p]] = p;

  Shape y_shape = in_shape;
  y_shape[axis] = groups;
  Tensor& y = ctx.allocate_output(0, x.dtype(), y_shape);
  const std::size_t chunk = static_cast<std::size_t>(inner) * dtype_size(x.dtype());
  for (std::int64_t o = 0; o < outer && chunk > 0; ++o)
    for (std::int64_t p = 0; p < groups; ++p)
      std::memcpy(bytes_of(y) + (o * groups + p) * chunk, bytes_of(x) + (o * n + first[out_order[p]]) * chunk, chunk);
  if (ctx.wants_output(1)) {
    std::int64_t* pi = ctx.allocate_output(1, DType::Int64, {groups}).data<std::int64_t>();
    for (std::int64_t p = 0; p < groups; ++p) pi[p] = first[out_order[p]];
  }
  if (ctx.wants_output(2)) {
    std::int64_t* pv = ctx.allocate_output(2, DType::Int64, {n}).data<std::int64_t>();
    for (std::int64_t i = 0; i < n; ++i) pv[order[i]] = position[group_of_sorted[i]];
  }
  if (ctx.wants_output(3)) {
    std::int64_t* pc = ctx.allocate_output(3, DType::Int64, {groups}).data<std::int64_t>();
    for (std::int64_t p = 0; p < groups; ++p) pc[p] = counts[out_order[p]];
  }
}

}  // namespace

void register_select_ops(OpTable& t) {
  t.add("OneHot", {one_hot, 3, 3, 9});
  t.add("TopK", {top_k, 1, 2, 1});
  t.add("NonZero", {non_zero, 1, 1, 9});
  t.add("Compress", {compress, 2, 2, 9});
  t.add("Unique", {unique, 1, 1, 11});
}

}  // namespace wpk::reference
