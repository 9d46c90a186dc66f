// com.wpk Attention (graph/fused_ops.hpp): Y = softmax(Q Kᵀ * scale + Mask) V.
// On AVX2 CPUs without AVX-512, wpk's fused kernel (avx2_attention.hpp), which reads operands
// with interleaved heads in place. Elsewhere oneDNN: two batched matmuls (Kᵀ is read through
// strides, never materialised) around a softmax, with the scores kept in one scratch buffer per
// run and the mask added row by row in between; operands with interleaved heads are reordered
// to [B, H, S, D] and back around them.
#include <array>
#include <memory>
#include <utility>

#include "backends/cpu/avx2_attention.hpp"
#include "backends/onednn/onednn_kernels.hpp"
#include "backends/reference/common.hpp"
#include "graph/fused_ops.hpp"

namespace wpk::onednn {
namespace {

// WPK_AVX2_ATTENTION=0 keeps attention on oneDNN's primitives where wpk's kernel would run.
bool avx2_attention_enabled() {
  static const bool enabled = switched_on("WPK_AVX2_ATTENTION");
  return enabled;
}

// Operands in the order of interleaved_heads.
enum Operand { kQ = 0, kK = 1, kV = 2, kY = 3 };

struct AttentionPlan {
  AttentionShape shape;           // the scores are [batch, rows, cols]
  std::array<bool, 4> interleaved{};  // per Operand: [B, S, H, D] instead of [B, H, S, D]
  std::array<Shape, 4> logical;   // per Operand, as [..., rows, features]
  Shape scores_shape;             // [..., rows, cols]
  Shape y_shape;                  // as Y is written
  bool own = false;               // wpk's kernel instead of the primitives
  dnnl::matmul scores;            // Q Kᵀ * scale
  dnnl::softmax_forward softmax;
  dnnl::matmul context;  // P V
  dnnl::memory::desc q, k_t, s, v, y;
  // oneDNN's path, per interleaved Operand: the tensor as it lies (strided), contiguous, and the
  // reorder from the one to the other (to the strided Y for kY).
  std::array<dnnl::memory::desc, 4> lies, plain;
  std::array<dnnl::reorder, 4> reorders;
};

// An operand as the kernel sees it: `logical` [lead..., rows, cols] of `batch` leading entries,
// stored contiguous or, when `interleaved`, as [B, rows, H, cols].
AttentionOperand operand_view(const float* data, const Shape& logical, std::int64_t batch, bool interleaved) {
  const std::size_t r = logical.size();
  const std::int64_t rows = logical[r - 2], cols = logical[r - 1];
  AttentionOperand o;
  o.data = data;
  o.batch_offsets.resize(static_cast<std::size_t>(batch));
  if (!interleaved) {
    o.row_stride = cols;
    for (std::int64_t b = 0; b < batch; ++b) o.batch_offsets[static_cast<std::size_t>(b)] = b * rows * cols;
    return o;
  }
  const std::int64_t heads = logical[1];
  o.row_stride = heads * cols;
  for (std::int64_t b = 0; b < batch; ++b)
    o.batch_offsets[static_cast<std::size_t>(b)] = b / heads * rows * heads * cols + b % heads * cols;
  return o;
}

// The mask broadcast to the scores as an operand view (strides 0 where it broadcasts; its last
// stride is 0 or 1).
AttentionOperand mask_operand(const KernelContext& ctx, const Tensor& mask, const AttentionPlan& plan) {
  require_f32(ctx, mask, "mask");
  const Shape& full = plan.scores_shape;
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
  o.batch_offsets.assign(static_cast<std::size_t>(plan.shape.batch), 0);
  // Batch entry b's offset: its index over the leading dims, row-major, times their strides.
  for (std::int64_t b = 0; b < plan.shape.batch; ++b) {
    std::int64_t rest = b, offset = 0;
    for (std::size_t i = r - 2; i-- > 0;) {
      offset += rest % full[i] * strides[i];
      rest /= full[i];
    }
    o.batch_offsets[static_cast<std::size_t>(b)] = offset;
  }
  return o;
}

// scores[b, i, j] += mask, row by row.
void add_mask(const AttentionShape& sh, const AttentionOperand& mask, float* scores) {
  for (std::int64_t b = 0; b < sh.batch; ++b)
    for (std::int64_t i = 0; i < sh.rows; ++i) {
      const float* m = mask.data + mask.batch_offsets[static_cast<std::size_t>(b)] + i * mask.row_stride;
      float* row = scores + (b * sh.rows + i) * sh.cols;
      if (mask.col_stride == 0)
        for (std::int64_t j = 0; j < sh.cols; ++j) row[j] += *m;
      else
        for (std::int64_t j = 0; j < sh.cols; ++j) row[j] += m[j];
    }
}

// A [B, H, S, D] tensor stored as [B, S, H, D], as oneDNN sees it.
dnnl::memory::desc interleaved_desc(const Shape& logical) {
  const std::int64_t h = logical[1], s = logical[2], d = logical[3];
  return dnnl::memory::desc(Dims(logical.begin(), logical.end()), dnnl::memory::data_type::f32, Dims{s * h * d, d, h * d, 1});
}

class AttentionKernel : public OneDnnKernel {
 public:
  AttentionKernel(float scale, std::array<bool, 4> interleaved) : scale_(scale), interleaved_(interleaved) {}

