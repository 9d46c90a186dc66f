#include "backends/onednn/row_broadcast.hpp"

#include <omp.h>

namespace wpk::onednn {
namespace {

// Below this many elements one thread does it all: waking the others costs more.
constexpr std::int64_t kParallelElements = 1 << 15;

template <RowOp Op>
float apply(float a, float b) {
  if constexpr (Op == RowOp::Add) return a + b;
  if constexpr (Op == RowOp::Sub) return a - b;
  if constexpr (Op == RowOp::Mul) return a * b;
  return a / b;
}

// Compiled for AVX-512 and for the baseline ISA, picked at load by the CPU it runs on.
template <RowOp Op>
__attribute__((target_clones("avx512f", "default"))) void rows_of(const float* x, const float* s, float* y,
                                                                   std::int64_t r0, std::int64_t r1, std::int64_t inner) {
  for (std::int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * inner;
    float* yr = y + r * inner;
#pragma omp simd
    for (std::int64_t j = 0; j < inner; ++j) yr[j] = apply<Op>(xr[j], s[j]);
  }
}

template <RowOp Op>
void run(const float* x, const float* s, float* y, std::int64_t rows, std::int64_t inner) {
  const int threads = rows * inner >= kParallelElements ? omp_get_max_threads() : 1;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    const std::int64_t n = omp_get_num_threads(), t = omp_get_thread_num();
    rows_of<Op>(x, s, y, rows * t / n, rows * (t + 1) / n, inner);
  }
}

}  // namespace

void row_broadcast(RowOp op, const float* x, const float* s, float* y, std::int64_t rows, std::int64_t inner) {
  switch (op) {
    case RowOp::Add: return run<RowOp::Add>(x, s, y, rows, inner);
    case RowOp::Sub: return run<RowOp::Sub>(x, s, y, rows, inner);
    case RowOp::Mul: return run<RowOp::Mul>(x, s, y, rows, inner);
    case RowOp::Div: return run<RowOp::Div>(x, s, y, rows, inner);
  }
}

}  // namespace wpk::onednn
