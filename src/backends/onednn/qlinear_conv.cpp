// QLinearConv on oneDNN's integer convolutions: uint8 or int8 NHWC activations (channels_last,
// set by the layout pass), int8 weights with zero point 0 (per tensor or per output channel),
// int32 bias; the accumulator is requantized to the output's scale and zero point in the
// primitive (output scales x_scale * w_scale[c] / y_scale, formed in float32 as the reference
// forms them; ties round to even and saturate).
//
// Its arithmetic is a config:
//   arithmetic=int8   oneDNN's integer convolution. Exact only where oneDNN has 8-bit dot
//                     products (AVX-512 VNNI, AMX), or for uint8 input with weights in [-64, 64]
//                     (exact_int8_products); offered only there.
//   arithmetic=float  the codes minus their zero point converted to float32 (a reorder), oneDNN's
//                     float32 convolution over the weights' codes and bias as floats, then a
//                     reorder that scales, rounds to even, adds the zero point and saturates: the
//                     integer sums while they stay below 2^24 (one code apart at most past it),
//                     at float32 speed, on every CPU.
//
// com.wpk QLinearConvAdd (graph/fused_ops.hpp) adds a residual's codes R to the convolution's
// codes C before either is stored, as post-ops on the sums scaled to C's units: round, clip to
// C's range (less its zero point), times C_scale / Y_scale, then the sum post-op over Y holding
// R (scale K = R_scale / Y_scale, R's zero point); Y's zero point last. In float arithmetic the
// sums are scaled by a binary multiply post-op per channel and summed onto the float32 staging,
// which holds (R - R_zero) * K (a reorder of R), before the reorder into codes.
#include <cmath>
#include <optional>

#include "backends/onednn/onednn_kernels.hpp"
#include "backends/reference/conv_pool.hpp"
#include "graph/fused_ops.hpp"

namespace wpk::onednn {
namespace {

// QLinearConv's inputs, then QLinearConvAdd's; YScale and YZero are the convolution's codes'
// (QLinearConvAdd's C_scale and C_zero).
enum Input : std::size_t {
  X = 0, XScale, XZero, W, WScale, WZero, YScale, YZero, Bias,
  R = kQLinearConvAddResidual, RScale, RZero, SumScale, SumZero
};

dnnl::memory::data_type int_type(DType t) {
  switch (t) {
    case DType::UInt8: return dnnl::memory::data_type::u8;
    case DType::Int8: return dnnl::memory::data_type::s8;
    default: return dnnl::memory::data_type::s32;
  }
}

std::int32_t zero_point_of(const Tensor& t) {
  return t.dtype() == DType::UInt8 ? t.data<std::uint8_t>()[0] : t.data<std::int8_t>()[0];
}

struct QConvPlan {
  dnnl::convolution_forward primitive;
  dnnl::memory::desc src, dst, bias;
  dnnl::memory weights;
  Shape y_shape;  // NHWC
  // arithmetic=float: the input reordered into float32 staging `float_src`, the convolution
  // writing float32 staging `float_dst`, reordered out into the codes.
  bool in_float = false;
  dnnl::memory::desc float_src, float_dst;
  dnnl::reorder to_float, from_float;
  dnnl::reorder residual_to_float;  // QLinearConvAdd in float: (R - R_zero) * K into float_dst
  dnnl::memory::desc channel_scales;  // ... and the per-channel scales its post-op multiplies by
  // Where the convolution cannot take the sum as its last post-op at speed, it writes its own
  // staging and this adds the residual's (held in a third staging) onto it.
  std::optional<dnnl::binary> add_residual;
};

class QLinearConvKernel : public OneDnnKernel {
 public:
  QLinearConvKernel(const Node& node, const Graph& graph, bool in_float)
      : group_(node.attr_int("group", 1)), in_float_(in_float) {
    const Tensor& w = *constant_input(node, graph, W);
    const Shape& ws = w.shape();
    weights_ = PackedWeights(in_float ? integers_as_float(w) : w, weights_view(ws));
    x_type_ = graph.value(node.inputs[X]).dtype;
    x_zero_ = zero_point_of(*constant_input(node, graph, XZero));
    const Tensor& y_zero = *constant_input(node, graph, YZero);
    y_type_ = y_zero.dtype();
    y_zero_ = zero_point_of(y_zero);
    const float xs = constant_input(node, graph, XScale)->data<float>()[0];
    const float ys = constant_input(node, graph, YScale)->data<float>()[0];
    residual_ = fused_residual_input(node) == static_cast<int>(R);
    if (residual_) {
      // C's codes (ys, y_zero_ so far), then the sum's: the output is the sum's.
      const float sum_scale = constant_input(node, graph, SumScale)->data<float>()[0];
      code_low_ = (y_type_ == DType::UInt8 ? 0.f : -128.f) - static_cast<float>(y_zero_);
      code_high_ = (y_type_ == DType::UInt8 ? 255.f : 127.f) - static_cast<float>(y_zero_);
      code_to_sum_ = ys / sum_scale;
      residual_scale_ = constant_input(node, graph, RScale)->data<float>()[0] / sum_scale;
      residual_zero_ = zero_point_of(*constant_input(node, graph, RZero));
      const Tensor& sum_zero = *constant_input(node, graph, SumZero);
      y_type_ = sum_zero.dtype();
      y_zero_ = zero_point_of(sum_zero);
    }
    const Tensor& w_scale = *constant_input(node, graph, WScale);
    for (std::int64_t c = 0; c < w_scale.numel(); ++c) scales_.push_back(xs * w_scale.data<float>()[c] / ys);
    if (const Tensor* b = constant_input(node, graph, Bias)) bias_ = in_float ? integers_as_float(*b) : *b;
  }

