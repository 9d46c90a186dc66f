// BatchNormalization at inference (constant scale, bias, mean and variance) on oneDNN, NCHW or
// NHWC: what is left of BatchNorm when it cannot fold into a convolution (DenseNet's
// pre-activation BN -> ReLU -> Conv).
#include "backends/onednn/onednn_kernels.hpp"

namespace wpk::onednn {
namespace {

struct BatchNormPlan {
  dnnl::batch_normalization_forward primitive;
  dnnl::memory::desc x;
};

class BatchNormKernel : public OneDnnKernel {
 public:
  BatchNormKernel(const Node& node, std::vector<Tensor> params)
      : params_(std::move(params)), epsilon_(node.attr_float("epsilon", 1e-5f)),
        channels_last_(node.attr_int("channels_last", 0) == 1), relu_(node.attr_string("activation", "") == "Relu") {}

  void run(KernelContext& ctx) const override {
    guarded(ctx, [&] {
      const Tensor& x = image_input(ctx);
      const std::int64_t channels = channels_last_ ? x.shape()[3] : x.shape()[1];
      if (channels != params_[0].numel())
        ctx.fail(ErrorCode::InvalidArgument, "input " + shape_to_string(x.shape()) + " has " + std::to_string(channels) +
                                                 " channels, the parameters " + std::to_string(params_[0].numel()));
      auto plan = cache_.get(shape_key({&x.shape()}), [&] { return build(x.shape()); });
      Tensor& y = ctx.allocate_output(0, DType::Float32, x.shape());
      const auto vec = f32_desc({channels}, Tag::a);
      execute(plan->primitive, {{DNNL_ARG_SRC, wrap_arg(plan->primitive, DNNL_ARG_SRC, plan->x, x)},
                                {DNNL_ARG_DST, wrap_arg(plan->primitive, DNNL_ARG_DST, plan->x, y)},
                                {DNNL_ARG_SCALE, wrap_arg(plan->primitive, DNNL_ARG_SCALE, vec, params_[0])},
                                {DNNL_ARG_SHIFT, wrap_arg(plan->primitive, DNNL_ARG_SHIFT, vec, params_[1])},
                                {DNNL_ARG_MEAN, wrap_arg(plan->primitive, DNNL_ARG_MEAN, vec, params_[2])},
                                {DNNL_ARG_VARIANCE, wrap_arg(plan->primitive, DNNL_ARG_VARIANCE, vec, params_[3])}});
    });
  }

 private:
  BatchNormPlan build(const Shape& s) const {
    const Dims nchw = channels_last_ ? Dims{s[0], s[3], s[1], s[2]} : Dims{s[0], s[1], s[2], s[3]};
    BatchNormPlan plan;
    plan.x = f32_desc(nchw, channels_last_ ? Tag::nhwc : Tag::nchw);
    auto flags = dnnl::normalization_flags::use_global_stats | dnnl::normalization_flags::use_scale |
                 dnnl::normalization_flags::use_shift;
    if (relu_) flags = flags | dnnl::normalization_flags::fuse_norm_relu;
    dnnl::batch_normalization_forward::desc desc(dnnl::prop_kind::forward_inference, plan.x, epsilon_, flags);
    plan.primitive = dnnl::batch_normalization_forward(dnnl::batch_normalization_forward::primitive_desc(desc, make_attr(), engine()));
    return plan;
  }

  std::vector<Tensor> params_;  // scale, bias, mean, variance
  float epsilon_;
  bool channels_last_;
  bool relu_;  // com.wpk FusedBatchNorm with activation "Relu"
  ShapeCache<BatchNormPlan> cache_;
};

}  // namespace

std::string batchnorm_unsupported(const Node& node, const Graph& graph) {
  if (node.inputs.size() != 5) return "needs X, scale, B, mean and var";
  if (node.attr_int("training_mode", 0) != 0) return "training mode";
  if (node.attr_int("spatial", 1) != 1) return "spatial = 0";
  for (std::size_t o = 1; o < node.outputs.size(); ++o)
    if (node.outputs[o] != kNoValue) return "running statistics outputs";
  const ValueInfo& x = graph.value(node.inputs[0]);
  if (x.dtype != DType::Float32 || !x.dims || x.dims->size() != 4) return "input is not a known 4-D float32 tensor";
  return batchnorm_params_unsupported(node, graph, 1);
}

std::unique_ptr<Kernel> make_batchnorm(const Node& node, const Graph& graph) {
  std::vector<Tensor> params;
  for (std::size_t i = 1; i < 5; ++i) params.push_back(*graph.initializer(node.inputs[i]));
  return std::make_unique<BatchNormKernel>(node, std::move(params));
}

}  // namespace wpk::onednn
