// Conv and com.wpk FusedConv on wpk's own kernels: NHWC (channels_last) activations, ungrouped,
// constant float32 weights packed at load into the layout the kernel reads, bias, residual and
// activation fused into the one store. Three kernels, each a family of configs:
//   kernel=direct_avx2,group_kb=G,pixels=P   register-tile direct conv (avx2_conv.hpp)
//   kernel=winograd_avx2                     Winograd F(4x4, 3x3) (avx2_winograd.hpp)
//   kernel=winograd_avx512                   the same, its products on the AVX-512 streaming tile
//   kernel=stream_avx512,block=B             weight streaming (stream_conv.hpp)
// Which runs is the cost model's call, or tuning's: describe_conv says how each computes.

#include <algorithm>
#include <optional>

#include "backends/cpu/avx2_conv.hpp"
#include "backends/cpu/avx2_winograd.hpp"
#include "backends/cpu/conv_config.hpp"
#include "backends/cpu/cpu_kernels.hpp"
#include "backends/cpu/stream_conv.hpp"
#include "backends/cpu/weight_packing.hpp"
#include "backends/reference/conv_pool.hpp"
#include "core/page_memory.hpp"
#include "graph/fused_ops.hpp"

namespace wpk::cpu {
namespace {

bool config_runs(const ConvConfig& c, const StreamConvShape& s) {
  switch (c.kernel) {
    case ConvConfig::Kernel::DirectAvx2: return avx2_conv_runs(s);
    case ConvConfig::Kernel::WinogradAvx2: return avx2_winograd_runs(s);
    case ConvConfig::Kernel::WinogradAvx512: return avx2_winograd_runs(s) && stream_conv_available();
    case ConvConfig::Kernel::StreamAvx512: return stream_conv_runs(s, c.block);
  }
  return false;
}

class CpuConvKernel : public Kernel {
 public:
  CpuConvKernel(const Node& node, const Tensor& w, Tensor b, ConvConfig config)
      : node_(node), config_(config), name_(conv_kernel_name(config.kernel)), ws_(w.shape()), bias_(std::move(b)),
        epilogue_(*conv_epilogue(node, bias_)), residual_(has_fused_residual(node)) {
    const std::int64_t block = config.kernel == ConvConfig::Kernel::StreamAvx512 ? config.block : 16;
    packed_ = pack_acdb(w.data<float>(), ws_[0], ws_[1], ws_[2], ws_[3], block);
    if (winograd()) {
      StreamConvShape s;
      s.ic = ws_[1];
      s.oc = ws_[0];
      const std::shared_ptr<void> bytes = long_lived_zeroed(avx2_winograd_weights_size(s) * sizeof(float));
      float* u = static_cast<float*>(bytes.get());
      avx2_winograd_weights(s, packed_.get(), u);
      packed_ = std::shared_ptr<const float>(bytes, u);  // the Acdb16a copy was only the way there
    }
  }

  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    require_f32(ctx, x, "input");
    const StreamConvShape s = conv_geometry(ctx, x.shape(), ws_);
    Tensor& y = ctx.allocate_output(0, DType::Float32, {s.n, s.oh, s.ow, s.oc});
    if (y.numel() == 0) return;  // an empty batch or image: nothing to compute
    if (!config_runs(config_, s)) ctx.fail(ErrorCode::Unsupported, name_ + " does not run input " + shape_to_string(x.shape()));
    if (residual_) copy_residual(ctx, 3, y);
    switch (config_.kernel) {
      case ConvConfig::Kernel::DirectAvx2:
        avx2_conv(s, x.data<float>(), packed_.get(), epilogue_, y.data<float>(), {config_.group_kb << 10, config_.pixels});
        break;
      case ConvConfig::Kernel::WinogradAvx2:
      case ConvConfig::Kernel::WinogradAvx512:
        avx2_winograd_conv(s, x.data<float>(), packed_.get(), epilogue_, y.data<float>(),
                           config_.kernel == ConvConfig::Kernel::WinogradAvx512);
        break;
      case ConvConfig::Kernel::StreamAvx512:
        stream_conv(s, x.data<float>(), packed_.get(), config_.block, epilogue_, y.data<float>());
        break;
    }
  }

  bool runs(const std::vector<const Tensor*>& inputs) const override {
    const std::optional<StreamConvShape> s = input_conv_geometry(node_, inputs, ws_);
    return s && (s->n * s->oh * s->ow == 0 || config_runs(config_, *s));
  }

  KernelProfile profile() const override {
    KernelProfile p;
    p.name = name_;
    p.vector_bits = config_.kernel == ConvConfig::Kernel::StreamAvx512 || config_.kernel == ConvConfig::Kernel::WinogradAvx512 ? 512 : 256;
    return p;
  }
  bool owns_input(std::size_t i) const override { return i == 1; }

 private:
  bool winograd() const {
    return config_.kernel == ConvConfig::Kernel::WinogradAvx2 || config_.kernel == ConvConfig::Kernel::WinogradAvx512;
  }

  const Node& node_;  // the graph's, which outlives the session's kernels
  ConvConfig config_;
  std::string name_;
  Shape ws_;
  Tensor bias_;
  StreamConvEpilogue epilogue_;
  bool residual_;
  std::shared_ptr<const float> packed_;  // Acdb{block}a, or the Winograd-transformed weights
};

}  // namespace

StreamConvShape conv_geometry(const KernelContext& ctx, const Shape& x, const Shape& ws) {
  if (x.size() != 4 || x[3] != ws[1])
    ctx.fail(ErrorCode::InvalidArgument, "input " + shape_to_string(x) + " does not fit weights " + shape_to_string(ws) +
                                             " (NHWC input with " + std::to_string(ws[1]) + " channels expected)");
  const Shape nchw = {x[0], x[3], x[1], x[2]};
  const reference::Window win = reference::conv_window(ctx, nchw, {ws[2], ws[3]}, false);
  return {x[0], x[1], x[2], x[3], win.out[1], win.out[2], ws[0], ws[2], ws[3], win.stride[1], win.stride[2],
          win.pad_begin[1], win.pad_begin[2], win.dilation[1], win.dilation[2]};
}

