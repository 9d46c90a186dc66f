// fuse_matmul_integer: dynamic quantization's MatMulInteger -> Cast -> Mul(A_scale * B_scale)
// becomes one com.wpk MatMulIntegerToFloat computing the same floats; variants it does not
// cover stay as written.
#include "pass_test_util.hpp"

using namespace wpk;
using namespace wpk::testing;

namespace {

struct Variant {
  bool per_column = true;   // B_scale [N] (else one element)
  bool cast_to_int = false;  // the Cast is not to float: not this pattern
  bool scales_swapped = false;  // Mul(B_scale, A_scale)
};

// x [N, 5, 16] -> DynamicQuantizeLinear -> MatMulInteger(B [16, 24]) -> Cast -> Mul(scales)
// -> Add(bias) -> y, as ONNX Runtime's dynamic quantizer writes a MatMul with a bias.
Graph dynamic_graph(const Variant& v = {}) {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 5, 16});
  std::vector<std::int8_t> b(16 * 24);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::int8_t>(static_cast<int>(i * 53 % 255) - 127);
  g.add_initializer("b", Tensor::from_vector(b, {16, 24}));
  std::vector<float> bs;
  for (int j = 0; j < (v.per_column ? 24 : 1); ++j) bs.push_back(0.004f + 0.0005f * static_cast<float>(j % 3));
  g.add_initializer("bs", v.per_column ? Tensor::from_vector(bs, {24}) : Tensor::scalar(bs[0]));
  g.add_initializer("bz", Tensor::scalar(std::int8_t{0}));
  g.add_initializer("bias", random_tensor({24}, 3));
  g.add_node("DynamicQuantizeLinear", {"x"}, {"xq", "xs", "xz"});
  g.add_node("MatMulInteger", {"xq", "b", "xz", "bz"}, {"acc"});
  g.add_node("Cast", {"acc"}, {"accf"}, {{"to", Attribute(std::int64_t(v.cast_to_int ? DType::Int64 : DType::Float32))}});
  g.add_node("Mul", v.scales_swapped ? std::vector<std::string>{"bs", "xs"} : std::vector<std::string>{"xs", "bs"}, {"s"});
  g.add_node("Mul", {"accf", "s"}, {"m"});
  g.add_node("Add", {"m", "bias"}, {"y"});
  g.add_output("y");
  return g;
}

TensorMap inputs() { return {{"x", random_tensor({3, 5, 16}, 8, -2.0f, 3.0f)}}; }

}  // namespace

TEST_CASE("fuse_matmul_integer makes dynamic quantization's product one op with the same floats", "[optimizer][passes][int8]") {
  for (bool per_column : {true, false})
    for (bool swapped : {false, true}) {
      Variant v;
      v.per_column = per_column;
      v.scales_swapped = swapped;
      const Graph g = dynamic_graph(v);
      const Graph opt = optimized(g);
      CHECK(count_op(opt, "MatMulIntegerToFloat", kWpkDomain) == 1);
      CHECK(count_op(opt, "MatMulInteger") == 0);
      CHECK(count_op(opt, "Cast") == 0);
      CHECK(count_op(opt, "Mul") == 0);
      CHECK(count_op(opt, "DynamicQuantizeLinear") == 1);
      check_unchanged(g, inputs(), "fuse_matmul_integer", 0, 0);
    }
}

TEST_CASE("fuse_matmul_integer leaves a product cast to another type alone", "[optimizer][passes][int8]") {
  Variant v;
  v.cast_to_int = true;
  CHECK(count_op(optimized(dynamic_graph(v)), "MatMulIntegerToFloat", kWpkDomain) == 0);
}

TEST_CASE("fuse_matmul_integer runs QLinearMatMul with a constant B as the integer product and a requantize",
          "[optimizer][passes][int8]") {
  for (bool per_column : {false, true}) {
    Graph g;
    g.add_input("a", DType::UInt8, {Dim("N"), 5, 16});
    std::vector<std::int8_t> b(16 * 24);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::int8_t>(static_cast<int>(i * 29 % 255) - 127);
    g.add_initializer("b", Tensor::from_vector(b, {16, 24}));
    std::vector<float> bs;
    for (int j = 0; j < 24; ++j) bs.push_back(0.003f + 0.0004f * static_cast<float>(j % 4));
    g.add_initializer("bs", per_column ? Tensor::from_vector(bs, {24}) : Tensor::scalar(bs[0]));
    g.add_initializer("bz", per_column ? Tensor::from_vector(std::vector<std::int8_t>(24, 0), {24}) : Tensor::scalar(std::int8_t{0}));
    g.add_initializer("as", Tensor::scalar(0.02f));
    g.add_initializer("az", Tensor::scalar(std::uint8_t{120}));
    g.add_initializer("ys", Tensor::scalar(0.05f));
    g.add_initializer("yz", Tensor::scalar(std::uint8_t{128}));
    g.add_node("QLinearMatMul", {"a", "as", "az", "b", "bs", "bz", "ys", "yz"}, {"y"});
    g.add_output("y");
    const Graph opt = optimized(g);
    CHECK(count_op(opt, "MatMulIntegerToFloat", kWpkDomain) == 1);
    CHECK(count_op(opt, "QLinearMatMul") == 0);
    CHECK(count_op(opt, "QuantizeLinear") == 1);
    std::vector<std::uint8_t> a(3 * 5 * 16);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<std::uint8_t>(i * 71 % 256);
    // One code at most from QLinearMatMul's own requantization of the double product.
    check_unchanged(g, {{"a", Tensor::from_vector(a, {3, 5, 16})}}, "fuse_matmul_integer", 0, 1);
  }
}

