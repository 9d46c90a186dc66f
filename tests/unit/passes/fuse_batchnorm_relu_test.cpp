// fuse_batchnorm_relu: a BatchNorm that cannot fold, followed by Relu, becomes one FusedBatchNorm.
#include "pass_test_util.hpp"

using namespace wpk;
using namespace wpk::testing;

namespace {

// x -> BatchNormalization -> Relu -> y, plus (optionally) a second reader of the BN output.
Graph bn_relu(bool second_reader) {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 6, 4, 5});
  g.add_initializer("scale", random_tensor({6}, 1, 0.5f, 1.5f));
  g.add_initializer("bias", random_tensor({6}, 2));
  g.add_initializer("mean", random_tensor({6}, 3));
  g.add_initializer("var", random_tensor({6}, 4, 0.5f, 1.5f));
  g.add_node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"bn"}, {{"epsilon", 1e-3f}});
  g.add_node("Relu", {"bn"}, {"y"});
  g.add_output("y");
  if (second_reader) {
    g.add_node("Neg", {"bn"}, {"z"});
    g.add_output("z");
  }
  return g;
}

}  // namespace

TEST_CASE("fuse_batchnorm_relu fuses BatchNorm and the Relu that alone reads it", "[passes][optimizer]") {
  const Graph g = bn_relu(false);
  const Graph opt = optimized(g);
  REQUIRE(count_op(opt, "FusedBatchNorm", kWpkDomain) == 1);
  CHECK(count_op(opt, "BatchNormalization") == 0);
  CHECK(count_op(opt, "Relu") == 0);
  CHECK(find_op(opt, "FusedBatchNorm", kWpkDomain)->attr_string("activation", "") == "Relu");
  const TensorMap in{{"x", random_tensor({2, 6, 4, 5}, 9)}};
  CHECK(compare_allclose(run_graph(g, OptimizationLevel::All, in).at("y"), run_graph(g, OptimizationLevel::None, in).at("y"),
                         1e-5, 1e-6) == "");
  CHECK(compare_allclose(run_on_reference(opt, in).at("y"), run_graph(g, OptimizationLevel::None, in).at("y"), 1e-5, 1e-6) ==
        "");
}

TEST_CASE("fuse_batchnorm_relu leaves a BatchNorm output that others read", "[passes][optimizer]") {
  const Graph opt = optimized(bn_relu(true));
  CHECK(count_op(opt, "FusedBatchNorm", kWpkDomain) == 0);
  CHECK(count_op(opt, "BatchNormalization") == 1);
}
