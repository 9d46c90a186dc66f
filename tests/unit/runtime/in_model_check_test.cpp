// The in-model check of tuning at load: a tuned choice stays only where the whole model runs
// faster with it, counting what it costs the steps that read its output; choices sharing a record
// go together; a plan not faster end to end keeps none. First on a scripted runner, then in a
// session whose winner alone makes its reader slow.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "probe_backend.hpp"
#include "runtime/in_model_check.hpp"
#include "runtime/session_factory.hpp"
#include "runtime/tuner.hpp"
#include "support/onnx_model_builder.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;

namespace {

// Four steps of 1000 us; candidate 1 is the tuned choice. `own[s]`: what step s saves on it;
// `reader_cost[s]`: what it costs step s + 1 (an unchanged reader); `hidden[s]`: what it costs
// the run outside every step (only the end-to-end comparison sees it).
struct ScriptedModel {
  std::vector<double> own = {100, 50, 0, -20};
  std::vector<double> reader_cost = {0, 80, 0, 0};
  std::vector<double> hidden = {0, 0, 0, 0};
  std::vector<double> own_runner_up = {0, 0, 0, 0};  // what candidate 2 saves
  int runs = 0;

  RunProfile operator()(const std::vector<StepChoice>& choice) {
    ++runs;
    RunProfile p;
    for (std::size_t s = 0; s < choice.size(); ++s) {
      double us = 1000;
      if (choice[s].candidate == 1) {
        us -= own[s];
        p.total_us += hidden[s];
      }
      if (choice[s].candidate == 2) us -= own_runner_up[s];
      if (s > 0 && choice[s - 1].candidate == 1) us += reader_cost[s - 1];
      StepProfile step;
      step.duration_us = us;
      p.steps.push_back(step);
      p.total_us += us;
    }
    return p;
  }
};

const std::vector<std::vector<std::size_t>> kChain = {{1}, {2}, {3}, {}};

std::vector<StepChoice> tuned_plan() { return {{1, 0}, {1, 0}, {0, 0}, {1, 0}}; }

// Steps 0 and 3 share record "a", step 1 has "b"; step 2 is not tuned.
std::vector<PlannedChange> changes() {
  return {{0, {0, 0}, "a", "s0", {}}, {1, {0, 0}, "b", "s1", {}}, {3, {0, 0}, "a", "s3", {}}};
}

}  // namespace

TEST_CASE("in-model check: a choice that slows its reader goes, a record's steps go together", "[tuning]") {
  ScriptedModel model;
  const InModelCheckResult r = check_in_model(tuned_plan(), changes(), kChain, std::ref(model), {5, 5, 0.0});
  // Record a: 100 - 20 saved; record b: 50 saved by the step, 80 lost by its reader.
  REQUIRE(r.keep.size() == 3);
  CHECK(r.keep[0]);
  CHECK_FALSE(r.keep[1]);
  CHECK(r.keep[2]);
  CHECK(r.tuned_ms == Approx((4000 - 100 - 50 + 80 + 20) / 1000.0));
  CHECK(r.untuned_ms == Approx(4.0));
  CHECK(r.kept_ms == Approx((4000 - 100 + 20) / 1000.0));
  CHECK(r.pairs == 5);
  CHECK(model.runs == 20);  // 5 pairs of every tuned choice, 5 of the kept ones, each against untuned
  REQUIRE(r.step_us.size() == 3);
  CHECK(r.step_us[0] == Approx(900));   // kept: its time on the tuned choice
  CHECK(r.step_us[1] == Approx(1000));  // dropped: on the untuned one
  CHECK(r.choice[1].candidate == 0);
}

TEST_CASE("in-model check: a plan not faster end to end drops its weakest record and runs again", "[tuning]") {
  ScriptedModel model;
  model.own = {100, 10, 0, 50};
  model.reader_cost = {0, 0, 0, 0};
  model.hidden = {0, 200, 0, 0};  // record b saves 10 us in its step and costs 200 outside
  const InModelCheckResult r = check_in_model(tuned_plan(), changes(), kChain, std::ref(model), {4, 4, 0.0});
  CHECK(r.keep == std::vector<bool>{true, false, true});
  CHECK(r.tuned_ms == Approx((4000 - 160 + 200) / 1000.0));
  CHECK(r.kept_ms == Approx((4000 - 150) / 1000.0));
  CHECK(model.runs == 16);  // every tuned choice (not faster), then without b
}

