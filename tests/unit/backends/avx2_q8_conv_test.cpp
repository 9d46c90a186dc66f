// wpk's exact 8-bit kernels (backends/cpu/avx2_q8_conv.hpp: QLinearConv, QLinearConvAdd,
// MatMulIntegerToFloat on the cpu backend), in each arithmetic the backend offers (8-bit pairs on
// the codes' low 7 bits with the high codes added back, int16 pairs, float32 sums moved to int32
// every 512 products), against the reference to the bit: tiles of 1-6 pixels, output channels off
// the 16-channel blocks, input channel counts off pairs and quads (padded), padding, strides, dilation, batches, uint8 and int8 codes and outputs,
// per-tensor and per-channel scales, saturation, residual codes, and integer sums far past 2^24
// (where float32 arithmetic would round); at 1, 2 and 3 threads. Guard bytes around the outputs
// (the tester's) catch stores past a row's end.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "backends/cpu/avx2_tile.hpp"
#include "runtime/execution_plan.hpp"
#include "runtime/threads.hpp"
#include "support/backend_tester.hpp"
#include "wpk/wpk.hpp"

using wpk::Shape;
using wpk::Tensor;
using wpk::testing::OpCase;

namespace {

// "" when `op` matches the reference to the bit in every config the cpu backend offers for it
// (there must be some), else the first mismatch.
std::string check_every_arithmetic(const OpCase& op, double rtol = 0, double atol = 0);

const wpk::Backend& cpu_backend() {
  for (const wpk::Backend* b : wpk::registered_backends())
    if (b->name() == "cpu") return *b;
  throw std::runtime_error("no cpu backend");
}

template <typename T>
Tensor codes(const Shape& shape, unsigned seed, int lo, int hi) {
  std::vector<T> v(static_cast<std::size_t>(wpk::shape_numel(shape)));
  unsigned x = seed * 2654435761u + 7;
  for (T& e : v) {
    x = x * 1664525u + 1013904223u;
    e = static_cast<T>(lo + static_cast<int>((x >> 8) % static_cast<unsigned>(hi - lo + 1)));
  }
  return Tensor::from_vector(v, shape);
}

template <typename T>
Tensor filled(const Shape& shape, T value) {
  return Tensor::from_vector(std::vector<T>(static_cast<std::size_t>(wpk::shape_numel(shape)), value), shape);
}

struct Conv {
  std::int64_t n, c, co, h, w, k, stride, pad, dilation;
  bool signed_input, signed_output, per_channel;
  float y_scale;  // small: codes saturate
};

OpCase qlinear_conv(const Conv& v, unsigned seed, bool residual) {
  OpCase op = residual ? OpCase("QLinearConvAdd", "com.wpk") : OpCase("QLinearConv");
  if (v.signed_input)
    op.input("X", codes<std::int8_t>({v.n, v.h, v.w, v.c}, seed, -128, 127)).constant("XS", Tensor::scalar(0.03f))
        .constant("XZ", Tensor::scalar(std::int8_t{-11}));
  else
    op.input("X", codes<std::uint8_t>({v.n, v.h, v.w, v.c}, seed, 0, 255)).constant("XS", Tensor::scalar(0.03f))
        .constant("XZ", Tensor::scalar(std::uint8_t{131}));
  std::vector<float> ws;
  std::vector<std::int32_t> bias;
  for (std::int64_t o = 0; o < v.co; ++o) {
    ws.push_back(0.001f + 0.00037f * static_cast<float>(o % 11));
    bias.push_back(static_cast<std::int32_t>((o * 7919) % 6007) - 3000);
  }
  op.constant("W", codes<std::int8_t>({v.co, v.c, v.k, v.k}, seed + 1, -128, 127))
      .constant("WS", v.per_channel ? Tensor::from_vector(ws, {v.co}) : Tensor::scalar(0.0021f))
      .constant("WZ", v.per_channel ? filled<std::int8_t>({v.co}, 0) : Tensor::scalar(std::int8_t{0}))
      .constant("YS", Tensor::scalar(v.y_scale))
      .constant("YZ", v.signed_output ? Tensor::scalar(std::int8_t{5}) : Tensor::scalar(std::uint8_t{70}))
      .constant("B", Tensor::from_vector(bias, {v.co}))
      .attr("pads", std::vector<std::int64_t>{v.pad, v.pad, v.pad, v.pad})
      .attr("strides", std::vector<std::int64_t>{v.stride, v.stride})
      .attr("dilations", std::vector<std::int64_t>{v.dilation, v.dilation})
      .attr("channels_last", std::int64_t{1});
  if (residual) {
    const auto out = [&](std::int64_t in) { return (in + 2 * v.pad - v.dilation * (v.k - 1) - 1) / v.stride + 1; };
    // The residual and the sum are of one dtype (the conv's codes may differ).
    const Shape r_shape = {v.n, out(v.h), out(v.w), v.co};
    if (v.signed_output)
      op.input("R", codes<std::int8_t>(r_shape, seed + 2, -128, 127)).constant("RS", Tensor::scalar(0.07f))
          .constant("RZ", Tensor::scalar(std::int8_t{4})).constant("SS", Tensor::scalar(0.09f))
          .constant("SZ", Tensor::scalar(std::int8_t{-3}));
    else
      op.input("R", codes<std::uint8_t>(r_shape, seed + 2, 0, 255)).constant("RS", Tensor::scalar(0.07f))
          .constant("RZ", Tensor::scalar(std::uint8_t{128})).constant("SS", Tensor::scalar(0.09f))
          .constant("SZ", Tensor::scalar(std::uint8_t{20}));
  }
  return op;
}

std::string check_every_arithmetic(const OpCase& op, double rtol, double atol) {
  const std::vector<std::string> configs = op.configs(cpu_backend());
  if (configs.size() < 2) return "the cpu backend offers " + std::to_string(configs.size()) + " configs";
  for (const std::string& config : configs)
    if (std::string why = op.check(cpu_backend(), config, rtol, atol); !why.empty()) return config + ": " + why;
  return "";
}

}  // namespace

