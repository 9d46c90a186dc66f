// Reference kernels that build or rearrange tensors: Pad, DepthToSpace, SpaceToDepth, Trilu,
// ReverseSequence, EyeLike, Constant, ConstantOfShape, CenterCropPad. Registered from register_shape_ops.
#include <algorithm>
#include <cstring>

#include "backends/reference/common.hpp"
#include "backends/reference/data_movement.hpp"
#include "backends/reference/registry.hpp"

namespace wpk::reference {
namespace {

// Fills every element of `t` with the element `value`.
void fill_with(Tensor& t, const Bytes& value, const KernelContext& ctx) {
  dispatch_width(t.dtype(), ctx, [&](auto w) {
    constexpr std::size_t W = decltype(w)::value;
    unsigned char* p = bytes_of(t);
    for (std::int64_t i = 0; i < t.numel(); ++i) copy_elem<W>(p + i * W, value.data());
  });
}

DType dtype_from_attr(std::int64_t v, const KernelContext& ctx) {
  const DType d = static_cast<DType>(static_cast<std::uint8_t>(v));
  if (v < 0 || v > 255 || !dtype_is_storable(d) || static_cast<std::int64_t>(d) != v)
    ctx.fail(ErrorCode::Unsupported, "dtype " + std::to_string(v) + " is not supported");
  return d;
}

// Opset 18's axes input: pads name only these axes (begins, then ends); the others get none.
std::vector<std::int64_t> pads_on_every_axis(const KernelContext& ctx, const std::vector<std::int64_t>& pads, int r) {
  const std::vector<std::int64_t> axes = read_int_list(ctx.input(3), ctx);
  if (pads.size() != 2 * axes.size())
    ctx.fail(ErrorCode::InvalidModel, "pads " + shape_to_string(pads) + " must have 2 entries for each of the " +
                                          std::to_string(axes.size()) + " axes");
  std::vector<std::int64_t> full(2 * static_cast<std::size_t>(r), 0);
  const std::vector<int> named = normalize_axes(axes, r, ctx);
  for (std::size_t i = 0; i < named.size(); ++i) {
    full[static_cast<std::size_t>(named[i])] = pads[i];
    full[static_cast<std::size_t>(named[i] + r)] = pads[i + axes.size()];
  }
  return full;
}

void pad(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int r = x.rank();
  const std::string mode = ctx.node().attr_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && !(mode == "wrap" && ctx.opset() >= 19))
    ctx.fail(ErrorCode::InvalidModel, "unknown mode '" + mode + "'");
  std::vector<std::int64_t> pads;
  Bytes value(dtype_size(x.dtype()), 0);
  if (ctx.opset() < 11 && !ctx.has_input(1)) {
    const char* key = ctx.node().has_attr("pads") ? "pads" : "paddings";  // opset 1 called it paddings
    if (!ctx.node().has_attr(key)) ctx.fail(ErrorCode::InvalidModel, "attribute 'pads' is required");
    pads = ctx.node().attr_ints(key);
    value = scalar_bytes(x.dtype(), ctx.node().attr_float("value", 0.0f), ctx);
  } else {
    pads = read_int_list(ctx.input(1), ctx);
    if (ctx.has_input(2) && ctx.input(2).numel() > 0) {
      const Tensor& v = ctx.input(2);
      if (v.dtype() != x.dtype())
        ctx.fail(ErrorCode::InvalidModel, std::string("constant_value is ") + dtype_name(v.dtype()) + " but data is " +
                                              dtype_name(x.dtype()));
      std::memcpy(value.data(), v.raw(), value.size());
    }
  }
  if (ctx.has_input(3)) pads = pads_on_every_axis(ctx, pads, r);
  if (static_cast<int>(pads.size()) != 2 * r)
    ctx.fail(ErrorCode::InvalidModel, "pads " + shape_to_string(pads) + " must have 2 * rank = " + std::to_string(2 * r) + " entries");

