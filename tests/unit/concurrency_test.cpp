// Session::run from several threads at once gives the same results as from one.
#include <catch2/catch.hpp>

#include <random>
#include <thread>

#include "support/tensor_compare.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;

TEST_CASE("concurrent runs match sequential runs", "[session][threads]") {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 16});
  std::vector<float> w(16 * 16);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& v : w) v = u(rng);
  g.add_initializer("w", Tensor::from_vector(w, {16, 16}));
  g.add_node("MatMul", {"x", "w"}, {"h"});
  g.add_node("Tanh", {"h"}, {"t"});
  g.add_node("MatMul", {"t", "w"}, {"y"});
  g.add_output("y");
  const Session s(g);

  constexpr int kThreads = 4;
  std::vector<std::vector<float>> inputs(kThreads);
  std::vector<Tensor> expected(kThreads);
  for (int i = 0; i < kThreads; ++i) {
    inputs[i].resize(static_cast<std::size_t>((i + 1) * 16));
    for (float& v : inputs[i]) v = u(rng);
    expected[i] = s.run({{"x", Tensor::borrow(inputs[i].data(), {i + 1, 16})}}).at("y");
  }
  std::vector<std::string> diffs(kThreads);
  std::vector<std::thread> pool;
  for (int i = 0; i < kThreads; ++i)
    pool.emplace_back([&, i] {
      for (int rep = 0; rep < 50 && diffs[i].empty(); ++rep) {
        Tensor y = s.run({{"x", Tensor::borrow(inputs[i].data(), {i + 1, 16})}}).at("y");
        diffs[i] = wpk::testing::compare_allclose(y, expected[i], 0, 0);
      }
    });
  for (auto& t : pool) t.join();
  for (int i = 0; i < kThreads; ++i) {
    INFO("thread " << i);
    CHECK(diffs[i] == "");
  }
}

namespace {

// Three threads each run `s` eight times on `image`; every output must equal `expected` exactly.
void check_concurrent_runs(const Session& s, const std::string& in, const Tensor& image, const std::string& out,
                           const Tensor& expected) {
  constexpr int kThreads = 3;
  std::vector<std::string> diffs(kThreads);
  std::vector<std::thread> pool;
  for (int i = 0; i < kThreads; ++i)
    pool.emplace_back([&, i] {
      for (int rep = 0; rep < 8 && diffs[i].empty(); ++rep)
        diffs[i] = wpk::testing::compare_allclose(s.run({{in, image}}).at(out), expected, 0, 0);
    });
  for (auto& t : pool) t.join();
  for (int i = 0; i < kThreads; ++i) {
    INFO("thread " << i);
    CHECK(diffs[i] == "");
  }
}

}  // namespace

TEST_CASE("concurrent runs of a convolutional model on oneDNN match a sequential run", "[session][threads][model]") {
  const std::string models = WPK_TEST_MODELS_DIR;
  const Session s(load(models + "/resnet18.onnx"));
  const Tensor image = load_tensor(models + "/resnet18/test_data_set_0/input_0.pb");
  const std::string in = s.inputs()[0].name, out = s.outputs()[0].name;
  const Tensor expected = s.run({{in, image}}).at(out);
  check_concurrent_runs(s, in, image, out, expected);
}

TEST_CASE("concurrent runs of depth-first groups run as oneDNN's two convs match a sequential run", "[session][threads][model]") {
  // Their kernels keep the depthwise output in a buffer of the calling thread: runs on several
  // threads at once must not share one.
  const std::string models = WPK_TEST_MODELS_DIR;
  SessionOptions options;
  options.disabled_kernels = {"gen"};
  const Session s(load(models + "/mobilenet_v2.onnx"), options);
  int groups = 0;
  for (const Node& n : s.graph().nodes()) groups += n.op_type == "DepthwisePointwiseConv";
  REQUIRE(groups > 0);
  const Tensor image = load_tensor(models + "/mobilenet_v2/test_data_set_0/input_0.pb");
  const std::string in = s.inputs()[0].name, out = s.outputs()[0].name;
  const Tensor expected = s.run({{in, image}}).at(out);
  check_concurrent_runs(s, in, image, out, expected);
}