TEST_CASE("in-model check: a plan not faster end to end keeps no tuned choice", "[tuning]") {
  ScriptedModel model;
  model.hidden = {500, 0, 0, 0};  // record a's steps save 80 us and cost 500 outside
  const InModelCheckResult r = check_in_model(tuned_plan(), changes(), kChain, std::ref(model), {3, 3, 0.0});
  CHECK(r.keep == std::vector<bool>{false, false, false});
  CHECK(r.kept_ms == r.untuned_ms);
}

TEST_CASE("in-model check: a runner-up the model runs faster than the winner takes its place", "[tuning]") {
  ScriptedModel model;
  model.own = {-50, 0, 0, 0};  // the winner alone loses 50 us in the model
  model.own_runner_up = {60, 0, 0, 0};
  model.reader_cost = {0, 0, 0, 0};
  const std::vector<PlannedChange> one = {{0, {0, 0}, "a", "s0", {{2, 0}}}};
  const std::vector<StepChoice> plan = {{1, 0}, {0, 0}, {0, 0}, {0, 0}};
  const InModelCheckResult r = check_in_model(plan, one, kChain, std::ref(model), {3, 3, 0.0});
  REQUIRE(r.keep.size() == 1);
  CHECK(r.keep[0]);
  CHECK(r.choice[0].candidate == 2);
  CHECK(r.kept_ms == Approx(3.94));
  CHECK(r.tuned_ms == Approx(4.05));
  CHECK(model.runs == 3 * 3);  // untuned, winner, runner-up: the kept plan is the runner-up's, timed already
}

TEST_CASE("in-model check: a plan faster by less than the margin keeps no tuned choice", "[tuning]") {
  ScriptedModel model;
  model.own = {20, 0, 0, 10};  // record a saves 30 us of 4000: less than 1%
  model.reader_cost = {0, 0, 0, 0};
  const InModelCheckResult r = check_in_model(tuned_plan(), changes(), kChain, std::ref(model), {3, 3, 0.0});
  CHECK(r.keep == std::vector<bool>{false, false, false});
  CHECK(r.kept_ms == r.untuned_ms);
  CHECK(r.ratio == 1.0);

  model.own = {40, 0, 0, 10};  // 50 us of 4000: more than 1%
  const InModelCheckResult faster = check_in_model(tuned_plan(), changes(), kChain, std::ref(model), {3, 3, 0.0});
  CHECK(faster.keep == std::vector<bool>{true, false, true});
  CHECK(faster.ratio == Approx(3950.0 / 4000));
}

TEST_CASE("in-model check: a slow spell that ends between a round's two runs does not decide", "[tuning]") {
  // The tuned choice saves 10 us in its step and costs 50 outside; the machine runs at half speed
  // for the first five runs: the untuned plan's first three and the tuned one's first two.
  // Medians taken apart would call the tuned plan faster; rounds compared pairwise do not.
  ScriptedModel model;
  model.own = {10, 0, 0, 0};
  model.reader_cost = {0, 0, 0, 0};
  model.hidden = {50, 0, 0, 0};
  const std::vector<PlannedChange> one = {{0, {0, 0}, "a", "s0", {}}};
  const std::vector<StepChoice> plan = {{1, 0}, {0, 0}, {0, 0}, {0, 0}};
  const PlanRunner slow_at_first = [&model](const std::vector<StepChoice>& choice) {
    const bool slow = model.runs < 5;
    RunProfile p = model(choice);
    if (slow) {
      p.total_us *= 2;
      for (StepProfile& step : p.steps) step.duration_us *= 2;
    }
    return p;
  };
  const InModelCheckResult r = check_in_model(plan, one, kChain, slow_at_first, {5, 5, 0.0});
  CHECK(r.tuned_ms < r.untuned_ms);  // the medians apart: fooled
  REQUIRE(r.keep.size() == 1);
  CHECK_FALSE(r.keep[0]);
  CHECK(r.kept_ms == r.untuned_ms);
}

