// QLinearConv on oneDNN's integer convolutions: uint8 or int8 NHWC activations (channels_last,
// set by the layout pass), int8 weights with zero point 0 (per tensor or per output channel),
// int32 bias; the accumulator is requantized to the output's scale and zero point in the
// primitive (output scales x_scale * w_scale[c] / y_scale, formed in float32 as the reference
// forms them; ties round to even and saturate).
//
// Where oneDNN has no 8-bit dot products (below AVX-512 VNNI), its sums are not exact
// (exact_int8_products): such a conv is left to the reference unless its input is uint8 and
// every weight lies in [-64, 64] (weights quantized with a reduced range, as quantizers offer).
#include <cmath>

#include "backends/onednn/onednn_kernels.hpp"
#include "backends/reference/conv_pool.hpp"

namespace wpk::onednn {
namespace {

enum Input : std::size_t { X = 0, XScale, XZero, W, WScale, WZero, YScale, YZero, Bias };

dnnl::memory::data_type int_type(DType t) {
  switch (t) {
    case DType::UInt8: return dnnl::memory::data_type::u8;
    case DType::Int8: return dnnl::memory::data_type::s8;
    default: return dnnl::memory::data_type::s32;
  }
}

bool is_8bit(DType t) { return t == DType::UInt8 || t == DType::Int8; }

std::int32_t zero_point_of(const Tensor& t) {
  return t.dtype() == DType::UInt8 ? t.data<std::uint8_t>()[0] : t.data<std::int8_t>()[0];
}

const Tensor* constant_input(const Node& node, const Graph& graph, std::size_t i) {
  return i < node.inputs.size() && node.inputs[i] != kNoValue ? graph.initializer(node.inputs[i]) : nullptr;
}

struct QConvPlan {
  dnnl::convolution_forward primitive;
  dnnl::memory::desc src, dst, bias;
  dnnl::memory weights;
  Shape y_shape;  // NHWC
};

class QLinearConvKernel : public OneDnnKernel {
 public:
  QLinearConvKernel(const Node& node, const Graph& graph) : group_(node.attr_int("group", 1)) {
    const Tensor& w = *constant_input(node, graph, W);
    const Shape& ws = w.shape();
    weights_ = PackedWeights(w, weights_view(ws));
    x_type_ = graph.value(node.inputs[X]).dtype;
    x_zero_ = zero_point_of(*constant_input(node, graph, XZero));
    const Tensor& y_zero = *constant_input(node, graph, YZero);
    y_type_ = y_zero.dtype();
    y_zero_ = zero_point_of(y_zero);
    const float xs = constant_input(node, graph, XScale)->data<float>()[0];
    const float ys = constant_input(node, graph, YScale)->data<float>()[0];
    const Tensor& w_scale = *constant_input(node, graph, WScale);
    for (std::int64_t c = 0; c < w_scale.numel(); ++c) scales_.push_back(xs * w_scale.data<float>()[c] / ys);
    if (const Tensor* b = constant_input(node, graph, Bias)) bias_ = *b;
  }

  void run(KernelContext& ctx) const override {
    guarded(ctx, [&] {
      const Tensor& x = ctx.input(X);
      if (x.rank() != 4 || x.dtype() != x_type_)
        ctx.fail(ErrorCode::InvalidArgument, std::string("expects a 4-D ") + dtype_name(x_type_) + " input, got " +
                                                 dtype_name(x.dtype()) + " " + shape_to_string(x.shape()));
      auto plan = cache_.get(shape_key({&x.shape()}), [&] { return build(ctx, x.shape()); });
      Tensor& y = ctx.allocate_output(0, y_type_, plan->y_shape);
      Args args = {{DNNL_ARG_SRC, wrap_arg(plan->primitive, DNNL_ARG_SRC, plan->src, x)},
                   {DNNL_ARG_WEIGHTS, plan->weights},
                   {DNNL_ARG_DST, wrap_arg(plan->primitive, DNNL_ARG_DST, plan->dst, y)}};
      if (!bias_.empty()) args.emplace(DNNL_ARG_BIAS, wrap_arg(plan->primitive, DNNL_ARG_BIAS, plan->bias, bias_));
      args.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zero_point_memory(x_zero_));
      args.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, zero_point_memory(y_zero_));
      execute(plan->primitive, args);
    });
  }

  // Compiles for the declared input shape. With a fixed shape only the packed weights stay;
  // else the loaded ones stay beside them (a packing with compensation is not read back).
  void warm_up(const Node& node, const Shape& x_shape, bool only_shape) {
    KernelContext ctx(node, {});
    auto plan = cache_.get(shape_key({&x_shape}), [&] { return build(ctx, x_shape); });
    if (only_shape) weights_.keep_only(plan->weights, weights_view(weights_.shape()));
    else weights_.keep_beside_loaded(plan->weights, weights_view(weights_.shape()));
  }

  bool owns_input(std::size_t i) const override { return i == W && weights_.owns_copy(); }

 private:
  dnnl::memory::desc weights_view(const Shape& ws) const {
    if (group_ == 1) return {{ws[0], ws[1], ws[2], ws[3]}, dnnl::memory::data_type::s8, Tag::oihw};
    return {{group_, ws[0] / group_, ws[1], ws[2], ws[3]}, dnnl::memory::data_type::s8, Tag::goihw};
  }

  // A one-element int32 memory holding z, on this thread (bound for one execute()).
  static dnnl::memory zero_point_memory(std::int32_t z) {
    thread_local std::int32_t values[2];
    thread_local int next = 0;
    next ^= 1;
    values[next] = z;
    return dnnl::memory({{1}, dnnl::memory::data_type::s32, Tag::x}, engine(), &values[next]);
  }

