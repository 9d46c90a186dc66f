// com.wpk Attention on wpk's kernels, which read Q, K, V and write Y in place whatever their
// interleaved_heads layout: kernel=avx2 (avx2_attention.hpp) on CPUs with AVX2 and FMA,
// kernel=avx512 (avx512_attention.hpp) where AVX-512F is there too. Which runs is the cost
// model's choice from their profiles, or a tuning record's.
#include <algorithm>

#include "backends/attention_layout.hpp"
#include "backends/cpu/avx2_attention.hpp"
#include "backends/cpu/avx512_attention.hpp"
#include "backends/cpu/cpu_kernels.hpp"
#include "graph/fused_ops.hpp"

namespace wpk::cpu {
namespace {

class AttentionKernel : public Kernel {
 public:
  AttentionKernel(float scale, std::array<bool, 4> interleaved, bool wide)
      : scale_(scale), interleaved_(interleaved), wide_(wide) {}

  KernelProfile profile() const override { return *describe_attention(wide_ ? "kernel=avx512" : "kernel=avx2"); }

  void run(KernelContext& ctx) const override {
    const auto [q_in, k_in, v_in] = attention_inputs(ctx);
    const Tensor &q = *q_in, &k = *k_in, &v = *v_in;
    const AttentionGeometry g = attention_geometry(ctx, q.shape(), k.shape(), v.shape(), scale_, interleaved_);
    const AttentionOperand mask = ctx.has_input(3) ? attention_mask_view(ctx, ctx.input(3), g) : AttentionOperand();
    Tensor& y = ctx.allocate_output(0, DType::Float32, g.y_shape);
    const AttentionOperand y_view = attention_view(nullptr, g, kAttentionY);
    const auto run = wide_ ? avx512_attention : avx2_attention;
    run(g.shape, attention_view(q.data<float>(), g, kAttentionQ), attention_view(k.data<float>(), g, kAttentionK),
        attention_view(v.data<float>(), g, kAttentionV), mask, y.data<float>(), y_view.batch_offsets, y_view.row_stride);
  }

 private:
  float scale_;
  std::array<bool, 4> interleaved_;
  bool wide_;
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

std::vector<std::string> attention_configs() {
  std::vector<std::string> out = {"kernel=avx2"};
  if (avx512_attention_available()) out.push_back("kernel=avx512");
  return out;
}

std::optional<KernelProfile> describe_attention(const std::string& config) {
  if (config == "kernel=avx2") return KernelProfile{"f32_attention__avx2", 256, 0.5};
  if (config == "kernel=avx512") return KernelProfile{"f32_attention__avx512", 512, 0.5};
  return std::nullopt;
}

std::unique_ptr<Kernel> make_attention(const Node& node, const Graph&, const std::string& config) {
  const std::vector<std::string> offered = attention_configs();
  const std::string chosen = config.empty() ? offered.front() : config;
  if (std::find(offered.begin(), offered.end(), chosen) == offered.end())
    throw Error(ErrorCode::Internal, node_label(node) + "the cpu backend has no attention configuration '" + config + "' here");
  return std::make_unique<AttentionKernel>(node.attr_float("scale", 1.0f), attention_interleaved_heads(node),
                                           chosen == "kernel=avx512");
}

}  // namespace wpk::cpu
