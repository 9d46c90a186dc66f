// MaxPool, AveragePool and GlobalAveragePool on oneDNN: 2-D, float32 (MaxPool also uint8 and
// int8: the max of quantized codes is the code of the max), NCHW or NHWC (channels_last, set by
// the layout pass).
#include <algorithm>

#include "backends/onednn/onednn_kernels.hpp"
#include "backends/reference/conv_pool.hpp"

namespace wpk::onednn {
namespace {

struct PoolPlan {
  dnnl::pooling_forward primitive;
  dnnl::memory::desc src, dst;
  Shape y_shape;
};

class PoolKernel : public OneDnnKernel {
 public:
  PoolKernel(const Node& node, DType dtype)
      : dtype_(dtype), global_(node.op_type == "GlobalAveragePool"), max_(node.op_type == "MaxPool"),
        include_pad_(node.attr_int("count_include_pad", 0) == 1), channels_last_(node.attr_int("channels_last", 0) == 1),
        ceil_mode_(node.attr_int("ceil_mode", 0) == 1) {}

  void run(KernelContext& ctx) const override {
    guarded(ctx, [&] {
      const Tensor& x = ctx.input(0);
      if (x.rank() != 4 || x.dtype() != dtype_)
        ctx.fail(ErrorCode::InvalidArgument, std::string("expects a 4-D ") + dtype_name(dtype_) + " input, got " +
                                                 dtype_name(x.dtype()) + " " + shape_to_string(x.shape()));
      auto plan = cache_.get(shape_key({&x.shape()}), [&] { return build(ctx, x.shape()); });
      Tensor& y = ctx.allocate_output(0, dtype_, plan->y_shape);
      execute(plan->primitive, {{DNNL_ARG_SRC, wrap_arg(plan->primitive, DNNL_ARG_SRC, plan->src, x)},
                                {DNNL_ARG_DST, wrap_arg(plan->primitive, DNNL_ARG_DST, plan->dst, y)}});
    });
  }

 private:
  PoolPlan build(const KernelContext& ctx, const Shape& x_shape) const {
    const Shape nchw = channels_last_ ? Shape{x_shape[0], x_shape[3], x_shape[1], x_shape[2]} : x_shape;
    Dims strides{1, 1}, kernel{nchw[2], nchw[3]}, pad_l{0, 0}, pad_r{0, 0}, out{1, 1};
    if (!global_) {
      const reference::Window w = reference::conv_window(ctx, nchw, {}, ceil_mode_);
      for (int i = 0; i < 2; ++i) {
        strides[i] = w.stride[1 + i];
        kernel[i] = w.kernel[1 + i];
        pad_l[i] = w.pad_begin[1 + i];
        out[i] = w.out[1 + i];
        // Ceil mode adds output positions whose window runs past the end padding: extend the
        // end padding to cover them (padding never wins a max, and is not counted in an
        // exclude-padding average).
        pad_r[i] = std::max(w.pad_end[1 + i], (out[i] - 1) * strides[i] + kernel[i] - w.in[1 + i] - pad_l[i]);
      }
    }
    const Tag tag = channels_last_ ? Tag::nhwc : Tag::nchw;
    PoolPlan plan;
    plan.y_shape = channels_last_ ? Shape{nchw[0], out[0], out[1], nchw[1]} : Shape{nchw[0], nchw[1], out[0], out[1]};
    const auto type = dtype_ == DType::UInt8  ? dnnl::memory::data_type::u8
                      : dtype_ == DType::Int8 ? dnnl::memory::data_type::s8
                                              : dnnl::memory::data_type::f32;
    plan.src = dnnl::memory::desc({nchw[0], nchw[1], nchw[2], nchw[3]}, type, tag);
    plan.dst = dnnl::memory::desc({nchw[0], nchw[1], out[0], out[1]}, type, tag);
    const auto algo = max_ ? dnnl::algorithm::pooling_max
                           : (include_pad_ ? dnnl::algorithm::pooling_avg_include_padding
                                           : dnnl::algorithm::pooling_avg_exclude_padding);
    dnnl::pooling_forward::desc desc(dnnl::prop_kind::forward_inference, algo, plan.src, plan.dst, strides, kernel, pad_l,
                                     pad_r);
    plan.primitive = dnnl::pooling_forward(dnnl::pooling_forward::primitive_desc(desc, make_attr(), engine()));
    return plan;
  }

  DType dtype_;
  bool global_, max_, include_pad_, channels_last_, ceil_mode_;
  ShapeCache<PoolPlan> cache_;
};

}  // namespace

std::string pool_unsupported(const Node& node, const Graph& graph) {
  const ValueInfo& x = graph.value(node.inputs[0]);
  const bool quantized = x.dtype == DType::UInt8 || x.dtype == DType::Int8;
  if (x.dtype != DType::Float32 && x.dtype != DType::Undefined && !(quantized && node.op_type == "MaxPool"))
    return node.op_type == "MaxPool" ? "input is not float32, uint8 or int8" : "input is not float32";
  if (x.dims && x.dims->size() != 4) return "only 2-D pooling";
  if (node.op_type == "GlobalAveragePool") return "";
  // With ceil mode an including average would count the extra end padding ONNX does not.
  if (node.attr_int("ceil_mode", 0) != 0 && node.op_type == "AveragePool" && node.attr_int("count_include_pad", 0) != 0)
    return "ceil_mode with count_include_pad";
  for (auto d : node.attr_ints("dilations", {}))
    if (d != 1) return "dilated pooling";
  if (node.attr_ints("kernel_shape", {}).size() != 2) return "only 2-D pooling";
  if (node.op_type == "MaxPool" && node.outputs.size() > 1 && node.outputs[1] != kNoValue) return "Indices output";
  return "";
}

std::unique_ptr<Kernel> make_pool(const Node& node, const Graph& graph) {
  const DType x = graph.value(node.inputs[0]).dtype;
  return std::make_unique<PoolKernel>(node, x == DType::Undefined ? DType::Float32 : x);
}

}  // namespace wpk::onednn
