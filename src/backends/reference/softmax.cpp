// Softmax, LogSoftmax, Hardmax.
//
// Their axis means two different things: before opset 13 the input is coerced to 2-D
// [prod(shape[:axis]), prod(shape[axis:])] and normalized over the whole second dimension
// (default axis 1); from opset 13 they normalize along the single axis (default -1).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/reference/common.hpp"
#include "backends/reference/reduce_internal.hpp"
#include "backends/reference/registry.hpp"

namespace wpk::reference {
namespace {

// The input viewed as [outer, n, inner]; the op normalizes over n.
struct Rows {
  std::int64_t outer = 1, n = 1, inner = 1;
};

Rows softmax_rows(const KernelContext& ctx, const Shape& shape) {
  const int rank = static_cast<int>(shape.size());
  Rows r;
  if (ctx.opset() < 13) {
    const std::int64_t axis = ctx.node().attr_int("axis", 1);
    // axis == rank is allowed here: it makes the second dimension empty (size 1).
    if (axis < -rank || axis > rank)
      ctx.fail(ErrorCode::InvalidModel,
               "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    const int a = static_cast<int>(axis < 0 ? axis + rank : axis);
    for (int i = 0; i < rank; ++i) (i < a ? r.outer : r.n) *= shape[i];
    return r;
  }
  if (rank == 0) ctx.fail(ErrorCode::InvalidModel, "input must have rank >= 1");
  const int a = normalize_axis(ctx.node().attr_int("axis", -1), rank, ctx);
  for (int i = 0; i < rank; ++i) {
    if (i < a) r.outer *= shape[i];
    else if (i == a) r.n = shape[i];
    else r.inner *= shape[i];
  }
  return r;
}

// Calls f(row_pointer_in, row_pointer_out, stride) for each of the outer*inner rows.
template <typename T, typename F>
void for_each_row(const Tensor& x, Tensor& y, const Rows& r, F f) {
  const T* px = x.data<T>();
  T* py = y.data<T>();
  for (std::int64_t o = 0; o < r.outer; ++o)
    for (std::int64_t i = 0; i < r.inner; ++i) {
      const std::int64_t base = o * r.n * r.inner + i;
      f(px + base, py + base, r.inner);
    }
}

template <typename T>
void softmax_typed(const Tensor& x, Tensor& y, const Rows& r, bool log) {
  for_each_row<T>(x, y, r, [&](const T* in, T* out, std::int64_t stride) {
    // Subtracting the row maximum keeps exp() from overflowing; it cancels out.
    double m = -std::numeric_limits<double>::infinity();
    for (std::int64_t k = 0; k < r.n; ++k) m = std::max(m, static_cast<double>(in[k * stride]));
    double sum = 0;
    for (std::int64_t k = 0; k < r.n; ++k) sum += std::exp(static_cast<double>(in[k * stride]) - m);
    const double log_sum = std::log(sum);
    for (std::int64_t k = 0; k < r.n; ++k) {
      const double d = static_cast<double>(in[k * stride]) - m;
      out[k * stride] = static_cast<T>(log ? d - log_sum : std::exp(d) / sum);
    }
  });
}

// 1 at the first maximum of each row (NaN counts as the maximum, as numpy's argmax), 0 elsewhere.
template <typename T>
void hardmax_typed(const Tensor& x, Tensor& y, const Rows& r) {
  for_each_row<T>(x, y, r, [&](const T* in, T* out, std::int64_t stride) {
    std::int64_t best = 0;
    for (std::int64_t k = 1; k < r.n; ++k) {
      const T v = in[k * stride];
      const T b = in[best * stride];
      if (!std::isnan(b) && (std::isnan(v) || v > b)) best = k;
    }
    for (std::int64_t k = 0; k < r.n; ++k) out[k * stride] = T(k == best ? 1 : 0);
  });
}

enum class Kind { Softmax, LogSoftmax, Hardmax };

void run(KernelContext& ctx, Kind kind) {
  const Tensor& in = ctx.input(0);
  const Rows r = softmax_rows(ctx, in.shape());
  run_same_dtype(ctx, in, in.shape(), [&](const Tensor& x, Tensor& y) {
    dispatch_float(x.dtype(), ctx, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if (kind == Kind::Hardmax)
        hardmax_typed<T>(x, y, r);
      else
        softmax_typed<T>(x, y, r, kind == Kind::LogSoftmax);
    });
  });
}

void softmax(KernelContext& ctx) { run(ctx, Kind::Softmax); }
void log_softmax(KernelContext& ctx) { run(ctx, Kind::LogSoftmax); }
void hardmax(KernelContext& ctx) { run(ctx, Kind::Hardmax); }

}  // namespace

void register_softmax(OpTable& t) {
  t.add("Softmax", {softmax, 1, 1, 1});
  t.add("LogSoftmax", {log_softmax, 1, 1, 1});
  t.add("Hardmax", {hardmax, 1, 1, 1});
}

}  // namespace wpk::reference