  QConvPlan build(const KernelContext& ctx, const Shape& nhwc) const {
    const Shape nchw{nhwc[0], nhwc[3], nhwc[1], nhwc[2]};
    const Shape& ws = weights_.shape();
    if (nchw[1] != ws[1] * group_)
      ctx.fail(ErrorCode::InvalidArgument, "input has " + std::to_string(nchw[1]) + " channels; weights " +
                                               shape_to_string(ws) + " with group " + std::to_string(group_) + " need " +
                                               std::to_string(ws[1] * group_));
    const reference::Window win = reference::conv_window(ctx, nchw, {ws[2], ws[3]}, false);
    const Dims src_dims = {nchw[0], nchw[1], nchw[2], nchw[3]}, dst_dims = {nchw[0], ws[0], win.out[1], win.out[2]};
    QConvPlan plan;
    plan.y_shape = {dst_dims[0], dst_dims[2], dst_dims[3], dst_dims[1]};
    plan.src = {src_dims, int_type(x_type_), Tag::nhwc};
    plan.dst = {dst_dims, int_type(y_type_), Tag::nhwc};
    plan.bias = {{ws[0]}, dnnl::memory::data_type::s32, Tag::x};
    Dims w_dims = weights_view(ws).dims();
    dnnl::primitive_attr attr = make_attr();
    attr.set_output_scales(scales_.size() > 1 ? 1 << 1 : 0, scales_);
    attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
    const dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, plan.src,
        dnnl::memory::desc(w_dims, dnnl::memory::data_type::s8, Tag::any), bias_.empty() ? dnnl::memory::desc() : plan.bias,
        plan.dst, {win.stride[1], win.stride[2]}, {win.dilation[1] - 1, win.dilation[2] - 1},
        {win.pad_begin[1], win.pad_begin[2]}, {win.pad_end[1], win.pad_end[2]});
    const dnnl::convolution_forward::primitive_desc pd(desc, attr, engine());
    plan.weights = weights_.pack_for(pd.weights_desc(), weights_view(ws));
    plan.primitive = dnnl::convolution_forward(pd);
    return plan;
  }

  std::int64_t group_;
  PackedWeights weights_;
  DType x_type_ = DType::UInt8, y_type_ = DType::UInt8;
  std::int32_t x_zero_ = 0, y_zero_ = 0;
  std::vector<float> scales_;
  Tensor bias_;
  ShapeCache<QConvPlan> cache_;
};

}  // namespace

std::string qlinear_conv_unsupported(const Node& node, const Graph& graph) {
  if (node.attr_int("channels_last", 0) != 1) return "NHWC (channels_last) only";
  if (node.inputs.size() < 8) return "missing inputs";
  const DType x = graph.value(node.inputs[X]).dtype;
  if (!is_8bit(x)) return "input is not uint8 or int8";
  const Tensor* w = constant_input(node, graph, W);
  if (!w || w->dtype() != DType::Int8 || w->rank() != 4) return "weights are not a constant 4-D int8 tensor";
  const std::int64_t group = node.attr_int("group", 1);
  if (group < 1 || w->shape()[0] % group != 0) return "group does not divide the output channels";
  for (std::size_t i : {XScale, YScale}) {
    const Tensor* s = constant_input(node, graph, i);
    if (!s || s->dtype() != DType::Float32 || s->numel() != 1) return "scales are not constant float32 scalars";
  }
  const Tensor* w_scale = constant_input(node, graph, WScale);
  if (!w_scale || w_scale->dtype() != DType::Float32 || (w_scale->numel() != 1 && w_scale->numel() != w->shape()[0]))
    return "weight scale is not a constant float32 scalar or [C_out]";
  const Tensor* x_zero = constant_input(node, graph, XZero);
  const Tensor* y_zero = constant_input(node, graph, YZero);
  if (!x_zero || x_zero->numel() != 1 || x_zero->dtype() != x || !y_zero || y_zero->numel() != 1 ||
      !is_8bit(y_zero->dtype()))
    return "zero points are not constant 8-bit scalars";
  const Tensor* w_zero = constant_input(node, graph, WZero);
  if (!w_zero || w_zero->dtype() != DType::Int8) return "weight zero point is not a constant int8 tensor";
  for (std::int64_t i = 0; i < w_zero->numel(); ++i)
    if (w_zero->data<std::int8_t>()[i] != 0) return "weight zero point is not 0";
  if (node.inputs.size() > Bias && node.inputs[Bias] != kNoValue) {
    const Tensor* b = constant_input(node, graph, Bias);
    if (!b || b->dtype() != DType::Int32 || b->numel() != w->shape()[0]) return "bias is not a constant int32 [C_out]";
  }
  if (!exact_int8_products(*w, x == DType::Int8))
    return x == DType::Int8 ? "int8 input on a CPU without AVX-512 VNNI (oneDNN would halve the weights)"
                            : "weights past [-64, 64] on a CPU without AVX-512 VNNI (8-bit products would saturate)";
  return "";
}

std::unique_ptr<Kernel> make_qlinear_conv(const Node& node, const Graph& graph) {
  auto kernel = std::make_unique<QLinearConvKernel>(node, graph);
  if (auto shape = static_shape(graph, node.inputs[X]); shape && shape->size() == 4)
    try_warm_up([&] { kernel->warm_up(node, *shape, fully_static(graph, node.inputs[X])); });
  return kernel;
}

}  // namespace wpk::onednn
