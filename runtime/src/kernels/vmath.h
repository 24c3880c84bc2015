/* Branch-free exp / erf / tanh that the compiler vectorizes (libm's are scalar calls, which
 * kept activations and softmax 2-3x slower than PyTorch's SIMD versions). Every branch is a
 * select, so a loop over them becomes vector code as wide as the build's instruction set
 * (runtime/Makefile: one build per x86-64 level, the widest the host runs picked at load
 * time). Worst errors over strided sweeps of all floats against libm in double
 * (runtime/tests/test_vmath.c checks them), with / without FMA: vm_expf 0.97 / 0.96 ulp,
 * vm_erff 1.05 / 1.12, vm_tanhf 1.31 / 1.31, vm_exp (double) 1.00 / 1.05; vm_exp2f 1.22,
 * vm_log2f 1.36, vm_log10f 1.78 (both); vm_sinhf and vm_coshf correctly rounded over the
 * sweep. Specials: NaN propagates, +-inf give the limits, underflow goes through the
 * subnormals to 0, overflow gives inf. */
#ifndef TPURT_VMATH_H
#define TPURT_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Every function of a file that includes this header may contract a*b+c to an FMA and may
 * assume FP exceptions are not observed (no-trapping-math lets selects of FP expressions
 * be if-converted, which vectorizing needs). As a pragma rather than a function attribute,
 * because GCC will not inline across differing optimize attributes. A file that defines
 * VMATH_NO_CONTRACT first keeps ISO C's contraction off (its other expressions round as
 * they did; these functions then round every step, in every build alike). */
#if defined(__GNUC__) && !defined(__clang__)
#ifdef VMATH_NO_CONTRACT
#pragma GCC optimize("no-trapping-math")
#else
#pragma GCC optimize("fp-contract=fast", "no-trapping-math")
#endif
#endif
#include "../internal.h"

