#pragma once
// Shared helpers for reference kernels: dtype dispatch, axis handling, strides, broadcasting.
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backends/kernel.hpp"
#include "core/half.hpp"

namespace wpk::reference {

template <typename T> struct TypeTag { using type = T; };

// Calls f(TypeTag<T>{}) for the C++ type of `dtype` among the listed groups; fails on others.
// Float16/BFloat16 are not dispatched: kernels that accept them convert through float first.
template <typename F>
void dispatch_float(DType dtype, const KernelContext& ctx, F&& f) {
  switch (dtype) {
    case DType::Float32: return f(TypeTag<float>{});
    case DType::Float64: return f(TypeTag<double>{});
    default: ctx.fail(ErrorCode::Unsupported, std::string("dtype ") + dtype_name(dtype) + " is not supported");
  }
}

template <typename F>
void dispatch_integer(DType dtype, const KernelContext& ctx, F&& f) {
  switch (dtype) {
    case DType::Int8: return f(TypeTag<std::int8_t>{});
    case DType::Int16: return f(TypeTag<std::int16_t>{});
    case DType::Int32: return f(TypeTag<std::int32_t>{});
    case DType::Int64: return f(TypeTag<std::int64_t>{});
    case DType::UInt8: return f(TypeTag<std::uint8_t>{});
    case DType::UInt16: return f(TypeTag<std::uint16_t>{});
    case DType::UInt32: return f(TypeTag<std::uint32_t>{});
    case DType::UInt64: return f(TypeTag<std::uint64_t>{});
    default: ctx.fail(ErrorCode::Unsupported, std::string("dtype ") + dtype_name(dtype) + " is not supported");
  }
}

// Float and integer types (no bool).
template <typename F>
void dispatch_numeric(DType dtype, const KernelContext& ctx, F&& f) {
  if (dtype == DType::Float32 || dtype == DType::Float64) return dispatch_float(dtype, ctx, f);
  return dispatch_integer(dtype, ctx, f);
}

// Every storable type, bool and 16-bit floats included (for data movement: copy, gather...).
template <typename F>
void dispatch_any(DType dtype, const KernelContext& ctx, F&& f) {
  switch (dtype) {
    case DType::Bool: return f(TypeTag<bool>{});
    case DType::Float16: return f(TypeTag<Float16Bits>{});
    case DType::BFloat16: return f(TypeTag<BFloat16Bits>{});
    default: return dispatch_numeric(dtype, ctx, f);
  }
}

// Normalizes a possibly negative axis into [0, rank); fails naming the node when out of range.
int normalize_axis(std::int64_t axis, int rank, const KernelContext& ctx);

// Row-major strides (in elements).
std::vector<std::int64_t> contiguous_strides(const Shape& shape);

// numpy-style broadcast of two or more shapes; fails naming the node when incompatible.
Shape broadcast_shapes(const std::vector<Shape>& shapes, const KernelContext& ctx);

// Strides of `in` viewed in `out_shape` under broadcasting: 0 where `in` has size 1 (or is
// missing a leading dimension).
std::vector<std::int64_t> broadcast_strides(const Shape& in, const Shape& out_shape);

// Reads an int tensor (int32 or int64) as int64 values: shapes, axes, indices given as inputs.
std::vector<std::int64_t> read_int_list(const Tensor& t, const KernelContext& ctx);
// read_int_list for a tensor holding a shape (one entry per dim): longer than the session's
// rank limit is an Error (ResourceExhausted) before any of it is read.
std::vector<std::int64_t> read_shape(const Tensor& t, const KernelContext& ctx);
// Reads a float/double/int tensor scalar as double.
double read_scalar_as_double(const Tensor& t, const KernelContext& ctx);

// Walks every index of `shape` in row-major order, keeping for each operand its flat offset
// under that operand's strides. `visit(offsets)` gets the current offsets (one per operand).
// Linear in the element count; the inner dimension is a tight loop.
template <typename Visit>
void for_each_index(const Shape& shape, const std::vector<std::vector<std::int64_t>>& strides,
                    Visit&& visit) {
  const std::size_t n_ops = strides.size();
  const int rank = static_cast<int>(shape.size());
  std::vector<std::int64_t> offsets(n_ops, 0);
  for (auto d : shape)
    if (d == 0) return;
  if (rank == 0) {
    visit(offsets.data());
    return;
  }
  std::vector<std::int64_t> idx(rank, 0);
  std::vector<std::int64_t> row(n_ops, 0);
  const std::int64_t inner = shape[rank - 1];
  while (true) {
    row = offsets;
    for (std::int64_t i = 0; i < inner; ++i) {
      visit(row.data());
      for (std::size_t k = 0; k < n_ops; ++k) row[k] += strides[k][rank - 1];
    }
    int d = rank - 2;
    for (; d >= 0; --d) {
      ++idx[d];
      for (std::size_t k = 0; k < n_ops; ++k) offsets[k] += strides[k][d];
      if (idx[d] < shape[d]) break;
      for (std::size_t k = 0; k < n_ops; ++k) offsets[k] -= strides[k][d] * shape[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

}  // namespace wpk::reference
