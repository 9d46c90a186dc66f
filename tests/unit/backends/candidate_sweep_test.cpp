// Every candidate the search may pick, against the reference: for each op case of the table
// below, each registered backend that supports it, in each of its configurations (Backend::
// configs), at sizes on, below and above the kernels' tiles (6 pixels x 16 channels for wpk's
// AVX2 register tile, 16-float vectors, 6 query rows for attention). One sweep over the registry
// instead of cases written per kernel; a kernel that declines a shape (Kernel::runs) is counted
// and reported, never passed silently.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "core/cpu_features.hpp"
#include "runtime/execution_plan.hpp"
#include "support/backend_tester.hpp"

using wpk::Shape;
using wpk::testing::OpCase;

namespace {

struct SweepCase {
  OpCase op;
  double rtol, atol;
  // Generated kernels are compiled per shape: every configuration of the gen backend on the
  // cases at its tiles' edges, its first one on the others (each a few hundred compiles else).
  bool every_generated_config = true;
  // Prefetching the weights (",prefetch=1" configs of products and convs) changes no value, only
  // what the kernel asks the caches for: those configs are checked on a few cases at the tiles'
  // edges (remainders in rows, columns and panels), not on every one.
  bool prefetch_configs = false;
  // Products in blocks of K (",kblock=N": products with constant B and K past a block) are
  // checked on the cases made for them, and only those configs there.
  bool k_block_configs = false;
  // Asking for the residual as a tile starts (",prefetch_residual=1": products and convs with a
  // residual) likewise changes no value: checked on the cases made for it, at the tiles' edges,
  // and only those configs there.
  bool residual_prefetch_configs = false;
};

// NHWC convs as the layout pass leaves them, with the epilogues kernels fuse.
std::vector<SweepCase> conv_cases() {
  std::vector<SweepCase> out;
  unsigned seed = 100;
  for (std::int64_t c : {15, 16, 17, 64})
    for (std::int64_t hw : {5, 6, 7, 14})
      for (const char* act : {"", "Relu"}) {
        // Pixel tiles of 4, 6 and 8 leave remainders at 5 and 7 columns; 15 and 17 channels
        // straddle a vector.
        const bool edges = (hw == 5 || hw == 7) && (c == 15 || c == 17);
        out.push_back({OpCase("FusedConv", "com.wpk").input("X", {1, hw, hw, c}).constant("W", {c, c, 3, 3}).constant("B", {c})
                           .attr("pads", std::vector<std::int64_t>{1, 1, 1, 1}).attr("channels_last", std::int64_t{1})
                           .activation(act).seed(seed++),
                       1e-4, 1e-4, edges, edges && c == 17});
        out.push_back({OpCase("FusedConv", "com.wpk").input("X", {2, hw, hw, c}).constant("W", {32, c, 1, 1})
                           .attr("channels_last", std::int64_t{1}).activation(act).seed(seed++),
                       1e-4, 1e-4});
      }
  out.push_back({OpCase("FusedConv", "com.wpk").input("X", {1, 15, 15, 32}).constant("W", {48, 32, 3, 3})
                     .attr("strides", std::vector<std::int64_t>{2, 2}).attr("channels_last", std::int64_t{1}).seed(seed++),
                 1e-4, 1e-4});
  out.push_back({OpCase("FusedConv", "com.wpk").input("X", {1, 9, 9, 32}).constant("W", {32, 1, 3, 3})
                     .attr("group", std::int64_t{32}).attr("pads", std::vector<std::int64_t>{1, 1, 1, 1})
                     .attr("channels_last", std::int64_t{1}).seed(seed++),
                 1e-4, 1e-4});
  // Depthwise + pointwise groups: pixel tiles with and without remainders, channels below, at and
  // past the 64 a depthwise tile is computed in, stride 2, a residual and both activations.
  struct Group {
    std::int64_t batch, hw, c, o, stride;
    const char *depthwise_act, *pointwise_act;
    bool residual;
  };
  for (const Group& g : {Group{1, 7, 15, 17, 1, "Clip", "", false}, Group{1, 9, 16, 24, 2, "Relu", "", false},
                         Group{2, 6, 64, 16, 1, "Relu", "Relu", true}, Group{1, 5, 70, 9, 1, "", "", true}}) {
    const std::int64_t out_hw = (g.hw - 1) / g.stride + 1;
    OpCase op = OpCase("DepthwisePointwiseConv", "com.wpk").input("X", {g.batch, g.hw, g.hw, g.c}).constant("Wd", {g.c, 1, 3, 3})
                    .constant("Bd", {g.c}).constant("Wp", {g.o, g.c, 1, 1}).constant("Bp", {g.o});
    if (g.residual) op.input("Z", {g.batch, out_hw, out_hw, g.o});
    op.attr("group", g.c).attr("pads", std::vector<std::int64_t>{1, 1, 1, 1}).attr("strides", std::vector<std::int64_t>{g.stride, g.stride})
        .attr("channels_last", std::int64_t{1}).activation(g.depthwise_act).seed(seed++);
    if (*g.pointwise_act) op.attr("pointwise_activation", std::string(g.pointwise_act));
    // Every generated config where the tiles leave remainders (15 and 70 channels, 7 and 5 pixels).
    out.push_back({op, 1e-4, 1e-4, g.c == 15 || g.c == 70});
  }
  // Scaled pointwise groups: the gate per image or one for the batch, pixel tiles with and
  // without remainders, channels below, at and past the 64 a scaled tile is computed in.
  struct Scaled {
    std::int64_t batch, gate_batch, h, w, c, o;
    const char* act;
    bool residual;
  };
  for (const Scaled& g : {Scaled{1, 1, 7, 7, 15, 17, "", false}, Scaled{2, 2, 5, 6, 64, 24, "Relu", true},
                          Scaled{2, 1, 3, 9, 70, 9, "", true}}) {
    OpCase op = OpCase("ScaledPointwiseConv", "com.wpk").input("X", {g.batch, g.h, g.w, g.c}).input("S", {g.gate_batch, 1, 1, g.c})
                    .constant("W", {g.o, g.c, 1, 1}).constant("B", {g.o});
    if (g.residual) op.input("Z", {g.batch, g.h, g.w, g.o});
    op.attr("channels_last", std::int64_t{1}).activation(g.act).seed(seed++);
    out.push_back({op, 1e-4, 1e-4, g.c != 64});
  }
  // Element-wise chains: broadcast along rows, columns and whole tensors (scalar, per channel,
  // along the last axis), last dims off the vector and its multiples, every step op once.
  using Strings = std::vector<std::string>;
  using Ints = std::vector<std::int64_t>;
  out.push_back({OpCase("ElementwiseChain", "com.wpk").input("X", {3, 37}).input("R", {37}).input("C", {3, 1})
                     .attr("ops", Strings{"Mul", "Add", "Sigmoid", "Sub", "Relu", "Max"})
                     .attr("operands", Ints{0, 1, 3, 2, 4, -1, 5, 0, 6, -1, 7, 1}).seed(seed++),
                 1e-4, 1e-5});
  out.push_back({OpCase("ElementwiseChain", "com.wpk").input("X", {2, 8, 5, 7}).constant("A", {8, 1, 1}).constant("B", {1})
                     .input("Z", {2, 8, 5, 7})
                     .attr("ops", Strings{"Tanh", "Mul", "Min", "Abs", "Sqrt", "Neg", "Exp", "Erf", "Add", "Div"})
                     .attr("operands", Ints{0, -1, 4, 1, 5, 2, 6, -1, 7, -1, 3, -1, 9, -1, 10, -1, 11, 8, 8, 12})
                     .seed(seed++),
                 1e-4, 1e-5});
  out.push_back({OpCase("Conv").input("X", {1, 16, 14, 14}).constant("W", {16, 16, 3, 3})
                     .attr("pads", std::vector<std::int64_t>{1, 1, 1, 1}).seed(seed++),
                 1e-4, 1e-4});
  return out;
}

// 8-bit codes: uniform over the dtype's range, from a seed.
template <typename T>
wpk::Tensor random_codes(const Shape& shape, unsigned seed, int lo, int hi) {
  std::vector<T> v(static_cast<std::size_t>(wpk::shape_numel(shape)));
  unsigned x = seed * 2654435761u + 1;
  for (T& e : v) {
    x = x * 1664525u + 1013904223u;
    e = static_cast<T>(lo + static_cast<int>((x >> 8) % static_cast<unsigned>(hi - lo + 1)));
  }
  return wpk::Tensor::from_vector(v, shape);
}

// Quantization: Q/DQ per tensor and per axis, at lengths around the 32-element vector loop,
// including ties, NaN, infinities and values past the range; QLinearAdd; QLinearConv in NHWC
// (uint8 and int8 input, per-channel scales, bias, padding, stride, depthwise), alone and
// with a residual, against the reference's, which rounds its double product where oneDNN
// rounds a float one: one code apart at most.
std::vector<SweepCase> quantized_cases() {
  using wpk::Tensor;
  std::vector<SweepCase> out;
  unsigned seed = 500;
  for (std::int64_t n : {31, 32, 33, 100}) {
    out.push_back({OpCase("QuantizeLinear").input("X", {n}).constant("S", Tensor::scalar(0.01f))
                       .constant("Z", Tensor::scalar(std::uint8_t{128})).seed(seed++), 0, 0});
    out.push_back({OpCase("QuantizeLinear").input("X", {n}).constant("S", Tensor::scalar(0.02f))
                       .constant("Z", Tensor::scalar(std::int8_t{-3})).seed(seed++), 0, 0});
    out.push_back({OpCase("DequantizeLinear").input("X", random_codes<std::uint8_t>({n}, seed++, 0, 255))
                       .constant("S", Tensor::scalar(0.37f)).constant("Z", Tensor::scalar(std::uint8_t{7})), 0, 0});
    out.push_back({OpCase("DequantizeLinear").input("X", random_codes<std::int8_t>({n}, seed++, -128, 127))
                       .constant("S", Tensor::scalar(0.37f)).constant("Z", Tensor::scalar(std::int8_t{-5})), 0, 0});
  }
  // Ties at +-0.5 and 2.5 steps, NaN, infinities, past the range, in the vector body and the tail.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> special = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, nan, inf, -inf, 1e30f, -1e30f, 300.f, -300.f, 0.f, -0.f, 127.5f};
  for (int r = 0; r < 2; ++r) special.insert(special.end(), special.begin(), special.begin() + 16);
  for (auto z : {std::uint8_t{0}, std::uint8_t{128}})
    out.push_back({OpCase("QuantizeLinear").input("X", Tensor::from_vector(special, {48})).constant("S", Tensor::scalar(1.0f))
                       .constant("Z", Tensor::scalar(z)), 0, 0});
  out.push_back({OpCase("QuantizeLinear").input("X", Tensor::from_vector(special, {48})).constant("S", Tensor::scalar(1.0f))
                     .constant("Z", Tensor::scalar(std::int8_t{0})), 0, 0});
  // Per axis: a scale and zero point for each of axis 1's 3 entries.
  out.push_back({OpCase("QuantizeLinear").input("X", {2, 3, 37})
                     .constant("S", Tensor::from_vector(std::vector<float>{0.01f, 0.02f, 0.05f}, {3}))
                     .constant("Z", Tensor::from_vector(std::vector<std::int8_t>{-1, 0, 4}, {3})).seed(seed++), 0, 0});
  out.push_back({OpCase("DequantizeLinear").input("X", random_codes<std::uint8_t>({2, 3, 37}, seed++, 0, 255))
                     .constant("S", Tensor::from_vector(std::vector<float>{0.01f, 0.02f, 0.05f}, {3}))
                     .constant("Z", Tensor::from_vector(std::vector<std::uint8_t>{1, 128, 250}, {3})), 0, 0});
  for (std::int64_t c : {15, 16, 17, 64})
    out.push_back({OpCase("QLinearAdd", "com.wpk").input("A", random_codes<std::uint8_t>({1, 5, 7, c}, seed++, 0, 255))
                       .constant("SA", Tensor::scalar(0.05f)).constant("ZA", Tensor::scalar(std::uint8_t{120}))
                       .input("B", random_codes<std::uint8_t>({1, 5, 7, c}, seed++, 0, 255))
                       .constant("SB", Tensor::scalar(0.03f)).constant("ZB", Tensor::scalar(std::uint8_t{3}))
                       .constant("SY", Tensor::scalar(0.07f)).constant("ZY", Tensor::scalar(std::uint8_t{100})), 0, 0});
  out.push_back({OpCase("QLinearAdd", "com.wpk").input("A", random_codes<std::int8_t>({3, 37}, seed++, -128, 127))
                     .constant("SA", Tensor::scalar(0.05f)).constant("ZA", Tensor::scalar(std::int8_t{-1}))
                     .input("B", random_codes<std::uint8_t>({3, 37}, seed++, 0, 255))
                     .constant("SB", Tensor::scalar(0.03f)).constant("ZB", Tensor::scalar(std::uint8_t{3}))
                     .constant("SY", Tensor::scalar(0.02f)).constant("ZY", Tensor::scalar(std::int8_t{5})), 0, 0});
  struct Conv {
    std::int64_t c, co, hw, k, stride, group;
    bool signed_input;
    bool zero_points = false;  // X and Y codes with zero point 0 (a Relu's: most of a quantized CNN's)
  };
  for (const Conv& v : {Conv{15, 16, 7, 3, 1, 1, false}, Conv{17, 33, 6, 3, 2, 1, false}, Conv{16, 32, 5, 1, 1, 1, true},
                        Conv{64, 64, 9, 3, 1, 1, false}, Conv{32, 32, 7, 3, 1, 32, false}, Conv{3, 16, 11, 7, 2, 1, false},
                        Conv{17, 33, 6, 3, 2, 1, false, true}, Conv{64, 64, 9, 1, 1, 1, false, true},
                        Conv{16, 32, 5, 1, 1, 1, true, true}, Conv{32, 32, 7, 3, 1, 32, false, true}}) {
    const std::int64_t pad = v.k / 2;
    const std::vector<float> ws = [&] {
      std::vector<float> s;
      for (std::int64_t o = 0; o < v.co; ++o) s.push_back(0.002f + 0.0003f * static_cast<float>(o % 7));
      return s;
    }();
    const std::vector<std::int32_t> bias = [&] {
      std::vector<std::int32_t> b;
      for (std::int64_t o = 0; o < v.co; ++o) b.push_back(static_cast<std::int32_t>((o * 7919) % 4001) - 2000);
      return b;
    }();
    // Every one plain, and with a residual where it has no groups (QLinearConvAdd).
    for (bool residual : {false, true}) {
    if (residual && v.group != 1) continue;
    OpCase op = residual ? OpCase("QLinearConvAdd", "com.wpk") : OpCase("QLinearConv");
    if (v.signed_input)
      op.input("X", random_codes<std::int8_t>({1, v.hw, v.hw, v.c}, seed++, -128, 127)).constant("XS", Tensor::scalar(0.04f))
          .constant("XZ", Tensor::scalar(static_cast<std::int8_t>(v.zero_points ? 0 : -7)));
    else
      op.input("X", random_codes<std::uint8_t>({1, v.hw, v.hw, v.c}, seed++, 0, 255)).constant("XS", Tensor::scalar(0.04f))
          .constant("XZ", Tensor::scalar(static_cast<std::uint8_t>(v.zero_points ? 0 : 9)));
    op.constant("W", random_codes<std::int8_t>({v.co, v.c / v.group, v.k, v.k}, seed++, -127, 127))
        .constant("WS", Tensor::from_vector(ws, {v.co}))
        .constant("WZ", Tensor::from_vector(std::vector<std::int8_t>(static_cast<std::size_t>(v.co), 0), {v.co}))
        .constant("YS", Tensor::scalar(0.5f)).constant("YZ", Tensor::scalar(static_cast<std::uint8_t>(v.zero_points ? 0 : 60)))
        .constant("B", Tensor::from_vector(bias, {v.co}))
        .attr("pads", std::vector<std::int64_t>{pad, pad, pad, pad}).attr("strides", std::vector<std::int64_t>{v.stride, v.stride})
        .attr("group", v.group).attr("channels_last", std::int64_t{1});
    if (residual) {
      const std::int64_t hw_out = (v.hw + 2 * pad - v.k) / v.stride + 1;
      op.input("R", random_codes<std::uint8_t>({1, hw_out, hw_out, v.co}, seed++, 0, 255))
          .constant("RS", Tensor::scalar(0.3f)).constant("RZ", Tensor::scalar(std::uint8_t{130}))
          .constant("SS", Tensor::scalar(0.4f)).constant("SZ", Tensor::scalar(std::uint8_t{0}));
    }
    out.push_back({op, 0, 1});
    }
  }
  for (std::int64_t n : {31, 100}) out.push_back({OpCase("DynamicQuantizeLinear").input("X", {n}).seed(seed++), 0, 0});
  // Dynamic quantization's convolutions: the float result to the bit (NCHW, uint8 and int8 X,
  // strides, padding, groups, a 1x1).
  for (const Conv& v : {Conv{15, 16, 7, 3, 1, 1, false}, Conv{17, 33, 6, 3, 2, 1, true}, Conv{16, 32, 5, 1, 1, 1, false},
                        Conv{32, 32, 7, 3, 1, 4, false}}) {
    OpCase op("ConvIntegerToFloat", "com.wpk");
    const Tensor x = v.signed_input ? random_codes<std::int8_t>({1, v.c, v.hw, v.hw}, seed++, -128, 127)
                                    : random_codes<std::uint8_t>({1, v.c, v.hw, v.hw}, seed++, 0, 255);
    const Tensor xz = v.signed_input ? Tensor::scalar(std::int8_t{-5}) : Tensor::scalar(std::uint8_t{131});
    const std::int64_t pad = v.k / 2;
    out.push_back({op.input("X", x).constant("W", random_codes<std::int8_t>({v.co, v.c / v.group, v.k, v.k}, seed++, -127, 127))
                       .input("XS", Tensor::scalar(0.02f)).constant("WS", Tensor::scalar(0.004f))
                       .input("XZ", xz).constant("WZ", Tensor::scalar(std::int8_t{0}))
                       .attr("pads", std::vector<std::int64_t>{pad, pad, pad, pad})
                       .attr("strides", std::vector<std::int64_t>{v.stride, v.stride}).attr("group", v.group),
                   0, 0});
  }
  // Dynamic quantization's products: the float result to the bit.
  for (std::int64_t rows : {1, 7, 33})
    for (std::int64_t k : {16, 17, 64})
      for (std::int64_t n : {15, 16, 33}) {
        std::vector<float> bs;
        for (std::int64_t j = 0; j < n; ++j) bs.push_back(0.01f + 0.001f * static_cast<float>(j % 5));
        out.push_back({OpCase("MatMulIntegerToFloat", "com.wpk").input("A", random_codes<std::uint8_t>({rows, k}, seed++, 0, 255))
                           .constant("B", random_codes<std::int8_t>({k, n}, seed++, -127, 127))
                           .input("AS", Tensor::scalar(0.023f))
                           .constant("BS", rows == 7 ? Tensor::scalar(0.02f) : Tensor::from_vector(bs, {n}))
                           .input("AZ", Tensor::scalar(std::uint8_t{131}))
                           .constant("BZ", Tensor::scalar(std::int8_t{0})), 0, 0});
      }
  out.push_back({OpCase("MatMulIntegerToFloat", "com.wpk").input("A", random_codes<std::int8_t>({2, 3, 17}, seed++, -128, 127))
                     .constant("B", random_codes<std::int8_t>({17, 20}, seed++, -127, 127)).input("AS", Tensor::scalar(0.5f))
                     .constant("BS", Tensor::scalar(0.25f)).input("AZ", Tensor::scalar(std::int8_t{-3}))
                     .constant("BZ", Tensor::scalar(std::int8_t{0})), 0, 0});
  // The epilogue a quantized transformer's products take: bias + Gelu, bias + residual.
  for (bool residual : {false, true}) {
    const unsigned a_seed = seed++, b_seed = seed++;
    OpCase c = OpCase("MatMulIntegerToFloat", "com.wpk").input("A", random_codes<std::uint8_t>({9, 33}, a_seed, 0, 255))
                   .constant("B", random_codes<std::int8_t>({33, 40}, b_seed, -127, 127)).input("AS", Tensor::scalar(0.02f))
                   .constant("BS", Tensor::scalar(0.01f)).input("AZ", Tensor::scalar(std::uint8_t{120}))
                   .constant("BZ", Tensor::scalar(std::int8_t{0})).constant("Bias", {40});
    if (residual) c.input("Z", {9, 40}).activation("Relu");
    else c.activation("Gelu");
    out.push_back({c.seed(seed++), 1e-5, 1e-5});
  }
  // 8-bit max pooling and NHWC transposes of codes.
  out.push_back({OpCase("MaxPool").input("X", random_codes<std::uint8_t>({1, 9, 9, 17}, seed++, 0, 255))
                     .attr("kernel_shape", std::vector<std::int64_t>{3, 3}).attr("strides", std::vector<std::int64_t>{2, 2})
                     .attr("pads", std::vector<std::int64_t>{1, 1, 1, 1}).attr("channels_last", std::int64_t{1}), 0, 0});
  out.push_back({OpCase("MaxPool").input("X", random_codes<std::int8_t>({1, 8, 8, 16}, seed++, -128, 127))
                     .attr("kernel_shape", std::vector<std::int64_t>{2, 2}).attr("strides", std::vector<std::int64_t>{2, 2}), 0, 0});
  out.push_back({OpCase("Transpose").input("X", random_codes<std::uint8_t>({1, 3, 5, 7}, seed++, 0, 255))
                     .attr("perm", std::vector<std::int64_t>{0, 2, 3, 1}), 0, 0});
  return out;
}

// Convolutions and products allowed to compute in bf16 (SessionOptions::precision), on CPUs that
// do: inputs and weights keep 8 significant bits, so each product is off by up to ~2^-8 of
// itself and a sum of K of them by ~1% of sqrt(K) (terms of magnitude ~1/3 with random signs).
std::vector<SweepCase> bf16_cases() {
  std::vector<SweepCase> out;
  const wpk::CpuFeatures& cpu = wpk::cpu_features();
  if (!cpu.avx512_bf16 && !cpu.amx_bf16) return out;
  unsigned seed = 700;
  const wpk::Attribute bf16(std::string("bf16"));
  for (std::int64_t c : {15, 16, 64})
    out.push_back({OpCase("FusedConv", "com.wpk").input("X", {1, 7, 7, c}).constant("W", {32, c, 3, 3}).constant("B", {32})
                       .input("Z", {1, 7, 7, 32}).attr("pads", std::vector<std::int64_t>{1, 1, 1, 1})
                       .attr("channels_last", std::int64_t{1}).attr("compute_precision", bf16).activation("Relu").seed(seed++),
                   2e-2, 1e-2 * std::sqrt(9.0 * static_cast<double>(c))});
  for (std::int64_t rows : {1, 7})
    out.push_back({OpCase("FusedMatMul", "com.wpk").input("A", {rows, 33}).constant("B", {33, 40}).constant("C", {40})
                       .attr("compute_precision", bf16).activation("GeluTanh").seed(seed++),
                   2e-2, 1e-2 * std::sqrt(33.0)});
  out.push_back({OpCase("Gemm").input("A", {3, 17}).constant("B", {24, 17}).constant("C", {24})
                     .attr("transB", std::int64_t{1}).attr("compute_precision", bf16).seed(seed++),
                 2e-2, 1e-2 * std::sqrt(17.0)});
  // Attention's two products in bf16: the scores' sums over d, then Y's over the keys (weights
  // under 1 that add up to 1, so its error stays near the scores').
  for (std::int64_t s : {1, 7, 13})
    out.push_back({OpCase("Attention", "com.wpk").input("Q", {2, 3, s, 8}).input("K", {2, 3, 19, 8})
                       .input("V", {2, 3, 19, 5}).input("M", {2, 1, 1, 19}).attr("scale", 0.35f)
                       .attr("compute_precision", bf16).seed(seed++),
                   2e-2, 1e-2 * std::sqrt(8.0)});
  out.push_back({OpCase("Attention", "com.wpk").input("Q", {1, 9, 2, 16}).input("K", {1, 11, 2, 16})
                     .input("V", {1, 11, 2, 16}).attr("scale", 0.25f).attr("interleaved_heads", std::vector<std::int64_t>{1, 1, 1, 1})
                     .attr("compute_precision", bf16).seed(seed++),
                 2e-2, 1e-2 * std::sqrt(16.0)});
  return out;
}

std::vector<SweepCase> other_cases() {
  std::vector<SweepCase> out;
  unsigned seed = 300;
  for (std::int64_t rows : {1, 6, 7})
    for (std::int64_t k : {16, 17})
      for (std::int64_t n : {15, 16, 33})
        out.push_back({OpCase("FusedMatMul", "com.wpk").input("A", {rows, k}).constant("B", {k, n}).constant("C", {n})
                           .seed(seed++),
                       1e-4, 1e-4, true, k == 17});
  // Products in blocks of K: K of 600 in blocks of 256, the last a remainder, the epilogue
  // (residual, bias, ReLU) meeting the whole sum once; as a product and as a pointwise NHWC conv.
  for (std::int64_t rows : {1, 7}) {
    SweepCase blocked{OpCase("FusedMatMul", "com.wpk").input("A", {rows, 600}).constant("B", {600, 33}).constant("C", {33})
                          .input("Z", {rows, 33}).activation("Relu").seed(seed++),
                      1e-4, 1e-4};
    blocked.k_block_configs = true;
    out.push_back(std::move(blocked));
  }
  SweepCase blocked_conv{OpCase("FusedConv", "com.wpk").input("X", {1, 5, 5, 600}).constant("W", {40, 600, 1, 1}).constant("B", {40})
                             .input("Z", {1, 5, 5, 40}).attr("channels_last", std::int64_t{1}).activation("Relu").seed(seed++),
                         1e-4, 1e-4};
  blocked_conv.k_block_configs = true;
  out.push_back(std::move(blocked_conv));
  // Residuals asked for as each tile starts: a product, a pointwise NHWC conv (a product over the
  // same bytes) and a 3x3 conv, each with remainders in rows and columns.
  {
    SweepCase product{OpCase("FusedMatMul", "com.wpk").input("A", {2, 7, 17}).constant("B", {17, 33}).constant("C", {33})
                          .input("Z", {2, 7, 33}).activation("Relu").seed(seed++),
                      1e-4, 1e-5};
    SweepCase pointwise{OpCase("FusedConv", "com.wpk").input("X", {2, 5, 7, 17}).constant("W", {33, 17, 1, 1}).constant("B", {33})
                            .input("Z", {2, 5, 7, 33}).attr("channels_last", std::int64_t{1}).activation("Relu").seed(seed++),
                        1e-4, 1e-4};
    SweepCase window{OpCase("FusedConv", "com.wpk").input("X", {1, 7, 7, 15}).constant("W", {17, 15, 3, 3}).constant("B", {17})
                         .input("Z", {1, 7, 7, 17}).attr("pads", std::vector<std::int64_t>{1, 1, 1, 1})
                         .attr("channels_last", std::int64_t{1}).seed(seed++),
                     1e-4, 1e-4};
    for (SweepCase* c : {&product, &pointwise, &window}) {
      c->residual_prefetch_configs = true;
      out.push_back(std::move(*c));
    }
  }
  // Every epilogue a generated product fuses, with a residual and rows over two leading dims.
  for (const char* act : {"Relu", "Sigmoid", "Tanh", "SiLU", "Clip", "LeakyRelu", "HardSwish", "Gelu", "GeluTanh"})
    out.push_back({OpCase("FusedMatMul", "com.wpk").input("A", {2, 3, 17}).constant("B", {17, 33}).constant("C", {33})
                       .input("Z", {2, 3, 33}).activation(act).seed(seed++),
                   1e-4, 1e-5});
  out.push_back({OpCase("Gemm").input("A", {7, 17}).constant("B", {33, 17}).constant("C", {1, 33})
                     .attr("transB", std::int64_t{1}).seed(seed++),
                 1e-4, 1e-5});
  out.push_back({OpCase("MatMul").input("A", {5, 16}).input("B", {16, 9}).seed(seed++), 1e-4, 1e-5});
  for (std::int64_t c : {15, 16, 17, 768})
    out.push_back({OpCase("LayerNormalization").input("X", {3, 5, c}).constant("S", {c}).constant("B", {c})
                       .attr("epsilon", 1e-5f).seed(seed++),
                   1e-4, 1e-5});
  // Rows shorter than a vector, at a vector and a bit past, of several vectors; values far from 0
  // (a softmax that forgot the row's max would overflow).
  for (std::int64_t n : {1, 7, 16, 33, 128})
    out.push_back({OpCase("Softmax").input("X", {3, 5, n}).attr("axis", std::int64_t{-1}).seed(seed++), 1e-5, 1e-6});
  out.push_back({OpCase("Softmax").input("X", random_codes<float>({4, 37}, seed++, 80, 120)),
                 1e-5, 1e-6});
  for (std::int64_t s : {1, 6, 7, 13})
    out.push_back({OpCase("Attention", "com.wpk").input("Q", {2, 3, s, 8}).input("K", {2, 3, 19, 8})
                       .input("V", {2, 3, 19, 5}).input("M", {2, 1, 1, 19}).attr("scale", 0.35f).seed(seed++),
                   1e-4, 1e-5});
  using Ints = std::vector<std::int64_t>;
  for (std::int64_t c : {15, 16, 17})
    out.push_back({OpCase("MaxPool").input("X", {1, 9, 9, c}).attr("kernel_shape", Ints{3, 3})
                       .attr("strides", Ints{2, 2}).attr("pads", Ints{1, 1, 1, 1})
                       .attr("channels_last", std::int64_t{1}).seed(seed++),
                   0, 0, c == 17});
  // Pools at the generated tile's edges: windows past the end (ceil mode), dilated, uneven pads,
  // averages counting the padding or not, and the global average.
  out.push_back({OpCase("MaxPool").input("X", {2, 8, 8, 16}).attr("kernel_shape", Ints{3, 3}).attr("strides", Ints{2, 2})
                     .attr("ceil_mode", std::int64_t{1}).attr("channels_last", std::int64_t{1}).seed(seed++),
                 0, 0, false});
  out.push_back({OpCase("MaxPool").input("X", {1, 11, 10, 9}).attr("kernel_shape", Ints{2, 3}).attr("dilations", Ints{2, 2})
                     .attr("pads", Ints{1, 2, 0, 1}).attr("channels_last", std::int64_t{1}).seed(seed++),
                 0, 0, false});
  for (std::int64_t include_pad : {0, 1})
    out.push_back({OpCase("AveragePool").input("X", {1, 7, 7, 17}).attr("kernel_shape", Ints{3, 3})
                       .attr("pads", Ints{1, 1, 1, 1}).attr("count_include_pad", include_pad)
                       .attr("channels_last", std::int64_t{1}).seed(seed++),
                   1e-5, 1e-6, include_pad == 0});
  out.push_back({OpCase("AveragePool").input("X", {2, 7, 7, 9}).attr("kernel_shape", Ints{2, 2}).attr("strides", Ints{2, 2})
                     .attr("ceil_mode", std::int64_t{1}).attr("count_include_pad", std::int64_t{1})
                     .attr("channels_last", std::int64_t{1}).seed(seed++),
                 1e-5, 1e-6, false});
  out.push_back({OpCase("AveragePool").input("X", {1, 8, 8, 24}).attr("kernel_shape", Ints{2, 2}).attr("strides", Ints{2, 2})
                     .attr("channels_last", std::int64_t{1}).seed(seed++),
                 1e-5, 1e-6, false});
  out.push_back({OpCase("GlobalAveragePool").input("X", {2, 7, 7, 40}).attr("channels_last", std::int64_t{1}).seed(seed++),
                 1e-5, 1e-6, false});
  for (std::int64_t c : {15, 16, 17})
    for (const char* op : {"Add", "Mul", "Div"})
      out.push_back({OpCase(op).input("A", {1, 7, 7, c}).input("B", {1, 1, 1, c}).seed(seed++), 0, 0});
  // An operand over middle dims: a per-channel [C, 1, 1] over an image, rows of 15-17 floats
  // and more, batches around it, and the commutative ops with the operands swapped.
  for (const Shape& hw : {Shape{3, 5}, Shape{4, 4}, Shape{1, 17}, Shape{20, 21}})
    for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
      out.push_back({OpCase(op).input("A", {3, hw[0], hw[1]}).input("B", {3, 1, 1}).seed(seed++), 0, 0});
      out.push_back({OpCase(op).input("A", {2, 5, hw[0], hw[1]}).input("B", {5, 1, 1}).seed(seed++), 0, 0});
    }
  out.push_back({OpCase("Mul").input("A", {1, 6, 1, 1}).input("B", {2, 6, 4, 5}).seed(seed++), 0, 0});
  // Tanh: shorter than a vector, a vector's worth and a bit past, past the threads' threshold,
  // and values where it saturates.
  for (std::int64_t n : {1, 7, 16, 33, 70001})
    out.push_back({OpCase("Tanh").input("X", {n}).seed(seed++), 1e-5, 1e-6});
  out.push_back({OpCase("Tanh").input("X", random_codes<float>({5, 37}, seed++, -15, 15)), 1e-5, 1e-6});
  // Concat: along the first, a middle and the last axis (a negative one), one input, an input
  // empty along the axis, and int64 and bool data.
  out.push_back({OpCase("Concat").input("A", {2, 3, 5}).input("B", {4, 3, 5}).attr("axis", std::int64_t{0}).seed(seed++), 0, 0});
  out.push_back({OpCase("Concat").input("A", {2, 3, 5}).input("B", {2, 1, 5}).input("C", {2, 7, 5})
                     .attr("axis", std::int64_t{1}).seed(seed++), 0, 0});
  out.push_back({OpCase("Concat").input("A", {2, 3, 5}).input("B", {2, 3, 0}).input("C", {2, 3, 9})
                     .attr("axis", std::int64_t{-1}).seed(seed++), 0, 0});
  out.push_back({OpCase("Concat").input("A", {1, 40, 40, 24}).attr("axis", std::int64_t{3}).seed(seed++), 0, 0});
  out.push_back({OpCase("Concat").input("A", wpk::Tensor::from_vector(std::vector<std::int64_t>{1, -2, 3}, {3}))
                     .input("B", wpk::Tensor::from_vector(std::vector<std::int64_t>{4, 5}, {2})).attr("axis", std::int64_t{0}), 0, 0});
  out.push_back({OpCase("Concat").input("A", wpk::Tensor::from_vector(std::vector<bool>{true, false}, {1, 2}))
                     .input("B", wpk::Tensor::from_vector(std::vector<bool>{false, false, true, true}, {2, 2}))
                     .attr("axis", std::int64_t{0}), 0, 0});
  return out;
}

