#include "backends/cuda/cublaslt_product.hpp"

#include <utility>

namespace wpk::cuda {

std::optional<LtEpilogue> lt_epilogue(const ProductEpilogue& e) {
  using Bias = ProductEpilogue::Bias;
  if (!e.activation.empty() && e.activation != "Relu") return std::nullopt;
  if (e.bias == Bias::Other) return std::nullopt;
  if (e.bias == Bias::Columns && e.bias_scale != 1.0f) return std::nullopt;  // cuBLASLt's bias is not scaled
  if (e.bias == Bias::Matrix && e.residual) return std::nullopt;             // one C matrix only
  LtEpilogue lt;
  lt.bias = e.bias == Bias::Columns;
  lt.c_matrix = e.bias == Bias::Matrix || e.residual;
  lt.beta = e.bias == Bias::Matrix ? e.bias_scale : e.residual ? 1.0f : 0.0f;
  const bool relu = e.activation == "Relu";
  lt.mode = lt.bias ? (relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
                    : (relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT);
  return lt;
}

std::uint32_t lt_alignment(CUdeviceptr address) {
  std::uint32_t a = 256;
  while (address % a != 0) a /= 2;
  return a;
}

std::string lt_kernel_name(const LtEpilogue& e, bool batched) {
  std::string name = std::string("cublaslt:gemm") + (batched ? "_strided_batched" : "");
  if (e.c_matrix) name += "_c";
  if (e.mode == CUBLASLT_EPILOGUE_RELU || e.mode == CUBLASLT_EPILOGUE_RELU_BIAS) name += "_relu";
  if (e.bias) name += "_bias";
  return name;
}

namespace {

template <typename T>
void set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const T& v, const char* what) {
  check(cublaslt().MatmulDescSetAttribute(d, a, &v, sizeof(v)), what);
}

template <typename T>
void set(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t a, const T& v, const char* what) {
  check(cublaslt().MatrixLayoutSetAttribute(l, a, &v, sizeof(v)), what);
}

// A column-major rows x cols matrix with leading dimension ld, `batch` of them `stride` apart.
cublasLtMatrixLayout_t make_layout(std::int64_t rows, std::int64_t cols, std::int64_t ld, std::int64_t batch, std::int64_t stride) {
  cublasLtMatrixLayout_t l = nullptr;
  check(cublaslt().MatrixLayoutCreate(&l, CUDA_R_32F, static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(cols), ld),
        "a cuBLASLt matrix layout");
  if (batch > 1) {
    try {
      set(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, static_cast<std::int32_t>(batch), "a cuBLASLt batch count");
      set(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, stride, "a cuBLASLt batch stride");
    } catch (...) {
      cublaslt().MatrixLayoutDestroy(l);
      throw;
    }
  }
  return l;
}

}  // namespace

LtProduct::LtProduct(const LtProductShape& s, const LtEpilogue& e) : shape_(s), epilogue_(e) {
  const CublasLtApi& lt = cublaslt();
  check(lt.MatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "a cuBLASLt product descriptor");
  try {
    // cuBLASLt's A is our B and its B our A; a transposed row-major operand is a plain
    // column-major one.
    const cublasOperation_t op_a = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    set(desc_, CUBLASLT_MATMUL_DESC_TRANSA, op_a, "cuBLASLt's transA");
    set(desc_, CUBLASLT_MATMUL_DESC_TRANSB, op_b, "cuBLASLt's transB");
    set(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, e.mode, "cuBLASLt's epilogue");
    lt_a_ = s.trans_b ? make_layout(s.k, s.n, s.k, s.batch, s.k * s.n) : make_layout(s.n, s.k, s.n, s.batch, s.k * s.n);
    lt_b_ = s.trans_a ? make_layout(s.m, s.k, s.m, s.batch, s.m * s.k) : make_layout(s.k, s.m, s.k, s.batch, s.m * s.k);
    lt_d_ = make_layout(s.n, s.m, s.n, s.batch, s.m * s.n);
  } catch (...) {
    release();
    throw;
  }
}

LtProduct::~LtProduct() { release(); }

void LtProduct::release() {
  if (lt_d_) cublaslt().MatrixLayoutDestroy(lt_d_);
  if (lt_b_) cublaslt().MatrixLayoutDestroy(lt_b_);
  if (lt_a_) cublaslt().MatrixLayoutDestroy(lt_a_);
  if (desc_) cublaslt().MatmulDescDestroy(desc_);
  lt_d_ = lt_b_ = lt_a_ = nullptr;
  desc_ = nullptr;
}

void LtProduct::set_bias(CUdeviceptr bias) const {
  if (!epilogue_.bias) return;
  const void* p = reinterpret_cast<const void*>(bias);
  set(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, p, "cuBLASLt's bias");
}

std::vector<cublasLtMatmulHeuristicResult_t> LtProduct::algorithms(cublasLtHandle_t h, int count, std::size_t workspace,
                                                                   const LtOperands& operands) const {
  const CublasLtApi& lt = cublaslt();
  cublasLtMatmulPreference_t pref = nullptr;
  check(lt.MatmulPreferenceCreate(&pref), "a cuBLASLt preference");
  std::vector<cublasLtMatmulHeuristicResult_t> found(static_cast<std::size_t>(count));
  int returned = 0;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    set_bias(operands.bias);
    const std::uint64_t limit = workspace;
    status = lt.MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &limit, sizeof(limit));
    // cuBLASLt's A is our B, its B our A; C is Y's place when the epilogue reads no C.
    const std::pair<cublasLtMatmulPreferenceAttributes_t, CUdeviceptr> aligned[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, operands.b},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, operands.a},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, epilogue_.c_matrix ? operands.c : operands.y},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, operands.y}};
    for (const auto& [attribute, address] : aligned) {
      if (status != CUBLAS_STATUS_SUCCESS) break;
      const std::uint32_t bytes = lt_alignment(address);
      status = lt.MatmulPreferenceSetAttribute(pref, attribute, &bytes, sizeof(bytes));
    }
    if (status == CUBLAS_STATUS_SUCCESS)
      status = lt.MatmulAlgoGetHeuristic(h, desc_, lt_a_, lt_b_, lt_d_, lt_d_, pref, count, found.data(), &returned);
  }
  lt.MatmulPreferenceDestroy(pref);
  // No algorithm for this product is an answer, not an error: cuBLAS's GEMM stays.
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) return {};
  check(status, "cuBLASLt's algorithm heuristic");
  found.resize(static_cast<std::size_t>(returned));
  std::vector<cublasLtMatmulHeuristicResult_t> usable;
  for (const auto& r : found)
    if (r.state == CUBLAS_STATUS_SUCCESS && r.workspaceSize <= workspace) usable.push_back(r);
  return usable;
}

void LtProduct::launch(cublasLtHandle_t h, CUstream stream, const cublasLtMatmulAlgo_t& algo, CUdeviceptr a, CUdeviceptr b,
                       CUdeviceptr bias, CUdeviceptr c, CUdeviceptr y, CUdeviceptr workspace, std::size_t workspace_bytes) const {
  const float alpha = shape_.alpha, beta = epilogue_.c_matrix ? epilogue_.beta : 0.0f;
  // With no C matrix, beta is 0 and cuBLASLt reads nothing from C: it is given Y's place.
  const void* c_ptr = reinterpret_cast<const void*>(epilogue_.c_matrix ? c : y);
  const std::lock_guard<std::mutex> lock(mutex_);
  set_bias(bias);
  check(cublaslt().Matmul(h, desc_, &alpha, reinterpret_cast<const void*>(b), lt_a_, reinterpret_cast<const void*>(a), lt_b_,
                          &beta, c_ptr, lt_d_, reinterpret_cast<void*>(y), lt_d_, &algo, reinterpret_cast<void*>(workspace),
                          workspace_bytes, stream),
        "cuBLASLt's product");
}

}  // namespace wpk::cuda
