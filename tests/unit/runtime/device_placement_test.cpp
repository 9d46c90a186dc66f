// Device placement (runtime/device_placement.hpp) decides from the graph and the models alone:
// these tests need no GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "backends/cuda/cuda_backend_names.hpp"
#include "backends/cuda/generated_kernels.hpp"
#include "backends/cuda/support.hpp"
#include "device_graphs.hpp"
#include "runtime/device_placement.hpp"
#include "wpk/optimizer.hpp"
#include "wpk/wpk.hpp"

namespace wpk {
namespace {

Graph optimized(Graph g) {
  OptimizerOptions o;
  leave_off_cpu_only_passes(o);
  return Optimizer(o).optimize(std::move(g));
}

int regions(const Graph& g) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op_type == cuda::kRegionOp;
  return n;
}

TEST_CASE("a conv net large enough to pay for the copies becomes one device region", "[placement]") {
  Graph g = optimized(device_test::conv_net(8, 64, 56));
  int convs = 0;
  for (const Node& n : g.nodes()) convs += n.op_type == "FusedConv" || n.op_type == "Conv";
  REQUIRE(convs == 2);
  const PlacementSummary s = place_on_gpu(g, gpu_model("NVIDIA H100 80GB HBM3", 132), 2);
  CHECK(s.regions == 1);
  CHECK(s.predicted_seconds < s.predicted_cpu_seconds);
  REQUIRE(regions(g) == 1);
  const Node& region = g.nodes()[0];
  CHECK(region.domain == "com.wpk");
  CHECK(region.op_type == cuda::kRegionOp);
  const Graph& body = region.find_attr("body")->g();
  CHECK(static_cast<int>(body.nodes().size()) == s.nodes_on_gpu);
  REQUIRE(body.inputs().size() == 1);
  CHECK(body.value(body.inputs()[0]).name == "x");
  int body_convs = 0;
  for (const Node& n : body.nodes()) {
    INFO(n.op_type);
    body_convs += n.op_type == "FusedConv" || n.op_type == "Conv";
    CHECK(cuda::why_cuda_cannot_run(n, body).empty());  // the body keeps every static shape
  }
  CHECK(body_convs == convs);
  // What the region hands back is what the rest of the graph reads.
  for (ValueId v : region.outputs) {
    bool read = std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end();
    for (const Node& n : g.nodes()) read |= std::find(n.inputs.begin(), n.inputs.end(), v) != n.inputs.end();
    CHECK(read);
  }
}

TEST_CASE("a GPU session leaves element-wise chains unfused for its regions, which run them", "[placement]") {
  Graph g;
  g.add_input("x", DType::Float32, {4, 64});
  g.add_input("v", DType::Float32, {4, 64});
  g.add_node("Relu", {"x"}, {"r"});
  g.add_node("Mul", {"r", "v"}, {"m"});
  g.add_node("Sigmoid", {"m"}, {"y"});
  g.add_output("y");
  Graph o = optimized(std::move(g));
  REQUIRE(o.nodes().size() == 3);
  for (const Node& n : o.nodes()) {
    INFO(n.op_type);
    CHECK(cuda::why_cuda_cannot_run(n, o).empty());
  }
  GpuModel free = gpu_model("test GPU", 132);  // copies and launches priced at nothing
  free.link_seconds = 0, free.link_bytes_per_second = 1e30, free.launch_seconds = 0;
  const PlacementSummary s = place_on_gpu(o, free, 1);
  CHECK(s.regions == 1);
  CHECK(s.nodes_on_gpu == 3);
}

TEST_CASE("a convolution joins one depth-first group at most, even where a chain could pair it twice", "[placement]") {
  // One-channel convolutions look depthwise and one-group alike: x -> a -> b -> y could pair
  // (a, b) and (b, y), and the second would read the output the first no longer computes.
  Graph g;
  g.add_input("x", DType::Float32, {1, 1, 8, 8});
  for (const char* w : {"w1", "w2", "w3"}) g.add_initializer(w, Tensor::from_vector<float>(std::vector<float>(9, 0.5f), {1, 1, 3, 3}));
  const std::vector<std::int64_t> pads = {1, 1, 1, 1};
  g.add_node("Conv", {"x", "w1"}, {"a"}, {{"pads", pads}});
  g.add_node("Conv", {"a", "w2"}, {"b"}, {{"pads", pads}});
  g.add_node("Conv", {"b", "w3"}, {"y"}, {{"pads", pads}});
  g.add_output("y");
  const Graph o = optimized(std::move(g));
  REQUIRE(o.nodes().size() == 3);
  const std::vector<cuda::DepthFirstNodes> groups = cuda::depth_first_groups(o);
  REQUIRE(groups.size() == 1);
  CHECK(groups[0].depthwise == 0);
  CHECK(groups[0].pointwise == 1);
}

TEST_CASE("placement keeps on the CPU what the GPU cannot run, or what would not pay for its copies", "[placement]") {
  SECTION("a tiny graph: the copies cost more than the GPU saves") {
    Graph g = optimized(device_test::conv_net(1, 4, 8));
    const PlacementSummary s = place_on_gpu(g, gpu_model("NVIDIA H100 80GB HBM3", 132), 2);
    CHECK(s.regions == 0);
    CHECK(regions(g) == 0);
  }
  SECTION("symbolic shapes") {
    Graph g = device_test::conv_net(8, 64, 56);
    g.mutable_value(g.value_id("x")).dims = DimList{Dim("N"), 64, 56, 56};
    g = optimized(std::move(g));
    CHECK(place_on_gpu(g, gpu_model("NVIDIA H200", 132), 2).regions == 0);
  }
  SECTION("an op the CUDA backend lacks splits the graph into two regions around it") {
    Graph g = device_test::conv_net(8, 64, 56);
    // A Floor of the pooled features between the two halves.
    auto& nodes = g.mutable_nodes();
    for (Node& n : nodes)
      if (n.op_type == "Add") n.inputs[1] = g.add_node("Floor", {"p1"}, {"sm"}).outputs[0];
    // add_node appended Floor last: move it before the Add.
    Node floor = g.mutable_nodes().back();
    g.mutable_nodes().pop_back();
    auto& list = g.mutable_nodes();
    for (std::size_t i = 0; i < list.size(); ++i)
      if (list[i].op_type == "Conv" && i > 0) {
        list.insert(list.begin() + static_cast<std::ptrdiff_t>(i), floor);
        break;
      }
    g = optimized(std::move(g));
    const PlacementSummary s = place_on_gpu(g, gpu_model("NVIDIA H100 80GB HBM3", 132), 2);
    CHECK(s.regions == 2);
    bool floor_on_cpu = false;
    for (const Node& n : g.nodes()) floor_on_cpu |= n.op_type == "Floor";
    CHECK(floor_on_cpu);
  }
}

TEST_CASE("the models' heavy nodes all go to the GPU: convolutions, products, attention and layer norms", "[placement][model]") {
  for (const char* name : {"resnet50", "mobilenet_v2", "bert_base"}) {
    INFO(name);
    Graph g = load(std::string(WPK_TEST_MODELS_DIR) + "/" + name + ".onnx");
    // As a session with fixed_dims {N: 1} sees it.
    for (const auto* values : {&g.inputs(), &g.outputs()})
      for (ValueId v : *values)
        for (Dim& d : *g.mutable_value(v).dims)
          if (d.symbol == "N") d = Dim(1);
    g = optimized(std::move(g));
    int heavy = 0;
    for (const Node& n : g.nodes())
      heavy += n.op_type == "FusedConv" || n.op_type == "Conv" || n.op_type == "FusedMatMul" || n.op_type == "Attention" ||
               n.op_type == "LayerNormalization";
    const PlacementSummary s = place_on_gpu(g, gpu_model("NVIDIA H100 80GB HBM3", 132), 2);
    CHECK(s.regions >= 1);
    int on_gpu = 0;
    std::size_t depth_first = 0;
    for (const Node& n : g.nodes()) {
      CHECK(n.op_type != "FusedConv");
      CHECK(n.op_type != "FusedMatMul");
      CHECK(n.op_type != "Attention");
      if (n.op_type != cuda::kRegionOp) continue;
      const Graph& body = n.find_attr("body")->g();
      for (const Node& b : body.nodes())
        on_gpu += b.op_type == "FusedConv" || b.op_type == "Conv" || b.op_type == "FusedMatMul" || b.op_type == "Attention" ||
                  b.op_type == "LayerNormalization";
      depth_first += cuda::depth_first_groups(body).size();
    }
    CHECK(on_gpu == heavy);
    // Each of MobileNetV2's 17 inverted residual blocks ends in a depthwise and a projecting
    // convolution that a generated kernel may compute as one; the other two models have none.
    CHECK(depth_first == (std::string(name) == "mobilenet_v2" ? 17u : 0u));
    UNSCOPED_INFO(name << ": " << s.nodes_on_gpu << " of " << s.nodes << " nodes in " << s.regions << " regions");
  }
}

TEST_CASE("the CUDA backend's support rules refuse by name", "[placement]") {
  Graph g;
  g.add_input("x", DType::Float32, {1, 4, 8, 8});
  g.add_input("i", DType::Int64, {4});
  g.add_initializer("w", device_test::ramp({4, 4, 3, 3}, 1, 0));
  g.add_node("Conv", {"x", "w"}, {"y"}, {{"pads", std::vector<std::int64_t>{0, 0, 1, 1}}});
  g.add_node("Neg", {"i"}, {"z"});
  g.add_node("MaxPool", {"x"}, {"p"}, {{"kernel_shape", std::vector<std::int64_t>{2, 2}}, {"ceil_mode", std::int64_t(1)}});
  g.add_node("Softmax", {"x"}, {"s"}, {{"axis", std::int64_t(1)}});
  for (const char* out : {"y", "z", "p", "s"}) g.add_output(out);
  g = optimized(std::move(g));
  std::map<std::string, std::string> why;
  for (const Node& n : g.nodes()) why[n.op_type] = cuda::why_cuda_cannot_run(n, g);
  CHECK(why.at("Conv") == "padded unevenly (cuDNN pads both sides alike)");
  CHECK(why.at("Neg") == "a value that is not float32 of a static shape");
  CHECK(why.at("MaxPool") == "ceil_mode");
  CHECK(why.at("Softmax") == "Softmax over other than the last axis");

  Graph h;
  h.add_input("q", DType::Float32, {2, 4, 8, 16});
  h.add_input("kv", DType::Float32, {2, 1, 8, 16});  // one head for all of Q's: multi-query
  h.add_input("x", DType::Float32, {2, 8, 16});
  h.add_initializer("scale", device_test::ramp({8, 16}, 1, 1));
  Node& mqa = h.add_node("Attention", {"q", "kv", "kv"}, {"a"}, {{"scale", 0.25f}});
  mqa.domain = "com.wpk";
  h.add_node("LayerNormalization", {"x", "scale"}, {"n"}, {{"axis", std::int64_t(1)}});
  h.add_node("LayerNormalization", {"x", "scale"}, {"m"}, {{"axis", std::int64_t(2)}});  // scale [8, 16] for 16 values
  for (const char* out : {"a", "n", "m"}) h.add_output(out);
  h = optimized(std::move(h));
  std::map<std::string, std::string> refused;
  for (const Node& n : h.nodes()) refused[n.outputs.empty() ? n.name : h.value(n.outputs[0]).name] = cuda::why_cuda_cannot_run(n, h);
  CHECK(refused.at("a") == "Attention whose K or V broadcast batch or head dims");
  CHECK(refused.at("n").empty());
  CHECK(refused.at("m") == "LayerNormalization whose Scale or B broadcast");
}

TEST_CASE("device cuda without a GPU is a clear error, and auto runs on the CPU", "[placement]") {
  SessionOptions cuda;
  cuda.device = Device::CUDA;
  SessionOptions automatic;
  automatic.device = Device::Auto;
  try {
    // A machine with a GPU: the session loads and computes what the CPU does.
    Session s(device_test::conv_net(1, 4, 8), cuda);
    const TensorMap in = device_test::conv_net_inputs(1, 4, 8);
    const Tensor a = s.run(in).at("y"), b = Session(device_test::conv_net(1, 4, 8), SessionOptions{}).run(in).at("y");
    REQUIRE(a.shape() == b.shape());
    for (std::int64_t i = 0; i < a.numel(); ++i) CHECK(std::fabs(a.data<float>()[i] - b.data<float>()[i]) <= 1e-5f);
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Unsupported);
    CHECK(std::string(e.what()).find("device cuda: ") != std::string::npos);
    Session fallback(device_test::conv_net(1, 4, 8), automatic);
    Session cpu(device_test::conv_net(1, 4, 8), SessionOptions{});
    const TensorMap in = device_test::conv_net_inputs(1, 4, 8);
    const Tensor a = fallback.run(in).at("y"), b = cpu.run(in).at("y");
    REQUIRE(a.shape() == b.shape());
    CHECK(std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0);
  }
}

TEST_CASE("disabled_kernels names the CUDA backend's library variants, and nothing else of it", "[placement]") {
  // Without a GPU the session runs on the CPU; the names are checked all the same, so a service's
  // configuration fails where it is wrong, not on the first machine with a GPU.
  SessionOptions o;
  o.disabled_kernels = {std::string("cuda:") + cuda::kCublasLtVariant, std::string("cuda:") + cuda::kCudnnGraphVariant};
  CHECK_NOTHROW(Session(device_test::conv_net(1, 3, 9), o));
  o.disabled_kernels = {"cuda:cudnn"};
  CHECK_THROWS_WITH(Session(device_test::conv_net(1, 3, 9), o), Catch::Contains("it has cublaslt, cudnn_fused_graph"));
}

}  // namespace
}  // namespace wpk
