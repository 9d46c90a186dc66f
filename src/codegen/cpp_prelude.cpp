// The vector helpers each target's generated source starts with (cpp_printer.hpp): loads and
// stores (whole, masked to the first n lanes, strided), arithmetic, and exp/sigmoid/tanh as
// polynomials after range reduction (exp's Taylor terms to the 7th power on |r| <= ln2/2: under
// 1e-8 relative before rounding), with NaN, infinities and underflow as std::exp gives them.
#include <string>

#include "codegen/cpp_printer.hpp"

namespace wpk::codegen {

const char* cpp_prelude(CpuTarget target);

namespace {

const char kCommon[] = R"(#include <cmath>
#include <cstdint>
static inline float s_relu(float a) { return a > 0.0f ? a : 0.0f; }
static inline float s_max(float a, float b) { return a > b ? a : b; }
static inline float s_min(float a, float b) { return a < b ? a : b; }
static inline float s_sigmoid(float a) { return 1.0f / (1.0f + std::exp(-a)); }
static inline float s_erf(float a) { return std::erf(a); }
)";

const char kScalarTail[] = R"(static inline V v_erf(V a) { return std::erf(a); }
)";

// sigmoid on vectors, from e = e^-|a| (it cannot overflow): 1 / (1 + e) for a >= 0 and e / (1 + e)
// for a < 0 (no 1 - s to cancel). e^-|a| as v_exp takes it but with a degree-6 polynomial fitted
// for relative error on |r| <= ln2/2 (the one wpk's hand-written AVX2 kernels use) and 2^n from the
// rounding constant's bits; no clamps or blends for infinities, which e^-|a| never reaches. Past
// |a| = 87.3, where e would leave float's normal range, e is 0: exactly 1 and 0, as the library's
// sigmoid gives from 88.7 on. NaN stays NaN (v_min and the arithmetic carry it).
// erf on vectors, for GELU's exact form in product epilogues and chains. Below |x| = 0.5 the odd
// Taylor series to x^13 (relative error under 1e-8 there, where the other form cancels); above, the
// rational-exponential fit 1 - t (a1 + t (a2 + ...)) exp(-x^2), t = 1 / (1 + p |x|), absolute
// error under 1.5e-7 (the classic handbook approximation), the sign restored. Infinities give
// +-1, NaN stays NaN. (A reciprocal estimate in place of the division loses the bits the fit
// needs near 0.5.)
const char kVectorTail[] = R"(static inline V v_sigmoid(V a) {
  const V x = v_abs(a), one = v_set1(1.0f), magic = v_set1(12583039.0f);
  const V y = v_neg(v_min(v_set1(87.3f), x));
  const V t = v_fma(y, v_set1(1.44269504f), magic);
  const V n = v_sub(t, magic);
  V r = v_fma(n, v_set1(-0.693145752f), y);
  r = v_fma(n, v_set1(-1.42860677e-6f), r);
  V p = v_set1(1.37527345e-3f);
  p = v_fma(p, r, v_set1(8.36891215e-3f));
  p = v_fma(p, r, v_set1(4.16695103e-2f));
  p = v_fma(p, r, v_set1(0.166665182f));
  p = v_fma(p, r, v_set1(0.499999881f));
  p = v_fma(p, r, one);
  p = v_fma(p, r, one);
  const V e = v_below(v_neg(x), -87.3f, v_set1(0.0f), v_mul(p, v_pow2_bits(t)));
  const V s = v_div(one, v_add(one, e));
  return v_if_negative(a, v_mul(e, s), s);
}
static inline V v_erf(V x) {
  const V a = v_abs(x), one = v_set1(1.0f), x2 = v_mul(x, x);
  V q = v_set1(1.0f / 9360);
  q = v_fma(q, x2, v_set1(-1.0f / 1320));
  q = v_fma(q, x2, v_set1(1.0f / 216));
  q = v_fma(q, x2, v_set1(-1.0f / 42));
  q = v_fma(q, x2, v_set1(1.0f / 10));
  q = v_fma(q, x2, v_set1(-1.0f / 3));
  q = v_fma(q, x2, one);
  const V small = v_mul(v_mul(x, q), v_set1(1.12837917f));
  const V t = v_div(one, v_fma(v_set1(0.3275911f), a, one));
  V p = v_set1(1.061405429f);
  p = v_fma(p, t, v_set1(-1.453152027f));
  p = v_fma(p, t, v_set1(1.421413741f));
  p = v_fma(p, t, v_set1(-0.284496736f));
  p = v_fma(p, t, v_set1(0.254829592f));
  const V large = v_copysign(v_sub(one, v_mul(v_mul(p, t), v_exp(v_neg(x2)))), x);
  return v_below(a, 0.5f, small, large);
}
)";

