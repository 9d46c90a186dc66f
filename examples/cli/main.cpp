// wpk — run, benchmark and inspect ONNX models.
//   wpk run MODEL [--inputs DIR] [--outputs DIR]
//   wpk bench MODEL [--threads N] [--batch B] [--iters K] [--json] [--profile] [--trace FILE] [--tune]
//   wpk info MODEL [--optimized [--dot FILE] [--svg FILE]]
//   wpk cache ls|clear|prune [--dir DIR]
//   wpk quantize MODEL OUT --calibrate DIR
// Errors: one line on stderr and exit code 2.
#include <cstdio>
#include <cstring>

#include "cli.hpp"

namespace {
const char* kUsage =
    "usage:\n"
    "  wpk run MODEL [--inputs DIR] [--outputs DIR] [--batch B] [--dim NAME=SIZE] [--disable PASS,...]\n"
    "  wpk bench MODEL [--threads N] [--batch B] [--iters K] [--warmup W] [--dim NAME=SIZE] [--inputs DIR] [--json]\n"
    "                  [--fix-dims] [--profile] [--trace FILE.json] [--tune] [--idle MS] [--clients C] [--disable PASS,...]\n"
    "  wpk info MODEL [--optimized [--batch B] [--dim NAME=SIZE] [--inputs DIR] [--dot FILE] [--svg FILE] [--disable PASS,...]]\n"
    "  wpk tune MODEL [--algo ga|rl|random|grid|compare] [--budget-seconds S] [--budget-trials N] [--seed K]\n"
    "                 [--threads N] [--batch B] [--dim NAME=SIZE] [--inputs DIR] [--iters K] [--disable PASS,...]\n"
    "                 [--simulate sm_80|sm_90]\n"
    "  wpk quantize MODEL OUT --calibrate DIR [--method minmax|percentile] [--percentile P] [--reduce-range] [--threads N]\n"
    "                 int8 QDQ model calibrated on DIR's inputs (input_0.pb, ... or test_data_set_*/)\n"
    "  run, bench, info, tune: [--disable-kernels BACKEND[:KERNEL],...] [--precision fp32|bf16] [--device cpu|cuda|auto]\n"
    "  --disable switches optimizer passes off by name; `wpk info --optimized` lists them\n"
    "  --disable-kernels leaves candidates out, as profiles name them: cpu, onednn, cpu:any_concat\n"
    "  wpk cache ls|clear|prune [--dir DIR]  the tuning cache folder (default: where sessions put it)\n";
}

int main(int argc, char** argv) {
  using namespace wpk::cli;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (int i = 2; i < argc; ++i)
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::fputs(kUsage, stdout);
      return 0;
    }
  const std::string cmd = argv[1];
  try {
    if (cmd == "run") return cmd_run(parse_args(argc, argv, 2, {}, {"--inputs", "--outputs", "--batch", "--dim", "--disable", "--disable-kernels", "--precision", "--device"}));
    if (cmd == "bench")
      return cmd_bench(parse_args(argc, argv, 2, {"--json", "--profile", "--tune", "--fix-dims"},
                                  {"--threads", "--batch", "--iters", "--warmup", "--dim", "--inputs", "--trace", "--idle", "--clients", "--disable", "--disable-kernels", "--precision", "--device"}));
    if (cmd == "cache") return cmd_cache(argc, argv);
    if (cmd == "quantize")
      return cmd_quantize(parse_args(argc, argv, 2, {"--reduce-range"}, {"--calibrate", "--method", "--percentile", "--threads", "--disable", "--disable-kernels"},
                                     {"MODEL", "OUT"}));
    if (cmd == "info") return cmd_info(parse_args(argc, argv, 2, {"--optimized"}, {"--batch", "--dim", "--inputs", "--dot", "--svg", "--disable", "--disable-kernels", "--precision", "--device"}));
    if (cmd == "tune")
      return cmd_tune(parse_args(argc, argv, 2, {},
                                 {"--algo", "--budget-seconds", "--budget-trials", "--seed", "--threads", "--batch", "--dim", "--inputs",
                                  "--iters", "--disable", "--disable-kernels", "--precision", "--device", "--simulate"}));
    std::fprintf(stderr, "wpk: unknown command '%s'\n%s", cmd.c_str(), kUsage);
    return 2;
  } catch (const wpk::Error& e) {
    std::fprintf(stderr, "wpk: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wpk: internal error: %s\n", e.what());
    return 2;
  }
}
