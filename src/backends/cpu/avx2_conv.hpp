#pragma once
// wpk's own direct convolution on AVX2 and FMA. On CPUs without AVX-512 oneDNN 2.6 has
// neither its Winograd nor its brgemm convolutions and runs every conv on its older jit:avx2
// kernel, which reaches ~130 GFLOP/s on two Zen 3 cores on ResNet-50's 3x3s, ~25% under
// what a register-blocked loop gets from the same FMA units. This kernel computes tiles of 6
// output pixels x 16 output channels (12 of the 16 vector registers hold sums), reading NHWC
// activations in place (no reorders) and the weights packed Acdb16a ([oc / 16][kh]
// [kw][ic][16], zero-padded), with bias, residual and ReLU/Clip/GELU applied before the one store.
// Products with a constant B run on it too, as 1x1 convolutions of their rows.
#include <cstdint>

#include "backends/cpu/stream_conv.hpp"

namespace wpk::cpu {

// How the kernel walks the work; the search's knobs (the cpu backend's conv configs).
struct Avx2ConvTiling {
  // A thread computes the output-channel blocks of a group of at most this many weight bytes
  // for one block of pixels before moving on, so the group's weights stay in L2 across pixel
  // blocks and a pixel block's input rows across the group's blocks.
  std::int64_t group_bytes = 192 << 10;
  std::int64_t pixel_block = 96;  // output pixels per block
};

// True when this build and CPU run the kernel (AVX2 and FMA) on this shape: at most 64 taps.
bool avx2_conv_runs(const StreamConvShape& s);

// y = act(conv(x, w) + bias [+ y]) in an OpenMP parallel region of the calling thread's thread
// count; x, y NHWC float32; w blocked Acdb16a.
void avx2_conv(const StreamConvShape& s, const float* x, const float* w, const StreamConvEpilogue& e, float* y,
               const Avx2ConvTiling& tiling = {});

}  // namespace wpk::cpu
