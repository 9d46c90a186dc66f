// Signal ops of opset 17 (DFT's axis an input from opset 20): HannWindow, HammingWindow, BlackmanWindow, DFT, STFT, MelWeightMatrix.
// Everything is computed in double and rounded once into the output dtype, so float16/bfloat16
// and float32 results agree with a float64 computation to within their own precision.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/reference/common.hpp"
#include "backends/reference/float_buffers.hpp"
#include "backends/reference/misc_internal.hpp"
#include "backends/reference/registry.hpp"

namespace wpk::reference {
namespace {

using Cplx = std::complex<double>;
constexpr double kPi = 3.14159265358979323846;

// Sizes come from runtime inputs, so every one is checked before anything is allocated: a
// size of 10^12 must be an error, not an attempt to allocate terabytes.
constexpr std::int64_t kMaxElements = std::int64_t(1) << 26;  // any output or scratch buffer
constexpr std::int64_t kMaxDftLength = std::int64_t(1) << 20;
// Complex multiply-adds one node may spend; the FFT below costs n * (sum of n's prime factors)
// per transform, so only long prime lengths or very many transforms get near it.
constexpr double kMaxWork = 4e9;

// a * b, failing (rather than overflowing) once the product passes kMaxElements.
std::int64_t checked_mul(std::int64_t a, std::int64_t b, const KernelContext& ctx, const char* what) {
  if (a < 0 || b < 0) ctx.fail(ErrorCode::InvalidArgument, std::string(what) + " is negative");
  if (a != 0 && b > kMaxElements / a)
    ctx.fail(ErrorCode::InvalidArgument, std::string(what) + " is too large (limit " + std::to_string(kMaxElements) +
                                             " elements)");
  return a * b;
}

// A scalar int input (shape [] or [1], int32 or int64).
std::int64_t int_scalar(const KernelContext& ctx, std::size_t i, const char* name) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1 || t.rank() > 1)
    ctx.fail(ErrorCode::InvalidArgument, std::string(name) + " must be a scalar, got shape " + shape_to_string(t.shape()));
  return read_int_list(t, ctx)[0];
}

double float_scalar(const KernelContext& ctx, std::size_t i, const char* name) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1 || t.rank() > 1)
    ctx.fail(ErrorCode::InvalidArgument, std::string(name) + " must be a scalar, got shape " + shape_to_string(t.shape()));
  return to_double_buffer(t, ctx)[0];
}

// The output_datatype attribute of the window ops and MelWeightMatrix: any numeric type.
DType output_datatype(const KernelContext& ctx) {
  const std::int64_t v = ctx.node().attr_int("output_datatype", static_cast<std::int64_t>(DType::Float32));
  const auto d = static_cast<DType>(v);
  if (v <= 0 || v > 255 || !dtype_is_storable(d) || d == DType::Bool)
    ctx.fail(ErrorCode::Unsupported, "output_datatype " + std::to_string(v) + " is not a supported numeric type");
  return d;
}

// Integer outputs truncate toward zero like Cast does; NaN and out-of-range values saturate so
// the conversion is always defined.
template <typename T>
T to_int_saturating(double v) {
  if (std::isnan(v)) return T(0);
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

// Rounds `v` into `out` (same element count), whatever numeric dtype `out` has.
void store_values(const std::vector<double>& v, Tensor& out, const KernelContext& ctx) {
  const std::size_t n = v.size();
  if (out.dtype() == DType::Float16) {
    Float16Bits* p = out.data<Float16Bits>();
    for (std::size_t i = 0; i < n; ++i) p[i] = float_to_half(static_cast<float>(v[i]));
  } else if (out.dtype() == DType::BFloat16) {
    BFloat16Bits* p = out.data<BFloat16Bits>();
    for (std::size_t i = 0; i < n; ++i) p[i] = float_to_bfloat16(static_cast<float>(v[i]));
  } else {
    dispatch_numeric(out.dtype(), ctx, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* p = out.data<T>();
      for (std::size_t i = 0; i < n; ++i) {
        if constexpr (std::is_floating_point_v<T>) p[i] = static_cast<T>(v[i]);
        else p[i] = to_int_saturating<T>(v[i]);
      }
    });
  }
}

void require_float_input(const KernelContext& ctx, std::size_t i, const char* name) {
  const DType d = ctx.input(i).dtype();
  if (d != DType::Float32 && d != DType::Float64 && !is_half_dtype(d))
    ctx.fail(ErrorCode::Unsupported, std::string(name) + " must be a float tensor, got " + dtype_name(d));
}

// ---- Windows -----------------------------------------------------------------------------

