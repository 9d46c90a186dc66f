// Generated kernels inside sessions: compiled once into the cache folder's kernel store, found
// there by every later load (which then needs no compiler), left out with the other backends
// running when there is neither a compiler nor a stored kernel.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <cstdlib>

#include "backends/generated/generated_backend.hpp"
#include "backends/reference/reference_backend.hpp"
#include "codegen/jit/host_compiler.hpp"
#include "codegen/jit/kernel_store.hpp"
#include "runtime/execution_plan.hpp"
#include "runtime/kernel_compilation.hpp"
#include "support/env_override.hpp"
#include "support/onnx_model_builder.hpp"
#include "support/relu_product_graph.hpp"
#include "wpk/wpk.hpp"

namespace {

// y = relu(a @ b + bias) over a dynamic number of rows.
wpk::Graph product_graph() { return wpk::testing::relu_product_graph(wpk::Dim("rows"), 37, 50, 5); }

wpk::TensorMap rows_of_input(std::int64_t rows) {
  std::vector<float> a(static_cast<std::size_t>(rows * 37));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37f * static_cast<float>(i));
  return {{"a", wpk::Tensor::from_vector(a, {rows, 37})}};
}

// Only the gen backend and the oracle: the cost model prefers the generated product to Eigen's.
wpk::SessionOptions gen_only(const std::string& cache) {
  wpk::SessionOptions o;
  o.cache_dir = cache;
  o.profile = true;
  o.disabled_kernels = {"cpu", "onednn"};
  return o;
}

std::string product_backend(const wpk::Session& s) {
  for (const wpk::StepProfile& step : s.last_profile().steps)
    if (step.op == "com.wpk.FusedMatMul") return step.backend;
  return "";
}

double worst_difference(const wpk::Tensor& a, const wpk::Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  double worst = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) worst = std::max(worst, std::abs(double(a.data<float>()[i]) - b.data<float>()[i]));
  return worst;
}


}  // namespace

TEST_CASE("a generated product compiles once, and a warm load needs no compiler", "[gen][session]") {
  const std::string cache = wpk::testing::temp_dir("gen_session");
  wpk::SessionOptions reference_only;
  reference_only.disabled_kernels = {"cpu", "onednn", "gen"};
  const wpk::Session oracle(product_graph(), reference_only);

  const std::uint64_t before = wpk::process_counters().compiled_kernels;
  {
    const wpk::Session s(product_graph(), gen_only(cache));
    CHECK(wpk::process_counters().compiled_kernels > before);
    for (std::int64_t rows : {1, 5, 70}) {
      INFO(rows << " rows");
      CHECK(worst_difference(s.run(rows_of_input(rows)).at("y"), oracle.run(rows_of_input(rows)).at("y")) < 1e-5);
      CHECK(product_backend(s).rfind("gen(", 0) == 0);
      CHECK(product_backend(s).find(":f32_matmul__") != std::string::npos);
    }
  }
  const std::uint64_t compiled = wpk::process_counters().compiled_kernels;
  {
    // A compiler that cannot run: the warm store is all a load needs, and its recipes spare the
    // load printing the kernels' sources.
    const wpk::testing::EnvOverride no_compiler("WPK_CXX", "/nonexistent/c++");
    const std::uint64_t recalled = wpk::codegen::kernel_store_counters().recalled;
    const wpk::Session s(product_graph(), gen_only(cache));
    CHECK(wpk::process_counters().compiled_kernels == compiled);
    CHECK(wpk::codegen::kernel_store_counters().recalled > recalled);
    CHECK(worst_difference(s.run(rows_of_input(3)).at("y"), oracle.run(rows_of_input(3)).at("y")) < 1e-5);
    CHECK(product_backend(s).rfind("gen(", 0) == 0);
  }
  {
    // No compiler and an empty store: the generated candidate is left out, the oracle runs.
    const wpk::testing::EnvOverride no_compiler("WPK_CXX", "/nonexistent/c++");
    const wpk::Session s(product_graph(), gen_only(wpk::testing::temp_dir("gen_session_empty")));
    CHECK(worst_difference(s.run(rows_of_input(3)).at("y"), oracle.run(rows_of_input(3)).at("y")) == 0);
    CHECK(product_backend(s) == "reference");
    CHECK(wpk::process_counters().compiled_kernels == compiled);
  }
}

