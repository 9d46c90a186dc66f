// cuBLASLt's products with their epilogues inside: which epilogues map (host only), the
// descriptors (host only, where the toolkit's library is installed), and on a GPU every algorithm
// cuBLASLt's heuristic offers against a direct computation in double precision.
#include <catch2/catch.hpp>

#ifdef WPK_WITH_CUDA
#include <algorithm>
#include <vector>

#include "backends/cuda/cublaslt_product.hpp"
#include "backends/cuda/device.hpp"
#include "device_operands.hpp"
#include "support/tensor_compare.hpp"
#include "wpk/tensor.hpp"

namespace wpk::cuda {
namespace {

using Bias = ProductEpilogue::Bias;

ProductEpilogue epilogue(Bias bias, float scale, bool residual, const std::string& activation) {
  ProductEpilogue e;
  e.bias = bias, e.bias_scale = scale, e.residual = residual, e.activation = activation;
  return e;
}

TEST_CASE("a product's epilogue maps to cuBLASLt's only where cuBLASLt computes it exactly", "[cuda]") {
  auto bias_relu = lt_epilogue(epilogue(Bias::Columns, 1.0f, false, "Relu"));
  REQUIRE(bias_relu);
  CHECK(bias_relu->mode == CUBLASLT_EPILOGUE_RELU_BIAS);
  CHECK(bias_relu->bias);
  CHECK_FALSE(bias_relu->c_matrix);

  // BERT's output projections: bias and residual, no activation.
  auto residual = lt_epilogue(epilogue(Bias::Columns, 1.0f, true, ""));
  REQUIRE(residual);
  CHECK(residual->mode == CUBLASLT_EPILOGUE_BIAS);
  CHECK(residual->c_matrix);
  CHECK(residual->beta == 1.0f);

  // A Gemm's full C matrix with its beta.
  auto gemm_c = lt_epilogue(epilogue(Bias::Matrix, 2.5f, false, ""));
  REQUIRE(gemm_c);
  CHECK(gemm_c->mode == CUBLASLT_EPILOGUE_DEFAULT);
  CHECK_FALSE(gemm_c->bias);
  CHECK(gemm_c->c_matrix);
  CHECK(gemm_c->beta == 2.5f);

  auto plain = lt_epilogue(epilogue(Bias::None, 1.0f, false, ""));
  REQUIRE(plain);
  CHECK(plain->mode == CUBLASLT_EPILOGUE_DEFAULT);
  CHECK_FALSE(plain->c_matrix);
  CHECK(lt_kernel_name(*bias_relu, false) == "cublaslt:gemm_relu_bias");
  CHECK(lt_kernel_name(*residual, true) == "cublaslt:gemm_strided_batched_c_bias");

  // cuBLASLt's GELU is the tanh approximation, not ONNX's erf form; its bias is not scaled; it
  // reads one C matrix; a bias broadcast along rows is not its bias vector.
  CHECK_FALSE(lt_epilogue(epilogue(Bias::Columns, 1.0f, false, "Gelu")));
  CHECK_FALSE(lt_epilogue(epilogue(Bias::None, 1.0f, false, "Sigmoid")));
  CHECK_FALSE(lt_epilogue(epilogue(Bias::Columns, 0.5f, false, "")));
  CHECK_FALSE(lt_epilogue(epilogue(Bias::Matrix, 1.0f, true, "")));
  CHECK_FALSE(lt_epilogue(epilogue(Bias::Other, 1.0f, false, "")));
}

TEST_CASE("an operand's alignment for cuBLASLt is the largest power of two up to 256 dividing its address", "[cuda]") {
  CHECK(lt_alignment(0) == 256);  // absent
  CHECK(lt_alignment(0x7f0000000000) == 256);
  CHECK(lt_alignment(0x7f0000000040) == 64);
  CHECK(lt_alignment(0x7f0000000044) == 4);
  CHECK(lt_alignment(0x7f0000000102) == 2);
}

TEST_CASE("cuBLASLt's descriptors for products of every form build without a device", "[cuda]") {
  try {
    cublaslt();
  } catch (const Error& e) {
    WARN("cuBLASLt is not installed here: " << e.what());
    return;
  }
  for (bool batched : {false, true})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const LtProductShape s{batched ? 3 : 1, 17, 33, 20, ta, tb, 0.5f};
        const LtEpilogue e = *lt_epilogue(epilogue(Bias::Columns, 1.0f, true, "Relu"));
        INFO("batched " << batched << " transA " << ta << " transB " << tb);
        CHECK_NOTHROW(LtProduct(s, e));
      }
}

struct Case {
  LtProductShape shape;
  ProductEpilogue epilogue;
};

Tensor filled(const Shape& shape, int seed) {
  Tensor t = Tensor::zeros(DType::Float32, shape);
  float* p = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(((i * 37 + seed * 11) % 23) - 11) / 16.0f;
  return t;
}

// act(alpha op(A) op(B) + bias + beta C) in double precision.
Tensor direct(const Case& c, const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& cm) {
  const auto& s = c.shape;
  const LtEpilogue e = *lt_epilogue(c.epilogue);
  Tensor y = Tensor::zeros(DType::Float32, {s.batch, s.m, s.n});
  const float *A = a.data<float>(), *B = b.data<float>();
  for (std::int64_t q = 0; q < s.batch; ++q)
    for (std::int64_t i = 0; i < s.m; ++i)
      for (std::int64_t j = 0; j < s.n; ++j) {
        double sum = 0;
        for (std::int64_t p = 0; p < s.k; ++p) {
          const double av = s.trans_a ? A[q * s.m * s.k + p * s.m + i] : A[q * s.m * s.k + i * s.k + p];
          const double bv = s.trans_b ? B[q * s.k * s.n + j * s.k + p] : B[q * s.k * s.n + p * s.n + j];
          sum += av * bv;
        }
        double v = s.alpha * sum;
        if (e.bias) v += bias.data<float>()[j];
        if (e.c_matrix) v += e.beta * cm.data<float>()[(q * s.m + i) * s.n + j];
        if (c.epilogue.activation == "Relu") v = std::max(v, 0.0);
        y.data<float>()[(q * s.m + i) * s.n + j] = static_cast<float>(v);
      }
  return y;
}

TEST_CASE("cuBLASLt's products with their epilogues match a direct computation, every algorithm offered", "[cuda]") {
  if (const std::string why = why_no_cuda_device(); !why.empty()) {
    WARN("no GPU here, cuBLASLt is not run: " << why);
    return;
  }
  const std::vector<Case> cases = {
      {{1, 37, 50, 29, false, false, 1.0f}, epilogue(Bias::Columns, 1.0f, false, "")},
      {{1, 64, 96, 128, false, true, 0.5f}, epilogue(Bias::Matrix, 2.0f, false, "")},
      {{3, 17, 33, 20, false, false, 1.0f}, epilogue(Bias::Columns, 1.0f, true, "Relu")},
      {{1, 40, 24, 30, true, false, 1.0f}, epilogue(Bias::None, 1.0f, false, "Relu")},
      {{2, 8, 16, 12, true, true, 1.0f}, epilogue(Bias::None, 1.0f, false, "")},
      {{1, 128, 768, 768, false, false, 1.0f}, epilogue(Bias::Columns, 1.0f, true, "")},
  };
  StreamHandles h;
  for (const Case& c : cases) {
    const auto& s = c.shape;
    INFO("batch " << s.batch << " m " << s.m << " n " << s.n << " k " << s.k << " transA " << s.trans_a << " transB "
                  << s.trans_b << " epilogue " << lt_kernel_name(*lt_epilogue(c.epilogue), s.batch > 1));
    const Tensor a = filled({s.batch, s.m, s.k}, 1), b = filled({s.batch, s.k, s.n}, 2), bias = filled({s.n}, 3),
                 cm = filled({s.batch, s.m, s.n}, 4);
    const Tensor want = direct(c, a, b, bias, cm);
    std::vector<DeviceBuffer> keep;
    const CUdeviceptr da = upload_operand(a, keep), db = upload_operand(b, keep);
    const CUdeviceptr dbias = upload_operand(bias, keep), dc = upload_operand(cm, keep);
    DeviceBuffer y(want.nbytes(), "a test output"), workspace(std::size_t(32) << 20, "a test workspace");
    const LtEpilogue e = *lt_epilogue(c.epilogue);
    LtProduct product(s, e);
    const auto algos = product.algorithms(h.lt(), 8, workspace.bytes(), LtOperands{da, db, dbias, dc, y.get()});
    REQUIRE_FALSE(algos.empty());
    for (std::size_t i = 0; i < algos.size(); ++i) {
      INFO("algorithm " << i << " of " << algos.size());
      check(driver().MemsetD32Async(y.get(), 0x7fc00000u, static_cast<std::size_t>(want.numel()), h.stream()), "poisoning");
      product.launch(h.lt(), h.stream(), algos[i].algo, da, db, dbias, dc, y.get(), workspace.get(), workspace.bytes());
      h.synchronize("a cuBLASLt product");
      const Tensor got = download_result(y.get(), want.shape());
      CHECK(testing::relative_l2_error(got, want) <= 1e-5);
    }
  }
}

}  // namespace
}  // namespace wpk::cuda
#endif
