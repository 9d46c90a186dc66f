// The CUDA backend's generated kernels without a GPU: convolutions over sampled schedules and
// element-wise kernels with broadcasts, emulated on the host against the CPU's results, and
// compiled by NVRTC for sm_80 and sm_90 within the architectures' limits.
#include <catch2/catch.hpp>

#include <array>
#include <limits>
#include <random>

#include "../codegen/cuda_emulation.hpp"
#include "../runtime/device_graphs.hpp"
#include "backends/cuda/generated_kernels.hpp"
#include "codegen/jit/nvrtc_compiler.hpp"
#include "support/tensor_compare.hpp"

namespace wpk {
namespace {

struct ConvCase {
  std::string name;
  cuda::ConvGeometry geometry;
  bool bias, residual;
  std::string activation;
  std::vector<float> params;
};

cuda::ConvGeometry geometry(std::int64_t n, std::int64_t c, std::int64_t hw, std::int64_t o, std::int64_t k, std::int64_t stride,
                            std::int64_t pad, std::int64_t groups) {
  const std::int64_t out = (hw + 2 * pad - k) / stride + 1;
  return {{n, c, hw, hw}, {o, c / groups, k, k}, {n, o, out, out}, groups, {pad, pad}, {stride, stride}, {1, 1}};
}

std::vector<ConvCase> conv_cases() {
  return {{"3x3", geometry(2, 8, 9, 12, 3, 1, 1, 1), true, false, "Relu", {}},
          {"3x3_s2_residual_clip", geometry(1, 6, 11, 10, 3, 2, 1, 1), true, true, "Clip", {0.0f, 0.5f}},
          {"depthwise", geometry(1, 16, 10, 16, 3, 2, 1, 16), false, false, "", {}},
          {"pointwise_grouped", geometry(2, 8, 5, 8, 1, 1, 0, 2), true, true, "Sigmoid", {}},
          {"7x7_s2", geometry(1, 3, 15, 8, 7, 2, 3, 1), true, false, "HardSwish", {}}};
}

// The CPU's y for the case: a Conv node, then the epilogue as ONNX ops.
Tensor cpu_conv(const ConvCase& c, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& z) {
  Graph g;
  g.add_input("x", DType::Float32, {c.geometry.x.begin(), c.geometry.x.end()});
  g.add_input("z", DType::Float32, {c.geometry.y.begin(), c.geometry.y.end()});
  g.add_initializer("w", w);
  g.add_initializer("b", bias);
  std::vector<std::string> ins = {"x", "w"};
  if (c.bias) ins.push_back("b");
  const auto& ge = c.geometry;
  g.add_node("Conv", ins, {"c"},
             {{"group", ge.groups}, {"strides", ge.strides}, {"dilations", ge.dilations},
              {"pads", std::vector<std::int64_t>{ge.pads[0], ge.pads[1], ge.pads[0], ge.pads[1]}}});
  std::string v = "c";
  if (c.residual) g.add_node("Add", {v, "z"}, {"cz"}), v = "cz";
  if (c.activation == "Relu") g.add_node("Relu", {v}, {"a"}), v = "a";
  if (c.activation == "Sigmoid") g.add_node("Sigmoid", {v}, {"a"}), v = "a";
  if (c.activation == "HardSwish") g.add_node("HardSwish", {v}, {"a"}), v = "a";
  if (c.activation == "Clip") {
    g.add_initializer("lo", Tensor::scalar<float>(c.params[0]));
    g.add_initializer("hi", Tensor::scalar<float>(c.params[1]));
    g.add_node("Clip", {v, "lo", "hi"}, {"a"}), v = "a";
  }
  g.add_node("Identity", {v}, {"y"});
  g.add_output("y");
  SessionOptions o;
  o.optimizer.level = OptimizationLevel::None;
  Session s(std::move(g), o);
  return s.run({{"x", x}, {"z", z}}).at("y");
}

std::vector<cuda::CudaConvConfig> sampled_configs(const cuda::ConvGeometry& g, std::size_t count) {
  std::vector<cuda::CudaConvConfig> all;
  const auto knobs = cuda::cuda_conv_knobs();
  for (auto to : knobs[0].values)
    for (auto ro : knobs[1].values)
      for (auto tx : knobs[2].values)
        for (auto rx : knobs[3].values)
          for (auto st : knobs[4].values)
            for (auto ty : knobs[5].values) {
              const cuda::CudaConvConfig c{to, ro, tx, rx, st, ty};
              if (cuda::cuda_conv_config_valid(g, c)) all.push_back(c);
            }
  std::mt19937 gen(5);
  std::shuffle(all.begin(), all.end(), gen);
  if (all.size() > count) all.resize(count);
  return all;
}

TEST_CASE("generated CUDA convolutions match the CPU under host emulation, over sampled schedules", "[cuda][codegen]") {
  int staged = 0, row_tiled = 0;
  for (const ConvCase& c : conv_cases()) {
    const auto& g = c.geometry;
    const Tensor x = device_test::ramp(g.x, 1.0f, 1), w = device_test::ramp(g.w, 0.5f, 2);
    const Tensor bias = device_test::ramp({g.w[0]}, 0.3f, 3), z = device_test::ramp(g.y, 0.4f, 4);
    const Tensor want = cpu_conv(c, x, w, bias, z);
    const auto configs = sampled_configs(g, 6);
    REQUIRE(!configs.empty());
    for (const auto& config : configs) {
      INFO(c.name << " " << config.describe());
      staged += config.stage_ic > 0;
      row_tiled += config.threads_y > 1;
      const auto printed = cuda::conv_kernel(g, config, c.bias, c.residual, c.activation, c.params);
      std::string why;
      const auto kernel = codegen::test::build_emulated(printed, c.name, &why);
      INFO(why);
      REQUIRE(kernel);
      Tensor y = Tensor::zeros(DType::Float32, g.y);
      std::vector<float*> args = {const_cast<float*>(x.data<float>()), const_cast<float*>(w.data<float>())};
      if (c.bias) args.push_back(const_cast<float*>(bias.data<float>()));
      if (c.residual) args.push_back(const_cast<float*>(z.data<float>()));
      args.push_back(y.data<float>());
      reinterpret_cast<codegen::test::Entry>(kernel->entry)(args.data(), nullptr, 1);
      CHECK_FALSE(codegen::test::emulation_diverged(*kernel));
      CHECK(testing::compare_allclose(y, want, 1e-5, 1e-5).empty());
    }
  }
  CHECK(staged >= 5);  // the samples cover shared-memory staging and several output rows a block
  CHECK(row_tiled >= 5);
}

TEST_CASE("a depthwise and a pointwise convolution as one depth-first kernel match the CPU under host emulation", "[cuda][codegen]") {
  for (const std::int64_t stride : {1, 2}) {
    const std::int64_t c = 8, o = 12, hw = 9;
    const cuda::ConvGeometry dw = geometry(2, c, hw, c, 3, stride, 1, c);
    const cuda::ConvGeometry pw = geometry(2, c, dw.y[2], o, 1, 1, 0, 1);
    const cuda::ConvEpilogue dw_epilogue{true, false, "Clip", {0.0f, 6.0f}};
    REQUIRE(cuda::depth_first_pair(dw, dw_epilogue, pw));
    CHECK_FALSE(cuda::depth_first_pair(pw, dw_epilogue, dw));
    const bool residual = stride == 2;
    // The CPU's y: Conv (depthwise) -> Clip -> Conv (pointwise) [-> Add z -> Relu].
    Graph g;
    g.add_input("x", DType::Float32, {dw.x.begin(), dw.x.end()});
    g.add_input("z", DType::Float32, {pw.y.begin(), pw.y.end()});
    g.add_initializer("wd", device_test::ramp(dw.w, 0.5f, 1));
    g.add_initializer("bd", device_test::ramp({c}, 0.3f, 2));
    g.add_initializer("wp", device_test::ramp(pw.w, 0.5f, 3));
    g.add_initializer("bp", device_test::ramp({o}, 0.3f, 4));
    g.add_initializer("lo", Tensor::scalar<float>(0.0f));
    g.add_initializer("hi", Tensor::scalar<float>(6.0f));
    const std::vector<std::int64_t> pads = {1, 1, 1, 1};
    g.add_node("Conv", {"x", "wd", "bd"}, {"d"}, {{"group", c}, {"strides", std::vector<std::int64_t>{stride, stride}}, {"pads", pads}});
    g.add_node("Clip", {"d", "lo", "hi"}, {"d6"});
    g.add_node("Conv", {"d6", "wp", "bp"}, {"p"});
    std::string out = "p";
    if (residual) {
      g.add_node("Add", {"p", "z"}, {"pz"});
      g.add_node("Relu", {"pz"}, {"y"});
      out = "y";
    }
    g.add_output(out);
    const Tensor x = device_test::ramp(dw.x, 1.0f, 5), z = device_test::ramp(pw.y, 0.4f, 6);
    SessionOptions so;
    so.optimizer.level = OptimizationLevel::None;
    const Graph graph = g;
    Session cpu(std::move(g), so);
    const Tensor want = cpu.run({{"x", x}, {"z", z}}).at(out);
    std::vector<cuda::CudaConvConfig> configs;
    for (const auto& config : sampled_configs(pw, 40))
      if (config.stage_ic > 0 && configs.size() < 4) configs.push_back(config);
    REQUIRE(configs.size() == 4);
    for (const auto& config : configs) {
      INFO("stride " << stride << " " << config.describe());
      const auto printed = cuda::depth_first_conv_kernel(dw, dw_epilogue, pw, config, true, residual, residual ? "Relu" : "", {});
      std::string why;
      const auto kernel = codegen::test::build_emulated(printed, printed.symbol, &why);
      INFO(why);
      REQUIRE(kernel);
      Tensor y = Tensor::zeros(DType::Float32, pw.y);
      auto ptr = [&](const char* name) { return const_cast<float*>(graph.initializer(graph.find_value(name))->data<float>()); };
      std::vector<float*> args = {const_cast<float*>(x.data<float>()), ptr("wd"), ptr("bd"), ptr("wp"), ptr("bp")};
      if (residual) args.push_back(const_cast<float*>(z.data<float>()));
      args.push_back(y.data<float>());
      reinterpret_cast<codegen::test::Entry>(kernel->entry)(args.data(), nullptr, 1);
      CHECK_FALSE(codegen::test::emulation_diverged(*kernel));
      CHECK(testing::compare_allclose(y, want, 1e-5, 1e-5).empty());
    }
    CHECK_THROWS_AS(cuda::depth_first_conv_kernel(dw, dw_epilogue, pw, cuda::CudaConvConfig{}, true, false, "", {}),
                    std::invalid_argument);  // no stage_ic: the depthwise values would have nowhere to live
  }
}

TEST_CASE("generated CUDA convolutions and element-wise kernels compile with NVRTC within the limits", "[cuda][codegen]") {
  std::string why;
  const codegen::Nvrtc* nvrtc = codegen::Nvrtc::get(&why);
  if (!nvrtc) {
    WARN("NVRTC is not on this machine, nothing compiled: " << why);
    return;
  }
  // ResNet-50's 3x3 convolution of its second stage and MobileNetV2's depthwise one.
  const std::vector<cuda::ConvGeometry> shapes = {geometry(8, 128, 28, 128, 3, 1, 1, 1), geometry(1, 144, 56, 144, 3, 2, 1, 144)};
  for (int sm : {80, 90}) {
    const codegen::CudaArchLimits limits = codegen::cuda_arch_limits(sm);
    for (const auto& g : shapes)
      for (const auto& config : sampled_configs(g, 4)) {
        const auto printed = cuda::conv_kernel(g, config, true, true, "Relu", {});
        INFO(printed.symbol << " sm_" << sm);
        const auto cubin = nvrtc->compile(printed.source, printed.symbol, sm);
        REQUIRE(cubin.resources.registers > 0);
        CHECK(cubin.resources.registers * printed.threads <= limits.registers_per_block);
        // What the schedule's tiles take, and on sm_90 the kilobyte the driver reserves.
        CHECK(codegen::cubin_shared_bytes(cubin.cubin) >= cuda::conv_shared_bytes(g, config));
        CHECK(codegen::cubin_shared_bytes(cubin.cubin) <= cuda::conv_shared_bytes(g, config) + (sm >= 90 ? 1024 : 0));
        CHECK(cubin.resources.shared_bytes <= limits.shared_bytes_per_block);
        CHECK(cubin.resources.spill_bytes <= 0);  // -1: this NVRTC did not report it
      }
    // MobileNetV2's 144-channel depthwise convolution and the projection that reads it, as one kernel.
    const cuda::ConvGeometry dw = geometry(1, 144, 56, 144, 3, 1, 1, 144), pw = geometry(1, 144, 56, 24, 1, 1, 0, 1);
    int depth_first = 0;
    for (const auto& config : sampled_configs(pw, 60)) {
      if (config.stage_ic == 0 || depth_first == 3) continue;
      ++depth_first;
      const auto printed = cuda::depth_first_conv_kernel(dw, {true, false, "Clip", {0.0f, 6.0f}}, pw, config, true, false, "", {});
      INFO(printed.symbol << " sm_" << sm);
      const auto cubin = nvrtc->compile(printed.source, printed.symbol, sm);
      CHECK(cubin.resources.registers * printed.threads <= limits.registers_per_block);
      CHECK(codegen::cubin_shared_bytes(cubin.cubin) <= limits.shared_bytes_per_block + (sm >= 90 ? 1024 : 0));
    }
    CHECK(depth_first == 3);
    const auto add = cuda::elementwise_kernel("add", {8, 64, 56, 56}, {{8, 64, 56, 56}, {1, 64, 1, 1}},
                                              [](const std::vector<codegen::Expr>& v) { return v[0] + v[1]; });
    CHECK(nvrtc->compile(add.source, add.symbol, sm).resources.registers > 0);
    for (const bool centred : {false, true}) {  // BERT's layer norms at batch 8
      const auto parts = cuda::row_partial_sums_kernel(1024, 768, cuda::row_parts(768), centred);
      CHECK(nvrtc->compile(parts.source, parts.symbol, sm).resources.registers > 0);
    }
  }
}

TEST_CASE("generated element-wise kernels broadcast as numpy does under host emulation", "[cuda][codegen]") {
  const Shape out = {2, 3, 4, 5};
  const std::vector<Shape> operands = {{2, 3, 4, 5}, {3, 1, 5}, {1}};
  const auto printed = cuda::elementwise_kernel("chain", out, operands, [](const std::vector<codegen::Expr>& v) {
    return cuda::activation_expr("LeakyRelu", {0.1f}, v[0] * v[1] - v[2]);
  });
  std::string why;
  const auto kernel = codegen::test::build_emulated(printed, "chain", &why);
  INFO(why);
  REQUIRE(kernel);
  const Tensor a = device_test::ramp(operands[0], 1, 1), b = device_test::ramp(operands[1], 1, 2), c = device_test::ramp(operands[2], 1, 3);
  Tensor y = Tensor::zeros(DType::Float32, out);
  std::vector<float*> args = {const_cast<float*>(a.data<float>()), const_cast<float*>(b.data<float>()),
                              const_cast<float*>(c.data<float>()), y.data<float>()};
  reinterpret_cast<codegen::test::Entry>(kernel->entry)(args.data(), nullptr, 1);
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j)
      for (std::int64_t k = 0; k < 4; ++k)
        for (std::int64_t l = 0; l < 5; ++l) {
          const float v = a.data<float>()[((i * 3 + j) * 4 + k) * 5 + l] * b.data<float>()[j * 5 + l] - c.data<float>()[0];
          const float want = v < 0 ? 0.1f * v : v;
          CHECK(std::fabs(y.data<float>()[((i * 3 + j) * 4 + k) * 5 + l] - want) <= 1e-6f);
        }
}

TEST_CASE("generated CUDA products match a direct computation under host emulation, batched or not", "[cuda][codegen]") {
  for (const bool batched : {false, true}) {
    const cuda::ProductGeometry g{batched ? 3 : 1, 13, 37, 19, batched};
    const Tensor a = device_test::ramp({g.batch, g.m, g.k}, 1.0f, 1), bias = device_test::ramp({g.n}, 0.5f, 3);
    const Tensor b = device_test::ramp(batched ? Shape{g.batch, g.k, g.n} : Shape{g.k, g.n}, 0.5f, 2);
    const Tensor z = device_test::ramp({g.batch, g.m, g.n}, 0.3f, 4);
    std::vector<double> want(static_cast<std::size_t>(g.batch * g.m * g.n));
    for (std::int64_t n = 0; n < g.batch; ++n)
      for (std::int64_t i = 0; i < g.m; ++i)
        for (std::int64_t j = 0; j < g.n; ++j) {
          double acc = 0;
          for (std::int64_t k = 0; k < g.k; ++k)
            acc += double(a.data<float>()[(n * g.m + i) * g.k + k]) * b.data<float>()[((batched ? n : 0) * g.k + k) * g.n + j];
          const double v = acc + bias.data<float>()[j] + z.data<float>()[(n * g.m + i) * g.n + j];
          want[static_cast<std::size_t>((n * g.m + i) * g.n + j)] = v > 0 ? v : 0;
        }
    int checked = 0;
    for (const auto& knob_m : std::vector<std::array<std::int64_t, 5>>{
             {4, 2, 8, 2, 0}, {8, 1, 16, 1, 0}, {2, 4, 32, 1, 0}, {16, 2, 4, 4, 0}, {4, 2, 8, 2, 8}, {8, 1, 16, 1, 4}, {16, 2, 4, 4, 32}}) {
      const cuda::CudaProductConfig c{knob_m[0], knob_m[1], knob_m[2], knob_m[3], knob_m[4]};
      if (!cuda::cuda_product_config_valid(g, c)) continue;
      ++checked;
      const auto printed = cuda::product_kernel(g, c, true, true, "Relu", {});
      const search::GpuLaunch l = cuda::product_launch(g, c, 32);
      CHECK(l.threads == printed.threads);
      CHECK(l.blocks == printed.grid);
      std::string why;
      const auto kernel = codegen::test::build_emulated(printed, printed.symbol, &why);
      INFO(why);
      REQUIRE(kernel);
      Tensor y = Tensor::zeros(DType::Float32, {g.batch, g.m, g.n});
      std::vector<float*> args = {const_cast<float*>(a.data<float>()), const_cast<float*>(b.data<float>()),
                                  const_cast<float*>(bias.data<float>()), const_cast<float*>(z.data<float>()), y.data<float>()};
      reinterpret_cast<codegen::test::Entry>(kernel->entry)(args.data(), nullptr, 1);
      CHECK_FALSE(codegen::test::emulation_diverged(*kernel));
      std::size_t bad = 0;
      for (std::size_t e = 0; e < want.size(); ++e) bad += !(std::fabs(y.data<float>()[e] - want[e]) <= 1e-4 * (1 + std::fabs(want[e])));
      CHECK(bad == 0);
    }
    CHECK(checked >= 5);
  }
}

TEST_CASE("element-wise chains and trees become one generated kernel that matches the CPU under host emulation", "[cuda][codegen]") {
  // y = Clip(Relu(x + bias) * Sigmoid(x), 0, 0.7) - s is one group; t = Tanh(y) reads a region
  // output and stays apart, as does u = x * x's reader of a value read twice.
  Graph g;
  const Shape xs = {2, 3, 4, 5};
  g.add_input("x", DType::Float32, {2, 3, 4, 5});
  g.add_initializer("bias", device_test::ramp({1, 3, 1, 1}, 0.5f, 2));
  g.add_initializer("s", device_test::ramp({5}, 0.3f, 3));
  g.add_initializer("lo", Tensor::scalar<float>(0.0f));
  g.add_initializer("hi", Tensor::scalar<float>(0.7f));
  g.add_node("Add", {"x", "bias"}, {"a"});
  g.add_node("Relu", {"a"}, {"r"});
  g.add_node("Sigmoid", {"x"}, {"sg"});
  g.add_node("Mul", {"r", "sg"}, {"m"});
  g.add_node("Clip", {"m", "lo", "hi"}, {"c"});
  g.add_node("Sub", {"c", "s"}, {"y"});
  g.add_node("Tanh", {"y"}, {"t"});
  g.add_node("Abs", {"x"}, {"ab"});
  g.add_node("Mul", {"ab", "ab"}, {"u"});
  g.add_output("y");
  g.add_output("t");
  g.add_output("u");
  for (const Node& n : g.nodes()) g.mutable_value(n.outputs[0]).dims = DimList{2, 3, 4, 5};  // as a region's body has them
  const std::vector<std::size_t> roots = cuda::elementwise_group_roots(g);
  CHECK(roots == std::vector<std::size_t>{5, 5, 5, 5, 5, 5, 6, 7, 8});
  const cuda::ElementwiseGroup group = cuda::elementwise_group_kernel(g, roots, 5);
  REQUIRE(group.inputs.size() == 3);  // x, bias, s: the values the group reads from outside
  CHECK(g.value(group.inputs[0]).name == "x");
  CHECK(g.value(group.inputs[1]).name == "bias");
  CHECK(g.value(group.inputs[2]).name == "s");
  INFO(group.printed.source);
  std::string why;
  const auto kernel = codegen::test::build_emulated(group.printed, group.printed.symbol, &why);
  INFO(why);
  REQUIRE(kernel);
  const Tensor x = device_test::ramp(xs, 2.0f, 1);
  Tensor y = Tensor::zeros(DType::Float32, xs);
  std::vector<float*> args = {const_cast<float*>(x.data<float>()), const_cast<float*>(g.initializer(group.inputs[1])->data<float>()),
                              const_cast<float*>(g.initializer(group.inputs[2])->data<float>()), y.data<float>()};
  reinterpret_cast<codegen::test::Entry>(kernel->entry)(args.data(), nullptr, 1);
  SessionOptions o;
  o.optimizer.level = OptimizationLevel::None;
  Session cpu(std::move(g), o);
  CHECK(testing::compare_allclose(y, cpu.run({{"x", x}}).at("y"), 1e-6, 1e-6).empty());
}

TEST_CASE("generated CUDA kernels keep NaN through Relu, Max, Min, Clip and LeakyRelu, as the reference does", "[cuda][codegen]") {
  const Shape shape = {4};
  const auto printed = cuda::elementwise_kernel("nan_chain", shape, {shape, shape}, [](const std::vector<codegen::Expr>& v) {
    using namespace codegen;
    return cuda::activation_expr("LeakyRelu", {0.1f}, min(max(relu(v[0]), v[1]), constant(6.0f)));
  });
  std::string why;
  const auto kernel = codegen::test::build_emulated(printed, "nan_chain", &why);
  INFO(why);
  REQUIRE(kernel);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> a = {nan, 1.0f, -2.0f, 3.0f}, b = {0.0f, nan, -1.0f, 8.0f}, y(4);
  std::vector<float*> args = {a.data(), b.data(), y.data()};
  reinterpret_cast<codegen::test::Entry>(kernel->entry)(args.data(), nullptr, 1);
  CHECK(std::isnan(y[0]));
  CHECK(std::isnan(y[1]));
  CHECK(y[2] == 0.0f);  // max(relu(-2), -1) = 0
  CHECK(y[3] == 6.0f);
}

TEST_CASE("generated row statistics and the exact GELU match the CPU under host emulation", "[cuda][codegen]") {
  // Rows of 50 columns are summed in 2 parts, BERT's 768 in 32, a prime count in one.
  CHECK(cuda::row_parts(50) == 2);
  CHECK(cuda::row_parts(768) == 32);
  CHECK(cuda::row_parts(37) == 1);
  const std::int64_t rows = 37;
  std::string why;
  auto run = [&](const codegen::PrintedCudaKernel& k, std::vector<float*> args) {
    const auto kernel = codegen::test::build_emulated(k, k.symbol, &why);
    INFO(why);
    REQUIRE(kernel);
    reinterpret_cast<codegen::test::Entry>(kernel->entry)(args.data(), nullptr, 1);
  };
  for (const std::int64_t cols : {50, 768, 37}) {
    const std::int64_t parts = cuda::row_parts(cols);
    INFO(cols << " columns in " << parts << " parts");
    const Tensor x = device_test::ramp({rows, cols}, 2.0f, 5);
    std::vector<float> mean(rows), rstd(rows), partial(static_cast<std::size_t>(rows * parts));
    std::vector<float> gelu(static_cast<std::size_t>(rows * cols));
    float* px = const_cast<float*>(x.data<float>());
    run(cuda::row_partial_sums_kernel(rows, cols, parts, false), {px, partial.data()});
    run(cuda::row_mean_kernel(rows, cols, parts), {partial.data(), mean.data()});
    run(cuda::row_partial_sums_kernel(rows, cols, parts, true), {px, mean.data(), partial.data()});
    run(cuda::row_rstd_kernel(rows, cols, parts, 1e-5f), {partial.data(), rstd.data()});
    run(cuda::elementwise_kernel("gelu", {rows, cols}, {{rows, cols}},
                                 [](const std::vector<codegen::Expr>& v) { return cuda::activation_expr("Gelu", {}, v[0]); }),
        {px, gelu.data()});
    for (std::int64_t r = 0; r < rows; ++r) {
      double m = 0, var = 0;
      for (std::int64_t c = 0; c < cols; ++c) m += px[r * cols + c];
      m /= cols;
      for (std::int64_t c = 0; c < cols; ++c) var += (px[r * cols + c] - m) * (px[r * cols + c] - m);
      var /= cols;
      CHECK(std::fabs(mean[static_cast<std::size_t>(r)] - m) <= 1e-5);
      CHECK(std::fabs(rstd[static_cast<std::size_t>(r)] - 1 / std::sqrt(var + 1e-5)) <= 1e-4 / std::sqrt(var + 1e-5));
      for (std::int64_t c = 0; c < cols; ++c) {
        const double v = px[r * cols + c];
        CHECK(std::fabs(gelu[static_cast<std::size_t>(r * cols + c)] - 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))) <= 1e-5);
      }
    }
  }
}

}  // namespace
}  // namespace wpk
