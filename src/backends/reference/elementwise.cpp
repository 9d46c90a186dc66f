// Elementwise ops of one input: unary math, activations, Clip, IsNaN/IsInf, Not, Identity and
// inference-mode Dropout. Float kernels are written for float/double; 16-bit floats reach them
// through with_half (elementwise_util.hpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/reference/elementwise_util.hpp"

namespace wpk::reference {

void run_widened(KernelContext& ctx, KernelFn kernel) {
  std::vector<Tensor> wide(ctx.num_inputs());
  std::vector<const Tensor*> inputs(ctx.num_inputs(), nullptr);
  for (std::size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    const Tensor& t = ctx.input(i);
    inputs[i] = &t;
    if (!is_float16_like(t.dtype())) continue;
    wide[i] = Tensor::zeros(DType::Float32, t.shape());
    float* p = wide[i].data<float>();
    if (t.dtype() == DType::Float16) {
      const Float16Bits* h = t.data<Float16Bits>();
      for (std::int64_t k = 0; k < t.numel(); ++k) p[k] = half_to_float(h[k]);
    } else {
      const BFloat16Bits* h = t.data<BFloat16Bits>();
      for (std::int64_t k = 0; k < t.numel(); ++k) p[k] = bfloat16_to_float(h[k]);
    }
    inputs[i] = &wide[i];
  }
  KernelContext inner(ctx.node(), inputs);
  inner.set_opset(ctx.opset());
  kernel(inner);

  const DType narrow = ctx.has_input(0) ? ctx.input(0).dtype() : DType::Undefined;
  for (std::size_t j = 0; j < inner.outputs().size(); ++j) {
    const Tensor& out = inner.outputs()[j];
    if (out.empty()) continue;
    if (!is_float16_like(narrow) || out.dtype() != DType::Float32) {
      ctx.set_output(j, out);
      continue;
    }
    Tensor& y = ctx.allocate_output(j, narrow, out.shape());
    const float* p = out.data<float>();
    if (narrow == DType::Float16) {
      Float16Bits* h = y.data<Float16Bits>();
      for (std::int64_t k = 0; k < y.numel(); ++k) h[k] = float_to_half(p[k]);
    } else {
      BFloat16Bits* h = y.data<BFloat16Bits>();
      for (std::int64_t k = 0; k < y.numel(); ++k) h[k] = float_to_bfloat16(p[k]);
    }
  }
}

namespace {

// Which dtypes a unary kernel accepts. Only the listed groups are instantiated, so an op may use
// expressions that only make sense for them (std::exp, v < 0, ...).
enum : unsigned { kFloat = 1, kSigned = 2, kUnsigned = 4, kNumeric = kFloat | kSigned | kUnsigned };

// y[i] = f(x[i]) for input 0, output 0 of the same shape.
template <typename In, typename Out, typename F>
void map_elements(KernelContext& ctx, DType out_dtype, F f) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.allocate_output(0, out_dtype, x.shape());
  const In* px = x.data<In>();
  Out* py = y.data<Out>();
  for (std::int64_t i = 0; i < x.numel(); ++i) py[i] = f(px[i]);
}

template <typename T, typename Op>
void unary_typed(KernelContext& ctx, Op op) {
  map_elements<T, T>(ctx, dtype_of<T>(), [&](T v) { return static_cast<T>(op(v)); });
}

// y = op(x) with y of x's dtype. Float16/BFloat16 come in widened by with_half.
template <unsigned Types, typename Op>
void unary(KernelContext& ctx, Op op) {
  const DType t = ctx.input(0).dtype();
  if constexpr ((Types & kFloat) != 0) {
    if (t == DType::Float32) return unary_typed<float>(ctx, op);
    if (t == DType::Float64) return unary_typed<double>(ctx, op);
  }
  if constexpr ((Types & kSigned) != 0) {
    if (t == DType::Int8) return unary_typed<std::int8_t>(ctx, op);
    if (t == DType::Int16) return unary_typed<std::int16_t>(ctx, op);
    if (t == DType::Int32) return unary_typed<std::int32_t>(ctx, op);
    if (t == DType::Int64) return unary_typed<std::int64_t>(ctx, op);
  }
  if constexpr ((Types & kUnsigned) != 0) {
    if (t == DType::UInt8) return unary_typed<std::uint8_t>(ctx, op);
    if (t == DType::UInt16) return unary_typed<std::uint16_t>(ctx, op);
    if (t == DType::UInt32) return unary_typed<std::uint32_t>(ctx, op);
    if (t == DType::UInt64) return unary_typed<std::uint64_t>(ctx, op);
  }
  ctx.fail(ErrorCode::Unsupported, std::string("dtype ") + dtype_name(t) + " is not supported");
}

template <typename Op>
void unary_float(KernelContext& ctx, Op op) { unary<kFloat>(ctx, op); }

float attr_alpha(const KernelContext& ctx, float fallback) { return ctx.node().attr_float("alpha", fallback); }

// ---- math -------------------------------------------------------------------------------------

void abs_op(KernelContext& ctx) {
  unary<kNumeric>(ctx, [](auto v) {
    if constexpr (std::is_floating_point_v<decltype(v)>) return std::abs(v);  // also clears the sign of -0
    else return is_negative(v) ? negate(v) : v;
  });
}
// Neg is not defined for unsigned types in ONNX.
void neg(KernelContext& ctx) { unary<kFloat | kSigned>(ctx, [](auto v) { return negate(v); }); }
void sign(KernelContext& ctx) {
  // NaN (neither > 0 nor < 0) passes through, as in numpy.
  unary<kNumeric>(ctx, [](auto v) { using T = decltype(v); return v > T(0) ? T(1) : is_negative(v) ? T(-1) : v; });
}
void exp_op(KernelContext& ctx) { unary_float(ctx, [](auto v) { return std::exp(v); }); }
void log_op(KernelContext& ctx) { unary_float(ctx, [](auto v) { return std::log(v); }); }
void sqrt_op(KernelContext& ctx) { unary_float(ctx, [](auto v) { return std::sqrt(v); }); }
void reciprocal(KernelContext& ctx) { unary_float(ctx, [](auto v) { return decltype(v)(1) / v; }); }
void floor_op(KernelContext& ctx) { unary_float(ctx, [](auto v) { return std::floor(v); }); }
void ceil_op(KernelContext& ctx) { unary_float(ctx, [](auto v) { return std::ceil(v); }); }
// nearbyint rounds halfway cases to even under the default rounding mode, as ONNX Round requires.
void round_op(KernelContext& ctx) { unary_float(ctx, [](auto v) { return std::nearbyint(v); }); }
void sin_op(KernelContext& ctx) { unary_float(ctx, [](auto v) { return std::sin(v); }); }
void cos_op(KernelContext& ctx) { unary_float(ctx, [](auto v) { return std::cos(v); }); }
void tan_op(KernelContext& ctx) { unary_float(ctx, [](auto v) { return std::tan(v); }); }
void asin_op(KernelContext& ctx) { unary_float(ctx, [](auto v) { return std::asin(v); }); }
void acos_op(KernelContext& ctx) { unary_float(ctx, [](auto v) { return std::acos(v); }); }
void atan_op(KernelContext& ctx) { unary_float(ctx, [](auto v) { return std::atan(v); }); }
void sinh_op(KernelContext& ctx) { unary_float(ctx, [](auto v) { return std::sinh(v); }); }
void cosh_op(KernelContext& ctx) { unary_float(ctx, [](auto v) { return std::cosh(v); }); }
void asinh_op(KernelContext& ctx) { unary_float(ctx, [](auto v) { return std::asinh(v); }); }
void acosh_op(KernelContext& ctx) { unary_float(ctx, [](auto v) { return std::acosh(v); }); }
void atanh_op(KernelContext& ctx) { unary_float(ctx, [](auto v) { return std::atanh(v); }); }
void tanh_op(KernelContext& ctx) { unary_float(ctx, [](auto v) { return std::tanh(v); }); }
void erf_op(KernelContext& ctx) { unary_float(ctx, [](auto v) { return std::erf(v); }); }

// ---- activations ------------------------------------------------------------------------------

void sigmoid(KernelContext& ctx) {
  // Two forms so exp never overflows: for large |x| the result saturates to 0 or 1 exactly.
  unary_float(ctx, [](auto v) {
    using T = decltype(v);
    if (v >= T(0)) return T(1) / (T(1) + std::exp(-v));
    const T e = std::exp(v);
    return e / (T(1) + e);
  });
}
void softplus(KernelContext& ctx) {
  // log(1 + e^x) rewritten so that large x does not overflow to inf.
  unary_float(ctx, [](auto v) {
    using T = decltype(v);
    return v > T(0) ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v));
  });
}
// Opset 18: x * tanh(softplus(x)), softplus as above.
void mish(KernelContext& ctx) {
  unary_float(ctx, [](auto v) {
    using T = decltype(v);
    const T sp = v > T(0) ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v));
    return v * std::tanh(sp);
  });
}
void softsign(KernelContext& ctx) {
  unary_float(ctx, [](auto v) { using T = decltype(v); return v / (T(1) + std::abs(v)); });
}
// Relu takes signed integers too (opset 14); `v < 0 ? 0 : v` keeps NaN, like numpy's maximum.
void relu(KernelContext& ctx) {
  unary<kFloat | kSigned>(ctx, [](auto v) { using T = decltype(v); return v < T(0) ? T(0) : v; });
}
void leaky_relu(KernelContext& ctx) {
  const float alpha = attr_alpha(ctx, 0.01f);
  unary_float(ctx, [alpha](auto v) { using T = decltype(v); return v < T(0) ? T(alpha) * v : v; });
}
void thresholded_relu(KernelContext& ctx) {
  const float alpha = attr_alpha(ctx, 1.0f);
  unary_float(ctx, [alpha](auto v) { using T = decltype(v); return v > T(alpha) ? v : T(0); });
}
void elu(KernelContext& ctx) {
  const float alpha = attr_alpha(ctx, 1.0f);
  unary_float(ctx, [alpha](auto v) { using T = decltype(v); return v < T(0) ? T(alpha) * std::expm1(v) : v; });
}
void selu(KernelContext& ctx) {
  const float alpha = attr_alpha(ctx, 1.67326319217681884765625f);
  const float gamma = ctx.node().attr_float("gamma", 1.05070102214813232421875f);
  unary_float(ctx, [alpha, gamma](auto v) {
    using T = decltype(v);
    return T(gamma) * (v > T(0) ? v : T(alpha) * std::expm1(v));
  });
}
void celu(KernelContext& ctx) {
  const float alpha = attr_alpha(ctx, 1.0f);
  if (alpha == 0.0f) ctx.fail(ErrorCode::InvalidModel, "alpha must be non-zero");
  unary_float(ctx, [alpha](auto v) {
    using T = decltype(v);
    return std::max(T(0), v) + std::min(T(0), T(alpha) * std::expm1(v / T(alpha)));
  });
}
// std::min(std::max(v, lo), hi) keeps a NaN v (numpy's clip does too).
template <typename T>
T clamp_keep_nan(T v, T lo, T hi) { return std::min(std::max(v, lo), hi); }

