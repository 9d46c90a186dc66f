// com.wpk Attention (graph/fused_ops.hpp): Y = softmax(Q Kᵀ * scale + Mask) V on oneDNN: two
// batched matmuls (Kᵀ is read through strides, never materialised) around a softmax, with the
// scores kept in one scratch buffer per run and the mask added row by row in between; operands
// with interleaved heads are reordered to [B, H, S, D] and back around them. Marked
// compute_precision = "bf16", Q, K and V are rounded into bf16 copies (the same reorders), the
// softmax writes the probabilities in bf16, and both products accumulate in float32; the scores,
// the mask and Y stay float32.
#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <utility>

#include "backends/attention_layout.hpp"
#include "backends/onednn/onednn_kernels.hpp"
#include "graph/fused_ops.hpp"

namespace wpk::onednn {
namespace {

// Operands in the order of interleaved_heads.
enum Operand { kQ = kAttentionQ, kK = kAttentionK, kV = kAttentionV, kY = kAttentionY };

struct AttentionPlan {
  AttentionGeometry geometry;
  dnnl::matmul scores;  // Q Kᵀ * scale
  dnnl::primitive softmax;
  dnnl::matmul context;  // P V
  dnnl::memory::desc q, k_t, s, p, v, y;  // p: the probabilities (s itself unless bf16)
  // Per operand: copied through `plain` (interleaved heads, or bf16).
  std::array<bool, 4> staged{};
  // Per interleaved Operand: the tensor as it lies (strided), contiguous, and the reorder from
  // the one to the other (to the strided Y for kY).
  std::array<dnnl::memory::desc, 4> lies, plain;
  std::array<dnnl::reorder, 4> reorders;
};

// The most staging a thread keeps between runs for attention (see run_primitives).
constexpr std::size_t kHeldStagingBytes = std::size_t(32) << 20;

// scores[b, i, j] += mask, row by row.
void add_mask(const AttentionShape& sh, const AttentionOperand& mask, float* scores) {
  for (std::int64_t b = 0; b < sh.batch; ++b)
    for (std::int64_t i = 0; i < sh.rows; ++i) {
      const float* m = mask.data + mask.batch_offsets[static_cast<std::size_t>(b)] + i * mask.row_stride;
      float* row = scores + (b * sh.rows + i) * sh.cols;
      if (mask.col_stride == 0)
        for (std::int64_t j = 0; j < sh.cols; ++j) row[j] += *m;
      else
        for (std::int64_t j = 0; j < sh.cols; ++j) row[j] += m[j];
    }
}

// A [B, H, S, D] tensor stored as [B, S, H, D], as oneDNN sees it.
dnnl::memory::desc interleaved_desc(const Shape& logical) {
  const std::int64_t h = logical[1], s = logical[2], d = logical[3];
  return dnnl::memory::desc(Dims(logical.begin(), logical.end()), dnnl::memory::data_type::f32, Dims{s * h * d, d, h * d, 1});
}

class AttentionKernel : public OneDnnKernel {
 public:
  AttentionKernel(float scale, std::array<bool, 4> interleaved, bool bf16)
      : scale_(scale), interleaved_(interleaved), bf16_(bf16) {}

  void run(KernelContext& ctx) const override {
    guarded(ctx, [&] {
      const auto [q_in, k_in, v_in] = attention_inputs(ctx);
      const Tensor &q = *q_in, &k = *k_in, &v = *v_in;
      auto plan = cache_.get(shape_key({&q.shape(), &k.shape(), &v.shape()}),
                             [&] { return build(ctx, q.shape(), k.shape(), v.shape()); });
      const AttentionOperand mask =
          ctx.has_input(3) ? attention_mask_view(ctx, ctx.input(3), plan->geometry) : AttentionOperand();
      Tensor& y = ctx.allocate_output(0, DType::Float32, plan->geometry.y_shape);
      run_primitives(*plan, {&q, &k, &v}, mask, y);
    });
  }

 private:
  void run_primitives(const AttentionPlan& plan, std::array<const Tensor*, 3> in, const AttentionOperand& mask,
                      Tensor& y) const {
    const AttentionShape& sh = plan.geometry.shape;
    // One staging block of the calling thread holds the staged operands' copies, the scores and
    // (bf16) the probabilities: a fresh allocation per run faulted its pages in every time. A
    // block past kHeldStagingBytes (long sequences: the scores grow with their square) is the
    // run's own, so that no thread keeps it after the run.
    std::size_t total = 0;
    const auto reserve = [&total](std::size_t bytes) {
      const std::size_t at = total;
      total += (bytes + 63) / 64 * 64;
      return at;
    };
    std::array<std::size_t, 4> copy_at{};
    for (int o = 0; o < 4; ++o)
      if (plan.staged[o]) copy_at[o] = reserve(plan.plain[o].get_size());
    const std::size_t s_at = reserve(plan.s.get_size());
    const std::size_t p_at = plan.p != plan.s ? reserve(plan.p.get_size()) : s_at;
    std::unique_ptr<char[]> own;
    char* base = nullptr;
    if (total > kHeldStagingBytes) {
      own.reset(new char[total + 64]);
      base = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(own.get()) + 63) & ~std::uintptr_t(63));
    } else {
      const dnnl::memory block = thread_memory(
          0, dnnl::memory::desc({static_cast<std::int64_t>(std::max<std::size_t>(total, 64))}, dnnl::memory::data_type::u8, Tag::a));
      base = static_cast<char*>(block.get_data_handle());
    }