// Generalized cosine window a0 - a1 cos(2 pi k / N) + a2 cos(4 pi k / N), k in [0, size).
// N is size when periodic (the window of a size+1 symmetric window minus its last sample, the
// form spectral analysis wants) and size - 1 when symmetric.
void cosine_window(KernelContext& ctx, double a0, double a1, double a2) {
  const std::int64_t size = int_scalar(ctx, 0, "size");
  if (size <= 0) ctx.fail(ErrorCode::InvalidArgument, "size must be positive, got " + std::to_string(size));
  checked_mul(size, 1, ctx, "window size");
  const std::int64_t periodic = ctx.node().attr_int("periodic", 1);
  if (periodic != 0 && periodic != 1)
    ctx.fail(ErrorCode::InvalidModel, "periodic must be 0 or 1, got " + std::to_string(periodic));
  const DType out_type = output_datatype(ctx);
  const double denom = static_cast<double>(periodic ? size : size - 1);
  std::vector<double> w(static_cast<std::size_t>(size));
  for (std::int64_t k = 0; k < size; ++k) {
    // A symmetric window of one sample has N = 0; it is the peak value 1 (as numpy gives).
    if (denom == 0) {
      w[k] = 1.0;
      continue;
    }
    const double t = 2 * kPi * static_cast<double>(k) / denom;
    w[k] = a0 - a1 * std::cos(t) + a2 * std::cos(2 * t);
  }
  store_values(w, ctx.allocate_output(0, out_type, {size}), ctx);
}

void hann_window(KernelContext& ctx) { cosine_window(ctx, 0.5, 0.5, 0.0); }
// Hamming's "optimal" coefficients 25/46 and 21/46, which the ONNX function body also uses.
void hamming_window(KernelContext& ctx) { cosine_window(ctx, 25.0 / 46.0, 21.0 / 46.0, 0.0); }
void blackman_window(KernelContext& ctx) { cosine_window(ctx, 0.42, 0.5, 0.08); }

// ---- FFT ---------------------------------------------------------------------------------

std::int64_t smallest_factor(std::int64_t n) {
  for (std::int64_t p = 2; p * p <= n; ++p)
    if (n % p == 0) return p;
  return n;
}

// Complex multiply-adds fft() spends on one transform of length n: n per radix-p stage times p.
double fft_cost(std::int64_t n) {
  double cost = 0;
  while (n > 1) {
    const std::int64_t p = smallest_factor(n);
    cost += static_cast<double>(n) * static_cast<double>(p);
    n /= p;
  }
  return cost;
}

// Mixed-radix decimation-in-time FFT: out[k] = sum_j in[j * stride] * tw[(j * k mod n) * step]
// for k in [0, n), where tw is the twiddle table of the top-level length N and step = N / n.
// Splitting by the smallest prime factor keeps power-of-two lengths O(n log n) while any length
// still works (a prime length is one direct O(n^2) stage). Recursion depth is at most log2(n).
void fft(const Cplx* in, std::int64_t stride, std::int64_t n, Cplx* out, const std::vector<Cplx>& tw, std::int64_t step) {
  if (n == 1) {
    out[0] = in[0];
    return;
  }
  const std::int64_t p = smallest_factor(n);
  const std::int64_t m = n / p;
  if (m > 1) {
    // Sub-transform r takes every p-th sample starting at r and lands in out[r*m, (r+1)*m).
    for (std::int64_t r = 0; r < p; ++r) fft(in + r * stride, stride * p, m, out + r * m, tw, step * p);
  } else {
    for (std::int64_t r = 0; r < p; ++r) out[r] = in[r * stride];
  }
  // Output k + q*m combines bin k of every sub-transform; those p values sit at the same p
  // positions being written, so they are copied out first.
  std::vector<Cplx> y(static_cast<std::size_t>(p));
  for (std::int64_t k = 0; k < m; ++k) {
    for (std::int64_t r = 0; r < p; ++r) y[r] = out[r * m + k];
    for (std::int64_t q = 0; q < p; ++q) {
      const std::int64_t kk = k + q * m;
      Cplx s = 0;
      for (std::int64_t r = 0; r < p; ++r) s += y[r] * tw[static_cast<std::size_t>(((r * kk) % n) * step)];
      out[kk] = s;
    }
  }
}

// A length-n transform, reusable across the many rows of one node.
struct Transform {
  std::int64_t n;
  bool inverse;
  std::vector<Cplx> tw;
  std::vector<Cplx> out;