  void run(KernelContext& ctx) const override {
    guarded(ctx, [&] {
      const Tensor& q = ctx.input(0);
      const Tensor& k = ctx.input(1);
      const Tensor& v = ctx.input(2);
      require_f32(ctx, q, "Q");
      require_f32(ctx, k, "K");
      require_f32(ctx, v, "V");
      auto plan = cache_.get(shape_key({&q.shape(), &k.shape(), &v.shape()}),
                             [&] { return build(ctx, q.shape(), k.shape(), v.shape()); });
      const AttentionShape& sh = plan->shape;
      const AttentionOperand mask = ctx.has_input(3) ? mask_operand(ctx, ctx.input(3), *plan) : AttentionOperand();
      Tensor& y = ctx.allocate_output(0, DType::Float32, plan->y_shape);
      if (plan->own) {
        ctx.note_variant("avx2");
        const auto view = [&](const float* data, Operand o) {
          return operand_view(data, plan->logical[o], sh.batch, plan->interleaved[o]);
        };
        const AttentionOperand y_view = view(nullptr, kY);
        avx2_attention(sh, view(q.data<float>(), kQ), view(k.data<float>(), kK), view(v.data<float>(), kV), mask,
                       y.data<float>(), y_view.batch_offsets, y_view.row_stride);
        return;
      }
      run_primitives(*plan, {&q, &k, &v}, mask, y);
    });
  }

 private:
  void run_primitives(const AttentionPlan& plan, std::array<const Tensor*, 3> in, const AttentionOperand& mask,
                      Tensor& y) const {
    const AttentionShape& sh = plan.shape;
    // Interleaved operands are reordered through contiguous copies.
    std::array<std::vector<float>, 4> copies;
    std::array<dnnl::memory, 4> mem;
    const std::array<const dnnl::memory::desc*, 4> descs = {&plan.q, &plan.k_t, &plan.v, &plan.y};
    for (int o = 0; o < 4; ++o) {
      const Tensor& t = o == kY ? y : *in[static_cast<std::size_t>(o)];
      if (!plan.interleaved[o]) {
        mem[o] = wrap(*descs[o], t);
        continue;
      }
      copies[o].resize(plan.plain[o].get_size() / sizeof(float));
      mem[o] = dnnl::memory(*descs[o], engine(), copies[o].data());
      if (o == kY) continue;
      execute(plan.reorders[o], {{DNNL_ARG_FROM, wrap(plan.lies[o], t)},
                                 {DNNL_ARG_TO, dnnl::memory(plan.plain[o], engine(), copies[o].data())}});
    }
    const std::int64_t n_scores = sh.batch * sh.rows * sh.cols;
    std::unique_ptr<float[]> scores(new float[static_cast<std::size_t>(std::max<std::int64_t>(n_scores, 1))]);
    dnnl::memory s_mem(plan.s, engine(), scores.get());
    execute(plan.scores, {{DNNL_ARG_SRC, mem[kQ]}, {DNNL_ARG_WEIGHTS, mem[kK]}, {DNNL_ARG_DST, s_mem}});
    if (mask.data) add_mask(sh, mask, scores.get());
    execute(plan.softmax, {{DNNL_ARG_SRC, s_mem}, {DNNL_ARG_DST, s_mem}});
    execute(plan.context, {{DNNL_ARG_SRC, s_mem}, {DNNL_ARG_WEIGHTS, mem[kV]}, {DNNL_ARG_DST, mem[kY]}});
    if (plan.interleaved[kY])
      execute(plan.reorders[kY], {{DNNL_ARG_FROM, dnnl::memory(plan.plain[kY], engine(), copies[kY].data())},
                                  {DNNL_ARG_TO, wrap(plan.lies[kY], y)}});
  }