const char kScalar[] = R"(typedef float V;
static const int W = 1;
static inline V v_load(const float* p) { return *p; }
static inline V v_load_n(const float* p, int) { return *p; }
static inline V v_load_or(const float* p, std::int64_t n, float fill) { return n > 0 ? *p : fill; }
static inline void v_store(float* p, V v) { *p = v; }
static inline void v_store_n(float* p, V v, int) { *p = v; }
static inline V v_set1(float x) { return x; }
static inline V v_gather_n(const float* p, std::int64_t, int) { return *p; }
static inline V v_add(V a, V b) { return a + b; }
static inline V v_sub(V a, V b) { return a - b; }
static inline V v_mul(V a, V b) { return a * b; }
static inline V v_div(V a, V b) { return a / b; }
static inline V v_max(V a, V b) { return s_max(a, b); }
static inline V v_min(V a, V b) { return s_min(a, b); }
static inline V v_fma(V a, V b, V c) { return a * b + c; }
static inline V v_neg(V a) { return -a; }
static inline V v_abs(V a) { return std::fabs(a); }
static inline V v_relu(V a) { return s_relu(a); }
static inline V v_sqrt(V a) { return std::sqrt(a); }
static inline V v_exp(V a) { return std::exp(a); }
static inline V v_sigmoid(V a) { return s_sigmoid(a); }
static inline V v_tanh(V a) { return std::tanh(a); }
)";

const char kAvx2[] = R"(#include <immintrin.h>
typedef __m256 V;
static const int W = 8;
static inline __m256i v_mask(int n) { return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)); }
static inline V v_load(const float* p) { return _mm256_loadu_ps(p); }
static inline V v_load_n(const float* p, int n) { return _mm256_maskload_ps(p, v_mask(n)); }
// Lanes [0, n) from p, `fill` in the others (n may lie outside [0, 8]); reads no memory past them.
static inline V v_load_or(const float* p, std::int64_t n, float fill) {
  const __m256i m = v_mask(static_cast<int>(n < 0 ? 0 : n > 8 ? 8 : n));
  return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}
