// Graphs built in code run like imported ones.
#include <catch2/catch.hpp>

#include "wpk/wpk.hpp"

using namespace wpk;

TEST_CASE("a graph built with the builder API runs with a symbolic batch", "[graph][session]") {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 3});
  g.add_initializer("w", Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2}));
  g.add_initializer("b", Tensor::from_vector<float>({0.5f, -0.5f}, {2}));
  g.add_node("MatMul", {"x", "w"}, {"xw"});
  g.add_node("Add", {"xw", "b"}, {"y"});
  g.add_node("Relu", {"y"}, {"z"});
  g.add_output("z");

  Session s(g);
  for (std::int64_t n : {1, 4}) {
    std::vector<float> x(static_cast<std::size_t>(n * 3));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 3) - 1.0f;  // rows of [-1, 0, 1]
    auto out = s.run({{"x", Tensor::borrow(x.data(), {n, 3})}});
    const Tensor& z = out.at("z");
    REQUIRE(z.shape() == Shape{n, 2});
    for (std::int64_t r = 0; r < n; ++r) {
      // [-1, 0, 1] x w = [-1 + 5, -2 + 6] = [4, 4]; + b = [4.5, 3.5]
      CHECK(z.data<float>()[r * 2] == Approx(4.5f));
      CHECK(z.data<float>()[r * 2 + 1] == Approx(3.5f));
    }
  }
}

TEST_CASE("the builder rejects dangling inputs and duplicate names", "[graph][errors]") {
  Graph g;
  g.add_input("x", DType::Float32, {2});
  CHECK_THROWS_AS(g.add_node("Relu", {"nope"}, {"y"}), Error);
  g.add_node("Relu", {"x"}, {"y"});
  CHECK_THROWS_AS(g.add_node("Relu", {"x"}, {"y"}), Error);
  CHECK_THROWS_AS(g.add_output("missing"), Error);
}

TEST_CASE("returned outputs never alias inputs or weights", "[session]") {
  Graph g;
  g.add_input("x", DType::Float32, {2});
  g.add_initializer("c", Tensor::from_vector<float>({7, 8}, {2}));
  g.add_node("Identity", {"x"}, {"y"});
  g.add_output("y");
  g.add_output("c");
  Session s(g, [] {
    SessionOptions o;
    o.optimizer.level = OptimizationLevel::None;
    return o;
  }());
  std::vector<float> x{1, 2};
  auto out = s.run({{"x", Tensor::borrow(x.data(), {2})}});
  CHECK_FALSE(out.at("y").is_borrowed());
  CHECK(out.at("y").raw() != static_cast<void*>(x.data()));
  out.at("c").data<float>()[0] = 100;  // must not change the session's weights
  CHECK(s.run({{"x", Tensor::borrow(x.data(), {2})}}).at("c").data<float>()[0] == 7);
}
