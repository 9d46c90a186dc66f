// Preparing a plan's nodes on several threads at once gives the plan one thread gives.
#include <catch2/catch.hpp>

#include <filesystem>
#include <set>

#include "runtime/execution_plan.hpp"
#include "test_util.hpp"
#include "wpk/optimizer.hpp"

namespace wpk {
namespace {

struct Prepared {
  std::vector<std::string> steps;  // per step: its node and every candidate's identity and kernel
  std::set<ValueId> constants_left;
  std::size_t released_bytes = 0;
};

Prepared prepare(Graph g, int preparing_threads) {
  PlanOptions options;
  options.release_owned_constants = true;
  options.threads = 4;
  options.preparing_threads = preparing_threads;
  const ExecutionPlan plan(g, registered_backends(), options);
  Prepared p;
  for (const PlanStep& s : plan.steps()) {
    std::string line = g.nodes()[s.node_index].name + ":";
    for (const Candidate& c : s.candidates) line += " " + c.identity() + "/" + c.kernel->profile().name;
    p.steps.push_back(line);
  }
  for (const auto& kv : g.initializers()) p.constants_left.insert(kv.first);
  p.released_bytes = plan.released_bytes();
  return p;
}

}  // namespace

TEST_CASE("nodes prepared on several threads make the plan one thread makes", "[plan][threads][model]") {
  for (const char* name : {"squeezenet1_1", "mobilenet_v2"}) {
    INFO(name);
    const auto path = runtime_test::model_path(name);
    if (!std::filesystem::exists(path)) FAIL("missing fixture " << path);
    const Graph g = Optimizer().optimize(load(path.string()));
    const Prepared one = prepare(g, 1), four = prepare(g, 4);
    REQUIRE(one.steps.size() == g.nodes().size());
    CHECK(four.steps == one.steps);
    CHECK(four.constants_left == one.constants_left);
    CHECK(four.released_bytes == one.released_bytes);
    CHECK(one.released_bytes > 0);  // the convolutions pack their weights: the loaded copies go
  }
}

TEST_CASE("a plan whose node cannot be prepared fails the same way on several threads", "[plan][threads]") {
  Graph g;
  g.add_input("x", DType::Float32, {2, 3});
  g.add_node("Relu", {"x"}, {"r"});
  g.add_node("NoSuchOp", {"r"}, {"y"}, {}, "bad");
  g.add_node("Relu", {"r"}, {"z"});
  g.add_output("y");
  g.add_output("z");
  for (int threads : {1, 3}) {
    PlanOptions options;
    options.threads = threads;
    try {
      const ExecutionPlan plan(g, registered_backends(), options);
      FAIL("prepared a plan with an unknown op");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Unsupported);
      CHECK(std::string(e.what()).find("NoSuchOp") != std::string::npos);
    }
  }
}

}  // namespace wpk
