#include "backends/cpu/avx2_q8_conv.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cpu/avx2_tile.hpp"
#include "backends/cpu/conv_walk.hpp"

namespace wpk::cpu {
namespace {

using namespace avx2;  // tile sizes and work-split helpers
constexpr std::int64_t kMaxTaps = 64;

#ifdef WPK_AVX2_KERNELS

// 16 codes at p less the zero point z, as int16.
template <typename Code>
WPK_AVX2_INLINE __m256i widen16(const Code* p, __m256i z) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_sub_epi16(std::is_signed_v<Code> ? _mm256_cvtepi8_epi16(bytes) : _mm256_cvtepu8_epi16(bytes), z);
}

// 8 codes at p less the zero point z, as float32.
template <typename Code>
WPK_AVX2_INLINE __m256 widen8(const Code* p, __m256 z) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  return _mm256_sub_ps(_mm256_cvtepi32_ps(std::is_signed_v<Code> ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes)), z);
}

template <typename Code>
WPK_AVX2 void widen_run(const Code* p, std::int64_t n, std::int32_t zero, std::int16_t* o) {
  const __m256i z = _mm256_set1_epi16(static_cast<std::int16_t>(zero));
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + i), widen16(p + i, z));
  for (; i < n; ++i) o[i] = static_cast<std::int16_t>(p[i] - zero);
}

template <typename Code>
WPK_AVX2 void widen_run(const Code* p, std::int64_t n, std::int32_t zero, float* o) {
  const __m256 z = _mm256_set1_ps(static_cast<float>(zero));
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, widen8(p + i, z));
  for (; i < n; ++i) o[i] = static_cast<float>(p[i] - zero);
}

// The codes of pixels [first, first + count) less their zero point, `ldc` elements a pixel (the
// channels, then zeros).
template <typename Code, typename T>
void widen_pixels(const Code* x, std::int64_t ic, std::int64_t ldc, std::int32_t zero, std::int64_t first,
                  std::int64_t count, T* out) {
  if (ldc == ic) {  // one contiguous run
    widen_run(x + first * ic, count * ic, zero, out + first * ic);
    return;
  }
  for (std::int64_t m = first; m < first + count; ++m) {
    widen_run(x + m * ic, ic, zero, out + m * ldc);
    std::fill(out + m * ldc + ic, out + (m + 1) * ldc, T(0));
  }
}

// The input as the Int8 arithmetic reads it: each pixel's codes, moved to unsigned, less their
// top bit (`ldc` bytes a pixel: the channels, then zeros), and the channels whose code had it.
struct SplitInput {
  std::uint8_t* low = nullptr;
  std::int64_t ldc = 0, ic = 0;
  std::int32_t* high_count = nullptr;  // [pixel]
  std::int32_t* high = nullptr;        // [pixel][ic], the first high_count[pixel] used
};

template <typename Code>
WPK_AVX2 void split_pixels(const Code* x, const SplitInput& in, std::int64_t first, std::int64_t count) {
  constexpr std::uint8_t kFlip = std::is_signed_v<Code> ? 0x80 : 0;  // int8 + 128 as uint8
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(kFlip)), low7 = _mm256_set1_epi8(0x7f);
  for (std::int64_t m = first; m < first + count; ++m) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(x + m * in.ic);
    std::uint8_t* o = in.low + m * in.ldc;
    std::int32_t* high = in.high + m * in.ic;
    std::int32_t n = 0;
    std::int64_t i = 0;
    for (; i + 32 <= in.ic; i += 32) {
      const __m256i v = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)), flip);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + i), _mm256_and_si256(v, low7));
      for (auto bits = static_cast<std::uint32_t>(_mm256_movemask_epi8(v)); bits != 0; bits &= bits - 1)
        high[n++] = static_cast<std::int32_t>(i + __builtin_ctz(bits));
    }
    for (; i < in.ic; ++i) {
      const auto c = static_cast<std::uint8_t>(p[i] ^ kFlip);
      o[i] = c & 0x7f;
      if (c & 0x80) high[n++] = static_cast<std::int32_t>(i);
    }
    std::fill(o + in.ic, o + in.ldc, std::uint8_t{0});
    in.high_count[m] = n;
  }
}

