#include "backends/onednn/onednn_backend.hpp"

#include "backends/onednn/onednn_common.hpp"
#include "backends/onednn/onednn_kernels.hpp"
#include "graph/fused_ops.hpp"

namespace wpk::onednn {
namespace {

enum class Family { None, Conv, QLinearConv, MatMulInteger, ConvInteger, MatMul, Pool, Transpose, Attention, LayerNorm, Binary, BatchNorm, Eltwise, Softmax, Concat };

Family family_of(const Node& node) {
  const bool onnx = node.domain.empty() || node.domain == "ai.onnx";
  const bool wpk_op = node.domain == kWpkDomain;
  if ((onnx && node.op_type == "Conv") || (wpk_op && node.op_type == "FusedConv")) return Family::Conv;
  if ((onnx && (node.op_type == "MatMul" || node.op_type == "Gemm")) || (wpk_op && node.op_type == "FusedMatMul"))
    return Family::MatMul;
  if (onnx && node.op_type == "QLinearConv") return Family::QLinearConv;
  if (wpk_op && node.op_type == "QLinearConvAdd") return Family::QLinearConv;
  if (wpk_op && node.op_type == "MatMulIntegerToFloat") return Family::MatMulInteger;
  if (wpk_op && node.op_type == "ConvIntegerToFloat") return Family::ConvInteger;
  if (onnx && (node.op_type == "MaxPool" || node.op_type == "AveragePool" || node.op_type == "GlobalAveragePool"))
    return Family::Pool;
  if (onnx && node.op_type == "Transpose") return Family::Transpose;
  if (wpk_op && node.op_type == "Attention") return Family::Attention;
  if ((onnx || wpk_op) && node.op_type == "LayerNormalization") return Family::LayerNorm;
  // Max and Min stay on the reference: its NaN propagation is numpy's, oneDNN's is the CPU's.
  for (const char* op : {"Add", "Sub", "Mul", "Div"})
    if (onnx && node.op_type == op) return Family::Binary;
  if ((onnx && node.op_type == "BatchNormalization") || (wpk_op && node.op_type == "FusedBatchNorm"))
    return Family::BatchNorm;
  if (is_eltwise(node)) return Family::Eltwise;
  if (onnx && node.op_type == "Softmax") return Family::Softmax;
  if (onnx && node.op_type == "Concat") return Family::Concat;
  return Family::None;
}

}  // namespace

std::optional<Shape> static_shape(const Graph& graph, ValueId v) {
  const ValueInfo& info = graph.value(v);
  if (!info.dims) return std::nullopt;
  Shape s;
  for (const Dim& d : *info.dims) {
    if (d.is_static()) s.push_back(d.value);
    else if (!d.symbol.empty()) s.push_back(1);
    else return std::nullopt;
  }
  return s;
}

bool fully_static(const Graph& graph, ValueId v) {
  const ValueInfo& info = graph.value(v);
  if (!info.dims) return false;
  for (const Dim& d : *info.dims)
    if (!d.is_static()) return false;
  return true;
}

const Tensor& image_input(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 4 || x.dtype() != DType::Float32)
    ctx.fail(ErrorCode::InvalidArgument, std::string("expects a 4-D float32 input, got ") + dtype_name(x.dtype()) + " " +
                                             shape_to_string(x.shape()));
  return x;
}

std::string OneDnnBackend::why_unsupported(const Node& node, const Graph& graph) const {
  if (node.inputs.empty() || node.inputs[0] == kNoValue) return "no input";
  switch (family_of(node)) {
    case Family::Conv: return conv_unsupported(node, graph);
    case Family::QLinearConv: return qlinear_conv_unsupported(node, graph);
    case Family::MatMulInteger: return matmul_integer_unsupported(node, graph);
    case Family::ConvInteger: return conv_integer_unsupported(node, graph);
    case Family::MatMul: return matmul_unsupported(node, graph);
    case Family::Pool: return pool_unsupported(node, graph);
    case Family::Transpose: return transpose_unsupported(node, graph);
    case Family::Attention: return attention_unsupported(node, graph);
    case Family::LayerNorm: return layernorm_unsupported(node, graph);
    case Family::Binary: return binary_unsupported(node, graph);
    case Family::BatchNorm: return batchnorm_unsupported(node, graph);
    case Family::Eltwise: return eltwise_unsupported(node, graph);
    case Family::Softmax: return softmax_unsupported(node, graph);
    case Family::Concat: return concat_unsupported(node, graph);
    case Family::None: break;
  }
  return "oneDNN backend does not run " + node.op_type;
}

std::string OneDnnBackend::version() const {
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) + "+" + v->hash;
}

