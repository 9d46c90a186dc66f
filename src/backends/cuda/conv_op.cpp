// Conv and FusedConv: cuDNN's convolution, its algorithm chosen by measuring every one cuDNN
// offers on the region's own buffers at load, then the fused bias, residual and activation as
// one generated epilogue. When the session tunes, a generated convolution with its epilogue
// inside (generated_kernels.hpp) competes: the search strategy walks its schedule knobs, every
// point compiled and timed on the device, and the faster of it and cuDNN runs.

#include "backends/cuda/cudnn_descriptors.hpp"
#include "backends/cuda/cudnn_fused_conv.hpp"
#include "backends/cuda/device_op.hpp"
#include "backends/cuda/generated_kernels.hpp"
#include "backends/cuda/kernel_search.hpp"
#include "graph/fused_ops.hpp"
#include "runtime/logging.hpp"

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
    set_packed_tensor(x_desc_, x);
    set_packed_tensor(y_desc_, out_shape_);
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
    has_bias_ = n.inputs.size() > 2 && n.inputs[2] != kNoValue;
    has_residual_ = fused && has_fused_residual(n);
    activation_ = fused ? n.attr_string("activation", "") : "";
    params_ = n.attr_floats("activation_params");
    const Shape bias_shape = {1, w[0], 1, 1};
    epilogue_ = make_epilogue(env.cubins, "conv_epilogue", out_shape_, has_bias_ ? &bias_shape : nullptr, has_residual_, activation_, params_);
    choose_algorithm(env);
    if (activation_ == "Relu") fuse_in_cudnn(env, w[0]);
    geometry_ = conv_geometry(n, env.graph);
    if ((has_bias_ || has_residual_ || !activation_.empty()) && env.allows(kCudnnGraphVariant))
      consider_cudnn_graph(env);
    if (env.search) choose_implementation(env);
    else take_recorded_choice(env);
  }

  void launch(const LaunchEnv& env, const std::vector<DeviceTensor>& in, const DeviceTensor& out) const override {
    if (generated_) {
      generated_->launch(env.handles.stream(), generated_args(in, out));
      return;
    }
    if (graph_) {
      graph_->launch(env.handles.dnn(), graph_plan_, in[0].ptr, in[1].ptr, has_bias_ ? in[2].ptr : 0,
                     has_residual_ ? in[3].ptr : 0, out.ptr, env.workspace);
      return;
    }
    const float one = 1.0f, zero = 0.0f;
    if (fused_) {
      // y = relu(conv + z + bias): z is the residual, or zeros (a zero alpha2 would still read
      // z, and NaN * 0 is NaN); a missing bias is zeros too.
      const float alpha2 = 1.0f;
      const CUdeviceptr z = has_residual_ ? in[3].ptr : env.zeros, bias = has_bias_ ? in[2].ptr : env.zeros;
      check(cudnn().ConvolutionBiasActivationForward(env.handles.dnn(), &one, x_desc_, ptr(in[0].ptr), w_desc_, ptr(in[1].ptr),
                                                     conv_desc_, algo_, ptr(env.workspace), workspace_, &alpha2, y_desc_,
                                                     ptr(z), bias_desc_, ptr(bias), act_desc_, y_desc_, ptr(out.ptr)),
            "convolution with bias and ReLU");
      return;
    }
    const CUdeviceptr target = epilogue_.kernel ? env.scratch : out.ptr;
    check(cudnn().ConvolutionForward(env.handles.dnn(), &one, x_desc_, ptr(in[0].ptr), w_desc_, ptr(in[1].ptr), conv_desc_,
                                     algo_, ptr(env.workspace), workspace_, &zero, y_desc_, ptr(target)),
          "convolution");
    if (epilogue_.kernel)
      epilogue_.launch(env.handles.stream(), target, in.size() > 2 ? in[2].ptr : 0, in.size() > 3 ? in[3].ptr : 0, out.ptr);
  }

  std::string describe() const override {
    if (generated_) return "gen:" + generated_->symbol() + "(" + config_ + ")";
    if (graph_) return "cudnn:fused_graph(plan " + std::to_string(graph_plan_) + ")";
    if (fused_) return std::string("cudnn:conv_bias_relu(algo=") + algo_name(algo_) + ")";
    return std::string("cudnn:conv(algo=") + algo_name(algo_) + ")" + (epilogue_.kernel ? "+gen:" + epilogue_.kernel->symbol() : "");
  }
  std::size_t scratch_bytes() const override {
    return epilogue_.kernel && !generated_ && !fused_ && !graph_ ? static_cast<std::size_t>(shape_numel(out_shape_)) * sizeof(float) : 0;
  }
  std::size_t workspace_bytes() const override {
    return generated_ ? 0 : graph_ ? graph_->workspace(graph_plan_) : workspace_;
  }
  std::size_t zeros_bytes() const override {
    if (!fused_ || generated_ || (has_bias_ && has_residual_)) return 0;
    return std::max(has_residual_ ? 0 : static_cast<std::size_t>(shape_numel(out_shape_)) * sizeof(float),
                    has_bias_ ? 0 : static_cast<std::size_t>(geometry_.w[0]) * sizeof(float));
  }

 private:
  std::vector<CUdeviceptr> generated_args(const std::vector<DeviceTensor>& in, const DeviceTensor& out) const {
    return kernel_args(in, out, has_bias_, has_residual_);
  }

  std::string signature() const { return conv_signature(geometry_, {has_bias_, has_residual_, activation_, params_}); }

  // Bias, residual and ReLU inside cuDNN's call instead of a pass of their own, where cuDNN runs
  // the chosen algorithm so (tried once here; otherwise the generated epilogue stays).
  void fuse_in_cudnn(const PrepareEnv& env, std::int64_t channels) {
    const CudnnApi& dnn = cudnn();
    check(dnn.SetActivationDescriptor(act_desc_, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0), "the activation descriptor");
    set_packed_tensor(bias_desc_, {1, channels, 1, 1});
    DeviceBuffer workspace(workspace_, "trying a fused convolution");
    const std::size_t zero_count = std::max<std::size_t>(env.out.bytes(), static_cast<std::size_t>(channels) * sizeof(float)) / 4;
    DeviceBuffer zeros(zero_count * sizeof(float), "trying a fused convolution");
    check(driver().MemsetD32Async(zeros.get(), 0, zero_count, env.handles.stream()), "zeroing");
    const LaunchEnv trial{env.handles, 0, workspace.get(), zeros.get()};
    fused_ = true;
    try {
      launch(trial, env.in, env.out);
      env.handles.synchronize("trying a fused convolution");
    } catch (const Error& e) {
      fused_ = false;
      logger().debug("cuda conv {}: cuDNN does not fuse bias and ReLU with {}: {}", env.node.name, algo_name(algo_), e.what());
    }
  }

  GeneratedCandidates candidates(const PrepareEnv& env) const {
    GeneratedCandidates c;
    c.knobs = cuda_conv_knobs();
    const ConvGeometry g = geometry_;
    c.valid = [g](const search::Space& sp, const search::Point& p) { return cuda_conv_config_valid(g, conv_config_at(sp, p)); };
    c.predict = [g, gpu = gpu_spec_of(Device::get().info())](const search::Space& sp, const search::Point& p) {
      const CudaConvConfig cfg = conv_config_at(sp, p);
      return predict_conv_seconds(gpu, g, cfg, estimated_conv_registers(cfg));
    };
    c.print = [this](const search::Space& sp, const search::Point& p) {
      return conv_kernel(geometry_, conv_config_at(sp, p), has_bias_, has_residual_, activation_, params_);
    };
    c.args = generated_args(env.in, env.out);
    return c;
  }

  // cuDNN's graph API: the convolution and its epilogue as one operation graph, each engine that
  // runs it in float32 timed against what runs now (cuDNN's convolution and the generated
  // epilogue, or its fused legacy call); the fastest that agrees runs.
  void consider_cudnn_graph(const PrepareEnv& env) {
    const std::string key = "cudnn_graph_" + signature();
    if (known_alternative(key) == -1) return;
    std::unique_ptr<CudnnFusedConv> graph;
    try {
      graph = std::make_unique<CudnnFusedConv>(env.handles.dnn(), geometry_, conv_epilogue(env.node));
      graph->make_plans(env.handles.dnn(), kMaxWorkspace);
    } catch (const Error& e) {
      logger().debug("cuda conv {}: cuDNN's graph API: {}", env.node.name, e.what());
      remember_alternative(key, -1);
      return;
    }
    if (!graph->plans()) {
      logger().debug("cuda conv {}: no cuDNN engine runs the fused graph in float32 ({})", env.node.name, graph->passed_over());
      remember_alternative(key, -1);
      return;
    }
    int winner = -1;
    try {
      std::size_t most = workspace_;
      for (std::size_t i = 0; i < graph->plans(); ++i) most = std::max(most, graph->workspace(i));
      DeviceBuffer scratch(scratch_bytes(), "measuring a convolution"), workspace(most, "measuring a convolution");
      DeviceBuffer zeros(zeros_bytes(), "measuring a convolution");
      if (zeros_bytes()) check(driver().MemsetD32Async(zeros.get(), 0, zeros_bytes() / 4, env.handles.stream()), "zeroing");
      const LaunchEnv measuring{env.handles, scratch.get(), workspace.get(), zeros.get()};
      std::vector<Alternative> alternatives;
      for (std::size_t i = 0; i < graph->plans(); ++i)
        alternatives.push_back({"cuDNN fused graph plan " + std::to_string(i), [&, i] {
                                  graph->launch(env.handles.dnn(), i, env.in[0].ptr, env.in[1].ptr, has_bias_ ? env.in[2].ptr : 0,
                                                has_residual_ ? env.in[3].ptr : 0, env.out.ptr, workspace.get());
                                }});
      winner = fastest_alternative(env, key, "conv", [&] { launch(measuring, env.in, env.out); }, alternatives);
    } catch (const Error& e) {
      // No memory to measure in: the variant is left out, the convolution loads as before.
      logger().debug("cuda conv {}: measuring cuDNN's fused graph: {}", env.node.name, e.what());
      return;
    }
    if (winner < 0 || static_cast<std::size_t>(winner) >= graph->plans()) return;
    graph_ = std::move(graph);
    graph_plan_ = static_cast<std::size_t>(winner);
    fused_ = false;
  }

  // Without tuning: what an earlier tuning on this device chose, if it chose a generated schedule.
  void take_recorded_choice(const PrepareEnv& env) {
    const Choice c = recorded_choice(env, signature(), candidates(env));
    generated_ = c.kernel, config_ = c.config;
  }

  // Tuning: cuDNN (its fastest algorithm, with the epilogue) against the generated convolution.
  void choose_implementation(const PrepareEnv& env) {
    DeviceBuffer scratch(scratch_bytes(), "measuring a convolution"), workspace(workspace_bytes(), "measuring a convolution");
    DeviceBuffer zeros(zeros_bytes(), "measuring a convolution");
    if (zeros_bytes()) check(driver().MemsetD32Async(zeros.get(), 0, zeros_bytes() / 4, env.handles.stream()), "zeroing");
    const LaunchEnv measuring{env.handles, scratch.get(), workspace.get(), zeros.get()};
    const Choice c = search_generated(env, signature(), "conv", std::string("cuDNN ") + algo_name(algo_), candidates(env),
                                      [&] { launch(measuring, env.in, env.out); });
    generated_ = c.kernel, config_ = c.config;
  }

  static void* ptr(CUdeviceptr p) { return reinterpret_cast<void*>(p); }

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
  TensorDescriptor x_desc_, y_desc_;
  FilterDescriptor w_desc_;
  ConvolutionDescriptor conv_desc_;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  std::size_t workspace_ = 0;
  Epilogue epilogue_;
  bool has_bias_ = false, has_residual_ = false;
  std::string activation_;
  std::vector<float> params_;
  ConvGeometry geometry_;
  std::shared_ptr<const GeneratedKernel> generated_;
  std::string config_;
  bool fused_ = false;
  ActivationDescriptor act_desc_;  // used when fused_
  TensorDescriptor bias_desc_;
  std::unique_ptr<CudnnFusedConv> graph_;  // set: cuDNN's fused graph runs (unless generated_)
  std::size_t graph_plan_ = 0;
};

}  // namespace

std::unique_ptr<DeviceOp> prepare_conv(const PrepareEnv& env) { return std::make_unique<ConvOp>(env); }

}  // namespace wpk::cuda
