#pragma once
// Dtype-agnostic data movement shared by the shape and index kernels. These kernels only move
// whole elements, so they work on element widths (1, 2, 4 or 8 bytes) rather than dtypes: every
// storable dtype, bool and 16-bit floats included, goes through the same code.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/reference/common.hpp"
#include "backends/reference/registry.hpp"

namespace wpk::reference {

using Bytes = std::vector<unsigned char>;

// Calls f(std::integral_constant<std::size_t, W>{}) where W is the element width of `dtype`.
template <typename F>
void dispatch_width(DType dtype, const KernelContext& ctx, F&& f) {
  switch (dtype_size(dtype)) {
    case 1: return f(std::integral_constant<std::size_t, 1>{});
    case 2: return f(std::integral_constant<std::size_t, 2>{});
    case 4: return f(std::integral_constant<std::size_t, 4>{});
    case 8: return f(std::integral_constant<std::size_t, 8>{});
    default: ctx.fail(ErrorCode::Unsupported, std::string("dtype ") + dtype_name(dtype) + " is not supported");
  }
}

inline const unsigned char* bytes_of(const Tensor& t) { return static_cast<const unsigned char*>(t.raw()); }
inline unsigned char* bytes_of(Tensor& t) { return static_cast<unsigned char*>(t.raw()); }

// Copies one element of W bytes; memcpy keeps it free of aliasing issues and compiles to a move.
template <std::size_t W>
inline void copy_elem(unsigned char* dst, const unsigned char* src) {
  std::memcpy(dst, src, W);
}

// Fills `dst` (contiguous, any shape of the same rank as maps.size()) from `src`: the element at
// output index (i0, ..., in) is source element maps[0][i0] + ... + maps[n][in] (offsets in
// elements), or the element `fill` when any maps[a][ia] is negative. Transpose, Slice, Tile,
// Expand and Pad are all this copy with different maps. Linear in the output size.
void copy_by_axis_maps(const Tensor& src, Tensor& dst, const std::vector<std::vector<std::int64_t>>& maps,
                       const unsigned char* fill, const KernelContext& ctx);

// `parts` (one dtype; equal shapes but along `axis`) one after another along `axis` into `out`,
// whose shape is theirs with the lengths along `axis` summed. Concat, ConcatFromSequence and the
// stacked outputs of Loop and Scan (each part given a length-1 axis) are this copy.
void concat_into(const std::vector<const Tensor*>& parts, int axis, Tensor& out);

// x's elements [start, start + len) along `axis` as a tensor of its own, the axis kept (length
// len) or, with keep_axis false and len 1, dropped. SplitToSequence and Scan's slices.
Tensor slab(const Tensor& x, int axis, std::int64_t start, std::int64_t len, bool keep_axis);

// `src` permuted by `perm` (output axis i is input axis perm[i]) into a new output tensor `out`.
void transpose_into(const Tensor& src, const std::vector<int>& perm, Tensor& out, const KernelContext& ctx);

// One element of `dtype` holding `v` (converted as a cast would, clamped into integer ranges).
Bytes scalar_bytes(DType dtype, double v, const KernelContext& ctx);

// a * b for dimensions, failing instead of overflowing.
std::int64_t checked_dim_mul(std::int64_t a, std::int64_t b, const KernelContext& ctx);

// `idx` in [-dim, dim) made non-negative; otherwise fails InvalidArgument naming the value.
inline std::int64_t checked_index(std::int64_t idx, std::int64_t dim, const KernelContext& ctx,
                                  const char* what = "index") {
  if (idx < -dim || idx >= dim)
    ctx.fail(ErrorCode::InvalidArgument, std::string(what) + " " + std::to_string(idx) + " is out of range [" +
                                             std::to_string(-dim) + ", " + std::to_string(dim - 1) + "]");
  return idx < 0 ? idx + dim : idx;
}

// Product of shape[begin, end).
inline std::int64_t dims_product(const Shape& shape, std::size_t begin, std::size_t end) {
  std::int64_t n = 1;
  for (std::size_t i = begin; i < end && i < shape.size(); ++i) n *= shape[i];
  return n;
}

// The int tensor input i as a list, or the int list attribute `attr` for opsets before the one
// where it became an input. `present` tells whether either was given.
std::vector<std::int64_t> ints_from_input_or_attr(const KernelContext& ctx, std::size_t input, const char* attr,
                                                  std::int64_t input_since_opset, bool* present);

// Axes normalized into [0, rank), failing on duplicates or out-of-range values.
std::vector<int> normalize_axes(const std::vector<std::int64_t>& axes, int rank, const KernelContext& ctx);

// Kernel groups split out of shape_ops.cpp and index_ops.cpp; registered from those files.
void register_layout_ops(OpTable& t);  // layout_ops.cpp
void register_select_ops(OpTable& t);  // select_ops.cpp

}  // namespace wpk::reference
