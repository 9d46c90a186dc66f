// com.wpk MatMulIntegerToFloat (graph/fused_ops.hpp) on oneDNN's integer matmul: uint8 or int8
// A [..., K] (leading dims as rows) with its run-time scale and zero point, constant int8 B
// [K, N] with zero point 0, packed once; the int32 accumulators become float32 as they are
// stored, times A_scale * B_scale[n] (formed in float32 as the definition forms them: without
// an epilogue the result is the reference's to the bit).
//
// Its arithmetic is a config, as QLinearConv's (qlinear_conv.cpp): arithmetic=int8 (oneDNN's
// integer matmul, offered where its sums are exact: exact_int8_products) or arithmetic=float (A
// minus its zero point reordered into float32, oneDNN's float32 matmul over B's codes as floats,
// the same scales: the integer sums while they stay below 2^24, on every CPU).
//
// The scales are a binary multiply post-op by a [1, N] row formed at each run, not oneDNN's
// run-time output scales: oneDNN 2.6 has only its generic gemm for those, where the post-op
// keeps its brgemm kernels, faster on every product shape measured. The epilogue follows as
// post-ops: the bias a binary add of a [1, N] row (after the scales, where the definition adds
// it; the primitive's own bias argument is added to the integer sums before any scaling), the
// residual the sum post-op over Y holding Z (accumulate_residual_into), then the activation.
#include <optional>

#include "backends/onednn/onednn_kernels.hpp"
#include "graph/fused_ops.hpp"

namespace wpk::onednn {
namespace {

enum Input : std::size_t { A = 0, B, AScale, BScale, AZero, BZero, Bias = kIntegerProductBias, Z = kIntegerProductResidual };

bool is_8bit(DType t) { return t == DType::UInt8 || t == DType::Int8; }

struct IntegerMatMulPlan {
  dnnl::matmul primitive;
  dnnl::memory::desc src, dst;
  dnnl::memory weights;
  bool in_float = false;  // A reordered into float32 staging `float_src` first
  dnnl::memory::desc float_src;
  dnnl::reorder to_float;
  // Where the product cannot take the sum and activation as post-ops at speed, it writes a
  // staging that this adds to the residual, applying the activation.
  std::optional<dnnl::binary> add_residual;
};

class MatMulIntegerToFloatKernel : public OneDnnKernel {
 public:
  MatMulIntegerToFloatKernel(const Node& node, const Graph& graph, bool in_float)
      : in_float_(in_float), act_(read_activation(node)), has_residual_(fused_residual_input(node) == Z) {
    const Tensor& b = *constant_input(node, graph, B);
    if (const Tensor* bias = constant_input(node, graph, Bias)) bias_ = bias->clone();
    k_ = b.dim(0);
    n_ = b.dim(1);
    weights_ = PackedWeights(in_float ? integers_as_float(b) : b, view());
    const Tensor& bs = *constant_input(node, graph, BScale);
    b_scale_.assign(bs.data<float>(), bs.data<float>() + bs.numel());
    a_type_ = graph.value(node.inputs[A]).dtype;
  }

