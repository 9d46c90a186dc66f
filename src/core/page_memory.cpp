#include "core/page_memory.hpp"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "wpk/error.hpp"

namespace wpk {
namespace {

std::size_t rounded_size(std::size_t bytes) {
  const std::size_t rounded = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
  if (rounded < bytes) throw Error(ErrorCode::InvalidArgument, "out of memory allocating " + std::to_string(bytes) + " bytes");
  return rounded;
}

}  // namespace

std::shared_ptr<void> heap_zeroed(std::size_t bytes) {
  const std::size_t rounded = rounded_size(bytes);
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw Error(ErrorCode::InvalidArgument, "out of memory allocating " + std::to_string(bytes) + " bytes");
  std::memset(p, 0, rounded);
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

std::shared_ptr<void> long_lived_zeroed(std::size_t bytes) {
  const std::size_t rounded = rounded_size(bytes);
  if (rounded < kPageMemoryMinBytes) return heap_zeroed(bytes);
  // Fresh anonymous pages read as zeros and are page aligned.
  void* p = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw Error(ErrorCode::InvalidArgument, "out of memory allocating " + std::to_string(bytes) + " bytes");
  return std::shared_ptr<void>(p, [rounded](void* q) { ::munmap(q, rounded); });
}

}  // namespace wpk
