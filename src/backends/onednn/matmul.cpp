// MatMul, Gemm and com.wpk FusedMatMul on oneDNN's matmul primitive.
//   constant B (weights):  A [..., M, K] is flattened to [rows, K]; B packed once; bias,
//                          residual add and activation fused as post-ops.
//   variable B:            batched product over equal leading dims (attention's Q·Kᵀ, P·V).
// A constant-B node marked compute_precision = "bf16" (SessionOptions::precision) rounds A into
// bf16 staging, packs B in bf16 and accumulates and writes float32; where the graph keeps A or
// the output in bf16 (passes::keep_bf16_between_products) it reads or writes that as it is.
#include "backends/onednn/onednn_kernels.hpp"
#include "core/cpu_features.hpp"
#include "graph/fused_ops.hpp"
#include "backends/reference/reference_backend.hpp"

namespace wpk::onednn {
namespace {

struct MatMulPlan {
  bool supported = true;  // false: the fallback runs this shape
  dnnl::matmul primitive;
  dnnl::memory::desc a, b, dst, bias;
  dnnl::memory packed_b;         // constant B only
  dnnl::memory::desc b_view;     // the view of the loaded B it was packed through
  Shape y_shape;
  bool bf16 = false;             // A reordered into `bf16_a` (staging) first
  dnnl::memory::desc bf16_a;
  dnnl::reorder to_bf16;
};


std::int64_t rows_of(const Shape& a) {
  std::int64_t rows = 1;
  for (std::size_t i = 0; i + 1 < a.size(); ++i) rows *= a[i];
  return rows;
}

// Without AVX-512, oneDNN 2.6's matmul is its generic sgemm (gemm:jit), which asks for B as
// [K, N] and repacks it on every call; that repacking is far cheaper from [N, K] when B is
// wide. On a Zen 3 (2 threads): BERT's 768->3072 product at 128 rows 7.6-8.2 -> 3.8-3.9 ms,
// 32 rows 2.2 -> 1.2, ViT's 384->1536 at 197 rows 2.2 -> 1.5, ResNet-50's 512->2048 fc-like
// 1x1 at 49 rows 1.5 -> 0.8; products with N ~ K ran alike (0.96-1.06) and some with N < K
// slower (8 x 2048 -> 1000: 0.24 -> 0.50 ms), so only N >= 2K takes [N, K].
bool runs_generic_sgemm(const dnnl::matmul::primitive_desc& pd) {
  return std::string(pd.impl_info_str()).rfind("gemm", 0) == 0;
}

// B as loaded: [K, N], or [N, K] read transposed (Gemm transB=1).
dnnl::memory::desc loaded_b_desc(const Shape& b, bool transposed) {
  return transposed ? f32_desc({b[1], b[0]}, Tag::ba) : f32_desc({b[0], b[1]}, Tag::ab);
}

class MatMulKernel : public OneDnnKernel {
 public:
  // `b` empty = variable B (input 1). `transposed_b`: B is stored [N, K] (Gemm transB=1).
  // `fallback` (the reference kernel) runs variable-B products oneDNN's matmul has no form for
  // (broadcast batch dims).
  MatMulKernel(const Node& node, const Graph& graph, const Tensor& b, bool transposed_b, Tensor bias,
               std::unique_ptr<Kernel> fallback)
      : a_type_(bf16_activation(node, graph, node.inputs[0]) && !b.empty() ? DType::BFloat16 : DType::Float32),
        y_type_(bf16_activation(node, graph, node.outputs[0]) && !b.empty() ? DType::BFloat16 : DType::Float32),
        fallback_(std::move(fallback)), b_(b.empty() ? PackedWeights() : PackedWeights(b, loaded_b_desc(b.shape(), transposed_b))), transposed_b_(transposed_b), bias_(std::move(bias)), act_(read_activation(node)),
        has_residual_(has_fused_residual(node)), bf16_(computes_bf16(node) && !b.empty()) {}

  void run(KernelContext& ctx) const override {
    const Tensor& a = ctx.input(0);
    const Tensor* b = b_.empty() ? &ctx.input(1) : nullptr;
    if (b && (a.dtype() != DType::Float32 || b->dtype() != DType::Float32)) return fallback_->run(ctx);
    std::shared_ptr<const MatMulPlan> plan;
    guarded(ctx, [&] {
      if (a.dtype() != a_type_)
        ctx.fail(ErrorCode::InvalidArgument, std::string("A must be ") + dtype_name(a_type_) + ", got " + dtype_name(a.dtype()));
      plan = cache_.get(shape_key({&a.shape(), b ? &b->shape() : nullptr}),
                        [&] { return b ? build_batched(a.shape(), b->shape()) : build_const(ctx, a.shape()); });
    });
    if (!plan->supported) return fallback_->run(ctx);
    guarded(ctx, [&] {
      Tensor& y = ctx.allocate_output(0, y_type_, plan->y_shape);
      dnnl::memory src = wrap_arg(plan->primitive, DNNL_ARG_SRC, plan->a, a);
      if (plan->bf16) {
        const dnnl::memory f32_a = src;
        src = thread_memory(0, plan->bf16_a);
        execute(plan->to_bf16, {{DNNL_ARG_FROM, f32_a}, {DNNL_ARG_TO, src}});
      }
      Args args = {{DNNL_ARG_SRC, src},
                   {DNNL_ARG_WEIGHTS, b ? wrap_arg(plan->primitive, DNNL_ARG_WEIGHTS, plan->b, *b) : plan->packed_b},
                   {DNNL_ARG_DST, wrap_arg(plan->primitive, DNNL_ARG_DST, plan->dst, y)}};
      if (!bias_.empty()) args.emplace(DNNL_ARG_BIAS, wrap_arg(plan->primitive, DNNL_ARG_BIAS, plan->bias, bias_));
      if (has_residual_) accumulate_residual_into(ctx, 3, y);
      execute(plan->primitive, args);
    });
  }

