// Gemm, MatMul and FusedMatMul: cuBLAS's float32 GEMM (batched when both operands carry the same
// batch dims), then Gemm's beta * C, the fused bias and residual and the activation as one
// generated epilogue. When the session tunes, a generated product with the epilogue inside
// competes for MatMul and FusedMatMul (kernel_search.hpp).
#include "backends/cuda/device_op.hpp"
#include "backends/cuda/generated_kernels.hpp"
#include "backends/cuda/kernel_search.hpp"
#include "graph/fused_ops.hpp"

namespace wpk::cuda {
namespace {

class ProductOp : public DeviceOp {
 public:
  explicit ProductOp(const PrepareEnv& env) : out_shape_(env.out.shape) {
    const Node& n = env.node;
    const Shape& a = env.in[0].shape;
    const Shape& b = env.in[1].shape;
    const bool gemm = n.op_type == "Gemm";
    trans_a_ = gemm && n.attr_int("transA", 0) != 0;
    trans_b_ = gemm && n.attr_int("transB", 0) != 0;
    alpha_ = gemm ? n.attr_float("alpha", 1.0f) : 1.0f;
    m_ = trans_a_ ? a[1] : a[a.size() - 2];
    k_ = trans_a_ ? a[0] : a.back();
    n_ = trans_b_ ? b[0] : b.back();
    if (b.size() == 2) {
      // A's batch dims fold into its rows: one GEMM.
      for (std::size_t d = 0; d + 2 < a.size(); ++d) m_ *= a[d];
    } else {
      for (std::size_t d = 0; d + 2 < a.size(); ++d) batch_ *= a[d];
    }
    const bool has_bias = n.inputs.size() > 2 && n.inputs[2] != kNoValue;
    const bool fused = n.op_type == "FusedMatMul";
    const float beta = gemm ? n.attr_float("beta", 1.0f) : 1.0f;
    const Shape bias_shape = has_bias ? env.in[2].shape : Shape{};
    fused_residual_ = fused && has_fused_residual(n);
    activation_ = fused ? n.attr_string("activation", "") : "";
    params_ = n.attr_floats("activation_params");
    has_bias_ = has_bias;
    epilogue_ = make_epilogue(env.cubins, gemm ? "gemm_epilogue" : "matmul_epilogue", out_shape_, has_bias ? &bias_shape : nullptr,
                              fused && has_fused_residual(n), fused ? n.attr_string("activation", "") : "",
                              n.attr_floats("activation_params"), beta);
    // The generated product takes a bias along the last axis only.
    Shape bias_dims = bias_shape;
    while (!bias_dims.empty() && bias_dims.front() == 1 && bias_dims.size() > 1) bias_dims.erase(bias_dims.begin());
    const bool bias_on_columns = !has_bias || bias_dims == Shape{n_};
    if (!gemm && bias_on_columns && (env.search || env.records)) consider_generated(env, b.size() != 2);
  }

  void launch(const LaunchEnv& env, const std::vector<DeviceTensor>& in, const DeviceTensor& out) const override {
    if (generated_) {
      generated_->launch(env.handles.stream(), generated_args(in, out));
      return;
    }
    const CUdeviceptr target = epilogue_.kernel ? env.scratch : out.ptr;
    const float zero = 0.0f;
    // Row-major Y = op(A) op(B) is column-major Y^T = op(B)^T op(A)^T: cuBLAS computes that with
    // the operands swapped, reading each row-major matrix as its column-major transpose.
    const auto* A = reinterpret_cast<const float*>(in[0].ptr);
    const auto* B = reinterpret_cast<const float*>(in[1].ptr);
    auto* Y = reinterpret_cast<float*>(target);
    const cublasOperation_t op_b = trans_b_ ? CUBLAS_OP_T : CUBLAS_OP_N, op_a = trans_a_ ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int ldb = static_cast<int>(trans_b_ ? k_ : n_), lda = static_cast<int>(trans_a_ ? m_ : k_);
    const int M = static_cast<int>(m_), N = static_cast<int>(n_), K = static_cast<int>(k_);
    if (batch_ == 1)
      check(cublas().Sgemm(env.handles.blas(), op_b, op_a, N, M, K, &alpha_, B, ldb, A, lda, &zero, Y, N), "GEMM");
    else
      check(cublas().SgemmStridedBatched(env.handles.blas(), op_b, op_a, N, M, K, &alpha_, B, ldb, k_ * n_, A, lda, m_ * k_,
                                         &zero, Y, N, m_ * n_, static_cast<int>(batch_)),
            "batched GEMM");
    if (epilogue_.kernel)
      epilogue_.launch(env.handles.stream(), target, in.size() > 2 ? in[2].ptr : 0, in.size() > 3 ? in[3].ptr : 0, out.ptr);
  }

