// Dispatch and the tuning database: without tuning the cost model picks (these test backends all
// look alike to it, so the first registered); tuning at load searches each node's configurations
// (candidate x threads), keeps the fastest whose result matches the reference, stores it, and a
// later session with the same cache measures nothing. run() never measures. Damaged, foreign or
// unwritable caches are survived.
#include <catch2/catch.hpp>

#include <cmath>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "probe_backend.hpp"
#include "runtime/cache_key.hpp"
#include "runtime/cost_calibration.hpp"
#include "runtime/measurement.hpp"
#include "runtime/trial_log.hpp"
#include "runtime/tuning_db.hpp"
#include "runtime/session_factory.hpp"
#include "runtime/tuner.hpp"
#include "support/env_override.hpp"
#include "support/onnx_model_builder.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;
namespace fs = std::filesystem;

namespace {

Graph relu_graph() {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 8});
  g.add_node("Relu", {"x"}, {"y"}, {}, "relu");
  g.add_output("y");
  return g;
}

TensorMap input(std::int64_t n) {
  std::vector<float> v(static_cast<std::size_t>(n * 8));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 5) - 2.0f;
  return {{"x", Tensor::from_vector(v, {n, 8})}};
}

// Candidates in this order: slow (the default), wrong (fastest, rejected), reference.
Session make(const std::string& cache_dir, bool tuning = true, SessionOptions o = {}) {
  o.tuning = tuning;
  o.cache_dir = cache_dir;
  return SessionFactory::create(relu_graph(), o,
                                {&runtime_test::slow_backend(), &runtime_test::wrong_backend(), &runtime_test::reference_backend()});
}

// Configurations of the Relu node: 3 candidates x the thread counts tuning tries.
std::uint64_t configurations(const Session& s) { return 3 * tuning_thread_counts(s.threads()).size(); }

std::string backend_of_relu(const Session& s) { return s.describe().steps.at(0).backend; }

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path db_file(const std::string& dir) { return fs::path(dir) / "tuning-v1.tsv"; }

}  // namespace

TEST_CASE("without tuning, a node runs on the cost model's choice, here the first registered", "[tuning]") {
  const std::string dir = wpk::testing::temp_dir("tune_off");
  const Session s = make(dir, /*tuning=*/false);
  const auto before = tuning_measurements();
  const Tensor y = s.run(input(2)).at("y");
  CHECK(tuning_measurements() == before);
  CHECK(backend_of_relu(s) == "slow");
  CHECK(y.data<float>()[0] == 0.0f);  // relu(-2)
  CHECK(!fs::exists(db_file(dir)));
}

TEST_CASE("tuning with thread counts other than 1 to N measures the untuned choice on all the session's threads", "[tuning]") {
  // Six threads: the counts tried are 1, 2, 4 and 6, so the untuned point (6) is the fourth value
  // of the threads knob, not the sixth, which the knob does not have. Rows enough that the cost
  // model runs the node on all six.
  SessionOptions o;
  o.threads = 6;
  o.fixed_dims = {{"N", 1 << 15}};
  const Session s = make(wpk::testing::temp_dir("tune-threads"), true, o);
  REQUIRE(tuning_thread_counts(6) == std::vector<int>{1, 2, 4, 6});
  const std::vector<TunedNode> report = s.tuning_report();
  REQUIRE(report.size() == 1);
  CHECK(report[0].untuned == "slow threads=6");
  CHECK(std::isfinite(report[0].untuned_us));  // measured, at a count that exists
  const std::string threads = report[0].winner.substr(report[0].winner.find("threads=") + 8);
  CHECK((threads == "1" || threads == "2" || threads == "4" || threads == "6"));
  CHECK(report[0].trials == configurations(s));
}

