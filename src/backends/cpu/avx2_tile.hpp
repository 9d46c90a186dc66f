#pragma once
// The vector pieces wpk's AVX2 kernels share (avx2_conv.cpp, avx2_winograd.cpp,
// avx2_attention.cpp): lane masks and a row's tail vector, e^x and both
// GELUs, and the register tile, MR output rows x 16 output channels summed over taps x input
// channels, with bias, residual and activation applied before its one store (and, in the
// product/conv kernel's instantiation, later weights prefetched on the way).
// Compiled for AVX2 + FMA by function attribute, so callers check the CPU first
// (avx2_kernels_available).
#include <algorithm>
#include <cstdint>
#include <iterator>

#include "backends/cpu/stream_conv.hpp"
#include "core/cpu_features.hpp"

namespace wpk::cpu::avx2 {
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

// The constants of exp_n's e^x (below), shared with the AVX-512 kernels' 16-lane form: the clamp
// (below kExpLowest the true e^x is under float's normal range), the rounding constant, log2(e),
// ln 2 in two parts, and the polynomial's coefficients from the highest power down.
constexpr float kExpLowest = -87.3f, kExpHighest = 88.3f;
constexpr float kExpMagic = 12583039.0f;  // 1.5 * 2^23 + 127
constexpr float kLog2e = 1.44269504f, kLn2High = 0.693145752f, kLn2Low = 1.42860677e-6f;
constexpr float kExpPolynomial[] = {1.37527345e-3f, 8.36891215e-3f, 4.16695103e-2f, 0.166665182f,
                                    0.499999881f,   1.0f,           1.0f};
}  // namespace wpk::cpu::avx2

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define WPK_AVX2_KERNELS 1
#define WPK_AVX2 __attribute__((target("avx2,fma")))
// For helpers that take arrays of vectors by reference: inlined, the arrays stay in registers.
#define WPK_AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) inline
#endif

namespace wpk::cpu {
// True when this build has the AVX2 kernels and this CPU runs them (AVX2 and FMA).
inline bool avx2_kernels_available() {
#ifdef WPK_AVX2_KERNELS
  return cpu_features().avx2_fma();
#else
  return false;
#endif
}
}  // namespace wpk::cpu

#ifdef WPK_AVX2_KERNELS

namespace wpk::cpu::avx2 {

// Lanes [0, n) of an 8-float vector set (n clamped to 0..8), for masked loads and stores.
inline WPK_AVX2 __m256i lane_mask(int n) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(std::clamp(n, 0, 8)), lanes);
}

// A row's vector at p with n floats left in the row: all 8 when n >= 8, else the first n (n <= 0:
// none) and zeros. Masked loads and stores only at a row's end: a masked store costs ~10x a
// plain one on Zen 3.
inline WPK_AVX2 __m256 load_lanes(const float* p, std::int64_t n) {
  return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, lane_mask(static_cast<int>(n)));
}

inline WPK_AVX2 void store_lanes(float* p, std::int64_t n, __m256 v) {
  if (n >= 8) _mm256_storeu_ps(p, v);
  else _mm256_maskstore_ps(p, lane_mask(static_cast<int>(n)), v);
}

// v with the lanes past n zeroed (n < 8), as a row's last vector.
inline WPK_AVX2 __m256 keep_lanes(__m256 v, std::int64_t n) {
  return n >= 8 ? v : _mm256_and_ps(v, _mm256_castsi256_ps(lane_mask(static_cast<int>(n))));
}

// The vector functions below work on N vectors in lockstep, each step applied to all N before
// the next: their long dependency chains then overlap in the instruction stream itself instead
// of waiting on the out-of-order window (GELU over a tile's row pair: ~31 -> ~19 cycles a
// vector on Zen 3). Arrays of N, updated in place.
template <int N>
using Vecs = __m256[N];

