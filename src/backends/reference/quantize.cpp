// Linear 8-bit quantization: QuantizeLinear and DequantizeLinear (opset 10: scalar scale and zero
// point; opset 13: also one scale and zero point per slice along `axis`) and DynamicQuantizeLinear
// (opset 11: uint8 with the scale and zero point derived from the data).
//
// Arithmetic follows the precision the ONNX reference uses, so ties round the same way: float
// input is divided by the scale in float32, int32 input in double (int32 / float promotes to
// double there), and dequantization multiplies in float32.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "backends/reference/common.hpp"
#include "backends/reference/misc_internal.hpp"
#include "backends/reference/registry.hpp"

namespace wpk::reference {
namespace {

// Nearest integer, ties to even, independent of the floating-point environment's rounding mode
// (std::nearbyint would follow whatever mode the embedding program set). v - floor(v) is exact
// in binary floating point, so the 0.5 comparison decides ties exactly.
template <typename F>
F round_half_even(F v) {
  const F lower = std::floor(v);
  const F frac = v - lower;
  if (frac > F(0.5)) return lower + F(1);
  if (frac < F(0.5)) return lower;
  return std::fmod(lower, F(2)) == F(0) ? lower : lower + F(1);
}

// round(v) + zero_point clamped into Q's range. NaN (x / 0 with x = 0) has no nearest integer; it
// is taken as 0, so it encodes to the zero point rather than to an unspecified cast result.
template <typename Q, typename F>
Q saturate_round(F v, std::int32_t zero_point) {
  double r = std::isnan(v) ? 0.0 : static_cast<double>(round_half_even(v));
  r += zero_point;
  r = std::min(std::max(r, static_cast<double>(std::numeric_limits<Q>::min())),
               static_cast<double>(std::numeric_limits<Q>::max()));
  return static_cast<Q>(r);
}

// Scale and zero point per element: one pair for the whole tensor, or one per index along the
// quantization axis. Element i of x belongs to channel (i / inner) % channels.
struct QuantParams {
  std::vector<float> scale;
  std::vector<std::int32_t> zero_point;  // same length as scale
  std::int64_t channels = 1;
  std::int64_t inner = 1;
  std::size_t channel(std::int64_t i) const {
    return channels == 1 ? 0 : static_cast<std::size_t>((i / inner) % channels);
  }
};

std::vector<std::int32_t> read_zero_points(const KernelContext& ctx, const Tensor& zp) {
  std::vector<std::int32_t> out(static_cast<std::size_t>(zp.numel()));
  auto copy = [&](auto tag) {
    using Z = typename decltype(tag)::type;
    const Z* p = zp.data<Z>();
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::int32_t>(p[i]);
  };
  switch (zp.dtype()) {
    case DType::UInt8: copy(TypeTag<std::uint8_t>{}); break;
    case DType::Int8: copy(TypeTag<std::int8_t>{}); break;
    case DType::Int32: copy(TypeTag<std::int32_t>{}); break;
    default:
      ctx.fail(ErrorCode::Unsupported, std::string("zero point dtype ") + dtype_name(zp.dtype()) + " is not supported");
  }
  return out;
}

// Reads inputs 1 (scale) and 2 (zero point, optional: 0) for x. A scale with one element is
// per-tensor whatever its rank; anything else must be 1-D with one entry per index along `axis`,
// which only opset 13 and later allow.
QuantParams read_params(const KernelContext& ctx, const Tensor& x) {
  const Tensor& scale = ctx.input(1);
  if (ctx.opset() >= 21 && ctx.node().attr_int("block_size", 0) != 0)
    ctx.fail(ErrorCode::Unsupported, "blocked quantization (block_size, opset 21) is not supported");
  if (scale.dtype() != DType::Float32)
    ctx.fail(ErrorCode::Unsupported,
             std::string("scale dtype ") + dtype_name(scale.dtype()) + " is not supported (float32 is)");
  QuantParams p;
  if (scale.numel() != 1) {
    if (ctx.opset() < 13)
      ctx.fail(ErrorCode::InvalidModel, "scale must be a scalar before opset 13, got shape " +
                                            shape_to_string(scale.shape()));
    if (scale.rank() != 1)
      ctx.fail(ErrorCode::InvalidArgument,
               "scale must be a scalar or 1-D, got shape " + shape_to_string(scale.shape()));
    const int axis = normalize_axis(ctx.node().attr_int("axis", 1), x.rank(), ctx);
    if (scale.shape()[0] != x.shape()[axis])
      ctx.fail(ErrorCode::InvalidArgument, "scale has " + std::to_string(scale.shape()[0]) + " entries but axis " +
                                               std::to_string(axis) + " of input shape " +
                                               shape_to_string(x.shape()) + " has size " +
                                               std::to_string(x.shape()[axis]));
    p.channels = scale.shape()[0];
    for (int i = axis + 1; i < x.rank(); ++i) p.inner *= x.shape()[i];
  }
  const float* ps = scale.data<float>();
  p.scale.assign(ps, ps + scale.numel());
  if (!ctx.has_input(2)) {
    p.zero_point.assign(p.scale.size(), 0);
    return p;
  }
  const Tensor& zp = ctx.input(2);
  // Per-tensor zero points may be [] or [1] independently of the scale's rank; per-axis ones
  // must match the scale exactly.
  const bool same = p.channels == 1 ? zp.numel() == 1 : zp.shape() == scale.shape();
  if (!same)
    ctx.fail(ErrorCode::InvalidArgument, "zero point shape " + shape_to_string(zp.shape()) +
                                             " does not match scale shape " + shape_to_string(scale.shape()));
  p.zero_point = read_zero_points(ctx, zp);
  return p;
}

// C is the type the division runs in (see the file comment).
template <typename Q, typename C, typename X>
void quantize_values(const X* x, std::int64_t n, const QuantParams& p, Q* y) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::size_t c = p.channel(i);
    y[i] = saturate_round<Q>(static_cast<C>(x[i]) / static_cast<C>(p.scale[c]), p.zero_point[c]);
  }
}

