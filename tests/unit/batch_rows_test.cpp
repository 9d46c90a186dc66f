// graph/batch_rows.hpp: which graphs compute each row of their batch on its own. Each case that
// must answer no is one a batch split would get wrong.
#include <catch2/catch.hpp>

#include "graph/batch_rows.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;

namespace {

Tensor floats(std::vector<std::int64_t> shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return Tensor::from_vector<float>(std::vector<float>(static_cast<std::size_t>(n), 0.5f), std::move(shape));
}

Tensor ints(std::vector<std::int64_t> v) {
  const auto n = static_cast<std::int64_t>(v.size());
  return Tensor::from_vector<std::int64_t>(v, {n});
}

// x [N, 2, 6, 6] -> Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm -> [N, 3]
Graph classifier() {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 2, 6, 6});
  g.add_initializer("w", floats({4, 2, 3, 3}));
  g.add_initializer("fc", floats({4, 3}));
  g.add_node("Conv", {"x", "w"}, {"c"});
  g.add_node("Relu", {"c"}, {"r"});
  g.add_node("GlobalAveragePool", {"r"}, {"p"});
  g.add_node("Flatten", {"p"}, {"f"});
  g.add_node("Gemm", {"f", "fc"}, {"y"});
  g.add_output("y");
  return g;
}

// x [N, 4] -> op -> y, shapes declared on every value.
Graph one_node(const std::string& op, const std::vector<std::string>& inputs, DimList out,
               std::map<std::string, Attribute> attributes = {}) {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 4});
  g.add_node(op, inputs, {"y"}, std::move(attributes));
  g.mutable_value(g.value_id("y")).dims = std::move(out);
  g.mutable_value(g.value_id("y")).dtype = DType::Float32;
  g.add_output("y");
  return g;
}

}  // namespace

TEST_CASE("a classifier computes each row of its batch alone", "[passes]") {
  Graph g = classifier();
  // What the importer's shapes would say.
  g.mutable_value(g.value_id("c")).dims = DimList{Dim("N"), 4, 4, 4};
  g.mutable_value(g.value_id("r")).dims = DimList{Dim("N"), 4, 4, 4};
  g.mutable_value(g.value_id("p")).dims = DimList{Dim("N"), 4, 1, 1};
  g.mutable_value(g.value_id("f")).dims = DimList{Dim("N"), 4};
  g.mutable_value(g.value_id("y")).dims = DimList{Dim("N"), 3};
  CHECK(why_rows_depend_on_each_other(g) == "");
  // Without the intermediate shapes it cannot tell.
  CHECK(why_rows_depend_on_each_other(classifier()) != "");
}

