// Gemm, MatMul and FusedMatMul: cuBLAS's float32 GEMM (batched when both operands carry the same
// batch dims), then Gemm's beta * C, the fused bias and residual and the activation as one
// generated epilogue; or, where the epilogue maps to cuBLASLt's, cuBLASLt's GEMM with it inside,
// when one of the algorithms its heuristic offers is measured faster at load (identical products
// of one process measured once). When the session tunes, a generated product with the epilogue
// inside competes for MatMul and FusedMatMul (kernel_search.hpp).

#include "backends/cuda/cublaslt_product.hpp"
#include "backends/cuda/device_op.hpp"
#include "backends/cuda/generated_kernels.hpp"
#include "backends/cuda/kernel_search.hpp"
#include "graph/fused_ops.hpp"
#include "runtime/logging.hpp"

namespace wpk::cuda {
namespace {

// cuBLASLt's workspace for one product, at most, and how many of its heuristic's algorithms are
// measured against cuBLAS's GEMM with the generated epilogue.
constexpr std::size_t kMaxLtWorkspace = std::size_t(32) << 20;
constexpr int kLtAlgorithms = 4;

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
    ProductEpilogue e;
    e.bias = !has_bias ? ProductEpilogue::Bias::None
             : bias_on_columns ? ProductEpilogue::Bias::Columns
             : gemm && bias_shape == Shape{m_, n_} ? ProductEpilogue::Bias::Matrix
                                                 : ProductEpilogue::Bias::Other;
    e.bias_scale = beta;
    e.residual = fused_residual_;
    e.activation = activation_;
    if (fused_residual_ && env.in[3].shape != out_shape_) e.bias = ProductEpilogue::Bias::Other;
    if (const auto lt = lt_epilogue(e); lt && env.allows(kCublasLtVariant)) consider_lt(env, *lt);
    if (!gemm && bias_on_columns && (env.search || env.records)) consider_generated(env, b.size() != 2);
  }