template <typename T>
struct TileArgs {
  const T* const* a;  // [MR][taps]: pixel r's input for tap t, or `zeros` in the padding
  const T* zeros;
  int taps;
  std::int64_t steps;        // channel steps a tap: pairs (Int16), channels (Float32), quads (Int8)
  const T* w;                // the block's weights: [taps][steps][16 x elements a step]
  const std::int32_t* bias;  // the block's first channel, or null
  int cols;                  // valid output channels of the block
  // Int8 only: the block's weight rows and sums over channels, the split input, its zero point.
  const std::int8_t* rows;
  const std::int32_t* tap_sums;
  const SplitInput* split;
  std::int32_t zero;
};

// sums (MR x 16, holding int32 sums so far) plus the tile's int32 sums acc.
template <int MR>
WPK_AVX2_INLINE void add_sums(const __m256i (&acc)[MR][2], std::int32_t* sums) {
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < 2; ++j) {
      __m256i* p = reinterpret_cast<__m256i*>(sums + 16 * r + 8 * j);
      _mm256_storeu_si256(p, _mm256_add_epi32(_mm256_loadu_si256(p), acc[r][j]));
    }
}

// sums = 0, then the bias of the block's channels on every row.
template <int MR>
WPK_AVX2_INLINE void start_sums(const std::int32_t* bias, int cols, std::int32_t* sums) {
  __m256i b[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  if (bias) {
    b[0] = _mm256_maskload_epi32(bias, lane_mask(cols));
    b[1] = _mm256_maskload_epi32(bias + 8, lane_mask(cols - 8));
  }
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(sums + 16 * r), b[0]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(sums + 16 * r + 8), b[1]);
  }
}

// Int16: MR output pixels x 16 output channels, all taps and channel pairs, plus the bias.
template <int MR>
WPK_AVX2 void int16_tile(const TileArgs<std::int16_t>& t, std::int32_t* sums) {
  __m256i acc[MR][2];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (int tap = 0; tap < t.taps; ++tap) {
    const std::int16_t* p[MR];
    if (!gather_tap<MR>(t.a, t.taps, tap, t.zeros, p)) continue;  // the whole tile reads padding here
    const std::int16_t* w = t.w + tap * t.steps * 32;
    for (std::int64_t i = 0; i < t.steps; ++i, w += 32) {
      const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
      const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 16));
#pragma GCC unroll 6
      for (int r = 0; r < MR; ++r) {
        // One statement per row: left to itself the compiler broadcasts every row's pair first,
        // needs more than 16 registers and keeps sums on the stack, which halves the speed.
        __m256i v, product;
        __asm__("vpbroadcastd %[pair], %[v]\n\t"
                "vpmaddwd %[w0], %[v], %[product]\n\t"
                "vpaddd %[product], %[acc0], %[acc0]\n\t"
                "vpmaddwd %[w1], %[v], %[v]\n\t"
                "vpaddd %[v], %[acc1], %[acc1]"
                : [acc0] "+x"(acc[r][0]), [acc1] "+x"(acc[r][1]), [v] "=&x"(v), [product] "=&x"(product)
                : [pair] "m"(*reinterpret_cast<const std::int32_t*>(p[r] + 2 * i)), [w0] "x"(w0), [w1] "x"(w1));
      }
    }
  }
  start_sums<MR>(t.bias, t.cols, sums);
  add_sums<MR>(acc, sums);
}