TEST_CASE("in-model check: nothing changed, nothing run", "[tuning]") {
  ScriptedModel model;
  const InModelCheckResult r = check_in_model(tuned_plan(), {}, kChain, std::ref(model));
  CHECK(r.keep.empty());
  CHECK(model.runs == 0);
}

TEST_CASE("in-model check: a run that does not profile every step is an error, not a decision", "[tuning]") {
  const PlanRunner short_profile = [](const std::vector<StepChoice>&) {
    RunProfile p;
    p.steps.resize(2);
    return p;
  };
  CHECK_THROWS_AS(check_in_model(tuned_plan(), changes(), kChain, short_profile), Error);
}

namespace {

// A Relu kernel that is fastest alone but leaves 20 ms of work to the Sigmoid that reads its
// output; the other candidate takes 3 ms on either op and does that work when it is owed.
std::atomic<int> g_owed_ms{0};

void pay_if_sigmoid(KernelContext& ctx) {
  if (ctx.node().op_type == "Sigmoid")
    std::this_thread::sleep_for(std::chrono::milliseconds(g_owed_ms.exchange(0)));
}

class ReluOnlyBackend : public runtime_test::WrappingBackend {
 public:
  ReluOnlyBackend()
      : WrappingBackend("leaves_work", [](KernelContext& ctx) {
          if (ctx.node().op_type == "Relu") g_owed_ms = 20;
        }) {}
  std::string why_unsupported(const Node& node, const Graph& graph) const override {
    return node.op_type == "Relu" ? WrappingBackend::why_unsupported(node, graph) : "Relu only";
  }
};

const Backend& steady_backend() {
  static const runtime_test::WrappingBackend b("steady", [](KernelContext& ctx) {
    pay_if_sigmoid(ctx);
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  });
  return b;
}

Graph relu_sigmoid_graph() {
  Graph g;
  g.add_input("x", DType::Float32, {2, 4});
  g.add_node("Relu", {"x"}, {"r"}, {}, "relu");
  g.add_node("Sigmoid", {"r"}, {"y"}, {}, "sigmoid");
  g.add_output("y");
  return g;
}

Session make(const std::string& dir, bool tuning) {
  static const ReluOnlyBackend leaves_work;
  SessionOptions o;
  o.tuning = tuning;
  o.cache_dir = dir;
  o.optimizer.disabled_passes = {"fuse_elementwise_chains"};  // two steps, as the test needs
  return SessionFactory::create(relu_sigmoid_graph(), o, {&steady_backend(), &leaves_work});
}

}  // namespace

TEST_CASE("tuning at load keeps the untuned choice where the winner alone slows the model", "[tuning]") {
  const std::string dir = wpk::testing::temp_dir("in_model");
  {
    const Session s = make(dir, true);
    const std::vector<TunedNode> report = s.tuning_report();
    const auto relu = std::find_if(report.begin(), report.end(), [](const TunedNode& n) { return n.node == "relu"; });
    REQUIRE(relu != report.end());
    // Alone it wins (no 3 ms); in the model its reader pays 20 ms.
    CHECK(relu->winner.rfind("leaves_work", 0) == 0);
    CHECK(relu->winner_us < relu->untuned_us);
    CHECK(relu->slower_in_model);
    CHECK(s.describe().steps.at(0).backend == "steady");
    const TuningCheck check = s.tuning_check();
    CHECK(check.changed >= 1);
    CHECK(check.kept == 0);
    CHECK(check.runs >= 5);
    CHECK(check.every_tuned_ms > check.untuned_ms);  // 20 ms owed against 3 ms saved
    CHECK(check.kept_ms == check.untuned_ms);
  }
  {
    const auto before = tuning_measurements();
    const Session s = make(dir, false);  // the record now names the untuned choice
    s.run({{"x", Tensor::from_vector<float>(std::vector<float>(8, 1.0f), {2, 4})}});
    CHECK(tuning_measurements() == before);
    CHECK(s.describe().steps.at(0).backend == "steady");
  }
}