TEST_CASE("fuse_matmul_epilogue gives a quantized product its bias, Gelu and residual", "[optimizer][passes][int8]") {
  // dynamic_graph's product and bias, then Gelu (the feed-forward block) or the residual add
  // before a LayerNorm (the attention block's output).
  for (bool gelu : {true, false}) {
    Graph g = dynamic_graph();
    g.add_input("r", DType::Float32, {Dim("N"), 5, 24});
    g.mutable_outputs().clear();
    if (gelu) {
      g.add_node("Gelu", {"y"}, {"out"}).domain = kWpkDomain;
    } else {
      g.add_node("Add", {"r", "y"}, {"out"});
    }
    g.add_output("out");
    const Graph opt = optimized(g);
    REQUIRE(count_op(opt, "MatMulIntegerToFloat", kWpkDomain) == 1);
    const Node& product = *find_op(opt, "MatMulIntegerToFloat", kWpkDomain);
    CHECK(product.inputs.size() == (gelu ? 7u : 8u));
    CHECK(opt.is_initializer(product.inputs[6]));
    CHECK(product.attr_string("activation", "") == (gelu ? "Gelu" : ""));
    CHECK(count_op(opt, "Add") == 0);
    CHECK(count_op(opt, "Gelu", kWpkDomain) == 0);
    TensorMap in = inputs();
    in["r"] = random_tensor({3, 5, 24}, 9);
    check_unchanged(g, in, "fuse_matmul_epilogue");
  }
}

namespace {

// x [N, 6, 9, 9] -> DynamicQuantizeLinear -> ConvInteger(W [8, 6 / group, 3, 3], stride 2,
// pads 1) -> Cast -> Mul(X_scale * W_scale) -> Add(bias [1, 8, 1, 1]) -> y, as ONNX Runtime's
// dynamic quantizer writes a Conv.
Graph dynamic_conv_graph(std::int64_t group, bool per_channel_scale = false) {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 6, 9, 9});
  std::vector<std::int8_t> w(static_cast<std::size_t>(8 * (6 / group) * 9));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<std::int8_t>(static_cast<int>(i * 41 % 255) - 127);
  g.add_initializer("w", Tensor::from_vector(w, {8, 6 / group, 3, 3}));
  g.add_initializer("ws", per_channel_scale ? random_tensor({8, 1, 1}, 4, 0.002f, 0.004f) : Tensor::scalar(0.003f));
  g.add_initializer("wz", Tensor::scalar(std::int8_t{0}));
  g.add_initializer("bias", random_tensor({1, 8, 1, 1}, 5));
  g.add_node("DynamicQuantizeLinear", {"x"}, {"xq", "xs", "xz"});
  g.add_node("ConvInteger", {"xq", "w", "xz", "wz"}, {"acc"},
             {{"group", Attribute(group)}, {"strides", Attribute(std::vector<std::int64_t>{2, 2})},
              {"pads", Attribute(std::vector<std::int64_t>{1, 1, 1, 1})}});
  g.add_node("Cast", {"acc"}, {"accf"}, {{"to", Attribute(std::int64_t(DType::Float32))}});
  g.add_node("Mul", {"xs", "ws"}, {"s"});
  g.add_node("Mul", {"accf", "s"}, {"m"});
  g.add_node("Add", {"m", "bias"}, {"y"});
  g.add_output("y");
  return g;
}

}  // namespace

TEST_CASE("fuse_matmul_integer makes dynamic quantization's convolution one op with the same floats",
          "[optimizer][passes][int8]") {
  for (std::int64_t group : {1, 2}) {
    const Graph g = dynamic_conv_graph(group);
    const Graph opt = optimized(g);
    CHECK(count_op(opt, "ConvIntegerToFloat", kWpkDomain) == 1);
    CHECK(count_op(opt, "ConvInteger") == 0);
    CHECK(count_op(opt, "Cast") == 0);
    CHECK(count_op(opt, "Mul") == 0);
    const TensorMap in = {{"x", random_tensor({2, 6, 9, 9}, 9, -2.0f, 3.0f)}};
    check_unchanged(g, in, "fuse_matmul_integer", 0, 0);
    // Every backend's kernel for it, in a whole session, near the graph as written (the float
    // arithmetic config rounds sums past 2^24, which these stay below).
    const Tensor want = run_on_reference(g, in).at("y");
    CHECK(relative_l2_error(Session(g).run(in).at("y"), want) < 1e-6);
  }
  // A W_scale per channel ([C_out, 1, 1]) is not the fused op's: the graph stays as written.
  CHECK(count_op(optimized(dynamic_conv_graph(1, true)), "ConvIntegerToFloat", kWpkDomain) == 0);
}