alignas(32) constexpr std::int16_t kOnes[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

// Int8's corrections to a tile's sums: 128 x the weight row of every high code the tile's taps
// read, less the zero point times the weights' sums over the taps that read the image. Not
// inlined: in the tile's function its loops made the compiler keep the tile's sums on the stack.
template <int MR>
__attribute__((noinline)) WPK_AVX2 void correct_int8_sums(const TileArgs<std::uint8_t>& t, std::int32_t* sums) {
  const SplitInput& in = *t.split;
  __m256i total[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  if (t.zero != 0)
    for (int tap = 0; tap < t.taps; ++tap)
      for (int j = 0; j < 2; ++j)
        total[j] = _mm256_add_epi32(total[j], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.tap_sums + tap * 16 + 8 * j)));
  const __m256i zero = _mm256_set1_epi32(t.zero);
  for (int r = 0; r < MR; ++r) {
    __m256i high[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    __m256i image[2] = {total[0], total[1]};  // the weights' sums over the taps inside the image
    for (int tap = 0; tap < t.taps; ++tap) {
      const std::uint8_t* p = t.a[r * t.taps + tap];
      if (p == t.zeros) {
        if (t.zero != 0)
          for (int j = 0; j < 2; ++j)
            image[j] = _mm256_sub_epi32(image[j], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.tap_sums + tap * 16 + 8 * j)));
        continue;
      }
      const std::int64_t pixel = (p - in.low) / in.ldc;
      const std::int32_t* listed = in.high + pixel * in.ic;
      const std::int8_t* rows = t.rows + static_cast<std::int64_t>(tap) * in.ic * 16;
      // The rows summed in int16 (256 weights of at most 128 fit), moved into the int32 sums
      // times 128 every 256 rows and at the end: two instructions a high code.
      for (std::int32_t k = 0, n = in.high_count[pixel]; k < n;) {
        __m256i rows16 = _mm256_setzero_si256();
        for (const std::int32_t end = std::min(n, k + 256); k < end; ++k)
          rows16 = _mm256_add_epi16(
              rows16, _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows + listed[k] * 16))));
        high[0] = _mm256_add_epi32(high[0], _mm256_slli_epi32(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(rows16)), 7));
        high[1] = _mm256_add_epi32(high[1], _mm256_slli_epi32(_mm256_cvtepi16_epi32(_mm256_extracti128_si256(rows16, 1)), 7));
      }
    }
    for (int j = 0; j < 2; ++j) {
      __m256i* q = reinterpret_cast<__m256i*>(sums + 16 * r + 8 * j);
      // Wrapping int32 adds: the exact sum is in range, whatever the order of its terms.
      const __m256i correction = _mm256_sub_epi32(high[j], _mm256_mullo_epi32(zero, image[j]));
      _mm256_storeu_si256(q, _mm256_add_epi32(_mm256_loadu_si256(q), correction));
    }
  }
}

// Int8: MR output pixels x 16 output channels, all taps and channel quads, plus the bias.
template <int MR>
WPK_AVX2 void int8_tile(const TileArgs<std::uint8_t>& t, std::int32_t* sums) {
  __m256i acc[MR][2];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (int tap = 0; tap < t.taps; ++tap) {
    const std::uint8_t* p[MR];
    if (!gather_tap<MR>(t.a, t.taps, tap, t.zeros, p)) continue;  // the whole tile reads padding here
    const std::uint8_t* w = t.w + tap * t.steps * 64;
    for (std::int64_t i = 0; i < t.steps; ++i, w += 64) {
      const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
      const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 32));
#pragma GCC unroll 6
      for (int r = 0; r < MR; ++r) {
        // As int16_tile: one statement a row keeps the sums in registers. The low codes are the
        // unsigned operand, the weights the signed one.
        __m256i v, product;
        __asm__("vpbroadcastd %[quad], %[v]\n\t"
                "vpmaddubsw %[w0], %[v], %[product]\n\t"
                "vpmaddwd %[ones], %[product], %[product]\n\t"
                "vpaddd %[product], %[acc0], %[acc0]\n\t"
                "vpmaddubsw %[w1], %[v], %[v]\n\t"
                "vpmaddwd %[ones], %[v], %[v]\n\t"
                "vpaddd %[v], %[acc1], %[acc1]"
                : [acc0] "+x"(acc[r][0]), [acc1] "+x"(acc[r][1]), [v] "=&x"(v), [product] "=&x"(product)
                : [quad] "m"(*reinterpret_cast<const std::int32_t*>(p[r] + 4 * i)), [w0] "x"(w0), [w1] "x"(w1),
                  [ones] "m"(*reinterpret_cast<const __m256i*>(kOnes)));
      }
    }
  }
  start_sums<MR>(t.bias, t.cols, sums);
  add_sums<MR>(acc, sums);
  correct_int8_sums<MR>(t, sums);
}

