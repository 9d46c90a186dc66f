#include "backends/cuda/cudnn_fused_conv.hpp"

#include <algorithm>
#include <array>
#include <cfloat>
#include <map>

namespace wpk::cuda {

std::optional<CudnnActivation> cudnn_activation(const std::string& activation, const std::vector<float>& params) {
  CudnnActivation a;
  if (activation == "Relu") return a;
  if (activation == "Clip") {
    if (params.size() != 2) return std::nullopt;
    // cuDNN computes the clip in float: an unbounded side is float's largest magnitude.
    a.lower_clip = std::max<double>(params[0], -FLT_MAX), a.upper_clip = std::min<double>(params[1], FLT_MAX);
    return a;
  }
  if (activation == "Sigmoid") a.mode = CUDNN_POINTWISE_SIGMOID_FWD;
  else if (activation == "Tanh") a.mode = CUDNN_POINTWISE_TANH_FWD;
  else if (activation == "SiLU") a.mode = CUDNN_POINTWISE_SWISH_FWD;
  else if (activation == "Gelu") a.mode = CUDNN_POINTWISE_GELU_FWD;  // the erf form, as ONNX's
  else return std::nullopt;
  return a;
}

BackendDescriptor::BackendDescriptor(cudnnBackendDescriptorType_t type) {
  check(cudnn().BackendCreateDescriptor(type, &d_), "creating a cuDNN graph descriptor");
}

BackendDescriptor::~BackendDescriptor() {
  if (d_) cudnn().BackendDestroyDescriptor(d_);
}

namespace {

// The operation graph's and the plans' handle attributes are deprecated from cuDNN 9.x on, in
// favour of a device-property descriptor that older 9.x releases lack: the handle works on all.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
constexpr cudnnBackendAttributeName_t kGraphHandle = CUDNN_ATTR_OPERATIONGRAPH_HANDLE;
constexpr cudnnBackendAttributeName_t kPlanHandle = CUDNN_ATTR_EXECUTION_PLAN_HANDLE;
#pragma GCC diagnostic pop

template <typename T>
void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T* values,
         std::int64_t count, const char* what) {
  check(cudnn().BackendSetAttribute(d, name, type, count, values), what);
}

void set_descriptor(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, const BackendDescriptor& v, const char* what) {
  const cudnnBackendDescriptor_t p = v.get();
  set(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &p, 1, what);
}

void finalize(const BackendDescriptor& d, const char* what) { check(cudnn().BackendFinalize(d.get()), what); }

enum TensorId : std::int64_t { kX = 1, kW, kConvOut, kBias, kBiased, kZ, kAdded, kY };

}  // namespace

struct CudnnFusedConv::Plan {
  std::unique_ptr<BackendDescriptor> config;  // kept as long as the plan built from it
  BackendDescriptor plan{CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR};
  std::int64_t workspace = 0;
};

CudnnFusedConv::~CudnnFusedConv() = default;