TEST_CASE("tuning at load picks the fastest correct configuration and a warm database measures nothing", "[tuning]") {
  const std::string dir = wpk::testing::temp_dir("tune");
  {
    const auto before = tuning_measurements();
    const Session s = make(dir);  // tunes N = 1, the declared shape with its symbolic dim as 1
    CHECK(tuning_measurements() - before == configurations(s));  // every configuration, once
    CHECK(backend_of_relu(s) == "reference");  // "wrong" is faster but its result differs
    const Tensor y = s.run(input(1)).at("y");
    CHECK(y.data<float>()[0] == 0.0f);
    s.run(input(3));  // another shape: the cost model's choice, never a measurement in run()
    CHECK(tuning_measurements() - before == configurations(s));
    CHECK(backend_of_relu(s) == "slow");
    const std::vector<TunedNode> report = s.tuning_report();
    REQUIRE(report.size() == 1);
    CHECK(report[0].node == "relu");
    // One row of eight: the cost model runs it on one thread.
    CHECK(report[0].untuned == "slow threads=1");
    CHECK(report[0].winner.rfind("reference threads=", 0) == 0);
    CHECK(report[0].trials == configurations(s));
    CHECK(report[0].winner_us < report[0].untuned_us);
  }
  REQUIRE(fs::exists(db_file(dir)));
  CHECK(slurp(db_file(dir)).find("\treference;threads=") != std::string::npos);
  {
    const auto before = tuning_measurements();
    const Session s = make(dir);
    s.run(input(1));
    CHECK(tuning_measurements() == before);
    CHECK(backend_of_relu(s) == "reference");
    CHECK(s.tuning_report().empty());
  }
  {
    const Session s = make(dir, /*tuning=*/false);  // records are used without tuning too
    s.run(input(1));
    CHECK(backend_of_relu(s) == "reference");
  }
}

namespace {

// Correct and fast, and a generated-code backend: a session that does not tune compiles none of
// its kernels where another backend runs the node.
class GeneratingBackend : public runtime_test::WrappingBackend {
 public:
  GeneratingBackend() : WrappingBackend("generating", [](KernelContext&) {}) {}
  bool generates_code() const override { return true; }
};

}  // namespace

TEST_CASE("tuning measures its winner against the cost model's best candidate that is not generated code", "[tuning]") {
  // The cost model ranks "generating" first (registered first, alike otherwise), but a session
  // that does not tune would run "slow": that is the baseline the report shows and the winner beats.
  static const GeneratingBackend generating;
  SessionOptions o;
  o.tuning = true;
  o.cache_dir = wpk::testing::temp_dir("tune-baseline");
  const Session s = SessionFactory::create(relu_graph(), o, {&generating, &runtime_test::slow_backend(), &runtime_test::reference_backend()});
  const std::vector<TunedNode> report = s.tuning_report();
  REQUIRE(report.size() == 1);
  CHECK(report[0].untuned == "slow threads=1");
  CHECK(report[0].winner.rfind("slow", 0) == std::string::npos);
  CHECK(report[0].winner_us < report[0].untuned_us);
}

TEST_CASE("tuning at load tunes the fixed dims, within its trials and its time", "[tuning]") {
  const std::string dir = wpk::testing::temp_dir("tune_fixed");
  SessionOptions o;
  o.fixed_dims = {{"N", 4}};
  o.tuning_trials = 2;
  std::vector<TuningProgress> seen;
  o.on_tuning_progress = [&](const TuningProgress& p) { seen.push_back(p); };
  const auto before = tuning_measurements();
  const Session s = make(dir, true, o);
  // With threads to spare, the batch's parts are tuned too (their own node, on one thread): the
  // same trials again.
  const std::uint64_t passes = s.batch_parts_check().parts > 1 ? 2 : 1;
  CHECK(tuning_measurements() - before == 2 * passes);
  REQUIRE(!seen.empty());
  CHECK(seen.back().nodes_total == 1);
  CHECK(seen.back().nodes_done == 1);
  CHECK(seen.back().trials == 2);
  CHECK(slurp(db_file(dir)).find("float32[4, 8]") != std::string::npos);

  SessionOptions hurried;
  hurried.tuning_budget = 1e-9;  // over before the first node: it keeps the cost model's choice
  const std::string other = wpk::testing::temp_dir("tune_hurried");
  const Session h = make(other, true, hurried);
  CHECK(h.tuning_report().empty());
  CHECK(backend_of_relu(h) == "slow");
  CHECK(!fs::exists(db_file(other)));
}

