// What the gen backend declines: shapes its kernels would compute wrongly, attributes out of
// bounds, activations the DSL does not write.
#include <catch2/catch.hpp>

#include "backends/generated/generated_backend.hpp"
#include "support/backend_tester.hpp"

using wpk::testing::OpCase;

TEST_CASE("the gen backend declines convs whose kernel does not fit the padded input, and hostile sizes", "[gen]") {
  const wpk::gen::GeneratedBackend gen;
  // 2 columns, a 3-wide kernel, stride 2, no padding: no output position exists.
  const OpCase too_small = OpCase("FusedConv", "com.wpk").input("X", {1, 2, 2, 4}).constant("W", {4, 4, 3, 3})
                               .attr("strides", std::vector<std::int64_t>{2, 2}).attr("channels_last", std::int64_t{1});
  CHECK(too_small.configs(gen).empty());
  const OpCase huge_dilation = OpCase("FusedConv", "com.wpk").input("X", {1, 5, 5, 4}).constant("W", {4, 4, 3, 3})
                                   .attr("dilations", std::vector<std::int64_t>{std::int64_t{1} << 40, 1})
                                   .attr("channels_last", std::int64_t{1});
  CHECK(huge_dilation.configs(gen).empty());
  const OpCase fits = OpCase("FusedConv", "com.wpk").input("X", {1, 3, 3, 4}).constant("W", {4, 4, 3, 3})
                          .attr("strides", std::vector<std::int64_t>{2, 2}).attr("channels_last", std::int64_t{1});
  CHECK_FALSE(fits.configs(gen).empty());
  CHECK(fits.check(gen, fits.configs(gen).front(), 1e-4, 1e-5) == "");
  const OpCase unknown_activation = OpCase("FusedMatMul", "com.wpk").input("A", {3, 8}).constant("B", {8, 8}).activation("Elu");
  CHECK(unknown_activation.configs(gen).empty());
}

TEST_CASE("the gen backend declines pools whose window or output a hostile model sizes past its bounds", "[gen]") {
  const wpk::gen::GeneratedBackend gen;
  using Ints = std::vector<std::int64_t>;
  const std::int64_t far = std::int64_t{1} << 30;
  // Two taps, dilated past a billion, padded as far: a billion output rows, whose tap counts the
  // kernel would tabulate at load.
  for (const char* op : {"MaxPool", "AveragePool"}) {
    INFO(op);
    const OpCase dilated = OpCase(op).input("X", {1, 4, 4, 8}).attr("kernel_shape", Ints{2, 1}).attr("dilations", Ints{far, 1})
                               .attr("pads", Ints{far, 0, far, 0}).attr("channels_last", std::int64_t{1});
    CHECK(dilated.configs(gen).empty());
    // A window of 2^21 taps.
    const OpCase wide = OpCase(op).input("X", {1, 4, 4, 8}).attr("kernel_shape", Ints{2048, 1024})
                            .attr("pads", Ints{1023, 511, 1023, 511}).attr("channels_last", std::int64_t{1});
    CHECK(wide.configs(gen).empty());
    const OpCase fits = OpCase(op).input("X", {1, 4, 4, 8}).attr("kernel_shape", Ints{3, 3}).attr("pads", Ints{1, 1, 1, 1})
                            .attr("channels_last", std::int64_t{1});
    REQUIRE_FALSE(fits.configs(gen).empty());
    CHECK(fits.check(gen, fits.configs(gen).front(), 1e-5, 1e-6) == "");
  }
}
