// Bounds a model cannot cross (SessionOptions::max_rank, max_tensor_elements, memory_limit and the
// optimizer's folding_budget): a ResourceExhausted Error naming the node, at load when the shapes
// are known then, else at run() before the allocation.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <new>
#include <stdexcept>

#include "probe_backend.hpp"
#include "runtime/session_factory.hpp"
#include "support/expect_error.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;
using wpk::testing::expect_error;

namespace {

std::string regression(const std::string& name) {
  return (std::filesystem::path(WPK_SOURCE_DIR) / "tests" / "fuzz" / "regressions" / name).string();
}

// y = Reshape(x, shape) or Expand(x, shape) with the target given at run time.
Graph shape_from_input_graph(const char* op) {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N")});
  g.add_input("shape", DType::Int64, {Dim("R")});
  g.add_node(op, {"x", "shape"}, {"y"});
  g.add_output("y");
  return g;
}

TensorMap shape_inputs(std::vector<float>& x, std::vector<std::int64_t>& shape) {
  return {{"x", Tensor::borrow(x.data(), {static_cast<std::int64_t>(x.size())})},
          {"shape", Tensor::borrow(shape.data(), DType::Int64, {static_cast<std::int64_t>(shape.size())})}};
}

// y = Relu(Relu(x)) over [N, 1024]: every intermediate is N * 4 KiB.
Graph relu_chain() {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 1024});
  g.add_node("Relu", {"x"}, {"a"});
  g.add_node("Relu", {"a"}, {"b"});
  g.add_node("Relu", {"b"}, {"y"});
  g.add_output("y");
  return g;
}

}  // namespace

TEST_CASE("the fuzzers' shape bombs are a ResourceExhausted error at load, at once", "[limits][errors]") {
  const std::pair<const char*, const char*> cases[] = {{"shape-2e50-dims.onnx", "ConstantOfShape"},
                                                       {"shape-67M-dims.onnx", "Reshape"}};
  for (const auto& [file, op] : cases) {
    INFO(file);
    const auto t0 = std::chrono::steady_clock::now();
    expect_error([&] { Session s(load(regression(file))); }, ErrorCode::ResourceExhausted, {op, "limit"});
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1));
  }
}

TEST_CASE("a constant shape over the element limit fails at load, before anything is folded", "[limits][errors]") {
  Graph g;
  g.add_input("x", DType::Float32, {2});
  g.add_initializer("shape", Tensor::from_vector<std::int64_t>({1 << 20, 1 << 20, 64}, {3}));
  g.add_node("ConstantOfShape", {"shape"}, {"huge"});
  g.add_node("Shape", {"huge"}, {"y"});
  g.add_output("y");
  expect_error([&] { Session s(g); }, ErrorCode::ResourceExhausted, {"ConstantOfShape", "max_tensor_elements"});
}

TEST_CASE("a shape given at run time is checked against the rank limit before it is read", "[limits][errors]") {
  for (const char* op : {"Reshape", "Expand"}) {
    INFO(op);
    SessionOptions o;
    o.max_rank = 4;
    Session s(shape_from_input_graph(op), o);
    std::vector<float> x(1, 2.0f);
    std::vector<std::int64_t> ok(4, 1), too_long(5, 1), very_long(1 << 20, 1);
    CHECK(s.run(shape_inputs(x, ok)).at("y").shape() == Shape{1, 1, 1, 1});
    expect_error([&] { s.run(shape_inputs(x, too_long)); }, ErrorCode::ResourceExhausted, {op, "rank 5", "max_rank"});
    expect_error([&] { s.run(shape_inputs(x, very_long)); }, ErrorCode::ResourceExhausted, {op, "max_rank"});
  }
}

TEST_CASE("an output over the element limit at run time fails before it is allocated", "[limits][errors]") {
  SessionOptions o;
  o.max_tensor_elements = 1000;
  Session s(shape_from_input_graph("Expand"), o);
  std::vector<float> x(1, 2.0f);
  std::vector<std::int64_t> fits{10, 100}, too_big{10, 101}, overflows{std::int64_t(1) << 40, std::int64_t(1) << 40};
  CHECK(s.run(shape_inputs(x, fits)).at("y").numel() == 1000);
  expect_error([&] { s.run(shape_inputs(x, too_big)); }, ErrorCode::ResourceExhausted, {"Expand", "1000 elements"});
  expect_error([&] { s.run(shape_inputs(x, overflows)); }, ErrorCode::ResourceExhausted, {"Expand", "max_tensor_elements"});
}

TEST_CASE("weights beyond the memory limit fail at load", "[limits][errors]") {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 256});
  g.add_initializer("w", Tensor::zeros(DType::Float32, {256, 1024}));  // 1 MiB
  g.add_node("MatMul", {"x", "w"}, {"y"});
  g.add_output("y");
  SessionOptions o;
  o.memory_limit = 512 << 10;
  expect_error([&] { Session s(g, o); }, ErrorCode::ResourceExhausted, {"weights", "memory_limit"});
  o.memory_limit = 8 << 20;
  Session s(g, o);
  CHECK(s.run({{"x", Tensor::zeros(DType::Float32, {2, 256})}}).at("y").shape() == Shape{2, 1024});
}

