#pragma once
// cuBLASLt's GEMM with a product's epilogue inside: bias, residual (or Gemm's C) and ReLU applied
// as the result is written, where cuBLAS's GEMM writes the plain product and a generated kernel
// reads it back to apply them. The mapping from an op's epilogue to cuBLASLt's is a host function
// (tested without a device); the descriptors are host objects; only the heuristic's query and
// the launch need a GPU.
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/cuda_api.hpp"

namespace wpk::cuda {

// Row-major Y = alpha op(A) op(B), `batch` times with both operands strided when batch > 1.
struct LtProductShape {
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f;
};

// An op's epilogue, act(product + bias_scale * bias + residual), as the op states it.
struct ProductEpilogue {
  enum class Bias { None, Columns, Matrix, Other };  // Columns: n values for every row; Matrix: m x n
  Bias bias = Bias::None;
  float bias_scale = 1.0f;
  bool residual = false;  // of the output's shape
  std::string activation;  // "" or the fused activation's op type
};

// The same epilogue in cuBLASLt's terms: D = mode(alpha A B + beta C), with a bias vector
// (input 2) when `bias`, and C (the residual, or a Gemm's C matrix) when `c_matrix`.
struct LtEpilogue {
  cublasLtEpilogue_t mode = CUBLASLT_EPILOGUE_DEFAULT;
  bool bias = false;
  bool c_matrix = false;
  float beta = 0.0f;
};

// cuBLASLt's form of `e`, or none when some of it has no cuBLASLt equivalent (an activation other
// than ReLU: its GELU is the tanh approximation, not ONNX's; a scaled bias vector; both a C matrix
// and a residual).
std::optional<LtEpilogue> lt_epilogue(const ProductEpilogue& e);

// A product's operand addresses. cuBLASLt's heuristic offers only algorithms valid for their
// alignment, so an algorithm chosen for one product holds for another only if their operands
// align alike.
struct LtOperands {
  CUdeviceptr a = 0, b = 0, bias = 0, c = 0, y = 0;  // 0: not given
};
// The largest power of two up to 256 dividing `address` (256 for 0: an absent operand constrains
// nothing).
std::uint32_t lt_alignment(CUdeviceptr address);

// cuBLASLt's descriptors for one product: float32 data and float32 arithmetic (no TF32).
class LtProduct {
 public:
  LtProduct(const LtProductShape& shape, const LtEpilogue& epilogue);
  ~LtProduct();
  LtProduct(const LtProduct&) = delete;
  LtProduct& operator=(const LtProduct&) = delete;

  // Up to `count` algorithms cuBLASLt's heuristic offers for this product on this device, its best
  // first, each needing at most `workspace` bytes and valid for the operands' alignment.
  std::vector<cublasLtMatmulHeuristicResult_t> algorithms(cublasLtHandle_t h, int count, std::size_t workspace,
                                                          const LtOperands& operands) const;
  // Enqueues Y (and the epilogue) on `stream`; c is read only when the epilogue has a C matrix.
  void launch(cublasLtHandle_t h, CUstream stream, const cublasLtMatmulAlgo_t& algo, CUdeviceptr a, CUdeviceptr b,
              CUdeviceptr bias, CUdeviceptr c, CUdeviceptr y, CUdeviceptr workspace, std::size_t workspace_bytes) const;
  const LtEpilogue& epilogue() const { return epilogue_; }

 private:
  void set_bias(CUdeviceptr bias) const;
  void release();

  LtProductShape shape_;
  LtEpilogue epilogue_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  // cuBLASLt's operands: ours swapped (row-major Y is column-major Y^T = op(B)^T op(A)^T).
  cublasLtMatrixLayout_t lt_a_ = nullptr, lt_b_ = nullptr, lt_d_ = nullptr;
  // The bias's address is an attribute of the descriptor: set and used under one lock.
  mutable std::mutex mutex_;
};

// A name for profiles: "cublaslt:gemm_relu_bias".
std::string lt_kernel_name(const LtEpilogue& e, bool batched);

}  // namespace wpk::cuda
