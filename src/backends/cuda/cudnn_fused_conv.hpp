#pragma once
// A convolution with its epilogue, act(conv(x, w) + bias + z), as one cuDNN operation graph (its
// graph API): cuDNN's heuristic names the engines that can run the whole graph, and those that
// compute in float32 as the model asks (no tensor-core TF32, no down-converted inputs) become
// execution plans the convolution op measures beside its other candidates. Where cuDNN has no
// such engine for the graph, there are no plans and nothing else changes.
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/cuda_api.hpp"
#include "backends/cuda/generated_kernels.hpp"

namespace wpk::cuda {

// The activation as cuDNN's pointwise operation: its mode and, for Clip, the bounds; none for an
// activation cuDNN's pointwise modes do not compute as ONNX defines it.
struct CudnnActivation {
  cudnnPointwiseMode_t mode = CUDNN_POINTWISE_RELU_FWD;
  std::optional<double> lower_clip, upper_clip;
};
std::optional<CudnnActivation> cudnn_activation(const std::string& activation, const std::vector<float>& params);

// One cuDNN backend descriptor, destroyed with its owner.
class BackendDescriptor {
 public:
  explicit BackendDescriptor(cudnnBackendDescriptorType_t type);
  ~BackendDescriptor();
  BackendDescriptor(const BackendDescriptor&) = delete;
  BackendDescriptor& operator=(const BackendDescriptor&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

class CudnnFusedConv {
 public:
  // The operation graph for `g` with epilogue `e` on `dnn`'s device; throws Error when cuDNN refuses the graph or a
  // part of it, Error(Unsupported) when the activation has no cuDNN form. With no handle (null),
  // the graph is built and checked by cuDNN on the host alone (tests without a GPU); it gets no
  // plans.
  CudnnFusedConv(cudnnHandle_t dnn, const ConvGeometry& g, const ConvEpilogue& e);
  ~CudnnFusedConv();
  CudnnFusedConv(const CudnnFusedConv&) = delete;
  CudnnFusedConv& operator=(const CudnnFusedConv&) = delete;

  // Builds execution plans, in cuDNN's heuristic order (mode A, then its fallback list), for the
  // engines that compute in float32 exactly, compile nothing at load and need at most
  // `max_workspace` bytes; eight at most.
  void make_plans(cudnnHandle_t dnn, std::size_t max_workspace);
  std::size_t plans() const { return plans_.size(); }
  std::size_t workspace(std::size_t plan) const;
  // How many engine configurations were offered and why some were passed over, for logs.
  const std::string& passed_over() const { return passed_over_; }
  // Runs plan `plan` on `dnn`'s stream. bias and z are read only when the geometry has them.
  void launch(cudnnHandle_t dnn, std::size_t plan, CUdeviceptr x, CUdeviceptr w, CUdeviceptr bias, CUdeviceptr z,
              CUdeviceptr y, CUdeviceptr workspace) const;

 private:
  struct Plan;
  ConvEpilogue e_;
  std::vector<std::unique_ptr<BackendDescriptor>> keep_;  // tensors and ops the graph refers to
  std::unique_ptr<BackendDescriptor> graph_;
  std::vector<std::unique_ptr<Plan>> plans_;
  std::string passed_over_;
  mutable std::mutex mutex_;
};

}  // namespace wpk::cuda