TEST_CASE("a run whose intermediates cross the memory limit fails, and smaller runs go on", "[limits][errors]") {
  for (bool plan_memory : {true, false}) {
    INFO("plan_memory " << plan_memory);
    SessionOptions o;
    o.memory_limit = 1 << 20;
    o.plan_memory = plan_memory;
    Session s(relu_chain(), o);
    const Tensor small = Tensor::zeros(DType::Float32, {8, 1024});
    const Tensor large = Tensor::zeros(DType::Float32, {1024, 1024});  // 4 MiB per intermediate
    for (int run = 0; run < 3; ++run) CHECK(s.run({{"x", small}}).at("y").shape() == Shape{8, 1024});
    expect_error([&] { s.run({{"x", large}}); }, ErrorCode::ResourceExhausted, {"Relu", "memory_limit"});
    // What the failed run reserved was given back.
    for (int run = 0; run < 3; ++run) CHECK(s.run({{"x", small}}).at("y").shape() == Shape{8, 1024});
  }
}

TEST_CASE("a value the model declares larger than the memory limit fails at load", "[limits][errors]") {
  Graph g;
  g.add_input("x", DType::Float32, {64, 1024});
  g.add_node("Relu", {"x"}, {"y"});
  g.add_output("y");
  SessionOptions o;
  o.memory_limit = 128 << 10;  // each value is 256 KiB
  expect_error([&] { Session s(g, o); }, ErrorCode::ResourceExhausted, {"memory_limit"});
}

TEST_CASE("constant folding stays within its budget and leaves larger nodes to run time", "[limits][optimizer]") {
  auto graph = [] {
    Graph g;
    g.add_input("x", DType::Float32, {512, 512});
    g.add_initializer("shape", Tensor::from_vector<std::int64_t>({512, 512}, {2}));  // 1 MiB of floats
    g.add_node("ConstantOfShape", {"shape"}, {"ones"}).attributes.emplace("value", Tensor::from_vector<float>({1.0f}, {1}));
    g.add_node("Add", {"x", "ones"}, {"y"});
    g.add_output("y");
    return g;
  };
  auto has_constant_of_shape = [](const Graph& g) {
    return std::any_of(g.nodes().begin(), g.nodes().end(), [](const Node& n) { return n.op_type == "ConstantOfShape"; });
  };
  OptimizerOptions folded, bounded;
  bounded.folding_budget = 512 << 10;
  CHECK_FALSE(has_constant_of_shape(Optimizer(folded).optimize(graph())));
  CHECK(has_constant_of_shape(Optimizer(bounded).optimize(graph())));

  SessionOptions o;
  o.optimizer = bounded;
  Session s(graph(), o);
  const Tensor y = s.run({{"x", Tensor::zeros(DType::Float32, {512, 512})}}).at("y");
  CHECK(y.data<float>()[0] == 1.0f);
  CHECK(y.data<float>()[512 * 512 - 1] == 1.0f);
}

TEST_CASE("limits that make no sense are an InvalidArgument error", "[limits][errors]") {
  auto with = [](auto set) {
    SessionOptions o;
    set(o);
    return [o] { Session s(relu_chain(), o); };
  };
  expect_error(with([](SessionOptions& o) { o.max_rank = 0; }), ErrorCode::InvalidArgument, {"max_rank"});
  expect_error(with([](SessionOptions& o) { o.max_tensor_elements = 0; }), ErrorCode::InvalidArgument, {"max_tensor_elements"});
  expect_error(with([](SessionOptions& o) { o.memory_limit = -1; }), ErrorCode::InvalidArgument, {"memory_limit"});
  expect_error(with([](SessionOptions& o) { o.optimizer.folding_budget = -1; }), ErrorCode::InvalidArgument,
               {"folding_budget"});
}

TEST_CASE("standard exceptions from a kernel reach the caller as wpk::Error", "[limits][errors]") {
  using runtime_test::WrappingBackend;
  const WrappingBackend out_of_memory("oom", [](KernelContext&) { throw std::bad_alloc(); });
  const WrappingBackend broken("broken", [](KernelContext&) { throw std::logic_error("kernel bug"); });
  Graph g;
  g.add_input("x", DType::Float32, {2});
  g.add_node("Relu", {"x"}, {"y"});
  g.add_output("y");
  const Tensor x = Tensor::zeros(DType::Float32, {2});
  Session a = SessionFactory::create(g, {}, {&out_of_memory});
  expect_error([&] { a.run({{"x", x}}); }, ErrorCode::ResourceExhausted, {"Relu", "out of memory"});
  Session b = SessionFactory::create(g, {}, {&broken});
  expect_error([&] { b.run({{"x", x}}); }, ErrorCode::Internal, {"Relu", "kernel bug"});
}