// Products summed in float32 between conversions to int32: 512 x 255 x 128 < 2^24.
constexpr std::int64_t kExactFloatProducts = 512;

template <int MR>
WPK_AVX2_INLINE void flush_float_sums(__m256 (&acc)[MR][2], std::int32_t* sums) {
  __m256i ints[MR][2];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < 2; ++j) {
      ints[r][j] = _mm256_cvtps_epi32(acc[r][j]);  // an integer below 2^24: exact
      acc[r][j] = _mm256_setzero_ps();
    }
  add_sums<MR>(ints, sums);
}

// Float32: the same, by FMAs, the float sums moved into the int32 ones every 512 products.
template <int MR>
WPK_AVX2 void float_tile(const TileArgs<float>& t, std::int32_t* sums) {
  start_sums<MR>(t.bias, t.cols, sums);
  __m256 acc[MR][2];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  std::int64_t summed = 0;  // products in acc per lane
  for (int tap = 0; tap < t.taps; ++tap) {
    const float* p[MR];
    if (!gather_tap<MR>(t.a, t.taps, tap, t.zeros, p)) continue;  // the whole tile reads padding here
    const float* w = t.w + tap * t.steps * kBlock;
    for (std::int64_t i = 0; i < t.steps;) {
      const std::int64_t end = std::min(t.steps, i + (kExactFloatProducts - summed));
      summed += end - i;
#pragma GCC unroll 2
      for (; i < end; ++i, w += kBlock) tile_step<MR>(acc, p, w, i);
      if (summed == kExactFloatProducts) {
        flush_float_sums<MR>(acc, sums);
        summed = 0;
      }
    }
  }
  flush_float_sums<MR>(acc, sums);
}

template <typename T>
using TileFn = void (*)(const TileArgs<T>&, std::int32_t*);
const TileFn<std::int16_t> kInt16Tiles[kTile] = {&int16_tile<1>, &int16_tile<2>, &int16_tile<3>,
                                                 &int16_tile<4>, &int16_tile<5>, &int16_tile<6>};
const TileFn<float> kFloatTiles[kTile] = {&float_tile<1>, &float_tile<2>, &float_tile<3>,
                                          &float_tile<4>, &float_tile<5>, &float_tile<6>};
const TileFn<std::uint8_t> kInt8Tiles[kTile] = {&int8_tile<1>, &int8_tile<2>, &int8_tile<3>,
                                                &int8_tile<4>, &int8_tile<5>, &int8_tile<6>};

template <typename T>
struct Job {
  const StreamConvShape& s;
  const T* x;  // widened input, `ldc` per pixel
  std::int64_t ldc, steps, step_elements;
  const T* w;
  const std::int32_t* bias;
  const Q8ConvEpilogue& e;
  const T* zeros;
  const TileFn<T>* tiles;
  std::int64_t taps, pixels, group, pixel_block;
  // Int8 only: weight rows and sums over channels (Q8Weights), the split input, its zero point.
  const std::int8_t* rows;
  const std::int32_t* tap_sums;
  const SplitInput* split;
  std::int32_t zero;
};