  Transform(std::int64_t n_, bool inverse_) : n(n_), inverse(inverse_), tw(n_), out(n_) {
    const double sign = inverse ? 1.0 : -1.0;
    for (std::int64_t m = 0; m < n; ++m) {
      const double a = 2 * kPi * static_cast<double>(m) / static_cast<double>(n);
      tw[m] = Cplx(std::cos(a), sign * std::sin(a));
    }
  }
  // Transforms `in` (n values) into `out`; the inverse carries the 1/n normalization.
  void run(const std::vector<Cplx>& in) {
    fft(in.data(), 1, n, out.data(), tw, 1);
    if (inverse)
      for (auto& v : out) v /= static_cast<double>(n);
  }
};

void check_length(std::int64_t n, const KernelContext& ctx, const char* name) {
  if (n <= 0) ctx.fail(ErrorCode::InvalidArgument, std::string(name) + " must be positive, got " + std::to_string(n));
  if (n > kMaxDftLength)
    ctx.fail(ErrorCode::InvalidArgument, std::string(name) + " " + std::to_string(n) + " exceeds the limit of " +
                                             std::to_string(kMaxDftLength));
}

void check_work(std::int64_t transforms, std::int64_t n, const KernelContext& ctx) {
  if (static_cast<double>(transforms) * fft_cost(n) > kMaxWork)
    ctx.fail(ErrorCode::InvalidArgument, std::to_string(transforms) + " transforms of length " + std::to_string(n) +
                                             " exceed the reference backend's work limit");
}

// ---- DFT ---------------------------------------------------------------------------------

// Input [batch, d1..dN, c] with c = 1 (real) or 2 (complex); the transform runs along `axis`
// (any dimension but the last; an attribute before opset 20, an input from it) and the output is
// complex, [..., 2]. inverse with onesided is the inverse of the one-sided transform of a real
// signal: the bins beyond the input's are their mirror's conjugates, and the output is real, [..., 1].
void dft(KernelContext& ctx) {
  require_float_input(ctx, 0, "input");
  const Tensor& x = ctx.input(0);
  const int rank = x.rank();
  if (rank < 2) ctx.fail(ErrorCode::InvalidArgument, "input must have rank >= 2, got " + shape_to_string(x.shape()));
  const std::int64_t comps = x.shape()[rank - 1];
  if (comps != 1 && comps != 2)
    ctx.fail(ErrorCode::InvalidArgument, "the last dimension of input must be 1 (real) or 2 (complex), got " +
                                             shape_to_string(x.shape()));
  const std::int64_t axis_given = ctx.opset() >= 20 ? (ctx.has_input(2) ? int_scalar(ctx, 2, "axis") : -2)
                                                    : ctx.node().attr_int("axis", 1);
  const int axis = normalize_axis(axis_given, rank, ctx);
  if (axis == rank - 1)
    ctx.fail(ErrorCode::InvalidArgument, "axis " + std::to_string(axis_given) + " is the real/imaginary dimension");
  const std::int64_t inverse = ctx.node().attr_int("inverse", 0);
  const std::int64_t onesided = ctx.node().attr_int("onesided", 0);
  if ((inverse != 0 && inverse != 1) || (onesided != 0 && onesided != 1))
    ctx.fail(ErrorCode::InvalidModel, "inverse and onesided must be 0 or 1");
  const bool real_inverse = inverse && onesided;
  // Conjugate symmetry, which makes half the bins redundant, holds only for real signals.
  if (onesided && !inverse && comps == 2) ctx.fail(ErrorCode::InvalidArgument, "onesided output needs a real input ([..., 1])");

  const std::int64_t len = x.shape()[axis];
  if (real_inverse && len < 1) ctx.fail(ErrorCode::InvalidArgument, "the one-sided spectrum is empty");
  const std::int64_t n = ctx.has_input(1) && ctx.input(1).numel() > 0 ? int_scalar(ctx, 1, "dft_length")
                         : real_inverse                               ? 2 * (len - 1)
                                                                      : len;
  check_length(n, ctx, "dft_length");
  const std::int64_t bins = onesided && !inverse ? n / 2 + 1 : n;
  const std::int64_t out_comps = real_inverse ? 1 : 2;
  std::int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= x.shape()[d];  // bounded: the input tensor exists
  for (int d = axis + 1; d < rank - 1; ++d) inner *= x.shape()[d];
  Shape out_shape = x.shape();
  out_shape[axis] = bins;
  out_shape[rank - 1] = out_comps;
  checked_mul(checked_mul(checked_mul(outer, inner, ctx, "output"), bins, ctx, "output"), 2, ctx, "output");
  check_work(outer * inner, n, ctx);

  const std::vector<double> xv = to_double_buffer(x, ctx);
  std::vector<double> yv(static_cast<std::size_t>(shape_numel(out_shape)));
  Transform tr(n, inverse != 0);
  std::vector<Cplx> row(static_cast<std::size_t>(n));
  // The signal's samples (or the one-sided spectrum's bins) that reach the transform: dft_length
  // truncates or zero-pads.
  const std::int64_t used = std::min(len, real_inverse ? n / 2 + 1 : n);
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t i = 0; i < inner; ++i) {
      std::fill(row.begin(), row.end(), Cplx(0, 0));
      for (std::int64_t j = 0; j < used; ++j) {
        const double* v = xv.data() + ((o * len + j) * inner + i) * comps;
        row[j] = Cplx(v[0], comps == 2 ? v[1] : 0.0);
        if (real_inverse && j > 0 && n - j > j) row[n - j] = std::conj(row[j]);
      }
      tr.run(row);
      for (std::int64_t k = 0; k < bins; ++k) {
        double* w = yv.data() + ((o * bins + k) * inner + i) * out_comps;
        w[0] = tr.out[k].real();
        if (!real_inverse) w[1] = tr.out[k].imag();
      }
    }
  }
  store_values(yv, ctx.allocate_output(0, x.dtype(), out_shape), ctx);
}