  void run(KernelContext& ctx) const override {
    guarded(ctx, [&] {
      const Tensor& x = ctx.input(X);
      if (x.rank() != 4 || x.dtype() != x_type_)
        ctx.fail(ErrorCode::InvalidArgument, std::string("expects a 4-D ") + dtype_name(x_type_) + " input, got " +
                                                 dtype_name(x.dtype()) + " " + shape_to_string(x.shape()));
      auto plan = cache_.get(shape_key({&x.shape()}), [&] { return build(ctx, x.shape()); });
      Tensor& y = ctx.allocate_output(0, y_type_, plan->y_shape);
      if (plan->in_float) return run_in_float(ctx, *plan, x, y);
      if (residual_) accumulate_residual_into(ctx, R, y);
      Args args = {{DNNL_ARG_SRC, wrap_arg(plan->primitive, DNNL_ARG_SRC, plan->src, x)},
                   {DNNL_ARG_WEIGHTS, plan->weights},
                   {DNNL_ARG_DST, wrap_arg(plan->primitive, DNNL_ARG_DST, plan->dst, y)}};
      if (!bias_.empty()) args.emplace(DNNL_ARG_BIAS, wrap_arg(plan->primitive, DNNL_ARG_BIAS, plan->bias, bias_));
      if (x_zero_ != 0) args.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, int32_scalar_memory(x_zero_));
      if (y_zero_ != 0) args.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, int32_scalar_memory(y_zero_));
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
    const auto type = in_float_ ? dnnl::memory::data_type::f32 : dnnl::memory::data_type::s8;
    if (group_ == 1) return {{ws[0], ws[1], ws[2], ws[3]}, type, Tag::oihw};
    return {{group_, ws[0] / group_, ws[1], ws[2], ws[3]}, type, Tag::goihw};
  }

