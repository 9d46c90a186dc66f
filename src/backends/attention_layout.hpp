#pragma once
// com.wpk Attention's operands as its kernels read them, shared by every backend that runs it:
// the shapes checked and flattened to [batch][rows][cols] (graph/fused_ops.hpp says the op;
// interleaved_heads lets Q, K, V and Y lie as [B, S, H, D]), and strided views of the operands
// and of the mask broadcast to the scores.
#include <array>
#include <cstdint>
#include <vector>

#include "backends/kernel.hpp"

namespace wpk {

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

// Operands in the order of interleaved_heads.
enum AttentionOperandIndex { kAttentionQ = 0, kAttentionK = 1, kAttentionV = 2, kAttentionY = 3 };

struct AttentionGeometry {
  AttentionShape shape;               // the scores are [batch, rows, cols]
  std::array<bool, 4> interleaved{};  // per operand: [B, S, H, D] instead of [B, H, S, D]
  std::array<Shape, 4> logical;       // per operand, as [..., rows, features]
  Shape scores_shape;                 // [..., rows, cols]
  Shape y_shape;                      // as Y is written
};

// Q, K and V (inputs 0-2), each checked to be float32.
std::array<const Tensor*, 3> attention_inputs(const KernelContext& ctx);

// Checks Q, K and V against each other and the attribute; fails naming the node.
AttentionGeometry attention_geometry(const KernelContext& ctx, const Shape& q, const Shape& k, const Shape& v, float scale,
                                     const std::array<bool, 4>& interleaved);

// Operand `o` of `data` as the geometry lays it out (contiguous, or heads interleaved in rows).
AttentionOperand attention_view(const float* data, const AttentionGeometry& g, AttentionOperandIndex o);

// The float32 mask broadcast to the scores (strides 0 where it broadcasts; its last stride is 0
// or 1); fails naming the node when it does not broadcast.
AttentionOperand attention_mask_view(const KernelContext& ctx, const Tensor& mask, const AttentionGeometry& g);

}  // namespace wpk
