// Optimizer passes: the rewritten graph has the expected shape and computes the same outputs.
#include <catch2/catch.hpp>

#include "support/tensor_compare.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;

namespace {

int count_op(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op_type == op;
  return n;
}

Tensor run_one(const Graph& g, OptimizationLevel level, const std::vector<float>& x) {
  SessionOptions o;
  o.optimizer.level = level;
  Session s(g, o);
  return s.run({{"x", Tensor::borrow(x.data(), {2, 3})}}).at("y");
}

// x -> Identity -> Add(const chain) -> Dropout -> y, plus a dead branch.
Graph sample_graph() {
  Graph g;
  g.add_input("x", DType::Float32, {2, 3});
  g.add_initializer("a", Tensor::from_vector<float>({1, 2, 3}, {3}));
  g.add_initializer("b", Tensor::from_vector<float>({10, 20, 30}, {3}));
  g.add_node("Identity", {"x"}, {"x1"});
  g.add_node("Mul", {"a", "b"}, {"ab"});   // constant: folds to [10, 40, 90]
  g.add_node("Neg", {"ab"}, {"nab"});      // constant chain
  g.add_node("Add", {"x1", "nab"}, {"s"});
  g.add_node("Dropout", {"s"}, {"d"});
  g.add_node("Exp", {"x"}, {"unused"});    // dead
  g.add_node("Relu", {"d"}, {"y"});
  g.add_output("y");
  return g;
}

}  // namespace

TEST_CASE("basic passes remove identities, fold constants and dead code", "[optimizer]") {
  const Graph g = sample_graph();
  OptimizerOptions o;
  o.disabled_passes = {"fuse_elementwise_chains"};  // which would make Add and Relu one node
  const Graph opt = Optimizer(o).optimize(g);
  CHECK(count_op(opt, "Identity") == 0);
  CHECK(count_op(opt, "Dropout") == 0);
  CHECK(count_op(opt, "Mul") == 0);
  CHECK(count_op(opt, "Neg") == 0);
  CHECK(count_op(opt, "Exp") == 0);
  REQUIRE(opt.nodes().size() == 2);  // Add, Relu
  CHECK(opt.nodes()[0].op_type == "Add");
  const Tensor* folded = opt.initializer(opt.nodes()[0].inputs[1]);
  REQUIRE(folded != nullptr);
  CHECK(folded->data<float>()[2] == -90.0f);

  const std::vector<float> x{50, 0, 100, -1, 45, 89};
  const Tensor plain = run_one(g, OptimizationLevel::None, x);
  const Tensor fast = run_one(g, OptimizationLevel::All, x);
  CHECK(wpk::testing::compare_allclose(fast, plain, 0, 0) == "");
  CHECK(plain.data<float>()[0] == 40.0f);
  CHECK(plain.data<float>()[1] == 0.0f);
}

TEST_CASE("passes can be switched off by name", "[optimizer]") {
  OptimizerOptions o;
  o.disabled_passes = {"constant_folding", "fuse_elementwise_chains"};
  const Graph opt = Optimizer(o).optimize(sample_graph());
  CHECK(count_op(opt, "Mul") == 1);
  CHECK(count_op(opt, "Identity") == 0);
  o.disabled_passes = {"no_such_pass"};
  CHECK_THROWS_AS(Optimizer(o), Error);
  OptimizerOptions none;
  none.level = OptimizationLevel::None;
  CHECK(Optimizer(none).pass_names().empty());
}
