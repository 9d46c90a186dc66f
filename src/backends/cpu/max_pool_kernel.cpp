// 2-D MaxPool over NHWC activations (channels_last, set by the layout pass) on wpk's own loop
// (max_pool_nhwc.hpp), for every shape where each window holds an input element.
#include <optional>

#include "backends/cpu/cpu_kernels.hpp"
#include "backends/cpu/max_pool_nhwc.hpp"
#include "backends/reference/conv_pool.hpp"

namespace wpk::cpu {
namespace {

class MaxPoolKernel : public Kernel {
 public:
  explicit MaxPoolKernel(const Node& node) : node_(node), ceil_mode_(node.attr_int("ceil_mode", 0) == 1) {}

  KernelProfile profile() const override { return {"f32_maxpool_nhwc", clones_vector_bits(), 0.5}; }

  bool runs(const std::vector<const Tensor*>& inputs) const override {
    if (inputs.empty() || !inputs[0] || inputs[0]->rank() != 4 || inputs[0]->dtype() != DType::Float32) return false;
    KernelContext ctx(node_, inputs);
    try {
      return max_pool_nhwc_covers(shape_of(ctx, inputs[0]->shape()));
    } catch (const Error&) {
      return true;  // a shape no kernel runs: run() reports it
    }
  }

  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.rank() != 4) ctx.fail(ErrorCode::InvalidArgument, "expects a 4-D input, got " + shape_to_string(x.shape()));
    require_f32(ctx, x, "input");
    const MaxPoolShape s = shape_of(ctx, x.shape());
    if (!max_pool_nhwc_covers(s)) ctx.fail(ErrorCode::Internal, "a window lies wholly in the padding");
    Tensor& y = ctx.allocate_output(0, DType::Float32, {s.n, s.oh, s.ow, s.c});
    max_pool_nhwc(s, x.data<float>(), y.data<float>());
  }

 private:
  MaxPoolShape shape_of(const KernelContext& ctx, const Shape& nhwc) const {
    const Shape nchw{nhwc[0], nhwc[3], nhwc[1], nhwc[2]};
    const reference::Window w = reference::conv_window(ctx, nchw, {}, ceil_mode_);
    return {nchw[0], nchw[2], nchw[3], nchw[1], w.out[1], w.out[2],
            w.kernel[1], w.kernel[2], w.stride[1], w.stride[2], w.pad_begin[1], w.pad_begin[2]};
  }

  Node node_;
  bool ceil_mode_;
};

}  // namespace

std::string max_pool_unsupported(const Node& node, const Graph& graph) {
  if (node.attr_int("channels_last", 0) != 1) return "NHWC (channels_last) only";
  const ValueInfo& x = graph.value(node.inputs[0]);
  if (x.dtype != DType::Float32 && x.dtype != DType::Undefined) return "input is not float32";
  if (x.dims && x.dims->size() != 4) return "only 2-D pooling";
  if (node.attr_ints("kernel_shape", {}).size() != 2) return "only 2-D pooling";
  for (auto d : node.attr_ints("dilations", {}))
    if (d != 1) return "dilated pooling";
  if (node.outputs.size() > 1 && node.outputs[1] != kNoValue) return "Indices output";
  return "";
}

std::unique_ptr<Kernel> make_max_pool(const Node& node, const Graph&) { return std::make_unique<MaxPoolKernel>(node); }

}  // namespace wpk::cpu