  void run(KernelContext& ctx) const override {
    guarded(ctx, [&] {
      const Tensor& a = ctx.input(A);
      const Tensor& as = ctx.input(AScale);
      const Tensor& az = ctx.input(AZero);
      check_integer_product_input(ctx, a_type_, k_);
      const std::int64_t rows = a.numel() / k_;
      const Shape key_shape = {rows};
      auto plan = cache_.get(shape_key({&key_shape}), [&] { return build(rows); });
      Shape y_shape = a.shape();
      y_shape.back() = n_;
      Tensor& y = ctx.allocate_output(0, DType::Float32, y_shape);
      if (rows == 0) return;
      thread_local std::vector<float> scales;
      scales.resize(static_cast<std::size_t>(n_));
      const float a_scale = as.data<float>()[0];
      for (std::size_t i = 0; i < scales.size(); ++i) scales[i] = a_scale * b_scale_[b_scale_.size() > 1 ? i : 0];
      const std::int32_t zero = a_type_ == DType::UInt8 ? az.data<std::uint8_t>()[0] : az.data<std::int8_t>()[0];
      if (has_residual_ && !plan->add_residual) accumulate_residual_into(ctx, Z, y);
      Args args = {{DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, dnnl::memory(row_desc(), engine(), scales.data())}};
      if (!bias_.empty())
        args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1,
                     dnnl::memory(row_desc(), engine(), const_cast<void*>(bias_.raw())));
      if (plan->in_float) {
        const dnnl::memory src = thread_memory(0, plan->float_src);
        execute(plan->to_float, {{DNNL_ARG_FROM, wrap_arg(plan->to_float, DNNL_ARG_FROM, plan->src, a)},
                                 {DNNL_ARG_TO, src},
                                 {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_FROM, int32_scalar_memory(zero)}});
        const dnnl::memory staging = plan->add_residual ? thread_memory(1, plan->dst) : dnnl::memory();
        args.insert({{DNNL_ARG_SRC, src},
                     {DNNL_ARG_WEIGHTS, plan->weights},
                     {DNNL_ARG_DST, plan->add_residual ? staging : wrap_arg(plan->primitive, DNNL_ARG_DST, plan->dst, y)}});
        execute(plan->primitive, std::move(args));
        // The residual first: y may hold its bytes (the memory plan's reuse), which the binary
        // may overwrite in place only as its first operand.
        if (plan->add_residual)
          execute(*plan->add_residual,
                  {{DNNL_ARG_SRC_0, wrap_arg(*plan->add_residual, DNNL_ARG_SRC_0, plan->dst, residual_input(ctx, Z, y))},
                   {DNNL_ARG_SRC_1, staging},
                   {DNNL_ARG_DST, wrap_arg(*plan->add_residual, DNNL_ARG_DST, plan->dst, y)}});
        return;
      }
      args.insert({{DNNL_ARG_SRC, wrap_arg(plan->primitive, DNNL_ARG_SRC, plan->src, a)},
                   {DNNL_ARG_WEIGHTS, plan->weights},
                   {DNNL_ARG_DST, wrap_arg(plan->primitive, DNNL_ARG_DST, plan->dst, y)},
                   {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, int32_scalar_memory(zero)}});
      execute(plan->primitive, std::move(args));
    });
  }

  // Packs B for the rows the graph declares. The loaded B stays beside the packing: another row
  // count may want another layout, and a packing with compensation is not read back.
  void warm_up(std::int64_t rows) {
    const Shape key{rows};
    auto plan = cache_.get(shape_key({&key}), [&] { return build(rows); });
    weights_.keep_beside_loaded(plan->weights, view());
  }

  bool owns_input(std::size_t i) const override { return i == B && weights_.owns_copy(); }

 private:
  dnnl::memory::desc view() const {
    return {{k_, n_}, in_float_ ? dnnl::memory::data_type::f32 : dnnl::memory::data_type::s8, Tag::ab};
  }

  // A [1, N] float32 operand of a post-op: the scales, the bias.
  dnnl::memory::desc row_desc() const { return f32_desc({1, n_}, Tag::ab); }