  void run_in_float(const KernelContext& ctx, const QConvPlan& plan, const Tensor& x, Tensor& y) const {
    const dnnl::memory src = thread_memory(0, plan.float_src), acc = thread_memory(1, plan.float_dst);
    execute(plan.to_float, {{DNNL_ARG_FROM, wrap_arg(plan.to_float, DNNL_ARG_FROM, plan.src, x)}, {DNNL_ARG_TO, src}});
    Args args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, plan.weights}, {DNNL_ARG_DST, acc}};
    if (!bias_.empty()) args.emplace(DNNL_ARG_BIAS, wrap_arg(plan.primitive, DNNL_ARG_BIAS, plan.bias, bias_));
    std::optional<dnnl::memory> residual;
    if (residual_) {
      const Tensor& r = residual_input(ctx, R, y);
      residual = plan.add_residual ? thread_memory(2, plan.float_dst) : acc;
      execute(plan.residual_to_float,
              {{DNNL_ARG_FROM, wrap_arg(plan.residual_to_float, DNNL_ARG_FROM, plan.dst, r)}, {DNNL_ARG_TO, *residual}});
      args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                   dnnl::memory(plan.channel_scales, engine(), const_cast<float*>(scales_.data())));
    }
    execute(plan.primitive, args);
    if (plan.add_residual)
      execute(*plan.add_residual, {{DNNL_ARG_SRC_0, acc}, {DNNL_ARG_SRC_1, *residual}, {DNNL_ARG_DST, acc}});
    execute(plan.from_float, {{DNNL_ARG_FROM, acc}, {DNNL_ARG_TO, wrap_arg(plan.from_float, DNNL_ARG_TO, plan.dst, y)}});
  }

  // arithmetic=float (see the file comment).
  void build_in_float(QConvPlan& plan, const Dims& src_dims, const Dims& dst_dims, const Dims& w_dims,
                      const reference::Window& win) const {
    plan.in_float = true;
    plan.float_src = f32_desc(src_dims, Tag::nhwc);
    plan.float_dst = f32_desc(dst_dims, Tag::nhwc);
    plan.bias = f32_desc({dst_dims[1]}, Tag::x);
    dnnl::primitive_attr in = make_attr();
    in.set_zero_points(DNNL_ARG_SRC, 0, {x_zero_});
    plan.to_float = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), plan.src, engine(), plan.float_src, in));
    dnnl::primitive_attr out = make_attr();
    dnnl::primitive_attr conv_attr = make_attr();
    std::optional<dnnl::convolution_forward::primitive_desc> pd;
    if (residual_) {
      // The staging holds (R - R_zero) * K; the convolution adds its sums times the scales.
      dnnl::primitive_attr r = make_attr();
      r.set_output_scales(0, {residual_scale_});
      r.set_zero_points(DNNL_ARG_SRC, 0, {residual_zero_});
      plan.residual_to_float = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), plan.dst, engine(), plan.float_dst, r));
      plan.channel_scales = f32_desc({1, dst_dims[1] == static_cast<std::int64_t>(scales_.size()) ? dst_dims[1] : 1, 1, 1}, Tag::nchw);
      // (post_ops and attributes are handles, and an attribute's chain is not replaced by a
      // second set_post_ops: each is built afresh.)
      const auto scaled_codes = [&](bool then_sum) {
        dnnl::post_ops ops;
        ops.append_binary(dnnl::algorithm::binary_mul, plan.channel_scales);
        append_code_to_sum(ops);
        if (then_sum) ops.append_sum(1.f);
        return ops;
      };
      conv_attr.set_post_ops(scaled_codes(true));
      pd = conv_pd(plan, w_dims, win, conv_attr);
      // oneDNN's AVX2 convolutions take a sum only as the first post-op and leave the rest to
      // its reference convolution (hundreds of times slower): there the residual is added after.
      if (is_reference_impl(pd->impl_info_str())) {
        conv_attr = make_attr();
        conv_attr.set_post_ops(scaled_codes(false));
        pd = conv_pd(plan, w_dims, win, conv_attr);
        plan.add_residual = dnnl::binary(dnnl::binary::primitive_desc(
            dnnl::binary::desc(dnnl::algorithm::binary_add, plan.float_dst, plan.float_dst, plan.float_dst), engine()));
      }
    } else {
      out.set_output_scales(scales_.size() > 1 ? 1 << 1 : 0, scales_);
    }
    out.set_zero_points(DNNL_ARG_DST, 0, {y_zero_});
    plan.from_float = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), plan.float_dst, engine(), plan.dst, out));
    if (!pd) pd = conv_pd(plan, w_dims, win, conv_attr);
    plan.weights = weights_.pack_for(pd->weights_desc(), weights_view(weights_.shape()));
    plan.primitive = dnnl::convolution_forward(*pd);
  }

  // The float32 convolution of arithmetic=float between the plan's stagings.
  dnnl::convolution_forward::primitive_desc conv_pd(const QConvPlan& plan, const Dims& w_dims, const reference::Window& win,
                                                    const dnnl::primitive_attr& attr) const {
    const dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, plan.float_src, f32_desc(w_dims, Tag::any),
        bias_.empty() ? dnnl::memory::desc() : plan.bias, plan.float_dst, {win.stride[1], win.stride[2]},
        {win.dilation[1] - 1, win.dilation[2] - 1}, {win.pad_begin[1], win.pad_begin[2]}, {win.pad_end[1], win.pad_end[2]});
    return dnnl::convolution_forward::primitive_desc(desc, attr, engine());
  }

  // QLinearConvAdd: the sums scaled to C's units become C's codes less their zero point (rounded
  // to even, clipped to C's range), then the sum's units.
  void append_code_to_sum(dnnl::post_ops& ops) const {
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_round, 0.f, 0.f);
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, code_low_, code_high_);
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, code_to_sum_, 0.f);
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
    if (in_float_) {
      build_in_float(plan, src_dims, dst_dims, w_dims, win);
      return plan;
    }
    dnnl::primitive_attr attr = make_attr();
    attr.set_output_scales(scales_.size() > 1 ? 1 << 1 : 0, scales_);
    // A zero point of 0 (a Relu's codes: most of a quantized CNN's) is left out: oneDNN then
    // packs the weights without the zero point's compensation and skips applying it.
    if (x_zero_ != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    if (y_zero_ != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
    if (residual_) {
      dnnl::post_ops ops;
      append_code_to_sum(ops);
      ops.append_sum(residual_scale_, residual_zero_);
      attr.set_post_ops(ops);
    }
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
  bool in_float_;
  PackedWeights weights_;
  DType x_type_ = DType::UInt8, y_type_ = DType::UInt8;
  std::int32_t x_zero_ = 0, y_zero_ = 0;
  std::vector<float> scales_;
  Tensor bias_;
  // QLinearConvAdd (y_type_ and y_zero_ are then the sum's).
  bool residual_ = false;
  float code_low_ = 0.f, code_high_ = 0.f;  // C's range less its zero point
  float code_to_sum_ = 1.f;                 // C_scale / Y_scale
  float residual_scale_ = 1.f;              // R_scale / Y_scale
  std::int32_t residual_zero_ = 0;
  ShapeCache<QConvPlan> cache_;
};

}  // namespace

std::string qlinear_conv_unsupported(const Node& node, const Graph& graph) {
  if (node.attr_int("channels_last", 0) != 1) return "NHWC (channels_last) only";
  if (std::string why = qlinear_conv_params_unsupported(node, graph); !why.empty()) return why;
  const std::int64_t group = node.attr_int("group", 1);
  if (group < 1 || constant_input(node, graph, W)->shape()[0] % group != 0) return "group does not divide the output channels";
  return "";
}

std::vector<std::string> qlinear_conv_configs(const Node& node, const Graph& graph) {
  return integer_arithmetic_configs(node, graph, X, W);
}

std::unique_ptr<Kernel> make_qlinear_conv(const Node& node, const Graph& graph, const std::string& config) {
  const bool in_float = chooses_float_arithmetic(node, qlinear_conv_configs(node, graph), config);
  auto kernel = std::make_unique<QLinearConvKernel>(node, graph, in_float);
  if (auto shape = static_shape(graph, node.inputs[X]); shape && shape->size() == 4)
    try_warm_up([&] { kernel->warm_up(node, *shape, fully_static(graph, node.inputs[X])); });
  return kernel;
}

}  // namespace wpk::onednn
