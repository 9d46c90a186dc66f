// The reference kernels of the com.wpk ops (graph/fused_ops.hpp), against the plain ops they stand
// for, and channels_last = 1 against NCHW with explicit Transposes.
#include "pass_test_util.hpp"

using namespace wpk;
using namespace wpk::testing;

namespace {

Tensor run_y(const Graph& g, const TensorMap& inputs) { return run_on_reference(g, inputs).at("y"); }

Node& wpk_node(Graph& g, const std::string& op, const std::vector<std::string>& in,
               std::map<std::string, Attribute> attrs = {}) {
  Node& n = g.add_node(op, in, {"y"}, std::move(attrs));
  n.domain = kWpkDomain;
  return n;
}

}  // namespace

TEST_CASE("FusedConv with channels_last = 1 equals NCHW Conv between Transposes", "[fused]") {
  const Tensor x = random_tensor({2, 5, 6, 3}, 1);  // NHWC
  const Tensor z = random_tensor({2, 3, 3, 4}, 2);  // NHWC output: stride 2, pads 1
  const std::map<std::string, Attribute> conv = {{"strides", Attribute({2, 2})}, {"pads", Attribute({1, 1, 1, 1})}};
  auto with_weights = [](Graph& g) {
    g.add_initializer("w", random_tensor({4, 3, 3, 3}, 3));
    g.add_initializer("b", random_tensor({4}, 4));
  };
  Graph fused;
  fused.add_input("x", DType::Float32, {2, 5, 6, 3});
  fused.add_input("z", DType::Float32, {2, 3, 3, 4});
  with_weights(fused);
  auto attrs = conv;
  attrs.emplace("channels_last", Attribute(1));
  attrs.emplace("activation", Attribute("LeakyRelu"));
  attrs.emplace("activation_params", Attribute(std::vector<float>{0.1f}));
  wpk_node(fused, "FusedConv", {"x", "w", "b", "z"}, attrs);
  fused.add_output("y");

  Graph plain;
  plain.add_input("x", DType::Float32, {2, 5, 6, 3});
  plain.add_input("z", DType::Float32, {2, 3, 3, 4});
  with_weights(plain);
  plain.add_node("Transpose", {"x"}, {"xc"}, {{"perm", Attribute({0, 3, 1, 2})}});
  plain.add_node("Conv", {"xc", "w", "b"}, {"c"}, conv);
  plain.add_node("Transpose", {"c"}, {"cl"}, {{"perm", Attribute({0, 2, 3, 1})}});
  plain.add_node("Add", {"cl", "z"}, {"s"});
  plain.add_node("LeakyRelu", {"s"}, {"y"}, {{"alpha", Attribute(0.1f)}});
  plain.add_output("y");
  const TensorMap in = {{"x", x}, {"z", z}};
  CHECK(compare_allclose(run_y(fused, in), run_y(plain, in), 1e-6, 1e-6) == "");
}

TEST_CASE("pooling with channels_last = 1 equals NCHW pooling between Transposes", "[fused]") {
  const std::vector<std::pair<std::string, std::map<std::string, Attribute>>> pools = {
      {"MaxPool", {{"kernel_shape", Attribute({3, 3})}, {"strides", Attribute({2, 2})}}},
      {"AveragePool", {{"kernel_shape", Attribute({2, 2})}, {"pads", Attribute({1, 1, 0, 0})}}},
      {"GlobalAveragePool", {}}};
  const Tensor x = random_tensor({2, 7, 6, 3}, 5);
  for (const auto& pool : pools) {
    INFO(pool.first);
    Graph nhwc;
    nhwc.add_input("x", DType::Float32, {2, 7, 6, 3});
    auto attrs = pool.second;
    attrs.emplace("channels_last", Attribute(1));
    nhwc.add_node(pool.first, {"x"}, {"y"}, attrs);
    nhwc.add_output("y");
    Graph nchw;
    nchw.add_input("x", DType::Float32, {2, 7, 6, 3});
    nchw.add_node("Transpose", {"x"}, {"xc"}, {{"perm", Attribute({0, 3, 1, 2})}});
    nchw.add_node(pool.first, {"xc"}, {"p"}, pool.second);
    nchw.add_node("Transpose", {"p"}, {"y"}, {{"perm", Attribute({0, 2, 3, 1})}});
    nchw.add_output("y");
    CHECK(compare_allclose(run_y(nhwc, {{"x", x}}), run_y(nchw, {{"x", x}}), 0, 0) == "");
  }
}

