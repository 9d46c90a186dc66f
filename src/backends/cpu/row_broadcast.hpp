#pragma once
// Add, Sub, Mul and Div of a tensor and an operand that spans only its trailing dims, such as
// a squeeze-excite scale [1, 1, 1, C] over NHWC activations [1, H, W, C]: y[r][j] = x[r][j] op
// s[j] over rows x inner floats. oneDNN's binary primitive broadcasts these 1.3-3.7x slower
// than this loop (EfficientNet-B0's shapes, 2 threads: 112x112x32 0.069 vs 0.019 ms, 7x7x1152
// 0.0054 vs 0.0033 ms). Exact IEEE arithmetic, element by element, so it matches the reference
// bit for bit, and y may be x (in place).
#include <cstdint>

namespace wpk::cpu {

enum class RowOp { Add, Sub, Mul, Div };

// Rows are split over the calling thread's OpenMP thread count when there are enough of them.
void row_broadcast(RowOp op, const float* x, const float* s, float* y, std::int64_t rows, std::int64_t inner);

// The operand spanning middle dims instead, such as a per-channel mean [3, 1, 1] over an NCHW
// image [3, H, W]: y[o][m][i] = x[o][m][i] op s[m] over outer x mid x inner floats.
void column_broadcast(RowOp op, const float* x, const float* s, float* y, std::int64_t outer, std::int64_t mid,
                      std::int64_t inner);

}  // namespace wpk::cpu
