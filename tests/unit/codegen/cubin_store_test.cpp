// The on-disk store of compiled CUDA kernels: warm loads compile nothing, damaged entries are
// compiled again, never loaded, and concurrent fillers leave one valid entry.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <thread>

#include <unistd.h>

#include "codegen/cuda_printer.hpp"
#include "codegen/jit/cubin_store.hpp"
#include "codegen/schedule.hpp"

namespace wpk::codegen {
namespace {

namespace fs = std::filesystem;

PrintedCudaKernel kernel(float scale) {
  Var i = var("i", 64);
  Buffer x = buffer("x", {64});
  Schedule s(compute("scale", buffer("y", {64}), {i}, {}, load(x, {i}) * constant(scale), nullptr, {x}));
  s.bind_thread(i);
  return print_cuda(lower(s), "wpk_scale", "tests");
}

fs::path fresh_folder(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("wpk-cubin-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

std::vector<fs::path> entries(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".cubin") out.push_back(e.path());
  return out;
}

TEST_CASE("the cubin store compiles once, loads after, and rebuilds what is damaged", "[codegen][cuda]") {
  std::string why;
  const Nvrtc* nvrtc = Nvrtc::get(&why);
  if (!nvrtc) {
    WARN("NVRTC is not on this machine: " << why);
    return;
  }
  const fs::path dir = fresh_folder("warm");
  const PrintedCudaKernel k = kernel(2.0f);
  const CubinCounters start = cubin_counters();
  const std::string first = CubinStore(dir.string()).obtain(nvrtc, k.source, k.symbol, 90, "test GPU driver 1");
  CHECK(cubin_counters().compiled == start.compiled + 1);
  REQUIRE(entries(dir).size() == 1);

  // A warm store, even with no NVRTC at all, compiles nothing.
  const std::string warm = CubinStore(dir.string()).obtain(nullptr, k.source, k.symbol, 90, "test GPU driver 1");
  CHECK(warm == first);
  CHECK(cubin_counters().compiled == start.compiled + 1);
  CHECK(cubin_counters().loaded == start.loaded + 1);

  // Another device, architecture or source is another entry.
  CubinStore(dir.string()).obtain(nvrtc, k.source, k.symbol, 80, "test GPU driver 1");
  CubinStore(dir.string()).obtain(nvrtc, k.source, k.symbol, 90, "other GPU driver 1");
  CHECK(entries(dir).size() == 3);

  SECTION("a flipped byte or a truncated file is compiled again") {
    const fs::path entry = entries(dir).front();
    for (int damage = 0; damage < 2; ++damage) {
      std::string bytes;
      {
        std::ifstream in(entry, std::ios::binary);
        bytes.assign((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      }
      if (damage == 0) bytes[bytes.size() / 2] ^= 0x5a;
      else bytes.resize(bytes.size() / 3);
      std::ofstream(entry, std::ios::binary | std::ios::trunc) << bytes;
      CHECK(inspect_cubin_folder(dir.string()).damaged == 1);
      const CubinCounters before = cubin_counters();
      // Which entry was damaged is not known here: obtain all three again.
      CubinStore store(dir.string());
      store.obtain(nvrtc, k.source, k.symbol, 90, "test GPU driver 1");
      store.obtain(nvrtc, k.source, k.symbol, 80, "test GPU driver 1");
      store.obtain(nvrtc, k.source, k.symbol, 90, "other GPU driver 1");
      CHECK(cubin_counters().rebuilt == before.rebuilt + 1);
      CHECK(cubin_counters().compiled == before.compiled + 1);
      CHECK(inspect_cubin_folder(dir.string()).damaged == 0);
      CHECK(inspect_cubin_folder(dir.string()).entries == 3);
    }
  }
  SECTION("a cold store with no NVRTC says what is missing") {
    const PrintedCudaKernel other = kernel(3.0f);
    CHECK_THROWS_WITH(CubinStore(dir.string()).obtain(nullptr, other.source, other.symbol, 90, "test GPU driver 1"),
                      Catch::Contains("not in the kernel cache"));
  }
  fs::remove_all(dir);
}

TEST_CASE("processes filling one cubin store at once leave one valid entry", "[codegen][cuda]") {
  const Nvrtc* nvrtc = Nvrtc::get();
  if (!nvrtc) {
    WARN("NVRTC is not on this machine");
    return;
  }
  const fs::path dir = fresh_folder("race");
  const PrintedCudaKernel k = kernel(5.0f);
  std::vector<std::string> got(4);
  std::vector<std::thread> fillers;
  for (std::size_t t = 0; t < got.size(); ++t)
    fillers.emplace_back([&, t] { got[t] = CubinStore(dir.string()).obtain(nvrtc, k.source, k.symbol, 90, "race GPU"); });
  for (auto& f : fillers) f.join();
  for (const std::string& g : got) CHECK(g == got[0]);
  CHECK(entries(dir).size() == 1);
  std::size_t leftovers = 0;
  for (const auto& e : fs::directory_iterator(dir)) leftovers += e.path().string().find(".tmp.") != std::string::npos;
  CHECK(leftovers == 0);
  CHECK(inspect_cubin_folder(dir.string()).entries == 1);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace wpk::codegen
