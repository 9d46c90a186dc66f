// QuantizeLinear (float32 -> uint8/int8) and DequantizeLinear (uint8/int8 -> float32), per
// tensor or per slice along `axis`, DynamicQuantizeLinear, and com.wpk QLinearAdd
// (graph/fused_ops.hpp), on wpk's own vector loops over all the run's threads.
//
// They compute what the reference backend computes, bit for bit: x / scale in float32 rounded
// to the nearest integer with ties to even (the rounding is the instruction's own, not the
// floating-point environment's), NaN encoded as the zero point, then saturated; dequantizing
// is (q - zero_point) * scale in float32. Other dtypes (int32 data, float16 scales, blocked
// quantization) are the reference's.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "backends/cpu/cpu_kernels.hpp"
#include "core/cpu_features.hpp"

namespace wpk::cpu {
namespace {

// Below this many elements one thread does it all: waking the others costs more.
constexpr std::int64_t kParallelElements = 1 << 15;

bool is_8bit(DType t) { return t == DType::UInt8 || t == DType::Int8; }

// One scale and zero point per block of `inner` consecutive elements, cycling through
// `channels` of them (channels 1: one pair for the whole tensor).
struct QuantLayout {
  std::vector<float> scale;
  std::vector<std::int32_t> zero_point;
  std::int64_t channels = 1, inner = 1;
};

// Scale (input 1) and zero point (input 2) for x, when this kernel covers them.
std::optional<QuantLayout> layout_of(const Node& node, std::int64_t opset, const Tensor& x, const Tensor& scale,
                                     const Tensor* zp) {
  if (scale.dtype() != DType::Float32) return std::nullopt;
  // Opset 21's blocked scales and output_dtype are the reference's to check.
  if (node.attr_int("block_size", 0) != 0 || node.attr_int("output_dtype", 0) != 0) return std::nullopt;
  QuantLayout q;
  if (scale.numel() != 1) {
    std::int64_t axis = node.attr_int("axis", 1);
    if (axis < 0) axis += x.rank();
    if (opset < 13 || scale.rank() != 1 || axis < 0 || axis >= x.rank() || scale.shape()[0] != x.shape()[axis])
      return std::nullopt;
    q.channels = scale.shape()[0];
    for (int i = static_cast<int>(axis) + 1; i < x.rank(); ++i) q.inner *= x.shape()[i];
  } else {
    q.inner = x.numel();
  }
  const float* s = scale.data<float>();
  q.scale.assign(s, s + scale.numel());
  q.zero_point.assign(q.scale.size(), 0);
  if (zp) {
    if (!is_8bit(zp->dtype()) || zp->numel() != scale.numel()) return std::nullopt;
    if (q.channels > 1 && zp->shape() != scale.shape()) return std::nullopt;
    for (std::size_t i = 0; i < q.zero_point.size(); ++i)
      q.zero_point[i] = zp->dtype() == DType::UInt8 ? zp->data<std::uint8_t>()[i] : zp->data<std::int8_t>()[i];
  }
  return q;
}

// ---- the loops ---------------------------------------------------------------------------

template <typename Q>
Q quantize_one(float x, float scale, std::int32_t zp) {
  const float v = x / scale;
  if (std::isnan(v)) return static_cast<Q>(zp);
  const float lower = std::floor(v), frac = v - lower;
  float r = frac > 0.5f ? lower + 1 : frac < 0.5f ? lower : (std::fmod(lower, 2.0f) == 0 ? lower : lower + 1);
  const double q = std::min(std::max(double(r) + zp, double(std::numeric_limits<Q>::min())),
                            double(std::numeric_limits<Q>::max()));
  return static_cast<Q>(q);
}

template <typename Q>
void quantize_scalar(const float* x, std::int64_t n, float scale, std::int32_t zp, Q* y) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = quantize_one<Q>(x[i], scale, zp);
}

// Q's range and the output zero point, as floats.
template <typename Q>
struct Requantize {
  __m256 zp, lo, hi;
  __attribute__((target("avx2"))) explicit Requantize(std::int32_t z)
      : zp(_mm256_set1_ps(float(z))), lo(_mm256_set1_ps(float(std::numeric_limits<Q>::min()))),
        hi(_mm256_set1_ps(float(std::numeric_limits<Q>::max()))) {}
  // v (already divided by the scale) rounded, offset and saturated, as int32 lanes.
  __attribute__((target("avx2"))) __m256i operator()(__m256 v) const {
    v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));  // NaN -> 0, so it encodes as the zero point
    return _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v, zp), lo), hi));
  }
};

