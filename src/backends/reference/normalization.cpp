// Normalizations: BatchNormalization (inference and training mode), LayerNormalization,
// InstanceNormalization, LRN and MeanVarianceNormalization. Statistics accumulate in double.
#include <algorithm>
#include <cmath>
#include <string>

#include "backends/reference/common.hpp"
#include "backends/reference/float_buffers.hpp"
#include "backends/reference/registry.hpp"

namespace wpk::reference {
namespace {

// Runs `fn(const T* x, T* y)` for float and double, and for 16-bit floats through float buffers.
template <typename Fn>
void float_kernel(KernelContext& ctx, const Tensor& x, Tensor& y, Fn&& fn) {
  if (is_half_dtype(x.dtype())) {
    const std::vector<float> xf = to_float_buffer(x);
    std::vector<float> yf(static_cast<std::size_t>(y.numel()));
    fn(xf.data(), yf.data());
    store_float_buffer(yf.data(), y);
    return;
  }
  dispatch_float(x.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    fn(x.data<T>(), y.data<T>());
  });
}

template <typename P>
using ElemOf = std::remove_const_t<std::remove_pointer_t<P>>;

void check_float(const KernelContext& ctx, const Tensor& t, const char* what) {
  const DType d = t.dtype();
  if (d != DType::Float32 && d != DType::Float64 && !is_half_dtype(d))
    ctx.fail(ErrorCode::Unsupported, std::string(what) + " has dtype " + dtype_name(d) + ", expected a float type");
}

std::vector<double> param(const KernelContext& ctx, std::size_t i, std::int64_t count, const char* what) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != count)
    ctx.fail(ErrorCode::InvalidArgument, std::string(what) + " has shape " + shape_to_string(t.shape()) + ", expected " +
                                             std::to_string(count) + " values");
  return to_double_buffer(t, ctx);
}

// y = x * a[f] + b[f] where f is the feature of each element: x viewed as (outer, F, block).
void affine(KernelContext& ctx, const Tensor& x, Tensor& y, std::int64_t outer, std::int64_t block,
            const std::vector<double>& a, const std::vector<double>& b) {
  const std::int64_t features = static_cast<std::int64_t>(a.size());
  float_kernel(ctx, x, y, [&](const auto* px, auto* py) {
    using T = ElemOf<decltype(px)>;
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t f = 0; f < features; ++f) {
        const T af = static_cast<T>(a[f]), bf = static_cast<T>(b[f]);
        const std::int64_t base = (o * features + f) * block;
        for (std::int64_t j = 0; j < block; ++j) py[base + j] = px[base + j] * af + bf;
      }
  });
}

void batch_norm(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  check_float(ctx, x, "X");
  if (x.rank() < 2) ctx.fail(ErrorCode::InvalidArgument, "X must have shape (N, C, ...), got " + shape_to_string(x.shape()));
  const Node& node = ctx.node();
  const double eps = node.attr_float("epsilon", 1e-5f);
  const double momentum = node.attr_float("momentum", 0.9f);
  const bool training = ctx.opset() >= 14 ? node.attr_int("training_mode", 0) != 0
                                          : ctx.wants_output(1) || ctx.wants_output(2) || ctx.wants_output(3) ||
                                                ctx.wants_output(4);
  if (training && ctx.opset() < 14)
    ctx.fail(ErrorCode::Unsupported, "training outputs before opset 14 (saved mean/variance) are not supported");
  // Before opset 9, spatial=0 gives every (C, D1, ...) position its own parameters.
  const bool spatial = ctx.opset() >= 9 || node.attr_int("spatial", 1) != 0;
  const std::int64_t n = x.dim(0), c = x.dim(1);
  const std::int64_t inner = n * c == 0 ? 0 : x.numel() / (n * c);
  const std::int64_t features = spatial ? c : c * inner, block = spatial ? inner : 1;
  const std::vector<double> scale = param(ctx, 1, features, "scale");
  const std::vector<double> bias = param(ctx, 2, features, "B");
  std::vector<double> mean = param(ctx, 3, features, "input_mean");
  std::vector<double> var = param(ctx, 4, features, "input_var");
  if (training) {
    // Normalize with the batch's own statistics (biased variance) and report running averages.
    std::vector<double> xd = to_double_buffer(x, ctx);
    std::vector<double> bmean(features, 0.0), bvar(features, 0.0);
    const double count = static_cast<double>(n * block);
    for (std::int64_t o = 0; o < n; ++o)
      for (std::int64_t f = 0; f < features; ++f)
        for (std::int64_t j = 0; j < block; ++j) bmean[f] += xd[(o * features + f) * block + j];
    for (auto& v : bmean) v = count > 0 ? v / count : 0.0;
    for (std::int64_t o = 0; o < n; ++o)
      for (std::int64_t f = 0; f < features; ++f)
        for (std::int64_t j = 0; j < block; ++j) {
          const double d = xd[(o * features + f) * block + j] - bmean[f];
          bvar[f] += d * d;
        }
    for (auto& v : bvar) v = count > 0 ? v / count : 0.0;
    const DType stat_type = ctx.input(3).dtype();
    std::vector<double> run_mean(features), run_var(features);
    for (std::int64_t f = 0; f < features; ++f) {
      run_mean[f] = mean[f] * momentum + bmean[f] * (1 - momentum);
      run_var[f] = var[f] * momentum + bvar[f] * (1 - momentum);
    }
    if (ctx.wants_output(1)) store_doubles(run_mean, ctx.allocate_output(1, stat_type, ctx.input(3).shape()), ctx);
    if (ctx.wants_output(2)) store_doubles(run_var, ctx.allocate_output(2, stat_type, ctx.input(4).shape()), ctx);
    mean = bmean;
    var = bvar;
  }
  std::vector<double> a(features), b(features);
  for (std::int64_t f = 0; f < features; ++f) {
    a[f] = scale[f] / std::sqrt(var[f] + eps);
    b[f] = bias[f] - mean[f] * a[f];
  }
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  affine(ctx, x, y, n, block, a, b);
}

