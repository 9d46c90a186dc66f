// Add, Sub, Mul and Div of two float32 tensors on oneDNN's binary primitive, with
// numpy broadcasting where oneDNN has it: the first operand (after swapping a commutative op)
// must already have the output's shape, the second may be 1 along any dim (EfficientNet's
// squeeze-excite scaling, bias-like adds); an operand spanning only trailing dims runs on
// wpk's own loop (row_broadcast.hpp). Other shapes run on the reference kernel the backend
// keeps as a fallback. The memory planner may alias the output with a same-sized
// operand: every element is read at the index it is written, so that is safe.
#include "backends/onednn/onednn_kernels.hpp"
#include "backends/cpu/row_broadcast.hpp"
#include "backends/reference/common.hpp"
#include "backends/reference/reference_backend.hpp"

namespace wpk::onednn {
namespace {

struct BinaryPlan {
  bool supported = false;
  bool swapped = false;  // the operands exchange places (commutative ops only)
  // Set when the second operand spans only the output's trailing `inner` elements: then
  // row_broadcast runs instead of the primitive (which is not created).
  std::int64_t rows = 0, inner = 0;
  dnnl::binary primitive;
  dnnl::memory::desc src0, src1;
  Shape y_shape;
};

RowOp op_of(const std::string& op_type) {
  if (op_type == "Add") return RowOp::Add;
  if (op_type == "Sub") return RowOp::Sub;
  if (op_type == "Mul") return RowOp::Mul;
  return RowOp::Div;
}

dnnl::algorithm algorithm_of(RowOp op) {
  switch (op) {
    case RowOp::Add: return dnnl::algorithm::binary_add;
    case RowOp::Sub: return dnnl::algorithm::binary_sub;
    case RowOp::Mul: return dnnl::algorithm::binary_mul;
    case RowOp::Div: break;
  }
  return dnnl::algorithm::binary_div;
}

// Rows of 16 or more floats: shorter ones (a scalar, a few channels) stay on oneDNN.
constexpr std::int64_t kMinRowBroadcastInner = 16;

// The trailing elements `second` spans when it equals `full` along its last dims and is 1
// before them, with at least one such 1 against a longer dim; 0 otherwise.
std::int64_t trailing_span(const Dims& full, const Dims& second) {
  std::size_t k = full.size();
  std::int64_t inner = 1;
  while (k > 0 && second[k - 1] == full[k - 1]) inner *= full[--k];
  bool broadcasts = false;
  for (std::size_t i = 0; i < k; ++i) {
    if (second[i] != 1) return 0;
    broadcasts = broadcasts || full[i] > 1;
  }
  return broadcasts ? inner : 0;
}

Dims aligned(const Shape& s, std::size_t rank) {
  Dims d(rank - s.size(), 1);
  d.insert(d.end(), s.begin(), s.end());
  return d;
}

class BinaryKernel : public Kernel {
 public:
  BinaryKernel(const Node& node, std::unique_ptr<Kernel> fallback)
      : op_(op_of(node.op_type)),
        commutative_(op_ == RowOp::Add || op_ == RowOp::Mul),
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
      if (plan->inner) {
        ctx.note_variant("rows");
        row_broadcast(op_, first.data<float>(), second.data<float>(), y.data<float>(), plan->rows, plan->inner);
        return;
      }
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
    plan.supported = true;
    const std::int64_t inner = trailing_span(full, second);
    if (inner >= kMinRowBroadcastInner) {
      plan.inner = inner;
      plan.rows = shape_numel(y) / inner;
      return plan;
    }
    plan.src0 = f32_desc(full, plain_tag(rank));
    plan.src1 = f32_desc(second, plain_tag(rank));
    dnnl::binary::desc desc(algorithm_of(op_), plan.src0, plan.src1, plan.src0);
    plan.primitive = dnnl::binary(dnnl::binary::primitive_desc(desc, make_attr(), engine()));
    return plan;
  }

  RowOp op_;
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