// e^x for x in float range (clamped to [-87.3, 88.3]: no infinities, no denormals): x = n ln 2
// + r with |r| <= ln 2 / 2, e^r by a degree-6 polynomial fitted for relative error on that
// range (its error, ~3e-9, is under float's rounding), 2^n from the exponent bits. Adding
// 1.5 * 2^23 + 127 rounds x log2(e) to the integer n and leaves n + 127 in the low mantissa
// bits, where a shift makes it 2^n's exponent.
template <int N>
WPK_AVX2_INLINE void exp_n(Vecs<N>& x) {
  const __m256 magic = _mm256_set1_ps(avx2::kExpMagic);
  __m256 t[N], p[N];
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) {
    x[j] = _mm256_min_ps(_mm256_max_ps(x[j], _mm256_set1_ps(avx2::kExpLowest)), _mm256_set1_ps(avx2::kExpHighest));
    t[j] = _mm256_fmadd_ps(x[j], _mm256_set1_ps(avx2::kLog2e), magic);
    const __m256 n = _mm256_sub_ps(t[j], magic);
    // ln 2 in two parts, so that n * ln2_hi is exact and r keeps its low bits.
    x[j] = _mm256_fnmadd_ps(n, _mm256_set1_ps(avx2::kLn2High), x[j]);
    x[j] = _mm256_fnmadd_ps(n, _mm256_set1_ps(avx2::kLn2Low), x[j]);
    p[j] = _mm256_set1_ps(avx2::kExpPolynomial[0]);
  }
  for (std::size_t c = 1; c < std::size(avx2::kExpPolynomial); ++c) {
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) p[j] = _mm256_fmadd_ps(p[j], x[j], _mm256_set1_ps(avx2::kExpPolynomial[c]));
  }
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j)
    x[j] = _mm256_mul_ps(p[j], _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(t[j]), 23)));
}

inline WPK_AVX2 __m256 exp_ps(__m256 x) {
  Vecs<1> v = {x};
  exp_n<1>(v);
  return v[0];
}

// GELU, x * (1 + erf(x / sqrt 2)) / 2, with erfc(|z|) from Abramowitz and Stegun's 7.1.26
// (absolute error <= 1.5e-7): 1 + erf(z) = erfc(-z) is that value for z < 0 (no cancellation)
// and 2 minus it for z >= 0.
template <int N>
WPK_AVX2_INLINE void gelu_n(Vecs<N>& x) {
  __m256 z[N], t[N], p[N], e[N];
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) {
    z[j] = _mm256_mul_ps(x[j], _mm256_set1_ps(0.707106781f));
    const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), z[j]);  // |z|
    t[j] = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_fmadd_ps(a, _mm256_set1_ps(0.3275911f), _mm256_set1_ps(1.0f)));
    e[j] = _mm256_mul_ps(_mm256_sub_ps(_mm256_setzero_ps(), a), a);
    p[j] = _mm256_set1_ps(1.061405429f);
  }
  exp_n<N>(e);
  for (const float c : {-1.453152027f, 1.421413741f, -0.284496736f, 0.254829592f}) {
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) p[j] = _mm256_fmadd_ps(p[j], t[j], _mm256_set1_ps(c));
  }
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) {
    const __m256 erfc = _mm256_mul_ps(_mm256_mul_ps(p[j], t[j]), e[j]);
    const __m256 negative = _mm256_cmp_ps(z[j], _mm256_setzero_ps(), _CMP_LT_OQ);
    const __m256 one_plus_erf = _mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(2.0f), erfc), erfc, negative);
    x[j] = _mm256_mul_ps(_mm256_mul_ps(x[j], _mm256_set1_ps(0.5f)), one_plus_erf);
  }
}

