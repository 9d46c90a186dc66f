// fuse_qlinear_conv_add: a quantized residual block's last convolution and its shortcut add, as
// fold_qdq leaves them (QLinearConv -> com.wpk QLinearAdd), become one com.wpk QLinearConvAdd
// computing what the two ops compute; a convolution whose codes something else reads stays.
#include "pass_test_util.hpp"

using namespace wpk;
using namespace wpk::testing;

namespace {

constexpr float kXScale = 0.02f, kConvScale = 0.03f, kOutScale = 0.05f;

// x [N, 8, 6, 6] -> Q -> DQ -> Conv 3x3 (DQ(w int8 per channel), DQ(b int32)) -> Q -> DQ,
// + DQ(x's codes) -> Q -> DQ -> y. With `conv_read_twice` the conv's codes are an output too.
Graph residual_graph(bool conv_read_twice = false) {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 8, 6, 6});
  g.add_initializer("xs", Tensor::scalar(kXScale));
  g.add_initializer("xz", Tensor::scalar(std::uint8_t{128}));
  g.add_initializer("cs", Tensor::scalar(kConvScale));
  g.add_initializer("cz", Tensor::scalar(std::uint8_t{120}));
  g.add_initializer("os", Tensor::scalar(kOutScale));
  g.add_initializer("oz", Tensor::scalar(std::uint8_t{0}));  // saturating at 0: the block's Relu
  g.add_node("QuantizeLinear", {"x", "xs", "xz"}, {"xq"});
  g.add_node("DequantizeLinear", {"xq", "xs", "xz"}, {"xd"});
  add_quantized_conv_weights(g, kXScale);
  g.add_node("Conv", {"xd", "wd", "bd"}, {"c"}, {{"pads", Attribute({1, 1, 1, 1})}});
  g.add_node("QuantizeLinear", {"c", "cs", "cz"}, {"cq"});
  g.add_node("DequantizeLinear", {"cq", "cs", "cz"}, {"cd"});
  g.add_node("DequantizeLinear", {"xq", "xs", "xz"}, {"rd"});
  g.add_node("Add", {"cd", "rd"}, {"a"});
  g.add_node("QuantizeLinear", {"a", "os", "oz"}, {"aq"});
  g.add_node("DequantizeLinear", {"aq", "os", "oz"}, {"y"});
  g.add_output("y");
  if (conv_read_twice) g.add_output("cq");
  return g;
}

TensorMap inputs() { return {{"x", random_tensor({2, 8, 6, 6}, 31, -2.5f, 2.5f)}}; }

}  // namespace

TEST_CASE("fuse_qlinear_conv_add adds the shortcut's codes to the conv's sums before rounding", "[optimizer][passes][int8]") {
  const Graph g = residual_graph();
  const Graph opt = optimized(g);
  REQUIRE(count_op(opt, "QLinearConvAdd", kWpkDomain) == 1);
  CHECK(count_op(opt, "QLinearConv") == 0);
  CHECK(count_op(opt, "QLinearAdd", kWpkDomain) == 0);
  const Node& fused = *find_op(opt, "QLinearConvAdd", kWpkDomain);
  CHECK(fused.inputs.size() == 14);
  CHECK(opt.value(fused.inputs[9]).name == "xq");  // the shortcut's codes
  // Within a step of the float graph, as fold_qdq's integer ops are; and of the unfused ops.
  check_unchanged(g, inputs(), "fuse_qlinear_conv_add", 0, kOutScale * 1.001);
}

TEST_CASE("fuse_qlinear_conv_add leaves a conv whose codes are read elsewhere", "[optimizer][passes][int8]") {
  const Graph opt = optimized(residual_graph(true));
  CHECK(count_op(opt, "QLinearConvAdd", kWpkDomain) == 0);
  CHECK(count_op(opt, "QLinearConv") == 1);
  CHECK(count_op(opt, "QLinearAdd", kWpkDomain) == 1);
}
