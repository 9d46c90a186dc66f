// A convolution with its epilogue as one cuDNN operation graph: which activations have a cuDNN
// pointwise form (host only), and on a GPU the graph built for several forms and every float32
// engine cuDNN offers for it against a direct computation in double precision.
#include <catch2/catch.hpp>

#ifdef WPK_WITH_CUDA
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cuda/cudnn_fused_conv.hpp"
#include "backends/cuda/device.hpp"
#include "device_operands.hpp"
#include "support/tensor_compare.hpp"
#include "wpk/tensor.hpp"

namespace wpk::cuda {
namespace {

TEST_CASE("a fused convolution's activation maps to cuDNN's pointwise modes as ONNX defines it", "[cuda]") {
  REQUIRE(cudnn_activation("Relu", {}));
  CHECK(cudnn_activation("Relu", {})->mode == CUDNN_POINTWISE_RELU_FWD);
  CHECK_FALSE(cudnn_activation("Relu", {})->lower_clip);
  const auto clip = cudnn_activation("Clip", {0.0f, 6.0f});
  REQUIRE(clip);
  CHECK(clip->mode == CUDNN_POINTWISE_RELU_FWD);
  CHECK(clip->lower_clip == 0.0);
  CHECK(clip->upper_clip == 6.0);
  CHECK(cudnn_activation("SiLU", {})->mode == CUDNN_POINTWISE_SWISH_FWD);
  CHECK(cudnn_activation("Sigmoid", {})->mode == CUDNN_POINTWISE_SIGMOID_FWD);
  CHECK(cudnn_activation("Gelu", {})->mode == CUDNN_POINTWISE_GELU_FWD);
  CHECK_FALSE(cudnn_activation("Clip", {}));  // bounds unknown
  CHECK_FALSE(cudnn_activation("GeluTanh", {}));
  CHECK_FALSE(cudnn_activation("HardSwish", {}));
  CHECK_FALSE(cudnn_activation("LeakyRelu", {0.1f}));
}

// A convolution and its epilogue, read as one in the tests.
struct Form : ConvGeometry, ConvEpilogue {};

// The forms the GPU test runs: grouped and strided, with and without bias, residual, activation.
std::vector<Form> fused_conv_forms() {
  return {
      {{{2, 8, 9, 9}, {16, 8, 3, 3}, {2, 16, 9, 9}, 1, {1, 1}, {1, 1}, {1, 1}}, {true, true, "Relu", {}}},
      {{{1, 16, 14, 14}, {16, 1, 3, 3}, {1, 16, 7, 7}, 16, {1, 1}, {2, 2}, {1, 1}}, {true, false, "Clip", {0.0f, 6.0f}}},
      {{{2, 4, 7, 7}, {8, 4, 1, 1}, {2, 8, 7, 7}, 1, {0, 0}, {1, 1}, {1, 1}}, {true, false, "SiLU", {}}},
      {{{1, 3, 10, 10}, {4, 3, 3, 3}, {1, 4, 8, 8}, 1, {0, 0}, {1, 1}, {1, 1}}, {false, false, "Sigmoid", {}}},
      {{{1, 32, 28, 28}, {64, 32, 1, 1}, {1, 64, 28, 28}, 1, {0, 0}, {1, 1}, {1, 1}}, {true, true, "", {}}},
  };
}

TEST_CASE("a fused convolution's cuDNN operations build and finalize without a device", "[cuda]") {
  // Tensors, the convolution, its operation and the pointwise ones are host objects: every
  // attribute's type and value is checked by cuDNN here, on machines with no GPU. Only the
  // operation graph's engines need one.
  try {
    cudnn();
  } catch (const Error& e) {
    WARN("cuDNN is not installed here: " << e.what());
    return;
  }
  for (const Form& g : fused_conv_forms()) {
    INFO("w " << g.w[0] << "x" << g.w[1] << "x" << g.w[2] << " bias " << g.bias << " residual " << g.residual << " activation "
              << g.activation);
    CHECK_NOTHROW(CudnnFusedConv(nullptr, g, g));
  }
  // An activation cuDNN has no pointwise form of is refused before anything is built.
  Form hard_swish = fused_conv_forms().front();
  hard_swish.activation = "HardSwish";
  CHECK_THROWS_WITH(CudnnFusedConv(nullptr, hard_swish, hard_swish), Catch::Contains("no pointwise form of HardSwish"));
}

Tensor filled(const Shape& shape, int seed) {
  Tensor t = Tensor::zeros(DType::Float32, shape);
  float* p = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(((i * 29 + seed * 13) % 19) - 9) / 12.0f;
  return t;
}

double activate(const Form& g, double v) {
  if (g.activation == "Relu") return std::max(v, 0.0);
  if (g.activation == "Clip") return std::min(std::max(v, static_cast<double>(g.params[0])), static_cast<double>(g.params[1]));
  if (g.activation == "Sigmoid") return 1.0 / (1.0 + std::exp(-v));
  if (g.activation == "SiLU") return v / (1.0 + std::exp(-v));
  return v;
}

// act(conv(x, w) + bias + z) in double precision, NCHW with groups.
Tensor direct(const Form& g, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& z) {
  Tensor y = Tensor::zeros(DType::Float32, g.y);
  const std::int64_t n = g.x[0], c = g.x[1], h = g.x[2], wd = g.x[3], k = g.w[0], cg = g.w[1], r = g.w[2], s = g.w[3];
  const std::int64_t oh = g.y[2], ow = g.y[3], groups = c / cg, kg = k / groups;
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t o = 0; o < k; ++o)
      for (std::int64_t i = 0; i < oh; ++i)
        for (std::int64_t j = 0; j < ow; ++j) {
          double sum = 0;
          const std::int64_t grp = o / kg;
          for (std::int64_t ci = 0; ci < cg; ++ci)
            for (std::int64_t u = 0; u < r; ++u)
              for (std::int64_t v = 0; v < s; ++v) {
                const std::int64_t yy = i * g.strides[0] - g.pads[0] + u * g.dilations[0];
                const std::int64_t xx = j * g.strides[1] - g.pads[1] + v * g.dilations[1];
                if (yy < 0 || yy >= h || xx < 0 || xx >= wd) continue;
                sum += static_cast<double>(x.data<float>()[((b * c + grp * cg + ci) * h + yy) * wd + xx]) *
                       w.data<float>()[((o * cg + ci) * r + u) * s + v];
              }
          const std::int64_t at = ((b * k + o) * oh + i) * ow + j;
          if (g.bias) sum += bias.data<float>()[o];
          if (g.residual) sum += z.data<float>()[at];
          y.data<float>()[at] = static_cast<float>(activate(g, sum));
        }
  return y;
}

TEST_CASE("cuDNN's fused convolution graphs match a direct computation, every float32 engine offered", "[cuda]") {
  if (const std::string why = why_no_cuda_device(); !why.empty()) {
    WARN("no GPU here, cuDNN's graph API is not run: " << why);
    return;
  }
  const std::vector<Form> cases = fused_conv_forms();
  StreamHandles h;
  std::size_t engines = 0;
  for (const Form& g : cases) {
    INFO("x " << g.x[1] << "x" << g.x[2] << " w " << g.w[0] << "x" << g.w[1] << "x" << g.w[2] << " bias " << g.bias << " residual "
              << g.residual << " activation " << g.activation);
    const Tensor x = filled(g.x, 1), w = filled(g.w, 2), bias = filled({g.w[0]}, 3), z = filled(g.y, 4);
    const Tensor want = direct(g, x, w, bias, z);
    std::vector<DeviceBuffer> keep;
    const CUdeviceptr dx = upload_operand(x, keep), dw = upload_operand(w, keep);
    const CUdeviceptr dbias = upload_operand(bias, keep), dz = upload_operand(z, keep);
    DeviceBuffer y(want.nbytes(), "a test output"), workspace(std::size_t(64) << 20, "a test workspace");
    // cuDNN accepts the graph itself: a refusal here is a mistake in how it was described.
    CudnnFusedConv fused(h.dnn(), g, g);
    fused.make_plans(h.dnn(), workspace.bytes());
    UNSCOPED_INFO(fused.passed_over());
    engines += fused.plans();
    for (std::size_t p = 0; p < fused.plans(); ++p) {
      INFO("plan " << p << " of " << fused.plans());
      check(driver().MemsetD32Async(y.get(), 0x7fc00000u, static_cast<std::size_t>(want.numel()), h.stream()), "poisoning");
      fused.launch(h.dnn(), p, dx, dw, dbias, dz, y.get(), workspace.get());
      h.synchronize("a fused convolution");
      const Tensor got = download_result(y.get(), want.shape());
      CHECK(testing::relative_l2_error(got, want) <= 1e-5);
    }
  }
  if (engines == 0) WARN("cuDNN offered no float32 engine for any of the fused graphs on this device");
}

}  // namespace
}  // namespace wpk::cuda
#endif
