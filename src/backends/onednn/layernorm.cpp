// LayerNormalization over the last axis on oneDNN, with constant scale and bias.
#include "backends/onednn/onednn_kernels.hpp"

namespace wpk::onednn {
namespace {

struct LayerNormPlan {
  dnnl::layer_normalization_forward primitive;
  dnnl::memory::desc x, param;
};

class LayerNormKernel : public OneDnnKernel {
 public:
  LayerNormKernel(Tensor scale, Tensor bias, float epsilon)
      : scale_(std::move(scale)), bias_(std::move(bias)), epsilon_(epsilon) {}

  void run(KernelContext& ctx) const override {
    guarded(ctx, [&] {
      const Tensor& x = layernorm_input(ctx, scale_.numel());
      Tensor& y = ctx.allocate_output(0, DType::Float32, x.shape());
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
  ShapeCache<LayerNormPlan> cache_;
};

}  // namespace

std::string layernorm_unsupported(const Node& node, const Graph& graph) { return constant_layernorm_unsupported(node, graph); }

std::unique_ptr<Kernel> make_layernorm(const Node& node, const Graph& graph) {
  const Tensor* bias = node.inputs.size() > 2 && node.inputs[2] != kNoValue ? graph.initializer(node.inputs[2]) : nullptr;
  return std::make_unique<LayerNormKernel>(*graph.initializer(node.inputs[1]), bias ? *bias : Tensor(),
                                           node.attr_float("epsilon", 1e-5f));
}

}  // namespace wpk::onednn