TEST_CASE("wpk's exact 8-bit conv matches the reference to the bit", "[cpu][int8][avx2]") {
  if (!wpk::cpu::avx2_kernels_available()) {
    WARN("no AVX2: wpk's 8-bit kernels do not run on this CPU");
    return;
  }
  const std::vector<Conv> convs = {
      {1, 15, 16, 7, 5, 3, 1, 1, 1, false, false, true, 0.4f},   // 35 pixels: tiles of 5 and 6
      {1, 17, 33, 6, 6, 3, 2, 1, 1, true, false, true, 0.4f},    // odd channels, stride 2
      {2, 16, 17, 5, 7, 1, 1, 0, 1, false, true, false, 0.2f},   // 1x1, batch 2, int8 output
      {1, 3, 16, 11, 11, 7, 2, 3, 1, false, false, true, 0.5f},  // a stem: 3 channels, 49 taps
      {1, 32, 40, 9, 8, 3, 1, 2, 2, true, true, true, 0.3f},     // dilation 2, wide padding
      {1, 1, 1, 1, 1, 1, 1, 0, 1, false, false, false, 0.1f},    // one of everything
      {1, 64, 48, 3, 4, 3, 1, 1, 1, false, false, true, 0.01f},  // saturating codes
      {1, 40, 24, 14, 14, 3, 1, 1, 1, false, false, true, 0.4f}, // more pixels than a 96-pixel block
  };
  unsigned seed = 1;
  for (const int threads : {1, 2, 3}) {
    const wpk::OmpThreadScope scope(threads);
    for (const Conv& v : convs)
      for (bool residual : {false, true}) {
        const OpCase op = qlinear_conv(v, seed++, residual);
        INFO(op.describe() << ", " << threads << " threads");
        CHECK(check_every_arithmetic(op) == "");
      }
  }
}

