// fuse_gelu: x * 0.5 * (1 + erf(x / sqrt(2))) in its exported forms -> com.wpk Gelu.
#include "pass_test_util.hpp"

using namespace wpk;
using namespace wpk::testing;

namespace {

enum class Form { MulOfMulThenHalf, HalfFirst, HalfOfSum };

// y from a = 1 + f(x): the products with x and 0.5 in `form`, the constant written first or last.
void add_products(Graph& g, Form form, bool constant_first) {
  const auto half_times = [&](const std::string& v) {
    return constant_first ? std::vector<std::string>{"half", v} : std::vector<std::string>{v, "half"};
  };
  switch (form) {
    case Form::MulOfMulThenHalf:  // torch: (x * (1 + f)) * 0.5
      g.add_node("Mul", {"x", "a"}, {"m"});
      g.add_node("Mul", half_times("m"), {"y"});
      break;
    case Form::HalfFirst:  // (x * 0.5) * (1 + f)
      g.add_node("Mul", half_times("x"), {"h"});
      g.add_node("Mul", {"h", "a"}, {"y"});
      break;
    case Form::HalfOfSum:  // x * ((1 + f) * 0.5)
      g.add_node("Mul", half_times("a"), {"h"});
      g.add_node("Mul", {"x", "h"}, {"y"});
      break;
  }
  g.add_output("y");
}

// y = Gelu(x) written out, with x / sqrt(2) as a Div or as a Mul by 1/sqrt(2).
Graph gelu_graph(Form form, bool mul_by_inverse, float sqrt2 = 1.4142135f) {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 16});
  g.add_initializer("half", Tensor::scalar(0.5f));
  g.add_initializer("one", Tensor::scalar(1.0f));
  if (mul_by_inverse) {
    g.add_initializer("inv_sqrt2", Tensor::scalar(0.70710678f));
    g.add_node("Mul", {"inv_sqrt2", "x"}, {"d"});
  } else {
    g.add_initializer("sqrt2", Tensor::scalar(sqrt2));
    g.add_node("Div", {"x", "sqrt2"}, {"d"});
  }
  g.add_node("Erf", {"d"}, {"e"});
  g.add_node("Add", {"e", "one"}, {"a"});
  add_products(g, form, false);
  return g;
}

TensorMap inputs() { return {{"x", random_tensor({3, 16}, 7, -4.0f, 4.0f)}}; }

}  // namespace

TEST_CASE("fuse_gelu recognises the exported forms of erf Gelu", "[optimizer][passes]") {
  for (Form form : {Form::MulOfMulThenHalf, Form::HalfFirst, Form::HalfOfSum})
    for (bool mul_by_inverse : {false, true}) {
      INFO("form " << static_cast<int>(form) << (mul_by_inverse ? ", x * 0.70710678" : ", x / 1.4142135"));
      const Graph g = gelu_graph(form, mul_by_inverse);
      const Graph opt = optimized(g);
      REQUIRE(opt.nodes().size() == 1);
      CHECK(opt.nodes()[0].op_type == "Gelu");
      CHECK(opt.nodes()[0].domain == kWpkDomain);
      CHECK(opt.nodes()[0].inputs[0] == opt.value_id("x"));
      check_unchanged(g, inputs(), "fuse_gelu", 1e-5, 1e-6);
    }
}

TEST_CASE("fuse_gelu leaves look-alikes and shared intermediates", "[optimizer][passes]") {
  SECTION("another constant than sqrt(2)") {
    CHECK(count_op(optimized(gelu_graph(Form::MulOfMulThenHalf, false, 1.5f)), "Gelu", kWpkDomain) == 0);
  }
  SECTION("the erf result is read elsewhere") {
    Graph g = gelu_graph(Form::HalfFirst, false);
    g.add_output("e");
    const Graph opt = optimized(g);
    CHECK(count_op(opt, "Gelu", kWpkDomain) == 0);
    check_unchanged(g, inputs(), "fuse_gelu");
  }
}

