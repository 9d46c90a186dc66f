// fold_captured_constants: a body's captured value that folding made a constant becomes a
// constant of the body (If: both branches), the node and the body lose that input, the other
// captured values stay, and every run computes what it did before.
#include <catch2/catch.hpp>

#include "support/onnx_model_builder.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;
using wpk::testing::OnnxModelBuilder;

namespace {

constexpr int kInt64 = 7, kBool = 9;

std::vector<float> values(const Tensor& t) { return std::vector<float>(t.data<float>(), t.data<float>() + t.numel()); }

// Loop(n) with acc' = acc * w + x2, where w = Identity(weight) (a constant only once folded) and
// x2 = x + x (computed each run): the body captures both.
OnnxModelBuilder loop_reading_folded_weight() {
  OnnxModelBuilder body, m;
  body.input("i", {}, kInt64).input("cond_in", {}, kBool).input("acc", {2});
  body.output("cond_out", {}, kBool).output("acc_out", {2});
  body.node("Mul", {"acc", "w"}, {"scaled"}).node("Add", {"scaled", "x2"}, {"acc_out"});
  body.node("Identity", {"cond_in"}, {"cond_out"});
  m.input("n", {}, kInt64).input("x", {2}).output("acc_final", {2});
  m.float_initializer("weight", {2}, {2, 3}).float_initializer("acc0", {2}, {1, 1});
  m.node("Identity", {"weight"}, {"w"}).node("Add", {"x", "x"}, {"x2"});
  m.node("Loop", {"n", "", "acc0"}, {"acc_final"}).attr("body", body);
  return m;
}

const Node& only_loop(const Graph& g) {
  for (const Node& n : g.nodes())
    if (n.op_type == "Loop") return n;
  FAIL("no Loop");
  throw;
}

}  // namespace

TEST_CASE("a constant a Loop body reads from outside becomes the body's own, once folding made it one", "[passes][control]") {
  const Graph loaded = load_from_bytes(loop_reading_folded_weight().bytes());
  REQUIRE(only_loop(loaded).attr_int("__captured", 0) == 2);  // w and x2: w is an Identity's output

  const Graph g = Optimizer().optimize(loaded);
  const Node& loop = only_loop(g);
  CHECK(loop.attr_int("__captured", 0) == 1);  // x2 only
  CHECK(loop.inputs.size() == 4);              // n, cond, acc0, x2
  const Graph& body = loop.find_attr("body")->g();
  REQUIRE(body.inputs().size() == 4);  // i, cond, acc, x2
  CHECK(body.value(body.inputs().back()).name == "x2");
  const ValueId w = body.find_value("w");
  REQUIRE(w != kNoValue);
  REQUIRE(body.initializer(w) != nullptr);
  CHECK(values(*body.initializer(w)) == std::vector<float>{2, 3});

  // The same results with the pass as without it, on inputs that change between runs.
  SessionOptions without;
  without.optimizer.disabled_passes = {"fold_captured_constants"};
  const Session folded(loaded), kept(loaded, without);
  for (float xv : {0.0f, 1.5f, -2.0f}) {
    const TensorMap in = {{"n", Tensor::scalar<std::int64_t>(3)}, {"x", Tensor::from_vector<float>({xv, 1}, {2})}};
    // acc = 1; three times acc = acc * w + 2x: w = 2 -> 8 + 14x, w = 3 -> 27 + 2 * 13 = 53.
    const std::vector<float> want = {8 + 14 * xv, 53};
    CHECK(values(folded.run(in).at("acc_final")) == want);
    CHECK(values(kept.run(in).at("acc_final")) == want);
  }
}
