// Conv and com.wpk FusedConv on oneDNN: 2-D, float32, constant weights packed once into the
// layout the chosen implementation wants; bias, residual add and activation fused as post-ops;
// activations NCHW or NHWC (channels_last) as the graph says, so no reorders of activations,
// except around Winograd convolutions (below). Two of wpk's own kernels take some NHWC convs
// instead of a primitive: weight streaming (stream_conv.hpp) and, on AVX2 CPUs, avx2_conv.hpp.
#include <omp.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "backends/cpu/avx2_conv.hpp"
#include "backends/cpu/avx2_winograd.hpp"
#include "backends/onednn/onednn_kernels.hpp"
#include "backends/cpu/stream_conv.hpp"
#include "core/page_memory.hpp"
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
  // Winograd, and direct 3x3s on AVX2 (below): the primitive reads and writes oneDNN's blocked
  // layout (nChw16c, nChw8c), so the input is reordered into it and the output back, in
  // per-thread staging memory.
  bool blocked = false;
  bool winograd = false;
  const char* blocked_layout = "";
  dnnl::memory::desc blocked_src, blocked_dst;
  dnnl::reorder to_blocked, from_blocked;
  // Weight-streaming kernel (stream_conv.hpp) on the packed weights instead of the primitive,
  // which is then not created: the block of the weights' Acdb{block}a layout, or 0.
  int stream_block = 0;
  // wpk's AVX2 kernel (avx2_conv.hpp) on weights packed Acdb16a, instead of the primitive;
  // with `transformed`, its Winograd kernel (avx2_winograd.hpp) on those weights transformed.
  bool avx2 = false;
  std::shared_ptr<const float> transformed;
  StreamConvShape own;  // the shape either of wpk's kernels computes
};

// oneDNN 2.6's Winograd F(2x2, 3x3) convolution (jit_fp32_wino_2x3) on 3x3, stride-1 convs
// of 64+ channels and outputs of 14x14 or more: measured 15-40% faster than the direct brgemm
// kernel on ResNet-50's 3x3 convs, both reorders included (0.52 vs 0.85 ms at 256 channels,
// 14x14; in the whole model 0.80 vs 0.97 ms each). At 7x7 (512 channels) it gained nothing
// while its transformed weights are 1.8x larger, so those stay direct. Its rounding differs
// from direct convolution by a few float32 ulps per product. At batch 2+ oneDNN picks its
// F(4x4, 3x3) kernel (jit_wino_4x3) instead: faster again at batch 8 (4.5 vs 8.2 ms at 256
// channels), but with weights 3.4x larger and a slow weight transform (~50 ms per 256-channel
// conv, 100+ ms per 512-channel one), which is why 7x7 stays direct at every batch size (it
// would take ResNet-50 at batch 8 from 410 to 530 MB for ~10 ms a run).
// WPK_ONEDNN_WINOGRAD=0 turns it off.
bool winograd_enabled() {
  static const bool enabled = switched_on("WPK_ONEDNN_WINOGRAD");
  return enabled;
}

// wpk's Winograd kernel (avx2_winograd.hpp) on the 3x3 stride-1 convs the AVX2 kernel takes
// where it pays: 2.2-2.4x faster than the direct kernel on ResNet-50's 3x3s at 56x56 and 28x28,
// 1.6-2x at 14x14 (Zen 3, 2 threads, cold caches). WPK_AVX2_WINOGRAD=0 turns it off.
bool avx2_winograd_enabled() {
  static const bool enabled = switched_on("WPK_AVX2_WINOGRAD");
  return enabled;
}

// WPK_STREAM_CONV=0 turns the weight-streaming kernel off (every conv on oneDNN's primitives).
bool stream_conv_enabled() {
  static const bool enabled = switched_on("WPK_STREAM_CONV");
  return enabled;
}

