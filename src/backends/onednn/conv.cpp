// Conv and com.wpk FusedConv on oneDNN: 2-D, float32, constant weights packed once into the
// layout the chosen implementation wants; bias, residual add and activation fused as post-ops;
// activations NCHW or NHWC (channels_last) as the graph says. Its algorithm is a config:
//   algorithm=direct                  the direct convolution, activations in the node's layout
//   algorithm=direct,layout=blocked   the same in oneDNN's blocked layout (nChw8c/16c), the input
//                                     reordered in and the output out in per-thread staging
//   algorithm=winograd                Winograd F(2x2, 3x3) (F(4x4, 3x3) at batch 2+), blocked
//   algorithm=matmul                  a 1x1 stride-1 unpadded NHWC conv as the product
//                                     [N*H*W, C_in] x [C_in, C_out] over the same bytes
// Which runs is the cost model's call (describe_conv below), or tuning's. A node marked
// compute_precision = "bf16" (SessionOptions::precision) runs direct only, its input rounded to
// bf16 in per-thread staging, bf16 weights, float32 accumulation and output; where the graph
// keeps its input or output in bf16 (passes::keep_bf16_between_products) it reads or writes
// that as it is.
#include <omp.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "backends/onednn/onednn_kernels.hpp"
#include "core/cpu_features.hpp"
#include "graph/fused_ops.hpp"
#include "backends/reference/conv_pool.hpp"

