// Reference kernels for the com.wpk ops the optimizer creates (graph/fused_ops.hpp). Each is
// defined by the plain ops it replaces: FusedConv, FusedMatMul and Attention run the reference
// Conv, MatMul and Softmax kernels and apply the rest after, in the order the unfused graph
// does, so fused and unfused graphs agree to rounding.
//
// channels_last = 1 (NHWC) is handled by transposing around the NCHW kernels, for FusedConv and
// for the pooling ops (MaxPool, AveragePool, GlobalAveragePool) and QLinearConv that the layout
// pass moves to NHWC: their table entries are wrapped here.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <string>

#include "backends/reference/common.hpp"
#include "backends/reference/registry.hpp"
#include "graph/group_parts.hpp"
#include "graph/fused_ops.hpp"

namespace wpk::reference {
namespace {

// The plain kernels the fused ones are defined by, taken from the table before register_fused
// replaces any entry. Written once, while the table is built.
struct PlainKernels {
  KernelFn conv = nullptr, matmul = nullptr, softmax = nullptr, concat = nullptr;
  KernelFn max_pool = nullptr, average_pool = nullptr, global_average_pool = nullptr, batch_norm = nullptr;
  KernelFn qlinear_conv = nullptr, matmul_integer = nullptr, conv_integer = nullptr, qlinear_add = nullptr, mul = nullptr;
  std::map<std::string, KernelFn> chain_ops;  // an ElementwiseChain's steps' (graph/elementwise_chain.hpp)
};
PlainKernels plain;

// Runs a plain kernel for `node` (the fused node itself, or one made up) and returns output 0.
Tensor run_plain(KernelFn fn, const Node& node, std::vector<const Tensor*> inputs, std::int64_t opset) {
  KernelContext inner(node, std::move(inputs));
  inner.set_opset(opset);
  fn(inner);
  return std::move(inner.outputs()[0]);
}

// A copy of t with its axes reordered: axis i of the result is axis perm[i] of t.
Tensor permuted(const Tensor& t, const std::vector<int>& perm) {
  const std::vector<std::int64_t> in_strides = contiguous_strides(t.shape());
  Shape shape;
  std::vector<std::int64_t> strides;
  for (int p : perm) {
    shape.push_back(t.shape()[p]);
    strides.push_back(in_strides[p]);
  }
  Tensor out = Tensor::zeros(t.dtype(), shape);
  const std::size_t size = dtype_size(t.dtype());
  const char* src = static_cast<const char*>(t.raw());
  char* dst = static_cast<char*>(out.raw());
  for_each_index(shape, {strides}, [&](const std::int64_t* off) {
    std::memcpy(dst, src + off[0] * static_cast<std::int64_t>(size), size);
    dst += size;
  });
  return out;
}

bool channels_last(const KernelContext& ctx) {
  const std::int64_t v = ctx.node().attr_int("channels_last", 0);
  if (v != 0 && v != 1) ctx.fail(ErrorCode::InvalidModel, "channels_last must be 0 or 1, got " + std::to_string(v));
  return v == 1;
}

// (N, spatial..., C) <-> (N, C, spatial...).
Tensor to_channels_first(const Tensor& t, const KernelContext& ctx) {
  const int r = t.rank();
  if (r < 3)
    ctx.fail(ErrorCode::InvalidArgument,
             "a channels_last tensor needs rank 3 or more, got " + shape_to_string(t.shape()));
  std::vector<int> perm = {0, r - 1};
  for (int i = 1; i < r - 1; ++i) perm.push_back(i);
  return permuted(t, perm);
}

Tensor to_channels_last(const Tensor& t) {
  std::vector<int> perm = {0};
  for (int i = 2; i < t.rank(); ++i) perm.push_back(i);
  perm.push_back(1);
  return permuted(t, perm);
}

// ---- epilogue ---------------------------------------------------------------------------------

// The same two-branch form as the Sigmoid kernel, so fused and unfused results agree.
template <typename T>
T sigmoid(T v) {
  if (v >= T(0)) return T(1) / (T(1) + std::exp(-v));
  const T e = std::exp(v);
  return e / (T(1) + e);
}

// The order of operations of the exported x * (1 + erf(x / sqrt(2))) * 0.5.
template <typename T>
T gelu(T v) {
  return v * (T(1) + std::erf(v / T(std::sqrt(2.0)))) * T(0.5);
}

// The order of operations of GPT-2's exported x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 *
// x * x * x))) * 0.5.
template <typename T>
T gelu_tanh(T v) {
  const T inner = T(0.7978845608028654) * (v + T(0.044715) * (v * (v * v)));
  return v * (T(1) + std::tanh(inner)) * T(0.5);
}

template <typename T>
T clamp(T v, T lo, T hi) {
  return std::min(std::max(v, lo), hi);
}  // keeps NaN, like Clip

// Applies the `activation` attribute to y in place.
template <typename T>
void apply_activation(const KernelContext& ctx, T* y, std::int64_t n) {
  const std::string act = ctx.node().attr_string("activation", "");
  const std::vector<float> p = ctx.node().attr_floats("activation_params");
  auto params = [&](std::size_t count) {
    if (p.size() != count)
      ctx.fail(ErrorCode::InvalidModel, "activation " + act + " takes " + std::to_string(count) +
                                            " activation_params, got " + std::to_string(p.size()));
  };
  auto each = [&](auto f) {
    for (std::int64_t i = 0; i < n; ++i) y[i] = f(y[i]);
  };
  if (act.empty()) return;
  if (act == "Relu") return each([](T v) { return v < T(0) ? T(0) : v; });
  if (act == "Sigmoid") return each([](T v) { return sigmoid(v); });
  if (act == "Tanh") return each([](T v) { return std::tanh(v); });
  if (act == "SiLU") return each([](T v) { return v * sigmoid(v); });
  if (act == "Gelu") return each([](T v) { return gelu(v); });
  if (act == "GeluTanh") return each([](T v) { return gelu_tanh(v); });
  if (act == "HardSwish") return each([](T v) { return v * clamp(v / T(6) + T(0.5), T(0), T(1)); });
  if (act == "Clip") {
    params(2);
    return each([lo = T(p[0]), hi = T(p[1])](T v) { return clamp(v, lo, hi); });
  }
  if (act == "LeakyRelu") {
    params(1);
    return each([alpha = T(p[0])](T v) { return v < T(0) ? alpha * v : v; });
  }
  if (act == "HardSigmoid") {
    params(2);
    return each([alpha = T(p[0]), beta = T(p[1])](T v) { return clamp(alpha * v + beta, T(0), T(1)); });
  }
  ctx.fail(ErrorCode::Unsupported, "unknown activation '" + act + "'");
}

// y += b, where b broadcasts to y's shape without growing it. y is a kernel's fresh output.
void add_in_place(const KernelContext& ctx, Tensor& y, const Tensor& b, const char* what) {
  if (b.dtype() != y.dtype() || broadcast_shapes({y.shape(), b.shape()}, ctx) != y.shape())
    ctx.fail(ErrorCode::InvalidArgument, std::string(what) + " " + dtype_name(b.dtype()) + shape_to_string(b.shape()) +
                                             " does not broadcast to the result " + dtype_name(y.dtype()) +
                                             shape_to_string(y.shape()));
  dispatch_float(y.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* py = y.data<T>();
    const T* pb = b.data<T>();
    if (b.shape() == y.shape()) {
      for (std::int64_t i = 0; i < y.numel(); ++i) py[i] += pb[i];
      return;
    }
    std::int64_t i = 0;
    for_each_index(y.shape(), {broadcast_strides(b.shape(), y.shape())},
                   [&](const std::int64_t* off) { py[i++] += pb[off[0]]; });
  });
}

// Y = act(y + Z) with Z, of Y's shape, at input `z_at`.
void apply_epilogue(const KernelContext& ctx, Tensor& y, std::size_t z_at) {
  if (ctx.has_input(z_at)) {
    const Tensor& z = ctx.input(z_at);
    if (z.shape() != y.shape())
      ctx.fail(ErrorCode::InvalidArgument, "residual Z " + shape_to_string(z.shape()) +
                                               " must have the output's shape " + shape_to_string(y.shape()));
    add_in_place(ctx, y, z, "residual Z");
  }
  if (ctx.node().attr_string("activation", "").empty()) return;
  dispatch_float(y.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    apply_activation<T>(ctx, y.data<T>(), y.numel());
  });
}

