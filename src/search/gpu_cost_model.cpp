#include "search/gpu_cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace wpk::search {
namespace {

// Latency of a load that hits L1, in cycles: the floor of an iteration when too few warps share a
// multiprocessor to hide it.
constexpr double kLoadLatencyCycles = 40;
// What a staged copy's barrier waits for: the copy's loads from memory (fitted to staged
// convolutions timed on an H200, tests/unit/backends/data/gpu_conv_staged_trials_h200.txt).
constexpr double kStageLatencyCycles = 1000;

const std::vector<GpuSpec>& table() {
  static const std::vector<GpuSpec> specs = {
      {"A100", 80, 108, 1.41e9, 64, 2048, 32, 65536, 164 * 1024, 2.0e12, 3e-6},
      {"H100", 90, 132, 1.98e9, 128, 2048, 32, 65536, 228 * 1024, 3.35e12, 3e-6},
      {"H200", 90, 132, 1.98e9, 128, 2048, 32, 65536, 228 * 1024, 4.8e12, 3e-6},
  };
  return specs;
}

}  // namespace

const GpuSpec* gpu_spec(const std::string& name) {
  for (const GpuSpec& s : table())
    if (name.find(s.name) != std::string::npos) return &s;
  if (name == "sm_80") return &table()[0];
  if (name == "sm_90") return &table()[1];
  return nullptr;
}

double predict_gpu_seconds(const GpuSpec& gpu, const GpuLaunch& launch, const GpuLoop& loop) {
  const std::int64_t warps = (std::max<std::int64_t>(1, launch.threads) + 31) / 32;
  const std::int64_t registers = std::max(16, launch.registers);
  // From sm_90 the driver reserves a kilobyte of shared memory in every block; a spec without the
  // multiprocessor's figure leaves shared memory out of residency.
  const std::int64_t per_block = launch.shared_bytes + (gpu.sm >= 90 ? 1024 : 0);
  const std::int64_t by_shared =
      gpu.shared_bytes > 0 && per_block > 0 ? gpu.shared_bytes / per_block : static_cast<std::int64_t>(gpu.max_blocks);
  const std::int64_t resident = std::max<std::int64_t>(
      1, std::min({static_cast<std::int64_t>(gpu.max_blocks), gpu.max_threads / (warps * 32),
                   gpu.registers / (registers * warps * 32), by_shared}));
  const std::int64_t per_wave = static_cast<std::int64_t>(gpu.multiprocessors) * resident;
  const double waves = std::ceil(static_cast<double>(launch.blocks) / static_cast<double>(per_wave));
  // The warps one multiprocessor holds at a time (fewer than it could when the grid is small).
  const double blocks_here = std::min<double>(static_cast<double>(resident),
                                              std::ceil(static_cast<double>(launch.blocks) / gpu.multiprocessors));
  const double warps_here = blocks_here * static_cast<double>(warps);
  const double fma_issue = loop.fma / (gpu.fp32_lanes / 32.0);
  const double cycles_per_step = std::max(warps_here * (fma_issue + loop.cache_lines + loop.shared_loads), kLoadLatencyCycles);
  const double stage_cycles = loop.stages * kStageLatencyCycles / std::sqrt(std::max(1.0, blocks_here));
  return waves * (loop.steps * cycles_per_step + stage_cycles) / gpu.clock_hz + gpu.launch_seconds;
}

double predict_library_seconds(const GpuSpec& gpu, double flops, double bytes) {
  // Efficiency = kMost * flops / (flops + half), half the work that fills the GPU halfway.
  constexpr double kMost = 0.32, kHalfPerMultiprocessor = 3e6;
  const double half = kHalfPerMultiprocessor * gpu.multiprocessors;
  const double peak = gpu.multiprocessors * gpu.fp32_lanes * 2.0 * gpu.clock_hz;
  const double efficiency = kMost * flops / (flops + half);
  return std::max(flops / (efficiency * peak), bytes / gpu.memory_bytes_per_second) + gpu.launch_seconds;
}

}  // namespace wpk::search
