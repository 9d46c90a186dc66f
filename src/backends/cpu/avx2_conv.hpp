#pragma once
// wpk's own direct convolution for CPUs with AVX2 and FMA but no AVX-512, where oneDNN 2.6 has
// neither its Winograd nor its brgemm convolutions and runs every conv on its older jit:avx2
// kernel. That kernel reaches ~130 GFLOP/s on two Zen 3 cores on ResNet-50's 3x3s, ~25% under
// what a register-blocked loop gets from the same FMA units. This kernel computes tiles of 6
// output pixels x 16 output channels (12 of the 16 vector registers hold sums), reading NHWC
// activations in place (no reorders) and the weights oneDNN packed as Acdb16a ([oc / 16][kh]
// [kw][ic][16], zero-padded), with bias, residual and ReLU/Clip/GELU applied before the one store.
// Products with a constant B run on it too, as 1x1 convolutions of their rows (matmul.cpp).
#include <cstdint>

#include "backends/cpu/stream_conv.hpp"

namespace wpk::cpu {

// True when this CPU has AVX2 and FMA and lacks AVX-512F (with AVX-512 oneDNN's kernels win).
bool avx2_conv_available();

// True for the shapes this kernel takes from oneDNN on such a CPU: ungrouped convs with at
// least kMinInputChannels input channels (each tap's loop runs over them), at most 64 taps.
bool avx2_conv_pays(const StreamConvShape& s);

// y = act(conv(x, w) + bias [+ y]) in an OpenMP parallel region of the calling thread's thread
// count; x, y NHWC float32; w blocked Acdb16a.
void avx2_conv(const StreamConvShape& s, const float* x, const float* w, const StreamConvEpilogue& e, float* y);

}  // namespace wpk::cpu
