// Softmax along the last axis of a float32 tensor on oneDNN (attention scores left unfused, as
// in ViT exports). Other axes, and the opset < 13 two-dimensional coercion when it is not the
// same thing, run on the reference kernel kept as a fallback.
#include "backends/onednn/onednn_kernels.hpp"
#include "backends/reference/reference_backend.hpp"

namespace wpk::onednn {
namespace {

struct SoftmaxPlan {
  dnnl::softmax_forward primitive;
  dnnl::memory::desc x;
};

class SoftmaxKernel : public OneDnnKernel {
 public:
  SoftmaxKernel(const Node& node, std::int64_t opset, std::unique_ptr<Kernel> fallback)
      : axis_(node.attr_int("axis", opset >= 13 ? -1 : 1)), fallback_(std::move(fallback)) {}

  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const std::int64_t r = x.rank();
    // Before opset 13 Softmax flattens to 2-D at `axis`: along the last axis that is the same.
    if (x.dtype() != DType::Float32 || r == 0 || (axis_ != -1 && axis_ != r - 1) || x.numel() == 0)
      return fallback_->run(ctx);
    guarded(ctx, [&] {
      const std::int64_t cols = x.shape().back(), rows = x.numel() / cols;
      const Shape flat{rows, cols};
      auto plan = cache_.get(shape_key({&flat}), [&] { return build(rows, cols); });
      Tensor& y = ctx.allocate_output(0, DType::Float32, x.shape());
      execute(plan->primitive, {{DNNL_ARG_SRC, wrap_arg(plan->primitive, DNNL_ARG_SRC, plan->x, x)},
                                {DNNL_ARG_DST, wrap_arg(plan->primitive, DNNL_ARG_DST, plan->x, y)}});
    });
  }

 private:
  SoftmaxPlan build(std::int64_t rows, std::int64_t cols) const {
    SoftmaxPlan plan;
    plan.x = f32_desc({rows, cols}, Tag::ab);
    dnnl::softmax_forward::desc desc(dnnl::prop_kind::forward_inference, plan.x, 1);
    plan.primitive = dnnl::softmax_forward(dnnl::softmax_forward::primitive_desc(desc, make_attr(), engine()));
    return plan;
  }

  std::int64_t axis_;
  std::unique_ptr<Kernel> fallback_;
  ShapeCache<SoftmaxPlan> cache_;
};

}  // namespace

std::string softmax_unsupported(const Node& node, const Graph& graph) {
  if (graph.value(node.inputs[0]).dtype != DType::Float32) return "input is not known to be float32";
  return "";
}

std::unique_ptr<Kernel> make_softmax(const Node& node, const Graph& graph) {
  return std::make_unique<SoftmaxKernel>(node, graph.opset(), reference::ReferenceBackend().prepare(node, graph));
}

}  // namespace wpk::onednn
