// Batch parts (runtime/batch_parts.hpp): a batch run as parts of its rows at once, one a thread,
// when a tuning record says so; each row's answer as the reference computes it; tuning at load
// times both ways and stores the choice.
#include <catch2/catch.hpp>

#include <cmath>

#include "probe_backend.hpp"
#include "runtime/batch_parts.hpp"
#include "runtime/session_factory.hpp"
#include "runtime/tuning_db.hpp"
#include "support/onnx_model_builder.hpp"
#include "support/tensor_compare.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;

namespace {

Tensor pattern(std::vector<std::int64_t> shape, float scale) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = scale * std::sin(0.37f * static_cast<float>(i) + 0.1f);
  return Tensor::from_vector(v, std::move(shape));
}

// x [N, 3, 10, 10] -> Conv (+bias) -> Relu -> MaxPool -> GlobalAveragePool -> Flatten -> Gemm -> [N, 5]
Graph classifier() {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 3, 10, 10});
  g.add_initializer("w", pattern({8, 3, 3, 3}, 0.3f));
  g.add_initializer("b", pattern({8}, 0.1f));
  g.add_initializer("fc", pattern({8, 5}, 0.5f));
  g.add_node("Conv", {"x", "w", "b"}, {"c"}, {{"pads", Attribute(std::vector<std::int64_t>{1, 1, 1, 1})}});
  g.add_node("Relu", {"c"}, {"r"});
  g.add_node("MaxPool", {"r"}, {"m"}, {{"kernel_shape", Attribute(std::vector<std::int64_t>{2, 2})},
                                       {"strides", Attribute(std::vector<std::int64_t>{2, 2})}});
  g.add_node("GlobalAveragePool", {"m"}, {"p"});
  g.add_node("Flatten", {"p"}, {"f"});
  g.add_node("Gemm", {"f", "fc"}, {"y"});
  g.add_output("y");
  return g;
}

// Softmax over the batch: every row depends on every other.
Graph batch_softmax() {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 3, 10, 10});
  g.add_node("Softmax", {"x"}, {"y"}, {{"axis", Attribute(std::int64_t(0))}});
  g.add_output("y");
  return g;
}

std::string record_key(const Graph& g, const Tensor& x, int threads) {
  return batch_parts_key(model_fingerprint(g), shape_signature({&x}), threads);
}

// Two threads and a fresh cache folder whose record says to run x's shapes in 2 parts.
SessionOptions with_parts_record(const Graph& g, const Tensor& x, const std::string& tag) {
  SessionOptions o;
  o.threads = 2;
  o.cache_dir = wpk::testing::temp_dir(tag);
  TuningDb(o.cache_dir).store(record_key(g, x, 2), record_batch_parts(2), 100, "test");
  return o;
}

// Tuning at load into `dir`, two threads, the batch fixed at 4.
SessionOptions tuning_at_batch_4(const std::string& dir) {
  SessionOptions o;
  o.threads = 2;
  o.cache_dir = dir;
  o.fixed_dims = {{"N", 4}};
  o.tuning = true;
  o.tuning_budget = 60;
  return o;
}

Tensor reference_output(const Graph& g, const Tensor& x) {
  const Session ref = SessionFactory::create(g, {}, {&runtime_test::reference_backend()});
  return ref.run({{"x", x}}).at("y");
}

}  // namespace

TEST_CASE("a batch runs in parts at once when its tuning record says so, each row as the reference computes it",
          "[plan]") {
  const Tensor x4 = pattern({4, 3, 10, 10}, 1.0f);
  const SessionOptions o = with_parts_record(classifier(), x4, "batch-parts");
  const Session s(classifier(), o);
  for (const Tensor& x : {x4, pattern({3, 3, 10, 10}, 1.0f), pattern({6, 3, 10, 10}, 1.0f)}) {
    CAPTURE(x.shape()[0]);
    RunProfile profile;
    const Tensor y = s.run({{"x", x}}, &profile).at("y");
    // The record is for 4 rows; 3 do not divide over two threads, 6 have no record.
    CHECK(profile.batch_parts == (x.shape()[0] == 4 ? 2 : 1));
    if (profile.batch_parts == 2) CHECK(profile.steps.front().output_shape.front() == 2);
    CHECK(s.describe().batch_parts == profile.batch_parts);  // its steps are what ran
    CHECK(testing::compare_allclose(y, reference_output(classifier(), x), 1e-5, 1e-6) == "");
  }
  // Without the record, or on one thread, the batch runs whole.
  SessionOptions none = o;
  none.cache_dir = wpk::testing::temp_dir("batch-parts-none");
  SessionOptions one = o;
  one.threads = 1;
  for (const SessionOptions& other : {none, one}) {
    RunProfile profile;
    Session(classifier(), other).run({{"x", x4}}, &profile);
    CHECK(profile.batch_parts == 1);
  }
}