// "compare" measures every configuration, keeps the grid's winner, and replays random, GA and
// RL (3 seeds each) on those measurements with 15% of the grid's trials (at least the untuned
// one): none can beat the grid's best, and each starts from the untuned choice.
TEST_CASE("tuning_algorithm compare replays each strategy on the grid's measurements", "[tuning]") {
  SessionOptions o;
  o.tuning_algorithm = "compare";
  const auto before = tuning_measurements();
  const Session s = make(wpk::testing::temp_dir("tune_compare"), true, o);
  CHECK(tuning_measurements() - before >= configurations(s));
  CHECK(backend_of_relu(s) == "reference");
  const std::vector<TunedNode> report = s.tuning_report();
  REQUIRE(report.size() == 1);
  const TunedNode& n = report[0];
  CHECK(n.trials == configurations(s));
  REQUIRE(n.strategies.size() == 9);
  const std::size_t budget = std::max<std::size_t>(1, static_cast<std::size_t>(0.15 * static_cast<double>(n.trials)));
  CHECK(n.grid_best_us > 0);
  for (std::size_t i = 0; i < n.strategies.size(); ++i) {
    const TunedNode::StrategyRun& r = n.strategies[i];
    INFO(r.algorithm << " seed " << r.seed);
    CHECK(r.algorithm == std::vector<std::string>{"random", "ga", "rl"}[i / 3]);
    CHECK(r.trials == budget);
    CHECK(r.best_us >= n.grid_best_us);
  }
}

// A search the deadline cuts short keeps the cost model's choice but logs its trials; the next
// tuning session resumes from them, measuring only the rest (and the untuned choice again, its
// baseline).
TEST_CASE("a search cut short by the deadline is resumed by the next tuning session", "[tuning]") {
  const std::string dir = wpk::testing::temp_dir("tune_resume");
  SessionOptions hurried;
  // The untuned (slow) candidate takes 2+ ms a measurement: past the deadline once it is measured.
  hurried.tuning_budget = 0.0015;
  const Session first = make(dir, true, hurried);
  CHECK(first.tuning_report().empty());
  CHECK(backend_of_relu(first) == "slow");
  const std::string db = slurp(db_file(dir));
  const std::size_t at = db.find("trials:");
  REQUIRE(at != std::string::npos);
  const std::string trials = db.substr(at, db.find('\t', at) - at);
  const auto stored = static_cast<std::size_t>(std::count(trials.begin(), trials.end(), ';'));
  CHECK(stored >= 1);  // the untuned choice at least
  CHECK(trials.find("slow|") != std::string::npos);

  const auto before = tuning_measurements();
  const Session second = make(dir);
  const std::vector<TunedNode> report = second.tuning_report();
  REQUIRE(report.size() == 1);
  // Every configuration measured once over both sessions, the untuned one twice.
  CHECK(report[0].trials + stored - 1 == configurations(second));
  CHECK(tuning_measurements() - before >= report[0].trials);
  CHECK(backend_of_relu(second) == "reference");
}