// y = (x - mean) / sqrt(var + eps) * scale + bias, the statistics over each group of
// channels / groups consecutive channels of each image (every spatial position); scale and bias
// have an entry per channel, or per group when !per_channel.
void normalize_channel_groups(KernelContext& ctx, const Tensor& x, std::int64_t groups, double eps,
                              const std::vector<double>& scale, const std::vector<double>& bias, bool per_channel) {
  const std::int64_t n = x.dim(0), c = x.dim(1);
  const std::int64_t spatial = n * c == 0 ? 0 : x.numel() / (n * c);
  const std::int64_t per_group = c / groups;
  const std::int64_t len = per_group * spatial;
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  float_kernel(ctx, x, y, [&](const auto* px, auto* py) {
    using T = ElemOf<decltype(px)>;
    for (std::int64_t p = 0; p < n * groups; ++p) {
      const T* xp = px + p * len;
      double sum = 0, sq = 0;
      for (std::int64_t j = 0; j < len; ++j) sum += static_cast<double>(xp[j]);
      const double mean = len > 0 ? sum / static_cast<double>(len) : 0.0;
      for (std::int64_t j = 0; j < len; ++j) {
        const double d = static_cast<double>(xp[j]) - mean;
        sq += d * d;
      }
      const double stddev = std::sqrt((len > 0 ? sq / static_cast<double>(len) : 0.0) + eps);
      const std::int64_t g = p % groups;
      for (std::int64_t k = 0; k < per_group; ++k) {
        const std::int64_t i = per_channel ? g * per_group + k : g;
        const double a = scale[i] / stddev, b = bias[i] - mean * a;
        for (std::int64_t j = k * spatial; j < (k + 1) * spatial; ++j)
          py[p * len + j] = static_cast<T>(static_cast<double>(xp[j]) * a + b);
      }
    }
  });
}

void instance_norm(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  check_float(ctx, x, "input");
  if (x.rank() < 3) ctx.fail(ErrorCode::InvalidArgument, "input must have shape (N, C, D1, ...), got " + shape_to_string(x.shape()));
  const std::int64_t c = x.dim(1);
  normalize_channel_groups(ctx, x, c, ctx.node().attr_float("epsilon", 1e-5f), param(ctx, 1, c, "scale"),
                           param(ctx, 2, c, "B"), true);
}

// Statistics over each group of channels; scale and bias per group before opset 21 (the
// definition opset 21 corrected) and per channel from it.
void group_norm(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  check_float(ctx, x, "input");
  if (x.rank() < 3) ctx.fail(ErrorCode::InvalidArgument, "input must have shape (N, C, D1, ...), got " + shape_to_string(x.shape()));
  if (!ctx.node().has_attr("num_groups")) ctx.fail(ErrorCode::InvalidModel, "attribute 'num_groups' is required");
  const std::int64_t groups = ctx.node().attr_int("num_groups", 1);
  const std::int64_t c = x.dim(1);
  if (groups <= 0 || c % groups != 0)
    ctx.fail(ErrorCode::InvalidArgument, "num_groups " + std::to_string(groups) + " does not divide the " +
                                             std::to_string(c) + " channels");
  const bool per_channel = ctx.opset() >= 21;
  normalize_channel_groups(ctx, x, groups, ctx.node().attr_float("epsilon", 1e-5f),
                           param(ctx, 1, per_channel ? c : groups, "scale"),
                           param(ctx, 2, per_channel ? c : groups, "bias"), per_channel);
}