// GELU's tanh form, x * (1 + tanh(u)) / 2 with u = sqrt(2 / pi) (x + 0.044715 x^3), written
// as x / (1 + e^(-2u)).
template <int N>
WPK_AVX2_INLINE void gelu_tanh_n(Vecs<N>& x) {
  __m256 e[N];
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) {
    const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x[j], x[j]), x[j]);
    const __m256 u = _mm256_mul_ps(_mm256_fmadd_ps(x3, _mm256_set1_ps(0.044715f), x[j]), _mm256_set1_ps(0.797884561f));
    e[j] = _mm256_mul_ps(u, _mm256_set1_ps(-2.0f));
  }
  exp_n<N>(e);
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) x[j] = _mm256_div_ps(x[j], _mm256_add_ps(_mm256_set1_ps(1.0f), e[j]));
}

// The floor Relu and Clip clamp to: 0, or Clip's lower bound.
inline WPK_AVX2 __m256 activation_floor(const StreamConvEpilogue& e) {
  return _mm256_set1_ps(e.act == StreamConvEpilogue::Act::Clip ? e.lo : 0.0f);
}

// The epilogue's activation of v; lo = activation_floor(e), hi = e.hi broadcast.
template <int N>
WPK_AVX2_INLINE void activate_n(Vecs<N>& v, const StreamConvEpilogue& e, __m256 lo, __m256 hi) {
  using Act = StreamConvEpilogue::Act;
  switch (e.act) {
    case Act::Relu:
      for (int j = 0; j < N; ++j) v[j] = _mm256_max_ps(v[j], lo);
      break;
    case Act::Clip:
      for (int j = 0; j < N; ++j) v[j] = _mm256_min_ps(_mm256_max_ps(v[j], lo), hi);
      break;
    case Act::Gelu: gelu_n<N>(v); break;
    case Act::GeluTanh: gelu_tanh_n<N>(v); break;
    case Act::None: break;
  }
}

// The epilogue for N x 8 output channels from `out`: act(sum + bias [+ *out]), stored to the
// lanes `masks` select (all 8 when `full`); lo, hi as activate_n() takes them.
template <int N>
WPK_AVX2_INLINE void store_results(float* out, const Vecs<N>& sums, const Vecs<N>& bias, const __m256i (&masks)[N],
                                   bool full, const StreamConvEpilogue& e, __m256 lo, __m256 hi) {
  __m256 v[N];
  for (int j = 0; j < N; ++j) {
    v[j] = _mm256_add_ps(sums[j], bias[j]);
    if (e.accumulate)
      v[j] = _mm256_add_ps(v[j], full ? _mm256_loadu_ps(out + 8 * j) : _mm256_maskload_ps(out + 8 * j, masks[j]));
  }
  activate_n<N>(v, e, lo, hi);
  for (int j = 0; j < N; ++j) {
    if (full) _mm256_storeu_ps(out + 8 * j, v[j]);
    else _mm256_maskstore_ps(out + 8 * j, masks[j], v[j]);
  }
}

// y[r * ldy + c] = act(y[...]) for r < rows, c < cols: for activations (the GELUs) that cost
// more in a tile's epilogue, where their dependency chains wait behind the sums, than in a pass
// over the tile's outputs while they are still in L1.
inline WPK_AVX2 void activate_rows(float* y, std::int64_t rows, std::int64_t cols, std::int64_t ldy,
                                   const StreamConvEpilogue& e) {
  const __m256 lo = activation_floor(e), hi = _mm256_set1_ps(e.hi);
  for (std::int64_t r = 0; r < rows; ++r, y += ldy)
    for (std::int64_t c = 0; c < cols; c += 16) {
      const std::int64_t n = cols - c;
      Vecs<2> v = {load_lanes(y + c, n), load_lanes(y + c + 8, n - 8)};
      activate_n<2>(v, e, lo, hi);
      store_lanes(y + c, n, v[0]);
      store_lanes(y + c + 8, n - 8, v[1]);
    }
}

inline WPK_AVX2 void store_result(float* out, __m256 sum, __m256 bias, __m256i mask, bool full,
                                  const StreamConvEpilogue& e, __m256 lo, __m256 hi) {
  const Vecs<1> sums = {sum}, biases = {bias};
  const __m256i masks[1] = {mask};
  store_results<1>(out, sums, biases, masks, full, e, lo, hi);
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
  // Weights a later tile reads first, prefetched (hint T1: the outer caches) one cache line per
  // kPrefetchEvery input channels while this tile computes (null: none): see avx2_conv.cpp's
  // run_part.
  const char* prefetch;
  const char* prefetch_end;
};

