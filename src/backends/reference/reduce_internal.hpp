#pragma once
// Shared by reduce.cpp, softmax.cpp and loss.cpp: 16-bit float widening and the registration of
// the softmax and loss groups (called from register_reduce).
#include "backends/reference/common.hpp"
#include "backends/reference/registry.hpp"

namespace wpk::reference {

void register_softmax(OpTable& t);
void register_loss(OpTable& t);  // loss.cpp: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss

inline bool is_float16_like(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

// float16/bfloat16 -> float32 copy, so float kernels need only one 16-bit path.
inline Tensor widen_to_float32(const Tensor& x) {
  Tensor y = Tensor::zeros(DType::Float32, x.shape());
  float* py = y.data<float>();
  if (x.dtype() == DType::Float16) {
    const Float16Bits* px = x.data<Float16Bits>();
    for (std::int64_t i = 0; i < x.numel(); ++i) py[i] = half_to_float(px[i]);
  } else {
    const BFloat16Bits* px = x.data<BFloat16Bits>();
    for (std::int64_t i = 0; i < x.numel(); ++i) py[i] = bfloat16_to_float(px[i]);
  }
  return y;
}

// float32 -> float16/bfloat16 into `y` (same element count).
inline void narrow_from_float32(const Tensor& x, Tensor& y) {
  const float* px = x.data<float>();
  if (y.dtype() == DType::Float16) {
    Float16Bits* py = y.data<Float16Bits>();
    for (std::int64_t i = 0; i < x.numel(); ++i) py[i] = float_to_half(px[i]);
  } else {
    BFloat16Bits* py = y.data<BFloat16Bits>();
    for (std::int64_t i = 0; i < x.numel(); ++i) py[i] = float_to_bfloat16(px[i]);
  }
}

// Runs body(x, y) with y = output 0 of `shape` and x's dtype; 16-bit float inputs go through a
// float32 copy and the float32 result is narrowed back into the output.
template <typename Body>
void run_same_dtype(KernelContext& ctx, const Tensor& x, const Shape& shape, Body&& body) {
  if (!is_float16_like(x.dtype())) {
    Tensor& y = ctx.allocate_output(0, x.dtype(), shape);
    body(x, y);
    return;
  }
  const Tensor x32 = widen_to_float32(x);
  Tensor y32 = Tensor::zeros(DType::Float32, shape);
  body(x32, y32);
  Tensor& y = ctx.allocate_output(0, x.dtype(), shape);
  narrow_from_float32(y32, y);
}

}  // namespace wpk::reference
