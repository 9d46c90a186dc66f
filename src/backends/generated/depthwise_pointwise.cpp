#include "backends/generated/depthwise_pointwise.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdio>

#include "backends/generated/kernel_support.hpp"
#include "graph/group_parts.hpp"
#include "graph/fused_ops.hpp"

namespace wpk::gen {
namespace {

using namespace codegen;

// act(bd[c] + the depthwise taps) at every point of the depthwise output of one image; its
// weights read as [kh, kw, C], so that a vector of channels loads them contiguously.
Compute depthwise_producer(const ConvSpec& s) {
  Var n = var("pn", 1), y = var("py", s.oh), x = var("px", s.ow), c = var("pc", s.c);
  Buffer in = buffer("x", {1, s.h, s.w, s.c}), weights = buffer("wd", {s.kh, s.kw, s.c});
  std::vector<Buffer> inputs = {in, weights};
  Expr sum;
  if (s.bias) {
    inputs.push_back(buffer("bd", {s.c}));
    sum = load(inputs.back(), {c});
  }
  for (std::int64_t ky = 0; ky < s.kh; ++ky)
    for (std::int64_t kx = 0; kx < s.kw; ++kx) {
      const Affine iy = Affine(y) * s.sh + ky * s.dh - s.pad_top, ix = Affine(x) * s.sw + kx * s.dw - s.pad_left;
      const Expr tap = load_or_zero(in, {n, iy, ix, c}) * load(weights, {ky, kx, c});
      sum = sum ? sum + tap : tap;
    }
  return compute("depthwise", buffer("d", {1, s.oh, s.ow, s.c}), {n, y, x, c}, {}, activation_of(s, sum), nullptr, inputs);
}

class DepthwisePointwiseKernel : public CompiledKernel {
 public:
  DepthwisePointwiseKernel(std::string name, const Schedule& schedule, CpuTarget target, const DepthwisePointwiseSpec& spec,
                           const Tensor& w_depthwise, const Tensor& w_pointwise, std::string recipe)
      : CompiledKernel(std::move(name), schedule, target, std::move(recipe)), spec_(spec) {
    const ConvSpec& d = spec.depthwise;
    // [C, 1, kh, kw] -> [kh, kw, C].
    auto transposed = std::make_shared<std::vector<float>>(static_cast<std::size_t>(d.kh * d.kw * d.c));
    const float* w = w_depthwise.data<float>();
    for (std::int64_t c = 0; c < d.c; ++c)
      for (std::int64_t k = 0; k < d.kh * d.kw; ++k) (*transposed)[static_cast<std::size_t>(k * d.c + c)] = w[c * d.kh * d.kw + k];
    depthwise_weights_ = std::move(transposed);
    pointwise_weights_ = packed_weights(schedule.packs().front(), schedule, w_pointwise);
  }

  void run(KernelContext& ctx) const override {
    const Entry code = entry(ctx);
    const ConvSpec& d = spec_.depthwise;
    const Tensor& x = ctx.input(0);
    check_f32(ctx, x, "the input");
    if (x.rank() != 4 || Shape(x.shape().begin() + 1, x.shape().end()) != Shape{d.h, d.w, d.c})
      ctx.fail(ErrorCode::InvalidArgument, "input " + shape_to_string(x.shape()) + " is not [N, " + std::to_string(d.h) + ", " +
                                               std::to_string(d.w) + ", " + std::to_string(d.c) + "], as the kernel was generated for");
    const std::int64_t batch = x.shape()[0];
    const Shape y_shape{batch, d.oh, d.ow, spec_.o};
    const float* depthwise_bias = d.bias ? channel_input(ctx, 2, d.c, "depthwise bias") : nullptr;
    const float* pointwise_bias = spec_.pointwise.bias ? channel_input(ctx, 4, spec_.o, "pointwise bias") : nullptr;
    const float* z = spec_.pointwise.residual ? residual_input(ctx, kDepthwisePointwiseResidual, y_shape) : nullptr;
    Tensor& y = ctx.allocate_output(0, DType::Float32, y_shape);
    const std::int64_t in_image = d.h * d.w * d.c, out_image = d.oh * d.ow * spec_.o;
    const int threads = omp_get_max_threads();
    for (std::int64_t b = 0; b < batch; ++b) {
      std::vector<float*> args = {const_cast<float*>(x.data<float>() + b * in_image), const_cast<float*>(depthwise_weights_->data())};
      if (depthwise_bias) args.push_back(const_cast<float*>(depthwise_bias));
      args.push_back(const_cast<float*>(pointwise_weights_->data()));
      if (pointwise_bias) args.push_back(const_cast<float*>(pointwise_bias));
      if (z) args.push_back(const_cast<float*>(z + b * out_image));
      args.push_back(y.data<float>() + b * out_image);
      code(args.data(), nullptr, threads);
    }
  }

