// Opsets 18-21, which wpk reads without Debian's ONNX library: the changed ops at the edges the
// ONNX node tests do not reach (negative axes, the optimizer's passes around them, hostile sizes).
// The node tests themselves run in the onnx_conformance_opsets_18_21 test.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "support/expect_error.hpp"
#include "support/onnx_model_builder.hpp"
#include "support/tensor_compare.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;
using wpk::testing::expect_error;
using wpk::testing::OnnxModelBuilder;

namespace {

Tensor run_one(const OnnxModelBuilder& b, const std::string& input, const Tensor& x,
               OptimizationLevel level = OptimizationLevel::All) {
  SessionOptions o;
  o.optimizer.level = level;
  Session s(load_from_bytes(b.bytes()), o);
  return s.run({{input, x}}).at(s.outputs()[0].name);
}

std::vector<float> values(const Tensor& t) { return std::vector<float>(t.data<float>(), t.data<float>() + t.numel()); }

}  // namespace

TEST_CASE("opset 18 Pad names its axes, and opset 19 wraps", "[opset18]") {
  OnnxModelBuilder b(19);
  b.input("x", {2, 3}).output("y", {2, 6});
  b.int64_initializer("pads", {2}, {1, 2}).int64_initializer("axes", {1}, {-1});
  b.node("Pad", {"x", "pads", "", "axes"}, {"y"}).attr("mode", std::string("wrap"));
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  for (OptimizationLevel level : {OptimizationLevel::None, OptimizationLevel::All}) {
    const Tensor y = run_one(b, "x", x, level);
    CHECK(y.shape() == Shape{2, 6});
    CHECK(values(y) == std::vector<float>{3, 1, 2, 3, 1, 2, 6, 4, 5, 6, 4, 5});
  }
  OnnxModelBuilder twice(18);
  twice.input("x", {2, 3}).output("y", {2, 6});
  twice.int64_initializer("pads", {4}, {1, 1, 2, 2}).int64_initializer("axes", {2}, {1, -1});
  twice.node("Pad", {"x", "pads", "", "axes"}, {"y"});
  expect_error([&] { run_one(twice, "x", x); }, ErrorCode::InvalidModel, {"axis -1 is repeated"});
}

TEST_CASE("opset 18 Resize: axes and keep_aspect_ratio_policy", "[opset18]") {
  // sizes 2x6 for a 4x4 image, not_larger: one scale min(2/4, 6/4) = 0.5 for both axes.
  OnnxModelBuilder b(18);
  b.input("x", {1, 1, 4, 4}).output("y", {1, 1, 2, 2});
  b.int64_initializer("sizes", {2}, {2, 6});
  b.node("Resize", {"x", "", "", "sizes"}, {"y"}).attr("axes", std::vector<long>{-2, -1})
      .attr("keep_aspect_ratio_policy", std::string("not_larger")).attr("mode", std::string("linear"));
  std::vector<float> pixels(16);
  for (int i = 0; i < 16; ++i) pixels[i] = static_cast<float>(i);
  const Tensor y = run_one(b, "x", Tensor::from_vector(pixels, {1, 1, 4, 4}));
  CHECK(y.shape() == Shape{1, 1, 2, 2});
  // half_pixel at scale 0.5 samples between rows/columns 0-1 and 2-3: the 2x2 block means.
  CHECK(values(y) == std::vector<float>{2.5f, 4.5f, 10.5f, 12.5f});
}

TEST_CASE("GroupNormalization: scale per group at opset 18, per channel from 21", "[opset18]") {
  // Two groups of two channels, each channel two values: group 0 = {0, 2, 4, 6}.
  const Tensor x = Tensor::from_vector<float>({0, 2, 4, 6, 1, 1, 1, 1}, {1, 4, 2});
  const double inv = 1 / std::sqrt(5.0 + 1e-5);
  for (int opset : {18, 21}) {
    const long params = opset == 18 ? 2 : 4;
    OnnxModelBuilder b(opset);
    b.input("x", {1, 4, 2}).output("y", {1, 4, 2});
    b.float_initializer("scale", {params}, opset == 18 ? std::vector<float>{2, 1} : std::vector<float>{2, 3, 1, 1});
    b.float_initializer("bias", {params}, std::vector<float>(static_cast<std::size_t>(params), 0.5f));
    b.node("GroupNormalization", {"x", "scale", "bias"}, {"y"}).attr("num_groups", 2L);
    const std::vector<float> y = values(run_one(b, "x", x));
    const double second_scale = opset == 18 ? 2 : 3;  // channel 1 is in group 0
    CHECK(y[0] == Approx(2 * (-3 * inv) + 0.5).epsilon(1e-6));
    CHECK(y[3] == Approx(second_scale * (3 * inv) + 0.5).epsilon(1e-6));
    CHECK(y[5] == Approx(0.5).epsilon(1e-6));  // a constant group normalises to the bias
  }
}

