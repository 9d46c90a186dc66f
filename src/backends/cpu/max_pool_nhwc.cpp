#include "backends/cpu/max_pool_nhwc.hpp"

#include <omp.h>

#include <algorithm>
#include <vector>

namespace wpk::cpu {
namespace {

// Below this many output floats one thread does it all: waking the others costs more.
constexpr std::int64_t kParallelOutputs = 1 << 14;

// The input rows (or columns) [first, last) the window of output position `o` spans.
struct Span {
  std::int64_t first, last;
};

Span window(std::int64_t o, std::int64_t stride, std::int64_t pad, std::int64_t kernel, std::int64_t size) {
  const std::int64_t start = o * stride - pad;
  return {std::max<std::int64_t>(0, start), std::min(size, start + kernel)};
}

// Compiled for AVX-512, AVX2 and the baseline ISA, picked at load by the CPU it runs on.
// `rows` holds one W x C row: the max of the input rows an output row's windows span.
__attribute__((target_clones("avx512f", "avx2", "default"))) void pool_rows(const MaxPoolShape& s, const float* x,
                                                                           float* y, std::int64_t r0, std::int64_t r1,
                                                                           float* rows) {
  const std::int64_t row_len = s.w * s.c;
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::int64_t n = r / s.oh, oh = r % s.oh;
    const Span hs = window(oh, s.sh, s.ph, s.kh, s.h);
    const float* image = x + n * s.h * row_len;
    const float* merged = image + hs.first * row_len;
    if (hs.last - hs.first > 1) {
      const float* a = merged;
      const float* b = merged + row_len;
#pragma omp simd
      for (std::int64_t j = 0; j < row_len; ++j) rows[j] = std::max(a[j], b[j]);
      for (std::int64_t h = hs.first + 2; h < hs.last; ++h) {
        const float* next = image + h * row_len;
#pragma omp simd
        for (std::int64_t j = 0; j < row_len; ++j) rows[j] = std::max(rows[j], next[j]);
      }
      merged = rows;
    }
    float* out = y + r * s.ow * s.c;
    for (std::int64_t ow = 0; ow < s.ow; ++ow, out += s.c) {
      const Span ws = window(ow, s.sw, s.pw, s.kw, s.w);
      const float* col = merged + ws.first * s.c;
#pragma omp simd
      for (std::int64_t j = 0; j < s.c; ++j) out[j] = col[j];
      for (std::int64_t w = ws.first + 1; w < ws.last; ++w) {
        col += s.c;
#pragma omp simd
        for (std::int64_t j = 0; j < s.c; ++j) out[j] = std::max(out[j], col[j]);
      }
    }
  }
}

}  // namespace

bool max_pool_nhwc_covers(const MaxPoolShape& s) {
  if (s.n < 1 || s.h < 1 || s.w < 1 || s.c < 1 || s.oh < 1 || s.ow < 1) return false;
  // Windows start at o * stride - pad: the first must reach row 0, the last must start inside.
  return s.ph < s.kh && s.pw < s.kw && (s.oh - 1) * s.sh - s.ph < s.h && (s.ow - 1) * s.sw - s.pw < s.w;
}

void max_pool_nhwc(const MaxPoolShape& s, const float* x, float* y) {
  const std::int64_t out_rows = s.n * s.oh;
  const int threads = out_rows * s.ow * s.c >= kParallelOutputs ? omp_get_max_threads() : 1;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    thread_local std::vector<float> rows;
    rows.resize(static_cast<std::size_t>(s.w * s.c));
    const std::int64_t t = omp_get_thread_num(), count = omp_get_num_threads();
    pool_rows(s, x, y, out_rows * t / count, out_rows * (t + 1) / count, rows.data());
  }
}

}  // namespace wpk::cpu