// ---- kernels ----------------------------------------------------------------------------------

void fused_conv(KernelContext& ctx) {
  const bool nhwc = channels_last(ctx);
  Tensor x_first;
  if (nhwc) x_first = to_channels_first(ctx.input(0), ctx);
  std::vector<const Tensor*> inputs = {nhwc ? &x_first : &ctx.input(0), &ctx.input(1)};
  if (ctx.has_input(2)) inputs.push_back(&ctx.input(2));
  Tensor y = run_plain(plain.conv, ctx.node(), inputs, ctx.opset());
  if (nhwc) y = to_channels_last(y);
  apply_epilogue(ctx, y, 3);
  ctx.set_output(0, std::move(y));
}

// A depth-first group (graph/group_parts.hpp): its parts one after the other, as the graph
// before the optimizer formed it computed them.
void group_of_parts(KernelContext& ctx) {
  const bool chain = ctx.node().op_type == "ElementwiseChain";
  if (!chain && !channels_last(ctx)) ctx.fail(ErrorCode::InvalidModel, ctx.node().op_type + " reads NHWC (channels_last = 1) only");
  // The group's inputs named by position, the values between the parts after them.
  Node positional = ctx.node();
  for (std::size_t i = 0; i < positional.inputs.size(); ++i)
    if (positional.inputs[i] != kNoValue) positional.inputs[i] = static_cast<ValueId>(i);
  std::vector<ValueId> between;
  for (std::size_t i = 0; i + 1 < group_part_count(positional); ++i)
    between.push_back(static_cast<ValueId>(positional.inputs.size() + i));
  const std::vector<Node> parts = split_group(positional, between);
  std::vector<Tensor> carried(between.size());
  for (std::size_t p = 0; p < parts.size(); ++p) {
    const Node& part = parts[p];
    std::vector<const Tensor*> inputs;
    for (ValueId v : part.inputs) {
      const auto at = static_cast<std::size_t>(v);
      inputs.push_back(v == kNoValue ? nullptr
                       : at >= positional.inputs.size() ? &carried[at - positional.inputs.size()]
                       : ctx.has_input(at) ? &ctx.input(at) : nullptr);
    }
    KernelContext inner(part, inputs);
    inner.set_opset(ctx.opset());
    inner.set_limits(ctx.limits());
    const auto chain_op = plain.chain_ops.find(part.op_type);
    if (part.op_type == "FusedConv") fused_conv(inner);
    else if (part.op_type == "Mul") plain.mul(inner);
    else if (chain && chain_op != plain.chain_ops.end()) chain_op->second(inner);
    else ctx.fail(ErrorCode::Internal, "no reference kernel for a group's " + part.op_type);
    if (p + 1 == parts.size()) ctx.set_output(0, std::move(inner.outputs()[0]));
    else carried[p] = std::move(inner.outputs()[0]);
  }
}