bool OneDnnBackend::accumulates_into_residual(const Node& node, const std::string& /*config*/) const {
  return fused_residual_input(node) >= 0;
}

bool OneDnnBackend::takes_bf16_activations(const Node& node, const Graph& graph) const {
  // The bf16 convolution and the bf16 product with constant B (conv.cpp, matmul.cpp).
  const Family f = family_of(node);
  return (f == Family::Conv || (f == Family::MatMul && constant_input(node, graph, 1))) &&
         node.attr_string("compute_precision", "") == "bf16" && why_unsupported(node, graph).empty();
}

std::unique_ptr<Kernel> OneDnnBackend::prepare(const Node& node, const Graph& graph) const {
  const std::string why = why_unsupported(node, graph);
  if (!why.empty()) throw Error(ErrorCode::Unsupported, node_label(node) + why);
  switch (family_of(node)) {
    case Family::Conv: return make_conv(node, graph, "");
    case Family::QLinearConv: return make_qlinear_conv(node, graph, "");
    case Family::MatMulInteger: return make_matmul_integer(node, graph, "");
    case Family::ConvInteger: return make_conv_integer(node, graph, "");
    case Family::MatMul: return make_matmul(node, graph);
    case Family::Pool: return make_pool(node, graph);
    case Family::Transpose: return make_transpose(node, graph);
    case Family::Attention: return make_attention(node, graph);
    case Family::LayerNorm: return make_layernorm(node, graph);
    case Family::Binary: return make_binary(node, graph);
    case Family::BatchNorm: return make_batchnorm(node, graph);
    case Family::Eltwise: return make_eltwise(node, graph);
    case Family::Softmax: return make_softmax(node, graph);
    case Family::Concat: return make_concat(node, graph);
    case Family::None: break;
  }
  throw Error(ErrorCode::Internal, node_label(node) + "no oneDNN kernel");
}

std::vector<std::string> OneDnnBackend::configs(const Node& node, const Graph& graph) const {
  if (!why_unsupported(node, graph).empty()) return {""};
  if (family_of(node) == Family::Conv) return conv_configs(node, graph);
  if (family_of(node) == Family::QLinearConv) return qlinear_conv_configs(node, graph);
  if (family_of(node) == Family::MatMulInteger) return matmul_integer_configs(node, graph);
  if (family_of(node) == Family::ConvInteger) return conv_integer_configs(node, graph);
  return {""};
}

std::unique_ptr<Kernel> OneDnnBackend::prepare(const Node& node, const Graph& graph, const std::string& config) const {
  if (config.empty()) return prepare(node, graph);
  const Family family = family_of(node);
  if (family != Family::Conv && family != Family::QLinearConv && family != Family::MatMulInteger &&
      family != Family::ConvInteger)
    throw Error(ErrorCode::Internal, node_label(node) + "onednn has no configuration '" + config + "'");
  const std::string why = why_unsupported(node, graph);
  if (!why.empty()) throw Error(ErrorCode::Unsupported, node_label(node) + why);
  if (family == Family::Conv) return make_conv(node, graph, config);
  if (family == Family::QLinearConv) return make_qlinear_conv(node, graph, config);
  if (family == Family::ConvInteger) return make_conv_integer(node, graph, config);
  return make_matmul_integer(node, graph, config);
}

std::optional<KernelProfile> OneDnnBackend::describe(const Node& node, const Graph& graph, const std::string& config,
                                                     const InputShapes& shapes, int threads) const {
  std::optional<KernelProfile> p;
  if (family_of(node) == Family::Conv) p = describe_conv(node, config, shapes, threads);
  else if (family_of(node) == Family::MatMul) p = describe_matmul(node, graph, shapes);
  else if (family_of(node) == Family::QLinearConv || family_of(node) == Family::MatMulInteger ||
           family_of(node) == Family::ConvInteger)
    p = describe_integer_arithmetic(config, shapes);
  else if (family_of(node) == Family::Attention && node.attr_string("compute_precision", "") == "bf16") {
    // Both products in bf16; Q, K and V rounded into copies first (read 4 bytes, write 2).
    p = primitive_profile();
    p->work_scale = reduced_precision_work_share(dnnl::memory::data_type::bf16);
    for (std::size_t i = 0; i < 3 && i < shapes.size(); ++i)
      if (shapes[i]) p->extra_bytes += 2.0 * static_cast<double>(shape_numel(*shapes[i]));
  }
  if (p) p->call_seconds = kPrimitiveCallSeconds;
  return p;
}

KernelProfile OneDnnBackend::undescribed_profile(const Node& /*node*/) const { return primitive_profile(); }

}  // namespace wpk::onednn
