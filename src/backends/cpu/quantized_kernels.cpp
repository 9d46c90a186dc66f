// QLinearConv, com.wpk QLinearConvAdd and com.wpk MatMulIntegerToFloat on wpk's exact 8-bit
// kernel (avx2_q8_conv.hpp): NHWC codes, constant int8 weights with zero point 0 (per tensor
// or per output channel scales), ungrouped. The products are 1x1 convolutions of their rows.
// Their values are the reference's to the bit: integer sums exact, then the reference's own
// rounding steps (q8_conv_epilogues.hpp). The kernel's arithmetic is the config:
// arithmetic=float (FMAs), arithmetic=int16 (vpmaddwd) or arithmetic=int8 (vpmaddubsw on the
// codes' low 7 bits).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "backends/cpu/avx2_q8_conv.hpp"
#include "backends/cpu/conv_config.hpp"
#include "backends/cpu/conv_walk.hpp"
#include "backends/cpu/cpu_kernels.hpp"
#include "backends/cpu/q8_conv_epilogues.hpp"
#include "backends/op_support.hpp"
#include "graph/fused_ops.hpp"

namespace wpk::cpu {
namespace {

// QLinearConv's inputs, then QLinearConvAdd's (graph/fused_ops.hpp).
enum ConvInput : std::size_t {
  X = 0, XScale, XZero, W, WScale, WZero, YScale, YZero, Bias,
  R = kQLinearConvAddResidual, RScale, RZero, SumScale, SumZero
};
// MatMulIntegerToFloat's.
enum ProductInput : std::size_t { A = 0, B, AScale, BScale, AZero, BZero };

bool is_8bit(DType t) { return t == DType::UInt8 || t == DType::Int8; }

const std::vector<std::string>& arithmetic_configs() {
  static const std::vector<std::string> configs = {"arithmetic=float", "arithmetic=int16", "arithmetic=int8"};
  return configs;
}

std::optional<Q8Arithmetic> parse_arithmetic(const std::string& config) {
  if (config.empty() || config == "arithmetic=float") return Q8Arithmetic::Float32;
  if (config == "arithmetic=int16") return Q8Arithmetic::Int16;
  if (config == "arithmetic=int8") return Q8Arithmetic::Int8;
  return std::nullopt;
}

// "q8_conv__avx2_f32_6x16": op, ISA, arithmetic, tile.
std::string kernel_name(const char* op, Q8Arithmetic a) {
  const char* arithmetic = a == Q8Arithmetic::Int16 ? "i16" : a == Q8Arithmetic::Int8 ? "i8" : "f32";
  return std::string("q8_") + op + "__avx2_" + arithmetic + "_6x16";
}

Q8Arithmetic arithmetic_of(const Node& node, const std::string& config) {
  const std::optional<Q8Arithmetic> a = parse_arithmetic(config);
  if (!a) throw Error(ErrorCode::Internal, node_label(node) + "the cpu backend has no 8-bit configuration '" + config + "'");
  return *a;
}

std::int32_t code_of(const Tensor& t) {
  return t.dtype() == DType::UInt8 ? t.data<std::uint8_t>()[0] : t.data<std::int8_t>()[0];
}

CodeOperand operand_of(const Tensor& zero) { return {zero.dtype() == DType::Int8, code_of(zero)}; }

float scalar(const Tensor& t) { return t.data<float>()[0]; }

// The most any int32 bias moves a sum: avx2_q8_conv_runs's bound.
std::int64_t largest_bias(const Tensor* bias) {
  std::int64_t most = 0;
  if (bias)
    for (std::int64_t i = 0; i < bias->numel(); ++i) most = std::max<std::int64_t>(most, std::llabs(bias->data<std::int32_t>()[i]));
  return most;
}

// Why constant weights w with zero point w_zero (oc output channels) are not the kernel's, or "".
std::string int8_weights_unsupported(const Tensor* w, const Tensor* w_zero, std::int64_t oc) {
  if (!w || w->dtype() != DType::Int8) return "weights are not a constant int8 tensor";
  if (!w_zero || w_zero->dtype() != DType::Int8 || (w_zero->numel() != 1 && w_zero->numel() != oc))
    return "weight zero point is not a constant int8 scalar or per output channel";
  for (std::int64_t i = 0; i < w_zero->numel(); ++i)
    if (w_zero->data<std::int8_t>()[i] != 0) return "weight zero point is not 0";
  return "";
}

class QuantizedConvKernel : public Kernel {
 public:
  QuantizedConvKernel(const Node& node, const Graph& graph, Q8Arithmetic arithmetic)
      : node_(node), name_(kernel_name("conv", arithmetic)), ws_(constant_input(node, graph, W)->shape()),
        x_type_(graph.value(node.inputs[X]).dtype), has_residual_(fused_residual_input(node) == static_cast<int>(R)) {
    const Tensor& w = *constant_input(node, graph, W);
    const std::int64_t ic = ws_[1], taps = ws_[2] * ws_[3];
    const std::int8_t* wd = w.data<std::int8_t>();
    weights_ = pack_q8_weights(arithmetic, ws_[0], ic, taps, [&](std::int64_t o, std::int64_t i, std::int64_t t) {
      return wd[(o * ic + i) * taps + t];
    });
    if (const Tensor* b = constant_input(node, graph, Bias)) bias_.assign(b->data<std::int32_t>(), b->data<std::int32_t>() + b->numel());
    largest_bias_ = largest_bias(constant_input(node, graph, Bias));
    // The requantizing multiplier formed as the reference forms it: x_scale * w_scale[c] / y_scale in float32.
    const float xs = scalar(*constant_input(node, graph, XScale)), ys = scalar(*constant_input(node, graph, YScale));
    const Tensor& wsc = *constant_input(node, graph, WScale);
    std::vector<float> mult;
    for (std::int64_t o = 0; o < ws_[0]; ++o) mult.push_back(xs * wsc.data<float>()[wsc.numel() == 1 ? 0 : o] / ys);
    mult_ = padded_to_blocks(std::move(mult));
    x_ = operand_of(*constant_input(node, graph, XZero));
    conv_ = operand_of(*constant_input(node, graph, YZero));
    if (has_residual_) {
      residual_.operand = operand_of(*constant_input(node, graph, RZero));
      residual_.sum = {scalar(*constant_input(node, graph, YScale)), scalar(*constant_input(node, graph, RScale)),
                       scalar(*constant_input(node, graph, SumScale))};
      out_ = operand_of(*constant_input(node, graph, SumZero));
    } else {
      out_ = conv_;
    }
  }

  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(X);
    if (x.dtype() != x_type_)
      ctx.fail(ErrorCode::InvalidArgument, std::string("input must be ") + dtype_name(x_type_) + ", got " + dtype_name(x.dtype()));
    const StreamConvShape s = conv_geometry(ctx, x.shape(), ws_);
    Tensor& y = ctx.allocate_output(0, out_.is_signed ? DType::Int8 : DType::UInt8, {s.n, s.oh, s.ow, s.oc});
    if (y.numel() == 0) return;
    if (!avx2_q8_conv_runs(s, largest_bias_))
      ctx.fail(ErrorCode::Unsupported, name_ + " does not run input " + shape_to_string(x.shape()));
    RequantizeEpilogue::Residual residual = residual_;
    if (has_residual_) {
      const Tensor& r = ctx.input(R);
      if (r.shape() != y.shape() || r.dtype() != (residual_.operand.is_signed ? DType::Int8 : DType::UInt8))
        ctx.fail(ErrorCode::InvalidArgument, "residual must be " + std::string(dtype_name(y.dtype())) + " " +
                                                 shape_to_string(y.shape()) + ", got " + dtype_name(r.dtype()) + " " +
                                                 shape_to_string(r.shape()));
      residual.codes = r.raw();
    }
    const RequantizeEpilogue e(mult_.data(), conv_, out_, y.raw(), s.oc, residual);
    avx2_q8_conv(s, {x.raw(), x_.is_signed, x_.zero}, weights_, bias_.empty() ? nullptr : bias_.data(), e);
  }

