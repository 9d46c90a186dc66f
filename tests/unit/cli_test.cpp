// The `wpk` command-line contract: subcommands, JSON, and one-line errors with exit code 2.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/cache_key.hpp"
#include "runtime/tuning_db.hpp"
#include "support/env_override.hpp"
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
                                 "bench " + tiny_model(dir) + " --inputs " + dir + "/nope",
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

TEST_CASE("--help anywhere prints the usage on stdout and exits 0", "[cli]") {
  for (const char* args : {"--help", "-h", "bench --help", "tune x.onnx -h", "cache --help"}) {
    INFO(args);
    const Run r = wpk_cli(args);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("wpk bench MODEL") != std::string::npos);
    CHECK(r.err.empty());
  }
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
  // --inputs: the stored input runs (a [2, 3] input, whatever --batch says); one of another
  // shape than the model takes is a one-line error.
  std::filesystem::create_directories(dir + "/in");
  wpk::save_tensor(wpk::Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3}), dir + "/in/input_0.pb");
  const Run stored = wpk_cli("bench " + tiny_model(dir) + " --inputs " + dir + "/in --iters 2 --json");
  REQUIRE(stored.exit_code == 0);
  CHECK(count_lines(stored.out) == 1);
  std::filesystem::create_directories(dir + "/bad");
  wpk::save_tensor(wpk::Tensor::from_vector<float>({0, 1}, {2}), dir + "/bad/input_0.pb");
  const Run bad = wpk_cli("bench " + tiny_model(dir) + " --inputs " + dir + "/bad --iters 2 --json");
  CHECK(bad.exit_code == 2);
  CHECK(count_lines(bad.err) == 1);
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

