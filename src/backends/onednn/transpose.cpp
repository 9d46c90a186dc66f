// Transpose of float32, int32 and 8-bit tensors as a oneDNN reorder: the input is described with permuted
// strides and copied into the plain output. Covers the NCHW <-> NHWC edges of the layout pass
// and the head transposes of attention.
#include "backends/onednn/onednn_kernels.hpp"

namespace wpk::onednn {
namespace {

struct TransposePlan {
  dnnl::reorder primitive;
  dnnl::memory::desc src, dst;
  Shape y_shape;
};

class TransposeKernel : public OneDnnKernel {
 public:
  TransposeKernel(std::vector<std::int64_t> perm, DType dtype) : perm_(std::move(perm)), dtype_(dtype) {}

  void run(KernelContext& ctx) const override {
    guarded(ctx, [&] {
      const Tensor& x = ctx.input(0);
      if (x.dtype() != dtype_)
        ctx.fail(ErrorCode::InvalidArgument, std::string("input must be ") + dtype_name(dtype_) + ", got " + dtype_name(x.dtype()));
      auto plan = cache_.get(shape_key({&x.shape()}), [&] { return build(ctx, x.shape()); });
      Tensor& y = ctx.allocate_output(0, dtype_, plan->y_shape);
      if (y.numel() == 0) return;
      execute(plan->primitive, {{DNNL_ARG_FROM, wrap_arg(plan->primitive, DNNL_ARG_FROM, plan->src, x)},
                                {DNNL_ARG_TO, wrap_arg(plan->primitive, DNNL_ARG_TO, plan->dst, y)}});
    });
  }

 private:
  TransposePlan build(const KernelContext& ctx, const Shape& x_shape) const {
    const std::size_t r = x_shape.size();
    std::vector<std::int64_t> perm = perm_;
    if (perm.empty())
      for (std::size_t i = 0; i < r; ++i) perm.push_back(static_cast<std::int64_t>(r - 1 - i));
    std::vector<bool> seen(r, false);
    if (perm.size() != r) ctx.fail(ErrorCode::InvalidModel, "perm has " + std::to_string(perm.size()) + " entries for rank " + std::to_string(r));
    for (auto p : perm) {
      if (p < 0 || p >= static_cast<std::int64_t>(r) || seen[static_cast<std::size_t>(p)])
        ctx.fail(ErrorCode::InvalidModel, "perm is not a permutation of 0.." + std::to_string(r - 1));
      seen[static_cast<std::size_t>(p)] = true;
    }
    Dims x_strides(r, 1);
    for (std::size_t i = r - 1; i-- > 0;) x_strides[i] = x_strides[i + 1] * x_shape[i + 1];
    TransposePlan plan;
    Dims y_dims(r), src_strides(r);
    for (std::size_t k = 0; k < r; ++k) {
      y_dims[k] = x_shape[static_cast<std::size_t>(perm[k])];
      src_strides[k] = x_strides[static_cast<std::size_t>(perm[k])];
    }
    Dims y_strides(r, 1);
    for (std::size_t i = r - 1; i-- > 0;) y_strides[i] = y_strides[i + 1] * y_dims[i + 1];
    plan.src = dnnl::memory::desc(y_dims, data_type(dtype_), src_strides);
    plan.dst = dnnl::memory::desc(y_dims, data_type(dtype_), y_strides);
    plan.primitive = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), plan.src, engine(), plan.dst, make_attr()));
    plan.y_shape = Shape(y_dims.begin(), y_dims.end());
    return plan;
  }

  static dnnl::memory::data_type data_type(DType t) {
    switch (t) {
      case DType::UInt8: return dnnl::memory::data_type::u8;
      case DType::Int8: return dnnl::memory::data_type::s8;
      case DType::Int32: return dnnl::memory::data_type::s32;
      default: return dnnl::memory::data_type::f32;
    }
  }

  std::vector<std::int64_t> perm_;
  DType dtype_;
  ShapeCache<TransposePlan> cache_;
};

}  // namespace

std::string transpose_unsupported(const Node& node, const Graph& graph) {
  const ValueInfo& x = graph.value(node.inputs[0]);
  if (x.dtype != DType::Float32 && x.dtype != DType::Int32 && x.dtype != DType::UInt8 && x.dtype != DType::Int8)
    return "input is not float32, int32, uint8 or int8";
  // The rank comes from perm, or from the declared shape when perm is absent (reverse order).
  const auto perm = node.attr_ints("perm", {});
  const std::size_t rank = !perm.empty() ? perm.size() : (x.dims ? x.dims->size() : 0);
  if (rank < 2 || rank > 6) return "rank must be known and 2..6";
  return "";
}

std::unique_ptr<Kernel> make_transpose(const Node& node, const Graph& graph) {
  return std::make_unique<TransposeKernel>(node.attr_ints("perm", {}), graph.value(node.inputs[0]).dtype);
}

}  // namespace wpk::onednn
