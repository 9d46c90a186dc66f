#pragma once
// Ops wpk's optimizer creates (domain "com.wpk"). Every backend that runs one must match the
// reference backend's implementation, which defines the semantics below.
//
// FusedConv(X, W, [B], [Z]) -> Y
//   Y = act(conv(X, W) + B + Z). Attributes: every Conv attribute (auto_pad, dilations, group,
//   kernel_shape, pads, strides), plus
//     activation         string: "" (none) | "Relu" | "Clip" | "LeakyRelu" | "Sigmoid" | "Tanh" |
//                        "SiLU" (x*sigmoid(x)) | "HardSigmoid" | "HardSwish" | "Gelu" (erf form) |
//                        "GeluTanh" (tanh approximation, as Gelu below)
//     activation_params  floats: Clip [min, max]; LeakyRelu [alpha]; HardSigmoid [alpha, beta]
//     channels_last      int 0|1: X, Z and Y are NCHW (0) or NHWC (1). W stays in ONNX's OIHW.
//   Z (the residual) has Y's shape.
//
// DepthwisePointwiseConv(X, W_dw, B_dw, W_pw, B_pw, [Z]) -> Y
//   Y = FusedConv(FusedConv(X, W_dw, B_dw), W_pw, B_pw, Z), X and Y NHWC: a depthwise convolution
//   (W_dw [C, 1, kh, kw], group C) and the pointwise one (W_pw [O, C, 1, 1]) that alone reads it,
//   a depth-first group whose kernels need not store the depthwise output. The Conv attributes
//   (dilations, group, kernel_shape, pads, strides), activation and activation_params are the
//   depthwise conv's; pointwise_activation and pointwise_activation_params the pointwise one's.
//   channels_last = 1. graph/group_parts.hpp splits it into the two FusedConvs.
//
// ScaledPointwiseConv(X, S, W, [B], [Z]) -> Y
//   Y = FusedConv(Mul(X, S), W, B, Z), X and Y NHWC: a pointwise convolution (W [O, C, 1, 1]) of
//   its input scaled per image and channel (S [N, 1, 1, C] or [1, 1, 1, C], multiplied with numpy
//   broadcasting), the Mul output read by nothing else: a squeeze-and-excitation block's gate and
//   the projection after it, a depth-first group whose kernels need not store the scaled input.
//   Attributes: FusedConv's (unit strides and dilations, no padding, one group), channels_last = 1.
//   graph/group_parts.hpp splits it into the Mul and the FusedConv.
//
// ElementwiseChain(X0, X1, ...) -> Y
//   Element-wise ONNX ops on float32 values, computed one after another as steps, each value
//   between them read by one later step only: a depth-first group whose kernels need not store
//   those values. Attributes ops (strings: the steps' op types, from Add, Sub, Mul, Div, Max,
//   Min, Relu, Sigmoid, Tanh, Exp, Sqrt, Neg, Abs, Erf) and operands (ints, two a step: values
//   numbered inputs first, X0 = 0, then the steps' results, step s = inputs + s; a step reads
//   only inputs and earlier steps; the second is -1 for a unary op). Y is the last step's
//   result; binary steps broadcast as their ONNX ops do. graph/group_parts.hpp splits it into
//   the steps.
//
// FusedMatMul(A, B, [Bias], [Z]) -> Y
//   Y = act(MatMul(A, B) + Bias + Z), MatMul with numpy batching; Bias broadcasts to Y
//   (typically [N]); Z has Y's shape. activation / activation_params as above.
//
// FusedBatchNorm(X, scale, B, mean, var) -> Y
//   Y = act(BatchNormalization(X, ...)) at inference; attributes epsilon, channels_last (as
//   above) and activation ("" or "Relu").
//
// ConcatBatchNorm(scale, B, mean, var, X0, X1, ...) -> Y
//   Y = act(BatchNormalization(Concat(X0, X1, ...; the channel axis), scale, B, mean, var)) at
//   inference: the Xi are 4-D, equal but for their channels; attributes epsilon, channels_last
//   (the channel axis is 1, or 3 when 1) and activation ("" or "Relu"), as FusedBatchNorm.
//
// Gelu(X) -> Y            Y = 0.5 * X * (1 + erf(X / sqrt(2)))
//   Attribute approximate (string, as ONNX Gelu-20): "none" (default, the above) | "tanh":
//   Y = 0.5 * X * (1 + tanh(sqrt(2 / pi) * (X + 0.044715 * X^3))). Anything else is an error.
//
// Attention(Q, K, V, [Mask]) -> Y
//   Y = softmax(Q @ K^T * scale + Mask, axis=-1) @ V over the last two dims; Q [..., S, D],
//   K [..., T, D] (not transposed), V [..., T, Dv], Mask broadcastable to [..., S, T].
//   Attributes: scale (float); interleaved_heads (ints [q, k, v, y], default all 0): 1 where
//   that rank-4 operand holds the heads after the sequence, [B, S, H, D] (a projection's output
//   reshaped to heads) instead of [B, H, S, D], so Q, K and V are read without the Transpose
//   that splits off the heads and Y is written without the one that merges them back.
//
// QLinearAdd(A, A_scale, A_zero, B, B_scale, B_zero, Y_scale, Y_zero) -> Y
//   Y = QuantizeLinear(DequantizeLinear(A) + DequantizeLinear(B), Y_scale, Y_zero), each step in
//   float32 as those ops compute it; A and B 8-bit of one shape, scales and zero points scalars.
//
// QLinearConvAdd(X, X_scale, X_zero, W, W_scale, W_zero, C_scale, C_zero, [B], R, R_scale, R_zero,
//                Y_scale, Y_zero) -> Y
//   Y = QLinearAdd(C, C_scale, C_zero, R, R_scale, R_zero, Y_scale, Y_zero) of the codes
//   C = QLinearConv(X, ..., C_scale, C_zero, B) (its first nine inputs), C never stored: a
//   quantized residual block's last convolution and its shortcut. Attributes as QLinearConv's,
//   plus channels_last (X, R and Y NHWC). R has Y's dtype and shape. Kernels that compute the
//   sum in float32 may land one code from the reference where it lies within float32 rounding
//   of a half.
//
// MatMulIntegerToFloat(A, B, A_scale, B_scale, A_zero, B_zero) -> Y
//   Y = Cast<float32>(MatMulInteger(A, B, A_zero, B_zero)) * (A_scale * B_scale), the scales'
//   product in float32 and broadcast along Y's last axis: A 8-bit [..., K] with a one-element
//   scale and zero point, B 8-bit [K, N] with one-element or [N] scale and zero point. What
//   dynamic quantization writes as MatMulInteger -> Cast -> Mul(A_scale * B_scale).
// MatMulIntegerToFloat(A, B, A_scale, B_scale, A_zero, B_zero, [Bias], [Z]) -> Y
//   with an epilogue: Y = act(the above + Bias + Z), Bias float32 [N], Z of Y's shape, and
//   activation / activation_params as FusedConv's (a transformer's quantized linear layer: bias
//   and Gelu, or bias and the residual before LayerNorm).
// ConvIntegerToFloat(X, W, X_scale, W_scale, X_zero, W_zero) -> Y
//   Y = Cast<float32>(ConvInteger(X, W, X_zero, W_zero)) * (X_scale * W_scale), the scales'
//   product in float32: X 8-bit NCHW with a one-element scale and zero point, W a constant 8-bit
//   [C_out, C_in / group, kH, kW] with a one-element scale and zero point; ConvInteger's
//   attributes. What dynamic quantization writes as ConvInteger -> Cast -> Mul(X_scale * W_scale).
//
// compute_precision (string attribute; absent = "fp32"), set by the session on Conv, FusedConv,
//   Attention (its two products),
//   MatMul, Gemm and FusedMatMul under SessionOptions::precision = BF16: "bf16" lets a kernel
//   round the inputs and weights to bfloat16 and accumulate in float32; a kernel that computes
//   in float32 is still right. The reference computes in float32.
//   Between two such nodes the session may also make the value bfloat16 (passes::
//   keep_bf16_between_products): the producer writes it rounded, the reader takes it as it is.
//   Only a backend that says so (Backend::takes_bf16_activations) runs a node with a bfloat16
//   input 0 or output 0 (has_bf16_activations).
//
// The layout pass also sets channels_last = 1 on ONNX ops it moves to NHWC (MaxPool,
// AveragePool, GlobalAveragePool, inference BatchNormalization, QLinearConv), with the same
// meaning as above.
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "wpk/error.hpp"
#include "wpk/graph.hpp"