  AttentionPlan build(const KernelContext& ctx, const Shape& q, const Shape& k, const Shape& v) const {
    AttentionPlan p;
    p.interleaved = interleaved_;
    const std::array<const Shape*, 3> given = {&q, &k, &v};
    for (int o = 0; o < 3; ++o) {
      Shape s = *given[static_cast<std::size_t>(o)];
      if (p.interleaved[o] && !swap_heads(s))
        ctx.fail(ErrorCode::InvalidArgument, std::string("interleaved_heads needs rank-4 ") + "QKV"[o] + ", got " +
                                                 shape_to_string(s));
      p.logical[o] = s;
    }
    const Shape &lq = p.logical[kQ], &lk = p.logical[kK], &lv = p.logical[kV];
    const std::size_t r = lq.size();
    bool ok = r >= 2 && lk.size() == r && lv.size() == r && lq[r - 1] == lk[r - 1] && lk[r - 2] == lv[r - 2];
    for (std::size_t i = 0; ok && i + 2 < r; ++i) ok = lq[i] == lk[i] && lq[i] == lv[i];
    if (!ok)
      ctx.fail(ErrorCode::InvalidArgument, "Q " + shape_to_string(q) + ", K " + shape_to_string(k) + ", V " +
                                               shape_to_string(v) + " do not fit attention");
    if (p.interleaved[kY] && r != 4)
      ctx.fail(ErrorCode::InvalidArgument, "interleaved_heads needs a rank-4 Y, got rank " + std::to_string(r));
    AttentionShape& sh = p.shape;
    sh.batch = 1;
    for (std::size_t i = 0; i + 2 < r; ++i) sh.batch *= lq[i];
    sh.rows = lq[r - 2];
    sh.cols = lk[r - 2];
    sh.d = lq[r - 1];
    sh.dv = lv[r - 1];
    sh.scale = scale_;
    p.logical[kY] = lq;
    p.logical[kY].back() = sh.dv;
    p.scores_shape = lq;
    p.scores_shape.back() = sh.cols;
    p.y_shape = p.logical[kY];
    if (p.interleaved[kY]) swap_heads(p.y_shape);
    p.own = avx2_attention_available() && avx2_attention_enabled();
    if (p.own) return p;

    for (int o = 0; o < 4; ++o)
      if (p.interleaved[o]) {
        p.lies[o] = interleaved_desc(p.logical[o]);
        p.plain[o] = f32_desc(Dims(p.logical[o].begin(), p.logical[o].end()), Tag::abcd);
        p.reorders[o] = o == kY ? dnnl::reorder(dnnl::reorder::primitive_desc(engine(), p.plain[o], engine(), p.lies[o]))
                                : dnnl::reorder(dnnl::reorder::primitive_desc(engine(), p.lies[o], engine(), p.plain[o]));
      }
    const std::int64_t d = sh.d, dv = sh.dv;
    p.q = f32_desc({sh.batch, sh.rows, d}, Tag::abc);
    p.k_t = dnnl::memory::desc({sh.batch, d, sh.cols}, dnnl::memory::data_type::f32, Dims{sh.cols * d, 1, d});
    p.s = f32_desc({sh.batch, sh.rows, sh.cols}, Tag::abc);
    p.v = f32_desc({sh.batch, sh.cols, dv}, Tag::abc);
    p.y = f32_desc({sh.batch, sh.rows, dv}, Tag::abc);
    dnnl::primitive_attr scaled = make_attr();
    scaled.set_output_scales(0, {scale_});
    p.scores = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(p.q, p.k_t, p.s), scaled, engine()));
    p.softmax = dnnl::softmax_forward(dnnl::softmax_forward::primitive_desc(
        dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, p.s, 2), make_attr(), engine()));
    p.context = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(p.s, p.v, p.y), make_attr(), engine()));
    return p;
  }

  float scale_;
  std::array<bool, 4> interleaved_;
  ShapeCache<AttentionPlan> cache_;
};

}  // namespace

std::string attention_unsupported(const Node& node, const Graph& graph) {
  for (ValueId v : node.inputs)
    if (v != kNoValue && graph.value(v).dtype != DType::Float32 && graph.value(v).dtype != DType::Undefined)
      return "inputs are not float32";
  if (node.inputs.size() < 3) return "needs Q, K and V";
  return "";
}

std::unique_ptr<Kernel> make_attention(const Node& node, const Graph&) {
  return std::make_unique<AttentionKernel>(node.attr_float("scale", 1.0f), attention_interleaved_heads(node));
}

}  // namespace wpk::onednn