  // Negative pads crop first; reflect and edge then pad from what is left.
  Shape out(static_cast<std::size_t>(r));
  std::vector<std::int64_t> lo(r), kept(r), before(r);
  for (int a = 0; a < r; ++a) {
    const std::int64_t dim = x.shape()[a], pb = pads[a], pe = pads[a + r];
    std::int64_t o = 0;
    if (__builtin_add_overflow(dim, pb, &o) || __builtin_add_overflow(o, pe, &o) || o < 0)
      ctx.fail(ErrorCode::InvalidArgument, "pads " + shape_to_string(pads) + " do not fit shape " + shape_to_string(x.shape()));
    lo[a] = std::max<std::int64_t>(0, -pb);
    kept[a] = dim - lo[a] - std::max<std::int64_t>(0, -pe);
    if (kept[a] < 0)
      ctx.fail(ErrorCode::InvalidArgument, "pads " + shape_to_string(pads) + " crop more than axis " + std::to_string(a) + " holds");
    before[a] = std::max<std::int64_t>(0, pb);
    if (mode != "constant" && kept[a] == 0 && o > 0)
      ctx.fail(ErrorCode::InvalidArgument, "cannot " + mode + "-pad axis " + std::to_string(a) + ": no elements are left to pad from");
    out[a] = o;
  }
  Tensor& y = ctx.allocate_output(0, x.dtype(), out);
  if (y.numel() == 0) return;
  const auto strides = contiguous_strides(x.shape());
  std::vector<std::vector<std::int64_t>> maps(static_cast<std::size_t>(r));
  for (int a = 0; a < r; ++a) {
    const std::int64_t n = kept[a];
    for (std::int64_t o = 0; o < out[a]; ++o) {
      std::int64_t c = o - before[a];  // position within the kept input range
      if (c < 0 || c >= n) {
        if (mode == "constant") {
          maps[a].push_back(-1);
          continue;
        }
        if (mode == "edge" || n == 1) {
          c = std::clamp<std::int64_t>(c, 0, n - 1);
        } else if (mode == "wrap") {
          c %= n;
          if (c < 0) c += n;
        } else {  // reflect without repeating the edge: period 2 * (n - 1)
          const std::int64_t period = 2 * (n - 1);
          c %= period;
          if (c < 0) c += period;
          if (c >= n) c = period - c;
        }
      }
      maps[a].push_back((lo[a] + c) * strides[a]);
    }
  }
  copy_by_axis_maps(x, y, maps, value.data(), ctx);
}

// DepthToSpace and SpaceToDepth: a view of x as 6-D, transposed into the output.
void rearrange_blocks(KernelContext& ctx, const Shape& in6, const std::vector<int>& perm, const Shape& out4) {
  const Tensor& x = ctx.input(0);
  const Tensor view = x.reshaped(in6);
  Tensor& y = ctx.allocate_output(0, x.dtype(), out4);
  Shape out6(6);
  for (int a = 0; a < 6; ++a) out6[a] = in6[perm[a]];
  Tensor y6 = y.reshaped(out6);  // shares y's bytes
  transpose_into(view, perm, y6, ctx);
}

std::int64_t blocksize_of(const KernelContext& ctx) {
  const std::int64_t b = ctx.node().attr_int("blocksize", 0);
  if (b <= 0 || b > (std::int64_t(1) << 20))
    ctx.fail(ErrorCode::InvalidModel, "blocksize " + std::to_string(b) + " is invalid");
  if (ctx.input(0).rank() != 4)
    ctx.fail(ErrorCode::InvalidArgument, "input must be 4-D [N, C, H, W], got " + shape_to_string(ctx.input(0).shape()));
  return b;
}

void depth_to_space(KernelContext& ctx) {
  const std::int64_t b = blocksize_of(ctx);
  const Shape& s = ctx.input(0).shape();
  const std::int64_t n = s[0], c = s[1], h = s[2], w = s[3];
  if (c % (b * b) != 0)
    ctx.fail(ErrorCode::InvalidArgument, "channels " + std::to_string(c) + " are not divisible by blocksize^2 = " + std::to_string(b * b));
  const std::int64_t oc = c / (b * b);
  const Shape out4{n, oc, h * b, w * b};
  const std::string mode = ctx.node().attr_string("mode", "DCR");
  if (mode == "DCR") return rearrange_blocks(ctx, {n, b, b, oc, h, w}, {0, 3, 4, 1, 5, 2}, out4);
  if (mode == "CRD") return rearrange_blocks(ctx, {n, oc, b, b, h, w}, {0, 1, 4, 2, 5, 3}, out4);
  ctx.fail(ErrorCode::InvalidModel, "mode '" + mode + "' is not DCR or CRD");
}

void space_to_depth(KernelContext& ctx) {
  const std::int64_t b = blocksize_of(ctx);
  const Shape& s = ctx.input(0).shape();
  const std::int64_t n = s[0], c = s[1], h = s[2], w = s[3];
  if (h % b != 0 || w % b != 0)
    ctx.fail(ErrorCode::InvalidArgument, "spatial size " + std::to_string(h) + "x" + std::to_string(w) +
                                             " is not divisible by blocksize " + std::to_string(b));
  rearrange_blocks(ctx, {n, c, h / b, b, w / b, b}, {0, 3, 5, 1, 2, 4}, {n, c * b * b, h / b, w / b});
}

void trilu(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) ctx.fail(ErrorCode::InvalidArgument, "input must have rank >= 2, got " + shape_to_string(x.shape()));
  std::int64_t k = 0;
  if (ctx.has_input(1)) {
    const auto kv = read_int_list(ctx.input(1), ctx);
    if (kv.size() != 1) ctx.fail(ErrorCode::InvalidModel, "k must hold exactly one value");
    k = kv[0];
  }
  const bool upper = ctx.node().attr_int("upper", 1) != 0;
  const std::int64_t rows = x.dim(-2), cols = x.dim(-1);
  k = std::clamp<std::int64_t>(k, -rows - 1, cols + 1);  // beyond this every k gives the same result
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  std::memset(y.raw(), 0, y.nbytes());  // output memory may hold anything; only kept runs are copied
  const std::size_t elem = dtype_size(x.dtype());
  const std::int64_t mats = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
  for (std::int64_t m = 0; m < mats; ++m) {
    for (std::int64_t i = 0; i < rows; ++i) {
      const std::int64_t lo = upper ? std::clamp<std::int64_t>(i + k, 0, cols) : 0;
      const std::int64_t hi = upper ? cols : std::clamp<std::int64_t>(i + k + 1, 0, cols);
      if (hi <= lo) continue;
      const std::int64_t off = (m * rows + i) * cols + lo;
      std::memcpy(bytes_of(y) + off * elem, bytes_of(x) + off * elem, static_cast<std::size_t>(hi - lo) * elem);
    }
  }
}