// Expands a parameter that broadcasts one way onto `shape` into one double per element.
std::vector<double> expand_param(const KernelContext& ctx, const Tensor& t, const Shape& shape, const char* what) {
  check_float(ctx, t, what);
  bool ok = t.shape().size() <= shape.size();
  for (std::size_t i = 0; ok && i < t.shape().size(); ++i) {
    const std::int64_t d = t.shape()[t.shape().size() - 1 - i];
    ok = d == 1 || d == shape[shape.size() - 1 - i];
  }
  if (!ok)
    ctx.fail(ErrorCode::InvalidArgument, std::string(what) + " of shape " + shape_to_string(t.shape()) +
                                             " does not broadcast to the normalized shape " + shape_to_string(shape));
  const std::vector<double> v = to_double_buffer(t, ctx);
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(shape_numel(shape)));
  for_each_index(shape, {broadcast_strides(t.shape(), shape)}, [&](const std::int64_t* off) { out.push_back(v[off[0]]); });
  return out;
}

void layer_norm(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  check_float(ctx, x, "X");
  const Node& node = ctx.node();
  const int rank = x.rank();
  if (rank < 1) ctx.fail(ErrorCode::InvalidArgument, "X must have rank 1 or more");
  const int axis = normalize_axis(node.attr_int("axis", -1), rank, ctx);
  const double eps = node.attr_float("epsilon", 1e-5f);
  const std::int64_t stash = node.attr_int("stash_type", 1);
  if (stash != 1) ctx.fail(ErrorCode::Unsupported, "stash_type " + std::to_string(stash) + " (only 1, float32, is supported)");
  const Shape norm_shape(x.shape().begin() + axis, x.shape().end());
  const std::int64_t inner = shape_numel(norm_shape);
  const std::int64_t outer = shape_numel(Shape(x.shape().begin(), x.shape().begin() + axis));
  const std::vector<double> scale = expand_param(ctx, ctx.input(1), norm_shape, "Scale");
  const std::vector<double> bias =
      ctx.has_input(2) ? expand_param(ctx, ctx.input(2), norm_shape, "B") : std::vector<double>(scale.size(), 0.0);
  Shape stat_shape(x.shape().begin(), x.shape().begin() + axis);
  stat_shape.resize(rank, 1);
  std::vector<float> means(static_cast<std::size_t>(outer)), inv_stds(static_cast<std::size_t>(outer));
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  float_kernel(ctx, x, y, [&](const auto* px, auto* py) {
    using T = ElemOf<decltype(px)>;
    for (std::int64_t o = 0; o < outer; ++o) {
      const T* xr = px + o * inner;
      double sum = 0, sq = 0;
      for (std::int64_t j = 0; j < inner; ++j) sum += static_cast<double>(xr[j]);
      const double mean = inner > 0 ? sum / static_cast<double>(inner) : 0.0;
      for (std::int64_t j = 0; j < inner; ++j) {
        const double d = static_cast<double>(xr[j]) - mean;
        sq += d * d;
      }
      const double inv = 1.0 / std::sqrt((inner > 0 ? sq / static_cast<double>(inner) : 0.0) + eps);
      for (std::int64_t j = 0; j < inner; ++j)
        py[o * inner + j] = static_cast<T>((static_cast<double>(xr[j]) - mean) * inv * scale[j] + bias[j]);
      means[o] = static_cast<float>(mean);
      inv_stds[o] = static_cast<float>(inv);
    }
  });
  if (ctx.wants_output(1)) {
    Tensor& m = ctx.allocate_output(1, DType::Float32, stat_shape);
    std::copy(means.begin(), means.end(), m.data<float>());
  }
  if (ctx.wants_output(2)) {
    Tensor& s = ctx.allocate_output(2, DType::Float32, stat_shape);
    std::copy(inv_stds.begin(), inv_stds.end(), s.data<float>());
  }
}

// LRN: each element is divided by (bias + alpha/size * sum of squares over `size` neighbouring
// channels)^beta.
void lrn(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  check_float(ctx, x, "X");
  if (x.rank() < 2) ctx.fail(ErrorCode::InvalidArgument, "X must have shape (N, C, ...), got " + shape_to_string(x.shape()));
  const Node& node = ctx.node();
  const double alpha = node.attr_float("alpha", 1e-4f), beta = node.attr_float("beta", 0.75f);
  const double bias = node.attr_float("bias", 1.0f);
  const std::int64_t size = node.attr_int("size", 0);
  if (size < 1) ctx.fail(ErrorCode::InvalidModel, "size must be a positive channel count");
  const std::int64_t n = x.dim(0), c = x.dim(1);
  const std::int64_t inner = n * c == 0 ? 0 : x.numel() / (n * c);
  const std::int64_t before = (size - 1) / 2, after = size - 1 - before;
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  float_kernel(ctx, x, y, [&](const auto* px, auto* py) {
    using T = ElemOf<decltype(px)>;
    for (std::int64_t b = 0; b < n; ++b)
      for (std::int64_t ch = 0; ch < c; ++ch) {
        const std::int64_t lo = std::max<std::int64_t>(0, ch - before), hi = std::min(c - 1, ch + after);
        for (std::int64_t j = 0; j < inner; ++j) {
          double sq = 0;
          for (std::int64_t k = lo; k <= hi; ++k) {
            const double v = static_cast<double>(px[(b * c + k) * inner + j]);
            sq += v * v;
          }
          const std::int64_t i = (b * c + ch) * inner + j;
          py[i] = static_cast<T>(static_cast<double>(px[i]) / std::pow(bias + alpha / static_cast<double>(size) * sq, beta));
        }
      }
  });
}