// Trial logs calibrate the cost model: the two test backends look alike to it (so the first
// registered, "slow", runs untuned; the reference's own profile ranks it last), until the cache
// folder's logs say "slow" ran 10x and "wrong" 1x what was predicted; then a session that does
// not tune (and so checks no candidate against the reference) runs "wrong".
TEST_CASE("the cost model is calibrated from the cache folder's trial logs", "[tuning]") {
  const std::string dir = wpk::testing::temp_dir("tune_calibrate");
  {
    TuningDb db(dir);
    std::vector<LoggedTrial> log;
    for (int i = 0; i < 3; ++i) {
      log.push_back({"slow", 1, 1000.0 + i, 100.0, ""});
      log.push_back({"wrong", 1, 100.0 + i, 100.0, ""});
    }
    db.store("a node's key;trials", encode_trial_log(log), 100, "test");
  }
  const auto db = TuningDb::open_for_lookup(dir);
  const CostCalibration c = CostCalibration::from(db.get());
  CHECK(c.calibrated() == 2);
  CHECK(c.factor("slow") > 1.5);
  CHECK(c.factor("wrong") < 0.25);
  CHECK(c.factor("reference") == 1.0);  // never measured
  CHECK(backend_of_relu(make(dir, /*tuning=*/false)) == "wrong");
  SessionOptions no_records;
  no_records.use_tuning_records = false;
  CHECK(backend_of_relu(make(dir, false, no_records)) == "slow");
}

// One config string names a generated product's kernel and a generated conv's alike; a factor
// learned on one (a one-row product the model overprices) must not rank the other.
TEST_CASE("calibration keeps a config's factors apart for the kernels it names", "[tuning]") {
  std::vector<LoggedTrial> log;
  for (int i = 0; i < 3; ++i) {
    log.push_back({"gen(rows=2)", 1, 30.0 + i, 100.0, "f32_matmul__avx512_2x16_prows"});
    log.push_back({"gen(rows=2)", 1, 200.0 + i, 100.0, "f32_conv1x1_nhwc__avx512_2x16_prows"});
    log.push_back({"lib", 1, 100.0 + i, 100.0, ""});
  }
  const CostCalibration c = CostCalibration::fit(log);
  CHECK(c.factor("gen(rows=2)", "f32_matmul__avx512_2x16_prows") < 0.5);
  CHECK(c.factor("gen(rows=2)", "f32_conv1x1_nhwc__avx512_2x16_prows") > 1.5);
  CHECK(c.factor("gen(rows=2)", "f32_conv_nhwc__avx512_2x16_prows") == 1.0);  // never measured
  CHECK(c.factor("lib") == Approx(1.0).epsilon(0.2));

  const std::string dir = wpk::testing::temp_dir("tune_calibration_kernels");
  {
    TuningDb db(dir);
    db.store("a node's key;trials", encode_trial_log(log), 100, "test");
    CostCalibration::store(db);
  }
  const CostCalibration recorded = CostCalibration::from(TuningDb::open_for_lookup(dir).get());
  CHECK(recorded.factor("gen(rows=2)", "f32_matmul__avx512_2x16_prows") ==
        c.factor("gen(rows=2)", "f32_matmul__avx512_2x16_prows"));
  CHECK(recorded.factor("gen(rows=2)", "f32_conv1x1_nhwc__avx512_2x16_prows") ==
        c.factor("gen(rows=2)", "f32_conv1x1_nhwc__avx512_2x16_prows"));
}

TEST_CASE("the calibration is stored as its own record, and lookups then skip the trial logs", "[tuning]") {
  const std::string dir = wpk::testing::temp_dir("tune_calibration_record");
  std::vector<LoggedTrial> log;
  for (int i = 0; i < 3; ++i) {
    log.push_back({"slow", 1, 1000.0 + i, 100.0, ""});
    log.push_back({"wrong", 1, 100.0 + i, 100.0, ""});
  }
  double slow = 0, wrong = 0;
  {
    TuningDb db(dir);
    db.store("a node's key;trials", encode_trial_log(log), 100, "test");
    const CostCalibration computed = CostCalibration::from(&db);
    slow = computed.factor("slow");
    wrong = computed.factor("wrong");
    CostCalibration::store(db);
  }
  const auto lookups = TuningDb::open_for_lookup(dir);
  CHECK(lookups->values_with_prefix(kTrialLogPrefix).empty());  // passed over unread
  const CostCalibration recorded = CostCalibration::from(lookups.get());
  CHECK(recorded.calibrated() == 2);
  CHECK(recorded.factor("slow") == slow);  // printed exactly
  CHECK(recorded.factor("wrong") == wrong);
  CHECK(backend_of_relu(make(dir, /*tuning=*/false)) == "wrong");
  // A tuning session still reads the logs: a search resumes from them.
  TuningDb full(dir);
  CHECK(full.values_with_prefix(kTrialLogPrefix).size() == 1);
}

