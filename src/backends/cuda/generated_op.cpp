// Element-wise ONNX ops, Transpose and the epilogues as generated kernels, and the process-wide
// cache of compiled ones.
#include <map>
#include <numeric>

#include "backends/cuda/device_op.hpp"
#include "backends/cuda/generated_kernels.hpp"
#include "backends/cuda/support.hpp"
#include "codegen/jit/nvrtc_compiler.hpp"
#include "codegen/loop_ir.hpp"

namespace wpk::cuda {

using namespace codegen;

std::shared_ptr<const GeneratedKernel> GeneratedKernel::obtain(const PrintedCudaKernel& printed, CubinStore* store) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const GeneratedKernel>> cache;  // by source
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(printed.source); it != cache.end()) return it->second;
  }
  // Compiled outside the lock: a search compiles its candidates on several threads.
  const Nvrtc* nvrtc = Nvrtc::get();
  const DeviceInfo& device = Device::get().info();
  std::string cubin;
  try {
    if (store) {
      cubin = store->obtain(nvrtc, printed.source, printed.symbol, device.sm,
                            device.name + " driver " + std::to_string(device.driver_version));
    } else {
      std::string why;
      if (!nvrtc) Nvrtc::get(&why);
      if (!nvrtc) throw std::runtime_error(why);
      cubin = nvrtc->compile(printed.source, printed.symbol, device.sm).cubin;
    }
  } catch (const std::exception& e) {
    throw Error(ErrorCode::Internal, std::string("CUDA: a generated kernel could not be had: ") + e.what());
  }
  auto k = std::make_shared<const GeneratedKernel>(printed, cubin);
  std::lock_guard<std::mutex> lock(mu);
  return cache.emplace(printed.source, k).first->second;
}

void GeneratedKernel::launch(CUstream stream, std::vector<CUdeviceptr> args) const {
  if (args.size() != printed_.args)
    throw Error(ErrorCode::Internal, printed_.symbol + " takes " + std::to_string(printed_.args) + " buffers, given " +
                                         std::to_string(args.size()));
  std::vector<void*> params;
  for (CUdeviceptr& a : args) params.push_back(&a);
  check(driver().LaunchKernel(module_.function(), static_cast<unsigned>(printed_.grid), 1, 1,
                              static_cast<unsigned>(printed_.threads), 1, 1, 0, stream, params.data(), nullptr),
        "launching " + printed_.symbol);
}

std::vector<CUdeviceptr> kernel_args(const std::vector<DeviceTensor>& in, const DeviceTensor& out, bool bias, bool residual) {
  std::vector<CUdeviceptr> args = {in[0].ptr, in[1].ptr};
  if (bias) args.push_back(in[2].ptr);
  if (residual) args.push_back(in[3].ptr);
  args.push_back(out.ptr);
  return args;
}

void Epilogue::launch(CUstream stream, CUdeviceptr x, CUdeviceptr bias, CUdeviceptr residual, CUdeviceptr y) const {
  std::vector<CUdeviceptr> args = {x};
  if (has_bias) args.push_back(bias);
  if (has_residual) args.push_back(residual);
  args.push_back(y);
  kernel->launch(stream, std::move(args));
}

Epilogue make_epilogue(CubinStore* store, const std::string& name, const Shape& out, const Shape* bias, bool residual,
                       const std::string& activation, const std::vector<float>& params, float bias_scale) {
  Epilogue e;
  e.has_bias = bias != nullptr;
  e.has_residual = residual;
  if (!e.has_bias && !residual && activation.empty()) return e;
  std::vector<Shape> operands = {out};
  if (bias) operands.push_back(*bias);
  if (residual) operands.push_back(out);
  e.kernel = GeneratedKernel::obtain(elementwise_kernel(name, out, operands, [&](const std::vector<Expr>& v) {
    Expr x = v[0];
    std::size_t next = 1;
    if (e.has_bias) x = x + (bias_scale == 1.0f ? v[next] : constant(bias_scale) * v[next]), ++next;
    if (e.has_residual) x = x + v[next];
    return activation_expr(activation, params, x);
  }), store);
  return e;
}

