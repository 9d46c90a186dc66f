// fuse_layernorm: layer normalization written out op by op -> LayerNormalization.
#include "pass_test_util.hpp"

using namespace wpk;
using namespace wpk::testing;

namespace {

// ReduceMean -> Sub -> Pow(2) -> ReduceMean -> Add(eps) -> Sqrt -> Div [-> Mul(scale) -> Add(bias)].
Graph layernorm_graph(std::int64_t opset, bool affine) {
  Graph g;
  g.set_opset(opset);
  g.add_input("x", DType::Float32, {Dim("N"), 5, 16});
  g.add_initializer("two", Tensor::scalar(2.0f));
  g.add_initializer("eps", Tensor::scalar(1e-5f));
  g.add_initializer("scale", random_tensor({16}, 1, 0.5f, 1.5f));
  g.add_initializer("bias", random_tensor({16}, 2));
  const std::map<std::string, Attribute> last_axis = {{"axes", Attribute({-1})}};
  g.add_node("ReduceMean", {"x"}, {"mean"}, last_axis);
  g.add_node("Sub", {"x", "mean"}, {"d"});
  g.add_node("Pow", {"d", "two"}, {"sq"});
  g.add_node("ReduceMean", {"sq"}, {"var"}, last_axis);
  g.add_node("Add", {"var", "eps"}, {"ve"});
  g.add_node("Sqrt", {"ve"}, {"std"});
  g.add_node("Div", {"d", "std"}, {affine ? "n" : "y"});
  if (affine) {
    g.add_node("Mul", {"n", "scale"}, {"ns"});
    g.add_node("Add", {"bias", "ns"}, {"y"});
  }
  g.add_output("y");
  return g;
}

TensorMap inputs() { return {{"x", random_tensor({2, 5, 16}, 3, -3.0f, 3.0f)}}; }

}  // namespace

TEST_CASE("fuse_layernorm makes LayerNormalization (opset 17) or com.wpk's (older)", "[optimizer][passes]") {
  for (std::int64_t opset : {13, 17})
    for (bool affine : {false, true}) {
      INFO("opset " << opset << (affine ? " with scale and bias" : ""));
      const Graph g = layernorm_graph(opset, affine);
      const Graph opt = optimized(g);
      REQUIRE(opt.nodes().size() == 1);
      const Node& n = opt.nodes()[0];
      CHECK(n.op_type == "LayerNormalization");
      CHECK(n.domain == (opset >= 17 ? "" : kWpkDomain));
      CHECK(n.attr_float("epsilon", 0) == 1e-5f);
      CHECK(n.inputs.size() == (affine ? 3u : 2u));
      check_unchanged(g, inputs(), "fuse_layernorm", 1e-5, 1e-5);
    }
}

TEST_CASE("fuse_layernorm needs the mean over the last axis alone", "[optimizer][passes]") {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 5, 16});
  g.add_initializer("two", Tensor::scalar(2.0f));
  g.add_initializer("eps", Tensor::scalar(1e-5f));
  g.add_node("ReduceMean", {"x"}, {"mean"}, {{"axes", Attribute({1})}});
  g.add_node("Sub", {"x", "mean"}, {"d"});
  g.add_node("Pow", {"d", "two"}, {"sq"});
  g.add_node("ReduceMean", {"sq"}, {"var"}, {{"axes", Attribute({1})}});
  g.add_node("Add", {"var", "eps"}, {"ve"});
  g.add_node("Sqrt", {"ve"}, {"std"});
  g.add_node("Div", {"d", "std"}, {"y"});
  g.add_output("y");
  CHECK(count_op(optimized(g), "LayerNormalization") == 0);
}
