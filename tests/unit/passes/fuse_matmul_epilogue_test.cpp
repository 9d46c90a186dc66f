// fuse_matmul_epilogue: MatMul/Gemm [+ bias] [+ residual] [+ activation] -> com.wpk FusedMatMul.
#include "pass_test_util.hpp"

using namespace wpk;
using namespace wpk::testing;

namespace {

// x [N, 5, 8] -> MatMul(w [8, 8]) -> "m", and a bias [8].
Graph linear_graph() {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 5, 8});
  g.add_initializer("w", random_tensor({8, 8}, 1));
  g.add_initializer("b", random_tensor({8}, 2));
  g.add_node("MatMul", {"x", "w"}, {"m"}, {}, "linear");
  return g;
}

TensorMap inputs() { return {{"x", random_tensor({2, 5, 8}, 3, -2.0f, 2.0f)}}; }

// The torch export of F.gelu: x * (1 + erf(x / sqrt(2))) * 0.5.
void add_erf_gelu(Graph& g, const std::string& x, const std::string& y) {
  g.add_initializer("sqrt2", Tensor::scalar(1.4142135f));
  g.add_initializer("one", Tensor::scalar(1.0f));
  g.add_initializer("half", Tensor::scalar(0.5f));
  g.add_node("Div", {x, "sqrt2"}, {"gd"});
  g.add_node("Erf", {"gd"}, {"ge"});
  g.add_node("Add", {"ge", "one"}, {"ga"});
  g.add_node("Mul", {x, "ga"}, {"gm"});
  g.add_node("Mul", {"gm", "half"}, {y});
}

}  // namespace

TEST_CASE("fuse_matmul_epilogue fuses bias and erf Gelu (the feed-forward layer)", "[optimizer][passes]") {
  Graph g = linear_graph();
  g.add_node("Add", {"b", "m"}, {"mb"});
  add_erf_gelu(g, "mb", "y");
  g.add_output("y");
  const Graph opt = optimized(g);
  REQUIRE(opt.nodes().size() == 1);
  const Node& n = opt.nodes()[0];
  CHECK(n.op_type == "FusedMatMul");
  CHECK(n.domain == kWpkDomain);
  CHECK(n.attr_string("activation", "") == "Gelu");
  REQUIRE(n.inputs.size() == 3);
  CHECK(n.inputs[2] == opt.value_id("b"));
  check_unchanged(g, inputs(), "fuse_matmul_epilogue");
}

TEST_CASE("fuse_matmul_epilogue fuses bias and residual (before LayerNorm)", "[optimizer][passes]") {
  Graph g = linear_graph();
  g.add_node("Add", {"m", "b"}, {"mb"});
  g.add_node("Add", {"x", "mb"}, {"y"});
  g.add_output("y");
  const Graph opt = optimized(g);
  REQUIRE(opt.nodes().size() == 1);
  const Node& n = opt.nodes()[0];
  CHECK(n.op_type == "FusedMatMul");
  CHECK(n.attr_string("activation", "?").empty());
  REQUIRE(n.inputs.size() == 4);
  CHECK(n.inputs[3] == opt.value_id("x"));
  check_unchanged(g, inputs(), "fuse_matmul_epilogue");
}

TEST_CASE("fuse_matmul_epilogue keeps a residual added after the activation apart", "[optimizer][passes]") {
  Graph g = linear_graph();
  g.add_node("Add", {"m", "b"}, {"mb"});
  g.add_node("Relu", {"mb"}, {"r"});
  g.add_node("Add", {"r", "x"}, {"y"});
  g.add_output("y");
  const Graph opt = optimized(g);
  REQUIRE(opt.nodes().size() == 2);
  CHECK(opt.nodes()[0].op_type == "FusedMatMul");
  CHECK(opt.nodes()[0].attr_string("activation", "") == "Relu");
  CHECK(opt.nodes()[0].inputs.size() == 3);
  CHECK(opt.nodes()[1].op_type == "Add");
  check_unchanged(g, inputs(), "fuse_matmul_epilogue");
}

TEST_CASE("fuse_matmul_epilogue takes a plain Gemm, transposing a constant B", "[optimizer][passes]") {
  for (int trans_b : {0, 1}) {
    INFO("transB " << trans_b);
    Graph g;
    g.add_input("x", DType::Float32, {Dim("N"), 6});
    g.add_initializer("w", random_tensor(trans_b ? Shape{4, 6} : Shape{6, 4}, 1));
    g.add_initializer("c", random_tensor({1, 4}, 2));
    g.add_node("Gemm", {"x", "w", "c"}, {"m"}, {{"transB", Attribute(trans_b)}});
    g.add_node("Tanh", {"m"}, {"y"});
    g.add_output("y");
    const Graph opt = optimized(g);
    REQUIRE(opt.nodes().size() == 1);
    const Node& n = opt.nodes()[0];
    CHECK(n.op_type == "FusedMatMul");
    CHECK(n.attr_string("activation", "") == "Tanh");
    CHECK(opt.initializer(n.inputs[1])->shape() == Shape{6, 4});
    CHECK(opt.initializer(n.inputs[2])->shape() == Shape{4});
    check_unchanged(g, {{"x", random_tensor({3, 6}, 3)}}, "fuse_matmul_epilogue");
  }
}

TEST_CASE("fuse_matmul_epilogue leaves a Gemm that nothing follows as written", "[optimizer][passes]") {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 6});
  g.add_initializer("w", random_tensor({4, 6}, 1));
  g.add_initializer("c", random_tensor({4}, 2));
  g.add_node("Gemm", {"x", "w", "c"}, {"y"}, {{"transB", Attribute(1)}});
  g.add_output("y");
  const Graph opt = optimized(g);
  REQUIRE(opt.nodes().size() == 1);
  CHECK(opt.nodes()[0].op_type == "Gemm");
  CHECK(opt.initializer(opt.nodes()[0].inputs[1])->shape() == Shape{4, 6});  // not transposed
}

TEST_CASE("fuse_matmul_epilogue leaves Gemm with alpha or a bias of another shape", "[optimizer][passes]") {
  Graph g;
  g.add_input("x", DType::Float32, {3, 6});
  g.add_initializer("w", random_tensor({6, 4}, 1));
  g.add_initializer("c", random_tensor({3, 4}, 2));
  g.add_node("Gemm", {"x", "w", "c"}, {"m1"});
  g.add_node("Gemm", {"x", "w"}, {"m2"}, {{"alpha", Attribute(2.0f)}});
  g.add_node("Relu", {"m2"}, {"r"});
  g.add_output("m1");
  g.add_output("r");
  const Graph opt = optimized(g);
  CHECK(count_op(opt, "FusedMatMul", kWpkDomain) == 0);
  CHECK(count_op(opt, "Gemm") == 2);
}