void fused_matmul(KernelContext& ctx) {
  Tensor y = run_plain(plain.matmul, ctx.node(), {&ctx.input(0), &ctx.input(1)}, ctx.opset());
  if (ctx.has_input(2)) add_in_place(ctx, y, ctx.input(2), "Bias");
  apply_epilogue(ctx, y, 3);
  ctx.set_output(0, std::move(y));
}

void gelu_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const std::string kind = gelu_activation_kind(ctx.node());
  if (kind.empty())
    ctx.fail(ErrorCode::InvalidModel, "Gelu approximate must be \"none\" or \"tanh\", got \"" +
                                          ctx.node().attr_string("approximate", "") + "\"");
  const bool tanh_form = kind == "GeluTanh";
  dispatch_float(x.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    const T* px = x.data<T>();
    T* py = y.data<T>();
    for (std::int64_t i = 0; i < x.numel(); ++i) py[i] = tanh_form ? gelu_tanh(px[i]) : gelu(px[i]);
  });
}

// softmax(Q @ K^T * scale + Mask) @ V, composed of the reference MatMul and Softmax; operands
// flagged in interleaved_heads ([B, S, H, D]) are transposed to [B, H, S, D] and back.
void attention(KernelContext& ctx) {
  std::array<bool, 4> interleaved;
  try {
    interleaved = attention_interleaved_heads(ctx.node());
  } catch (const Error& e) {
    ctx.fail(e.code(), e.what());
  }
  const std::vector<int> heads_first = {0, 2, 1, 3};  // its own inverse
  std::vector<Tensor> logical(3);
  for (int i = 0; i < 3; ++i) {
    const Tensor& t = ctx.input(i);
    if (!interleaved[static_cast<std::size_t>(i)]) {
      logical[static_cast<std::size_t>(i)] = t;
      continue;
    }
    if (t.rank() != 4)
      ctx.fail(ErrorCode::InvalidArgument, std::string("interleaved_heads needs rank-4 ") + "QKV"[i] + ", got " +
                                               shape_to_string(t.shape()));
    logical[static_cast<std::size_t>(i)] = permuted(t, heads_first);
  }
  const Tensor& k = logical[1];
  if (k.rank() < 2)
    ctx.fail(ErrorCode::InvalidArgument, "K must have rank 2 or more, got " + shape_to_string(k.shape()));
  const Attribute* scale = ctx.node().find_attr("scale");
  if (!scale) ctx.fail(ErrorCode::InvalidModel, "attribute 'scale' is required");
  std::vector<int> perm(static_cast<std::size_t>(k.rank()));
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  const Tensor k_t = permuted(k, perm);
  Tensor scores = run_plain(plain.matmul, ctx.node(), {&logical[0], &k_t}, ctx.opset());
  dispatch_float(scores.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T s = static_cast<T>(scale->f());
    T* p = scores.data<T>();
    for (std::int64_t i = 0; i < scores.numel(); ++i) p[i] *= s;
  });
  if (ctx.has_input(3)) add_in_place(ctx, scores, ctx.input(3), "Mask");
  Node softmax;
  softmax.name = ctx.node().name;
  softmax.op_type = "Softmax";
  softmax.outputs = ctx.node().outputs;
  softmax.attributes.emplace("axis", Attribute(std::int64_t{-1}));
  const Tensor probs = run_plain(plain.softmax, softmax, {&scores}, 13);  // opset 13: along one axis
  Tensor y = run_plain(plain.matmul, ctx.node(), {&probs, &logical[2]}, ctx.opset());
  if (interleaved[3]) {
    if (y.rank() != 4)
      ctx.fail(ErrorCode::InvalidArgument, "interleaved_heads needs a rank-4 Y, got " + shape_to_string(y.shape()));
    y = permuted(y, heads_first);
  }
  ctx.set_output(0, std::move(y));
}

