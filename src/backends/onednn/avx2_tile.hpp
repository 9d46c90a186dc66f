#pragma once
// The vector pieces wpk's AVX2 kernels share (avx2_conv.cpp, avx2_winograd.cpp): lane masks,
// e^x and both GELUs, and the register tile, MR output rows x 16 output channels summed over
// taps x input channels, with bias, residual and activation applied before its one store.
// Compiled for AVX2 + FMA by function attribute, so callers check the CPU first.
#include <algorithm>
#include <cstdint>

#include "backends/onednn/stream_conv.hpp"

namespace wpk::onednn::avx2 {
constexpr int kTile = 6;    // output rows per tile: 6 x 2 vectors of sums, 2 of weights, 1 input
constexpr int kBlock = 16;  // output channels per tile (Acdb16a's block)

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// [begin, end) of part `i` of `parts` near-equal parts of `count` items.
struct Range {
  std::int64_t begin, end;
};
inline Range part(std::int64_t count, std::int64_t parts, std::int64_t i) {
  return {count * i / parts, count * (i + 1) / parts};
}
}  // namespace wpk::onednn::avx2

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define WPK_AVX2_KERNELS 1
#define WPK_AVX2 __attribute__((target("avx2,fma")))

namespace wpk::onednn::avx2 {

// Lanes [0, n) of an 8-float vector set (n clamped to 0..8), for masked loads and stores.
inline WPK_AVX2 __m256i lane_mask(int n) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(std::clamp(n, 0, 8)), lanes);
}

// e^x for x in float range (clamped to [-87.3, 88.3]: no infinities, no denormals): x = n ln 2
// + r with |r| <= ln 2 / 2, e^r by its degree-7 Taylor polynomial (truncation ~5e-9 relative),
// 2^n from the exponent bits.
inline WPK_AVX2 __m256 exp_ps(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // ln 2 in two parts, so that n * ln2_hi is exact and r keeps its low bits.
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145752f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860677e-6f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040);
  for (const float c : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f})
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

// GELU, x * (1 + erf(x / sqrt 2)) / 2, with erfc(|z|) from Abramowitz and Stegun's 7.1.26
// (absolute error <= 1.5e-7): 1 + erf(z) = erfc(-z) is that value for z < 0 (no cancellation)
// and 2 minus it for z >= 0.
inline WPK_AVX2 __m256 gelu_ps(__m256 x) {
  const __m256 z = _mm256_mul_ps(x, _mm256_set1_ps(0.707106781f));
  const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), z);  // |z|
  const __m256 t = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_fmadd_ps(a, _mm256_set1_ps(0.3275911f), _mm256_set1_ps(1.0f)));
  __m256 p = _mm256_set1_ps(1.061405429f);
  for (const float c : {-1.453152027f, 1.421413741f, -0.284496736f, 0.254829592f})
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(c));
  const __m256 erfc = _mm256_mul_ps(_mm256_mul_ps(p, t), exp_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_setzero_ps(), a), a)));
  const __m256 negative = _mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_LT_OQ);
  const __m256 one_plus_erf = _mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(2.0f), erfc), erfc, negative);
  return _mm256_mul_ps(_mm256_mul_ps(x, _mm256_set1_ps(0.5f)), one_plus_erf);
}

