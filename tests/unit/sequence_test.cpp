// Sequences and optionals: the sequence ops, sequences as a model's inputs and outputs and as a
// Loop's carried value, optionals with and without a value, and the errors around them.
#include <catch2/catch.hpp>

#include <vector>

#include "support/expect_error.hpp"
#include "support/onnx_model_builder.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;
using wpk::testing::expect_error;
using wpk::testing::OnnxModelBuilder;

namespace {

constexpr int kFloat = 1, kInt64 = 7, kBool = 9;

// Declares graph input or output `name` as a sequence of float tensors (optional: an optional one).
void as_sequence(onnx::ValueInfoProto* v, bool optional = false) {
  v->clear_type();
  onnx::TypeProto* t = v->mutable_type();
  if (optional) t = t->mutable_optional_type()->mutable_elem_type();
  t->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(kFloat);
}

std::vector<float> values(const Tensor& t) { return std::vector<float>(t.data<float>(), t.data<float>() + t.numel()); }

}  // namespace

TEST_CASE("sequence ops split, edit, index and concatenate", "[sequence]") {
  // x [4, 2] -> rows as a sequence; insert x's first row sum at the front, erase the last row,
  // then: its length, element 1, and the rest stacked along a new axis 0.
  OnnxModelBuilder b(13);
  b.input("x", {-1, 2}).output("n", {}, kInt64).output("second", {-1}).output("stacked", {-1, -1}).output("seq", {});
  as_sequence(b.model.mutable_graph()->mutable_output(3));
  b.int64_initializer("one", {}, {1}).int64_initializer("zero", {}, {0});
  b.node("SplitToSequence", {"x"}, {"rows"}).attr("keepdims", 0L);
  b.node("ReduceSum", {"x"}, {"sums"}).attr("axes", std::vector<long>{0}).attr("keepdims", 0L);
  b.node("SequenceInsert", {"rows", "sums", "zero"}, {"with_sums"});
  b.node("SequenceErase", {"with_sums"}, {"seq"});
  b.node("SequenceLength", {"seq"}, {"n"});
  b.node("SequenceAt", {"seq", "one"}, {"second"});
  b.node("ConcatFromSequence", {"seq"}, {"stacked"}).attr("axis", 0L).attr("new_axis", 1L);
  Session s(load_from_bytes(b.bytes()));
  const TensorMap out = s.run({{"x", Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2})}});
  CHECK(out.at("n").data<std::int64_t>()[0] == 4);
  CHECK(values(out.at("second")) == std::vector<float>{1, 2});
  CHECK(out.at("stacked").shape() == Shape{4, 2});
  CHECK(values(out.at("stacked")) == std::vector<float>{16, 20, 1, 2, 3, 4, 5, 6});
  const Tensor& seq = out.at("seq");
  REQUIRE(seq.is_sequence());
  REQUIRE(seq.elements().size() == 4);
  CHECK(values(seq.elements()[3]) == std::vector<float>{5, 6});
  // No rows: the sums alone go in and are erased again, and there is no element 1.
  expect_error([&] { s.run({{"x", Tensor::zeros(DType::Float32, {0, 2})}}); }, ErrorCode::InvalidArgument,
               {"SequenceAt", "outside a sequence of 0"});
}

