#pragma once
// A GPU cost model for generated kernels: how long a launch of `blocks` blocks of `threads`
// threads, each running a loop of `steps` iterations, takes on a GPU described by its data-sheet
// figures. Occupancy (blocks resident per multiprocessor, limited by threads, blocks, registers
// and shared memory) gives the waves and the warps that share a multiprocessor; an iteration of a warp
// costs its FMA instructions (four warp instructions a cycle) plus the cache lines its loads
// touch (one a cycle through L1) and its shared-memory loads, and no less than the latency of a
// load when too few warps hide it; a copy into shared memory adds a memory latency at its barrier,
// which other resident blocks partly hide. Ranks schedules of one kernel; absolute values are rough. No graphs, no device: plain data.
#include <cstdint>
#include <string>

namespace wpk::search {

struct GpuSpec {
  std::string name;
  int sm = 0;                     // compute capability as 90
  int multiprocessors = 0;
  double clock_hz = 0;            // boost clock
  int fp32_lanes = 128;           // per multiprocessor
  int max_threads = 2048;         // resident per multiprocessor
  int max_blocks = 32;            // resident per multiprocessor
  int registers = 65536;          // per multiprocessor
  int shared_bytes = 0;           // shared memory per multiprocessor
  double memory_bytes_per_second = 0;
  double launch_seconds = 3e-6;   // a kernel's fixed cost inside a captured graph
};

// "A100", "H100", "H200" (anywhere in a device name, as "NVIDIA H100 80GB HBM3"), or an
// architecture "sm_80" / "sm_90" (the A100's and H100's figures); null for one it has no table for.
const GpuSpec* gpu_spec(const std::string& name_or_arch);

// One thread's work per iteration of its loop.
struct GpuLoop {
  double steps = 0;         // iterations (a convolution's reduction length)
  double fma = 0;           // FMA instructions per iteration
  double cache_lines = 0;   // distinct 128-byte lines a warp's loads touch per iteration
  double shared_loads = 0;  // a warp's shared-memory load cycles per iteration
  double stages = 0;        // copies into shared memory over the loop, each ended by a barrier
};

struct GpuLaunch {
  std::int64_t blocks = 1, threads = 1;
  int registers = 32;  // per thread
  std::int64_t shared_bytes = 0;  // per block
};

double predict_gpu_seconds(const GpuSpec& gpu, const GpuLaunch& launch, const GpuLoop& loop);

// A library's convolution or product (cuDNN, cuBLAS) of `flops` moving `bytes`: a roofline whose
// share of the float32 peak grows with the work until the GPU is full (fitted to cuDNN's times).
double predict_library_seconds(const GpuSpec& gpu, double flops, double bytes);

}  // namespace wpk::search
