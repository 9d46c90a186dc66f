// com.wpk Attention (graph/fused_ops.hpp) on oneDNN: Y = softmax(Q Kᵀ * scale + Mask) V.
// Two batched matmuls (Kᵀ is read through strides, never materialised) around a softmax, with
// the scores kept in one scratch buffer per run.
#include <memory>

#include "backends/onednn/onednn_kernels.hpp"
#include "backends/reference/common.hpp"

namespace wpk::onednn {
namespace {

struct AttentionPlan {
  dnnl::matmul scores;  // Q Kᵀ * scale
  dnnl::softmax_forward softmax;
  dnnl::matmul context;  // P V
  dnnl::memory::desc q, k_t, s, v, y;
  std::int64_t batch = 0, rows = 0, cols = 0;  // scores are [batch, rows, cols]
  Shape y_shape;
};

class AttentionKernel : public Kernel {
 public:
  explicit AttentionKernel(float scale) : scale_(scale) {}

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
      const std::int64_t n_scores = plan->batch * plan->rows * plan->cols;
      std::unique_ptr<float[]> scores(new float[static_cast<std::size_t>(std::max<std::int64_t>(n_scores, 1))]);
      dnnl::memory s_mem(plan->s, engine(), scores.get());
      execute(plan->scores, {{DNNL_ARG_SRC, wrap(plan->q, q)}, {DNNL_ARG_WEIGHTS, wrap(plan->k_t, k)}, {DNNL_ARG_DST, s_mem}});
      if (ctx.has_input(3)) add_mask(ctx, ctx.input(3), *plan, scores.get());
      execute(plan->softmax, {{DNNL_ARG_SRC, s_mem}, {DNNL_ARG_DST, s_mem}});
      Tensor& y = ctx.allocate_output(0, DType::Float32, plan->y_shape);
      execute(plan->context, {{DNNL_ARG_SRC, s_mem}, {DNNL_ARG_WEIGHTS, wrap(plan->v, v)}, {DNNL_ARG_DST, wrap(plan->y, y)}});
    });
  }

 private:
  // scores[b, i, j] += mask broadcast to [lead..., rows, cols].
  void add_mask(const KernelContext& ctx, const Tensor& mask, const AttentionPlan& plan, float* scores) const {
    require_f32(ctx, mask, "mask");
    Shape full = plan.y_shape;
    full.back() = plan.cols;
    if (mask.rank() > static_cast<int>(full.size()))
      ctx.fail(ErrorCode::InvalidArgument, "mask " + shape_to_string(mask.shape()) + " has a higher rank than the scores");
    const Shape merged = reference::broadcast_shapes({full, mask.shape()}, ctx);
    if (merged != full)
      ctx.fail(ErrorCode::InvalidArgument, "mask " + shape_to_string(mask.shape()) + " does not broadcast to the scores " +
                                               shape_to_string(full));
    const auto strides = reference::broadcast_strides(mask.shape(), full);
    const float* m = mask.data<float>();
    std::int64_t i = 0;
    reference::for_each_index(full, {strides}, [&](const std::int64_t* off) { scores[i++] += m[off[0]]; });
  }

  AttentionPlan build(const KernelContext& ctx, const Shape& q, const Shape& k, const Shape& v) const {
    const std::size_t r = q.size();
    bool ok = r >= 2 && k.size() == r && v.size() == r && q[r - 1] == k[r - 1] && k[r - 2] == v[r - 2];
    for (std::size_t i = 0; ok && i + 2 < r; ++i) ok = q[i] == k[i] && q[i] == v[i];
    if (!ok)
      ctx.fail(ErrorCode::InvalidArgument, "Q " + shape_to_string(q) + ", K " + shape_to_string(k) + ", V " +
                                               shape_to_string(v) + " do not fit attention");
    AttentionPlan p;
    p.batch = 1;
    for (std::size_t i = 0; i + 2 < r; ++i) p.batch *= q[i];
    p.rows = q[r - 2];
    p.cols = k[r - 2];
    const std::int64_t d = q[r - 1], dv = v[r - 1];
    p.q = f32_desc({p.batch, p.rows, d}, Tag::abc);
    p.k_t = dnnl::memory::desc({p.batch, d, p.cols}, dnnl::memory::data_type::f32, Dims{p.cols * d, 1, d});
    p.s = f32_desc({p.batch, p.rows, p.cols}, Tag::abc);
    p.v = f32_desc({p.batch, p.cols, dv}, Tag::abc);
    p.y = f32_desc({p.batch, p.rows, dv}, Tag::abc);
    dnnl::primitive_attr scaled = make_attr();
    scaled.set_output_scales(0, {scale_});
    p.scores = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(p.q, p.k_t, p.s), scaled, engine()));
    p.softmax = dnnl::softmax_forward(dnnl::softmax_forward::primitive_desc(
        dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, p.s, 2), make_attr(), engine()));
    p.context = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(p.s, p.v, p.y), make_attr(), engine()));
    p.y_shape = q;
    p.y_shape.back() = dv;
    return p;
  }

  float scale_;
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
  return std::make_unique<AttentionKernel>(node.attr_float("scale", 1.0f));
}

}  // namespace wpk::onednn
