// wpk's AVX2 direct convolution (backends/cpu/avx2_conv.hpp): the kernel itself on weights
// packed by oneDNN as Acdb16a against a plain double-precision convolution, at 1-3 threads (each
// way of splitting the work); and FusedConvs through the oneDNN backend, which runs them on it
// on CPUs without AVX-512, against the reference backend. The kernel runs on any CPU with AVX2
// and FMA, so AVX-512 machines test it too, though their sessions do not use it.
#include <catch2/catch.hpp>

#ifdef WPK_WITH_ONEDNN
#include <dnnl.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/avx2_conv.hpp"
#include "backends/cpu/avx2_tile.hpp"
#include "backends/cpu/cpu_backend.hpp"
#include "runtime/threads.hpp"
#include "support/backend_tester.hpp"
#include "support/onednn_isa.hpp"
#include "support/conv_kernel_check.hpp"
#include "wpk/wpk.hpp"

using wpk::cpu::StreamConvEpilogue;
using wpk::cpu::StreamConvShape;
using wpk::testing::conv_shape;
using wpk::testing::cpu_runs_avx2_kernel;
using wpk::testing::onednn_backend;
using wpk::testing::random_floats;
using wpk::testing::rect_shape;

// Tiles of 1-6 pixels (pixel counts off multiples of 6, across rows and images), output channels
// off the 16-channel blocks (masked stores), input channels off any vector width, more pixels than
// one 96-pixel block, padding on every side (taps reading zeros, tiles skipping whole taps),
// strides, dilation, 1x1, 1x7 and 5x5 kernels, a weight group larger than L2's share, and every
// epilogue (both GELUs included); at 1, 2 and 3 threads.
TEST_CASE("wpk's AVX2 conv kernel matches a plain convolution", "[onednn][conv][avx2]") {
  if (!cpu_runs_avx2_kernel()) {
    WARN("no AVX2 and FMA: wpk's AVX2 conv kernel does not run on this CPU");
    return;
  }
  struct Case {
    StreamConvShape s;
    const char* what;
  };
  const Case cases[] = {
      {conv_shape(1, 7, 67, 70, 3, 1, 1, 1), "3x3, 67 -> 70 channels at 7x7 (49 pixels)"},
      {conv_shape(2, 11, 16, 8, 3, 1, 1, 1), "8 output channels, 242 pixels over two images"},
      {conv_shape(1, 9, 130, 96, 3, 2, 1, 1), "3x3 stride 2"},
      {conv_shape(1, 13, 24, 33, 3, 1, 2, 2), "dilation 2, 33 channels"},
      {conv_shape(3, 5, 40, 64, 1, 1, 0, 1), "1x1, 75 pixels"},
      {conv_shape(1, 1, 96, 80, 3, 1, 1, 1), "one output pixel reading the centre tap only"},
      {conv_shape(1, 9, 17, 32, 5, 1, 2, 1), "5x5"},
      {conv_shape(1, 4, 1100, 16, 3, 1, 1, 1), "3x3 over 1100 channels: 633 KB of weights per block"},
      {rect_shape(2, 6, 10, 20, 24, 1, 7, 1, 1, 0, 0, 3, 3), "1x7 on 6x10"},
      {rect_shape(1, 8, 7, 18, 40, 3, 3, 2, 1, 0, 2, 1, 0), "asymmetric padding and strides"},
  };
  unsigned seed = 41;
  for (const int threads : {1, 2, 3}) {
    const wpk::OmpThreadScope scope(threads);
    for (const Case& c : cases)
      for (int epilogue = 0; epilogue < 6; ++epilogue) {
        const StreamConvShape& s = c.s;
        wpk::testing::ConvKernelCase k(s, epilogue, seed);
        const auto packed = wpk::testing::pack_weights(k.w, s, dnnl::memory::format_tag::Acdb16a);
        wpk::cpu::avx2_conv(s, k.x.data(), packed.data(), k.e, k.y.data());
        INFO(c.what << ", epilogue " << epilogue << ", " << threads << " threads");
        const wpk::testing::ConvDiff diff = k.diff();
        // float32 sums of K products in [-1, 1] against double: partial sums grow to ~sqrt(K / 9)
        // and rounding adds ~eps each step, ~eps * K / 3 in all (2e-4 at K = 9900); a wrong tap,
        // lane or pixel is O(1).
        const double terms = static_cast<double>(s.kh * s.kw * s.ic);
        CHECK(diff.worst < 1e-7 * terms);
        CHECK(diff.relative_l2 < 1e-5);
        CHECK(k.guards_changed() == 0);
      }
  }
}

