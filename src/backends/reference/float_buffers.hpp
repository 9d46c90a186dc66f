#pragma once
// Float16 and BFloat16 kernels compute in float32: these convert whole tensors at the kernel
// boundary, so the math is written once for float and double.
#include <vector>

#include "backends/reference/common.hpp"

namespace wpk::reference {

inline bool is_half_dtype(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

// The elements of a float16/bfloat16/float32 tensor as float32.
inline std::vector<float> to_float_buffer(const Tensor& t) {
  std::vector<float> v(static_cast<std::size_t>(t.numel()));
  if (t.dtype() == DType::Float16) {
    const Float16Bits* p = t.data<Float16Bits>();
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = half_to_float(p[i]);
  } else if (t.dtype() == DType::BFloat16) {
    const BFloat16Bits* p = t.data<BFloat16Bits>();
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = bfloat16_to_float(p[i]);
  } else {
    const float* p = t.data<float>();
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = p[i];
  }
  return v;
}

// Rounds float32 values into a float16/bfloat16 tensor of the same element count.
inline void store_float_buffer(const float* src, Tensor& dst) {
  const std::int64_t n = dst.numel();
  if (dst.dtype() == DType::Float16) {
    Float16Bits* p = dst.data<Float16Bits>();
    for (std::int64_t i = 0; i < n; ++i) p[i] = float_to_half(src[i]);
  } else {
    BFloat16Bits* p = dst.data<BFloat16Bits>();
    for (std::int64_t i = 0; i < n; ++i) p[i] = float_to_bfloat16(src[i]);
  }
}

// The elements of any float tensor (16/32/64-bit) as double: small parameter vectors.
inline std::vector<double> to_double_buffer(const Tensor& t, const KernelContext& ctx) {
  std::vector<double> v(static_cast<std::size_t>(t.numel()));
  if (t.dtype() == DType::Float64) {
    const double* p = t.data<double>();
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = p[i];
  } else if (t.dtype() == DType::Float32 || is_half_dtype(t.dtype())) {
    const std::vector<float> f = to_float_buffer(t);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = f[i];
  } else {
    ctx.fail(ErrorCode::Unsupported, std::string("expected a float tensor, got ") + dtype_name(t.dtype()));
  }
  return v;
}

// Writes double values into a float tensor of any width.
inline void store_doubles(const std::vector<double>& v, Tensor& t, const KernelContext& ctx) {
  if (is_half_dtype(t.dtype())) {
    const std::vector<float> f(v.begin(), v.end());
    store_float_buffer(f.data(), t);
    return;
  }
  dispatch_float(t.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    for (std::size_t i = 0; i < v.size(); ++i) p[i] = static_cast<T>(v[i]);
  });
}

}  // namespace wpk::reference