constexpr std::int64_t kPrefetchEvery = 8;

// p[r] = where pixel r of a tile reads tap `tap` (table a: [MR][taps]); false when every one reads
// `zeros` (the padding), and the tile may skip the tap.
template <int MR, typename T>
WPK_AVX2_INLINE bool gather_tap(const T* const* a, int taps, int tap, const T* zeros, const T* (&p)[MR]) {
  bool any = false;
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) {
    p[r] = a[r * taps + tap];
    any |= p[r] != zeros;
  }
  return any;
}

// Input channel i of a tile's MR pixels times its weights w (16 output channels), into acc.
template <int MR>
WPK_AVX2_INLINE void tile_step(__m256 (&acc)[MR][2], const float* const (&p)[MR], const float* w, std::int64_t i) {
  const __m256 w0 = _mm256_loadu_ps(w), w1 = _mm256_loadu_ps(w + 8);
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) {
    const __m256 v = _mm256_broadcast_ss(p[r] + i);
    acc[r][0] = _mm256_fmadd_ps(v, w0, acc[r][0]);
    acc[r][1] = _mm256_fmadd_ps(v, w1, acc[r][1]);
  }
}

// MR output pixels x 16 output channels: all taps and input channels, then the epilogue; with
// kPrefetch, fetching t.prefetch's lines on the way (a separate loop: the kernels that never
// prefetch, attention's and Winograd's, measured 4-8% slower in the chunked one).
template <int MR, bool kPrefetch>
WPK_AVX2 void tile(const TileArgs& t, const StreamConvEpilogue& e) {
  __m256 acc[MR][2];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  const std::int64_t ic = t.ic;
  const char* pf = t.prefetch;
  for (int tap = 0; tap < t.taps; ++tap) {
    const float* p[MR];
    if (!gather_tap<MR>(t.a, t.taps, tap, t.zeros, p)) continue;  // image edges, small outputs
    const float* w = t.w + tap * ic * kBlock;
    std::int64_t i = 0;
    if constexpr (kPrefetch) {
      for (; i + kPrefetchEvery <= ic; i += kPrefetchEvery) {
        if (pf < t.prefetch_end) {
          _mm_prefetch(pf, _MM_HINT_T1);
          pf += 64;
        }
#pragma GCC unroll 8
        for (std::int64_t j = 0; j < kPrefetchEvery; ++j, w += kBlock) tile_step<MR>(acc, p, w, i + j);
      }
    }
#pragma GCC unroll 2
    for (; i < ic; ++i, w += kBlock) tile_step<MR>(acc, p, w, i);
  }
  const __m256i masks[2] = {lane_mask(t.cols), lane_mask(t.cols - 8)};
  const bool full = t.cols == kBlock;
  Vecs<2> bias = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  if (t.bias) {
    bias[0] = _mm256_maskload_ps(t.bias, masks[0]);
    bias[1] = _mm256_maskload_ps(t.bias + 8, masks[1]);
  }
  const __m256 lo = activation_floor(e), hi = _mm256_set1_ps(e.hi);
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) store_results<2>(t.y + r * t.ldy, acc[r], bias, masks, full, e, lo, hi);
}

using TileFn = void (*)(const TileArgs&, const StreamConvEpilogue&);
inline const TileFn kTiles[kTile] = {&tile<1, false>, &tile<2, false>, &tile<3, false>,
                                     &tile<4, false>, &tile<5, false>, &tile<6, false>};
inline const TileFn kPrefetchingTiles[kTile] = {&tile<1, true>, &tile<2, true>, &tile<3, true>,
                                                &tile<4, true>, &tile<5, true>, &tile<6, true>};

}  // namespace wpk::cpu::avx2
#endif
