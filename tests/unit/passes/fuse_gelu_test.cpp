// fuse_gelu: x * 0.5 * (1 + erf(x / sqrt(2))) in its exported forms -> com.wpk Gelu.
#include "pass_test_util.hpp"

using namespace wpk;
using namespace wpk::testing;

namespace {

enum class Form { MulOfMulThenHalf, HalfFirst, HalfOfSum };

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
  switch (form) {
    case Form::MulOfMulThenHalf:  // torch: (x * (1 + erf)) * 0.5
      g.add_node("Mul", {"x", "a"}, {"m"});
      g.add_node("Mul", {"m", "half"}, {"y"});
      break;
    case Form::HalfFirst:  // (x * 0.5) * (1 + erf)
      g.add_node("Mul", {"x", "half"}, {"h"});
      g.add_node("Mul", {"h", "a"}, {"y"});
      break;
    case Form::HalfOfSum:  // x * ((1 + erf) * 0.5)
      g.add_node("Mul", {"a", "half"}, {"h"});
      g.add_node("Mul", {"x", "h"}, {"y"});
      break;
  }
  g.add_output("y");
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
