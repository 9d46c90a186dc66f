// Generated kernels compiled after load (SessionOptions::compile_in_background): the session
// loads without waiting for a compiler, runs another kernel until the code is ready, then the
// generated one; later sessions find it in the kernel store; a session destroyed meanwhile stops
// its compilers.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <fstream>
#include <thread>
#include <sys/stat.h>

#include "backends/generated/generated_backend.hpp"
#include "backends/reference/reference_backend.hpp"
#include "codegen/jit/host_compiler.hpp"
#include "codegen/jit/kernel_store.hpp"
#include "runtime/kernel_compilation.hpp"
#include "runtime/session_factory.hpp"
#include "support/env_override.hpp"
#include "support/onnx_model_builder.hpp"
#include "support/relu_product_graph.hpp"
#include "support/tensor_compare.hpp"
#include "wpk/wpk.hpp"

namespace {

// 6 rows through a 29x40 product with bias and ReLU.
wpk::Graph product_graph() { return wpk::testing::relu_product_graph(6, 29, 40, 11); }

wpk::TensorMap input() {
  std::vector<float> a(6 * 29);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::cos(0.21f * static_cast<float>(i));
  return {{"a", wpk::Tensor::from_vector(a, {6, 29})}};
}

// A backend the cost model ranks far behind the reference, whose kernels need no compiling: with
// it, the generated backend is not the only one besides the reference, so a session that does
// not tune compiles nothing at load.
class SlowLibrary : public wpk::reference::ReferenceBackend {
 public:
  std::string name() const override { return "slow-library"; }
  std::optional<wpk::KernelProfile> describe(const wpk::Node&, const wpk::Graph&, const std::string&, const wpk::InputShapes&,
                                             int) const override {
    wpk::KernelProfile p;
    p.efficiency = 1e-3;
    return p;
  }
};

// The backends of every session here: the generated one, a slow library and the reference.
struct Backends {
  const wpk::gen::GeneratedBackend gen;
  const SlowLibrary library;
  const wpk::reference::ReferenceBackend reference;
  std::vector<const wpk::Backend*> all() const { return {&gen, &library, &reference}; }
};

std::string product_backend(const wpk::Session& s) {
  for (const wpk::StepProfile& step : s.last_profile().steps)
    if (step.op == "com.wpk.FusedMatMul") return step.backend;
  return "";
}

// The build's compiler behind a script that first sleeps `seconds` (but answers --version at
// once; it touches `folder`/started, and `folder`/woke once the sleep is over): compiling takes at
// least that long, whatever the machine.
std::string slow_compiler(const std::string& folder, int seconds) {
  const wpk::codegen::HostCompiler real = wpk::codegen::find_host_compiler();
  REQUIRE(real.usable());
  const std::string path = folder + "/slow-c++";
  std::ofstream script(path);
  // The wait runs in a subshell, as a compiler driver's own children do: only stopping the whole
  // process group stops it.
  script << "#!/bin/sh\ncase \"$1\" in --version) ;; *) touch '" << folder << "/started'; (sleep " << seconds
         << "; touch '" << folder << "/woke') & wait $! ;; esac\nexec";
  for (const std::string& word : real.command) script << " '" << word << "'";
  script << " \"$@\"\n";
  script.close();
  ::chmod(path.c_str(), 0755);
  return path;
}

wpk::SessionOptions options_in(const std::string& cache) {
  wpk::SessionOptions o;
  o.cache_dir = cache;
  o.profile = true;
  o.threads = 1;
  o.compile_in_background = true;
  return o;
}

// A tuning session's options, `budget` seconds of tuning.
wpk::SessionOptions tuning_in(const std::string& cache, double budget) {
  wpk::SessionOptions o = options_in(cache);
  o.tuning = true;
  o.tuning_budget = budget;
  return o;
}

}  // namespace