TEST_CASE("ops that mix the rows of a batch, or may, are refused", "[passes]") {
  SECTION("softmax over dim 0") {
    CHECK(why_rows_depend_on_each_other(one_node("Softmax", {"x"}, {Dim("N"), 4}, {{"axis", Attribute(std::int64_t(0))}})) != "");
    CHECK(why_rows_depend_on_each_other(one_node("Softmax", {"x"}, {Dim("N"), 4}, {{"axis", Attribute(std::int64_t(-1))}})) == "");
  }
  SECTION("a reduction over dim 0") {
    Graph g;
    g.add_input("x", DType::Float32, {Dim("N"), 4});
    g.add_initializer("axes", ints({0}));
    g.add_node("ReduceSum", {"x", "axes"}, {"y"});
    g.mutable_value(g.value_id("y")).dims = DimList{1, 4};
    g.add_output("y");
    CHECK(why_rows_depend_on_each_other(g) != "");
    Graph h;
    h.add_input("x", DType::Float32, {Dim("N"), 4});
    h.add_initializer("axes", ints({1}));
    h.add_node("ReduceSum", {"x", "axes"}, {"y"});
    h.mutable_value(h.value_id("y")).dims = DimList{Dim("N"), 1};
    h.add_output("y");
    CHECK(why_rows_depend_on_each_other(h) == "");
  }
  SECTION("a Reshape whose target does not copy dim 0") {
    for (const auto& [target, apart] : std::vector<std::pair<std::vector<std::int64_t>, bool>>{{{0, 2, 2}, true}, {{-1, 2}, false}, {{2, -1}, false}}) {
      Graph g;
      g.add_input("x", DType::Float32, {Dim("N"), 4});
      g.add_initializer("shape", ints(target));
      g.add_node("Reshape", {"x", "shape"}, {"y"});
      g.mutable_value(g.value_id("y")).dims = DimList(target.size(), Dim("?"));
      g.add_output("y");
      CHECK((why_rows_depend_on_each_other(g) == "") == apart);
    }
  }
  SECTION("Shape reads the batch size") {
    Graph g;
    g.add_input("x", DType::Float32, {Dim("N"), 4});
    g.add_node("Shape", {"x"}, {"s"});
    g.mutable_value(g.value_id("s")).dims = DimList{2};
    g.add_node("Cast", {"s"}, {"y"}, {{"to", Attribute(std::int64_t(1))}});
    g.mutable_value(g.value_id("y")).dims = DimList{2};
    g.add_output("y");
    CHECK(why_rows_depend_on_each_other(g) != "");
  }
  SECTION("a constant operand with rows of its own") {
    for (const auto& [rows, apart] : std::vector<std::pair<std::int64_t, bool>>{{1, true}, {2, false}}) {
      Graph g;
      g.add_input("x", DType::Float32, {Dim("N"), 4});
      g.add_initializer("c", floats({rows, 4}));
      g.add_node("Add", {"x", "c"}, {"y"});
      g.mutable_value(g.value_id("y")).dims = DimList{Dim("N"), 4};
      g.add_output("y");
      CHECK((why_rows_depend_on_each_other(g) == "") == apart);
    }
  }
  SECTION("concatenation along dim 0, a transpose that moves it") {
    CHECK(why_rows_depend_on_each_other(one_node("Concat", {"x", "x"}, {Dim("?"), 4}, {{"axis", Attribute(std::int64_t(0))}})) != "");
    CHECK(why_rows_depend_on_each_other(one_node("Concat", {"x", "x"}, {Dim("N"), 8}, {{"axis", Attribute(std::int64_t(1))}})) == "");
    CHECK(why_rows_depend_on_each_other(one_node("Transpose", {"x"}, {4, Dim("N")})) != "");
  }
  SECTION("products: the batch must stay an outer dim") {
    Graph g;
    g.add_input("x", DType::Float32, {Dim("N"), 4});
    g.add_initializer("w", floats({4, 3}));
    g.add_node("MatMul", {"x", "w"}, {"y"});
    g.mutable_value(g.value_id("y")).dims = DimList{Dim("N"), 3};
    g.add_output("y");
    CHECK(why_rows_depend_on_each_other(g) == "");
    Graph h;  // w [4, 4] @ x [N, 4]: x's rows are what the product sums over
    h.add_input("x", DType::Float32, {Dim("N"), 4});
    h.add_initializer("w", floats({4, 4}));
    h.add_node("MatMul", {"w", "x"}, {"y"});
    h.mutable_value(h.value_id("y")).dims = DimList{4, 4};
    h.add_output("y");
    CHECK(why_rows_depend_on_each_other(h) != "");
  }
  SECTION("Flatten from dim 0, counted from either end") {
    for (const auto& [axis, apart] : std::vector<std::pair<std::int64_t, bool>>{{1, true}, {-1, true}, {0, false}, {-2, false}}) {
      CAPTURE(axis);
      const DimList out = apart ? DimList{Dim("N"), 4} : DimList{1, Dim("?")};
      CHECK((why_rows_depend_on_each_other(one_node("Flatten", {"x"}, out, {{"axis", Attribute(axis)}})) == "") == apart);
    }
  }
  SECTION("batch normalisation with the batch's own statistics") {
    Graph g;
    g.add_input("x", DType::Float32, {Dim("N"), 4});
    for (const char* p : {"scale", "bias", "mean", "var"}) g.add_initializer(p, floats({4}));
    g.add_node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y"},
               {{"training_mode", Attribute(std::int64_t(1))}});
    g.mutable_value(g.value_id("y")).dims = DimList{Dim("N"), 4};
    g.add_output("y");
    CHECK(why_rows_depend_on_each_other(g) != "");
    g.mutable_nodes().front().attributes.erase("training_mode");
    CHECK(why_rows_depend_on_each_other(g) == "");
  }
  SECTION("an op it does not know") {
    CHECK(why_rows_depend_on_each_other(one_node("NonMaxSuppression", {"x", "x"}, {Dim("?"), 3})) != "");
  }
  SECTION("an output that does not come from the batch") {
    Graph g;
    g.add_input("x", DType::Float32, {Dim("N"), 4});
    g.add_initializer("c", floats({1, 4}));
    g.add_node("Relu", {"x"}, {"y"});
    g.mutable_value(g.value_id("y")).dims = DimList{Dim("N"), 4};
    g.add_node("Neg", {"c"}, {"z"});
    g.mutable_value(g.value_id("z")).dims = DimList{1, 4};
    g.add_output("y");
    g.add_output("z");
    CHECK(why_rows_depend_on_each_other(g) != "");
  }
}
