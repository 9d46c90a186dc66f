#pragma once
// Prints a lowered kernel (loop_ir.hpp) as CUDA C++ for NVRTC (jit/nvrtc_compiler.hpp). Loops the
// schedule bound to blocks (Schedule::bind_block) become the grid, those bound to threads the
// thread block, each flattened to one dimension (the later variable varying fastest); the other
// loops stay loops in every thread. The entry point is
//   extern "C" __global__ void SYMBOL(const float* a0, ..., float* aN)
// with the kernel's buffers in LoweredKernel::args order, the output last, launched as
// grid x threads (PrintedCudaKernel). Extents are fixed: a kernel with dynamic variables is
// refused.
#include <cstdint>
#include <string>

#include "codegen/loop_ir.hpp"

namespace wpk::codegen {

struct PrintedCudaKernel {
  std::string symbol;
  std::string source;        // self-contained; its first line says what generated it
  std::int64_t grid = 1;     // blocks
  std::int64_t threads = 1;  // threads per block (at most kMaxCudaThreads)
  std::size_t args = 0;      // buffers, the output last
};

constexpr std::int64_t kMaxCudaThreads = 1024;

// Throws std::invalid_argument for what CUDA cannot run as printed: dynamic extents, parallel
// loops, more than kMaxCudaThreads threads or 2^31 - 1 blocks.
PrintedCudaKernel print_cuda(const LoweredKernel& k, const std::string& symbol, const std::string& generator);

}  // namespace wpk::codegen
