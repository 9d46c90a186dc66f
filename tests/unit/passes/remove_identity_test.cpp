// remove_identity: Identity, inference Dropout and a Concat of one input go, their readers reading
// the input itself; a graph output keeps its node (its name must survive), and a Concat of two
// inputs stays.
#include <catch2/catch.hpp>

#include "pass_test_util.hpp"

using namespace wpk;
using namespace wpk::testing;


TEST_CASE("remove_identity drops a Concat of one input and keeps one of two", "[optimizer][passes]") {
  Graph g;
  g.add_input("x", DType::Float32, {1, 3, 4, 4});
  g.add_node("Concat", {"x"}, {"c"}, {{"axis", Attribute(0)}});
  g.add_node("Relu", {"c"}, {"r"});
  g.add_node("Concat", {"r", "x"}, {"y"}, {{"axis", Attribute(1)}});
  g.add_node("Concat", {"r"}, {"z"}, {{"axis", Attribute(2)}});  // a graph output
  g.add_output("y");
  g.add_output("z");
  const Graph o = optimized(g);
  CHECK(count_op(o, "Concat") == 2);
  const Node* relu = find_op(o, "Relu");
  REQUIRE(relu);
  CHECK(o.value(relu->inputs[0]).name == "x");
  check_unchanged(g, {{"x", random_tensor({1, 3, 4, 4}, 3)}}, "remove_identity");
}

