// The vector math wpk's AVX2 kernels share (backends/cpu/avx2_tile.hpp) against double
// precision: e^x over its whole clamped range, one vector and N in lockstep alike, and the GELU
// pass over a tile's outputs with columns off the 16-float pairs (masked tails, other columns
// left alone). The GELUs inside whole kernels: avx2_conv_test.cpp.
#include <catch2/catch.hpp>

#include "backends/cpu/avx2_tile.hpp"

#ifdef WPK_AVX2_KERNELS
#include <cmath>
#include <vector>

#include "support/conv_kernel_check.hpp"

namespace {
using namespace wpk::cpu::avx2;
using wpk::cpu::StreamConvEpilogue;

// e^x of 8 * n floats: one vector at a time (exp_ps), or three in lockstep (exp_n<3>).
WPK_AVX2 void exp_floats(const float* x, float* y, std::size_t n, bool lockstep) {
  for (std::size_t i = 0; i < n; i += 24) {
    if (lockstep) {
      Vecs<3> v = {_mm256_loadu_ps(x + i), _mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(x + i + 16)};
      exp_n<3>(v);
      for (int j = 0; j < 3; ++j) _mm256_storeu_ps(y + i + 8 * j, v[j]);
    } else {
      for (int j = 0; j < 3; ++j) _mm256_storeu_ps(y + i + 8 * j, exp_ps(_mm256_loadu_ps(x + i + 8 * j)));
    }
  }
}
}  // namespace

TEST_CASE("the AVX2 e^x is within 1.2e-7 relative over [-87.3, 88.3] and clamps outside", "[onednn][avx2]") {
  if (!wpk::testing::cpu_runs_avx2_kernel()) return;
  std::vector<float> x;
  for (double v = -87.3; v <= 88.3; v += 0.37e-3) x.push_back(static_cast<float>(v));
  // Around the range reduction's seams (x = (k + 1/2) ln 2, where n steps) and 0.
  for (int k = -125; k <= 126; ++k) {
    const float seam = static_cast<float>((k + 0.5) * std::log(2.0));
    for (const float v : {std::nextafter(seam, -1e3f), seam, std::nextafter(seam, 1e3f)}) x.push_back(v);
  }
  for (const float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-7f}) x.push_back(v);
  const std::size_t in_range = x.size();
  for (const float v : {-1e4f, -100.0f, -87.31f, 88.31f, 100.0f, 1e30f}) x.push_back(v);
  while (x.size() % 24) x.push_back(0.0f);
  for (const bool lockstep : {false, true}) {
    std::vector<float> y(x.size());
    exp_floats(x.data(), y.data(), x.size(), lockstep);
    double worst = 0;
    for (std::size_t i = 0; i < in_range; ++i) {
      const double want = std::exp(static_cast<double>(x[i]));
      worst = std::max(worst, std::abs(y[i] / want - 1));
    }
    INFO("lockstep " << lockstep);
    CHECK(worst <= 1.2e-7);
    for (std::size_t i = in_range; i < in_range + 6; ++i) {
      const double bound = std::exp(x[i] < 0 ? -87.3f : 88.3f);  // the clamp: finite, normal
      INFO("x " << x[i]);
      CHECK(std::isfinite(y[i]));
      CHECK(std::abs(y[i] / bound - 1) <= 1e-6);
    }
  }
}

TEST_CASE("the AVX2 GELU pass over a tile's outputs covers exactly its rows and columns", "[onednn][avx2]") {
  if (!wpk::testing::cpu_runs_avx2_kernel()) return;
  using Act = StreamConvEpilogue::Act;
  const std::int64_t ldy = 53;  // rows 53 floats apart; the pass covers 3 rows of columns 1..37
  for (const Act act : {Act::Gelu, Act::GeluTanh, Act::Relu}) {
    std::vector<float> y(static_cast<std::size_t>(5 * ldy));
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(std::sin(i * 0.7) * 6);
    const std::vector<float> before = y;
    StreamConvEpilogue e;
    e.act = act;
    activate_rows(y.data() + ldy + 1, 3, 37, ldy, e);
    for (std::int64_t r = 0; r < 5; ++r)
      for (std::int64_t c = 0; c < ldy; ++c) {
        const double v = before[static_cast<std::size_t>(r * ldy + c)];
        const double got = y[static_cast<std::size_t>(r * ldy + c)];
        INFO("row " << r << " column " << c);
        if (r < 1 || r > 3 || c < 1 || c > 37) {
          REQUIRE(got == v);  // outside the block: untouched
          continue;
        }
        const double want = act == Act::Gelu   ? 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))
                            : act == Act::Relu ? std::max(v, 0.0)
                                               : 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
        REQUIRE(std::abs(got - want) <= 0.75e-7 * std::abs(v) + 1e-6 * std::abs(want));
      }
  }
}
#endif
