#pragma once
// wpk's attention kernel for CPUs with AVX-512: Y = softmax(Q Kᵀ * scale + Mask) V, a chunk of
// up to 128 query rows at a time on a register tile of its own (6 rows x 4 vectors of 16): the
// rows' scores against every key (the keys scaled and packed in blocks of 64 once per batch
// entry), each row's exponentials with its mask added and their sum, then the values, read in
// place, weighted by them and scaled by the row's 1 / sum in the store. A chunk's scores stay in
// L2 (128 rows of 128 keys are 64 KB). Same operands and results as avx2_attention
// (avx2_attention.hpp).
#include <cstdint>
#include <vector>

#include "backends/attention_layout.hpp"

namespace wpk::cpu {

// True when this CPU runs the kernel (AVX-512F).
bool avx512_attention_available();

// As avx2_attention: y (batch x rows x dv, through y_offsets and y_row_stride) from q, k, v and
// the mask, in an OpenMP parallel region of the calling thread's thread count.
void avx512_attention(const AttentionShape& s, const AttentionOperand& q, const AttentionOperand& k,
                      const AttentionOperand& v, const AttentionOperand& mask, float* y,
                      const std::vector<std::int64_t>& y_offsets, std::int64_t y_row_stride);

}  // namespace wpk::cpu