namespace wpk::onednn {
namespace {

struct ConvPlan {
  dnnl::primitive primitive;  // a convolution, or a matmul for pointwise convs (below)
  dnnl::memory::desc src, dst, bias;
  dnnl::memory weights;  // packed
  dnnl::memory::desc weights_view;  // the plain view of the loaded weights it was packed from
  Shape y_shape;         // in the node's layout
  // Winograd and layout=blocked: the primitive reads and writes oneDNN's blocked layout
  // (nChw16c, nChw8c), so the input is reordered into it and the output back, in per-thread
  // staging memory.
  bool blocked = false;
  bool winograd = false;
  const char* blocked_layout = "";
  dnnl::memory::desc blocked_src, blocked_dst;
  dnnl::reorder to_blocked, from_blocked;
  // bf16: the input is reordered into `bf16_src` (staging) before the primitive reads it.
  bool bf16 = false;
  dnnl::memory::desc bf16_src;
  dnnl::reorder to_bf16;
};


enum class Algorithm { Direct, DirectBlocked, Winograd, MatMul };

// Winograd scratchpad a thread keeps in cache (describe_conv).
constexpr double kScratchInCachePerThread = 4 << 20;

std::optional<Algorithm> parse_algorithm(const std::string& config) {
  if (config.empty() || config == "algorithm=direct") return Algorithm::Direct;
  if (config == "algorithm=direct,layout=blocked") return Algorithm::DirectBlocked;
  if (config == "algorithm=winograd") return Algorithm::Winograd;
  if (config == "algorithm=matmul") return Algorithm::MatMul;
  return std::nullopt;
}

// True when every element of int-list attribute `name` (absent: `count` elements) is `want`.
bool attr_all(const Node& node, const char* name, std::int64_t want, std::size_t count) {
  for (std::int64_t x : node.attr_ints(name, std::vector<std::int64_t>(count, want)))
    if (x != want) return false;
  return true;
}

// A 1x1, stride-1, unpadded, ungrouped conv on NHWC activations: the same bytes are a product.
bool is_pointwise_nhwc(const Node& node, const Shape& ws) {
  const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  return node.attr_int("channels_last", 0) == 1 && node.attr_int("group", 1) == 1 && ws.size() == 4 && ws[2] == 1 &&
         ws[3] == 1 && attr_all(node, "strides", 1, 2) && attr_all(node, "dilations", 1, 2) &&
         attr_all(node, "pads", 0, 4) &&
         (auto_pad == "NOTSET" || auto_pad == "VALID");
}

// NHWC convs larger than 1x1 without a residual (the sum post-op would need the residual
// reordered in too) may run in the blocked layout.
bool is_blocked_candidate(const Node& node, const Shape& ws) {
  return node.attr_int("channels_last", 0) == 1 && !has_fused_residual(node) && node.attr_int("group", 1) == 1 &&
         ws.size() == 4 && ws[2] * ws[3] > 1;
}

// oneDNN 2.6 has Winograd kernels for 3x3 stride-1 undilated ungrouped convs on AVX-512 CPUs,
// without a sum post-op.
bool is_winograd_candidate(const Node& node, const Shape& ws) {
  return cpu_features().avx512f && !has_fused_residual(node) && node.attr_int("group", 1) == 1 && ws.size() == 4 &&
         ws[2] == 3 && ws[3] == 3 && attr_all(node, "strides", 1, 2) && attr_all(node, "dilations", 1, 2);
}

// The forward convolution `alg` over `src` -> `dst` (any layouts) for the window `win`, weights
// in whatever layout oneDNN picks.
dnnl::convolution_forward::desc conv_forward_desc(dnnl::algorithm alg, const dnnl::memory::desc& src,
                                                  const dnnl::memory::desc& dst, const Dims& w_dims,
                                                  const dnnl::memory::desc& bias, const reference::Window& win,
                                                  dnnl::memory::data_type weights = dnnl::memory::data_type::f32) {
  return dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, alg, src,
                                         dnnl::memory::desc(w_dims, weights, Tag::any), bias, dst,
                                         {win.stride[1], win.stride[2]}, {win.dilation[1] - 1, win.dilation[2] - 1},
                                         {win.pad_begin[1], win.pad_begin[2]}, {win.pad_end[1], win.pad_end[2]});
}

// ONNX weights [C_out, C_in / group, kH, kW]; oneDNN wants the group split out when group > 1,
// and a pointwise conv's matmul reads them as [C_in, C_out] (the same bytes, transposed).
dnnl::memory::desc loaded_weights_desc(const Shape& ws, std::int64_t group, bool pointwise) {
  if (pointwise) return f32_desc({ws[1], ws[0]}, Tag::ba);
  if (group == 1) return f32_desc({ws[0], ws[1], ws[2], ws[3]}, Tag::oihw);
  return f32_desc({group, ws[0] / group, ws[1], ws[2], ws[3]}, Tag::goihw);
}

class ConvKernel : public OneDnnKernel {
 public:
  ConvKernel(const Node& node, const Graph& graph, const Tensor& w, Tensor b, Algorithm algorithm)
      : x_type_(bf16_activation(node, graph, node.inputs[0]) ? DType::BFloat16 : DType::Float32),
        y_type_(bf16_activation(node, graph, node.outputs[0]) ? DType::BFloat16 : DType::Float32),
        algorithm_(algorithm), weights_(w, loaded_weights_desc(w.shape(), node.attr_int("group", 1), false)),
        b_(std::move(b)), act_(read_activation(node)), channels_last_(node.attr_int("channels_last", 0) == 1),
        group_(node.attr_int("group", 1)), has_residual_(has_fused_residual(node)), bf16_(computes_bf16(node)) {}

