// Elementwise ops of two or more inputs with numpy broadcasting: arithmetic, comparison, logic,
// Where, and the variadic Sum/Mean/Max/Min. Float kernels take float/double; 16-bit floats reach
// them through with_half (elementwise_util.hpp).
#include <cmath>
#include <type_traits>

#include "backends/reference/elementwise_util.hpp"
#include "backends/reference/misc_internal.hpp"

namespace wpk::reference {
namespace {

// y[i] = op(a[i], b[i]) where y is already allocated with the broadcast shape of A and B.
template <typename A, typename B, typename Out, typename Op>
void broadcast_apply(const Tensor& a, const Tensor& b, Tensor& y, Op op) {
  const A* pa = a.data<A>();
  const B* pb = b.data<B>();
  Out* py = y.data<Out>();
  if (a.shape() == b.shape()) {  // the common case: no index arithmetic
    for (std::int64_t i = 0; i < y.numel(); ++i) py[i] = op(pa[i], pb[i]);
    return;
  }
  // One operand a single element (a threshold, a scale), the other of the output's shape.
  if (b.numel() == 1 && a.shape() == y.shape()) {
    for (std::int64_t i = 0; i < y.numel(); ++i) py[i] = op(pa[i], pb[0]);
    return;
  }
  if (a.numel() == 1 && b.shape() == y.shape()) {
    for (std::int64_t i = 0; i < y.numel(); ++i) py[i] = op(pa[0], pb[i]);
    return;
  }
  std::int64_t i = 0;
  for_each_index(y.shape(), {broadcast_strides(a.shape(), y.shape()), broadcast_strides(b.shape(), y.shape())},
                 [&](const std::int64_t* off) { py[i++] = op(pa[off[0]], pb[off[1]]); });
}

// Applies out[i] = op(a[i], b[i]) over the broadcast shape of inputs A and B (both of type In).
template <typename In, typename Out, typename Op>
void broadcast_binary(KernelContext& ctx, DType out_dtype, Op op) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const Shape shape = broadcast_shapes({a.shape(), b.shape()}, ctx);
  Tensor& y = ctx.allocate_output(0, out_dtype, shape);
  broadcast_apply<In, In, Out>(a, b, y, op);
}

template <typename OpFactory>
void arithmetic(KernelContext& ctx, OpFactory make_op) {
  check_same_dtype(ctx);
  const DType t = ctx.input(0).dtype();
  dispatch_numeric(t, ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    broadcast_binary<T, T>(ctx, t, make_op(tag));
  });
}

bool is_float_dtype(DType t) { return t == DType::Float32 || t == DType::Float64; }

void add(KernelContext& ctx) {
  arithmetic(ctx, [](auto tag) { using T = typename decltype(tag)::type; return [](T a, T b) { return T(a + b); }; });
}
void sub(KernelContext& ctx) {
  arithmetic(ctx, [](auto tag) { using T = typename decltype(tag)::type; return [](T a, T b) { return T(a - b); }; });
}
void mul(KernelContext& ctx) {
  arithmetic(ctx, [](auto tag) { using T = typename decltype(tag)::type; return [](T a, T b) { return T(a * b); }; });
}
void div(KernelContext& ctx) {
  if (!is_float_dtype(ctx.input(0).dtype())) {
    // Integer division by zero is undefined in ONNX; wpk reports it instead of crashing.
    arithmetic(ctx, [&](auto tag) {
      using T = typename decltype(tag)::type;
      return [&](T a, T b) {
        if (b == 0) ctx.fail(ErrorCode::InvalidArgument, "integer division by zero");
        if (is_negative(b) && b == T(-1)) return negate(a);  // MIN / -1 overflows in C++
        return T(a / b);
      };
    });
    return;
  }
  arithmetic(ctx, [](auto tag) { using T = typename decltype(tag)::type; return [](T a, T b) { return T(a / b); }; });
}

// ---- Pow --------------------------------------------------------------------------------------

// Integer power by squaring; overflow wraps (computed in uint64, whose low bits are exact), as
// integer multiplication does in numpy.
template <typename T>
T int_pow(T base, std::int64_t e, const KernelContext& ctx) {
  if (e < 0) {  // 1 / base^|e| truncated toward zero
    if (base == T(1)) return T(1);
    if (is_negative(base) && base == T(-1)) return (e % 2 == 0) ? T(1) : base;
    if (base == T(0)) ctx.fail(ErrorCode::InvalidArgument, "integer 0 raised to a negative power");
    return T(0);
  }
  std::uint64_t result = 1;
  std::uint64_t b = static_cast<std::uint64_t>(base);
  for (; e > 0; e >>= 1) {
    if (e & 1) result *= b;
    b *= b;
  }
  return static_cast<T>(result);
}

