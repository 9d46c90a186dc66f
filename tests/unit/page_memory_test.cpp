#include <malloc.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/page_memory.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;

namespace {

// Resident bytes of this process (/proc/self/statm, second field, in pages).
std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

bool all_zero(const void* p, std::size_t bytes) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < bytes; ++i)
    if (b[i] != 0) return false;
  return true;
}

}  // namespace

TEST_CASE("heap and long-lived storage is zeroed, 64-byte aligned and writable at every size", "[tensor][memory]") {
  for (auto allocate : {&heap_zeroed, &long_lived_zeroed}) {
    for (std::size_t bytes : {std::size_t(0), std::size_t(1), std::size_t(100), kPageMemoryMinBytes - 1,
                              kPageMemoryMinBytes, kPageMemoryMinBytes + 3, std::size_t(5) << 20}) {
      const std::shared_ptr<void> p = allocate(bytes);
      REQUIRE(p);
      CHECK(reinterpret_cast<std::uintptr_t>(p.get()) % 64 == 0);
      const std::size_t usable = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
      CHECK(all_zero(p.get(), usable));
      std::memset(p.get(), 0x5A, usable);
    }
  }
  // Initializer tensors: zeroed, owned, with Tensor::zeros's checks.
  const Tensor t = long_lived_zeros(DType::Float32, {3, 1 << 18});
  CHECK_FALSE(t.is_borrowed());
  CHECK(t.shape() == Shape{3, 1 << 18});
  CHECK(reinterpret_cast<std::uintptr_t>(t.raw()) % 64 == 0);
  CHECK(all_zero(t.raw(), t.nbytes()));
  CHECK_THROWS_AS(long_lived_zeros(DType::Float32, {-1, 2}), Error);
  CHECK_THROWS_AS(long_lived_zeros(DType::String, {1}), Error);
  CHECK_THROWS_AS(long_lived_zeros(DType::Float32, {1 << 30, 1 << 30}), Error);
}

TEST_CASE("freed long-lived blocks leave the process's resident memory", "[tensor][memory]") {
  // glibc raises its mmap threshold when a big block is freed; from then on blocks below it
  // come from the heap, whose freed pages stay resident unless they sit at its top. A block
  // kept alive after the freed ones pins them there; page memory must not care.
  // The blocks are not malloc's at all (neither its heap nor its own mappings hold them), so
  // its thresholds and the heap's layout cannot keep them.
  std::free(std::malloc(std::size_t(30) << 20));
  const std::size_t block = std::size_t(2) << 20;
  const auto malloc_held = [] {
    const struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
  };
  const std::size_t held_before = malloc_held();
  std::vector<std::shared_ptr<void>> blocks;
  for (int i = 0; i < 16; ++i) {
    blocks.push_back(long_lived_zeroed(block));
    std::memset(blocks.back().get(), 1, block);  // make every page resident
  }
  const std::shared_ptr<void> pin = long_lived_zeroed(block);
  std::memset(pin.get(), 1, block);
  CHECK(malloc_held() < held_before + block);
  const std::size_t before = resident_bytes();
  blocks.clear();
  const std::size_t after = resident_bytes();
  REQUIRE(before > after);
  CHECK(before - after >= 15 * block);
}
