#pragma once
// ONNX Runtime's quantized contrib ops (domain com.microsoft), which its quantization tool writes
// in the QOperator format, rewritten before import into the standard ops they stand for: a
// DequantizeLinear for each 8-bit input, the float op, a QuantizeLinear of its result. The
// optimizer's fold_qdq then makes integer ops of them again where wpk has integer kernels.
//   QLinearAdd, QLinearMul                   -> Add, Mul
//   QLinearGlobalAveragePool, QLinearAveragePool -> GlobalAveragePool, AveragePool (channels_last kept)
//   QLinearConcat                            -> Concat
//   QLinearSigmoid, QLinearLeakyRelu         -> Sigmoid, LeakyRelu
//   QGemm                                    -> Gemm (its int32 C at a_scale * b_scale; a float
//                                               result when y_scale is omitted)
// Other com.microsoft ops are left for the dispatcher to report.
#include <cstdint>

#include <onnx/onnx_pb.h>

namespace wpk::onnx_import {

// Rewrites the main graph's contrib quantized nodes in place. `opset` is the model's default
// domain opset: per-column scales need 13 or later. Throws wpk::Error (Unsupported, InvalidModel)
// naming a node it cannot rewrite (an output zero point omitted, a malformed input list).
void expand_quantized_contrib_ops(onnx::ModelProto& model, std::int64_t opset);

}  // namespace wpk::onnx_import
