// LayerNormalization over the last axis on oneDNN, with constant scale and bias; on CPUs
// without AVX-512, wpk's AVX2 kernel (avx2_layernorm.hpp) instead.
#include "backends/cpu/avx2_layernorm.hpp"
#include "backends/onednn/onednn_kernels.hpp"

namespace wpk::onednn {
namespace {

bool avx2_layernorm_enabled() {
  static const bool enabled = switched_on("WPK_AVX2_LAYERNORM");
  return enabled;
}

struct LayerNormPlan {
  dnnl::layer_normalization_forward primitive;
  dnnl::memory::desc x, param;
};

class LayerNormKernel : public Kernel {
 public:
  LayerNormKernel(Tensor scale, Tensor bias, float epsilon)
      : scale_(std::move(scale)), bias_(std::move(bias)), epsilon_(epsilon) {}

  void run(KernelContext& ctx) const override {
    guarded(ctx, [&] {
      const Tensor& x = ctx.input(0);
      require_f32(ctx, x, "input");
      if (x.rank() < 1 || x.shape().back() != scale_.numel())
        ctx.fail(ErrorCode::InvalidArgument, "input " + shape_to_string(x.shape()) + " does not end in the scale's size " +
                                                 std::to_string(scale_.numel()));
      Tensor& y = ctx.allocate_output(0, DType::Float32, x.shape());
      if (own_) {
        ctx.note_variant("avx2");
        const std::int64_t cols = scale_.numel();
        avx2_layernorm(x.data<float>(), y.data<float>(), cols ? x.numel() / cols : 0, cols, scale_.data<float>(),
                       bias_.empty() ? nullptr : bias_.data<float>(), epsilon_);
        return;
      }
      auto plan = cache_.get(shape_key({&x.shape()}), [&] { return build(x.shape()); });
      Args args = {{DNNL_ARG_SRC, wrap_arg(plan->primitive, DNNL_ARG_SRC, plan->x, x)},
                   {DNNL_ARG_DST, wrap_arg(plan->primitive, DNNL_ARG_DST, plan->x, y)},
                   {DNNL_ARG_SCALE, wrap_arg(plan->primitive, DNNL_ARG_SCALE, plan->param, scale_)}};
      if (!bias_.empty()) args.emplace(DNNL_ARG_SHIFT, wrap_arg(plan->primitive, DNNL_ARG_SHIFT, plan->param, bias_));
      execute(plan->primitive, args);
    });
  }

 private:
  LayerNormPlan build(const Shape& shape) const {
    std::int64_t rows = 1;
    for (std::size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
    LayerNormPlan plan;
    plan.x = f32_desc({rows, shape.back()}, Tag::ab);
    plan.param = f32_desc({shape.back()}, Tag::a);
    auto flags = dnnl::normalization_flags::use_scale;
    if (!bias_.empty()) flags = flags | dnnl::normalization_flags::use_shift;
    dnnl::layer_normalization_forward::desc desc(dnnl::prop_kind::forward_inference, plan.x, epsilon_, flags);
    plan.primitive = dnnl::layer_normalization_forward(dnnl::layer_normalization_forward::primitive_desc(desc, make_attr(), engine()));
    return plan;
  }

  Tensor scale_, bias_;
  float epsilon_;
  bool own_ = avx2_layernorm_available() && avx2_layernorm_enabled();
  ShapeCache<LayerNormPlan> cache_;
};

}  // namespace

std::string layernorm_unsupported(const Node& node, const Graph& graph) {
  const ValueInfo& x = graph.value(node.inputs[0]);
  if (x.dtype != DType::Float32) return "input is not float32";
  if (node.domain.empty() && graph.opset() < 17) return "LayerNormalization is an opset-17 op";
  const std::int64_t axis = node.attr_int("axis", -1);
  if (axis != -1 && (!x.dims || axis != static_cast<std::int64_t>(x.dims->size()) - 1)) return "only the last axis";
  for (std::size_t o = 1; o < node.outputs.size(); ++o)
    if (node.outputs[o] != kNoValue) return "Mean/InvStdDev outputs";
  if (node.inputs.size() < 2 || node.inputs[1] == kNoValue) return "needs a scale";
  for (std::size_t i = 1; i < node.inputs.size() && i < 3; ++i) {
    if (node.inputs[i] == kNoValue) continue;
    const Tensor* t = graph.initializer(node.inputs[i]);
    if (!t || t->dtype() != DType::Float32 || t->rank() != 1) return "scale and bias must be constant float32 vectors";
  }
  // Both are read for every column the scale has (the reference reports other lengths).
  if (node.inputs.size() > 2 && node.inputs[2] != kNoValue &&
      graph.initializer(node.inputs[2])->numel() != graph.initializer(node.inputs[1])->numel())
    return "bias and scale differ in length";
  return "";
}

std::unique_ptr<Kernel> make_layernorm(const Node& node, const Graph& graph) {
  const Tensor* bias = node.inputs.size() > 2 && node.inputs[2] != kNoValue ? graph.initializer(node.inputs[2]) : nullptr;
  return std::make_unique<LayerNormKernel>(*graph.initializer(node.inputs[1]), bias ? *bias : Tensor(),
                                           node.attr_float("epsilon", 1e-5f));
}

}  // namespace wpk::onednn
