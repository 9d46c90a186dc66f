#include "runtime/arena_pool.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/page_memory.hpp"
#include "runtime/memory_planner.hpp"

namespace wpk {

std::shared_ptr<ArenaPool> ArenaPool::create(bool poison) { return std::shared_ptr<ArenaPool>(new ArenaPool(poison)); }

ArenaPool::~ArenaPool() = default;

std::shared_ptr<void> ArenaPool::acquire(std::size_t bytes) {
  bytes = std::max<std::size_t>(kArenaAlignment, (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment);
  Block block{nullptr, 0};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Smallest idle block that fits, so a small run does not pin the biggest block.
    std::size_t best = idle_.size();
    for (std::size_t i = 0; i < idle_.size(); ++i)
      if (idle_[i].bytes >= bytes && (best == idle_.size() || idle_[i].bytes < idle_[best].bytes)) best = i;
    if (best != idle_.size()) {
      block = idle_[best];
      idle_.erase(idle_.begin() + static_cast<std::ptrdiff_t>(best));
    }
  }
  if (!block.storage) {
    // Pages, not heap: a pool dropping a block (or a session ending) gives the memory back.
    block = {long_lived_zeroed(bytes), bytes};
    std::lock_guard<std::mutex> lock(mutex_);
    ++allocated_;
  }
  if (poison_) std::memset(block.storage.get(), 0xFF, bytes);
  // The deleter keeps the pool alive: a block may outlive the Session that planned it.
  std::shared_ptr<ArenaPool> self = shared_from_this();
  void* data = block.storage.get();
  return std::shared_ptr<void>(data, [self, block](void*) { self->give_back(block); });
}

void ArenaPool::give_back(Block b) {
  std::lock_guard<std::mutex> lock(mutex_);
  idle_.push_back(b);
  if (idle_.size() <= kMaxIdleBlocks) return;
  // Drop the smallest: a new signature with a bigger plan would not fit in it anyway.
  std::size_t smallest = 0;
  for (std::size_t i = 1; i < idle_.size(); ++i)
    if (idle_[i].bytes < idle_[smallest].bytes) smallest = i;
  idle_.erase(idle_.begin() + static_cast<std::ptrdiff_t>(smallest));
}

std::size_t ArenaPool::idle_blocks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return idle_.size();
}

std::size_t ArenaPool::blocks_allocated() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return allocated_;
}

bool arena_poison_from_env() {
  const char* v = std::getenv("WPK_ARENA_POISON");
  return v && *v && std::string(v) != "0";
}

bool poison_outputs_from_env() {
  const char* v = std::getenv("WPK_ARENA_POISON");
  return v && std::string(v) == "outputs";
}

Tensor allocate_tensor(DType dtype, const Shape& shape, bool poison, bool long_lived) {
  Tensor t = long_lived ? long_lived_zeros(dtype, shape) : Tensor::zeros(dtype, shape);
  if (poison && t.nbytes() > 0) std::memset(t.raw(), 0xFF, t.nbytes());
  return t;
}

}  // namespace wpk
