#pragma once
// ArenaPool: the memory blocks runs lay their intermediates out in. A run takes one block and
// hands it back when the last tensor view into it is gone, so steady-state runs call no
// malloc for intermediates. Thread-safe; each concurrent run holds its own block.
//
// Blocks are not zeroed. With poison on (WPK_ARENA_POISON=1) every block handed out is filled
// with 0xFF bytes (NaN for floats, -1 for integers), so a kernel that reads an output before
// writing it produces visibly wrong results instead of silently relying on leftovers.
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "wpk/tensor.hpp"

namespace wpk {

class ArenaPool : public std::enable_shared_from_this<ArenaPool> {
 public:
  // Blocks kept for reuse beyond this many are freed: enough for a few concurrent runs.
  static constexpr std::size_t kMaxIdleBlocks = 4;

  static std::shared_ptr<ArenaPool> create(bool poison);
  ~ArenaPool();
  ArenaPool(const ArenaPool&) = delete;
  ArenaPool& operator=(const ArenaPool&) = delete;

  // A block of at least `bytes` bytes, 64-byte aligned; it returns to the pool when the last
  // copy of the pointer is dropped (tensor views hold copies).
  std::shared_ptr<void> acquire(std::size_t bytes);
  bool poison() const { return poison_; }
  std::size_t idle_blocks() const;
  std::size_t blocks_allocated() const;  // allocations so far (tests: steady state adds none)

 private:
  explicit ArenaPool(bool poison) : poison_(poison) {}
  struct Block {
    std::shared_ptr<void> storage;  // core/page_memory's long-lived storage
    std::size_t bytes;
  };
  void give_back(Block b);

  const bool poison_;
  mutable std::mutex mutex_;
  std::vector<Block> idle_;
  std::size_t allocated_ = 0;
};

// WPK_ARENA_POISON=1 (or "outputs", which also poisons tensors returned to the caller: a
// diagnostic that finds kernels relying on zero-filled outputs even in one-node graphs).
bool arena_poison_from_env();
bool poison_outputs_from_env();

// Memory for one tensor, outside any arena: zero-filled, or 0xFF-filled when `poison`. From
// the heap, or with `long_lived` from core/page_memory's long-lived storage: the values of a
// run that records a memory plan, which the planned runs after it never allocate again (so
// freed, their pages must leave the process, not stay in the heap beside the arena).
Tensor allocate_tensor(DType dtype, const Shape& shape, bool poison, bool long_lived = false);

}  // namespace wpk