// Pow: the exponent may have another numeric type than the base (opset 12+); Z has X's type.
template <typename X>
void pow_typed(KernelContext& ctx, const Tensor& x, const Tensor& e, Tensor& z) {
  dispatch_numeric(e.dtype(), ctx, [&](auto tag) {
    using E = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<X> && std::is_integral_v<E>) {
      broadcast_apply<X, E, X>(x, e, z, [&](X a, E b) {
        std::int64_t n = static_cast<std::int64_t>(b);
        // A uint64 exponent beyond int64 matters only for bases 0 and +-1: keep its parity.
        if constexpr (std::is_same_v<E, std::uint64_t>)
          if (b > E(1) << 62) n = (std::int64_t(1) << 62) + static_cast<std::int64_t>(b & E(1));
        return int_pow<X>(a, n, ctx);
      });
    } else {
      // Computed in double: exact for integer results and at least as accurate as X for floats.
      broadcast_apply<X, E, X>(x, e, z, [](X a, E b) {
        return saturate_cast<X>(std::pow(static_cast<double>(a), static_cast<double>(b)));
      });
    }
  });
}

void pow_op(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& e = ctx.input(1);
  const Shape shape = broadcast_shapes({x.shape(), e.shape()}, ctx);
  const DType t = x.dtype();
  if (t != DType::Float32 && t != DType::Float64 && t != DType::Int32 && t != DType::Int64)
    ctx.fail(ErrorCode::Unsupported, std::string("Pow base dtype ") + dtype_name(t) + " is not supported");
  Tensor& z = ctx.allocate_output(0, t, shape);
  if (t == DType::Float32) return pow_typed<float>(ctx, x, e, z);
  if (t == DType::Float64) return pow_typed<double>(ctx, x, e, z);
  if (t == DType::Int32) return pow_typed<std::int32_t>(ctx, x, e, z);
  pow_typed<std::int64_t>(ctx, x, e, z);
}

// ---- Mod --------------------------------------------------------------------------------------

// Remainder with the dividend's sign (C's %), without the MIN % -1 overflow.
template <typename T>
T trunc_mod(T a, T b) {
  if (is_negative(b) && b == T(-1)) return T(0);
  return static_cast<T>(a % b);
}

void mod_op(KernelContext& ctx) {
  check_same_dtype(ctx);
  const std::int64_t fmod_attr = ctx.node().attr_int("fmod", 0);
  if (fmod_attr != 0 && fmod_attr != 1) ctx.fail(ErrorCode::InvalidModel, "fmod must be 0 or 1");
  const DType t = ctx.input(0).dtype();
  if (is_float_dtype(t)) {
    if (fmod_attr != 1) ctx.fail(ErrorCode::InvalidModel, "fmod must be 1 for floating-point inputs");
    dispatch_float(t, ctx, [&](auto tag) {
      using T = typename decltype(tag)::type;
      broadcast_binary<T, T>(ctx, t, [](T a, T b) { return std::fmod(a, b); });
    });
    return;
  }
  dispatch_integer(t, ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    broadcast_binary<T, T>(ctx, t, [&](T a, T b) {
      if (b == 0) ctx.fail(ErrorCode::InvalidArgument, "integer modulo by zero");
      T r = trunc_mod(a, b);
      // Python-style mod: the remainder takes the divisor's sign.
      if (fmod_attr == 0 && r != 0 && is_negative(r) != is_negative(b)) r = static_cast<T>(r + b);
      return r;
    });
  });
}

// ---- comparison and logic ---------------------------------------------------------------------

// Output bool over the broadcast shape; `op` is a generic lambda. Bool inputs only when allowed
// (Equal takes them, the orderings do not).
template <typename Op>
void compare(KernelContext& ctx, bool allow_bool, Op op) {
  check_same_dtype(ctx);
  const DType t = ctx.input(0).dtype();
  if (t == DType::Bool && allow_bool) return broadcast_binary<bool, bool>(ctx, DType::Bool, op);
  dispatch_numeric(t, ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    broadcast_binary<T, bool>(ctx, DType::Bool, op);
  });
}

void equal(KernelContext& ctx) {
  if (equal_if_strings(ctx)) return;
  compare(ctx, true, [](auto a, auto b) { return a == b; });
}
void less(KernelContext& ctx) { compare(ctx, false, [](auto a, auto b) { return a < b; }); }
void less_equal(KernelContext& ctx) { compare(ctx, false, [](auto a, auto b) { return a <= b; }); }
void greater(KernelContext& ctx) { compare(ctx, false, [](auto a, auto b) { return a > b; }); }
void greater_equal(KernelContext& ctx) { compare(ctx, false, [](auto a, auto b) { return a >= b; }); }

