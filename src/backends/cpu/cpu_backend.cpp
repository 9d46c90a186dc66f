#include "backends/cpu/cpu_backend.hpp"

#include <cstring>

#include "backends/cpu/conv_config.hpp"
#include "backends/cpu/cpu_kernels.hpp"
#include "core/cpu_features.hpp"
#include "graph/fused_ops.hpp"

namespace wpk::cpu {
namespace {

enum class Family { None, Attention, Conv, MatMul, RowBroadcast, ConcatBatchNorm, Quantize, QLinearAdd, DynamicQuantize, QuantizedConv, QuantizedProduct, Concat, Tanh };

Family family_of(const Node& node) {
  const bool onnx = node.domain.empty() || node.domain == "ai.onnx";
  const bool wpk_op = node.domain == kWpkDomain;
  if (wpk_op && node.op_type == "Attention") return Family::Attention;
  if ((onnx && node.op_type == "Conv") || (wpk_op && node.op_type == "FusedConv")) return Family::Conv;
  if ((onnx && (node.op_type == "MatMul" || node.op_type == "Gemm")) || (wpk_op && node.op_type == "FusedMatMul"))
    return Family::MatMul;
  for (const char* op : {"Add", "Sub", "Mul", "Div"})
    if (onnx && node.op_type == op) return Family::RowBroadcast;
  if (wpk_op && node.op_type == "ConcatBatchNorm") return Family::ConcatBatchNorm;
  if (onnx && (node.op_type == "QuantizeLinear" || node.op_type == "DequantizeLinear")) return Family::Quantize;
  if (wpk_op && node.op_type == "QLinearAdd") return Family::QLinearAdd;
  if (onnx && node.op_type == "DynamicQuantizeLinear") return Family::DynamicQuantize;
  if ((onnx && node.op_type == "QLinearConv") || (wpk_op && node.op_type == "QLinearConvAdd")) return Family::QuantizedConv;
  if (wpk_op && node.op_type == "MatMulIntegerToFloat") return Family::QuantizedProduct;
  if (onnx && node.op_type == "Concat") return Family::Concat;
  if (onnx && node.op_type == "Tanh") return Family::Tanh;
  return Family::None;
}

}  // namespace

int clones_vector_bits() {
  const CpuFeatures& cpu = cpu_features();
  return cpu.avx512f ? 512 : cpu.avx2 ? 256 : 128;
}

void require_f32(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.dtype() != DType::Float32)
    ctx.fail(ErrorCode::InvalidArgument, std::string(what) + " must be float32, got " + dtype_name(t.dtype()));
}

void copy_residual(const KernelContext& ctx, std::size_t index, Tensor& y) {
  const Tensor& z = ctx.input(index);
  require_f32(ctx, z, "residual input");
  if (z.shape() != y.shape())
    ctx.fail(ErrorCode::InvalidArgument,
             "residual input has shape " + shape_to_string(z.shape()) + ", expected " + shape_to_string(y.shape()));
  if (z.raw() != y.raw()) std::memcpy(y.raw(), z.raw(), y.nbytes());
}

std::vector<std::string> CpuBackend::kernel_names() const {
  std::vector<std::string> names = {"f32_attention__avx2", "f32_attention__avx512", "f32_concat_batchnorm",
                                     "f32_row_broadcast", "f32_quantize_linear__avx2", "f32_dequantize_linear__avx2",
                                     "q8_add__avx2", "f32_dynamic_quantize_linear__avx2", "any_concat"};
  for (auto k : {ConvConfig::Kernel::DirectAvx2, ConvConfig::Kernel::WinogradAvx2, ConvConfig::Kernel::WinogradAvx512,
                 ConvConfig::Kernel::StreamAvx512})
    names.push_back(conv_kernel_name(k));
  names.push_back(kMatMulKernelName);
  names.push_back(tanh_kernel_name());
  for (const std::string& name : quantized_kernel_names()) names.push_back(name);
  return names;
}

std::vector<std::string> CpuBackend::configs(const Node& node, const Graph& graph) const {
  if (!why_unsupported(node, graph).empty()) return {""};
  if (family_of(node) == Family::Conv) return conv_configs(node, graph);
  if (family_of(node) == Family::MatMul) return matmul_configs();
  if (family_of(node) == Family::Attention) return attention_configs();
  if (family_of(node) == Family::QuantizedConv || family_of(node) == Family::QuantizedProduct) return quantized_configs();
  return {""};
}

