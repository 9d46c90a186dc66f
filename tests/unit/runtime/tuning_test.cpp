// Dispatch and the tuning database: the default is the first supporting backend; tuning picks
// the fastest candidate whose result matches the reference, stores it, and a later session with
// the same cache measures nothing. Damaged, foreign or unwritable caches are survived.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "probe_backend.hpp"
#include "runtime/cache_key.hpp"
#include "runtime/session_factory.hpp"
#include "runtime/tuner.hpp"
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
Session make(const std::string& cache_dir, bool tuning = true) {
  SessionOptions o;
  o.tuning = tuning;
  o.cache_dir = cache_dir;
  return SessionFactory::create(relu_graph(), o,
                                {&runtime_test::slow_backend(), &runtime_test::wrong_backend(), &runtime_test::reference_backend()});
}

std::string backend_of_relu(const Session& s) { return s.describe().steps.at(0).backend; }

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path db_file(const std::string& dir) { return fs::path(dir) / "tuning-v1.tsv"; }

}  // namespace

TEST_CASE("without tuning, a node runs on the first backend that supports it", "[tuning]") {
  const std::string dir = wpk::testing::temp_dir("tune_off");
  const Session s = make(dir, /*tuning=*/false);
  const auto before = tuning_measurements();
  const Tensor y = s.run(input(2)).at("y");
  CHECK(tuning_measurements() == before);
  CHECK(backend_of_relu(s) == "slow");
  CHECK(y.data<float>()[0] == 0.0f);  // relu(-2)
  CHECK(!fs::exists(db_file(dir)));
}

TEST_CASE("tuning picks the fastest correct candidate and a warm database measures nothing", "[tuning]") {
  const std::string dir = wpk::testing::temp_dir("tune");
  {
    const Session s = make(dir);
    const auto before = tuning_measurements();
    const Tensor y = s.run(input(2)).at("y");
    CHECK(tuning_measurements() - before == 3);  // every candidate timed once per signature
    CHECK(backend_of_relu(s) == "reference");    // "wrong" is faster but its result differs
    CHECK(y.data<float>()[0] == 0.0f);
    s.run(input(2));
    CHECK(tuning_measurements() - before == 3);  // the signature's plan is reused
    s.run(input(3));
    CHECK(tuning_measurements() - before == 6);  // a new shape is a new op signature
  }
  REQUIRE(fs::exists(db_file(dir)));
  CHECK(slurp(db_file(dir)).find("\treference\t") != std::string::npos);
  {
    const Session s = make(dir);
    const auto before = tuning_measurements();
    s.run(input(2));
    s.run(input(3));
    CHECK(tuning_measurements() == before);
    CHECK(backend_of_relu(s) == "reference");
  }
}

TEST_CASE("a damaged or foreign tuning database is ignored and rebuilt", "[tuning]") {
  const std::string dir = wpk::testing::temp_dir("tune_bad");
  make(dir).run(input(2));
  const std::string good = slurp(db_file(dir));
  REQUIRE(!good.empty());
  const std::string entry = good.substr(good.find('\n') + 1);  // after the header line
  // "<env>\t<key>\treference\t": what a rebuilt entry for this op must contain again.
  const std::string rebuilt = entry.substr(0, 34) + "reference\t";

  std::string flipped = entry;  // one changed character: the checksum no longer matches
  flipped[flipped.find("reference")] = 'R';
  // Another environment's entry with a valid checksum: kept in the file, never used here.
  std::string foreign = "0123456789abcdef\tfedcba9876543210" + entry.substr(33, entry.rfind('\t') - 33);
  foreign += "\t" + hex64(fnv1a64(foreign)) + "\n";
  for (const std::string& content : {good.substr(0, good.size() / 2), std::string("\x01\x02garbage\tline\n\n\t\t\t\t\t\n"),
                                     flipped, foreign, std::string()}) {
    std::ofstream(db_file(dir), std::ios::trunc) << content;
    const Session s = make(dir);
    const auto before = tuning_measurements();
    const Tensor y = s.run(input(2)).at("y");
    CHECK(tuning_measurements() - before == 3);
    CHECK(backend_of_relu(s) == "reference");
    CHECK(y.data<float>()[0] == 0.0f);
    CHECK(slurp(db_file(dir)).find(rebuilt) != std::string::npos);
  }
  CHECK(slurp(db_file(dir)).find("0123456789abcdef") == std::string::npos);  // overwritten by "" last
  std::ofstream(db_file(dir), std::ios::trunc) << foreign;
  make(dir).run(input(2));
  CHECK(slurp(db_file(dir)).find(foreign) != std::string::npos);  // other machines' entries survive
  CHECK(slurp(db_file(dir)).find(rebuilt) != std::string::npos);
}

TEST_CASE("an unusable cache folder warns and tuning still works", "[tuning]") {
  const std::string dir = wpk::testing::temp_dir("tune_nodir");
  std::ofstream(dir + "/file") << "not a folder";
  for (const std::string& bad : {dir + "/file/sub", std::string("/proc/wpk-no-such-cache")}) {
    INFO(bad);
    for (int round = 0; round < 2; ++round) {  // nothing persists: every session measures
      const Session s = make(bad);
      const auto before = tuning_measurements();
      s.run(input(2));
      CHECK(tuning_measurements() - before == 3);
      CHECK(backend_of_relu(s) == "reference");
    }
  }
}

TEST_CASE("the cache folder defaults to WPK_CACHE_DIR", "[tuning]") {
  const std::string dir = wpk::testing::temp_dir("tune_env");
  const char* old = std::getenv("WPK_CACHE_DIR");
  const std::string saved = old ? old : "";
  setenv("WPK_CACHE_DIR", dir.c_str(), 1);
  make("").run(input(2));
  if (old) setenv("WPK_CACHE_DIR", saved.c_str(), 1);
  else unsetenv("WPK_CACHE_DIR");
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
