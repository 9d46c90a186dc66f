// split_conv_over_concat: a channel Concat read only by a 1x1 conv becomes a chain of FusedConv
// over the concat inputs (weights sliced by channel, each adding the previous as its residual).
#include <algorithm>
#include <cmath>

#include "pass_test_util.hpp"

using namespace wpk;
using namespace wpk::testing;

namespace {

// SqueezeNet's fire module tail: x [N, 8, 5, 6] -> expand 1x1 (5 ch) and 3x3 (7 ch) -> Concat ->
// squeeze conv (`kernel` x `kernel`, 4 out, bias, `group`) -> [Add(x4) ->] Relu -> y.
Graph fire(std::int64_t kernel = 1, bool second_reader = false, bool residual = false) {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 8, 5, 6});
  g.add_initializer("we1", random_tensor({5, 8, 1, 1}, 1));
  g.add_initializer("we3", random_tensor({7, 8, 3, 3}, 2));
  g.add_node("Conv", {"x", "we1"}, {"e1"});
  g.add_node("Conv", {"x", "we3"}, {"e3"}, {{"pads", Attribute({1, 1, 1, 1})}});
  g.add_node("Concat", {"e1", "e3"}, {"cat"}, {{"axis", Attribute(std::int64_t{1})}});
  g.add_initializer("ws", random_tensor({4, 12, kernel, kernel}, 3));
  g.add_initializer("bs", random_tensor({4}, 4));
  const std::int64_t pad = kernel / 2;
  g.add_node("Conv", {"cat", "ws", "bs"}, {"s"}, {{"pads", Attribute({pad, pad, pad, pad})}});
  std::string act_in = "s";
  if (residual) {
    g.add_initializer("w4", random_tensor({4, 8, 1, 1}, 5));
    g.add_node("Conv", {"x", "w4"}, {"x4"});
    g.add_node("Add", {"s", "x4"}, {"sum"});
    act_in = "sum";
  }
  g.add_node("Relu", {act_in}, {"y"});
  g.add_output("y");
  if (second_reader) {
    g.add_node("Neg", {"cat"}, {"z"});
    g.add_output("z");
  }
  return g;
}

TensorMap inputs(std::int64_t batch = 2) { return {{"x", random_tensor({batch, 8, 5, 6}, 9)}}; }

// The parts accumulate into one another's bytes only once the memory plan exists (from the
// second run of a shape on): runs 1 and 2 of one session, at batch 1 (NHWC convolutions) and 2
// (matrix products), match the unoptimized graph. The absolute tolerance scales with the largest
// output: both sessions round in float32, and against a float64 evaluation of the residual graph
// (outputs up to 13.7, where one float32 ulp is 9.5e-7) each erred by up to 1.5-1.7e-6 on an
// AVX2 machine, so a fixed 1e-6 asked the two to agree below their own rounding on the
// near-zero outputs that cancellation leaves. A wrong slice or a lost residual is off by ~0.1+.
void check_planned_runs(const Graph& g) {
  const Session fast(g);
  SessionOptions plain_options;
  plain_options.optimizer.level = OptimizationLevel::None;
  const Session plain(g, plain_options);
  for (std::int64_t batch : {1, 2}) {
    const TensorMap in = inputs(batch);
    const Tensor expected = plain.run(in).at("y");
    for (int run = 1; run <= 2; ++run) {
      INFO("batch " << batch << ", run " << run);
      CHECK(compare_allclose(fast.run(in).at("y"), expected, 1e-5, 1e-6 * std::max(1.0, max_abs(expected))) == "");
    }
  }
}

std::vector<const Node*> parts(const Graph& g) {
  std::vector<const Node*> out;
  for (const Node& n : g.nodes())
    if (n.name.find("__part") != std::string::npos) out.push_back(&n);
  return out;
}

}  // namespace