static inline float vm_f32_of(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t vm_bits_f32(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline double vm_f64_of(uint64_t u) { double f; memcpy(&f, &u, 8); return f; }
static inline uint64_t vm_bits_f64(double f) { uint64_t u; memcpy(&u, &f, 8); return u; }

/* p * 2^n for |n| < 254, as two factors so that results in the subnormal range round once,
 * like libm's. */
static inline float vm_scale2f(float p, int32_t n) {
  int32_t n1 = n / 2, n2 = n - n1;
  return p * vm_f32_of((uint32_t)(n1 + 127) << 23) * vm_f32_of((uint32_t)(n2 + 127) << 23);
}

/* e^x = 2^n * e^r, |r| <= ln2/2 (Cephes' polynomial). */
static inline float vm_expf(float x) {
  x = x < -104.0f ? -104.0f : x; /* e^-104 rounds to 0; NaN passes both clamps */
  x = x > 89.0f ? 89.0f : x;     /* e^89 overflows to inf */
  float t = x * 1.44269504088896341f + 0x1.8p23f; /* round(x / ln2) in the low mantissa bits */
  float n = t - 0x1.8p23f;
  int32_t ni = (int32_t)(vm_bits_f32(t) - vm_bits_f32(0x1.8p23f));
  float r = x - n * 0.693359375f; /* ln2 split: n * hi is exact */
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  return vm_scale2f(p, ni);
}

/* The same reduction in double with a degree-13 Taylor polynomial (truncation < 2^-57). */
static inline double vm_exp(double x) {
  x = x < -746.0 ? -746.0 : x;
  x = x > 710.0 ? 710.0 : x;
  double t = x * 1.4426950408889634 + 0x1.8p52;
  double n = t - 0x1.8p52;
  int64_t ni = (int64_t)(vm_bits_f64(t) - vm_bits_f64(0x1.8p52));
  double r = x - n * 6.93147180369123816490e-01; /* fdlibm's ln2 hi/lo */
  r = r - n * 1.90821492927058770002e-10;
  double p = 1.0 / 6227020800;
  p = p * r + 1.0 / 479001600;
  p = p * r + 1.0 / 39916800;
  p = p * r + 1.0 / 3628800;
  p = p * r + 1.0 / 362880;
  p = p * r + 1.0 / 40320;
  p = p * r + 1.0 / 5040;
  p = p * r + 1.0 / 720;
  p = p * r + 1.0 / 120;
  p = p * r + 1.0 / 24;
  p = p * r + 1.0 / 6;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  int64_t n1 = ni / 2, n2 = ni - n1;
  return p * vm_f64_of((uint64_t)(n1 + 1023) << 52) * vm_f64_of((uint64_t)(n2 + 1023) << 52);
}

/* erf: |x| < 0.875: x + x * R(x^2); up to 3.95: 1 - e^{H(|x|) - x^2} (H fits log erfc + x^2);
 * beyond, erf rounds to +-1. Minimax-style fits made for these ranges. */
static inline float vm_erff(float x) {
  float a = fabsf(x), s = a * a;
  float p = 8.697155135e-05f;
  p = p * s - 8.215080015e-04f;
  p = p * s + 5.206981208e-03f;
  p = p * s - 2.686161920e-02f;
  p = p * s + 1.128373221e-01f;
  p = p * s - 3.761263490e-01f;
  p = p * s + 1.283791661e-01f;
  float small = a + a * p;
  float b = a > 3.95f ? 3.95f : a; /* NaN stays NaN */
  float q = 3.311837204e-08f;
  q = q * b + 9.152648204e-07f;
  q = q * b - 3.919781739e-05f;
  q = q * b + 5.595372641e-04f;
  q = q * b - 4.632187076e-03f;
  q = q * b + 2.613721415e-02f;
  q = q * b - 1.096682027e-01f;
  q = q * b + 3.677993715e-01f;
  q = q * b - 1.130039930e+00f;
  q = q * b + 2.769399434e-04f;
  float big = 1.0f - vm_expf(q - b * b);
  float r = a < 0.875f ? small : a > 3.95f ? 1.0f : big;
  return copysignf(r, x);
}

/* erf as PyTorch's vectorized CPU kernels compute it for gelu (Abramowitz and Stegun 7.1.26:
 * 1 - t P(t) e^{-x^2}, t = 1 / (1 + p|x|); absolute error below 1.5e-7, relative error
 * large only where gelu adds the result to 1): a division and one exp instead of
 * vm_erff's two polynomials and exp, and CPU's values to rounding. */
static inline float vm_erff_as(float x) {
  float a = fabsf(x), t = 1.0f / (0.3275911f * a + 1.0f);
  float r = 1.061405429f;
  r = r * t - 1.453152027f;
  r = r * t + 1.421413741f;
  r = r * t - 0.284496736f;
  r = r * t + 0.254829592f;
  float e = vm_expf(-(x * x));
  return copysignf(1.0f - e * t * r, x);
}

/* sinh and cosh from vm_exp in double: (e^|x| -+ e^-|x|) / 2 loses at most 2^-40 relative to
 * cancellation for |x| >= 2^-12, and sinh x rounds to x below that; float's overflow comes
 * from the final rounding (cosh 89 is finite though e^89 is not, in float). */
static inline float vm_sinhf(float x) {
  double e = vm_exp(fabs((double)x)), s = 0.5 * (e - 1.0 / e);
  float r = (float)copysign(s, (double)x);
  return fabsf(x) < 0x1p-12f ? x : r;
}
static inline float vm_coshf(float x) {
  double e = vm_exp(fabs((double)x));
  return (float)(0.5 * (e + 1.0 / e));
}

/* tanh: |x| < 0.625: x + x^3 P(x^2); else 1 - 2 / (e^{2|x|} + 1) (no cancellation there);
 * past 9.1 tanh rounds to +-1. */
static inline float vm_tanhf(float x) {
  float a = fabsf(x), s = a * a;
  float p = 2.300766297e-03f;
  p = p * s - 8.349276148e-03f;
  p = p * s + 2.176963910e-02f;
  p = p * s - 5.395913124e-02f;
  p = p * s + 1.333330125e-01f;
  p = p * s - 3.333333433e-01f;
  float small = a + a * (s * p);
  float b = a > 9.1f ? 9.1f : a;
  float big = 1.0f - 2.0f / (vm_expf(2.0f * b) + 1.0f);
  return copysignf(a < 0.625f ? small : big, x);
}

/* log: x = 2^e * m with m in [sqrt(1/2), sqrt(2)), log m = f - f^2/2 + f^3 P(f), f = m - 1
 * (Cephes' logf polynomial); subnormals are scaled into the normal range first. vm_log_parts
 * gives e (as a float), f, f^2 and f^3 P(f), which log, log2 and log10 combine each their way. */
typedef struct {
  float e, f, z, t;
} vm_log_parts;
static inline vm_log_parts vm_log_split(float x) {
  int sub = x < 0x1p-126f;
  float xs = sub ? x * 0x1p23f : x;
  uint32_t u = vm_bits_f32(xs);
  int32_t e = (int32_t)(u >> 23) - 127 - (sub ? 23 : 0);
  float m = vm_f32_of((u & 0x7fffffu) | 0x3f800000u);
  int up = m > 1.41421356f;
  m = up ? m * 0.5f : m;
  e += up;
  float f = m - 1.0f, z = f * f;
  float p = 7.0376836292e-2f;
  p = p * f - 1.1514610310e-1f;
  p = p * f + 1.1676998740e-1f;
  p = p * f - 1.2420140846e-1f;
  p = p * f + 1.4249322787e-1f;
  p = p * f - 1.6668057665e-1f;
  p = p * f + 2.0000714765e-1f;
  p = p * f - 2.4999993993e-1f;
  p = p * f + 3.3333331174e-1f;
  return (vm_log_parts){(float)e, f, z, f * z * p};
}
/* log's specials on top of r, the formula's value for finite positive x */
static inline float vm_log_specials(float x, float r) {
  r = x == INFINITY ? x : r;
  r = x == 0 ? -INFINITY : r;
  r = x < 0 ? NAN : r; /* selects in turn: `x < 0 || x != x` kept vm_logf(vm_expf(x)) scalar */
  return x != x ? NAN : r;
}
static inline float vm_logf(float x) {
  vm_log_parts q = vm_log_split(x);
  float y = q.t + q.e * -2.12194440e-4f; /* ln2 split: e * hi below is exact */
  y = y - 0.5f * q.z;
  float r = q.f + y;
  r = r + q.e * 0.693359375f;
  return vm_log_specials(x, r);
}
/* log2 and log10 as Cephes' log2f and log10f combine the parts: the small terms first, log2(e)
 * as 1 + 0.4427 and the constants split so that the large products are exact. */
static inline float vm_log2f(float x) {
  vm_log_parts q = vm_log_split(x);
  float y = q.t - 0.5f * q.z;
  float r = y * 0.44269504088896340736f;
  r = r + q.f * 0.44269504088896340736f;
  r = r + y;
  r = r + q.f;
  return vm_log_specials(x, r + q.e);
}
static inline float vm_log10f(float x) {
  vm_log_parts q = vm_log_split(x);
  float y = q.t - 0.5f * q.z;
  float r = (q.f + y) * 7.00731903251827651129e-4f;
  r = r + y * 4.3359375e-1f;
  r = r + q.f * 4.3359375e-1f;
  r = r + q.e * 2.48745663981195213739e-4f;
  return vm_log_specials(x, r + q.e * 3.0078125e-1f);
}

/* 2^x = 2^n * 2^r, n = round(x), |r| <= 1/2 exact (Cephes' exp2f polynomial). */
static inline float vm_exp2f(float x) {
  x = x < -151.0f ? -151.0f : x; /* 2^-151 rounds to 0; NaN passes both clamps */
  x = x > 129.0f ? 129.0f : x;   /* 2^129 overflows to inf */
  float t = x + 0x1.8p23f;
  float n = t - 0x1.8p23f;
  int32_t ni = (int32_t)(vm_bits_f32(t) - vm_bits_f32(0x1.8p23f));
  float r = x - n;
  float p = 1.535336188319500e-4f;
  p = p * r + 1.339887440266574e-3f;
  p = p * r + 9.618437357674640e-3f;
  p = p * r + 5.550332471162809e-2f;
  p = p * r + 2.402264791363012e-1f;
  p = p * r + 6.931472028550421e-1f;
  p = p * r + 1.0f;
  return vm_scale2f(p, ni);
}

/* e^x - 1: |x| < 1: x + x^2 P(x), P the Taylor series to x^12 / 12! (truncation below 2^-31);
 * else vm_expf(x) - 1. -0 stays -0. */
static inline float vm_expm1f(float x) {
  float p = 1.0f / 479001600;
  p = p * x + 1.0f / 39916800;
  p = p * x + 1.0f / 3628800;
  p = p * x + 1.0f / 362880;
  p = p * x + 1.0f / 40320;
  p = p * x + 1.0f / 5040;
  p = p * x + 1.0f / 720;
  p = p * x + 1.0f / 120;
  p = p * x + 1.0f / 24;
  p = p * x + 1.0f / 6;
  p = p * x + 0.5f;
  float small = x + x * x * p, big = vm_expf(x) - 1.0f;
  return x == 0 ? x : fabsf(x) < 1.0f ? small : big;
}

/* log(1 + x): log u for u = 1 + x rounded, corrected by (x - (u - 1)) / u, the part of x the
 * rounding of u lost (Goldberg); x itself where u rounds to 1. */
static inline float vm_log1pf(float x) {
  float u = 1.0f + x, r = vm_logf(u) + (x - (u - 1.0f)) / u;
  r = u == 1.0f ? x : r;
  r = u == 0 ? -INFINITY : r;
  return x == INFINITY ? x : r;
}

/* fmod of floats where |a| < 2^28 |b| and b is finite (vm_fmodf_in_range): the quotient in
 * double is then far enough from an integer that truncating it gives trunc(a / b) exactly,
 * q * b (at most 28 + 24 bits) and a - q * b (the result, a float) are exact in double, so
 * the result is fmodf's exact value. Other lanes (b = 0, inf, NaN, huge quotients) are for
 * libm. */
static inline int vm_fmodf_in_range(float a, float b) {
  return (fabsf(b) < INFINITY) & (fabsf(a) < 0x1p28f * fabsf(b));
}
static inline float vm_fmodf(float a, float b) {
  double q = trunc((double)a / (double)b);
  return copysignf(fabsf((float)((double)a - q * (double)b)), a);
}

/* sin / cos of float x: reduced by pi/2 in double (fdlibm's 33 + 53 bit split of pi/2, exact
 * for |x| < 2^20), then FreeBSD's float kernels in double on |r| <= pi/4. Past 2^20 (and for
 * inf and NaN) vm_trig_in_range is false: callers compute those lanes with libm. */
static inline int vm_trig_in_range(float x) { return fabsf(x) < 0x1p20f; }
static inline double vm_sin_kernel(double r) {
  double z = r * r, w = z * z, q = -0x1a00f9e2cae774.0p-65 + z * 0x16cd878c3b46a7.0p-71, s = z * r;
  return (r + s * (-0x15555554cbac77.0p-55 + z * 0x111110896efbb2.0p-59)) + s * w * q;
}
static inline double vm_cos_kernel(double r) {
  double z = r * r, w = z * z, q = -0x16c087e80f1e27.0p-62 + z * 0x199342e0ee5069.0p-68;
  return ((1.0 + z * -0x1ffffffd0c5e81.0p-54) + w * 0x155553e1053a42.0p-57) + (w * z) * q;
}
/* quadrant n of x (mod 4) and x - n * pi/2 */
static inline double vm_rem_pio2(float x, int32_t* n) {
  double xd = vm_trig_in_range(x) ? (double)x : 0;
  double k = xd * 6.36619772367581382433e-01 + 0x1.8p52;
  *n = (int32_t)(vm_bits_f64(k) & 3);
  k = k - 0x1.8p52;
  return (xd - k * 1.57079632673412561417e+00) - k * 6.07710050650619224932e-11;
}
static inline float vm_sinf(float x) {
  int32_t n;
  double r = vm_rem_pio2(x, &n), s = vm_sin_kernel(r), c = vm_cos_kernel(r);
  double v = n & 1 ? c : s;
  float y = (float)(n & 2 ? -v : v);
  return fabsf(x) < 0x1p-12f ? x : y; /* sin x rounds to x there (and keeps -0) */
}
static inline float vm_cosf(float x) {
  int32_t n;
  double r = vm_rem_pio2(x, &n), s = vm_sin_kernel(r), c = vm_cos_kernel(r);
  double v = n & 1 ? s : c;
  return (float)((n + 1) & 2 ? -v : v);
}

#endif /* TPURT_VMATH_H */
