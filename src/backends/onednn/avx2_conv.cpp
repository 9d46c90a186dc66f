#include "backends/onednn/avx2_conv.hpp"

#include <omp.h>

#include <algorithm>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define WPK_AVX2_CONV 1
#define WPK_AVX2 __attribute__((target("avx2,fma")))
#endif

namespace wpk::onednn {
namespace {

constexpr int kTile = 6;    // output pixels per tile: 6 x 2 vectors of sums, 2 of weights, 1 input
constexpr int kBlock = 16;  // output channels per tile (Acdb16a's block)
// Each tap's inner loop runs over the input channels: under 16 (a stem conv's 3) the loop
// overhead dominates and oneDNN's kernel, which loops over the taps inside, wins.
constexpr std::int64_t kMinInputChannels = 16;
constexpr std::int64_t kMaxTaps = 64;
// A thread computes the output-channel blocks of a group of at most this many weight bytes for
// one block of pixels before moving on, so the group's weights stay in L2 (512 KB a core on
// Zen 3) across pixel blocks and a pixel block's input rows across the group's blocks.
constexpr std::int64_t kGroupBytes = 192 << 10;
constexpr std::int64_t kPixelBlock = 96;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// [begin, end) of part `i` of `parts` near-equal parts of `count` items.
struct Range {
  std::int64_t begin, end;
};
Range part(std::int64_t count, std::int64_t parts, std::int64_t i) { return {count * i / parts, count * (i + 1) / parts}; }

// How `threads` threads split the work: output-channel blocks over `oc_parts` of them, pixel
// tiles over the rest. Picks the split whose busiest thread has the least work (within 5%), then
// the one that moves the fewest bytes: each thread reads its blocks' weights once and its pixels'
// input once per channel group it computes.
struct Split {
  std::int64_t oc_parts = 1, pixel_parts = 1;
};

Split choose_split(const StreamConvShape& s, std::int64_t blocks, std::int64_t group, std::int64_t threads) {
  const std::int64_t tiles = ceil_div(s.n * s.oh * s.ow, kTile);
  const double weight_bytes = 4.0 * blocks * kBlock * s.kh * s.kw * s.ic;
  const double input_bytes = 4.0 * s.n * s.ih * s.iw * s.ic;
  struct Candidate {
    Split split;
    std::int64_t busiest;
    double bytes;
  };
  std::vector<Candidate> candidates;
  for (std::int64_t oc_parts = 1; oc_parts <= threads; ++oc_parts) {
    if (threads % oc_parts != 0 || oc_parts > blocks) continue;
    const std::int64_t pixel_parts = threads / oc_parts;
    const std::int64_t busiest = ceil_div(blocks, oc_parts) * ceil_div(tiles, pixel_parts);
    const double groups = static_cast<double>(ceil_div(ceil_div(blocks, oc_parts), group));
    candidates.push_back({{oc_parts, pixel_parts}, busiest, weight_bytes / oc_parts + input_bytes / pixel_parts * groups});
  }
  std::int64_t least = candidates.front().busiest;
  for (const Candidate& c : candidates) least = std::min(least, c.busiest);
  const Candidate* best = nullptr;
  for (const Candidate& c : candidates)
    if (c.busiest * 100 <= least * 105 && (!best || c.bytes < best->bytes)) best = &c;
  return best->split;
}

#ifdef WPK_AVX2_CONV
// Lanes [0, n) of an 8-float vector set (n clamped to 0..8), for masked loads and stores.
WPK_AVX2 __m256i lane_mask(int n) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(std::clamp(n, 0, 8)), lanes);
}