// Output-channel blocks `blocks` for the output pixels `pixels`: for each group of blocks, its
// pixel blocks, each block's tiles.
template <typename T>
void run_part(const Job<T>& job, Range blocks, Range pixels, std::vector<const T*>& table) {
  const StreamConvShape& s = job.s;
  const std::int64_t panel = job.taps * job.steps * job.step_elements;
  TileArgs<T> args{};
  args.zeros = job.zeros;
  args.taps = static_cast<int>(job.taps);
  args.steps = job.steps;
  args.split = job.split;
  args.zero = job.zero;
  alignas(32) std::int32_t sums[kTile * kBlock];
  const std::int64_t pixel_blocks = ceil_div(pixels.end - pixels.begin, job.pixel_block);
  for (std::int64_t g0 = blocks.begin; g0 < blocks.end; g0 += job.group) {
    const std::int64_t g1 = std::min(blocks.end, g0 + job.group);
    for (std::int64_t pb = 0; pb < pixel_blocks; ++pb) {
      const Range px = part(pixels.end - pixels.begin, pixel_blocks, pb);
      const std::int64_t first = pixels.begin + px.begin, count = px.end - px.begin;
      fill_tap_table(s, job.x, job.ldc, job.zeros, first, count, table.data());
      const std::int64_t tiles = ceil_div(count, kTile);
      for (std::int64_t b = g0; b < g1; ++b) {
        args.w = job.w + b * panel;
        if (job.rows) {
          args.rows = job.rows + b * job.taps * s.ic * kBlock;
          args.tap_sums = job.tap_sums + b * job.taps * kBlock;
        }
        args.bias = job.bias ? job.bias + b * kBlock : nullptr;
        args.cols = static_cast<int>(std::min<std::int64_t>(kBlock, s.oc - b * kBlock));
        for (std::int64_t i = 0; i < tiles; ++i) {
          const Range r = part(count, tiles, i);
          const int rows = static_cast<int>(r.end - r.begin);
          args.a = table.data() + r.begin * job.taps;
          job.tiles[rows - 1](args, sums);
          job.e.finish(sums, rows, first + r.begin, b * kBlock, args.cols);
        }
      }
    }
  }
}

// What Int8 adds to a conv's description: its weights' extra parts and its input's zero point.
struct Int8Parts {
  const std::int8_t* rows = nullptr;
  const std::int32_t* tap_sums = nullptr;
  std::int32_t zero = 0;  // of the codes moved to unsigned
};

