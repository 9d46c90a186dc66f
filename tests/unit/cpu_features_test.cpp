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
  const wpk::CpuFeatures& f = wpk::cpu_features_uncapped();
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

// WPK_MAX_ISA: a cap takes features away and never adds one; the CPU probed without a cap is the
// one everything sees.
TEST_CASE("an instruction-set cap takes away what a lesser CPU lacks", "[cpu]") {
  wpk::CpuFeatures all = wpk::cpu_features_uncapped();
  all.avx = all.avx2 = all.fma = all.f16c = true;
  all.avx512f = all.avx512bw = all.avx512vl = all.avx512dq = all.avx512cd = true;
  all.avx512_vnni = all.avx512_bf16 = all.avx512_fp16 = all.avx_vnni = true;
  all.amx_tile = all.amx_int8 = all.amx_bf16 = true;

  const wpk::CpuFeatures avx2 = wpk::capped(all, wpk::IsaCap::kAvx2);
  CHECK(avx2.flags() == "avx,avx2,f16c,fma" + std::string(all.sse4_2 ? ",sse4_2" : ""));
  CHECK(avx2.avx2_fma());
  CHECK(!avx2.avx512_core());
  CHECK(avx2.fingerprint() != all.fingerprint());

  const wpk::CpuFeatures avx512 = wpk::capped(all, wpk::IsaCap::kAvx512);
  CHECK(avx512.avx512_core());
  CHECK(avx512.avx512_bf16);
  CHECK(!avx512.amx_tile);
  CHECK(!avx512.amx_int8);

  wpk::CpuFeatures none = all;
  none.avx2 = none.fma = false;
  CHECK(!wpk::capped(none, wpk::IsaCap::kAvx2).avx2);  // a cap adds nothing
  CHECK(!wpk::capped(none, wpk::IsaCap::kAvx2).fma);
  CHECK(wpk::capped(all, wpk::IsaCap::kNone).flags() == all.flags());

  if (wpk::isa_cap() == wpk::IsaCap::kNone)
    CHECK(wpk::cpu_features().flags() == wpk::cpu_features_uncapped().flags());
  else
    CHECK(wpk::cpu_features().flags() == wpk::capped(wpk::cpu_features_uncapped(), wpk::isa_cap()).flags());
}
