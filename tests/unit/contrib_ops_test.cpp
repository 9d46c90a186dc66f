// ONNX Runtime's quantized contrib ops (com.microsoft), as its tool writes QOperator models: each
// loads as the standard ops it stands for and computes the codes the op's definition gives.
#include <catch2/catch.hpp>

#include <onnx/onnx_pb.h>

#include "support/expect_error.hpp"
#include "support/onnx_model_builder.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;
using wpk::testing::OnnxModelBuilder;

namespace {

template <typename T>
void add_initializer(OnnxModelBuilder& b, const std::string& name, int elem_type, const std::vector<long>& dims,
                     const std::vector<T>& values) {
  onnx::TensorProto* t = b.model.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(elem_type);
  for (long d : dims) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T)));
}

// Marks the last node added as com.microsoft's, with an int attribute when `attr` is given.
void contrib(OnnxModelBuilder& b, const char* attr = nullptr, long value = 0) {
  onnx::NodeProto* n = b.model.mutable_graph()->mutable_node(b.model.graph().node_size() - 1);
  n->set_domain("com.microsoft");
  if (attr) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(attr);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(value);
  }
  bool declared = false;
  for (const auto& o : b.model.opset_import()) declared = declared || o.domain() == "com.microsoft";
  if (!declared) {
    auto* o = b.model.add_opset_import();
    o->set_domain("com.microsoft");
    o->set_version(1);
  }
}

constexpr int kFloat = onnx::TensorProto::FLOAT, kU8 = onnx::TensorProto::UINT8, kS8 = onnx::TensorProto::INT8,
              kI32 = onnx::TensorProto::INT32;

template <typename T>
std::vector<int> codes(const Tensor& t) {
  return std::vector<int>(t.data<T>(), t.data<T>() + t.numel());
}

}  // namespace

TEST_CASE("com.microsoft QLinearAdd adds the dequantized operands and quantizes the sum", "[int8][import]") {
  OnnxModelBuilder b(13);
  b.input("a", {4}, kU8).output("c", {4}, kU8);
  add_initializer<float>(b, "as", kFloat, {}, {0.1f});
  add_initializer<std::uint8_t>(b, "az", kU8, {}, {100});
  add_initializer<std::uint8_t>(b, "bq", kU8, {4}, {50, 50, 50, 60});
  add_initializer<float>(b, "bs", kFloat, {}, {0.2f});
  add_initializer<std::uint8_t>(b, "bz", kU8, {}, {50});
  add_initializer<float>(b, "cs", kFloat, {}, {0.1f});
  add_initializer<std::uint8_t>(b, "cz", kU8, {}, {128});
  b.node("QLinearAdd", {"a", "as", "az", "bq", "bs", "bz", "cs", "cz"}, {"c"});
  contrib(b);
  const Session s(load_from_bytes(b.bytes()));
  const Tensor a = Tensor::from_vector(std::vector<std::uint8_t>{0, 100, 200, 255}, {4});
  // A: -10, 0, 10, 15.5; B: 0, 0, 0, 2; C = (A + B) / 0.1 + 128, saturated.
  CHECK(codes<std::uint8_t>(s.run({{"a", a}}).at("c")) == std::vector<int>{28, 128, 228, 255});
}

TEST_CASE("com.microsoft QGemm with an int32 bias and a float result", "[int8][import]") {
  OnnxModelBuilder b(13);
  b.input("a", {1, 2}, kU8).output("y", {1, 3});
  add_initializer<float>(b, "as", kFloat, {}, {0.5f});
  add_initializer<std::uint8_t>(b, "az", kU8, {}, {0});
  add_initializer<std::int8_t>(b, "bq", kS8, {2, 3}, {1, 2, 3, 4, 5, 6});
  add_initializer<float>(b, "bs", kFloat, {}, {0.1f});
  add_initializer<std::int8_t>(b, "bz", kS8, {}, {0});
  add_initializer<std::int32_t>(b, "c", kI32, {3}, {10, 20, 30});
  b.node("QGemm", {"a", "as", "az", "bq", "bs", "bz", "c"}, {"y"});
  contrib(b);
  const Session s(load_from_bytes(b.bytes()));
  const Tensor y = s.run({{"a", Tensor::from_vector(std::vector<std::uint8_t>{10, 20}, {1, 2})}}).at("y");
  // A 5, 10 times B [[.1 .2 .3] [.4 .5 .6]], plus C at 0.5 x 0.1: 0.5, 1, 1.5.
  REQUIRE(y.numel() == 3);
  CHECK(y.data<float>()[0] == Approx(5.0f));
  CHECK(y.data<float>()[1] == Approx(7.0f));
  CHECK(y.data<float>()[2] == Approx(9.0f));
}

TEST_CASE("com.microsoft QLinearGlobalAveragePool and QLinearSigmoid", "[int8][import]") {
  OnnxModelBuilder b(13);
  b.input("x", {1, 2, 2, 2}, kU8).output("p", {1, 2, 1, 1}, kU8).output("s", {1, 2, 2, 2}, kU8);
  add_initializer<float>(b, "xs", kFloat, {}, {1.0f});
  add_initializer<std::uint8_t>(b, "xz", kU8, {}, {0});
  add_initializer<float>(b, "ps", kFloat, {}, {2.0f});
  add_initializer<std::uint8_t>(b, "pz", kU8, {}, {3});
  add_initializer<float>(b, "ss", kFloat, {}, {1.0f / 256});
  add_initializer<std::uint8_t>(b, "sz", kU8, {}, {0});
  b.node("QLinearGlobalAveragePool", {"x", "xs", "xz", "ps", "pz"}, {"p"});
  contrib(b, "channels_last", 0);
  b.node("QLinearSigmoid", {"x", "xs", "xz", "ss", "sz"}, {"s"});
  contrib(b);
  const Session s(load_from_bytes(b.bytes()));
  const TensorMap out = s.run({{"x", Tensor::from_vector(std::vector<std::uint8_t>{0, 10, 20, 30, 100, 100, 100, 100}, {1, 2, 2, 2})}});
  // Means 15 and 100: 7.5 rounds to even 8, then + 3; 50 + 3.
  CHECK(codes<std::uint8_t>(out.at("p")) == std::vector<int>{11, 53});
  // sigmoid(0) = 0.5 -> 128; sigmoid(10 and more) saturates at 255.
  CHECK(codes<std::uint8_t>(out.at("s")) == std::vector<int>{128, 255, 255, 255, 255, 255, 255, 255});
}

TEST_CASE("com.microsoft quantized ops without an output zero point are refused by name", "[int8][import]") {
  OnnxModelBuilder b(13);
  b.input("a", {4}, kU8).output("c", {4}, kU8);
  add_initializer<float>(b, "s", kFloat, {}, {0.1f});
  b.node("QLinearAdd", {"a", "s", "", "a", "s", "", "s"}, {"c"});
  contrib(b);
  wpk::testing::expect_error([&] { load_from_bytes(b.bytes()); }, ErrorCode::InvalidModel, {"QLinearAdd", "zero point"});
}