// "lib" costs 40 us a call on top of its work, "tight" nothing: only a call term fits both the
// smallest and the largest of lib's trials, and the factor alone (the median ratio) would price
// a 1 us lib node at a few us.
TEST_CASE("calibration learns a backend's fixed cost a call besides its factor", "[tuning]") {
  std::vector<LoggedTrial> log;
  for (const double work : {0.5, 2.0, 8.0, 32.0, 128.0, 512.0, 2048.0}) {
    log.push_back({"lib(algorithm=a)", 1, work + 40.0, work, ""});
    log.push_back({"tight", 1, work, work, ""});
  }
  const CostCalibration c = CostCalibration::fit(log);
  CHECK(c.call_seconds("lib(algorithm=a)", 1) >= 16e-6);
  CHECK(c.call_seconds("lib(algorithm=a)", 1) <= 64e-6);
  CHECK(c.call_seconds("lib(algorithm=b)", 1) == c.call_seconds("lib(algorithm=a)", 1));  // the backend's
  CHECK(c.call_seconds("lib(algorithm=a)", 4) == c.call_seconds("lib(algorithm=a)", 1));  // nearest count below
  CHECK(c.call_seconds("tight", 1) == 0.0);
  CHECK(c.call_seconds("never", 1) == 0.0);
  CHECK(c.factor("lib(algorithm=a)") == Approx(1.0).epsilon(0.3));
  CHECK(c.factor("tight") == Approx(1.0).epsilon(0.1));
  // Calibrated, the 1 us lib node is predicted within a factor 2 of what it measured.
  const double small = c.factor("lib(algorithm=a)") * 0.5e-6 + c.call_seconds("lib(algorithm=a)", 1);
  CHECK(small > 40.5e-6 / 2);
  CHECK(small < 40.5e-6 * 2);

  // The record keeps the call terms exactly, and a record from before them is recomputed.
  const std::string dir = wpk::testing::temp_dir("tune_calibration_calls");
  {
    TuningDb db(dir);
    db.store("a node's key;trials", encode_trial_log(log), 100, "test");
    CostCalibration::store(db);
  }
  const auto lookups = TuningDb::open_for_lookup(dir);
  const CostCalibration recorded = CostCalibration::from(lookups.get());
  CHECK(recorded.call_seconds("lib(algorithm=a)", 1) == c.call_seconds("lib(algorithm=a)", 1));
  CHECK(recorded.factor("lib(algorithm=a)") == c.factor("lib(algorithm=a)"));
}

// "big" was only ever measured on large nodes, whose times follow their predictions loosely
// (predicted 1 to 6.4 ms, measured 0.7 to 1.1 ms: as a tuned model's convolutions do). A call term
// would fit those better, and then price every small node of the backend at hundreds of us.
TEST_CASE("calibration learns no call term from a backend's large nodes alone", "[tuning]") {
  std::vector<LoggedTrial> log;
  const double predicted[] = {1000, 1300, 1600, 2200, 5200, 6400, 1000, 1300};
  const double measured[] = {1030, 740, 870, 1080, 1000, 670, 1090, 790};
  for (int i = 0; i < 8; ++i) {
    log.push_back({i % 2 ? "big(kernel=a)" : "big(kernel=b)", 1, measured[i], predicted[i], ""});
    log.push_back({"other", 1, predicted[i] * 0.5, predicted[i], ""});
  }
  const CostCalibration c = CostCalibration::fit(log);
  CHECK(c.call_seconds("big(kernel=a)", 1) == 0.0);
  CHECK(c.call_seconds("big(kernel=a)", 2) == 0.0);
  // The same trials and two small nodes that took ~40 us for 2-5 us of work: now there is a term.
  log.push_back({"big(kernel=a)", 1, 45.0, 5.0, ""});
  log.push_back({"big(kernel=b)", 1, 42.0, 2.0, ""});
  const CostCalibration with_small = CostCalibration::fit(log);
  CHECK(with_small.call_seconds("big(kernel=a)", 1) > 4e-6);
}

