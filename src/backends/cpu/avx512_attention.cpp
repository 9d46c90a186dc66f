#include "backends/cpu/avx512_attention.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "backends/cpu/avx2_attention.hpp"
#include "backends/cpu/avx2_tile.hpp"
#include "core/cpu_features.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define WPK_AVX512_ATTENTION 1
#define WPK_AVX512 __attribute__((target("avx512f")))
#define WPK_AVX512_INLINE __attribute__((target("avx512f"), always_inline)) inline
#endif

namespace wpk::cpu {
namespace {

constexpr std::int64_t kBlock = 64;      // keys (and value features) per column block: 4 vectors
constexpr int kRows = 6;                 // query rows per register tile: 24 sums, 4 weights, 1 broadcast
constexpr std::int64_t kMaxChunk = 128;  // query rows per work item
// Below this the true e^x is under float's normal range: the softmax makes it exactly 0.
constexpr float kExpFloor = avx2::kExpLowest;

using avx2::ceil_div;

#ifdef WPK_AVX512_ATTENTION
// Lanes [0, n) of a vector (n <= 16).
WPK_AVX512_INLINE __mmask16 first_lanes(std::int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
}

// The largest and the sum of a vector's lanes. (GCC 12 warns of an uninitialised pass-through
// in the unmasked AVX-512 forms of these and of max and shifts below: the masked forms are used.)
WPK_AVX512_INLINE float lanes_max(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  return *std::max_element(lanes, lanes + 16);
}
WPK_AVX512_INLINE float lanes_sum(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float sum = 0;
  for (const float x : lanes) sum += x;
  return sum;
}

// e^x on 16 lanes, for x in [kExpFloor, 0] (the softmax's shifted scores): avx2_tile.hpp's exp_n
// (its constants, its degree-6 polynomial) on 16 lanes.
WPK_AVX512_INLINE __m512 exp16(__m512 x) {
  const __m512 magic = _mm512_set1_ps(avx2::kExpMagic);
  x = _mm512_mask_max_ps(x, 0xFFFF, x, _mm512_set1_ps(kExpFloor));
  const __m512 t = _mm512_fmadd_ps(x, _mm512_set1_ps(avx2::kLog2e), magic);
  const __m512 n = _mm512_sub_ps(t, magic);
  x = _mm512_fnmadd_ps(n, _mm512_set1_ps(avx2::kLn2High), x);
  x = _mm512_fnmadd_ps(n, _mm512_set1_ps(avx2::kLn2Low), x);
  __m512 p = _mm512_set1_ps(avx2::kExpPolynomial[0]);
  for (std::size_t c = 1; c < std::size(avx2::kExpPolynomial); ++c) p = _mm512_fmadd_ps(p, x, _mm512_set1_ps(avx2::kExpPolynomial[c]));
  return _mm512_mul_ps(p, _mm512_castsi512_ps(_mm512_mask_slli_epi32(_mm512_castps_si512(t), 0xFFFF, _mm512_castps_si512(t), 23)));
}

// y[r][0, n) = scale[r] * sum over k < steps of a[r][k] * b[k * ldb + 0, n), for MR rows and NV
// vectors of columns (n in (16 (NV - 1), 16 NV]); b is read only in its first n columns.
template <int MR, int NV>
WPK_AVX512 void tile(const float* const* a, const float* b, std::int64_t ldb, std::int64_t steps, std::int64_t n,
                     float* const* y, const float* scale) {
  const __mmask16 last = first_lanes(n - 16 * (NV - 1));
  __m512 acc[MR][NV];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[r][j] = _mm512_setzero_ps();
  for (std::int64_t k = 0; k < steps; ++k, b += ldb) {
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int j = 0; j + 1 < NV; ++j) bv[j] = _mm512_loadu_ps(b + 16 * j);
    bv[NV - 1] = _mm512_maskz_loadu_ps(last, b + 16 * (NV - 1));
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(a[r][k]);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[r][j] = _mm512_fmadd_ps(av, bv[j], acc[r][j]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) {
    const __m512 s = _mm512_set1_ps(scale ? scale[r] : 1.0f);
#pragma GCC unroll 4
    for (int j = 0; j + 1 < NV; ++j) _mm512_storeu_ps(y[r] + 16 * j, _mm512_mul_ps(acc[r][j], s));
    _mm512_mask_storeu_ps(y[r] + 16 * (NV - 1), last, _mm512_mul_ps(acc[r][NV - 1], s));
  }
}

using TileFn = void (*)(const float* const*, const float*, std::int64_t, std::int64_t, std::int64_t, float* const*,
                        const float*);

template <int MR>
constexpr TileFn tile_of(int vectors) {
  return vectors == 1 ? &tile<MR, 1> : vectors == 2 ? &tile<MR, 2> : vectors == 3 ? &tile<MR, 3> : &tile<MR, 4>;
}

// The tile of `rows` rows (1..kRows) and columns n (1..kBlock).
TileFn tile_for(int rows, std::int64_t n) {
  const int vectors = static_cast<int>(ceil_div(n, 16));
  switch (rows) {
    case 1: return tile_of<1>(vectors);
    case 2: return tile_of<2>(vectors);
    case 3: return tile_of<3>(vectors);
    case 4: return tile_of<4>(vectors);
    case 5: return tile_of<5>(vectors);
    default: return tile_of<6>(vectors);
  }
}

// s[0, cols) = e^(s + mask - max) (0 below the floor), returning 1 / their sum; a row with a NaN
// or an infinite largest score comes out NaN with factor 1 (as the reference's softmax).
WPK_AVX512 float exponentials(float* s, std::int64_t cols, const float* mask, std::int64_t mask_step) {
  const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 vmax = minus_inf;
  __mmask16 unordered = 0;
  for (std::int64_t j = 0; j < cols; j += 16) {
    const __mmask16 m = first_lanes(cols - j);
    __m512 x = _mm512_maskz_loadu_ps(m, s + j);
    if (mask) {
      x = _mm512_add_ps(x, mask_step ? _mm512_maskz_loadu_ps(m, mask + j) : _mm512_set1_ps(*mask));
      _mm512_mask_storeu_ps(s + j, m, x);
    }
    unordered |= _mm512_mask_cmp_ps_mask(m, x, x, _CMP_UNORD_Q);
    vmax = _mm512_mask_max_ps(vmax, m, vmax, x);
  }
  const float max = lanes_max(vmax);
  if (unordered || !std::isfinite(max)) {
    std::fill(s, s + cols, std::numeric_limits<float>::quiet_NaN());
    return 1.0f;
  }
  const __m512 shift = _mm512_set1_ps(max), floor = _mm512_set1_ps(kExpFloor);
  __m512 vsum = _mm512_setzero_ps();
  for (std::int64_t j = 0; j < cols; j += 16) {
    const __mmask16 m = first_lanes(cols - j);
    const __m512 x = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + j), shift);
    const __m512 e = _mm512_maskz_mov_ps(m & _mm512_cmp_ps_mask(x, floor, _CMP_GE_OQ), exp16(x));
    _mm512_mask_storeu_ps(s + j, m, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  return 1.0f / lanes_sum(vsum);  // >= 1: the maximum's term is 1
}

// Per thread: one batch entry's packed keys, one chunk's scores and their rows' 1 / sums.
struct Scratch {
  std::vector<float> keys, scores, inverse;
  std::int64_t packed = -1;  // the batch entry the keys hold
  std::int64_t ld = 0;       // floats from one row of scores to the next
};

// Rows [first, first + count) of batch entry b: scores, exponentials, then the values weighted
// by them and scaled by each row's 1 / sum, straight into y.
void run_chunk(const AttentionJob& job, std::int64_t b, std::int64_t first, std::int64_t count, Scratch& w) {
  const AttentionShape& s = job.s;
  const float* rows[kRows];
  float* out[kRows];
  for (std::int64_t r0 = 0; r0 < count; r0 += kRows) {
    const int mr = static_cast<int>(std::min<std::int64_t>(kRows, count - r0));
    for (int r = 0; r < mr; ++r) {
      rows[r] = job.q.data + job.q.batch_offsets[b] + (first + r0 + r) * job.q.row_stride;
      out[r] = w.scores.data() + (r0 + r) * w.ld;
    }
    for (std::int64_t j = 0; j < s.cols; j += kBlock) {
      const std::int64_t n = std::min(kBlock, s.cols - j);
      float* at[kRows];
      for (int r = 0; r < mr; ++r) at[r] = out[r] + j;
      tile_for(mr, n)(rows, w.keys.data() + j * s.d, kBlock, s.d, n, at, nullptr);
    }
  }
  for (std::int64_t r = 0; r < count; ++r) {
    const float* m = job.mask.data ? job.mask.data + job.mask.batch_offsets[b] + (first + r) * job.mask.row_stride : nullptr;
    w.inverse[static_cast<std::size_t>(r)] = exponentials(w.scores.data() + r * w.ld, s.cols, m, job.mask.col_stride);
  }
  const float* values = job.v.data + job.v.batch_offsets[b];
  for (std::int64_t r0 = 0; r0 < count; r0 += kRows) {
    const int mr = static_cast<int>(std::min<std::int64_t>(kRows, count - r0));
    for (int r = 0; r < mr; ++r) rows[r] = w.scores.data() + (r0 + r) * w.ld;
    for (std::int64_t j = 0; j < s.dv; j += kBlock) {
      const std::int64_t n = std::min(kBlock, s.dv - j);
      for (int r = 0; r < mr; ++r) out[r] = job.y + job.y_offsets[b] + (first + r0 + r) * job.y_row_stride + j;
      tile_for(mr, n)(rows, values + j, job.v.row_stride, s.cols, n, out, w.inverse.data() + r0);
    }
  }
}

void run_items(const AttentionJob& job, std::int64_t begin, std::int64_t end, Scratch& w) {
  const AttentionShape& s = job.s;
  for (std::int64_t i = begin; i < end; ++i) {
    const std::int64_t b = i / job.chunks, first = i % job.chunks * job.chunk;
    if (w.packed != b) {
      pack_attention_keys(job.k.data + job.k.batch_offsets[b], job.k.row_stride, s.cols, s.d, s.scale, kBlock, w.keys.data());
      w.packed = b;
    }
    run_chunk(job, b, first, std::min(s.rows, first + job.chunk) - first, w);
  }
}
#endif

}  // namespace

bool avx512_attention_available() {
#ifdef WPK_AVX512_ATTENTION
  static const bool available = cpu_features().avx512f;
  return available;
#else
  return false;
#endif
}

void avx512_attention(const AttentionShape& s, const AttentionOperand& q, const AttentionOperand& k,
                      const AttentionOperand& v, const AttentionOperand& mask, float* y,
                      const std::vector<std::int64_t>& y_offsets, std::int64_t y_row_stride) {
#ifdef WPK_AVX512_ATTENTION
  if (s.batch == 0 || s.rows == 0 || s.dv == 0) return;
  // Enough items for every thread to get a few (load balance); a thread packs a batch entry's
  // keys once for its consecutive items of that entry.
  const std::int64_t threads = omp_get_max_threads();
  const std::int64_t per_entry = std::max(ceil_div(s.rows, kMaxChunk), std::min(ceil_div(4 * threads, s.batch), ceil_div(s.rows, 8)));
  const std::int64_t chunk = ceil_div(s.rows, per_entry);
  const AttentionJob job{s, q, k, v, mask, y, y_offsets, y_row_stride, chunk, ceil_div(s.rows, chunk)};
  const std::int64_t items = s.batch * job.chunks;
  // Allocated here, where std::bad_alloc reaches the caller; thrown inside the parallel region
  // it would terminate the process.
  std::vector<Scratch> scratch(static_cast<std::size_t>(threads));
  for (Scratch& w : scratch) {
    w.ld = ceil_div(s.cols, 16) * 16;
    w.keys.resize(static_cast<std::size_t>(ceil_div(s.cols, kBlock) * kBlock * s.d));
    w.scores.resize(static_cast<std::size_t>(chunk * w.ld));
    w.inverse.resize(static_cast<std::size_t>(chunk));
  }
#pragma omp parallel num_threads(static_cast<int>(threads))
  {
    const std::int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
    run_items(job, items * t / n, items * (t + 1) / n, scratch[static_cast<std::size_t>(t)]);
  }
#else
  (void)s, (void)q, (void)k, (void)v, (void)mask, (void)y, (void)y_offsets, (void)y_row_stride;
#endif
}

}  // namespace wpk::cpu
