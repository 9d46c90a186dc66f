// Resize to the input's own size (a detector's preprocessing resizing an image already at its
// size) returns the input, bit for bit, in every mode; a real resize still interpolates.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "support/onnx_model_builder.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;
using wpk::testing::OnnxModelBuilder;

namespace {

Tensor resize(const std::string& mode, const std::vector<long>& sizes, const Tensor& x) {
  OnnxModelBuilder m;
  m.input("x", {1, 2, 3, 4}).output("y", {1, 2, sizes[2], sizes[3]});
  m.int64_initializer("sizes", {4}, sizes);
  m.node("Resize", {"x", "", "", "sizes"}, {"y"}).attr("mode", mode);
  Session s(load_from_bytes(m.bytes()));
  return s.run({{"x", x}}).at("y");
}

}  // namespace

TEST_CASE("Resize to the input's own size returns the input to the bit", "[resize][reference]") {
  std::vector<float> v;
  for (int i = 0; i < 24; ++i) v.push_back(0.37f * static_cast<float>(i) - 3.1f);
  v[5] = std::numeric_limits<float>::infinity();
  v[6] = -0.0f;
  const Tensor x = Tensor::from_vector(v, {1, 2, 3, 4});
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    INFO(mode);
    const Tensor y = resize(mode, {1, 2, 3, 4}, x);
    REQUIRE(y.shape() == x.shape());
    CHECK(std::memcmp(y.raw(), x.raw(), x.nbytes()) == 0);
  }
  // Twice the width: every other output column is the mean of its neighbours (half_pixel).
  const Tensor wide = resize("linear", {1, 2, 3, 8}, Tensor::from_vector(std::vector<float>(24, 2.0f), {1, 2, 3, 4}));
  for (std::int64_t i = 0; i < wide.numel(); ++i) CHECK(wide.data<float>()[i] == 2.0f);
  const Tensor ramp = resize("linear", {1, 2, 3, 8}, x);
  CHECK(ramp.data<float>()[1] == Approx(0.75 * v[0] + 0.25 * v[1]));
}