TEST_CASE("a session compiles the cost model's generated kernel after load and then runs it", "[gen][session]") {
  const wpk::testing::EnvOverride on("WPK_COMPILE_IN_BACKGROUND", "1");
  const Backends b;
  const std::vector<const wpk::Backend*> backends = b.all();
  const std::string cache = wpk::testing::temp_dir("background_compile");
  const wpk::testing::EnvOverride slow("WPK_CXX", slow_compiler(cache, 2));
  wpk::SessionOptions reference_only;
  reference_only.disabled_kernels = {"cpu", "onednn", "gen"};
  const wpk::Tensor expected = wpk::Session(product_graph(), reference_only).run(input()).at("y");

  const std::uint64_t compiled_before = wpk::process_counters().compiled_kernels;
  const auto t0 = std::chrono::steady_clock::now();
  const wpk::Session s = wpk::SessionFactory::create(product_graph(), options_in(cache), backends);
  // The load did not wait for the compiler's two seconds.
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(1500));
  const wpk::BackgroundCompilation compiling = s.background_compilation();
  CHECK(compiling.kernels == 1);
  CHECK_FALSE(compiling.finished);
  // Until the code comes, the best kernel that needs none runs the node.
  CHECK(wpk::testing::compare_allclose(s.run(input()).at("y"), expected, 0, 0) == "");
  CHECK(product_backend(s) == "reference");

  const wpk::BackgroundCompilation done = s.wait_for_background_compilation();
  CHECK(done.finished);
  CHECK(done.ready == 1);
  CHECK(done.failed == 0);
  CHECK(done.seconds >= 2);
  CHECK(wpk::process_counters().compiled_kernels > compiled_before);
  // The next run chooses again, with the generated kernel.
  CHECK(wpk::testing::compare_allclose(s.run(input()).at("y"), expected, 0, 1e-5) == "");
  CHECK(product_backend(s).rfind("gen(", 0) == 0);

  // A later session finds the kernel in the store: it runs from the first run, compiling nothing.
  const std::uint64_t compiled = wpk::process_counters().compiled_kernels;
  const wpk::Session warm = wpk::SessionFactory::create(product_graph(), options_in(cache), backends);
  CHECK(warm.background_compilation().kernels == 0);
  CHECK(wpk::testing::compare_allclose(warm.run(input()).at("y"), expected, 0, 1e-5) == "");
  CHECK(product_backend(warm).rfind("gen(", 0) == 0);
  CHECK(wpk::process_counters().compiled_kernels == compiled);
}

TEST_CASE("a session destroyed while compiling stops its compilers; a later one compiles again", "[gen][session]") {
  const wpk::testing::EnvOverride on("WPK_COMPILE_IN_BACKGROUND", "1");
  const Backends b;
  const std::vector<const wpk::Backend*> backends = b.all();
  const std::string cache = wpk::testing::temp_dir("background_compile_cancel");
  {
    const wpk::testing::EnvOverride slow("WPK_CXX", slow_compiler(cache, 2));
    auto s = std::make_unique<wpk::Session>(wpk::SessionFactory::create(product_graph(), options_in(cache), backends));
    CHECK(s->background_compilation().kernels == 1);
    // Destroyed while the compiler runs.
    for (int i = 0; i < 500 && !std::ifstream(cache + "/started").good(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    REQUIRE(std::ifstream(cache + "/started").good());
    const auto t0 = std::chrono::steady_clock::now();
    s.reset();
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1));
    // Stopped with everything it started: nothing wakes up later to go on compiling.
    std::this_thread::sleep_for(std::chrono::seconds(3));
    CHECK_FALSE(std::ifstream(cache + "/woke").good());
  }
  // Nothing half-written was left for it: the real compiler's session compiles and runs it.
  const wpk::Session again = wpk::SessionFactory::create(product_graph(), options_in(cache), backends);
  CHECK(again.background_compilation().kernels == 1);
  CHECK(again.wait_for_background_compilation().ready == 1);
  again.run(input());
  CHECK(product_backend(again).rfind("gen(", 0) == 0);
}

TEST_CASE("a tuning record's generated kernel missing from the store is compiled after load, not at it",
          "[gen][session][tuning]") {
  const wpk::testing::EnvOverride on("WPK_COMPILE_IN_BACKGROUND", "1");
  const Backends b;
  const std::vector<const wpk::Backend*> backends = b.all();
  const std::string cache = wpk::testing::temp_dir("background_compile_record");
  {
    wpk::SessionOptions tune = options_in(cache);
    tune.tuning = true;
    tune.tuning_budget = 30;
    tune.tuning_trials = 4;
    const wpk::Session tuned = wpk::SessionFactory::create(product_graph(), tune, backends);
    tuned.run(input());
    REQUIRE(product_backend(tuned).rfind("gen(", 0) == 0);  // the record names the generated kernel
  }
  // A new compiler (or a pruned folder) leaves the records without their kernels.
  std::filesystem::remove_all(wpk::kernel_folder(cache));
  const wpk::testing::EnvOverride slow("WPK_CXX", slow_compiler(cache, 2));
  const std::uint64_t compiled = wpk::process_counters().compiled_kernels;
  const wpk::Session s = wpk::SessionFactory::create(product_graph(), options_in(cache), backends);
  CHECK(s.background_compilation().kernels == 1);
  s.run(input());
  CHECK(product_backend(s) == "reference");  // the record's kernel is not there yet
  CHECK(s.wait_for_background_compilation().ready == 1);
  CHECK(wpk::process_counters().compiled_kernels > compiled);
  s.run(input());
  CHECK(product_backend(s).rfind("gen(", 0) == 0);
}