  bool owns_input(std::size_t i) const override { return i == 1 || i == 3; }

 private:
  DepthwisePointwiseSpec spec_;
  std::shared_ptr<const std::vector<float>> depthwise_weights_, pointwise_weights_;
};

std::string recipe(const DepthwisePointwiseSpec& spec, const GroupConfig& c, int lanes, CpuTarget target) {
  const ConvSpec& s = spec.depthwise;
  RecipeText r;
  r.add("kind", "depthwise_pointwise").add(s, "depthwise_").add(spec.pointwise, "pointwise_").add("o", spec.o).add_window(s);
  return r.add("config", c.text()).add("lanes", lanes).add("target", target_name(target)).text();
}

}  // namespace

std::optional<DepthwisePointwiseSpec> depthwise_pointwise_spec(const Node& node, const Graph& graph, std::string& why) {
  const std::optional<Graph> group = group_parts_of(node, graph, "DepthwisePointwiseConv", why);
  if (!group) return std::nullopt;
  const Graph& parts = *group;
  DepthwisePointwiseSpec s;
  std::optional<ConvSpec> d = conv_spec(parts.nodes()[0], parts, why);
  if (!d) return std::nullopt;
  if (!d->depthwise || d->residual) {
    why = "the first conv of a depthwise + pointwise group must be depthwise, without a residual";
    return std::nullopt;
  }
  s.depthwise = *d;
  const Node& pw = parts.nodes()[1];
  const Tensor* w = pw.inputs.size() > 1 ? parts.initializer(pw.inputs[1]) : nullptr;
  if (!w || w->dtype() != DType::Float32 || w->rank() != 4 || w->shape()[1] != d->c || w->shape()[2] != 1 ||
      w->shape()[3] != 1 || w->shape()[0] < 1 || !pointwise_conv_attributes(pw)) {
    why = "the second conv of a depthwise + pointwise group must be pointwise (1x1, stride 1, unpadded) with constant float32 weights";
    return std::nullopt;
  }
  s.o = w->shape()[0];
  if (!read_conv_epilogue(pw, parts, s.o, s.pointwise, why)) return std::nullopt;
  return s;
}

Schedule depthwise_pointwise_schedule(const DepthwisePointwiseSpec& spec, const GroupConfig& config, int lanes) {
  return staged_pointwise_schedule("depthwise_pointwise", depthwise_producer(spec.depthwise), spec.o, spec.pointwise, config, lanes);
}

std::unique_ptr<Kernel> make_depthwise_pointwise(const Node& node, const Graph& graph, const DepthwisePointwiseSpec& spec,
                                                 const GroupConfig& config) {
  const CpuTarget target = widest_target();
  const int lanes = vector_lanes(target);
  return std::make_unique<DepthwisePointwiseKernel>(group_kernel_name("depthwise_pointwise_nhwc", config, target),
                                                    depthwise_pointwise_schedule(spec, config, lanes), target, spec,
                                                    *graph.initializer(node.inputs[1]), *graph.initializer(node.inputs[3]),
                                                    recipe(spec, config, lanes, target));
}

}  // namespace wpk::gen
