#pragma once
// The one CPU probe: what the processor (and the operating system, which must save the wider
// registers) lets code use, read once with CPUID. Kernels say what they need from it; cache keys
// and tests read the same answers. Whether a kernel the CPU can run *should* run is not decided
// here: that is the search's and the cost model's question.
#include <string>

namespace wpk {

struct CpuFeatures {
  std::string model;  // the CPUID brand string, e.g. "AMD EPYC 7B13 64-Core Processor"
  int cpus = 1;       // online CPUs
  bool sse4_2 = false, avx = false, avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512cd = false;
  bool avx512_vnni = false, avx512_bf16 = false, avx512_fp16 = false, avx_vnni = false;
  bool amx_tile = false, amx_int8 = false, amx_bf16 = false;
  // SHA extensions (with SSSE3 and SSE4.1): checksums of compiled kernels only
  // (codegen::use_sha_instructions), so not among flags() and the fingerprint, which say what
  // kernels may use.
  bool sha = false;

  // AVX2 with FMA: what wpk's 8-lane kernels need.
  bool avx2_fma() const { return avx2 && fma; }
  // AVX-512 F, BW, VL and DQ: what wpk's and oneDNN's 16-lane kernels need.
  bool avx512_core() const { return avx512f && avx512bw && avx512vl && avx512dq; }
  // The features present, by their /proc/cpuinfo names, sorted: "avx,avx2,avx512f,...".
  std::string flags() const;
  // "model=...;flags=...;cpus=N": the device part of every cache key.
  std::string fingerprint() const;
};

// A cap on what the probe reports, as if the CPU had less: kAvx2 keeps AVX2, FMA and F16C (an
// AMD Zen 3's vectors; no AVX-512, AVX-VNNI or AMX), kAvx512 drops AMX only. The environment
// variable WPK_MAX_ISA (avx2, avx512) sets it for the process; kernels, cache keys, the code
// generator and oneDNN (onednn_common.cpp) all see the capped answers, so one machine runs and
// tests what a lesser one would.
enum class IsaCap { kNone, kAvx2, kAvx512 };
IsaCap isa_cap();
// What is wrong with WPK_MAX_ISA's value ("" when it is unset, empty or known): sessions fail
// with it, the probe ignores such a value.
std::string isa_cap_problem();
// `f` less what `cap` takes away.
CpuFeatures capped(CpuFeatures f, IsaCap cap);

// The processor as probed, capped by WPK_MAX_ISA: what everything in wpk asks.
const CpuFeatures& cpu_features();
// The processor as probed, without the cap.
const CpuFeatures& cpu_features_uncapped();

}  // namespace wpk
