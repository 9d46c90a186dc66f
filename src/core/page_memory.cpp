#include "core/page_memory.hpp"

#include <sys/mman.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "wpk/error.hpp"

namespace wpk {
namespace {

constexpr std::size_t kHugePageBytes = std::size_t(2) << 20;

std::size_t small_page_bytes() {
  static const std::size_t bytes = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return bytes;
}

[[noreturn]] void out_of_memory(std::size_t bytes) {
  throw Error(ErrorCode::InvalidArgument, "out of memory allocating " + std::to_string(bytes) + " bytes");
}

std::size_t rounded_size(std::size_t bytes) {
  const std::size_t rounded = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
  if (rounded < bytes) out_of_memory(bytes);
  return rounded;
}

// Backs every page of [p, p + length) now; wpk::Error (and the mapping undone) when the system
// cannot.
void populate(void* p, std::size_t length) {
#ifdef MADV_POPULATE_WRITE
  if (::madvise(p, length, MADV_POPULATE_WRITE) == 0) return;
  if (errno == ENOMEM) {  // an error now rather than the OOM killer at first touch
    ::munmap(p, length);
    out_of_memory(length);
  }
#endif
  // Kernels before 5.14: touch every small page.
  volatile char* bytes = static_cast<volatile char*>(p);
  for (std::size_t i = 0; i < length; i += small_page_bytes()) bytes[i] = 0;
}

// Maps `length` bytes (whole small pages, at least kHugePageBytes) from a huge-page boundary,
// populates them and asks for transparent huge pages there; null when the system refuses the
// mapping, wpk::Error when it cannot populate it.
void* map_huge(std::size_t length) {
  const std::size_t span = length + kHugePageBytes;
  if (span < length) return nullptr;
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const std::uintptr_t first = reinterpret_cast<std::uintptr_t>(raw), last = first + span;
  const std::uintptr_t start = (first + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes, end = start + length;
  if (start > first) ::munmap(raw, start - first);
  if (last > end) ::munmap(reinterpret_cast<void*>(end), last - end);
  void* p = reinterpret_cast<void*>(start);
  // Advised before populating, so the faults map huge pages at once. Advised after, only
  // khugepaged would merge them, in the background at a few MB every 10 s by default: a
  // process that runs for seconds never saw one. Where the system has no free huge page the
  // fault may stop to compact memory (the default for advised ranges), which costs the load,
  // not the runs; a system that refuses huge pages maps small ones.
  ::madvise(p, length, MADV_HUGEPAGE);
  populate(p, length);
  return p;
}

}  // namespace

std::shared_ptr<void> heap_zeroed(std::size_t bytes) {
  // Aligned by hand inside a plain malloc block: glibc's aligned_alloc takes a slower path
  // (splitting a larger chunk) that showed in runs of small tensors, as control-flow bodies make
  // at every iteration.
  constexpr std::size_t kAlign = 64;
  const std::size_t rounded = rounded_size(bytes);
  if (rounded > std::numeric_limits<std::size_t>::max() - kAlign) out_of_memory(bytes);
  void* block = std::malloc(rounded + kAlign);
  if (!block) out_of_memory(bytes);
  void* p = reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(block) + kAlign) / kAlign * kAlign);
  std::memset(p, 0, rounded);
  // Should the control block's allocation throw, shared_ptr calls the deleter itself.
  return std::shared_ptr<void>(p, [block](void*) { std::free(block); });
}

std::shared_ptr<void> long_lived_zeroed(std::size_t bytes) {
  const std::size_t rounded = rounded_size(bytes);
  if (!kLongLivedUsesPages || rounded < kPageMemoryMinBytes) return heap_zeroed(bytes);
  // Huge pages (merged in the background, see map_huge): the weights a run streams through
  // need 1/512 of the TLB entries. Only whole 2 MB stretches become huge pages, so a block takes
  // no more memory than with small ones.
  const std::size_t page = small_page_bytes();
  const std::size_t length = (rounded + page - 1) / page * page;
  if (length >= kHugePageBytes) {
    if (void* p = map_huge(length)) return std::shared_ptr<void>(p, [length](void* q) { ::munmap(q, length); });
  }
  // Fresh anonymous pages read as zeros and are page aligned. Populated at once: the block is
  // about to be written whole (a weight copy, a packing, an arena), and mapping every page in
  // one call costs half of taking a fault per page (~0.45 vs ~0.9 ms per MB here).
  void* p = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) out_of_memory(bytes);
  return std::shared_ptr<void>(p, [rounded](void* q) { ::munmap(q, rounded); });
}

void return_free_heap_pages() {
#ifdef __GLIBC__
  ::malloc_trim(0);
#endif
}

}  // namespace wpk
