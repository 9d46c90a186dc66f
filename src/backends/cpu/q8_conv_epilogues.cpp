#include "backends/cpu/q8_conv_epilogues.hpp"

#include <cstring>

#include "backends/cpu/avx2_tile.hpp"

namespace wpk::cpu {

std::vector<float> padded_to_blocks(std::vector<float> values) {
  values.resize((values.size() + 15) / 16 * 16, 0.0f);
  return values;
}

#ifdef WPK_AVX2_KERNELS
namespace {
using namespace avx2;

// 16 int32 lanes (each already within the codes' range) as 16 bytes.
inline WPK_AVX2 __m128i pack_codes(__m256i lo, __m256i hi, bool is_signed) {
  const __m128i a = _mm_packs_epi32(_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1));
  const __m128i b = _mm_packs_epi32(_mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1));
  return is_signed ? _mm_packs_epi16(a, b) : _mm_packus_epi16(a, b);
}

// 16 codes at p (cols of them; the rest read as the zero point) as floats less the zero point.
inline WPK_AVX2 void load_codes(const void* p, int cols, const CodeOperand& c, __m256& lo, __m256& hi) {
  alignas(16) std::uint8_t bytes[16];
  const auto* src = static_cast<const std::uint8_t*>(p);
  if (cols == 16) std::memcpy(bytes, src, 16);
  else {
    std::memset(bytes, static_cast<std::uint8_t>(c.zero), 16);
    std::memcpy(bytes, src, static_cast<std::size_t>(cols));
  }
  const __m128i v = _mm_load_si128(reinterpret_cast<const __m128i*>(bytes));
  const __m256i w0 = c.is_signed ? _mm256_cvtepi8_epi32(v) : _mm256_cvtepu8_epi32(v);
  const __m256i w1 = c.is_signed ? _mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)) : _mm256_cvtepu8_epi32(_mm_srli_si128(v, 8));
  const __m256 z = _mm256_set1_ps(static_cast<float>(c.zero));
  lo = _mm256_sub_ps(_mm256_cvtepi32_ps(w0), z);
  hi = _mm256_sub_ps(_mm256_cvtepi32_ps(w1), z);
}

inline WPK_AVX2 void store_codes(void* p, int cols, __m128i codes) {
  if (cols == 16) _mm_storeu_si128(static_cast<__m128i*>(p), codes);
  else {
    alignas(16) std::uint8_t bytes[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(bytes), codes);
    std::memcpy(p, bytes, static_cast<std::size_t>(cols));
  }
}

// Four sums requantized as the reference does: in double, ties to even, then the zero point and
// saturation to the codes' range.
inline WPK_AVX2 __m128i requantize4(const std::int32_t* sums, const float* mult, const CodeOperand& c) {
  const double lo = c.is_signed ? -128.0 : 0.0, hi = c.is_signed ? 127.0 : 255.0;
  __m256d v = _mm256_mul_pd(_mm256_cvtepi32_pd(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sums))),
                            _mm256_cvtps_pd(_mm_loadu_ps(mult)));
  v = _mm256_round_pd(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  v = _mm256_add_pd(v, _mm256_set1_pd(static_cast<double>(c.zero)));
  v = _mm256_min_pd(_mm256_max_pd(v, _mm256_set1_pd(lo)), _mm256_set1_pd(hi));
  return _mm256_cvtpd_epi32(v);
}

// QLinearAdd's steps (quantize_kernel.cpp's qadd8) on 8 conv codes c (with their zero point) and
// residual values r (less theirs): two products, their sum, the division by y's scale, each
// rounded in float32; then y's rounding, zero point and saturation.
inline WPK_AVX2 __m256i add_codes(__m256i c, __m256 r, const CodeOperand& conv, const CodeSum& sum, const CodeOperand& out) {
  const __m256 a = _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(c), _mm256_set1_ps(static_cast<float>(conv.zero))),
                                 _mm256_set1_ps(sum.c_scale));
  __m256 b = _mm256_mul_ps(r, _mm256_set1_ps(sum.r_scale));
  __asm__("" : "+x"(b));  // rounded before the sum: no FMA contraction
  __m256 v = _mm256_div_ps(_mm256_add_ps(a, b), _mm256_set1_ps(sum.y_scale));
  v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));  // NaN -> 0: the zero point
  v = _mm256_add_ps(v, _mm256_set1_ps(static_cast<float>(out.zero)));
  const float lo = out.is_signed ? -128.f : 0.f, hi = out.is_signed ? 127.f : 255.f;
  return _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(lo)), _mm256_set1_ps(hi)));
}

}  // namespace

WPK_AVX2 void ScaledFloatEpilogue::finish(const std::int32_t* sums, int rows, std::int64_t pixel, std::int64_t channel,
                                          int cols) const {
  const __m256i masks[2] = {lane_mask(cols), lane_mask(cols - 8)};
  const bool full = cols == 16;
  Vecs<2> bias = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  if (e_.bias) {
    bias[0] = _mm256_maskload_ps(e_.bias + channel, masks[0]);
    bias[1] = _mm256_maskload_ps(e_.bias + channel + 8, masks[1]);
  }
  const __m256 s0 = _mm256_loadu_ps(scale_ + channel), s1 = _mm256_loadu_ps(scale_ + channel + 8);
  const __m256 lo = activation_floor(e_), hi = _mm256_set1_ps(e_.hi);
  for (int r = 0; r < rows; ++r) {
    const std::int32_t* row = sums + 16 * r;
    Vecs<2> v = {_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row))), s0),
                 _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 8))), s1)};
    // The products rounded before the bias is added, as the definition does: without this the
    // compiler may contract product and sum into one FMA, one rounding instead of two.
    __asm__("" : "+x"(v[0]), "+x"(v[1]));
    store_results<2>(y_ + (pixel + r) * ldy_ + channel, v, bias, masks, full, e_, lo, hi);
  }
}

WPK_AVX2 void RequantizeEpilogue::finish(const std::int32_t* sums, int rows, std::int64_t pixel, std::int64_t channel,
                                         int cols) const {
  for (int r = 0; r < rows; ++r) {
    const std::int32_t* row = sums + 16 * r;
    const float* mult = mult_ + channel;
    const __m256i c0 = _mm256_set_m128i(requantize4(row + 4, mult + 4, conv_), requantize4(row, mult, conv_));
    const __m256i c1 = _mm256_set_m128i(requantize4(row + 12, mult + 12, conv_), requantize4(row + 8, mult + 8, conv_));
    const std::int64_t at = (pixel + r) * oc_ + channel;
    if (!residual_.codes) {
      store_codes(static_cast<std::uint8_t*>(y_) + at, cols, pack_codes(c0, c1, out_.is_signed));
      continue;
    }
    __m256 r0, r1;
    load_codes(static_cast<const std::uint8_t*>(residual_.codes) + at, cols, residual_.operand, r0, r1);
    const __m256i y0 = add_codes(c0, r0, conv_, residual_.sum, out_), y1 = add_codes(c1, r1, conv_, residual_.sum, out_);
    store_codes(static_cast<std::uint8_t*>(y_) + at, cols, pack_codes(y0, y1, out_.is_signed));
  }
}

#else
void ScaledFloatEpilogue::finish(const std::int32_t*, int, std::int64_t, std::int64_t, int) const {}
void RequantizeEpilogue::finish(const std::int32_t*, int, std::int64_t, std::int64_t, int) const {}
#endif

}  // namespace wpk::cpu