namespace {

// A backend slower than the reference by the cost model whose kernels need compiling (or not):
// counts how often the plan prepares one.
class FallbackProbe : public wpk::reference::ReferenceBackend {
 public:
  explicit FallbackProbe(bool generates) : generates_(generates) {}
  std::string name() const override { return "fallback-probe"; }
  bool generates_code() const override { return generates_; }
  std::optional<wpk::KernelProfile> describe(const wpk::Node&, const wpk::Graph&, const std::string&, const wpk::InputShapes&,
                                             int) const override {
    wpk::KernelProfile p;
    p.efficiency = 1e-3;  // far behind the reference: never the plan's first choice
    return p;
  }
  std::unique_ptr<wpk::Kernel> prepare(const wpk::Node& node, const wpk::Graph& graph) const override {
    ++prepared;
    return ReferenceBackend::prepare(node, graph);
  }
  mutable std::atomic<int> prepared{0};

 private:
  bool generates_;
};

}  // namespace

TEST_CASE("a plan that does not tune prepares no kernel that needs compiling only to stand by", "[gen][session]") {
  // Preparing a generated kernel prints its source and packs its weights; it could only stand
  // by as a fallback after compiling.
  const wpk::reference::ReferenceBackend reference;
  wpk::Graph g = product_graph();
  const FallbackProbe generating(true);
  const wpk::ExecutionPlan plan(g, {&reference, &generating}, wpk::PlanOptions{});
  CHECK(plan.steps().front().offered.find("fallback-probe") != std::string::npos);  // offered
  CHECK(generating.prepared == 0);                                                   // not prepared
  CHECK(plan.steps().front().candidates.size() == 1);
  // The same backend without code to compile stands by as the node's fallback.
  const FallbackProbe library(false);
  const wpk::ExecutionPlan with_library(g, {&reference, &library}, wpk::PlanOptions{});
  CHECK(library.prepared == static_cast<int>(with_library.steps().size()));  // one per node
  CHECK(with_library.steps().front().candidates.size() == 2);
}

TEST_CASE("disabled_kernels leaves out a family of generated kernels", "[gen][session]") {
  wpk::SessionOptions o = gen_only(wpk::testing::temp_dir("gen_family"));
  o.disabled_kernels.push_back("gen:f32_matmul");
  const wpk::Session s(product_graph(), o);
  s.run(rows_of_input(2));
  CHECK(product_backend(s) == "reference");
  // One kernel by its full name: its family is the backend's.
  o.disabled_kernels.back() = "gen:f32_matmul__scalar_1x1_prows";
  CHECK_NOTHROW(wpk::Session(product_graph(), o));
  o.disabled_kernels.back() = "gen:f32_nothing";
  CHECK_THROWS_WITH(wpk::Session(product_graph(), o), Catch::Contains("names no kernel of gen"));
}

// Compiling is for tuning: a plan that does not tune runs a generated kernel the cost model picks
// only from code its store already holds, unless nothing but the reference runs the node.
TEST_CASE("without tuning a generated kernel is compiled only where nothing but the reference runs its node",
          "[gen][session]") {
  const wpk::reference::ReferenceBackend reference;
  const wpk::gen::GeneratedBackend gen;
  const FallbackProbe library(false);  // runs the node, ranked below the reference
  wpk::Graph g = product_graph();
  const std::string folder = wpk::kernel_folder(wpk::testing::temp_dir("gen_untuned"));
  wpk::codegen::KernelStore store(folder, wpk::codegen::find_host_compiler(folder));
  wpk::PlanOptions options;
  options.kernel_store = [&store] { return &store; };
  const auto first_backend = [](const wpk::ExecutionPlan& plan) {
    return plan.steps().front().candidates.front().backend->name();
  };
  const std::uint64_t before = wpk::codegen::kernel_store_counters().compiled;
  const wpk::ExecutionPlan cold(g, {&gen, &library, &reference}, options);
  CHECK(first_backend(cold) == "reference");
  CHECK(wpk::codegen::kernel_store_counters().compiled == before);

  const wpk::ExecutionPlan only_generated(g, {&gen, &reference}, options);
  CHECK(first_backend(only_generated) == "gen");
  const std::uint64_t compiled = wpk::codegen::kernel_store_counters().compiled;
  CHECK(compiled > before);

  // The store now holds the product's kernel: the cost model's pick runs, compiling nothing.
  const wpk::ExecutionPlan warm(g, {&gen, &library, &reference}, options);
  CHECK(first_backend(warm) == "gen");
  CHECK(wpk::codegen::kernel_store_counters().compiled == compiled);
}