TEST_CASE("wpk info --optimized lists the passes that ran, and --disable switches them off", "[cli]") {
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

TEST_CASE("wpk info --optimized, run, bench and tune run stored inputs with --inputs, and say so when random ones fail", "[cli]") {
  // A lookup in a 4-row table: random ids fall outside it, as a decoder's tokens outside its
  // vocabulary. The ids' count is symbolic: tune fixes it at load from the stored ids.
  const std::string dir = wpk::testing::temp_dir("cli_info_inputs");
  wpk::testing::OnnxModelBuilder b;
  b.input("ids", {-1}, 7).output("y", {-1, 2}).float_initializer("table", {4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  b.node("Gather", {"table", "ids"}, {"y"});
  const std::string model = b.save(dir + "/lookup.onnx");
  const wpk::testing::EnvOverride empty_cache("WPK_CACHE_DIR", dir + "/random_cache");
  for (const std::string& command : {"info " + model + " --optimized", "run " + model, "bench " + model + " --iters 2",
                                    "tune " + model + " --budget-trials 4 --iters 2"}) {
    INFO(command);
    const Run random = wpk_cli(command);
    CHECK(random.exit_code == 2);
    CHECK(count_lines(random.err) == 1);
    CHECK(random.err.find("out of range") != std::string::npos);
    CHECK(random.err.find("with random inputs; pass stored ones with --inputs DIR") != std::string::npos);
  }
  std::filesystem::create_directories(dir + "/in");
  wpk::save_tensor(wpk::Tensor::from_vector<std::int64_t>({3, 0, 1}, {3}), dir + "/in/input_0.pb");
  const Run stored = wpk_cli("info " + model + " --optimized --inputs " + dir + "/in");
  REQUIRE(stored.exit_code == 0);
  CHECK(stored.out.find("optimized graph: 1 nodes") != std::string::npos);
  const Run tuned = [&] {
    const wpk::testing::EnvOverride cache("WPK_CACHE_DIR", dir + "/cache");
    return wpk_cli("tune " + model + " --budget-trials 4 --iters 2 --inputs " + dir + "/in");
  }();
  CHECK(tuned.exit_code == 0);
  CHECK(tuned.out.find("end to end, batch 1") != std::string::npos);
  // The stored input fixes the model's symbolic length at 3, not at the 1 a dynamic session declares.
  CHECK(tuned.out.find("these records serve sessions that fix the same sizes at load") != std::string::npos);
}

TEST_CASE("wpk info --dot draws the optimized graph: a box per step, its backend, fused group and edges", "[cli]") {
  const std::string dir = wpk::testing::temp_dir("cli_dot");
  wpk::testing::OnnxModelBuilder b;  // MatMul -> Add(residual) -> Sin: two steps, one fused
  b.input("x", {2, 3}).output("y", {2, 3}).float_initializer("w", {3, 3}, std::vector<float>(9, 0.5f))
      .node("MatMul", {"x", "w"}, {"m"})
      .node("Add", {"m", "x"}, {"a"})
      .node("Sin", {"a"}, {"y"});
  const std::string model = b.save(dir + "/mm.onnx");
  const Run r = wpk_cli("info " + model + " --dot " + dir + "/g.dot");
  REQUIRE(r.exit_code == 0);
  const std::string dot = slurp(dir + "/g.dot");
  CHECK(dot.rfind("digraph wpk {", 0) == 0);
  CHECK(dot.find("= MatMul+Add") != std::string::npos);
  CHECK(dot.find("s0 [") != std::string::npos);
  CHECK(dot.find("s1 [") != std::string::npos);
  CHECK(dot.find("s2 [") == std::string::npos);
  CHECK(dot.find(" -> s1 [label=\"a [2, 3]\"]") != std::string::npos);  // the value and its shape on the edge
  CHECK(dot.find("-> out_") != std::string::npos);
  CHECK(dot.find("s1 [fillcolor=\"#e0e0e0\", label=\"Sin  (Sin_2)\\nreference\"]") != std::string::npos);
  const Run svg = wpk_cli("info " + model + " --svg " + dir + "/g.svg");
  if (std::system("command -v dot >/dev/null 2>&1") == 0) {
    REQUIRE(svg.exit_code == 0);
    CHECK(slurp(dir + "/g.svg").find("<svg") != std::string::npos);
  } else {
    CHECK(svg.exit_code == 2);
    CHECK(svg.err.find("graphviz") != std::string::npos);
    CHECK(count_lines(svg.err) == 1);
  }
}

TEST_CASE("wpk cache ls, prune and clear a cache folder", "[cli][cache]") {
  namespace fs = std::filesystem;
  const std::string dir = wpk::testing::temp_dir("cli_cache");
  const std::string v1 = dir + "/" + wpk::tuning_file_name(wpk::kCacheFormatVersion);
  wpk::TuningDb(dir).store("op=A", "cpu", 1.0, "A");  // this machine
  const std::string foreign_key = "model=Foreign CPU 9000;flags=sse2,avx;cpus=4;compiler=11.4.0;format=1";
  const std::string foreign = wpk::hex64(wpk::fnv1a64(foreign_key));
  std::string line = foreign + "\t" + wpk::hex64(wpk::fnv1a64("op=F")) + "\tonednn\t1.000\tRelu";
  line += "\t" + wpk::hex64(wpk::fnv1a64(line));
  std::ofstream(v1, std::ios::app) << line << "\n# env " << foreign << "\t" << foreign_key << "\n";
  std::ofstream(dir + "/tuning-v0.tsv") << "old\n";
  std::ofstream(dir + "/tuning-v1.tsv.tmp.1.0") << "half";
  std::ofstream(dir + "/notes.txt") << "mine";

  Run r = wpk_cli("cache ls --dir " + dir);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK(r.out.find(v1 + "  " + std::to_string(fs::file_size(v1)) + " bytes  1 entries  this machine\n") != std::string::npos);
  CHECK(r.out.find(v1 + "  " + std::to_string(fs::file_size(v1)) +
                   " bytes  1 entries  another machine: Foreign CPU 9000, 4 cpus, compiler 11.4.0, format 1, flags sse2,avx\n") !=
        std::string::npos);
  CHECK(r.out.find(dir + "/tuning-v0.tsv  4 bytes  0 entries  [format 0: unused") != std::string::npos);
  CHECK(r.out.find(dir + "/tuning-v1.tsv.tmp.1.0  left over") != std::string::npos);
  CHECK(r.out.find("notes.txt") == std::string::npos);

  r = wpk_cli("cache prune --dir " + dir);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("removed " + dir + "/tuning-v0.tsv\n") != std::string::npos);
  CHECK(r.out.find("removed 1 entries of another machine: Foreign CPU 9000") != std::string::npos);
  CHECK(r.out.find("kept 1 entries of this machine in " + v1) != std::string::npos);
  CHECK(wpk::TuningDb(dir).lookup("op=A") == std::optional<std::string>("cpu"));
  r = wpk_cli("cache ls --dir " + dir);
  CHECK(r.out.find("this machine") != std::string::npos);
  CHECK(r.out.find("another machine") == std::string::npos);

  r = wpk_cli("cache clear --dir " + dir);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == "removed " + v1 + "\nremoved " + v1 + ".lock\nremoved " + dir + "/tuning-v1.tsv.tmp.1.0\n");
  CHECK(slurp(dir + "/notes.txt") == "mine");
  CHECK(wpk_cli("cache ls --dir " + dir).out == "cache folder " + dir + " is empty\n");
  CHECK(wpk_cli("cache clear --dir " + dir).out == "nothing to clear in " + dir + "\n");
  CHECK(wpk_cli("cache ls --dir " + dir + "/missing").exit_code == 0);

  for (const std::string& args : {std::string("cache"), "cache frob --dir " + dir, "cache ls --dir " + dir + "/notes.txt",
                                  "cache ls prune --dir " + dir, std::string("cache ls --dir")}) {
    INFO(args);
    const Run bad = wpk_cli(args);
    CHECK(bad.exit_code == 2);
    CHECK(count_lines(bad.err) == 1);
    CHECK(bad.out.empty());
  }
}