// Stores 32 int32 lanes already in Q's range as 32 bytes.
template <typename Q>
__attribute__((target("avx2"))) inline void store32(Q* y, __m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
  const __m256i bytes = std::is_same_v<Q, std::uint8_t> ? _mm256_packus_epi16(ab, cd) : _mm256_packs_epi16(ab, cd);
  // packs interleave 128-bit lanes; this puts the 32 bytes back in order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(y), _mm256_permutevar8x32_epi32(bytes, order));
}

template <typename Q>
__attribute__((target("avx2"))) inline __m256i quantize8(const float* x, __m256 scale, const Requantize<Q>& rq) {
  return rq(_mm256_div_ps(_mm256_loadu_ps(x), scale));
}

template <typename Q>
__attribute__((target("avx2"))) void quantize_avx2(const float* x, std::int64_t n, float scale, std::int32_t zp, Q* y) {
  const __m256 s = _mm256_set1_ps(scale);
  const Requantize<Q> rq(zp);
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    store32(y + i, quantize8(x + i, s, rq), quantize8(x + i + 8, s, rq), quantize8(x + i + 16, s, rq),
            quantize8(x + i + 24, s, rq));
  quantize_scalar(x + i, n - i, scale, zp, y + i);
}

// 8 codes widened to floats.
template <typename Q>
__attribute__((target("avx2"))) inline __m256 load8(const Q* x) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(x));
  return _mm256_cvtepi32_ps(std::is_same_v<Q, std::uint8_t> ? _mm256_cvtepu8_epi32(b) : _mm256_cvtepi8_epi32(b));
}

template <typename Q>
void dequantize_scalar(const Q* x, std::int64_t n, float scale, std::int32_t zp, float* y) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = (static_cast<float>(x[i]) - static_cast<float>(zp)) * scale;
}

template <typename Q>
__attribute__((target("avx2"))) void dequantize_avx2(const Q* x, std::int64_t n, float scale, std::int32_t zp, float* y) {
  const __m256 s = _mm256_set1_ps(scale), z = _mm256_set1_ps(float(zp));
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_sub_ps(load8(x + i), z), s));
  dequantize_scalar(x + i, n - i, scale, zp, y + i);
}

// QLinearAdd's parameters.
struct AddParams {
  float sa, sb, sy;
  std::int32_t za, zb, zy;
};

template <typename A, typename B, typename Y>
void qadd_scalar(const A* a, const B* b, std::int64_t n, const AddParams& p, Y* y) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float sum = (static_cast<float>(a[i]) - static_cast<float>(p.za)) * p.sa +
                      (static_cast<float>(b[i]) - static_cast<float>(p.zb)) * p.sb;
    y[i] = quantize_one<Y>(sum, p.sy, p.zy);
  }
}

struct AddVectors {
  __m256 sa, sb, sy, za, zb;
  __attribute__((target("avx2"))) explicit AddVectors(const AddParams& p)
      : sa(_mm256_set1_ps(p.sa)), sb(_mm256_set1_ps(p.sb)), sy(_mm256_set1_ps(p.sy)), za(_mm256_set1_ps(float(p.za))),
        zb(_mm256_set1_ps(float(p.zb))) {}
};

template <typename A, typename B, typename Y>
__attribute__((target("avx2"))) inline __m256i qadd8(const A* a, const B* b, const AddVectors& v, const Requantize<Y>& rq) {
  // Two products then a sum, never fused into one rounding: the unfused ops round each.
  const __m256 va = _mm256_mul_ps(_mm256_sub_ps(load8(a), v.za), v.sa);
  const __m256 vb = _mm256_mul_ps(_mm256_sub_ps(load8(b), v.zb), v.sb);
  return rq(_mm256_div_ps(_mm256_add_ps(va, vb), v.sy));
}

template <typename A, typename B, typename Y>
__attribute__((target("avx2"))) void qadd_avx2(const A* a, const B* b, std::int64_t n, const AddParams& p, Y* y) {
  const AddVectors v(p);
  const Requantize<Y> rq(p.zy);
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    store32(y + i, qadd8(a + i, b + i, v, rq), qadd8(a + i + 8, b + i + 8, v, rq), qadd8(a + i + 16, b + i + 16, v, rq),
            qadd8(a + i + 24, b + i + 24, v, rq));
  qadd_scalar(a + i, b + i, n - i, p, y + i);
}

