// fuse_conv_epilogue: Conv [+ per-channel bias] [+ residual] [+ activation] -> com.wpk FusedConv.
#include "pass_test_util.hpp"

using namespace wpk;
using namespace wpk::testing;

namespace {

// x [N, 4, 6, 6] -> Conv(3x3, pads 1, 4 channels) -> "c".
Graph conv_graph(bool with_bias = true) {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 4, 6, 6});
  g.add_initializer("w", random_tensor({4, 4, 3, 3}, 1, -0.3f, 0.3f));
  std::vector<std::string> in = {"x", "w"};
  if (with_bias) {
    g.add_initializer("b", random_tensor({4}, 2));
    in.push_back("b");
  }
  g.add_node("Conv", in, {"c"}, {{"pads", Attribute({1, 1, 1, 1})}}, "conv");
  return g;
}

const TensorMap inputs() { return {{"x", random_tensor({2, 4, 6, 6}, 3, -2.0f, 2.0f)}}; }

}  // namespace

TEST_CASE("fuse_conv_epilogue fuses ResNet's Conv -> Add(residual) -> Relu", "[optimizer][passes]") {
  Graph g = conv_graph();
  g.add_node("Add", {"c", "x"}, {"s"});
  g.add_node("Relu", {"s"}, {"y"});
  g.add_output("y");
  const Graph opt = optimized(g);
  REQUIRE(opt.nodes().size() == 1);
  const Node& n = opt.nodes()[0];
  CHECK(n.op_type == "FusedConv");
  CHECK(n.domain == kWpkDomain);
  CHECK(n.attr_string("activation", "?") == "Relu");
  CHECK(n.attr_int("channels_last", -1) == 0);
  REQUIRE(n.inputs.size() == 4);
  CHECK(n.inputs[3] == opt.value_id("x"));
  CHECK(n.outputs[0] == opt.value_id("y"));
  CHECK(n.fused_from == std::vector<std::string>{"Conv", "Add", "Relu"});  // what `wpk info --optimized` shows
  check_unchanged(g, inputs(), "fuse_conv_epilogue");
}

TEST_CASE("fuse_conv_epilogue fuses MobileNetV2's Clip(0, 6) and residual Add", "[optimizer][passes]") {
  Graph g = conv_graph();
  g.add_initializer("lo", Tensor::scalar(0.0f));
  g.add_initializer("hi", Tensor::scalar(6.0f));
  g.add_node("Clip", {"c", "lo", "hi"}, {"r"});
  g.add_initializer("w2", random_tensor({4, 4, 1, 1}, 4));
  g.add_node("Conv", {"r", "w2"}, {"c2"});
  g.add_node("Add", {"x", "c2"}, {"y"});
  g.add_output("y");
  const Graph opt = optimized(g);
  REQUIRE(count_op(opt, "FusedConv", kWpkDomain) == 2);
  const Node& first = opt.nodes()[0];
  CHECK(first.attr_string("activation", "") == "Clip");
  CHECK(first.attr_floats("activation_params") == std::vector<float>{0.0f, 6.0f});
  const Node& second = opt.nodes()[1];
  CHECK(second.attr_string("activation", "?").empty());
  REQUIRE(second.inputs.size() == 4);
  CHECK(second.inputs[2] == kNoValue);  // no bias, but a residual
  check_unchanged(g, inputs(), "fuse_conv_epilogue");
}

TEST_CASE("fuse_conv_epilogue merges a per-channel Add into the bias, with every activation", "[optimizer][passes]") {
  const std::vector<std::pair<std::string, std::map<std::string, Attribute>>> activations = {
      {"Sigmoid", {}},
      {"Tanh", {}},
      {"HardSwish", {}},
      {"LeakyRelu", {{"alpha", Attribute(0.2f)}}},
      {"HardSigmoid", {{"alpha", Attribute(0.3f)}, {"beta", Attribute(0.4f)}}}};
  for (bool with_bias : {false, true})
    for (const auto& act : activations) {
      INFO(act.first << (with_bias ? " after a Conv with bias" : ""));
      Graph g = conv_graph(with_bias);
      g.add_initializer("cb", random_tensor({1, 4, 1, 1}, 5));
      g.add_node("Add", {"cb", "c"}, {"s"});
      g.add_node(act.first, {"s"}, {"y"}, act.second);
      g.add_output("y");
      const Graph opt = optimized(g);
      REQUIRE(opt.nodes().size() == 1);
      CHECK(opt.nodes()[0].attr_string("activation", "") == act.first);
      CHECK(opt.nodes()[0].inputs.size() == 3);
      check_unchanged(g, inputs(), "fuse_conv_epilogue");
    }
}

TEST_CASE("fuse_conv_epilogue fuses SiLU written as x * Sigmoid(x)", "[optimizer][passes]") {
  Graph g = conv_graph();
  g.add_node("Sigmoid", {"c"}, {"sig"});
  g.add_node("Mul", {"sig", "c"}, {"y"});
  g.add_output("y");
  const Graph opt = optimized(g);
  REQUIRE(opt.nodes().size() == 1);
  CHECK(opt.nodes()[0].attr_string("activation", "") == "SiLU");
  check_unchanged(g, inputs(), "fuse_conv_epilogue");
}

TEST_CASE("fuse_conv_epilogue keeps values other nodes or the caller read", "[optimizer][passes]") {
  SECTION("the Conv output is a graph output") {
    Graph g = conv_graph();
    g.add_node("Relu", {"c"}, {"y"});
    g.add_output("y");
    g.add_output("c");
    CHECK(count_op(optimized(g), "FusedConv", kWpkDomain) == 0);
  }
  SECTION("the sum before the activation has a second reader") {
    Graph g = conv_graph();
    g.add_node("Add", {"c", "x"}, {"s"});
    g.add_node("Relu", {"s"}, {"y"});
    g.add_node("Neg", {"s"}, {"z"});
    g.add_output("y");
    g.add_output("z");
    const Graph opt = optimized(g);
    REQUIRE(count_op(opt, "FusedConv", kWpkDomain) == 1);
    CHECK(find_op(opt, "FusedConv", kWpkDomain)->attr_string("activation", "?").empty());
    CHECK(count_op(opt, "Relu") == 1);
    check_unchanged(g, inputs(), "fuse_conv_epilogue");
  }
  SECTION("an Add that broadcasts is not a residual") {
    Graph g = conv_graph();
    g.add_input("z", DType::Float32, {Dim("N"), 4, 1, 1});
    g.add_node("Add", {"c", "z"}, {"y"});
    g.add_output("y");
    CHECK(count_op(optimized(g), "FusedConv", kWpkDomain) == 0);
  }
  SECTION("a Clip with bounds computed at run time") {
    Graph g = conv_graph();
    g.add_input("hi", DType::Float32, {});
    g.add_node("Clip", {"c", "", "hi"}, {"y"});
    g.add_output("y");
    CHECK(count_op(optimized(g), "FusedConv", kWpkDomain) == 0);
  }
}
