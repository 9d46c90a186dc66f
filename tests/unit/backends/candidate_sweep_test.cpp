// Every candidate the search may pick, against the reference: for each op case of the table
// below, each registered backend that supports it, in each of its configurations (Backend::
// configs), at sizes on, below and above the kernels' tiles (6 pixels x 16 channels for wpk's
// AVX2 register tile, 16-float vectors, 6 query rows for attention). One sweep over the registry
// instead of cases written per kernel; a kernel that declines a shape (Kernel::runs) is counted
// and reported, never passed silently.
#include <catch2/catch.hpp>

#include <map>

#include "runtime/execution_plan.hpp"
#include "support/backend_tester.hpp"

using wpk::Shape;
using wpk::testing::OpCase;

namespace {

struct SweepCase {
  OpCase op;
  double rtol, atol;
  // Generated kernels are compiled per shape: every configuration of the gen backend on the
  // cases at its tiles' edges, its first one on the others (each a few hundred compiles else).
  bool every_generated_config = true;
};

// NHWC convs as the layout pass leaves them, with the epilogues kernels fuse.
std::vector<SweepCase> conv_cases() {
  std::vector<SweepCase> out;
  unsigned seed = 100;
  for (std::int64_t c : {15, 16, 17, 64})
    for (std::int64_t hw : {5, 6, 7, 14})
      for (const char* act : {"", "Relu"}) {
        // Pixel tiles of 4, 6 and 8 leave remainders at 5 and 7 columns; 15 and 17 channels
        // straddle a vector.
        const bool edges = (hw == 5 || hw == 7) && (c == 15 || c == 17);
        out.push_back({OpCase("FusedConv", "com.wpk").input("X", {1, hw, hw, c}).constant("W", {c, c, 3, 3}).constant("B", {c})
                           .attr("pads", std::vector<std::int64_t>{1, 1, 1, 1}).attr("channels_last", std::int64_t{1})
                           .activation(act).seed(seed++),
                       1e-4, 1e-4, edges});
        out.push_back({OpCase("FusedConv", "com.wpk").input("X", {2, hw, hw, c}).constant("W", {32, c, 1, 1})
                           .attr("channels_last", std::int64_t{1}).activation(act).seed(seed++),
                       1e-4, 1e-4});
      }
  out.push_back({OpCase("FusedConv", "com.wpk").input("X", {1, 15, 15, 32}).constant("W", {48, 32, 3, 3})
                     .attr("strides", std::vector<std::int64_t>{2, 2}).attr("channels_last", std::int64_t{1}).seed(seed++),
                 1e-4, 1e-4});
  out.push_back({OpCase("FusedConv", "com.wpk").input("X", {1, 9, 9, 32}).constant("W", {32, 1, 3, 3})
                     .attr("group", std::int64_t{32}).attr("pads", std::vector<std::int64_t>{1, 1, 1, 1})
                     .attr("channels_last", std::int64_t{1}).seed(seed++),
                 1e-4, 1e-4});
  out.push_back({OpCase("Conv").input("X", {1, 16, 14, 14}).constant("W", {16, 16, 3, 3})
                     .attr("pads", std::vector<std::int64_t>{1, 1, 1, 1}).seed(seed++),
                 1e-4, 1e-4});
  return out;
}

std::vector<SweepCase> other_cases() {
  std::vector<SweepCase> out;
  unsigned seed = 300;
  for (std::int64_t rows : {1, 6, 7})
    for (std::int64_t k : {16, 17})
      for (std::int64_t n : {15, 16, 33})
        out.push_back({OpCase("FusedMatMul", "com.wpk").input("A", {rows, k}).constant("B", {k, n}).constant("C", {n})
                           .seed(seed++),
                       1e-4, 1e-4});
  // Every epilogue a generated product fuses, with a residual and rows over two leading dims.
  for (const char* act : {"Relu", "Sigmoid", "Tanh", "SiLU", "Clip", "LeakyRelu", "HardSwish", "GeluTanh"})
    out.push_back({OpCase("FusedMatMul", "com.wpk").input("A", {2, 3, 17}).constant("B", {17, 33}).constant("C", {33})
                       .input("Z", {2, 3, 33}).activation(act).seed(seed++),
                   1e-4, 1e-5});
  out.push_back({OpCase("Gemm").input("A", {7, 17}).constant("B", {33, 17}).constant("C", {1, 33})
                     .attr("transB", std::int64_t{1}).seed(seed++),
                 1e-4, 1e-5});
  out.push_back({OpCase("MatMul").input("A", {5, 16}).input("B", {16, 9}).seed(seed++), 1e-4, 1e-5});
  for (std::int64_t c : {15, 16, 17, 768})
    out.push_back({OpCase("LayerNormalization").input("X", {3, 5, c}).constant("S", {c}).constant("B", {c})
                       .attr("epsilon", 1e-5f).seed(seed++),
                   1e-4, 1e-5});
  for (std::int64_t s : {1, 6, 7, 13})
    out.push_back({OpCase("Attention", "com.wpk").input("Q", {2, 3, s, 8}).input("K", {2, 3, 19, 8})
                       .input("V", {2, 3, 19, 5}).input("M", {2, 1, 1, 19}).attr("scale", 0.35f).seed(seed++),
                   1e-4, 1e-5});
  for (std::int64_t c : {15, 16, 17})
    out.push_back({OpCase("MaxPool").input("X", {1, 9, 9, c}).attr("kernel_shape", std::vector<std::int64_t>{3, 3})
                       .attr("strides", std::vector<std::int64_t>{2, 2}).attr("pads", std::vector<std::int64_t>{1, 1, 1, 1})
                       .attr("channels_last", std::int64_t{1}).seed(seed++),
                   0, 0});
  for (std::int64_t c : {15, 16, 17})
    for (const char* op : {"Add", "Mul", "Div"})
      out.push_back({OpCase(op).input("A", {1, 7, 7, c}).input("B", {1, 1, 1, c}).seed(seed++), 0, 0});
  return out;
}

std::vector<std::string> configs_of(const SweepCase& c, const wpk::Backend& backend) {
  std::vector<std::string> configs = c.op.configs(backend);
  if (backend.name() == "gen" && !c.every_generated_config && configs.size() > 1) configs.resize(1);
  return configs;
}

}  // namespace

