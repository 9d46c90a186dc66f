// com.wpk Attention on wpk's AVX2 kernel (avx2_attention.hpp), which reads Q, K, V and writes Y
// in place whatever their interleaved_heads layout, on CPUs with AVX2 and FMA.
#include "backends/attention_layout.hpp"
#include "backends/cpu/avx2_attention.hpp"
#include "backends/cpu/cpu_kernels.hpp"
#include "graph/fused_ops.hpp"

namespace wpk::cpu {
namespace {

class AttentionKernel : public Kernel {
 public:
  AttentionKernel(float scale, std::array<bool, 4> interleaved) : scale_(scale), interleaved_(interleaved) {}

  KernelProfile profile() const override { return {"f32_attention__avx2", 256, 0.5}; }

  void run(KernelContext& ctx) const override {
    const auto [q_in, k_in, v_in] = attention_inputs(ctx);
    const Tensor &q = *q_in, &k = *k_in, &v = *v_in;
    const AttentionGeometry g = attention_geometry(ctx, q.shape(), k.shape(), v.shape(), scale_, interleaved_);
    const AttentionOperand mask = ctx.has_input(3) ? attention_mask_view(ctx, ctx.input(3), g) : AttentionOperand();
    Tensor& y = ctx.allocate_output(0, DType::Float32, g.y_shape);
    const AttentionOperand y_view = attention_view(nullptr, g, kAttentionY);
    avx2_attention(g.shape, attention_view(q.data<float>(), g, kAttentionQ), attention_view(k.data<float>(), g, kAttentionK),
                   attention_view(v.data<float>(), g, kAttentionV), mask, y.data<float>(), y_view.batch_offsets,
                   y_view.row_stride);
  }

 private:
  float scale_;
  std::array<bool, 4> interleaved_;
};

}  // namespace

std::string attention_unsupported(const Node& node, const Graph& graph) {
  if (!avx2_attention_available()) return "needs AVX2 and FMA";
  if (node.inputs.size() < 3) return "needs Q, K and V";
  for (ValueId v : node.inputs)
    if (v != kNoValue && graph.value(v).dtype != DType::Float32 && graph.value(v).dtype != DType::Undefined)
      return "inputs are not float32";
  try {
    attention_interleaved_heads(node);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::unique_ptr<Kernel> make_attention(const Node& node, const Graph&) {
  return std::make_unique<AttentionKernel>(node.attr_float("scale", 1.0f), attention_interleaved_heads(node));
}

}  // namespace wpk::cpu
