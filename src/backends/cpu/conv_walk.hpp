#pragma once
// How wpk's AVX2 direct convolutions (avx2_conv.cpp over float32, avx2_q8_conv.cpp over 8-bit
// codes) walk their work: which threads take which output-channel blocks and pixels, and
// where each output pixel's taps read their input channels.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/cpu/stream_conv.hpp"

namespace wpk::cpu {

// A product [rows, k] x [k, n] as the 1x1 convolution of `rows` pixels the conv kernels compute.
inline StreamConvShape pointwise_conv_shape(std::int64_t rows, std::int64_t k, std::int64_t n) {
  StreamConvShape s;
  s.n = s.ih = s.oh = 1;
  s.iw = s.ow = rows;
  s.ic = k;
  s.oc = n;
  return s;
}

// How `threads` threads split the work: output-channel blocks over `oc_parts` of them, pixel
// tiles over the rest.
struct ConvSplit {
  std::int64_t oc_parts = 1, pixel_parts = 1;
};

// The split whose busiest thread has the least work (within 5%), then the one that moves the
// fewest bytes: each thread reads its blocks' weights once and its pixels' input once per channel
// group it computes. `tiles`: pixel tiles; `bytes`: bytes an input or weight element takes.
inline ConvSplit choose_conv_split(const StreamConvShape& s, std::int64_t tiles, std::int64_t blocks, std::int64_t block,
                                   std::int64_t group, std::int64_t threads, double bytes) {
  const auto ceil_div = [](std::int64_t a, std::int64_t b) { return (a + b - 1) / b; };
  const double weight_bytes = bytes * static_cast<double>(blocks * block * s.kh * s.kw * s.ic);
  const double input_bytes = bytes * static_cast<double>(s.n * s.ih * s.iw * s.ic);
  // Two passes over the splits (no list: this runs at every call of a product, however small).
  const auto each_split = [&](auto&& visit) {
    for (std::int64_t oc_parts = 1; oc_parts <= threads; ++oc_parts) {
      if (threads % oc_parts != 0 || oc_parts > blocks) continue;
      const std::int64_t pixel_parts = threads / oc_parts;
      const std::int64_t busiest = ceil_div(blocks, oc_parts) * ceil_div(tiles, pixel_parts);
      const double groups = static_cast<double>(ceil_div(ceil_div(blocks, oc_parts), group));
      visit(ConvSplit{oc_parts, pixel_parts}, busiest, weight_bytes / oc_parts + input_bytes / pixel_parts * groups);
    }
  };
  std::int64_t least = -1;
  each_split([&](const ConvSplit&, std::int64_t busiest, double) {
    if (least < 0 || busiest < least) least = busiest;
  });
  ConvSplit best;
  double best_bytes = -1;
  each_split([&](const ConvSplit& split, std::int64_t busiest, double moved) {
    if (busiest * 100 <= least * 105 && (best_bytes < 0 || moved < best_bytes)) {
      best = split;
      best_bytes = moved;
    }
  });
  return best;
}

// table[(m - first) * taps + tap] = where output pixel m's tap reads its input channels, in x
// (NHWC, `ldc` elements from one pixel to the next), or `zeros` in the padding.
template <typename T>
void fill_tap_table(const StreamConvShape& s, const T* x, std::int64_t ldc, const T* zeros, std::int64_t first,
                    std::int64_t count, const T** table) {
  for (std::int64_t m = first; m < first + count; ++m) {
    const std::int64_t ox = m % s.ow, oy = m / s.ow % s.oh, n = m / (s.ow * s.oh);
    const T* image = x + n * s.ih * s.iw * ldc;
    for (std::int64_t fy = 0; fy < s.kh; ++fy)
      for (std::int64_t fx = 0; fx < s.kw; ++fx) {
        const std::int64_t iy = oy * s.sh - s.ph + fy * s.dh, ix = ox * s.sw - s.pw + fx * s.dw;
        *table++ = iy < 0 || ix < 0 || iy >= s.ih || ix >= s.iw ? zeros : image + (iy * s.iw + ix) * ldc;
      }
  }
}

}  // namespace wpk::cpu
