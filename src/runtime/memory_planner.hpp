#pragma once
// MemoryPlanner: places buffers with known sizes and lifetimes in one arena so that buffers
// alive at the same time never overlap, and buffers that are not reuse each other's bytes.
//
// Lifetimes are in plan steps: a buffer is written by step `first_step` and last read by step
// `last_step` (inclusive), so two buffers conflict when their step ranges intersect. A buffer
// may instead take over an earlier buffer's bytes in place (`share_with`) when that one is last
// read by the step that writes this one: an elementwise op overwriting its own input.
#include <cstddef>
#include <vector>

namespace wpk {

constexpr std::size_t kArenaAlignment = 64;  // every offset and size: one cache line, any SIMD width

struct BufferRequest {
  std::size_t bytes = 0;
  int first_step = 0;
  int last_step = 0;
  int share_with = -1;  // index of an earlier request whose bytes this one reuses, or -1
};

struct MemoryLayout {
  std::vector<std::size_t> offsets;  // one per request, multiples of kArenaAlignment
  std::size_t arena_bytes = 0;       // the arena these offsets need
  std::size_t naive_bytes = 0;       // one aligned allocation per request, no reuse
};

// Greedy by size, best fit: the largest buffers are placed first, each into the smallest gap
// left between the already placed buffers whose lifetimes it meets, else above them all.
// A share_with that does not hold (the shared buffer is still read later, or was already taken
// over) is ignored, so the result is valid for any input.
MemoryLayout assign_offsets(const std::vector<BufferRequest>& requests);

}  // namespace wpk
