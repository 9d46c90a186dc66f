// Profiling: per-step records from Session::run, the `wpk bench --profile` table, the
// `--trace` Chrome trace, and `wpk info --optimized`.
#include <catch2/catch.hpp>

#include <cstdio>

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "backends/cpu/cpu_kernels.hpp"
#include "support/onnx_model_builder.hpp"
#ifdef WPK_WITH_ONEDNN
#include "support/onednn_isa.hpp"
#endif
#include "test_util.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;

namespace {

Graph conv_graph() {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 2, 6, 6});
  g.add_initializer("w", Tensor::from_vector<float>(std::vector<float>(3 * 2 * 3 * 3, 0.5f), {3, 2, 3, 3}));
  g.add_node("Conv", {"x", "w"}, {"c"}, {}, "conv");
  g.add_node("Relu", {"c"}, {"y"}, {}, "relu");
  g.add_output("y");
  return g;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs the wpk tool; returns its exit code, stdout in `out`.
int wpk_cli(const std::string& args, std::string& out) {
  const std::string dir = wpk::testing::temp_dir("profile_cli");
  const int status = std::system((std::string(WPK_CLI_PATH) + " " + args + " >" + dir + "/out 2>" + dir + "/err").c_str());
  out = slurp(dir + "/out") + slurp(dir + "/err");
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("a profile has one record per step with op, backend, layout and shape", "[profile]") {
  SessionOptions o;
  o.optimizer.level = OptimizationLevel::None;
  o.profile = true;
  const Session s(conv_graph(), o);
  const TensorMap in = {{"x", Tensor::zeros(DType::Float32, {2, 2, 6, 6})}};
  s.run(in);
  const RunProfile p = s.last_profile();
  REQUIRE(p.steps.size() == 2);
  CHECK(p.steps[0].node == "conv");
  CHECK(p.steps[0].op == "Conv");
  CHECK(p.steps[0].layout == "NCHW");
  CHECK(p.steps[0].output_shape == Shape{2, 3, 4, 4});
  CHECK(!p.steps[0].backend.empty());
  CHECK(p.steps[1].op == "Relu");
  CHECK(p.steps[1].layout == "-");
  // 96 elements: the reference's loop is predicted faster than a library's call.
  CHECK(p.steps[1].backend == "reference");
  double sum = 0;
  for (const auto& st : p.steps) {
    CHECK(st.duration_us >= 0);
    CHECK(st.start_us >= 0);
    sum += st.duration_us;
  }
  CHECK(p.total_us >= sum);
  CHECK(p.steps[1].start_us >= p.steps[0].start_us + p.steps[0].duration_us);

  // Per call, without the option: the session keeps nothing.
  SessionOptions quiet;
  quiet.optimizer.level = OptimizationLevel::None;
  const Session q(conv_graph(), quiet);
  RunProfile mine;
  q.run(in, &mine);
  CHECK(mine.steps.size() == 2);
  CHECK(q.last_profile().steps.empty());
}

TEST_CASE("wpk bench --profile prints a per-node table, and --trace writes a Chrome trace", "[profile][cli]") {
  const std::string model = runtime_test::model_path("mobilenet_v2").string();
  const std::string trace = wpk::testing::temp_dir("trace") + "/t.json";
  std::string out;
  REQUIRE(wpk_cli("bench " + model + " --iters 3 --warmup 1 --profile --trace " + trace, out) == 0);
  CHECK(out.find("per-node profile") != std::string::npos);
  CHECK(out.find("share") != std::string::npos);
  CHECK(out.find("NHWC") != std::string::npos);  // the layout pass moves its convolutions to NHWC
  const std::string json = slurp(trace);
  CHECK(json.rfind("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [", 0) == 0);
  CHECK(json.find("\"ph\": \"X\"") != std::string::npos);
  CHECK(json.find("\"backend\": \"onednn\"") != std::string::npos);
  CHECK(std::count(json.begin(), json.end(), '{') == std::count(json.begin(), json.end(), '}'));
  CHECK(std::count(json.begin(), json.end(), '[') == std::count(json.begin(), json.end(), ']'));
}

TEST_CASE("wpk info --optimized lists nodes, backends, reorders and the memory plan", "[profile][cli]") {
  std::string out;
  REQUIRE(wpk_cli("info " + runtime_test::model_path("resnet18").string() + " --optimized", out) == 0);
  CHECK(out.find("optimized graph:") != std::string::npos);
  // Two Transposes at the NHWC region's edges, and two reorders inside each kernel the listing
  // marks as working in another layout (oneDNN's Winograd or blocked convs, where the cost model
  // picks them): the summary line agrees with the rows.
  const std::string summary = "layout reorders per run: ";
  const std::size_t at = out.find(summary);
  REQUIRE(at != std::string::npos);
  int total = -1, transposes = -1, inside = -1, kernels = -1;
  REQUIRE(std::sscanf(out.c_str() + at + summary.size(), "%d (%d Transpose nodes, %d inside %d kernels", &total, &transposes,
                      &inside, &kernels) == 4);
  int marked = 0;
  for (std::size_t p = out.find("NHWC>nChw"); p != std::string::npos; p = out.find("NHWC>nChw", p + 1)) ++marked;
  CHECK(transposes == 2);
  CHECK(kernels == marked);
  CHECK(inside == 2 * kernels);
  CHECK(total == transposes + inside);
  CHECK(out.find("*com.wpk.FusedConv") != std::string::npos);
  CHECK(out.find("memory: arena") != std::string::npos);
}

TEST_CASE("an element-wise node runs on wpk's own kernel on a tiny tensor and on a library's wider one on a large one",
          "[profile][cost]") {
  // A library call costs more than a tiny node's work; past that, the widest vectors win.
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 64});
  g.add_node("Tanh", {"x"}, {"y"}, {}, "tanh");
  g.add_output("y");
  SessionOptions o;
  o.threads = 2;
  o.profile = true;
  const Session s(g, o);
  s.run({{"x", Tensor::zeros(DType::Float32, {2, 64})}});
  CHECK(s.last_profile().steps.at(0).backend == "cpu:" + cpu::tanh_kernel_name());
