#pragma once
// wpk's exact 8-bit convolution on AVX2, for the quantized convs and products where the CPU has no
// 8-bit dot product instruction (no AVX-512 VNNI or AVX-VNNI). There oneDNN's integer kernels add
// pairs of uint8 x int8 products in 16 bits (vpmaddubsw), which saturates. This kernel computes
// the reference's integer sums exactly, in one of three arithmetics (the search's choice: which
// is faster depends on how many ports the CPU gives integer multiplies and FMAs):
//   Int8     vpmaddubsw itself, kept from saturating: it multiplies each code's low 7 bits
//            (|c0 w0 + c1 w1| <= 2 x 127 x 128 < 2^15), the pairs' sums added into int32 by
//            vpmaddwd; the codes of 128 and more (a few in a hundred in a ReLU's output) add
//            128 x their weight row afterwards, listed per pixel while the input is split. Signed
//            codes are moved to unsigned (+128) with their zero point, and the zero point is
//            subtracted once per output from the weights' sums over the taps that read the image.
//            32 multiply-adds per vpmaddubsw + vpmaddwd + add, and half the weight bytes of Int16;
//   Int16    the codes less their zero point widened to int16, pairs of products summed by
//            vpmaddwd into int32 (16 multiply-adds an instruction; never saturates);
//   Float32  the codes less their zero point as float32, summed by FMAs (8 an instruction), the
//            float sums turned into int32 every 512 products: each partial sum then stays below
//            2^24 (512 x 255 x 128), where float32 holds every integer.
//
// The register tile is avx2_conv.hpp's: 6 output pixels x 16 output channels, NHWC input read
// through a table of tap pointers, weights packed per block of 16 output channels. The int32 sums
// plus the bias go to a Q8ConvEpilogue a tile at a time, which turns them into what the op stores
// (float32 values, or requantized codes: q8_conv_epilogues.hpp).
#include <cstdint>
#include <vector>

#include "backends/cpu/avx2_conv.hpp"
#include "backends/cpu/stream_conv.hpp"

namespace wpk::cpu {

enum class Q8Arithmetic { Int16, Float32, Int8 };

// What a kernel does with a tile's integer sums: `sums` holds rows x 16 int32 (row r's channel j
// at sums[16 r + j]), for output pixels [pixel, pixel + rows) and channels [channel, channel +
// cols). Called from the kernel's threads, each on its own tiles; must not throw.
class Q8ConvEpilogue {
 public:
  virtual ~Q8ConvEpilogue() = default;
  virtual void finish(const std::int32_t* sums, int rows, std::int64_t pixel, std::int64_t channel, int cols) const = 0;
};

// The 8-bit input: NHWC codes of uint8 or int8 and their zero point.
struct Q8ConvInput {
  const void* codes = nullptr;
  bool is_signed = false;
  std::int32_t zero = 0;
};

// Int8 weights packed for one arithmetic: Int16 [oc / 16][taps][ic / 2][16][2] int16, Float32
// [oc / 16][taps][ic][16] float32, Int8 [oc / 16][taps][ic / 4][16][4] int8 with, for the high
// codes, rows [oc / 16][taps][ic][16] int8 and sums over the channels [oc / 16][taps][16] int32;
// zero-padded.
struct Q8Weights {
  Q8Arithmetic arithmetic = Q8Arithmetic::Int16;
  std::vector<std::int16_t> int16;
  std::vector<float> float32;
  std::vector<std::int8_t> int8, int8_rows;
  std::vector<std::int32_t> tap_sums;
};

// Weights w(o, i, tap) (int8 values; o < oc, i < ic, tap < taps) packed for `arithmetic`.
template <typename Weight>
Q8Weights pack_q8_weights(Q8Arithmetic arithmetic, std::int64_t oc, std::int64_t ic, std::int64_t taps, Weight&& w) {
  Q8Weights out;
  out.arithmetic = arithmetic;
  const std::int64_t blocks = (oc + 15) / 16;
  if (arithmetic == Q8Arithmetic::Int16) {
    const std::int64_t pairs = (ic + 1) / 2;
    out.int16.assign(static_cast<std::size_t>(blocks * taps * pairs * 32), 0);
    for (std::int64_t o = 0; o < oc; ++o)
      for (std::int64_t tap = 0; tap < taps; ++tap)
        for (std::int64_t i = 0; i < ic; ++i)
          out.int16[static_cast<std::size_t>((((o / 16) * taps + tap) * pairs + i / 2) * 32 + (o % 16) * 2 + i % 2)] =
              static_cast<std::int16_t>(w(o, i, tap));
  } else if (arithmetic == Q8Arithmetic::Int8) {
    const std::int64_t quads = (ic + 3) / 4;
    out.int8.assign(static_cast<std::size_t>(blocks * taps * quads * 64), 0);
    out.int8_rows.assign(static_cast<std::size_t>(blocks * taps * ic * 16), 0);
    out.tap_sums.assign(static_cast<std::size_t>(blocks * taps * 16), 0);
    for (std::int64_t o = 0; o < oc; ++o)
      for (std::int64_t tap = 0; tap < taps; ++tap)
        for (std::int64_t i = 0; i < ic; ++i) {
          const auto v = static_cast<std::int8_t>(w(o, i, tap));
          const std::int64_t block_tap = (o / 16) * taps + tap;
          out.int8[static_cast<std::size_t>((block_tap * quads + i / 4) * 64 + (o % 16) * 4 + i % 4)] = v;
          out.int8_rows[static_cast<std::size_t>((block_tap * ic + i) * 16 + o % 16)] = v;
          out.tap_sums[static_cast<std::size_t>(block_tap * 16 + o % 16)] += v;
        }
  } else {
    out.float32.assign(static_cast<std::size_t>(blocks * taps * ic * 16), 0.0f);
    for (std::int64_t o = 0; o < oc; ++o)
      for (std::int64_t tap = 0; tap < taps; ++tap)
        for (std::int64_t i = 0; i < ic; ++i)
          out.float32[static_cast<std::size_t>((((o / 16) * taps + tap) * ic + i) * 16 + o % 16)] =
              static_cast<float>(w(o, i, tap));
  }
  return out;
}

// True when this build and CPU run the kernel (AVX2 and FMA) on this shape: at most 64 taps, and
// sums of at most kh * kw * ic products of |code - zero| <= 255 and |weight| <= 128 plus the
// largest |bias| within int32.
bool avx2_q8_conv_runs(const StreamConvShape& s, std::int64_t largest_bias);

// e.finish(conv(x - zero, w) + bias) over every tile, in an OpenMP parallel region of the calling
// thread's thread count; bias int32 [oc] or null.
void avx2_q8_conv(const StreamConvShape& s, const Q8ConvInput& x, const Q8Weights& w, const std::int32_t* bias,
                  const Q8ConvEpilogue& e, const Avx2ConvTiling& tiling = {});

}  // namespace wpk::cpu
