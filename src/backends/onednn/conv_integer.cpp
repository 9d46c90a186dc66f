// com.wpk ConvIntegerToFloat (graph/fused_ops.hpp: a dynamically quantized convolution) on
// oneDNN's integer convolution: X 8-bit NCHW with its run-time zero point, constant int8 W with
// zero point 0, packed once. oneDNN's integer kernels read and write their own layouts (NHWC), so
// X is reordered into that layout in staging and Y out of it where they differ from NCHW (a byte
// per input element, four per output). The int32 sums become float32 as they are stored, times
// X_scale * W_scale by a binary multiply post-op whose one-element operand is formed at each run
// (MatMulIntegerToFloat's way, matmul_integer.cpp).
//
// Its arithmetic is a config, as QLinearConv's: arithmetic=int8 where exact_int8_products, and
// arithmetic=float on every CPU (X minus its zero point reordered into float32, oneDNN's float32
// convolution over the weights' codes as floats: the integer sums while they stay below 2^24).
#include <optional>

#include "backends/onednn/onednn_kernels.hpp"
#include "backends/reference/conv_pool.hpp"
#include "graph/fused_ops.hpp"

namespace wpk::onednn {
namespace {

enum Input : std::size_t { X = 0, W, XScale, WScale, XZero, WZero };

bool is_8bit(DType t) { return t == DType::UInt8 || t == DType::Int8; }

struct ConvIntegerPlan {
  dnnl::convolution_forward primitive;
  dnnl::memory::desc src, dst;  // NCHW, as the tensors lie
  dnnl::memory weights;
  Shape y_shape;
  // X into the primitive's layout (float32 in float arithmetic, the zero point taken off there),
  // Y out of it, through staging; empty where the layouts agree and no conversion is needed.
  std::optional<dnnl::reorder> to_src, from_dst;
  dnnl::memory::desc staged_src, staged_dst;
};

class ConvIntegerToFloatKernel : public OneDnnKernel {
 public:
  ConvIntegerToFloatKernel(const Node& node, const Graph& graph, bool in_float)
      : in_float_(in_float), group_(node.attr_int("group", 1)), x_type_(graph.value(node.inputs[X]).dtype) {
    const Tensor& w = *constant_input(node, graph, W);
    weights_ = PackedWeights(in_float ? integers_as_float(w) : w, view(w.shape()));
    w_scale_ = constant_input(node, graph, WScale)->data<float>()[0];
  }

  void run(KernelContext& ctx) const override {
    guarded(ctx, [&] {
      const Tensor& x = ctx.input(X);
      if (x.rank() != 4 || x.dtype() != x_type_)
        ctx.fail(ErrorCode::InvalidArgument, std::string("expects a 4-D ") + dtype_name(x_type_) + " input, got " +
                                                 dtype_name(x.dtype()) + " " + shape_to_string(x.shape()));
      const Tensor& xs = ctx.input(XScale);
      const Tensor& xz = ctx.input(XZero);
      if (xs.dtype() != DType::Float32 || xs.numel() != 1 || xz.dtype() != x_type_ || xz.numel() != 1)
        ctx.fail(ErrorCode::InvalidArgument, "X_scale must be one float32 and X_zero one value of X's dtype");
      auto plan = cache_.get(shape_key({&x.shape()}), [&] { return build(ctx, x.shape()); });
      Tensor& y = ctx.allocate_output(0, DType::Float32, plan->y_shape);
      if (y.numel() == 0) return;
      thread_local float scale[1];
      scale[0] = xs.data<float>()[0] * w_scale_;
      const std::int32_t zero = x_type_ == DType::UInt8 ? xz.data<std::uint8_t>()[0] : xz.data<std::int8_t>()[0];
      const dnnl::memory x_mem = wrap_arg(plan->primitive, DNNL_ARG_SRC, plan->src, x),
                         y_mem = wrap_arg(plan->primitive, DNNL_ARG_DST, plan->dst, y);
      dnnl::memory src = x_mem, dst = y_mem;
      if (plan->to_src) {
        src = thread_memory(0, plan->staged_src);
        Args reorder_args = {{DNNL_ARG_FROM, x_mem}, {DNNL_ARG_TO, src}};
        if (in_float_) reorder_args.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_FROM, int32_scalar_memory(zero));
        execute(*plan->to_src, std::move(reorder_args));
      }
      if (plan->from_dst) dst = thread_memory(1, plan->staged_dst);
      Args args = {{DNNL_ARG_SRC, src},
                   {DNNL_ARG_WEIGHTS, plan->weights},
                   {DNNL_ARG_DST, dst},
                   {DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, dnnl::memory(scale_desc(), engine(), scale)}};
      if (!in_float_) args.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, int32_scalar_memory(zero));
      execute(plan->primitive, std::move(args));
      if (plan->from_dst) execute(*plan->from_dst, {{DNNL_ARG_FROM, dst}, {DNNL_ARG_TO, y_mem}});
    });
  }

  // Packs the weights for the declared input shape; the loaded ones stay beside the packing
  // (another shape may want another layout, and a packing with compensation is not read back).
  void warm_up(const Node& node, const Shape& x_shape) {
    KernelContext ctx(node, {});
    auto plan = cache_.get(shape_key({&x_shape}), [&] { return build(ctx, x_shape); });
    weights_.keep_beside_loaded(plan->weights, view(weights_.shape()));
  }