  bool runs(const std::vector<const Tensor*>& inputs) const override {
    const std::optional<StreamConvShape> s = input_conv_geometry(node_, inputs, ws_);
    return s && (s->n * s->oh * s->ow == 0 || avx2_q8_conv_runs(*s, largest_bias_));
  }

  KernelProfile profile() const override { return {name_, 256, 0.6}; }
  bool owns_input(std::size_t i) const override { return i == W; }

 private:
  const Node& node_;  // the graph's, which outlives the session's kernels
  std::string name_;
  Shape ws_;
  DType x_type_;
  bool has_residual_;
  Q8Weights weights_;
  std::vector<std::int32_t> bias_;
  std::int64_t largest_bias_ = 0;
  std::vector<float> mult_;
  CodeOperand x_, conv_, out_;
  RequantizeEpilogue::Residual residual_;
};

class QuantizedProductKernel : public Kernel {
 public:
  QuantizedProductKernel(const Node& node, const Graph& graph, Q8Arithmetic arithmetic)
      : name_(kernel_name("matmul", arithmetic)), a_type_(graph.value(node.inputs[A]).dtype), residual_(fused_residual_input(node) == static_cast<int>(kIntegerProductResidual)) {
    const Tensor& b = *constant_input(node, graph, B);
    k_ = b.dim(0);
    n_ = b.dim(1);
    const std::int8_t* bd = b.data<std::int8_t>();
    weights_ = pack_q8_weights(arithmetic, n_, k_, 1, [&](std::int64_t o, std::int64_t i, std::int64_t) { return bd[i * n_ + o]; });
    const Tensor& bs = *constant_input(node, graph, BScale);
    b_scale_.assign(bs.data<float>(), bs.data<float>() + bs.numel());
    if (const Tensor* bias = constant_input(node, graph, kIntegerProductBias)) bias_ = bias->clone();
    epilogue_ = *conv_epilogue(node, bias_);
    epilogue_.accumulate = residual_;
  }

