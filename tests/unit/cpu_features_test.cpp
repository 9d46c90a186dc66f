// The CPU probe (core/cpu_features.hpp) against what Linux reports in /proc/cpuinfo: the kernel
// lists a feature only where the CPU has it and the OS saves its registers, which is what the
// probe must answer too.
#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "core/cpu_features.hpp"

namespace {

std::set<std::string> cpuinfo_flags(std::string& model) {
  std::ifstream in("/proc/cpuinfo");
  std::set<std::string> flags;
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name" && model.empty()) model = value;
    if (key == "flags" && flags.empty()) {
      std::istringstream words(value);
      for (std::string w; words >> w;) flags.insert(w);
    }
  }
  return flags;
}

}  // namespace

TEST_CASE("the CPU probe agrees with /proc/cpuinfo", "[cpu]") {
  std::string model;
  const std::set<std::string> listed = cpuinfo_flags(model);
  if (listed.empty()) {
    WARN("no /proc/cpuinfo flags here: nothing to compare with");
    return;
  }
  const wpk::CpuFeatures& f = wpk::cpu_features();
  const std::pair<const char*, bool> probed[] = {
      {"sse4_2", f.sse4_2},           {"avx", f.avx},           {"avx2", f.avx2},           {"fma", f.fma},
      {"f16c", f.f16c},               {"avx512f", f.avx512f},   {"avx512bw", f.avx512bw},   {"avx512vl", f.avx512vl},
      {"avx512dq", f.avx512dq},       {"avx512cd", f.avx512cd}, {"avx512_vnni", f.avx512_vnni},
      {"avx512_bf16", f.avx512_bf16}, {"avx512_fp16", f.avx512_fp16}, {"avx_vnni", f.avx_vnni},
      {"amx_tile", f.amx_tile},       {"amx_int8", f.amx_int8}, {"amx_bf16", f.amx_bf16}};
  for (const auto& [name, present] : probed) {
    INFO(name);
    CHECK(present == (listed.count(name) == 1));
  }
  CHECK(f.model == model);
  CHECK(f.cpus >= 1);
  CHECK(f.fingerprint().find("flags=" + f.flags()) != std::string::npos);
}