  void run(KernelContext& ctx) const override {
    guarded(ctx, [&] {
      const Tensor& x = ctx.input(0);
      if (x.rank() != 4 || x.dtype() != x_type_)
        ctx.fail(ErrorCode::InvalidArgument, std::string("expects a 4-D ") + dtype_name(x_type_) + " input, got " +
                                                 dtype_name(x.dtype()) + " " + shape_to_string(x.shape()));
      auto plan = cache_.get(shape_key({&x.shape()}), [&] { return build(ctx, x.shape()); });
      Tensor& y = ctx.allocate_output(0, y_type_, plan->y_shape);
      const dnnl::memory x_mem = wrap_arg(plan->primitive, DNNL_ARG_SRC, plan->src, x),
                         y_mem = wrap_arg(plan->primitive, DNNL_ARG_DST, plan->dst, y);
      dnnl::memory src = x_mem, dst = y_mem;
      if (plan->bf16) {
        src = thread_memory(0, plan->bf16_src);
        execute(plan->to_bf16, {{DNNL_ARG_FROM, x_mem}, {DNNL_ARG_TO, src}});
      }
      if (plan->blocked) {
        ctx.note_internal_layout(plan->blocked_layout, 2);
        src = thread_memory(0, plan->blocked_src);
        dst = thread_memory(1, plan->blocked_dst);
        execute(plan->to_blocked, {{DNNL_ARG_FROM, x_mem}, {DNNL_ARG_TO, src}});
      }
      Args args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, plan->weights}, {DNNL_ARG_DST, dst}};
      if (!b_.empty()) args.emplace(DNNL_ARG_BIAS, wrap_arg(plan->primitive, DNNL_ARG_BIAS, plan->bias, b_));
      if (has_residual_) accumulate_residual_into(ctx, 3, y);
      execute(plan->primitive, args);
      if (plan->blocked) execute(plan->from_blocked, {{DNNL_ARG_FROM, dst}, {DNNL_ARG_TO, y_mem}});
    });
  }

  // Compiles for the shapes the graph declares (symbolic dims as 1) so weights are packed at
  // session load, not at the first run.
  void warm_up(const Node& node, const Shape& x_shape, bool only_shape) {
    KernelContext ctx(node, {});
    auto plan = cache_.get(shape_key({&x_shape}), [&] { return build(ctx, x_shape); });
    // Winograd weights cannot be reordered into other layouts: unless the input shape is fixed
    // (no symbolic dims), keep the loaded copy for the plans of other shapes.
    if (plan->winograd && !only_shape) weights_.keep_beside_loaded(plan->weights, plan->weights_view);
    else weights_.keep_only(plan->weights, plan->weights_view);
  }

  bool owns_input(std::size_t i) const override { return i == 1 && weights_.owns_copy(); }

 private:
  ConvPlan build(const KernelContext& ctx, const Shape& x_shape) const {
    const Shape nchw = channels_last_ ? Shape{x_shape[0], x_shape[3], x_shape[1], x_shape[2]} : x_shape;
    const Shape& ws = weights_.shape();
    if (group_ < 1 || ws[0] % group_ != 0 || nchw[1] != ws[1] * group_)
      ctx.fail(ErrorCode::InvalidArgument, "input has " + std::to_string(nchw[1]) + " channels; weights " +
                                               shape_to_string(ws) + " with group " + std::to_string(group_) + " need " +
                                               std::to_string(ws[1] * group_));
    const reference::Window win = reference::conv_window(ctx, nchw, {ws[2], ws[3]}, false);
    const Dims src_dims = {nchw[0], nchw[1], nchw[2], nchw[3]};
    const Dims dst_dims = {nchw[0], ws[0], win.out[1], win.out[2]};
    const Tag act_tag = channels_last_ ? Tag::nhwc : Tag::nchw;
    const Dims w_dims = loaded_weights_desc(ws, group_, false).dims();

    ConvPlan plan;
    plan.y_shape = channels_last_ ? Shape{dst_dims[0], dst_dims[2], dst_dims[3], dst_dims[1]} : Shape(dst_dims);
    dnnl::post_ops ops;
    if (has_residual_) ops.append_sum(1.f);
    append_activation(ops, act_);
    dnnl::primitive_attr attr = make_attr();
    attr.set_post_ops(ops);
    if (algorithm_ == Algorithm::MatMul) {
      const std::int64_t rows = nchw[0] * nchw[2] * nchw[3];
      plan.src = f32_desc({rows, ws[1]}, Tag::ab);
      plan.dst = f32_desc({rows, ws[0]}, Tag::ab);
      plan.bias = f32_desc({1, ws[0]}, Tag::ab);
      const dnnl::matmul::primitive_desc pd(
          dnnl::matmul::desc(plan.src, f32_desc({ws[1], ws[0]}, Tag::any), b_.empty() ? dnnl::memory::desc() : plan.bias,
                             plan.dst),
          attr, engine());
      plan.primitive = dnnl::matmul(pd);
      plan.weights_view = loaded_weights_desc(ws, 1, true);
      plan.weights = weights_.pack_for(pd.weights_desc(), plan.weights_view);
      return plan;
    }
    plan.src = f32_desc(src_dims, act_tag);
    plan.dst = f32_desc(dst_dims, act_tag);
    plan.bias = f32_desc({ws[0]}, Tag::x);
    const auto bias_desc = b_.empty() ? dnnl::memory::desc() : plan.bias;
    if (bf16_) {
      plan.bf16_src = dnnl::memory::desc(src_dims, dnnl::memory::data_type::bf16, act_tag);
      if (x_type_ == DType::BFloat16) plan.src = plan.bf16_src;
      if (y_type_ == DType::BFloat16) plan.dst = dnnl::memory::desc(dst_dims, dnnl::memory::data_type::bf16, act_tag);
      plan.bf16 = x_type_ != DType::BFloat16;
      if (plan.bf16)
        plan.to_bf16 = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), plan.src, engine(), plan.bf16_src, make_attr()));
      const dnnl::convolution_forward::primitive_desc pd(
          conv_forward_desc(dnnl::algorithm::convolution_direct, plan.bf16_src, plan.dst, w_dims, bias_desc, win,
                            dnnl::memory::data_type::bf16),
          attr, engine());
      plan.weights_view = loaded_weights_desc(ws, group_, false);
      plan.weights = weights_.pack_for(pd.weights_desc(), plan.weights_view);
      plan.primitive = dnnl::convolution_forward(pd);
      return plan;
    }
    auto describe = [&](dnnl::algorithm alg, const dnnl::memory::desc& src, const dnnl::memory::desc& dst) {
      return conv_forward_desc(alg, src, dst, w_dims, bias_desc, win);
    };
    const dnnl::memory::desc any_src = f32_desc(src_dims, Tag::any), any_dst = f32_desc(dst_dims, Tag::any);
    dnnl::convolution_forward::primitive_desc pd;
    if (algorithm_ == Algorithm::Winograd) {
      try {
        pd = dnnl::convolution_forward::primitive_desc(describe(dnnl::algorithm::convolution_winograd, any_src, any_dst),
                                                       attr, engine());
        plan.winograd = true;
      } catch (const dnnl::error&) {
        pd = {};  // no Winograd kernel for this shape: direct below, as a correct fallback
      }
    } else if (algorithm_ == Algorithm::DirectBlocked) {
      pd = dnnl::convolution_forward::primitive_desc(describe(dnnl::algorithm::convolution_direct, any_src, any_dst), attr,
                                                     engine());
    }
    if (pd && pd.src_desc() != plan.src) stage_blocked(plan, pd);
    else pd = dnnl::convolution_forward::primitive_desc(describe(dnnl::algorithm::convolution_direct, plan.src, plan.dst),
                                                        attr, engine());
    plan.weights_view = loaded_weights_desc(ws, group_, false);
    plan.weights = weights_.pack_for(pd.weights_desc(), plan.weights_view);
    plan.primitive = dnnl::convolution_forward(pd);
    return plan;
  }

  static void stage_blocked(ConvPlan& plan, const dnnl::convolution_forward::primitive_desc& pd) {
    plan.to_blocked = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), plan.src, engine(), pd.src_desc(), make_attr()));
    plan.from_blocked = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), pd.dst_desc(), engine(), plan.dst, make_attr()));
    plan.blocked_src = pd.src_desc();
    plan.blocked_dst = pd.dst_desc();
    plan.blocked = true;
    const auto& blk = pd.src_desc().data.format_desc.blocking;
    plan.blocked_layout = blk.inner_nblks == 1 && blk.inner_blks[0] == 8 ? "nChw8c" : "nChw16c";
  }

  // Float32, or bf16 where the graph keeps the value so (a bf16 node only).
  DType x_type_, y_type_;
  Algorithm algorithm_;
  PackedWeights weights_;
  Tensor b_;
  Activation act_;
  bool channels_last_;
  std::int64_t group_;
  bool has_residual_;
  bool bf16_;
  ShapeCache<ConvPlan> cache_;
};

}  // namespace