template <typename Op>
void logic(KernelContext& ctx, Op op) {
  for (std::size_t i = 0; i < 2; ++i)
    if (ctx.input(i).dtype() != DType::Bool)
      ctx.fail(ErrorCode::InvalidModel, "input " + std::to_string(i) + " must be bool, got " + dtype_name(ctx.input(i).dtype()));
  broadcast_binary<bool, bool>(ctx, DType::Bool, op);
}

void and_op(KernelContext& ctx) { logic(ctx, [](bool a, bool b) { return a && b; }); }
void or_op(KernelContext& ctx) { logic(ctx, [](bool a, bool b) { return a || b; }); }
void xor_op(KernelContext& ctx) { logic(ctx, [](bool a, bool b) { return a != b; }); }

void bit_shift(KernelContext& ctx) {
  check_same_dtype(ctx);
  const std::string direction = ctx.node().attr_string("direction", "");
  if (direction != "LEFT" && direction != "RIGHT")
    ctx.fail(ErrorCode::InvalidModel, "direction must be \"LEFT\" or \"RIGHT\", got \"" + direction + "\"");
  const bool left = direction == "LEFT";
  const DType t = ctx.input(0).dtype();
  dispatch_integer(t, ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_signed_v<T>) {
      ctx.fail(ErrorCode::Unsupported, std::string("BitShift takes unsigned integers, got ") + dtype_name(t));
    } else {
      broadcast_binary<T, T>(ctx, t, [left](T a, T b) {
        // Shifting by the bit width or more is undefined in C++; every bit is shifted out, so 0.
        if (b >= sizeof(T) * 8) return T(0);
        return left ? static_cast<T>(std::uint64_t(a) << b) : static_cast<T>(a >> b);
      });
    }
  });
}

// Opset 18's bitwise ops on integers of any width and sign.
template <typename Op>
void bitwise(KernelContext& ctx, Op op) {
  check_same_dtype(ctx);
  const DType t = ctx.input(0).dtype();
  dispatch_integer(t, ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    broadcast_binary<T, T>(ctx, t, [op](T a, T b) { return static_cast<T>(op(a, b)); });
  });
}

void bitwise_and(KernelContext& ctx) { bitwise(ctx, [](auto a, auto b) { return a & b; }); }
void bitwise_or(KernelContext& ctx) { bitwise(ctx, [](auto a, auto b) { return a | b; }); }
void bitwise_xor(KernelContext& ctx) { bitwise(ctx, [](auto a, auto b) { return a ^ b; }); }

void bitwise_not(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  dispatch_integer(x.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    const T* px = x.data<T>();
    T* py = y.data<T>();
    for (std::int64_t i = 0; i < x.numel(); ++i) py[i] = static_cast<T>(~px[i]);
  });
}

// ---- Where, PRelu -----------------------------------------------------------------------------

void where_op(KernelContext& ctx) {
  const Tensor& c = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const Tensor& y = ctx.input(2);
  if (c.dtype() != DType::Bool)
    ctx.fail(ErrorCode::InvalidModel, std::string("condition must be bool, got ") + dtype_name(c.dtype()));
  if (x.dtype() != y.dtype())
    ctx.fail(ErrorCode::InvalidModel, std::string("X is ") + dtype_name(x.dtype()) + " but Y is " + dtype_name(y.dtype()));
  const Shape shape = broadcast_shapes({c.shape(), x.shape(), y.shape()}, ctx);
  dispatch_any(x.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    Tensor& out = ctx.allocate_output(0, x.dtype(), shape);
    const bool* pc = c.data<bool>();
    const T* px = x.data<T>();
    const T* py = y.data<T>();
    T* po = out.data<T>();
    std::int64_t i = 0;
    for_each_index(shape,
                   {broadcast_strides(c.shape(), shape), broadcast_strides(x.shape(), shape),
                    broadcast_strides(y.shape(), shape)},
                   [&](const std::int64_t* off) { po[i++] = pc[off[0]] ? px[off[1]] : py[off[2]]; });
  });
}

void prelu(KernelContext& ctx) {
  check_same_dtype(ctx);
  const Tensor& x = ctx.input(0);
  const Tensor& slope = ctx.input(1);
  // Unidirectional broadcasting: slope stretches to X, never the other way.
  if (broadcast_shapes({x.shape(), slope.shape()}, ctx) != x.shape())
    ctx.fail(ErrorCode::InvalidModel, "slope shape " + shape_to_string(slope.shape()) +
                                          " does not broadcast to X shape " + shape_to_string(x.shape()));
  dispatch_numeric(x.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    broadcast_binary<T, T>(ctx, x.dtype(), [](T v, T s) { return is_negative(v) ? static_cast<T>(s * v) : v; });
  });
}

