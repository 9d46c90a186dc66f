// Random ops: a seed makes every run draw the same numbers, no seed draws fresh ones; values stay
// in the distribution's range, and degenerate distributions give their one possible value.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "support/expect_error.hpp"
#include "support/onnx_model_builder.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;
using wpk::testing::expect_error;
using wpk::testing::OnnxModelBuilder;

namespace {

OnnxModelBuilder uniform_model(bool seeded) {
  OnnxModelBuilder b;
  b.input("x", {64}).output("y", {64});
  b.node("RandomUniformLike", {"x"}, {"y"}).attr("low", -2.0f).attr("high", 3.0f);
  if (seeded) b.attr("seed", 7.0f);
  return b;
}

std::vector<float> draw(const Session& s) {
  const Tensor y = s.run({{"x", Tensor::zeros(DType::Float32, {64})}}).at("y");
  return std::vector<float>(y.data<float>(), y.data<float>() + y.numel());
}

}  // namespace

TEST_CASE("a seeded random op draws the same numbers at every run, and an unseeded one does not", "[random]") {
  Session seeded(load_from_bytes(uniform_model(true).bytes()));
  const std::vector<float> a = draw(seeded), b = draw(seeded);
  CHECK(a == b);
  Session again(load_from_bytes(uniform_model(true).bytes()));
  CHECK(draw(again) == a);
  for (float v : a) {
    CHECK(v >= -2.0f);
    CHECK(v < 3.0f);
  }
  Session fresh(load_from_bytes(uniform_model(false).bytes()));
  CHECK(draw(fresh) != draw(fresh));
}

TEST_CASE("Bernoulli of 0 and 1 and a Multinomial with one possible class are exact", "[random]") {
  OnnxModelBuilder b;
  b.input("p", {4}).output("y", {4}).node("Bernoulli", {"p"}, {"y"});
  Session s(load_from_bytes(b.bytes()));
  const Tensor y = s.run({{"p", Tensor::from_vector<float>({0, 1, 1, 0}, {4})}}).at("y");
  CHECK(std::vector<float>(y.data<float>(), y.data<float>() + 4) == std::vector<float>{0, 1, 1, 0});
  expect_error([&] { s.run({{"p", Tensor::from_vector<float>({0, 1.5f, 1, 0}, {4})}}); }, ErrorCode::InvalidArgument,
               {"outside [0, 1]"});

  OnnxModelBuilder m;
  m.input("logits", {2, 3}).output("k", {2, 5}, 7).node("Multinomial", {"logits"}, {"k"}).attr("sample_size", 5L)
      .attr("dtype", 7L);
  Session ms(load_from_bytes(m.bytes()));
  // exp(-inf) = 0: only one class can be drawn in each row.
  const float inf = INFINITY;
  const Tensor k = ms.run({{"logits", Tensor::from_vector<float>({-inf, 0, -inf, 5, -inf, -inf}, {2, 3})}}).at("k");
  CHECK(std::vector<std::int64_t>(k.data<std::int64_t>(), k.data<std::int64_t>() + 10) ==
        std::vector<std::int64_t>{1, 1, 1, 1, 1, 0, 0, 0, 0, 0});
}

TEST_CASE("RandomNormal with a shape attribute, and one too large for the session", "[random][errors]") {
  OnnxModelBuilder b;
  b.output("y", {1000}).node("RandomNormal", {}, {"y"}).attr("shape", std::vector<long>{1000});
  Session s(load_from_bytes(b.bytes()));
  const Tensor y = s.run({}).at("y");
  double mean = 0;
  for (int i = 0; i < 1000; ++i) mean += y.data<float>()[i] / 1000.0;
  CHECK(std::abs(mean) < 0.2);  // N(0, 1): the mean of 1000 draws is within 0.2 but for 1 in 10^9

  OnnxModelBuilder huge;
  huge.output("y", {-1, -1}).node("RandomUniform", {}, {"y"}).attr("shape", std::vector<long>{1L << 30, 1L << 30});
  expect_error([&] { Session(load_from_bytes(huge.bytes())).run({}); }, ErrorCode::ResourceExhausted, {"RandomUniform"});
}
