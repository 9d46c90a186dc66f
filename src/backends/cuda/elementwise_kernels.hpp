#pragma once
// The CUDA backend's element-wise kernels, written in the kernel DSL (src/codegen) and printed for
// CUDA: the ONNX element-wise ops with numpy broadcasting, the bias, residual and activation
// epilogues of convolutions and products, and groups of element-wise nodes as one kernel. Needs
// no device: the tests emulate and NVRTC-compile what these print.
#include <functional>
#include <string>
#include <vector>

#include "codegen/cuda_printer.hpp"
#include "codegen/tensor_expr.hpp"
#include "wpk/graph.hpp"
#include "wpk/tensor.hpp"

namespace wpk::cuda {

// The value at one output point, from the operands' values there (broadcast as numpy does).
using ElementwiseBody = std::function<codegen::Expr(const std::vector<codegen::Expr>& operands)>;

// out = body(operands...), each operand's shape right-aligned to `out` and broadcast along its
// size-1 dimensions. Dimensions every operand treats alike are merged first, so the kernel walks
// as few and as long rows as the broadcast allows; its threads take a row's consecutive elements.
codegen::PrintedCudaKernel elementwise_kernel(const std::string& name, const Shape& out, const std::vector<Shape>& operands,
                                              const ElementwiseBody& body);

// An element-wise ONNX node (support.hpp's is_elementwise_op) as an expression of the values of
// the inputs it reads, which elementwise_operands lists (Clip's bounds are constants inside it).
codegen::Expr elementwise_expr(const Node& n, const Graph& g, const std::vector<codegen::Expr>& operands);
std::vector<std::size_t> elementwise_operands(const Node& n);
// An op's name as its kernel's takes it ("Relu" -> "relu").
std::string elementwise_kernel_name(const std::string& op);

// Element-wise chains and trees as one kernel: an element-wise node whose output only one other
// element-wise node of the same output shape reads (and the region does not return) is computed
// inside that reader's kernel, its value kept in registers instead of a round trip through device
// memory. For each node of the body, the node whose kernel computes it (itself when none other).
std::vector<std::size_t> elementwise_group_roots(const Graph& body);
struct ElementwiseGroup {
  codegen::PrintedCudaKernel printed;
  std::vector<ValueId> inputs;  // the kernel's buffers before its output, each read from outside
};
// The kernel of the group whose root (a node that is its own root) is `root`.
ElementwiseGroup elementwise_group_kernel(const Graph& body, const std::vector<std::size_t>& roots, std::size_t root);

}  // namespace wpk::cuda
