#include "backends/reference/common.hpp"

#include <algorithm>

namespace wpk::reference {

int normalize_axis(std::int64_t axis, int rank, const KernelContext& ctx) {
  // A rank-0 tensor has no axis at all: callers index shape[axis] with the result.
  if (axis < -rank || axis >= rank)
    ctx.fail(ErrorCode::InvalidModel, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

std::vector<std::int64_t> contiguous_strides(const Shape& shape) {
  std::vector<std::int64_t> s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

Shape broadcast_shapes(const std::vector<Shape>& shapes, const KernelContext& ctx) {
  std::size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const auto& s : shapes) {
    const std::size_t off = rank - s.size();
    for (std::size_t i = 0; i < s.size(); ++i) {
      const std::int64_t d = s[i];
      std::int64_t& o = out[off + i];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::string all;
      for (const auto& t : shapes) all += (all.empty() ? "" : " and ") + shape_to_string(t);
      ctx.fail(ErrorCode::InvalidArgument, "shapes " + all + " cannot be broadcast together");
    }
  }
  return out;
}

std::vector<std::int64_t> broadcast_strides(const Shape& in, const Shape& out_shape) {
  std::vector<std::int64_t> strides(out_shape.size(), 0);
  const auto cs = contiguous_strides(in);
  const std::size_t off = out_shape.size() - in.size();
  for (std::size_t i = 0; i < in.size(); ++i) strides[off + i] = in[i] == 1 ? 0 : cs[i];
  return strides;
}

std::vector<std::int64_t> read_int_list(const Tensor& t, const KernelContext& ctx) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(t.numel()));
  if (t.dtype() == DType::Int64) {
    std::copy(t.data<std::int64_t>(), t.data<std::int64_t>() + t.numel(), v.begin());
  } else if (t.dtype() == DType::Int32) {
    std::copy(t.data<std::int32_t>(), t.data<std::int32_t>() + t.numel(), v.begin());
  } else {
    ctx.fail(ErrorCode::InvalidModel, std::string("expected an int32/int64 tensor, got ") + dtype_name(t.dtype()));
  }
  return v;
}

std::vector<std::int64_t> read_shape(const Tensor& t, const KernelContext& ctx) {
  check_rank(static_cast<std::size_t>(t.numel()), ctx.limits(), node_label(ctx.node()) + "the shape it is given: ");
  return read_int_list(t, ctx);
}

double read_scalar_as_double(const Tensor& t, const KernelContext& ctx) {
  if (t.numel() < 1) ctx.fail(ErrorCode::InvalidModel, "expected a scalar, got an empty tensor");
  double v = 0;
  if (t.dtype() == DType::Float16) return half_to_float(t.data<Float16Bits>()[0]);
  if (t.dtype() == DType::Bool) return t.data<bool>()[0] ? 1.0 : 0.0;
  dispatch_numeric(t.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    v = static_cast<double>(t.data<T>()[0]);
  });
  return v;
}

}  // namespace wpk::reference