TEST_CASE("a tuning session's budget covers compiling: the kernels not compiled by then are left out",
          "[gen][session][tuning]") {
  const Backends b;
  const std::string cache = wpk::testing::temp_dir("tuning_budget_compiling");
  const wpk::testing::EnvOverride slow("WPK_CXX", slow_compiler(cache, 60));
  const wpk::SessionOptions tune = tuning_in(cache, 2);
  const auto t0 = std::chrono::steady_clock::now();
  const wpk::Session s = wpk::SessionFactory::create(product_graph(), tune, b.all());
  // Loaded long before the compiler's minute is over: the budget stopped it.
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
  CHECK(std::ifstream(cache + "/started").good());
  CHECK_FALSE(std::ifstream(cache + "/woke").good());
  wpk::SessionOptions reference_only;
  reference_only.disabled_kernels = {"cpu", "onednn", "gen"};
  const wpk::Tensor expected = wpk::Session(product_graph(), reference_only).run(input()).at("y");
  CHECK(wpk::testing::compare_allclose(s.run(input()).at("y"), expected, 0, 1e-5) == "");
  CHECK(product_backend(s).rfind("gen(", 0) != 0);  // its generated kernels were left out
}

TEST_CASE("a tuning session past its budget still compiles one kernel of a node that has only generated ones",
          "[gen][session][tuning]") {
  const Backends b;
  const std::string cache = wpk::testing::temp_dir("tuning_budget_generated_only");
  const wpk::testing::EnvOverride slow("WPK_CXX", slow_compiler(cache, 1));
  wpk::SessionOptions tune = tuning_in(cache, 1e-3);  // over before anything compiles
  tune.disabled_kernels = {"slow-library", "reference"};
  const wpk::Session s = wpk::SessionFactory::create(product_graph(), tune, b.all());
  wpk::SessionOptions reference_only;
  reference_only.disabled_kernels = {"cpu", "onednn", "gen"};
  const wpk::Tensor expected = wpk::Session(product_graph(), reference_only).run(input()).at("y");
  CHECK(wpk::testing::compare_allclose(s.run(input()).at("y"), expected, 0, 1e-5) == "");
  CHECK(product_backend(s).rfind("gen(", 0) == 0);
}

TEST_CASE("without a compiler, compiling after load fails quietly and the node keeps its kernel", "[gen][session]") {
  const wpk::testing::EnvOverride on("WPK_COMPILE_IN_BACKGROUND", "1");
  const wpk::testing::EnvOverride no_compiler("WPK_CXX", "/nonexistent/c++");
  const Backends b;
  const std::string cache = wpk::testing::temp_dir("background_compile_none");
  const wpk::Session s = wpk::SessionFactory::create(product_graph(), options_in(cache), b.all());
  const wpk::BackgroundCompilation done = s.wait_for_background_compilation();
  CHECK(done.kernels == 1);
  CHECK(done.failed == 1);
  CHECK(done.ready == 0);
  s.run(input());
  CHECK(product_backend(s) == "reference");
}

TEST_CASE("without compile_in_background a session compiles nothing and keeps the kernels it has", "[gen][session]") {
  const Backends b;
  const std::string cache = wpk::testing::temp_dir("background_compile_off");
  const std::uint64_t compiled = wpk::process_counters().compiled_kernels;
  SECTION("the option") {
    const wpk::testing::EnvOverride on("WPK_COMPILE_IN_BACKGROUND", "1");
    wpk::SessionOptions o = options_in(cache);
    o.compile_in_background = false;
    const wpk::Session s = wpk::SessionFactory::create(product_graph(), o, b.all());
    CHECK(s.background_compilation().kernels == 0);
    CHECK(s.wait_for_background_compilation().finished);
    s.run(input());
    CHECK(product_backend(s) == "reference");
  }
  SECTION("the environment") {
    const wpk::testing::EnvOverride off("WPK_COMPILE_IN_BACKGROUND", "0");
    const wpk::Session s = wpk::SessionFactory::create(product_graph(), options_in(cache), b.all());
    CHECK(s.background_compilation().kernels == 0);
    s.run(input());
    CHECK(product_backend(s) == "reference");
  }
  CHECK(wpk::process_counters().compiled_kernels == compiled);
}

