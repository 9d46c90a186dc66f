// Concat of float32 tensors on oneDNN's concat primitive, which copies the inputs over the run's
// threads (the reference copies chunk by chunk on one). Inputs of other dtypes, of unequal rank
// or shape, or with an empty dim run on the reference kernel kept as a fallback, which also
// words the errors.
#include "backends/onednn/onednn_kernels.hpp"
#include "backends/reference/reference_backend.hpp"

namespace wpk::onednn {
namespace {

constexpr int kMaxRank = DNNL_MAX_NDIMS;

struct ConcatPlan {
  dnnl::concat primitive;
  std::vector<dnnl::memory::desc> xs;
  dnnl::memory::desc y;
  Shape y_shape;
};

class ConcatKernel : public OneDnnKernel {
 public:
  ConcatKernel(const Node& node, std::unique_ptr<Kernel> fallback)
      : axis_(node.attr_int("axis", 0)), fallback_(std::move(fallback)) {}

  void run(KernelContext& ctx) const override {
    const std::optional<int> axis = runnable_axis(ctx);
    if (!axis) return fallback_->run(ctx);
    guarded(ctx, [&] {
      Shape key;  // every input's rank and dims: the shape signature the plan is built for
      for (std::size_t i = 0; i < ctx.num_inputs(); ++i) {
        key.push_back(ctx.input(i).rank());
        key.insert(key.end(), ctx.input(i).shape().begin(), ctx.input(i).shape().end());
      }
      auto plan = cache_.get(shape_key({&key}), [&] { return build(ctx, *axis); });
      Tensor& y = ctx.allocate_output(0, DType::Float32, plan->y_shape);
      Args args{{DNNL_ARG_DST, wrap_arg(plan->primitive, DNNL_ARG_DST, plan->y, y)}};
      for (std::size_t i = 0; i < ctx.num_inputs(); ++i) {
        const int arg = DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i);
        args.emplace(arg, wrap_arg(plan->primitive, arg, plan->xs[i], ctx.input(i)));
      }
      execute(plan->primitive, std::move(args));
    });
  }

 private:
  // The normalised axis when oneDNN can run these inputs, else nullopt (the fallback runs them).
  std::optional<int> runnable_axis(const KernelContext& ctx) const {
    const Tensor& first = ctx.input(0);
    const int r = first.rank();
    if (r == 0 || r > kMaxRank || axis_ < -r || axis_ >= r) return std::nullopt;
    const int axis = static_cast<int>(axis_ < 0 ? axis_ + r : axis_);
    for (std::size_t i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& t = ctx.input(i);
      if (t.dtype() != DType::Float32 || t.rank() != r) return std::nullopt;
      for (int a = 0; a < r; ++a)
        if (t.shape()[a] == 0 || (a != axis && t.shape()[a] != first.shape()[a])) return std::nullopt;
    }
    return axis;
  }

  ConcatPlan build(const KernelContext& ctx, int axis) const {
    ConcatPlan plan;
    const Tag tag = plain_tag(static_cast<std::size_t>(ctx.input(0).rank()));
    plan.y_shape = ctx.input(0).shape();
    plan.y_shape[axis] = 0;
    for (std::size_t i = 0; i < ctx.num_inputs(); ++i) {
      const Shape& s = ctx.input(i).shape();
      plan.xs.push_back(f32_desc(Dims(s.begin(), s.end()), tag));
      plan.y_shape[axis] += s[axis];
    }
    plan.y = f32_desc(Dims(plan.y_shape.begin(), plan.y_shape.end()), tag);
    plan.primitive = dnnl::concat(dnnl::concat::primitive_desc(plan.y, axis, plan.xs, engine(), make_attr()));
    return plan;
  }

  std::int64_t axis_;
  std::unique_ptr<Kernel> fallback_;
  ShapeCache<ConcatPlan> cache_;
};

}  // namespace

std::string concat_unsupported(const Node& node, const Graph& graph) {
  if (!node.has_attr("axis")) return "attribute 'axis' is required";
  for (ValueId v : node.inputs)
    if (v == kNoValue || graph.value(v).dtype != DType::Float32) return "inputs are not known to be float32";
  return "";
}

std::unique_ptr<Kernel> make_concat(const Node& node, const Graph& graph) {
  return std::make_unique<ConcatKernel>(node, reference::ReferenceBackend().prepare(node, graph));
}

}  // namespace wpk::onednn
