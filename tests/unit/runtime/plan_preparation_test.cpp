// Preparing a plan's nodes on several threads at once gives the plan one thread gives.
#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <set>
#include <thread>

#include "backends/reference/reference_backend.hpp"
#include "probe_backend.hpp"
#include "runtime/execution_plan.hpp"
#include "runtime/session_factory.hpp"
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
    for (const Candidate& c : s.candidates) line += " " + c.identity() + "/" + (c.kernel ? c.kernel->profile().name : "deferred");
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

namespace wpk {
namespace {

// The reference Relu, declining inputs of more than two rows (Kernel::runs).
class SmallRowsBackend : public Backend {
 public:
  std::string name() const override { return "small_rows"; }
  std::string why_unsupported(const Node& node, const Graph& graph) const override {
    return node.op_type == "Relu" ? reference_.why_unsupported(node, graph) : "test backend";
  }
  std::unique_ptr<Kernel> prepare(const Node& node, const Graph& graph) const override {
    struct Declining : Kernel {
      explicit Declining(std::unique_ptr<Kernel> k) : inner(std::move(k)) {}
      void run(KernelContext& ctx) const override { inner->run(ctx); }
      bool runs(const std::vector<const Tensor*>& inputs) const override { return inputs[0]->dim(0) <= 2; }
      std::unique_ptr<Kernel> inner;
    };
    return std::make_unique<Declining>(reference_.prepare(node, graph));
  }

 private:
  reference::ReferenceBackend reference_;
};

// The reference backend, counting its preparations, and ranked behind the other backend even
// on the tiny tensors where the reference's element-wise loop would be predicted the fastest.
class CountingBackend : public reference::ReferenceBackend {
 public:
  std::unique_ptr<Kernel> prepare(const Node& node, const Graph& graph) const override {
    ++prepared;
    return reference::ReferenceBackend::prepare(node, graph);
  }
  KernelProfile undescribed_profile(const Node&) const override { return reference::reference_profile(); }
  mutable std::atomic<int> prepared{0};
};

}  // namespace

TEST_CASE("a fallback is prepared by the first run that needs it and only once", "[plan][threads]") {
  // On one thread too: the cost model then weighs each candidate on that one count alone.
  SessionOptions o;
  o.threads = GENERATE(1, 2);
  const SmallRowsBackend first;
  const CountingBackend fallback;
  const Session s = SessionFactory::create(runtime_test::relu_graph(), o, {&first, &fallback});
  CHECK(fallback.prepared == 0);  // at load: the first choice only
  const TensorMap small = s.run(runtime_test::ones(2));
  CHECK(small.at("y").shape() == Shape{2, 4});
  CHECK(fallback.prepared == 0);  // two rows: the first choice runs them
  // Four runs at once of a shape the first choice declines: the fallback is prepared once.
  std::vector<std::thread> runs;
  std::vector<TensorMap> outs(4);
  for (std::size_t t = 0; t < outs.size(); ++t) runs.emplace_back([&, t] { outs[t] = s.run(runtime_test::ones(5)); });
  for (std::thread& t : runs) t.join();
  CHECK(fallback.prepared == 1);
  for (const TensorMap& out : outs) {
    REQUIRE(out.at("y").shape() == Shape{5, 4});
    for (std::int64_t i = 0; i < 20; ++i) CHECK(out.at("y").data<float>()[i] == 1.0f);
  }
}

TEST_CASE("a node whose input's shape is unknown at load prepares no candidate but the reference until a run picks one",
          "[plan]") {
  // x [12, 64] reshaped to a shape given as data: the product's input has no shape at load.
  const auto graph_of = [](bool computed_size, bool placeholder) {
    Graph g;
    g.add_input("x", DType::Float32, {placeholder ? Dim(-1) : Dim(12), 64});
    g.add_initializer("w", Tensor::from_vector<float>(std::vector<float>(64 * 32, 0.25f), {64, 32}));
    std::string a = "x";
    if (computed_size) {
      g.add_input("shape", DType::Int64, {2});
      g.add_node("Reshape", {"x", "shape"}, {"rows"});
      a = "rows";
    }
    g.add_node("MatMul", {a, "w"}, {"y"}, {}, "product");
    g.add_output("y");
    return g;
  };
  PlanOptions options;
  options.threads = 2;
  options.defer_alternatives = true;
  const auto product_step = [](const ExecutionPlan& plan, const Graph& g) -> const PlanStep& {
    for (const PlanStep& s : plan.steps())
      if (g.nodes()[s.node_index].name == "product") return s;
    FAIL("no product step");
    return plan.steps().front();
  };
  Graph computed = graph_of(true, false), declared = graph_of(false, false), placeholder = graph_of(true, true);
  const ExecutionPlan waiting(computed, registered_backends(), options);
  const PlanStep& step = product_step(waiting, computed);
  CHECK(step.candidates.size() >= 2);  // at least oneDNN or the cpu kernel, and the reference
  for (const Candidate& c : step.candidates) {
    INFO(c.identity());
    if (c.backend->name() == "reference") CHECK(c.kernel != nullptr);
    else if (!c.backend->generates_code()) CHECK((c.kernel == nullptr && c.deferred != nullptr));
  }
  // Declared shapes: the cost model's choice is prepared at load.
  const ExecutionPlan known(declared, registered_backends(), options);
  CHECK(product_step(known, declared).candidates.at(0).kernel != nullptr);
  // An input with a placeholder dim leaves every node after it unknown: planned as before.
  const ExecutionPlan as_before(placeholder, registered_backends(), options);
  CHECK(product_step(as_before, placeholder).candidates.at(0).kernel != nullptr);
  // Without deferring (tuning, or a plan of its own), the first choice is prepared.
  options.defer_alternatives = false;
  const ExecutionPlan eager(computed, registered_backends(), options);
  CHECK(product_step(eager, computed).candidates.at(0).kernel != nullptr);
}

}  // namespace wpk
