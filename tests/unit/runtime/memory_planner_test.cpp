// MemoryPlanner::assign_offsets on its own: valid layouts (no two live buffers overlap), reuse,
// alignment, in-place sharing, and requests it must refuse.
#include <catch2/catch.hpp>

#include <random>

#include "runtime/memory_planner.hpp"

using namespace wpk;

namespace {

// Every pair of requests alive at the same step must occupy disjoint bytes, unless one took
// the other over in place.
std::string find_conflict(const std::vector<BufferRequest>& reqs, const MemoryLayout& layout) {
  for (std::size_t a = 0; a < reqs.size(); ++a) {
    if (layout.offsets[a] % kArenaAlignment != 0) return "offset " + std::to_string(a) + " not aligned";
    if (layout.offsets[a] + reqs[a].bytes > layout.arena_bytes) return "request " + std::to_string(a) + " beyond the arena";
    for (std::size_t b = a + 1; b < reqs.size(); ++b) {
      // An in-place taker writes over its input at the step that input dies: allowed.
      if (reqs[b].share_with == static_cast<int>(a) && reqs[a].last_step == reqs[b].first_step) continue;
      const bool live_together = reqs[a].first_step <= reqs[b].last_step && reqs[b].first_step <= reqs[a].last_step;
      const bool bytes_meet = layout.offsets[a] < layout.offsets[b] + reqs[b].bytes &&
                              layout.offsets[b] < layout.offsets[a] + reqs[a].bytes;
      if (live_together && bytes_meet && reqs[a].bytes && reqs[b].bytes)
        return "requests " + std::to_string(a) + " and " + std::to_string(b) + " overlap";
    }
  }
  return "";
}

}  // namespace

TEST_CASE("buffers with disjoint lifetimes share bytes, live ones do not", "[memory]") {
  // A chain a -> b -> c: a and c never live together, so c can take a's place.
  const std::vector<BufferRequest> reqs = {{1000, 0, 1, -1}, {1000, 1, 2, -1}, {1000, 2, 3, -1}};
  const MemoryLayout layout = assign_offsets(reqs);
  CHECK(find_conflict(reqs, layout) == "");
  CHECK(layout.offsets[0] == layout.offsets[2]);
  CHECK(layout.offsets[0] != layout.offsets[1]);
  CHECK(layout.arena_bytes == 2 * 1024);  // 1000 rounds up to 1024
  CHECK(layout.naive_bytes == 3 * 1024);
}

TEST_CASE("in-place requests take over the shared buffer's bytes", "[memory]") {
  // conv -> relu (in place) -> add (in place): one block for all three.
  std::vector<BufferRequest> reqs = {{4096, 0, 1, -1}, {4096, 1, 2, 0}, {4096, 2, 3, 1}, {64, 0, 3, -1}};
  MemoryLayout layout = assign_offsets(reqs);
  CHECK(find_conflict(reqs, layout) == "");
  CHECK(layout.offsets[0] == layout.offsets[1]);
  CHECK(layout.offsets[1] == layout.offsets[2]);
  CHECK(layout.arena_bytes == 4096 + 64);

  // Refused: the shared buffer is still read after the step (last_step 2 > first_step 1).
  reqs = {{4096, 0, 2, -1}, {4096, 1, 3, 0}};
  layout = assign_offsets(reqs);
  CHECK(find_conflict(reqs, layout) == "");
  CHECK(layout.offsets[0] != layout.offsets[1]);

  // Refused: a second taker of bytes already taken over.
  reqs = {{256, 0, 1, -1}, {256, 1, 3, 0}, {256, 1, 3, 0}};
  layout = assign_offsets(reqs);
  CHECK(find_conflict(reqs, layout) == "");
  CHECK(layout.offsets[1] != layout.offsets[2]);
}

TEST_CASE("random lifetimes always give a valid layout, smaller than no reuse", "[memory]") {
  std::mt19937 rng(20261121);
  for (int round = 0; round < 200; ++round) {
    const int steps = 1 + static_cast<int>(rng() % 60);
    std::vector<BufferRequest> reqs;
    for (int s = 0; s < steps; ++s) {
      const int outputs = 1 + static_cast<int>(rng() % 2);
      for (int o = 0; o < outputs; ++o) {
        BufferRequest r;
        r.bytes = rng() % 5 == 0 ? 0 : 1 + rng() % 100000;
        r.first_step = s;
        r.last_step = s + static_cast<int>(rng() % 8);
        // Sometimes claim an earlier buffer in place; the planner decides whether it holds.
        if (!reqs.empty() && rng() % 3 == 0) r.share_with = static_cast<int>(rng() % reqs.size());
        reqs.push_back(r);
      }
    }
    const MemoryLayout layout = assign_offsets(reqs);
    INFO("round " << round);
    REQUIRE(find_conflict(reqs, layout) == "");
    CHECK(layout.arena_bytes <= layout.naive_bytes);
  }
}

TEST_CASE("empty and zero-byte requests", "[memory]") {
  CHECK(assign_offsets({}).arena_bytes == 0);
  const MemoryLayout layout = assign_offsets({{0, 0, 0, -1}, {0, 0, 1, -1}});
  CHECK(layout.arena_bytes == 0);
  CHECK(layout.offsets.size() == 2);
}