TEST_CASE("opset 20 Gelu is fused like the exported formula", "[opset20]") {
  OnnxModelBuilder b(20);
  b.input("x", {4}).output("y", {4}).node("Gelu", {"x"}, {"y"}).attr("approximate", std::string("tanh"));
  const Tensor x = Tensor::from_vector<float>({-2, -0.5f, 0.5f, 3}, {4});
  for (OptimizationLevel level : {OptimizationLevel::None, OptimizationLevel::All}) {
    const std::vector<float> y = values(run_one(b, "x", x, level));
    for (int i = 0; i < 4; ++i) {
      const double v = x.data<float>()[i];
      const double want = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
      CHECK(y[i] == Approx(want).epsilon(1e-5));
    }
  }
  OnnxModelBuilder bad(20);
  bad.input("x", {4}).output("y", {4}).node("Gelu", {"x"}, {"y"}).attr("approximate", std::string("sigmoid"));
  expect_error([&] { run_one(bad, "x", x); }, ErrorCode::InvalidModel, {"approximate"});
}

TEST_CASE("DeformConv with zero offsets is the plain convolution, and offsets move the taps", "[opset19]") {
  // x 1x2x4x4, W 3x2x3x3, pads 1, stride 1: 16 output positions, 9 taps.
  std::vector<float> xs(32), ws(54);
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>((i * 7) % 11) - 5;
  for (std::size_t i = 0; i < ws.size(); ++i) ws[i] = static_cast<float>((i * 5) % 9) / 4 - 1;
  auto model = [&](const char* op) {
    OnnxModelBuilder b(19);
    b.input("x", {1, 2, 4, 4}).input("offset", {1, 18, 4, 4}).output("y", {1, 3, 4, 4});
    b.float_initializer("w", {3, 2, 3, 3}, ws);
    if (std::string(op) == "Conv") b.node("Conv", {"x", "w"}, {"y"});
    else b.node("DeformConv", {"x", "w", "offset"}, {"y"});
    b.attr("pads", std::vector<long>{1, 1, 1, 1});
    return b;
  };
  const Tensor x = Tensor::from_vector(xs, {1, 2, 4, 4});
  Tensor offset = Tensor::zeros(DType::Float32, {1, 18, 4, 4});
  Session conv(load_from_bytes(model("Conv").bytes())), deform(load_from_bytes(model("DeformConv").bytes()));
  const Tensor want = conv.run({{"x", x}, {"offset", offset}}).at("y");
  CHECK(wpk::testing::compare_allclose(deform.run({{"x", x}, {"offset", offset}}).at("y"), want, 1e-5, 1e-5).empty());
  // Every tap moved one row down reads what the conv reads one output row further down.
  for (std::int64_t tap = 0; tap < 9; ++tap)
    for (std::int64_t p = 0; p < 16; ++p) offset.data<float>()[(tap * 2) * 16 + p] = 1.0f;
  const Tensor moved = deform.run({{"x", x}, {"offset", offset}}).at("y");
  for (std::int64_t o = 0; o < 3; ++o)
    for (std::int64_t i = 0; i < 3; ++i)
      for (std::int64_t j = 0; j < 4; ++j)
        CHECK(moved.data<float>()[(o * 4 + i) * 4 + j] == Approx(want.data<float>()[(o * 4 + i + 1) * 4 + j]).margin(1e-4));
}

TEST_CASE("hostile sizes in the new ops are errors before any allocation", "[opset20][errors]") {
  OnnxModelBuilder grid(20);
  grid.input("theta", {1, 2, 3}).output("g", {1, 1, 1, 2});
  grid.int64_initializer("size", {4}, {1, 1, 1L << 30, 1L << 30});
  grid.node("AffineGrid", {"theta", "size"}, {"g"});
  const Tensor theta = Tensor::from_vector<float>({1, 0, 0, 0, 1, 0}, {1, 2, 3});
  expect_error([&] { run_one(grid, "theta", theta); }, ErrorCode::ResourceExhausted, {"AffineGrid"});

  OnnxModelBuilder col(18);
  col.input("x", {1, 4, 3}).output("y", {1, 1, 3, 3});
  col.int64_initializer("image", {2}, {3, 3}).int64_initializer("block", {2}, {2, 2});
  col.node("Col2Im", {"x", "image", "block"}, {"y"});
  // A 2x2 block slides over a 3x3 image in 4 positions, not 3.
  expect_error([&] { run_one(col, "x", Tensor::zeros(DType::Float32, {1, 4, 3})); }, ErrorCode::InvalidArgument,
               {"3 blocks", "gives 4"});

  OnnxModelBuilder crop(18);
  crop.input("x", {2, 2}).output("y", {-1, -1});
  crop.int64_initializer("shape", {2}, {1L << 40, 1L << 40});
  crop.node("CenterCropPad", {"x", "shape"}, {"y"});
  expect_error([&] { run_one(crop, "x", Tensor::zeros(DType::Float32, {2, 2})); }, ErrorCode::ResourceExhausted,
               {"CenterCropPad"});
}