  void run(KernelContext& ctx) const override {
    const Tensor& a = ctx.input(A);
    const Tensor& as = ctx.input(AScale);
    const Tensor& az = ctx.input(AZero);
    check_integer_product_input(ctx, a_type_, k_);
    Shape y_shape = a.shape();
    y_shape.back() = n_;
    Tensor& y = ctx.allocate_output(0, DType::Float32, y_shape);
    const std::int64_t rows = a.numel() / k_;
    if (residual_) copy_residual(ctx, kIntegerProductResidual, y);
    if (rows == 0) return;
    // A_scale * B_scale[n] in float32, as the definition forms them.
    thread_local std::vector<float> scales;
    scales.assign(static_cast<std::size_t>((n_ + 15) / 16 * 16), 0.0f);
    for (std::int64_t j = 0; j < n_; ++j) scales[j] = scalar(as) * b_scale_[b_scale_.size() > 1 ? j : 0];
    const ScaledFloatEpilogue e(scales.data(), epilogue_, y.data<float>(), n_);
    avx2_q8_conv(pointwise_conv_shape(rows, k_, n_), {a.raw(), a_type_ == DType::Int8, code_of(az)}, weights_, nullptr, e);
  }

  KernelProfile profile() const override { return {name_, 256, 0.6}; }
  bool owns_input(std::size_t i) const override { return i == B; }

 private:
  std::string name_;
  DType a_type_;
  bool residual_;
  std::int64_t k_ = 0, n_ = 0;
  Q8Weights weights_;
  std::vector<float> b_scale_;
  Tensor bias_;
  StreamConvEpilogue epilogue_;
};

// The share of input codes the Int8 arithmetic meets at 128 and above (moved to unsigned), each
// adding a weight row afterwards. A constant zero point at the type's lowest code is a one-sided
// tensor (a ReLU's output), where those are the tail of the range: a few in a hundred in the
// models measured. Any other zero point (or one computed at run time) centres the codes: half.
double high_code_share(const Node& node, const Graph& graph, std::size_t zero_input) {
  const Tensor* zero = node.inputs.size() > zero_input && node.inputs[zero_input] != kNoValue
                           ? constant_input(node, graph, zero_input) : nullptr;
  if (!zero || zero->numel() != 1 || !is_8bit(zero->dtype())) return 0.5;
  const std::int32_t lowest = zero->dtype() == DType::Int8 ? -128 : 0;
  return code_of(*zero) == lowest ? 0.03 : 0.5;
}

// How the kernel computes a conv or product with `input_elements` codes in and `channels` input
// channels a tap, for the cost model. int16: a vpmaddwd does two multiply-adds a 32-bit lane, and
// an add follows it; int8: a vpmaddubsw and a vpmaddwd do four, and an add follows them, and each
// high code (`high_share` of them) adds its weight row at about five times a multiply-add's cost;
// float: an FMA does one. A tap's loop runs over its channel steps (pairs, quads or channels): a
// stem conv's 3 channels leave the tile mostly loop overhead. Each widens its input first (read 1
// byte, write and read 2 or 4; int8 splits it: write and read 1, and lists the high codes).
KernelProfile q8_profile(const std::string& name, Q8Arithmetic a, double input_elements, double channels,
                         double high_share) {
  KernelProfile p{name, 256, 0.6};
  const double steps = a == Q8Arithmetic::Int16 ? std::ceil(channels / 2)
                       : a == Q8Arithmetic::Int8 ? std::ceil(channels / 4) : channels;
  if (a == Q8Arithmetic::Int16) {
    p.work_scale = 0.5;
    p.efficiency = 0.36;
    p.extra_bytes = 5 * input_elements;
  } else if (a == Q8Arithmetic::Int8) {
    p.work_scale = 0.25 + 5 * high_share;
    p.efficiency = 0.32;
    p.extra_bytes = 4 * input_elements;
  } else {
    p.extra_bytes = 9 * input_elements;
  }
  p.efficiency *= std::min(1.0, steps / 8.0);
  return p;
}

double elements_of(const Shape& s) {
  double n = 1;
  for (std::int64_t d : s) n *= static_cast<double>(d);
  return n;
}

}  // namespace

