// LayerNormalization as generated kernels (row means and row reciprocal deviations, each summed
// in parts and then per row, then the normalisation with scale and bias as one element-wise
// kernel), and Softmax by cuDNN.
#include "backends/cuda/cudnn_descriptors.hpp"
#include "backends/cuda/device_op.hpp"
#include "backends/cuda/generated_kernels.hpp"

namespace wpk::cuda {
namespace {

using namespace codegen;

std::int64_t positive_axis(std::int64_t axis, std::size_t rank) { return axis < 0 ? axis + static_cast<std::int64_t>(rank) : axis; }

// rows x cols: the dims before `axis` and from it.
std::pair<std::int64_t, std::int64_t> split_at(const Shape& s, std::int64_t axis) {
  std::int64_t rows = 1, cols = 1;
  for (std::size_t d = 0; d < s.size(); ++d) (static_cast<std::int64_t>(d) < axis ? rows : cols) *= s[d];
  return {rows, cols};
}

class LayerNormOp : public DeviceOp {
 public:
  explicit LayerNormOp(const PrepareEnv& env) {
    const Node& n = env.node;
    const Shape& x = env.in[0].shape;
    std::tie(rows_, cols_) = split_at(x, positive_axis(n.attr_int("axis", -1), x.size()));
    has_bias_ = n.inputs.size() > 2 && n.inputs[2] != kNoValue;
    parts_ = row_parts(cols_);
    sum_parts_ = GeneratedKernel::obtain(row_partial_sums_kernel(rows_, cols_, parts_, false), env.cubins);
    square_parts_ = GeneratedKernel::obtain(row_partial_sums_kernel(rows_, cols_, parts_, true), env.cubins);
    mean_ = GeneratedKernel::obtain(row_mean_kernel(rows_, cols_, parts_), env.cubins);
    rstd_ = GeneratedKernel::obtain(row_rstd_kernel(rows_, cols_, parts_, n.attr_float("epsilon", 1e-5f)), env.cubins);
    std::vector<Shape> operands = {{rows_, cols_}, {rows_, 1}, {rows_, 1}, {cols_}};
    if (has_bias_) operands.push_back({cols_});
    normalize_ = GeneratedKernel::obtain(
        elementwise_kernel("layer_norm", {rows_, cols_}, operands,
                           [&](const std::vector<Expr>& v) {
                             Expr y = (v[0] - v[1]) * v[2] * v[3];
                             return has_bias_ ? y + v[4] : y;
                           }),
        env.cubins);
  }
  void launch(const LaunchEnv& env, const std::vector<DeviceTensor>& in, const DeviceTensor& out) const override {
    const CUstream s = env.handles.stream();
    const CUdeviceptr mean = env.scratch, rstd = mean + static_cast<CUdeviceptr>(rows_ * sizeof(float)),
                      partial = rstd + static_cast<CUdeviceptr>(rows_ * sizeof(float));
    sum_parts_->launch(s, {in[0].ptr, partial});
    mean_->launch(s, {partial, mean});
    square_parts_->launch(s, {in[0].ptr, mean, partial});
    rstd_->launch(s, {partial, rstd});
    std::vector<CUdeviceptr> args = {in[0].ptr, mean, rstd, in[1].ptr};
    if (has_bias_) args.push_back(in[2].ptr);
    args.push_back(out.ptr);
    normalize_->launch(s, std::move(args));
  }
  std::string describe() const override {
    return "gen:" + sum_parts_->symbol() + "+gen:" + mean_->symbol() + "+gen:" + square_parts_->symbol() + "+gen:" + rstd_->symbol() +
           "+gen:" + normalize_->symbol();
  }
  std::size_t scratch_bytes() const override { return static_cast<std::size_t>((2 + parts_) * rows_) * sizeof(float); }

 private:
  std::int64_t rows_ = 0, cols_ = 0, parts_ = 1;
  bool has_bias_ = false;
  std::shared_ptr<const GeneratedKernel> sum_parts_, mean_, square_parts_, rstd_, normalize_;
};

class SoftmaxOp : public DeviceOp {
 public:
  explicit SoftmaxOp(const PrepareEnv& env) {
    const Shape& x = env.in[0].shape;
    const std::int64_t axis = positive_axis(env.node.attr_int("axis", env.graph.opset() < 13 ? 1 : -1), x.size());
    const auto [rows, cols] = split_at(x, axis);
    set_packed_tensor(desc_, {rows, cols, 1, 1});
  }
  void launch(const LaunchEnv& env, const std::vector<DeviceTensor>& in, const DeviceTensor& out) const override {
    const float one = 1.0f, zero = 0.0f;
    check(cudnn().SoftmaxForward(env.handles.dnn(), CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &one, desc_,
                                 reinterpret_cast<const void*>(in[0].ptr), &zero, desc_, reinterpret_cast<void*>(out.ptr)),
          "softmax");
  }
  std::string describe() const override { return "cudnn:softmax"; }

 private:
  TensorDescriptor desc_;
};

}  // namespace

std::unique_ptr<DeviceOp> prepare_layer_norm(const PrepareEnv& env) { return std::make_unique<LayerNormOp>(env); }
std::unique_ptr<DeviceOp> prepare_softmax(const PrepareEnv& env) { return std::make_unique<SoftmaxOp>(env); }

}  // namespace wpk::cuda