void hard_sigmoid(KernelContext& ctx) {
  const float alpha = attr_alpha(ctx, 0.2f);
  const float beta = ctx.node().attr_float("beta", 0.5f);
  unary_float(ctx, [alpha, beta](auto v) {
    using T = decltype(v);
    return clamp_keep_nan(T(alpha) * v + T(beta), T(0), T(1));
  });
}
void hard_swish(KernelContext& ctx) {
  // HardSigmoid with alpha = 1/6, beta = 0.5, times x.
  unary_float(ctx, [](auto v) { using T = decltype(v); return v * clamp_keep_nan(v / T(6) + T(0.5), T(0), T(1)); });
}
void shrink(KernelContext& ctx) {
  const float lambd = ctx.node().attr_float("lambd", 0.5f);
  const float bias = ctx.node().attr_float("bias", 0.0f);
  // Integer inputs are computed in double and converted back, saturating.
  unary<kNumeric>(ctx, [lambd, bias](auto v) {
    using T = decltype(v);
    if constexpr (std::is_floating_point_v<T>) {
      return v < T(-lambd) ? v + T(bias) : v > T(lambd) ? v - T(bias) : T(0);
    } else {
      const double d = static_cast<double>(v);
      return saturate_cast<T>(d < -lambd ? d + bias : d > lambd ? d - bias : 0.0);
    }
  });
}

