// fold_qdq: QDQ groups as quantizers write them become integer ops (QLinearConv, MaxPool on
// codes, com.wpk QLinearAdd) that compute what the float ops between Q and DQ computed, to one
// quantization step of the output; groups whose parameters do not allow it stay as written.
#include "pass_test_util.hpp"

using namespace wpk;
using namespace wpk::testing;

namespace {

constexpr float kXScale = 0.02f, kYScale = 0.05f, kOutScale = 0.04f;

// How the test graph deviates from what a quantizer writes.
struct Variant {
  bool bias_scale_off = false;   // the bias' scale is not x_scale * w_scale
  bool conv_read_twice = false;  // the Conv's float output is also a graph output
  float pool_scale = kYScale;    // the Q after MaxPool (folds only at the DQ's own scale)
  bool broadcast_add = false;    // the Add's second operand is [1, 8, 1, 1]
  bool relu = false;             // a Relu between the Conv and its Q
  float clip_max = 0;            // > 0: a Clip(0, clip_max) there instead, bounds from Constant nodes
  std::uint8_t conv_zero = 10;   // the zero point of the Conv's Q (a quantizer gives a Relu's 0)
};

// x [N, 8, 6, 6] -> Q -> DQ -> Conv(DQ(w int8 per channel), DQ(b int32)) -> Q -> DQ -> MaxPool
// -> Q -> DQ -> Add(DQ(r)) -> Q -> DQ -> y; r is x quantized by its own Q.
Graph qdq_graph(const Variant& v = {}) {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 8, 6, 6});
  auto scalar = [&](const std::string& name, float s) { g.add_initializer(name, Tensor::scalar(s)); };
  scalar("xs", kXScale);
  g.add_initializer("xz", Tensor::scalar(std::uint8_t{128}));
  scalar("ys", kYScale);
  g.add_initializer("yz", Tensor::scalar(v.conv_zero));
  scalar("ps", v.pool_scale);
  scalar("os", kOutScale);
  g.add_initializer("oz", Tensor::scalar(std::uint8_t{100}));
  g.add_node("QuantizeLinear", {"x", "xs", "xz"}, {"xq"});
  g.add_node("DequantizeLinear", {"xq", "xs", "xz"}, {"xd"});
  add_quantized_conv_weights(g, kXScale, v.bias_scale_off ? 1.5f : 1.0f);
  g.add_node("Conv", {"xd", "wd", "bd"}, {"c"}, {{"pads", Attribute({1, 1, 1, 1})}});
  if (v.relu) g.add_node("Relu", {"c"}, {"cr"});
  if (v.clip_max > 0) {
    g.add_node("Constant", {}, {"lo"}, {{"value", Attribute(Tensor::scalar(0.0f))}});
    g.add_node("Constant", {}, {"hi"}, {{"value", Attribute(Tensor::scalar(v.clip_max))}});
    g.add_node("Clip", {"c", "lo", "hi"}, {"cr"});
  }
  g.add_node("QuantizeLinear", {v.relu || v.clip_max > 0 ? "cr" : "c", "ys", "yz"}, {"cq"});
  g.add_node("DequantizeLinear", {"cq", "ys", "yz"}, {"cd"});
  g.add_node("MaxPool", {"cd"}, {"p"}, {{"kernel_shape", Attribute({3, 3})}, {"pads", Attribute({1, 1, 1, 1})}});
  g.add_node("QuantizeLinear", {"p", "ps", "yz"}, {"pq"});
  g.add_node("DequantizeLinear", {"pq", "ps", "yz"}, {"pd"});
  if (v.broadcast_add) {
    g.add_node("ReduceMax", {"xq"}, {"r"}, {{"axes", Attribute({2, 3})}, {"keepdims", Attribute(std::int64_t{1})}});
    g.add_node("DequantizeLinear", {"r", "xs", "xz"}, {"rd"});
  } else {
    g.add_node("DequantizeLinear", {"xq", "xs", "xz"}, {"rd"});
  }
  g.add_node("Add", {"pd", "rd"}, {"a"});
  g.add_node("QuantizeLinear", {"a", "os", "oz"}, {"aq"});
  g.add_node("DequantizeLinear", {"aq", "os", "oz"}, {"y"});
  g.add_output("y");
  if (v.conv_read_twice) g.add_output("c");
  return g;
}

TensorMap inputs() { return {{"x", random_tensor({2, 8, 6, 6}, 21, -2.5f, 2.5f)}}; }

