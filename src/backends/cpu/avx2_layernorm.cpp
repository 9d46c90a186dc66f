#include "backends/cpu/avx2_layernorm.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/avx2_conv.hpp"
#include "backends/cpu/avx2_tile.hpp"

namespace wpk::cpu {
namespace {

#ifdef WPK_AVX2_KERNELS
using namespace avx2;

// The sum of 8 floats as 4 doubles, added to acc.
WPK_AVX2 __m256d add_widened(__m256d acc, __m256 v) {
  acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  return _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

WPK_AVX2 double horizontal_sum(__m256d v) {
  const __m128d pair = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(pair, _mm_unpackhi_pd(pair, pair)));
}

// Float sums of at most kFlush vectors at a time, each then added to a double: the float parts
// add a few roundings of their own size, the double total none that grow with the row.
constexpr std::int64_t kFlush = 8;

WPK_AVX2 void normalize_row(const float* x, float* y, std::int64_t cols, const float* scale, const float* bias,
                            float epsilon) {
  // The sum of x - x[0]: float sums of the spread, not of a row's distance from 0 (1e4 +- 1
  // would round each float sum of 64 by ~1e-2).
  const __m256 first = _mm256_set1_ps(x[0]);
  double total = 0;
  for (std::int64_t j0 = 0; j0 < cols; j0 += 8 * kFlush) {
    __m256 sum = _mm256_setzero_ps();
    for (std::int64_t j = j0; j < std::min(cols, j0 + 8 * kFlush); j += 8)
      sum = _mm256_add_ps(sum, keep_lanes(_mm256_sub_ps(load_lanes(x + j, cols - j), first), cols - j));
    total += horizontal_sum(add_widened(_mm256_setzero_pd(), sum));
  }
  const double mean = x[0] + total / static_cast<double>(cols);
  // x - mean as (x - m) - c, m the float nearest the mean and c the float nearest the rest: the
  // first difference rounds once relative to itself (a float mean alone would shift every
  // deviation of a row far from 0 by up to half its ulp: ~5e-4 of the spread at 1e4 +- 1).
  const float m = static_cast<float>(mean), c = static_cast<float>(mean - m);
  const __m256 vm = _mm256_set1_ps(m), vc = _mm256_set1_ps(c);
  double squares = 0;
  for (std::int64_t j0 = 0; j0 < cols; j0 += 8 * kFlush) {
    __m256 sum = _mm256_setzero_ps();
    for (std::int64_t j = j0; j < std::min(cols, j0 + 8 * kFlush); j += 8) {
      const __m256 d = keep_lanes(_mm256_sub_ps(_mm256_sub_ps(load_lanes(x + j, cols - j), vm), vc), cols - j);
      sum = _mm256_fmadd_ps(d, d, sum);
    }
    squares += horizontal_sum(add_widened(_mm256_setzero_pd(), sum));
  }
  const double variance = squares / static_cast<double>(cols);
  const __m256 inverse = _mm256_set1_ps(static_cast<float>(1.0 / std::sqrt(variance + static_cast<double>(epsilon))));
  for (std::int64_t j = 0; j < cols; j += 8) {
    const std::int64_t n = cols - j;
    const __m256 normalized = _mm256_mul_ps(_mm256_sub_ps(_mm256_sub_ps(load_lanes(x + j, n), vm), vc), inverse);
    const __m256 shift = bias ? load_lanes(bias + j, n) : _mm256_setzero_ps();
    const __m256 out = _mm256_fmadd_ps(normalized, load_lanes(scale + j, n), shift);
    store_lanes(y + j, n, out);
  }
}
#endif

}  // namespace

bool avx2_layernorm_available() { return avx2_kernels_available(); }

void avx2_layernorm(const float* x, float* y, std::int64_t rows, std::int64_t cols, const float* scale,
                    const float* bias, float epsilon) {
#ifdef WPK_AVX2_KERNELS
  if (cols == 0) return;
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) normalize_row(x + r * cols, y + r * cols, cols, scale, bias, epsilon);
#else
  (void)x, (void)y, (void)rows, (void)cols, (void)scale, (void)bias, (void)epsilon;
#endif
}

}  // namespace wpk::cpu