static inline void v_store(float* p, V v) { _mm256_storeu_ps(p, v); }
static inline void v_store_n(float* p, V v, int n) { _mm256_maskstore_ps(p, v_mask(n), v); }
static inline V v_set1(float x) { return _mm256_set1_ps(x); }
static inline V v_gather_n(const float* p, std::int64_t stride, int n) {
  const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)stride));
  return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), p, idx, _mm256_castsi256_ps(v_mask(n)), 4);
}
static inline V v_add(V a, V b) { return _mm256_add_ps(a, b); }
static inline V v_sub(V a, V b) { return _mm256_sub_ps(a, b); }
static inline V v_mul(V a, V b) { return _mm256_mul_ps(a, b); }
static inline V v_div(V a, V b) { return _mm256_div_ps(a, b); }
// a > b ? a : b, as the scalar s_max (and the reference) decide it, NaN included: MAXPS returns
// its second operand unless the first is greater (equal, unordered), and MINPS likewise.
static inline V v_max(V a, V b) { return _mm256_max_ps(a, b); }
static inline V v_min(V a, V b) { return _mm256_min_ps(a, b); }
static inline V v_fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
static inline V v_neg(V a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
static inline V v_abs(V a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
static inline V v_copysign(V m, V s) { const V sign = _mm256_set1_ps(-0.0f); return _mm256_or_ps(_mm256_andnot_ps(sign, m), _mm256_and_ps(sign, s)); }
// `lo` where a < limit, else `hi` (NaN: hi).
static inline V v_below(V a, float limit, V lo, V hi) { return _mm256_blendv_ps(hi, lo, _mm256_cmp_ps(a, _mm256_set1_ps(limit), _CMP_LT_OQ)); }
static inline V v_relu(V a) { return v_max(a, _mm256_setzero_ps()); }
static inline V v_sqrt(V a) { return _mm256_sqrt_ps(a); }
static inline V v_exp(V x) {
  const V hi = _mm256_set1_ps(88.72283f), lo = _mm256_set1_ps(-87.33654f);
  const V c = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  const V n = _mm256_round_ps(_mm256_mul_ps(c, _mm256_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  V r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145752f), c);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860677e-6f), r);
@EXP_POLYNOMIAL@
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  V y = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
  y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}
// 2^n for t = n + 1.5 * 2^23 + 127 (n + 127 in [1, 254] in t's low mantissa bits): those bits
// shifted into the exponent field.
static inline V v_pow2_bits(V t) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(t), 23)); }
// neg where a's sign bit is set (-0.0 and negative NaNs too), else pos.
static inline V v_if_negative(V a, V neg, V pos) { return _mm256_blendv_ps(pos, neg, a); }
static inline V v_tanh(V x) {
  const V a = v_abs(x), one = _mm256_set1_ps(1.0f);
  const V big = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(v_exp(_mm256_add_ps(a, a)), one)));
  const V a2 = _mm256_mul_ps(a, a);
  V p = _mm256_set1_ps(-17.0f / 315);
  p = _mm256_fmadd_ps(p, a2, _mm256_set1_ps(2.0f / 15));
  p = _mm256_fmadd_ps(p, a2, _mm256_set1_ps(-1.0f / 3));
  const V small = _mm256_fmadd_ps(_mm256_mul_ps(p, a2), a, a);
  const V t = _mm256_blendv_ps(big, small, _mm256_cmp_ps(a, _mm256_set1_ps(0.0625f), _CMP_LT_OQ));
  return _mm256_or_ps(t, _mm256_and_ps(x, _mm256_set1_ps(-0.0f)));
}
)";

const char kAvx512[] = R"(#include <immintrin.h>
typedef __m512 V;
static const int W = 16;
static inline __mmask16 v_mask(int n) { return (__mmask16)((1u << n) - 1u); }
static inline V v_load(const float* p) { return _mm512_loadu_ps(p); }
static inline V v_load_n(const float* p, int n) { return _mm512_maskz_loadu_ps(v_mask(n), p); }
static inline V v_load_or(const float* p, std::int64_t n, float fill) {
  return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), v_mask(static_cast<int>(n < 0 ? 0 : n > 16 ? 16 : n)), p);
}
static inline void v_store(float* p, V v) { _mm512_storeu_ps(p, v); }
static inline void v_store_n(float* p, V v, int n) { _mm512_mask_storeu_ps(p, v_mask(n), v); }
static inline V v_set1(float x) { return _mm512_set1_ps(x); }
static inline V v_gather_n(const float* p, std::int64_t stride, int n) {
  const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32((int)stride));
  return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), v_mask(n), idx, p, 4);
}
static inline V v_add(V a, V b) { return _mm512_add_ps(a, b); }
static inline V v_sub(V a, V b) { return _mm512_sub_ps(a, b); }
static inline V v_mul(V a, V b) { return _mm512_mul_ps(a, b); }
static inline V v_div(V a, V b) { return _mm512_div_ps(a, b); }
// a > b ? a : b, as the scalar s_max (and the reference) decide it, NaN included (see the AVX2 ones).
static inline V v_max(V a, V b) { return _mm512_max_ps(a, b); }
static inline V v_min(V a, V b) { return _mm512_min_ps(a, b); }
static inline V v_fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
static inline V v_neg(V a) { return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32((int)0x80000000u))); }
static inline V v_abs(V a) { return _mm512_abs_ps(a); }
static inline V v_below(V a, float limit, V lo, V hi) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, _mm512_set1_ps(limit), _CMP_LT_OQ), hi, lo); }
static inline V v_copysign(V m, V s) {
  const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_andnot_si512(sign, _mm512_castps_si512(m)), _mm512_and_si512(sign, _mm512_castps_si512(s))));
}
static inline V v_relu(V a) { return v_max(a, _mm512_setzero_ps()); }
static inline V v_sqrt(V a) { return _mm512_sqrt_ps(a); }
static inline V v_exp(V x) {
  // Clamped where 2^n is already infinite or zero: scalef then gives inf and 0 as exp does.
  const V c = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(89.0f));
  const V n = _mm512_roundscale_ps(_mm512_mul_ps(c, _mm512_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  V r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145752f), c);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860677e-6f), r);