std::string conv_unsupported(const Node& node, const Graph& graph) {
  if (node.inputs.size() < 2) return "needs weights";
  const Tensor* w = graph.initializer(node.inputs[1]);
  if (!w || w->dtype() != DType::Float32 || w->rank() != 4) return "weights are not a constant 4-D float32 tensor";
  const std::int64_t group = node.attr_int("group", 1);
  if (group < 1 || w->shape()[0] % group != 0) return "group does not divide the output channels";
  if (node.inputs.size() > 2 && node.inputs[2] != kNoValue) {
    const Tensor* b = graph.initializer(node.inputs[2]);
    if (!b || b->dtype() != DType::Float32 || b->numel() != w->shape()[0]) return "bias is not a constant float32 [C_out]";
  }
  if (!activation_supported(read_activation(node))) return "activation " + read_activation(node).kind + " has no oneDNN post-op";
  const ValueId residual = has_fused_residual(node) ? node.inputs[3] : kNoValue;
  for (ValueId v : {node.inputs[0], residual, node.outputs.empty() ? kNoValue : node.outputs[0]}) {
    const DType t = v == kNoValue ? DType::Undefined : graph.value(v).dtype;
    if (t != DType::Float32 && t != DType::Undefined && !bf16_activation(node, graph, v))
      return "input or output is not float32";
  }
  return "";
}

