// If, Loop and Scan: bodies that read values of the graphs around them (computed ones, inputs,
// constants, two levels up), loop-carried state and scan outputs, and what stops a run: its
// deadline, its cancel flag, the iteration limit, and bodies that do not fit their node.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "support/expect_error.hpp"
#include "support/onnx_model_builder.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;
using wpk::testing::expect_error;
using wpk::testing::OnnxModelBuilder;

namespace {

constexpr int kFloat = 1, kInt64 = 7, kBool = 9;

std::vector<float> values(const Tensor& t) { return std::vector<float>(t.data<float>(), t.data<float>() + t.numel()); }

// out = If(sum(x) > 0): then y * w (w a constant of the main graph), else Concat(y, x), with
// y = x + x computed before the If: the branches give different shapes.
OnnxModelBuilder if_model() {
  OnnxModelBuilder then_b, else_b, m;
  then_b.output("t", {3}).node("Mul", {"y", "w"}, {"t"});
  else_b.output("e", {6}).node("Concat", {"y", "x"}, {"e"}).attr("axis", 0L);
  m.input("x", {3}).output("out", {-1});
  m.float_initializer("w", {3}, {1, 2, 3}).float_initializer("zero", {}, {0});
  m.node("Add", {"x", "x"}, {"y"});
  m.node("ReduceSum", {"x"}, {"s"}).attr("keepdims", 0L);
  m.node("Greater", {"s", "zero"}, {"c"});
  m.node("If", {"c"}, {"out"}).attr("then_branch", then_b).attr("else_branch", else_b);
  return m;
}

// Loop(n, true, acc0 = zeros) with body acc' = acc + step + x/2 (step a main-graph constant, x/2
// computed in the main graph), cond' = max(acc') < 20, scan output acc'.
OnnxModelBuilder loop_model() {
  OnnxModelBuilder body, m;
  body.input("i", {}, kInt64).input("cond_in", {}, kBool).input("acc", {2});
  body.output("cond_out", {}, kBool).output("acc_out", {2}).output("seen", {2});
  body.node("Add", {"acc", "step"}, {"a1"}).node("Add", {"a1", "half_x"}, {"acc_out"});
  body.node("ReduceMax", {"acc_out"}, {"top"}).attr("keepdims", 0L);
  body.node("Less", {"top", "limit"}, {"cond_out"}).node("Identity", {"acc_out"}, {"seen"});
  m.input("n", {}, kInt64).input("x", {2}).output("acc_final", {2}).output("trace", {-1, 2});
  m.float_initializer("step", {2}, {1, 10}).float_initializer("limit", {}, {20}).float_initializer("half", {}, {0.5f});
  m.float_initializer("acc0", {2}, {0, 0});
  m.bool_initializer("go", true);
  m.node("Mul", {"x", "half"}, {"half_x"});
  m.node("Loop", {"n", "go", "acc0"}, {"acc_final", "trace"}).attr("body", body);
  return m;
}

// A Loop whose condition never turns false and which has no trip count.
OnnxModelBuilder endless_loop(int opset = 17) {
  OnnxModelBuilder body(opset), m(opset);
  body.input("i", {}, kInt64).input("cond_in", {}, kBool).input("v", {1});
  body.output("cond_out", {}, kBool).output("v_out", {1});
  body.node("Identity", {"cond_in"}, {"cond_out"}).node("Identity", {"v"}, {"v_out"});
  m.input("v0", {1}).output("v_final", {1});
  m.bool_initializer("go", true);
  m.node("Loop", {"", "go", "v0"}, {"v_final"}).attr("body", body);
  return m;
}

}  // namespace

TEST_CASE("If runs the branch its condition picks, on values of the enclosing graph", "[control]") {
  Session s(load_from_bytes(if_model().bytes()));
  const Tensor pos = s.run({{"x", Tensor::from_vector<float>({1, 2, 3}, {3})}}).at("out");
  CHECK(values(pos) == std::vector<float>{2, 8, 18});
  const Tensor neg = s.run({{"x", Tensor::from_vector<float>({-1, -2, -3}, {3})}}).at("out");
  CHECK(values(neg) == std::vector<float>{-2, -4, -6, -1, -2, -3});
}

