#include "backends/cpu/stream_conv.hpp"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "core/cpu_features.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define WPK_STREAM_CONV 1
#define WPK_AVX512 __attribute__((target("avx512f")))
#endif

namespace wpk::cpu {
namespace {

// The work is cut into column groups of 64 output channels (four 16-float vectors; 48 with
// Acdb48a weights), each computed for up to kRowBlock output pixels at a time, k (= kh, kw, ic)
// in chunks of kChunk rows: a chunk's weights for one group are 16 KB, which the first tile of
// rows reads from L2 (where the previous chunk's tiles prefetched them) and the other tiles of
// rows from L1.
constexpr int kChunk = 64;
constexpr int kRowBlock = 64;
constexpr int kCols = 64;

// Output channels per column group: 64, or one block of Acdb48a weights.
std::int64_t group_columns(std::int64_t block) { return block == 48 ? 48 : kCols; }

// Thread t of `threads` takes column groups [first_group(t), first_group(t + 1)): a run of
// neighbours, so its weights are one contiguous stream. stream_conv_balance judges this split.
std::int64_t first_group(std::int64_t groups, std::int64_t t, std::int64_t threads) { return groups * t / threads; }

#ifdef WPK_STREAM_CONV
// Rows per tile: 7 x 4 vectors of sums (8 x 3 and below) leave room for the weights.
int max_rows(int vectors) { return vectors == 4 ? 7 : 8; }

alignas(64) const float kZeros[kChunk] = {};

struct TileArgs {
  const float* a[8];   // row r's input at the chunk's first k (kZeros where it reads padding)
  const float* b;      // the first vector's weights at the chunk's first k
  std::int64_t panel;  // floats from one block of output channels to the next
  const float* pf;     // walked like b: one line per k row is prefetched from here
  int kc;              // k rows in the chunk
  float* c;            // the rows' running sums, kCols floats apart
};

// MR rows x NV vectors of sums over one chunk, weights in blocks of B output channels (vector j
// lies in block j * 16 / B, at offset j * 16 % B).
template <int MR, int NV, int B>
WPK_AVX512 void tile(const TileArgs& t) {
  // 7 rows x 4 vectors of sums, 4 weight vectors and a broadcast would need 33 registers:
  // then the last weight vector is read by each FMA from memory (an L1 hit) instead.
  constexpr int kInRegs = MR * NV + NV + 1 > 32 ? NV - 1 : NV;
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[r][j] = _mm512_load_ps(t.c + r * kCols + j * 16);
  const float* b = t.b;
  const float* pf = t.pf;
  const std::int64_t panel = t.panel;
  for (int k = 0; k < t.kc; ++k, b += B, pf += B) {
    _mm_prefetch(reinterpret_cast<const char*>(pf), _MM_HINT_T1);
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < kInRegs; ++j) bv[j] = _mm512_loadu_ps(b + (j * 16 / B) * panel + j * 16 % B);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(t.a[r][k]);
#pragma GCC unroll 4
      for (int j = 0; j < kInRegs; ++j) acc[r][j] = _mm512_fmadd_ps(av, bv[j], acc[r][j]);
      if constexpr (kInRegs < NV) {
        const float* last = b + ((NV - 1) * 16 / B) * panel + (NV - 1) * 16 % B;
        asm("vfmadd231ps %1, %2, %0" : "+v"(acc[r][NV - 1]) : "m"(*reinterpret_cast<const __m512*>(last)), "v"(av));
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) _mm512_store_ps(t.c + r * kCols + j * 16, acc[r][j]);
}

using TileFn = void (*)(const TileArgs&);

template <int NV, int B, std::size_t... R>
constexpr std::array<TileFn, 8> tiles_of(std::index_sequence<R...>) {
  return {&tile<static_cast<int>(R) + 1, NV, B>...};
}

template <int B>
constexpr std::array<std::array<TileFn, 8>, 4> tiles_for_block() {
  constexpr auto rows = std::make_index_sequence<8>();
  return {tiles_of<1, B>(rows), tiles_of<2, B>(rows), tiles_of<3, B>(rows), tiles_of<4, B>(rows)};
}

// [vectors - 1][rows - 1] for one block size. Acdb48a groups always have 3 vectors.
using TileTable = std::array<std::array<TileFn, 8>, 4>;
const TileTable kTiles16 = tiles_for_block<16>(), kTiles32 = tiles_for_block<32>(), kTiles64 = tiles_for_block<64>();
const TileTable kTiles48 = [] {
  TileTable t{};
  t[2] = tiles_of<3, 48>(std::make_index_sequence<8>());
  return t;
}();

const TileTable& tiles_for(std::int64_t block) {
  switch (block) {
    case 16: return kTiles16;
    case 32: return kTiles32;
    case 48: return kTiles48;
    default: return kTiles64;
  }
}

// y[r][0 .. cols) = act(c[r] + bias [+ y[r]]) for `rows` rows.
WPK_AVX512 void store_rows(const float* c, int rows, int cols, const float* bias, const StreamConvEpilogue& e,
                           float* y, std::int64_t ldy) {
  const __m512 lo = _mm512_set1_ps(e.act == StreamConvEpilogue::Act::Clip ? e.lo : 0.0f);
  const __m512 hi = _mm512_set1_ps(e.hi);
  for (int r = 0; r < rows; ++r) {
    float* out = y + r * ldy;
    for (int j = 0; j * 16 < cols; ++j) {
      const int left = cols - j * 16;
      const __mmask16 m = left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1u);
      __m512 v = _mm512_load_ps(c + r * kCols + j * 16);
      if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, bias + j * 16));
      if (e.accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, out + j * 16));
      // The masked forms: GCC 12's unmasked max/min warn of an uninitialised pass-through.
      if (e.act != StreamConvEpilogue::Act::None) v = _mm512_mask_max_ps(v, 0xFFFF, v, lo);
      if (e.act == StreamConvEpilogue::Act::Clip) v = _mm512_mask_min_ps(v, 0xFFFF, v, hi);
      _mm512_mask_storeu_ps(out + j * 16, m, v);
    }
  }
}

