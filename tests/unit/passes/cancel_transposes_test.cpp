// cancel_transposes: Transpose pairs that undo each other go; others compose into one.
#include "pass_test_util.hpp"

using namespace wpk;
using namespace wpk::testing;

namespace {

Graph two_transposes(std::vector<std::int64_t> p1, std::vector<std::int64_t> p2) {
  Graph g;
  g.add_input("x", DType::Float32, {2, 3, 4, 5});
  g.add_node("Transpose", {"x"}, {"t"}, {{"perm", Attribute(p1)}});
  g.add_node("Transpose", {"t"}, {"u"}, {{"perm", Attribute(p2)}});
  g.add_node("Relu", {"u"}, {"y"});
  g.add_output("y");
  return g;
}

TensorMap inputs() { return {{"x", random_tensor({2, 3, 4, 5}, 1)}}; }

}  // namespace

TEST_CASE("cancel_transposes removes NCHW -> NHWC -> NCHW round trips", "[optimizer][passes]") {
  const Graph g = two_transposes({0, 2, 3, 1}, {0, 3, 1, 2});
  const Graph opt = optimized(g);
  CHECK(count_op(opt, "Transpose") == 0);
  REQUIRE(opt.nodes().size() == 1);
  CHECK(opt.nodes()[0].inputs[0] == opt.value_id("x"));
  check_unchanged(g, inputs(), "cancel_transposes", 0, 0);
}

TEST_CASE("cancel_transposes composes two permutations into one", "[optimizer][passes]") {
  const Graph g = two_transposes({0, 2, 3, 1}, {1, 0, 3, 2});
  const Graph opt = optimized(g);
  REQUIRE(count_op(opt, "Transpose") == 1);
  // Axis j of the result is axis p1[p2[j]] of x.
  CHECK(find_op(opt, "Transpose")->attr_ints("perm") == std::vector<std::int64_t>{2, 0, 1, 3});
  check_unchanged(g, inputs(), "cancel_transposes", 0, 0);
}

TEST_CASE("cancel_transposes keeps a first Transpose that others read, and graph outputs", "[optimizer][passes]") {
  Graph g = two_transposes({0, 2, 3, 1}, {0, 3, 1, 2});
  g.add_output("t");
  g.add_output("u");
  const Graph opt = optimized(g);
  CHECK(count_op(opt, "Transpose") == 1);  // "t" is still needed
  CHECK(count_op(opt, "Identity") == 1);   // "u" keeps its name as an output
  check_unchanged(g, inputs(), "cancel_transposes", 0, 0);
}