@EXP_POLYNOMIAL@
  const V y = _mm512_scalef_ps(p, n);
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
}
static inline V v_pow2_bits(V t) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(t), 23)); }
static inline V v_if_negative(V a, V neg, V pos) {
  return _mm512_mask_blend_ps(_mm512_cmp_epi32_mask(_mm512_castps_si512(a), _mm512_setzero_si512(), _MM_CMPINT_LT), pos, neg);
}
static inline V v_tanh(V x) {
  const V a = v_abs(x), one = _mm512_set1_ps(1.0f);
  const V big = _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(v_exp(_mm512_add_ps(a, a)), one)));
  const V a2 = _mm512_mul_ps(a, a);
  V p = _mm512_set1_ps(-17.0f / 315);
  p = _mm512_fmadd_ps(p, a2, _mm512_set1_ps(2.0f / 15));
  p = _mm512_fmadd_ps(p, a2, _mm512_set1_ps(-1.0f / 3));
  const V small = _mm512_fmadd_ps(_mm512_mul_ps(p, a2), a, a);
  const V t = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, _mm512_set1_ps(0.0625f), _CMP_LT_OQ), big, small);
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(t),
                                             _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u))));
}
)";

// The Taylor polynomial of exp on the reduced argument r, in Horner form, for the intrinsics
// with this prefix ("_mm256", "_mm512"), replacing the marker in a prelude.
std::string with_exp_polynomial(std::string prelude, const std::string& prefix) {
  std::string lines = "  V p = " + prefix + "_set1_ps(1.0f / 5040);\n";
  for (const char* c : {"1.0f / 720", "1.0f / 120", "1.0f / 24", "1.0f / 6", "0.5f", "1.0f", "1.0f"})
    lines += "  p = " + prefix + "_fmadd_ps(p, r, " + prefix + "_set1_ps(" + c + "));\n";
  const std::string marker = "@EXP_POLYNOMIAL@\n";
  return prelude.replace(prelude.find(marker), marker.size(), lines);
}

}  // namespace

const char* cpp_prelude(CpuTarget target) {
  static const std::string scalar = std::string(kCommon) + kScalar + kScalarTail,
                           avx2 = with_exp_polynomial(std::string(kCommon) + kAvx2, "_mm256") + kVectorTail,
                           avx512 = with_exp_polynomial(std::string(kCommon) + kAvx512, "_mm512") + kVectorTail;
  switch (target) {
    case CpuTarget::Avx2: return avx2.c_str();
    case CpuTarget::Avx512: return avx512.c_str();
    case CpuTarget::Scalar: break;
  }
  return scalar.c_str();
}

}  // namespace wpk::codegen
