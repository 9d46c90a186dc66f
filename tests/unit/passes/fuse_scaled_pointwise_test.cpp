// fuse_scaled_pointwise: a pointwise NHWC conv reading only the product of an activation and a
// per-image, per-channel gate (squeeze-and-excitation) becomes one ScaledPointwiseConv carrying
// the conv's epilogue and residual; a product something else reads, or one that scales pixel by
// pixel, stays a Mul. Every run computes what the unfused graph does: as its parts (the Mul and
// the conv on their own kernels, through the parts backend), on the generated group kernel alone,
// and on the reference.
#include "pass_test_util.hpp"

using namespace wpk;
using namespace wpk::testing;

namespace {

struct Block {
  bool gate_first = false;    // Mul(gate, x) rather than Mul(x, gate)
  bool residual = false;      // the projection adds the block's input
  bool second_reader = false;  // the scaled activation is also a graph output
  bool pixel_gate = false;    // the gate is [N, C, H, W], not [N, C, 1, 1]
};

// x [N, 16, 6, 7] -> Conv (bias, Relu: NHWC from here) -> e -> gate s = Sigmoid(Conv(Relu(Conv(GlobalAveragePool(e))))) ->
// Mul(e, s) -> pointwise conv to 16 channels (bias) [-> + x].
Graph excitation_block(const Block& b) {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 16, 6, 7});
  g.add_initializer("w0", random_tensor({16, 16, 1, 1}, 7));
  g.add_initializer("b0", random_tensor({16}, 8));
  g.add_node("Conv", {"x", "w0", "b0"}, {"c0"});
  g.add_node("Relu", {"c0"}, {"e"});
  g.add_initializer("w1", random_tensor({4, 16, 1, 1}, 1));
  g.add_initializer("b1", random_tensor({4}, 2));
  g.add_initializer("w2", random_tensor({16, 4, 1, 1}, 3));
  g.add_initializer("b2", random_tensor({16}, 4));
  g.add_initializer("wp", random_tensor({16, 16, 1, 1}, 5));
  g.add_initializer("bp", random_tensor({16}, 6));
  if (b.pixel_gate) {
    g.add_node("Sigmoid", {"e"}, {"s"});
  } else {
    g.add_node("GlobalAveragePool", {"e"}, {"pooled"});
    g.add_node("Conv", {"pooled", "w1", "b1"}, {"squeezed"});
    g.add_node("Relu", {"squeezed"}, {"squeezed_relu"});
    g.add_node("Conv", {"squeezed_relu", "w2", "b2"}, {"excited"});
    g.add_node("Sigmoid", {"excited"}, {"s"});
  }
  g.add_node("Mul", b.gate_first ? std::vector<std::string>{"s", "e"} : std::vector<std::string>{"e", "s"}, {"scaled"});
  g.add_node("Conv", {"scaled", "wp", "bp"}, {b.residual ? "p" : "y"});
  if (b.residual) g.add_node("Add", {"p", "x"}, {"y"});
  g.add_output("y");
  if (b.second_reader) g.add_output("scaled");
  return g;
}

void check_same_outputs(const Graph& g, const Graph& opt, const std::vector<std::string>& outputs) {
  const TensorMap in{{"x", random_tensor({2, 16, 6, 7}, 9, -2, 2)}};
  const TensorMap want = run_graph(g, OptimizationLevel::None, in);
  SessionOptions generated, parts;
  generated.disabled_kernels = {"onednn", "cpu"};
  parts.disabled_kernels = {"gen"};  // its kernel, compiled for an earlier session, would be ranked first
  RunProfile parts_profile, generated_profile;
  const TensorMap on_parts = Session(g, parts).run(in, &parts_profile), on_reference = run_on_reference(opt, in),
                  on_generated = Session(g, generated).run(in, &generated_profile);
  for (const StepProfile& step : parts_profile.steps)
    if (step.op == "com.wpk.ScaledPointwiseConv") {
      INFO(step.backend);
      CHECK(step.backend.rfind("parts", 0) == 0);
    }
  for (const StepProfile& step : generated_profile.steps)
    if (step.op == "com.wpk.ScaledPointwiseConv") CHECK(step.backend.rfind("gen", 0) == 0);
  for (const std::string& name : outputs) {
    CHECK(compare_allclose(on_parts.at(name), want.at(name), 1e-4, 1e-5) == "");
    CHECK(compare_allclose(on_reference.at(name), want.at(name), 1e-4, 1e-5) == "");
    CHECK(compare_allclose(on_generated.at(name), want.at(name), 1e-4, 1e-5) == "");
  }
}

}  // namespace

