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

namespace wpk::cpu {

// An operand seen as [batch][rows][cols] floats: element (b, i, j) at
// data[batch_offsets[b] + i * row_stride + j * col_stride].
struct AttentionOperand {
  const float* data = nullptr;
  std::vector<std::int64_t> batch_offsets;
  std::int64_t row_stride = 0, col_stride = 1;
};

struct AttentionShape {
  std::int64_t batch = 0;  // the product of the leading dims (batch x heads)
  std::int64_t rows = 0;   // queries, S
  std::int64_t cols = 0;   // keys, T
  std::int64_t d = 0;      // the Q and K feature size
  std::int64_t dv = 0;     // the V feature size
  float scale = 1;
};

// True when this CPU runs the kernel (AVX2 and FMA, without AVX-512F: there oneDNN's primitives
// have twice the vector width, and this kernel is unmeasured).
bool avx2_attention_available();

// y (batch x rows x dv, through y_offsets and y_row_stride, columns contiguous) from q [batch,
// rows, d], k [batch, cols, d], v [batch, cols, dv] (columns contiguous) and, when its data is not
// null, mask [batch, rows, cols] (col_stride 0 or 1). Runs in an OpenMP parallel region of the
// calling thread's thread count. A row whose scores hold a NaN or whose largest score is
// infinite comes out NaN, as the reference's softmax makes it.
void avx2_attention(const AttentionShape& s, const AttentionOperand& q, const AttentionOperand& k,
                    const AttentionOperand& v, const AttentionOperand& mask, float* y,
                    const std::vector<std::int64_t>& y_offsets, std::int64_t y_row_stride);

}  // namespace wpk::cpu
