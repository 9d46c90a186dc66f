// fold_batchnorm: BatchNormalization after Conv / Gemm / 2-D MatMul folds into the weights.
#include "pass_test_util.hpp"

using namespace wpk;
using namespace wpk::testing;

namespace {

// BatchNormalization parameters for `c` channels with non-trivial statistics.
void add_bn_params(Graph& g, std::int64_t c, unsigned seed) {
  g.add_initializer("bn_scale", random_tensor({c}, seed, 0.5f, 1.5f));
  g.add_initializer("bn_bias", random_tensor({c}, seed + 1, -0.5f, 0.5f));
  g.add_initializer("bn_mean", random_tensor({c}, seed + 2, -0.5f, 0.5f));
  g.add_initializer("bn_var", random_tensor({c}, seed + 3, 0.5f, 1.5f));
}

Graph conv_bn(bool conv_bias, bool conv_output_read_twice) {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 3, 8, 8});
  g.add_initializer("w", random_tensor({4, 3, 3, 3}, 1));
  std::vector<std::string> conv_in = {"x", "w"};
  if (conv_bias) {
    g.add_initializer("b", random_tensor({4}, 2));
    conv_in.push_back("b");
  }
  add_bn_params(g, 4, 10);
  g.add_node("Conv", conv_in, {"c"}, {{"pads", Attribute({1, 1, 1, 1})}});
  g.add_node("BatchNormalization", {"c", "bn_scale", "bn_bias", "bn_mean", "bn_var"}, {"y"},
             {{"epsilon", Attribute(1e-3f)}});
  g.add_output("y");
  if (conv_output_read_twice) {
    g.add_node("Relu", {"c"}, {"r"});
    g.add_output("r");
  }
  return g;
}

}  // namespace

TEST_CASE("fold_batchnorm folds BatchNormalization into the Conv before it", "[optimizer][passes]") {
  for (bool conv_bias : {false, true}) {
    const Graph g = conv_bn(conv_bias, false);
    const Graph opt = optimized(g);
    CHECK(count_op(opt, "BatchNormalization") == 0);
    REQUIRE(opt.nodes().size() == 1);
    CHECK(opt.nodes()[0].op_type == "Conv");
    REQUIRE(opt.nodes()[0].inputs.size() == 3);  // the folded bias
    check_unchanged(g, {{"x", random_tensor({2, 3, 8, 8}, 3)}}, "fold_batchnorm", 1e-5, 1e-5);
  }
}

TEST_CASE("fold_batchnorm leaves a Conv whose output has another reader", "[optimizer][passes]") {
  const Graph opt = optimized(conv_bn(true, true));
  CHECK(count_op(opt, "BatchNormalization") == 1);
}

TEST_CASE("fold_batchnorm folds into Gemm and into a 2-D MatMul", "[optimizer][passes]") {
  for (const char* op : {"Gemm", "MatMul"}) {
    INFO(op);
    Graph g;
    g.add_input("x", DType::Float32, {Dim("N"), 5});
    add_bn_params(g, 6, 20);
    if (std::string(op) == "Gemm") {
      g.add_initializer("w", random_tensor({6, 5}, 4));
      g.add_initializer("c", random_tensor({6}, 5));
      g.add_node("Gemm", {"x", "w", "c"}, {"m"}, {{"transB", Attribute(1)}, {"beta", Attribute(0.5f)}});
    } else {
      g.add_initializer("w", random_tensor({5, 6}, 4));
      g.add_node("MatMul", {"x", "w"}, {"m"});
    }
    g.add_node("BatchNormalization", {"m", "bn_scale", "bn_bias", "bn_mean", "bn_var"}, {"y"});
    g.add_output("y");
    const Graph opt = optimized(g, {"fuse_matmul_epilogue"});
    CHECK(count_op(opt, "BatchNormalization") == 0);
    REQUIRE(opt.nodes().size() == 1);
    CHECK(opt.nodes()[0].op_type == "Gemm");
    check_unchanged(g, {{"x", random_tensor({3, 5}, 6)}}, "fold_batchnorm", 1e-5, 1e-5);
  }
}

TEST_CASE("fold_batchnorm leaves a MatMul whose input rank is unknown", "[optimizer][passes]") {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 2, 5});  // BN's channel axis is then 2, not the columns
  add_bn_params(g, 2, 30);
  g.add_initializer("w", random_tensor({5, 2}, 4));
  g.add_node("MatMul", {"x", "w"}, {"m"});
  g.add_node("BatchNormalization", {"m", "bn_scale", "bn_bias", "bn_mean", "bn_var"}, {"y"});
  g.add_output("y");
  CHECK(count_op(optimized(g), "BatchNormalization") == 1);
}
