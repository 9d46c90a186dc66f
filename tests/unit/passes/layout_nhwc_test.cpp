// layout_nhwc: convolutions, pooling, BatchNorm and the elementwise ops between them move to
// NHWC with one transpose at each edge of the region, and the outputs do not change.
#include "pass_test_util.hpp"

using namespace wpk;
using namespace wpk::testing;

namespace {

// x -> Conv -> BatchNorm -> Relu -> MaxPool -> Conv -+-> Concat(axis 1) -> GlobalAveragePool -> y
//                                                    \-> Conv ---------/
Graph conv_region() {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 3, 12, 12});
  g.add_initializer("w0", random_tensor({16, 3, 3, 3}, 1));
  g.add_initializer("w1", random_tensor({8, 16, 1, 1}, 2));
  g.add_initializer("w2", random_tensor({8, 16, 3, 3}, 3));
  g.add_initializer("scale", random_tensor({16}, 4, 0.5f, 1.5f));
  g.add_initializer("bias", random_tensor({16}, 5));
  g.add_initializer("mean", random_tensor({16}, 6));
  g.add_initializer("var", random_tensor({16}, 7, 0.5f, 1.5f));
  g.add_node("Conv", {"x", "w0"}, {"c0"}, {{"pads", std::vector<std::int64_t>{1, 1, 1, 1}}});
  g.add_node("BatchNormalization", {"c0", "scale", "bias", "mean", "var"}, {"bn"});
  g.add_node("Relu", {"bn"}, {"r"});
  g.add_node("MaxPool", {"r"}, {"p"}, {{"kernel_shape", std::vector<std::int64_t>{2, 2}}, {"strides", std::vector<std::int64_t>{2, 2}}});
  g.add_node("Conv", {"p", "w1"}, {"a"});
  g.add_node("Conv", {"p", "w2"}, {"b"}, {{"pads", std::vector<std::int64_t>{1, 1, 1, 1}}});
  g.add_node("Concat", {"a", "b"}, {"cat"}, {{"axis", std::int64_t{1}}});
  g.add_node("GlobalAveragePool", {"cat"}, {"y"});
  g.add_output("y");
  return g;
}

}  // namespace

TEST_CASE("layout_nhwc moves a conv region to NHWC with transposes only at its edges", "[passes][optimizer]") {
  const Graph g = conv_region();
  const Graph opt = Optimizer().optimize(g);
  CHECK(count_op(opt, "Transpose") == 2);  // into the region, and back for the graph output
  CHECK(count_op(opt, "FusedConv", kWpkDomain) == 3);
  for (const Node& n : opt.nodes()) {
    INFO(n.op_type);
    if (n.op_type == "FusedConv" || n.op_type == "MaxPool" || n.op_type == "BatchNormalization" ||
        n.op_type == "GlobalAveragePool")
      CHECK(n.attr_int("channels_last", 0) == 1);
    if (n.op_type == "Concat") CHECK(n.attr_int("axis", 0) == 3);
  }
  OptimizerOptions off;
  off.disabled_passes = {"layout_nhwc"};
  CHECK(count_op(Optimizer(off).optimize(g), "Transpose") == 0);

  for (std::int64_t batch : {1, 3}) {
    const TensorMap in{{"x", random_tensor({batch, 3, 12, 12}, 11)}};
    const Tensor plain = run_graph(g, OptimizationLevel::None, in).at("y");
    const Tensor nhwc = run_graph(g, OptimizationLevel::All, in).at("y");
    CHECK(compare_allclose(nhwc, plain, 1e-5, 1e-5) == "");
    CHECK(compare_allclose(run_on_reference(opt, in).at("y"), plain, 1e-5, 1e-5) == "");
  }
}

TEST_CASE("layout_nhwc keeps a constant Pad inside the region, pads permuted", "[passes][optimizer]") {
  Graph g;
  g.add_input("x", DType::Float32, {1, 4, 7, 6});
  g.add_initializer("w", random_tensor({8, 4, 3, 3}, 21));
  g.add_initializer("pads", Tensor::from_vector<std::int64_t>({0, 0, 1, 2, 0, 0, 2, 1}, {8}));
  g.add_node("Conv", {"x", "w"}, {"c"});
  g.add_node("Pad", {"c", "pads"}, {"p"});
  g.add_node("AveragePool", {"p"}, {"y"}, {{"kernel_shape", std::vector<std::int64_t>{2, 2}}});
  g.add_output("y");
  // fold_pad would make this Pad the pool's own padding; a Pad it cannot fold (another reader,
  // a reflect mode) stays where this test puts it.
  OptimizerOptions keep_pad;
  keep_pad.disabled_passes = {"fold_pad"};
  const Graph opt = Optimizer(keep_pad).optimize(g);
  CHECK(count_op(opt, "Transpose") == 2);
  const Node* pad = find_op(opt, "Pad");
  REQUIRE(pad != nullptr);
  const Tensor* pads = opt.initializer(pad->inputs[1]);
  REQUIRE(pads != nullptr);
  CHECK(std::vector<std::int64_t>(pads->data<std::int64_t>(), pads->data<std::int64_t>() + 8) ==
        std::vector<std::int64_t>{0, 1, 2, 0, 0, 2, 1, 0});
  const TensorMap in{{"x", random_tensor({1, 4, 7, 6}, 22)}};
  CHECK(compare_allclose(run_graph(g, OptimizationLevel::All, in).at("y"), run_graph(g, OptimizationLevel::None, in).at("y"),
                         1e-5, 1e-5) == "");
}
