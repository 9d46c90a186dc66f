// Unary elementwise ops on oneDNN's eltwise primitive, over any float32 shape (flattened): the
// activations left standing after fusion (DenseNet's BN -> ReLU, squeeze-excite sigmoids).
#include "backends/onednn/onednn_kernels.hpp"
#include "graph/fused_ops.hpp"

namespace wpk::onednn {
namespace {

struct EltwiseOp {
  dnnl::algorithm algorithm;
  float alpha, beta;
};

std::optional<EltwiseOp> eltwise_of(const Node& n) {
  using A = dnnl::algorithm;
  if (n.domain == kWpkDomain) {
    if (n.op_type != "Gelu") return std::nullopt;
    const std::string kind = gelu_activation_kind(n);
    if (kind == "Gelu") return EltwiseOp{A::eltwise_gelu_erf, 0.f, 0.f};
    if (kind == "GeluTanh") return EltwiseOp{A::eltwise_gelu_tanh, 0.f, 0.f};
    return std::nullopt;  // the reference kernel reports it
  }
  if (!n.domain.empty() && n.domain != "ai.onnx") return std::nullopt;
  const std::string& op = n.op_type;
  if (op == "Relu") return EltwiseOp{A::eltwise_relu, 0.f, 0.f};
  if (op == "LeakyRelu") return EltwiseOp{A::eltwise_relu, n.attr_float("alpha", 0.01f), 0.f};
  if (op == "Sigmoid") return EltwiseOp{A::eltwise_logistic, 0.f, 0.f};
  if (op == "Tanh") return EltwiseOp{A::eltwise_tanh, 0.f, 0.f};
  if (op == "Elu") return EltwiseOp{A::eltwise_elu, n.attr_float("alpha", 1.f), 0.f};
  if (op == "HardSwish") return EltwiseOp{A::eltwise_hardswish, 0.f, 0.f};
  if (op == "Exp") return EltwiseOp{A::eltwise_exp, 0.f, 0.f};
  if (op == "Sqrt") return EltwiseOp{A::eltwise_sqrt, 0.f, 0.f};
  if (op == "Abs") return EltwiseOp{A::eltwise_abs, 0.f, 0.f};
  return std::nullopt;
}

struct EltwisePlan {
  dnnl::eltwise_forward primitive;
  dnnl::memory::desc x;
};

class EltwiseKernel : public OneDnnKernel {
 public:
  explicit EltwiseKernel(EltwiseOp op) : op_(op) {}

  void run(KernelContext& ctx) const override {
    guarded(ctx, [&] {
      const Tensor& x = ctx.input(0);
      require_f32(ctx, x, "input");
      Tensor& y = ctx.allocate_output(0, DType::Float32, x.shape());
      if (x.numel() == 0) return;
      const Shape flat{x.numel()};
      auto plan = cache_.get(shape_key({&flat}), [&] { return build(x.numel()); });
      execute(plan->primitive, {{DNNL_ARG_SRC, wrap_arg(plan->primitive, DNNL_ARG_SRC, plan->x, x)},
                                {DNNL_ARG_DST, wrap_arg(plan->primitive, DNNL_ARG_DST, plan->x, y)}});
    });
  }

 private:
  EltwisePlan build(std::int64_t n) const {
    EltwisePlan plan;
    plan.x = f32_desc({n}, Tag::a);
    dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_inference, op_.algorithm, plan.x, op_.alpha, op_.beta);
    plan.primitive = dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(desc, make_attr(), engine()));
    return plan;
  }

  EltwiseOp op_;
  ShapeCache<EltwisePlan> cache_;
};

}  // namespace

bool is_eltwise(const Node& node) { return eltwise_of(node).has_value(); }

std::string eltwise_unsupported(const Node& node, const Graph& graph) {
  if (node.inputs.size() != 1) return "needs one input";
  if (graph.value(node.inputs[0]).dtype != DType::Float32) return "input is not known to be float32";
  return "";
}

std::unique_ptr<Kernel> make_eltwise(const Node& node, const Graph&) {
  return std::make_unique<EltwiseKernel>(*eltwise_of(node));
}

}  // namespace wpk::onednn