TEST_CASE("split_conv_over_concat runs a 1x1 conv over the concat inputs instead of the concat", "[optimizer][passes]") {
  const Graph g = fire();
  const Graph opt = optimized(g);
  CHECK(count_op(opt, "Concat") == 0);
  const auto p = parts(opt);
  REQUIRE(p.size() == 2);
  // The first part takes the bias and no activation; the last adds it as its residual and
  // applies the Relu; the weights are the two channel slices [4, 5] and [4, 7].
  CHECK(p[0]->inputs.size() == 3);
  CHECK(p[0]->attr_string("activation", "") == "");
  REQUIRE(p[1]->inputs.size() == 4);
  CHECK(p[1]->inputs[2] == kNoValue);
  CHECK(p[1]->inputs[3] == p[0]->outputs[0]);
  CHECK(p[1]->attr_string("activation", "") == "Relu");
  CHECK(opt.initializer(p[0]->inputs[1])->shape() == Shape{4, 5, 1, 1});
  CHECK(opt.initializer(p[1]->inputs[1])->shape() == Shape{4, 7, 1, 1});
  CHECK(p[1]->outputs[0] == opt.value_id("y"));
  CHECK(p[1]->fused_from == std::vector<std::string>{"Concat", "Conv", "Relu"});
  check_unchanged(g, inputs(), "split_conv_over_concat");
  CHECK(compare_allclose(run_on_reference(opt, inputs()).at("y"), run_graph(g, OptimizationLevel::None, inputs()).at("y"),
                         1e-5, 1e-6) == "");
  check_planned_runs(g);
}

TEST_CASE("split_conv_over_concat keeps a residual the conv already adds, and works in NHWC", "[optimizer][passes]") {
  const Graph g = fire(1, false, true);
  const Graph opt = optimized(g);
  CHECK(count_op(opt, "Concat") == 0);
  const auto p = parts(opt);
  REQUIRE(p.size() == 2);
  REQUIRE(p[0]->inputs.size() == 4);
  CHECK(p[0]->inputs[3] != kNoValue);  // the residual starts the chain
  check_unchanged(g, inputs(), "split_conv_over_concat");
  check_planned_runs(g);

  const Graph nhwc = Optimizer().optimize(fire());
  CHECK(count_op(nhwc, "Concat") == 0);
  REQUIRE(parts(nhwc).size() == 2);
  CHECK(parts(nhwc)[0]->attr_int("channels_last", 0) == 1);
}

TEST_CASE("split_conv_over_concat leaves concats it cannot remove", "[optimizer][passes]") {
  CHECK(count_op(optimized(fire(3)), "Concat") == 1);           // a 3x3 reader
  CHECK(count_op(optimized(fire(1, true)), "Concat") == 1);     // another reader
  check_unchanged(fire(1, true), inputs(), "split_conv_over_concat");
  // A Concat whose axis is out of range for its 4-D inputs (a broken model): left for the
  // kernels to reject, never indexed.
  Graph bad_axis = fire();
  for (Node& n : bad_axis.mutable_nodes())
    if (n.op_type == "Concat") n.attributes.insert_or_assign("axis", Attribute(std::int64_t{-100}));
  bad_axis.mutable_value(bad_axis.value_id("cat")).dims = DimList{Dim("N"), 12, 5, 6};  // as a model may declare
  CHECK(count_op(optimized(bad_axis), "Concat") == 1);
  // The channel axis written as -3 is the same concat.
  Graph negative = fire();
  for (Node& n : negative.mutable_nodes())
    if (n.op_type == "Concat") n.attributes.insert_or_assign("axis", Attribute(std::int64_t{-3}));
  CHECK(count_op(optimized(negative), "Concat") == 0);
  // A grouped conv reads each group's slice of the channels (its weights see 12 / 2): left.
  Graph grouped = fire();
  for (Node& n : grouped.mutable_nodes())
    if (n.inputs.size() > 1 && grouped.value(n.inputs[1]).name == "ws") {
      n.attributes.insert_or_assign("group", Attribute(std::int64_t{2}));
      n.inputs[1] = grouped.add_initializer("ws2", random_tensor({4, 6, 1, 1}, 7));
    }
  CHECK(count_op(optimized(grouped), "Concat") == 1);
  check_unchanged(grouped, inputs(), "split_conv_over_concat");
}