// Calls body(first, count, scale, zero_point) over [0, total) split among the threads, each
// call within one block of constant parameters.
template <typename Body>
void for_blocks(const QuantLayout& q, std::int64_t total, Body&& body) {
  const int threads = total >= kParallelElements ? omp_get_max_threads() : 1;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    const std::int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    std::int64_t i = total * t / nt;
    const std::int64_t end = total * (t + 1) / nt;
    while (i < end) {
      const std::int64_t block = i / q.inner;
      const std::int64_t stop = std::min(end, (block + 1) * q.inner);
      const std::size_t c = static_cast<std::size_t>(block % q.channels);
      body(i, stop - i, q.scale[c], q.zero_point[c]);
      i = stop;
    }
  }
}

class QuantizeKernel : public Kernel {
 public:
  explicit QuantizeKernel(const Node& node, bool quantize) : node_(node), quantize_(quantize) {}

  KernelProfile profile() const override {
    return {quantize_ ? "f32_quantize_linear__avx2" : "f32_dequantize_linear__avx2", 256, 0.5};
  }

  bool runs(const std::vector<const Tensor*>& in) const override {
    if (in.size() < 2 || !in[0] || !in[1]) return false;
    if (quantize_ ? in[0]->dtype() != DType::Float32 : !is_8bit(in[0]->dtype())) return false;
    const Tensor* zp = in.size() > 2 ? in[2] : nullptr;
    if (!quantize_ && zp && zp->dtype() != in[0]->dtype()) return false;
    return layout_of(node_, opset_, *in[0], *in[1], zp).has_value();
  }

  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    const auto q = layout_of(ctx.node(), ctx.opset(), x, ctx.input(1), zp);
    if (!q) ctx.fail(ErrorCode::Internal, "scale or zero point this kernel does not cover");
    const bool avx2 = cpu_features().avx2;
    if (quantize_) {
      const DType out = zp ? zp->dtype() : DType::UInt8;
      if (!is_8bit(out) || x.dtype() != DType::Float32) ctx.fail(ErrorCode::Internal, "dtype this kernel does not cover");
      Tensor& y = ctx.allocate_output(0, out, x.shape());
      const float* px = x.data<float>();
      auto go = [&](auto* py) {
        using Q = std::remove_pointer_t<decltype(py)>;
        for_blocks(*q, x.numel(), [&](std::int64_t i, std::int64_t n, float s, std::int32_t z) {
          if (avx2) quantize_avx2<Q>(px + i, n, s, z, py + i);
          else quantize_scalar<Q>(px + i, n, s, z, py + i);
        });
      };
      if (out == DType::UInt8) go(y.data<std::uint8_t>());
      else go(y.data<std::int8_t>());
    } else {
      if (!is_8bit(x.dtype())) ctx.fail(ErrorCode::Internal, "dtype this kernel does not cover");
      Tensor& y = ctx.allocate_output(0, DType::Float32, x.shape());
      float* py = y.data<float>();
      auto go = [&](const auto* px) {
        using Q = std::remove_const_t<std::remove_pointer_t<decltype(px)>>;
        for_blocks(*q, x.numel(), [&](std::int64_t i, std::int64_t n, float s, std::int32_t z) {
          if (avx2) dequantize_avx2<Q>(px + i, n, s, z, py + i);
          else dequantize_scalar<Q>(px + i, n, s, z, py + i);
        });
      };
      if (x.dtype() == DType::UInt8) go(x.data<std::uint8_t>());
      else go(x.data<std::int8_t>());
    }
  }

  void set_opset(std::int64_t opset) { opset_ = opset; }

 private:
  Node node_;
  bool quantize_;
  std::int64_t opset_ = 13;
};

// min(0, min x), max(0, max x) of n floats, and whether all are finite.
struct Extremes {
  float lo = 0, hi = 0;
  bool finite = true;
};

Extremes extremes_scalar(const float* x, std::int64_t n) {
  Extremes e;
  for (std::int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) e.finite = false;
    e.lo = std::min(e.lo, x[i]);
    e.hi = std::max(e.hi, x[i]);
  }
  return e;
}