struct Job {
  const StreamConvShape& s;
  const float* x;
  const float* w;
  std::int64_t block;
  const StreamConvEpilogue& e;
  float* y;
  std::int64_t rows, k_total, padded_oc;
  int cols;
};

Job make_job(const StreamConvShape& s, const float* x, const float* w, int block, const StreamConvEpilogue& e, float* y) {
  return Job{s, x, w, block, e, y, s.n * s.oh * s.ow, s.kh * s.kw * s.ic, (s.oc + block - 1) / block * block,
             static_cast<int>(group_columns(block))};
}

// One column group: output channels [group * cols, + cols) for every output pixel.
void run_group(const Job& job, std::int64_t group, float* c) {
  const StreamConvShape& s = job.s;
  const std::int64_t col0 = group * job.cols;
  const int vectors = static_cast<int>(std::min<std::int64_t>(job.cols / 16, (job.padded_oc - col0) / 16));
  const int valid_cols = static_cast<int>(std::min<std::int64_t>(vectors * 16, s.oc - col0));
  const std::int64_t panel = job.k_total * job.block;
  // Where vector j's weights start (k = 0): its block, then its offset inside the block.
  auto vector_start = [&](int j) {
    const std::int64_t col = col0 + 16 * j;
    return job.w + (col / job.block) * panel + col % job.block;
  };
  const TileTable& tiles = tiles_for(job.block);
  const int most = max_rows(vectors);
  std::int64_t n_of[kRowBlock], ih_of[kRowBlock], iw_of[kRowBlock];
  for (std::int64_t m0 = 0; m0 < job.rows; m0 += kRowBlock) {
    const int mb = static_cast<int>(std::min<std::int64_t>(kRowBlock, job.rows - m0));
    for (int r = 0; r < mb; ++r) {
      const std::int64_t m = m0 + r, ow = m % s.ow, oh = m / s.ow % s.oh;
      n_of[r] = m / (s.ow * s.oh);
      ih_of[r] = oh * s.sh - s.ph;
      iw_of[r] = ow * s.sw - s.pw;
    }
    std::memset(c, 0, sizeof(float) * static_cast<std::size_t>(mb) * kCols);
    // Row groups of near-equal size, at most `most` rows each.
    const int groups = (mb + most - 1) / most, small = mb / groups, bigger = mb % groups;
    TileArgs args{};
    args.panel = panel;
    std::int64_t k = 0;
    for (std::int64_t fy = 0; fy < s.kh; ++fy)
      for (std::int64_t fx = 0; fx < s.kw; ++fx)
        for (std::int64_t ic0 = 0; ic0 < s.ic; ic0 += kChunk, k += args.kc) {
          args.kc = static_cast<int>(std::min<std::int64_t>(kChunk, s.ic - ic0));
          args.b = vector_start(0) + k * job.block;
          for (int g = 0, r0 = 0; g < groups; ++g) {
            const int mr = small + (g < bigger ? 1 : 0);
            for (int r = 0; r < mr; ++r) {
              const std::int64_t ih = ih_of[r0 + r] + fy * s.dh, iw = iw_of[r0 + r] + fx * s.dw;
              args.a[r] = ih < 0 || iw < 0 || ih >= s.ih || iw >= s.iw
                              ? kZeros
                              : job.x + ((n_of[r0 + r] * s.ih + ih) * s.iw + iw) * s.ic + ic0;
            }
            // In the first row block, row group g prefetches vector g's next chunk (with fewer
            // groups than vectors the rest is left to the hardware, and so is a next chunk
            // shorter than this one: the walk stays inside the weights); later blocks find the
            // weights in L2, and their tiles "prefetch" the line they are reading.
            const bool ahead = m0 == 0 && g < vectors && k + 2 * args.kc <= job.k_total;
            args.pf = ahead ? vector_start(g) + (k + args.kc) * job.block : args.b;
            args.c = c + r0 * kCols;
            tiles[static_cast<std::size_t>(vectors - 1)][static_cast<std::size_t>(mr - 1)](args);
            r0 += mr;
          }
        }
    store_rows(c, mb, valid_cols, job.e.bias ? job.e.bias + col0 : nullptr, job.e, job.y + m0 * s.oc + col0, s.oc);
  }
}
#endif

}  // namespace