namespace wpk {

constexpr const char* kWpkDomain = "com.wpk";

// A com.wpk FusedConv or FusedMatMul given a residual Z (input 3).
inline bool has_fused_residual(const Node& node) {
  return node.domain == kWpkDomain && (node.op_type == "FusedConv" || node.op_type == "FusedMatMul") &&
         node.inputs.size() > 3 && node.inputs[3] != kNoValue;
}

// A node marked compute_precision = "bf16" whose input 0 or output 0 is a bfloat16 value.
inline bool has_bf16_activations(const Node& node, const Graph& graph) {
  auto bf16 = [&](const std::vector<ValueId>& vs) {
    return !vs.empty() && vs[0] != kNoValue && graph.value(vs[0]).dtype == DType::BFloat16;
  };
  return node.attr_string("compute_precision", "") == "bf16" && (bf16(node.inputs) || bf16(node.outputs));
}

// MatMulIntegerToFloat's optional epilogue inputs; QLinearConvAdd's residual codes;
// DepthwisePointwiseConv's and ScaledPointwiseConv's residuals.
constexpr std::size_t kIntegerProductBias = 6, kIntegerProductResidual = 7, kQLinearConvAddResidual = 9,
                      kDepthwisePointwiseResidual = 5, kScaledPointwiseResidual = 4;

// The input that holds a fused op's residual (FusedConv and FusedMatMul: Z, 3;
// MatMulIntegerToFloat: Z, 7; QLinearConvAdd: R, 9; DepthwisePointwiseConv: Z, 5;
// ScaledPointwiseConv: Z, 4), or -1 when the node has none.
inline int fused_residual_input(const Node& node) {
  if (has_fused_residual(node)) return 3;
  if (node.domain != kWpkDomain) return -1;
  const std::size_t at = node.op_type == "MatMulIntegerToFloat"     ? kIntegerProductResidual
                         : node.op_type == "QLinearConvAdd"         ? kQLinearConvAddResidual
                         : node.op_type == "DepthwisePointwiseConv" ? kDepthwisePointwiseResidual
                         : node.op_type == "ScaledPointwiseConv"    ? kScaledPointwiseResidual
                                                                    : 0;
  return at && node.inputs.size() > at && node.inputs[at] != kNoValue ? static_cast<int>(at) : -1;
}

// Attention's interleaved_heads: per operand (0: Q, 1: K, 2: V, 3: Y), true where it is
// [B, S, H, D]. Throws Error(InvalidModel) for a list that is not 4 entries of 0 or 1.
inline std::array<bool, 4> attention_interleaved_heads(const Node& attention) {
  std::array<bool, 4> interleaved{};
  if (!attention.has_attr("interleaved_heads")) return interleaved;
  const std::vector<std::int64_t> flags = attention.attr_ints("interleaved_heads");
  bool valid = flags.size() == 4;
  for (std::int64_t f : flags) valid = valid && (f == 0 || f == 1);
  if (!valid)
    throw Error(ErrorCode::InvalidModel, "node '" + attention.name + "': interleaved_heads must be 4 entries of 0 or 1");
  for (std::size_t i = 0; i < 4; ++i) interleaved[i] = flags[i] == 1;
  return interleaved;
}

// An interleaved attention operand's dims [B, S, H, D] as [B, H, S, D], or back (swaps axes 1
// and 2, for Shape or DimList); false, leaving them, when they are not rank 4.
template <typename Dims>
bool swap_heads(Dims& dims) {
  if (dims.size() != 4) return false;
  std::swap(dims[1], dims[2]);
  return true;
}

// The `activation` kind a com.wpk Gelu computes, for the fusions and kernels that run it:
// "Gelu" (approximate = "none", the default) or "GeluTanh" ("tanh"); "" for any other
// approximation, which is an error.
inline std::string gelu_activation_kind(const Node& gelu) {
  const std::string approximate = gelu.attr_string("approximate", "none");
  return approximate == "none" ? "Gelu" : (approximate == "tanh" ? "GeluTanh" : "");
}

}  // namespace wpk