// The folded graph computes the unfolded one's outputs within one step of the output's scale
// (the integer conv rounds its product once, in another order).
void check_within_a_step(const Graph& g) { check_unchanged(g, inputs(), "fold_qdq", 0, kOutScale * 1.001); }

}  // namespace

TEST_CASE("fold_qdq turns a quantizer's Conv, MaxPool and Add groups into integer ops", "[optimizer][passes][int8]") {
  const Graph g = qdq_graph();
  const Graph opt = optimized(g);
  CHECK(count_op(opt, "Conv") == 0);
  CHECK(count_op(opt, "QLinearConv") == 1);
  const Node* pool = find_op(opt, "MaxPool");
  REQUIRE(pool);
  CHECK(opt.value(pool->inputs[0]).dtype == DType::UInt8);  // max of the codes
  CHECK(count_op(opt, "QLinearAdd", kWpkDomain) == 1);
  CHECK(count_op(opt, "Add") == 0);
  // Only the input's Q and the output's DQ remain in float.
  CHECK(count_op(opt, "QuantizeLinear") == 1);
  CHECK(count_op(opt, "DequantizeLinear") == 1);
  check_within_a_step(g);
}

TEST_CASE("fold_qdq folds a Relu whose Q saturates at zero into the integer op", "[optimizer][passes][int8]") {
  Variant v;
  v.relu = true;
  v.conv_zero = 0;
  const Graph g = qdq_graph(v);
  const Graph opt = optimized(g);
  CHECK(count_op(opt, "QLinearConv") == 1);
  CHECK(count_op(opt, "Relu") == 0);
  check_within_a_step(g);
  // At another zero point the Relu clips where the codes do not: it stays, and so does the Conv.
  v.conv_zero = 10;
  const Graph kept = qdq_graph(v);
  CHECK(count_op(optimized(kept), "QLinearConv") == 0);
  check_within_a_step(kept);
}

TEST_CASE("fold_qdq folds a Clip(0, max) only where the codes saturate at or below max", "[optimizer][passes][int8]") {
  Variant v;
  v.conv_zero = 0;
  v.clip_max = 255 * kYScale + 1;  // past the highest code: saturating clips there first
  const Graph g = qdq_graph(v);
  CHECK(count_op(optimized(g), "QLinearConv") == 1);
  CHECK(count_op(optimized(g), "Clip") == 0);
  check_within_a_step(g);
  v.clip_max = 100 * kYScale;  // inside the codes' range: the Clip matters
  const Graph kept = qdq_graph(v);
  CHECK(count_op(optimized(kept), "QLinearConv") == 0);
  check_within_a_step(kept);
}

TEST_CASE("fold_qdq moves QLinearConv into the NHWC region with its neighbours", "[optimizer][passes][int8]") {
  const Graph opt = Optimizer(OptimizerOptions{}).optimize(qdq_graph());
  const Node* conv = find_op(opt, "QLinearConv");
  REQUIRE(conv);
  CHECK(conv->attr_int("channels_last", 0) == 1);
  // One transpose in (of the quantized input) and one out (of the output codes) at most.
  CHECK(count_op(opt, "Transpose") <= 2);
}

TEST_CASE("fold_qdq leaves groups whose parameters do not fold as written", "[optimizer][passes][int8]") {
  SECTION("a bias at another scale than x_scale * w_scale") {
    const Graph g = qdq_graph({/*bias_scale_off=*/true});
    CHECK(count_op(optimized(g), "QLinearConv") == 0);
    check_unchanged(g, inputs(), "fold_qdq", 1e-5, 1e-6);
  }
  SECTION("a Conv output read by more than its Q") {
    const Graph g = qdq_graph({false, /*conv_read_twice=*/true});
    CHECK(count_op(optimized(g), "QLinearConv") == 0);
  }
  SECTION("a Q after MaxPool at another scale than the DQ before it") {
    const Graph g = qdq_graph({false, false, /*pool_scale=*/0.07f});
    const Graph opt = optimized(g);
    const Node* pool = find_op(opt, "MaxPool");
    REQUIRE(pool);
    CHECK(opt.value(pool->inputs[0]).dtype == DType::Float32);
    check_within_a_step(g);
  }
  SECTION("an Add that broadcasts") {
    const Graph g = qdq_graph({false, false, kYScale, /*broadcast_add=*/true});
    CHECK(count_op(optimized(g), "QLinearAdd", kWpkDomain) == 0);
    check_within_a_step(g);
  }
}
