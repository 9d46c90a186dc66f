#include "backends/cpu/avx2_attention.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/avx2_conv.hpp"
#include "backends/cpu/avx2_tile.hpp"

namespace wpk::cpu {

#ifdef WPK_AVX2_KERNELS
using namespace avx2;  // the register tile, e^x and the work-split helpers

namespace {

// Below this the true e^x is under float's normal range: the softmax makes it exactly 0, where
// exp_ps, which clamps its input, would give 1.4e-38.
constexpr float kExpFloor = kExpLowest;

WPK_AVX2 float horizontal_max(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

WPK_AVX2 float horizontal_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// s[0, cols) = softmax(s + mask), with mask[j * mask_step] when mask is not null; NaN
// throughout when a score is NaN or the largest is infinite (as the reference's softmax).
WPK_AVX2 void attention_softmax_row(float* s, std::int64_t cols, const float* mask, std::int64_t mask_step) {
  const __m256 minus_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 vmax = minus_inf, unordered = _mm256_setzero_ps();
  for (std::int64_t j = 0; j < cols; j += 8) {
    const std::int64_t n = cols - j;
    __m256 x = load_lanes(s + j, n);
    if (mask) {
      x = _mm256_add_ps(x, mask_step ? load_lanes(mask + j, n) : _mm256_set1_ps(*mask));
      store_lanes(s + j, n, x);
    }
    unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    if (n < 8) x = _mm256_blendv_ps(minus_inf, x, _mm256_castsi256_ps(lane_mask(static_cast<int>(n))));
    vmax = _mm256_max_ps(vmax, x);
  }
  const float max = horizontal_max(vmax);
  if (_mm256_movemask_ps(unordered) || !std::isfinite(max)) {
    std::fill(s, s + cols, std::numeric_limits<float>::quiet_NaN());
    return;
  }
  const __m256 shift = _mm256_set1_ps(max), floor = _mm256_set1_ps(kExpFloor);
  __m256 vsum = _mm256_setzero_ps();
  std::int64_t j = 0;
  for (; j + 16 <= cols; j += 16) {  // two vectors in lockstep (avx2_tile.hpp's exp_n)
    Vecs<2> x = {_mm256_sub_ps(_mm256_loadu_ps(s + j), shift), _mm256_sub_ps(_mm256_loadu_ps(s + j + 8), shift)};
    const __m256 keep0 = _mm256_cmp_ps(x[0], floor, _CMP_GE_OQ), keep1 = _mm256_cmp_ps(x[1], floor, _CMP_GE_OQ);
    exp_n<2>(x);
    x[0] = _mm256_and_ps(x[0], keep0);
    x[1] = _mm256_and_ps(x[1], keep1);
    _mm256_storeu_ps(s + j, x[0]);
    _mm256_storeu_ps(s + j + 8, x[1]);
    vsum = _mm256_add_ps(vsum, _mm256_add_ps(x[0], x[1]));
  }
  for (; j < cols; j += 8) {
    const std::int64_t n = cols - j;
    const __m256 x = _mm256_sub_ps(load_lanes(s + j, n), shift);
    const __m256 e = keep_lanes(_mm256_and_ps(exp_ps(x), _mm256_cmp_ps(x, floor, _CMP_GE_OQ)), n);
    store_lanes(s + j, n, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  const __m256 inverse = _mm256_set1_ps(1.0f / horizontal_sum(vsum));  // >= 1: the maximum's term is 1
  for (std::int64_t j = 0; j < cols; j += 8) store_lanes(s + j, cols - j, _mm256_mul_ps(load_lanes(s + j, cols - j), inverse));
}

// Values [cols][dv] as a product's weights: [ceil(dv / block)][cols][block], the features past
// dv zero.
void pack_attention_values(const float* v, std::int64_t stride, std::int64_t cols, std::int64_t dv, std::int64_t block,
                           float* out) {
  const std::int64_t blocks = (dv + block - 1) / block;
  for (std::int64_t j = 0; j < cols; ++j) {
    const float* row = v + j * stride;
    for (std::int64_t b = 0; b < blocks; ++b) {
      float* o = out + (b * cols + j) * block;
      const std::int64_t n = std::min<std::int64_t>(block, dv - b * block);
      std::copy(row + b * block, row + b * block + n, o);
      std::fill(o + n, o + block, 0.0f);
    }
  }
}

// Per thread: the packed keys and values of one batch entry and the scores of one tile of rows.
struct Scratch {
  std::vector<float> keys, values, scores;
  std::int64_t packed = -1;  // the batch entry keys and values hold
  std::int64_t ld = 0;       // floats from one row of scores to the next
};

// Rows [r0, r0 + mr) of batch entry b: scores, softmax, context.
void run_tile(const AttentionJob& job, std::int64_t b, std::int64_t r0, int mr, Scratch& w) {
  const AttentionShape& s = job.s;
  const StreamConvEpilogue plain;
  const float* rows[kTile];
  TileArgs t{};
  t.a = rows;
  t.taps = 1;

  for (int r = 0; r < mr; ++r) rows[r] = job.q.data + job.q.batch_offsets[b] + (r0 + r) * job.q.row_stride;
  t.ic = s.d;
  t.ldy = w.ld;
  for (std::int64_t jb = 0; jb * kBlock < s.cols; ++jb) {
    t.w = w.keys.data() + jb * s.d * kBlock;
    t.cols = static_cast<int>(std::min<std::int64_t>(kBlock, s.cols - jb * kBlock));
    t.y = w.scores.data() + jb * kBlock;
    kTiles[mr - 1](t, plain);
  }

  for (int r = 0; r < mr; ++r) {
    const float* m = job.mask.data ? job.mask.data + job.mask.batch_offsets[b] + (r0 + r) * job.mask.row_stride : nullptr;
    attention_softmax_row(w.scores.data() + r * w.ld, s.cols, m, job.mask.col_stride);
    rows[r] = w.scores.data() + r * w.ld;
  }
  t.ic = s.cols;
  t.ldy = job.y_row_stride;
  for (std::int64_t jb = 0; jb * kBlock < s.dv; ++jb) {
    t.w = w.values.data() + jb * s.cols * kBlock;
    t.cols = static_cast<int>(std::min<std::int64_t>(kBlock, s.dv - jb * kBlock));
    t.y = job.y + job.y_offsets[b] + r0 * job.y_row_stride + jb * kBlock;
    kTiles[mr - 1](t, plain);
  }
}

// Work items [first, last): item i is rows [c * chunk, (c + 1) * chunk) of batch entry i / chunks.
void run_items(const AttentionJob& job, Range items, Scratch& w) {
  const AttentionShape& s = job.s;
  for (std::int64_t i = items.begin; i < items.end; ++i) {
    const std::int64_t b = i / job.chunks, first = i % job.chunks * job.chunk;
    const std::int64_t count = std::min(s.rows, first + job.chunk) - first;
    if (w.packed != b) {
      pack_attention_keys(job.k.data + job.k.batch_offsets[b], job.k.row_stride, s.cols, s.d, s.scale, kBlock, w.keys.data());
      pack_attention_values(job.v.data + job.v.batch_offsets[b], job.v.row_stride, s.cols, s.dv, kBlock, w.values.data());
      w.packed = b;
    }
    const std::int64_t tiles = ceil_div(count, kTile);  // of near-equal size, at most kTile rows
    for (std::int64_t tile = 0; tile < tiles; ++tile) {
      const Range r = part(count, tiles, tile);
      run_tile(job, b, first + r.begin, static_cast<int>(r.end - r.begin), w);
    }
  }
}

}  // namespace
#endif

void pack_attention_keys(const float* k, std::int64_t stride, std::int64_t cols, std::int64_t d, float scale,
                         std::int64_t block, float* out) {
  const std::int64_t blocks = (cols + block - 1) / block;
  if (cols % block) std::fill(out + (blocks - 1) * d * block, out + blocks * d * block, 0.0f);
  for (std::int64_t j = 0; j < cols; ++j) {
    float* o = out + (j / block) * d * block + j % block;
    const float* row = k + j * stride;
    for (std::int64_t c = 0; c < d; ++c) o[c * block] = row[c] * scale;
  }
}

bool avx2_attention_available() { return avx2_kernels_available(); }

void avx2_attention(const AttentionShape& s, const AttentionOperand& q, const AttentionOperand& k,
                    const AttentionOperand& v, const AttentionOperand& mask, float* y,
                    const std::vector<std::int64_t>& y_offsets, std::int64_t y_row_stride) {
#ifdef WPK_AVX2_KERNELS
  if (s.batch == 0 || s.rows == 0 || s.dv == 0) return;
  // Enough items for every thread to get a few (load balance), each of whole tiles; a thread
  // packs the keys and values of a batch entry once for its consecutive items of that entry.
  const std::int64_t threads = omp_get_max_threads();
  const std::int64_t per_entry = std::clamp<std::int64_t>(ceil_div(4 * threads, s.batch), 1, ceil_div(s.rows, kTile));
  const std::int64_t chunk = ceil_div(ceil_div(s.rows, per_entry), kTile) * kTile;
  const AttentionJob job{s, q, k, v, mask, y, y_offsets, y_row_stride, chunk, ceil_div(s.rows, chunk)};
  const std::int64_t items = s.batch * job.chunks;
  // Allocated here, where std::bad_alloc reaches the caller; thrown inside the parallel region
  // it would terminate the process.
  std::vector<Scratch> scratch(static_cast<std::size_t>(threads));
  for (Scratch& w : scratch) {
    w.ld = ceil_div(s.cols, kBlock) * kBlock;
    w.keys.resize(static_cast<std::size_t>(w.ld * s.d));
    w.values.resize(static_cast<std::size_t>(ceil_div(s.dv, kBlock) * kBlock * s.cols));
    w.scores.resize(static_cast<std::size_t>(kTile * w.ld));
  }
#pragma omp parallel num_threads(static_cast<int>(threads))
  {
    const int t = omp_get_thread_num();
    run_items(job, part(items, omp_get_num_threads(), t), scratch[static_cast<std::size_t>(t)]);
  }
#else
  (void)s, (void)q, (void)k, (void)v, (void)mask, (void)y, (void)y_offsets, (void)y_row_stride;
#endif
}

}  // namespace wpk::cpu