std::unique_ptr<Kernel> CpuBackend::prepare(const Node& node, const Graph& graph, const std::string& config) const {
  if (config.empty()) return prepare(node, graph);
  const std::string why = why_unsupported(node, graph);
  if (!why.empty()) throw Error(ErrorCode::Unsupported, node_label(node) + why);
  if (family_of(node) == Family::Conv) return make_conv(node, graph, config);
  if (family_of(node) == Family::MatMul) return make_matmul(node, graph, config);
  if (family_of(node) == Family::Attention) return make_attention(node, graph, config);
  if (family_of(node) == Family::QuantizedConv) return make_quantized_conv(node, graph, config);
  if (family_of(node) == Family::QuantizedProduct) return make_quantized_product(node, graph, config);
  throw Error(ErrorCode::Internal, node_label(node) + "cpu has no configuration '" + config + "'");
}

KernelProfile CpuBackend::undescribed_profile(const Node& /*node*/) const { return {"", clones_vector_bits(), 0.5}; }

std::optional<KernelProfile> CpuBackend::describe(const Node& node, const Graph& graph, const std::string& config,
                                                  const InputShapes& shapes, int threads) const {
  if (family_of(node) == Family::Conv) return describe_conv(node, config, shapes, threads);
  if (family_of(node) == Family::MatMul) return describe_matmul(node, config, shapes, threads);
  if (family_of(node) == Family::Attention) return describe_attention(config);
  if (family_of(node) == Family::QuantizedConv) return describe_quantized_conv(node, graph, config, shapes);
  if (family_of(node) == Family::QuantizedProduct) return describe_quantized_product(node, graph, config, shapes);
  return std::nullopt;
}

bool CpuBackend::accumulates_into_residual(const Node& node, const std::string& /*config*/) const {
  // The conv and product kernels compute y = act(conv + bias + y), y holding the residual on entry.
  // The 8-bit ones read each residual element before they store its output.
  const Family f = family_of(node);
  if (f == Family::QuantizedConv || f == Family::QuantizedProduct) return fused_residual_input(node) >= 0;
  return (f == Family::Conv || f == Family::MatMul) && has_fused_residual(node);
}

std::string CpuBackend::why_unsupported(const Node& node, const Graph& graph) const {
  if (node.inputs.empty() || node.inputs[0] == kNoValue) return "no input";
  switch (family_of(node)) {
    case Family::Attention: return attention_unsupported(node, graph);
    case Family::Conv: return conv_unsupported(node, graph);
    case Family::MatMul: return matmul_unsupported(node, graph);
    case Family::RowBroadcast: return row_broadcast_unsupported(node, graph);
    case Family::ConcatBatchNorm: return concat_batchnorm_unsupported(node, graph);
    case Family::Quantize: return quantize_unsupported(node, graph);
    case Family::QLinearAdd: return qlinear_add_unsupported(node, graph);
    case Family::DynamicQuantize: return dynamic_quantize_unsupported(node, graph);
    case Family::QuantizedConv: return quantized_conv_unsupported(node, graph);
    case Family::QuantizedProduct: return quantized_product_unsupported(node, graph);
    case Family::Concat: return concat_unsupported(node, graph);
    case Family::Tanh: return tanh_unsupported(node, graph);
    case Family::None: break;
  }
  return "the cpu backend does not run " + node.op_type;
}

std::unique_ptr<Kernel> CpuBackend::prepare(const Node& node, const Graph& graph) const {
  const std::string why = why_unsupported(node, graph);
  if (!why.empty()) throw Error(ErrorCode::Unsupported, node_label(node) + why);
  switch (family_of(node)) {
    case Family::Attention: return make_attention(node, graph, "");
    case Family::Conv: return make_conv(node, graph, "");
    case Family::MatMul: return make_matmul(node, graph, "");
    case Family::RowBroadcast: return make_row_broadcast(node, graph);
    case Family::ConcatBatchNorm: return make_concat_batchnorm(node, graph);
    case Family::Quantize: return make_quantize(node, graph);
    case Family::QLinearAdd: return make_qlinear_add(node, graph);
    case Family::DynamicQuantize: return make_dynamic_quantize(node, graph);
    case Family::QuantizedConv: return make_quantized_conv(node, graph, "");
    case Family::QuantizedProduct: return make_quantized_product(node, graph, "");
    case Family::Concat: return make_concat(node, graph);
    case Family::Tanh: return make_tanh(node, graph);
    case Family::None: break;
  }
  throw Error(ErrorCode::Internal, node_label(node) + "no cpu kernel");
}

}  // namespace wpk::cpu
