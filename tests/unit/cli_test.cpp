// The `wpk` command-line contract: subcommands, JSON, and one-line errors with exit code 2.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/onnx_model_builder.hpp"
#include "support/tensor_compare.hpp"
#include "wpk/wpk.hpp"

namespace {

struct Run {
  int exit_code;
  std::string out;
  std::string err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Run wpk_cli(const std::string& args) {
  const std::string dir = wpk::testing::temp_dir("cli");
  const std::string cmd = std::string(WPK_CLI_PATH) + " " + args + " >" + dir + "/out 2>" + dir + "/err";
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir + "/out"), slurp(dir + "/err")};
}

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

std::string tiny_model(const std::string& dir) {
  wpk::testing::OnnxModelBuilder b;
  b.input("x", {-1, 3}).output("y", {-1, 3}).node("Sigmoid", {"x"}, {"y"});
  return b.save(dir + "/tiny.onnx");
}

}  // namespace

TEST_CASE("CLI errors are one line on stderr with exit code 2", "[cli][errors]") {
  const std::string dir = wpk::testing::temp_dir("cli_err");
  for (const std::string& args : {"run " + dir + "/missing.onnx", "bench " + dir + "/missing.onnx --json",
                                 "info " + dir + "/missing.onnx", "bench " + tiny_model(dir) + " --iters zero",
                                 "run " + tiny_model(dir) + " --inputs " + dir + "/nope",
                                 "bench " + tiny_model(dir) + " --fix-dims --dim Q=2",
                                 "bench " + tiny_model(dir) + " --disable no_such_pass",
                                 "info " + tiny_model(dir) + " --disable no_such_pass", std::string("frobnicate x")}) {
    INFO(args);
    const Run r = wpk_cli(args);
    CHECK(r.exit_code == 2);
    if (args != "frobnicate x") CHECK(count_lines(r.err) == 1);
    CHECK(r.out.empty());
  }
  std::ofstream(dir + "/junk.onnx") << "junk";
  const Run r = wpk_cli("run " + dir + "/junk.onnx");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("junk.onnx") != std::string::npos);
}

TEST_CASE("wpk run reads and writes the ONNX test-data layout", "[cli]") {
  const std::string dir = wpk::testing::temp_dir("cli_run");
  const std::string model = tiny_model(dir);
  std::filesystem::create_directories(dir + "/in");
  wpk::save_tensor(wpk::Tensor::from_vector<float>({0, 100, -100, 0, 0, 0}, {2, 3}), dir + "/in/input_0.pb");
  const Run r = wpk_cli("run " + model + " --inputs " + dir + "/in --outputs " + dir + "/out");
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  const wpk::Tensor y = wpk::load_tensor(dir + "/out/output_0.pb");
  REQUIRE(y.shape() == wpk::Shape{2, 3});
  CHECK(y.data<float>()[0] == Approx(0.5f));
  CHECK(y.data<float>()[1] == Approx(1.0f));
  CHECK(y.data<float>()[2] == Approx(0.0f).margin(1e-6));

  // Without --inputs: deterministic random inputs, identical across invocations.
  REQUIRE(wpk_cli("run " + model + " --outputs " + dir + "/r1").exit_code == 0);
  REQUIRE(wpk_cli("run " + model + " --outputs " + dir + "/r2").exit_code == 0);
  CHECK(wpk::testing::compare_allclose(wpk::load_tensor(dir + "/r1/output_0.pb"), wpk::load_tensor(dir + "/r2/output_0.pb"), 0,
                                       0) == "");
}

TEST_CASE("wpk bench --json prints one JSON line with the contract's keys", "[cli]") {
  const std::string dir = wpk::testing::temp_dir("cli_bench");
  const Run r = wpk_cli("bench " + tiny_model(dir) + " --threads 2 --batch 4 --iters 5 --json");
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK(count_lines(r.out) == 1);
  for (const char* key : {"\"model\"", "\"runtime\": \"wpk\"", "\"threads\": 2", "\"batch\": 4", "\"load_ms\"", "\"median_ms\"",
                          "\"p90_ms\"", "\"min_ms\"", "\"peak_rss_mb\""})
    CHECK(r.out.find(key) != std::string::npos);
  // --fix-dims: the batch fixed at load, the same JSON contract.
  const Run fixed = wpk_cli("bench " + tiny_model(dir) + " --batch 3 --iters 2 --fix-dims --json");
  REQUIRE(fixed.exit_code == 0);
  CHECK(fixed.out.find("\"batch\": 3") != std::string::npos);
}

TEST_CASE("wpk info lists inputs, outputs, op histogram and unsupported ops", "[cli]") {
  const std::string dir = wpk::testing::temp_dir("cli_info");
  wpk::testing::OnnxModelBuilder b;
  b.input("x", {-1, 3}).output("y", {-1, 3}).node("Sigmoid", {"x"}, {"t"}).node("Mystery", {"t"}, {"y"});
  const Run r = wpk_cli("info " + b.save(dir + "/m.onnx"));
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("x ") != std::string::npos);
  CHECK(r.out.find("[N, 3]") != std::string::npos);
  CHECK(r.out.find("Sigmoid") != std::string::npos);
  CHECK(r.out.find("unsupported op Mystery (opset 17)") != std::string::npos);
}

TEST_CASE("wpk info --optimized lists the passes that ran; --disable switches them off", "[cli]") {
  const std::string dir = wpk::testing::temp_dir("cli_disable");
  const std::string model = tiny_model(dir);
  const Run all = wpk_cli("info " + model + " --optimized");
  REQUIRE(all.exit_code == 0);
  CHECK(all.out.find("fuse_gelu") != std::string::npos);
  CHECK(all.out.find("layout_nhwc") != std::string::npos);
  const Run some = wpk_cli("info " + model + " --optimized --disable layout_nhwc,fuse_gelu");
  REQUIRE(some.exit_code == 0);
  CHECK(some.out.find("fuse_gelu") == std::string::npos);
  CHECK(some.out.find("layout_nhwc") == std::string::npos);
  CHECK(some.out.find("fold_pad") != std::string::npos);
  wpk::testing::OnnxModelBuilder b;  // MatMul -> Add(residual) fuses into one FusedMatMul
  b.input("x", {2, 3}).output("y", {2, 3}).float_initializer("w", {3, 3}, std::vector<float>(9, 0.5f))
      .node("MatMul", {"x", "w"}, {"m"})
      .node("Add", {"m", "x"}, {"y"});
  const Run fused = wpk_cli("info " + b.save(dir + "/mm.onnx") + " --optimized");
  REQUIRE(fused.exit_code == 0);
  CHECK(fused.out.find("= MatMul+Add") != std::string::npos);
  CHECK(wpk_cli("run " + model + " --disable fuse_gelu").exit_code == 0);
}