TEST_CASE("tuning options that make no sense are an InvalidArgument error", "[tuning]") {
  const std::string dir = wpk::testing::temp_dir("tune_args");
  SessionOptions bad_algorithm, bad_budget;
  bad_algorithm.tuning_algorithm = "annealing";
  bad_budget.tuning_budget = 0;
  for (const SessionOptions& o : {bad_algorithm, bad_budget}) {
    try {
      make(dir, true, o);
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidArgument);
    }
  }
}

TEST_CASE("a damaged or foreign tuning database is ignored and rebuilt", "[tuning]") {
  const std::string dir = wpk::testing::temp_dir("tune_bad");
  make(dir);
  // The file without the search's trial log (with it, a damaged record would be re-searched from
  // the log, measuring only the untuned baseline again: the resume test covers that).
  std::string good, entry;
  std::istringstream lines(slurp(db_file(dir)));
  for (std::string line; std::getline(lines, line);) {
    if (line.find("\ttrials:") != std::string::npos) continue;
    good += line + "\n";
    // The entry: the node's record (the file also holds the calibration and the node's list of
    // choices; the header and environment lines start with '#').
    if (!line.empty() && line[0] != '#' && line.find("\treference;threads=") != std::string::npos) entry = line + "\n";
  }
  REQUIRE(!entry.empty());
  // "<env>\t<key>\treference;threads=": what a rebuilt entry for this op must contain again.
  const std::string rebuilt = entry.substr(0, 34) + "reference;threads=";

  std::string flipped = entry;  // one changed character: the checksum no longer matches
  flipped[flipped.find("reference")] = 'R';
  // Another environment's entry with a valid checksum: kept in the file, never used here.
  std::string foreign = "0123456789abcdef\tfedcba9876543210" + entry.substr(33, entry.rfind('\t') - 33);
  foreign += "\t" + hex64(fnv1a64(foreign)) + "\n";
  const std::string torn = good.substr(0, good.find(entry) + entry.size() / 2);  // a write cut short
  for (const std::string& content : {torn, std::string("\x01\x02garbage\tline\n\n\t\t\t\t\t\n"),
                                     flipped, foreign, std::string()}) {
    std::ofstream(db_file(dir), std::ios::trunc) << content;
    const auto before = tuning_measurements();
    const Session s = make(dir);
    const Tensor y = s.run(input(1)).at("y");
    CHECK(tuning_measurements() - before == configurations(s));
    CHECK(backend_of_relu(s) == "reference");
    CHECK(y.data<float>()[0] == 0.0f);
    CHECK(slurp(db_file(dir)).find(rebuilt) != std::string::npos);
  }
  CHECK(slurp(db_file(dir)).find("0123456789abcdef") == std::string::npos);  // overwritten by "" last
  std::ofstream(db_file(dir), std::ios::trunc) << foreign;
  make(dir);
  CHECK(slurp(db_file(dir)).find(foreign) != std::string::npos);  // other machines' entries survive
  CHECK(slurp(db_file(dir)).find(rebuilt) != std::string::npos);
}

TEST_CASE("an unusable cache folder warns and tuning still works", "[tuning]") {
  const std::string dir = wpk::testing::temp_dir("tune_nodir");
  std::ofstream(dir + "/file") << "not a folder";
  for (const std::string& bad : {dir + "/file/sub", std::string("/proc/wpk-no-such-cache")}) {
    INFO(bad);
    for (int round = 0; round < 2; ++round) {  // nothing persists: every session measures
      const auto before = tuning_measurements();
      const Session s = make(bad);
      CHECK(tuning_measurements() - before == configurations(s));
      CHECK(backend_of_relu(s) == "reference");
    }
  }
}

