// Conv and com.wpk FusedConv on oneDNN: 2-D, float32, constant weights packed once into the
// layout the chosen implementation wants; bias, residual add and activation fused as post-ops;
// activations NCHW or NHWC (channels_last) as the graph says, so no reorders of activations.
#include "backends/onednn/onednn_kernels.hpp"
#include "backends/reference/conv_pool.hpp"

namespace wpk::onednn {
namespace {

struct ConvPlan {
  dnnl::convolution_forward primitive;
  dnnl::memory::desc src, dst;
  dnnl::memory weights;  // packed
  Shape y_shape;         // in the node's layout
};

// ONNX weights [C_out, C_in / group, kH, kW]; oneDNN wants the group split out when group > 1.
dnnl::memory::desc loaded_weights_desc(const Shape& ws, std::int64_t group) {
  if (group == 1) return f32_desc({ws[0], ws[1], ws[2], ws[3]}, Tag::oihw);
  return f32_desc({group, ws[0] / group, ws[1], ws[2], ws[3]}, Tag::goihw);
}

class ConvKernel : public Kernel {
 public:
  ConvKernel(const Node& node, const Tensor& w, Tensor b)
      : weights_(w, loaded_weights_desc(w.shape(), node.attr_int("group", 1))), b_(std::move(b)), act_(read_activation(node)), channels_last_(node.attr_int("channels_last", 0) == 1),
        group_(node.attr_int("group", 1)),
        has_residual_(node.inputs.size() > 3 && node.inputs[3] != kNoValue) {}

  void run(KernelContext& ctx) const override {
    guarded(ctx, [&] {
      const Tensor& x = image_input(ctx);
      auto plan = cache_.get(shape_key({&x.shape()}), [&] { return build(ctx, x.shape()); });
      Tensor& y = ctx.allocate_output(0, DType::Float32, plan->y_shape);
      Args args = {
          {DNNL_ARG_SRC, wrap(plan->src, x)}, {DNNL_ARG_WEIGHTS, plan->weights}, {DNNL_ARG_DST, wrap(plan->dst, y)}};
      if (!b_.empty()) args.emplace(DNNL_ARG_BIAS, wrap(f32_desc({b_.numel()}, Tag::x), b_));
      if (has_residual_) accumulate_residual_into(ctx, 3, y);
      execute(plan->primitive, args);
    });
  }

  // Compiles for the shapes the graph declares (symbolic dims as 1) so weights are packed at
  // session load, not at the first run.
  void warm_up(const Node& node, const Shape& x_shape) {
    KernelContext ctx(node, {});
    auto plan = cache_.get(shape_key({&x_shape}), [&] { return build(ctx, x_shape); });
    weights_.keep_only(plan->weights);
  }

  bool owns_input(std::size_t i) const override { return i == 1 && weights_.owns_copy(); }

 private:
  ConvPlan build(const KernelContext& ctx, const Shape& x_shape) const {
    const Shape nchw = channels_last_ ? Shape{x_shape[0], x_shape[3], x_shape[1], x_shape[2]} : x_shape;
    const Shape& ws = weights_.shape();
    if (group_ < 1 || ws[0] % group_ != 0 || nchw[1] != ws[1] * group_)
      ctx.fail(ErrorCode::InvalidArgument, "input has " + std::to_string(nchw[1]) + " channels; weights " +
                                               shape_to_string(ws) + " with group " + std::to_string(group_) + " need " +
                                               std::to_string(ws[1] * group_));
    const reference::Window win = reference::conv_window(ctx, nchw, {ws[2], ws[3]}, false);
    const Dims src_dims = {nchw[0], nchw[1], nchw[2], nchw[3]};
    const Dims dst_dims = {nchw[0], ws[0], win.out[1], win.out[2]};
    const Tag act_tag = channels_last_ ? Tag::nhwc : Tag::nchw;
    const Dims w_dims = loaded_weights_desc(ws, group_).dims();

    ConvPlan plan;
    plan.src = f32_desc(src_dims, act_tag);
    plan.dst = f32_desc(dst_dims, act_tag);
    dnnl::post_ops ops;
    if (has_residual_) ops.append_sum(1.f);
    append_activation(ops, act_);
    dnnl::primitive_attr attr = make_attr();
    attr.set_post_ops(ops);
    const auto bias_desc = b_.empty() ? dnnl::memory::desc() : f32_desc({ws[0]}, Tag::x);
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, plan.src,
        f32_desc(w_dims, Tag::any), bias_desc, plan.dst, {win.stride[1], win.stride[2]},
        {win.dilation[1] - 1, win.dilation[2] - 1}, {win.pad_begin[1], win.pad_begin[2]},
        {win.pad_end[1], win.pad_end[2]});
    dnnl::convolution_forward::primitive_desc pd(desc, attr, engine());
    plan.primitive = dnnl::convolution_forward(pd);
    plan.weights = weights_.pack_for(pd.weights_desc());
    plan.y_shape = channels_last_ ? Shape{dst_dims[0], dst_dims[2], dst_dims[3], dst_dims[1]} : Shape(dst_dims);
    return plan;
  }

  PackedWeights weights_;
  Tensor b_;
  Activation act_;
  bool channels_last_;
  std::int64_t group_;
  bool has_residual_;
  ShapeCache<ConvPlan> cache_;
};

}  // namespace

std::string conv_unsupported(const Node& node, const Graph& graph) {
  if (node.inputs.size() < 2) return "needs weights";
  const Tensor* w = graph.initializer(node.inputs[1]);
  if (!w || w->dtype() != DType::Float32 || w->rank() != 4) return "weights are not a constant 4-D float32 tensor";
  const std::int64_t group = node.attr_int("group", 1);
  if (group < 1 || w->shape()[0] % group != 0) return "group does not divide the output channels";
  if (node.inputs.size() > 2 && node.inputs[2] != kNoValue) {
    const Tensor* b = graph.initializer(node.inputs[2]);
    if (!b || b->dtype() != DType::Float32 || b->numel() != w->shape()[0]) return "bias is not a constant float32 [C_out]";
  }
  if (!activation_supported(read_activation(node))) return "activation " + read_activation(node).kind + " has no oneDNN post-op";
  const ValueInfo& x = graph.value(node.inputs[0]);
  if (x.dtype != DType::Float32 && x.dtype != DType::Undefined) return "input is not float32";
  return "";
}

std::unique_ptr<Kernel> make_conv(const Node& node, const Graph& graph) {
  const Tensor* b = node.inputs.size() > 2 && node.inputs[2] != kNoValue ? graph.initializer(node.inputs[2]) : nullptr;
  auto kernel = std::make_unique<ConvKernel>(node, *graph.initializer(node.inputs[1]), b ? *b : Tensor());
  if (auto shape = static_shape(graph, node.inputs[0]); shape && shape->size() == 4)
    try_warm_up([&] { kernel->warm_up(node, *shape); });
  return kernel;
}

}  // namespace wpk::onednn