template <typename Q>
void quantize_into(const Tensor& x, const QuantParams& p, Tensor& y) {
  if (x.dtype() == DType::Float32)
    quantize_values<Q, float>(x.data<float>(), x.numel(), p, y.data<Q>());
  else
    quantize_values<Q, double>(x.data<std::int32_t>(), x.numel(), p, y.data<Q>());
}

void quantize_linear(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::Float32 && x.dtype() != DType::Int32)
    ctx.fail(ErrorCode::Unsupported,
             std::string("input dtype ") + dtype_name(x.dtype()) + " is not supported (float32 and int32 are)");
  // The zero point's type picks the output type; without one, opset 21's output_dtype, else uint8.
  const std::int64_t named = ctx.opset() >= 21 ? ctx.node().attr_int("output_dtype", 0) : 0;
  const DType out = ctx.has_input(2) ? ctx.input(2).dtype() : named != 0 ? static_cast<DType>(named) : DType::UInt8;
  if (named != 0 && static_cast<std::int64_t>(out) != named)
    ctx.fail(ErrorCode::InvalidModel, std::string("output_dtype ") + std::to_string(named) +
                                          " differs from the zero point's " + dtype_name(out));
  if (out != DType::UInt8 && out != DType::Int8)
    ctx.fail(ErrorCode::Unsupported,
             std::string("zero point dtype ") + dtype_name(out) + " is not supported (uint8 and int8 are)");
  const QuantParams p = read_params(ctx, x);
  Tensor& y = ctx.allocate_output(0, out, x.shape());
  if (out == DType::UInt8)
    quantize_into<std::uint8_t>(x, p, y);
  else
    quantize_into<std::int8_t>(x, p, y);
}

template <typename Q>
void dequantize_values(const Q* x, std::int64_t n, const QuantParams& p, float* y) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::size_t c = p.channel(i);
    y[i] = (static_cast<float>(x[i]) - static_cast<float>(p.zero_point[c])) * p.scale[c];
  }
}

void dequantize_linear(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const DType t = x.dtype();
  if (t != DType::UInt8 && t != DType::Int8 && t != DType::Int32)
    ctx.fail(ErrorCode::Unsupported,
             std::string("input dtype ") + dtype_name(t) + " is not supported (uint8, int8 and int32 are)");
  if (ctx.has_input(2) && ctx.input(2).dtype() != t)
    ctx.fail(ErrorCode::InvalidModel, std::string("zero point is ") + dtype_name(ctx.input(2).dtype()) +
                                          " but the input is " + dtype_name(t) + "; they must match");
  const QuantParams p = read_params(ctx, x);
  // int32 data (typically a bias accumulated at scale_a * scale_b) has no zero point by
  // definition; a non-zero one means the model was built for some other convention.
  if (t == DType::Int32)
    for (auto z : p.zero_point)
      if (z != 0)
        ctx.fail(ErrorCode::InvalidArgument, "int32 input must have a zero point of 0, got " + std::to_string(z));
  Tensor& y = ctx.allocate_output(0, DType::Float32, x.shape());
  float* py = y.data<float>();
  if (t == DType::UInt8) dequantize_values(x.data<std::uint8_t>(), x.numel(), p, py);
  else if (t == DType::Int8) dequantize_values(x.data<std::int8_t>(), x.numel(), p, py);
  else dequantize_values(x.data<std::int32_t>(), x.numel(), p, py);
}

