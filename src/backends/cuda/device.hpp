#pragma once
// The CUDA device sessions run on (the first one the driver reports), its primary context, and
// RAII holders for what wpk allocates on it.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "backends/cuda/cuda_api.hpp"
#include "search/gpu_cost_model.hpp"
#include "wpk/tensor.hpp"

namespace wpk::cuda {

struct DeviceInfo {
  std::string name;            // "NVIDIA H200"
  int sm = 0;                  // compute capability as 90
  int multiprocessors = 0;
  std::int64_t memory_bytes = 0;
  int driver_version = 0;      // as 13000
  double clock_hz = 0;
  int shared_bytes_per_multiprocessor = 0;
};

// The cost model's figures for the device: its table when it has one, else from its attributes.
search::GpuSpec gpu_spec_of(const DeviceInfo& info);

class Device {
 public:
  // The process's device, started once; throws Error(Unsupported) where there is none.
  static const Device& get();
  const DeviceInfo& info() const { return info_; }
  // Makes the device's context current on the calling thread (cheap; every entry point calls it).
  void activate() const;

 private:
  Device();
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  DeviceInfo info_;
};

// Device memory, freed with its holder.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes, const std::string& what);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = 0, o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  CUdeviceptr get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

 private:
  CUdeviceptr ptr_ = 0;
  std::size_t bytes_ = 0;
};

// A caller's output in device memory (Tensor::on_device), freed with the tensor's last copy.
Tensor device_tensor(DType dtype, const Shape& shape, const std::string& what);
// A device tensor's bytes copied to the host.
Tensor copy_to_host(const Tensor& device);

// A stream with the cuBLAS, cuBLASLt and cuDNN handles bound to it: what one sequence of launches uses.
class StreamHandles {
 public:
  StreamHandles();
  ~StreamHandles();
  StreamHandles(const StreamHandles&) = delete;
  StreamHandles& operator=(const StreamHandles&) = delete;
  CUstream stream() const { return stream_; }
  cublasHandle_t blas() const { return blas_; }
  cublasLtHandle_t lt() const { return lt_; }  // not bound to the stream: each call names it
  cudnnHandle_t dnn() const { return dnn_; }
  void synchronize(const std::string& what) const;

 private:
  void release();
  CUstream stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  cudnnHandle_t dnn_ = nullptr;
  static constexpr std::size_t kBlasWorkspace = std::size_t(32) << 20;
  DeviceBuffer blas_workspace_;
};

// `launch` (work it enqueues on `h`'s stream) recorded once as a CUDA graph, replayed by one
// launch: what a region's run costs the CPU is then one call, whatever its number of kernels.
class CapturedWork {
 public:
  // Runs `launch` once first (libraries allocate their lazy buffers outside the capture); throws
  // Error when the work cannot be captured (the caller then launches it directly).
  CapturedWork(const StreamHandles& h, const std::function<void()>& launch, int repeats = 1);
  ~CapturedWork();
  CapturedWork(const CapturedWork&) = delete;
  CapturedWork& operator=(const CapturedWork&) = delete;
  void launch(CUstream stream) const;

 private:
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

// The device time of `launch`: `repeats` back-to-back copies captured as one graph, the median
// over `runs` replays timed by CUDA events, divided by `repeats`, so the CPU's launch overhead
// does not count. Work that cannot be captured is timed launch by launch.
double median_launch_seconds(const StreamHandles& h, const std::function<void()>& launch, int runs = 5);

// A compiled cubin loaded on the device, and its one kernel.
class LoadedModule {
 public:
  LoadedModule(const std::string& cubin, const std::string& symbol);
  ~LoadedModule();
  LoadedModule(const LoadedModule&) = delete;
  LoadedModule& operator=(const LoadedModule&) = delete;
  CUfunction function() const { return function_; }

 private:
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
};

}  // namespace wpk::cuda
