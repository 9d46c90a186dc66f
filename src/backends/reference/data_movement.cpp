#include "backends/reference/data_movement.hpp"

#include <cmath>
#include <cstring>
#include <limits>

namespace wpk::reference {

namespace {

template <std::size_t W>
void copy_maps_impl(const unsigned char* src, unsigned char* dst, const Shape& shape,
                    const std::vector<std::vector<std::int64_t>>& maps, const unsigned char* fill,
                    const KernelContext& ctx) {
  const int rank = static_cast<int>(shape.size());
  for (auto d : shape)
    if (d == 0) return;
  auto put_fill = [&](unsigned char* at) {
    if (!fill) ctx.fail(ErrorCode::Internal, "element copy has no fill value for an out-of-range position");
    copy_elem<W>(at, fill);
  };
  if (rank == 0) {
    copy_elem<W>(dst, src);
    return;
  }
  const std::vector<std::int64_t>& last = maps[rank - 1];
  const std::int64_t inner = shape[rank - 1];
  // Rows whose last-axis map is a run of consecutive offsets copy with one memcpy.
  bool contiguous = last[0] >= 0;
  for (std::int64_t i = 1; i < inner && contiguous; ++i) contiguous = last[i] == last[0] + i;

  // Odometer over all axes but the last, with the summed offset and the count of fill axes
  // updated only for the axes that change, so each row costs O(1) amortized.
  std::vector<std::int64_t> idx(rank, 0);
  std::int64_t base = 0;
  int n_fill = 0;
  auto add = [&](int a, std::int64_t i, int sign) {
    const std::int64_t m = maps[a][i];
    if (m < 0) n_fill += sign;
    else base += sign * m;
  };
  for (int a = 0; a + 1 < rank; ++a) add(a, 0, +1);
  unsigned char* out = dst;
  while (true) {
    if (n_fill > 0) {
      for (std::int64_t i = 0; i < inner; ++i) put_fill(out + i * W);
    } else if (contiguous) {
      std::memcpy(out, src + (base + last[0]) * W, static_cast<std::size_t>(inner) * W);
    } else {
      for (std::int64_t i = 0; i < inner; ++i) {
        const std::int64_t m = last[i];
        if (m < 0) put_fill(out + i * W);
        else copy_elem<W>(out + i * W, src + (base + m) * W);
      }
    }
    out += inner * W;
    int a = rank - 2;
    for (; a >= 0; --a) {
      add(a, idx[a], -1);
      if (++idx[a] < shape[a]) {
        add(a, idx[a], +1);
        break;
      }
      idx[a] = 0;
      add(a, 0, +1);
    }
    if (a < 0) return;
  }
}

}  // namespace

void copy_by_axis_maps(const Tensor& src, Tensor& dst, const std::vector<std::vector<std::int64_t>>& maps,
                       const unsigned char* fill, const KernelContext& ctx) {
  if (static_cast<int>(maps.size()) != dst.rank())
    ctx.fail(ErrorCode::Internal, "element copy given " + std::to_string(maps.size()) + " axis maps for rank " +
                                      std::to_string(dst.rank()));
  dispatch_width(dst.dtype(), ctx, [&](auto w) {
    copy_maps_impl<decltype(w)::value>(bytes_of(src), bytes_of(dst), dst.shape(), maps, fill, ctx);
  });
}

void transpose_into(const Tensor& src, const std::vector<int>& perm, Tensor& out, const KernelContext& ctx) {
  const auto strides = contiguous_strides(src.shape());
  std::vector<std::vector<std::int64_t>> maps(perm.size());
  for (std::size_t a = 0; a < perm.size(); ++a) {
    const std::int64_t n = src.shape()[perm[a]];
    maps[a].resize(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) maps[a][i] = i * strides[perm[a]];
  }
  copy_by_axis_maps(src, out, maps, nullptr, ctx);
}

namespace {
template <typename T>
T convert_double(double v) {
  if constexpr (std::is_same_v<T, Float16Bits>) {
    return float_to_half(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, BFloat16Bits>) {
    return float_to_bfloat16(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    // A double outside the integer range is undefined behaviour to cast; clamp it first.
    if (std::isnan(v)) return T(0);
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}
}  // namespace

Bytes scalar_bytes(DType dtype, double v, const KernelContext& ctx) {
  Bytes b(dtype_size(dtype));
  dispatch_any(dtype, ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T x = convert_double<T>(v);
    std::memcpy(b.data(), &x, sizeof(T));
  });
  return b;
}

std::int64_t checked_dim_mul(std::int64_t a, std::int64_t b, const KernelContext& ctx) {
  std::int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r))
    ctx.fail(ErrorCode::InvalidArgument,
             "dimension " + std::to_string(a) + " x " + std::to_string(b) + " is negative or too large");
  return r;
}

std::vector<std::int64_t> ints_from_input_or_attr(const KernelContext& ctx, std::size_t input, const char* attr,
                                                  std::int64_t input_since_opset, bool* present) {
  if (ctx.opset() >= input_since_opset || ctx.has_input(input)) {
    *present = ctx.has_input(input);
    return *present ? read_int_list(ctx.input(input), ctx) : std::vector<std::int64_t>{};
  }
  const Attribute* a = ctx.node().find_attr(attr);
  *present = a != nullptr;
  if (!a) return {};
  if (a->kind() != Attribute::Kind::Ints)
    ctx.fail(ErrorCode::InvalidModel, std::string("attribute '") + attr + "' must be a list of ints");
  return a->ints();
}

std::vector<int> normalize_axes(const std::vector<std::int64_t>& axes, int rank, const KernelContext& ctx) {
  std::vector<int> out;
  std::vector<bool> seen(static_cast<std::size_t>(rank), false);
  for (auto a : axes) {
    if (a < -rank || a >= rank)
      ctx.fail(ErrorCode::InvalidModel, "axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
    const int n = static_cast<int>(a < 0 ? a + rank : a);
    if (seen[n]) ctx.fail(ErrorCode::InvalidModel, "axis " + std::to_string(a) + " is repeated");
    seen[n] = true;
    out.push_back(n);
  }
  return out;
}

void concat_into(const std::vector<const Tensor*>& parts, int axis, Tensor& out) {
  const Shape& shape = out.shape();
  const std::size_t elem = dtype_size(out.dtype());
  const std::int64_t outer = dims_product(shape, 0, static_cast<std::size_t>(axis));
  const std::int64_t inner = dims_product(shape, static_cast<std::size_t>(axis) + 1, shape.size());
  unsigned char* dst = bytes_of(out);
  for (std::int64_t o = 0; o < outer; ++o)
    for (const Tensor* t : parts) {
      const std::size_t chunk = static_cast<std::size_t>(t->shape()[static_cast<std::size_t>(axis)] * inner) * elem;
      if (chunk == 0) continue;
      std::memcpy(dst, bytes_of(*t) + o * chunk, chunk);
      dst += chunk;
    }
}

Tensor slab(const Tensor& x, int axis, std::int64_t start, std::int64_t len, bool keep_axis) {
  Shape shape = x.shape();
  const std::size_t a = static_cast<std::size_t>(axis);
  const std::size_t elem = dtype_size(x.dtype());
  const std::int64_t outer = dims_product(shape, 0, a);
  const std::size_t inner = static_cast<std::size_t>(dims_product(shape, a + 1, shape.size())) * elem;
  const std::int64_t full = shape[a];
  shape[a] = len;
  if (!keep_axis) shape.erase(shape.begin() + axis);
  Tensor out = Tensor::zeros(x.dtype(), shape);
  const unsigned char* src = bytes_of(x);
  unsigned char* dst = bytes_of(out);
  const std::size_t bytes = static_cast<std::size_t>(len) * inner;
  for (std::int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * bytes, src + (o * full + start) * inner, bytes);
  return out;
}

}  // namespace wpk::reference