  std::string describe() const override {
    if (generated_) return "gen:" + generated_->symbol() + "(" + config_ + ")";
    return std::string(batch_ > 1 ? "cublas:sgemm_strided_batched" : "cublas:sgemm") +
           (epilogue_.kernel ? "+gen:" + epilogue_.kernel->symbol() : "");
  }
  std::size_t scratch_bytes() const override {
    return epilogue_.kernel && !generated_ ? static_cast<std::size_t>(shape_numel(out_shape_)) * sizeof(float) : 0;
  }

 private:
  std::vector<CUdeviceptr> generated_args(const std::vector<DeviceTensor>& in, const DeviceTensor& out) const {
    return kernel_args(in, out, has_bias_, fused_residual_);
  }

  // Tuning: cuBLAS with its epilogue against the generated product; without: what tuning recorded.
  void consider_generated(const PrepareEnv& env, bool b_batched) {
    const ProductGeometry g{batch_, m_, n_, k_, b_batched};
    std::string key = "matmul_" + std::to_string(g.batch) + "_" + std::to_string(g.m) + "_" + std::to_string(g.n) + "_" +
                      std::to_string(g.k) + (b_batched ? "_batched" : "") + (has_bias_ ? "b" : "") + (fused_residual_ ? "z" : "") +
                      activation_;
    for (float p : params_) key += "_" + std::to_string(p);
    GeneratedCandidates c;
    c.knobs = cuda_product_knobs();
    c.valid = [g](const search::Space& sp, const search::Point& p) { return cuda_product_config_valid(g, product_config_at(sp, p)); };
    c.predict = [g, gpu = gpu_spec_of(Device::get().info())](const search::Space& sp, const search::Point& p) {
      const CudaProductConfig cfg = product_config_at(sp, p);
      return search::predict_gpu_seconds(gpu, product_launch(g, cfg, estimated_product_registers(cfg)), product_loop(g, cfg));
    };
    c.print = [this, g](const search::Space& sp, const search::Point& p) {
      return product_kernel(g, product_config_at(sp, p), has_bias_, fused_residual_, activation_, params_);
    };
    c.args = generated_args(env.in, env.out);
    Choice choice;
    if (env.search) {
      DeviceBuffer scratch(scratch_bytes(), "measuring a product");
      const LaunchEnv measuring{env.handles, scratch.get(), 0, 0};
      choice = search_generated(env, key, "matmul", batch_ > 1 ? "cuBLAS batched" : "cuBLAS", c,
                                [&] { launch(measuring, env.in, env.out); });
    } else {
      choice = recorded_choice(env, key, c);
    }
    generated_ = choice.kernel, config_ = choice.config;
  }

  Shape out_shape_;
  bool trans_a_ = false, trans_b_ = false;
  float alpha_ = 1.0f;
  std::int64_t m_ = 0, n_ = 0, k_ = 0, batch_ = 1;
  Epilogue epilogue_;
  bool has_bias_ = false, fused_residual_ = false;
  std::string activation_;
  std::vector<float> params_;
  std::shared_ptr<const GeneratedKernel> generated_;
  std::string config_;
};

}  // namespace

std::unique_ptr<DeviceOp> prepare_product(const PrepareEnv& env) { return std::make_unique<ProductOp>(env); }

}  // namespace wpk::cuda
