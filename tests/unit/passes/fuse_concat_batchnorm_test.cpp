// fuse_concat_batchnorm: a channel Concat read only by an inference BatchNorm (+ Relu) becomes one
// ConcatBatchNorm, in NCHW and, after the layout pass, in NHWC; other concats stay.
#include "pass_test_util.hpp"

using namespace wpk;
using namespace wpk::testing;

namespace {

void add_bn_params(Graph& g, std::int64_t c) {
  g.add_initializer("scale", random_tensor({c}, 1, 0.5f, 1.5f));
  g.add_initializer("bias", random_tensor({c}, 2));
  g.add_initializer("mean", random_tensor({c}, 3));
  g.add_initializer("var", random_tensor({c}, 4, 0.5f, 1.5f));
}

// DenseNet's pattern: x [N, 8, 5, 6] -> two convs (16 and 17 channels) -> Concat(x?, a, b) ->
// BatchNorm -> Relu -> y. With `with_input`, the graph input x is concatenated too.
Graph dense_layer(bool with_input, bool second_reader = false) {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 8, 5, 6});
  g.add_initializer("w3", random_tensor({16, 8, 3, 3}, 5));
  g.add_initializer("w1", random_tensor({17, 8, 1, 1}, 6));
  g.add_node("Conv", {"x", "w3"}, {"a"}, {{"pads", Attribute({1, 1, 1, 1})}});
  g.add_node("Conv", {"x", "w1"}, {"b"});
  std::vector<std::string> parts = {"a", "b"};
  if (with_input) parts.insert(parts.begin(), "x");
  g.add_node("Concat", parts, {"cat"}, {{"axis", Attribute(std::int64_t{1})}});
  add_bn_params(g, with_input ? 41 : 33);
  g.add_node("BatchNormalization", {"cat", "scale", "bias", "mean", "var"}, {"bn"}, {{"epsilon", 1e-3f}});
  g.add_node("Relu", {"bn"}, {"y"});
  g.add_output("y");
  if (second_reader) {
    g.add_node("Neg", {"cat"}, {"z"});
    g.add_output("z");
  }
  return g;
}

TensorMap inputs() { return {{"x", random_tensor({2, 8, 5, 6}, 9)}}; }

}  // namespace

TEST_CASE("fuse_concat_batchnorm normalises the concat inputs into one output (NCHW)", "[optimizer][passes]") {
  const Graph g = dense_layer(true);
  const Graph opt = optimized(g);
  CHECK(count_op(opt, "Concat") == 0);
  CHECK(count_op(opt, "BatchNormalization") == 0);
  CHECK(count_op(opt, "FusedBatchNorm", kWpkDomain) == 0);
  const Node* fused = find_op(opt, "ConcatBatchNorm", kWpkDomain);
  REQUIRE(fused);
  CHECK(fused->inputs.size() == 7);  // scale, B, mean, var, then the three concat inputs in order
  CHECK(fused->attr_string("activation", "") == "Relu");
  CHECK(fused->attr_int("channels_last", -1) == 0);
  CHECK(fused->attr_float("epsilon", 0.0f) == 1e-3f);
  CHECK(fused->fused_from == std::vector<std::string>{"Concat", "BatchNormalization", "Relu"});
  check_unchanged(g, inputs(), "fuse_concat_batchnorm");
  CHECK(compare_allclose(run_on_reference(opt, inputs()).at("y"), run_graph(g, OptimizationLevel::None, inputs()).at("y"),
                         1e-5, 1e-6) == "");
}

TEST_CASE("fuse_concat_batchnorm fuses the NHWC concat the layout pass makes", "[optimizer][passes]") {
  const Graph g = dense_layer(false);
  const Graph opt = Optimizer().optimize(g);
  CHECK(count_op(opt, "Concat") == 0);
  const Node* fused = find_op(opt, "ConcatBatchNorm", kWpkDomain);
  REQUIRE(fused);
  CHECK(fused->attr_int("channels_last", -1) == 1);
  // Its output keeps a known shape, so kernels after it compile and pack at load.
  const auto& dims = opt.value(fused->outputs[0]).dims;
  REQUIRE(dims);
  CHECK(dims_to_string(*dims) == "[N, 5, 6, 33]");
  check_unchanged(g, inputs(), "fuse_concat_batchnorm");
}

TEST_CASE("fuse_concat_batchnorm leaves concats it cannot absorb", "[optimizer][passes]") {
  // The concatenated tensor is read by another node too.
  CHECK(count_op(optimized(dense_layer(true, true)), "Concat") == 1);
  check_unchanged(dense_layer(true, true), inputs(), "fuse_concat_batchnorm");

  // A concat along H: the BatchNorm's channels are not what was joined.
  Graph h;
  h.add_input("x", DType::Float32, {2, 4, 3, 5});
  h.add_input("x2", DType::Float32, {2, 4, 2, 5});
  h.add_node("Concat", {"x", "x2"}, {"cat"}, {{"axis", Attribute(std::int64_t{2})}});
  add_bn_params(h, 4);
  h.add_node("BatchNormalization", {"cat", "scale", "bias", "mean", "var"}, {"y"});
  h.add_output("y");
  CHECK(count_op(optimized(h), "Concat") == 1);
  check_unchanged(h, {{"x", random_tensor({2, 4, 3, 5}, 1)}, {"x2", random_tensor({2, 4, 2, 5}, 2)}}, "fuse_concat_batchnorm");

  // The channel axis written as -3 is fused like axis 1.
  Graph negative = dense_layer(true);
  for (Node& n : negative.mutable_nodes())
    if (n.op_type == "Concat") n.attributes.insert_or_assign("axis", Attribute(std::int64_t{-3}));
  CHECK(count_op(optimized(negative), "Concat") == 0);
  check_unchanged(negative, inputs(), "fuse_concat_batchnorm");

  // 3-D inputs: BatchNormalization takes them, ConcatBatchNorm is 4-D only.
  Graph r3;
  r3.add_input("x", DType::Float32, {2, 3, 5});
  r3.add_input("x2", DType::Float32, {2, 1, 5});
  r3.add_node("Concat", {"x", "x2"}, {"cat"}, {{"axis", Attribute(std::int64_t{1})}});
  add_bn_params(r3, 4);
  r3.add_node("BatchNormalization", {"cat", "scale", "bias", "mean", "var"}, {"y"});
  r3.add_output("y");
  CHECK(count_op(optimized(r3), "Concat") == 1);

  // Parameters that are graph inputs, not constants.
  Graph p;
  p.add_input("x", DType::Float32, {1, 2, 3, 3});
  p.add_input("scale", DType::Float32, {4});
  p.add_initializer("bias", random_tensor({4}, 2));
  p.add_initializer("mean", random_tensor({4}, 3));
  p.add_initializer("var", random_tensor({4}, 4, 0.5f, 1.5f));
  p.add_node("Concat", {"x", "x"}, {"cat"}, {{"axis", Attribute(std::int64_t{1})}});
  p.add_node("BatchNormalization", {"cat", "scale", "bias", "mean", "var"}, {"y"});
  p.add_output("y");
  CHECK(count_op(optimized(p), "Concat") == 1);
}
