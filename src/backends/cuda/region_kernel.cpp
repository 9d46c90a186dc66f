#include <map>
#include <mutex>
#include <optional>

#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/device_op.hpp"
#include "backends/cuda/support.hpp"
#include "graph/fused_ops.hpp"
#include "runtime/logging.hpp"

namespace wpk::cuda {
namespace {

Shape static_shape(const Graph& g, ValueId v) {
  Shape s;
  for (const Dim& d : *g.value(v).dims) s.push_back(d.value);
  return s;
}

// A view op's output shape, from its input's (Reshape, Flatten, Squeeze, Unsqueeze, Identity):
// the graph's static shape of the output says it already.
class RegionKernel : public Kernel {
 public:
  RegionKernel(const Node& node, const Graph& body) : name_(node.name), cubins_(node.attr_string("kernel_cache", "")) {
    const Device& device = Device::get();
    (void)device;
    // Every value's device tensor: region inputs and intermediates get memory of their own,
    // constants are uploaded, views share their input's memory.
    std::map<ValueId, DeviceTensor> at;
    auto allocate = [&](ValueId v, const char* what) {
      buffers_.emplace_back(static_cast<std::size_t>(shape_numel(static_shape(body, v))) * sizeof(float),
                            std::string(what) + " '" + body.value(v).name + "' of region " + name_);
      at[v] = {buffers_.back().get(), static_shape(body, v)};
    };
    for (ValueId v : body.inputs()) {
      allocate(v, "input");
      inputs_.push_back(at[v]);
    }
    for (const auto& [v, t] : body.initializers()) {
      if (t.dtype() != DType::Float32) continue;  // shapes and axes of view ops stay on the host
      allocate(v, "constant");
      check(driver().MemcpyHtoDAsync(at[v].ptr, t.raw(), t.nbytes(), handles_.stream()), "uploading a constant");
    }
    handles_.synchronize("uploading constants");
    // Tuning asked for at placement (attributes tune_algorithm, tune_seed, tune_trials).
    std::optional<SearchSettings> search;
    if (node.has_attr("tune_algorithm")) {
      search = SearchSettings{};
      search->algorithm = node.attr_string("tune_algorithm", "ga");
      search->seed = static_cast<std::uint64_t>(node.attr_int("tune_seed", 0));
      search->trials = static_cast<std::size_t>(std::max<std::int64_t>(1, node.attr_int("tune_trials", 16)));
    }
    std::map<std::string, std::string> choices;
    for (const Node& n : body.nodes()) {
      if (is_view_op(n)) {
        at[n.outputs[0]] = {at.at(n.inputs[0]).ptr, static_shape(body, n.outputs[0])};
        continue;
      }
      allocate(n.outputs[0], "value");
      Step step;
      for (ValueId v : n.inputs) step.in.push_back(v == kNoValue ? DeviceTensor{} : at.at(v));
      step.out = at.at(n.outputs[0]);
      step.op = prepare_device_op({n, body, step.in, step.out, handles_, search ? &*search : nullptr, &choices, &cubins_, current_tuning_records()});
      scratch_bytes_ = std::max(scratch_bytes_, step.op->scratch_bytes());
      workspace_bytes_ = std::max(workspace_bytes_, step.op->workspace_bytes());
      zeros_bytes_ = std::max(zeros_bytes_, step.op->zeros_bytes());
      steps_.push_back(std::move(step));
    }
    for (ValueId v : body.outputs()) outputs_.push_back(at.at(v));
    scratch_ = DeviceBuffer(scratch_bytes_, "scratch of region " + name_);
    workspace_ = DeviceBuffer(workspace_bytes_, "cuDNN workspace of region " + name_);
    zeros_ = DeviceBuffer(zeros_bytes_, "zeros of region " + name_);
    if (zeros_bytes_)
      check(driver().MemsetD32Async(zeros_.get(), 0, zeros_bytes_ / sizeof(float), handles_.stream()), "zeroing");
    for (const Step& s : steps_) kernels_ += (kernels_.empty() ? "" : ", ") + s.op->describe();
    // Every pointer a step uses is fixed now: the whole sequence becomes one CUDA graph, a run's
    // launches one call. Work a library will not let be captured is launched step by step.
    try {
      captured_ = std::make_unique<CapturedWork>(handles_, [this] { launch_steps(); });
    } catch (const Error& e) {
      logger().info("device region {}: launched step by step, as it could not be captured ({})", name_, e.what());
    }
  }

