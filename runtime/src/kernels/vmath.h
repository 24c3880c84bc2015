/* Branch-free exp / erf / tanh that the compiler vectorizes (libm's are scalar calls, which
 * kept activations and softmax 2-3x slower than PyTorch's SIMD versions). Every branch is a
 * select, so a loop over them becomes vector code as wide as the build's instruction set
 * (runtime/Makefile: one build per x86-64 level, the widest the host runs picked at load
 * time). Worst errors over strided sweeps of all floats against libm in double
 * (runtime/tests/test_vmath.c checks them), with / without FMA: vm_expf 0.97 / 0.96 ulp,
 * vm_erff 1.05 / 1.12, vm_tanhf 1.31 / 1.31, vm_exp (double) 1.00 / 1.05. Specials: NaN
 * propagates, +-inf give the limits, underflow goes through the subnormals to 0, overflow
 * gives inf. */
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

/* e^x = 2^n * e^r, |r| <= ln2/2 (Cephes' polynomial). 2^n is applied as two factors so
 * that results in the subnormal range round once, like libm's. */
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
  int32_t n1 = ni / 2, n2 = ni - n1;
  return p * vm_f32_of((uint32_t)(n1 + 127) << 23) * vm_f32_of((uint32_t)(n2 + 127) << 23);
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

#endif /* TPURT_VMATH_H */
