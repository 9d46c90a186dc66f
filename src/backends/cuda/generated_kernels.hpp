#pragma once
// The CUDA backend's generated kernels, written in the kernel DSL (src/codegen) and printed for
// CUDA: element-wise chains with numpy broadcasting (the ONNX element-wise ops, and the bias,
// residual and activation epilogues of convolutions and products). Needs no device: the tests
// emulate and NVRTC-compile what these print.
#include <functional>
#include <string>
#include <vector>

#include "codegen/cuda_printer.hpp"
#include "codegen/tensor_expr.hpp"
#include "wpk/tensor.hpp"

namespace wpk::cuda {

// The value at one output point, from the operands' values there (broadcast as numpy does).
using ElementwiseBody = std::function<codegen::Expr(const std::vector<codegen::Expr>& operands)>;

// out = body(operands...), each operand's shape right-aligned to `out` and broadcast along its
// size-1 dimensions. Dimensions every operand treats alike are merged first, so the kernel walks
// as few and as long rows as the broadcast allows; its threads take a row's consecutive elements.
codegen::PrintedCudaKernel elementwise_kernel(const std::string& name, const Shape& out, const std::vector<Shape>& operands,
                                              const ElementwiseBody& body);

// FusedConv's and FusedMatMul's `activation` (graph/fused_ops.hpp) applied to x; x itself for "".
// Throws Error(Unsupported) for one the DSL cannot express (the erf form of Gelu).
codegen::Expr activation_expr(const std::string& activation, const std::vector<float>& params, codegen::Expr x);
bool activation_expressible(const std::string& activation);

}  // namespace wpk::cuda
