// Tanh of a float32 tensor with Eigen's vectorized rational approximation (within 4e-7 of tanh,
// absolute and relative, over all of float32). The reference's scalar libm loop costs a
// recurrent body (a decoder's Loop, tiny tensors, one Tanh an iteration) a tenth of its run; a
// library's eltwise primitive costs more to call than such a node's whole work.
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>

#include "backends/cpu/cpu_kernels.hpp"

namespace wpk::cpu {
namespace {

// Below this many elements one thread computes them all: waking the others costs more.
constexpr std::int64_t kParallelElements = 1 << 16;

constexpr int kPacketFloats = Eigen::internal::packet_traits<float>::size;

std::string isa_name() {
  if (kPacketFloats >= 16) return "avx512";
  if (kPacketFloats >= 8) return "avx2";
  return kPacketFloats >= 4 ? "sse2" : "scalar";
}

class TanhKernel : public Kernel {
 public:
  KernelProfile profile() const override { return {tanh_kernel_name(), 32 * kPacketFloats, 0.25}; }

  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    require_f32(ctx, x, "input");
    Tensor& y = ctx.allocate_output(0, DType::Float32, x.shape());
    const std::int64_t n = x.numel();
    const int threads = n >= kParallelElements ? omp_get_max_threads() : 1;
    const std::int64_t chunk = (n + threads - 1) / threads;
    const float* in = x.data<float>();
    float* out = y.data<float>();
#pragma omp parallel for num_threads(threads) if (threads > 1) schedule(static)
    for (int t = 0; t < threads; ++t) {
      const std::int64_t begin = t * chunk, count = std::min(n, begin + chunk) - begin;
      if (count > 0)
        Eigen::Map<Eigen::ArrayXf>(out + begin, count) = Eigen::Map<const Eigen::ArrayXf>(in + begin, count).tanh();
    }
  }
};

}  // namespace

std::string tanh_kernel_name() { return "f32_tanh__" + isa_name(); }

std::string tanh_unsupported(const Node& node, const Graph& graph) {
  if (node.inputs.size() != 1 || node.outputs.size() != 1) return "Tanh takes one input and gives one output";
  if (graph.value(node.inputs[0]).dtype != DType::Float32) return "only float32 Tanh";
  return "";
}

std::unique_ptr<Kernel> make_tanh(const Node&, const Graph&) { return std::make_unique<TanhKernel>(); }

}  // namespace wpk::cpu