// ---- STFT --------------------------------------------------------------------------------

// Signal [batch, length, c]; frames of frame_length samples every frame_step samples, each
// multiplied by the window and transformed. Output [batch, frames, bins, 2].
void stft(KernelContext& ctx) {
  require_float_input(ctx, 0, "signal");
  const Tensor& x = ctx.input(0);
  if (x.rank() != 3 || (x.shape()[2] != 1 && x.shape()[2] != 2))
    ctx.fail(ErrorCode::InvalidArgument, "signal must have shape [batch, length, 1 or 2], got " + shape_to_string(x.shape()));
  const std::int64_t batch = x.shape()[0], len = x.shape()[1], comps = x.shape()[2];
  const std::int64_t step = int_scalar(ctx, 1, "frame_step");
  if (step <= 0) ctx.fail(ErrorCode::InvalidArgument, "frame_step must be positive, got " + std::to_string(step));
  const bool has_window = ctx.has_input(2);
  const bool has_length = ctx.has_input(3);
  if (!has_window && !has_length) ctx.fail(ErrorCode::InvalidModel, "one of window and frame_length must be given");
  std::vector<double> window;
  if (has_window) {
    require_float_input(ctx, 2, "window");
    if (ctx.input(2).rank() != 1)
      ctx.fail(ErrorCode::InvalidArgument, "window must have rank 1, got " + shape_to_string(ctx.input(2).shape()));
    window = to_double_buffer(ctx.input(2), ctx);
  }
  const std::int64_t n = has_length ? int_scalar(ctx, 3, "frame_length") : static_cast<std::int64_t>(window.size());
  check_length(n, ctx, "frame_length");
  if (has_window && static_cast<std::int64_t>(window.size()) != n)
    ctx.fail(ErrorCode::InvalidArgument, "window length " + std::to_string(window.size()) +
                                             " differs from frame_length " + std::to_string(n));
  if (n > len)
    ctx.fail(ErrorCode::InvalidArgument, "frame_length " + std::to_string(n) + " exceeds the signal length " +
                                             std::to_string(len));
  const std::int64_t onesided = ctx.node().attr_int("onesided", 1);
  if (onesided != 0 && onesided != 1) ctx.fail(ErrorCode::InvalidModel, "onesided must be 0 or 1");
  if (onesided && comps == 2) ctx.fail(ErrorCode::InvalidArgument, "onesided output needs a real signal ([..., 1])");
  const std::int64_t frames = (len - n) / step + 1;
  const std::int64_t bins = onesided ? n / 2 + 1 : n;
  const Shape out_shape{batch, frames, bins, 2};
  checked_mul(checked_mul(checked_mul(batch, frames, ctx, "output"), bins, ctx, "output"), 2, ctx, "output");
  check_work(batch * frames, n, ctx);

  const std::vector<double> xv = to_double_buffer(x, ctx);
  std::vector<double> yv(static_cast<std::size_t>(shape_numel(out_shape)));
  Transform tr(n, false);
  std::vector<Cplx> row(static_cast<std::size_t>(n));
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t f = 0; f < frames; ++f) {
      const double* s = xv.data() + (b * len + f * step) * comps;
      for (std::int64_t j = 0; j < n; ++j) {
        const double w = has_window ? window[j] : 1.0;
        row[j] = Cplx(s[j * comps] * w, comps == 2 ? s[j * comps + 1] * w : 0.0);
      }
      tr.run(row);
      double* out = yv.data() + (b * frames + f) * bins * 2;
      for (std::int64_t k = 0; k < bins; ++k) {
        out[2 * k] = tr.out[k].real();
        out[2 * k + 1] = tr.out[k].imag();
      }
    }
  }
  store_values(yv, ctx.allocate_output(0, x.dtype(), out_shape), ctx);
}

