#pragma once
// The cuda backend runs device regions: com.wpk CudaRegion nodes that device placement
// (runtime/device_placement.hpp) makes of the nodes it puts on the GPU. A region's kernel holds
// the region's graph on the device: weights uploaded once, every intermediate in device memory,
// its nodes as cuDNN, cuBLAS and generated kernels (device_op.hpp) on one stream; a run copies the
// region's inputs in and its outputs out, and nothing else crosses.
#include "backends/cuda/cuda_backend_names.hpp"
#include "backends/kernel.hpp"

namespace wpk::cuda {

class CudaBackend : public Backend {
 public:
  std::string name() const override { return "cuda"; }
  // The library variants measured at load that `disabled_kernels` may leave out ("cuda:cublaslt"):
  // a way round a library release that misbehaves on some device.
  std::vector<std::string> kernel_names() const override { return {kCublasLtVariant, kCudnnGraphVariant}; }
  std::string why_unsupported(const Node& node, const Graph& graph) const override;
  std::unique_ptr<Kernel> prepare(const Node& node, const Graph& graph) const override;
  std::string version() const override;
  bool runs_in_place(const Node&) const override { return false; }
  bool uses_host_threads() const override { return false; }
};

}  // namespace wpk::cuda
