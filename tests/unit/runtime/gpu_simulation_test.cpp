// Tuning for a GPU that is not here (runtime/gpu_simulation.hpp): needs NVRTC, no GPU.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>

#include <unistd.h>

#include "codegen/jit/nvrtc_compiler.hpp"
#include "device_graphs.hpp"
#include "runtime/gpu_simulation.hpp"

namespace wpk {
namespace {

TEST_CASE("simulated CUDA tuning places, compiles and prices every distinct convolution, then reuses its cubins", "[placement][cuda]") {
  CHECK_THROWS_WITH(simulate_gpu_tuning(device_test::conv_net(1, 4, 8), SessionOptions{}, "sm_12"),
                    Catch::Contains("no GPU figures for 'sm_12'"));
  if (!codegen::Nvrtc::get()) {
    WARN("NVRTC is not on this machine: nothing to compile");
    return;
  }
  namespace fs = std::filesystem;
  const fs::path cache = fs::temp_directory_path() / ("wpk-simulate-" + std::to_string(::getpid()));
  fs::remove_all(cache);
  SessionOptions options;
  options.cache_dir = cache.string();
  options.tuning_trials = 6;
  const GpuSimulation first = simulate_gpu_tuning(device_test::conv_net(8, 64, 56), options, "sm_90");
  CHECK(first.gpu.name == "H100");
  CHECK(first.placement.regions == 1);
  REQUIRE(first.convs.size() == 2);  // the 3x3 and the 1x1
  for (const SimulatedConv& c : first.convs) {
    INFO(c.signature);
    CHECK(c.schedules_tried == 6);
    CHECK(c.registers > 0);
    CHECK(std::isfinite(c.generated_seconds));
    CHECK(c.library_seconds > 0);
    CHECK(!c.schedule.empty());
  }
  CHECK(first.compiled == 12);
  const GpuSimulation again = simulate_gpu_tuning(device_test::conv_net(8, 64, 56), options, "sm_90");
  CHECK(again.compiled == 0);
  CHECK(again.from_cache == 12);
  CHECK(again.convs[0].schedule == first.convs[0].schedule);  // deterministic given the seed
  fs::remove_all(cache);
}

}  // namespace
}  // namespace wpk
