#pragma once
// wpk's Winograd convolution F(4x4, 3x3) on AVX2 and FMA (oneDNN 2.6 has no Winograd kernel
// for CPUs without AVX-512). A 3x3 stride-1 conv computes each 4x4 block of output
// pixels (a tile) from the 6x6 input patch under it as 36 independent channel products (one per
// point of the transformed patch) instead of 16 x 9: 2.25 multiply-adds per output where direct
// convolution needs 9. Per block of tiles a thread transforms the input patches (B^T d B), runs
// the 36 products [tiles x ic] x [ic x oc] on avx2_tile.hpp's register tile, and transforms the
// sums back (A^T m A) with bias, residual and activation fused into the one store. The weights
// are transformed once at load (G g G^T, in double precision): 4x the direct weights' bytes.
// The transforms add rounding of their own: on the kernel test's convs a relative L2 error of
// 0.5e-6-2.9e-6, 1.1-2.7x direct convolution's, well inside the 1e-4 models are held to.
#include <cstddef>
#include <cstdint>

#include "backends/cpu/stream_conv.hpp"

namespace wpk::cpu {

// True when this build and CPU run the kernel (AVX2 and FMA) on this conv: 3x3, stride 1,
// undilated, input channels a multiple of 8.
bool avx2_winograd_runs(const StreamConvShape& s);

// The 4x4-output tiles the conv is cut into over the batch (each reads all the transformed
// weights its thread computes with: few tiles against many weights do not pay).
std::int64_t avx2_winograd_tiles(const StreamConvShape& s);

// Floats of the transformed weights: [36][ceil(oc / 16)][ic][16].
std::size_t avx2_winograd_weights_size(const StreamConvShape& s);

// Transforms 3x3 weights packed Acdb16a ([oc / 16][3][3][ic][16], zero-padded) into `u`
// (avx2_winograd_weights_size floats).
void avx2_winograd_weights(const StreamConvShape& s, const float* acdb16a, float* u);

// y = act(conv(x, w) + bias [+ y]) in an OpenMP parallel region of the calling thread's thread
// count; x, y NHWC float32; u from avx2_winograd_weights. `wide` (only where
// stream_conv_available()): the transforms 16 lanes wide and each point's product on the AVX-512
// streaming tile (kernel=winograd_avx512).
void avx2_winograd_conv(const StreamConvShape& s, const float* x, const float* u, const StreamConvEpilogue& e, float* y,
                        bool wide = false);

}  // namespace wpk::cpu
