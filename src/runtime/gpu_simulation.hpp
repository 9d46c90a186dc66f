#pragma once
// Tuning for a GPU that is not on this machine (`wpk tune MODEL --device cuda --simulate sm_90`):
// the model is placed as a CUDA session on that GPU would place it, with the GPU's figures from
// the cost model's table, and each distinct convolution of its regions searches the generated
// kernel's schedules with the session's strategy, every candidate compiled by NVRTC for the
// architecture (its registers read from the cubin, the cubin kept in the cache folder) and timed
// by the GPU cost model; cuDNN by the cost model's library roofline. Every
// time it reports is modelled.
#include <string>
#include <vector>

#include "runtime/device_placement.hpp"
#include "search/gpu_cost_model.hpp"
#include "wpk/graph.hpp"
#include "wpk/options.hpp"

namespace wpk {

struct SimulatedConv {
  std::string node, signature;
  std::string schedule;            // the best generated schedule, as knob=value,...
  int registers = -1;              // its registers per thread, from the cubin
  double generated_seconds = 0;    // modelled
  double library_seconds = 0;      // cuDNN, modelled
  std::size_t schedules_tried = 0;
  int repeats = 1;                 // convolutions of the model with this signature
};

struct GpuSimulation {
  search::GpuSpec gpu;
  PlacementSummary placement;
  std::vector<SimulatedConv> convs;
  std::size_t compiled = 0, from_cache = 0;  // cubins
};

// `graph` as loaded; options: fixed_dims, threads, tuning_algorithm, tuning_seed, tuning_trials,
// cache_dir, optimizer. `arch` "sm_80" or "sm_90" (or a GPU's name). Throws Error(InvalidArgument)
// for an architecture without a table, Error(Unsupported) without NVRTC when there is a
// convolution to compile.
GpuSimulation simulate_gpu_tuning(Graph graph, const SessionOptions& options, const std::string& arch);

}  // namespace wpk