    std::array<dnnl::memory, 4> mem;
    const std::array<const dnnl::memory::desc*, 4> descs = {&plan.q, &plan.k_t, &plan.v, &plan.y};
    for (int o = 0; o < 4; ++o) {
      const Tensor& t = o == kY ? y : *in[static_cast<std::size_t>(o)];
      if (!plan.staged[o]) {
        mem[o] = wrap(*descs[o], t);
        continue;
      }
      mem[o] = dnnl::memory(*descs[o], engine(), base + copy_at[o]);
      if (o == kY) continue;
      execute(plan.reorders[o], {{DNNL_ARG_FROM, wrap(plan.lies[o], t)},
                                 {DNNL_ARG_TO, dnnl::memory(plan.plain[o], engine(), base + copy_at[o])}});
    }
    float* scores = reinterpret_cast<float*>(base + s_at);
    const dnnl::memory s_mem(plan.s, engine(), scores), p_mem(plan.p, engine(), base + p_at);
    execute(plan.scores, {{DNNL_ARG_SRC, mem[kQ]}, {DNNL_ARG_WEIGHTS, mem[kK]}, {DNNL_ARG_DST, s_mem}});
    if (mask.data) add_mask(sh, mask, scores);
    execute(plan.softmax, {{DNNL_ARG_SRC, s_mem}, {DNNL_ARG_DST, p_mem}});
    execute(plan.context, {{DNNL_ARG_SRC, p_mem}, {DNNL_ARG_WEIGHTS, mem[kV]}, {DNNL_ARG_DST, mem[kY]}});
    if (plan.staged[kY])
      execute(plan.reorders[kY], {{DNNL_ARG_FROM, dnnl::memory(plan.plain[kY], engine(), base + copy_at[kY])},
                                  {DNNL_ARG_TO, wrap(plan.lies[kY], y)}});
  }

  AttentionPlan build(const KernelContext& ctx, const Shape& q, const Shape& k, const Shape& v) const {
    AttentionPlan p;
    p.geometry = attention_geometry(ctx, q, k, v, scale_, interleaved_);
    const AttentionShape& sh = p.geometry.shape;
    using DT = dnnl::memory::data_type;
    // Q, K and V are staged where their heads interleave or they are rounded to bf16; Y only
    // where its heads interleave (the product writes float32).
    for (int o = 0; o < 4; ++o) {
      p.staged[o] = p.geometry.interleaved[o] || (bf16_ && o != kY);
      if (!p.staged[o]) continue;
      const Shape& logical = p.geometry.logical[o];
      const bool interleaved = p.geometry.interleaved[o];  // rank 4; otherwise [batch, rows, features]
      const Dims dims = interleaved ? Dims(logical.begin(), logical.end())
                                    : Dims{sh.batch, logical[logical.size() - 2], logical.back()};
      const Tag tag = interleaved ? Tag::abcd : Tag::abc;
      p.lies[o] = interleaved ? interleaved_desc(logical) : f32_desc(dims, tag);
      p.plain[o] = dnnl::memory::desc(dims, bf16_ && o != kY ? DT::bf16 : DT::f32, tag);
      p.reorders[o] = o == kY ? dnnl::reorder(dnnl::reorder::primitive_desc(engine(), p.plain[o], engine(), p.lies[o]))
                              : dnnl::reorder(dnnl::reorder::primitive_desc(engine(), p.lies[o], engine(), p.plain[o]));
    }
    const DT in = bf16_ ? DT::bf16 : DT::f32;
    const std::int64_t d = sh.d, dv = sh.dv;
    p.q = dnnl::memory::desc({sh.batch, sh.rows, d}, in, Tag::abc);
    p.k_t = dnnl::memory::desc({sh.batch, d, sh.cols}, in, Dims{sh.cols * d, 1, d});
    p.s = f32_desc({sh.batch, sh.rows, sh.cols}, Tag::abc);
    p.p = dnnl::memory::desc({sh.batch, sh.rows, sh.cols}, in, Tag::abc);
    p.v = dnnl::memory::desc({sh.batch, sh.cols, dv}, in, Tag::abc);
    p.y = f32_desc({sh.batch, sh.rows, dv}, Tag::abc);
    dnnl::primitive_attr scaled = make_attr();
    scaled.set_output_scales(0, {scale_});
    p.scores = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(p.q, p.k_t, p.s), scaled, engine()));
    if (bf16_)
      p.softmax = dnnl::softmax_v2_forward(dnnl::softmax_v2_forward::primitive_desc(
          dnnl::softmax_v2_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::softmax_accurate, p.s, p.p, 2),
          make_attr(), engine()));
    else
      p.softmax = dnnl::softmax_forward(dnnl::softmax_forward::primitive_desc(
          dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, p.s, 2), make_attr(), engine()));
    p.context = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(p.p, p.v, p.y), make_attr(), engine()));
    return p;
  }

  float scale_;
  std::array<bool, 4> interleaved_;
  bool bf16_;
  ShapeCache<AttentionPlan> cache_;
};

}  // namespace

std::string attention_unsupported(const Node& node, const Graph& graph) {
  for (ValueId v : node.inputs)
    if (v != kNoValue && graph.value(v).dtype != DType::Float32 && graph.value(v).dtype != DType::Undefined)
      return "inputs are not float32";
  if (node.inputs.size() < 3) return "needs Q, K and V";
  return "";
}

std::unique_ptr<Kernel> make_attention(const Node& node, const Graph&) {
  return std::make_unique<AttentionKernel>(node.attr_float("scale", 1.0f), attention_interleaved_heads(node),
                                           node.attr_string("compute_precision", "") == "bf16");
}

}  // namespace wpk::onednn
