#include "core/half.hpp"

#include <cstring>

namespace wpk {
namespace {
std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace

float half_to_float(Float16Bits h) {
  const std::uint32_t sign = (h.bits & 0x8000u) << 16;
  const std::uint32_t exp = (h.bits >> 10) & 0x1f;
  std::uint32_t mant = h.bits & 0x3ffu;
  if (exp == 0x1f) return float_of(sign | 0x7f800000u | (mant << 13));  // inf / nan
  if (exp == 0) {
    if (mant == 0) return float_of(sign);
    // subnormal: value = mant * 2^-24
    float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return float_of(sign | ((exp + 112) << 23) | (mant << 13));
}

Float16Bits float_to_half(float f) {
  const std::uint32_t u = bits_of(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u)  // inf or nan
    return {static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0))};
  if (abs >= 0x477ff000u) return {static_cast<std::uint16_t>(sign | 0x7c00u)};  // overflow
  if (abs < 0x38800000u) {  // subnormal or zero in half
    // Adding 0.5 rounds the shifted-out bits to nearest even through the float adder.
    float v = float_of(abs) + 0.5f;
    return {static_cast<std::uint16_t>(sign | (bits_of(v) - bits_of(0.5f)))};
  }
  std::uint32_t mant_odd = (abs >> 13) & 1u;
  std::uint32_t r = abs + 0xc8000fffu + mant_odd;  // rebias exponent, round to nearest even
  return {static_cast<std::uint16_t>(sign | (r >> 13))};
}

float bfloat16_to_float(BFloat16Bits b) { return float_of(static_cast<std::uint32_t>(b.bits) << 16); }

BFloat16Bits float_to_bfloat16(float f) {
  std::uint32_t u = bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {static_cast<std::uint16_t>((u >> 16) | 0x40u)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return {static_cast<std::uint16_t>(u >> 16)};
}

}  // namespace wpk
