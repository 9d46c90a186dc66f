// Reductions over a set of axes (ReduceSum ... ReduceLogSumExp), ArgMax/ArgMin and CumSum.
// Softmax, LogSoftmax and Hardmax live in softmax.cpp and are registered from here.
//
// Float data accumulates in double; integer sums and products accumulate in uint64 so that
// overflow wraps (as in two's-complement C arithmetic) instead of being undefined behaviour.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/reference/common.hpp"
#include "backends/reference/reduce_internal.hpp"
#include "backends/reference/registry.hpp"

namespace wpk::reference {
namespace {

enum class ReduceOp { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

struct ReducePlan {
  Shape out_shape;
  // Per input axis: the stride of that axis in the output (0 on reduced axes), so the input walk
  // knows which output element each input element folds into.
  std::vector<std::int64_t> out_strides;
  std::int64_t out_count = 1;
  std::int64_t group = 1;  // input elements folded into each output element
};

ReducePlan plan_reduce(const KernelContext& ctx, const Shape& in, const std::vector<std::int64_t>& axes,
                       bool keepdims) {
  const int rank = static_cast<int>(in.size());
  std::vector<char> reduced(in.size(), axes.empty() ? 1 : 0);
  for (auto a : axes) {
    if (a < -rank || a >= rank)
      ctx.fail(ErrorCode::InvalidModel,
               "axis " + std::to_string(a) + " is out of range for an input of rank " + std::to_string(rank));
    const auto ax = static_cast<std::size_t>(a < 0 ? a + rank : a);
    if (reduced[ax]) ctx.fail(ErrorCode::InvalidModel, "axis " + std::to_string(a) + " is listed twice");
    reduced[ax] = 1;
  }
  ReducePlan p;
  Shape kept = in;
  for (int i = 0; i < rank; ++i)
    if (reduced[i]) {
      p.group *= in[i];
      kept[i] = 1;
    } else if (!keepdims) {
      p.out_shape.push_back(in[i]);
    }
  if (keepdims) p.out_shape = kept;
  p.out_strides = contiguous_strides(kept);
  for (int i = 0; i < rank; ++i)
    if (reduced[i]) p.out_strides[i] = 0;
  p.out_count = shape_numel(kept);
  return p;
}

// acc[o] = step(acc[o], x) over every input element x that folds into output element o.
template <typename T, typename A, typename Step>
std::vector<A> accumulate(const Tensor& x, const ReducePlan& p, A init, Step step) {
  std::vector<A> acc(static_cast<std::size_t>(p.out_count), init);
  const T* px = x.data<T>();
  for_each_index(x.shape(), {contiguous_strides(x.shape()), p.out_strides},
                 [&](const std::int64_t* off) { acc[off[1]] = step(acc[off[1]], px[off[0]]); });
  return acc;
}

// Truncates toward zero and clamps to T's range; NaN becomes 0.
template <typename T>
T saturate_cast(double v) {
  if (std::isnan(v)) return T(0);
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

template <typename T, typename A, typename Finish>
void emit(const std::vector<A>& acc, Tensor& y, Finish finish) {
  T* py = y.data<T>();
  for (std::size_t i = 0; i < acc.size(); ++i) py[i] = finish(acc[i]);
}

// log(sum(exp(x))) with the per-output maximum subtracted first so large inputs do not overflow.
template <typename T>
std::vector<double> log_sum_exp(const Tensor& x, const ReducePlan& p) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> m = accumulate<T>(x, p, -inf, [](double a, T v) {
    const double d = static_cast<double>(v);
    return (std::isnan(d) || d > a) ? d : a;
  });
  std::vector<double> s(m.size(), 0.0);
  const T* px = x.data<T>();
  for_each_index(x.shape(), {contiguous_strides(x.shape()), p.out_strides}, [&](const std::int64_t* off) {
    if (std::isfinite(m[off[1]])) s[off[1]] += std::exp(static_cast<double>(px[off[0]]) - m[off[1]]);
  });
  // An infinite (or empty, -inf) maximum is already the answer.
  for (std::size_t i = 0; i < m.size(); ++i) s[i] = std::isfinite(m[i]) ? m[i] + std::log(s[i]) : m[i];
  return s;
}

template <typename T>
void reduce_float(ReduceOp op, const Tensor& x, const ReducePlan& p, Tensor& y) {
  using A = double;
  const double n = static_cast<double>(p.group);
  const double inf = std::numeric_limits<double>::infinity();
  auto to_t = [](A a) { return static_cast<T>(a); };
  auto sum = [](A a, T v) { return a + static_cast<A>(v); };
  auto sum_sq = [](A a, T v) { return a + static_cast<A>(v) * static_cast<A>(v); };
  switch (op) {
    case ReduceOp::Sum: return emit<T>(accumulate<T>(x, p, A(0), sum), y, to_t);
    case ReduceOp::Mean: return emit<T>(accumulate<T>(x, p, A(0), sum), y, [&](A a) { return T(a / n); });
    case ReduceOp::SumSquare: return emit<T>(accumulate<T>(x, p, A(0), sum_sq), y, to_t);
    case ReduceOp::L2: return emit<T>(accumulate<T>(x, p, A(0), sum_sq), y, [](A a) { return T(std::sqrt(a)); });
    case ReduceOp::LogSum: return emit<T>(accumulate<T>(x, p, A(0), sum), y, [](A a) { return T(std::log(a)); });
    case ReduceOp::L1:
      return emit<T>(accumulate<T>(x, p, A(0), [](A a, T v) { return a + std::abs(static_cast<A>(v)); }), y, to_t);
    case ReduceOp::Prod:
      return emit<T>(accumulate<T>(x, p, A(1), [](A a, T v) { return a * static_cast<A>(v); }), y, to_t);
    // NaN wins so that it propagates, as in numpy.
    case ReduceOp::Max:
      return emit<T>(accumulate<T>(x, p, -inf, [](A a, T v) { return (std::isnan(v) || v > a) ? A(v) : a; }), y, to_t);
    case ReduceOp::Min:
      return emit<T>(accumulate<T>(x, p, inf, [](A a, T v) { return (std::isnan(v) || v < a) ? A(v) : a; }), y, to_t);
    case ReduceOp::LogSumExp: return emit<T>(log_sum_exp<T>(x, p), y, to_t);
  }
}

template <typename T>
void reduce_integer(ReduceOp op, const Tensor& x, const ReducePlan& p, Tensor& y) {
  using U = std::uint64_t;
  const auto n = static_cast<U>(p.group);
  auto wrap = [](U a) { return static_cast<T>(a); };
  auto sum = [](U a, T v) { return U(a + static_cast<U>(v)); };
  auto sum_sq = [](U a, T v) { return U(a + static_cast<U>(v) * static_cast<U>(v)); };
  auto dsum = [](double a, T v) { return a + static_cast<double>(v); };
  switch (op) {
    case ReduceOp::Sum: return emit<T>(accumulate<T>(x, p, U(0), sum), y, wrap);
    case ReduceOp::SumSquare: return emit<T>(accumulate<T>(x, p, U(0), sum_sq), y, wrap);
    case ReduceOp::Prod:
      return emit<T>(accumulate<T>(x, p, U(1), [](U a, T v) { return U(a * static_cast<U>(v)); }), y, wrap);
    case ReduceOp::L1:
      return emit<T>(accumulate<T>(x, p, U(0),
                                   [](U a, T v) {
                                     if constexpr (std::is_signed_v<T>)
                                       if (v < 0) return U(a - static_cast<U>(v));
                                     return U(a + static_cast<U>(v));
                                   }),
                     y, wrap);
    case ReduceOp::Mean:
      // Integer mean truncates toward zero; a mean over nothing is 0 rather than a crash.
      return emit<T>(accumulate<T>(x, p, U(0), sum), y, [&](U a) {
        if (n == 0) return T(0);
        if constexpr (std::is_signed_v<T>)
          return static_cast<T>(static_cast<std::int64_t>(a) / static_cast<std::int64_t>(n));
        return static_cast<T>(a / n);
      });
    case ReduceOp::Max:
      return emit<T>(accumulate<T>(x, p, std::numeric_limits<T>::lowest(), [](T a, T v) { return v > a ? v : a; }), y,
                     [](T a) { return a; });
    case ReduceOp::Min:
      return emit<T>(accumulate<T>(x, p, std::numeric_limits<T>::max(), [](T a, T v) { return v < a ? v : a; }), y,
                     [](T a) { return a; });
    case ReduceOp::L2:
      return emit<T>(accumulate<T>(x, p, 0.0,
                                   [](double a, T v) { return a + static_cast<double>(v) * static_cast<double>(v); }),
                     y, [](double a) { return saturate_cast<T>(std::sqrt(a)); });
    case ReduceOp::LogSum:
      return emit<T>(accumulate<T>(x, p, 0.0, dsum), y, [](double a) { return saturate_cast<T>(std::log(a)); });
    case ReduceOp::LogSumExp:
      return emit<T>(log_sum_exp<T>(x, p), y, [](double a) { return saturate_cast<T>(a); });
  }
}

void run_reduce(KernelContext& ctx, ReduceOp op) {
  const Tensor& x = ctx.input(0);
  // Axes are an attribute up to opset 17 (ReduceSum: up to 12) and an optional input after.
  std::vector<std::int64_t> axes;
  if (ctx.has_input(1)) {
    const Tensor& a = ctx.input(1);
    if (a.rank() > 1) ctx.fail(ErrorCode::InvalidModel, "axes must be a 1-D tensor, got shape " + shape_to_string(a.shape()));
    axes = read_int_list(a, ctx);
  } else {
    axes = ctx.node().attr_ints("axes");
  }
  const bool keepdims = ctx.node().attr_int("keepdims", 1) != 0;
  if (axes.empty() && ctx.node().attr_int("noop_with_empty_axes", 0) != 0) {
    ctx.set_output(0, x);
    return;
  }
  const ReducePlan p = plan_reduce(ctx, x.shape(), axes, keepdims);
  if (x.dtype() == DType::Bool && (op == ReduceOp::Max || op == ReduceOp::Min) && ctx.opset() >= 20) {
    // Opset 20: Max is any, Min is all (false and true over nothing).
    Tensor& y = ctx.allocate_output(0, DType::Bool, p.out_shape);
    const bool any = op == ReduceOp::Max;
    emit<bool>(accumulate<bool>(x, p, !any, [any](bool a, bool v) { return any ? (a || v) : (a && v); }), y,
               [](bool a) { return a; });
    return;
  }
  run_same_dtype(ctx, x, p.out_shape, [&](const Tensor& in, Tensor& y) {
    dispatch_numeric(in.dtype(), ctx, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_floating_point_v<T>)
        reduce_float<T>(op, in, p, y);
      else
        reduce_integer<T>(op, in, p, y);
    });
  });
}

void reduce_sum(KernelContext& ctx) { run_reduce(ctx, ReduceOp::Sum); }
void reduce_mean(KernelContext& ctx) { run_reduce(ctx, ReduceOp::Mean); }
void reduce_max(KernelContext& ctx) { run_reduce(ctx, ReduceOp::Max); }
void reduce_min(KernelContext& ctx) { run_reduce(ctx, ReduceOp::Min); }
void reduce_prod(KernelContext& ctx) { run_reduce(ctx, ReduceOp::Prod); }
void reduce_l1(KernelContext& ctx) { run_reduce(ctx, ReduceOp::L1); }
void reduce_l2(KernelContext& ctx) { run_reduce(ctx, ReduceOp::L2); }
void reduce_log_sum(KernelContext& ctx) { run_reduce(ctx, ReduceOp::LogSum); }
void reduce_log_sum_exp(KernelContext& ctx) { run_reduce(ctx, ReduceOp::LogSumExp); }
void reduce_sum_square(KernelContext& ctx) { run_reduce(ctx, ReduceOp::SumSquare); }

// Views `shape` as [outer, n, inner] around `axis`.
struct AxisSplit {
  std::int64_t outer = 1, n = 1, inner = 1;
};
AxisSplit split_at(const Shape& shape, int axis) {
  AxisSplit s;
  for (int i = 0; i < static_cast<int>(shape.size()); ++i) {
    if (i < axis) s.outer *= shape[i];
    else if (i == axis) s.n = shape[i];
    else s.inner *= shape[i];
  }
  return s;
}

// ArgMax/ArgMin along one axis. NaN counts as the extreme value (numpy's argmax/argmin), ties
// go to the first index unless select_last_index.
template <typename T, bool kMax>
void arg_extreme(const Tensor& x, const AxisSplit& s, bool last, Tensor& y) {
  const T* px = x.data<T>();
  std::int64_t* py = y.data<std::int64_t>();
  auto is_nan = [](T v) {
    if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
    else return (static_cast<void>(v), false);
  };
  std::vector<T> best(static_cast<std::size_t>(s.inner));
  for (std::int64_t o = 0; o < s.outer; ++o) {
    const T* base = px + o * s.n * s.inner;
    std::int64_t* out = py + o * s.inner;
    for (std::int64_t i = 0; i < s.inner; ++i) {
      best[i] = base[i];
      out[i] = 0;
    }
    for (std::int64_t k = 1; k < s.n; ++k)
      for (std::int64_t i = 0; i < s.inner; ++i) {
        const T v = base[k * s.inner + i];
        const T b = best[i];
        bool take;
        if (is_nan(b)) take = last && is_nan(v);
        else if (is_nan(v)) take = true;
        else take = (kMax ? v > b : v < b) || (last && v == b);
        if (take) {
          best[i] = v;
          out[i] = k;
        }
      }
  }
}

template <bool kMax>
void run_arg(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  if (in.rank() == 0) ctx.fail(ErrorCode::InvalidModel, "input must have rank >= 1");
  const int axis = normalize_axis(ctx.node().attr_int("axis", 0), in.rank(), ctx);
  const bool keepdims = ctx.node().attr_int("keepdims", 1) != 0;
  const bool last = ctx.node().attr_int("select_last_index", 0) != 0;
  if (in.shape()[axis] == 0) ctx.fail(ErrorCode::InvalidArgument, "cannot take the arg-extreme of an empty axis");
  Shape out_shape = in.shape();
  if (keepdims) out_shape[axis] = 1;
  else out_shape.erase(out_shape.begin() + axis);
  const AxisSplit s = split_at(in.shape(), axis);
  Tensor& y = ctx.allocate_output(0, DType::Int64, out_shape);
  const Tensor x = is_float16_like(in.dtype()) ? widen_to_float32(in) : in;
  dispatch_numeric(x.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    arg_extreme<T, kMax>(x, s, last, y);
  });
}

