// Add, Sub, Mul and Div of float32 tensors where one operand has the output's shape and the
// other spans only its trailing dims (16 floats or more), or only middle dims with 16 floats or
// more after them, on wpk's own loops (row_broadcast.hpp).
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

// How a pair of operands runs: which one is the full tensor, and the outer x mid x inner split in
// which the other spans the mid dims.
struct RowPlan {
  bool swapped = false;  // the second input is the full one (commutative ops only)
  std::int64_t outer = 0, mid = 0, inner = 0;
  bool runs() const { return mid > 0; }
};

// How `part` spans `full` when, aligned to its last dims, it is 1 (or missing), then equal to
// `full` along a run of dims, then 1, broadcasting along at least one longer dim; mid 0 otherwise.
RowPlan span_of(const Shape& full, const Shape& part) {
  RowPlan p;
  if (part.size() > full.size()) return p;
  Shape aligned(full.size() - part.size(), 1);
  aligned.insert(aligned.end(), part.begin(), part.end());
  std::size_t k = full.size();
  p.inner = 1;
  while (k > 0 && aligned[k - 1] == 1 && full[k - 1] != 1) p.inner *= full[--k];
  p.mid = 1;
  while (k > 0 && aligned[k - 1] == full[k - 1]) p.mid *= full[--k];
  p.outer = 1;
  for (std::size_t i = 0; i < k; ++i) {
    if (aligned[i] != 1) return RowPlan{};
    p.outer *= full[i];
  }
  if (p.outer * p.inner <= 1) return RowPlan{};  // nothing broadcasts
  return p;
}

class RowBroadcastKernel : public Kernel {
 public:
  explicit RowBroadcastKernel(const Node& node)
      : op_(op_of(node.op_type)), commutative_(op_ == RowOp::Add || op_ == RowOp::Mul) {}

  KernelProfile profile() const override { return {"f32_row_broadcast", clones_vector_bits(), 0.5}; }

  bool runs(const std::vector<const Tensor*>& inputs) const override { return plan(inputs).runs(); }

  void run(KernelContext& ctx) const override {
    const RowPlan p = plan({&ctx.input(0), &ctx.input(1)});
    if (!p.runs()) ctx.fail(ErrorCode::Internal, "operands that do not broadcast along rows or columns");
    const Tensor& full = p.swapped ? ctx.input(1) : ctx.input(0);
    const Tensor& part = p.swapped ? ctx.input(0) : ctx.input(1);
    Tensor& y = ctx.allocate_output(0, DType::Float32, full.shape());
    if (p.inner == 1) row_broadcast(op_, full.data<float>(), part.data<float>(), y.data<float>(), p.outer, p.mid);
    else column_broadcast(op_, full.data<float>(), part.data<float>(), y.data<float>(), p.outer, p.mid, p.inner);
  }

 private:
  RowPlan plan(const std::vector<const Tensor*>& inputs) const {
    if (inputs.size() != 2 || !inputs[0] || !inputs[1]) return {};
    const Tensor &a = *inputs[0], &b = *inputs[1];
    if (a.dtype() != DType::Float32 || b.dtype() != DType::Float32 || a.numel() == 0 || b.numel() == 0) return {};
    RowPlan p = span_of(a.shape(), b.shape());
    if (!p.runs() && commutative_) {
      p = span_of(b.shape(), a.shape());
      p.swapped = true;
    }
    // Rows of 16 floats or more (inner 1: the operand's own span): shorter ones gain nothing.
    if (!p.runs() || (p.inner == 1 ? p.mid : p.inner) < kMinInner) return {};
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
