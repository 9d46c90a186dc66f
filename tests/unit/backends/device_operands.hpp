#pragma once
// Operands for tests that drive a CUDA library directly: host tensors copied into device buffers
// the test keeps, and a device result read back.
#include <algorithm>
#include <vector>

#include "backends/cuda/device.hpp"
#include "wpk/tensor.hpp"

namespace wpk::cuda {

// `t` in a device buffer of its own (at least 4 bytes), kept alive in `keep`.
inline CUdeviceptr upload_operand(const Tensor& t, std::vector<DeviceBuffer>& keep) {
  keep.emplace_back(std::max<std::size_t>(t.nbytes(), 4), "a test operand");
  check(driver().MemcpyHtoD(keep.back().get(), t.raw(), t.nbytes()), "uploading a test operand");
  return keep.back().get();
}

// The float32 `shape` at `at`, after the work before it on every stream finished.
inline Tensor download_result(CUdeviceptr at, const Shape& shape) {
  Tensor t = Tensor::zeros(DType::Float32, shape);
  check(driver().MemcpyDtoH(t.raw(), at, t.nbytes()), "reading a test result");
  return t;
}

}  // namespace wpk::cuda