std::vector<std::string> conv_configs(const Node& node, const Graph& graph) {
  const Tensor* w = graph.initializer(node.inputs[1]);
  std::vector<std::string> out = {"algorithm=direct"};
  if (!w || computes_bf16(node)) return out;
  if (is_blocked_candidate(node, w->shape())) out.push_back("algorithm=direct,layout=blocked");
  if (is_winograd_candidate(node, w->shape())) out.push_back("algorithm=winograd");
  if (is_pointwise_nhwc(node, w->shape())) out.push_back("algorithm=matmul");
  return out;
}

namespace {

// Bytes of scratchpad oneDNN's Winograd kernel asks for on this conv (all threads), or nullopt
// when it has none for it. At batch 1 some schedules stage whole transformed images there
// (Inception v3's 80->192 conv at 71x71: 7-13.5 MB a thread, against ResNet-50's 2.1 MB at most).
std::optional<double> winograd_scratchpad_bytes(const Node& node, const Shape& x, const Shape& ws) {
  try {
    const bool channels_last = node.attr_int("channels_last", 0) == 1;
    const Shape nchw = channels_last ? Shape{x[0], x[3], x[1], x[2]} : x;
    const KernelContext ctx(node, {});
    const reference::Window win = reference::conv_window(ctx, nchw, {ws[2], ws[3]}, false);
    const Dims src = {nchw[0], nchw[1], nchw[2], nchw[3]}, dst = {nchw[0], ws[0], win.out[1], win.out[2]};
    const dnnl::convolution_forward::primitive_desc pd(
        conv_forward_desc(dnnl::algorithm::convolution_winograd, f32_desc(src, Tag::any), f32_desc(dst, Tag::any),
                          loaded_weights_desc(ws, 1, false).dims(), dnnl::memory::desc(), win),
        make_attr(), engine());
    return static_cast<double>(pd.scratchpad_desc().get_size());
  } catch (const dnnl::error&) {
    return std::nullopt;
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace

std::optional<KernelProfile> describe_conv(const Node& node, const std::string& config, const InputShapes& shapes,
                                           int threads) {
  const std::optional<Algorithm> algorithm = parse_algorithm(config);
  if (!algorithm || shapes.size() < 2 || !shapes[0] || !shapes[1] || shapes[0]->size() != 4 || shapes[1]->size() != 4)
    return std::nullopt;
  const Shape& x = *shapes[0];
  const Shape& ws = *shapes[1];
  const bool channels_last = node.attr_int("channels_last", 0) == 1;
  const double batch = static_cast<double>(x[0]);
  const double activation_bytes = 4.0 * static_cast<double>(x[0] * x[1] * x[2] * x[3]);
  const double weight_bytes = 4.0 * static_cast<double>(ws[0] * ws[1] * ws[2] * ws[3]);
  const bool pointwise = ws[2] * ws[3] == 1;
  const CpuFeatures& cpu = cpu_features();
  KernelProfile p;
  p.vector_bits = cpu.avx512f ? 512 : cpu.avx2 ? 256 : 128;
  // Shares of the vectors' peak its kernels sustain with operands in cache: with AVX-512 its
  // brgemm kernels in any layout; without, its older jit:avx2 kernels, whose 1x1 is good but
  // whose larger convs run better in the blocked layout than in NHWC.
  const bool avx2_only = !cpu.avx512f;
  switch (*algorithm) {
    case Algorithm::Direct:
      p.efficiency = !avx2_only ? 0.6 : pointwise ? 0.55 : channels_last ? 0.4 : 0.5;
      break;
    case Algorithm::DirectBlocked:
      p.efficiency = !avx2_only ? 0.6 : 0.5;
      p.extra_bytes = 2 * activation_bytes * 2;  // the input reordered in, the output out
      break;
    case Algorithm::Winograd:
      // F(2x2, 3x3) at batch 1, F(4x4, 3x3) from batch 2: 4 or 2.25 multiply-adds an output
      // where direct takes 9; weights transformed to 16/9 or 36/9 of their size; reorders.
      // (Outputs equal inputs in size: stride 1, pads keep or shrink them by 2.)
      // Tiles of 2x2 or 4x4 outputs: an output not a multiple of the tile pads the work.
      {
        const std::int64_t m = batch < 2 ? 2 : 4, oh = x[channels_last ? 1 : 2], ow = x[channels_last ? 2 : 3];
        const double padded = static_cast<double>(((oh + m - 1) / m * m) * ((ow + m - 1) / m * m)) /
                              static_cast<double>(std::max<std::int64_t>(1, oh * ow));
        p.work_scale = padded * (batch < 2 ? 1 / 2.25 : 1 / 4.0);
      }
      p.efficiency = 0.45;
      p.shape_specific_weights = true;
      // Scratch past a thread's share of L2 streams through memory, written and read back.
      if (const auto scratch = winograd_scratchpad_bytes(node, x, ws)) {
        if (*scratch > kScratchInCachePerThread * std::max(1, threads)) p.extra_bytes += 2 * *scratch;
      } else {
        return std::nullopt;  // no Winograd kernel for this conv: the kernel would run direct
      }
      p.extra_bytes += weight_bytes * (batch < 2 ? 7.0 / 9 : 27.0 / 9) + 2 * activation_bytes * 2;
      break;
    case Algorithm::MatMul:
      // Its matmul kernels measured a few percent ahead of the 1x1 conv from batch 2 on
      // (ResNet-50's 1x1s at batch 8) and behind on narrow products at batch 1.
      p.efficiency = (!avx2_only ? 0.6 : 0.55) * (batch < 2 ? 0.97 : 1.05);
      break;
  }
  if (computes_bf16(node)) {
    // The input is rounded into staging first (read 4 bytes, write 2, the conv reads 2); the
    // weights are read at 2 bytes.
    p.work_scale *= reduced_precision_work_share(dnnl::memory::data_type::bf16);
    p.extra_bytes += activation_bytes - weight_bytes / 2;
  }
  return p;
}

std::unique_ptr<Kernel> make_conv(const Node& node, const Graph& graph, const std::string& config) {
  const std::optional<Algorithm> algorithm = parse_algorithm(config);
  const std::vector<std::string> offered = conv_configs(node, graph);
  if (!algorithm || (!config.empty() && std::find(offered.begin(), offered.end(), config) == offered.end()))
    throw Error(ErrorCode::Internal, node_label(node) + "onednn has no conv configuration '" + config + "'");
  const Tensor* b = node.inputs.size() > 2 && node.inputs[2] != kNoValue ? graph.initializer(node.inputs[2]) : nullptr;
  auto kernel = std::make_unique<ConvKernel>(node, graph, *graph.initializer(node.inputs[1]), b ? *b : Tensor(), *algorithm);
  if (auto shape = static_shape(graph, node.inputs[0]); shape && shape->size() == 4)
    try_warm_up([&] { kernel->warm_up(node, *shape, fully_static(graph, node.inputs[0])); });
  return kernel;
}

}  // namespace wpk::onednn
