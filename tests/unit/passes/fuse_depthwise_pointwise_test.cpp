// fuse_depthwise_pointwise: a depthwise NHWC conv whose output only a pointwise conv reads becomes
// one DepthwisePointwiseConv carrying both epilogues (and the block's residual); a depthwise output
// something else also reads stays two convs. Every run computes what the unfused graph does.
#include "pass_test_util.hpp"

using namespace wpk;
using namespace wpk::testing;

namespace {

// x [N, 16, 9, 9] -> Relu -> e -> depthwise 3x3 (bias, Clip 0..6) -> pointwise to `out` channels
// (bias) [-> + e] [-> a second reader of the depthwise output].
Graph inverted_residual(std::int64_t stride, std::int64_t out, bool residual, bool second_reader) {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 16, 9, 9});
  g.add_node("Relu", {"x"}, {"e"});
  g.add_initializer("wd", random_tensor({16, 1, 3, 3}, 1));
  g.add_initializer("bd", random_tensor({16}, 2));
  g.add_initializer("wp", random_tensor({out, 16, 1, 1}, 3));
  g.add_initializer("bp", random_tensor({out}, 4));
  g.add_initializer("lo", Tensor::from_vector(std::vector<float>{0.0f}, {}));
  g.add_initializer("hi", Tensor::from_vector(std::vector<float>{6.0f}, {}));
  g.add_node("Conv", {"e", "wd", "bd"}, {"d"},
             {{"group", std::int64_t{16}}, {"pads", std::vector<std::int64_t>{1, 1, 1, 1}},
              {"strides", std::vector<std::int64_t>{stride, stride}}});
  g.add_node("Clip", {"d", "lo", "hi"}, {"d6"});
  g.add_node("Conv", {"d6", "wp", "bp"}, {residual ? "p" : "y"});
  if (residual) g.add_node("Add", {"p", "e"}, {"y"});
  g.add_output("y");
  if (second_reader) {
    g.add_node("Neg", {"d6"}, {"z"});
    g.add_output("z");
  }
  return g;
}

// The optimized graph's outputs, run by a session (its groups as their parts, then on the
// generated group kernel alone: the output may take the residual's bytes) and on the reference,
// equal the unoptimized graph's.
void check_same_outputs(const Graph& g, const Graph& opt, const std::vector<std::string>& outputs) {
  const TensorMap in{{"x", random_tensor({2, 16, 9, 9}, 9, -2, 2)}};
  const TensorMap want = run_graph(g, OptimizationLevel::None, in);
  SessionOptions generated;
  generated.disabled_kernels = {"onednn", "cpu"};
  RunProfile profile;
  const TensorMap fused = run_graph(g, OptimizationLevel::All, in), on_reference = run_on_reference(opt, in),
                  on_generated = Session(g, generated).run(in, &profile);
  for (const StepProfile& step : profile.steps)
    if (step.op == "com.wpk.DepthwisePointwiseConv") CHECK(step.backend.rfind("gen", 0) == 0);
  for (const std::string& name : outputs) {
    CHECK(compare_allclose(fused.at(name), want.at(name), 1e-4, 1e-5) == "");
    CHECK(compare_allclose(on_reference.at(name), want.at(name), 1e-4, 1e-5) == "");
    CHECK(compare_allclose(on_generated.at(name), want.at(name), 1e-4, 1e-5) == "");
  }
}

}  // namespace

TEST_CASE("fuse_depthwise_pointwise makes one node of a depthwise conv and the pointwise conv that reads it",
          "[passes][optimizer]") {
  for (std::int64_t stride : {1, 2}) {
    const Graph g = inverted_residual(stride, 24, false, false);
    const Graph opt = Optimizer().optimize(g);
    REQUIRE(count_op(opt, "DepthwisePointwiseConv", kWpkDomain) == 1);
    CHECK(count_op(opt, "FusedConv", kWpkDomain) == 0);
    const Node& pair = *find_op(opt, "DepthwisePointwiseConv", kWpkDomain);
    CHECK(pair.attr_string("activation", "") == "Clip");
    CHECK(pair.attr_string("pointwise_activation", "") == "");
    CHECK(pair.attr_ints("strides") == std::vector<std::int64_t>{stride, stride});
    CHECK(pair.inputs.size() == 5);
    check_same_outputs(g, opt, {"y"});
  }
}

TEST_CASE("fuse_depthwise_pointwise keeps the block's residual in the pair", "[passes][optimizer]") {
  const Graph g = inverted_residual(1, 16, true, false);
  const Graph opt = Optimizer().optimize(g);
  REQUIRE(count_op(opt, "DepthwisePointwiseConv", kWpkDomain) == 1);
  CHECK(count_op(opt, "Add") == 0);
  CHECK(find_op(opt, "DepthwisePointwiseConv", kWpkDomain)->inputs.size() == 6);
  check_same_outputs(g, opt, {"y"});
}

TEST_CASE("fuse_depthwise_pointwise leaves a depthwise output that others read", "[passes][optimizer]") {
  const Graph g = inverted_residual(1, 24, false, true);
  const Graph opt = Optimizer().optimize(g);
  CHECK(count_op(opt, "DepthwisePointwiseConv", kWpkDomain) == 0);
  CHECK(count_op(opt, "FusedConv", kWpkDomain) == 2);
  check_same_outputs(g, opt, {"y", "z"});
}