  bool owns_input(std::size_t i) const override { return i == W && weights_.owns_copy(); }

 private:
  // The weights as loaded: [C_out, C_in / group, kH, kW], the group split out when there is one.
  dnnl::memory::desc view(const Shape& ws) const {
    const auto type = in_float_ ? dnnl::memory::data_type::f32 : dnnl::memory::data_type::s8;
    if (group_ == 1) return {{ws[0], ws[1], ws[2], ws[3]}, type, Tag::oihw};
    return {{group_, ws[0] / group_, ws[1], ws[2], ws[3]}, type, Tag::goihw};
  }

  static dnnl::memory::desc scale_desc() { return f32_desc({1, 1, 1, 1}, Tag::abcd); }

  ConvIntegerPlan build(const KernelContext& ctx, const Shape& nchw) const {
    const Shape& ws = weights_.shape();
    if (nchw[1] != ws[1] * group_)
      ctx.fail(ErrorCode::InvalidArgument, "input has " + std::to_string(nchw[1]) + " channels; weights " +
                                               shape_to_string(ws) + " with group " + std::to_string(group_) + " need " +
                                               std::to_string(ws[1] * group_));
    const reference::Window win = reference::conv_window(ctx, nchw, {ws[2], ws[3]}, false);
    const Dims src_dims = {nchw[0], nchw[1], nchw[2], nchw[3]}, dst_dims = {nchw[0], ws[0], win.out[1], win.out[2]};
    ConvIntegerPlan plan;
    plan.y_shape = Shape(dst_dims.begin(), dst_dims.end());
    const auto x_type = x_type_ == DType::UInt8 ? dnnl::memory::data_type::u8 : dnnl::memory::data_type::s8;
    plan.src = {src_dims, x_type, Tag::nchw};
    plan.dst = f32_desc(dst_dims, Tag::nchw);
    dnnl::primitive_attr attr = make_attr();
    dnnl::post_ops ops;
    ops.append_binary(dnnl::algorithm::binary_mul, scale_desc());
    attr.set_post_ops(ops);
    if (!in_float_) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    const dnnl::memory::desc any_src(src_dims, in_float_ ? dnnl::memory::data_type::f32 : x_type, Tag::any);
    const dnnl::memory::desc weights(view(ws).dims(), in_float_ ? dnnl::memory::data_type::f32 : dnnl::memory::data_type::s8,
                                     Tag::any);
    const dnnl::convolution_forward::primitive_desc pd(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, any_src,
                                        weights, dnnl::memory::desc(), f32_desc(dst_dims, Tag::any),
                                        {win.stride[1], win.stride[2]}, {win.dilation[1] - 1, win.dilation[2] - 1},
                                        {win.pad_begin[1], win.pad_begin[2]}, {win.pad_end[1], win.pad_end[2]}),
        attr, engine());
    if (pd.src_desc() != plan.src) {
      plan.staged_src = pd.src_desc();
      dnnl::primitive_attr in = make_attr();
      if (in_float_) in.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
      plan.to_src = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), plan.src, engine(), plan.staged_src, in));
    }
    if (pd.dst_desc() != plan.dst) {
      plan.staged_dst = pd.dst_desc();
      plan.from_dst = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), plan.staged_dst, engine(), plan.dst, make_attr()));
    }
    plan.weights = weights_.pack_for(pd.weights_desc(), view(ws));
    plan.primitive = dnnl::convolution_forward(pd);
    return plan;
  }

  bool in_float_;
  std::int64_t group_;
  DType x_type_;
  float w_scale_ = 1;
  PackedWeights weights_;
  ShapeCache<ConvIntegerPlan> cache_;
};

}  // namespace

std::string conv_integer_unsupported(const Node& node, const Graph& graph) {
  if (node.inputs.size() != 6) return "needs 6 inputs";
  for (ValueId v : node.inputs)
    if (v == kNoValue) return "needs every input";
  if (!is_8bit(graph.value(node.inputs[X]).dtype)) return "X is not uint8 or int8";
  const Tensor* w = constant_input(node, graph, W);
  if (!w || w->dtype() != DType::Int8 || w->rank() != 4 || w->numel() == 0) return "W is not a constant 4-D int8 tensor";
  const std::int64_t group = node.attr_int("group", 1);
  if (group < 1 || w->dim(0) % group != 0) return "group does not divide the output channels";
  const Tensor* ws = constant_input(node, graph, WScale);
  if (!ws || ws->dtype() != DType::Float32 || ws->numel() != 1) return "W_scale is not a constant float32 of one element";
  const Tensor* wz = constant_input(node, graph, WZero);
  if (!wz || wz->dtype() != DType::Int8 || wz->numel() != 1 || wz->data<std::int8_t>()[0] != 0) return "W_zero is not 0";
  return "";
}

std::vector<std::string> conv_integer_configs(const Node& node, const Graph& graph) {
  return integer_arithmetic_configs(node, graph, X, W);
}

std::unique_ptr<Kernel> make_conv_integer(const Node& node, const Graph& graph, const std::string& config) {
  const bool in_float = chooses_float_arithmetic(node, conv_integer_configs(node, graph), config);
  auto kernel = std::make_unique<ConvIntegerToFloatKernel>(node, graph, in_float);
  if (auto shape = static_shape(graph, node.inputs[X]); shape && shape->size() == 4)
    try_warm_up([&] { kernel->warm_up(node, *shape); });
  return kernel;
}

}  // namespace wpk::onednn
