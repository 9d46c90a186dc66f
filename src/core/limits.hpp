#pragma once
// The shape bounds a model cannot cross (SessionOptions::max_rank, max_tensor_elements), carried
// from the session to the load-time check and to every kernel's output allocation, so that a
// hostile shape is refused before anything is built for it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "wpk/tensor.hpp"

namespace wpk {

struct ShapeLimits {
  int max_rank = 64;
  std::int64_t max_elements = std::int64_t(1) << 32;
  std::int64_t max_bytes = std::int64_t(1) << 62;  // the session's memory limit: no tensor is larger
};

// Both checks throw Error(ResourceExhausted) starting with `where` ("node 'x' (Reshape): ").
void check_rank(std::size_t rank, const ShapeLimits& limits, const std::string& where);
// The shape's element count without overflow; crossing max_elements (or int64) throws, and so
// does a tensor of `dtype` larger than max_bytes (Undefined: elements only).
std::int64_t check_elements(const Shape& shape, const ShapeLimits& limits, const std::string& where,
                            DType dtype = DType::Undefined);

// True when check_rank and check_elements would both pass: the cheap test on a hot path, which
// builds no message.
bool within_limits(const Shape& shape, const ShapeLimits& limits, DType dtype = DType::Undefined);

// Physical memory, or the cgroup's memory limit when that is lower (0 when neither is known).
std::int64_t machine_memory_bytes();

}  // namespace wpk
