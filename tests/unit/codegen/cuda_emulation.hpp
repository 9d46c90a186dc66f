#pragma once
// Host emulation of printed CUDA kernels (codegen/cuda_printer.hpp), so their arithmetic and
// indexing are checked against the interpreter on machines without a GPU: the CUDA source is
// compiled by the host compiler under a header that defines the CUDA built-ins it uses, and a
// runner calls the kernel once per (block, thread). The kernels the printer writes today share
// no memory between threads and never synchronise, so running the threads one after another is
// exact; kernels that do would need the threads as cooperative fibers.
#include <memory>
#include <string>

#include "codegen/cuda_printer.hpp"
#include "codegen_test_support.hpp"

namespace wpk::codegen::test {

constexpr const char kCudaEmulationHeader[] = R"(#include <cmath>
#include <cstdint>
#include <cstring>
#include <math.h>
struct wpk_emulated_dim3 { unsigned x = 0, y = 0, z = 0; };
static wpk_emulated_dim3 blockIdx, threadIdx;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __restrict__ __restrict
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, sizeof f); return f; }
)";

// The printed kernel compiled for the host, with the entry point codegen_test_support.hpp's run()
// calls: every block and thread of the launch, in order.
inline std::shared_ptr<LoadedKernel> build_emulated(const PrintedCudaKernel& k, const std::string& name, std::string* why) {
  static KernelStore store("", find_host_compiler());
  std::string runner = "extern \"C\" void wpk_emulate(float* const* args, const std::int64_t*, int) {\n"
                       "  for (unsigned b = 0; b < " + std::to_string(k.grid) + "u; ++b)\n"
                       "    for (unsigned t = 0; t < " + std::to_string(k.threads) + "u; ++t) {\n"
                       "      blockIdx.x = b;\n      threadIdx.x = t;\n      " + k.symbol + "(";
  for (std::size_t i = 0; i < k.args; ++i) runner += (i ? ", args[" : "args[") + std::to_string(i) + "]";
  runner += ");\n    }\n}\n";
  // The printed source defines NAN and INFINITY itself (through __int_as_float, above).
  const std::string source = "#undef NAN\n#undef INFINITY\n" + k.source;
  KernelSource src{"cuda_emulated_" + name, "wpk_emulate", kCudaEmulationHeader, source + runner, {}, "cuda-emulated"};
  Obtained got = store.obtain({src}, 1).front();
  if (why) *why = got.why;
  return got.kernel;
}

}  // namespace wpk::codegen::test
