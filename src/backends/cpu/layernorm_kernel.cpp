// LayerNormalization over the last axis with constant scale and bias, on wpk's AVX2 kernel
// (avx2_layernorm.hpp), on CPUs with AVX2 and FMA.
#include "backends/cpu/avx2_layernorm.hpp"
#include "backends/cpu/cpu_kernels.hpp"
#include "backends/op_support.hpp"

namespace wpk::cpu {
namespace {

class LayerNormKernel : public Kernel {
 public:
  LayerNormKernel(Tensor scale, Tensor bias, float epsilon)
      : scale_(std::move(scale)), bias_(std::move(bias)), epsilon_(epsilon) {}

  KernelProfile profile() const override { return {"f32_layernorm__avx2", 256, 0.5}; }

  void run(KernelContext& ctx) const override {
    const Tensor& x = layernorm_input(ctx, scale_.numel());
    Tensor& y = ctx.allocate_output(0, DType::Float32, x.shape());
    const std::int64_t cols = scale_.numel();
    avx2_layernorm(x.data<float>(), y.data<float>(), cols ? x.numel() / cols : 0, cols, scale_.data<float>(),
                   bias_.empty() ? nullptr : bias_.data<float>(), epsilon_);
  }

 private:
  Tensor scale_, bias_;
  float epsilon_;
};

}  // namespace

std::string layernorm_unsupported(const Node& node, const Graph& graph) {
  if (!avx2_layernorm_available()) return "needs AVX2 and FMA";
  return constant_layernorm_unsupported(node, graph);
}

std::unique_ptr<Kernel> make_layernorm(const Node& node, const Graph& graph) {
  const Tensor* bias = node.inputs.size() > 2 && node.inputs[2] != kNoValue ? graph.initializer(node.inputs[2]) : nullptr;
  return std::make_unique<LayerNormKernel>(*graph.initializer(node.inputs[1]), bias ? *bias : Tensor(),
                                           node.attr_float("epsilon", 1e-5f));
}

}  // namespace wpk::cpu