CudnnFusedConv::CudnnFusedConv(cudnnHandle_t dnn, const ConvGeometry& g, const ConvEpilogue& e) : e_(e) {
  std::optional<CudnnActivation> act;
  if (!e.activation.empty()) {
    act = cudnn_activation(e.activation, e.params);
    if (!act) throw Error(ErrorCode::Unsupported, "cuDNN: no pointwise form of " + e.activation);
  }
  auto tensor = [&](TensorId id, const std::vector<std::int64_t>& dims, bool is_virtual) -> const BackendDescriptor& {
    keep_.push_back(std::make_unique<BackendDescriptor>(CUDNN_BACKEND_TENSOR_DESCRIPTOR));
    const cudnnBackendDescriptor_t t = keep_.back()->get();
    std::vector<std::int64_t> strides(dims.size(), 1);
    for (std::size_t d = dims.size() - 1; d-- > 0;) strides[d] = strides[d + 1] * dims[d + 1];
    const cudnnDataType_t type = CUDNN_DATA_FLOAT;
    const std::int64_t uid = id, alignment = 16, rank = static_cast<std::int64_t>(dims.size());
    const bool virt = is_virtual;
    set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type, 1, "a graph tensor's type");
    set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), rank, "a graph tensor's dims");
    set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), rank, "a graph tensor's strides");
    set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid, 1, "a graph tensor's id");
    set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment, 1, "a graph tensor's alignment");
    set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &virt, 1, "a graph tensor's virtuality");
    finalize(*keep_.back(), "a graph tensor");
    return *keep_.back();
  };
  const bool epilogue_after_conv = e.bias || e.residual || act;
  const BackendDescriptor& x = tensor(kX, g.x, false);
  const BackendDescriptor& w = tensor(kW, g.w, false);
  const BackendDescriptor* current = &tensor(epilogue_after_conv ? kConvOut : kY, g.y, epilogue_after_conv);

  keep_.push_back(std::make_unique<BackendDescriptor>(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR));
  const BackendDescriptor& conv = *keep_.back();
  {
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    const std::int64_t spatial = static_cast<std::int64_t>(g.pads.size());
    set(conv.get(), CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &compute, 1, "the convolution's arithmetic");
    set(conv.get(), CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, &mode, 1, "the convolution's mode");
    set(conv.get(), CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, &spatial, 1, "the convolution's rank");
    set(conv.get(), CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, g.dilations.data(), spatial, "the dilations");
    set(conv.get(), CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, g.strides.data(), spatial, "the strides");
    set(conv.get(), CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, g.pads.data(), spatial, "the paddings");
    set(conv.get(), CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, g.pads.data(), spatial, "the paddings");
    finalize(conv, "the convolution descriptor");
  }
  std::vector<cudnnBackendDescriptor_t> ops;
  keep_.push_back(std::make_unique<BackendDescriptor>(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR));
  {
    const BackendDescriptor& op = *keep_.back();
    const float one = 1.0f, zero = 0.0f;
    set_descriptor(op.get(), CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x, "the convolution's input");
    set_descriptor(op.get(), CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w, "the convolution's filter");
    set_descriptor(op.get(), CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, *current, "the convolution's output");
    set_descriptor(op.get(), CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv, "the convolution");
    set(op.get(), CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, &one, 1, "the convolution's alpha");
    set(op.get(), CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, &zero, 1, "the convolution's beta");
    finalize(op, "the convolution operation");
    ops.push_back(op.get());
  }
  // One pointwise operation: current (op) operand -> next tensor.
  const std::vector<std::int64_t> bias_dims = [&] {
    std::vector<std::int64_t> d(g.y.size(), 1);
    d[1] = g.y[1];
    return d;
  }();
  int remaining = (e.bias ? 1 : 0) + (e.residual ? 1 : 0) + (act ? 1 : 0);
  auto pointwise = [&](cudnnPointwiseMode_t mode, const BackendDescriptor* operand, TensorId out_id, const CudnnActivation* a) {
    --remaining;
    const BackendDescriptor& out = tensor(remaining ? out_id : kY, g.y, remaining > 0);
    keep_.push_back(std::make_unique<BackendDescriptor>(CUDNN_BACKEND_POINTWISE_DESCRIPTOR));
    const BackendDescriptor& pw = *keep_.back();
    const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
    set(pw.get(), CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode, 1, "a pointwise mode");
    set(pw.get(), CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &precision, 1, "a pointwise precision");
    if (a && a->lower_clip) set(pw.get(), CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, CUDNN_TYPE_DOUBLE, &*a->lower_clip, 1, "a lower clip");
    if (a && a->upper_clip) set(pw.get(), CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, CUDNN_TYPE_DOUBLE, &*a->upper_clip, 1, "an upper clip");
    if (mode == CUDNN_POINTWISE_SWISH_FWD) {
      const double beta = 1.0;
      set(pw.get(), CUDNN_ATTR_POINTWISE_SWISH_BETA, CUDNN_TYPE_DOUBLE, &beta, 1, "the swish beta");
    }
    finalize(pw, "a pointwise descriptor");
    keep_.push_back(std::make_unique<BackendDescriptor>(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR));
    const BackendDescriptor& op = *keep_.back();
    set_descriptor(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw, "a pointwise operation");
    set_descriptor(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_XDESC, *current, "a pointwise input");
    if (operand) set_descriptor(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *operand, "a pointwise operand");
    set_descriptor(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_YDESC, out, "a pointwise output");
    finalize(op, "a pointwise operation");
    ops.push_back(op.get());
    current = &out;
  };
  // Residual before bias: the order cuDNN's fused convolution engines match (the sum is the same).
  if (e.residual) pointwise(CUDNN_POINTWISE_ADD, &tensor(kZ, g.y, false), kAdded, nullptr);
  if (e.bias) pointwise(CUDNN_POINTWISE_ADD, &tensor(kBias, bias_dims, false), kBiased, nullptr);
  if (act) pointwise(act->mode, nullptr, kY, &*act);

  graph_ = std::make_unique<BackendDescriptor>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  if (dnn) set(graph_->get(), kGraphHandle, CUDNN_TYPE_HANDLE, &dnn, 1, "the operation graph's handle");
  set(graph_->get(), CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops.data(), static_cast<std::int64_t>(ops.size()),
      "the operation graph's operations");
  const cudnnStatus_t s = cudnn().BackendFinalize(graph_->get());
  if (s != CUDNN_STATUS_SUCCESS)
    throw Error(ErrorCode::Unsupported, std::string("cuDNN: the fused convolution's graph: ") + cudnn().GetErrorString(s));
}

