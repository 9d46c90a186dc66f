// Conv and FusedConv: cuDNN's convolution, its algorithm chosen by measuring every one cuDNN
// offers on the region's own buffers at load, then the fused bias, residual and activation as
// one generated epilogue.
#include "backends/cuda/device_op.hpp"
#include "graph/fused_ops.hpp"

namespace wpk::cuda {
namespace {

// cuDNN's workspace for one convolution, at most: an algorithm that wants more is passed over.
constexpr std::size_t kMaxWorkspace = std::size_t(256) << 20;

const char* algo_name(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "implicit_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "implicit_precomp_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "direct";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "fft";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "fft_tiling";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "winograd";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "winograd_nonfused";
    default: return "other";
  }
}

std::vector<int> as_int(const std::vector<std::int64_t>& v) { return std::vector<int>(v.begin(), v.end()); }

class ConvOp : public DeviceOp {
 public:
  explicit ConvOp(const PrepareEnv& env) : out_shape_(env.out.shape) {
    const Node& n = env.node;
    const CudnnApi& dnn = cudnn();
    const Shape& x = env.in[0].shape;
    const Shape& w = env.in[1].shape;
    const std::size_t spatial = x.size() - 2;
    std::vector<std::int64_t> pads = n.attr_ints("pads", std::vector<std::int64_t>(2 * spatial, 0));
    const std::vector<std::int64_t> strides = n.attr_ints("strides", std::vector<std::int64_t>(spatial, 1));
    const std::vector<std::int64_t> dilations = n.attr_ints("dilations", std::vector<std::int64_t>(spatial, 1));
    for (std::size_t d = 0; d < spatial; ++d)
      if (pads[d] != pads[d + spatial])
        throw Error(ErrorCode::Unsupported, "CUDA: a convolution padded unevenly (cuDNN pads both sides alike)");
    pads.resize(spatial);
    check(dnn.CreateTensorDescriptor(&x_desc_), "cudnnCreateTensorDescriptor");
    check(dnn.CreateTensorDescriptor(&y_desc_), "cudnnCreateTensorDescriptor");
    check(dnn.CreateFilterDescriptor(&w_desc_), "cudnnCreateFilterDescriptor");
    check(dnn.CreateConvolutionDescriptor(&conv_desc_), "cudnnCreateConvolutionDescriptor");
    set_tensor(x_desc_, x);
    set_tensor(y_desc_, out_shape_);
    const std::vector<int> wd = as_int(w);
    check(dnn.SetFilterNdDescriptor(w_desc_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, static_cast<int>(wd.size()), wd.data()),
          "the filter descriptor");
    const std::vector<int> p = as_int(pads), s = as_int(strides), dl = as_int(dilations);
    check(dnn.SetConvolutionNdDescriptor(conv_desc_, static_cast<int>(spatial), p.data(), s.data(), dl.data(),
                                         CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
          "the convolution descriptor");
    check(dnn.SetConvolutionGroupCount(conv_desc_, static_cast<int>(n.attr_int("group", 1))), "the group count");
    // float32 arithmetic as the model asks: no TF32 tensor-core rounding.
    check(dnn.SetConvolutionMathType(conv_desc_, CUDNN_FMA_MATH), "the math type");

    const bool fused = n.op_type == "FusedConv";
    const bool has_bias = n.inputs.size() > 2 && n.inputs[2] != kNoValue;
    const bool has_residual = fused && has_fused_residual(n);
    const Shape bias_shape = {1, w[0], 1, 1};
    epilogue_ = make_epilogue("conv_epilogue", out_shape_, has_bias ? &bias_shape : nullptr, has_residual,
                              fused ? n.attr_string("activation", "") : "", n.attr_floats("activation_params"));
    choose_algorithm(env);
  }

  ~ConvOp() override {
    const CudnnApi& dnn = cudnn();
    dnn.DestroyConvolutionDescriptor(conv_desc_);
    dnn.DestroyFilterDescriptor(w_desc_);
    dnn.DestroyTensorDescriptor(y_desc_);
    dnn.DestroyTensorDescriptor(x_desc_);
  }

  void launch(const LaunchEnv& env, const std::vector<DeviceTensor>& in, const DeviceTensor& out) const override {
    const float one = 1.0f, zero = 0.0f;
    const CUdeviceptr target = epilogue_.kernel ? env.scratch : out.ptr;
    check(cudnn().ConvolutionForward(env.handles.dnn(), &one, x_desc_, ptr(in[0].ptr), w_desc_, ptr(in[1].ptr), conv_desc_,
                                     algo_, ptr(env.workspace), workspace_, &zero, y_desc_, ptr(target)),
          "convolution");
    if (epilogue_.kernel)
      epilogue_.launch(env.handles.stream(), target, in.size() > 2 ? in[2].ptr : 0, in.size() > 3 ? in[3].ptr : 0, out.ptr);
  }

  std::string describe() const override {
    return std::string("cudnn:conv(algo=") + algo_name(algo_) + ")" + (epilogue_.kernel ? "+gen:" + epilogue_.kernel->symbol() : "");
  }
  std::size_t scratch_bytes() const override {
    return epilogue_.kernel ? static_cast<std::size_t>(shape_numel(out_shape_)) * sizeof(float) : 0;
  }
  std::size_t workspace_bytes() const override { return workspace_; }

 private:
  static void* ptr(CUdeviceptr p) { return reinterpret_cast<void*>(p); }

  static void set_tensor(cudnnTensorDescriptor_t desc, const Shape& shape) {
    const std::vector<int> dims = as_int(shape);
    std::vector<int> strides(dims.size(), 1);
    for (std::size_t d = dims.size() - 1; d-- > 0;) strides[d] = strides[d + 1] * dims[d + 1];
    check(cudnn().SetTensorNdDescriptor(desc, CUDNN_DATA_FLOAT, static_cast<int>(dims.size()), dims.data(), strides.data()),
          "a tensor descriptor");
  }

  // Runs each algorithm cuDNN offers on the operands' buffers (their contents do not matter) and
  // keeps the fastest whose workspace fits.
  void choose_algorithm(const PrepareEnv& env) {
    DeviceBuffer workspace(kMaxWorkspace, "measuring convolution algorithms");
    DeviceBuffer result(env.out.bytes(), "measuring convolution algorithms");
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int found = 0;
    check(cudnn().FindConvolutionForwardAlgorithmEx(env.handles.dnn(), x_desc_, ptr(env.in[0].ptr), w_desc_, ptr(env.in[1].ptr),
                                                    conv_desc_, y_desc_, ptr(result.get()), CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                    &found, perf, ptr(workspace.get()), kMaxWorkspace),
          "measuring convolution algorithms");
    for (int i = 0; i < found; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= kMaxWorkspace) {
        algo_ = perf[i].algo;
        workspace_ = perf[i].memory;
        return;
      }
    throw Error(ErrorCode::Unsupported, "CUDA: cuDNN offers no algorithm for convolution " + env.node.name);
  }

  Shape out_shape_;
  cudnnTensorDescriptor_t x_desc_ = nullptr, y_desc_ = nullptr;
  cudnnFilterDescriptor_t w_desc_ = nullptr;
  cudnnConvolutionDescriptor_t conv_desc_ = nullptr;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  std::size_t workspace_ = 0;
  Epilogue epilogue_;
};

}  // namespace

std::unique_ptr<DeviceOp> prepare_conv(const PrepareEnv& env) { return std::make_unique<ConvOp>(env); }

}  // namespace wpk::cuda
