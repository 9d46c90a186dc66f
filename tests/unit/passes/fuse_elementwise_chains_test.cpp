// fuse_elementwise_chains: element-wise ops whose results only the next one reads become one
// ElementwiseChain, with broadcast constants and values from outside as its inputs; a result
// something else reads, an operand read twice by one op, and values of unknown dims end a chain.
// Every run computes what the unfused graph does: as its steps (the parts backend), on the
// generated kernel alone, and on the reference. A chain whose attributes make none is refused
// at load.
#include "pass_test_util.hpp"

using namespace wpk;
using namespace wpk::testing;

namespace {

// x [2, 8, 5, 7], z [2, 8, 5, 7] -> y = Sigmoid(x * a + b) - Tanh(z) / c + Relu(x)
// a [8, 1, 1] per channel, b [1], c [7] along the last axis.
Graph chain_graph(bool second_reader, const DimList& x_dims = {2, 8, 5, 7}) {
  Graph g;
  g.add_input("x", DType::Float32, x_dims);
  g.add_input("z", DType::Float32, {2, 8, 5, 7});
  g.add_initializer("a", random_tensor({8, 1, 1}, 1));
  g.add_initializer("b", random_tensor({1}, 2));
  g.add_initializer("c", random_tensor({7}, 3, 0.5f, 2.0f));
  g.add_node("Mul", {"x", "a"}, {"xa"});
  g.add_node("Add", {"xa", "b"}, {"xab"});
  g.add_node("Sigmoid", {"xab"}, {"s"});
  g.add_node("Tanh", {"z"}, {"t"});
  g.add_node("Div", {"t", "c"}, {"tc"});
  g.add_node("Sub", {"s", "tc"}, {"d"});
  g.add_node("Relu", {"x"}, {"r"});
  g.add_node("Add", {"d", "r"}, {"y"});
  g.add_output("y");
  if (second_reader) g.add_output("s");
  return g;
}

const TensorMap& chain_inputs() {
  static const TensorMap in{{"x", random_tensor({2, 8, 5, 7}, 9, -3, 3)}, {"z", random_tensor({2, 8, 5, 7}, 10, -3, 3)}};
  return in;
}

void check_same_outputs(const Graph& g, const Graph& opt, const std::vector<std::string>& outputs) {
  const TensorMap& in = chain_inputs();
  const TensorMap want = run_graph(g, OptimizationLevel::None, in);
  SessionOptions parts;
  parts.disabled_kernels = {"gen"};
  RunProfile profile;
  const TensorMap on_parts = Session(g, parts).run(in, &profile), on_reference = run_on_reference(opt, in);
  int chains = 0;
  for (const StepProfile& step : profile.steps)
    if (step.op == "com.wpk.ElementwiseChain") {
      INFO(step.backend);
      CHECK(step.backend.rfind("parts", 0) == 0);
      ++chains;
    }
  CHECK(chains == count_op(opt, "ElementwiseChain", kWpkDomain));
  // The generated kernel alone: the parts backend has no kernel for a step without the others.
  SessionOptions generated;
  generated.disabled_kernels = {"onednn", "cpu", "parts"};
  RunProfile generated_profile;
  const TensorMap on_generated = Session(g, generated).run(in, &generated_profile);
  for (const StepProfile& step : generated_profile.steps)
    if (step.op == "com.wpk.ElementwiseChain") {
      INFO(step.backend);
      CHECK(step.backend.rfind("gen", 0) == 0);
    }
  for (const std::string& name : outputs) {
    CHECK(compare_allclose(on_parts.at(name), want.at(name), 1e-5, 1e-6) == "");
    CHECK(compare_allclose(on_reference.at(name), want.at(name), 1e-5, 1e-6) == "");
    CHECK(compare_allclose(on_generated.at(name), want.at(name), 1e-4, 1e-5) == "");
  }
}

}  // namespace

TEST_CASE("fuse_elementwise_chains makes one node of element-wise ops that only the next one reads", "[passes][optimizer]") {
  const Graph g = chain_graph(false);
  const Graph opt = Optimizer().optimize(g);
  REQUIRE(count_op(opt, "ElementwiseChain", kWpkDomain) == 1);
  for (const char* op : {"Mul", "Add", "Sigmoid", "Tanh", "Div", "Sub", "Relu"}) CHECK(count_op(opt, op) == 0);
  const Node& chain = *find_op(opt, "ElementwiseChain", kWpkDomain);
  CHECK(chain.inputs.size() == 5);  // x (read twice, one input), a, b, z, c
  CHECK(chain.attr_ints("operands").size() == 16);
  check_same_outputs(g, opt, {"y"});
}