void arg_max(KernelContext& ctx) { run_arg<true>(ctx); }
void arg_min(KernelContext& ctx) { run_arg<false>(ctx); }

template <typename T>
void cumsum_typed(const Tensor& x, const AxisSplit& s, bool exclusive, bool reverse, Tensor& y) {
  using A = std::conditional_t<std::is_floating_point_v<T>, double, std::uint64_t>;
  const T* px = x.data<T>();
  T* py = y.data<T>();
  std::vector<A> acc(static_cast<std::size_t>(s.inner));
  for (std::int64_t o = 0; o < s.outer; ++o) {
    std::fill(acc.begin(), acc.end(), A(0));
    const std::int64_t base = o * s.n * s.inner;
    for (std::int64_t j = 0; j < s.n; ++j) {
      const std::int64_t k = reverse ? s.n - 1 - j : j;
      const std::int64_t row = base + k * s.inner;
      for (std::int64_t i = 0; i < s.inner; ++i) {
        const A before = acc[i];
        acc[i] = A(acc[i] + static_cast<A>(px[row + i]));
        py[row + i] = static_cast<T>(exclusive ? before : acc[i]);
      }
    }
  }
}

void cumsum(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  const Tensor& axis_t = ctx.input(1);
  if (axis_t.numel() != 1 || axis_t.rank() > 1)
    ctx.fail(ErrorCode::InvalidModel, "axis must be a scalar, got shape " + shape_to_string(axis_t.shape()));
  if (in.rank() == 0) ctx.fail(ErrorCode::InvalidModel, "input must have rank >= 1");
  const int axis = normalize_axis(read_int_list(axis_t, ctx)[0], in.rank(), ctx);
  const bool exclusive = ctx.node().attr_int("exclusive", 0) != 0;
  const bool reverse = ctx.node().attr_int("reverse", 0) != 0;
  const AxisSplit s = split_at(in.shape(), axis);
  run_same_dtype(ctx, in, in.shape(), [&](const Tensor& x, Tensor& y) {
    dispatch_numeric(x.dtype(), ctx, [&](auto tag) {
      using T = typename decltype(tag)::type;
      cumsum_typed<T>(x, s, exclusive, reverse, y);
    });
  });
}

}  // namespace

void register_reduce(OpTable& t) {
  t.add("ReduceSum", {reduce_sum, 1, 2, 1});
  t.add("ReduceMean", {reduce_mean, 1, 2, 1});
  t.add("ReduceMax", {reduce_max, 1, 2, 1});
  t.add("ReduceMin", {reduce_min, 1, 2, 1});
  t.add("ReduceProd", {reduce_prod, 1, 2, 1});
  t.add("ReduceL1", {reduce_l1, 1, 2, 1});
  t.add("ReduceL2", {reduce_l2, 1, 2, 1});
  t.add("ReduceLogSum", {reduce_log_sum, 1, 2, 1});
  t.add("ReduceLogSumExp", {reduce_log_sum_exp, 1, 2, 1});
  t.add("ReduceSumSquare", {reduce_sum_square, 1, 2, 1});
  t.add("ArgMax", {arg_max, 1, 1, 1});
  t.add("ArgMin", {arg_min, 1, 1, 1});
  t.add("CumSum", {cumsum, 2, 2, 11});
  register_softmax(t);
  register_loss(t);
}

}  // namespace wpk::reference
