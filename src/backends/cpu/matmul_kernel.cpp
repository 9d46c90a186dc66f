// MatMul, Gemm and com.wpk FusedMatMul with a constant B on wpk's AVX2 register-tile kernel
// (avx2_conv.hpp): the product [rows, K] x [K, N] is a 1x1 convolution of `rows` pixels, B packed
// once as its Acdb16a weights, bias, residual and activation fused into the one store. Its
// configs are the direct kernel's knobs (conv_config.hpp).
#include <algorithm>

#include "backends/cpu/avx2_conv.hpp"
#include "backends/cpu/conv_config.hpp"
#include "backends/cpu/conv_walk.hpp"
#include "backends/cpu/cpu_kernels.hpp"
#include "backends/cpu/weight_packing.hpp"
#include "graph/fused_ops.hpp"

namespace wpk::cpu {
namespace {

class CpuMatMulKernel : public Kernel {
 public:
  CpuMatMulKernel(const Node& node, const Tensor& b, bool transposed, Tensor bias, ConvConfig config)
      : config_(config), k_(transposed ? b.shape()[1] : b.shape()[0]), n_(transposed ? b.shape()[0] : b.shape()[1]),
        bias_(std::move(bias)), epilogue_(*conv_epilogue(node, bias_)), residual_(has_fused_residual(node)),
        packed_(pack_acdb(b.data<float>(), n_, k_, 1, 1, 16, !transposed)) {}

  void run(KernelContext& ctx) const override {
    const Tensor& a = ctx.input(0);
    require_f32(ctx, a, "A");
    if (a.rank() < 1 || a.shape().back() != k_)
      ctx.fail(ErrorCode::InvalidArgument,
               "input A " + shape_to_string(a.shape()) + " does not match B's " + std::to_string(k_) + " rows");
    Shape y_shape(a.shape().begin(), a.shape().end() - 1);
    y_shape.push_back(n_);
    Tensor& y = ctx.allocate_output(0, DType::Float32, y_shape);
    const std::int64_t rows = a.numel() / std::max<std::int64_t>(1, k_);
    if (residual_) copy_residual(ctx, 3, y);
    if (rows == 0 || n_ == 0) return;
    avx2_conv(pointwise_conv_shape(rows, k_, n_), a.data<float>(), packed_.get(), epilogue_, y.data<float>(),
              {config_.group_kb << 10, config_.pixels});
  }

  KernelProfile profile() const override {
    KernelProfile p;
    p.name = kMatMulKernelName;
    p.vector_bits = 256;
    return p;
  }
  bool owns_input(std::size_t i) const override { return i == 1; }

 private:
  ConvConfig config_;
  std::int64_t k_, n_;
  Tensor bias_;
  StreamConvEpilogue epilogue_;
  bool residual_;
  std::shared_ptr<const float> packed_;  // B as Acdb16a weights [N / 16][K][16]
};

}  // namespace

std::string matmul_unsupported(const Node& node, const Graph& graph) {
  if (!avx2_conv_runs(pointwise_conv_shape(1, 1, 1))) return "wpk's product kernel needs AVX2 and FMA";
  const Tensor* b = constant_input(node, graph, 1);
  if (!b || b->dtype() != DType::Float32 || b->rank() != 2) return "wpk's product kernel needs a constant float32 matrix B";
  if (b->numel() == 0) return "B is empty";
  for (ValueId v : node.inputs)
    if (v != kNoValue && graph.value(v).dtype != DType::Float32 && graph.value(v).dtype != DType::Undefined)
      return "inputs are not float32";
  const bool transposed = node.op_type == "Gemm" && node.attr_int("transB", 0) == 1;
  if (node.op_type == "Gemm" &&
      (node.attr_int("transA", 0) != 0 || node.attr_float("alpha", 1.f) != 1.f || node.attr_float("beta", 1.f) != 1.f))
    return "Gemm with transA or alpha/beta other than 1";
  if (node.op_type != "MatMul" && node.inputs.size() > 2 && node.inputs[2] != kNoValue) {
    const Tensor* bias = constant_input(node, graph, 2);
    const std::int64_t n = transposed ? b->shape()[0] : b->shape()[1];
    if (!bias || bias->dtype() != DType::Float32 || bias->numel() != n || bias->shape().back() != n)
      return "bias must be a constant float32 vector of the output width";
  }
  if (!conv_epilogue(node, Tensor())) return "activation " + node.attr_string("activation", "") + " is not fused by wpk's product kernel";
  return "";
}

std::vector<std::string> matmul_configs() {
  std::vector<std::string> out;
  for (const ConvConfig& c : all_conv_configs())
    if (c.kernel == ConvConfig::Kernel::DirectAvx2) out.push_back(c.text());
  return out;
}

std::unique_ptr<Kernel> make_matmul(const Node& node, const Graph& graph, const std::string& config_text) {
  const std::optional<ConvConfig> config = ConvConfig::parse(config_text.empty() ? matmul_configs().front() : config_text);
  if (!config || config->kernel != ConvConfig::Kernel::DirectAvx2)
    throw Error(ErrorCode::Internal, node_label(node) + "the cpu backend has no product configuration '" + config_text + "'");
  const Tensor* bias = node.op_type != "MatMul" ? constant_input(node, graph, 2) : nullptr;
  const bool transposed = node.op_type == "Gemm" && node.attr_int("transB", 0) == 1;
  return std::make_unique<CpuMatMulKernel>(node, *constant_input(node, graph, 1), transposed, bias ? *bias : Tensor(),
                                           *config);
}

std::optional<KernelProfile> describe_matmul(const Node& node, const std::string& config_text, const InputShapes& shapes,
                                             int threads) {
  const std::optional<ConvConfig> config = ConvConfig::parse(config_text);
  if (!config || config->kernel != ConvConfig::Kernel::DirectAvx2 || shapes.size() < 2 || !shapes[0] || !shapes[1] ||
      shapes[0]->empty() || shapes[1]->size() != 2)
    return std::nullopt;
  const bool transposed = node.op_type == "Gemm" && node.attr_int("transB", 0) == 1;
  const Shape& b = *shapes[1];
  std::int64_t rows = 1;
  for (std::size_t i = 0; i + 1 < shapes[0]->size(); ++i) rows *= (*shapes[0])[i];
  KernelProfile p = describe_conv(*config, pointwise_conv_shape(rows, transposed ? b[1] : b[0], transposed ? b[0] : b[1]), threads);
  p.name = kMatMulKernelName;
  return p;
}

}  // namespace wpk::cpu
