// Add, Sub, Mul and Div of float32 tensors where one operand has the output's shape and the
// other spans only its trailing dims (16 floats or more), on wpk's own loop (row_broadcast.hpp).
// Other shapes are another candidate's (runs() says which). The memory planner may alias the
// output with the full operand: every element is read at the index it is written.
#include "backends/cpu/cpu_kernels.hpp"
#include "backends/cpu/row_broadcast.hpp"

namespace wpk::cpu {
namespace {

// Rows of 16 or more floats: shorter ones (a scalar, a few channels) gain nothing from the loop.
constexpr std::int64_t kMinInner = 16;

RowOp op_of(const std::string& op_type) {
  if (op_type == "Add") return RowOp::Add;
  if (op_type == "Sub") return RowOp::Sub;
  if (op_type == "Mul") return RowOp::Mul;
  return RowOp::Div;
}

// How a pair of operands runs: which one is the full tensor, and the rows x inner split.
struct RowPlan {
  bool swapped = false;  // the second input is the full one (commutative ops only)
  std::int64_t rows = 0, inner = 0;
};

// The trailing elements `part` spans when it equals `full` along its last dims and is 1 (or
// missing) before them, with at least one such 1 against a longer dim; 0 otherwise.
std::int64_t trailing_span(const Shape& full, const Shape& part) {
  if (part.size() > full.size()) return 0;
  Shape aligned(full.size() - part.size(), 1);
  aligned.insert(aligned.end(), part.begin(), part.end());
  std::size_t k = full.size();
  std::int64_t inner = 1;
  while (k > 0 && aligned[k - 1] == full[k - 1]) inner *= full[--k];
  bool broadcasts = false;
  for (std::size_t i = 0; i < k; ++i) {
    if (aligned[i] != 1) return 0;
    broadcasts = broadcasts || full[i] > 1;
  }
  return broadcasts ? inner : 0;
}

class RowBroadcastKernel : public Kernel {
 public:
  explicit RowBroadcastKernel(const Node& node)
      : op_(op_of(node.op_type)), commutative_(op_ == RowOp::Add || op_ == RowOp::Mul) {}

  KernelProfile profile() const override { return {"f32_row_broadcast", clones_vector_bits(), 0.5}; }

  bool runs(const std::vector<const Tensor*>& inputs) const override { return plan(inputs).inner > 0; }

  void run(KernelContext& ctx) const override {
    const RowPlan p = plan({&ctx.input(0), &ctx.input(1)});
    if (p.inner == 0) ctx.fail(ErrorCode::Internal, "operands that do not broadcast along rows");
    const Tensor& full = p.swapped ? ctx.input(1) : ctx.input(0);
    const Tensor& part = p.swapped ? ctx.input(0) : ctx.input(1);
    Tensor& y = ctx.allocate_output(0, DType::Float32, full.shape());
    row_broadcast(op_, full.data<float>(), part.data<float>(), y.data<float>(), p.rows, p.inner);
  }

 private:
  RowPlan plan(const std::vector<const Tensor*>& inputs) const {
    RowPlan p;
    if (inputs.size() != 2 || !inputs[0] || !inputs[1]) return p;
    const Tensor &a = *inputs[0], &b = *inputs[1];
    if (a.dtype() != DType::Float32 || b.dtype() != DType::Float32 || a.numel() == 0) return p;
    p.inner = trailing_span(a.shape(), b.shape());
    if (p.inner == 0 && commutative_ && b.numel() > 0) {
      p.inner = trailing_span(b.shape(), a.shape());
      p.swapped = true;
    }
    if (p.inner < kMinInner) return RowPlan{};
    p.rows = (p.swapped ? b : a).numel() / p.inner;
    return p;
  }

  RowOp op_;
  bool commutative_;
};

}  // namespace

std::string row_broadcast_unsupported(const Node& node, const Graph& graph) {
  if (node.inputs.size() != 2 || node.inputs[1] == kNoValue) return "needs exactly two inputs";
  for (ValueId v : node.inputs)
    if (graph.value(v).dtype != DType::Float32) return "inputs are not known to be float32";
  return "";
}

std::unique_ptr<Kernel> make_row_broadcast(const Node& node, const Graph&) {
  return std::make_unique<RowBroadcastKernel>(node);
}

}  // namespace wpk::cpu