TEST_CASE("FusedMatMul, Gelu and Attention equal the ops they stand for", "[fused]") {
  const TensorMap in = {{"a", random_tensor({2, 3, 4}, 6)}, {"z", random_tensor({2, 3, 5}, 7)}};
  Graph fused;
  fused.add_input("a", DType::Float32, {2, 3, 4});
  fused.add_input("z", DType::Float32, {2, 3, 5});
  fused.add_initializer("w", random_tensor({4, 5}, 8));
  fused.add_initializer("bias", random_tensor({5}, 9));
  wpk_node(fused, "FusedMatMul", {"a", "w", "bias", "z"}, {{"activation", Attribute("Gelu")}});
  fused.add_output("y");
  Graph plain;
  plain.add_input("a", DType::Float32, {2, 3, 4});
  plain.add_input("z", DType::Float32, {2, 3, 5});
  plain.add_initializer("w", random_tensor({4, 5}, 8));
  plain.add_initializer("bias", random_tensor({5}, 9));
  plain.add_node("MatMul", {"a", "w"}, {"m"});
  plain.add_node("Add", {"m", "bias"}, {"mb"});
  plain.add_node("Add", {"mb", "z"}, {"s"});
  wpk_node(plain, "Gelu", {"s"});
  plain.add_output("y");
  CHECK(compare_allclose(run_y(fused, in), run_y(plain, in), 0, 0) == "");

  // Gelu against its definition, 0.5 x (1 + erf(x / sqrt 2)), computed in double.
  Graph gelu;
  gelu.add_input("x", DType::Float32, {64});
  wpk_node(gelu, "Gelu", {"x"});
  gelu.add_output("y");
  const Tensor x = random_tensor({64}, 14, -5.0f, 5.0f);
  const Tensor gy = run_y(gelu, {{"x", x}});
  for (int i = 0; i < 64; ++i) {
    const double v = x.data<float>()[i];
    CHECK(gy.data<float>()[i] == Approx(0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))).epsilon(1e-6).margin(1e-7));
  }

  Graph att;
  att.add_input("q", DType::Float32, {2, 3, 4});
  att.add_input("k", DType::Float32, {2, 5, 4});
  att.add_input("v", DType::Float32, {2, 5, 6});
  att.add_input("mask", DType::Float32, {5});
  wpk_node(att, "Attention", {"q", "k", "v", "mask"}, {{"scale", Attribute(0.5f)}});
  att.add_output("y");
  Graph att_plain;
  att_plain.add_input("q", DType::Float32, {2, 3, 4});
  att_plain.add_input("k", DType::Float32, {2, 5, 4});
  att_plain.add_input("v", DType::Float32, {2, 5, 6});
  att_plain.add_input("mask", DType::Float32, {5});
  att_plain.add_initializer("scale", Tensor::scalar(0.5f));
  att_plain.add_node("Transpose", {"k"}, {"kt"}, {{"perm", Attribute({0, 2, 1})}});
  att_plain.add_node("MatMul", {"q", "kt"}, {"qk"});
  att_plain.add_node("Mul", {"qk", "scale"}, {"scaled"});
  att_plain.add_node("Add", {"scaled", "mask"}, {"masked"});
  att_plain.add_node("Softmax", {"masked"}, {"p"}, {{"axis", Attribute(-1)}});
  att_plain.add_node("MatMul", {"p", "v"}, {"y"});
  att_plain.add_output("y");
  const TensorMap att_in = {{"q", random_tensor({2, 3, 4}, 10)},
                            {"k", random_tensor({2, 5, 4}, 11)},
                            {"v", random_tensor({2, 5, 6}, 12)},
                            {"mask", random_tensor({5}, 13)}};
  CHECK(compare_allclose(run_y(att, att_in), run_y(att_plain, att_in), 0, 0) == "");
}

TEST_CASE("fused kernels report bad attributes and shapes", "[fused]") {
  for (bool bad_bias : {true, false}) {
    Graph g;
    g.add_input("a", DType::Float32, {2, 4});
    g.add_initializer("w", random_tensor({4, 5}, 8));
    g.add_initializer("bias", random_tensor({bad_bias ? 3 : 5}, 9));  // 3 values for 5 columns
    wpk_node(g, "FusedMatMul", {"a", "w", "bias"}, {{"activation", Attribute(bad_bias ? "Relu" : "Swish")}});
    g.add_output("y");
    CHECK_THROWS_AS(run_y(g, {{"a", random_tensor({2, 4}, 1)}}), Error);
  }
}
