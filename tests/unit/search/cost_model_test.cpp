// The analytic cost model's fixed terms: a call costs its kernel's call_seconds whatever the size,
// a kernel that splits its work pays a parallel region on more than one thread, and one that
// runs on the calling thread alone gains nothing from more.
#include <catch2/catch.hpp>

#include <algorithm>

#include "search/cost_model.hpp"

using namespace wpk::search;

TEST_CASE("tiny work is predicted faster on one thread, large work on all of them", "[cost][search]") {
  const KernelTraits vector_loop{256, 0.5};
  const Machine two{2};
  const Machine one{1};
  const Workload tiny{64, 768};              // a [2, 32] element-wise op
  const Workload large{1 << 20, 12 << 20};   // a million elements
  CHECK(predict_seconds(tiny, vector_loop, one) < predict_seconds(tiny, vector_loop, two));
  CHECK(predict_seconds(large, vector_loop, two) < predict_seconds(large, vector_loop, one));
  // The difference on tiny work is the parallel region, less the little the second thread saves.
  CHECK(predict_seconds(tiny, vector_loop, two) - predict_seconds(tiny, vector_loop, one) ==
        Approx(two.parallel_region_seconds).epsilon(0.1));
}

TEST_CASE("a call's fixed cost is added whatever the size; a single-threaded kernel ignores the threads", "[cost][search]") {
  KernelTraits library{256, 0.5};
  library.call_seconds = 1e-6;
  const KernelTraits own{256, 0.5};
  const Workload w{1000, 8000};
  CHECK(predict_seconds(w, library, Machine{1}) == Approx(predict_seconds(w, own, Machine{1}) + 1e-6));
  KernelTraits scalar{32, 0.03};
  scalar.multithreaded = false;
  CHECK(predict_seconds(w, scalar, Machine{4}) == predict_seconds(w, scalar, Machine{1}));
  // On a tiny op the scalar loop beats the library's call; on a large one the library wins.
  const Workload tiny{64, 768}, large{1 << 20, 12 << 20};
  CHECK(predict_seconds(tiny, scalar, Machine{2}) < predict_seconds(tiny, library, Machine{1}));
  CHECK(predict_seconds(large, library, Machine{2}) < predict_seconds(large, scalar, Machine{2}));
  // A kernel that starts its threads once per block of its work pays the start each time.
  KernelTraits blocked = own;
  blocked.parallel_regions = 3;
  const Machine two{2};
  CHECK(predict_seconds(w, blocked, two) == Approx(predict_seconds(w, own, two) + 2 * two.parallel_region_seconds));
  CHECK(predict_seconds(w, blocked, Machine{1}) == Approx(predict_seconds(w, own, Machine{1})));
}

TEST_CASE("prefetched bytes cost only the time they take beyond the compute", "[cost][search]") {
  const Machine m{1};
  const KernelTraits plain{512, 0.5};
  KernelTraits ahead = plain;
  // A product whose weights are most of its bytes, and whose arithmetic takes longer than them.
  const Workload w{2e8, 4e6};
  ahead.prefetched_bytes = 3e6;
  const double compute_only = predict_seconds(Workload{w.flops, 0}, plain, m);
  const double rest = predict_seconds(Workload{0, 1e6}, plain, m);
  CHECK(predict_seconds(w, plain, m) == Approx(compute_only + predict_seconds(Workload{0, w.bytes}, plain, m)));
  CHECK(predict_seconds(w, ahead, m) == Approx(compute_only + rest));
  // Where the prefetched bytes take longer than the arithmetic, the excess shows.
  const Workload light{2e5, 4e6};
  const double excess = predict_seconds(Workload{0, 3e6}, plain, m) - predict_seconds(Workload{light.flops, 0}, plain, m);
  CHECK(excess > 0);
  CHECK(predict_seconds(light, ahead, m) ==
        Approx(predict_seconds(Workload{light.flops, 0}, plain, m) + rest + excess));
  // More than the workload moves is clamped to it.
  ahead.prefetched_bytes = 1e9;
  CHECK(predict_seconds(w, ahead, m) == Approx(std::max(compute_only, predict_seconds(Workload{0, w.bytes}, plain, m))));
}
