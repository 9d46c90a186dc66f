#include <catch2/catch.hpp>

#include <memory>

#include "runtime/plan_cache.hpp"

namespace {

using wpk::PlanCache;
using wpk::ShapeSignature;
using wpk::SignaturePlan;

// A one-input signature of rank 1, [n], and a plan told apart by its arena size.
ShapeSignature sig(std::int64_t n) { return {1, n}; }
std::shared_ptr<const SignaturePlan> plan(std::size_t arena_bytes) {
  auto p = std::make_shared<SignaturePlan>();
  p->arena_bytes = arena_bytes;
  return p;
}

}  // namespace

TEST_CASE("the session's plan cache is bounded and keeps the recently run signatures", "[arena]") {
  PlanCache cache;
  cache.insert(sig(0), plan(100));  // run again after every new shape
  cache.insert(sig(1), plan(101));  // never run again
  const std::int64_t fresh = static_cast<std::int64_t>(PlanCache::kMaxSignatures) * 3;
  for (std::int64_t n = 2; n < fresh; ++n) {
    cache.insert(sig(n), plan(static_cast<std::size_t>(n) + 100));
    const auto kept = cache.find(sig(0));
    REQUIRE(kept);
    CHECK(kept->arena_bytes == 100);
  }
  CHECK(cache.find(sig(1)) == nullptr);          // the longest unused went first
  CHECK(cache.find(sig(fresh - 1)) != nullptr);  // the newest stays
  std::int64_t kept = 0;
  for (std::int64_t n = 0; n < fresh; ++n) kept += cache.find(sig(n)) ? 1 : 0;
  CHECK(kept == static_cast<std::int64_t>(PlanCache::kMaxSignatures));
  // A second plan for a known signature does not replace the first (two first runs racing).
  CHECK(cache.insert(sig(0), plan(7))->arena_bytes == 100);
  CHECK(cache.latest()->arena_bytes == 100);
}