// Convs larger than 1x1: on 1x1s oneDNN's AVX2 kernels measured 5-15% faster than wpk's (its
// tiles reload the sums' inputs per output-channel block where a 1x1 has no taps to amortise
// that over), on 3x3s wpk's kernel 0-40% faster (below).
bool is_avx2_conv_candidate(const Node& node, const Shape& ws) {
  return node.attr_int("channels_last", 0) == 1 && node.attr_int("group", 1) == 1 && ws.size() == 4 &&
         ws[2] * ws[3] > 1;
}

// See build(): above this (times the threads), a batch-1 Winograd conv runs direct instead.
constexpr std::size_t kMaxBatch1WinogradScratchPerThread = 4u << 20;

// True when every element of int-list attribute `name` (absent: `count` elements) is `want`.
bool attr_all(const Node& node, const char* name, std::int64_t want, std::size_t count) {
  for (std::int64_t x : node.attr_ints(name, std::vector<std::int64_t>(count, want)))
    if (x != want) return false;
  return true;
}

// A 1x1, stride-1, unpadded, ungrouped conv on NHWC activations is the matrix product
// [N*H*W, C_in] x [C_in, C_out] over the same bytes. At batch 2+ it runs on oneDNN's matmul,
// 3-10% faster than its 1x1 convolution at batch 8 (ResNet-50's 512->2048 at 7x7: 2.9 vs
// 3.1-3.4 ms; 128->512 at 28x28: 3.0-3.2 vs 3.4 ms); at batch 1 the two tie on ResNet-50's
// shapes and the matmul is 6% slower on MobileNetV2's narrow ones, so batch 1 stays a conv.
bool is_pointwise_nhwc(const Node& node, const Shape& ws) {
  const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  return node.attr_int("channels_last", 0) == 1 && node.attr_int("group", 1) == 1 && ws.size() == 4 && ws[2] == 1 &&
         ws[3] == 1 && attr_all(node, "strides", 1, 2) && attr_all(node, "dilations", 1, 2) &&
         attr_all(node, "pads", 0, 4) &&
         (auto_pad == "NOTSET" || auto_pad == "VALID");
}

// On CPUs without AVX-512 (where oneDNN 2.6 has neither Winograd nor brgemm convolutions),
// its direct AVX2 kernel runs convs larger than 1x1 faster in nChw8c than in NHWC (3x3s
// measured; Inception's 1x7/7x1 take the same path): on a Zen 3 at batch 8,
// 64 channels at 56x56 11.2 vs 15.3 ms, 256 at 14x14 11.3 vs 13.2; ResNet-50 at batch 8 ran
// 16% faster with the two reorders per conv (medians 467-593 vs 565-710 ms, A/B alternated),
// batch 1 within this machine's noise. Under 64 channels (SqueezeNet's 16-48) it gained
// nothing. A residual stays NHWC: the sum post-op would need the residual reordered in too.
// WPK_BLOCKED_CONV=0 turns it off.
bool blocked_direct_enabled() {
  static const bool enabled = switched_on("WPK_BLOCKED_CONV");
  return enabled;
}

bool is_blocked_direct_candidate(const Node& node, const Shape& ws) {
  return node.attr_int("channels_last", 0) == 1 && !has_fused_residual(node) && node.attr_int("group", 1) == 1 &&
         ws.size() == 4 && ws[0] >= 64 && ws[1] >= 64 && ws[2] * ws[3] > 1;
}