// Pooling in either layout: channels_last = 1 transposes around the NCHW kernel.
void pool_any_layout(KernelContext& ctx, KernelFn nchw_kernel) {
  if (!channels_last(ctx)) return nchw_kernel(ctx);
  if (ctx.wants_output(1)) ctx.fail(ErrorCode::Unsupported, "Indices output with channels_last = 1 is not supported");
  const Tensor x = to_channels_first(ctx.input(0), ctx);
  ctx.set_output(0, to_channels_last(run_plain(nchw_kernel, ctx.node(), {&x}, ctx.opset())));
}
// BatchNormalization in either layout: the parameters are per channel whatever the layout.
void batch_norm(KernelContext& ctx) {
  if (!channels_last(ctx)) return plain.batch_norm(ctx);
  if (ctx.wants_output(1) || ctx.wants_output(2)) ctx.fail(ErrorCode::Unsupported, "statistics outputs with channels_last = 1");
  const Tensor x = to_channels_first(ctx.input(0), ctx);
  std::vector<const Tensor*> ins{&x};
  for (std::size_t i = 1; i < ctx.num_inputs(); ++i) ins.push_back(&ctx.input(i));
  ctx.set_output(0, to_channels_last(run_plain(plain.batch_norm, ctx.node(), ins, ctx.opset())));
}
// com.wpk FusedBatchNorm: BatchNormalization in either layout, then its activation in place.
void fused_batch_norm(KernelContext& ctx) {
  const std::string act = ctx.node().attr_string("activation", "");
  if (!act.empty() && act != "Relu") ctx.fail(ErrorCode::Unsupported, "activation '" + act + "'");
  batch_norm(ctx);
  Tensor& y = ctx.outputs()[0];
  if (act.empty()) return;
  dispatch_float(y.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = y.data<T>();
    for (std::int64_t i = 0; i < y.numel(); ++i) p[i] = p[i] > T(0) ? p[i] : T(0);
  });
}
// com.wpk ConcatBatchNorm: the plain Concat along the channel axis, then FusedBatchNorm.
void concat_batch_norm(KernelContext& ctx) {
  Node join;
  join.name = ctx.node().name;
  join.op_type = "Concat";
  join.outputs = ctx.node().outputs;
  join.attributes.emplace("axis", Attribute(std::int64_t{channels_last(ctx) ? 3 : 1}));
  std::vector<const Tensor*> xs;
  for (std::size_t i = 4; i < ctx.num_inputs(); ++i) {
    if (ctx.input(i).rank() != 4)
      ctx.fail(ErrorCode::InvalidArgument, "input " + std::to_string(i) + " is " + shape_to_string(ctx.input(i).shape()) +
                                               ", not 4-D");
    xs.push_back(&ctx.input(i));
  }
  const Tensor joined = run_plain(plain.concat, join, xs, ctx.opset());
  KernelContext inner(ctx.node(), {&joined, &ctx.input(0), &ctx.input(1), &ctx.input(2), &ctx.input(3)});
  inner.set_opset(ctx.opset());
  fused_batch_norm(inner);
  ctx.set_output(0, std::move(inner.outputs()[0]));
}
// QLinearConv in either layout: only x (input 0) follows it; scales, zero points, weights and
// bias do not.
void qlinear_conv(KernelContext& ctx) {
  if (!channels_last(ctx)) return plain.qlinear_conv(ctx);
  const Tensor x = to_channels_first(ctx.input(0), ctx);
  std::vector<const Tensor*> ins{&x};
  for (std::size_t i = 1; i < ctx.num_inputs(); ++i) ins.push_back(ctx.has_input(i) ? &ctx.input(i) : nullptr);
  ctx.set_output(0, to_channels_last(run_plain(plain.qlinear_conv, ctx.node(), ins, ctx.opset())));
}
// The int32 sums of MatMulIntegerToFloat's or ConvIntegerToFloat's plain integer op (`op`, run
// by `fn`) over their inputs 0 and 1 with the zero points 4 and 5.
Tensor integer_sums(KernelContext& ctx, KernelFn fn, const char* op) {
  Node plain_node = ctx.node();
  plain_node.op_type = op;
  plain_node.domain.clear();
  return run_plain(fn, plain_node, {&ctx.input(0), &ctx.input(1), &ctx.input(4), &ctx.input(5)}, ctx.opset());
}

