#include "backends/cpu/cpu_backend.hpp"

#include "backends/cpu/cpu_kernels.hpp"
#include "core/cpu_features.hpp"
#include "graph/fused_ops.hpp"

namespace wpk::cpu {
namespace {

enum class Family { None, Attention, LayerNorm, MaxPool, RowBroadcast, ConcatBatchNorm };

Family family_of(const Node& node) {
  const bool onnx = node.domain.empty() || node.domain == "ai.onnx";
  const bool wpk_op = node.domain == kWpkDomain;
  if (wpk_op && node.op_type == "Attention") return Family::Attention;
  if ((onnx || wpk_op) && node.op_type == "LayerNormalization") return Family::LayerNorm;
  if (onnx && node.op_type == "MaxPool") return Family::MaxPool;
  for (const char* op : {"Add", "Sub", "Mul", "Div"})
    if (onnx && node.op_type == op) return Family::RowBroadcast;
  if (wpk_op && node.op_type == "ConcatBatchNorm") return Family::ConcatBatchNorm;
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

std::vector<std::string> CpuBackend::kernel_names() const {
  return {"f32_attention__avx2", "f32_concat_batchnorm", "f32_layernorm__avx2", "f32_maxpool_nhwc", "f32_row_broadcast"};
}

std::string CpuBackend::why_unsupported(const Node& node, const Graph& graph) const {
  if (node.inputs.empty() || node.inputs[0] == kNoValue) return "no input";
  switch (family_of(node)) {
    case Family::Attention: return attention_unsupported(node, graph);
    case Family::LayerNorm: return layernorm_unsupported(node, graph);
    case Family::MaxPool: return max_pool_unsupported(node, graph);
    case Family::RowBroadcast: return row_broadcast_unsupported(node, graph);
    case Family::ConcatBatchNorm: return concat_batchnorm_unsupported(node, graph);
    case Family::None: break;
  }
  return "the cpu backend does not run " + node.op_type;
}

std::unique_ptr<Kernel> CpuBackend::prepare(const Node& node, const Graph& graph) const {
  const std::string why = why_unsupported(node, graph);
  if (!why.empty()) throw Error(ErrorCode::Unsupported, node_label(node) + why);
  switch (family_of(node)) {
    case Family::Attention: return make_attention(node, graph);
    case Family::LayerNorm: return make_layernorm(node, graph);
    case Family::MaxPool: return make_max_pool(node, graph);
    case Family::RowBroadcast: return make_row_broadcast(node, graph);
    case Family::ConcatBatchNorm: return make_concat_batchnorm(node, graph);
    case Family::None: break;
  }
  throw Error(ErrorCode::Internal, node_label(node) + "no cpu kernel");
}

}  // namespace wpk::cpu
