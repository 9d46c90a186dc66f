// The passes share one analysis of the graph (index, static shapes) while none changes it.
#include <catch2/catch.hpp>

#include "graph/passes/match.hpp"
#include "wpk/wpk.hpp"

namespace wpk::passes {

TEST_CASE("passes share the graph's analyses until the graph changes", "[optimizer][passes]") {
  Graph g;
  g.add_input("x", DType::Float32, {2, 3});
  g.add_node("Relu", {"x"}, {"r"});
  g.add_output("r");
  PassContext ctx;
  const auto first = analyses_of(g, ctx);
  CHECK(analyses_of(g, ctx) == first);  // nothing changed: the same analyses
  const DimList* r = first->shapes.dims(g.value_id("r"));
  REQUIRE(r);
  CHECK(dims_to_string(*r) == dims_to_string({2, 3}));

  // A node added since: analysed again, and the new value has its shape.
  g.add_node("Neg", {"r"}, {"n"});
  const auto second = analyses_of(g, ctx);
  CHECK(second != first);
  const DimList* n = second->shapes.dims(g.value_id("n"));
  REQUIRE(n);
  CHECK(dims_to_string(*n) == dims_to_string({2, 3}));
  CHECK(second->index.producer_index(g.value_id("n")) == 1);

  // Another graph with the same sizes is not taken for this one.
  Graph other = g;
  CHECK(analyses_of(other, ctx)->graph == &other);

  // A pass that rewrites drops them.
  Graph chain;
  chain.add_input("x", DType::Float32, {4});
  chain.add_node("Identity", {"x"}, {"i"});
  chain.add_node("Relu", {"i"}, {"y"});
  chain.add_output("y");
  PassContext pass_ctx;
  CHECK(analyses_of(chain, pass_ctx)->nodes == 2);
  CHECK(remove_identity(chain, pass_ctx));
  CHECK(chain.nodes().size() == 1);
  CHECK(analyses_of(chain, pass_ctx)->nodes == 1);
}

}  // namespace wpk::passes