__attribute__((target("avx2"))) Extremes extremes_avx2(const float* x, std::int64_t n) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  __m256 finite = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    // v - v is 0 for finite v and NaN for infinities and NaN.
    finite = _mm256_and_ps(finite, _mm256_cmp_ps(_mm256_sub_ps(v, v), _mm256_setzero_ps(), _CMP_EQ_OQ));
    lo = _mm256_min_ps(lo, v);
    hi = _mm256_max_ps(hi, v);
  }
  alignas(32) float l[8], h[8];
  _mm256_store_ps(l, lo);
  _mm256_store_ps(h, hi);
  Extremes e = extremes_scalar(x + i, n - i);
  e.finite = e.finite && _mm256_movemask_ps(finite) == 0xff;
  for (int k = 0; k < 8; ++k) {
    e.lo = std::min(e.lo, l[k]);
    e.hi = std::max(e.hi, h[k]);
  }
  return e;
}

class DynamicQuantizeKernel : public Kernel {
 public:
  KernelProfile profile() const override { return {"f32_dynamic_quantize_linear__avx2", 256, 0.5}; }

  bool runs(const std::vector<const Tensor*>& in) const override {
    return !in.empty() && in[0] && in[0]->dtype() == DType::Float32;
  }

  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::Float32) ctx.fail(ErrorCode::Internal, "dtype this kernel does not cover");
    const float* px = x.data<float>();
    const bool avx2 = cpu_features().avx2;
    const std::int64_t n = x.numel();
    const int threads = n >= kParallelElements ? omp_get_max_threads() : 1;
    std::vector<Extremes> parts(static_cast<std::size_t>(threads));
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
      const std::int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      const std::int64_t begin = n * t / nt, end = n * (t + 1) / nt;
      parts[static_cast<std::size_t>(t)] = avx2 ? extremes_avx2(px + begin, end - begin) : extremes_scalar(px + begin, end - begin);
    }
    Extremes e;
    for (const Extremes& p : parts) {
      e.finite = e.finite && p.finite;
      e.lo = std::min(e.lo, p.lo);
      e.hi = std::max(e.hi, p.hi);
    }
    if (!e.finite)
      for (std::int64_t i = 0; i < n; ++i)
        if (!std::isfinite(px[i]))
          ctx.fail(ErrorCode::InvalidArgument, "input holds a non-finite value at element " + std::to_string(i));
    // As the reference (and the op's definition) derive them: the zero point clipped, then rounded.
    const float scale = (e.hi - e.lo) / 255.0f;
    std::uint8_t zp = 0;
    if (scale != 0.0f) zp = quantize_one<std::uint8_t>(std::min(std::max(0.0f - e.lo / scale, 0.0f), 255.0f), 1.0f, 0);
    Tensor& y = ctx.allocate_output(0, DType::UInt8, x.shape());
    std::uint8_t* py = y.data<std::uint8_t>();
    QuantLayout whole;
    whole.inner = n;
    whole.scale = {scale};
    whole.zero_point = {zp};
    if (scale == 0.0f) {
      std::fill(py, py + n, std::uint8_t{0});
    } else {
      for_blocks(whole, n, [&](std::int64_t i, std::int64_t count, float s, std::int32_t z) {
        if (avx2) quantize_avx2<std::uint8_t>(px + i, count, s, z, py + i);
        else quantize_scalar<std::uint8_t>(px + i, count, s, z, py + i);
      });
    }
    if (ctx.wants_output(1)) ctx.allocate_output(1, DType::Float32, {}).data<float>()[0] = scale;
    if (ctx.wants_output(2)) ctx.allocate_output(2, DType::UInt8, {}).data<std::uint8_t>()[0] = zp;
  }
};

std::int32_t code(const Tensor& t) {
  return t.dtype() == DType::UInt8 ? t.data<std::uint8_t>()[0] : t.data<std::int8_t>()[0];
}

class QLinearAddKernel : public Kernel {
 public:
  KernelProfile profile() const override { return {"q8_add__avx2", 256, 0.5}; }

  // Same-shape 8-bit operands, one-element float32 scales and zero points of the data's dtypes.
  bool runs(const std::vector<const Tensor*>& in) const override {
    if (in.size() != 8) return false;
    for (const Tensor* t : in)
      if (!t) return false;
    if (!is_8bit(in[0]->dtype()) || !is_8bit(in[3]->dtype()) || in[0]->shape() != in[3]->shape()) return false;
    for (std::size_t i : {1, 4, 6})
      if (in[i]->numel() != 1 || in[i]->dtype() != DType::Float32) return false;
    return in[2]->numel() == 1 && in[2]->dtype() == in[0]->dtype() && in[5]->numel() == 1 &&
           in[5]->dtype() == in[3]->dtype() && in[7]->numel() == 1 && is_8bit(in[7]->dtype());
  }