namespace {

class GeneratedOp : public DeviceOp {
 public:
  GeneratedOp(std::shared_ptr<const GeneratedKernel> k, std::vector<std::size_t> operands)
      : kernel_(std::move(k)), operands_(std::move(operands)) {}
  void launch(const LaunchEnv& env, const std::vector<DeviceTensor>& in, const DeviceTensor& out) const override {
    std::vector<CUdeviceptr> args;
    for (std::size_t i : operands_) args.push_back(in[i].ptr);
    args.push_back(out.ptr);
    kernel_->launch(env.handles.stream(), std::move(args));
  }
  std::string describe() const override { return "gen:" + kernel_->symbol(); }

 private:
  std::shared_ptr<const GeneratedKernel> kernel_;
  std::vector<std::size_t> operands_;  // which node inputs the kernel reads, in order
};

PrintedCudaKernel transpose_kernel(const Shape& in, const std::vector<std::int64_t>& perm, const Shape& out) {
  std::vector<Var> axes;
  for (std::size_t d = 0; d < out.size(); ++d) axes.push_back(var("d" + std::to_string(d), out[d]));
  std::vector<Affine> index(in.size());
  for (std::size_t d = 0; d < out.size(); ++d) index[static_cast<std::size_t>(perm[d])] = Affine(axes[d]);
  const Buffer x = buffer("x", in);
  std::vector<std::int64_t> out_dims(out.begin(), out.end());
  if (axes.empty()) {
    axes.push_back(var("d0", 1));
    out_dims = {1};
  }
  const Compute c = compute("transpose", buffer("y", out_dims), axes, {}, in.empty() ? load(x, {}) : load(x, index), nullptr, {x});
  Schedule s(c);
  const auto [rows, lanes] = s.split(axes.back(), std::min<std::int64_t>(256, axes.back()->extent));
  for (std::size_t d = 0; d + 1 < axes.size(); ++d) s.bind_block(axes[d]);
  s.bind_block(rows);
  s.bind_thread(lanes);
  std::string symbol = "wpk_transpose";
  for (std::int64_t d : in) symbol += "_" + std::to_string(d);
  symbol += "_p";
  for (std::int64_t p : perm) symbol += std::to_string(p);
  return print_cuda(lower(s), symbol, "cuda backend");
}

}  // namespace

std::unique_ptr<DeviceOp> prepare_elementwise_group(const PrepareEnv& env, const ElementwiseGroup& group) {
  std::vector<std::size_t> operands(group.inputs.size());
  std::iota(operands.begin(), operands.end(), std::size_t{0});
  return std::make_unique<GeneratedOp>(GeneratedKernel::obtain(group.printed, env.cubins), std::move(operands));
}

std::unique_ptr<DeviceOp> prepare_generated(const PrepareEnv& env) {
  const Node& n = env.node;
  if (n.op_type == "Transpose") {
    const Shape& in = env.in[0].shape;
    std::vector<std::int64_t> perm = n.attr_ints("perm");
    if (perm.empty())
      for (std::size_t d = in.size(); d-- > 0;) perm.push_back(static_cast<std::int64_t>(d));
    return std::make_unique<GeneratedOp>(GeneratedKernel::obtain(transpose_kernel(in, perm, env.out.shape), env.cubins),
                                         std::vector<std::size_t>{0});
  }
  const std::vector<std::size_t> operands = elementwise_operands(n);
  std::vector<Shape> shapes;
  for (std::size_t i : operands) shapes.push_back(env.in[i].shape);
  auto printed = elementwise_kernel(elementwise_kernel_name(n.op_type), env.out.shape, shapes,
                                    [&](const std::vector<Expr>& v) { return elementwise_expr(n, env.graph, v); });
  return std::make_unique<GeneratedOp>(GeneratedKernel::obtain(printed, env.cubins), operands);
}

std::unique_ptr<DeviceOp> prepare_device_op(const PrepareEnv& env) {
  const Node& n = env.node;
  if (n.op_type == "Conv" || n.op_type == "FusedConv") return prepare_conv(env);
  if (n.op_type == "Gemm" || n.op_type == "MatMul" || n.op_type == "FusedMatMul") return prepare_product(env);
  if (n.op_type == "MaxPool" || n.op_type == "AveragePool" || n.op_type == "GlobalAveragePool") return prepare_pool(env);
  if (is_elementwise_op(n) || n.op_type == "Transpose") return prepare_generated(env);
  if (n.op_type == "LayerNormalization") return prepare_layer_norm(env);
  if (n.op_type == "Softmax") return prepare_softmax(env);
  if (n.op_type == "Attention") return prepare_attention(env);
  throw Error(ErrorCode::Unsupported, "CUDA: no device op for " + n.op_type);
}

}  // namespace wpk::cuda