TEST_CASE("wpk's exact 8-bit conv keeps integer sums exact past float32's 2^24", "[cpu][int8][avx2]") {
  if (!wpk::cpu::avx2_kernels_available()) return;
  // 1024 channels x 9 taps of (0 - 255) x -128: sums of ~3e8, where float32 steps are 32 apart.
  // A small multiplier keeps the codes in range so the sums' last bits decide them; a one-off
  // weight per output channel moves each sum by one product.
  const std::int64_t c = 1024, co = 20;
  Tensor w = filled<std::int8_t>({co, c, 3, 3}, std::int8_t{-128});
  for (std::int64_t o = 0; o < co; ++o) w.data<std::int8_t>()[o * c * 9 + o] = static_cast<std::int8_t>(-128 + 3 * o);
  OpCase op("QLinearConv");
  op.input("X", filled<std::uint8_t>({1, 3, 3, c}, 0)).constant("XS", Tensor::scalar(1.0f))
      .constant("XZ", Tensor::scalar(std::uint8_t{255})).constant("W", w).constant("WS", Tensor::scalar(1.0f))
      .constant("WZ", Tensor::scalar(std::int8_t{0})).constant("YS", Tensor::scalar(1.5e6f))
      .constant("YZ", Tensor::scalar(std::uint8_t{0})).attr("pads", std::vector<std::int64_t>{1, 1, 1, 1})
      .attr("channels_last", std::int64_t{1});
  CHECK(check_every_arithmetic(op) == "");
  // The product's float output is the int32 sum times the scales: every bit of the sum shows.
  OpCase product("MatMulIntegerToFloat", "com.wpk");
  product.input("A", filled<std::uint8_t>({7, 4096}, 0)).constant("B", codes<std::int8_t>({4096, 17}, 3, -128, -100))
      .input("AS", Tensor::scalar(1.0f)).constant("BS", Tensor::scalar(1.0f)).input("AZ", Tensor::scalar(std::uint8_t{255}))
      .constant("BZ", Tensor::scalar(std::int8_t{0}));
  CHECK(check_every_arithmetic(product) == "");
}

TEST_CASE("wpk's exact 8-bit conv adds back the high codes vpmaddubsw would saturate on", "[cpu][int8][avx2]") {
  if (!wpk::cpu::avx2_kernels_available()) return;
  // Every code 255 against weights of 127 (and -128): a pair of products is 64770 (-65280), past
  // int16, so only the split into low bits and added-back high codes gets the sums right (output
  // scale: the largest sum ~100 codes from the zero point); zero points 0 and 200 (the weights'
  // sums over the taps inside the image come off), 3x3 with padding (border pixels read fewer
  // taps), and the same through int8 codes (moved by 128).
  for (const bool negative : {false, true})
    for (const int zero : {0, 200}) {
      const std::int64_t c = 37, co = 18;
      OpCase op("QLinearConv");
      op.input("X", filled<std::uint8_t>({1, 5, 4, c}, 255)).constant("XS", Tensor::scalar(1.0f))
          .constant("XZ", Tensor::scalar(static_cast<std::uint8_t>(zero)))
          .constant("W", filled<std::int8_t>({co, c, 3, 3}, negative ? std::int8_t{-128} : std::int8_t{127}))
          .constant("WS", Tensor::scalar(1.0f)).constant("WZ", Tensor::scalar(std::int8_t{0}))
          .constant("YS", Tensor::scalar(1.1e5f)).constant("YZ", Tensor::scalar(std::uint8_t{128}))
          .attr("pads", std::vector<std::int64_t>{1, 1, 1, 1}).attr("channels_last", std::int64_t{1});
      INFO("weights " << (negative ? -128 : 127) << ", zero point " << zero);
      CHECK(check_every_arithmetic(op) == "");
      OpCase signed_op("QLinearConv");
      signed_op.input("X", filled<std::int8_t>({1, 5, 4, c}, 127)).constant("XS", Tensor::scalar(1.0f))
          .constant("XZ", Tensor::scalar(static_cast<std::int8_t>(zero - 128)))
          .constant("W", filled<std::int8_t>({co, c, 3, 3}, negative ? std::int8_t{-128} : std::int8_t{127}))
          .constant("WS", Tensor::scalar(1.0f)).constant("WZ", Tensor::scalar(std::int8_t{0}))
          .constant("YS", Tensor::scalar(1.1e5f)).constant("YZ", Tensor::scalar(std::int8_t{0}))
          .attr("pads", std::vector<std::int64_t>{1, 1, 1, 1}).attr("channels_last", std::int64_t{1});
      CHECK(check_every_arithmetic(signed_op) == "");
      // The product's float output shows every bit of the sums.
      OpCase product("MatMulIntegerToFloat", "com.wpk");
      product.input("A", filled<std::uint8_t>({7, 301}, 255))
          .constant("B", filled<std::int8_t>({301, 17}, negative ? std::int8_t{-128} : std::int8_t{127}))
          .input("AS", Tensor::scalar(1.0f)).constant("BS", Tensor::scalar(1.0f))
          .input("AZ", Tensor::scalar(static_cast<std::uint8_t>(zero))).constant("BZ", Tensor::scalar(std::int8_t{0}));
      CHECK(check_every_arithmetic(product) == "");
    }
}