TEST_CASE("a sequence as input and output, and carried by a Loop", "[sequence][control]") {
  // Loop 3 times: append i * x to the sequence; then concatenate it along axis 0.
  OnnxModelBuilder body(13), m(13);
  body.input("i", {}, kInt64).input("cond_in", {}, kBool).input("acc", {});
  as_sequence(body.model.mutable_graph()->mutable_input(2));
  body.output("cond_out", {}, kBool).output("acc_out", {});
  as_sequence(body.model.mutable_graph()->mutable_output(1));
  body.node("Identity", {"cond_in"}, {"cond_out"});
  body.node("Cast", {"i"}, {"fi"}).attr("to", static_cast<long>(kFloat));
  body.node("Mul", {"x", "fi"}, {"scaled"});
  body.node("SequenceInsert", {"acc", "scaled"}, {"acc_out"});
  m.input("start", {}).input("x", {2}).output("all", {-1});
  as_sequence(m.model.mutable_graph()->mutable_input(0));
  m.int64_initializer("three", {}, {3});
  auto* go = m.model.mutable_graph()->add_initializer();
  go->set_name("go");
  go->set_data_type(kBool);
  go->add_int32_data(1);
  m.node("Loop", {"three", "go", "start"}, {"grown"}).attr("body", body);
  m.node("ConcatFromSequence", {"grown"}, {"all"}).attr("axis", 0L);
  Session s(load_from_bytes(m.bytes()));
  const Tensor start = Tensor::sequence({Tensor::from_vector<float>({9}, {1})}, DType::Float32);
  const Tensor all = s.run({{"start", start}, {"x", Tensor::from_vector<float>({1, 2}, {2})}}).at("all");
  CHECK(values(all) == std::vector<float>{9, 0, 0, 1, 2, 2, 4});
  // A tensor where the model takes a sequence, or a sequence of another dtype.
  expect_error([&] { s.run({{"start", Tensor::from_vector<float>({9}, {1})}, {"x", Tensor::zeros(DType::Float32, {2})}}); },
               ErrorCode::InvalidArgument, {"'start'", "sequence"});
  const Tensor ints = Tensor::sequence({Tensor::from_vector<std::int64_t>({9}, {1})}, DType::Int64);
  expect_error([&] { s.run({{"start", ints}, {"x", Tensor::zeros(DType::Float32, {2})}}); }, ErrorCode::InvalidArgument,
               {"'start'", "float32", "int64"});
}

TEST_CASE("optionals with and without a value", "[sequence]") {
  OnnxModelBuilder b(16);
  b.input("maybe", {}).output("has", {}, kBool).output("value", {});
  as_sequence(b.model.mutable_graph()->mutable_input(0), true);
  as_sequence(b.model.mutable_graph()->mutable_output(1));
  b.node("OptionalHasElement", {"maybe"}, {"has"});
  b.node("OptionalGetElement", {"maybe"}, {"value"});
  Session s(load_from_bytes(b.bytes()));
  const Tensor seq = Tensor::sequence({Tensor::from_vector<float>({1, 2}, {2})}, DType::Float32);
  const TensorMap out = s.run({{"maybe", seq}});
  CHECK(out.at("has").data<bool>()[0]);
  CHECK(values(out.at("value").elements()[0]) == std::vector<float>{1, 2});
  expect_error([&] { s.run({{"maybe", Tensor::none()}}); }, ErrorCode::InvalidArgument, {"OptionalGetElement", "no value"});
  // none where the model does not take an optional
  OnnxModelBuilder plain(16);
  plain.input("x", {1}).output("y", {1}).node("Identity", {"x"}, {"y"});
  expect_error([&] { Session(load_from_bytes(plain.bytes())).run({{"x", Tensor::none()}}); }, ErrorCode::InvalidArgument,
               {"'x'", "not optional"});
}

TEST_CASE("SequenceMap runs its body on each element", "[sequence][control]") {
  OnnxModelBuilder body(17), m(17);
  body.input("e", {-1}).input("scale", {}).output("r", {-1}).node("Mul", {"e", "scale"}, {"r"});
  m.input("seq", {}).input("scale", {}).output("out", {});
  as_sequence(m.model.mutable_graph()->mutable_input(0));
  as_sequence(m.model.mutable_graph()->mutable_output(0));
  m.node("SequenceMap", {"seq", "scale"}, {"out"}).attr("body", body);
  Session s(load_from_bytes(m.bytes()));
  const Tensor seq = Tensor::sequence({Tensor::from_vector<float>({1, 2}, {2}), Tensor::from_vector<float>({3}, {1})},
                                      DType::Float32);
  const Tensor out = s.run({{"seq", seq}, {"scale", Tensor::scalar<float>(10)}}).at("out");
  REQUIRE(out.elements().size() == 2);
  CHECK(values(out.elements()[0]) == std::vector<float>{10, 20});
  CHECK(values(out.elements()[1]) == std::vector<float>{30});
}
