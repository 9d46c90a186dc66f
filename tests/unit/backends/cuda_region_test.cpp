// The CUDA backend on a GPU: device regions against the CPU on small graphs of every op it runs,
// and whole models placed by the session against PyTorch. On a machine without a GPU each case
// says so and checks nothing else (device placement's own tests need none).
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <thread>

#include "support/tensor_compare.hpp"
#include "../runtime/device_graphs.hpp"
#include "wpk/optimizer.hpp"
#include "wpk/wpk.hpp"
#ifdef WPK_WITH_CUDA
#include "backends/cuda/cuda_api.hpp"
#include "backends/cuda/device.hpp"
#endif
#include "backends/cuda/cuda_backend_names.hpp"
#include "runtime/device_placement.hpp"

namespace wpk {
namespace {

bool have_gpu() {
#ifdef WPK_WITH_CUDA
  const std::string why = cuda::why_no_cuda_device();
  if (why.empty() || std::getenv("WPK_PRETEND_GPU")) return true;
  WARN("no GPU here, the CUDA backend is not run: " << why);
#else
  WARN("this build has no CUDA backend");
#endif
  return false;
}

// `g` optimized as a CUDA session does, with every node the backend runs on the GPU (links and
// launches priced at nothing), as a graph a CPU session runs with its regions on the device.
Graph all_on_gpu(Graph g, int* regions) {
  OptimizerOptions o;
  leave_off_cpu_only_passes(o);
  g = Optimizer(o).optimize(std::move(g));
  GpuModel free = gpu_model("test GPU", 132);
  free.link_seconds = 0, free.link_bytes_per_second = 1e30, free.launch_seconds = 0;
  *regions = place_on_gpu(g, free, 1).regions;
  return g;
}

// With `tune`, the regions search their generated convolutions' schedules (as a tuning session's
// placement asks them to) before the comparison.
void check_matches_cpu(const Graph& model, const TensorMap& inputs, double tolerance, bool tune = false) {
  int regions = 0;
  Graph placed = all_on_gpu(model, &regions);
  if (tune)
    for (Node& n : placed.mutable_nodes())
      if (n.op_type == cuda::kRegionOp) {
        n.attributes.emplace("tune_algorithm", Attribute("ga"));
        n.attributes.emplace("tune_trials", Attribute(std::int64_t(6)));
      }
  Session gpu(std::move(placed), SessionOptions{});
  Session cpu(model, SessionOptions{});
  CHECK(regions >= 1);
  const TensorMap want = cpu.run(inputs);
  for (int round = 0; round < 2; ++round) {  // the second run reuses everything the first set up
    const TensorMap got = gpu.run(inputs);
    for (const auto& [name, t] : want) {
      INFO(name << " round " << round);
      REQUIRE(got.count(name));
      REQUIRE(got.at(name).shape() == t.shape());
      const double err = testing::relative_l2_error(got.at(name), t);
      INFO("relative L2 error " << err);
      CHECK(err <= tolerance);
    }
  }
  bool region_ran = false;
  for (const auto& step : gpu.describe().steps) region_ran |= step.backend.rfind("cuda", 0) == 0;
  CHECK(region_ran);
}

TEST_CASE("device regions match the CPU: convolutions, pooling, residuals, clips and a Gemm", "[cuda]") {
  if (!have_gpu()) return;
  check_matches_cpu(device_test::conv_net(2, 16, 20), device_test::conv_net_inputs(2, 16, 20), 1e-5);
  check_matches_cpu(device_test::conv_net(1, 3, 9), device_test::conv_net_inputs(1, 3, 9), 1e-5);
}

TEST_CASE("a region leaves out the library variants disabled_kernels names, and still matches the CPU", "[cuda]") {
  if (!have_gpu()) return;
  int regions = 0;
  Graph placed = all_on_gpu(device_test::conv_net(2, 16, 20), &regions);
  for (Node& n : placed.mutable_nodes())
    if (n.op_type == cuda::kRegionOp)
      n.attributes.emplace("disabled_variants",
                           Attribute(std::vector<std::string>{cuda::kCublasLtVariant, cuda::kCudnnGraphVariant}));
  Session gpu(std::move(placed), SessionOptions{});
  Session cpu(device_test::conv_net(2, 16, 20), SessionOptions{});
  const TensorMap inputs = device_test::conv_net_inputs(2, 16, 20);
  const TensorMap want = cpu.run(inputs), got = gpu.run(inputs);
  for (const auto& [name, t] : want) CHECK(testing::relative_l2_error(got.at(name), t) <= 1e-5);
  std::string kernels;
  for (const auto& step : gpu.describe().steps) kernels += step.backend + " ";
  INFO(kernels);
  CHECK(kernels.find("cuda") != std::string::npos);
  CHECK(kernels.find("cublaslt") == std::string::npos);
  CHECK(kernels.find("fused_graph") == std::string::npos);
}

TEST_CASE("tuned device regions, generated convolutions among their candidates, match the CPU", "[cuda]") {
  if (!have_gpu()) return;
  check_matches_cpu(device_test::conv_net(2, 16, 20), device_test::conv_net_inputs(2, 16, 20), 1e-5, true);
}

TEST_CASE("a tuned region with a depthwise convolution read by a pointwise one matches the CPU", "[cuda]") {
  if (!have_gpu()) return;
  using device_test::ramp;
  // MobileNetV2's block end: depthwise 3x3 -> Clip -> 1x1 projection -> + residual; tuning may
  // compute the pair as one depth-first kernel (its output checked against the two ops first).
  const std::int64_t c = 32, o = 24, hw = 28;
  Graph g;
  g.add_input("x", DType::Float32, {2, c, hw, hw});
  g.add_input("z", DType::Float32, {2, o, hw, hw});
  g.add_initializer("wd", ramp({c, 1, 3, 3}, 0.5f, 1));
  g.add_initializer("bd", ramp({c}, 0.3f, 2));
  g.add_initializer("wp", ramp({o, c, 1, 1}, 0.5f, 3));
  g.add_initializer("bp", ramp({o}, 0.3f, 4));
  g.add_initializer("lo", Tensor::scalar<float>(0.0f));
  g.add_initializer("hi", Tensor::scalar<float>(6.0f));
  g.add_node("Conv", {"x", "wd", "bd"}, {"d"}, {{"group", c}, {"pads", std::vector<std::int64_t>{1, 1, 1, 1}}});
  g.add_node("Clip", {"d", "lo", "hi"}, {"d6"});
  g.add_node("Conv", {"d6", "wp", "bp"}, {"p"});
  g.add_node("Add", {"p", "z"}, {"y"});
  g.add_output("y");
  check_matches_cpu(g, {{"x", ramp({2, c, hw, hw}, 1.0f, 5)}, {"z", ramp({2, o, hw, hw}, 0.4f, 6)}}, 1e-5, true);
}

TEST_CASE("device regions match the CPU: broadcast element-wise ops, transposes and products", "[cuda]") {
  if (!have_gpu()) return;
  using device_test::ramp;
  Graph g;
  g.add_input("a", DType::Float32, {2, 3, 4, 5});
  g.add_input("b", DType::Float32, {3, 1, 5});
  g.add_initializer("w", ramp({5, 6}, 0.5f, 1));
  g.add_initializer("wb", ramp({2, 3, 6, 7}, 0.5f, 2));
  g.add_initializer("g", ramp({8, 6}, 0.5f, 3));
  g.add_initializer("gc", ramp({6}, 0.5f, 4));
  g.add_initializer("shape", Tensor::from_vector<std::int64_t>({8, 21}, {2}));
  g.add_node("Add", {"a", "b"}, {"s"});
  g.add_node("Mul", {"s", "b"}, {"m"});
  g.add_node("Sigmoid", {"m"}, {"sg"});
  g.add_node("Sub", {"sg", "a"}, {"d"});
  g.add_node("Div", {"d", "b"}, {"q"});
  g.add_node("Max", {"q", "a"}, {"mx"});
  g.add_node("Tanh", {"mx"}, {"t"});
  g.add_node("LeakyRelu", {"t"}, {"lr"}, {{"alpha", 0.2f}});
  g.add_node("MatMul", {"lr", "w"}, {"p"});           // [2,3,4,6], B 2-D
  g.add_node("Transpose", {"p"}, {"pt"}, {{"perm", std::vector<std::int64_t>{0, 1, 3, 2}}});  // [2,3,6,4]
  g.add_node("Transpose", {"pt"}, {"pb"}, {{"perm", std::vector<std::int64_t>{0, 1, 3, 2}}});
  g.add_node("MatMul", {"pb", "wb"}, {"pm"});         // [2,3,4,7], batched
  g.add_node("Reshape", {"pm", "shape"}, {"r"});
  g.add_node("Gemm", {"r", "g", "gc"}, {"y"}, {{"transA", std::int64_t(1)}, {"alpha", 0.5f}, {"beta", 2.0f}});
  // Gemm reads r as [8, 21] transposed: 21 x 8 times 8 x 6.
  g.add_output("y");
  g.add_output("pt");
  check_matches_cpu(g, {{"a", ramp({2, 3, 4, 5}, 1.0f, 7)}, {"b", ramp({3, 1, 5}, 1.0f, 8)}}, 1e-5);
}

TEST_CASE("a CUDA session takes inputs in GPU memory and returns outputs there", "[cuda]") {
  if (!have_gpu()) return;
#ifdef WPK_WITH_CUDA
  using device_test::ramp;
  // x feeds a device region (Relu, Mul: y) and a CPU node (Erf, which the backend lacks: e), so it
  // comes to the host; v only the region reads, so it is copied on the device.
  Graph g;
  g.add_input("x", DType::Float32, {4, 64});
  g.add_input("v", DType::Float32, {4, 64});
  g.add_node("Relu", {"x"}, {"r"});
  g.add_node("Mul", {"r", "v"}, {"y"});
  g.add_node("Erf", {"x"}, {"e"});
  g.add_output("y");
  g.add_output("e");
  const Tensor x = ramp({4, 64}, 1.0f, 2), v = ramp({4, 64}, 0.5f, 1);
  Session cpu(g, SessionOptions{});
  const TensorMap want = cpu.run({{"x", x}, {"v", v}});
  int regions = 0;
  Session gpu(all_on_gpu(g, &regions), SessionOptions{});  // placed as a CUDA session does, however small
  REQUIRE(regions == 1);
  const Tensor dx = cuda::device_tensor(DType::Float32, x.shape(), "the test's input");
  REQUIRE(cuda::driver().MemcpyHtoD(reinterpret_cast<std::uintptr_t>(dx.raw()), x.raw(), x.nbytes()) == 0);
  const Tensor dv = cuda::device_tensor(DType::Float32, v.shape(), "the test's input");
  REQUIRE(cuda::driver().MemcpyHtoD(reinterpret_cast<std::uintptr_t>(dv.raw()), v.raw(), v.nbytes()) == 0);
  CHECK(dx.on_device());
  CHECK_THROWS_AS(dx.data<float>(), Error);
  RunOptions on_device;
  on_device.outputs_on_device = true;
  for (const RunOptions& options : {RunOptions{}, on_device}) {
    INFO("outputs_on_device " << options.outputs_on_device);
    const TensorMap got = gpu.run({{"x", dx}, {"v", dv}}, options);
    REQUIRE(got.count("y"));
    CHECK(got.at("y").on_device() == options.outputs_on_device);
    CHECK_FALSE(got.at("e").on_device());  // the CPU computed it
    const Tensor y = got.at("y").on_device() ? cuda::copy_to_host(got.at("y")) : got.at("y");
    CHECK(testing::relative_l2_error(y, want.at("y")) <= 1e-6);
    CHECK(testing::relative_l2_error(got.at("e"), want.at("e")) <= 1e-6);
  }
  bool region_ran = false;
  for (const auto& step : gpu.describe().steps) region_ran |= step.backend.rfind("cuda", 0) == 0;
  CHECK(region_ran);
#endif
}

TEST_CASE("device regions match the CPU: attention with interleaved heads and a mask, layer norm, GELU, softmax", "[cuda]") {
  if (!have_gpu()) return;
  using device_test::ramp;
  Graph g;
  for (const char* name : {"q", "k", "v"}) g.add_input(name, DType::Float32, {2, 16, 4, 8});
  g.add_input("mask", DType::Float32, {2, 1, 1, 16});
  g.add_initializer("shape", Tensor::from_vector<std::int64_t>({2, 16, 32}, {3}));
  g.add_initializer("gamma", ramp({32}, 1.0f, 1));
  g.add_initializer("beta", ramp({32}, 0.5f, 2));
  g.add_initializer("w", ramp({32, 48}, 0.3f, 3));
  g.add_initializer("wb", ramp({48}, 0.3f, 4));
  Node& attention = g.add_node("Attention", {"q", "k", "v", "mask"}, {"a"},
                               {{"scale", 0.35f}, {"interleaved_heads", std::vector<std::int64_t>{1, 1, 1, 1}}});
  attention.domain = "com.wpk";
  g.add_node("Reshape", {"a", "shape"}, {"r"});
  g.add_node("LayerNormalization", {"r", "gamma", "beta"}, {"n"}, {{"epsilon", 1e-5f}});
  Node& ffn = g.add_node("FusedMatMul", {"n", "w", "wb"}, {"f"}, {{"activation", "Gelu"}});
  ffn.domain = "com.wpk";
  g.add_node("Softmax", {"f"}, {"y"}, {{"axis", std::int64_t(-1)}});
  g.add_output("y");
  g.add_output("a");
  Tensor mask = Tensor::zeros(DType::Float32, {2, 1, 1, 16});
  for (int t = 12; t < 16; ++t) mask.data<float>()[16 + t] = -10000.0f;  // the second image's last 4 positions
  check_matches_cpu(g, {{"q", ramp({2, 16, 4, 8}, 1, 5)}, {"k", ramp({2, 16, 4, 8}, 1, 6)}, {"v", ramp({2, 16, 4, 8}, 1, 7)},
                        {"mask", mask}}, 1e-5);
}

TEST_CASE("a CUDA session places ResNet-50, MobileNetV2 and BERT on the GPU and matches PyTorch, with concurrent runs", "[cuda][model]") {
  if (!have_gpu()) return;
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(WPK_TEST_MODELS_DIR);
  for (const char* name : {"resnet50", "mobilenet_v2", "bert_base"}) {
    INFO(name);
    Graph graph = load((dir / (std::string(name) + ".onnx")).string());
    SessionOptions options;
    options.device = Device::CUDA;
    options.fixed_dims = {{graph.value(graph.inputs().front()).dims->front().symbol, 1}};
    Session s(std::move(graph), options);
    int regions = 0;
    for (const Node& n : s.graph().nodes()) regions += n.op_type == cuda::kRegionOp;
    CHECK(regions >= 1);
    const fs::path data = dir / name / "test_data_set_0";
    TensorMap inputs;
    for (std::size_t i = 0; i < s.inputs().size(); ++i)
      inputs[s.inputs()[i].name] = load_tensor((data / ("input_" + std::to_string(i) + ".pb")).string());
    const Tensor expected = load_tensor((data / "output_0.pb").string());
    const Tensor first = s.run(inputs).at(s.outputs()[0].name);
    const double err = testing::relative_l2_error(first, expected);
    INFO("relative L2 error " << err);
    CHECK(err <= 1e-4);
    std::vector<Tensor> got(4);
    std::vector<std::thread> clients;
    for (std::size_t t = 0; t < got.size(); ++t)
      clients.emplace_back([&, t] { got[t] = s.run(inputs).at(s.outputs()[0].name); });
    for (auto& c : clients) c.join();
    for (const Tensor& t : got) CHECK(std::memcmp(t.raw(), first.raw(), first.nbytes()) == 0);
  }
}

}  // namespace
}  // namespace wpk
