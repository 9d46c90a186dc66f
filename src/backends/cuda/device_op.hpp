#pragma once
// One node of a device region (region_kernel.hpp) prepared for its static shapes: cuDNN's
// convolution and pooling, cuBLAS's products, and generated kernels (generated_kernels.hpp) for
// the element-wise ops and the epilogues, compiled by NVRTC for the device at load.
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend_names.hpp"
#include "backends/cuda/device.hpp"
#include "backends/cuda/elementwise_kernels.hpp"
#include "backends/cuda/tuning_records.hpp"
#include "codegen/cuda_printer.hpp"
#include "codegen/jit/cubin_store.hpp"
#include "codegen/jit/nvrtc_compiler.hpp"
#include "wpk/graph.hpp"

namespace wpk::cuda {

struct DeviceTensor {
  CUdeviceptr ptr = 0;
  Shape shape;
  std::size_t bytes() const { return static_cast<std::size_t>(shape_numel(shape)) * sizeof(float); }
};

// What a launch may use besides its operands. Ops of one region run one after another on one
// stream, so they share one scratch buffer and one cuDNN workspace.
struct LaunchEnv {
  const StreamHandles& handles;
  CUdeviceptr scratch = 0;    // scratch_bytes() of the op, at least
  CUdeviceptr workspace = 0;  // workspace_bytes() of the op, at least
  CUdeviceptr zeros = 0;      // zeros_bytes() of the op, at least, all zero and never written
};

class DeviceOp {
 public:
  virtual ~DeviceOp() = default;
  // Enqueues the op on the stream; in holds the node's inputs (0 for an omitted one).
  virtual void launch(const LaunchEnv& env, const std::vector<DeviceTensor>& in, const DeviceTensor& out) const = 0;
  // What runs, for profiles: "cudnn:conv(algo=...)+gen:epilogue".
  virtual std::string describe() const = 0;
  virtual std::size_t scratch_bytes() const { return 0; }
  virtual std::size_t workspace_bytes() const { return 0; }
  virtual std::size_t zeros_bytes() const { return 0; }
};

// A generated kernel compiled for this process's device, shared by every op that prints the same
// source.
class GeneratedKernel {
 public:
  // From this process's kernels, else `store` (null: none) or NVRTC.
  static std::shared_ptr<const GeneratedKernel> obtain(const codegen::PrintedCudaKernel& printed, codegen::CubinStore* store);
  void launch(CUstream stream, std::vector<CUdeviceptr> args) const;
  const std::string& symbol() const { return printed_.symbol; }
  const codegen::PrintedCudaKernel& printed() const { return printed_; }
  int registers() const { return registers_; }  // per thread, from the cubin; -1 unknown
  GeneratedKernel(codegen::PrintedCudaKernel printed, const std::string& cubin)
      : printed_(std::move(printed)), module_(cubin, printed_.symbol), registers_(codegen::cubin_register_count(cubin)) {}

 private:
  codegen::PrintedCudaKernel printed_;
  LoadedModule module_;
  int registers_ = -1;
};

// Tuning at load (SessionOptions::tuning): ops with generated candidates search their schedules
// with this strategy and measure them against the libraries'.
struct SearchSettings {
  std::string algorithm = "ga";
  std::uint64_t seed = 0;
  std::size_t trials = 16;  // per distinct op
};

// What preparing an op sees: the node, the region's graph (constants, attributes), the operands
// on the device with memory to measure on, and the region's stream.
struct PrepareEnv {
  const Node& node;
  const Graph& graph;
  std::vector<DeviceTensor> in;
  DeviceTensor out;
  const StreamHandles& handles;
  const SearchSettings* search = nullptr;  // null: no tuning
  // Choices already made in this region for an identical op ("cudnn" or a generated config), by
  // the op's signature: repeated layers are measured once.
  std::map<std::string, std::string>* choices = nullptr;
  codegen::CubinStore* cubins = nullptr;  // the cache folder's compiled kernels
  const TuningRecords* records = nullptr;  // earlier tuning's choices, and where new ones go
  // Library variants left out (cuda_backend_names.hpp: kCublasLtVariant, kCudnnGraphVariant).
  const std::set<std::string>* disabled = nullptr;
  bool allows(const char* variant) const { return !disabled || !disabled->count(variant); }
};

// Throws Error(Unsupported) for a node support.hpp would have refused.
std::unique_ptr<DeviceOp> prepare_device_op(const PrepareEnv& env);

// The op families (one file each).
std::unique_ptr<DeviceOp> prepare_conv(const PrepareEnv& env);
std::unique_ptr<DeviceOp> prepare_product(const PrepareEnv& env);
std::unique_ptr<DeviceOp> prepare_pool(const PrepareEnv& env);
std::unique_ptr<DeviceOp> prepare_generated(const PrepareEnv& env);
std::unique_ptr<DeviceOp> prepare_layer_norm(const PrepareEnv& env);
std::unique_ptr<DeviceOp> prepare_softmax(const PrepareEnv& env);
std::unique_ptr<DeviceOp> prepare_attention(const PrepareEnv& env);
// The kernel of an element-wise group (generated_kernels.hpp), reading its inputs in order.
std::unique_ptr<DeviceOp> prepare_elementwise_group(const PrepareEnv& env, const ElementwiseGroup& group);

// A depth-first group (generated_kernels.hpp: depth_first_groups) replaces two prepared ops: the
// depthwise convolution and the pointwise one that reads it, each on its buffers in the region.
struct SeparateOps {
  const DeviceOp& depthwise;
  std::vector<DeviceTensor> depthwise_in;
  DeviceTensor depthwise_out;
  const DeviceOp& pointwise;
  std::vector<DeviceTensor> pointwise_in;
  DeviceTensor pointwise_out;
};
// The group's buffers before its output: the depthwise input, weights and bias (when it has
// one), then the pointwise weights, bias and residual (when given).
std::vector<ValueId> depth_first_inputs(const Node& depthwise, const Node& pointwise);
// With tuning, the generated group's schedules searched against `separate`; without, the schedule
// an earlier tuning recorded. env is the pointwise node's, its `in` the group's inputs in the
// order above. Null: the two ops stay.
std::unique_ptr<DeviceOp> prepare_depth_first(const PrepareEnv& env, const Node& depthwise, const SeparateOps& separate);

// A generated kernel's buffers for an op with an optional bias (input 2) and residual (input 3):
// the first two inputs, then the bias and the residual when given, then the output.
std::vector<CUdeviceptr> kernel_args(const std::vector<DeviceTensor>& in, const DeviceTensor& out, bool bias, bool residual);

// The epilogue act(x + bias + z) of a convolution or product whose result went to scratch, as a
// generated kernel; null when there is nothing to apply. bias broadcasts to `out` as given.
struct Epilogue {
  std::shared_ptr<const GeneratedKernel> kernel;
  bool has_bias = false, has_residual = false;
  void launch(CUstream stream, CUdeviceptr x, CUdeviceptr bias, CUdeviceptr residual, CUdeviceptr y) const;
};
Epilogue make_epilogue(codegen::CubinStore* store, const std::string& name, const Shape& out, const Shape* bias, bool residual,
                       const std::string& activation, const std::vector<float>& params, float bias_scale = 1.0f);

}  // namespace wpk::cuda
