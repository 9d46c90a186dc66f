// `wpk tune` and `wpk bench --tune --json` on a small model: tuning at load stores records, a
// second process finds them and measures nothing, and the output says what was chosen.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/onnx_model_builder.hpp"

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs the CLI with WPK_CACHE_DIR set; stdout in `out` (stderr in `err` where given); returns
// the exit code.
int run_cli(const std::string& cache, const std::string& args, std::string& out, std::string* err = nullptr) {
  const std::string dir = wpk::testing::temp_dir("tune_cli");
  const std::string cmd = "WPK_CACHE_DIR=" + cache + " " + std::string(WPK_CLI_PATH) + " " + args + " >" + dir + "/out 2>" +
                          dir + "/err";
  const int status = std::system(cmd.c_str());
  out = read_text(dir + "/out");
  if (err) *err = read_text(dir + "/err");
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// "key": value as text, from one JSON line.
std::string json_field(const std::string& json, const std::string& key) {
  const std::size_t at = json.find("\"" + key + "\": ");
  if (at == std::string::npos) return "";
  const std::size_t start = at + key.size() + 4;
  return json.substr(start, json.find_first_of(",}", start) - start);
}

std::string small_model(const std::string& dir) {
  wpk::testing::OnnxModelBuilder b;
  // r is an output too: the two ops stay two nodes (else they become one ElementwiseChain).
  b.input("x", {-1, 64}).output("y", {-1, 64}).output("r", {-1, 64}).node("Relu", {"x"}, {"r"}).node("Sigmoid", {"r"}, {"y"});
  return b.save(dir + "/small.onnx");
}

}  // namespace

TEST_CASE("wpk tune reports each tuned node and both end-to-end times", "[cli][tuning]") {
  const std::string dir = wpk::testing::temp_dir("tune_cli_model");
  const std::string cache = wpk::testing::temp_dir("tune_cli_cache");
  std::string out, err;
  REQUIRE(run_cli(cache, "tune " + small_model(dir) + " --algo grid --batch 4 --iters 3", out, &err) == 0);
  // Before the search's progress: what the minutes of compiling on a cold cache folder are.
  CHECK(err.find("tuning: preparing every candidate") < err.find("tuning: nodes"));
  CHECK(out.find("Relu float32[4, 64]") != std::string::npos);
  CHECK(out.find("Sigmoid float32[4, 64]") != std::string::npos);
  CHECK(out.find("end to end, batch 4") != std::string::npos);
  // Batch 4's records do not serve a session with the batch dynamic (it prepares batch 1's).
  CHECK(out.find("these records serve sessions that fix the same sizes at load") != std::string::npos);
  CHECK(out.find("threads=") != std::string::npos);
  CHECK(run_cli(cache, "tune " + small_model(dir) + " --algo annealing", out) == 2);
}

// --algo compare summarises, over the product nodes, each strategy's gap to the grid's best (one
// thread: no batch parts, whose node would be a second).
TEST_CASE("wpk tune --algo compare prints each strategy's gap to the grid", "[cli][tuning]") {
  const std::string dir = wpk::testing::temp_dir("tune_cli_compare");
  wpk::testing::OnnxModelBuilder b;
  std::vector<float> w(64 * 48);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 7) * 0.1f - 0.3f;
  b.input("x", {-1, 64}).output("y", {-1, 48}).float_initializer("w", {64, 48}, w).node("MatMul", {"x", "w"}, {"y"});
  const std::string model = b.save(dir + "/matmul.onnx");
  std::string out;
  REQUIRE(run_cli(wpk::testing::temp_dir("tune_cli_compare_cache"), "tune " + model + " --algo compare --batch 8 --threads 1 --iters 2",
                  out) == 0);
  CHECK(out.find("search quality on 1 conv and matmul nodes") != std::string::npos);
  for (const char* strategy : {"\nrandom ", "\nga ", "\nrl "}) CHECK(out.find(strategy) != std::string::npos);
}

TEST_CASE("bench --tune --json: a warm load measures nothing", "[cli][tuning]") {
  const std::string dir = wpk::testing::temp_dir("bench_tune_model");
  const std::string cache = wpk::testing::temp_dir("bench_tune_cache");
  const std::string model = small_model(dir);
  std::string cold, warm, plain;
  REQUIRE(run_cli(cache, "bench " + model + " --tune --json --iters 2 --batch 2", cold) == 0);
  REQUIRE(run_cli(cache, "bench " + model + " --tune --json --iters 2 --batch 2", warm) == 0);
  REQUIRE(run_cli(cache, "bench " + model + " --json --iters 2 --batch 2", plain) == 0);
  CHECK(std::stoi(json_field(cold, "measured_candidates")) > 0);
  CHECK(json_field(warm, "measured_candidates") == "0");
  CHECK(json_field(plain, "measured_candidates") == "0");
  CHECK(json_field(cold, "compiled_kernels") == "0");
  CHECK(json_field(warm, "tuned_nodes") == json_field(cold, "tuned_nodes"));
}

TEST_CASE("two processes tuning into one cache folder at once leave it consistent", "[cli][tuning]") {
  const std::string dir = wpk::testing::temp_dir("tune_two_models");
  const std::string cache = wpk::testing::temp_dir("tune_two_cache");
  wpk::testing::OnnxModelBuilder other;
  other.input("x", {-1, 48}).output("y", {-1, 48}).node("Tanh", {"x"}, {"t"}).node("Relu", {"t"}, {"y"});
  const std::string a = small_model(dir), b = other.save(dir + "/other.onnx");
  // Both in the background of one shell, so their tuning and their writes overlap.
  const std::string cli = std::string(WPK_CLI_PATH);
  const std::string cmd = "export WPK_CACHE_DIR=" + cache + "; (" + cli + " bench " + a + " --tune --iters 2 >/dev/null 2>&1 & " +
                          cli + " bench " + b + " --tune --iters 2 >/dev/null 2>&1 & wait)";
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::string warm_a, warm_b;
  REQUIRE(run_cli(cache, "bench " + a + " --tune --json --iters 2", warm_a) == 0);
  REQUIRE(run_cli(cache, "bench " + b + " --tune --json --iters 2", warm_b) == 0);
  // Each process merged what the other wrote before renaming its file over it: both models' records survive.
  CHECK(json_field(warm_a, "measured_candidates") == "0");
  CHECK(json_field(warm_b, "measured_candidates") == "0");
}