// ---- Clip -------------------------------------------------------------------------------------

// A min/max bound given as an input (opset 11+): a one-element tensor of the input's dtype.
template <typename T>
T clip_bound(const KernelContext& ctx, std::size_t i, T fallback) {
  if (!ctx.has_input(i)) return fallback;
  const Tensor& b = ctx.input(i);
  if (b.numel() != 1)
    ctx.fail(ErrorCode::InvalidModel, std::string(i == 1 ? "min" : "max") + " must be a scalar, got shape " +
                                          shape_to_string(b.shape()));
  return b.data<T>()[0];
}

void clip(KernelContext& ctx) {
  const DType t = ctx.input(0).dtype();
  dispatch_numeric(t, ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T lo = std::numeric_limits<T>::lowest();
    T hi = std::numeric_limits<T>::max();
    if (ctx.opset() < 11) {
      // Before opset 11 the bounds are float attributes and only float types are allowed.
      if (!std::is_floating_point_v<T>)
        ctx.fail(ErrorCode::InvalidModel, std::string("Clip before opset 11 does not take ") + dtype_name(t));
      if (ctx.node().has_attr("min")) lo = static_cast<T>(ctx.node().attr_float("min", 0.0f));
      if (ctx.node().has_attr("max")) hi = static_cast<T>(ctx.node().attr_float("max", 0.0f));
    } else {
      lo = clip_bound<T>(ctx, 1, lo);
      hi = clip_bound<T>(ctx, 2, hi);
    }
    // With lo > hi every element becomes hi, as the ONNX spec states.
    map_elements<T, T>(ctx, t, [lo, hi](T v) { return clamp_keep_nan(v, lo, hi); });
  });
}

