// com.wpk ConcatBatchNorm (graph/fused_ops.hpp): each input is normalised straight into its
// channel slice of the output, so the concatenated tensor is never built. In NHWC that slice
// is strided, which oneDNN 2.6's batch norm runs only in its reference implementation, so this
// kernel is a plain loop over the run's OpenMP threads. The per-channel affine form
// y = x * a + b (a = scale / sqrt(var + epsilon), b = B - mean * a) is computed once, at prepare.
#include <cmath>

#include "backends/cpu/cpu_kernels.hpp"
#include "backends/op_support.hpp"

namespace wpk::cpu {
namespace {

// y[i] = act(x[i] * a[i] + b[i]) for one run of channels.
WPK_CPU_CLONES void affine_row(const float* x, const float* a, const float* b, float* y, std::int64_t n, bool relu) {
  if (relu) {
    for (std::int64_t i = 0; i < n; ++i) {
      const float v = x[i] * a[i] + b[i];
      y[i] = v > 0.0f ? v : 0.0f;
    }
  } else {
    for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] * a[i] + b[i];
  }
}

// y[i] = act(x[i] * a + b) for one channel plane of NCHW.
WPK_CPU_CLONES void affine_plane(const float* x, float a, float b, float* y, std::int64_t n, bool relu) {
  if (relu) {
    for (std::int64_t i = 0; i < n; ++i) {
      const float v = x[i] * a + b;
      y[i] = v > 0.0f ? v : 0.0f;
    }
  } else {
    for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] * a + b;
  }
}

class ConcatBatchNormKernel : public Kernel {
 public:
  ConcatBatchNormKernel(const Node& node, const Graph& graph)
      : channels_last_(node.attr_int("channels_last", 0) == 1), relu_(node.attr_string("activation", "") == "Relu") {
    const double epsilon = node.attr_float("epsilon", 1e-5f);
    const Tensor& scale = *graph.initializer(node.inputs[0]);
    const Tensor& bias = *graph.initializer(node.inputs[1]);
    const Tensor& mean = *graph.initializer(node.inputs[2]);
    const Tensor& var = *graph.initializer(node.inputs[3]);
    const auto c = static_cast<std::size_t>(scale.numel());
    a_.resize(c);
    b_.resize(c);
    for (std::size_t i = 0; i < c; ++i) {
      const double a = scale.data<float>()[i] / std::sqrt(static_cast<double>(var.data<float>()[i]) + epsilon);
      a_[i] = static_cast<float>(a);
      b_[i] = static_cast<float>(bias.data<float>()[i] - mean.data<float>()[i] * a);
    }
  }

  KernelProfile profile() const override { return {"f32_concat_batchnorm", clones_vector_bits(), 0.5}; }

  void run(KernelContext& ctx) const override {
    const int axis = channels_last_ ? 3 : 1;
    const Tensor& first = ctx.input(4);
    std::vector<const float*> xs;
    std::vector<std::int64_t> offsets{0};  // channel offset of each input in the output
    for (std::size_t i = 4; i < ctx.num_inputs(); ++i) {
      const Tensor& x = ctx.input(i);
      require_f32(ctx, x, "concatenated input");
      bool same = x.rank() == 4 && first.rank() == 4;
      for (int d = 0; same && d < 4; ++d) same = d == axis || x.shape()[d] == first.shape()[d];
      if (!same)
        ctx.fail(ErrorCode::InvalidArgument, "input " + std::to_string(i) + " has shape " + shape_to_string(x.shape()) +
                                                 ", which does not concatenate with " + shape_to_string(first.shape()) +
                                                 " along axis " + std::to_string(axis));
      xs.push_back(x.data<float>());
      offsets.push_back(offsets.back() + x.shape()[axis]);
    }
    const std::int64_t channels = offsets.back();
    if (channels != static_cast<std::int64_t>(a_.size()))
      ctx.fail(ErrorCode::InvalidArgument, "the inputs have " + std::to_string(channels) + " channels together, the parameters " +
                                               std::to_string(a_.size()));
    Shape shape = first.shape();
    shape[axis] = channels;
    Tensor& y = ctx.allocate_output(0, DType::Float32, shape);
    float* out = y.data<float>();
    const auto inputs = static_cast<std::int64_t>(xs.size());
    if (channels_last_) {
      const std::int64_t pixels = shape[0] * shape[1] * shape[2];
#pragma omp parallel for schedule(static)
      for (std::int64_t p = 0; p < pixels; ++p)
        for (std::int64_t i = 0; i < inputs; ++i) {
          const std::int64_t c0 = offsets[i], c = offsets[i + 1] - c0;
          affine_row(xs[i] + p * c, a_.data() + c0, b_.data() + c0, out + p * channels + c0, c, relu_);
        }
    } else {
      const std::int64_t plane = shape[2] * shape[3], planes = shape[0] * channels;
#pragma omp parallel for schedule(static)
      for (std::int64_t q = 0; q < planes; ++q) {
        const std::int64_t n = q / channels, ch = q % channels;
        std::int64_t i = 0;
        while (ch >= offsets[i + 1]) ++i;
        const std::int64_t c = offsets[i + 1] - offsets[i];
        const float* x = xs[i] + (n * c + ch - offsets[i]) * plane;
        affine_plane(x, a_[ch], b_[ch], out + q * plane, plane, relu_);
      }
    }
  }

 private:
  bool channels_last_;
  bool relu_;
  std::vector<float> a_, b_;  // per channel: y = act(x * a + b)
};

}  // namespace

std::string concat_batchnorm_unsupported(const Node& node, const Graph& graph) {
  if (node.inputs.size() < 5) return "needs scale, B, mean, var and at least one input";
  const std::int64_t channels_last = node.attr_int("channels_last", 0);
  if (channels_last != 0 && channels_last != 1) return "channels_last is neither 0 nor 1";
  for (std::size_t i = 4; i < node.inputs.size(); ++i)
    if (node.inputs[i] == kNoValue || graph.value(node.inputs[i]).dtype != DType::Float32)
      return "inputs are not known to be float32";
  return batchnorm_params_unsupported(node, graph, 0);
}

std::unique_ptr<Kernel> make_concat_batchnorm(const Node& node, const Graph& graph) {
  return std::make_unique<ConcatBatchNormKernel>(node, graph);
}

}  // namespace wpk::cpu
