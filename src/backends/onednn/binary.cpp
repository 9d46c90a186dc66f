// Add, Sub, Mul and Div of two float32 tensors on oneDNN's binary primitive, with
// numpy broadcasting where oneDNN has it: the first operand (after swapping a commutative op)
// must already have the output's shape, the second may be 1 along any dim (EfficientNet's
// squeeze-excite scaling, bias-like adds). Other shapes, and those oneDNN would run on its own
// reference loop, run on the reference kernel the backend keeps as a fallback. The memory
// planner may alias the output with a same-sized operand: every element is read at the index it
// is written, so that is safe.
#include "backends/onednn/onednn_kernels.hpp"
#include "backends/reference/common.hpp"
#include "backends/reference/reference_backend.hpp"

namespace wpk::onednn {
namespace {

struct BinaryPlan {
  bool supported = false;
  bool swapped = false;  // the operands exchange places (commutative ops only)
  dnnl::binary primitive;
  dnnl::memory::desc src0, src1;
  Shape y_shape;
};

dnnl::algorithm algorithm_of(const std::string& op_type) {
  if (op_type == "Add") return dnnl::algorithm::binary_add;
  if (op_type == "Sub") return dnnl::algorithm::binary_sub;
  if (op_type == "Mul") return dnnl::algorithm::binary_mul;
  return dnnl::algorithm::binary_div;
}

Dims aligned(const Shape& s, std::size_t rank) {
  Dims d(rank - s.size(), 1);
  d.insert(d.end(), s.begin(), s.end());
  return d;
}

class BinaryKernel : public OneDnnKernel {
 public:
  BinaryKernel(const Node& node, std::unique_ptr<Kernel> fallback)
      : algorithm_(algorithm_of(node.op_type)),
        commutative_(node.op_type == "Add" || node.op_type == "Mul"),
        fallback_(std::move(fallback)) {}

  void run(KernelContext& ctx) const override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (a.dtype() != DType::Float32 || b.dtype() != DType::Float32) return fallback_->run(ctx);
    auto plan = cache_.get(shape_key({&a.shape(), &b.shape()}), [&] { return build(ctx, a.shape(), b.shape()); });
    if (!plan->supported) return fallback_->run(ctx);
    guarded(ctx, [&] {
      Tensor& y = ctx.allocate_output(0, DType::Float32, plan->y_shape);
      const Tensor& first = plan->swapped ? b : a;
      const Tensor& second = plan->swapped ? a : b;
      execute(plan->primitive, {{DNNL_ARG_SRC_0, wrap_arg(plan->primitive, DNNL_ARG_SRC_0, plan->src0, first)},
                                {DNNL_ARG_SRC_1, wrap_arg(plan->primitive, DNNL_ARG_SRC_1, plan->src1, second)},
                                {DNNL_ARG_DST, wrap_arg(plan->primitive, DNNL_ARG_DST, plan->src0, y)}});
    });
  }

 private:
  BinaryPlan build(const KernelContext& ctx, const Shape& a, const Shape& b) const {
    BinaryPlan plan;
    const Shape y = reference::broadcast_shapes({a, b}, ctx);
    const std::size_t rank = y.size();
    if (rank == 0 || rank > 6 || shape_numel(y) == 0) return plan;
    Dims first = aligned(a, rank), second = aligned(b, rank);
    const Dims full(y.begin(), y.end());
    if (first != full) {
      if (!commutative_ || second != full) return plan;
      std::swap(first, second);
      plan.swapped = true;
    }
    plan.y_shape = y;
    plan.src0 = f32_desc(full, plain_tag(rank));
    plan.src1 = f32_desc(second, plain_tag(rank));
    dnnl::binary::desc desc(algorithm_, plan.src0, plan.src1, plan.src0);
    const dnnl::binary::primitive_desc pd(desc, make_attr(), engine());
    // oneDNN's own reference loop ("ref:any": a broadcast its JIT kernels lack, such as a
    // per-channel [C, 1, 1] operand of a plain [C, H, W]) recomputes every index per element;
    // the fallback walks the broadcast directly.
    if (is_reference_impl(pd.impl_info_str())) return plan;
    plan.primitive = dnnl::binary(pd);
    plan.supported = true;
    return plan;
  }

  dnnl::algorithm algorithm_;
  bool commutative_;
  std::unique_ptr<Kernel> fallback_;
  ShapeCache<BinaryPlan> cache_;
};

}  // namespace

Tag plain_tag(std::size_t rank) {
  static const Tag tags[] = {Tag::undef, Tag::a, Tag::ab, Tag::abc, Tag::abcd, Tag::abcde, Tag::abcdef};
  return rank <= 6 ? tags[rank] : Tag::undef;
}

std::string binary_unsupported(const Node& node, const Graph& graph) {
  if (node.inputs.size() != 2 || node.inputs[1] == kNoValue) return "needs exactly two inputs";
  for (ValueId v : node.inputs)
    if (graph.value(v).dtype != DType::Float32) return "inputs are not known to be float32";
  return "";
}

std::unique_ptr<Kernel> make_binary(const Node& node, const Graph& graph) {
  return std::make_unique<BinaryKernel>(node, reference::ReferenceBackend().prepare(node, graph));
}

}  // namespace wpk::onednn