// ---- predicates, logic, data movement ---------------------------------------------------------

void is_nan(KernelContext& ctx) {
  dispatch_float(ctx.input(0).dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    map_elements<T, bool>(ctx, DType::Bool, [](T v) { return std::isnan(v); });
  });
}

void is_inf(KernelContext& ctx) {
  const bool negative = ctx.node().attr_int("detect_negative", 1) != 0;
  const bool positive = ctx.node().attr_int("detect_positive", 1) != 0;
  dispatch_float(ctx.input(0).dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    map_elements<T, bool>(ctx, DType::Bool, [=](T v) {
      return std::isinf(v) && (v > T(0) ? positive : negative);
    });
  });
}

void not_op(KernelContext& ctx) {
  if (ctx.input(0).dtype() != DType::Bool)
    ctx.fail(ErrorCode::InvalidModel, std::string("Not takes bool, got ") + dtype_name(ctx.input(0).dtype()));
  map_elements<bool, bool>(ctx, DType::Bool, [](bool v) { return !v; });
}

// Output shares the input's bytes: kernels never write into their inputs, so no copy is needed.
void identity(KernelContext& ctx) { ctx.set_output(0, ctx.input(0)); }

// Inference-mode Dropout: the output is the input and the mask is all ones. Random (training)
// dropout is not supported; training with ratio 0 drops nothing, so it is the same as inference.
void dropout(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const DType t = x.dtype();
  if (t != DType::Float32 && t != DType::Float64 && !is_float16_like(t))
    ctx.fail(ErrorCode::Unsupported, std::string("dtype ") + dtype_name(t) + " is not supported");
  double ratio = 0.5;
  bool training = false;
  if (ctx.opset() >= 12) {
    if (ctx.has_input(2)) {
      const Tensor& mode = ctx.input(2);
      if (mode.dtype() != DType::Bool || mode.numel() != 1)
        ctx.fail(ErrorCode::InvalidModel, "training_mode must be a bool scalar");
      training = mode.data<bool>()[0];
    }
    // The ratio only matters in training mode; inference ignores it whatever its type.
    if (training && ctx.has_input(1)) ratio = read_scalar_as_double(ctx.input(1), ctx);
  } else {
    ratio = ctx.node().attr_float("ratio", 0.5f);
  }
  if (training && ratio != 0.0) {
    if (!(ratio > 0.0 && ratio < 1.0)) ctx.fail(ErrorCode::InvalidArgument, "ratio must be in [0, 1)");
    ctx.fail(ErrorCode::Unsupported, "training-mode Dropout (random masking) is not supported");
  }
  ctx.set_output(0, x);
  if (!ctx.wants_output(1)) return;
  if (ctx.opset() >= 10) {
    Tensor& mask = ctx.allocate_output(1, DType::Bool, x.shape());
    std::fill(mask.data<bool>(), mask.data<bool>() + mask.numel(), true);
    return;
  }
  // Opsets 7-9 give the mask the data's type.
  Tensor& mask = ctx.allocate_output(1, t, x.shape());
  if (t == DType::Float32) std::fill(mask.data<float>(), mask.data<float>() + mask.numel(), 1.0f);
  if (t == DType::Float64) std::fill(mask.data<double>(), mask.data<double>() + mask.numel(), 1.0);
  if (t == DType::Float16) std::fill(mask.data<Float16Bits>(), mask.data<Float16Bits>() + mask.numel(), float_to_half(1.0f));
  if (t == DType::BFloat16)
    std::fill(mask.data<BFloat16Bits>(), mask.data<BFloat16Bits>() + mask.numel(), float_to_bfloat16(1.0f));
}

}  // namespace