// MVN: (X - mean) / (std + 1e-9) with mean and (biased) std over `axes`, as the ONNX function
// body defines it.
void mean_variance_norm(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  check_float(ctx, x, "X");
  const int rank = x.rank();
  const std::vector<std::int64_t> axes = ctx.node().attr_ints("axes", {0, 2, 3});
  Shape group_shape = x.shape();
  for (auto a : axes) group_shape[normalize_axis(a, rank, ctx)] = 1;
  const std::int64_t groups = shape_numel(group_shape);
  const std::int64_t per_group = groups == 0 ? 0 : x.numel() / groups;
  // The group of every element, in row-major order.
  std::vector<std::int64_t> group_of;
  group_of.reserve(static_cast<std::size_t>(x.numel()));
  for_each_index(x.shape(), {broadcast_strides(group_shape, x.shape())},
                 [&](const std::int64_t* off) { group_of.push_back(off[0]); });
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  float_kernel(ctx, x, y, [&](const auto* px, auto* py) {
    using T = ElemOf<decltype(px)>;
    std::vector<double> mean(groups, 0.0), sq(groups, 0.0);
    const std::int64_t total = x.numel();
    for (std::int64_t i = 0; i < total; ++i) mean[group_of[i]] += static_cast<double>(px[i]);
    for (auto& m : mean) m /= static_cast<double>(per_group);
    for (std::int64_t i = 0; i < total; ++i) {
      const double d = static_cast<double>(px[i]) - mean[group_of[i]];
      sq[group_of[i]] += d * d;
    }
    for (auto& s : sq) s = std::sqrt(s / static_cast<double>(per_group)) + 1e-9;
    for (std::int64_t i = 0; i < total; ++i)
      py[i] = static_cast<T>((static_cast<double>(px[i]) - mean[group_of[i]]) / sq[group_of[i]]);
  });
}

// x divided by its L1 (p = 1) or L2 (p = 2) norm along one axis; where the norm is 0 (x is all
// zeros there) the output is 0, as the ONNX test data has it.
void lp_normalization(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  check_float(ctx, x, "input");
  const std::int64_t p = ctx.node().attr_int("p", 2);
  if (p != 1 && p != 2) ctx.fail(ErrorCode::InvalidModel, "p must be 1 or 2, got " + std::to_string(p));
  const int axis = normalize_axis(ctx.node().attr_int("axis", -1), x.rank(), ctx);
  std::int64_t outer = 1, len = 1, inner = 1;
  for (int d = 0; d < x.rank(); ++d) (d < axis ? outer : d == axis ? len : inner) *= x.shape()[d];
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  float_kernel(ctx, x, y, [&](const auto* px, auto* py) {
    using T = ElemOf<decltype(px)>;
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t i = 0; i < inner; ++i) {
        const std::int64_t base = o * len * inner + i;
        double norm = 0;
        for (std::int64_t k = 0; k < len; ++k) {
          const double v = static_cast<double>(px[base + k * inner]);
          norm += p == 1 ? std::abs(v) : v * v;
        }
        if (p == 2) norm = std::sqrt(norm);
        for (std::int64_t k = 0; k < len; ++k)
          py[base + k * inner] = norm == 0 ? T(0) : static_cast<T>(static_cast<double>(px[base + k * inner]) / norm);
      }
  });
}

}  // namespace

void register_normalization(OpTable& t) {
  t.add("BatchNormalization", {batch_norm, 5, 5, 7});
  t.add("InstanceNormalization", {instance_norm, 3, 3, 6});
  t.add("LayerNormalization", {layer_norm, 2, 3, 17});
  t.add("GroupNormalization", {group_norm, 3, 3, 18});
  t.add("LRN", {lrn, 1, 1, 1});
  t.add("MeanVarianceNormalization", {mean_variance_norm, 1, 1, 9});
  t.add("LpNormalization", {lp_normalization, 1, 1, 1});
}

}  // namespace wpk::reference