namespace {

enum class Cube { Pow, MulOfSquare, SquareFirst };

// y = the tanh approximation written out as exporters do (GPT-2: x^3 as Mul(x, Mul(x, x))),
// constants on the left, the x + w sum in either order, and the final products in `form`;
// `k` and (for Cube::Pow) `exponent` make look-alikes.
Graph gelu_tanh_graph(Cube cube, Form form, bool x_first = true, float k = 0.044715f, float exponent = 3.0f) {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 16});
  g.add_initializer("half", Tensor::scalar(0.5f));
  g.add_initializer("one", Tensor::scalar(1.0f));
  g.add_initializer("k", Tensor::scalar(k));
  g.add_initializer("c", Tensor::scalar(0.7978845834732056f));
  switch (cube) {
    case Cube::Pow:
      g.add_initializer("three", Tensor::scalar(exponent));
      g.add_node("Pow", {"x", "three"}, {"x3"});
      break;
    case Cube::MulOfSquare:
      g.add_node("Mul", {"x", "x"}, {"x2"});
      g.add_node("Mul", {"x", "x2"}, {"x3"});
      break;
    case Cube::SquareFirst:
      g.add_node("Mul", {"x", "x"}, {"x2"});
      g.add_node("Mul", {"x2", "x"}, {"x3"});
      break;
  }
  g.add_node("Mul", {"k", "x3"}, {"w"});
  g.add_node("Add", x_first ? std::vector<std::string>{"x", "w"} : std::vector<std::string>{"w", "x"}, {"u"});
  g.add_node("Mul", {"c", "u"}, {"s"});
  g.add_node("Tanh", {"s"}, {"t"});
  g.add_node("Add", {"one", "t"}, {"a"});
  add_products(g, form, true);  // GPT-2: 0.5 * (x * (1 + tanh))
  return g;
}

}  // namespace

TEST_CASE("fuse_gelu recognises the tanh approximation in its exported forms", "[optimizer][passes]") {
  for (Cube cube : {Cube::Pow, Cube::MulOfSquare, Cube::SquareFirst})
    for (Form form : {Form::MulOfMulThenHalf, Form::HalfFirst, Form::HalfOfSum})
      for (bool x_first : {true, false}) {
        INFO("cube " << static_cast<int>(cube) << ", form " << static_cast<int>(form) << ", x first " << x_first);
        const Graph g = gelu_tanh_graph(cube, form, x_first);
        const Graph opt = optimized(g);
        REQUIRE(opt.nodes().size() == 1);
        CHECK(opt.nodes()[0].op_type == "Gelu");
        CHECK(opt.nodes()[0].domain == kWpkDomain);
        CHECK(opt.nodes()[0].attr_string("approximate", "") == "tanh");
        CHECK(opt.nodes()[0].inputs[0] == opt.value_id("x"));
        check_unchanged(g, inputs(), "fuse_gelu", 1e-5, 1e-6);
      }
}

TEST_CASE("fuse_gelu leaves tanh look-alikes", "[optimizer][passes]") {
  SECTION("another cubic coefficient") {
    const Graph g = gelu_tanh_graph(Cube::MulOfSquare, Form::MulOfMulThenHalf, true, 0.05f);
    CHECK(count_op(optimized(g), "Gelu", kWpkDomain) == 0);
    check_unchanged(g, inputs(), "fuse_gelu");
  }
  SECTION("x squared instead of cubed") {
    const Graph g = gelu_tanh_graph(Cube::Pow, Form::MulOfMulThenHalf, true, 0.044715f, 2.0f);
    CHECK(count_op(optimized(g), "Gelu", kWpkDomain) == 0);
    check_unchanged(g, inputs(), "fuse_gelu");
  }
  SECTION("the tanh result is read elsewhere") {
    Graph g = gelu_tanh_graph(Cube::MulOfSquare, Form::HalfFirst);
    g.add_output("t");
    CHECK(count_op(optimized(g), "Gelu", kWpkDomain) == 0);
    check_unchanged(g, inputs(), "fuse_gelu");
  }
}

TEST_CASE("a com.wpk Gelu with an unknown approximation is an error", "[optimizer][passes]") {
  Graph g;
  g.add_input("x", DType::Float32, {2, 3});
  g.add_node("Gelu", {"x"}, {"y"}, {{"approximate", Attribute(std::string("fast"))}}).domain = kWpkDomain;
  g.add_output("y");
  const Session s(g);
  CHECK_THROWS_AS(s.run({{"x", random_tensor({2, 3}, 1)}}), Error);
}