TEST_CASE("Loop carries state, stacks scan outputs and stops on its trip count or condition", "[control]") {
  Session s(load_from_bytes(loop_model().bytes()));
  const Tensor x = Tensor::from_vector<float>({0, 0}, {2});
  auto run = [&](std::int64_t n) { return s.run({{"n", Tensor::scalar<std::int64_t>(n)}, {"x", x}}); };
  // acc: {1, 10} then {2, 20}, where the condition turns false.
  TensorMap five = run(5);
  CHECK(values(five.at("acc_final")) == std::vector<float>{2, 20});
  CHECK(five.at("trace").shape() == Shape{2, 2});
  CHECK(values(five.at("trace")) == std::vector<float>{1, 10, 2, 20});
  TensorMap one = run(1);
  CHECK(values(one.at("acc_final")) == std::vector<float>{1, 10});
  TensorMap none = run(0);
  CHECK(values(none.at("acc_final")) == std::vector<float>{0, 0});
  // The body runs as a session of its own; the graph keeps its signature only (its weights are
  // not held twice).
  for (const Node& n : s.graph().nodes())
    if (n.op_type == "Loop") {
      const Graph& body = n.find_attr("body")->g();
      CHECK(body.nodes().empty());
      CHECK(body.initializers().empty());
      CHECK(body.inputs().size() == 4);  // i, cond, acc and the captured x/2
      CHECK(body.outputs().size() == 3);
    }
  CHECK(none.at("trace").shape().at(0) == 0);
  // x/2 is read from the main graph at each iteration.
  TensorMap moved = s.run({{"n", Tensor::scalar<std::int64_t>(1)}, {"x", Tensor::from_vector<float>({4, 2}, {2})}});
  CHECK(values(moved.at("acc_final")) == std::vector<float>{3, 11});
}

TEST_CASE("an If inside a Loop reads values two graphs up", "[control]") {
  OnnxModelBuilder then_b, else_b, body, m;
  then_b.output("t", {2}).node("Add", {"acc", "x"}, {"t"});
  else_b.output("e", {2}).node("Identity", {"acc"}, {"e"});
  body.input("i", {}, kInt64).input("cond_in", {}, kBool).input("acc", {2});
  body.output("cond_out", {}, kBool).output("acc_out", {2});
  body.node("Identity", {"cond_in"}, {"cond_out"});
  body.node("If", {"cond_in"}, {"acc_out"}).attr("then_branch", then_b).attr("else_branch", else_b);
  m.input("x", {2}).output("acc_final", {2});
  m.int64_initializer("three", {}, {3}).float_initializer("acc0", {2}, {0, 0});
  m.bool_initializer("go", true);
  m.node("Loop", {"three", "go", "acc0"}, {"acc_final"}).attr("body", body);
  Session s(load_from_bytes(m.bytes()));
  CHECK(values(s.run({{"x", Tensor::from_vector<float>({1, 2}, {2})}}).at("acc_final")) == std::vector<float>{3, 6});
}

TEST_CASE("Scan walks its input along an axis, in reverse, and stacks along another", "[control]") {
  OnnxModelBuilder body(11), m(11);
  body.input("sum", {2}).input("col", {2}).output("sum_out", {2}).output("col_out", {2});
  body.node("Add", {"sum", "col"}, {"sum_out"}).node("Identity", {"sum_out"}, {"col_out"});
  m.input("X", {2, 3}).output("total", {2}).output("running", {2, 3});
  m.float_initializer("sum0", {2}, {0, 0});
  m.node("Scan", {"sum0", "X"}, {"total", "running"}).attr("body", body).attr("num_scan_inputs", 1L)
      .attr("scan_input_axes", std::vector<long>{1}).attr("scan_input_directions", std::vector<long>{1})
      .attr("scan_output_axes", std::vector<long>{-1});
  Session s(load_from_bytes(m.bytes()));
  const TensorMap out = s.run({{"X", Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3})}});
  CHECK(values(out.at("total")) == std::vector<float>{6, 15});
  // Columns 2, 1, 0: running sums {3, 6}, {5, 11}, {6, 15}, stacked as columns.
  CHECK(out.at("running").shape() == Shape{2, 3});
  CHECK(values(out.at("running")) == std::vector<float>{3, 5, 6, 6, 11, 15});
}

