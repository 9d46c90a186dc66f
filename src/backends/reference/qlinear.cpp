// Quantized linear algebra on 8-bit data: QLinearMatMul and QLinearConv (opset 10).
//
// Both accumulate (q - zero_point) products exactly in int64, then requantize once:
// y = saturate(round_half_even(acc * in_scale * w_scale / y_scale) + y_zero_point). The combined
// multiplier is formed in float32, as the ONNX reference and common runtimes do, so results tie
// and round the same way.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "backends/reference/common.hpp"
#include "backends/reference/float_buffers.hpp"
#include "backends/reference/misc_internal.hpp"
#include "backends/reference/registry.hpp"

namespace wpk::reference {
namespace {

// Output shapes can grow past the inputs' sizes when a zero-length axis hides a huge one (a
// [1, 2^40, 0, 0] input still has 2^40 channels), so each output is checked before allocating.
void require_output_fits(const KernelContext& ctx, const Shape& shape) {
  double total = 1.0;
  for (auto d : shape) total *= static_cast<double>(d);
  if (total > static_cast<double>(std::int64_t(1) << 31))
    ctx.fail(ErrorCode::InvalidArgument, "output shape " + shape_to_string(shape) + " is too large");
}

// A quantized 8-bit tensor widened to int32 with its zero point subtracted, so the kernels below
// need no per-type templates.
std::vector<std::int32_t> centered(const KernelContext& ctx, const Tensor& q, const std::vector<std::int32_t>& zp,
                                   std::int64_t channels, std::int64_t inner, const char* what) {
  std::vector<std::int32_t> out(static_cast<std::size_t>(q.numel()));
  auto fill = [&](auto* p) {
    for (std::int64_t i = 0; i < q.numel(); ++i) {
      const std::size_t c = zp.size() == 1 ? 0 : static_cast<std::size_t>((i / inner) % channels);
      out[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(p[i]) - zp[c];
    }
  };
  if (q.dtype() == DType::UInt8) fill(q.data<std::uint8_t>());
  else if (q.dtype() == DType::Int8) fill(q.data<std::int8_t>());
  else ctx.fail(ErrorCode::Unsupported, std::string(what) + " dtype " + dtype_name(q.dtype()) + " is not supported (uint8 and int8 are)");
  return out;
}

// Scale input: float32 with 1 element, or `allowed` elements (per row / per channel) when
// allowed > 1.
std::vector<float> read_scale(const KernelContext& ctx, std::size_t i, std::int64_t allowed, const char* what) {
  const Tensor& s = ctx.input(i);
  // Opset 21 allows float16 and bfloat16 scales; the arithmetic stays float32.
  if (s.dtype() != DType::Float32 && !is_half_dtype(s.dtype()))
    ctx.fail(ErrorCode::Unsupported, std::string(what) + " must be float32, float16 or bfloat16, got " + dtype_name(s.dtype()));
  if (s.numel() != 1 && !(s.rank() == 1 && s.numel() == allowed))
    ctx.fail(ErrorCode::InvalidArgument, std::string(what) + " must have 1 or " + std::to_string(allowed) +
                                             " elements, got shape " + shape_to_string(s.shape()));
  return to_float_buffer(s);
}

// Zero point input matching quantized tensor `q`'s dtype; 1 or `allowed` elements.
std::vector<std::int32_t> read_zp(const KernelContext& ctx, std::size_t i, DType want, std::int64_t allowed,
                                  const char* what) {
  const Tensor& z = ctx.input(i);
  if (z.dtype() != want)
    ctx.fail(ErrorCode::InvalidModel, std::string(what) + " is " + dtype_name(z.dtype()) + " but its data is " +
                                          dtype_name(want) + "; they must match");
  if (z.numel() != 1 && !(z.rank() == 1 && z.numel() == allowed))
    ctx.fail(ErrorCode::InvalidArgument, std::string(what) + " must have 1 or " + std::to_string(allowed) +
                                             " elements, got shape " + shape_to_string(z.shape()));
  std::vector<std::int32_t> out(static_cast<std::size_t>(z.numel()));
  for (std::size_t k = 0; k < out.size(); ++k)
    out[k] = want == DType::UInt8 ? z.data<std::uint8_t>()[k] : z.data<std::int8_t>()[k];
  return out;
}

double round_half_even(double v) {
  const double lower = std::floor(v);
  const double frac = v - lower;
  if (frac > 0.5) return lower + 1;
  if (frac < 0.5) return lower;
  return std::fmod(lower, 2.0) == 0.0 ? lower : lower + 1;
}

// Writes requantized value `v` (already multiplied by the scale ratio) into element i of y.
void store(Tensor& y, std::int64_t i, double v, std::int32_t zp) {
  double r = std::isnan(v) ? 0.0 : round_half_even(v);
  r += zp;
  if (y.dtype() == DType::UInt8) y.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(std::min(std::max(r, 0.0), 255.0));
  else y.data<std::int8_t>()[i] = static_cast<std::int8_t>(std::min(std::max(r, -128.0), 127.0));
}

// ---- QLinearMatMul -----------------------------------------------------------------------

void qlinear_matmul(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  if (a.rank() < 1 || b.rank() < 1) ctx.fail(ErrorCode::InvalidArgument, "a and b must have rank >= 1");
  // numpy matmul: a 1-D a is a row vector, a 1-D b a column vector; the extra axis is dropped
  // from the result.
  Shape as = a.shape(), bs = b.shape();
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const std::int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  if (bs[bs.size() - 2] != k)
    ctx.fail(ErrorCode::InvalidArgument, "cannot multiply shapes " + shape_to_string(a.shape()) + " and " +
                                             shape_to_string(b.shape()));
  const Shape abatch(as.begin(), as.end() - 2), bbatch(bs.begin(), bs.end() - 2);
  const Shape batch = broadcast_shapes({abatch, bbatch}, ctx);
  // Per-row scales of a run along its M axis, per-column scales of b along its N axis.
  const std::vector<float> sa = read_scale(ctx, 1, m, "a_scale"), sb = read_scale(ctx, 4, n, "b_scale");
  const std::vector<float> sy = read_scale(ctx, 6, m, "y_scale");
  const auto za = read_zp(ctx, 2, a.dtype(), m, "a_zero_point"), zb = read_zp(ctx, 5, b.dtype(), n, "b_zero_point");
  const Tensor& yz = ctx.input(7);
  if (yz.dtype() != DType::UInt8 && yz.dtype() != DType::Int8)
    ctx.fail(ErrorCode::Unsupported, std::string("y_zero_point dtype ") + dtype_name(yz.dtype()) + " is not supported");
  const auto zy = read_zp(ctx, 7, yz.dtype(), m, "y_zero_point");
  const auto ca = centered(ctx, a, za, m, k, "a"), cb = centered(ctx, b, zb, n, 1, "b");

  Shape out = batch;
  if (a.rank() > 1) out.push_back(m);
  if (b.rank() > 1) out.push_back(n);
  require_output_fits(ctx, out);
  Tensor& y = ctx.allocate_output(0, yz.dtype(), out);
  // Strides per matrix (one matrix = one batch element) under broadcasting.
  const auto astr = broadcast_strides(abatch, batch), bstr = broadcast_strides(bbatch, batch);
  std::vector<std::int64_t> mat_off;
  for_each_index(batch, {astr, bstr}, [&](const std::int64_t* off) {
    mat_off.push_back(off[0]);
    mat_off.push_back(off[1]);
  });
  for (std::size_t bi = 0; bi * 2 < mat_off.size(); ++bi) {
    const std::int32_t* pa = ca.data() + mat_off[bi * 2] * m * k;
    const std::int32_t* pb = cb.data() + mat_off[bi * 2 + 1] * k * n;
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        std::int64_t acc = 0;
        for (std::int64_t t = 0; t < k; ++t) acc += std::int64_t(pa[i * k + t]) * pb[t * n + j];
        const float mult = sa[sa.size() == 1 ? 0 : i] * sb[sb.size() == 1 ? 0 : j] / sy[sy.size() == 1 ? 0 : i];
        store(y, (static_cast<std::int64_t>(bi) * m + i) * n + j, static_cast<double>(acc) * mult,
              zy[zy.size() == 1 ? 0 : i]);
      }
  }
}

// ---- QLinearConv -------------------------------------------------------------------------

void qlinear_conv(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(3);
  const int r = x.rank();
  if (r < 3 || w.rank() != r)
    ctx.fail(ErrorCode::InvalidArgument, "x and w must have the same rank >= 3, got " + shape_to_string(x.shape()) +
                                             " and " + shape_to_string(w.shape()));
  const int sp = r - 2;
  const std::int64_t n = x.shape()[0], c = x.shape()[1], mo = w.shape()[0];
  const std::int64_t group = node.attr_int("group", 1);
  if (group < 1 || c % group != 0 || mo % group != 0 || w.shape()[1] * group != c)
    ctx.fail(ErrorCode::InvalidArgument, "group " + std::to_string(group) + " does not fit " + std::to_string(c) +
                                             " input and " + std::to_string(mo) + " output channels with w shape " +
                                             shape_to_string(w.shape()));
  const auto ks = node.attr_ints("kernel_shape", Shape(w.shape().begin() + 2, w.shape().end()));
  auto strides = node.attr_ints("strides", std::vector<std::int64_t>(sp, 1));
  auto dil = node.attr_ints("dilations", std::vector<std::int64_t>(sp, 1));
  auto pads = node.attr_ints("pads", std::vector<std::int64_t>(2 * sp, 0));
  if (static_cast<int>(ks.size()) != sp || static_cast<int>(strides.size()) != sp ||
      static_cast<int>(dil.size()) != sp || static_cast<int>(pads.size()) != 2 * sp)
    ctx.fail(ErrorCode::InvalidModel, "kernel_shape, strides, dilations or pads has the wrong length");
  const std::int64_t kLimit = std::int64_t(1) << 31;
  Shape out = {n, mo};
  for (int d = 0; d < sp; ++d) {
    // kernel_shape bounds (like the others) keep (k - 1) * dilation within int64.
    if (ks[d] > kLimit) ctx.fail(ErrorCode::InvalidModel, "kernel_shape must be at most 2^31");
    if (ks[d] != w.shape()[2 + d]) ctx.fail(ErrorCode::InvalidModel, "kernel_shape does not match w");
    if (strides[d] < 1 || strides[d] > kLimit || dil[d] < 1 || dil[d] > kLimit || pads[d] < 0 || pads[d] > kLimit ||
        pads[sp + d] < 0 || pads[sp + d] > kLimit)
      ctx.fail(ErrorCode::InvalidModel, "strides and dilations must be in [1, 2^31], pads in [0, 2^31]");
  }
  const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  for (int d = 0; d < sp; ++d) {
    const std::int64_t in = x.shape()[2 + d], ext = (ks[d] - 1) * dil[d] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      // Output ceil(in / stride); the padding that needs is split, the odd unit at the end
      // (UPPER) or at the start (LOWER).
      const std::int64_t o = (in + strides[d] - 1) / strides[d];
      const std::int64_t total = std::max<std::int64_t>(0, (o - 1) * strides[d] + ext - in);
      pads[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[sp + d] = total - pads[d];
    } else if (auto_pad == "VALID") {
      pads[d] = pads[sp + d] = 0;
    } else if (auto_pad != "NOTSET") {
      ctx.fail(ErrorCode::InvalidModel, "unknown auto_pad '" + auto_pad + "'");
    }
    const std::int64_t span = in + pads[d] + pads[sp + d] - ext;
    if (span < 0) ctx.fail(ErrorCode::InvalidArgument, "kernel is larger than the padded input on axis " + std::to_string(d));
    out.push_back(span / strides[d] + 1);
  }
  const float xs = read_scale(ctx, 1, 1, "x_scale")[0];
  const auto ws = read_scale(ctx, 4, mo, "w_scale");
  const float ys = read_scale(ctx, 6, 1, "y_scale")[0];
  const auto xz = read_zp(ctx, 2, x.dtype(), 1, "x_zero_point");
  const auto wz = read_zp(ctx, 5, w.dtype(), mo, "w_zero_point");
  const Tensor& yzt = ctx.input(7);
  if (yzt.dtype() != DType::UInt8 && yzt.dtype() != DType::Int8)
    ctx.fail(ErrorCode::Unsupported, std::string("y_zero_point dtype ") + dtype_name(yzt.dtype()) + " is not supported");
  const std::int32_t yz = read_zp(ctx, 7, yzt.dtype(), 1, "y_zero_point")[0];
  std::vector<std::int32_t> bias(static_cast<std::size_t>(mo), 0);
  if (ctx.has_input(8)) {
    const Tensor& bt = ctx.input(8);
    if (bt.dtype() != DType::Int32 || bt.rank() != 1 || bt.shape()[0] != mo)
      ctx.fail(ErrorCode::InvalidArgument, "B must be int32 of shape [" + std::to_string(mo) + "], got " +
                                               shape_to_string(bt.shape()));
    std::copy(bt.data<std::int32_t>(), bt.data<std::int32_t>() + mo, bias.begin());
  }
  const std::int64_t wk = shape_numel(Shape(w.shape().begin() + 1, w.shape().end()));  // per output channel
  const auto cx = centered(ctx, x, xz, 1, 1, "x"), cw = centered(ctx, w, wz, mo, wk, "w");
  require_output_fits(ctx, out);
  Tensor& y = ctx.allocate_output(0, yzt.dtype(), out);

  const Shape in_sp(x.shape().begin() + 2, x.shape().end()), out_sp(out.begin() + 2, out.end());
  const Shape k_sp(ks.begin(), ks.end());
  const std::int64_t in_plane = shape_numel(in_sp), out_plane = shape_numel(out_sp), k_plane = shape_numel(k_sp);
  const std::int64_t cg = c / group, mg = mo / group;
  std::vector<std::int64_t> o_idx(sp), k_idx(sp);
  auto unravel = [](std::int64_t flat, const Shape& shape, std::vector<std::int64_t>& idx) {
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      idx[d] = flat % shape[d];
      flat /= shape[d];
    }
  };
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t oc = 0; oc < mo; ++oc) {
      const std::int64_t g = oc / mg;
      const float mult = xs * ws[ws.size() == 1 ? 0 : oc] / ys;
      for (std::int64_t op = 0; op < out_plane; ++op) {
        unravel(op, out_sp, o_idx);
        std::int64_t acc = bias[oc];
        for (std::int64_t kp = 0; kp < k_plane; ++kp) {
          unravel(kp, k_sp, k_idx);
          std::int64_t in_off = 0;
          bool inside = true;
          for (int d = 0; d < sp && inside; ++d) {
            const std::int64_t pos = o_idx[d] * strides[d] - pads[d] + k_idx[d] * dil[d];
            inside = pos >= 0 && pos < in_sp[d];
            in_off = in_off * in_sp[d] + pos;
          }
          if (!inside) continue;  // padding reads the zero point, i.e. 0 once centred
          for (std::int64_t ic = 0; ic < cg; ++ic) {
            const std::int64_t xc = g * cg + ic;
            acc += std::int64_t(cx[(b * c + xc) * in_plane + in_off]) * cw[(oc * cg + ic) * k_plane + kp];
          }
        }
        store(y, (b * mo + oc) * out_plane + op, static_cast<double>(acc) * mult, yz);
      }
    }
}

}  // namespace

void register_qlinear(OpTable& t) {
  t.add("QLinearMatMul", {qlinear_matmul, 8, 8, 10});
  t.add("QLinearConv", {qlinear_conv, 8, 9, 10});
}

}  // namespace wpk::reference