TEST_CASE("the cache folder defaults to WPK_CACHE_DIR", "[tuning]") {
  const std::string dir = wpk::testing::temp_dir("tune_env");
  {
    const wpk::testing::EnvOverride cache_dir("WPK_CACHE_DIR", dir);
    make("");
  }
  CHECK(fs::exists(db_file(dir)));
}

TEST_CASE("tuning sessions run safely from many threads", "[tuning][threads]") {
  const std::string dir = wpk::testing::temp_dir("tune_mt");
  const Session s = make(dir);
  std::vector<std::string> errors(4);
  std::vector<std::thread> pool;
  for (int t = 0; t < 4; ++t)
    pool.emplace_back([&, t] {
      for (int rep = 0; rep < 10; ++rep) {
        const std::int64_t n = 1 + (t + rep) % 3;
        const Tensor y = s.run(input(n)).at("y");
        const TensorMap want = input(n);
        for (std::int64_t i = 0; i < y.numel(); ++i) {
          const float x = want.at("x").data<float>()[i];
          if (y.data<float>()[i] != (x < 0 ? 0.0f : x)) errors[t] = "wrong value at " + std::to_string(i);
        }
      }
    });
  for (auto& th : pool) th.join();
  for (const auto& e : errors) CHECK(e == "");
  CHECK(fs::exists(db_file(dir)));
}

TEST_CASE("outputs_agree: tolerance for floats, exact for the rest", "[tuning]") {
  const Tensor a = Tensor::from_vector<float>({1.0f, 100.0f, 0.0f}, {3});
  CHECK(outputs_agree(Tensor::from_vector<float>({1.0005f, 100.0f, 0.001f}, {3}), a));
  CHECK_FALSE(outputs_agree(Tensor::from_vector<float>({1.1f, 100.0f, 0.0f}, {3}), a));
  CHECK_FALSE(outputs_agree(Tensor::from_vector<float>({1.0f, 100.0f}, {2}), a));
  CHECK_FALSE(outputs_agree(Tensor::from_vector<float>({NAN, 100.0f, 0.0f}, {3}), a));
  CHECK(outputs_agree(Tensor::from_vector<std::int64_t>({1, 2}, {2}), Tensor::from_vector<std::int64_t>({1, 2}, {2})));
  CHECK_FALSE(outputs_agree(Tensor::from_vector<std::int64_t>({1, 3}, {2}), Tensor::from_vector<std::int64_t>({1, 2}, {2})));
}

TEST_CASE("measurement sweeps what a run goes through: nothing where a core keeps the constants, else their bytes", "[tuning]") {
  const std::size_t cap = std::min<std::size_t>(2 * last_level_cache_bytes(), std::size_t{256} << 20);
  CHECK(private_cache_bytes() > 0);
  CHECK(private_cache_bytes() <= last_level_cache_bytes());
  CHECK(sweep_bytes_for_constants(0) == 0);
  CHECK(sweep_bytes_for_constants(private_cache_bytes()) == 0);
  const std::size_t beyond = private_cache_bytes() + 4096;
  CHECK(sweep_bytes_for_constants(beyond) == std::min(beyond, cap));
  CHECK(sweep_bytes_for_constants(std::size_t{1} << 40) == cap);
}

namespace {

// y = z + 1 for a residual z (input 3), read element by element before it is written, as a
// kernel that accumulates into its residual does; notes whether y had z's bytes.
struct AccumulatingKernel : Kernel {
  mutable int runs_in_place = 0, runs_apart = 0;
  void run(KernelContext& ctx) const override {
    const Tensor& z = ctx.input(3);
    Tensor& y = ctx.allocate_output(0, DType::Float32, z.shape());
    (y.raw() == z.raw() ? runs_in_place : runs_apart) += 1;
    const float* from = z.data<float>();
    float* to = y.data<float>();
    for (std::int64_t i = 0; i < z.numel(); ++i) to[i] = from[i] + 1.0f;
  }
};

}  // namespace