namespace {

// Loop(3 times) over h' = tanh(h W + b), h [2, 32]: a body whose product the cost model gives to
// a generated kernel, as the greedy decoder's bodies.
wpk::testing::OnnxModelBuilder loop_of_products() {
  constexpr int kInt64 = 7, kBool = 9;
  wpk::testing::OnnxModelBuilder body, m;
  body.input("i", {}, kInt64).input("cond_in", {}, kBool).input("h", {-1, 32});
  body.output("cond_out", {}, kBool).output("h_out", {-1, 32});
  body.node("Gemm", {"h", "w", "b"}, {"g"}).node("Tanh", {"g"}, {"h_out"}).node("Identity", {"cond_in"}, {"cond_out"});
  std::vector<float> w(32 * 32), bias(32);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.05f * std::sin(0.37f * static_cast<float>(i));
  for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = 0.01f * static_cast<float>(i);
  m.input("h0", {2, 32}).output("h_final", {2, 32});
  m.float_initializer("w", {32, 32}, w).float_initializer("b", {32}, bias);
  m.int64_initializer("n", {}, {3}).bool_initializer("go", true);
  m.node("Loop", {"n", "go", "h0"}, {"h_final"}).attr("body", body);
  return m;
}

// The loop model's bytes, an input for it and the reference's answer.
struct LoopCase {
  std::string bytes = loop_of_products().bytes();
  wpk::TensorMap in;
  wpk::Tensor expected;
  LoopCase() {
    std::vector<float> h0(2 * 32);
    for (std::size_t i = 0; i < h0.size(); ++i) h0[i] = std::cos(0.13f * static_cast<float>(i));
    in = {{"h0", wpk::Tensor::from_vector(h0, {2, 32})}};
    wpk::SessionOptions reference_only;
    reference_only.disabled_kernels = {"cpu", "onednn", "gen"};
    expected = wpk::Session(wpk::load_from_bytes(bytes), reference_only).run(in).at("h_final");
  }
};

}  // namespace

// A tuning session's loop bodies compile at load what they choose: compiled in the background
// (the compiler here takes 2 s, the session less) their code would go with the session, and every
// later process would start the compilers again beside its runs.
TEST_CASE("a tuning session compiles its loop bodies' generated kernels at load, for later sessions", "[gen][session][control]") {
  const wpk::testing::EnvOverride on("WPK_COMPILE_IN_BACKGROUND", "1");
  const std::string cache = wpk::testing::temp_dir("body_compile");
  const wpk::testing::EnvOverride slow("WPK_CXX", slow_compiler(cache, 2));
  const LoopCase loop;

  wpk::SessionOptions tune;
  tune.cache_dir = cache;
  tune.threads = 1;
  tune.tuning = true;
  tune.tuning_trials = 1;
  const std::uint64_t before = wpk::process_counters().compiled_kernels;
  {
    const wpk::Session tuning(wpk::load_from_bytes(loop.bytes), tune);
    CHECK(wpk::testing::compare_allclose(tuning.run(loop.in).at("h_final"), loop.expected, 0, 1e-5) == "");
  }
  CHECK(wpk::process_counters().compiled_kernels > before);
  // A later session, which would compile in the background what its bodies lack, finds their
  // code in the store: no compiler starts (the script marks `started` as it begins).
  std::filesystem::remove(cache + "/started");
  const wpk::SessionOptions later = options_in(cache);
  const wpk::Session warm(wpk::load_from_bytes(loop.bytes), later);
  CHECK(wpk::testing::compare_allclose(warm.run(loop.in).at("h_final"), loop.expected, 0, 1e-5) == "");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CHECK_FALSE(std::filesystem::exists(cache + "/started"));
}

// A body compiles after load as a session of its own; the enclosing session counts and waits for
// it, so `wpk bench` times the body's generated kernel and stores it for later processes.
TEST_CASE("an untuned session counts and waits for its loop bodies' compiling", "[gen][session][control]") {
  const wpk::testing::EnvOverride on("WPK_COMPILE_IN_BACKGROUND", "1");
  const std::string cache = wpk::testing::temp_dir("body_background");
  const wpk::testing::EnvOverride slow("WPK_CXX", slow_compiler(cache, 1));
  const LoopCase loop;

  const wpk::SessionOptions later = options_in(cache);
  const wpk::Session s(wpk::load_from_bytes(loop.bytes), later);
  const wpk::BackgroundCompilation compiling = s.background_compilation();
  CHECK(compiling.kernels >= 1);
  CHECK_FALSE(compiling.finished);
  CHECK(wpk::testing::compare_allclose(s.run(loop.in).at("h_final"), loop.expected, 0, 1e-5) == "");
  const wpk::BackgroundCompilation done = s.wait_for_background_compilation();
  CHECK(done.finished);
  CHECK(done.ready == compiling.kernels);
  CHECK(done.failed == 0);
  CHECK(wpk::testing::compare_allclose(s.run(loop.in).at("h_final"), loop.expected, 0, 1e-5) == "");
  // Stored: a later session's bodies have nothing to compile.
  const wpk::Session warm(wpk::load_from_bytes(loop.bytes), later);
  CHECK(warm.background_compilation().kernels == 0);
  CHECK(warm.background_compilation().finished);
}