  void run(KernelContext& ctx) const override {
    // One device copy of the region's values: overlapping runs take turns.
    std::lock_guard<std::mutex> lock(mu_);
    Device::get().activate();
    const CUstream stream = handles_.stream();
    for (std::size_t i = 0; i < inputs_.size(); ++i) {
      const Tensor& t = ctx.input(i);
      if (t.shape() != inputs_[i].shape || t.dtype() != DType::Float32)
        ctx.fail(ErrorCode::InvalidArgument, "input " + std::to_string(i) + " of the device region is " + dtype_name(t.dtype()) +
                                                 shape_to_string(t.shape()) + ", prepared for float32" +
                                                 shape_to_string(inputs_[i].shape));
      check(driver().MemcpyHtoDAsync(inputs_[i].ptr, t.raw(), t.nbytes(), stream), "copying an input to the device");
    }
    if (captured_) captured_->launch(stream);
    else launch_steps();
    for (std::size_t o = 0; o < outputs_.size(); ++o) {
      if (!ctx.wants_output(o)) continue;
      Tensor& y = ctx.allocate_output(o, DType::Float32, outputs_[o].shape);
      check(driver().MemcpyDtoHAsync(y.raw(), outputs_[o].ptr, y.nbytes(), stream), "copying an output from the device");
    }
    handles_.synchronize("running device region " + name_);
  }

  void launch_steps() const {
    const LaunchEnv env{handles_, scratch_.get(), workspace_.get(), zeros_.get()};
    for (const Step& s : steps_) s.op->launch(env, s.in, s.out);
  }

  KernelProfile profile() const override {
    KernelProfile p;
    p.name = std::string(captured_ ? "graph" : "region") + "[" + kernels_ + "]";
    return p;
  }

 private:
  struct Step {
    std::vector<DeviceTensor> in;
    DeviceTensor out;
    std::unique_ptr<DeviceOp> op;
  };
  std::string name_;
  codegen::CubinStore cubins_;
  StreamHandles handles_;
  std::vector<DeviceBuffer> buffers_;
  std::vector<DeviceTensor> inputs_, outputs_;
  std::vector<Step> steps_;
  std::size_t scratch_bytes_ = 0, workspace_bytes_ = 0, zeros_bytes_ = 0;
  DeviceBuffer scratch_, workspace_, zeros_;
  std::string kernels_;
  std::unique_ptr<CapturedWork> captured_;
  mutable std::mutex mu_;
};

}  // namespace

std::string CudaBackend::why_unsupported(const Node& node, const Graph&) const {
  if (node.domain != kWpkDomain || node.op_type != kRegionOp) return "the cuda backend runs device regions only";
  const Attribute* body = node.find_attr("body");
  if (!body || body->kind() != Attribute::Kind::Graph) return "a device region without its body";
  return "";
}

std::unique_ptr<Kernel> CudaBackend::prepare(const Node& node, const Graph& graph) const {
  if (std::string why = why_unsupported(node, graph); !why.empty()) throw Error(ErrorCode::Unsupported, node_label(node) + why);
  return std::make_unique<RegionKernel>(node, node.find_attr("body")->g());
}

std::string CudaBackend::version() const {
  std::string v = "cuda";
  if (why_no_cuda_device().empty()) v += "-driver" + std::to_string(Device::get().info().driver_version);
  return v;
}

}  // namespace wpk::cuda
