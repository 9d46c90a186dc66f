// String tensors: in and out of run(), through the string ops and Cast, and a clear error (never
// a wrong answer) from the ops that move bytes and have no string form.
#include <catch2/catch.hpp>

#include <vector>

#include "support/expect_error.hpp"
#include "support/onnx_model_builder.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;
using wpk::testing::expect_error;
using wpk::testing::OnnxModelBuilder;

namespace {
constexpr int kFloat = 1, kString = 8, kBool = 9;
}  // namespace

TEST_CASE("strings pass through run(), the string ops and Cast", "[strings]") {
  OnnxModelBuilder b(20);
  b.input("words", {-1}, kString).input("suffix", {}, kString).output("joined", {-1}, kString)
      .output("numbers", {-1}).output("text", {-1}, kString).output("dotted", {-1}, kBool);
  b.node("StringConcat", {"words", "suffix"}, {"joined"});
  b.node("Cast", {"words"}, {"numbers"}).attr("to", static_cast<long>(kFloat));
  b.node("Cast", {"numbers"}, {"text"}).attr("to", static_cast<long>(kString));
  b.node("RegexFullMatch", {"words"}, {"dotted"}).attr("pattern", std::string("[0-9]+\\.[0-9]+"));
  Session s(load_from_bytes(b.bytes()));
  const TensorMap out = s.run({{"words", Tensor::from_strings({"1.5", "-2", "inf"}, {3})},
                               {"suffix", Tensor::from_strings({"!"}, {})}});
  CHECK(out.at("joined").strings() == std::vector<std::string>{"1.5!", "-2!", "inf!"});
  CHECK(std::vector<float>(out.at("numbers").data<float>(), out.at("numbers").data<float>() + 3) ==
        std::vector<float>{1.5f, -2.0f, INFINITY});
  CHECK(out.at("text").strings() == std::vector<std::string>{"1.5", "-2", "INF"});
  CHECK(out.at("dotted").data<bool>()[0]);
  CHECK_FALSE(out.at("dotted").data<bool>()[1]);
  expect_error([&] { s.run({{"words", Tensor::from_strings({"12abc"}, {1})}, {"suffix", Tensor::from_strings({""}, {})}}); },
               ErrorCode::InvalidArgument, {"'12abc' is not a number"});
}

TEST_CASE("TfIdfVectorizer counts pooled n-grams of string tokens, and bounds its work", "[strings]") {
  // Pool: unigrams "a", "b"; bigram "a b". Output slots 0, 1, 2 in that order.
  OnnxModelBuilder b;
  b.input("tokens", {-1}, kString).output("tf", {3});
  b.node("TfIdfVectorizer", {"tokens"}, {"tf"}).attr("mode", std::string("TF")).attr("min_gram_length", 1L)
      .attr("max_gram_length", 2L).attr("max_skip_count", 1L).attr("ngram_counts", std::vector<long>{0, 2})
      .attr("ngram_indexes", std::vector<long>{0, 1, 2});
  auto* pool = b.model.mutable_graph()->mutable_node(0)->add_attribute();
  pool->set_name("pool_strings");
  pool->set_type(onnx::AttributeProto::STRINGS);
  for (const char* w : {"a", "b", "a", "b"}) pool->add_strings(w);
  Session s(load_from_bytes(b.bytes()));
  // "a b c a b": a and b twice each; "a b" adjacent at 0-1 and 3-4, and with one token skipped
  // never (0-2 is "a c", 1-3 "b a", 2-4 "c b").
  const Tensor tf = s.run({{"tokens", Tensor::from_strings({"a", "b", "c", "a", "b"}, {5})}}).at("tf");
  CHECK(std::vector<float>(tf.data<float>(), tf.data<float>() + 3) == std::vector<float>{2, 2, 2});

  OnnxModelBuilder hostile;
  hostile.input("tokens", {-1}, 7).output("tf", {1});
  hostile.node("TfIdfVectorizer", {"tokens"}, {"tf"}).attr("mode", std::string("TF")).attr("max_gram_length", 2L)
      .attr("max_skip_count", 1000000L).attr("ngram_counts", std::vector<long>{0}).attr("ngram_indexes", std::vector<long>{0})
      .attr("pool_int64s", std::vector<long>{1});
  Session h(load_from_bytes(hostile.bytes()));
  expect_error([&] { h.run({{"tokens", Tensor::zeros(DType::Int64, {1 << 20})}}); }, ErrorCode::ResourceExhausted,
               {"TfIdfVectorizer", "work limit"});
}

TEST_CASE("ops without a string form refuse strings by name", "[strings][errors]") {
  OnnxModelBuilder b;
  b.input("s", {2, 2}, kString).output("t", {2, 2}, kString).node("Transpose", {"s"}, {"t"});
  Session s(load_from_bytes(b.bytes()));
  expect_error([&] { s.run({{"s", Tensor::from_strings({"a", "b", "c", "d"}, {2, 2})}}); }, ErrorCode::Unsupported, {"string"});
  // A string tensor whose element count is not its shape's.
  CHECK_THROWS_AS(Tensor::from_strings({"a"}, {2}), Error);
}
