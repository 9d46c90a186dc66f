// A depth-first group (generated_kernels.hpp: depth_first_groups) as one op: the depthwise
// convolution computed tile by tile inside the pointwise convolution that reads it, so its output
// never goes to device memory. Only tuning makes one (the two ops as prepared against the
// generated pair's schedules, the faster kept and recorded); a later session takes the record.

#include <algorithm>

#include "backends/cuda/device_op.hpp"
#include "backends/cuda/generated_kernels.hpp"
#include "backends/cuda/kernel_search.hpp"

namespace wpk::cuda {
namespace {

class DepthFirstOp : public DeviceOp {
 public:
  DepthFirstOp(std::shared_ptr<const GeneratedKernel> kernel, std::string config)
      : kernel_(std::move(kernel)), config_(std::move(config)) {}

  void launch(const LaunchEnv& env, const std::vector<DeviceTensor>& in, const DeviceTensor& out) const override {
    std::vector<CUdeviceptr> args;
    for (const DeviceTensor& t : in) args.push_back(t.ptr);
    args.push_back(out.ptr);
    kernel_->launch(env.handles.stream(), std::move(args));
  }
  std::string describe() const override { return "gen:" + kernel_->symbol() + "(" + config_ + ")"; }

 private:
  std::shared_ptr<const GeneratedKernel> kernel_;
  std::string config_;
};

}  // namespace

std::vector<ValueId> depth_first_inputs(const Node& depthwise, const Node& pointwise) {
  const ConvEpilogue d = conv_epilogue(depthwise), p = conv_epilogue(pointwise);
  std::vector<ValueId> in = {depthwise.inputs[0], depthwise.inputs[1]};
  if (d.bias) in.push_back(depthwise.inputs[2]);
  in.push_back(pointwise.inputs[1]);
  if (p.bias) in.push_back(pointwise.inputs[2]);
  if (p.residual) in.push_back(pointwise.inputs[3]);
  return in;
}

std::unique_ptr<DeviceOp> prepare_depth_first(const PrepareEnv& env, const Node& depthwise, const SeparateOps& separate) {
  const ConvGeometry dg = conv_geometry(depthwise, env.graph), pg = conv_geometry(env.node, env.graph);
  const ConvEpilogue de = conv_epilogue(depthwise), pe = conv_epilogue(env.node);
  GeneratedCandidates c;
  c.knobs = cuda_conv_knobs();
  // The depthwise values live in the staged tile: a schedule without one has nowhere to put them.
  c.valid = [pg](const search::Space& sp, const search::Point& p) {
    const CudaConvConfig cfg = conv_config_at(sp, p);
    return cfg.stage_ic > 0 && cuda_conv_config_valid(pg, cfg);
  };
  c.predict = [pg, gpu = gpu_spec_of(Device::get().info())](const search::Space& sp, const search::Point& p) {
    const CudaConvConfig cfg = conv_config_at(sp, p);
    return predict_conv_seconds(gpu, pg, cfg, estimated_conv_registers(cfg));
  };
  c.print = [=](const search::Space& sp, const search::Point& p) {
    return depth_first_conv_kernel(dg, de, pg, conv_config_at(sp, p), pe.bias, pe.residual, pe.activation, pe.params);
  };
  for (const DeviceTensor& t : env.in) c.args.push_back(t.ptr);
  c.args.push_back(env.out.ptr);
  const std::string key = "depth_first_" + conv_signature(dg, de) + "+" + conv_signature(pg, pe);
  Choice choice;
  if (env.search) {
    const DeviceOp& d = separate.depthwise;
    const DeviceOp& p = separate.pointwise;
    const std::size_t zero_bytes = std::max(d.zeros_bytes(), p.zeros_bytes());
    DeviceBuffer scratch(std::max(d.scratch_bytes(), p.scratch_bytes()), "measuring a depth-first group"),
        workspace(std::max(d.workspace_bytes(), p.workspace_bytes()), "measuring a depth-first group"),
        zeros(zero_bytes, "measuring a depth-first group");
    if (zero_bytes) check(driver().MemsetD32Async(zeros.get(), 0, zero_bytes / 4, env.handles.stream()), "zeroing");
    const LaunchEnv measuring{env.handles, scratch.get(), workspace.get(), zeros.get()};
    choice = search_generated(env, key, "depth-first conv", d.describe() + " then " + p.describe(), c, [&] {
      d.launch(measuring, separate.depthwise_in, separate.depthwise_out);
      p.launch(measuring, separate.pointwise_in, separate.pointwise_out);
    });
  } else {
    choice = recorded_choice(env, key, c);
  }
  if (!choice.kernel) return nullptr;
  return std::make_unique<DepthFirstOp>(choice.kernel, choice.config);
}

}  // namespace wpk::cuda
