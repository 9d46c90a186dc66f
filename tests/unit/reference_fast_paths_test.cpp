// The reference backend's short cuts for common shapes give what its general loops give: Gather of
// one element a copy (1, 2, 4 and 8 bytes) and of longer chunks, NonZero of a vector and of a
// matrix, and a binary op with a one-element operand on either side.
#include <catch2/catch.hpp>

#include <vector>

#include "support/onnx_model_builder.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;
using wpk::testing::OnnxModelBuilder;

namespace {

template <typename T>
std::vector<T> values_of(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

// Gather(data, indices) along `axis` on a model of one node.
Tensor gather(const Tensor& data, int elem_type, const std::vector<std::int64_t>& indices, long axis) {
  OnnxModelBuilder m;
  std::vector<long> dims(data.shape().begin(), data.shape().end());
  m.input("data", dims, elem_type).input("idx", {static_cast<long>(indices.size())}, 7).output("y", {-1, -1}, elem_type);
  m.node("Gather", {"data", "idx"}, {"y"}).attr("axis", axis);
  Session s(load_from_bytes(m.bytes()));
  return s.run({{"data", data}, {"idx", Tensor::from_vector(indices, {static_cast<std::int64_t>(indices.size())})}}).at("y");
}

}  // namespace

TEST_CASE("the reference's Gather, NonZero and one-element broadcasts keep their results", "[reference]") {
  // [3, 4] along axis 1: one element a copy, for 1-, 2-, 4- and 8-byte elements.
  const std::vector<std::int64_t> idx = {3, 0, -1};
  CHECK(values_of<std::uint8_t>(gather(Tensor::from_vector(std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4}), 2, idx, 1)) ==
        std::vector<std::uint8_t>{4, 1, 4, 8, 5, 8, 12, 9, 12});
  CHECK(values_of<std::int16_t>(gather(Tensor::from_vector(std::vector<std::int16_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4}), 5, idx, 1)) ==
        std::vector<std::int16_t>{4, 1, 4, 8, 5, 8, 12, 9, 12});
  CHECK(values_of<float>(gather(Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4}), 1, idx, 1)) ==
        std::vector<float>{4, 1, 4, 8, 5, 8, 12, 9, 12});
  CHECK(values_of<std::int64_t>(gather(Tensor::from_vector(std::vector<std::int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4}), 7, idx, 1)) ==
        std::vector<std::int64_t>{4, 1, 4, 8, 5, 8, 12, 9, 12});
  // Rows (chunks of 16 bytes) along axis 0.
  CHECK(values_of<float>(gather(Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4}), 1, {2, 0}, 0)) ==
        std::vector<float>{9, 10, 11, 12, 1, 2, 3, 4});

  // NonZero of a vector (positions) and of a matrix (coordinates, one row an axis).
  for (const bool matrix : {false, true}) {
    OnnxModelBuilder m;
    m.input("x", matrix ? std::vector<long>{2, 3} : std::vector<long>{6}).output("y", {-1, -1}, 7);
    m.node("NonZero", {"x"}, {"y"});
    Session s(load_from_bytes(m.bytes()));
    const Shape shape = matrix ? Shape{2, 3} : Shape{6};
    const Tensor y = s.run({{"x", Tensor::from_vector(std::vector<float>{0, 1.5f, 0, -2, 0, 3}, shape)}}).at("y");
    if (matrix) CHECK(values_of<std::int64_t>(y) == std::vector<std::int64_t>{0, 1, 1, 1, 0, 2});
    else CHECK(values_of<std::int64_t>(y) == std::vector<std::int64_t>{1, 3, 5});
  }

  // Greater and Sub with a one-element operand first and second, and a general broadcast.
  OnnxModelBuilder m;
  m.input("v", {4}).input("s", {1}).input("c", {2, 1}).output("g", {4}, 9).output("h", {4}, 9).output("d", {4}).output("e", {2, 4});
  m.node("Greater", {"v", "s"}, {"g"}).node("Greater", {"s", "v"}, {"h"}).node("Sub", {"s", "v"}, {"d"}).node("Sub", {"v", "c"}, {"e"});
  Session s(load_from_bytes(m.bytes()));
  const TensorMap out = s.run({{"v", Tensor::from_vector(std::vector<float>{-1, 0.5f, 2, 7}, {4})},
                               {"s", Tensor::from_vector(std::vector<float>{0.5f}, {1})},
                               {"c", Tensor::from_vector(std::vector<float>{1, 10}, {2, 1})}});
  CHECK(values_of<bool>(out.at("g")) == std::vector<bool>{false, false, true, true});
  CHECK(values_of<bool>(out.at("h")) == std::vector<bool>{true, false, false, false});
  CHECK(values_of<float>(out.at("d")) == std::vector<float>{1.5f, 0, -1.5f, -6.5f});
  CHECK(values_of<float>(out.at("e")) == std::vector<float>{-2, -0.5f, 1, 6, -11, -9.5f, -8, -3});
}