void reverse_sequence(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) ctx.fail(ErrorCode::InvalidArgument, "input must have rank >= 2, got " + shape_to_string(x.shape()));
  const std::int64_t batch_axis = ctx.node().attr_int("batch_axis", 1);
  const std::int64_t time_axis = ctx.node().attr_int("time_axis", 0);
  if (!((batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0)))
    ctx.fail(ErrorCode::InvalidModel, "batch_axis and time_axis must be 0 and 1 in some order");
  const auto lens = read_int_list(ctx.input(1), ctx);
  const std::int64_t batch = x.shape()[batch_axis], time = x.shape()[time_axis];
  if (static_cast<std::int64_t>(lens.size()) != batch)
    ctx.fail(ErrorCode::InvalidArgument, "sequence_lens has " + std::to_string(lens.size()) + " entries for batch size " +
                                             std::to_string(batch));
  for (auto l : lens)
    if (l < 0 || l > time)
      ctx.fail(ErrorCode::InvalidArgument, "sequence length " + std::to_string(l) + " is out of range [0, " + std::to_string(time) + "]");
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  const std::size_t chunk = static_cast<std::size_t>(dims_product(x.shape(), 2, x.shape().size())) * dtype_size(x.dtype());
  if (chunk == 0) return;
  const std::int64_t d1 = x.shape()[1];
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t t = 0; t < time; ++t) {
      const std::int64_t src_t = t < lens[b] ? lens[b] - 1 - t : t;
      auto offset = [&](std::int64_t tt) { return time_axis == 0 ? tt * d1 + b : b * d1 + tt; };
      std::memcpy(bytes_of(y) + offset(t) * chunk, bytes_of(x) + offset(src_t) * chunk, chunk);
    }
  }
}

void eye_like(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 2) ctx.fail(ErrorCode::InvalidArgument, "input must be 2-D, got " + shape_to_string(x.shape()));
  const DType dtype = ctx.node().has_attr("dtype") ? dtype_from_attr(ctx.node().attr_int("dtype", 0), ctx) : x.dtype();
  const std::int64_t k = ctx.node().attr_int("k", 0);
  Tensor& y = ctx.allocate_output(0, dtype, x.shape());
  std::memset(y.raw(), 0, y.nbytes());  // output memory may hold anything; the diagonal is set below
  const Bytes one = scalar_bytes(dtype, 1.0, ctx);
  const std::int64_t rows = x.shape()[0], cols = x.shape()[1];
  // Rows whose diagonal entry i + k falls inside [0, cols).
  const std::int64_t first = std::clamp<std::int64_t>(k < 0 ? -k : 0, 0, rows);
  for (std::int64_t i = first; i < rows; ++i) {
    const std::int64_t j = i + k;
    if (j >= cols) break;
    std::memcpy(bytes_of(y) + (i * cols + j) * one.size(), one.data(), one.size());
  }
}

void constant_of_shape(KernelContext& ctx) {
  const auto shape = read_shape(ctx.input(0), ctx);
  for (auto d : shape)
    if (d < 0) ctx.fail(ErrorCode::InvalidArgument, "shape " + shape_to_string(shape) + " has a negative dimension");
  DType dtype = DType::Float32;
  Bytes value(4, 0);
  if (const Attribute* a = ctx.node().find_attr("value")) {
    if (a->kind() != Attribute::Kind::Tensor) ctx.fail(ErrorCode::InvalidModel, "attribute 'value' must be a tensor");
    const Tensor& v = a->t();
    if (v.numel() != 1) ctx.fail(ErrorCode::InvalidModel, "attribute 'value' must hold exactly one element");
    dtype = v.dtype();
    value.assign(bytes_of(v), bytes_of(v) + dtype_size(dtype));
  }
  Tensor& y = ctx.allocate_output(0, dtype, shape);
  fill_with(y, value, ctx);
}

