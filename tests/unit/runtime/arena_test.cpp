// The memory plan end to end: planned runs (one arena per run) give the same bytes as runs
// with one allocation per intermediate, on whole models and on the graphs that stress it (views
// returned as outputs, data-dependent shapes, in-place chains, new batch sizes, threads).
#include <catch2/catch.hpp>

#include <filesystem>
#include <random>
#include <thread>

#include "runtime/arena_pool.hpp"
#include "support/tensor_compare.hpp"
#include "test_util.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;
using wpk::runtime_test::compare_all;
using wpk::runtime_test::compare_bytes;

namespace {

// The small graphs below run exactly as built (no fusion), so their memory is predictable.
SessionOptions as_built(bool plan_memory = true) {
  SessionOptions o;
  o.optimizer.level = OptimizationLevel::None;
  o.plan_memory = plan_memory;
  return o;
}

SessionOptions unplanned() {
  SessionOptions o;
  o.plan_memory = false;
  return o;
}

Tensor random_tensor(Shape shape, unsigned seed) {
  Tensor t = Tensor::zeros(DType::Float32, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// x [N, 16] -> MatMul -> Relu -> Add(bias) -> Sigmoid -> MatMul -> y: an elementwise chain that
// can run in place between two products.
Graph mlp() {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 16});
  g.add_initializer("w", random_tensor({16, 16}, 1));
  g.add_initializer("b", random_tensor({16}, 2));
  g.add_node("MatMul", {"x", "w"}, {"h1"});
  g.add_node("Relu", {"h1"}, {"h2"});
  g.add_node("Add", {"h2", "b"}, {"h3"});
  g.add_node("Sigmoid", {"h3"}, {"h4"});
  g.add_node("MatMul", {"h4", "w"}, {"y"});
  g.add_output("y");
  return g;
}

}  // namespace

TEST_CASE("planned runs are bit-identical to unplanned runs on whole models", "[arena][model]") {
  for (const std::string name : {"resnet18", "resnet50", "mobilenet_v2", "bert_base"}) {
    INFO(name);
    if (!std::filesystem::exists(runtime_test::model_path(name))) FAIL("missing fixture " << runtime_test::model_path(name));
    const Graph g = load(runtime_test::model_path(name).string());
    const Session planned(g);
    const Session plain(g, unplanned());
    const TensorMap inputs = runtime_test::model_inputs(planned, name);
    const TensorMap want = plain.run(inputs);
    CHECK(compare_all(planned.run(inputs), want) == "");  // first run: heap, recorded
    CHECK(compare_all(planned.run(inputs), want) == "");  // arena
    CHECK(compare_all(planned.run(inputs), want) == "");  // arena block reused from the pool
    const PlanSummary plan = planned.describe();
    REQUIRE(plan.memory_planned);
    CHECK(plan.arena_bytes > 0);
    CHECK(plan.arena_bytes < plan.naive_bytes / 2);  // lifetimes overlap little in these chains
  }
}

TEST_CASE("an output that views an intermediate is copied out of the arena", "[arena]") {
  Graph g;
  g.add_input("x", DType::Float32, {2, 8});
  g.add_initializer("shape", Tensor::from_vector<std::int64_t>({4, 4}, {2}));
  g.add_node("Relu", {"x"}, {"h"});
  g.add_node("Reshape", {"h", "shape"}, {"y"});  // a view of h's bytes
  g.add_node("Neg", {"h"}, {"z"});
  g.add_output("y");
  g.add_output("z");
  const Session s(g, as_built());
  const Tensor x1 = random_tensor({2, 8}, 3), x2 = random_tensor({2, 8}, 4);
  const TensorMap first = s.run({{"x", x1}});
  const TensorMap keep = {{"y", first.at("y").clone()}, {"z", first.at("z").clone()}};
  const TensorMap second = s.run({{"x", x2}});
  const TensorMap third = s.run({{"x", x1}});
  CHECK(compare_all(first, keep) == "");  // later runs did not write into what run 1 returned
  CHECK(compare_all(third, keep) == "");
  CHECK(compare_all(second, Session(g, as_built(false)).run({{"x", x2}})) == "");
}

TEST_CASE("a data-dependent shape larger than the first run's goes to the heap", "[arena]") {
  // NonZero's output size depends on the values, not only the input shape.
  Graph g;
  g.add_input("x", DType::Float32, {64});
  g.add_initializer("zero", Tensor::scalar<float>(0.0f));
  g.add_node("Greater", {"x", "zero"}, {"mask"});
  g.add_node("NonZero", {"mask"}, {"idx"});
  g.add_node("Transpose", {"idx"}, {"t"});
  g.add_node("Neg", {"t"}, {"y"});
  g.add_output("y");
  const Session s(g, as_built());
  const Session plain(g, as_built(false));
  std::vector<float> few(64, -1.0f), many(64, 1.0f);
  few[3] = few[40] = 1.0f;
  many[7] = -1.0f;
  for (const auto* v : {&few, &many, &few, &many}) {
    const TensorMap in = {{"x", Tensor::borrow(v->data(), {64})}};
    CHECK(compare_all(s.run(in), plain.run(in)) == "");
  }
  CHECK(s.run({{"x", Tensor::borrow(many.data(), {64})}}).at("y").shape() == Shape{63, 1});
}

