#include "backends/generated/conv_expr.hpp"

#include <algorithm>

#include "graph/fused_ops.hpp"

namespace wpk::gen {

using namespace codegen;

std::optional<ConvSpec> conv_spec(const Node& node, const Graph& graph, std::string& why) {
  const bool onnx = node.domain.empty() || node.domain == "ai.onnx";
  const bool fused = node.domain == kWpkDomain && node.op_type == "FusedConv";
  if (!fused && !(onnx && node.op_type == "Conv")) {
    why = "the gen backend does not write " + node.op_type;
    return std::nullopt;
  }
  if (node.attr_int("channels_last", 0) != 1) {
    why = "generated convs read NHWC (channels_last) activations only";
    return std::nullopt;
  }
  const Tensor* w = node.inputs.size() > 1 && node.inputs[1] != kNoValue ? graph.initializer(node.inputs[1]) : nullptr;
  const ValueInfo& x_info = graph.value(node.inputs[0]);
  if (!w || w->dtype() != DType::Float32 || w->rank() != 4 || w->numel() == 0 || !is_float32(graph, node.inputs[0]) ||
      !x_info.dims || x_info.dims->size() != 4) {
    why = "generated convs need constant float32 4-D weights and a float32 NHWC input";
    return std::nullopt;
  }
  ConvSpec s;
  // H, W and C must be known at load; the batch may be symbolic.
  for (std::size_t d = 1; d < 4; ++d)
    if (!(*x_info.dims)[d].is_static() || (*x_info.dims)[d].value < 1) {
      why = "generated convs need the input's rows, columns and channels at load";
      return std::nullopt;
    }
  s.h = (*x_info.dims)[1].value;
  s.w = (*x_info.dims)[2].value;
  s.c = (*x_info.dims)[3].value;
  s.o = w->shape()[0];
  s.kh = w->shape()[2];
  s.kw = w->shape()[3];
  const std::int64_t group = node.attr_int("group", 1);
  s.depthwise = group > 1;
  if (!(group == 1 && w->shape()[1] == s.c) && !(group == s.c && s.o == s.c && w->shape()[1] == 1)) {
    why = "generated convs are dense or depthwise with one output channel a group";
    return std::nullopt;
  }
  const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  const std::vector<std::int64_t> strides = node.attr_ints("strides", {1, 1}), dilations = node.attr_ints("dilations", {1, 1}),
                                  pads = node.attr_ints("pads", {0, 0, 0, 0});
  if ((auto_pad != "NOTSET" && auto_pad != "VALID") || strides.size() != 2 || dilations.size() != 2 || pads.size() != 4) {
    why = "generated convs take 2-D strides, dilations and explicit pads";
    return std::nullopt;
  }
  s.sh = strides[0];
  s.sw = strides[1];
  s.dh = dilations[0];
  s.dw = dilations[1];
  const bool valid = auto_pad == "VALID";
  s.pad_top = valid ? 0 : pads[0];
  s.pad_left = valid ? 0 : pads[1];
  const std::int64_t pad_bottom = valid ? 0 : pads[2], pad_right = valid ? 0 : pads[3];
  // Bounded first, so that the arithmetic below cannot overflow on a hostile model's attributes.
  constexpr std::int64_t kLargest = std::int64_t{1} << 24;
  for (std::int64_t v : {s.sh, s.sw, s.dh, s.dw, s.pad_top, s.pad_left, pad_bottom, pad_right, s.kh, s.kw, s.h, s.w})
    if (v < 0 || v > kLargest) {
      why = "generated convs take sizes, strides, dilations and pads of at most 2^24";
      return std::nullopt;
    }
  if (s.sh < 1 || s.sw < 1 || s.dh < 1 || s.dw < 1 || s.pad_top >= s.kh * s.dh || s.pad_left >= s.kw * s.dw) {
    why = "generated convs take positive strides and dilations and pads inside the kernel's reach";
    return std::nullopt;
  }
  // The span the kernel's first position may move over; negative: the kernel does not fit even
  // the padded input (an error the reference backend reports), not a one-pixel output.
  const std::int64_t span_h = s.h + s.pad_top + pad_bottom - s.dh * (s.kh - 1) - 1,
                     span_w = s.w + s.pad_left + pad_right - s.dw * (s.kw - 1) - 1;
  if (span_h < 0 || span_w < 0) {
    why = "the conv's kernel does not fit its padded input";
    return std::nullopt;
  }
  s.oh = span_h / s.sh + 1;
  s.ow = span_w / s.sw + 1;
  if (!read_conv_epilogue(node, graph, s.o, s, why)) return std::nullopt;
  return s;
}

Tensor dense_conv_weights(const Tensor& w) {
  const Shape& d = w.shape();
  Tensor out = Tensor::zeros(DType::Float32, {d[0], d[2], d[3], d[1]});
  const float* src = w.data<float>();
  float* dst = out.data<float>();
  for (std::int64_t o = 0; o < d[0]; ++o)
    for (std::int64_t c = 0; c < d[1]; ++c)
      for (std::int64_t y = 0; y < d[2]; ++y)
        for (std::int64_t x = 0; x < d[3]; ++x)
          dst[((o * d[2] + y) * d[3] + x) * d[1] + c] = src[((o * d[1] + c) * d[2] + y) * d[3] + x];
  return out;
}

Compute conv_compute(const ConvSpec& s) {
  Var n = dynamic_var("n"), y = var("y", s.oh), x = var("x", s.ow), o = var("o", s.o), ky = var("ky", s.kh), kx = var("kx", s.kw);
  Buffer in = buffer("x", {kDynamic, s.h, s.w, s.c});
  const Affine iy = Affine(y) * s.sh + Affine(ky) * s.dh - s.pad_top, ix = Affine(x) * s.sw + Affine(kx) * s.dw - s.pad_left;
  // A dense conv's weights as [o, kh, kw, c] (dense_conv_weights): the reduction's innermost
  // loop, over input channels, then reads its packed panel in order.
  Buffer weights = s.depthwise ? buffer("w", {s.o, 1, s.kh, s.kw}) : buffer("w", {s.o, s.kh, s.kw, s.c});
  std::vector<Buffer> inputs = {in, weights};
  std::vector<Var> reduce = {ky, kx};
  Expr body;
  if (s.depthwise) {
    body = load_or_zero(in, {n, iy, ix, o}) * load(weights, {o, 0, ky, kx});
  } else {
    Var ic = var("ic", s.c);
    reduce.push_back(ic);
    body = load_or_zero(in, {n, iy, ix, ic}) * load(weights, {o, ky, kx, ic});
  }
  const Expr epilogue = epilogue_expr(s, o, {n, y, x, o}, {kDynamic, s.oh, s.ow, s.o}, inputs);
  return compute(s.depthwise ? "depthwise_conv" : "conv", buffer("y", {kDynamic, s.oh, s.ow, s.o}), {n, y, x, o}, reduce,
                 body, epilogue, inputs);
}

Schedule window_schedule(const Compute& c, const MatMulConfig& config, int lanes) {
  Schedule s(c);
  const Var &n = c.axes[0], &y = c.axes[1], &x = c.axes[2], &o = c.axes[3];
  const auto [xo, xi] = s.split(x, std::min<std::int64_t>(config.rows, x->extent));
  const auto [oo, oi] = s.split(o, std::min<std::int64_t>(std::int64_t{config.vectors} * lanes, o->extent));
  std::vector<Var> order = config.parallel_cols ? std::vector<Var>{n, oo, y, xo} : std::vector<Var>{n, y, xo, oo};
  for (const Var& r : c.reduce) order.push_back(r);
  order.push_back(xi);
  order.push_back(oi);
  s.reorder(order);
  s.parallel(config.parallel_cols ? oo : y);
  s.unroll(xi);
  s.vectorize(oi);
  return s;
}

Schedule conv_schedule(const Compute& c, const MatMulConfig& config, int lanes) {
  Schedule s = window_schedule(c, config, lanes);
  s.pack(c.inputs[1], c.axes[3]);
  if (config.prefetch) s.prefetch_next(c.inputs[1], s.split_of(c.axes[3].get())->outer);
  if (config.prefetch_residual) s.prefetch_epilogue(residual_input(c));
  return s;
}

}  // namespace wpk::gen
