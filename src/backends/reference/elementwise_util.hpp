#pragma once
// Helpers shared by the elementwise kernel files (elementwise.cpp, binary.cpp): 16-bit float
// support by widening, dtype checks and conversions that avoid undefined behaviour.
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "backends/reference/common.hpp"
#include "backends/reference/registry.hpp"

namespace wpk::reference {

inline bool is_float16_like(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

// Fails unless every given input has input 0's dtype (ONNX type constraint "T" on all inputs).
inline void check_same_dtype(const KernelContext& ctx) {
  for (std::size_t i = 1; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && ctx.input(i).dtype() != ctx.input(0).dtype())
      ctx.fail(ErrorCode::InvalidModel, std::string("input 0 is ") + dtype_name(ctx.input(0).dtype()) + " but input " +
                                            std::to_string(i) + " is " + dtype_name(ctx.input(i).dtype()));
}

// Runs `kernel` with every Float16/BFloat16 input widened to float32, then rounds each float32
// output back to input 0's type when input 0 was 16-bit. The kernel computes in float and each
// result is rounded once, which is at least as accurate as computing in 16 bits.
void run_widened(KernelContext& ctx, KernelFn kernel);

// Registers a float/double kernel so that it also takes 16-bit floats (see run_widened).
// With SameDtype, inputs are checked before widening, so float16 mixed with float32 is still caught.
template <KernelFn Kernel, bool SameDtype = true>
void with_half(KernelContext& ctx) {
  if (SameDtype) check_same_dtype(ctx);
  for (std::size_t i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && is_float16_like(ctx.input(i).dtype())) return run_widened(ctx, Kernel);
  Kernel(ctx);
}

// double -> T without undefined behaviour: integers saturate and NaN becomes 0.
template <typename T>
T saturate_cast(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (std::isnan(v)) return T(0);
    // Compare against the bounds as doubles: max() may round up (2^63), hence >=.
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    return static_cast<T>(v);
  }
}

template <typename T>
bool is_nan_value(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  else return false;
}

// v < 0 that also compiles warning-free for unsigned types.
template <typename T>
bool is_negative(T v) {
  if constexpr (std::is_signed_v<T>) return v < T(0);
  else return false;
}

// -v for signed integers without overflow on the minimum value (wraps, as two's complement does).
template <typename T>
T negate(T v) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(std::make_unsigned_t<T>(0) - static_cast<std::make_unsigned_t<T>>(v));
  else return -v;
}

}  // namespace wpk::reference
