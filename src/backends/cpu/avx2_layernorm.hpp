#pragma once
// wpk's own LayerNormalization over the last axis for CPUs with AVX2 and FMA. oneDNN 2.6's layer
// normalization took ~35 us for BERT-base's 128 x 768 rows on two Zen 3 cores, a few times what
// the rows' traffic needs; this kernel keeps
// each row in L1 for its three passes: the mean, the variance around it, then y = (x - mean) /
// sqrt(var + epsilon) * scale + bias; sums in double over float sums of 64 (long rows lose
// nothing to float sums), deviations against a mean kept in two floats (rows far from 0 lose
// nothing to a rounded mean).
#include <cstdint>

namespace wpk::cpu {

// True when this CPU runs the kernel (AVX2 and FMA).
bool avx2_layernorm_available();

// y[r, :] = layer-normalized x[r, :] for rows r < rows of `cols` floats each (contiguous), in
// an OpenMP parallel region of the calling thread's thread count; bias may be null.
void avx2_layernorm(const float* x, float* y, std::int64_t rows, std::int64_t cols, const float* scale,
                    const float* bias, float epsilon);

}  // namespace wpk::cpu