  void run(KernelContext& ctx) const override {
    std::vector<const Tensor*> in;
    for (std::size_t i = 0; i < 8; ++i) in.push_back(ctx.has_input(i) ? &ctx.input(i) : nullptr);
    if (!runs(in)) ctx.fail(ErrorCode::Internal, "operands this kernel does not cover");
    const Tensor &a = *in[0], &b = *in[3];
    const AddParams p{in[1]->data<float>()[0], in[4]->data<float>()[0], in[6]->data<float>()[0],
                      code(*in[2]), code(*in[5]), code(*in[7])};
    Tensor& y = ctx.allocate_output(0, in[7]->dtype(), a.shape());
    const bool avx2 = cpu_features().avx2;
    QuantLayout whole;
    whole.inner = a.numel();
    whole.scale = {1};
    whole.zero_point = {0};
    auto go = [&](const auto* pa, const auto* pb, auto* py) {
      for_blocks(whole, a.numel(), [&](std::int64_t i, std::int64_t n, float, std::int32_t) {
        if (avx2) qadd_avx2(pa + i, pb + i, n, p, py + i);
        else qadd_scalar(pa + i, pb + i, n, p, py + i);
      });
    };
    auto with_y = [&](const auto* pa, const auto* pb) {
      if (y.dtype() == DType::UInt8) go(pa, pb, y.data<std::uint8_t>());
      else go(pa, pb, y.data<std::int8_t>());
    };
    auto with_b = [&](const auto* pa) {
      if (b.dtype() == DType::UInt8) with_y(pa, b.data<std::uint8_t>());
      else with_y(pa, b.data<std::int8_t>());
    };
    if (a.dtype() == DType::UInt8) with_b(a.data<std::uint8_t>());
    else with_b(a.data<std::int8_t>());
  }
};

}  // namespace

std::string qlinear_add_unsupported(const Node& node, const Graph& graph) {
  if (node.inputs.size() != 8) return "needs 8 inputs";
  for (ValueId v : node.inputs)
    if (v == kNoValue) return "an input is omitted";
  if (!is_8bit(graph.value(node.inputs[0]).dtype) || !is_8bit(graph.value(node.inputs[3]).dtype))
    return "operands are not uint8 or int8";
  return "";
}

std::unique_ptr<Kernel> make_qlinear_add(const Node&, const Graph&) { return std::make_unique<QLinearAddKernel>(); }

std::string dynamic_quantize_unsupported(const Node& node, const Graph& graph) {
  const DType x = graph.value(node.inputs[0]).dtype;
  return x == DType::Float32 || x == DType::Undefined ? "" : "input is not float32";
}

std::unique_ptr<Kernel> make_dynamic_quantize(const Node&, const Graph&) { return std::make_unique<DynamicQuantizeKernel>(); }

std::string quantize_unsupported(const Node& node, const Graph& graph) {
  const bool quantize = node.op_type == "QuantizeLinear";
  if (node.inputs.size() < 2 || node.inputs[1] == kNoValue) return "no scale";
  if (node.attr_int("block_size", 0) != 0) return "blocked quantization";
  if (node.attr_int("saturate", 1) != 1) return "saturate = 0";
  if (node.has_attr("output_dtype")) return "output_dtype";
  const DType x = graph.value(node.inputs[0]).dtype, s = graph.value(node.inputs[1]).dtype;
  if (s != DType::Float32) return "scale is not float32";
  if (quantize) {
    if (x != DType::Float32) return "input is not float32";
    const DType z = node.inputs.size() > 2 && node.inputs[2] != kNoValue ? graph.value(node.inputs[2]).dtype : DType::UInt8;
    if (!is_8bit(z)) return "output is not uint8 or int8";
  } else if (!is_8bit(x)) {
    return "input is not uint8 or int8";
  }
  return "";
}

std::unique_ptr<Kernel> make_quantize(const Node& node, const Graph& graph) {
  auto k = std::make_unique<QuantizeKernel>(node, node.op_type == "QuantizeLinear");
  k->set_opset(graph.opset());
  return k;
}

}  // namespace wpk::cpu
