// Random ops: RandomUniform(Like), RandomNormal(Like), Bernoulli, Multinomial.
//
// With a `seed` attribute every run draws the same numbers (the generator starts from the seed
// at each run), so a seeded model is reproducible run after run and from any thread; without
// one each run draws fresh numbers. The generator is the standard library's 64-bit Mersenne
// Twister, so seeded draws are reproducible with one build of wpk, not across standard libraries.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "backends/reference/common.hpp"
#include "backends/reference/float_buffers.hpp"
#include "backends/reference/misc_internal.hpp"
#include "core/limits.hpp"

namespace wpk::reference {
namespace {

std::mt19937_64 generator(const KernelContext& ctx) {
  if (const Attribute* s = ctx.node().find_attr("seed")) {
    const float seed = s->f();
    std::uint32_t bits = 0;
    std::memcpy(&bits, &seed, sizeof bits);
    return std::mt19937_64(bits);
  }
  std::random_device device;
  return std::mt19937_64((static_cast<std::uint64_t>(device()) << 32) ^ device());
}

// The output dtype: the attribute's, else `fallback`; float types only unless `integers`.
DType output_dtype(const KernelContext& ctx, DType fallback, bool integers = false) {
  DType d = fallback;
  if (const Attribute* a = ctx.node().find_attr("dtype")) d = static_cast<DType>(static_cast<std::uint8_t>(a->i()));
  const bool float_type = d == DType::Float32 || d == DType::Float64 || d == DType::Float16 || d == DType::BFloat16;
  const bool int_type = d == DType::Int32 || d == DType::Int64;
  if (!(float_type || (integers && (int_type || d == DType::Bool || d == DType::UInt8 || d == DType::Int8))))
    ctx.fail(ErrorCode::Unsupported, std::string("dtype ") + dtype_name(d) + " is not supported");
  return d;
}

// Fills `y` (any numeric dtype) with draw() for each element.
template <typename Draw>
void fill(Tensor& y, const KernelContext& ctx, Draw draw) {
  const std::int64_t n = y.numel();
  if (y.dtype() == DType::Float16 || y.dtype() == DType::BFloat16) {
    std::vector<float> f(static_cast<std::size_t>(n));
    for (auto& v : f) v = static_cast<float>(draw());
    store_float_buffer(f.data(), y);
    return;
  }
  if (y.dtype() == DType::Bool) {
    bool* p = y.data<bool>();
    for (std::int64_t i = 0; i < n; ++i) p[i] = draw() != 0;
    return;
  }
  dispatch_numeric(y.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = y.data<T>();
    for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(draw());
  });
}

Shape shape_attr(const KernelContext& ctx) {
  if (!ctx.node().has_attr("shape")) ctx.fail(ErrorCode::InvalidModel, "attribute 'shape' is required");
  Shape shape = ctx.node().attr_ints("shape");
  check_rank(shape.size(), ctx.limits(), node_label(ctx.node()));
  for (std::int64_t d : shape)
    if (d < 0) ctx.fail(ErrorCode::InvalidModel, "shape " + shape_to_string(shape) + " has a negative dimension");
  return shape;
}

void uniform(KernelContext& ctx, const Shape& shape, DType fallback) {
  const double low = ctx.node().attr_float("low", 0.0f), high = ctx.node().attr_float("high", 1.0f);
  if (!(low <= high)) ctx.fail(ErrorCode::InvalidModel, "low must not exceed high");
  Tensor& y = ctx.allocate_output(0, output_dtype(ctx, fallback), shape);
  auto gen = generator(ctx);
  std::uniform_real_distribution<double> dist(low, high);
  fill(y, ctx, [&] { return dist(gen); });
}

void normal(KernelContext& ctx, const Shape& shape, DType fallback) {
  const double mean = ctx.node().attr_float("mean", 0.0f), scale = ctx.node().attr_float("scale", 1.0f);
  if (!(scale >= 0)) ctx.fail(ErrorCode::InvalidModel, "scale must not be negative");
  Tensor& y = ctx.allocate_output(0, output_dtype(ctx, fallback), shape);
  auto gen = generator(ctx);
  std::normal_distribution<double> dist(mean, scale);
  fill(y, ctx, [&] { return dist(gen); });
}

void random_uniform(KernelContext& ctx) { uniform(ctx, shape_attr(ctx), DType::Float32); }
void random_uniform_like(KernelContext& ctx) { uniform(ctx, ctx.input(0).shape(), ctx.input(0).dtype()); }
void random_normal(KernelContext& ctx) { normal(ctx, shape_attr(ctx), DType::Float32); }
void random_normal_like(KernelContext& ctx) { normal(ctx, ctx.input(0).shape(), ctx.input(0).dtype()); }

// 1 with the input's probability (which must lie in [0, 1]), else 0.
void bernoulli(KernelContext& ctx) {
  const Tensor& p = ctx.input(0);
  if (p.dtype() != DType::Float32 && p.dtype() != DType::Float64)
    ctx.fail(ErrorCode::Unsupported, std::string("input must be float32 or float64, got ") + dtype_name(p.dtype()));
  std::vector<double> probs(static_cast<std::size_t>(p.numel()));
  for (std::int64_t i = 0; i < p.numel(); ++i) {
    probs[i] = p.dtype() == DType::Float32 ? p.data<float>()[i] : p.data<double>()[i];
    if (!(probs[i] >= 0 && probs[i] <= 1))
      ctx.fail(ErrorCode::InvalidArgument, "probability " + std::to_string(probs[i]) + " is outside [0, 1]");
  }
  Tensor& y = ctx.allocate_output(0, output_dtype(ctx, p.dtype(), true), p.shape());
  auto gen = generator(ctx);
  std::uniform_real_distribution<double> dist(0.0, 1.0);
  std::size_t i = 0;
  fill(y, ctx, [&] { return dist(gen) < probs[i++] ? 1.0 : 0.0; });
}

// input [batch, classes] of unnormalised log-probabilities -> [batch, sample_size] class indices.
void multinomial(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 2) ctx.fail(ErrorCode::InvalidArgument, "input must be [batch, classes], got " + shape_to_string(x.shape()));
  if (x.dtype() != DType::Float32 && x.dtype() != DType::Float64)
    ctx.fail(ErrorCode::Unsupported, std::string("input must be float32 or float64, got ") + dtype_name(x.dtype()));
  const std::int64_t batch = x.dim(0), classes = x.dim(1), samples = ctx.node().attr_int("sample_size", 1);
  if (samples < 0) ctx.fail(ErrorCode::InvalidModel, "sample_size must not be negative");
  const DType out = ctx.node().has_attr("dtype") ? output_dtype(ctx, DType::Int32, true) : DType::Int32;
  if (out != DType::Int32 && out != DType::Int64) ctx.fail(ErrorCode::InvalidModel, "dtype must be int32 or int64");
  if (classes == 0 && batch > 0 && samples > 0) ctx.fail(ErrorCode::InvalidArgument, "there are no classes to draw");
  Tensor& y = ctx.allocate_output(0, out, {batch, samples});
  auto gen = generator(ctx);
  std::vector<double> weights(static_cast<std::size_t>(classes));
  std::int64_t row = 0, k = 0;
  std::discrete_distribution<std::int64_t> dist;
  fill(y, ctx, [&]() -> double {
    if (k == 0) {
      // exp(x - max) so large logits do not overflow; the distribution normalises.
      double top = -INFINITY;
      for (std::int64_t c = 0; c < classes; ++c) {
        const double v = x.dtype() == DType::Float32 ? x.data<float>()[row * classes + c] : x.data<double>()[row * classes + c];
        weights[c] = v;
        top = std::max(top, v);
      }
      for (double& w : weights) w = std::isfinite(top) ? std::exp(w - top) : 1.0;
      dist = std::discrete_distribution<std::int64_t>(weights.begin(), weights.end());
    }
    const double drawn = static_cast<double>(dist(gen));
    if (++k == samples) {
      k = 0;
      ++row;
    }
    return drawn;
  });
}

}  // namespace

void register_random(OpTable& t) {
  t.add("RandomUniform", {random_uniform, 0, 0, 1});
  t.add("RandomUniformLike", {random_uniform_like, 1, 1, 1});
  t.add("RandomNormal", {random_normal, 0, 0, 1});
  t.add("RandomNormalLike", {random_normal_like, 1, 1, 1});
  t.add("Bernoulli", {bernoulli, 1, 1, 15});
  t.add("Multinomial", {multinomial, 1, 1, 7});
}

}  // namespace wpk::reference
