// wpk's AVX2 layer normalization (backends/cpu/avx2_layernorm.hpp): the kernel against a
// double-precision layer norm at 1-3 threads, and LayerNormalization nodes through the oneDNN
// backend (which runs them on it on CPUs without AVX-512) against the reference backend. The
// kernel runs on any CPU with AVX2 and FMA, so AVX-512 machines test it too.
#include <catch2/catch.hpp>

#ifdef WPK_WITH_ONEDNN
#include <cmath>
#include <vector>

#include "backends/cpu/avx2_layernorm.hpp"
#include "runtime/threads.hpp"
#include "support/backend_tester.hpp"
#include "support/conv_kernel_check.hpp"
#include "support/onednn_isa.hpp"

using wpk::testing::onednn_backend;
using wpk::testing::OpCase;
using wpk::testing::random_floats;

namespace {

// Row r of x normalized in double precision.
std::vector<double> layernorm_row(const float* x, std::int64_t cols, const float* scale, const float* bias, float epsilon) {
  double mean = 0, variance = 0;
  for (std::int64_t j = 0; j < cols; ++j) mean += x[j];
  mean /= static_cast<double>(cols);
  for (std::int64_t j = 0; j < cols; ++j) variance += (x[j] - mean) * (x[j] - mean);
  variance /= static_cast<double>(cols);
  std::vector<double> y(static_cast<std::size_t>(cols));
  for (std::int64_t j = 0; j < cols; ++j)
    y[static_cast<std::size_t>(j)] = (x[j] - mean) / std::sqrt(variance + epsilon) * scale[j] + (bias ? bias[j] : 0.0);
  return y;
}

}  // namespace

// Rows off the 8-float vectors (masked tails) and shorter than one, BERT's rows, a long row, rows
// far from 0 with a small spread (where a one-pass variance would cancel), a constant row (the
// variance is 0: epsilon alone), with and without bias, in place; guard floats past Y untouched.
TEST_CASE("wpk's AVX2 layer norm matches a double-precision layer norm", "[onednn][avx2]") {
  if (!wpk::testing::cpu_runs_avx2_kernel()) {
    WARN("no AVX2 and FMA: wpk's AVX2 layer norm does not run on this CPU");
    return;
  }
  struct Case {
    std::int64_t rows, cols;
    float offset;  // added to every input
    bool bias, in_place;
  };
  const Case cases[] = {{1, 1, 0, true, false},     {3, 5, 0, true, false},    {7, 8, 0, false, false},
                        {5, 17, 3, true, true},     {128, 768, 0, true, false}, {2, 70001, 0, true, false},
                        {4, 768, 1e4f, true, false}, {9, 33, -50, false, true}};
  std::uint32_t seed = 11;
  for (const int threads : {1, 2, 3}) {
    const wpk::OmpThreadScope scope(threads);
    for (const Case& c : cases) {
      INFO(c.rows << " x " << c.cols << " offset " << c.offset << " bias " << c.bias << " in place " << c.in_place
                  << " at " << threads << " threads");
      std::vector<float> x = random_floats(static_cast<std::size_t>(c.rows * c.cols), seed++);
      for (float& v : x) v += c.offset;
      for (std::int64_t j = 0; j < c.cols; ++j) x[static_cast<std::size_t>(j)] = c.offset + 0.5f;  // row 0: constant
      const std::vector<float> scale = random_floats(static_cast<std::size_t>(c.cols), seed++);
      const std::vector<float> bias = random_floats(static_cast<std::size_t>(c.cols), seed++);
      const float* b = c.bias ? bias.data() : nullptr;
      constexpr float kGuard = -7.25f;
      std::vector<float> y(x.size() + 8, kGuard);
      if (c.in_place) std::copy(x.begin(), x.end(), y.begin());
      wpk::cpu::avx2_layernorm(c.in_place ? y.data() : x.data(), y.data(), c.rows, c.cols, scale.data(), b, 1e-5f);
      double worst = 0;
      for (std::int64_t r = 0; r < c.rows; ++r) {
        const std::vector<double> want = layernorm_row(x.data() + r * c.cols, c.cols, scale.data(), b, 1e-5f);
        for (std::int64_t j = 0; j < c.cols; ++j) {
          const double got = y[static_cast<std::size_t>(r * c.cols + j)];
          REQUIRE(std::isfinite(got));
          worst = std::max(worst, std::abs(got - want[static_cast<std::size_t>(j)]) / (1 + std::abs(want[static_cast<std::size_t>(j)])));
        }
      }
      // Float inputs rounded once around a mean kept in double: a few float epsilons, however
      // long the row or far from 0 (offset 1e4 keeps ~4 significant digits of the deviations
      // in float, which the double reference shares: it reads the same floats).
      CHECK(worst <= 2e-6);
      for (std::size_t i = x.size(); i < y.size(); ++i) REQUIRE(y[i] == kGuard);
    }
  }
}

TEST_CASE("oneDNN layer norm matches the reference, bias or none", "[onednn]") {
  std::uint32_t seed = 5;
  for (const std::int64_t c : {1, 7, 8, 300, 768}) {
    INFO(c << " columns");
    CHECK(OpCase("LayerNormalization").input("X", {2, 9, c}).constant("S", {c}).attr("epsilon", 1e-3f).seed(seed++).check(onednn_backend()) == "");
    CHECK(OpCase("LayerNormalization").input("X", {4, c}).constant("S", {c}).constant("B", {c}).seed(seed++).check(onednn_backend()) == "");
  }
}
#endif
