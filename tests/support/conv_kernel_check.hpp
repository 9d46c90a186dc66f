#pragma once
// For tests of wpk's own NHWC convolution kernels (backends/onednn: stream_conv, avx2_conv):
// random data, shapes, weights packed by oneDNN as the kernels read them, the four epilogues they fuse,
// and a plain double-precision convolution to compare with.
#include <dnnl.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/stream_conv.hpp"
#include "core/cpu_features.hpp"

namespace wpk::testing {

inline std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// A square conv: batch n, size x size input, k x k kernel.
inline cpu::StreamConvShape conv_shape(std::int64_t n, std::int64_t size, std::int64_t ic, std::int64_t oc,
                                          std::int64_t k, std::int64_t stride, std::int64_t pad,
                                          std::int64_t dilation) {
  cpu::StreamConvShape s;
  s.n = n;
  s.ih = s.iw = size;
  s.ic = ic;
  s.oc = oc;
  s.kh = s.kw = k;
  s.sh = s.sw = stride;
  s.ph = s.pw = pad;
  s.dh = s.dw = dilation;
  s.oh = s.ow = (size + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
  return s;
}

// True when this CPU runs wpk's AVX2 kernels (they need AVX2 and FMA, not the missing AVX-512).
inline bool cpu_runs_avx2_kernel() { return cpu_features().avx2_fma(); }

// Non-square shapes and asymmetric padding, which conv_shape does not make.
inline cpu::StreamConvShape rect_shape(std::int64_t n, std::int64_t ih, std::int64_t iw, std::int64_t ic,
                                          std::int64_t oc, std::int64_t kh, std::int64_t kw, std::int64_t sh,
                                          std::int64_t sw, std::int64_t ph_begin, std::int64_t ph_end,
                                          std::int64_t pw_begin, std::int64_t pw_end) {
  cpu::StreamConvShape s;
  s.n = n;
  s.ih = ih;
  s.iw = iw;
  s.ic = ic;
  s.oc = oc;
  s.kh = kh;
  s.kw = kw;
  s.sh = sh;
  s.sw = sw;
  s.ph = ph_begin;
  s.pw = pw_begin;
  s.oh = (ih + ph_begin + ph_end - kh) / sh + 1;
  s.ow = (iw + pw_begin + pw_end - kw) / sw + 1;
  return s;
}

// OIHW weights into oneDNN's blocked `tag` (Acdb16a and friends: output channels innermost, in
// zero-padded blocks).
inline std::vector<float> pack_weights(const std::vector<float>& oihw, const cpu::StreamConvShape& s,
                                       dnnl::memory::format_tag tag) {
  const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(eng);
  const dnnl::memory::dims dims = {s.oc, s.ic, s.kh, s.kw};
  const dnnl::memory::desc plain(dims, dnnl::memory::data_type::f32, dnnl::memory::format_tag::oihw),
      packed(dims, dnnl::memory::data_type::f32, tag);
  std::vector<float> out(packed.get_size() / sizeof(float));
  dnnl::memory from(plain, eng, const_cast<float*>(oihw.data())), to(packed, eng, out.data());
  dnnl::reorder(from, to).execute(stream, from, to);
  stream.wait();
  return out;
}

// The epilogues the kernels fuse: 0 none, 1 bias + Relu, 2 bias + Clip(-0.5, 0.75), 3 bias +
// residual + Relu; the AVX2 kernel's GELUs: 4 bias + Gelu, 5 bias + residual + GeluTanh.
inline cpu::StreamConvEpilogue test_epilogue(int kind, const std::vector<float>& bias) {
  using Act = cpu::StreamConvEpilogue::Act;
  const Act acts[] = {Act::None, Act::Relu, Act::Clip, Act::Relu, Act::Gelu, Act::GeluTanh};
  cpu::StreamConvEpilogue e;
  if (kind >= 1) e.bias = bias.data();
  e.act = acts[kind];
  e.lo = -0.5f;
  e.hi = 0.75f;
  e.accumulate = kind == 3 || kind == 5;
  return e;
}

// y = act(conv(x, w) + bias + residual) in double, NHWC; w OIHW.
inline std::vector<float> naive_conv(const cpu::StreamConvShape& s, const std::vector<float>& x,
                                     const std::vector<float>& oihw, const cpu::StreamConvEpilogue& e,
                                     const std::vector<float>& residual) {
  using Act = cpu::StreamConvEpilogue::Act;
  std::vector<float> y(static_cast<std::size_t>(s.n * s.oh * s.ow * s.oc));
  for (std::int64_t n = 0; n < s.n; ++n)
    for (std::int64_t oy = 0; oy < s.oh; ++oy)
      for (std::int64_t ox = 0; ox < s.ow; ++ox)
        for (std::int64_t o = 0; o < s.oc; ++o) {
          double sum = e.bias ? e.bias[o] : 0.0;
          for (std::int64_t fy = 0; fy < s.kh; ++fy)
            for (std::int64_t fx = 0; fx < s.kw; ++fx) {
              const std::int64_t iy = oy * s.sh - s.ph + fy * s.dh, ix = ox * s.sw - s.pw + fx * s.dw;
              if (iy < 0 || ix < 0 || iy >= s.ih || ix >= s.iw) continue;
              for (std::int64_t c = 0; c < s.ic; ++c)
                sum += static_cast<double>(x[static_cast<std::size_t>(((n * s.ih + iy) * s.iw + ix) * s.ic + c)]) *
                       oihw[static_cast<std::size_t>(((o * s.ic + c) * s.kh + fy) * s.kw + fx)];
            }
          const std::size_t i = static_cast<std::size_t>(((n * s.oh + oy) * s.ow + ox) * s.oc + o);
          if (e.accumulate) sum += residual[i];
          if (e.act == Act::Relu || e.act == Act::Clip)
            sum = std::max(sum, static_cast<double>(e.act == Act::Clip ? e.lo : 0.0f));
          if (e.act == Act::Clip) sum = std::min(sum, static_cast<double>(e.hi));
          if (e.act == Act::Gelu) sum = 0.5 * sum * (1.0 + std::erf(sum / std::sqrt(2.0)));
          if (e.act == Act::GeluTanh) {
            const double u = std::sqrt(2.0 / 3.14159265358979323846) * (sum + 0.044715 * sum * sum * sum);
            sum = 0.5 * sum * (1.0 + std::tanh(u));
          }
          y[i] = static_cast<float>(sum);
        }
  return y;
}

// How far a kernel's output is from the plain convolution's: the largest absolute difference
// and the relative L2 error over the first want.size() floats.
struct ConvDiff {
  double worst = 0, relative_l2 = 0;
};

inline ConvDiff conv_diff(const std::vector<float>& y, const std::vector<float>& want) {
  double err = 0, norm = 0, worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(y[i]) - want[i];
    err += d * d;
    norm += want[i] * static_cast<double>(want[i]);
    worst = std::max(worst, std::abs(d));
  }
  return {worst, std::sqrt(err / std::max(norm, 1e-30))};
}

// One case of a kernel test: random input, OIHW weights, bias and residual for shape `s` (seeds
// drawn from `seed` in that order), the epilogue of kind `epilogue` (test_epilogue), the output
// buffer the kernel writes (holding the residual when the epilogue accumulates) followed by
// guard floats that catch a store past its end, and the double-precision answer.
struct ConvKernelCase {
  static constexpr float kGuard = 12345.0f;
  std::vector<float> x, w, bias, residual, y, want;
  cpu::StreamConvEpilogue e;

