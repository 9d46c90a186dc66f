#include "backends/cpu/row_broadcast.hpp"

#include <omp.h>

namespace wpk::cpu {
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

template <RowOp Op>
__attribute__((always_inline)) inline void rows_with(const float* x, const float* s, float* y, std::int64_t r0,
                                                     std::int64_t r1, std::int64_t inner) {
  for (std::int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * inner;
    float* yr = y + r * inner;
#pragma omp simd
    for (std::int64_t j = 0; j < inner; ++j) yr[j] = apply<Op>(xr[j], s[j]);
  }
}

// Compiled for AVX-512 and for the baseline ISA, picked at load by the CPU it runs on. Not a
// template: clang cannot multiversion those, so the op is a switch around inlined loops.
__attribute__((target_clones("avx512f", "default"))) void rows_of(RowOp op, const float* x, const float* s, float* y,
                                                                   std::int64_t r0, std::int64_t r1, std::int64_t inner) {
  switch (op) {
    case RowOp::Add: return rows_with<RowOp::Add>(x, s, y, r0, r1, inner);
    case RowOp::Sub: return rows_with<RowOp::Sub>(x, s, y, r0, r1, inner);
    case RowOp::Mul: return rows_with<RowOp::Mul>(x, s, y, r0, r1, inner);
    case RowOp::Div: return rows_with<RowOp::Div>(x, s, y, r0, r1, inner);
  }
}

template <RowOp Op>
__attribute__((always_inline)) inline void columns_with(const float* x, const float* s, float* y, std::int64_t r0,
                                                        std::int64_t r1, std::int64_t mid, std::int64_t inner) {
  for (std::int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * inner;
    float* yr = y + r * inner;
    const float v = s[r % mid];
#pragma omp simd
    for (std::int64_t j = 0; j < inner; ++j) yr[j] = apply<Op>(xr[j], v);
  }
}

__attribute__((target_clones("avx512f", "default"))) void columns_of(RowOp op, const float* x, const float* s, float* y,
                                                                      std::int64_t r0, std::int64_t r1, std::int64_t mid,
                                                                      std::int64_t inner) {
  switch (op) {
    case RowOp::Add: return columns_with<RowOp::Add>(x, s, y, r0, r1, mid, inner);
    case RowOp::Sub: return columns_with<RowOp::Sub>(x, s, y, r0, r1, mid, inner);
    case RowOp::Mul: return columns_with<RowOp::Mul>(x, s, y, r0, r1, mid, inner);
    case RowOp::Div: return columns_with<RowOp::Div>(x, s, y, r0, r1, mid, inner);
  }
}

}  // namespace

void column_broadcast(RowOp op, const float* x, const float* s, float* y, std::int64_t outer, std::int64_t mid,
                      std::int64_t inner) {
  const std::int64_t rows = outer * mid;
  const int threads = rows * inner >= kParallelElements ? omp_get_max_threads() : 1;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    const std::int64_t n = omp_get_num_threads(), t = omp_get_thread_num();
    columns_of(op, x, s, y, rows * t / n, rows * (t + 1) / n, mid, inner);
  }
}

void row_broadcast(RowOp op, const float* x, const float* s, float* y, std::int64_t rows, std::int64_t inner) {
  const int threads = rows * inner >= kParallelElements ? omp_get_max_threads() : 1;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    const std::int64_t n = omp_get_num_threads(), t = omp_get_thread_num();
    rows_of(op, x, s, y, rows * t / n, rows * (t + 1) / n, inner);
  }
}

}  // namespace wpk::cpu