  void launch(const LaunchEnv& env, const std::vector<DeviceTensor>& in, const DeviceTensor& out) const override {
    if (generated_) {
      generated_->launch(env.handles.stream(), generated_args(in, out));
      return;
    }
    if (lt_algo_) {
      launch_lt(env.handles, *lt_algo_, in, out, env.workspace);
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
    if (lt_algo_) return lt_kernel_name(lt_->epilogue(), batch_ > 1) + "(heuristic " + std::to_string(lt_rank_) + ")";
    return std::string(batch_ > 1 ? "cublas:sgemm_strided_batched" : "cublas:sgemm") +
           (epilogue_.kernel ? "+gen:" + epilogue_.kernel->symbol() : "");
  }
  std::size_t scratch_bytes() const override {
    return epilogue_.kernel && !generated_ && !lt_algo_ ? static_cast<std::size_t>(shape_numel(out_shape_)) * sizeof(float) : 0;
  }
  std::size_t workspace_bytes() const override { return lt_algo_ && !generated_ ? lt_workspace_ : 0; }

 private:
  std::vector<CUdeviceptr> generated_args(const std::vector<DeviceTensor>& in, const DeviceTensor& out) const {
    return kernel_args(in, out, has_bias_, fused_residual_);
  }

  void launch_lt(const StreamHandles& h, const cublasLtMatmulAlgo_t& algo, const std::vector<DeviceTensor>& in,
                 const DeviceTensor& out, CUdeviceptr workspace) const {
    const LtEpilogue& e = lt_->epilogue();
    const CUdeviceptr bias = e.bias ? in[2].ptr : 0;
    const CUdeviceptr c = !e.c_matrix ? 0 : fused_residual_ ? in[3].ptr : in[2].ptr;
    lt_->launch(h.lt(), h.stream(), algo, in[0].ptr, in[1].ptr, bias, c, out.ptr, workspace, lt_workspace_);
  }

  std::string lt_signature(const LtEpilogue& e) const {
    return std::to_string(batch_) + "x" + std::to_string(m_) + "x" + std::to_string(n_) + "x" + std::to_string(k_) +
           (trans_a_ ? "ta" : "") + (trans_b_ ? "tb" : "") + lt_kernel_name(e, batch_ > 1) + "_" + std::to_string(alpha_) +
           "_" + std::to_string(e.beta);
  }

  // cuBLASLt's offered algorithms, each timed on the region's buffers against cuBLAS's GEMM with
  // the generated epilogue; the fastest that reproduces cuBLAS's output runs. The answer is kept
  // per signature and operand alignment: the heuristic's list depends on both.
  void consider_lt(const PrepareEnv& env, const LtEpilogue& e) {
    const LtProductShape shape{batch_, m_, n_, k_, trans_a_, trans_b_, alpha_};
    LtOperands operands{env.in[0].ptr, env.in[1].ptr, e.bias ? env.in[2].ptr : 0, 0, env.out.ptr};
    if (e.c_matrix) operands.c = fused_residual_ ? env.in[3].ptr : env.in[2].ptr;
    std::string key = "lt_" + lt_signature(e) + "_aligned";
    for (CUdeviceptr p : {operands.a, operands.b, operands.bias, operands.c, operands.y}) key += "_" + std::to_string(lt_alignment(p));
    if (known_alternative(key) == -1) return;
    try {
      auto product = std::make_unique<LtProduct>(shape, e);
      const auto algos = product->algorithms(env.handles.lt(), kLtAlgorithms, kMaxLtWorkspace, operands);
      if (algos.empty()) {
        remember_alternative(key, -1);
        return;
      }
      lt_ = std::move(product);
      std::size_t most = 0;
      for (const auto& a : algos) most = std::max(most, a.workspaceSize);
      DeviceBuffer scratch(scratch_bytes(), "measuring a product"), workspace(most, "measuring a product");
      const LaunchEnv measuring{env.handles, scratch.get(), 0, 0};
      std::vector<Alternative> alternatives;
      for (std::size_t i = 0; i < algos.size(); ++i)
        alternatives.push_back({"cuBLASLt algorithm " + std::to_string(i), [&, i] {
                                  lt_workspace_ = algos[i].workspaceSize;
                                  launch_lt(env.handles, algos[i].algo, env.in, env.out, workspace.get());
                                }});
      const int winner = fastest_alternative(env, key, "product", [&] { launch(measuring, env.in, env.out); }, alternatives);
      lt_workspace_ = 0;
      if (winner >= 0 && static_cast<std::size_t>(winner) < algos.size()) take_lt(algos, winner);
      else lt_.reset();
    } catch (const Error& err) {
      // A variant cuBLASLt refuses, or no memory to measure it in, is one candidate fewer, not a
      // session that fails to load.
      logger().debug("cuda product {}: cuBLASLt: {}", env.node.name, err.what());
      lt_.reset();
      lt_algo_.reset();
      lt_workspace_ = 0;
    }
  }

  void take_lt(const std::vector<cublasLtMatmulHeuristicResult_t>& algos, int rank) {
    lt_algo_ = algos[static_cast<std::size_t>(rank)].algo;
    lt_workspace_ = algos[static_cast<std::size_t>(rank)].workspaceSize;
    lt_rank_ = rank;
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
      DeviceBuffer scratch(scratch_bytes(), "measuring a product"), workspace(workspace_bytes(), "measuring a product");
      const LaunchEnv measuring{env.handles, scratch.get(), workspace.get(), 0};
      choice = search_generated(env, key, "matmul", describe(), c,
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
  std::unique_ptr<LtProduct> lt_;
  std::optional<cublasLtMatmulAlgo_t> lt_algo_;  // set: cuBLASLt runs instead of cuBLAS + epilogue
  std::size_t lt_workspace_ = 0;
  int lt_rank_ = -1;
};

}  // namespace

std::unique_ptr<DeviceOp> prepare_product(const PrepareEnv& env) { return std::make_unique<ProductOp>(env); }

}  // namespace wpk::cuda
