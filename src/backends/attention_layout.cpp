#include "backends/attention_layout.hpp"

#include <string>

#include "backends/reference/common.hpp"
#include "graph/fused_ops.hpp"

namespace wpk {

std::array<const Tensor*, 3> attention_inputs(const KernelContext& ctx) {
  std::array<const Tensor*, 3> qkv{};
  for (std::size_t i = 0; i < 3; ++i) {
    qkv[i] = &ctx.input(i);
    if (qkv[i]->dtype() != DType::Float32)
      ctx.fail(ErrorCode::InvalidArgument,
               std::string(1, "QKV"[i]) + " must be float32, got " + dtype_name(qkv[i]->dtype()));
  }
  return qkv;
}

AttentionGeometry attention_geometry(const KernelContext& ctx, const Shape& q, const Shape& k, const Shape& v, float scale,
                                     const std::array<bool, 4>& interleaved) {
  AttentionGeometry p;
  p.interleaved = interleaved;
  const std::array<const Shape*, 3> given = {&q, &k, &v};
  for (int o = 0; o < 3; ++o) {
    Shape s = *given[static_cast<std::size_t>(o)];
    if (p.interleaved[o] && !swap_heads(s))
      ctx.fail(ErrorCode::InvalidArgument, std::string("interleaved_heads needs rank-4 ") + "QKV"[o] + ", got " +
                                               shape_to_string(s));
    p.logical[o] = s;
  }
  const Shape &lq = p.logical[kAttentionQ], &lk = p.logical[kAttentionK], &lv = p.logical[kAttentionV];
  const std::size_t r = lq.size();
  bool ok = r >= 2 && lk.size() == r && lv.size() == r && lq[r - 1] == lk[r - 1] && lk[r - 2] == lv[r - 2];
  for (std::size_t i = 0; ok && i + 2 < r; ++i) ok = lq[i] == lk[i] && lq[i] == lv[i];
  if (!ok)
    ctx.fail(ErrorCode::InvalidArgument, "Q " + shape_to_string(q) + ", K " + shape_to_string(k) + ", V " +
                                             shape_to_string(v) + " do not fit attention");
  if (p.interleaved[kAttentionY] && r != 4)
    ctx.fail(ErrorCode::InvalidArgument, "interleaved_heads needs a rank-4 Y, got rank " + std::to_string(r));
  AttentionShape& sh = p.shape;
  sh.batch = 1;
  for (std::size_t i = 0; i + 2 < r; ++i) sh.batch *= lq[i];
  sh.rows = lq[r - 2];
  sh.cols = lk[r - 2];
  sh.d = lq[r - 1];
  sh.dv = lv[r - 1];
  sh.scale = scale;
  p.logical[kAttentionY] = lq;
  p.logical[kAttentionY].back() = sh.dv;
  p.scores_shape = lq;
  p.scores_shape.back() = sh.cols;
  p.y_shape = p.logical[kAttentionY];
  if (p.interleaved[kAttentionY]) swap_heads(p.y_shape);
  return p;
}

AttentionOperand attention_view(const float* data, const AttentionGeometry& g, AttentionOperandIndex o) {
  const Shape& logical = g.logical[o];
  const std::int64_t batch = g.shape.batch;
  const std::size_t r = logical.size();
  const std::int64_t rows = logical[r - 2], cols = logical[r - 1];
  AttentionOperand view;
  view.data = data;
  view.batch_offsets.resize(static_cast<std::size_t>(batch));
  if (!g.interleaved[o]) {
    view.row_stride = cols;
    for (std::int64_t b = 0; b < batch; ++b) view.batch_offsets[static_cast<std::size_t>(b)] = b * rows * cols;
    return view;
  }
  const std::int64_t heads = logical[1];
  view.row_stride = heads * cols;
  for (std::int64_t b = 0; b < batch; ++b)
    view.batch_offsets[static_cast<std::size_t>(b)] = b / heads * rows * heads * cols + b % heads * cols;
  return view;
}

AttentionOperand attention_mask_view(const KernelContext& ctx, const Tensor& mask, const AttentionGeometry& g) {
  if (mask.dtype() != DType::Float32)
    ctx.fail(ErrorCode::InvalidArgument, std::string("mask must be float32, got ") + dtype_name(mask.dtype()));
  const Shape& full = g.scores_shape;
  if (mask.rank() > static_cast<int>(full.size()))
    ctx.fail(ErrorCode::InvalidArgument, "mask " + shape_to_string(mask.shape()) + " has a higher rank than the scores");
  const Shape merged = reference::broadcast_shapes({full, mask.shape()}, ctx);
  if (merged != full)
    ctx.fail(ErrorCode::InvalidArgument, "mask " + shape_to_string(mask.shape()) + " does not broadcast to the scores " +
                                             shape_to_string(full));
  const std::vector<std::int64_t> strides = reference::broadcast_strides(mask.shape(), full);
  const std::size_t r = full.size();
  AttentionOperand o;
  o.data = mask.data<float>();
  o.row_stride = strides[r - 2];
  o.col_stride = strides[r - 1];
  o.batch_offsets.assign(static_cast<std::size_t>(g.shape.batch), 0);
  // Batch entry b's offset: its index over the leading dims, row-major, times their strides.
  for (std::int64_t b = 0; b < g.shape.batch; ++b) {
    std::int64_t rest = b, offset = 0;
    for (std::size_t i = r - 2; i-- > 0;) {
      offset += rest % full[i] * strides[i];
      rest /= full[i];
    }
    o.batch_offsets[static_cast<std::size_t>(b)] = offset;
  }
  return o;
}

}  // namespace wpk