TEST_CASE("a model whose rows depend on each other runs its batch whole whatever a record says", "[plan]") {
  const Tensor x = pattern({4, 3, 10, 10}, 1.0f);
  RunProfile profile;
  const Tensor y = Session(batch_softmax(), with_parts_record(batch_softmax(), x, "batch-parts-softmax")).run({{"x", x}}, &profile).at("y");
  CHECK(profile.batch_parts == 1);
  CHECK(testing::compare_allclose(y, reference_output(batch_softmax(), x), 1e-5, 1e-7) == "");
}

TEST_CASE("tuning at load times the batch whole and in parts, and its record decides for later sessions", "[tuning]") {
  const std::string dir = wpk::testing::temp_dir("batch-parts-tune");
  const Tensor x = pattern({4, 3, 10, 10}, 1.0f);
  const SessionOptions o = tuning_at_batch_4(dir);
  BatchPartsCheck check;
  {
    const Session tuned(classifier(), o);
    check = tuned.batch_parts_check();
  }
  CHECK(check.parts == 2);
  CHECK(check.runs >= 3);
  CHECK(check.whole_ms > 0);
  CHECK(check.parts_ms > 0);
  CHECK(check.ratio > 0);
  CHECK(check.chosen == (check.ratio < 0.97));
  const auto record = TuningDb::open_for_lookup(dir)->lookup(record_key(classifier(), x, 2));
  REQUIRE(record);
  CHECK(parse_batch_parts(*record) == (check.chosen ? 2 : 1));

  SessionOptions later = o;
  later.tuning = false;
  later.fixed_dims.clear();
  RunProfile profile;
  const Tensor y = Session(classifier(), later).run({{"x", x}}, &profile).at("y");
  CHECK(profile.batch_parts == (check.chosen ? 2 : 1));
  CHECK(testing::compare_allclose(y, reference_output(classifier(), x), 1e-5, 1e-6) == "");
}

// A part's nodes were tuned at its own shapes on one thread; a later session that prepares its
// plan for the whole batch must prepare those choices too, and run them when the batch goes in
// parts, as the tuning session itself would.
TEST_CASE("a session that runs its batch in parts runs each node on what tuning chose for a part", "[tuning]") {
  const std::string dir = wpk::testing::temp_dir("batch-parts-choices");
  const Tensor x = pattern({4, 3, 10, 10}, 1.0f);
  const SessionOptions o = tuning_at_batch_4(dir);
  { const Session tuned(classifier(), o); }
  // Whichever way the timing went, the record now says parts.
  TuningDb(dir).store(record_key(classifier(), x, 2), record_batch_parts(2), 100, "test");

  SessionOptions plain = o;
  plain.tuning = false;
  const Session s(classifier(), plain);
  RunProfile profile;
  const Tensor y = s.run({{"x", x}}, &profile).at("y");
  REQUIRE(profile.batch_parts == 2);
  const Session retuned(classifier(), o);  // every candidate prepared; its records answer
  RunProfile retuned_profile;
  retuned.run({{"x", x}}, &retuned_profile);
  REQUIRE(retuned_profile.batch_parts == 2);
  const PlanSummary a = s.describe(), b = retuned.describe();
  REQUIRE(a.steps.size() == b.steps.size());
  for (std::size_t i = 0; i < a.steps.size(); ++i) {
    INFO(a.steps[i].node);
    CHECK(a.steps[i].backend == b.steps[i].backend);
  }
  CHECK(testing::compare_allclose(y, reference_output(classifier(), x), 1e-5, 1e-6) == "");
}