// The GELU epilogues on sums spread over the float range: an identity 1x1 conv (16 channels)
// passes 4096 values from -1e4 to 1e4 (dense near 0) to the activation unchanged.
TEST_CASE("the AVX2 kernel's GELU epilogues are accurate from -1e4 to 1e4", "[onednn][conv][avx2]") {
  if (!cpu_runs_avx2_kernel()) return;
  using Act = StreamConvEpilogue::Act;
  const StreamConvShape s = conv_shape(1, 16, 16, 16, 1, 1, 0, 1);  // 256 pixels x 16 channels
  std::vector<float> x(static_cast<std::size_t>(256 * 16));
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double u = (static_cast<double>(i) / (x.size() - 1)) * 2 - 1;  // -1 .. 1
    x[i] = static_cast<float>(u * u * u * u * u * 1e4);
  }
  std::vector<float> identity(16 * 16, 0.0f);
  for (int c = 0; c < 16; ++c) identity[static_cast<std::size_t>(c * 16 + c)] = 1.0f;
  const auto packed = wpk::testing::pack_weights(identity, s, dnnl::memory::format_tag::Acdb16a);
  for (const Act act : {Act::Gelu, Act::GeluTanh}) {
    StreamConvEpilogue e;
    e.act = act;
    std::vector<float> y(x.size());
    wpk::cpu::avx2_conv(s, x.data(), packed.data(), e, y.data());
    double worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double v = x[i];
      const double want = act == Act::Gelu ? 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))
                                           : 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
      REQUIRE(std::isfinite(y[i]));
      // erf's approximation is 1.5e-7 off at most (absolute: it shows where GELU is tiny, at
      // x < -3), times |x| / 2; float32 rounding and e^x ~1e-7 relative.
      worst = std::max(worst, std::abs(y[i] - want) / (0.75e-7 * std::abs(v) + 1e-6 * std::abs(want) + 1e-30));
    }
    INFO((act == Act::Gelu ? "Gelu" : "GeluTanh"));
    CHECK(worst <= 1.0);
  }
}

TEST_CASE("wpk's AVX2 conv kernel runs convs of up to 64 taps on CPUs with AVX2 and FMA", "[cpu][conv][avx2]") {
  using wpk::cpu::avx2_conv_runs;
  if (!wpk::cpu::avx2_kernels_available()) {
    CHECK(!avx2_conv_runs(conv_shape(1, 56, 64, 64, 3, 1, 1, 1)));
    return;
  }
  CHECK(avx2_conv_runs(conv_shape(1, 56, 64, 64, 3, 1, 1, 1)));
  CHECK(avx2_conv_runs(conv_shape(8, 7, 512, 512, 3, 1, 1, 1)));
  CHECK(avx2_conv_runs(conv_shape(1, 14, 16, 24, 5, 2, 2, 1)));
  CHECK(avx2_conv_runs(conv_shape(1, 224, 3, 64, 7, 2, 3, 1)));  // a stem conv: slow, but it runs
  CHECK(!avx2_conv_runs(conv_shape(1, 20, 32, 32, 9, 1, 4, 1)));  // 81 taps
}