TEST_CASE("elementwise chains run in place: one buffer for the whole chain", "[arena]") {
  const Session s(mlp(), as_built());
  const Tensor x = random_tensor({4, 16}, 5);
  const TensorMap want = Session(mlp(), as_built(false)).run({{"x", x}});
  CHECK(compare_all(s.run({{"x", x}}), want) == "");
  CHECK(compare_all(s.run({{"x", x}}), want) == "");
  const PlanSummary plan = s.describe();
  REQUIRE(plan.memory_planned);
  // h1..h4 are 4 x 16 floats = 256 bytes each; in place they need one buffer, not four.
  CHECK(plan.naive_bytes == 4 * 256);
  CHECK(plan.arena_bytes == 256);
}

// Residual blocks the optimizer turns into a FusedConv with residual Z = r, then a
// GlobalAveragePool so that the fused conv's output s is an intermediate:
//   separate: x -> Conv+Relu = r -> Conv+Relu = h -> Conv(h) + r -> Relu = s (ResNet's shape)
//   same:     x -> Conv+Relu = r -> Conv(r) + r -> Relu = s (Z is also the conv's input)
//   exposed:  as separate, with r also a graph output
enum class Residual { Separate, Same, Exposed };

Graph residual_block(Residual kind) {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 8, 6, 6});
  unsigned seed = 20;
  auto conv = [&](const std::string& in, const std::string& out) {
    g.add_initializer(out + "_w", random_tensor({8, 8, 3, 3}, seed++));
    g.add_initializer(out + "_b", random_tensor({8}, seed++));
    g.add_node("Conv", {in, out + "_w", out + "_b"}, {out}, {{"pads", Attribute({1, 1, 1, 1})}});
  };
  conv("x", "c1");
  g.add_node("Relu", {"c1"}, {"r"});
  std::string last = "r";
  if (kind != Residual::Same) {
    conv("r", "c2");
    g.add_node("Relu", {"c2"}, {"h"});
    last = "h";
  }
  conv(last, "c3");
  g.add_node("Add", {"c3", "r"}, {"sum"});
  g.add_node("Relu", {"sum"}, {"s"});
  g.add_node("GlobalAveragePool", {"s"}, {"y"});
  g.add_output("y");
  if (kind == Residual::Exposed) g.add_output("r");
  return g;
}

TEST_CASE("a fused residual add accumulates into the residual's bytes only when nothing else reads them", "[arena]") {
  const std::size_t activation = 2 * 8 * 6 * 6 * sizeof(float);
  // Arena with the sharing rule right: Separate needs r and h, s takes r's bytes; Same must not
  // share (the conv reads r while writing s); Exposed keeps r out of the arena.
  const std::pair<Residual, std::size_t> cases[] = {
      {Residual::Separate, 2 * activation}, {Residual::Same, 2 * activation}, {Residual::Exposed, 2 * activation}};
  for (const auto& [kind, arena] : cases) {
    INFO("case " << static_cast<int>(kind));
    const Graph g = residual_block(kind);
    const Session plain(g, as_built(false));  // Conv and Add unfused, no arena
    SessionOptions fused;
    fused.optimizer.disabled_passes = {"layout_nhwc"};  // keeps the arena arithmetic simple
    const Session planned(g, fused);
    const Tensor x = random_tensor({2, 8, 6, 6}, 14);
    const TensorMap want = plain.run({{"x", x}});
    for (int run = 0; run < 3; ++run) {  // recorded, then planned twice
      const TensorMap got = planned.run({{"x", x}});
      REQUIRE(got.size() == want.size());
      for (const auto& kv : want) {
        INFO(kv.first << ", run " << run);
        CHECK(testing::relative_l2_error(got.at(kv.first), kv.second) < 1e-5);
      }
    }
    const PlanSummary plan = planned.describe();
    REQUIRE(plan.memory_planned);
    CHECK(plan.arena_bytes == arena);
  }
}

TEST_CASE("each input-shape signature gets its own plan", "[arena]") {
  const Session s(mlp(), as_built());
  const Session plain(mlp(), as_built(false));
  for (std::int64_t batch : {1, 3, 1, 7, 3, 7}) {
    const Tensor x = random_tensor({batch, 16}, static_cast<unsigned>(batch));
    INFO("batch " << batch);
    CHECK(compare_all(s.run({{"x", x}}), plain.run({{"x", x}})) == "");
    CHECK(s.describe().arena_bytes == static_cast<std::size_t>((batch * 16 * 4 + 63) / 64 * 64));
  }
}

