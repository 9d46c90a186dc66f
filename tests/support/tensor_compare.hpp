#pragma once
// Comparing tensors in tests: exact for integers and bool, allclose (numpy semantics:
// |a - b| <= atol + rtol * |b|, NaN equals NaN) for floats, relative L2 error for models.
#include <string>

#include "wpk/tensor.hpp"

namespace wpk::testing {

// "" when equal within tolerance, otherwise a description of the first mismatch. Integer
// tensors compare exactly, or within atol codes when atol >= 1.
std::string compare_allclose(const Tensor& actual, const Tensor& expected, double rtol, double atol);
// ||a - b||_2 / ||b||_2 over float32 tensors of equal shape.
double relative_l2_error(const Tensor& actual, const Tensor& expected);

}  // namespace wpk::testing
