// fold_pad: zero Pads of the spatial dims become the padding of the Conv or AveragePool that
// reads them; Pads of nothing go; everything else stays.
#include "pass_test_util.hpp"

using namespace wpk;
using namespace wpk::testing;

namespace {

// x [N, 3, 7, 6] -> Pad(pads) -> `op` -> y. Conv: 4 outputs of 3x3 weights, own pads
// `conv_pads`; AveragePool / MaxPool: 3x3 windows, stride 1.
Graph pad_then(const std::string& op, std::vector<std::int64_t> pads, const std::string& mode = "constant",
               float value = 0.0f, std::map<std::string, Attribute> attrs = {}) {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 3, 7, 6});
  g.add_initializer("pads", Tensor::from_vector<std::int64_t>(pads, {static_cast<std::int64_t>(pads.size())}));
  g.add_initializer("value", Tensor::from_vector<float>({value}, {}));
  g.add_node("Pad", {"x", "pads", "value"}, {"p"}, {{"mode", Attribute(mode)}});
  std::vector<std::string> in = {"p"};
  if (op == "Conv") {
    g.add_initializer("w", random_tensor({4, 3, 3, 3}, 5));
    in.push_back("w");
  } else {
    attrs.emplace("kernel_shape", Attribute({3, 3}));
  }
  g.add_node(op, in, {"y"}, std::move(attrs));
  g.add_output("y");
  return g;
}

TensorMap inputs() { return {{"x", random_tensor({2, 3, 7, 6}, 9)}}; }

}  // namespace

TEST_CASE("fold_pad makes a zero spatial Pad the AveragePool's own padding", "[optimizer][passes]") {
  const Graph g = pad_then("AveragePool", {0, 0, 1, 2, 0, 0, 2, 1});
  const Graph opt = optimized(g);
  CHECK(count_op(opt, "Pad") == 0);
  const Node* pool = find_op(opt, "AveragePool");
  REQUIRE(pool);
  CHECK(pool->attr_ints("pads") == std::vector<std::int64_t>{1, 2, 2, 1});
  CHECK(pool->attr_int("count_include_pad", 0) == 1);  // the padded zeros count, as they did
  check_unchanged(g, inputs(), "fold_pad");
}

TEST_CASE("fold_pad adds a zero spatial Pad to the Conv's own pads", "[optimizer][passes]") {
  const Graph g = pad_then("Conv", {0, 0, 1, 0, 0, 0, 0, 2}, "constant", 0.0f, {{"pads", Attribute({1, 1, 1, 1})}});
  const Graph opt = optimized(g);
  CHECK(count_op(opt, "Pad") == 0);
  const Node* conv = find_op(opt, "Conv");
  REQUIRE(conv);
  CHECK(conv->attr_ints("pads") == std::vector<std::int64_t>{2, 1, 1, 3});
  CHECK(conv->fused_from == std::vector<std::string>{"Pad", "Conv"});
  check_unchanged(g, inputs(), "fold_pad");
}

TEST_CASE("fold_pad removes a Pad that adds nothing", "[optimizer][passes]") {
  const Graph g = pad_then("MaxPool", {0, 0, 0, 0, 0, 0, 0, 0});
  CHECK(count_op(optimized(g), "Pad") == 0);
  check_unchanged(g, inputs(), "fold_pad");
}

TEST_CASE("fold_pad keeps Pads whose meaning the consumer cannot take", "[optimizer][passes]") {
  const std::vector<std::int64_t> spatial = {0, 0, 1, 1, 0, 0, 1, 1};
  struct Case {
    const char* why;
    Graph graph;
  };
  Case cases[] = {
      {"MaxPool pads with -inf, not zeros", pad_then("MaxPool", spatial)},
      {"reflect mode", pad_then("AveragePool", spatial, "reflect")},
      {"a non-zero value", pad_then("AveragePool", spatial, "constant", 1.5f)},
      {"padding the channels", pad_then("AveragePool", {0, 1, 0, 0, 0, 0, 0, 0})},
      {"a crop (negative pads)", pad_then("Conv", {0, 0, -1, 0, 0, 0, 0, 0})},
      {"ceil_mode", pad_then("AveragePool", spatial, "constant", 0.0f, {{"ceil_mode", Attribute(std::int64_t{1})}})},
      {"the pool's own pads exclude padding from the divisor",
       pad_then("AveragePool", spatial, "constant", 0.0f, {{"pads", Attribute({1, 1, 1, 1})}})},
      {"auto_pad", pad_then("Conv", spatial, "constant", 0.0f, {{"auto_pad", Attribute("SAME_UPPER")}})},
  };
  for (const Case& c : cases) {
    INFO(c.why);
    CHECK(count_op(optimized(c.graph), "Pad") == 1);
    check_unchanged(c.graph, inputs(), "fold_pad");
  }
  // A second reader of the padded tensor keeps the Pad too.
  Graph twice = pad_then("AveragePool", spatial);
  twice.add_node("Relu", {"p"}, {"r"});
  twice.add_output("r");
  CHECK(count_op(optimized(twice), "Pad") == 1);
  check_unchanged(twice, inputs(), "fold_pad");
}
