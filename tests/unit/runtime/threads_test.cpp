// SessionOptions::threads: validation, the affinity default, the OpenMP setting a run uses, the
// caller's setting untouched, and runs asked for at once keeping the session's count.
#include <catch2/catch.hpp>

#include <omp.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "probe_backend.hpp"
#include "runtime/session_factory.hpp"
#include "runtime/threads.hpp"
#include "support/onnx_model_builder.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;

using runtime_test::ones;
using runtime_test::relu_graph;

TEST_CASE("threads: negative is an error, 0 is the affinity mask's CPU count", "[threads]") {
  SessionOptions o;
  o.threads = -1;
  try {
    Session s(relu_graph(), o);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK(std::string(e.what()).find("threads") != std::string::npos);
  }
  o.threads = 0;
  CHECK(Session(relu_graph(), o).threads() == affinity_cpu_count());
  o.threads = 3;
  CHECK(Session(relu_graph(), o).threads() == 3);
  CHECK(affinity_cpu_count() >= 1);
}

// Rows enough that the cost model runs the probe's Relu on every thread of the session (on a
// few rows, starting the threads would cost more than they save: one runs them).
constexpr std::int64_t kManyRows = std::int64_t{1} << 15;

TEST_CASE("a run uses the session's OpenMP threads and restores the caller's", "[threads]") {
  std::atomic<int> seen{0};
  const runtime_test::WrappingBackend probe("probe", [&](KernelContext&) { seen = omp_get_max_threads(); });
  SessionOptions o;
  o.threads = 3;
  const Session s = SessionFactory::create(relu_graph(), o, {&probe});
  omp_set_num_threads(5);
  s.run(ones(kManyRows));
  CHECK(seen == 3);
  CHECK(omp_get_max_threads() == 5);
  // One row: the node on one thread, and the caller's setting still untouched.
  s.run(ones(1));
  CHECK(seen == 1);
  CHECK(omp_get_max_threads() == 5);
}

TEST_CASE("runs asked for at once each use the session's thread count", "[threads]") {
  // A count that varied with the load would stick to the oneDNN primitives created under it:
  // a run waits for its CPUs instead (tests/unit/runtime/run_pool_test.cpp).
  std::atomic<int> a_threads{0}, b_threads{0};
  const runtime_test::WrappingBackend probe("probe", [&](KernelContext& ctx) {
    (ctx.input(0).dim(0) == kManyRows ? a_threads : b_threads) = omp_get_max_threads();
  });
  SessionOptions o;
  o.threads = 4;
  const Session s = SessionFactory::create(relu_graph(), o, {&probe});
  std::thread a([&] { s.run(ones(kManyRows)); });
  s.run(ones(kManyRows + 1));
  a.join();
  CHECK(a_threads == 4);
  CHECK(b_threads == 4);
}

TEST_CASE("wpk bench --idle: with OMP_WAIT_POLICY=passive no worker spins after run()", "[threads][cli]") {
  const std::string out = wpk::testing::temp_dir("idle") + "/out";
  const std::string model = std::string(WPK_TEST_MODELS_DIR) + "/resnet18.onnx";
  const std::string cmd = "OMP_WAIT_POLICY=passive " + std::string(WPK_CLI_PATH) + " bench " + model +
                          " --threads 2 --iters 2 --warmup 1 --idle 200 >" + out + " 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::ifstream in(out);
  std::string line, idle;
  while (std::getline(in, line))
    if (line.rfind("idle:", 0) == 0) idle = line;
  REQUIRE(!idle.empty());
  // "idle: other threads used X ms of CPU in the 200 ms after the last run returned"
  const double used = std::stod(idle.substr(idle.find("used ") + 5));
  CHECK(used < 2.0);
}

TEST_CASE("threads: a run's widest step counts the steps of its bodies' runs", "[threads]") {
  // A Loop's body runs as a session of its own on the same thread, inside the enclosing run.
  StepCpusScope run;
  CHECK(run.widest() == 0);
  note_step_cpus(1);
  {
    StepCpusScope body;
    CHECK(body.widest() == 0);
    note_step_cpus(2);
    CHECK(body.widest() == 2);
  }
  CHECK(run.widest() == 2);
  {
    StepCpusScope body;
    note_step_cpus(1);
  }
  CHECK(run.widest() == 2);
}

TEST_CASE("threads: the reference kernels that may start threads are the ones built on Eigen's products", "[threads]") {
  Graph g;
  g.add_input("a", DType::Float32, {2, 2});
  g.add_node("Tanh", {"a"}, {"t"});
  g.add_node("MatMul", {"t", "a"}, {"y"});
  g.add_output("y");
  const Backend& reference = runtime_test::reference_backend();
  CHECK_FALSE(reference.prepare(g.nodes()[0], g)->multithreaded());
  CHECK(reference.prepare(g.nodes()[1], g)->multithreaded());
}