TEST_CASE("fuse_scaled_pointwise makes one node of a gate's Mul and the pointwise conv that reads it", "[passes][optimizer]") {
  for (bool gate_first : {false, true}) {
    const Graph g = excitation_block({gate_first, false, false, false});
    const Graph opt = Optimizer().optimize(g);
    REQUIRE(count_op(opt, "ScaledPointwiseConv", kWpkDomain) == 1);
    CHECK(count_op(opt, "Mul") == 0);
    const Node& group = *find_op(opt, "ScaledPointwiseConv", kWpkDomain);
    CHECK(group.inputs.size() == 4);
    CHECK(opt.value(group.inputs[1]).name != "e");  // the gate is input 1 whichever way the Mul reads
    check_same_outputs(g, opt, {"y"});
  }
}

TEST_CASE("fuse_scaled_pointwise keeps the block's residual in the group", "[passes][optimizer]") {
  const Graph g = excitation_block({false, true, false, false});
  const Graph opt = Optimizer().optimize(g);
  REQUIRE(count_op(opt, "ScaledPointwiseConv", kWpkDomain) == 1);
  CHECK(count_op(opt, "Add") == 0);
  CHECK(find_op(opt, "ScaledPointwiseConv", kWpkDomain)->inputs.size() == 5);
  check_same_outputs(g, opt, {"y"});
}

TEST_CASE("fuse_scaled_pointwise leaves a product that others read, and a gate per pixel", "[passes][optimizer]") {
  for (const Block& b : {Block{false, false, true, false}, Block{false, false, false, true}}) {
    const Graph g = excitation_block(b);
    const Graph opt = Optimizer().optimize(g);
    CHECK(count_op(opt, "ScaledPointwiseConv", kWpkDomain) == 0);
    CHECK(count_op(opt, "Mul") == 1);
    check_same_outputs(g, opt, b.second_reader ? std::vector<std::string>{"y", "scaled"} : std::vector<std::string>{"y"});
  }
}

TEST_CASE("the parts backend runs a group on the session's other backends, disabled kernels left out", "[passes][optimizer]") {
  const Graph g = excitation_block({false, true, false, false});
  const TensorMap in{{"x", random_tensor({2, 16, 6, 7}, 9, -2, 2)}};
  const TensorMap want = run_graph(g, OptimizationLevel::None, in);
  SessionOptions no_onednn;
  no_onednn.disabled_kernels = {"onednn", "gen"};
  RunProfile profile;
  const TensorMap got = Session(g, no_onednn).run(in, &profile);
  bool seen = false;
  for (const StepProfile& step : profile.steps)
    if (step.op == "com.wpk.ScaledPointwiseConv") {
      seen = true;
      INFO(step.backend);
      CHECK(step.backend.rfind("parts:cpu", 0) == 0);
      CHECK(step.backend.find("onednn") == std::string::npos);
    }
  CHECK(seen);
  CHECK(compare_allclose(got.at("y"), want.at("y"), 1e-4, 1e-5) == "");
  SessionOptions no_parts;
  no_parts.disabled_kernels = {"parts"};
  RunProfile without;
  const TensorMap got_without = Session(g, no_parts).run(in, &without);
  for (const StepProfile& step : without.steps)
    if (step.op == "com.wpk.ScaledPointwiseConv") CHECK(step.backend.rfind("parts", 0) != 0);
  CHECK(compare_allclose(got_without.at("y"), want.at("y"), 1e-4, 1e-5) == "");
}