std::vector<std::string> quantized_kernel_names() {
  std::vector<std::string> names;
  for (const char* op : {"conv", "matmul"})
    for (Q8Arithmetic a : {Q8Arithmetic::Float32, Q8Arithmetic::Int16, Q8Arithmetic::Int8}) names.push_back(kernel_name(op, a));
  return names;
}

std::vector<std::string> quantized_configs() { return arithmetic_configs(); }

std::string quantized_conv_unsupported(const Node& node, const Graph& graph) {
  if (!avx2_q8_conv_runs(pointwise_conv_shape(1, 1, 1), 0)) return "wpk's 8-bit kernel needs AVX2";
  if (node.attr_int("channels_last", 0) != 1) return "wpk's 8-bit conv reads NHWC (channels_last) codes only";
  if (node.attr_int("group", 1) != 1) return "wpk's 8-bit conv is ungrouped";
  if (std::string why = qlinear_conv_params_unsupported(node, graph); !why.empty()) return why;
  const Tensor* w = constant_input(node, graph, W);
  const Tensor* bias = node.inputs.size() > Bias && node.inputs[Bias] != kNoValue ? constant_input(node, graph, Bias) : nullptr;
  StreamConvShape s;
  s.ic = w->shape()[1];
  s.oc = w->shape()[0];
  s.kh = w->shape()[2];
  s.kw = w->shape()[3];
  s.n = s.oh = s.ow = 1;
  if (!avx2_q8_conv_runs(s, largest_bias(bias))) return "more than 64 taps, or sums that could pass int32";
  return "";
}

std::unique_ptr<Kernel> make_quantized_conv(const Node& node, const Graph& graph, const std::string& config) {
  return std::make_unique<QuantizedConvKernel>(node, graph, arithmetic_of(node, config));
}

std::optional<KernelProfile> describe_quantized_conv(const Node& node, const Graph& graph, const std::string& config,
                                                    const InputShapes& shapes) {
  const std::optional<Q8Arithmetic> a = parse_arithmetic(config);
  if (!a || shapes.size() <= W || !shapes[0] || !shapes[W] || shapes[W]->size() != 4) return std::nullopt;
  const Shape& ws = *shapes[W];
  return q8_profile(kernel_name("conv", *a), *a, elements_of(*shapes[0]), static_cast<double>(ws[1]),
                    high_code_share(node, graph, XZero));
}

std::string quantized_product_unsupported(const Node& node, const Graph& graph) {
  if (!avx2_q8_conv_runs(pointwise_conv_shape(1, 1, 1), 0)) return "wpk's 8-bit kernel needs AVX2";
  if (node.inputs.size() < 6 || node.inputs.size() > 8) return "needs 6 to 8 inputs";
  if (!is_8bit(graph.value(node.inputs[A]).dtype)) return "A is not uint8 or int8";
  const Tensor* b = constant_input(node, graph, B);
  if (!b || b->rank() != 2 || b->numel() == 0) return "B is not a constant non-empty 2-D tensor";
  if (std::string why = int8_weights_unsupported(b, constant_input(node, graph, BZero), b->dim(1)); !why.empty()) return why;
  const Tensor* bs = constant_input(node, graph, BScale);
  if (!bs || bs->dtype() != DType::Float32 || (bs->numel() != 1 && bs->numel() != b->dim(1)))
    return "B_scale is not a constant float32 of 1 or N elements";
  if (node.inputs.size() > kIntegerProductBias && node.inputs[kIntegerProductBias] != kNoValue) {
    const Tensor* bias = constant_input(node, graph, kIntegerProductBias);
    if (!bias || bias->dtype() != DType::Float32 || bias->rank() != 1 || bias->numel() != b->dim(1))
      return "Bias is not a constant float32 [N]";
  }
  if (!conv_epilogue(node, Tensor())) return "activation " + node.attr_string("activation", "") + " is not fused by wpk's 8-bit kernel";
  if (!avx2_q8_conv_runs(pointwise_conv_shape(1, b->dim(0), b->dim(1)), 0)) return "sums that could pass int32";
  return "";
}

std::unique_ptr<Kernel> make_quantized_product(const Node& node, const Graph& graph, const std::string& config) {
  return std::make_unique<QuantizedProductKernel>(node, graph, arithmetic_of(node, config));
}

std::optional<KernelProfile> describe_quantized_product(const Node& node, const Graph& graph, const std::string& config,
                                                       const InputShapes& shapes) {
  const std::optional<Q8Arithmetic> a = parse_arithmetic(config);
  if (!a || shapes.size() <= B || !shapes[0] || !shapes[B] || shapes[B]->size() != 2) return std::nullopt;
  return q8_profile(kernel_name("matmul", *a), *a, elements_of(*shapes[0]), static_cast<double>((*shapes[B])[0]),
                    high_code_share(node, graph, AZero));
}

}  // namespace wpk::cpu