// ---- MelWeightMatrix ---------------------------------------------------------------------

double hz_to_mel(double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); }
double mel_to_hz(double mel) { return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0); }

// Triangular filters: num_mel_bins + 2 edges spaced evenly on the mel scale between the lower
// and upper edge, each mapped to a spectrogram bin; filter i rises from edge i to a peak of 1 at
// edge i+1 and falls back to 0 at edge i+2. Output [dft_length / 2 + 1, num_mel_bins].
void mel_weight_matrix(KernelContext& ctx) {
  const std::int64_t mels = int_scalar(ctx, 0, "num_mel_bins");
  const std::int64_t dft_length = int_scalar(ctx, 1, "dft_length");
  const std::int64_t rate = int_scalar(ctx, 2, "sample_rate");
  for (std::size_t i = 3; i < 5; ++i) require_float_input(ctx, i, i == 3 ? "lower_edge_hertz" : "upper_edge_hertz");
  const double lower = float_scalar(ctx, 3, "lower_edge_hertz");
  const double upper = float_scalar(ctx, 4, "upper_edge_hertz");
  if (mels <= 0 || dft_length <= 0 || rate <= 0)
    ctx.fail(ErrorCode::InvalidArgument, "num_mel_bins, dft_length and sample_rate must be positive");
  if (!(lower >= 0 && lower < upper && std::isfinite(upper)))
    ctx.fail(ErrorCode::InvalidArgument, "need 0 <= lower_edge_hertz < upper_edge_hertz, got " + std::to_string(lower) +
                                             " and " + std::to_string(upper));
  const DType out_type = output_datatype(ctx);
  const std::int64_t spec_bins = dft_length / 2 + 1;
  checked_mul(spec_bins, mels, ctx, "output");

  // The edges' spacing divides the mel range by num_mel_bins + 2 (not + 1), and bins are
  // floor((dft_length + 1) * hz / sample_rate): both as the ONNX reference defines them, so the
  // matrices match bit for bit in which bins are non-zero.
  const double mel_lo = hz_to_mel(lower), mel_hi = hz_to_mel(upper);
  const double mel_step = (mel_hi - mel_lo) / static_cast<double>(mels + 2);
  std::vector<std::int64_t> edge(static_cast<std::size_t>(mels + 2));
  for (std::int64_t i = 0; i < mels + 2; ++i) {
    const double hz = mel_to_hz(mel_lo + static_cast<double>(i) * mel_step);
    const double bin = std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(rate));
    // A band edge past the last spectrogram bin (upper_edge_hertz above the Nyquist rate) would
    // index outside the matrix.
    if (!(bin >= 0 && bin < static_cast<double>(spec_bins)))
      ctx.fail(ErrorCode::InvalidArgument, "upper_edge_hertz " + std::to_string(upper) +
                                               " maps beyond the last spectrogram bin for sample_rate " +
                                               std::to_string(rate) + " and dft_length " + std::to_string(dft_length));
    edge[i] = static_cast<std::int64_t>(bin);
  }
  std::vector<double> w(static_cast<std::size_t>(spec_bins * mels), 0.0);
  for (std::int64_t i = 0; i < mels; ++i) {
    const std::int64_t lo = edge[i], mid = edge[i + 1], hi = edge[i + 2];
    if (mid == lo) {
      w[mid * mels + i] = 1.0;
    } else {
      for (std::int64_t j = lo; j <= mid; ++j)
        w[j * mels + i] = static_cast<double>(j - lo) / static_cast<double>(mid - lo);
    }
    for (std::int64_t j = mid; j < hi; ++j) w[j * mels + i] = static_cast<double>(hi - j) / static_cast<double>(hi - mid);
  }
  store_values(w, ctx.allocate_output(0, out_type, {spec_bins, mels}), ctx);
}

}  // namespace

void register_signal(OpTable& t) {
  t.add("HannWindow", {hann_window, 1, 1, 17});
  t.add("HammingWindow", {hamming_window, 1, 1, 17});
  t.add("BlackmanWindow", {blackman_window, 1, 1, 17});
  t.add("DFT", {dft, 1, 3, 17});
  t.add("STFT", {stft, 2, 4, 17});
  t.add("MelWeightMatrix", {mel_weight_matrix, 5, 5, 17});
}

}  // namespace wpk::reference
