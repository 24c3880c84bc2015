/* complex64 arithmetic with c10::complex<float>'s semantics, on C's float _Complex (the same
 * layout as tpurt_c64 and c10::complex<float>). Products and quotients are written out
 * because C's operators follow Annex G (inf/NaN recovery in __mulsc3 / __divsc3), which
 * c10 does not; the transcendental functions are glibc's, which is what std::exp etc. of
 * std::complex<float> call in a libstdc++ build of PyTorch. */
#ifndef TPURT_KERNELS_COMPLEX_MATH_H
#define TPURT_KERNELS_COMPLEX_MATH_H

#include "cmplx.h"
#include <math.h>

typedef float _Complex cx_t;

static inline cx_t cx(float re, float im) { return CMPLXF(re, im); }

/* c10: (ac - bd) + (ad + bc)i, no recovery of NaN from inf operands */
static inline cx_t cx_mul(cx_t x, cx_t y) {
  float a = crealf(x), b = cimagf(x), c = crealf(y), d = cimagf(y);
  return cx(a * c - b * d, a * d + b * c);
}

/* x * x with the real part as (a - b)(a + b): a^2 - b^2 overflows to inf - inf = NaN where
 * the exact square is a finite-looking -inf + inf i (|a| < |b|, both near sqrt(FLT_MAX)),
 * and loses digits to cancellation when |a| ~ |b|. Non-finite inputs give what cx_mul gives. */
static inline cx_t cx_square(cx_t x) {
  float a = crealf(x), b = cimagf(x);
  return cx((a - b) * (a + b), 2 * a * b);
}

/* c10::complex::operator/=: numpy's scaled division (no overflow for large divisors) */
static inline cx_t cx_div(cx_t x, cx_t y) {
  float a = crealf(x), b = cimagf(x), c = crealf(y), d = cimagf(y);
  float ac = fabsf(c), ad = fabsf(d);
  if (ac >= ad) {
    if (ac == 0 && ad == 0) return cx(a / ac, b / ad);
    float rat = d / c, scl = 1.0f / (c + d * rat);
    return cx((a + b * rat) * scl, (b - a * rat) * scl);
  }
  float rat = c / d, scl = 1.0f / (d + c * rat);
  return cx((a * rat + b) * scl, (b * rat - a) * scl);
}

/* complex times real, componentwise (c10's complex<T> * T) */
static inline cx_t cx_scale(cx_t x, float s) { return cx(crealf(x) * s, cimagf(x) * s); }

/* c10_complex_math::log1p, CPU branch (numpy's): log(u) * z / (u - 1) with u = 1 + z */
static inline cx_t cx_log1p(cx_t z) {
  cx_t u = cx(crealf(z) + 1.0f, cimagf(z));
  if (crealf(u) == 1.0f && cimagf(u) == 0.0f) return z;
  cx_t lu = clogf(u), um1 = cx(crealf(u) - 1.0f, cimagf(u));
  if (crealf(um1) == crealf(z) && cimagf(um1) == cimagf(z)) return lu;
  return cx_mul(lu, cx_div(z, um1));
}

/* c10_complex_math::expm1: (expm1(x) cos y - 2 sin^2(y/2)) + i e^x sin y */
static inline cx_t cx_expm1(cx_t z) {
  float x = crealf(z), y = cimagf(z), a = sinf(y / 2);
  return cx(expm1f(x) * cosf(y) - 2.0f * a * a, expf(x) * sinf(y));
}

/* log10, log2: log(z) with both parts divided by a real constant (ATen's vectorized
 * kernels; c10's complex division would turn log(0)'s zero imaginary part into NaN) */
static inline cx_t cx_log10(cx_t z) {
  cx_t l = clogf(z);
  float k = logf(10.0f);
  return cx(crealf(l) / k, cimagf(l) / k);
}
static inline cx_t cx_log2(cx_t z) {
  cx_t l = clogf(z);
  float k = logf(2.0f);
  return cx(crealf(l) / k, cimagf(l) / k);
}
/* ATen's exp2_impl: e^(ln2 z) */
static inline cx_t cx_exp2(cx_t z) { return cexpf(cx_scale(z, (float)M_LN2)); }

static inline cx_t cx_recip(cx_t z) { return cx_div(cx(1.0f, 0.0f), z); }
static inline cx_t cx_rsqrt(cx_t z) { return cx_recip(csqrtf(z)); }
static inline cx_t cx_sigmoid(cx_t z) {
  cx_t e = cexpf(-z);
  return cx_recip(cx(1.0f + crealf(e), cimagf(e)));
}
/* z / |z|, 0 for 0 */
static inline cx_t cx_sgn(cx_t z) {
  if (crealf(z) == 0 && cimagf(z) == 0) return cx(0.0f, 0.0f);
  float r = cabsf(z);
  return cx(crealf(z) / r, cimagf(z) / r);
}

/* ATen's pow_tensor_scalar_optimized_kernel: small integral exponents multiply out */
static inline cx_t cx_pow_scalar(cx_t x, cx_t e) {
  if (cimagf(e) == 0) {
    float r = crealf(e);
    if (r == 2.0f) return cx_square(x);
    if (r == 3.0f) return cx_mul(cx_mul(x, x), x);
    if (r == -2.0f) return cx_div(cx(1.0f, 0.0f), cx_square(x));
    if (r == 0.5f) return csqrtf(x);
    if (r == -0.5f) return cx_rsqrt(x);
    if (r == -1.0f) return cx_recip(x);
  }
  return cpowf(x, e);
}

/* ATen's lerp: weights below 1/2 in magnitude step from self, others back from end */
static inline cx_t cx_lerp(cx_t a, cx_t b, cx_t w) {
  cx_t d = b - a;
  if (cabsf(w) < 0.5f) return a + cx_mul(w, d);
  return b - cx_mul(d, cx(1.0f - crealf(w), -cimagf(w)));
}

#endif /* TPURT_KERNELS_COMPLEX_MATH_H */
