#pragma once
// Reading float tensors of any width as double: comparisons (tuning's agreement check, tests)
// treat float32, float64, float16 and bfloat16 alike.
#include <cstdint>

#include "core/half.hpp"
#include "wpk/tensor.hpp"

namespace wpk {

inline bool dtype_is_float(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::Float16 || t == DType::BFloat16;
}

// Element i of a float tensor; 0 for other dtypes.
inline double float_element(const Tensor& t, std::int64_t i) {
  switch (t.dtype()) {
    case DType::Float32: return t.data<float>()[i];
    case DType::Float64: return t.data<double>()[i];
    case DType::Float16: return half_to_float(t.data<Float16Bits>()[i]);
    case DType::BFloat16: return bfloat16_to_float(t.data<BFloat16Bits>()[i]);
    default: return 0;
  }
}

}  // namespace wpk