// The whole conv in element type T: the input widened (split, for Int8) by all threads, then the
// tiles.
template <typename T>
void run_conv(const StreamConvShape& s, const Q8ConvInput& x, const T* w, std::int64_t ldc, std::int64_t steps,
              std::int64_t step_elements, const TileFn<T>* tile_fns, const std::int32_t* bias, const Q8ConvEpilogue& e,
              const Avx2ConvTiling& tiling, const Int8Parts& int8 = {}) {
  constexpr bool kSplit = std::is_same_v<T, std::uint8_t>;
  const std::int64_t taps = s.kh * s.kw, blocks = ceil_div(s.oc, kBlock), in_pixels = s.n * s.ih * s.iw;
  // The calling thread's: a run's widened input lives as long as the call, and the next call
  // reuses the bytes instead of mapping fresh pages.
  thread_local std::vector<T> widened;
  thread_local std::vector<std::int32_t> high_counts, highs;
  // Grown, never shrunk: every element a run reads it writes first, and resizing up again after
  // a smaller conv would zero the difference at every run.
  const auto grow = [](auto& v, std::int64_t n) {
    if (v.size() < static_cast<std::size_t>(n)) v.resize(static_cast<std::size_t>(n));
  };
  grow(widened, in_pixels * ldc);
  SplitInput split;
  if constexpr (kSplit) {
    grow(high_counts, in_pixels);
    grow(highs, in_pixels * s.ic);
    split = {widened.data(), ldc, s.ic, high_counts.data(), highs.data()};
  }
  const std::vector<T> zeros(static_cast<std::size_t>(ldc), T(0));
  const std::int64_t group = std::max<std::int64_t>(1, tiling.group_bytes / (static_cast<std::int64_t>(sizeof(T)) * taps * ldc * kBlock));
  const std::int64_t pixel_block = std::max<std::int64_t>(kTile, tiling.pixel_block);
  const Job<T> job{s, widened.data(), ldc, steps, step_elements, w, bias, e, zeros.data(), tile_fns,
                   taps, s.n * s.oh * s.ow, group, pixel_block, int8.rows, int8.tap_sums, &split, int8.zero};
  // Per thread, allocated here where std::bad_alloc reaches the caller.
  const std::int64_t max_threads = omp_get_max_threads();
  std::vector<std::vector<const T*>> tables(static_cast<std::size_t>(max_threads),
                                            std::vector<const T*>(static_cast<std::size_t>(pixel_block * taps)));
  T* out = widened.data();
#pragma omp parallel num_threads(max_threads)
  {
    const std::int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const Range mine = part(in_pixels, threads, t);
    if constexpr (kSplit) {
      if (x.is_signed)
        split_pixels(static_cast<const std::int8_t*>(x.codes), split, mine.begin, mine.end - mine.begin);
      else
        split_pixels(static_cast<const std::uint8_t*>(x.codes), split, mine.begin, mine.end - mine.begin);
    } else if (x.is_signed) {
      widen_pixels(static_cast<const std::int8_t*>(x.codes), s.ic, ldc, x.zero, mine.begin, mine.end - mine.begin, out);
    } else {
      widen_pixels(static_cast<const std::uint8_t*>(x.codes), s.ic, ldc, x.zero, mine.begin, mine.end - mine.begin, out);
    }
#pragma omp barrier
    const std::int64_t tiles = ceil_div(job.pixels, kTile);
    const ConvSplit split_work = choose_conv_split(s, tiles, blocks, kBlock, group, threads, static_cast<double>(sizeof(T)));
    const Range tile_range = part(tiles, split_work.pixel_parts, t % split_work.pixel_parts);
    const Range pixels{tile_range.begin * kTile, std::min(job.pixels, tile_range.end * kTile)};
    const Range block_range = part(blocks, split_work.oc_parts, t / split_work.pixel_parts);
    if (t < split_work.oc_parts * split_work.pixel_parts && pixels.begin < pixels.end)
      run_part(job, block_range, pixels, tables[static_cast<std::size_t>(t)]);
  }
}
#endif

}  // namespace

bool avx2_q8_conv_runs(const StreamConvShape& s, std::int64_t largest_bias) {
  if (!avx2_kernels_available() || s.ic < 1 || s.oc < 1 || s.kh * s.kw > kMaxTaps || s.n * s.oh * s.ow < 1) return false;
  const double largest_sum = 255.0 * 128.0 * static_cast<double>(s.kh * s.kw * ((s.ic + 1) / 2 * 2)) +
                             std::abs(static_cast<double>(largest_bias));
  return largest_sum <= static_cast<double>(std::numeric_limits<std::int32_t>::max());
}

void avx2_q8_conv(const StreamConvShape& s, const Q8ConvInput& x, const Q8Weights& w, const std::int32_t* bias,
                  const Q8ConvEpilogue& e, const Avx2ConvTiling& tiling) {
#ifdef WPK_AVX2_KERNELS
  if (w.arithmetic == Q8Arithmetic::Int16) {
    const std::int64_t ldc = (s.ic + 1) / 2 * 2;
    run_conv(s, x, w.int16.data(), ldc, ldc / 2, 32, kInt16Tiles, bias, e, tiling);
  } else if (w.arithmetic == Q8Arithmetic::Int8) {
    const std::int64_t ldc = (s.ic + 3) / 4 * 4;
    const Int8Parts parts{w.int8_rows.data(), w.tap_sums.data(), x.is_signed ? x.zero + 128 : x.zero};
    run_conv(s, x, reinterpret_cast<const std::uint8_t*>(w.int8.data()), ldc, ldc / 4, 64, kInt8Tiles, bias, e,
             tiling, parts);
  } else {
    run_conv(s, x, w.float32.data(), s.ic, s.ic, kBlock, kFloatTiles, bias, e, tiling);
  }
#else
  (void)s, (void)x, (void)w, (void)bias, (void)e, (void)tiling;
#endif
}

}  // namespace wpk::cpu