std::vector<std::string> configs_of(const SweepCase& c, const wpk::Backend& backend) {
  std::vector<std::string> configs = c.op.configs(backend);
  if (backend.name() == "gen" && !c.prefetch_configs)
    configs.erase(std::remove_if(configs.begin(), configs.end(),
                                 [](const std::string& s) { return s.find(",prefetch=1") != std::string::npos; }),
                  configs.end());
  if (backend.name() == "gen")
    configs.erase(std::remove_if(configs.begin(), configs.end(),
                                 [&](const std::string& s) {
                                   return (s.find(",prefetch_residual=1") != std::string::npos) != c.residual_prefetch_configs;
                                 }),
                  configs.end());
  if (backend.name() == "gen" && !c.every_generated_config && configs.size() > 1) configs.resize(1);
  if (backend.name() == "gen")
    configs.erase(std::remove_if(configs.begin(), configs.end(),
                                 [&](const std::string& s) { return (s.find(",kblock=") != std::string::npos) != c.k_block_configs; }),
                  configs.end());
  return configs;
}

}  // namespace

TEST_CASE("every candidate of every registered backend matches the reference at tile edges", "[backends][sweep]") {
  // Under a WPK_MAX_ISA that takes nothing from this CPU (AVX2 on a Zen 3) the sweep would repeat
  // the uncapped one; tests/CMakeLists.txt reports the capped run as skipped on this line.
  const wpk::CpuFeatures& probed = wpk::cpu_features_uncapped();
  if (wpk::isa_cap() != wpk::IsaCap::kNone && wpk::capped(probed, wpk::isa_cap()).flags() == probed.flags()) {
    WARN("WPK_MAX_ISA takes nothing from this CPU: the uncapped sweep covers it");
    return;
  }
  std::vector<SweepCase> cases = conv_cases();
  for (SweepCase& c : other_cases()) cases.push_back(std::move(c));
  for (SweepCase& c : quantized_cases()) cases.push_back(std::move(c));
  for (SweepCase& c : bf16_cases()) cases.push_back(std::move(c));
  std::map<std::string, int> checked, declined;
  std::map<std::string, std::set<std::string>> ops_checked;  // backend -> op types it was checked on
  // Generated kernels compile in one batch first, as a session compiles a model's.
  wpk::testing::GeneratedCode generated;
  for (const SweepCase& c : cases)
    for (const wpk::Backend* backend : wpk::registered_backends())
      if (backend->name() == "gen")
        for (const std::string& config : configs_of(c, *backend)) generated.add(*c.op.prepare(*backend, config));
  INFO(generated.size() << " generated kernels");
  REQUIRE(generated.compile(2) == "");
  const auto code = [&generated](wpk::Kernel& k) { generated.give(k); };
  for (const SweepCase& c : cases)
    for (const wpk::Backend* backend : wpk::registered_backends()) {
      if (backend->name() == "reference") continue;
      for (const std::string& config : configs_of(c, *backend)) {
        const std::string name = backend->name() + (config.empty() ? "" : "(" + config + ")");
        const std::string why = c.op.check(*backend, config, c.rtol, c.atol, code);
        INFO(name << ": " << c.op.describe());
        if (why.find("declines the inputs") != std::string::npos) {
          ++declined[name];
          continue;
        }
        CHECK(why == "");
        ++checked[name];
        const std::string op = c.op.describe();
        ops_checked[backend->name()].insert(op.substr(0, op.find('(')));
      }
    }
  std::string summary;
  for (const auto& [name, n] : checked)
    summary += name + " " + std::to_string(n) + " checked, " + std::to_string(declined[name]) + " declined; ";
  INFO(summary);
  CHECK(checked.count("cpu") == 1);  // row broadcast, pooling at least: any CPU runs those
  for (const char* op : {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "com.wpk.QLinearAdd"})
    CHECK(ops_checked["cpu"].count(op) == 1);
  CHECK(ops_checked["cpu"].count("Sub") == 1);
  CHECK(ops_checked["cpu"].count("Concat") == 1);  // the per-channel operand (Sub only broadcasts there)
  CHECK(ops_checked["cpu"].count("Tanh") == 1);
  // wpk's exact 8-bit kernels, on every CPU with AVX2.
  for (const char* op : {"QLinearConv", "com.wpk.QLinearConvAdd", "com.wpk.MatMulIntegerToFloat"})
    CHECK(ops_checked["cpu"].count(op) == (wpk::cpu_features().avx2 ? 1u : 0u));
  CHECK(checked["gen(rows=4,vectors=2,parallel=rows)"] > 0);  // products, on every CPU
  CHECK(checked["gen(rows=6,vectors=2,parallel=cols,kblock=256)"] == 3);
  // Depth-first groups: the generated kernel of the whole group, and the parts on their own kernels.
  for (const char* op : {"com.wpk.DepthwisePointwiseConv", "com.wpk.ScaledPointwiseConv", "com.wpk.ElementwiseChain"}) {
    CHECK(ops_checked["gen"].count(op) == 1);
    CHECK(ops_checked["parts"].count(op) == 1);
  }
  for (const char* op : {"MaxPool", "AveragePool", "GlobalAveragePool", "Softmax", "LayerNormalization"})
    CHECK(ops_checked["gen"].count(op) == 1);
#ifdef WPK_WITH_ONEDNN
  CHECK(checked["onednn"] > 0);
  CHECK(checked["onednn(algorithm=direct)"] > 0);
  CHECK(ops_checked["onednn"].count("Transpose") == 1);
  CHECK(ops_checked["onednn"].count("MaxPool") == 1);
  // QLinearConv(Add), MatMulIntegerToFloat and ConvIntegerToFloat in float arithmetic on every
  // CPU, in int8 (their cases have weights past [-64, 64]) where oneDNN runs AVX-512 VNNI or AMX
  // (exact_int8_products).
  CHECK(checked["onednn(arithmetic=float)"] > 0);
  for (const char* op : {"QLinearConv", "com.wpk.QLinearConvAdd", "com.wpk.MatMulIntegerToFloat", "com.wpk.ConvIntegerToFloat"})
    CHECK(ops_checked["onednn"].count(op) == 1);
  const wpk::CpuFeatures& cpu = wpk::cpu_features();
  CHECK((checked["onednn(arithmetic=int8)"] > 0) == (cpu.avx512_vnni || cpu.amx_int8));
#endif
  WARN(summary);
}