  void warm_up(const Node& node, const Shape& a_shape) {
    KernelContext ctx(node, {});
    auto plan = cache_.get(shape_key({&a_shape, nullptr}), [&] { return build_const(ctx, a_shape); });
    b_.keep_only(plan->packed_b, plan->b_view);
  }

  bool owns_input(std::size_t i) const override { return i == 1 && b_.owns_copy(); }

 private:
  dnnl::primitive_attr attributes() const {
    dnnl::post_ops ops;
    if (has_residual_) ops.append_sum(1.f);
    append_activation(ops, act_);
    dnnl::primitive_attr attr = make_attr();
    attr.set_post_ops(ops);
    return attr;
  }

  MatMulPlan build_const(const KernelContext& ctx, const Shape& a_shape) const {
    const dnnl::memory::dims kn = loaded_b_desc(b_.shape(), transposed_b_).dims();
    const std::int64_t k = kn[0], n = kn[1];
    if (a_shape.size() < 2 || a_shape.back() != k)
      ctx.fail(ErrorCode::InvalidArgument, "input A " + shape_to_string(a_shape) + " does not match B " +
                                               shape_to_string(b_.shape()) + (transposed_b_ ? " (transposed)" : ""));
    const std::int64_t rows = rows_of(a_shape);
    MatMulPlan plan;
    plan.y_shape = a_shape;
    plan.y_shape.back() = n;
    plan.a = f32_desc({rows, k}, Tag::ab);
    plan.dst = f32_desc({rows, n}, Tag::ab);
    if (!bias_.empty()) plan.bias = f32_desc({1, n}, Tag::ab);
    if (bf16_) {
      plan.bf16_a = dnnl::memory::desc({rows, k}, dnnl::memory::data_type::bf16, Tag::ab);
      if (a_type_ == DType::BFloat16) plan.a = plan.bf16_a;
      if (y_type_ == DType::BFloat16) plan.dst = dnnl::memory::desc({rows, n}, dnnl::memory::data_type::bf16, Tag::ab);
      plan.bf16 = a_type_ != DType::BFloat16;
      if (plan.bf16)
        plan.to_bf16 = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), plan.a, engine(), plan.bf16_a, make_attr()));
      const dnnl::matmul::primitive_desc pd(
          dnnl::matmul::desc(plan.bf16_a, dnnl::memory::desc({k, n}, dnnl::memory::data_type::bf16, Tag::any), plan.bias,
                             plan.dst),
          attributes(), engine());
      plan.primitive = dnnl::matmul(pd);
      plan.b_view = loaded_b_desc(b_.shape(), transposed_b_);
      plan.packed_b = b_.pack_for(pd.weights_desc(), plan.b_view);
      return plan;
    }
    const auto describe = [&](Tag b_tag) {
      return dnnl::matmul::primitive_desc(dnnl::matmul::desc(plan.a, f32_desc({k, n}, b_tag), plan.bias, plan.dst),
                                          attributes(), engine());
    };
    dnnl::matmul::primitive_desc pd = describe(Tag::any);
    if (n >= 2 * k && runs_generic_sgemm(pd)) pd = describe(Tag::ba);
    plan.primitive = dnnl::matmul(pd);
    plan.b_view = loaded_b_desc(b_.shape(), transposed_b_);
    plan.packed_b = b_.pack_for(pd.weights_desc(), plan.b_view);
    return plan;
  }

  // Equal leading dims only; anything else (broadcasting, 1-D operands, mismatches, which the
  // reference reports) is left to the fallback.
  MatMulPlan build_batched(const Shape& a_shape, const Shape& b_shape) const {
    const std::size_t r = a_shape.size();
    bool ok = r >= 2 && b_shape.size() == r && a_shape[r - 1] == b_shape[r - 2];
    for (std::size_t i = 0; ok && i + 2 < r; ++i) ok = a_shape[i] == b_shape[i];
    MatMulPlan plan;
    if (!ok) {
      plan.supported = false;
      return plan;
    }
    std::int64_t batch = 1;
    for (std::size_t i = 0; i + 2 < r; ++i) batch *= a_shape[i];
    const std::int64_t m = a_shape[r - 2], k = a_shape[r - 1], n = b_shape[r - 1];
    plan.a = f32_desc({batch, m, k}, Tag::abc);
    plan.b = f32_desc({batch, k, n}, Tag::abc);
    plan.dst = f32_desc({batch, m, n}, Tag::abc);
    dnnl::matmul::desc desc(plan.a, plan.b, plan.dst);
    dnnl::matmul::primitive_desc pd(desc, attributes(), engine());
    plan.primitive = dnnl::matmul(pd);
    plan.y_shape = a_shape;
    plan.y_shape.back() = n;
    return plan;
  }

  // Float32, or bf16 where the graph keeps the value so (a bf16 node with constant B only).
  DType a_type_, y_type_;
  std::unique_ptr<Kernel> fallback_;
  PackedWeights b_;
  bool transposed_b_;
  Tensor bias_;
  Activation act_;
  bool has_residual_;
  bool bf16_;
  ShapeCache<MatMulPlan> cache_;
};