TEST_CASE("concurrent planned runs match sequential ones", "[arena][threads]") {
  const Session s(mlp(), as_built());
  const Session plain(mlp(), as_built(false));
  constexpr int kThreads = 4;
  std::vector<Tensor> xs;
  std::vector<TensorMap> want;
  for (int i = 0; i < kThreads; ++i) {
    xs.push_back(random_tensor({1 + i % 2, 16}, 100 + static_cast<unsigned>(i)));  // two threads per signature
    want.push_back(plain.run({{"x", xs.back()}}));
  }
  std::vector<std::string> diffs(kThreads);
  std::vector<std::thread> pool;
  for (int i = 0; i < kThreads; ++i)
    pool.emplace_back([&, i] {
      for (int rep = 0; rep < 200 && diffs[i].empty(); ++rep) diffs[i] = compare_all(s.run({{"x", xs[i]}}), want[i]);
    });
  for (auto& t : pool) t.join();
  for (int i = 0; i < kThreads; ++i) {
    INFO("thread " << i);
    CHECK(diffs[i] == "");
  }
}

TEST_CASE("the arena pool reuses blocks and poisons them", "[arena]") {
  auto pool = ArenaPool::create(/*poison=*/true);
  void* first = nullptr;
  {
    auto a = pool->acquire(1000);
    first = a.get();
    CHECK(reinterpret_cast<std::uintptr_t>(first) % 64 == 0);
    CHECK(static_cast<unsigned char*>(first)[999] == 0xFF);
    static_cast<unsigned char*>(first)[0] = 0;
    auto b = pool->acquire(1000);  // in use at the same time: another block
    CHECK(b.get() != first);
  }
  CHECK(pool->idle_blocks() == 2);
  auto c = pool->acquire(500);  // fits in an idle block: no new allocation
  CHECK(pool->blocks_allocated() == 2);
  CHECK(static_cast<unsigned char*>(c.get())[0] == 0xFF);  // poisoned again when handed out
  for (int i = 0; i < 10; ++i) pool->acquire(100);
  CHECK(pool->blocks_allocated() == 2);
}

namespace {
// Random ops without a seed draw fresh numbers at every run.
bool draws_fresh_numbers(const Graph& g) {
  for (const Node& n : g.nodes())
    if ((n.op_type.rfind("Random", 0) == 0 || n.op_type == "Bernoulli" || n.op_type == "Multinomial") && !n.has_attr("seed"))
      return true;
  return false;
}
}  // namespace

TEST_CASE("every ONNX node test gives the same bytes on planned runs as on its first", "[arena][conformance]") {
  namespace fs = std::filesystem;
  const fs::path root = "/usr/share/libonnx-testdata/data/node";
  if (!fs::is_directory(root)) return;  // libonnx-testdata not installed: the conformance target says so
  int compared = 0;
  std::vector<std::string> mismatches;
  for (const auto& entry : fs::directory_iterator(root)) {
    const fs::path set = entry.path() / "test_data_set_0";
    if (!fs::exists(entry.path() / "model.onnx") || !fs::is_directory(set)) continue;
    try {
      const Session s(load((entry.path() / "model.onnx").string()));
      if (draws_fresh_numbers(s.graph())) continue;
      TensorMap in;
      for (std::size_t i = 0; i < s.inputs().size(); ++i)
        in[s.inputs()[i].name] = load_tensor((set / ("input_" + std::to_string(i) + ".pb")).string());
      const TensorMap first = s.run(in);
      const std::string d = compare_all(s.run(in), first) + compare_all(s.run(in), first);
      if (!d.empty()) mismatches.push_back(entry.path().filename().string() + ": " + d);
      ++compared;
    } catch (const Error&) {
      // Unsupported or failing cases are the conformance suite's business.
    }
  }
  INFO("mismatches: " << mismatches.size() << (mismatches.empty() ? "" : " first: " + mismatches.front()));
  CHECK(mismatches.empty());
  CHECK(compared > 600);
}

TEST_CASE("kernels that rely on zeroed outputs get zeroed arena memory", "[arena]") {
  // Trilu, EyeLike and ConstantOfShape(0) write only part of their output (see
  // op_needs_zeroed_outputs); as intermediates they must not see poisoned or stale bytes.
  Graph g;
  g.add_input("x", DType::Float32, {4, 4});
  g.add_input("shape", DType::Int64, {2});
  g.add_node("Trilu", {"x"}, {"tri"});
  g.add_node("EyeLike", {"x"}, {"eye"});
  g.add_node("ConstantOfShape", {"shape"}, {"zeros"});
  g.add_node("Add", {"tri", "eye"}, {"sum"});
  g.add_node("Add", {"sum", "zeros"}, {"y"});
  g.add_output("y");
  const Session s(g, as_built());
  const TensorMap in = {{"x", random_tensor({4, 4}, 9)}, {"shape", Tensor::from_vector<std::int64_t>({4, 4}, {2})}};
  const TensorMap want = Session(g, as_built(false)).run(in);
  for (int i = 0; i < 3; ++i) CHECK(compare_all(s.run(in), want) == "");
  CHECK(want.at("y").data<float>()[4] == 0.0f);  // below the diagonal of an upper Trilu, off the eye
}