// GELU's tanh form, x * (1 + tanh(u)) / 2 with u = sqrt(2 / pi) (x + 0.044715 x^3), written
// as x / (1 + e^(-2u)).
inline WPK_AVX2 __m256 gelu_tanh_ps(__m256 x) {
  const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
  const __m256 u = _mm256_mul_ps(_mm256_fmadd_ps(x3, _mm256_set1_ps(0.044715f), x), _mm256_set1_ps(0.797884561f));
  const __m256 e = exp_ps(_mm256_mul_ps(u, _mm256_set1_ps(-2.0f)));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

// The floor Relu and Clip clamp to: 0, or Clip's lower bound.
inline WPK_AVX2 __m256 activation_floor(const StreamConvEpilogue& e) {
  return _mm256_set1_ps(e.act == StreamConvEpilogue::Act::Clip ? e.lo : 0.0f);
}

// The epilogue's activation of v; lo = activation_floor(e), hi = e.hi broadcast.
inline WPK_AVX2 __m256 activate(__m256 v, const StreamConvEpilogue& e, __m256 lo, __m256 hi) {
  using Act = StreamConvEpilogue::Act;
  switch (e.act) {
    case Act::Relu: return _mm256_max_ps(v, lo);
    case Act::Clip: return _mm256_min_ps(_mm256_max_ps(v, lo), hi);
    case Act::Gelu: return gelu_ps(v);
    case Act::GeluTanh: return gelu_tanh_ps(v);
    case Act::None: break;
  }
  return v;
}

// The epilogue for 8 output channels at `out`: act(sum + bias [+ *out]), stored to the lanes
// `mask` selects (all 8 when `full`); lo, hi as activate() takes them.
inline WPK_AVX2 void store_result(float* out, __m256 sum, __m256 bias, __m256i mask, bool full,
                                  const StreamConvEpilogue& e, __m256 lo, __m256 hi) {
  __m256 v = _mm256_add_ps(sum, bias);
  if (e.accumulate) v = _mm256_add_ps(v, full ? _mm256_loadu_ps(out) : _mm256_maskload_ps(out, mask));
  v = activate(v, e, lo, hi);
  if (full) _mm256_storeu_ps(out, v);
  else _mm256_maskstore_ps(out, mask, v);
}

struct TileArgs {
  const float* const* a;  // [MR][taps]: pixel r's input for tap t, or `zeros` in the padding
  const float* zeros;
  int taps;
  std::int64_t ic;
  const float* w;     // the block's weights: [taps][ic][16]
  const float* bias;  // the block's first channel, or null
  int cols;           // valid output channels of the block (16 but at the end)
  float* y;           // pixel 0's first channel of the block
  std::int64_t ldy;   // floats from one output pixel to the next
};

// MR output pixels x 16 output channels: all taps and input channels, then the epilogue.
template <int MR>
WPK_AVX2 void tile(const TileArgs& t, const StreamConvEpilogue& e) {
  __m256 acc[MR][2];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  const std::int64_t ic = t.ic;
  for (int tap = 0; tap < t.taps; ++tap) {
    const float* p[MR];
    bool any = false;
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      p[r] = t.a[r * t.taps + tap];
      any |= p[r] != t.zeros;
    }
    if (!any) continue;  // the whole tile reads padding here (image edges, small outputs)
    const float* w = t.w + tap * ic * kBlock;
#pragma GCC unroll 2
    for (std::int64_t i = 0; i < ic; ++i, w += kBlock) {
      const __m256 w0 = _mm256_loadu_ps(w), w1 = _mm256_loadu_ps(w + 8);
#pragma GCC unroll 6
      for (int r = 0; r < MR; ++r) {
        const __m256 v = _mm256_broadcast_ss(p[r] + i);
        acc[r][0] = _mm256_fmadd_ps(v, w0, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(v, w1, acc[r][1]);
      }
    }
  }
  const __m256i m0 = lane_mask(t.cols), m1 = lane_mask(t.cols - 8);
  const bool full = t.cols == kBlock;
  __m256 b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps();
  if (t.bias) {
    b0 = _mm256_maskload_ps(t.bias, m0);
    b1 = _mm256_maskload_ps(t.bias + 8, m1);
  }
  const __m256 lo = activation_floor(e), hi = _mm256_set1_ps(e.hi);
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) {
    float* out = t.y + r * t.ldy;
    store_result(out, acc[r][0], b0, m0, full, e, lo, hi);
    store_result(out + 8, acc[r][1], b1, m1, full, e, lo, hi);
  }
}

using TileFn = void (*)(const TileArgs&, const StreamConvEpilogue&);
inline const TileFn kTiles[kTile] = {&tile<1>, &tile<2>, &tile<3>, &tile<4>, &tile<5>, &tile<6>};

}  // namespace wpk::onednn::avx2
#endif
