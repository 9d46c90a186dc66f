#pragma once
// 2-D max pooling over NHWC activations, wpk's own loop. oneDNN 2.6's NHWC max pool is slow
// where it has no AVX-512 kernel: ResNet-50's 3x3/2 pool over [8, 112, 112, 64] took 6.5-7.0
// ms on a Zen 3 (2 threads), 4.1-4.3 in nChw8c. Here each output row first takes the
// element-wise max of the input rows its windows span (whole W x C rows, contiguous in NHWC),
// then the max over each window's columns of that, so every input float is read once per
// output row that covers it instead of once per window. Exact: max picks an input element.
#include <cstdint>

namespace wpk::cpu {

struct MaxPoolShape {
  std::int64_t n = 0, h = 0, w = 0, c = 0;  // input [n, h, w, c]
  std::int64_t oh = 0, ow = 0;              // output [n, oh, ow, c]
  std::int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;  // kernel, stride, begin pads
};

// True when every window holds at least one input element (padding alone is never a max; a
// window wholly inside the padding, which ceil mode can make, is left to oneDNN).
bool max_pool_nhwc_covers(const MaxPoolShape& s);

// y = max pool of x; rows of output split over the calling thread's OpenMP thread count.
void max_pool_nhwc(const MaxPoolShape& s, const float* x, float* y);

}  // namespace wpk::cpu