namespace {

// The engine configurations a heuristic mode offers for `graph`, in its order.
std::vector<std::unique_ptr<BackendDescriptor>> engine_configs(const BackendDescriptor& graph, cudnnBackendHeurMode_t mode) {
  BackendDescriptor heuristic(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  set_descriptor(heuristic.get(), CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph, "the heuristic's graph");
  set(heuristic.get(), CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode, 1, "the heuristic's mode");
  finalize(heuristic, "cuDNN's heuristic");
  std::int64_t count = 0;
  check(cudnn().BackendGetAttribute(heuristic.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
        "counting the heuristic's engines");
  std::vector<std::unique_ptr<BackendDescriptor>> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (std::int64_t i = 0; i < count; ++i) {
    configs.push_back(std::make_unique<BackendDescriptor>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    raw.push_back(configs.back()->get());
  }
  std::int64_t returned = 0;
  if (count > 0)
    check(cudnn().BackendGetAttribute(heuristic.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                      &returned, raw.data()),
          "reading the heuristic's engines");
  configs.resize(static_cast<std::size_t>(std::clamp<std::int64_t>(returned, 0, count)));
  return configs;
}

// Why an engine is passed over: it computes below float32 (TF32 tensor cores, down-converted
// inputs, a reduced-precision sum) or compiles a kernel at plan time (seconds at load); "" if not.
std::string engine_unsuitable(cudnnBackendDescriptor_t config) {
  BackendDescriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t e = engine.get();
  std::int64_t one = 0;
  check(cudnn().BackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &one, &e),
        "reading an engine");
  std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> notes{};
  std::int64_t n = 0;
  check(cudnn().BackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                    static_cast<std::int64_t>(notes.size()), &n, notes.data()),
        "reading an engine's numerical notes");
  for (std::int64_t k = 0; k < n && k < static_cast<std::int64_t>(notes.size()); ++k) {
    const auto note = notes[static_cast<std::size_t>(k)];
    if (note == CUDNN_NUMERICAL_NOTE_TENSOR_CORE || note == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS ||
        note == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION)
      return "computing below float32";
  }
  std::array<cudnnBackendBehaviorNote_t, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT> behaviour{};
  n = 0;
  check(cudnn().BackendGetAttribute(e, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                    static_cast<std::int64_t>(behaviour.size()), &n, behaviour.data()),
        "reading an engine's behaviour notes");
  for (std::int64_t k = 0; k < n && k < static_cast<std::int64_t>(behaviour.size()); ++k)
    if (behaviour[static_cast<std::size_t>(k)] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) return "compiling at load";
  return "";
}

// Plans kept for measuring, at most.
constexpr std::size_t kMaxPlans = 8;

}  // namespace

void CudnnFusedConv::make_plans(cudnnHandle_t dnn, std::size_t max_workspace) {
  // Mode A's list, then the fallback list, filtered; only then capped: the first engines offered
  // for float32 are often TF32 ones.
  std::vector<std::unique_ptr<BackendDescriptor>> configs = engine_configs(*graph_, CUDNN_HEUR_MODE_A);
  for (auto& c : engine_configs(*graph_, CUDNN_HEUR_MODE_FALLBACK)) configs.push_back(std::move(c));
  std::map<std::string, int> passed;
  for (auto& config : configs) {
    if (plans_.size() >= kMaxPlans) break;
    std::string why;
    try {
      why = engine_unsuitable(config->get());
    } catch (const Error&) {
      why = "not describing themselves";  // one engine's notes unreadable: that engine left out
    }
    if (!why.empty()) {
      ++passed[why];
      continue;
    }
    auto plan = std::make_unique<Plan>();
    const cudnnBackendDescriptor_t raw = config->get();
    set(plan->plan.get(), kPlanHandle, CUDNN_TYPE_HANDLE, &dnn, 1, "the plan's handle");
    set(plan->plan.get(), CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, &raw, 1, "the plan's engine");
    if (cudnn().BackendFinalize(plan->plan.get()) != CUDNN_STATUS_SUCCESS) {
      ++passed["not building"];
      continue;
    }
    std::int64_t one = 0;
    check(cudnn().BackendGetAttribute(plan->plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &one,
                                      &plan->workspace),
          "reading a plan's workspace");
    if (plan->workspace < 0 || static_cast<std::size_t>(plan->workspace) > max_workspace) {
      ++passed["needing too much workspace"];
      continue;
    }
    plan->config = std::move(config);
    plans_.push_back(std::move(plan));
  }
  passed_over_ = std::to_string(configs.size()) + " engine configurations offered";
  for (const auto& [why, count] : passed) passed_over_ += ", " + std::to_string(count) + " " + why;
}

std::size_t CudnnFusedConv::workspace(std::size_t plan) const { return static_cast<std::size_t>(plans_.at(plan)->workspace); }

void CudnnFusedConv::launch(cudnnHandle_t dnn, std::size_t plan, CUdeviceptr x, CUdeviceptr w, CUdeviceptr bias, CUdeviceptr z,
                            CUdeviceptr y, CUdeviceptr workspace) const {
  std::vector<std::int64_t> ids = {kX, kW, kY};
  std::vector<void*> pointers = {reinterpret_cast<void*>(x), reinterpret_cast<void*>(w), reinterpret_cast<void*>(y)};
  if (e_.bias) ids.push_back(kBias), pointers.push_back(reinterpret_cast<void*>(bias));
  if (e_.residual) ids.push_back(kZ), pointers.push_back(reinterpret_cast<void*>(z));
  BackendDescriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  void* space = plans_.at(plan)->workspace > 0 ? reinterpret_cast<void*>(workspace) : nullptr;
  set(pack.get(), CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, ids.data(), static_cast<std::int64_t>(ids.size()),
      "the variant pack's ids");
  set(pack.get(), CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, pointers.data(), static_cast<std::int64_t>(pointers.size()),
      "the variant pack's pointers");
  set(pack.get(), CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &space, 1, "the variant pack's workspace");
  finalize(pack, "the variant pack");
  // One plan at a time: cuDNN's execution plans are not safe to run from several threads at once.
  const std::lock_guard<std::mutex> lock(mutex_);
  check(cudnn().BackendExecute(dnn, plans_.at(plan)->plan.get(), pack.get()), "the fused convolution");
}

}  // namespace wpk::cuda