// MatMulIntegerToFloat: MatMulInteger, then each int32 element times A_scale * B_scale[n], then
// the epilogue (Bias, Z, activation) when it has one.
void matmul_integer_to_float(KernelContext& ctx) {
  const Tensor& as = ctx.input(2);
  const Tensor& bs = ctx.input(3);
  if (as.dtype() != DType::Float32 || bs.dtype() != DType::Float32)
    ctx.fail(ErrorCode::Unsupported, "scales must be float32");
  if (as.numel() != 1) ctx.fail(ErrorCode::InvalidArgument, "A_scale must have one element, got shape " + shape_to_string(as.shape()));
  const Tensor acc = integer_sums(ctx, plain.matmul_integer, "MatMulInteger");
  const std::int64_t n = acc.rank() > 0 ? acc.shape().back() : 1;
  if (bs.numel() != 1 && !(bs.rank() == 1 && bs.numel() == n))
    ctx.fail(ErrorCode::InvalidArgument, "B_scale must have 1 or " + std::to_string(n) + " elements, got shape " + shape_to_string(bs.shape()));
  Tensor& y = ctx.allocate_output(0, DType::Float32, acc.shape());
  const float a_scale = as.data<float>()[0];
  for (std::int64_t i = 0; i < acc.numel(); ++i) {
    const float scale = a_scale * bs.data<float>()[bs.numel() == 1 ? 0 : i % n];
    y.data<float>()[i] = static_cast<float>(acc.data<std::int32_t>()[i]) * scale;
  }
  if (ctx.has_input(kIntegerProductBias)) {
    const Tensor& bias = ctx.input(kIntegerProductBias);
    if (bias.rank() != 1 || bias.numel() != n)
      ctx.fail(ErrorCode::InvalidArgument, "Bias must be [" + std::to_string(n) + "], got " + shape_to_string(bias.shape()));
    add_in_place(ctx, y, bias, "Bias");
  }
  apply_epilogue(ctx, y, kIntegerProductResidual);
}

