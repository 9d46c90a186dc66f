// Training-style losses that appear in exported inference graphs: NegativeLogLikelihoodLoss and
// SoftmaxCrossEntropyLoss (opsets 12/13). Both view the scores as [N, C, D] with D the product of
// the trailing dimensions, so one loop serves the [N, C] and [N, C, d1, ..., dk] forms.
//
// Per-sample losses and the reduction accumulate in double; the result is cast to the input type
// once at the end, so float32 sums over many samples do not drift.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "backends/reference/common.hpp"
#include "backends/reference/reduce_internal.hpp"
#include "backends/reference/registry.hpp"

namespace wpk::reference {
namespace {

enum class Reduction { None, Sum, Mean };

Reduction read_reduction(const KernelContext& ctx) {
  const std::string r = ctx.node().attr_string("reduction", "mean");
  if (r == "none") return Reduction::None;
  if (r == "sum") return Reduction::Sum;
  if (r == "mean") return Reduction::Mean;
  ctx.fail(ErrorCode::InvalidModel, "reduction '" + r + "' is not one of none, sum, mean");
}

// The shared shape facts of both ops, checked once before any data is read.
struct LossShape {
  std::int64_t n = 0, c = 0, d = 1;  // scores viewed as [n, c, d]
  Shape target_shape;                // [N, d1, ..., dk]: the shape of an unreduced loss
};

LossShape check_shapes(const KernelContext& ctx, const Tensor& scores, const Tensor& target, const char* what) {
  if (scores.dtype() != DType::Float32 && scores.dtype() != DType::Float64)
    ctx.fail(ErrorCode::Unsupported, std::string(what) + " dtype " + dtype_name(scores.dtype()) +
                                         " is not supported (float32 and float64 are)");
  if (scores.rank() < 2)
    ctx.fail(ErrorCode::InvalidArgument,
             std::string(what) + " must have shape [N, C, d1, ..., dk], got " + shape_to_string(scores.shape()));
  if (target.dtype() != DType::Int32 && target.dtype() != DType::Int64)
    ctx.fail(ErrorCode::InvalidModel,
             std::string("class indices must be int32 or int64, got ") + dtype_name(target.dtype()));
  LossShape s;
  const Shape& in = scores.shape();
  s.n = in[0];
  s.c = in[1];
  s.target_shape.push_back(in[0]);
  for (std::size_t i = 2; i < in.size(); ++i) {
    s.d *= in[i];
    s.target_shape.push_back(in[i]);
  }
  if (target.shape() != s.target_shape)
    ctx.fail(ErrorCode::InvalidArgument, "class indices have shape " + shape_to_string(target.shape()) + " but " +
                                             what + " of shape " + shape_to_string(in) + " needs " +
                                             shape_to_string(s.target_shape));
  return s;
}

// Optional per-class weights: absent means every class weighs 1.
template <typename T>
const T* read_weights(const KernelContext& ctx, std::size_t index, const Tensor& scores, std::int64_t classes) {
  if (!ctx.has_input(index)) return nullptr;
  const Tensor& w = ctx.input(index);
  if (w.dtype() != scores.dtype())
    ctx.fail(ErrorCode::InvalidModel, std::string("weights are ") + dtype_name(w.dtype()) + " but the scores are " +
                                          dtype_name(scores.dtype()));
  if (w.shape() != Shape{classes})
    ctx.fail(ErrorCode::InvalidArgument, "weights must have shape [" + std::to_string(classes) +
                                             "] (one per class), got " + shape_to_string(w.shape()));
  return w.data<T>();
}

// Picks -log_prob[n, target, d] * weight[target] for every sample and reduces. `log_prob` is the
// [N, C, D] input viewed flat. Targets equal to ignore_index contribute nothing, not even to the
// mean's denominator; any other target outside [0, C) is an error rather than an out-of-bounds read.
template <typename T, typename I>
void nll_core(KernelContext& ctx, const T* log_prob, const LossShape& s, const I* target, const T* weight,
              Reduction reduction, std::optional<std::int64_t> ignore_index) {
  const bool keep = reduction == Reduction::None;
  Tensor& y = ctx.allocate_output(0, ctx.input(0).dtype(), keep ? s.target_shape : Shape{});
  T* py = y.data<T>();
  double loss_sum = 0.0;
  double weight_sum = 0.0;
  for (std::int64_t n = 0; n < s.n; ++n)
    for (std::int64_t d = 0; d < s.d; ++d) {
      const std::int64_t sample = n * s.d + d;
      const auto cls = static_cast<std::int64_t>(target[sample]);
      double loss = 0.0;
      if (!(ignore_index && cls == *ignore_index)) {
        if (cls < 0 || cls >= s.c)
          ctx.fail(ErrorCode::InvalidArgument, "class index " + std::to_string(cls) + " at sample " +
                                                   std::to_string(sample) + " is outside [0, " + std::to_string(s.c) +
                                                   ")" + (ignore_index ? " and is not ignore_index" : ""));
        const double w = weight ? static_cast<double>(weight[cls]) : 1.0;
        loss = -static_cast<double>(log_prob[(n * s.c + cls) * s.d + d]) * w;
        weight_sum += w;
      }
      if (keep) py[sample] = static_cast<T>(loss);
      loss_sum += loss;
    }
  if (reduction == Reduction::Sum) py[0] = static_cast<T>(loss_sum);
  // No samples (or all ignored, or zero weights) give 0/0 = NaN, as the spec's formula does.
  if (reduction == Reduction::Mean) py[0] = static_cast<T>(loss_sum / weight_sum);
}

std::optional<std::int64_t> read_ignore_index(const KernelContext& ctx) {
  if (!ctx.node().has_attr("ignore_index")) return std::nullopt;
  return ctx.node().attr_int("ignore_index", 0);
}

// Dispatches on the score and index types, then runs nll_core over `log_prob` (a pointer into
// either input 0 or a log-softmax the caller computed).
template <typename T>
void run_nll(KernelContext& ctx, const T* log_prob, const LossShape& s, std::size_t weight_input) {
  const Tensor& target = ctx.input(1);
  const T* weight = read_weights<T>(ctx, weight_input, ctx.input(0), s.c);
  const Reduction reduction = read_reduction(ctx);
  const auto ignore = read_ignore_index(ctx);
  if (target.dtype() == DType::Int32)
    nll_core<T>(ctx, log_prob, s, target.data<std::int32_t>(), weight, reduction, ignore);
  else
    nll_core<T>(ctx, log_prob, s, target.data<std::int64_t>(), weight, reduction, ignore);
}

void negative_log_likelihood_loss(KernelContext& ctx) {
  const Tensor& input = ctx.input(0);
  const LossShape s = check_shapes(ctx, input, ctx.input(1), "input");
  dispatch_float(input.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    run_nll<T>(ctx, input.data<T>(), s, 2);
  });
}

// log(softmax(scores)) along the class axis, max-subtracted so large scores do not overflow exp.
template <typename T>
void log_softmax_classes(const T* x, const LossShape& s, T* out) {
  for (std::int64_t n = 0; n < s.n; ++n)
    for (std::int64_t d = 0; d < s.d; ++d) {
      const T* col = x + n * s.c * s.d + d;
      T* dst = out + n * s.c * s.d + d;
      double m = -std::numeric_limits<double>::infinity();
      for (std::int64_t c = 0; c < s.c; ++c) m = std::max(m, static_cast<double>(col[c * s.d]));
      double sum = 0.0;
      for (std::int64_t c = 0; c < s.c; ++c) sum += std::exp(static_cast<double>(col[c * s.d]) - m);
      const double log_sum = std::log(sum);
      for (std::int64_t c = 0; c < s.c; ++c)
        dst[c * s.d] = static_cast<T>(static_cast<double>(col[c * s.d]) - m - log_sum);
    }
}

void softmax_cross_entropy_loss(KernelContext& ctx) {
  const Tensor& scores = ctx.input(0);
  const LossShape s = check_shapes(ctx, scores, ctx.input(1), "scores");
  dispatch_float(scores.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    // The log-probabilities are the optional second output; when nobody reads it they still
    // have to exist for the loss, so they go to a scratch buffer instead.
    std::vector<T> scratch;
    T* log_prob = nullptr;
    if (ctx.wants_output(1)) {
      log_prob = ctx.allocate_output(1, scores.dtype(), scores.shape()).template data<T>();
    } else {
      scratch.resize(static_cast<std::size_t>(scores.numel()));
      log_prob = scratch.data();
    }
    log_softmax_classes<T>(scores.data<T>(), s, log_prob);
    run_nll<T>(ctx, log_prob, s, 2);
  });
}

}  // namespace

void register_loss(OpTable& t) {
  t.add("NegativeLogLikelihoodLoss", {negative_log_likelihood_loss, 2, 3, 12});
  t.add("SoftmaxCrossEntropyLoss", {softmax_cross_entropy_loss, 2, 3, 12});
}

}  // namespace wpk::reference
