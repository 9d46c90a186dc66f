#include "core/cpu_features.hpp"

#include <cpuid.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

namespace wpk {
namespace {

struct Regs {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

Regs cpuid(unsigned leaf, unsigned subleaf = 0) {
  Regs r;
  if (!__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx)) return Regs{};
  return r;
}

bool bit(unsigned reg, int b) { return (reg >> b) & 1u; }

// Register state the OS saves on context switch (XCR0): without it the registers are unusable
// even where CPUID lists the instructions.
std::uint64_t os_saved_state() {
  unsigned eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<std::uint64_t>(edx) << 32) | eax;
}

std::string brand_string() {
  if (cpuid(0x80000000).eax < 0x80000004) return "unknown";
  char text[49] = {};
  for (unsigned i = 0; i < 3; ++i) {
    const Regs r = cpuid(0x80000002 + i);
    std::memcpy(text + 16 * i, &r, 16);
  }
  std::string s(text);
  s.erase(0, s.find_first_not_of(' '));
  s.erase(s.find_last_not_of(' ') + 1);
  return s.empty() ? "unknown" : s;
}

CpuFeatures probe() {
  CpuFeatures f;
  f.model = brand_string();
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  f.cpus = online > 0 ? static_cast<int>(online) : 1;
  const unsigned max_leaf = cpuid(0).eax;
  const Regs l1 = cpuid(1);
  f.sse4_2 = bit(l1.ecx, 20);
  const bool osxsave = bit(l1.ecx, 27);
  const std::uint64_t xcr0 = osxsave ? os_saved_state() : 0;
  const bool ymm = (xcr0 & 0x6) == 0x6, zmm = (xcr0 & 0xe6) == 0xe6, tiles = (xcr0 & 0x60000) == 0x60000;
  f.avx = ymm && bit(l1.ecx, 28);
  f.fma = f.avx && bit(l1.ecx, 12);
  f.f16c = f.avx && bit(l1.ecx, 29);
  if (max_leaf < 7) return f;
  const Regs l7 = cpuid(7, 0), l7s1 = cpuid(7, 1);
  f.avx2 = f.avx && bit(l7.ebx, 5);
  f.avx_vnni = f.avx2 && bit(l7s1.eax, 4);
  f.avx512f = zmm && bit(l7.ebx, 16);
  f.avx512dq = f.avx512f && bit(l7.ebx, 17);
  f.avx512cd = f.avx512f && bit(l7.ebx, 28);
  f.avx512bw = f.avx512f && bit(l7.ebx, 30);
  f.avx512vl = f.avx512f && bit(l7.ebx, 31);
  f.sha = bit(l7.ebx, 29) && bit(l1.ecx, 9) && bit(l1.ecx, 19);  // SHA, SSSE3, SSE4.1
  f.avx512_vnni = f.avx512f && bit(l7.ecx, 11);
  f.avx512_fp16 = f.avx512f && bit(l7.edx, 23);
  f.avx512_bf16 = f.avx512f && bit(l7s1.eax, 5);
  f.amx_tile = tiles && bit(l7.edx, 24);
  f.amx_bf16 = f.amx_tile && bit(l7.edx, 22);
  f.amx_int8 = f.amx_tile && bit(l7.edx, 25);
  return f;
}

}  // namespace

std::string CpuFeatures::flags() const {
  const std::pair<const char*, bool> all[] = {
      {"amx_bf16", amx_bf16},       {"amx_int8", amx_int8},       {"amx_tile", amx_tile}, {"avx", avx},
      {"avx2", avx2},               {"avx512_bf16", avx512_bf16}, {"avx512_fp16", avx512_fp16},
      {"avx512_vnni", avx512_vnni}, {"avx512bw", avx512bw},       {"avx512cd", avx512cd}, {"avx512dq", avx512dq},
      {"avx512f", avx512f},         {"avx512vl", avx512vl},       {"avx_vnni", avx_vnni}, {"f16c", f16c},
      {"fma", fma},                 {"sse4_2", sse4_2}};
  std::string s;
  for (const auto& [name, present] : all)
    if (present) s += (s.empty() ? "" : ",") + std::string(name);
  return s;
}

std::string CpuFeatures::fingerprint() const {
  return "model=" + model + ";flags=" + flags() + ";cpus=" + std::to_string(cpus);
}

namespace {

const char* isa_cap_text() {
  const char* v = std::getenv("WPK_MAX_ISA");
  return v ? v : "";
}

// The cap a WPK_MAX_ISA value names (kNone for an empty one); nullopt for a name it does not know.
std::optional<IsaCap> isa_cap_named(const std::string& v) {
  if (v.empty()) return IsaCap::kNone;
  if (v == "avx2") return IsaCap::kAvx2;
  if (v == "avx512") return IsaCap::kAvx512;
  return std::nullopt;
}

}  // namespace

IsaCap isa_cap() { return isa_cap_named(isa_cap_text()).value_or(IsaCap::kNone); }

std::string isa_cap_problem() {
  const std::string v = isa_cap_text();
  if (isa_cap_named(v)) return "";
  return "WPK_MAX_ISA='" + v + "' is not an instruction set wpk can cap the CPU at (avx2, avx512)";
}

CpuFeatures capped(CpuFeatures f, IsaCap cap) {
  if (cap == IsaCap::kNone) return f;
  f.amx_tile = f.amx_int8 = f.amx_bf16 = false;
  if (cap == IsaCap::kAvx512) return f;
  f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512cd = false;
  f.avx512_vnni = f.avx512_bf16 = f.avx512_fp16 = f.avx_vnni = false;
  return f;
}

const CpuFeatures& cpu_features_uncapped() {
  static const CpuFeatures features = probe();
  return features;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = capped(cpu_features_uncapped(), isa_cap());
  return features;
}

}  // namespace wpk