std::optional<StreamConvShape> input_conv_geometry(const Node& node, const std::vector<const Tensor*>& inputs,
                                                   const Shape& ws) {
  if (inputs.empty() || !inputs[0]) return std::nullopt;
  try {  // conv_geometry fails on a rank or channel count that does not fit the weights
    KernelContext ctx(node, {});
    return conv_geometry(ctx, inputs[0]->shape(), ws);
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::optional<StreamConvEpilogue> conv_epilogue(const Node& node, const Tensor& bias) {
  StreamConvEpilogue e;
  e.bias = bias.empty() ? nullptr : bias.data<float>();
  e.accumulate = has_fused_residual(node);
  const std::string act = node.attr_string("activation", "");
  const std::vector<float> params = node.attr_floats("activation_params", {});
  if (act == "Relu") {
    e.act = StreamConvEpilogue::Act::Relu;
  } else if (act == "Clip" && params.size() == 2) {
    e.act = StreamConvEpilogue::Act::Clip;
    e.lo = params[0];
    e.hi = params[1];
  } else if (act == "Gelu") {
    e.act = StreamConvEpilogue::Act::Gelu;
  } else if (act == "GeluTanh") {
    e.act = StreamConvEpilogue::Act::GeluTanh;
  } else if (!act.empty()) {
    return std::nullopt;
  }
  return e;
}

std::string conv_unsupported(const Node& node, const Graph& graph) {
  if (node.attr_int("channels_last", 0) != 1) return "wpk's conv kernels read NHWC (channels_last) activations only";
  if (node.attr_int("group", 1) != 1) return "wpk's conv kernels are ungrouped";
  if (node.inputs.size() < 2) return "needs weights";
  const Tensor* w = graph.initializer(node.inputs[1]);
  if (!w || w->dtype() != DType::Float32 || w->rank() != 4) return "weights are not a constant 4-D float32 tensor";
  if (node.inputs.size() > 2 && node.inputs[2] != kNoValue) {
    const Tensor* b = graph.initializer(node.inputs[2]);
    if (!b || b->dtype() != DType::Float32 || b->numel() != w->shape()[0]) return "bias is not a constant float32 [C_out]";
  }
  if (!conv_epilogue(node, Tensor())) return "activation " + node.attr_string("activation", "") + " is not fused by wpk's conv kernels";
  const ValueInfo& x = graph.value(node.inputs[0]);
  if (x.dtype != DType::Float32 && x.dtype != DType::Undefined) return "input is not float32";
  if (conv_configs(node, graph).empty()) return "no wpk conv kernel runs on this CPU for these weights";
  return "";
}

std::vector<std::string> conv_configs(const Node& node, const Graph& graph) {
  std::vector<std::string> out;
  const Tensor* w = node.inputs.size() > 1 ? graph.initializer(node.inputs[1]) : nullptr;
  if (!w || w->rank() != 4) return out;
  const Shape& ws = w->shape();
  StreamConvShape probe;  // what the kernels' can-run checks read from the weights alone
  probe.n = probe.oh = probe.ow = 1;
  probe.ic = ws[1];
  probe.oc = ws[0];
  probe.kh = ws[2];
  probe.kw = ws[3];
  const std::vector<std::int64_t> strides = node.attr_ints("strides", {1, 1}), dilations = node.attr_ints("dilations", {1, 1});
  if (strides.size() == 2 && dilations.size() == 2) {
    probe.sh = strides[0];
    probe.sw = strides[1];
    probe.dh = dilations[0];
    probe.dw = dilations[1];
  }
  const std::optional<StreamConvEpilogue> e = conv_epilogue(node, Tensor());
  for (const ConvConfig& c : all_conv_configs()) {
    if (c.kernel == ConvConfig::Kernel::StreamAvx512 && !(e && stream_conv_fuses(*e))) continue;
    if (config_runs(c, probe)) out.push_back(c.text());
  }
  return out;
}

std::unique_ptr<Kernel> make_conv(const Node& node, const Graph& graph, const std::string& config_text) {
  const std::vector<std::string> offered = conv_configs(node, graph);
  const std::string text = config_text.empty() ? (offered.empty() ? "" : offered.front()) : config_text;
  const std::optional<ConvConfig> config = ConvConfig::parse(text);
  if (!config || std::find(offered.begin(), offered.end(), text) == offered.end())
    throw Error(ErrorCode::Internal, node_label(node) + "the cpu backend has no conv configuration '" + config_text + "'");
  const Tensor* b = node.inputs.size() > 2 && node.inputs[2] != kNoValue ? graph.initializer(node.inputs[2]) : nullptr;
  return std::make_unique<CpuConvKernel>(node, *graph.initializer(node.inputs[1]), b ? *b : Tensor(), *config);
}

std::optional<KernelProfile> describe_conv(const Node& node, const std::string& config_text, const InputShapes& shapes,
                                           int threads) {
  const std::optional<ConvConfig> config = ConvConfig::parse(config_text);
  if (!config || shapes.size() < 2 || !shapes[0] || !shapes[1] || shapes[1]->size() != 4) return std::nullopt;
  try {
    KernelContext ctx(node, {});
    const StreamConvShape s = conv_geometry(ctx, *shapes[0], *shapes[1]);
    if (!config_runs(*config, s)) return std::nullopt;
    return describe_conv(*config, s, threads);
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace wpk::cpu
