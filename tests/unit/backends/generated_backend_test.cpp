// What the gen backend declines: shapes its kernels would compute wrongly, attributes out of
// bounds, activations the DSL does not write.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

#include "backends/generated/generated_backend.hpp"
#include "backends/generated/matmul_expr.hpp"
#include "runtime/memory_recorder.hpp"
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

TEST_CASE("products in blocks of K are offered for two blocks or more, and keep their output apart from the residual", "[gen]") {
  const wpk::gen::GeneratedBackend gen;
  const auto has_blocks = [](const std::vector<std::string>& configs) {
    return std::any_of(configs.begin(), configs.end(), [](const std::string& c) { return c.find(",kblock=") != std::string::npos; });
  };
  const OpCase blocked =
      OpCase("FusedMatMul", "com.wpk").input("A", {4, 600}).constant("B", {600, 16}).constant("C", {16}).input("Z", {4, 16});
  const std::vector<std::string> configs = blocked.configs(gen);
  CHECK(has_blocks(configs));
  CHECK_FALSE(has_blocks(OpCase("FusedMatMul", "com.wpk").input("A", {4, 500}).constant("B", {500, 16}).configs(gen)));
  CHECK_FALSE(has_blocks(OpCase("MatMul").input("A", {4, 600}).input("B", {600, 16}).configs(gen)));
  std::map<std::string, wpk::Tensor> values;
  const wpk::Graph graph = blocked.build(values);
  const wpk::Node& node = graph.nodes().back();
  for (const std::string& config : configs) {
    INFO(config);
    const bool blocked = config.find(",kblock=") != std::string::npos;
    CHECK(gen.accumulates_into_residual(node, config) == !blocked);
    // The memory plan gives the output the residual's bytes only where the kernel allows it.
    CHECK(wpk::in_place_rule(node, gen, config).inputs == (blocked ? std::vector<std::size_t>{} : std::vector<std::size_t>{3}));
  }

  using wpk::gen::MatMulConfig;
  const auto round_trip = MatMulConfig::parse("rows=6,vectors=2,parallel=cols,kblock=256");
  REQUIRE(round_trip);
  CHECK(round_trip->k_block == 256);
  CHECK(round_trip->text() == "rows=6,vectors=2,parallel=cols,kblock=256");
  for (const char* bad : {"rows=6,vectors=2,parallel=rows,kblock=256", "rows=6,vectors=2,parallel=cols,prefetch=1,kblock=256",
                          "rows=6,vectors=2,parallel=cols,kblock=4", "rows=6,vectors=2,parallel=cols,kblock=0", "rows=6,vectors=2,parallel=cols,kblock=0256",
                          "rows=6,vectors=2,parallel=cols,kblock=256x", "rows=6,vectors=2,parallel=cols,kblock=99999"}) {
    INFO(bad);
    CHECK_FALSE(MatMulConfig::parse(bad));
  }
  // A conv's window has no blocks of K.
  const OpCase conv = OpCase("FusedConv", "com.wpk").input("X", {1, 5, 5, 600}).constant("W", {8, 600, 3, 3})
                          .attr("channels_last", std::int64_t{1});
  CHECK_FALSE(has_blocks(conv.configs(gen)));
  CHECK_THROWS_WITH(conv.prepare(gen, "rows=4,vectors=1,parallel=cols,kblock=128"), Catch::Contains("blocks of K"));
}

TEST_CASE("products and convs with a residual also offer to ask for it as each tile starts", "[gen]") {
  const wpk::gen::GeneratedBackend gen;
  const auto asks = [](const std::vector<std::string>& configs) {
    return std::count_if(configs.begin(), configs.end(),
                         [](const std::string& c) { return c.find(",prefetch_residual=1") != std::string::npos; });
  };
  const OpCase product =
      OpCase("FusedMatMul", "com.wpk").input("A", {4, 32}).constant("B", {32, 16}).constant("C", {16}).input("Z", {4, 16});
  const OpCase conv = OpCase("FusedConv", "com.wpk").input("X", {1, 6, 6, 8}).constant("W", {16, 8, 3, 3}).constant("B", {16})
                          .attr("channels_last", std::int64_t{1}).attr("pads", std::vector<std::int64_t>{1, 1, 1, 1});
  OpCase conv_residual = conv;
  conv_residual.input("Z", {1, 6, 6, 16});
  CHECK(asks(product.configs(gen)) > 0);
  CHECK(asks(conv_residual.configs(gen)) > 0);
  CHECK(asks(conv.configs(gen)) == 0);
  CHECK(asks(OpCase("FusedMatMul", "com.wpk").input("A", {4, 32}).constant("B", {32, 16}).configs(gen)) == 0);
  // Named in the kernel, kept in the config's text; a config asking for a residual the node has
  // not is refused, as is one that also runs in blocks of K.
  CHECK(conv_residual.prepare(gen, "rows=4,vectors=1,parallel=rows,prefetch_residual=1")->profile().name.find("_pz") != std::string::npos);
  CHECK_THROWS_WITH(conv.prepare(gen, "rows=4,vectors=1,parallel=rows,prefetch_residual=1"), Catch::Contains("no residual"));
  using wpk::gen::MatMulConfig;
  const auto round_trip = MatMulConfig::parse("rows=4,vectors=3,parallel=rows,prefetch=1,prefetch_residual=1");
  REQUIRE(round_trip);
  CHECK(round_trip->prefetch_residual);
  CHECK(round_trip->text() == "rows=4,vectors=3,parallel=rows,prefetch=1,prefetch_residual=1");
  CHECK_FALSE(MatMulConfig::parse("rows=6,vectors=2,parallel=cols,prefetch_residual=1,kblock=256"));
  CHECK_FALSE(MatMulConfig::parse("rows=6,vectors=2,parallel=cols,prefetch_residual=2"));
}
