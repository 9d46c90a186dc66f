#pragma once
// Weight-streaming convolution: wpk's own kernel for convolutions whose weights dwarf their
// output (batch 1 at 7x7, where each weight is used 49 times: ResNet-50's layer4, 9.4 MB for a
// 3x3 512-channel conv). oneDNN's brgemm kernel computes such a conv at ~250 GFLOP/s while its
// weights sit in cache, but inside a model they come from DRAM on every run and its loads stall
// on them (0.9 ms hot, 1.4-1.6 ms in the model). This kernel reads weights packed
// Acdb{16,32,48,64}a (output channels innermost, in blocks) and prefetches the next
// chunk of them into L2 while it computes on the current one, so the transfer overlaps the FMAs.
#include <cstdint>

namespace wpk::cpu {

struct StreamConvShape {
  std::int64_t n = 0, ih = 0, iw = 0, ic = 0;  // input, NHWC
  std::int64_t oh = 0, ow = 0, oc = 0;         // output, NHWC
  std::int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;  // dh, dw: dilation
};

struct StreamConvEpilogue {
  // Gelu (erf) and GeluTanh: wpk's AVX2 kernel only (avx2_conv.hpp); streaming takes the others.
  enum class Act { None, Relu, Clip, Gelu, GeluTanh };
  const float* bias = nullptr;  // [oc], or null
  bool accumulate = false;      // y holds the residual on entry: y = act(conv + bias + y)
  Act act = Act::None;
  float lo = 0, hi = 0;         // Clip's bounds
};

// True when this CPU runs the kernel (AVX-512F).
bool stream_conv_available();

// True when the streaming kernel applies this epilogue's activation (none, Relu, Clip).
inline bool stream_conv_fuses(const StreamConvEpilogue& e) {
  return e.act == StreamConvEpilogue::Act::None || e.act == StreamConvEpilogue::Act::Relu ||
         e.act == StreamConvEpilogue::Act::Clip;
}

// True when this CPU runs the kernel on this shape with weights in blocks of `block` (16, 32,
// 48 or 64 output channels).
bool stream_conv_runs(const StreamConvShape& s, int block);

// How evenly `threads` threads share the work: the even share of output channels over the
// busiest thread's (1: even). Threads take runs of whole 64-channel column groups (48 with
// blocks of 48), so 320 channels over two threads in groups of 48 give 144 + 176 (0.91).
double stream_conv_balance(const StreamConvShape& s, int block, int threads);

// y = act(conv(x, w) + bias [+ y]) in an OpenMP parallel region of the calling thread's thread
// count (one thread when called inside another parallel region); x, y NHWC float32; w blocked
// as stream_weights_block says, with `block` its block.
void stream_conv(const StreamConvShape& s, const float* x, const float* w, int block, const StreamConvEpilogue& e,
                 float* y);
// The same on the calling thread alone, with no parallel region: for kernels that split their
// own work over threads (avx512_attention.hpp).
void stream_conv_on_this_thread(const StreamConvShape& s, const float* x, const float* w, int block,
                                const StreamConvEpilogue& e, float* y);

}  // namespace wpk::cpu