TEST_CASE("a Loop that never ends stops at the deadline, the cancel flag or the iteration limit", "[control][errors]") {
  const TensorMap in = {{"v0", Tensor::from_vector<float>({1}, {1})}};
  Session s(load_from_bytes(endless_loop().bytes()));
  RunOptions soon;
  soon.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
  expect_error([&] { s.run(in, soon); }, ErrorCode::Cancelled, {"Loop", "deadline"});
  std::atomic<bool> stop{false};
  RunOptions flagged;
  flagged.cancel = &stop;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    stop = true;
  });
  expect_error([&] { s.run(in, flagged); }, ErrorCode::Cancelled, {"Loop", "cancelled"});
  canceller.join();
  SessionOptions few;
  few.max_loop_iterations = 1000;
  Session bounded(load_from_bytes(endless_loop().bytes()), few);
  expect_error([&] { bounded.run(in); }, ErrorCode::ResourceExhausted, {"1000 iterations", "max_loop_iterations"});
  // A run without options, and a deadline that does not pass, are not affected.
  Session model(load_from_bytes(loop_model().bytes()));
  RunOptions later;
  later.deadline = std::chrono::steady_clock::now() + std::chrono::hours(1);
  const TensorMap loop_in = {{"n", Tensor::scalar<std::int64_t>(5)}, {"x", Tensor::from_vector<float>({0, 0}, {2})}};
  CHECK(values(model.run(loop_in, later).at("acc_final")) == std::vector<float>{2, 20});
}

TEST_CASE("bodies that do not fit their node are clear errors", "[control][errors]") {
  // A Loop body without the condition input.
  OnnxModelBuilder body, m;
  body.input("i", {}, kInt64).input("v", {1}).output("cond_out", {}, kBool).output("v_out", {1});
  body.node("Identity", {"v"}, {"v_out"});
  body.bool_initializer("yes", true);
  body.node("Identity", {"yes"}, {"cond_out"});
  m.input("v0", {1}).output("v_final", {1});
  m.int64_initializer("two", {}, {2});
  m.node("Loop", {"two", "", "v0"}, {"v_final"}).attr("body", body);
  expect_error([&] { Session s(load_from_bytes(m.bytes())); }, ErrorCode::InvalidModel, {"Loop", "body has 2 inputs"});

  // A branch that reads a value nothing defines.
  OnnxModelBuilder then_b, else_b, ghost;
  then_b.output("t", {1}).node("Identity", {"nowhere"}, {"t"});
  else_b.output("e", {1}).node("Identity", {"x"}, {"e"});
  ghost.input("c", {}, kBool).input("x", {1}).output("out", {1});
  ghost.node("If", {"c"}, {"out"}).attr("then_branch", then_b).attr("else_branch", else_b);
  expect_error([&] { load_from_bytes(ghost.bytes()); }, ErrorCode::InvalidModel, {"If", "'nowhere'"});

  // Branches whose outputs differ in dtype.
  OnnxModelBuilder as_float, as_int, mixed;
  as_float.output("t", {1}).node("Identity", {"x"}, {"t"});
  as_int.output("e", {1}, kInt64).node("Cast", {"x"}, {"e"}).attr("to", static_cast<long>(kInt64));
  mixed.input("c", {}, kBool).input("x", {1}).output("out", {1});
  mixed.node("If", {"c"}, {"out"}).attr("then_branch", as_float).attr("else_branch", as_int);
  expect_error([&] { Session s(load_from_bytes(mixed.bytes())); }, ErrorCode::InvalidModel, {"float32", "int64"});

  // A trip count of the wrong dtype, at run time.
  Session s(load_from_bytes(loop_model().bytes()));
  expect_error([&] { s.run({{"n", Tensor::scalar<float>(2)}, {"x", Tensor::from_vector<float>({0, 0}, {2})}}); },
               ErrorCode::InvalidArgument, {"n"});
}

TEST_CASE("concurrent runs of a Loop give the serial results", "[control][concurrency]") {
  Session s(load_from_bytes(loop_model().bytes()));
  const TensorMap in = {{"n", Tensor::scalar<std::int64_t>(5)}, {"x", Tensor::from_vector<float>({1, -1}, {2})}};
  const std::vector<float> serial = values(s.run(in).at("trace"));
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int r = 0; r < 20; ++r)
        if (values(s.run(in).at("trace")) != serial) ++mismatches;
    });
  for (auto& t : threads) t.join();
  CHECK(mismatches == 0);
}