  ConvKernelCase(const cpu::StreamConvShape& s, int epilogue, unsigned& seed)
      : x(random_floats(static_cast<std::size_t>(s.n * s.ih * s.iw * s.ic), seed++)),
        w(random_floats(static_cast<std::size_t>(s.oc * s.ic * s.kh * s.kw), seed++)),
        bias(random_floats(static_cast<std::size_t>(s.oc), seed++)),
        residual(random_floats(static_cast<std::size_t>(s.n * s.oh * s.ow * s.oc), seed++)),
        y(residual.size() + 16, kGuard),
        e(test_epilogue(epilogue, bias)) {
    if (e.accumulate) std::copy(residual.begin(), residual.end(), y.begin());
    want = naive_conv(s, x, w, e, residual);
  }
  ConvKernelCase(const ConvKernelCase&) = delete;  // e.bias points into bias
  ConvKernelCase& operator=(const ConvKernelCase&) = delete;

  ConvDiff diff() const { return conv_diff(y, want); }
  // Guard floats the kernel overwrote.
  std::size_t guards_changed() const {
    return static_cast<std::size_t>(std::count_if(y.begin() + static_cast<std::ptrdiff_t>(want.size()), y.end(),
                                                  [](float v) { return v != kGuard; }));
  }
};

}  // namespace wpk::testing