// e^x for x in float range (clamped to [-87.3, 88.3]: no infinities, no denormals): x = n ln 2
// + r with |r| <= ln 2 / 2, e^r by its degree-7 Taylor polynomial (truncation ~5e-9 relative),
// 2^n from the exponent bits.
WPK_AVX2 __m256 exp_ps(__m256 x) {
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
WPK_AVX2 __m256 gelu_ps(__m256 x) {
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
WPK_AVX2 __m256 gelu_tanh_ps(__m256 x) {
  const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
  const __m256 u = _mm256_mul_ps(_mm256_fmadd_ps(x3, _mm256_set1_ps(0.044715f), x), _mm256_set1_ps(0.797884561f));
  const __m256 e = exp_ps(_mm256_mul_ps(u, _mm256_set1_ps(-2.0f)));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
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
  const __m256 lo = _mm256_set1_ps(e.act == StreamConvEpilogue::Act::Clip ? e.lo : 0.0f), hi = _mm256_set1_ps(e.hi);
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) {
    float* out = t.y + r * t.ldy;
    __m256 v0 = _mm256_add_ps(acc[r][0], b0), v1 = _mm256_add_ps(acc[r][1], b1);
    if (e.accumulate) {
      v0 = _mm256_add_ps(v0, full ? _mm256_loadu_ps(out) : _mm256_maskload_ps(out, m0));
      v1 = _mm256_add_ps(v1, full ? _mm256_loadu_ps(out + 8) : _mm256_maskload_ps(out + 8, m1));
    }
    if (e.act == StreamConvEpilogue::Act::Relu || e.act == StreamConvEpilogue::Act::Clip) {
      v0 = _mm256_max_ps(v0, lo);
      v1 = _mm256_max_ps(v1, lo);
    }
    if (e.act == StreamConvEpilogue::Act::Clip) {
      v0 = _mm256_min_ps(v0, hi);
      v1 = _mm256_min_ps(v1, hi);
    }
    if (e.act == StreamConvEpilogue::Act::Gelu) {
      v0 = gelu_ps(v0);
      v1 = gelu_ps(v1);
    }
    if (e.act == StreamConvEpilogue::Act::GeluTanh) {
      v0 = gelu_tanh_ps(v0);
      v1 = gelu_tanh_ps(v1);
    }
    if (full) {
      _mm256_storeu_ps(out, v0);
      _mm256_storeu_ps(out + 8, v1);
    } else {
      _mm256_maskstore_ps(out, m0, v0);
      _mm256_maskstore_ps(out + 8, m1, v1);
    }
  }
}

using TileFn = void (*)(const TileArgs&, const StreamConvEpilogue&);
const TileFn kTiles[kTile] = {&tile<1>, &tile<2>, &tile<3>, &tile<4>, &tile<5>, &tile<6>};

struct Job {
  const StreamConvShape& s;
  const float* x;
  const float* w;
  const StreamConvEpilogue& e;
  float* y;
  const float* zeros;  // s.ic zeros: the input of taps in the padding
  std::int64_t taps, pixels, blocks, group;
};

// table[(m - first) * taps + tap] = where output pixel m's tap reads its input channels.
void fill_table(const Job& job, std::int64_t first, std::int64_t count, const float** table) {
  const StreamConvShape& s = job.s;
  for (std::int64_t m = first; m < first + count; ++m) {
    const std::int64_t ox = m % s.ow, oy = m / s.ow % s.oh, n = m / (s.ow * s.oh);
    const float* image = job.x + n * s.ih * s.iw * s.ic;
    for (std::int64_t fy = 0; fy < s.kh; ++fy)
      for (std::int64_t fx = 0; fx < s.kw; ++fx) {
        const std::int64_t iy = oy * s.sh - s.ph + fy * s.dh, ix = ox * s.sw - s.pw + fx * s.dw;
        *table++ = iy < 0 || ix < 0 || iy >= s.ih || ix >= s.iw ? job.zeros : image + (iy * s.iw + ix) * s.ic;
      }
  }
}

// Output-channel blocks `blocks` for the output pixels `pixels` (whole tiles but at the end).
void run_part(const Job& job, Range blocks, Range pixels, std::vector<const float*>& table) {
  const StreamConvShape& s = job.s;
  const std::int64_t panel = job.taps * s.ic * kBlock;
  TileArgs args{};
  args.zeros = job.zeros;
  args.taps = static_cast<int>(job.taps);
  args.ic = s.ic;
  args.ldy = s.oc;
  const std::int64_t pixel_blocks = ceil_div(pixels.end - pixels.begin, kPixelBlock);
  for (std::int64_t g0 = blocks.begin; g0 < blocks.end; g0 += job.group) {
    const std::int64_t g1 = std::min(blocks.end, g0 + job.group);
    for (std::int64_t pb = 0; pb < pixel_blocks; ++pb) {
      const Range px = part(pixels.end - pixels.begin, pixel_blocks, pb);
      const std::int64_t first = pixels.begin + px.begin, count = px.end - px.begin;
      fill_table(job, first, count, table.data());
      // Tiles of near-equal size, at most kTile pixels each.
      const std::int64_t tiles = ceil_div(count, kTile);
      for (std::int64_t b = g0; b < g1; ++b) {
        args.w = job.w + b * panel;
        args.bias = job.e.bias ? job.e.bias + b * kBlock : nullptr;
        args.cols = static_cast<int>(std::min<std::int64_t>(kBlock, s.oc - b * kBlock));
        for (std::int64_t i = 0; i < tiles; ++i) {
          const Range r = part(count, tiles, i);
          args.a = table.data() + r.begin * job.taps;
          args.y = job.y + (first + r.begin) * s.oc + b * kBlock;
          kTiles[r.end - r.begin - 1](args, job.e);
        }
      }
    }
  }
}
#endif

}  // namespace

bool avx2_conv_available() {
#ifdef WPK_AVX2_CONV
  static const bool available =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && !__builtin_cpu_supports("avx512f");
  return available;
#else
  return false;
#endif
}

bool avx2_conv_pays(const StreamConvShape& s) {
  return avx2_conv_available() && s.ic >= kMinInputChannels && s.kh * s.kw <= kMaxTaps && s.n * s.oh * s.ow >= 1;
}

void avx2_conv(const StreamConvShape& s, const float* x, const float* w, const StreamConvEpilogue& e, float* y) {
#ifdef WPK_AVX2_CONV
  const std::vector<float> zeros(static_cast<std::size_t>(s.ic), 0.0f);
  const std::int64_t taps = s.kh * s.kw, blocks = ceil_div(s.oc, kBlock);
  const std::int64_t group = std::max<std::int64_t>(1, kGroupBytes / (4 * taps * s.ic * kBlock));
  const Job job{s, x, w, e, y, zeros.data(), taps, s.n * s.oh * s.ow, blocks, group};
#pragma omp parallel
  {
    const std::int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const Split split = choose_split(s, blocks, group, threads);
    std::vector<const float*> table(static_cast<std::size_t>(kPixelBlock * taps));
    const std::int64_t tiles = ceil_div(job.pixels, kTile);
    const Range tile_range = part(tiles, split.pixel_parts, t % split.pixel_parts);
    const Range pixels{tile_range.begin * kTile, std::min(job.pixels, tile_range.end * kTile)};
    const Range block_range = part(blocks, split.oc_parts, t / split.pixel_parts);
    if (t < split.oc_parts * split.pixel_parts && pixels.begin < pixels.end) run_part(job, block_range, pixels, table);
  }
#else
  (void)s, (void)x, (void)w, (void)e, (void)y;
#endif
}

}  // namespace wpk::onednn