namespace {

// A library the cost model ranks first under 8 rows and far behind the others from 8 rows on
// (kLargeBatch): with a symbolic batch, its node's first choice is the library, and the generated
// kernel is kept as the large-batch alternative.
class SmallBatchLibrary : public wpk::reference::ReferenceBackend {
 public:
  std::string name() const override { return "small-batch-library"; }
  std::optional<wpk::KernelProfile> describe(const wpk::Node&, const wpk::Graph&, const std::string&,
                                             const wpk::InputShapes& shapes, int) const override {
    wpk::KernelProfile p;
    const bool small = !shapes.empty() && shapes[0] && !shapes[0]->empty() && (*shapes[0])[0] < 8;
    p.predicted_seconds = small ? 1e-9 : 1.0;
    return p;
  }
};

wpk::TensorMap rows_of_input(std::int64_t rows) {
  std::vector<float> a(static_cast<std::size_t>(rows) * 29);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::cos(0.17f * static_cast<float>(i));
  return {{"a", wpk::Tensor::from_vector(a, {rows, 29})}};
}

}  // namespace

TEST_CASE("a large-batch generated alternative compiles once a run's shapes want it, not after every load", "[gen][session]") {
  const wpk::testing::EnvOverride on("WPK_COMPILE_IN_BACKGROUND", "1");
  const std::string cache = wpk::testing::temp_dir("wanted_compile");
  const wpk::testing::EnvOverride slow("WPK_CXX", slow_compiler(cache, 1));
  const wpk::gen::GeneratedBackend gen;
  const SmallBatchLibrary library;
  const wpk::reference::ReferenceBackend reference;
  const std::vector<const wpk::Backend*> backends = {&gen, &library, &reference};
  wpk::SessionOptions reference_only;
  reference_only.disabled_kernels = {"cpu", "onednn", "gen"};
  const wpk::Session expected(wpk::testing::relu_product_graph(wpk::Dim("N"), 29, 40, 11), reference_only);

  const wpk::Session s =
      wpk::SessionFactory::create(wpk::testing::relu_product_graph(wpk::Dim("N"), 29, 40, 11), options_in(cache), backends);
  CHECK(s.background_compilation().kernels == 0);
  CHECK(s.background_compilation().finished);
  // Small batches run on the library and want nothing compiled: no compiler starts.
  CHECK(wpk::testing::compare_allclose(s.run(rows_of_input(2)).at("y"), expected.run(rows_of_input(2)).at("y"), 0, 0) == "");
  CHECK(product_backend(s) == "small-batch-library");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK_FALSE(std::filesystem::exists(cache + "/started"));
  CHECK(s.background_compilation().kernels == 0);

  // A batch of 16 ranks the generated kernel first: it runs on another until its code comes.
  const wpk::Tensor want16 = expected.run(rows_of_input(16)).at("y");
  CHECK(wpk::testing::compare_allclose(s.run(rows_of_input(16)).at("y"), want16, 0, 0) == "");
  CHECK(product_backend(s).rfind("gen(", 0) != 0);
  CHECK(s.background_compilation().kernels == 1);
  const wpk::BackgroundCompilation done = s.wait_for_background_compilation();
  CHECK(done.finished);
  CHECK(done.ready == 1);
  CHECK(done.failed == 0);
  CHECK(std::filesystem::exists(cache + "/started"));
  CHECK(wpk::testing::compare_allclose(s.run(rows_of_input(16)).at("y"), want16, 0, 1e-5) == "");
  CHECK(product_backend(s).rfind("gen(", 0) == 0);
  // The small batch keeps its library; wanting again compiles nothing more.
  s.run(rows_of_input(2));
  CHECK(product_backend(s) == "small-batch-library");
  s.run(rows_of_input(16));
  CHECK(s.background_compilation().kernels == 1);
}
