#include "tensor_compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "core/float_values.hpp"

namespace wpk::testing {

std::string compare_allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.dtype() != b.dtype())
    return std::string("dtype ") + dtype_name(a.dtype()) + ", expected " + dtype_name(b.dtype());
  if (a.shape() != b.shape()) return "shape " + shape_to_string(a.shape()) + ", expected " + shape_to_string(b.shape());
  const DType t = a.dtype();
  if ((t == DType::UInt8 || t == DType::Int8 || t == DType::Int32 || t == DType::Int64) && atol >= 1) {
    // Integer codes within atol of each other (requantized results whose float rounding order
    // is not specified).
    auto code = [](const Tensor& t, std::int64_t i) -> std::int64_t {
      switch (t.dtype()) {
        case DType::UInt8: return t.data<std::uint8_t>()[i];
        case DType::Int8: return t.data<std::int8_t>()[i];
        case DType::Int32: return t.data<std::int32_t>()[i];
        default: return t.data<std::int64_t>()[i];
      }
    };
    for (std::int64_t i = 0; i < a.numel(); ++i)
      if (std::fabs(static_cast<double>(code(a, i) - code(b, i))) > atol)
        return "element " + std::to_string(i) + ": " + std::to_string(code(a, i)) + ", expected " + std::to_string(code(b, i));
    return "";
  }
  if (!dtype_is_float(a.dtype())) {
    if (a.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) != 0) {
      const std::size_t es = dtype_size(a.dtype());
      for (std::int64_t i = 0; i < a.numel(); ++i)
        if (std::memcmp(static_cast<const char*>(a.raw()) + i * es, static_cast<const char*>(b.raw()) + i * es, es) != 0)
          return "element " + std::to_string(i) + " differs (exact comparison)";
    }
    return "";
  }
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const double x = float_element(a, i), y = float_element(b, i);
    if (std::isnan(x) && std::isnan(y)) continue;
    if (std::isinf(x) || std::isinf(y)) {
      if (x == y) continue;
    } else if (std::fabs(x - y) <= atol + rtol * std::fabs(y)) {
      continue;
    }
    std::ostringstream s;
    s << "element " << i << ": " << x << ", expected " << y;
    return s.str();
  }
  return "";
}

double relative_l2_error(const Tensor& a, const Tensor& b) {
  double num = 0, den = 0;
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  for (std::int64_t i = 0; i < b.numel(); ++i) {
    const double d = static_cast<double>(pa[i]) - pb[i];
    num += d * d;
    den += static_cast<double>(pb[i]) * pb[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

}  // namespace wpk::testing
