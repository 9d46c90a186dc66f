// Reference kernels that read or write elements at computed positions: Gather, GatherElements,
// GatherND, Scatter, ScatterElements, ScatterND. OneHot, TopK, NonZero, Compress and Unique are in
// select_ops.cpp. Every index is checked against its bound before any element moves.
#include <algorithm>

#include "backends/reference/common.hpp"
#include "backends/reference/data_movement.hpp"
#include "backends/reference/registry.hpp"

namespace wpk::reference {
namespace {

// Reads an index tensor and checks every value against `dim`, making negatives non-negative.
std::vector<std::int64_t> checked_indices(const Tensor& t, std::int64_t dim, const KernelContext& ctx) {
  std::vector<std::int64_t> idx = read_int_list(t, ctx);
  for (auto& i : idx) i = checked_index(i, dim, ctx);
  return idx;
}

// For each of `outer` blocks of `dim` chunks, the chunks idx names, in order. W: the chunk's
// bytes when known at compile time (0: `chunk`).
template <std::size_t W>
void gather_chunks(const unsigned char* data, std::int64_t outer, std::int64_t dim, const std::vector<std::int64_t>& idx,
                   unsigned char* dst, std::size_t chunk = W) {
  for (std::int64_t o = 0; o < outer; ++o) {
    const unsigned char* src = data + o * dim * static_cast<std::int64_t>(chunk);
    for (auto i : idx) {
      std::memcpy(dst, src + i * static_cast<std::int64_t>(chunk), W ? W : chunk);
      dst += chunk;
    }
  }
}

void gather(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  if (data.rank() == 0) ctx.fail(ErrorCode::InvalidArgument, "data must have rank >= 1");
  const int axis = normalize_axis(ctx.node().attr_int("axis", 0), data.rank(), ctx);
  const std::int64_t dim = data.shape()[axis];
  const auto idx = checked_indices(indices, dim, ctx);
  Shape out(data.shape().begin(), data.shape().begin() + axis);
  out.insert(out.end(), indices.shape().begin(), indices.shape().end());
  out.insert(out.end(), data.shape().begin() + axis + 1, data.shape().end());
  Tensor& y = ctx.allocate_output(0, data.dtype(), out);
  const std::int64_t outer = dims_product(data.shape(), 0, axis);
  const std::size_t chunk = static_cast<std::size_t>(dims_product(data.shape(), axis + 1, data.shape().size())) *
                            dtype_size(data.dtype());
  if (chunk == 0) return;
  switch (chunk) {  // one element a copy (a column of a table): copies of a size known here
    case 1: return gather_chunks<1>(bytes_of(data), outer, dim, idx, bytes_of(y));
    case 2: return gather_chunks<2>(bytes_of(data), outer, dim, idx, bytes_of(y));
    case 4: return gather_chunks<4>(bytes_of(data), outer, dim, idx, bytes_of(y));
    case 8: return gather_chunks<8>(bytes_of(data), outer, dim, idx, bytes_of(y));
    default: return gather_chunks<0>(bytes_of(data), outer, dim, idx, bytes_of(y), chunk);
  }
}

// Checks an indices tensor used per element against data: same rank, and no larger than data
// on every axis but `axis`, so positions derived from it stay inside data.
void check_elementwise_indices(const Tensor& data, const Tensor& indices, int axis, const KernelContext& ctx) {
  bool ok = indices.rank() == data.rank();
  for (int a = 0; ok && a < data.rank(); ++a) ok = a == axis || indices.shape()[a] <= data.shape()[a];
  if (!ok)
    ctx.fail(ErrorCode::InvalidArgument, "indices shape " + shape_to_string(indices.shape()) + " does not fit data shape " +
                                             shape_to_string(data.shape()) + " (axis " + std::to_string(axis) + ")");
}

void gather_elements(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  if (data.rank() == 0) ctx.fail(ErrorCode::InvalidArgument, "data must have rank >= 1");
  const int axis = normalize_axis(ctx.node().attr_int("axis", 0), data.rank(), ctx);
  check_elementwise_indices(data, indices, axis, ctx);
  const auto idx = checked_indices(indices, data.shape()[axis], ctx);
  Tensor& y = ctx.allocate_output(0, data.dtype(), indices.shape());
  auto strides = contiguous_strides(data.shape());
  const std::int64_t axis_stride = strides[axis];
  strides[axis] = 0;  // the axis coordinate comes from the index value instead
  dispatch_width(data.dtype(), ctx, [&](auto w) {
    constexpr std::size_t W = decltype(w)::value;
    const unsigned char* src = bytes_of(data);
    unsigned char* dst = bytes_of(y);
    std::size_t k = 0;
    for_each_index(indices.shape(), {strides}, [&](const std::int64_t* off) {
      copy_elem<W>(dst + k * W, src + (off[0] + idx[k] * axis_stride) * W);
      ++k;
    });
  });
}

// Where GatherND's and ScatterND's index tuples point: `m` leading coordinates within
// data.shape()[first, first + m), and the contiguous slice of `slice` elements they select.
struct TupleLayout {
  std::int64_t m = 0;
  std::int64_t slice = 1;
  std::vector<std::int64_t> strides;  // element strides of those m coordinates
};

TupleLayout tuple_layout(const Shape& data_shape, std::size_t first, std::int64_t m) {
  TupleLayout t;
  t.m = m;
  t.slice = dims_product(data_shape, first + m, data_shape.size());
  t.strides.resize(static_cast<std::size_t>(m));
  std::int64_t s = t.slice;
  for (std::int64_t j = m - 1; j >= 0; --j) {
    t.strides[j] = s;
    s *= data_shape[first + j];
  }
  return t;
}

// Element offset of one index tuple (relative to its batch), every coordinate checked.
std::int64_t tuple_offset(const std::int64_t* tuple, const TupleLayout& t, const Shape& data_shape, std::size_t first,
                          const KernelContext& ctx) {
  std::int64_t off = 0;
  for (std::int64_t j = 0; j < t.m; ++j) off += checked_index(tuple[j], data_shape[first + j], ctx) * t.strides[j];
  return off;
}

void gather_nd(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const std::int64_t b = ctx.node().attr_int("batch_dims", 0);
  const int r = data.rank(), q = indices.rank();
  if (r < 1 || q < 1) ctx.fail(ErrorCode::InvalidArgument, "data and indices must have rank >= 1");
  if (b < 0 || b >= std::min(r, q)) ctx.fail(ErrorCode::InvalidModel, "batch_dims " + std::to_string(b) + " is out of range");
  const std::int64_t m = indices.shape()[q - 1];
  if (m > r - b)
    ctx.fail(ErrorCode::InvalidArgument, "index tuples of length " + std::to_string(m) + " exceed data rank " +
                                             std::to_string(r) + " minus batch_dims " + std::to_string(b));
  for (std::int64_t a = 0; a < b; ++a)
    if (data.shape()[a] != indices.shape()[a])
      ctx.fail(ErrorCode::InvalidArgument, "batch dimensions of data " + shape_to_string(data.shape()) + " and indices " +
                                               shape_to_string(indices.shape()) + " differ");
  const std::size_t ub = static_cast<std::size_t>(b);
  Shape out(indices.shape().begin(), indices.shape().end() - 1);
  out.insert(out.end(), data.shape().begin() + b + m, data.shape().end());
  const auto idx = read_int_list(indices, ctx);
  Tensor& y = ctx.allocate_output(0, data.dtype(), out);
  const TupleLayout lay = tuple_layout(data.shape(), ub, m);
  const std::int64_t batches = dims_product(data.shape(), 0, ub);
  const std::int64_t batch_size = dims_product(data.shape(), ub, data.shape().size());
  const std::int64_t per_batch = dims_product(indices.shape(), ub, q - 1);
  const std::size_t elem = dtype_size(data.dtype());
  const std::size_t chunk = static_cast<std::size_t>(lay.slice) * elem;
  unsigned char* dst = bytes_of(y);
  for (std::int64_t bi = 0; bi < batches; ++bi) {
    for (std::int64_t n = 0; n < per_batch; ++n) {
      const std::int64_t off = tuple_offset(idx.data() + (bi * per_batch + n) * m, lay, data.shape(), ub, ctx);
      if (chunk) std::memcpy(dst, bytes_of(data) + (bi * batch_size + off) * elem, chunk);
      dst += chunk;
    }
  }
}

// --- scatter ---------------------------------------------------------------------------------

enum class Reduction { None, Add, Mul, Max, Min };

Reduction reduction_of(const KernelContext& ctx) {
  const std::string r = ctx.node().attr_string("reduction", "none");
  if (r == "none") return Reduction::None;
  if (r == "add") return Reduction::Add;
  if (r == "mul") return Reduction::Mul;
  if (r == "max") return Reduction::Max;
  if (r == "min") return Reduction::Min;
  ctx.fail(ErrorCode::Unsupported, "reduction '" + r + "' is not supported");
}

template <typename T>
T reduce(Reduction red, T a, T b) {
  switch (red) {
    case Reduction::None: return b;
    case Reduction::Max: return std::max(a, b);
    case Reduction::Min: return std::min(a, b);
    default: break;
  }
  if constexpr (std::is_integral_v<T>) {
    // Wrap around as two's complement instead of overflowing into undefined behaviour.
    const std::uint64_t ua = static_cast<std::uint64_t>(a), ub = static_cast<std::uint64_t>(b);
    return static_cast<T>(red == Reduction::Add ? ua + ub : ua * ub);
  } else {
    return red == Reduction::Add ? T(a + b) : T(a * b);
  }
}

// Calls apply(dst_offset, src_offset, count) for each update; applies it to `y` as a plain copy
// (any dtype) or as a typed reduction (numeric dtypes).
template <typename ForEachUpdate>
void apply_updates(KernelContext& ctx, Reduction red, Tensor& y, const Tensor& updates, ForEachUpdate&& for_each_update) {
  if (red == Reduction::None) {
    const std::size_t elem = dtype_size(y.dtype());
    for_each_update([&](std::int64_t dst, std::int64_t src, std::int64_t n) {
      std::memcpy(bytes_of(y) + dst * elem, bytes_of(updates) + src * elem, static_cast<std::size_t>(n) * elem);
    });
    return;
  }
  dispatch_numeric(y.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* py = y.data<T>();
    const T* pu = updates.data<T>();
    for_each_update([&](std::int64_t dst, std::int64_t src, std::int64_t n) {
      for (std::int64_t i = 0; i < n; ++i) py[dst + i] = reduce(red, py[dst + i], pu[src + i]);
    });
  });
}

void check_updates(const Tensor& data, const Tensor& updates, const Shape& want, const KernelContext& ctx) {
  if (updates.dtype() != data.dtype())
    ctx.fail(ErrorCode::InvalidModel, std::string("updates are ") + dtype_name(updates.dtype()) + " but data is " +
                                          dtype_name(data.dtype()));
  if (updates.shape() != want)
    ctx.fail(ErrorCode::InvalidArgument, "updates shape " + shape_to_string(updates.shape()) + " should be " + shape_to_string(want));
}

void scatter_elements(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  if (data.rank() == 0) ctx.fail(ErrorCode::InvalidArgument, "data must have rank >= 1");
  const int axis = normalize_axis(ctx.node().attr_int("axis", 0), data.rank(), ctx);
  const Reduction red = reduction_of(ctx);
  check_elementwise_indices(data, indices, axis, ctx);
  check_updates(data, updates, indices.shape(), ctx);
  const auto idx = checked_indices(indices, data.shape()[axis], ctx);
  Tensor& y = ctx.allocate_output(0, data.dtype(), data.shape());
  if (y.nbytes()) std::memcpy(y.raw(), data.raw(), y.nbytes());
  auto strides = contiguous_strides(data.shape());
  const std::int64_t axis_stride = strides[axis];
  strides[axis] = 0;
  apply_updates(ctx, red, y, updates, [&](auto&& apply) {
    std::int64_t k = 0;
    for_each_index(indices.shape(), {strides}, [&](const std::int64_t* off) {
      apply(off[0] + idx[k] * axis_stride, k, 1);
      ++k;
    });
  });
}

void scatter_nd(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  const int r = data.rank(), q = indices.rank();
  if (r < 1 || q < 1) ctx.fail(ErrorCode::InvalidArgument, "data and indices must have rank >= 1");
  const Reduction red = reduction_of(ctx);
  const std::int64_t m = indices.shape()[q - 1];
  if (m > r)
    ctx.fail(ErrorCode::InvalidArgument, "index tuples of length " + std::to_string(m) + " exceed data rank " + std::to_string(r));
  Shape want(indices.shape().begin(), indices.shape().end() - 1);
  want.insert(want.end(), data.shape().begin() + m, data.shape().end());
  check_updates(data, updates, want, ctx);
  const auto idx = read_int_list(indices, ctx);
  const TupleLayout lay = tuple_layout(data.shape(), 0, m);
  const std::int64_t n_tuples = dims_product(indices.shape(), 0, q - 1);
  // Every tuple is checked before the output is touched.
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(n_tuples));
  for (std::int64_t n = 0; n < n_tuples; ++n) offsets[n] = tuple_offset(idx.data() + n * m, lay, data.shape(), 0, ctx);
  Tensor& y = ctx.allocate_output(0, data.dtype(), data.shape());
  if (y.nbytes()) std::memcpy(y.raw(), data.raw(), y.nbytes());
  apply_updates(ctx, red, y, updates, [&](auto&& apply) {
    for (std::int64_t n = 0; n < n_tuples; ++n) apply(offsets[n], n * lay.slice, lay.slice);
  });
}

}  // namespace

void register_index_ops(OpTable& t) {
  t.add("Gather", {gather, 2, 2, 1});
  t.add("GatherElements", {gather_elements, 2, 2, 11});
  t.add("GatherND", {gather_nd, 2, 2, 11});
  t.add("Scatter", {scatter_elements, 3, 3, 9});
  t.add("ScatterElements", {scatter_elements, 3, 3, 11});
  t.add("ScatterND", {scatter_nd, 3, 3, 11});
  register_select_ops(t);
}

}  // namespace wpk::reference