// uint8 quantization whose range [min(x, 0), max(x, 0)] covers the data and exactly represents 0.
void dynamic_quantize_linear(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::Float32)
    ctx.fail(ErrorCode::Unsupported,
             std::string("input dtype ") + dtype_name(x.dtype()) + " is not supported (float32 is)");
  const float* px = x.data<float>();
  float lo = 0.0f, hi = 0.0f;
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    // A NaN or infinite value leaves no finite range to derive a scale from.
    if (!std::isfinite(px[i]))
      ctx.fail(ErrorCode::InvalidArgument, "input holds a non-finite value at element " + std::to_string(i));
    lo = std::min(lo, px[i]);
    hi = std::max(hi, px[i]);
  }
  QuantParams p;
  p.scale = {(hi - lo) / 255.0f};
  // The zero point is computed as a float, clipped to [0, 255] and then rounded, as in the
  // spec's function body. All-zero (or empty) input has range 0 and so scale 0: every value is
  // then exactly 0 and encodes as zero point 0.
  const float scale = p.scale[0];
  const float zp = scale == 0.0f ? 0.0f : round_half_even(std::min(std::max(0.0f - lo / scale, 0.0f), 255.0f));
  p.zero_point = {static_cast<std::int32_t>(zp)};
  Tensor& y = ctx.allocate_output(0, DType::UInt8, x.shape());
  if (scale == 0.0f)
    std::fill(y.data<std::uint8_t>(), y.data<std::uint8_t>() + y.numel(), std::uint8_t(0));
  else
    quantize_values<std::uint8_t, float>(px, x.numel(), p, y.data<std::uint8_t>());
  if (ctx.wants_output(1)) ctx.allocate_output(1, DType::Float32, {}).data<float>()[0] = scale;
  if (ctx.wants_output(2))
    ctx.allocate_output(2, DType::UInt8, {}).data<std::uint8_t>()[0] = static_cast<std::uint8_t>(zp);
}

// com.wpk QLinearAdd (graph/fused_ops.hpp): DQ(A) + DQ(B) quantized again, each step in float32
// as the ops it replaces compute it.
void qlinear_add(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  if (a.dtype() != DType::UInt8 && a.dtype() != DType::Int8)
    ctx.fail(ErrorCode::Unsupported, std::string("input dtype ") + dtype_name(a.dtype()) + " is not supported (uint8 and int8 are)");
  if (a.shape() != b.shape())
    ctx.fail(ErrorCode::InvalidArgument, "A has shape " + shape_to_string(a.shape()) + " but B has " + shape_to_string(b.shape()));
  auto scalar = [&](std::size_t i, const char* what) {
    const Tensor& t = ctx.input(i);
    if (t.numel() != 1) ctx.fail(ErrorCode::InvalidArgument, std::string(what) + " must have one element, got shape " + shape_to_string(t.shape()));
    return &t;
  };
  for (std::size_t i : {1, 4, 6})
    if (scalar(i, "scale")->dtype() != DType::Float32) ctx.fail(ErrorCode::Unsupported, "scales must be float32");
  const std::size_t zero_inputs[] = {2, 5};
  const Tensor* data[] = {&a, &b};
  for (int k = 0; k < 2; ++k)
    if (scalar(zero_inputs[k], "zero point")->dtype() != data[k]->dtype())
      ctx.fail(ErrorCode::InvalidModel, "a zero point's dtype differs from its data's");
  const DType out = scalar(7, "zero point")->dtype();
  if (out != DType::UInt8 && out != DType::Int8)
    ctx.fail(ErrorCode::Unsupported, std::string("output dtype ") + dtype_name(out) + " is not supported (uint8 and int8 are)");
  const float sa = ctx.input(1).data<float>()[0], sb = ctx.input(4).data<float>()[0], sy = ctx.input(6).data<float>()[0];
  const std::vector<std::int32_t> za = read_zero_points(ctx, ctx.input(2)), zb = read_zero_points(ctx, ctx.input(5)),
                                  zy = read_zero_points(ctx, ctx.input(7));
  Tensor& y = ctx.allocate_output(0, out, a.shape());
  auto value = [&](const Tensor& t, std::int64_t i, std::int32_t z, float s) {
    const float q = t.dtype() == DType::UInt8 ? t.data<std::uint8_t>()[i] : t.data<std::int8_t>()[i];
    return (q - static_cast<float>(z)) * s;
  };
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const float sum = value(a, i, za[0], sa) + value(b, i, zb[0], sb);
    if (out == DType::UInt8) y.data<std::uint8_t>()[i] = saturate_round<std::uint8_t>(sum / sy, zy[0]);
    else y.data<std::int8_t>()[i] = saturate_round<std::int8_t>(sum / sy, zy[0]);
  }
}

}  // namespace

void register_quantize(OpTable& t) {
  t.add("com.wpk:QLinearAdd", {qlinear_add, 8, 8, 1});
  t.add("QuantizeLinear", {quantize_linear, 2, 3, 10});
  t.add("DequantizeLinear", {dequantize_linear, 2, 3, 10});
  t.add("DynamicQuantizeLinear", {dynamic_quantize_linear, 1, 1, 11});
}

}  // namespace wpk::reference