// ConvIntegerToFloat: ConvInteger, then each int32 element times X_scale * W_scale.
void conv_integer_to_float(KernelContext& ctx) {
  const Tensor& xs = ctx.input(2);
  const Tensor& ws = ctx.input(3);
  if (xs.dtype() != DType::Float32 || ws.dtype() != DType::Float32) ctx.fail(ErrorCode::Unsupported, "scales must be float32");
  if (xs.numel() != 1 || ws.numel() != 1)
    ctx.fail(ErrorCode::InvalidArgument, "X_scale and W_scale must have one element, got shapes " + shape_to_string(xs.shape()) +
                                             " and " + shape_to_string(ws.shape()));
  const Tensor acc = integer_sums(ctx, plain.conv_integer, "ConvInteger");
  Tensor& y = ctx.allocate_output(0, DType::Float32, acc.shape());
  const float scale = xs.data<float>()[0] * ws.data<float>()[0];
  for (std::int64_t i = 0; i < acc.numel(); ++i) y.data<float>()[i] = static_cast<float>(acc.data<std::int32_t>()[i]) * scale;
}

// com.wpk QLinearConvAdd: the QLinearConv of its first nine inputs, in either layout, then the
// QLinearAdd of its codes and the residual's (graph/fused_ops.hpp).
void qlinear_conv_add(KernelContext& ctx) {
  std::vector<const Tensor*> conv_inputs;
  for (std::size_t i = 0; i < kQLinearConvAddResidual; ++i) conv_inputs.push_back(ctx.has_input(i) ? &ctx.input(i) : nullptr);
  KernelContext conv(ctx.node(), conv_inputs);
  conv.set_opset(ctx.opset());
  qlinear_conv(conv);
  const Tensor& c = conv.outputs()[0];
  std::vector<const Tensor*> add_inputs = {&c, &ctx.input(6), &ctx.input(7)};
  for (std::size_t i = kQLinearConvAddResidual; i < kQLinearConvAddResidual + 5; ++i) add_inputs.push_back(&ctx.input(i));
  ctx.set_output(0, run_plain(plain.qlinear_add, ctx.node(), add_inputs, ctx.opset()));
}