TEST_CASE("wpk's exact 8-bit product matches the reference to the bit", "[cpu][int8][avx2]") {
  if (!wpk::cpu::avx2_kernels_available()) return;
  unsigned seed = 100;
  for (const int threads : {1, 2, 3}) {
    const wpk::OmpThreadScope scope(threads);
    for (std::int64_t rows : {1, 5, 6, 7, 13})
      for (std::int64_t k : {1, 2, 17, 64})
        for (std::int64_t n : {1, 15, 16, 17, 33}) {
          const bool signed_a = (rows + k + n) % 2 == 0;
          std::vector<float> bs;
          for (std::int64_t j = 0; j < n; ++j) bs.push_back(0.01f + 0.0013f * static_cast<float>(j % 7));
          OpCase op("MatMulIntegerToFloat", "com.wpk");
          const unsigned a_seed = seed++, b_seed = seed++;
          if (signed_a)
            op.input("A", codes<std::int8_t>({rows, k}, a_seed, -128, 127))
                .constant("B", codes<std::int8_t>({k, n}, b_seed, -128, 127)).input("AS", Tensor::scalar(0.023f))
                .constant("BS", n % 2 ? Tensor::from_vector(bs, {n}) : Tensor::scalar(0.02f))
                .input("AZ", Tensor::scalar(std::int8_t{-9}));
          else
            op.input("A", codes<std::uint8_t>({rows, k}, a_seed, 0, 255))
                .constant("B", codes<std::int8_t>({k, n}, b_seed, -128, 127)).input("AS", Tensor::scalar(0.023f))
                .constant("BS", n % 2 ? Tensor::from_vector(bs, {n}) : Tensor::scalar(0.02f))
                .input("AZ", Tensor::scalar(std::uint8_t{131}));
          op.constant("BZ", Tensor::scalar(std::int8_t{0}));
          // The epilogues: bias, then a residual and Relu, on a third of the cases each.
          if (n % 3 == 1) op.constant("Bias", {n});
          if (n % 3 == 2) op.constant("Bias", {n}).input("Z", {rows, n}).activation("Relu");
          op.seed(seed++);
          INFO(op.describe() << ", " << threads << " threads");
          CHECK(check_every_arithmetic(op) == "");
        }
  }
  // Gelu, which the reference computes with erf: within float32 rounding of it.
  OpCase gelu("MatMulIntegerToFloat", "com.wpk");
  gelu.input("A", codes<std::uint8_t>({9, 33}, 7, 0, 255)).constant("B", codes<std::int8_t>({33, 40}, 8, -127, 127))
      .input("AS", Tensor::scalar(0.02f)).constant("BS", Tensor::scalar(0.01f)).input("AZ", Tensor::scalar(std::uint8_t{120}))
      .constant("BZ", Tensor::scalar(std::int8_t{0})).constant("Bias", {40}).activation("Gelu").seed(9);
  CHECK(check_every_arithmetic(gelu, 1e-6, 1e-6) == "");
}
