#pragma once
// Host emulation of printed CUDA kernels (codegen/cuda_printer.hpp), so their arithmetic,
// indexing and synchronisation are checked against the interpreter on machines without a GPU:
// the CUDA source is compiled by the host compiler under a header that defines the CUDA built-ins
// it uses, and a runner runs each block's threads as cooperative fibers (ucontext): a thread
// runs until it calls __syncthreads() or returns, and the block goes on once every thread has.
// Shared arrays become function statics, one copy the block's fibers share. A block whose threads
// do not all meet the same barriers is a defect of the kernel: the runner stops, sets the flag
// emulation_diverged() reads and writes NaN to the output's first element.
#include <dlfcn.h>

#include <memory>
#include <string>

#include "codegen/cuda_printer.hpp"
#include "codegen_test_support.hpp"

namespace wpk::codegen::test {

constexpr const char kCudaEmulationHeader[] = R"(#include <cmath>
#include <cstdint>
#include <cstring>
#include <math.h>
#include <memory>
#include <ucontext.h>
#include <vector>
struct wpk_emulated_dim3 { unsigned x = 0, y = 0, z = 0; };
static wpk_emulated_dim3 blockIdx, threadIdx;
static ucontext_t wpk_scheduler;
static ucontext_t* wpk_running;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __restrict__ __restrict
#define __shared__ static
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, sizeof f); return f; }
static inline void __syncthreads() { swapcontext(wpk_running, &wpk_scheduler); }
)";

// The printed kernel compiled for the host, with the entry point codegen_test_support.hpp's run()
// calls: every block in turn, its threads as fibers.
inline std::shared_ptr<LoadedKernel> build_emulated(const PrintedCudaKernel& k, const std::string& name, std::string* why) {
  static KernelStore store("", find_host_compiler());
  std::string call = k.symbol + "(";
  for (std::size_t i = 0; i < k.args; ++i) call += (i ? ", wpk_args[" : "wpk_args[") + std::to_string(i) + "]";
  call += ");";
  const std::string threads = std::to_string(k.threads), last = std::to_string(k.args - 1);
  const std::string runner = R"(
static float* const* wpk_args;
static bool* wpk_done;
extern "C" bool wpk_emulation_diverged = false;
static void wpk_thread() {
  )" + call + R"(
  *wpk_done = true;
}
extern "C" void wpk_emulate(float* const* args, const std::int64_t*, int) {
  wpk_args = args;
  wpk_emulation_diverged = false;
  constexpr unsigned threads = )" + threads + R"(u;
  constexpr std::size_t stack_bytes = 64 * 1024;
  std::vector<ucontext_t> fibers(threads);
  std::vector<char> stacks(threads * stack_bytes);
  std::unique_ptr<bool[]> done(new bool[threads]);
  for (unsigned b = 0; b < )" + std::to_string(k.grid) + R"(u; ++b) {
    blockIdx.x = b;
    for (unsigned t = 0; t < threads; ++t) {
      getcontext(&fibers[t]);
      fibers[t].uc_stack.ss_sp = stacks.data() + t * stack_bytes;
      fibers[t].uc_stack.ss_size = stack_bytes;
      fibers[t].uc_link = &wpk_scheduler;
      makecontext(&fibers[t], wpk_thread, 0);
      done[t] = false;
    }
    for (;;) {
      unsigned finished = 0, waiting = 0;
      for (unsigned t = 0; t < threads; ++t) {
        if (done[t]) continue;
        threadIdx.x = t;
        wpk_running = &fibers[t];
        wpk_done = &done[t];
        swapcontext(&wpk_scheduler, &fibers[t]);
        ++(done[t] ? finished : waiting);
      }
      if (waiting == 0) break;
      if (finished != 0) {
        // Some threads returned while others wait at a barrier.
        args[)" + last + R"(][0] = __int_as_float(0x7fc00000);
        wpk_emulation_diverged = true;
        return;
      }
    }
  }
}
)";
  // The printed source defines NAN and INFINITY itself (through __int_as_float, above).
  const std::string source = "#undef NAN\n#undef INFINITY\n" + k.source;
  KernelSource src{"cuda_emulated_" + name, "wpk_emulate", kCudaEmulationHeader, source + runner, {}, "cuda-emulated", ""};
  Obtained got = store.obtain({src}, 1).front();
  if (why) *why = got.why;
  return got.kernel;
}

// Whether the last run of an emulated kernel found threads that did not all meet its barriers.
inline bool emulation_diverged(const LoadedKernel& k) {
  const void* flag = dlsym(k.library.get(), "wpk_emulation_diverged");
  return flag && *static_cast<const bool*>(flag);
}

}  // namespace wpk::codegen::test