void max_pool(KernelContext& ctx) { pool_any_layout(ctx, plain.max_pool); }
void average_pool(KernelContext& ctx) { pool_any_layout(ctx, plain.average_pool); }
void global_average_pool(KernelContext& ctx) { pool_any_layout(ctx, plain.global_average_pool); }

}  // namespace

void register_fused(OpTable& t) {
  auto entry = [&](const char* op) {
    const OpEntry* e = t.find(op);
    if (!e) throw Error(ErrorCode::Internal, std::string("register_fused needs ") + op + " registered first");
    return *e;
  };
  plain.conv = entry("Conv").fn;
  plain.matmul = entry("MatMul").fn;
  plain.softmax = entry("Softmax").fn;
  plain.concat = entry("Concat").fn;
  plain.matmul_integer = entry("MatMulInteger").fn;
  plain.conv_integer = entry("ConvInteger").fn;
  plain.qlinear_add = entry("com.wpk:QLinearAdd").fn;
  plain.mul = entry("Mul").fn;
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min", "Relu", "Sigmoid", "Tanh", "Exp", "Sqrt", "Neg", "Abs", "Erf"})
    plain.chain_ops[op] = entry(op).fn;
  t.add("com.wpk:FusedConv", {fused_conv, 2, 4, 1});
  t.add("com.wpk:FusedMatMul", {fused_matmul, 2, 4, 1});
  t.add("com.wpk:DepthwisePointwiseConv", {group_of_parts, 4, 6, 1});
  t.add("com.wpk:ScaledPointwiseConv", {group_of_parts, 3, 5, 1});
  t.add("com.wpk:ElementwiseChain", {group_of_parts, 1, -1, 1});
  t.add("com.wpk:Gelu", {gelu_kernel, 1, 1, 1});
  t.add("Gelu", {gelu_kernel, 1, 1, 20});  // ONNX's, for sessions that skip the optimizer
  t.add("com.wpk:MatMulIntegerToFloat", {matmul_integer_to_float, 6, 8, 1});
  t.add("com.wpk:ConvIntegerToFloat", {conv_integer_to_float, 6, 6, 1});
  t.add("com.wpk:Attention", {attention, 3, 4, 1});
  t.add("com.wpk:QLinearConvAdd", {qlinear_conv_add, 14, 14, 1});
  // fuse_layernorm's op for models older than opset 17: the same kernel.
  t.add("com.wpk:LayerNormalization", {entry("LayerNormalization").fn, 2, 3, 1});

  // The pooling ops take channels_last too: their entries are wrapped.
  auto wrap_pool = [&](const char* op, KernelFn wrapper, KernelFn& nchw_kernel) {
    OpEntry e = entry(op);
    if (e.fn == wrapper) return;  // wrapped already
    nchw_kernel = e.fn;
    e.fn = wrapper;
    t.add(op, e);
  };
  wrap_pool("MaxPool", max_pool, plain.max_pool);
  wrap_pool("AveragePool", average_pool, plain.average_pool);
  wrap_pool("GlobalAveragePool", global_average_pool, plain.global_average_pool);
  wrap_pool("BatchNormalization", batch_norm, plain.batch_norm);
  wrap_pool("QLinearConv", qlinear_conv, plain.qlinear_conv);
  t.add("com.wpk:FusedBatchNorm", {fused_batch_norm, 5, 5, 1});
  t.add("com.wpk:ConcatBatchNorm", {concat_batch_norm, 5, -1, 1});
}

}  // namespace wpk::reference