  IntegerMatMulPlan build(std::int64_t rows) const {
    IntegerMatMulPlan plan;
    const auto a_type = a_type_ == DType::UInt8 ? dnnl::memory::data_type::u8 : dnnl::memory::data_type::s8;
    plan.src = dnnl::memory::desc({rows, k_}, a_type, Tag::ab);
    plan.dst = dnnl::memory::desc({rows, n_}, dnnl::memory::data_type::f32, Tag::ab);
    // (post_ops and attributes are handles: each is built afresh.)
    const auto epilogue = [&](bool with_residual) {
      dnnl::primitive_attr attr = make_attr();
      dnnl::post_ops ops;
      ops.append_binary(dnnl::algorithm::binary_mul, row_desc());
      if (!bias_.empty()) ops.append_binary(dnnl::algorithm::binary_add, row_desc());
      if (with_residual) {
        if (has_residual_) ops.append_sum(1.f);
        append_activation(ops, act_);
      }
      attr.set_post_ops(ops);
      return attr;
    };
    dnnl::primitive_attr attr = epilogue(true);
    if (in_float_) {
      plan.in_float = true;
      plan.float_src = f32_desc({rows, k_}, Tag::ab);
      dnnl::primitive_attr in = make_attr();
      in.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
      plan.to_float = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), plan.src, engine(), plan.float_src, in));
      const dnnl::matmul::desc desc(plan.float_src, f32_desc({k_, n_}, Tag::any), plan.dst);
      dnnl::matmul::primitive_desc pd(desc, attr, engine());
      // oneDNN's AVX2 products take a sum after binary post-ops only in its reference code
      // (thousands of times slower): there the residual and activation follow as a binary add.
      if (has_residual_ && is_reference_impl(pd.impl_info_str())) {
        pd = dnnl::matmul::primitive_desc(desc, epilogue(false), engine());
        dnnl::post_ops act;
        append_activation(act, act_);
        dnnl::primitive_attr add_attr = make_attr();
        add_attr.set_post_ops(act);
        plan.add_residual = dnnl::binary(dnnl::binary::primitive_desc(
            dnnl::binary::desc(dnnl::algorithm::binary_add, plan.dst, plan.dst, plan.dst), add_attr, engine()));
      }
      plan.weights = weights_.pack_for(pd.weights_desc(), view());
      plan.primitive = dnnl::matmul(pd);
      return plan;
    }
    attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    const dnnl::matmul::primitive_desc pd(
        dnnl::matmul::desc(plan.src, dnnl::memory::desc({k_, n_}, dnnl::memory::data_type::s8, Tag::any), plan.dst), attr,
        engine());
    plan.weights = weights_.pack_for(pd.weights_desc(), view());
    plan.primitive = dnnl::matmul(pd);
    return plan;
  }

  bool in_float_;
  Activation act_;
  bool has_residual_;
  Tensor bias_;  // float32 [N], or empty
  std::int64_t k_ = 0, n_ = 0;
  PackedWeights weights_;
  std::vector<float> b_scale_;
  DType a_type_ = DType::UInt8;
  ShapeCache<IntegerMatMulPlan> cache_;
};

}  // namespace

std::string matmul_integer_unsupported(const Node& node, const Graph& graph) {
  if (node.inputs.size() < 6 || node.inputs.size() > 8) return "needs 6 to 8 inputs";
  if (!is_8bit(graph.value(node.inputs[A]).dtype)) return "A is not uint8 or int8";
  const Tensor* b = constant_input(node, graph, B);
  if (!b || b->dtype() != DType::Int8 || b->rank() != 2) return "B is not a constant 2-D int8 tensor";
  const Tensor* bs = constant_input(node, graph, BScale);
  if (!bs || bs->dtype() != DType::Float32 || (bs->numel() != 1 && bs->numel() != b->dim(1)))
    return "B_scale is not a constant float32 of 1 or N elements";
  const Tensor* bz = constant_input(node, graph, BZero);
  if (!bz || bz->dtype() != DType::Int8) return "B_zero is not a constant int8 tensor";
  for (std::int64_t i = 0; i < bz->numel(); ++i)
    if (bz->data<std::int8_t>()[i] != 0) return "B_zero is not 0";
  if (b->dim(0) == 0 || b->dim(1) == 0) return "B is empty";
  if (node.inputs.size() > Bias && node.inputs[Bias] != kNoValue) {
    const Tensor* bias = constant_input(node, graph, Bias);
    if (!bias || bias->dtype() != DType::Float32 || bias->rank() != 1 || bias->numel() != b->dim(1))
      return "Bias is not a constant float32 [N]";
  }
  if (!activation_supported(read_activation(node))) return "activation has no oneDNN post-op";
  return "";
}

std::vector<std::string> matmul_integer_configs(const Node& node, const Graph& graph) {
  return integer_arithmetic_configs(node, graph, A, B);
}

std::unique_ptr<Kernel> make_matmul_integer(const Node& node, const Graph& graph, const std::string& config) {
  const bool in_float = chooses_float_arithmetic(node, matmul_integer_configs(node, graph), config);
  auto kernel = std::make_unique<MatMulIntegerToFloatKernel>(node, graph, in_float);
  if (auto shape = static_shape(graph, node.inputs[A]); shape && !shape->empty()) {
    std::int64_t rows = 1;
    for (std::size_t i = 0; i + 1 < shape->size(); ++i) rows *= (*shape)[i];
    try_warm_up([&] { kernel->warm_up(rows); });
  }
  return kernel;
}

}  // namespace wpk::onednn
