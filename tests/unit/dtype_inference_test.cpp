// dtype inference: what backends see of values the model does not declare.
#include <catch2/catch.hpp>

#include "graph/dtype_inference.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;

TEST_CASE("dtype inference follows each op's rule and leaves unknown ops alone", "[graph]") {
  Graph g;
  g.add_input("x", DType::Float32, {2, 3});
  g.add_input("i", DType::Int32, {3});
  g.add_node("Relu", {"x"}, {"relu"});
  g.add_node("Shape", {"x"}, {"shape"});
  g.add_node("Greater", {"x", "relu"}, {"mask"});
  g.add_node("Cast", {"x"}, {"half"}, {{"to", std::int64_t{10}}});
  g.add_node("Where", {"mask", "x", "relu"}, {"picked"});
  g.add_node("TopK", {"x", "shape"}, {"values", "indices"});
  g.add_node("Gather", {"i", "shape"}, {"gathered"});
  g.add_node("NoSuchOp", {"x"}, {"mystery"});
  infer_dtypes(g);
  CHECK(g.value(g.value_id("relu")).dtype == DType::Float32);
  CHECK(g.value(g.value_id("shape")).dtype == DType::Int64);
  CHECK(g.value(g.value_id("mask")).dtype == DType::Bool);
  CHECK(g.value(g.value_id("half")).dtype == DType::Float16);
  CHECK(g.value(g.value_id("picked")).dtype == DType::Float32);
  CHECK(g.value(g.value_id("values")).dtype == DType::Float32);
  CHECK(g.value(g.value_id("indices")).dtype == DType::Int64);
  CHECK(g.value(g.value_id("gathered")).dtype == DType::Int32);
  CHECK(g.value(g.value_id("mystery")).dtype == DType::Undefined);
}

TEST_CASE("dtype inference keeps what the model declares", "[graph]") {
  Graph g;
  g.add_input("x", DType::Float32, {2});
  g.add_node("Relu", {"x"}, {"y"});
  g.mutable_value(g.value_id("y")).dtype = DType::Float64;  // as a value_info entry would set it
  infer_dtypes(g);
  CHECK(g.value(g.value_id("y")).dtype == DType::Float64);
}
