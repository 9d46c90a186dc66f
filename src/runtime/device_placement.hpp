#pragma once
// Which nodes run on the GPU. Every node the CUDA backend can run (backends/cuda/support.hpp) is
// priced on the GPU and on the CPU by roofline models, and every change of device between
// neighbours in the graph's order by the bytes that must cross the link; a dynamic program over
// the order picks, for each node, the device with the least total time. Each run of consecutive
// GPU nodes becomes one com.wpk CudaRegion node holding them as its body (backends/cuda/
// cuda_backend.hpp): values cross between host and device only at a region's edge.
#include <string>

#include "wpk/graph.hpp"
#include "wpk/optimizer.hpp"

namespace wpk {

// A GPU as the placement prices it. Absolute values are rough; they decide only where the GPU's
// gain beats the cost of the copies.
struct GpuModel {
  std::string name;
  double flops = 0;                   // float32 operations per second, sustained
  double bytes_per_second = 0;        // device memory
  double launch_seconds = 2e-6;       // per kernel, queued behind others on a stream
  double link_bytes_per_second = 25e9;  // host <-> device
  double link_seconds = 10e-6;        // per copy
};

// The model of the GPU the driver names ("NVIDIA H200"): A100, H100 and H200 from their data
// sheets, any other from its multiprocessor count.
GpuModel gpu_model(const std::string& device_name, int multiprocessors);

struct PlacementSummary {
  int regions = 0;
  int nodes_on_gpu = 0;
  int nodes = 0;
  double predicted_seconds = 0;       // the chosen placement, by the models
  double predicted_cpu_seconds = 0;   // everything on the CPU, by the same models
};

// Leaves off the optimizer passes whose rewrites only the CPU runs, for a graph a GPU may take:
// the NHWC layout and the concat rewrites that need it (they would put transposes around the
// GPU's NCHW regions), and the element-wise chain fusion (its com.wpk ElementwiseChain is a CPU
// node the CUDA backend does not run; a region groups its element-wise ops itself).
void leave_off_cpu_only_passes(OptimizerOptions& options);

// Rewrites `g` (optimized, shapes annotated) as the placement decides; `cpu_threads` prices the
// CPU side.
PlacementSummary place_on_gpu(Graph& g, const GpuModel& gpu, int cpu_threads);

}  // namespace wpk
