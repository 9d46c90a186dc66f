// The fusions fire on the exported models (model_test.cpp checks that their outputs still match
// PyTorch). `wpk_unit_tests "[.histogram]"` prints each model's op histogram before and after.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "pass_test_util.hpp"

using namespace wpk;
using namespace wpk::testing;
namespace fs = std::filesystem;

namespace {

Graph load_fixture(const std::string& name) {
  const fs::path p = fs::path(WPK_TEST_MODELS_DIR) / (name + ".onnx");
  if (!fs::exists(p)) FAIL("missing fixture " << p << ": run scripts/export_models.py " << WPK_TEST_MODELS_DIR);
  return load(p.string());
}

int count_activation(const Graph& g, const std::string& op, const std::string& activation) {
  int n = 0;
  for (const Node& node : g.nodes())
    n += node.domain == kWpkDomain && node.op_type == op && node.attr_string("activation", "") == activation;
  return n;
}

int count_with_residual(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.domain == kWpkDomain && node.op_type == op && node.inputs.size() == 4;
  return n;
}

std::map<std::string, int> histogram(const Graph& g) {
  std::map<std::string, int> h;
  for (const Node& n : g.nodes()) ++h[n.domain.empty() ? n.op_type : n.domain + "." + n.op_type];
  return h;
}

}  // namespace

TEST_CASE("BERT: Gelu, attention and the linear-layer epilogues fuse", "[model]") {
  const Graph opt = optimized(load_fixture("bert_base"));
  CHECK(count_op(opt, "Attention", kWpkDomain) == 12);
  CHECK(count_op(opt, "Softmax") == 0);
  CHECK(count_op(opt, "Erf") == 0);
  CHECK(count_op(opt, "Gelu", kWpkDomain) == 0);  // absorbed by the feed-forward MatMuls
  CHECK(count_op(opt, "MatMul") == 0);
  CHECK(count_op(opt, "FusedMatMul", kWpkDomain) == 72);  // Q, K, V, output, 2 feed-forward per layer
  CHECK(count_activation(opt, "FusedMatMul", "Gelu") == 12);
  CHECK(count_with_residual(opt, "FusedMatMul") == 24);  // output projection and second feed-forward
  CHECK(count_op(opt, "LayerNormalization") == 25);
  // Each attention reads Q, K and V and writes its output with the heads interleaved: the 48
  // head Transposes are gone.
  CHECK(count_op(opt, "Transpose") == 0);
  for (const Node& n : opt.nodes())
    if (n.op_type == "Attention") CHECK(n.attr_ints("interleaved_heads") == std::vector<std::int64_t>{1, 1, 1, 1});
}

TEST_CASE("ResNet-50 and MobileNetV2: every Relu, Clip and residual Add joins a Conv", "[model]") {
  const Graph resnet = optimized(load_fixture("resnet50"));
  CHECK(count_op(resnet, "Relu") == 0);
  CHECK(count_op(resnet, "Add") == 0);
  CHECK(count_with_residual(resnet, "FusedConv") == 16);
  // The classifier Gemm stays one (nothing follows it to absorb), its weights as loaded.
  CHECK(count_op(resnet, "Gemm") == 1);
  CHECK(count_op(resnet, "FusedMatMul", kWpkDomain) == 0);
  const Graph mobilenet = optimized(load_fixture("mobilenet_v2"));
  CHECK(count_op(mobilenet, "Clip") == 0);
  CHECK(count_op(mobilenet, "Add") == 0);
  CHECK(count_activation(mobilenet, "FusedConv", "Clip") == 35);
  CHECK(count_with_residual(mobilenet, "FusedConv") == 10);
}

TEST_CASE("optimized models run on the reference kernels alone match PyTorch", "[model]") {
  // The Session may run fused ops on a faster backend; here the reference defines them.
  for (const char* name : {"mobilenet_v2", "bert_base"}) {
    INFO(name);
    const Graph g = Optimizer().optimize(load_fixture(name));
    const fs::path data = fs::path(WPK_TEST_MODELS_DIR) / name / "test_data_set_0";
    TensorMap inputs;
    for (std::size_t i = 0; i < g.inputs().size(); ++i)
      inputs[g.value(g.inputs()[i]).name] = load_tensor((data / ("input_" + std::to_string(i) + ".pb")).string());
    const Tensor expected = load_tensor((data / "output_0.pb").string());
    const Tensor actual = run_on_reference(g, inputs).at(g.value(g.outputs()[0]).name);
    REQUIRE(actual.shape() == expected.shape());
    CHECK(relative_l2_error(actual, expected) <= 1e-4);
  }
}

TEST_CASE("op histograms before and after optimization", "[.histogram]") {
  for (const char* name : {"bert_base", "resnet50", "mobilenet_v2"}) {
    const Graph g = load_fixture(name);
    const auto before = histogram(g), after = histogram(Optimizer().optimize(g));
    std::cout << name << " (" << g.nodes().size() << " nodes before)\n";
    std::set<std::string> ops;
    for (const auto& kv : before) ops.insert(kv.first);
    for (const auto& kv : after) ops.insert(kv.first);
    for (const auto& op : ops) {
      const int b = before.count(op) ? before.at(op) : 0, a = after.count(op) ? after.at(op) : 0;
      std::printf("  %-28s %5d -> %d\n", op.c_str(), b, a);
    }
  }
}