TEST_CASE("measurement gives a residual's bytes to the output where the model does, fresh each run", "[tuning]") {
  Node node;
  node.name = "fused";
  node.op_type = "Accumulate";
  node.inputs = {0, 1, 2, 3};
  node.outputs = {4};
  const Tensor x = Tensor::from_vector<float>({0, 0}, {2});
  const Tensor z = Tensor::from_vector<float>({1.0f, 2.0f}, {2});
  const std::vector<const Tensor*> inputs = {&x, nullptr, nullptr, &z};
  AccumulatingKernel kernel;
  std::vector<Tensor> out;
  time_config(kernel, node, inputs, 1, out, {}, 3);
  CHECK(kernel.runs_in_place >= 2);  // the warm-up and at least one timed run
  CHECK(kernel.runs_apart == 0);
  REQUIRE(out.size() == 1);
  // Every run starts from the residual's values, and the input itself is never written.
  CHECK(out[0].data<float>()[0] == 2.0f);
  CHECK(out[0].data<float>()[1] == 3.0f);
  CHECK(z.data<float>()[0] == 1.0f);
  CHECK(z.data<float>()[1] == 2.0f);

  AccumulatingKernel apart;
  std::vector<Tensor> out_apart;
  time_config(apart, node, inputs, 1, out_apart, {}, -1);
  CHECK(apart.runs_in_place == 0);
  CHECK(apart.runs_apart >= 2);
  CHECK(out_apart.at(0).data<float>()[1] == 3.0f);
}

// A backend of two algorithms: "algo=tiled" in 60 tiles, all slow, and "algo=lone", one config,
// fast. The cost model sees them all alike; a search of 8 trials drawn from 120 points would most
// likely never try the lone one. The search measures each family's best-predicted config first.
namespace {

class TwoAlgorithmBackend : public Backend {
 public:
  std::string name() const override { return "algos"; }
  std::string version() const override { return "test-1"; }
  std::string why_unsupported(const Node& node, const Graph& graph) const override {
    return node.op_type == "Relu" ? reference_.why_unsupported(node, graph) : "test backend";
  }
  std::vector<std::string> configs(const Node&, const Graph&) const override {
    std::vector<std::string> out;
    for (int t = 0; t < 60; ++t) out.push_back("algo=tiled,tile=" + std::to_string(t));
    out.push_back("algo=lone");
    return out;
  }
  std::unique_ptr<Kernel> prepare(const Node& node, const Graph& graph) const override {
    return prepare(node, graph, configs(node, graph).front());
  }
  std::unique_ptr<Kernel> prepare(const Node& node, const Graph& graph, const std::string& config) const override {
    return std::make_unique<Timed>(reference_.prepare(node, graph), config == "algo=lone" ? 0 : 3);
  }

 private:
  struct Timed : Kernel {
    Timed(std::unique_ptr<Kernel> inner, int ms) : inner(std::move(inner)), ms(ms) {}
    void run(KernelContext& ctx) const override {
      inner->run(ctx);
      if (ms) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    }
    std::unique_ptr<Kernel> inner;
    int ms;
  };
  reference::ReferenceBackend reference_;
};

}  // namespace

TEST_CASE("tuning measures every kernel family's best-predicted config whatever the other families' sizes", "[tuning]") {
  const std::string dir = wpk::testing::temp_dir("tune_families");
  static const TwoAlgorithmBackend algos;
  for (const std::uint64_t seed : {0u, 1u, 2u}) {
    SessionOptions o;
    o.tuning = true;
    o.cache_dir = dir + "/" + std::to_string(seed);
    o.tuning_trials = 8;
    o.tuning_seed = seed;
    const Session s = SessionFactory::create(relu_graph(), o, {&algos, &runtime_test::reference_backend()});
    INFO("seed " << seed);
    CHECK(backend_of_relu(s) == "algos(algo=lone)");
    REQUIRE(s.tuning_report().size() == 1);
    CHECK(s.tuning_report()[0].trials <= 8);
  }
}