// Through the cpu backend, in each of the direct kernel's configs: NHWC FusedConvs with each
// activation the kernel fuses, a residual, padding, stride and batch.
TEST_CASE("FusedConvs on wpk's AVX2 kernel match the reference", "[cpu][conv][avx2]") {
  if (!wpk::cpu::avx2_kernels_available()) return;
  const wpk::cpu::CpuBackend cpu;
  unsigned seed = 500;
  for (const std::string kind : {"", "Relu", "Clip", "Gelu", "GeluTanh"})
    for (bool residual : {false, true}) {
      wpk::testing::OpCase c("FusedConv", "com.wpk");
      c.input("X", {2, 10, 9, 35})
          .constant("W", {50, 35, 3, 3})
          .constant("B", {50})
          .attr("pads", {1, 0, 1, 2})
          .attr("strides", {1, 2})
          .attr("channels_last", std::int64_t{1})
          .activation(kind)
          .seed(seed++);
      if (residual) c.input("Z", {2, 10, 5, 50});
      INFO(c.describe());
      // 315-term sums of products in [-1, 1]: near-zero outputs need an absolute tolerance.
      int direct = 0;
      for (const std::string& config : c.configs(cpu)) {
        if (config.rfind("kernel=direct_avx2", 0) != 0) continue;
        INFO(config);
        CHECK(c.check(cpu, config, 1e-4, 1e-5) == "");
        ++direct;
      }
      CHECK(direct == 9);
    }
}

// Products with constant B run on the same kernel as 1x1 convolutions of their rows
// (matmul_kernel.cpp): a session with only the cpu backend and a symbolic row count runs 5 and
// then 70 rows, and a Relu'd product with bias and a residual matches a double-precision
// evaluation at both; the profile names the kernel.
TEST_CASE("MatMuls with constant B run on wpk's AVX2 kernel at any row count", "[cpu][matmul][avx2]") {
  if (!wpk::cpu::avx2_kernels_available()) return;
  const std::int64_t k = 37, n = 50;
  const auto b = random_floats(static_cast<std::size_t>(k * n), 601);
  const auto bias = random_floats(static_cast<std::size_t>(n), 602);
  wpk::Graph g;
  g.add_input("a", wpk::DType::Float32, {wpk::Dim("rows"), k});
  g.add_input("z", wpk::DType::Float32, {wpk::Dim("rows"), n});
  g.add_initializer("b", wpk::Tensor::from_vector(b, {k, n}));
  g.add_initializer("bias", wpk::Tensor::from_vector(bias, {n}));
  g.add_node("MatMul", {"a", "b"}, {"p"});
  g.add_node("Add", {"p", "bias"}, {"q"});
  g.add_node("Add", {"q", "z"}, {"r"});
  g.add_node("Relu", {"r"}, {"y"});
  g.add_output("y");
  wpk::SessionOptions o;
  o.profile = true;
  o.disabled_kernels = {"onednn", "gen"};  // the cpu kernel is under test, not the choice
  const wpk::Session s(g, o);
  for (const std::int64_t rows : {5, 70}) {
    INFO(rows << " rows");
    const auto a = random_floats(static_cast<std::size_t>(rows * k), 603 + static_cast<unsigned>(rows));
    const auto z = random_floats(static_cast<std::size_t>(rows * n), 703 + static_cast<unsigned>(rows));
    const wpk::Tensor y = s.run({{"a", wpk::Tensor::from_vector(a, {rows, k})}, {"z", wpk::Tensor::from_vector(z, {rows, n})}})
                              .at("y");
    REQUIRE(y.shape() == wpk::Shape{rows, n});
    double worst = 0;
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double sum = bias[static_cast<std::size_t>(j)] + z[static_cast<std::size_t>(i * n + j)];
        for (std::int64_t t = 0; t < k; ++t)
          sum += static_cast<double>(a[static_cast<std::size_t>(i * k + t)]) * b[static_cast<std::size_t>(t * n + j)];
        worst = std::max(worst, std::abs(std::max(sum, 0.0) - y.data<float>()[i * n + j]));
      }
    CHECK(worst < 1e-5);  // 39-term float32 sums of values in [-1, 1]: ~1e-6 off at most
    std::string backend;
    for (const wpk::StepProfile& step : s.last_profile().steps)
      if (step.op == "com.wpk.FusedMatMul") backend = step.backend;
    CHECK(backend.rfind("cpu(kernel=direct_avx2", 0) == 0);
    CHECK(backend.find(":f32_matmul__avx2_6x16") != std::string::npos);
  }
}

#endif  // WPK_WITH_ONEDNN
