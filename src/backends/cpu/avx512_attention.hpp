#pragma once
// wpk's attention kernel for CPUs with AVX-512: Y = softmax(Q Kᵀ * scale + Mask) V on the
// weight-streaming convolution's register tile (stream_conv.hpp, 7 rows x 64 columns), a chunk
// of query rows at a time: the chunk's rows copied together, their scores against every key
// (Q Kᵀ, the keys packed in blocks of 64 as that kernel's weights), the softmax of each row with
// its mask (avx2_attention.hpp's), then the scores times the values packed likewise. A chunk's
// scores stay in L2 (128 rows of 128 keys are 64 KB). Same operands and results as
// avx2_attention (avx2_attention.hpp).
#include <cstdint>
#include <vector>

#include "backends/attention_layout.hpp"

namespace wpk::cpu {

// True when this CPU runs the kernel (AVX-512F, and AVX2 and FMA for the softmax).
bool avx512_attention_available();

// As avx2_attention: y (batch x rows x dv, through y_offsets and y_row_stride) from q, k, v and
// the mask, in an OpenMP parallel region of the calling thread's thread count.
void avx512_attention(const AttentionShape& s, const AttentionOperand& q, const AttentionOperand& k,
                      const AttentionOperand& v, const AttentionOperand& mask, float* y,
                      const std::vector<std::int64_t>& y_offsets, std::int64_t y_row_stride);

}  // namespace wpk::cpu
