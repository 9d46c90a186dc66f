#pragma once
// cuDNN descriptors that destroy themselves: an op whose constructor throws after making some
// leaks none of them.
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

}  // namespace wpk::cuda
