#include "backends/cpu/avx2_winograd.hpp"

#include <omp.h>

#include <atomic>
#include <new>
#include <vector>

#include "backends/cpu/avx2_conv.hpp"
#include "backends/cpu/avx2_tile.hpp"

namespace wpk::cpu {
namespace {

using namespace avx2;  // the shared tile, vector math and work-split helpers

constexpr int kAlpha = 6;                 // transformed patch side: 4 outputs + 3 taps - 1
constexpr int kPoints = kAlpha * kAlpha;  // channel products per tile
constexpr int kOut = 4;                   // output side of a tile
// A thread's transformed patches and product sums for one block of tiles: sized to stay in L2
// (512 KB a core on Zen 3) with room for the weights streaming through, but at least 24 tiles:
// each block reads all the thread's transformed weights once, 12 FLOPs per byte at 24 tiles
// (at 512 channels and 7x7, batch 8, blocks of 6 tiles ran 11.0 ms, of 24 6.8 ms).
constexpr std::int64_t kScratchBytes = 384 << 10;
constexpr std::int64_t kMinBlockTiles = 24;
constexpr std::int64_t kMaxBlockTiles = 96;

// The transforms interpolate at the points 0, +-2/3, +-3/2 and infinity rather than the
// textbook 0, +-1, +-2: simulated in float32 over 64-channel sums, that halves the rounding
// error (relative L2 8.5e-7 vs 1.9e-6; direct convolution's 4.2e-7) at the same cost. With p and
// q = 1/p: B^T's rows are d0 - (p^2 + q^2) d2 + d4, (d4 - p^2 d2) -+ (p d1 - q d3), (d4 - q^2 d2)
// -+ (q d1 - p d3), d1 - (p^2 + q^2) d3 + d5; A^T's are m0 + (m1 + m2) + (m3 + m4), q^k (m1 -+ m2)
// + p^k (m3 -+ m4) for k = 1, 2, 3 (sign + for even k), plus m5 in the last; G's row of a finite
// point x is (1, x, x^2) / prod(x - other finite points), infinity's (0, 0, 1).
constexpr double kP = 1.5, kQ = 2.0 / 3;
constexpr double kFinitePoints[kAlpha - 1] = {0, kQ, -kQ, kP, -kP};

double g_row(int point, int k) {
  if (point == kAlpha - 1) return k == 2 ? 1.0 : 0.0;
  const double x = kFinitePoints[point];
  double scale = 1;
  for (const double other : kFinitePoints)
    if (other != x) scale *= x - other;
  return (k == 0 ? 1.0 : k == 1 ? x : x * x) / scale;
}

// Tiles of 4x4 output pixels: per image, rows of ceil(ow / 4) tiles.
struct Tiling {
  std::int64_t rows, cols, total;
};
Tiling tiling(const StreamConvShape& s) {
  const std::int64_t rows = ceil_div(s.oh, kOut), cols = ceil_div(s.ow, kOut);
  return {rows, cols, s.n * rows * cols};
}

#ifdef WPK_AVX2_KERNELS
// B^T d for one column of a 6x6 patch (d[0..5] at stride `step` vectors), into r[0..5].
inline WPK_AVX2 void input_rows(const __m256* d, int step, __m256* r) {
  const __m256 d0 = d[0], d1 = d[step], d2 = d[2 * step], d3 = d[3 * step], d4 = d[4 * step], d5 = d[5 * step];
  const __m256 p = _mm256_set1_ps(static_cast<float>(kP)), q = _mm256_set1_ps(static_cast<float>(kQ));
  const __m256 pp = _mm256_set1_ps(static_cast<float>(kP * kP)), qq = _mm256_set1_ps(static_cast<float>(kQ * kQ));
  const __m256 both = _mm256_set1_ps(static_cast<float>(kP * kP + kQ * kQ));
  r[0] = _mm256_fnmadd_ps(both, d2, _mm256_add_ps(d0, d4));
  const __m256 s1 = _mm256_fnmadd_ps(pp, d2, d4), t1 = _mm256_fnmadd_ps(q, d3, _mm256_mul_ps(p, d1));
  r[1] = _mm256_sub_ps(s1, t1);
  r[2] = _mm256_add_ps(s1, t1);
  const __m256 s2 = _mm256_fnmadd_ps(qq, d2, d4), t2 = _mm256_fnmadd_ps(p, d3, _mm256_mul_ps(q, d1));
  r[3] = _mm256_sub_ps(s2, t2);
  r[4] = _mm256_add_ps(s2, t2);
  r[5] = _mm256_fnmadd_ps(both, d3, _mm256_add_ps(d1, d5));
}

// a x + b y.
inline WPK_AVX2 __m256 scaled(double a, __m256 x, double b, __m256 y) {
  return _mm256_fmadd_ps(_mm256_set1_ps(static_cast<float>(a)), x, _mm256_mul_ps(_mm256_set1_ps(static_cast<float>(b)), y));
}

// A^T m for one column of 6 sums (at stride `step` vectors), into r[0..3].
inline WPK_AVX2 void output_rows(const __m256* m, int step, __m256* r) {
  const __m256 m0 = m[0], m1 = m[step], m2 = m[2 * step], m3 = m[3 * step], m4 = m[4 * step], m5 = m[5 * step];
  const __m256 p12 = _mm256_add_ps(m1, m2), d12 = _mm256_sub_ps(m1, m2);
  const __m256 p34 = _mm256_add_ps(m3, m4), d34 = _mm256_sub_ps(m3, m4);
  r[0] = _mm256_add_ps(_mm256_add_ps(m0, p12), p34);
  r[1] = scaled(kQ, d12, kP, d34);
  r[2] = scaled(kQ * kQ, p12, kP * kP, p34);
  r[3] = _mm256_add_ps(scaled(kQ * kQ * kQ, d12, kP * kP * kP, d34), m5);
}

struct Job {
  const StreamConvShape& s;
  const float* x;
  const float* u;
  const StreamConvEpilogue& e;
  float* y;
  Tiling tiles;
  std::int64_t blocks;  // 16-channel output blocks
  bool wide;            // AVX-512: transforms 16 lanes wide, products on stream_conv.hpp's tile
  std::atomic<bool>& out_of_memory;  // set by a thread whose scratch could not grow
};

// Where tile `t` starts: its image and its top-left output pixel.
struct TileOrigin {
  std::int64_t n, oy, ox;
};
TileOrigin origin(const Job& job, std::int64_t t) {
  const std::int64_t per_image = job.tiles.rows * job.tiles.cols, r = t % per_image;
  return {t / per_image, r / job.tiles.cols * kOut, r % job.tiles.cols * kOut};
}

// A patch's pixels: each one's channels, or null in the padding.
using Patch = const float* [kAlpha][kAlpha];

// Where a tile's outputs go: its first pixel's channels, and how many of its rows and columns
// lie inside the output.
struct TileOut {
  float* y;
  std::int64_t row_stride, pixel_stride;
  int rows, cols;
};

// The transforms 16 lanes wide, for the form whose products run on the AVX-512 tile (the same
// arithmetic as input_rows and output_rows; the epilogue stays the 8-lane one, on two halves).
#define WPK_AVX512_AVX2 __attribute__((target("avx512f,avx2,fma")))

inline WPK_AVX512_AVX2 __m512 splat(double x) { return _mm512_set1_ps(static_cast<float>(x)); }

inline WPK_AVX512_AVX2 void input_rows16(const __m512* d, int step, __m512* r) {
  const __m512 d0 = d[0], d1 = d[step], d2 = d[2 * step], d3 = d[3 * step], d4 = d[4 * step], d5 = d[5 * step];
  const __m512 both = splat(kP * kP + kQ * kQ);
  r[0] = _mm512_fnmadd_ps(both, d2, _mm512_add_ps(d0, d4));
  const __m512 s1 = _mm512_fnmadd_ps(splat(kP * kP), d2, d4), t1 = _mm512_fnmadd_ps(splat(kQ), d3, _mm512_mul_ps(splat(kP), d1));
  r[1] = _mm512_sub_ps(s1, t1);
  r[2] = _mm512_add_ps(s1, t1);
  const __m512 s2 = _mm512_fnmadd_ps(splat(kQ * kQ), d2, d4), t2 = _mm512_fnmadd_ps(splat(kP), d3, _mm512_mul_ps(splat(kQ), d1));
  r[3] = _mm512_sub_ps(s2, t2);
  r[4] = _mm512_add_ps(s2, t2);
  r[5] = _mm512_fnmadd_ps(both, d3, _mm512_add_ps(d1, d5));
}

inline WPK_AVX512_AVX2 void output_rows16(const __m512* m, int step, __m512* r) {
  const __m512 m0 = m[0], m1 = m[step], m2 = m[2 * step], m3 = m[3 * step], m4 = m[4 * step], m5 = m[5 * step];
  const __m512 p12 = _mm512_add_ps(m1, m2), d12 = _mm512_sub_ps(m1, m2);
  const __m512 p34 = _mm512_add_ps(m3, m4), d34 = _mm512_sub_ps(m3, m4);
  r[0] = _mm512_add_ps(_mm512_add_ps(m0, p12), p34);
  r[1] = _mm512_fmadd_ps(splat(kQ), d12, _mm512_mul_ps(splat(kP), d34));
  r[2] = _mm512_fmadd_ps(splat(kQ * kQ), p12, _mm512_mul_ps(splat(kP * kP), p34));
  r[3] = _mm512_add_ps(_mm512_fmadd_ps(splat(kQ * kQ * kQ), d12, _mm512_mul_ps(splat(kP * kP * kP), d34)), m5);
}

// Half h of a vector. (Masked: GCC 12 warns of the unmasked extract's, and the cast's, pass-through.)
inline WPK_AVX512_AVX2 __m256 half(__m512 v, int h) {
  const __m512d d = _mm512_castps_pd(v);
  return _mm256_castpd_ps(h ? _mm512_mask_extractf64x4_pd(_mm256_setzero_pd(), 0xF, d, 1)
                            : _mm512_mask_extractf64x4_pd(_mm256_setzero_pd(), 0xF, d, 0));
}

// input_patch8 for channels c..c+16.
WPK_AVX512_AVX2 void input_patch16(const Patch& pixel, std::int64_t c, float* out, std::int64_t stride) {
  __m512 d[kAlpha][kAlpha], t[kAlpha][kAlpha];
  for (int i = 0; i < kAlpha; ++i)
    for (int k = 0; k < kAlpha; ++k) d[i][k] = pixel[i][k] ? _mm512_loadu_ps(pixel[i][k] + c) : _mm512_setzero_ps();
  for (int k = 0; k < kAlpha; ++k) {
    __m512 r[kAlpha];
    input_rows16(&d[0][k], kAlpha, r);
    for (int i = 0; i < kAlpha; ++i) t[i][k] = r[i];
  }
  for (int i = 0; i < kAlpha; ++i) {
    __m512 r[kAlpha];
    input_rows16(&t[i][0], 1, r);
    for (int k = 0; k < kAlpha; ++k) _mm512_storeu_ps(out + (i * kAlpha + k) * stride, r[k]);
  }
}

// output_patch8 for 16 whole channels from oc.
WPK_AVX512_AVX2 void output_patch16(const Job& job, const float* sums, std::int64_t stride, const TileOut& to,
                                    std::int64_t oc) {
  const StreamConvEpilogue& e = job.e;
  const __m256 lo = activation_floor(e), hi = _mm256_set1_ps(e.hi);
  const __m256i all = lane_mask(8);
  const __m256i masks[2] = {all, all};
  __m512 p[kAlpha][kAlpha], t[kOut][kAlpha];
  for (int point = 0; point < kPoints; ++point) p[point / kAlpha][point % kAlpha] = _mm512_loadu_ps(sums + point * stride);
  for (int k = 0; k < kAlpha; ++k) {
    __m512 r[kOut];
    output_rows16(&p[0][k], kAlpha, r);
    for (int i = 0; i < kOut; ++i) t[i][k] = r[i];
  }
  const Vecs<2> bias = {e.bias ? _mm256_loadu_ps(e.bias + oc) : _mm256_setzero_ps(),
                        e.bias ? _mm256_loadu_ps(e.bias + oc + 8) : _mm256_setzero_ps()};
  for (int i = 0; i < to.rows; ++i) {
    __m512 r[kOut];
    output_rows16(&t[i][0], 1, r);
    float* row = to.y + i * to.row_stride + oc;
    for (int k = 0; k < to.cols; ++k) {
      const Vecs<2> halves = {half(r[k], 0), half(r[k], 1)};
      store_results<2>(row + k * to.pixel_stride, halves, bias, masks, true, e, lo, hi);
    }
  }
}

// out[point * stride + 0..8) = (B^T d B)[point] of the patch's channels c..c+8.
WPK_AVX2 void input_patch8(const Patch& pixel, std::int64_t c, float* out, std::int64_t stride) {
  __m256 d[kAlpha][kAlpha], t[kAlpha][kAlpha];
  for (int i = 0; i < kAlpha; ++i)
    for (int k = 0; k < kAlpha; ++k) d[i][k] = pixel[i][k] ? _mm256_loadu_ps(pixel[i][k] + c) : _mm256_setzero_ps();
  for (int k = 0; k < kAlpha; ++k) {  // columns: t[.][k] = B^T d[.][k]
    __m256 r[kAlpha];
    input_rows(&d[0][k], kAlpha, r);
    for (int i = 0; i < kAlpha; ++i) t[i][k] = r[i];
  }
  for (int i = 0; i < kAlpha; ++i) {  // rows: (B^T d) B
    __m256 r[kAlpha];
    input_rows(&t[i][0], 1, r);
    for (int k = 0; k < kAlpha; ++k) _mm256_storeu_ps(out + (i * kAlpha + k) * stride, r[k]);
  }
}

// v[(point * count + j) * ic + c] = (B^T d B)[point] of tile first + j's input patch, channel c.
void transform_inputs(const Job& job, std::int64_t first, std::int64_t count, float* v) {
  const StreamConvShape& s = job.s;
  for (std::int64_t j = 0; j < count; ++j) {
    const TileOrigin o = origin(job, first + j);
    Patch pixel;
    for (int i = 0; i < kAlpha; ++i)
      for (int k = 0; k < kAlpha; ++k) {
        const std::int64_t iy = o.oy - s.ph + i, ix = o.ox - s.pw + k;
        pixel[i][k] = iy < 0 || ix < 0 || iy >= s.ih || ix >= s.iw ? nullptr : job.x + ((o.n * s.ih + iy) * s.iw + ix) * s.ic;
      }
    std::int64_t c = 0;
    if (job.wide)
      for (; c + 16 <= s.ic; c += 16) input_patch16(pixel, c, v + j * s.ic + c, count * s.ic);
    for (; c < s.ic; c += 8) input_patch8(pixel, c, v + j * s.ic + c, count * s.ic);
  }
}

// m[(point * count + j) * ldm + o] = sum over c of v[point][j][c] u[point][c][o], for the
// thread's output blocks `blocks` (o from 0 at blocks.begin).
void multiply(const Job& job, Range blocks, std::int64_t count, const float* v, float* m, std::int64_t ldm) {
  const std::int64_t ic = job.s.ic, groups = ceil_div(count, kTile);
  if (job.wide) {  // each point's product as a 1x1 conv of `count` pixels, weights in blocks of 16
    StreamConvShape p;
    p.n = p.ih = p.oh = 1;
    p.iw = p.ow = count;
    p.ic = ic;
    p.oc = ldm;
    for (int point = 0; point < kPoints; ++point)
      stream_conv_on_this_thread(p, v + point * count * ic, job.u + (point * job.blocks + blocks.begin) * ic * kBlock,
                                 kBlock, StreamConvEpilogue{}, m + point * count * ldm);
    return;
  }
  const StreamConvEpilogue none;
  TileArgs args{};
  args.taps = 1;
  args.ic = ic;
  args.cols = kBlock;
  args.ldy = ldm;
  const float* rows[kTile];
  args.a = rows;
  for (int point = 0; point < kPoints; ++point)
    for (std::int64_t b = blocks.begin; b < blocks.end; ++b) {
      args.w = job.u + ((point * job.blocks + b) * ic) * kBlock;
      for (std::int64_t g = 0; g < groups; ++g) {
        const Range r = part(count, groups, g);
        for (std::int64_t j = r.begin; j < r.end; ++j) rows[j - r.begin] = v + (point * count + j) * ic;
        args.y = m + (point * count + r.begin) * ldm + (b - blocks.begin) * kBlock;
        kTiles[r.end - r.begin - 1](args, none);
      }
    }
}

// y = act(A^T p A + bias [+ y]) for output channels oc..oc+lanes (lanes <= 8), p[point] at
// sums + point * stride.
WPK_AVX2 void output_patch8(const Job& job, const float* sums, std::int64_t stride, const TileOut& to, std::int64_t oc,
                            int lanes) {
  const StreamConvEpilogue& e = job.e;
  const __m256 lo = activation_floor(e), hi = _mm256_set1_ps(e.hi);
  const __m256i mask = lane_mask(lanes);
  __m256 p[kAlpha][kAlpha], t[kOut][kAlpha];
  for (int point = 0; point < kPoints; ++point) p[point / kAlpha][point % kAlpha] = _mm256_loadu_ps(sums + point * stride);
  for (int k = 0; k < kAlpha; ++k) {  // columns: t[.][k] = A^T p[.][k]
    __m256 r[kOut];
    output_rows(&p[0][k], kAlpha, r);
    for (int i = 0; i < kOut; ++i) t[i][k] = r[i];
  }
  const __m256 bias = e.bias ? _mm256_maskload_ps(e.bias + oc, mask) : _mm256_setzero_ps();
  for (int i = 0; i < to.rows; ++i) {
    __m256 r[kOut];
    output_rows(&t[i][0], 1, r);
    float* row = to.y + i * to.row_stride + oc;
    for (int k = 0; k < to.cols; ++k) store_result(row + k * to.pixel_stride, r[k], bias, mask, lanes == 8, e, lo, hi);
  }
}

// y = act(A^T m A + bias [+ y]) for tiles first .. first + count, output blocks `blocks`.
void transform_outputs(const Job& job, Range blocks, std::int64_t first, std::int64_t count, const float* m,
                       std::int64_t ldm) {
  const StreamConvShape& s = job.s;
  const std::int64_t oc0 = blocks.begin * kBlock, oc_end = std::min(s.oc, blocks.end * kBlock);
  for (std::int64_t j = 0; j < count; ++j) {
    const TileOrigin o = origin(job, first + j);
    const TileOut to{job.y + ((o.n * s.oh + o.oy) * s.ow + o.ox) * s.oc, s.ow * s.oc, s.oc,
                     static_cast<int>(std::min<std::int64_t>(kOut, s.oh - o.oy)),
                     static_cast<int>(std::min<std::int64_t>(kOut, s.ow - o.ox))};
    const float* sums = m + j * ldm - oc0;  // channel oc's sums at sums + oc
    std::int64_t oc = oc0;
    if (job.wide)
      for (; oc + 16 <= oc_end; oc += 16) output_patch16(job, sums + oc, count * ldm, to, oc);
    for (; oc < oc_end; oc += 8)
      output_patch8(job, sums + oc, count * ldm, to, oc, static_cast<int>(std::min<std::int64_t>(8, oc_end - oc)));
  }
}

// The thread's tiles `tiles` for its output blocks `blocks`, a block of tiles at a time.
void run_part(const Job& job, Range blocks, Range tiles) {
  const std::int64_t ldm = (blocks.end - blocks.begin) * kBlock;
  const std::int64_t per_tile = kPoints * (job.s.ic + ldm);
  std::int64_t block_tiles = std::max<std::int64_t>(kMinBlockTiles, kScratchBytes / 4 / per_tile / kTile * kTile);
  block_tiles = std::min({block_tiles, kMaxBlockTiles, tiles.end - tiles.begin});
  // Grown once per thread and kept: a fresh allocation per call costs page faults each run.
  thread_local std::vector<float> scratch;
  if (scratch.size() < static_cast<std::size_t>(block_tiles * per_tile)) {
    try {
      scratch.resize(static_cast<std::size_t>(block_tiles * per_tile));
    } catch (const std::bad_alloc&) {  // thrown out of the parallel region it would terminate
      job.out_of_memory = true;
      return;
    }
  }
  float* v = scratch.data();
  float* m = v + block_tiles * kPoints * job.s.ic;
  for (std::int64_t first = tiles.begin; first < tiles.end; first += block_tiles) {
    const std::int64_t count = std::min(block_tiles, tiles.end - first);
    transform_inputs(job, first, count, v);
    multiply(job, blocks, count, v, m, ldm);
    transform_outputs(job, blocks, first, count, m, ldm);
  }
}
#endif

}  // namespace

bool avx2_winograd_runs(const StreamConvShape& s) {
  return avx2_kernels_available() && s.kh == 3 && s.kw == 3 && s.sh == 1 && s.sw == 1 && s.dh == 1 && s.dw == 1 &&
         s.ic % 8 == 0 && s.ic >= 8 && s.oc >= 1 && s.n * s.oh * s.ow >= 1;
}

std::int64_t avx2_winograd_tiles(const StreamConvShape& s) { return tiling(s).total; }

std::size_t avx2_winograd_weights_size(const StreamConvShape& s) {
  return static_cast<std::size_t>(kPoints * ceil_div(s.oc, kBlock) * kBlock * s.ic);
}

void avx2_winograd_weights(const StreamConvShape& s, const float* acdb16a, float* u) {
  const std::int64_t blocks = ceil_div(s.oc, kBlock);
  double G[kAlpha][3];
  for (int i = 0; i < kAlpha; ++i)
    for (int k = 0; k < 3; ++k) G[i][k] = g_row(i, k);
// Whole 16-lane rows at a time: each (block, input channel) reads 9 rows of 16 and writes 36
// rows of 16, so the writes land in 36 sequential streams instead of scattered floats. On the
// packing thread alone, as every weight packing (weight_packing.cpp says why).
  for (std::int64_t b = 0; b < blocks; ++b)
    for (std::int64_t c = 0; c < s.ic; ++c) {
      double g[3][3][kBlock], gg[kAlpha][3][kBlock];  // the 3x3 filters, then G g
      for (int i = 0; i < 3; ++i)
        for (int k = 0; k < 3; ++k)
          for (int lane = 0; lane < kBlock; ++lane) g[i][k][lane] = acdb16a[((b * 9 + i * 3 + k) * s.ic + c) * kBlock + lane];
      for (int i = 0; i < kAlpha; ++i)
        for (int k = 0; k < 3; ++k)
          for (int lane = 0; lane < kBlock; ++lane)
            gg[i][k][lane] = G[i][0] * g[0][k][lane] + G[i][1] * g[1][k][lane] + G[i][2] * g[2][k][lane];
      for (int i = 0; i < kAlpha; ++i)
        for (int k = 0; k < kAlpha; ++k) {
          float* out = u + (((i * kAlpha + k) * blocks + b) * s.ic + c) * kBlock;
          for (int lane = 0; lane < kBlock; ++lane)
            out[lane] = static_cast<float>(gg[i][0][lane] * G[k][0] + gg[i][1][lane] * G[k][1] + gg[i][2][lane] * G[k][2]);
        }
    }
}

void avx2_winograd_conv(const StreamConvShape& s, const float* x, const float* u, const StreamConvEpilogue& e, float* y,
                        bool wide) {
#ifdef WPK_AVX2_KERNELS
  std::atomic<bool> out_of_memory{false};
  const Job job{s, x, u, e, y, tiling(s), ceil_div(s.oc, kBlock), wide, out_of_memory};
#pragma omp parallel
  {
    // Tiles over the threads; with too few tiles for that (under 2 blocks of the minimum
    // each), output blocks over them too, so each thread reads only its share of the weights.
    const std::int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    std::int64_t oc_parts = 1;
    while (oc_parts < threads && oc_parts < job.blocks && job.tiles.total * oc_parts < 2 * kTile * threads)
      oc_parts *= 2;
    while (threads % oc_parts != 0) --oc_parts;
    const std::int64_t tile_parts = threads / oc_parts;
    const Range tiles = part(job.tiles.total, tile_parts, t % tile_parts);
    const Range blocks = part(job.blocks, oc_parts, t / tile_parts);
    if (tiles.begin < tiles.end && blocks.begin < blocks.end) run_part(job, blocks, tiles);
  }
  if (out_of_memory) throw std::bad_alloc();
#else
  (void)s, (void)x, (void)u, (void)e, (void)y;
#endif
}

}  // namespace wpk::cpu