// ---- variadic: Sum, Mean, Max, Min ------------------------------------------------------------

// y = op(...op(op(x0, x1), x2)..., xn) over the broadcast shape of all inputs. Linear: each input
// is folded into y in one pass.
template <typename T, typename Op>
Tensor& fold_inputs(KernelContext& ctx, Op op) {
  std::vector<Shape> shapes;
  for (std::size_t k = 0; k < ctx.num_inputs(); ++k) shapes.push_back(ctx.input(k).shape());
  const Shape shape = broadcast_shapes(shapes, ctx);
  Tensor& y = ctx.allocate_output(0, dtype_of<T>(), shape);
  T* py = y.data<T>();
  for (std::size_t k = 0; k < ctx.num_inputs(); ++k) {
    const Tensor& x = ctx.input(k);
    const T* px = x.data<T>();
    auto step = [&](std::int64_t i, std::int64_t j) { py[i] = k == 0 ? px[j] : static_cast<T>(op(py[i], px[j])); };
    if (x.shape() == shape) {
      for (std::int64_t i = 0; i < y.numel(); ++i) step(i, i);
      continue;
    }
    std::int64_t i = 0;
    for_each_index(shape, {broadcast_strides(x.shape(), shape)}, [&](const std::int64_t* off) { step(i++, off[0]); });
  }
  return y;
}

template <typename Op>
void variadic(KernelContext& ctx, Op op) {
  check_same_dtype(ctx);
  dispatch_numeric(ctx.input(0).dtype(), ctx, [&](auto tag) { fold_inputs<typename decltype(tag)::type>(ctx, op); });
}

void sum(KernelContext& ctx) { variadic(ctx, [](auto a, auto b) { return a + b; }); }
// NaN wins in Max and Min, as in numpy's maximum/minimum.
void max_op(KernelContext& ctx) { variadic(ctx, [](auto a, auto b) { return (b > a || is_nan_value(b)) ? b : a; }); }
void min_op(KernelContext& ctx) { variadic(ctx, [](auto a, auto b) { return (b < a || is_nan_value(b)) ? b : a; }); }

void mean(KernelContext& ctx) {
  check_same_dtype(ctx);
  dispatch_float(ctx.input(0).dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    Tensor& y = fold_inputs<T>(ctx, [](T a, T b) { return a + b; });
    const T n = static_cast<T>(ctx.num_inputs());
    T* py = y.data<T>();
    for (std::int64_t i = 0; i < y.numel(); ++i) py[i] /= n;
  });
}

}  // namespace

void register_binary(OpTable& t) {
  t.add("Add", {with_half<add>, 2, 2, 7});
  t.add("Sub", {with_half<sub>, 2, 2, 7});
  t.add("Mul", {with_half<mul>, 2, 2, 7});
  t.add("Div", {with_half<div>, 2, 2, 7});
  t.add("Pow", {with_half<pow_op, false>, 2, 2, 7});
  t.add("Mod", {with_half<mod_op>, 2, 2, 10});
  t.add("Equal", {with_half<equal>, 2, 2, 7});
  t.add("Less", {with_half<less>, 2, 2, 7});
  t.add("LessOrEqual", {with_half<less_equal>, 2, 2, 12});
  t.add("Greater", {with_half<greater>, 2, 2, 7});
  t.add("GreaterOrEqual", {with_half<greater_equal>, 2, 2, 12});
  t.add("And", {and_op, 2, 2, 7});
  t.add("Or", {or_op, 2, 2, 7});
  t.add("Xor", {xor_op, 2, 2, 7});
  t.add("BitShift", {bit_shift, 2, 2, 11});
  t.add("BitwiseAnd", {bitwise_and, 2, 2, 18});
  t.add("BitwiseOr", {bitwise_or, 2, 2, 18});
  t.add("BitwiseXor", {bitwise_xor, 2, 2, 18});
  t.add("BitwiseNot", {bitwise_not, 1, 1, 18});
  t.add("Where", {where_op, 3, 3, 9});
  t.add("PRelu", {with_half<prelu>, 2, 2, 7});
  t.add("Sum", {with_half<sum>, 1, -1, 6});
  t.add("Mean", {with_half<mean>, 1, -1, 6});
  t.add("Max", {with_half<max_op>, 1, -1, 6});
  t.add("Min", {with_half<min_op>, 1, -1, 6});
}

}  // namespace wpk::reference
