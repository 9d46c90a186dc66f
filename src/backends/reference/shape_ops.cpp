// Reference kernels that change a tensor's shape or move whole elements: Reshape, Flatten,
// Squeeze, Unsqueeze, Transpose, Concat, Split, Slice, Tile, Expand, Shape, Size. The
// remaining layout ops (Pad, DepthToSpace, Constant...) are in layout_ops.cpp.
//
// Every kernel here works for every dtype: it moves elements by width, never by value. Ops that
// only relabel the shape return a view sharing the input's bytes.
#include <algorithm>
#include <limits>
#include <numeric>

#include "backends/reference/common.hpp"
#include "backends/reference/data_movement.hpp"
#include "backends/reference/registry.hpp"

namespace wpk::reference {
namespace {

// --- shape-only ops: views ------------------------------------------------------------------

void reshape(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& shape_t = ctx.input(1);
  if (shape_t.rank() != 1) ctx.fail(ErrorCode::InvalidModel, "shape input must be 1-D, got rank " + std::to_string(shape_t.rank()));
  const auto spec = read_shape(shape_t, ctx);
  const bool allowzero = ctx.node().attr_int("allowzero", 0) != 0;
  Shape out(spec.size());
  int infer = -1;
  bool has_zero = false;
  std::int64_t known = 1;
  for (std::size_t i = 0; i < spec.size(); ++i) {
    std::int64_t v = spec[i];
    if (v == -1) {
      if (infer >= 0) ctx.fail(ErrorCode::InvalidArgument, "shape " + shape_to_string(spec) + " has more than one -1");
      infer = static_cast<int>(i);
      continue;
    }
    if (v < -1) ctx.fail(ErrorCode::InvalidArgument, "shape " + shape_to_string(spec) + " has invalid dimension " + std::to_string(v));
    if (v == 0) {
      has_zero = true;
      if (!allowzero) {  // 0 means "copy this dimension from the input"
        if (static_cast<int>(i) >= x.rank())
          ctx.fail(ErrorCode::InvalidArgument, "shape " + shape_to_string(spec) + " copies dimension " + std::to_string(i) +
                                                   " from an input of rank " + std::to_string(x.rank()));
        v = x.shape()[i];
      }
    }
    out[i] = v;
    known = checked_dim_mul(known, v, ctx);
  }
  if (infer >= 0) {
    if (allowzero && has_zero) ctx.fail(ErrorCode::InvalidModel, "shape " + shape_to_string(spec) + " has both 0 and -1 with allowzero=1");
    if (known == 0 || x.numel() % known != 0)
      ctx.fail(ErrorCode::InvalidArgument, "cannot reshape " + shape_to_string(x.shape()) + " to " + shape_to_string(spec));
    out[infer] = x.numel() / known;
  } else if (known != x.numel()) {
    ctx.fail(ErrorCode::InvalidArgument, "cannot reshape " + shape_to_string(x.shape()) + " (" + std::to_string(x.numel()) +
                                             " elements) to " + shape_to_string(out));
  }
  ctx.set_output(0, x.reshaped(out));
}

void flatten(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int r = x.rank();
  const std::int64_t axis_attr = ctx.node().attr_int("axis", 1);
  // Unlike most axes, Flatten's may equal the rank.
  if (axis_attr < -r || axis_attr > r)
    ctx.fail(ErrorCode::InvalidModel, "axis " + std::to_string(axis_attr) + " is out of range for rank " + std::to_string(r));
  const std::size_t axis = static_cast<std::size_t>(axis_attr < 0 ? axis_attr + r : axis_attr);
  ctx.set_output(0, x.reshaped({dims_product(x.shape(), 0, axis), dims_product(x.shape(), axis, x.shape().size())}));
}

void squeeze(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  bool given = false;
  const auto axes_list = ints_from_input_or_attr(ctx, 1, "axes", 13, &given);
  std::vector<bool> drop(static_cast<std::size_t>(x.rank()), false);
  if (!given || axes_list.empty()) {  // an empty axes tensor also means "every size-1 axis"
    for (int a = 0; a < x.rank(); ++a) drop[a] = x.shape()[a] == 1;
  } else {
    for (int a : normalize_axes(axes_list, x.rank(), ctx)) {
      if (x.shape()[a] != 1)
        ctx.fail(ErrorCode::InvalidArgument, "cannot squeeze axis " + std::to_string(a) + " of size " +
                                                 std::to_string(x.shape()[a]) + " in shape " + shape_to_string(x.shape()));
      drop[a] = true;
    }
  }
  Shape out;
  for (int a = 0; a < x.rank(); ++a)
    if (!drop[a]) out.push_back(x.shape()[a]);
  ctx.set_output(0, x.reshaped(out));
}

void unsqueeze(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  bool given = false;
  const auto axes_list = ints_from_input_or_attr(ctx, 1, "axes", 13, &given);
  if (!given) ctx.fail(ErrorCode::InvalidModel, "axes are required");
  const int out_rank = x.rank() + static_cast<int>(axes_list.size());
  std::vector<bool> inserted(static_cast<std::size_t>(out_rank), false);
  for (int a : normalize_axes(axes_list, out_rank, ctx)) inserted[a] = true;
  Shape out;
  std::size_t next = 0;
  for (int a = 0; a < out_rank; ++a) out.push_back(inserted[a] ? 1 : x.shape()[next++]);
  ctx.set_output(0, x.reshaped(out));
}

// --- element-moving ops ---------------------------------------------------------------------

void transpose(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int r = x.rank();
  std::vector<std::int64_t> perm_attr(static_cast<std::size_t>(r));
  std::iota(perm_attr.rbegin(), perm_attr.rend(), 0);  // default: reverse the axes
  perm_attr = ctx.node().attr_ints("perm", perm_attr);
  if (static_cast<int>(perm_attr.size()) != r)
    ctx.fail(ErrorCode::InvalidModel, "perm " + shape_to_string(perm_attr) + " does not match rank " + std::to_string(r));
  std::vector<bool> seen(static_cast<std::size_t>(r), false);
  std::vector<int> perm;
  for (auto p : perm_attr) {
    if (p < 0 || p >= r || seen[p])
      ctx.fail(ErrorCode::InvalidModel, "perm " + shape_to_string(perm_attr) + " is not a permutation of 0.." + std::to_string(r - 1));
    seen[p] = true;
    perm.push_back(static_cast<int>(p));
  }
  Shape out(static_cast<std::size_t>(r));
  bool identity = true;
  for (int a = 0; a < r; ++a) {
    out[a] = x.shape()[perm[a]];
    identity = identity && perm[a] == a;
  }
  if (identity) return ctx.set_output(0, x);
  Tensor& y = ctx.allocate_output(0, x.dtype(), out);
  transpose_into(x, perm, y, ctx);
}

void concat(KernelContext& ctx) {
  if (!ctx.node().has_attr("axis")) ctx.fail(ErrorCode::InvalidModel, "attribute 'axis' is required");
  const Tensor& first = ctx.input(0);
  const int r = first.rank();
  if (r == 0) ctx.fail(ErrorCode::InvalidModel, "cannot concatenate scalars");
  const int axis = normalize_axis(ctx.node().attr_int("axis", 0), r, ctx);
  Shape out = first.shape();
  out[axis] = 0;
  for (std::size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    if (t.dtype() != first.dtype())
      ctx.fail(ErrorCode::InvalidModel, std::string("input 0 is ") + dtype_name(first.dtype()) + " but input " +
                                            std::to_string(i) + " is " + dtype_name(t.dtype()));
    bool ok = t.rank() == r;
    for (int a = 0; ok && a < r; ++a) ok = a == axis || t.shape()[a] == first.shape()[a];
    if (!ok)
      ctx.fail(ErrorCode::InvalidArgument, "input " + std::to_string(i) + " has shape " + shape_to_string(t.shape()) +
                                               ", incompatible with input 0 shape " + shape_to_string(first.shape()) +
                                               " along axis " + std::to_string(axis));
    if (__builtin_add_overflow(out[axis], t.shape()[axis], &out[axis]))
      ctx.fail(ErrorCode::InvalidArgument, "concatenated dimension is too large");
  }
  std::vector<const Tensor*> parts;
  for (std::size_t i = 0; i < ctx.num_inputs(); ++i) parts.push_back(&ctx.input(i));
  concat_into(parts, axis, ctx.allocate_output(0, first.dtype(), out));
}

void split(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() == 0) ctx.fail(ErrorCode::InvalidModel, "cannot split a scalar");
  const int axis = normalize_axis(ctx.node().attr_int("axis", 0), x.rank(), ctx);
  const std::int64_t dim = x.shape()[axis];
  const std::size_t n_out = ctx.num_outputs();
  if (n_out == 0) ctx.fail(ErrorCode::InvalidModel, "has no outputs");
  bool given = false;
  std::vector<std::int64_t> sizes = ints_from_input_or_attr(ctx, 1, "split", 13, &given);
  if (given && !sizes.empty()) {  // exporters write an empty split tensor for "equal parts"
    if (sizes.size() != n_out)
      ctx.fail(ErrorCode::InvalidModel, "split " + shape_to_string(sizes) + " has " + std::to_string(sizes.size()) +
                                            " entries for " + std::to_string(n_out) + " outputs");
    std::int64_t sum = 0;
    for (auto s : sizes) {
      if (s < 0 || s > dim) ctx.fail(ErrorCode::InvalidArgument, "split " + shape_to_string(sizes) + " has an invalid size");
      sum += s;
    }
    if (sum != dim)
      ctx.fail(ErrorCode::InvalidArgument, "split " + shape_to_string(sizes) + " sums to " + std::to_string(sum) +
                                               " but axis " + std::to_string(axis) + " has size " + std::to_string(dim));
  } else {
    const std::int64_t n = ctx.node().attr_int("num_outputs", static_cast<std::int64_t>(n_out));
    if (n != static_cast<std::int64_t>(n_out))
      ctx.fail(ErrorCode::InvalidModel, "num_outputs is " + std::to_string(n) + " but the node has " + std::to_string(n_out) + " outputs");
    // Equal parts; when the size does not divide evenly the last part is the smaller one.
    const std::int64_t part = (dim + n - 1) / n;
    std::int64_t left = dim;
    for (std::size_t i = 0; i < n_out; ++i) {
      sizes.push_back(std::min(part, left));
      left -= sizes.back();
    }
  }
  const std::size_t elem = dtype_size(x.dtype());
  const std::int64_t outer = dims_product(x.shape(), 0, axis);
  const std::int64_t inner = dims_product(x.shape(), axis + 1, x.shape().size());
  const std::size_t in_row = static_cast<std::size_t>(dim * inner) * elem;
  std::size_t start = 0;  // byte offset of this part within one outer row
  for (std::size_t i = 0; i < n_out; ++i) {
    const std::size_t chunk = static_cast<std::size_t>(sizes[i] * inner) * elem;
    if (ctx.wants_output(i)) {
      Shape s = x.shape();
      s[axis] = sizes[i];
      Tensor& y = ctx.allocate_output(i, x.dtype(), s);
      unsigned char* dst = bytes_of(y);
      for (std::int64_t o = 0; o < outer && chunk > 0; ++o) std::memcpy(dst + o * chunk, bytes_of(x) + o * in_row + start, chunk);
    }
    start += chunk;
  }
}

void slice(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int r = x.rank();
  std::vector<std::int64_t> starts, ends, axes_list, steps;
  bool has_axes = false;
  if (ctx.opset() < 10 && !ctx.has_input(1)) {
    if (!ctx.node().has_attr("starts") || !ctx.node().has_attr("ends"))
      ctx.fail(ErrorCode::InvalidModel, "attributes 'starts' and 'ends' are required");
    starts = ctx.node().attr_ints("starts");
    ends = ctx.node().attr_ints("ends");
    has_axes = ctx.node().has_attr("axes");
    axes_list = ctx.node().attr_ints("axes");
  } else {
    starts = read_int_list(ctx.input(1), ctx);
    ends = read_int_list(ctx.input(2), ctx);
    has_axes = ctx.has_input(3);
    if (has_axes) axes_list = read_int_list(ctx.input(3), ctx);
    if (ctx.has_input(4)) steps = read_int_list(ctx.input(4), ctx);
  }
  const std::size_t n = starts.size();
  if (!has_axes) {
    axes_list.resize(n);
    std::iota(axes_list.begin(), axes_list.end(), 0);
  }
  if (steps.empty()) steps.assign(n, 1);
  if (ends.size() != n || axes_list.size() != n || steps.size() != n)
    ctx.fail(ErrorCode::InvalidModel, "starts, ends, axes and steps must have the same length");
  const std::vector<int> axes = normalize_axes(axes_list, r, ctx);

  std::vector<std::int64_t> start(static_cast<std::size_t>(r), 0), step(static_cast<std::size_t>(r), 1);
  Shape out = x.shape();
  for (std::size_t i = 0; i < n; ++i) {
    const int a = axes[i];
    const std::int64_t dim = x.shape()[a];
    std::int64_t s = starts[i], e = ends[i], st = steps[i];
    if (st == 0) ctx.fail(ErrorCode::InvalidArgument, "slice step on axis " + std::to_string(a) + " is 0");
    // Only one element can be taken once |step| > dim, so this clamp changes nothing but
    // keeps -step from overflowing.
    st = std::max(st, -dim - 1);
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    std::int64_t count = 0;
    if (st > 0) {
      s = std::clamp<std::int64_t>(s, 0, dim);
      e = std::clamp<std::int64_t>(e, 0, dim);
      if (e > s) count = (e - s - 1) / st + 1;
    } else {
      s = std::clamp<std::int64_t>(s, 0, dim - 1);
      e = std::clamp<std::int64_t>(e, -1, dim - 1);
      if (s > e) count = (s - e - 1) / -st + 1;
    }
    start[a] = s;
    step[a] = st;
    out[a] = count;
  }
  Tensor& y = ctx.allocate_output(0, x.dtype(), out);
  if (y.numel() == 0) return;
  const auto strides = contiguous_strides(x.shape());
  std::vector<std::vector<std::int64_t>> maps(static_cast<std::size_t>(r));
  for (int a = 0; a < r; ++a)
    for (std::int64_t o = 0; o < out[a]; ++o) maps[a].push_back((start[a] + o * step[a]) * strides[a]);
  copy_by_axis_maps(x, y, maps, nullptr, ctx);
}

void tile(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto repeats = read_shape(ctx.input(1), ctx);
  const int r = x.rank();
  if (static_cast<int>(repeats.size()) != r)
    ctx.fail(ErrorCode::InvalidModel, "repeats " + shape_to_string(repeats) + " must have one entry per input axis (rank " +
                                          std::to_string(r) + ")");
  Shape out(static_cast<std::size_t>(r));
  for (int a = 0; a < r; ++a) {
    if (repeats[a] < 0) ctx.fail(ErrorCode::InvalidArgument, "repeats " + shape_to_string(repeats) + " has a negative entry");
    out[a] = checked_dim_mul(x.shape()[a], repeats[a], ctx);
  }
  Tensor& y = ctx.allocate_output(0, x.dtype(), out);
  if (y.numel() == 0) return;  // maps are only built once the output size is known to be sane
  const auto strides = contiguous_strides(x.shape());
  std::vector<std::vector<std::int64_t>> maps(static_cast<std::size_t>(r));
  for (int a = 0; a < r; ++a)
    for (std::int64_t o = 0; o < out[a]; ++o) maps[a].push_back((o % x.shape()[a]) * strides[a]);
  copy_by_axis_maps(x, y, maps, nullptr, ctx);
}

void expand(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto shape = read_shape(ctx.input(1), ctx);
  for (auto d : shape)
    if (d < 0) ctx.fail(ErrorCode::InvalidArgument, "shape " + shape_to_string(shape) + " has a negative dimension");
  const Shape out = broadcast_shapes({x.shape(), shape}, ctx);
  Tensor& y = ctx.allocate_output(0, x.dtype(), out);
  if (y.numel() == 0) return;
  const auto strides = broadcast_strides(x.shape(), out);
  std::vector<std::vector<std::int64_t>> maps(out.size());
  for (std::size_t a = 0; a < out.size(); ++a)
    for (std::int64_t o = 0; o < out[a]; ++o) maps[a].push_back(o * strides[a]);
  copy_by_axis_maps(x, y, maps, nullptr, ctx);
}

// --- shape queries --------------------------------------------------------------------------

void shape_op(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const std::int64_t r = x.rank();
  auto clamp_bound = [&](std::int64_t v) { return std::clamp<std::int64_t>(v < 0 ? v + r : v, 0, r); };
  const std::int64_t start = clamp_bound(ctx.node().attr_int("start", 0));
  const std::int64_t end = clamp_bound(ctx.node().attr_int("end", r));
  const std::int64_t n = std::max<std::int64_t>(0, end - start);
  Tensor& y = ctx.allocate_output(0, DType::Int64, {n});
  for (std::int64_t i = 0; i < n; ++i) y.data<std::int64_t>()[i] = x.shape()[start + i];
}

void size_op(KernelContext& ctx) {
  Tensor& y = ctx.allocate_output(0, DType::Int64, {});
  y.data<std::int64_t>()[0] = ctx.input(0).numel();
}

}  // namespace

void register_shape_ops(OpTable& t) {
  t.add("Reshape", {reshape, 2, 2, 5});
  t.add("Flatten", {flatten, 1, 1, 1});
  t.add("Squeeze", {squeeze, 1, 2, 1});
  t.add("Unsqueeze", {unsqueeze, 1, 2, 1});
  t.add("Transpose", {transpose, 1, 1, 1});
  t.add("Concat", {concat, 1, -1, 4});
  t.add("Split", {split, 1, 2, 2});
  t.add("Slice", {slice, 1, 5, 1});
  t.add("Tile", {tile, 2, 2, 6});
  t.add("Expand", {expand, 2, 2, 8});
  t.add("Shape", {shape_op, 1, 1, 1});
  t.add("Size", {size_op, 1, 1, 1});
  register_layout_ops(t);
}

}  // namespace wpk::reference