// 3x3 stride-1 undilated convs of 64+ channels in and out, without a residual (a sum post-op
// has no Winograd kernel): Winograd candidates, at outputs of 14x14 or more (see above).
bool is_winograd_kernel(const Node& node, const Shape& ws) {
  return !has_fused_residual(node) && node.attr_int("group", 1) == 1 && ws.size() == 4 && ws[2] == 3 && ws[3] == 3 &&
         ws[0] >= 64 && ws[1] >= 64 && attr_all(node, "strides", 1, 2) && attr_all(node, "dilations", 1, 2);
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
  ConvKernel(const Node& node, const Tensor& w, Tensor b, ConvAlgorithms algorithms)
      : pointwise_(algorithms == ConvAlgorithms::Heuristic && is_pointwise_nhwc(node, w.shape())),
        winograd_kernel_(algorithms == ConvAlgorithms::Heuristic && winograd_enabled() &&
                         is_winograd_kernel(node, w.shape())),
        blocked_direct_(algorithms == ConvAlgorithms::Heuristic && blocked_direct_enabled() &&
                        is_blocked_direct_candidate(node, w.shape())),
        avx2_(algorithms == ConvAlgorithms::Heuristic && avx2_conv_enabled() && is_avx2_conv_candidate(node, w.shape())),
        weights_(w, loaded_weights_desc(w.shape(), node.attr_int("group", 1), false)), b_(std::move(b)),
        act_(read_activation(node)), channels_last_(node.attr_int("channels_last", 0) == 1),
        group_(node.attr_int("group", 1)), has_residual_(has_fused_residual(node)),
        own_epilogue_(own_kernel_epilogue(act_, b_, has_residual_)),
        stream_allowed_(stream_conv_enabled() && group_ == 1 && channels_last_ && own_epilogue_ &&
                        stream_conv_fuses(*own_epilogue_)) {}

  void run(KernelContext& ctx) const override {
    guarded(ctx, [&] {
      const Tensor& x = image_input(ctx);
      auto plan = cache_.get(shape_key({&x.shape()}), [&] { return build(ctx, x.shape()); });
      Tensor& y = ctx.allocate_output(0, DType::Float32, plan->y_shape);
      if (plan->stream_block || plan->avx2) {
        ctx.note_variant(plan->transformed ? "winograd" : plan->avx2 ? "avx2" : "stream");
        if (has_residual_) accumulate_residual_into(ctx, 3, y);
        const auto* w = static_cast<const float*>(plan->weights.get_data_handle());
        if (plan->transformed)
          avx2_winograd_conv(plan->own, x.data<float>(), plan->transformed.get(), *own_epilogue_, y.data<float>());
        else if (plan->avx2) avx2_conv(plan->own, x.data<float>(), w, *own_epilogue_, y.data<float>());
        else stream_conv(plan->own, x.data<float>(), w, plan->stream_block, *own_epilogue_, y.data<float>());
        return;
      }
      const dnnl::memory x_mem = wrap_arg(plan->primitive, DNNL_ARG_SRC, plan->src, x),
                         y_mem = wrap_arg(plan->primitive, DNNL_ARG_DST, plan->dst, y);
      dnnl::memory src = x_mem, dst = y_mem;
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
    if (pointwise_ && nchw[0] >= 2) {
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
    const StreamConvShape own{nchw[0], nchw[2], nchw[3], nchw[1], win.out[1], win.out[2], ws[0],
                              ws[2], ws[3], win.stride[1], win.stride[2], win.pad_begin[1], win.pad_begin[2],
                              win.dilation[1], win.dilation[2]};
    if (avx2_ && own_epilogue_ && avx2_conv_pays(own)) {
      plan.weights_view = loaded_weights_desc(ws, group_, false);
      plan.weights = weights_.pack_for(f32_desc(w_dims, Tag::Acdb16a), plan.weights_view);
      plan.avx2 = true;
      plan.own = own;
      if (avx2_winograd_enabled() && avx2_winograd_pays(own)) plan.transformed = winograd_weights(plan);
      return plan;
    }
    plan.src = f32_desc(src_dims, act_tag);
    plan.dst = f32_desc(dst_dims, act_tag);
    plan.bias = f32_desc({ws[0]}, Tag::x);
    const auto bias_desc = b_.empty() ? dnnl::memory::desc() : plan.bias;
    auto describe = [&](dnnl::algorithm alg, const dnnl::memory::desc& src, const dnnl::memory::desc& dst) {
      return dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, alg, src, f32_desc(w_dims, Tag::any),
                                             bias_desc, dst, {win.stride[1], win.stride[2]},
                                             {win.dilation[1] - 1, win.dilation[2] - 1},
                                             {win.pad_begin[1], win.pad_begin[2]}, {win.pad_end[1], win.pad_end[2]});
    };
    const bool winograd_shape = winograd_kernel_ && win.out[1] >= 14 && win.out[2] >= 14;
    dnnl::convolution_forward::primitive_desc pd;
    if (winograd_shape) {
      try {
        pd = dnnl::convolution_forward::primitive_desc(
            describe(dnnl::algorithm::convolution_winograd, f32_desc(src_dims, Tag::any), f32_desc(dst_dims, Tag::any)),
            attr, engine());
        // oneDNN's batch-1 kernel sometimes picks a schedule that stages whole transformed
        // images in its scratchpad (Inception v3's 80->192 conv at 71x71, 1-4 threads: 7-13.5 MB
        // per thread, where ResNet-50's take at most 2.1 MB per thread at 1-16 threads). Read
        // back cold inside a model that conv ran at 6.1-6.9 ms, slower than the direct
        // kernel's 5.3-5.9, so such convs stay direct.
        const std::size_t threads = static_cast<std::size_t>(std::max(1, omp_get_max_threads()));
        if (nchw[0] == 1 && pd.scratchpad_desc().get_size() > kMaxBatch1WinogradScratchPerThread * threads) pd = {};
        if (pd) {
          stage_blocked(plan, pd);
          plan.winograd = true;
        }
      } catch (const dnnl::error&) {
        pd = {};  // no Winograd kernel (or reorder) for this ISA, shape or post-op: direct below
      }
    }
    if (!plan.blocked)
      pd = dnnl::convolution_forward::primitive_desc(describe(dnnl::algorithm::convolution_direct, plan.src, plan.dst),
                                                     attr, engine());
    if (!plan.blocked && blocked_direct_ && std::string(pd.impl_info_str()).rfind("jit:avx2", 0) == 0) {
      const dnnl::convolution_forward::primitive_desc any_pd(
          describe(dnnl::algorithm::convolution_direct, f32_desc(src_dims, Tag::any), f32_desc(dst_dims, Tag::any)),
          attr, engine());
      if (any_pd.src_desc() != plan.src) {
        pd = any_pd;
        stage_blocked(plan, pd);
      }
    }
    plan.weights_view = loaded_weights_desc(ws, group_, false);
    plan.weights = weights_.pack_for(pd.weights_desc(), plan.weights_view);
    if (stream_allowed_ && !plan.blocked) {
      // Streaming reads the weights in the layout oneDNN packed them for its direct kernel, so
      // plans of other shapes (a larger batch on the primitive) share one packed copy.
      const int block = stream_weights_block(pd.weights_desc(), ws[0], ws[1], ws[2], ws[3]);
      if (stream_conv_pays(own, block, omp_get_max_threads())) {
        plan.stream_block = block;
        plan.own = own;
      }
    }
    if (!plan.stream_block) plan.primitive = dnnl::convolution_forward(pd);
    return plan;
  }

  // The weights transformed for the Winograd kernel: made once, from the Acdb16a packing, on
  // the first plan that runs it (at load for the declared shape), and shared by later plans.
  std::shared_ptr<const float> winograd_weights(const ConvPlan& plan) const {
    const std::lock_guard<std::mutex> lock(transformed_mutex_);
    if (!transformed_) {
      // Long-lived pages, like the packings: huge pages where the system has them.
      const std::shared_ptr<void> bytes = long_lived_zeroed(avx2_winograd_weights_size(plan.own) * sizeof(float));
      float* u = static_cast<float*>(bytes.get());
      avx2_winograd_weights(plan.own, static_cast<const float*>(plan.weights.get_data_handle()), u);
      transformed_ = std::shared_ptr<const float>(bytes, u);
    }
    return transformed_;
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

  // All four false with ConvAlgorithms::DirectOnly (the tuner's alternative to these choices).
  bool pointwise_;        // runs as a matmul at batch 2+
  bool winograd_kernel_;  // runs as Winograd at outputs of 14x14+
  bool blocked_direct_;   // runs direct in oneDNN's blocked layout where its NHWC kernel is AVX2
  bool avx2_;             // runs on wpk's AVX2 kernel where avx2_conv_pays
  PackedWeights weights_;
  Tensor b_;
  Activation act_;
  bool channels_last_;
  std::int64_t group_;
  bool has_residual_;
  std::optional<StreamConvEpilogue> own_epilogue_;  // bias, residual, activation; fixed at load
  bool stream_allowed_;  // the weight-streaming kernel may run shapes where it pays
  ShapeCache<ConvPlan> cache_;
  mutable std::mutex transformed_mutex_;
  mutable std::shared_ptr<const float> transformed_;  // see winograd_weights()
};

}  // namespace

std::optional<StreamConvEpilogue> own_kernel_epilogue(const Activation& act, const Tensor& bias, bool residual) {
  StreamConvEpilogue e;
  e.bias = bias.empty() ? nullptr : bias.data<float>();
  e.accumulate = residual;
  if (act.kind == "Relu") {
    e.act = StreamConvEpilogue::Act::Relu;
  } else if (act.kind == "Clip") {
    e.act = StreamConvEpilogue::Act::Clip;
    e.lo = act.params[0];
    e.hi = act.params[1];
  } else if (act.kind == "Gelu") {
    e.act = StreamConvEpilogue::Act::Gelu;
  } else if (act.kind == "GeluTanh") {
    e.act = StreamConvEpilogue::Act::GeluTanh;
  } else if (!act.kind.empty()) {
    return std::nullopt;
  }
  return e;
}

bool avx2_conv_enabled() {
  static const bool enabled = switched_on("WPK_AVX2_CONV");
  return enabled;
}

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
  const ValueInfo& x = graph.value(node.inputs[0]);
  if (x.dtype != DType::Float32 && x.dtype != DType::Undefined) return "input is not float32";
  return "";
}

// False when the output's inferred height and width are under 14x14, where a Winograd kernel
// never runs (build()); true when unknown.
bool winograd_output_possible(const Node& node, const Graph& graph) {
  if (node.outputs.empty() || node.outputs[0] == kNoValue) return true;
  const auto& dims = graph.value(node.outputs[0]).dims;
  if (!dims || dims->size() != 4) return true;
  const bool channels_last = node.attr_int("channels_last", 0) == 1;
  const Dim& h = (*dims)[channels_last ? 1 : 2];
  const Dim& w = (*dims)[channels_last ? 2 : 3];
  return !h.is_static() || !w.is_static() || (h.value >= 14 && w.value >= 14);
}

bool conv_has_algorithm_choice(const Node& node, const Graph& graph) {
  const Tensor* w = graph.initializer(node.inputs[1]);
  if (!w) return false;
  // (The weight-streaming kernel is no algorithm choice: both candidates use it where it pays.)
  if (avx2_conv_available() && is_avx2_conv_candidate(node, w->shape())) return true;
  if (is_winograd_kernel(node, w->shape())) return winograd_output_possible(node, graph);
  if (!is_pointwise_nhwc(node, w->shape())) return false;
  // The matmul runs at batch 2+ only: with the batch fixed at 1 both candidates are one kernel.
  const auto& dims = graph.value(node.inputs[0]).dims;
  return !(dims && !dims->empty() && dims->front().is_static() && dims->front().value == 1);
}

std::unique_ptr<Kernel> make_conv(const Node& node, const Graph& graph, ConvAlgorithms algorithms) {
  const Tensor* b = node.inputs.size() > 2 && node.inputs[2] != kNoValue ? graph.initializer(node.inputs[2]) : nullptr;
  auto kernel = std::make_unique<ConvKernel>(node, *graph.initializer(node.inputs[1]), b ? *b : Tensor(), algorithms);
  if (auto shape = static_shape(graph, node.inputs[0]); shape && shape->size() == 4)
    try_warm_up([&] { kernel->warm_up(node, *shape, fully_static(graph, node.inputs[0])); });
  return kernel;
}

}  // namespace wpk::onednn