void register_elementwise(OpTable& t) {
  t.add("Abs", {with_half<abs_op>, 1, 1, 1});
  t.add("Neg", {with_half<neg>, 1, 1, 1});
  t.add("Sign", {with_half<sign>, 1, 1, 9});
  t.add("Exp", {with_half<exp_op>, 1, 1, 1});
  t.add("Log", {with_half<log_op>, 1, 1, 1});
  t.add("Sqrt", {with_half<sqrt_op>, 1, 1, 1});
  t.add("Reciprocal", {with_half<reciprocal>, 1, 1, 1});
  t.add("Floor", {with_half<floor_op>, 1, 1, 1});
  t.add("Ceil", {with_half<ceil_op>, 1, 1, 1});
  t.add("Round", {with_half<round_op>, 1, 1, 11});
  t.add("Sin", {with_half<sin_op>, 1, 1, 7});
  t.add("Cos", {with_half<cos_op>, 1, 1, 7});
  t.add("Tan", {with_half<tan_op>, 1, 1, 7});
  t.add("Asin", {with_half<asin_op>, 1, 1, 7});
  t.add("Acos", {with_half<acos_op>, 1, 1, 7});
  t.add("Atan", {with_half<atan_op>, 1, 1, 7});
  t.add("Sinh", {with_half<sinh_op>, 1, 1, 9});
  t.add("Cosh", {with_half<cosh_op>, 1, 1, 9});
  t.add("Asinh", {with_half<asinh_op>, 1, 1, 9});
  t.add("Acosh", {with_half<acosh_op>, 1, 1, 9});
  t.add("Atanh", {with_half<atanh_op>, 1, 1, 9});
  t.add("Tanh", {with_half<tanh_op>, 1, 1, 1});
  t.add("Erf", {with_half<erf_op>, 1, 1, 9});
  t.add("Sigmoid", {with_half<sigmoid>, 1, 1, 1});
  t.add("Softplus", {with_half<softplus>, 1, 1, 1});
  t.add("Softsign", {with_half<softsign>, 1, 1, 1});
  t.add("Mish", {with_half<mish>, 1, 1, 18});
  t.add("Relu", {with_half<relu>, 1, 1, 1});
  t.add("LeakyRelu", {with_half<leaky_relu>, 1, 1, 1});
  t.add("ThresholdedRelu", {with_half<thresholded_relu>, 1, 1, 10});
  t.add("Elu", {with_half<elu>, 1, 1, 1});
  t.add("Selu", {with_half<selu>, 1, 1, 1});
  t.add("Celu", {with_half<celu>, 1, 1, 12});
  t.add("HardSigmoid", {with_half<hard_sigmoid>, 1, 1, 1});
  t.add("HardSwish", {with_half<hard_swish>, 1, 1, 14});
  t.add("Shrink", {with_half<shrink>, 1, 1, 9});
  t.add("Clip", {with_half<clip>, 1, 3, 1});
  t.add("IsNaN", {with_half<is_nan>, 1, 1, 9});
  t.add("IsInf", {with_half<is_inf>, 1, 1, 10});
  t.add("Not", {not_op, 1, 1, 1});
  t.add("Identity", {identity, 1, 1, 1});
  t.add("Dropout", {dropout, 1, 3, 7});
}

}  // namespace wpk::reference
