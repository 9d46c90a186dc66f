#pragma once
// cuDNN descriptors that destroy themselves: an op whose constructor throws after making some
// leaks none of them.
#include <cstdint>
#include <vector>

#include "backends/cuda/cuda_api.hpp"

namespace wpk::cuda {

template <typename Handle, cudnnStatus_t (*CudnnApi::*Create)(Handle*), cudnnStatus_t (*CudnnApi::*Destroy)(Handle)>
class CudnnDescriptor {
 public:
  CudnnDescriptor() { check((cudnn().*Create)(&handle_), "creating a cuDNN descriptor"); }
  ~CudnnDescriptor() {
    if (handle_) (cudnn().*Destroy)(handle_);
  }
  CudnnDescriptor(const CudnnDescriptor&) = delete;
  CudnnDescriptor& operator=(const CudnnDescriptor&) = delete;
  operator Handle() const { return handle_; }  // NOLINT: passed straight to cuDNN calls

 private:
  Handle handle_ = nullptr;
};

using TensorDescriptor =
    CudnnDescriptor<cudnnTensorDescriptor_t, &CudnnApi::CreateTensorDescriptor, &CudnnApi::DestroyTensorDescriptor>;
using FilterDescriptor =
    CudnnDescriptor<cudnnFilterDescriptor_t, &CudnnApi::CreateFilterDescriptor, &CudnnApi::DestroyFilterDescriptor>;
using ConvolutionDescriptor = CudnnDescriptor<cudnnConvolutionDescriptor_t, &CudnnApi::CreateConvolutionDescriptor,
                                              &CudnnApi::DestroyConvolutionDescriptor>;
using PoolingDescriptor =
    CudnnDescriptor<cudnnPoolingDescriptor_t, &CudnnApi::CreatePoolingDescriptor, &CudnnApi::DestroyPoolingDescriptor>;
using ActivationDescriptor = CudnnDescriptor<cudnnActivationDescriptor_t, &CudnnApi::CreateActivationDescriptor,
                                             &CudnnApi::DestroyActivationDescriptor>;

// cuDNN takes dims, pads and strides as int.
inline std::vector<int> as_int(const std::vector<std::int64_t>& v) { return std::vector<int>(v.begin(), v.end()); }

// Sets `desc` to a packed float32 tensor of `shape` (row-major, at least 4 dims as cuDNN wants).
inline void set_packed_tensor(cudnnTensorDescriptor_t desc, const std::vector<std::int64_t>& shape) {
  const std::vector<int> dims = as_int(shape);
  std::vector<int> strides(dims.size(), 1);
  for (std::size_t d = dims.size() - 1; d-- > 0;) strides[d] = strides[d + 1] * dims[d + 1];
  check(cudnn().SetTensorNdDescriptor(desc, CUDNN_DATA_FLOAT, static_cast<int>(dims.size()), dims.data(), strides.data()),
        "a tensor descriptor");
}

}  // namespace wpk::cuda