bool has_input(const Node& node, std::size_t i) { return i < node.inputs.size() && node.inputs[i] != kNoValue; }


}  // namespace

std::string matmul_unsupported(const Node& node, const Graph& graph) {
  const Tensor* b = constant_input(node, graph, 1);
  // bf16 only as the marked product's A, residual Z (input 3, in its output's dtype) or output.
  for (std::size_t i = 0; i <= node.inputs.size(); ++i) {
    const ValueId v = i < node.inputs.size() ? node.inputs[i] : node.outputs.empty() ? kNoValue : node.outputs[0];
    if (v == kNoValue) continue;
    const DType t = graph.value(v).dtype;
    const bool may_be_bf16 = b && (i == 0 || (i == 3 && has_fused_residual(node)) || i == node.inputs.size());
    if (t != DType::Float32 && t != DType::Undefined && !(may_be_bf16 && bf16_activation(node, graph, v)))
      return "inputs or output are not float32";
  }
  if (b && (b->dtype() != DType::Float32 || b->rank() != 2)) return "constant B is not a float32 matrix";
  if (node.op_type == "Gemm") {
    if (!b) return "Gemm needs a constant B";
    if (node.attr_int("transA", 0) != 0 || node.attr_float("alpha", 1.f) != 1.f || node.attr_float("beta", 1.f) != 1.f)
      return "Gemm with transA or alpha/beta other than 1";
  }
  const bool has_bias = node.op_type != "MatMul" && has_input(node, 2);
  if (has_bias) {
    const Tensor* bias = constant_input(node, graph, 2);
    const std::int64_t n = node.op_type == "Gemm" && node.attr_int("transB", 0) ? b->shape()[0] : (b ? b->shape()[1] : -1);
    if (!b || !bias || bias->dtype() != DType::Float32 || bias->numel() != n || bias->shape().back() != n)
      return "bias must be a constant float32 vector of the output width, with constant B";
  }
  if (node.op_type == "FusedMatMul") {
    if (!b && has_input(node, 3)) return "residual add needs a constant B";
    if (!activation_supported(read_activation(node))) return "activation has no oneDNN post-op";
  }
  return "";
}

std::optional<KernelProfile> describe_matmul(const Node& node, const Graph& /*graph*/, const InputShapes& shapes) {
  // From the shapes alone: once kernels own B, the graph no longer holds it.
  if (shapes.size() < 2 || !shapes[1] || shapes[1]->size() != 2) return std::nullopt;
  const CpuFeatures& cpu = cpu_features();
  KernelProfile p;
  p.vector_bits = cpu.avx512f ? 512 : cpu.avx2 ? 256 : 128;
  p.efficiency = 0.6;
  // Without AVX-512 oneDNN 2.6 runs its generic sgemm, which repacks B on every call.
  if (!cpu.avx512f) {
    p.efficiency = 0.4;
    p.extra_bytes = 2 * 4.0 * static_cast<double>((*shapes[1])[0] * (*shapes[1])[1]);
  }
  if (computes_bf16(node)) {
    // A rounded into staging first; B read at 2 bytes.
    p.work_scale *= reduced_precision_work_share(dnnl::memory::data_type::bf16);
    double a = 0;
    if (shapes[0]) {
      a = 1;
      for (auto d : *shapes[0]) a *= static_cast<double>(d);
    }
    p.extra_bytes = 4 * a - 2.0 * static_cast<double>((*shapes[1])[0] * (*shapes[1])[1]);
  }
  return p;
}

std::unique_ptr<Kernel> make_matmul(const Node& node, const Graph& graph) {
  const Tensor* b = constant_input(node, graph, 1);
  const Tensor* bias = node.op_type != "MatMul" ? constant_input(node, graph, 2) : nullptr;
  const bool transposed = node.op_type == "Gemm" && node.attr_int("transB", 0) == 1;
  auto fallback = b ? nullptr : reference::ReferenceBackend().prepare(node, graph);
  auto kernel = std::make_unique<MatMulKernel>(node, graph, b ? *b : Tensor(), transposed, bias ? *bias : Tensor(), std::move(fallback));
  if (auto shape = static_shape(graph, node.inputs[0]); b && shape && shape->size() >= 2)
    try_warm_up([&] { kernel->warm_up(node, *shape); });
  return kernel;
}

}  // namespace wpk::onednn