TEST_CASE("every candidate of every registered backend matches the reference at tile edges", "[backends][sweep]") {
  std::vector<SweepCase> cases = conv_cases();
  for (SweepCase& c : other_cases()) cases.push_back(std::move(c));
  std::map<std::string, int> checked, declined;
  // Generated kernels compile in one batch first, as a session compiles a model's.
  wpk::testing::GeneratedCode generated;
  for (const SweepCase& c : cases)
    for (const wpk::Backend* backend : wpk::registered_backends())
      if (backend->name() == "gen")
        for (const std::string& config : configs_of(c, *backend)) generated.add(*c.op.prepare(*backend, config));
  INFO(generated.size() << " generated kernels");
  REQUIRE(generated.compile(2) == "");
  const auto code = [&generated](wpk::Kernel& k) { generated.give(k); };
  for (const SweepCase& c : cases)
    for (const wpk::Backend* backend : wpk::registered_backends()) {
      if (backend->name() == "reference") continue;
      for (const std::string& config : configs_of(c, *backend)) {
        const std::string name = backend->name() + (config.empty() ? "" : "(" + config + ")");
        const std::string why = c.op.check(*backend, config, c.rtol, c.atol, code);
        INFO(name << ": " << c.op.describe());
        if (why.find("declines the inputs") != std::string::npos) {
          ++declined[name];
          continue;
        }
        CHECK(why == "");
        ++checked[name];
      }
    }
  std::string summary;
  for (const auto& [name, n] : checked)
    summary += name + " " + std::to_string(n) + " checked, " + std::to_string(declined[name]) + " declined; ";
  INFO(summary);
  CHECK(checked.count("cpu") == 1);  // row broadcast, pooling at least: any CPU runs those
  CHECK(checked["gen(rows=4,vectors=2,parallel=rows)"] > 0);  // products, on every CPU
#ifdef WPK_WITH_ONEDNN
  CHECK(checked["onednn"] > 0);
  CHECK(checked["onednn(algorithm=direct)"] > 0);
#endif
  WARN(summary);
}