TEST_CASE("fuse_elementwise_chains ends a chain where another node reads a step's result", "[passes][optimizer]") {
  const Graph g = chain_graph(true);
  const Graph opt = Optimizer().optimize(g);
  // Mul, Add, Sigmoid form one chain (s is an output); Tanh, Div, Sub, Relu, Add the other.
  CHECK(count_op(opt, "ElementwiseChain", kWpkDomain) == 2);
  check_same_outputs(g, opt, {"y", "s"});
}

TEST_CASE("fuse_elementwise_chains leaves values of unknown dims and an operand read twice", "[passes][optimizer]") {
  const Graph dynamic = chain_graph(false, {Dim("N"), 8, 5, 7});
  const Graph opt = Optimizer().optimize(dynamic);
  // Tanh, Div (z is of static dims) form the only chain: everything x reaches is of unknown dims.
  CHECK(count_op(opt, "ElementwiseChain", kWpkDomain) == 1);
  Graph square;
  square.add_input("x", DType::Float32, {4, 9});
  square.add_node("Tanh", {"x"}, {"t"});
  square.add_node("Mul", {"t", "t"}, {"y"});
  square.add_output("y");
  const Graph square_opt = Optimizer().optimize(square);
  CHECK(count_op(square_opt, "ElementwiseChain", kWpkDomain) == 0);
  CHECK(count_op(square_opt, "Mul") == 1);
}

TEST_CASE("an ElementwiseChain whose attributes make no chain is refused at load", "[passes][optimizer]") {
  struct Bad {
    std::vector<std::string> ops;
    std::vector<std::int64_t> operands;
    const char* says;
  };
  for (const Bad& bad : {Bad{{"Add"}, {0}, "two operands a step"}, Bad{{"Conv"}, {0, 1}, "not an op a chain holds"},
                         Bad{{"Add"}, {0, 2}, "reads a value"}, Bad{{"Relu"}, {0, 1}, "reads a value"},
                         Bad{{}, {}, "no steps"}}) {
    Graph g;
    g.add_input("x", DType::Float32, {3});
    g.add_input("w", DType::Float32, {3});
    Node& n = g.add_node("ElementwiseChain", {"x", "w"}, {"y"});
    n.domain = kWpkDomain;
    n.attributes.emplace("ops", Attribute(bad.ops));
    n.attributes.emplace("operands", Attribute(bad.operands));
    g.add_output("y");
    INFO(bad.says);
    try {
      const Session s(g);
      const TensorMap out = s.run({{"x", random_tensor({3}, 1)}, {"w", random_tensor({3}, 2)}});
      FAIL("loaded and ran");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidModel);
      CHECK(std::string(e.what()).find(bad.says) != std::string::npos);
    }
  }
}

TEST_CASE("fuse_elementwise_chains makes chains of at most 16 steps of a long run of ops", "[passes][optimizer]") {
  // 40 ops in a row: 16 + 16 + 8 steps, each chain's attributes within the bound.
  Graph g;
  g.add_input("x", DType::Float32, {3, 5});
  std::string prev = "x";
  for (int k = 0; k < 40; ++k) {
    const std::string out = k == 39 ? "y" : "v" + std::to_string(k);
    g.add_node(k % 2 ? "Neg" : "Tanh", {prev}, {out});
    prev = out;
  }
  g.add_output("y");
  const Graph opt = Optimizer().optimize(g);
  CHECK(count_op(opt, "ElementwiseChain", kWpkDomain) == 3);
  for (const Node& n : opt.nodes()) CHECK(n.attr_ints("operands").size() <= 32);
  const TensorMap in{{"x", random_tensor({3, 5}, 4, -2, 2)}};
  const TensorMap want = run_graph(g, OptimizationLevel::None, in);
  CHECK(compare_allclose(run_graph(g, OptimizationLevel::All, in).at("y"), want.at("y"), 1e-5, 1e-6) == "");
}
