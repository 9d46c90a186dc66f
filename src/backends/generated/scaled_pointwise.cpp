#include "backends/generated/scaled_pointwise.hpp"

#include <omp.h>

#include <algorithm>

#include "backends/generated/kernel_support.hpp"
#include "graph/fused_ops.hpp"
#include "graph/group_parts.hpp"

namespace wpk::gen {
namespace {

using namespace codegen;

// x[c] * s[c] at every point of one image.
Compute scale_producer(const ScaledPointwiseSpec& s) {
  Var n = var("pn", 1), y = var("py", s.h), x = var("px", s.w), c = var("pc", s.c);
  Buffer in = buffer("x", {1, s.h, s.w, s.c}), scale = buffer("s", {s.c});
  return compute("scale", buffer("d", {1, s.h, s.w, s.c}), {n, y, x, c}, {}, load(in, {n, y, x, c}) * load(scale, {c}), nullptr,
                 {in, scale});
}

class ScaledPointwiseKernel : public CompiledKernel {
 public:
  ScaledPointwiseKernel(std::string name, const Schedule& schedule, CpuTarget target, const ScaledPointwiseSpec& spec,
                        const Tensor& weights, std::string recipe)
      : CompiledKernel(std::move(name), schedule, target, std::move(recipe)), spec_(spec),
        weights_(packed_weights(schedule.packs().front(), schedule, weights)) {}

  void run(KernelContext& ctx) const override {
    const Entry code = entry(ctx);
    const Tensor& x = ctx.input(0);
    check_f32(ctx, x, "the input");
    if (x.rank() != 4 || Shape(x.shape().begin() + 1, x.shape().end()) != Shape{spec_.h, spec_.w, spec_.c})
      ctx.fail(ErrorCode::InvalidArgument, "input " + shape_to_string(x.shape()) + " is not [N, " + std::to_string(spec_.h) +
                                               ", " + std::to_string(spec_.w) + ", " + std::to_string(spec_.c) +
                                               "], as the kernel was generated for");
    const std::int64_t batch = x.shape()[0];
    const Tensor& s = ctx.input(1);
    check_f32(ctx, s, "the scale");
    const bool per_image = s.rank() == 4 && s.shape()[0] == batch && batch > 1;
    if (s.rank() != 4 || (s.shape()[0] != 1 && s.shape()[0] != batch) || s.shape()[1] != 1 || s.shape()[2] != 1 ||
        s.shape()[3] != spec_.c)
      ctx.fail(ErrorCode::InvalidArgument, "scale " + shape_to_string(s.shape()) + " is not [1, 1, 1, " + std::to_string(spec_.c) +
                                               "] or [" + std::to_string(batch) + ", 1, 1, " + std::to_string(spec_.c) + "]");
    const Shape y_shape{batch, spec_.h, spec_.w, spec_.o};
    const float* bias = spec_.pointwise.bias ? channel_input(ctx, 3, spec_.o, "bias") : nullptr;
    const float* z = spec_.pointwise.residual ? residual_input(ctx, kScaledPointwiseResidual, y_shape) : nullptr;
    Tensor& y = ctx.allocate_output(0, DType::Float32, y_shape);
    const std::int64_t in_image = spec_.h * spec_.w * spec_.c, out_image = spec_.h * spec_.w * spec_.o;
    const int threads = omp_get_max_threads();
    for (std::int64_t b = 0; b < batch; ++b) {
      std::vector<float*> args = {const_cast<float*>(x.data<float>() + b * in_image),
                                  const_cast<float*>(s.data<float>() + (per_image ? b * spec_.c : 0)),
                                  const_cast<float*>(weights_->data())};
      if (bias) args.push_back(const_cast<float*>(bias));
      if (z) args.push_back(const_cast<float*>(z + b * out_image));
      args.push_back(y.data<float>() + b * out_image);
      code(args.data(), nullptr, threads);
    }
  }

  bool owns_input(std::size_t i) const override { return i == 2; }

 private:
  ScaledPointwiseSpec spec_;
  std::shared_ptr<const std::vector<float>> weights_;
};

std::string recipe(const ScaledPointwiseSpec& spec, const GroupConfig& c, int lanes, CpuTarget target) {
  return RecipeText()
      .add("kind", "scaled_pointwise")
      .add(spec.pointwise)
      .add("h", spec.h)
      .add("w", spec.w)
      .add("c", spec.c)
      .add("o", spec.o)
      .add("config", c.text())
      .add("lanes", lanes)
      .add("target", target_name(target))
      .text();
}

}  // namespace

std::optional<ScaledPointwiseSpec> scaled_pointwise_spec(const Node& node, const Graph& graph, std::string& why) {
  const std::optional<Graph> group = group_parts_of(node, graph, "ScaledPointwiseConv", why);
  if (!group) return std::nullopt;
  const Graph& parts = *group;
  if (node.inputs.size() < 3 || node.inputs[0] == kNoValue || node.inputs[1] == kNoValue || node.inputs[2] == kNoValue) {
    why = "ScaledPointwiseConv needs X, S and W";
    return std::nullopt;
  }
  const Node& conv = parts.nodes().back();
  const Tensor* w = conv.inputs.size() > 1 ? parts.initializer(conv.inputs[1]) : nullptr;
  if (!w || w->dtype() != DType::Float32 || w->rank() != 4 || w->shape()[2] != 1 || w->shape()[3] != 1 || w->shape()[0] < 1 ||
      !pointwise_conv_attributes(conv) || conv.attr_int("channels_last", 0) != 1) {
    why = "a scaled pointwise conv needs constant float32 1x1 weights, stride 1, no padding, NHWC";
    return std::nullopt;
  }
  ScaledPointwiseSpec spec;
  spec.c = w->shape()[1];
  spec.o = w->shape()[0];
  const ValueInfo& in = graph.value(node.inputs[0]);
  const ValueInfo& scale = graph.value(node.inputs[1]);
  const DimList* s = scale.dims ? &*scale.dims : nullptr;
  if (!in.dims || in.dims->size() != 4 || !(*in.dims)[1].is_static() || !(*in.dims)[2].is_static() ||
      (*in.dims)[3].value != spec.c || !is_float32(graph, node.inputs[0]) || !is_float32(graph, node.inputs[1]) ||
      !s || s->size() != 4 || (*s)[1].value != 1 || (*s)[2].value != 1 || (*s)[3].value != spec.c) {
    why = "the input must be float32 NHWC of known rows, columns and the weights' channels, the scale [N or 1, 1, 1, C]";
    return std::nullopt;
  }
  spec.h = (*in.dims)[1].value;
  spec.w = (*in.dims)[2].value;
  if (!read_conv_epilogue(conv, parts, spec.o, spec.pointwise, why)) return std::nullopt;
  return spec;
}

Schedule scaled_pointwise_schedule(const ScaledPointwiseSpec& spec, const GroupConfig& config, int lanes) {
  return staged_pointwise_schedule("scaled_pointwise", scale_producer(spec), spec.o, spec.pointwise, config, lanes);
}

std::unique_ptr<Kernel> make_scaled_pointwise(const Node& node, const Graph& graph, const ScaledPointwiseSpec& spec,
                                              const GroupConfig& config) {
  const CpuTarget target = widest_target();
  const int lanes = vector_lanes(target);
  return std::make_unique<ScaledPointwiseKernel>(group_kernel_name("scaled_pointwise_nhwc", config, target), scaled_pointwise_schedule(spec, config, lanes),
                                                 target, spec, *graph.initializer(node.inputs[2]), recipe(spec, config, lanes, target));
}

}  // namespace wpk::gen
