#pragma once
// float16 / bfloat16 <-> float32 conversions (IEEE round-to-nearest-even).
#include <cstdint>

#include "wpk/dtype.hpp"

namespace wpk {

float half_to_float(Float16Bits h);
Float16Bits float_to_half(float f);
float bfloat16_to_float(BFloat16Bits b);
BFloat16Bits float_to_bfloat16(float f);

}  // namespace wpk
