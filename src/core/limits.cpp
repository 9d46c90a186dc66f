#include "core/limits.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <limits>

#include "wpk/error.hpp"

namespace wpk {

void check_rank(std::size_t rank, const ShapeLimits& limits, const std::string& where) {
  if (rank > static_cast<std::size_t>(limits.max_rank))
    throw Error(ErrorCode::ResourceExhausted, where + "rank " + std::to_string(rank) + " exceeds the limit of " +
                                                  std::to_string(limits.max_rank) + " (SessionOptions::max_rank)");
}

namespace {

enum class Verdict { Ok, Negative, TooMany, TooLarge };

// Whether `shape` fits the element and byte limits; its element count in `n` when it does.
Verdict judge(const Shape& shape, const ShapeLimits& limits, DType dtype, std::int64_t& n) {
  n = 1;
  bool overflow = false;
  for (std::int64_t d : shape) {
    if (d < 0) return Verdict::Negative;
    if (d == 0) {
      n = 0;
      return Verdict::Ok;
    }
    if (overflow || n > std::numeric_limits<std::int64_t>::max() / d)
      overflow = true;
    else
      n *= d;
  }
  if (overflow || n > limits.max_elements) return Verdict::TooMany;
  const std::int64_t elem = dtype == DType::Undefined ? 0 : static_cast<std::int64_t>(dtype_size(dtype));
  return elem > 0 && n > limits.max_bytes / elem ? Verdict::TooLarge : Verdict::Ok;
}

}  // namespace

std::int64_t check_elements(const Shape& shape, const ShapeLimits& limits, const std::string& where, DType dtype) {
  std::int64_t n = 0;
  switch (judge(shape, limits, dtype, n)) {
    case Verdict::Ok: return n;
    case Verdict::Negative:
      throw Error(ErrorCode::InvalidArgument, where + "negative dimension in shape " + shape_to_string(shape));
    case Verdict::TooMany: {
      std::string dims = shape.size() <= 8 ? shape_to_string(shape) : "of rank " + std::to_string(shape.size());
      throw Error(ErrorCode::ResourceExhausted, where + "a tensor " + dims + " has more than the limit of " +
                                                    std::to_string(limits.max_elements) +
                                                    " elements (SessionOptions::max_tensor_elements)");
    }
    case Verdict::TooLarge: break;
  }
  throw Error(ErrorCode::ResourceExhausted, where + "a " + dtype_name(dtype) + " tensor of " + std::to_string(n) +
                                                " elements is larger than the session's memory limit of " +
                                                std::to_string(limits.max_bytes >> 20) + " MiB (SessionOptions::memory_limit)");
}

bool within_limits(const Shape& shape, const ShapeLimits& limits, DType dtype) {
  std::int64_t n = 0;
  return shape.size() <= static_cast<std::size_t>(limits.max_rank) && judge(shape, limits, dtype, n) == Verdict::Ok;
}

namespace {
// cgroup v2 (memory.max) or v1 (memory.limit_in_bytes); "max" or absurd values mean no limit.
std::int64_t cgroup_memory_limit() {
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream f(path);
    std::string text;
    if (!(f >> text) || text == "max") continue;
    try {
      const long long v = std::stoll(text);
      if (v > 0 && v < (std::int64_t(1) << 50)) return v;
    } catch (const std::exception&) {
    }
  }
  return 0;
}
}  // namespace

std::int64_t machine_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  const std::int64_t physical = pages > 0 && page > 0 ? std::int64_t(pages) * page : 0;
  const std::int64_t cgroup = cgroup_memory_limit();
  if (physical == 0) return cgroup;
  return cgroup > 0 ? std::min(physical, cgroup) : physical;
}

}  // namespace wpk