bool stream_conv_available() {
#ifdef WPK_STREAM_CONV
  static const bool available = cpu_features().avx512f;
  return available;
#else
  return false;
#endif
}

bool stream_conv_runs(const StreamConvShape& s, int block) {
  return stream_conv_available() && (block == 16 || block == 32 || block == 48 || block == 64) && s.oc >= 1 &&
         s.n * s.oh * s.ow >= 1;
}

double stream_conv_balance(const StreamConvShape& s, int block, int threads) {
  const std::int64_t cols = group_columns(block), groups = (s.oc + cols - 1) / cols;
  const std::int64_t t_count = std::max(1, threads);
  std::int64_t busiest = 0;
  for (std::int64_t t = 0; t < t_count; ++t) {
    const std::int64_t first = first_group(groups, t, t_count) * cols;
    const std::int64_t last = std::min(first_group(groups, t + 1, t_count) * cols, s.oc);
    busiest = std::max(busiest, last - first);
  }
  return busiest > 0 ? static_cast<double>(s.oc) / static_cast<double>(busiest * t_count) : 0.0;
}

void stream_conv(const StreamConvShape& s, const float* x, const float* w, int block, const StreamConvEpilogue& e,
                 float* y) {
#ifdef WPK_STREAM_CONV
  const Job job = make_job(s, x, w, block, e, y);
  const std::int64_t groups = (job.padded_oc + job.cols - 1) / job.cols;
#pragma omp parallel
  {
    const std::int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    alignas(64) float c[kRowBlock * kCols];
    for (std::int64_t g = first_group(groups, t, threads); g < first_group(groups, t + 1, threads); ++g)
      run_group(job, g, c);
  }
#else
  (void)s, (void)x, (void)w, (void)block, (void)e, (void)y;
#endif
}

void stream_conv_on_this_thread(const StreamConvShape& s, const float* x, const float* w, int block,
                                const StreamConvEpilogue& e, float* y) {
#ifdef WPK_STREAM_CONV
  const Job job = make_job(s, x, w, block, e, y);
  alignas(64) float c[kRowBlock * kCols];
  for (std::int64_t g = 0; g * job.cols < job.padded_oc; ++g) run_group(job, g, c);
#else
  (void)s, (void)x, (void)w, (void)block, (void)e, (void)y;
#endif
}

}  // namespace wpk::cpu