// Opset 18: each named axis cropped or zero-padded to its target length around the centre (the
// odd element cropped from, or padded at, the end).
void center_crop_pad(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int r = x.rank();
  const std::vector<std::int64_t> target = read_int_list(ctx.input(1), ctx);
  std::vector<std::int64_t> axes = ctx.node().attr_ints("axes");
  if (!ctx.node().has_attr("axes"))
    for (int a = 0; a < r; ++a) axes.push_back(a);
  if (target.size() != axes.size())
    ctx.fail(ErrorCode::InvalidModel, "shape has " + std::to_string(target.size()) + " entries for " +
                                          std::to_string(axes.size()) + " axes");
  Shape out = x.shape();
  const std::vector<int> named = normalize_axes(axes, r, ctx);
  for (std::size_t i = 0; i < named.size(); ++i) {
    if (target[i] < 0) ctx.fail(ErrorCode::InvalidArgument, "shape has a negative entry " + std::to_string(target[i]));
    out[static_cast<std::size_t>(named[i])] = target[i];
  }
  Tensor& y = ctx.allocate_output(0, x.dtype(), out);
  if (y.numel() == 0) return;
  const auto strides = contiguous_strides(x.shape());
  std::vector<std::vector<std::int64_t>> maps(static_cast<std::size_t>(r));
  for (int a = 0; a < r; ++a) {
    const std::int64_t in = x.shape()[a], len = out[a];
    const std::int64_t crop = in > len ? (in - len) / 2 : 0, pad = len > in ? (len - in) / 2 : 0;
    for (std::int64_t o = 0; o < len; ++o) {
      const std::int64_t c = o - pad + crop;
      maps[a].push_back(c < 0 || c >= in ? -1 : c * strides[a]);
    }
  }
  const Bytes zero(dtype_size(x.dtype()), 0);
  copy_by_axis_maps(x, y, maps, zero.data(), ctx);
}

void constant(KernelContext& ctx) {
  const Node& node = ctx.node();
  if (node.has_attr("sparse_value")) ctx.fail(ErrorCode::Unsupported, "attribute 'sparse_value' is not supported");
  if (const Attribute* s = node.find_attr("value_string")) {
    ctx.set_output(0, Tensor::from_strings({s->s()}, {}));
    return;
  }
  if (const Attribute* ss = node.find_attr("value_strings")) {
    ctx.set_output(0, Tensor::from_strings(ss->strings(), {static_cast<std::int64_t>(ss->strings().size())}));
    return;
  }
  if (const Attribute* a = node.find_attr("value")) {
    if (a->kind() != Attribute::Kind::Tensor) ctx.fail(ErrorCode::InvalidModel, "attribute 'value' must be a tensor");
    // A private copy: a caller may write into outputs, and the attribute belongs to the graph.
    ctx.set_output(0, a->t().clone());
  } else if (const Attribute* f = node.find_attr("value_float")) {
    ctx.set_output(0, Tensor::scalar<float>(f->f()));
  } else if (const Attribute* fs = node.find_attr("value_floats")) {
    ctx.set_output(0, Tensor::from_vector<float>(fs->floats(), {static_cast<std::int64_t>(fs->floats().size())}));
  } else if (const Attribute* i = node.find_attr("value_int")) {
    ctx.set_output(0, Tensor::scalar<std::int64_t>(i->i()));
  } else if (const Attribute* is = node.find_attr("value_ints")) {
    ctx.set_output(0, Tensor::from_vector<std::int64_t>(is->ints(), {static_cast<std::int64_t>(is->ints().size())}));
  } else {
    ctx.fail(ErrorCode::InvalidModel, "has none of the attributes value, value_float(s), value_int(s)");
  }
}

}  // namespace

void register_layout_ops(OpTable& t) {
  t.add("Pad", {pad, 1, 4, 2});
  t.add("DepthToSpace", {depth_to_space, 1, 1, 1});
  t.add("SpaceToDepth", {space_to_depth, 1, 1, 1});
  t.add("Trilu", {trilu, 1, 2, 14});
  t.add("ReverseSequence", {reverse_sequence, 2, 2, 10});
  t.add("EyeLike", {eye_like, 1, 1, 9});
  t.add("ConstantOfShape", {constant_of_shape, 1, 1, 9});
  t.add("Constant", {constant, 0, 0, 1});
  t.add("CenterCropPad", {center_crop_pad, 2, 2, 18});
}

}  // namespace wpk::reference
