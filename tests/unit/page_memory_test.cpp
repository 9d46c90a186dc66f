#include <malloc.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/page_memory.hpp"
#include "support/tensor_compare.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;

namespace {

std::size_t page_bytes() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

// Field `field` of /proc/self/statm (0: the process's mapped size, 1: its resident set), in bytes.
std::size_t statm_bytes(int field) {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0;
  for (int i = 0; i <= field; ++i) statm >> pages;
  return pages * page_bytes();
}

std::size_t mapped_bytes() { return statm_bytes(0); }
std::size_t resident_bytes() { return statm_bytes(1); }

// Bytes malloc holds for its callers: in its heap and in blocks it mapped itself.
std::size_t malloc_held_bytes() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
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
  if (!kLongLivedUsesPages) {
    WARN("AddressSanitizer build: long-lived storage is heap memory");
    return;
  }
  std::free(std::malloc(std::size_t(30) << 20));
  const std::size_t block = std::size_t(2) << 20;
  const std::size_t held_before = malloc_held_bytes();
  std::vector<std::shared_ptr<void>> blocks;
  for (int i = 0; i < 16; ++i) {
    blocks.push_back(long_lived_zeroed(block));
    std::memset(blocks.back().get(), 1, block);  // make every page resident
  }
  const std::shared_ptr<void> pin = long_lived_zeroed(block);
  std::memset(pin.get(), 1, block);
  CHECK(malloc_held_bytes() < held_before + block);
  const std::size_t before = resident_bytes();
  blocks.clear();
  const std::size_t after = resident_bytes();
  REQUIRE(before > after);
  CHECK(before - after >= 15 * block);
}

// Blocks of 2 MB and more start on a huge-page boundary (where transparent huge pages are on,
// whole 2 MB stretches of them are huge pages) without taking more memory than small pages
// would: the slack mapped to align them is given back, and no block is rounded up to 2 MB.
TEST_CASE("big long-lived blocks are huge-page aligned and cost only their own pages", "[tensor][memory]") {
  if (!kLongLivedUsesPages) return;
  const std::size_t huge = std::size_t(2) << 20;
  for (std::size_t bytes : {huge, huge + 100, 3 * huge + (std::size_t(1) << 20)}) {
    const std::size_t mapped_before = mapped_bytes(), resident_before = resident_bytes();
    {
      const std::shared_ptr<void> p = long_lived_zeroed(bytes);
      CHECK(reinterpret_cast<std::uintptr_t>(p.get()) % huge == 0);
      CHECK(all_zero(p.get(), bytes));
      std::memset(p.get(), 0x5A, bytes);
      const std::size_t whole_pages = (bytes + page_bytes() - 1) / page_bytes() * page_bytes();
      INFO(bytes << " bytes: mapped " << mapped_before << " -> " << mapped_bytes() << ", resident "
                 << resident_before << " -> " << resident_bytes());
      CHECK(mapped_bytes() <= mapped_before + whole_pages);
      CHECK(resident_bytes() <= resident_before + whole_pages + (std::size_t(256) << 10));
    }
    CHECK(mapped_bytes() <= mapped_before);  // unmapped whole when freed
  }
}

namespace {

// x [N, 256, 7, 7] -> 3x3 Conv (2.4 MB of weights) -> y: weights worth packing, and at batch
// 32 an output (1.6 MB) above the page-memory threshold.
Graph packed_conv_graph() {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 256, 7, 7});
  std::vector<float> w(256 * 256 * 9);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 7) * 0.01f;
  g.add_initializer("w", Tensor::from_vector(w, {256, 256, 3, 3}));
  g.add_node("Conv", {"x", "w"}, {"y"}, {{"pads", Attribute({1, 1, 1, 1})}});
  g.add_output("y");
  return g;
}

}  // namespace

#ifdef WPK_WITH_ONEDNN
namespace {

constexpr std::size_t kPackedConvWeightBytes = 256 * 256 * 9 * sizeof(float);

// What malloc held before a session of packed_conv_graph was made (its weights already built
// there) and after.
struct HeapAtLoad {
  explicit HeapAtLoad(const SessionOptions& o, Graph g = packed_conv_graph())
      : before(malloc_held_bytes()), session(std::move(g), o), after(malloc_held_bytes()) {}
  std::size_t before;
  Session session;
  std::size_t after;
};

}  // namespace

// The weights come to the session on the heap (the test built them there); packed, they must
// leave it: the packing lives in long-lived storage and the loaded copy is freed. With the batch
// fixed at load every candidate is prepared then.
TEST_CASE("a session's packed weights are not held by malloc", "[memory][session]") {
  if (!kLongLivedUsesPages) return;
  SessionOptions o;
  o.threads = 1;
  o.fixed_dims = {{"N", 1}};
  const HeapAtLoad heap(o);
  INFO("malloc held " << heap.before << " bytes before the session, " << heap.after << " after");
  CHECK(heap.after + kPackedConvWeightBytes / 2 < heap.before);
}

// With a symbolic batch, the candidate ranked first at a large batch is prepared by the first run
// that picks it: until then the loaded copy stays in place of its packing (one copy either way).
// Its results match those of a session that prepared everything at load for that batch.
TEST_CASE("weights a deferred candidate will pack stay as loaded once and it computes as if prepared at load",
          "[memory][session]") {
  if (!kLongLivedUsesPages) return;
  SessionOptions o;
  o.threads = 1;
  const HeapAtLoad heap(o);
  INFO("malloc held " << heap.before << " bytes before the session, " << heap.after << " after");
  CHECK(heap.after < heap.before + kPackedConvWeightBytes / 4);  // no second copy on the heap
  const Session& s = heap.session;
  for (std::int64_t batch : {1, 32}) {
    Tensor x = Tensor::zeros(DType::Float32, {batch, 256, 7, 7});
    for (std::int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i % 13) * 0.1f - 0.6f;
    const TensorMap out = s.run({{"x", x}});
    SessionOptions fixed = o;
    fixed.fixed_dims = {{"N", batch}};
    const TensorMap want = Session(packed_conv_graph(), fixed).run({{"x", x}});
    INFO("batch " << batch);
    CHECK(testing::compare_allclose(out.at("y"), want.at("y"), 1e-4, 1e-4) == "");
  }
}
#endif

// Each run's returned tensors come from the heap, which the next run reuses warm, never from
// fresh pages (only the recording run's intermediates do).
TEST_CASE("outputs of planned runs come from the heap", "[memory][session]") {
  if (!kLongLivedUsesPages) return;
  SessionOptions o;
  o.threads = 1;
  const Session s(packed_conv_graph(), o);
  const std::vector<float> x(32 * 256 * 49, 0.5f);
  const TensorMap in = {{"x", Tensor::borrow(x.data(), {32, 256, 7, 7})}};
  for (int run = 0; run < 2; ++run) s.run(in);  // the first records the plan
  const std::size_t before = malloc_held_bytes();
  const TensorMap out = s.run(in);
  const Tensor& y = out.at("y");
  REQUIRE(y.nbytes() >= kPageMemoryMinBytes);
  CHECK(malloc_held_bytes() >= before + y.nbytes());
}
