#pragma once
// wpk's attention kernel for CPUs with AVX2 and FMA: Y = softmax(Q Kᵀ * scale + Mask) V, one
// block of 6 query rows at a time, their scores, softmax and context computed while the rows sit
// in L1. oneDNN's path (attention.cpp) runs two batched matmuls and a softmax over the whole
// score tensor (786 KB for BERT-base at seq 128) with the mask added in between; here the scores
// never leave a 6 x T scratch, the mask is added in the softmax's first pass, and the products run
// on the register tile of wpk's AVX2 convolution (avx2_tile.hpp).
// Operands are read through strides, so Q, K, V and Y may be views (heads interleaved in rows).
#include <cstdint>
#include <vector>

#include "backends/attention_layout.hpp"

namespace wpk::cpu {

using wpk::AttentionOperand;
using wpk::AttentionShape;

// True when this CPU runs the kernel (AVX2 and FMA).
bool avx2_attention_available();

// Pieces the AVX-512 attention kernel (avx512_attention.hpp) shares:
// One call's operands and its work items: item i is rows [c * chunk, (c + 1) * chunk) of batch
// entry i / chunks, c = i % chunks.
struct AttentionJob {
  const AttentionShape& s;
  const AttentionOperand &q, &k, &v, &mask;
  float* y;
  const std::vector<std::int64_t>& y_offsets;
  std::int64_t y_row_stride;
  std::int64_t chunk, chunks;  // query rows per work item, items per batch entry
};
// Keys [cols][d] (rows `stride` apart) times `scale` as a product's weights in blocks of `block`
// keys: [ceil(cols / block)][d][block], the keys past `cols` zero. Scaling the keys once saves
// a multiply per score.
void pack_attention_keys(const float* k, std::int64_t stride, std::int64_t cols, std::int64_t d, float scale,
                         std::int64_t block, float* out);

// y (batch x rows x dv, through y_offsets and y_row_stride, columns contiguous) from q [batch,
// rows, d], k [batch, cols, d], v [batch, cols, dv] (columns contiguous) and, when its data is not
// null, mask [batch, rows, cols] (col_stride 0 or 1). Runs in an OpenMP parallel region of the
// calling thread's thread count. A row whose scores hold a NaN or whose largest score is
// infinite comes out NaN, as the reference's softmax makes it.
void avx2_attention(const AttentionShape& s, const AttentionOperand& q, const AttentionOperand& k,
                    const AttentionOperand& v, const AttentionOperand& mask, float* y,
                    const std::vector<std::int64_t>& y_offsets, std::int64_t y_row_stride);

}  // namespace wpk::cpu
