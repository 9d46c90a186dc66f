#pragma once
// What the exact 8-bit kernels (avx2_q8_conv.hpp) store: float32 values scaled per output
// channel (MatMulIntegerToFloat, with bias, residual and activation), or codes requantized as
// QLinearConv does, optionally added to a residual's codes as QLinearAdd does (QLinearConvAdd).
// Each rounds where the reference rounds, in the same order: the reference's values to the bit.
#include <cstdint>
#include <vector>

#include "backends/cpu/avx2_q8_conv.hpp"

namespace wpk::cpu {

// y[p][c] = act(float(sum) * scale[c] + bias[c] (+ y[p][c] on entry when e.accumulate)), float32
// in float32 steps as MatMulIntegerToFloat's definition takes them.
class ScaledFloatEpilogue final : public Q8ConvEpilogue {
 public:
  // scale: [oc rounded up to 16]; e.bias: [oc] or null; y: `ldy` floats from pixel to pixel.
  ScaledFloatEpilogue(const float* scale, const StreamConvEpilogue& e, float* y, std::int64_t ldy)
      : scale_(scale), e_(e), y_(y), ldy_(ldy) {}
  void finish(const std::int32_t* sums, int rows, std::int64_t pixel, std::int64_t channel, int cols) const override;

 private:
  const float* scale_;
  StreamConvEpilogue e_;
  float* y_;
  std::int64_t ldy_;
};

// Codes of a uint8 or int8 tensor and their zero point.
struct CodeOperand {
  bool is_signed = false;
  std::int32_t zero = 0;
};

// QLinearAdd's float32 steps on two operands' codes (see quantize_kernel.cpp).
struct CodeSum {
  float c_scale = 1, r_scale = 1, y_scale = 1;
};

// c = saturate(round_half_even(double(sum) * mult[c]) + zero) into the conv's codes; without a
// residual those are stored, with one (`residual` non-null, NHWC codes of y's shape) y =
// QLinearAdd(c, residual) in y's codes. y may hold the residual's bytes.
class RequantizeEpilogue final : public Q8ConvEpilogue {
 public:
  struct Residual {
    const void* codes = nullptr;
    CodeOperand operand;
    CodeSum sum;
  };
  // mult: [oc rounded up to 16]; conv: the conv's codes; out: y's codes (the conv's without a
  // residual); y: NHWC with oc channels.
  RequantizeEpilogue(const float* mult, CodeOperand conv, CodeOperand out, void* y, std::int64_t oc,
                     const Residual& residual)
      : mult_(mult), conv_(conv), out_(out), y_(y), oc_(oc), residual_(residual) {}
  void finish(const std::int32_t* sums, int rows, std::int64_t pixel, std::int64_t channel, int cols) const override;

 private:
  const float* mult_;
  CodeOperand conv_, out_;
  void* y_;
  std::int64_t oc_;
  Residual residual_;
};

// `values` (n of them) followed by zeros up to a multiple of 16: the epilogues read whole blocks.
std::vector<float> padded_to_blocks(std::vector<float> values);

}  // namespace wpk::cpu