#ifdef WPK_WITH_ONEDNN
  s.run({{"x", Tensor::zeros(DType::Float32, {4096, 64})}});
  CHECK(s.last_profile().steps.at(0).backend == "onednn");
#endif
}

TEST_CASE("a product whose input's shape is unknown at load runs on what the same shape declared would run on",
          "[profile][cost]") {
  // A size the graph computes from values (a Reshape to a shape given as data) reaches the product
  // with no shape at load: its choice waits for the first run's shapes.
  const auto session = [](bool declared) {
    Graph g;
    g.add_input("x", DType::Float32, {197, 192});
    std::vector<float> w(192 * 384);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 7) * 0.125f - 0.375f;
    g.add_initializer("w", Tensor::from_vector<float>(w, {192, 384}));
    if (declared) {
      g.add_node("MatMul", {"x", "w"}, {"y"}, {}, "product");
    } else {
      g.add_input("shape", DType::Int64, {2});
      g.add_node("Reshape", {"x", "shape"}, {"rows"});
      g.add_node("MatMul", {"rows", "w"}, {"y"}, {}, "product");
    }
    g.add_output("y");
    SessionOptions o;
    o.threads = 2;
    o.profile = true;
    return std::make_unique<Session>(g, o);
  };
  const std::unique_ptr<Session> declared = session(true), unknown = session(false);
  std::vector<float> x(197 * 192);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 11) * 0.25f - 1.25f;
  const Tensor xt = Tensor::from_vector<float>(x, {197, 192});
  const TensorMap a = declared->run({{"x", xt}});
  const TensorMap b = unknown->run({{"x", xt}, {"shape", Tensor::from_vector<std::int64_t>({197, 192}, {2})}});
  const auto product_backend = [](const Session& s) {
    for (const auto& step : s.last_profile().steps)
      if (step.node == "product") return step.backend;
    return std::string("none");
  };
  CHECK(product_backend(*unknown) == product_backend(*declared));
  REQUIRE(b.at("y").shape() == Shape{197, 384});
  float worst = 0;
  for (std::int64_t i = 0; i < a.at("y").numel(); ++i)
    worst = std::max(worst, std::abs(b.at("y").data<float>()[i] - a.at("y").data<float>()[i]));
  CHECK(worst < 1e-3f);
}
