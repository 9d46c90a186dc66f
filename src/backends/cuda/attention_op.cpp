// com.wpk Attention: scores = scale * Q K^T by cuBLAS (a batched GEMM per image, over its heads,
// reading interleaved [B, S, H, D] operands in place through their strides), the mask added by
// a generated kernel, softmax by cuDNN, then Y = P V by cuBLAS written in Y's layout.
#include "backends/cuda/cudnn_descriptors.hpp"
#include "backends/cuda/device_op.hpp"
#include "backends/cuda/generated_kernels.hpp"
#include "graph/fused_ops.hpp"

namespace wpk::cuda {
namespace {

// One operand as matrices: per (image, head) the offset of its first row and its row stride.
struct Layout {
  std::int64_t rows = 0, cols = 0;
  std::int64_t row_stride = 0;    // elements between rows
  std::int64_t head_stride = 0;   // between heads of one image
  std::int64_t image_stride = 0;  // between images
};

Layout layout_of(const Shape& s, bool interleaved) {
  Layout l;
  if (s.size() == 4 && interleaved) {  // [B, S, H, D]
    l.rows = s[1], l.cols = s[3], l.row_stride = s[2] * s[3], l.head_stride = s[3], l.image_stride = s[1] * s[2] * s[3];
  } else {  // [B, H, S, D] or [P, S, D]: heads (or the flattened batch) one after another
    l.rows = s[s.size() - 2], l.cols = s.back(), l.row_stride = s.back(), l.head_stride = l.rows * l.cols;
    l.image_stride = (s.size() == 4 ? s[1] : 1) * l.head_stride;
  }
  return l;
}

class AttentionOp : public DeviceOp {
 public:
  explicit AttentionOp(const PrepareEnv& env) {
    const Node& n = env.node;
    const auto inter = attention_interleaved_heads(n);
    const Shape& q = env.in[0].shape;
    q_ = layout_of(q, inter[0]), k_ = layout_of(env.in[1].shape, inter[1]), v_ = layout_of(env.in[2].shape, inter[2]);
    y_ = layout_of(env.out.shape, inter[3]);
    if (q.size() == 4) images_ = q[0], heads_ = inter[0] ? q[2] : q[1];
    else images_ = 1, heads_ = q[0];
    scale_ = n.attr_float("scale", 1.0f);
    const std::int64_t s = q_.rows, t = k_.rows;
    scores_ = static_cast<std::size_t>(images_ * heads_ * s * t);
    const Shape scores = {images_, heads_, s, t};
    if (n.inputs.size() > 3 && n.inputs[3] != kNoValue)
      mask_ = GeneratedKernel::obtain(elementwise_kernel("attention_mask", scores, {scores, env.in[3].shape},
                                                         [](const std::vector<codegen::Expr>& v) { return v[0] + v[1]; }),
                                      env.cubins);
    set_packed_tensor(desc_, {images_ * heads_ * s, t, 1, 1});
  }

  void launch(const LaunchEnv& env, const std::vector<DeviceTensor>& in, const DeviceTensor& out) const override {
    const float zero = 0.0f, one = 1.0f;
    const std::int64_t s = q_.rows, t = k_.rows, d = q_.cols, dv = v_.cols;
    const CUdeviceptr scores = env.scratch, probs = env.scratch + scores_ * sizeof(float);
    auto f = [](CUdeviceptr p, std::int64_t offset) { return reinterpret_cast<float*>(p) + offset; };
    for (std::int64_t b = 0; b < images_; ++b) {
      // Column-major view: scores^T [T, S] = K [T, D] (K^T read transposed) x Q^T [D, S].
      check(cublas().SgemmStridedBatched(env.handles.blas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(t), static_cast<int>(s),
                                         static_cast<int>(d), &scale_, f(in[1].ptr, b * k_.image_stride),
                                         static_cast<int>(k_.row_stride), k_.head_stride, f(in[0].ptr, b * q_.image_stride),
                                         static_cast<int>(q_.row_stride), q_.head_stride, &zero,
                                         f(scores, b * heads_ * s * t), static_cast<int>(t), s * t, static_cast<int>(heads_)),
            "attention scores");
    }
    CUdeviceptr logits = scores;
    if (mask_) {
      mask_->launch(env.handles.stream(), {scores, in[3].ptr, probs});
      logits = probs;
    }
    const CUdeviceptr p = logits == scores ? probs : scores;
    check(cudnn().SoftmaxForward(env.handles.dnn(), CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &one, desc_,
                                 reinterpret_cast<const void*>(logits), &zero, desc_, reinterpret_cast<void*>(p)),
          "attention softmax");
    for (std::int64_t b = 0; b < images_; ++b) {
      // Y^T [Dv, S] = V^T [Dv, T] x P^T [T, S].
      check(cublas().SgemmStridedBatched(env.handles.blas(), CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(dv), static_cast<int>(s),
                                         static_cast<int>(t), &one, f(in[2].ptr, b * v_.image_stride),
                                         static_cast<int>(v_.row_stride), v_.head_stride, f(p, b * heads_ * s * t),
                                         static_cast<int>(t), s * t, &zero, f(out.ptr, b * y_.image_stride),
                                         static_cast<int>(y_.row_stride), y_.head_stride, static_cast<int>(heads_)),
            "attention output");
    }
  }
  std::string describe() const override {
    return std::string("cublas:attention") + (mask_ ? "+gen:" + mask_->symbol() : "") + "+cudnn:softmax";
  }
  std::size_t scratch_bytes() const override { return 2 * scores_ * sizeof(float); }

 private:
  Layout q_, k_, v_, y_;
  std::int64_t images_ = 1, heads_ = 1;
  float scale_ = 1.0f;
  std::size_t scores_ = 0;
  std::shared_ptr<const GeneratedKernel> mask_;
  TensorDescriptor desc_;
};

}  // namespace

std::unique_ptr<DeviceOp> prepare_attention(const PrepareEnv& env) { return std::make_unique<AttentionOp>(env); }

}  // namespace wpk::cuda
