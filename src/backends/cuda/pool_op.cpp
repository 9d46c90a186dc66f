// MaxPool, AveragePool and GlobalAveragePool: cuDNN's pooling, NaN propagated as ONNX does.
#include "backends/cuda/cudnn_descriptors.hpp"
#include "backends/cuda/device_op.hpp"

namespace wpk::cuda {
namespace {

class PoolOp : public DeviceOp {
 public:
  explicit PoolOp(const PrepareEnv& env) {
    const Node& n = env.node;
    const Shape& x = env.in[0].shape;
    const std::size_t spatial = x.size() - 2;
    std::vector<std::int64_t> window, pads, strides;
    cudnnPoolingMode_t mode;
    if (n.op_type == "GlobalAveragePool") {
      window.assign(x.begin() + 2, x.end());
      pads.assign(spatial, 0);
      strides.assign(spatial, 1);
      mode = CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
      kind_ = "global_average";
    } else {
      window = n.attr_ints("kernel_shape");
      std::vector<std::int64_t> all_pads = n.attr_ints("pads", std::vector<std::int64_t>(2 * spatial, 0));
      for (std::size_t d = 0; d < spatial; ++d)
        if (all_pads[d] != all_pads[d + spatial])
          throw Error(ErrorCode::Unsupported, "CUDA: pooling padded unevenly (cuDNN pads both sides alike)");
      pads.assign(all_pads.begin(), all_pads.begin() + static_cast<std::ptrdiff_t>(spatial));
      strides = n.attr_ints("strides", std::vector<std::int64_t>(spatial, 1));
      const bool max = n.op_type == "MaxPool";
      mode = max ? CUDNN_POOLING_MAX
                 : (n.attr_int("count_include_pad", 0) ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                      : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING);
      kind_ = max ? "max" : "average";
    }
    const CudnnApi& dnn = cudnn();
    set_packed_tensor(x_desc_, x);
    set_packed_tensor(y_desc_, env.out.shape);
    const std::vector<int> w = as_int(window), p = as_int(pads), s = as_int(strides);
    check(dnn.SetPoolingNdDescriptor(pool_desc_, mode, CUDNN_PROPAGATE_NAN, static_cast<int>(spatial), w.data(), p.data(), s.data()),
          "the pooling descriptor");
  }
  void launch(const LaunchEnv& env, const std::vector<DeviceTensor>& in, const DeviceTensor& out) const override {
    const float one = 1.0f, zero = 0.0f;
    check(cudnn().PoolingForward(env.handles.dnn(), pool_desc_, &one, x_desc_, reinterpret_cast<const void*>(in[0].ptr), &zero,
                                 y_desc_, reinterpret_cast<void*>(out.ptr)),
          "pooling");
  }
  std::string describe() const override { return "cudnn:pool(" + kind_ + ")"; }

 private:
  std::string kind_;
  TensorDescriptor x_desc_, y_desc_;
  PoolingDescriptor pool_desc_;
};

}  // namespace

std::unique_ptr<DeviceOp> prepare_pool(const PrepareEnv& env) { return std::make_unique<PoolOp>(env); }

}  // namespace wpk::cuda
