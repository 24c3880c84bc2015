/* Special-function family: gamma functions, Bessel/Airy functions, error-function relatives,
 * incomplete gamma, Hurwitz zeta and the orthogonal polynomials, as elementwise ops. Every
 * dtype evaluates the double-precision functions of special_math.h (CPU's algorithms) and
 * rounds once on store, so float results are at least as accurate as CPU's float evaluation. */
#include "elementwise.h"
#include "special_math.h"

#define D(v) ((double)(v))

static double sf_sinc(double x) { return x == 0 ? 1.0 : sin(M_PI * x) / (M_PI * x); }
static double sf_entr(double x) { return isnan(x) ? x : x > 0 ? -x * log(x) : x == 0 ? 0.0 : -INFINITY; }
static double sf_xlog1py(double x, double y) { return isnan(y) ? NAN : x == 0 ? 0.0 : x * log1p(y); }
/* polygamma(n, x) as CPU: digamma and trigamma for n = 0, 1, the zeta form above */
static double sf_polygamma(int64_t n, double x) {
  if (n == 0) return calc_digamma(x);
  if (n == 1) return trigamma(x);
  return ((n % 2) ? 1.0 : -1.0) * exp(lgamma((double)n + 1.0)) * zeta((double)(n + 1), x);
}
/* A polynomial degree given as a float, as CPU's static_cast<int64_t> reads it on x86:
 * NaN and out-of-range values become negative (degree < 0 gives 0). */
static int64_t sf_degree(double n) { return n >= -9.2e18 && n <= 9.2e18 ? (int64_t)n : -1; }
/* CPU's hermite recurrences give NaN past a degree that depends on the compute type. */
#define SF_HERMITE_LIMIT(x) (sizeof(x) == sizeof(float) ? 128 : 512)

/* Unary, integers promote to float: name, expression of x. */
#define SPECIAL_UNARY_OPS(X)                                                   \
  X(lgamma, lgamma(D(x)))                                                      \
  X(digamma, calc_digamma(D(x)))                                               \
  X(sinc, sf_sinc(D(x)))                                                       \
  X(i0, calc_i0(D(x)))                                                         \
  X(special_i0e, calc_i0e(D(x)))                                               \
  X(special_i1, calc_i1(D(x)))                                                 \
  X(special_i1e, calc_i1e(D(x)))                                               \
  X(special_entr, sf_entr(D(x)))

/* Unary without a float16/bfloat16 kernel on CPU. */
#define SPECIAL_UNARY_NO_HALF_OPS(X)                                           \
  X(special_erfcx, calc_erfcx(D(x)))                                           \
  X(special_ndtri, calc_ndtri(D(x)))                                           \
  X(special_log_ndtr, calc_log_ndtr(D(x)))                                     \
  X(special_airy_ai, airy_ai_forward(D(x)))                                    \
  X(special_bessel_j0, bessel_j0_forward(D(x)))                                \
  X(special_bessel_j1, bessel_j1_forward(D(x)))                                \
  X(special_bessel_y0, bessel_y0_forward(D(x)))                                \
  X(special_bessel_y1, bessel_y1_forward(D(x)))                                \
  X(special_modified_bessel_i0, modified_bessel_i0_forward(D(x)))              \
  X(special_modified_bessel_i1, modified_bessel_i1_forward(D(x)))              \
  X(special_modified_bessel_k0, modified_bessel_k0_forward(D(x)))              \
  X(special_modified_bessel_k1, modified_bessel_k1_forward(D(x)))              \
  X(special_scaled_modified_bessel_k0, scaled_modified_bessel_k0_forward(D(x))) \
  X(special_scaled_modified_bessel_k1, scaled_modified_bessel_k1_forward(D(x))) \
  X(special_spherical_bessel_j0, spherical_bessel_j0_forward(D(x)))

/* Binary (x, y) without a float16/bfloat16 kernel on CPU; integers promote to float. */
#define SPECIAL_BINARY_OPS(X)                                                                      \
  X(special_zeta, zeta(D(x), D(y)))                                                                \
  X(special_chebyshev_polynomial_t, chebyshev_polynomial_t_forward(D(x), sf_degree(y)))            \
  X(special_chebyshev_polynomial_u, chebyshev_polynomial_u_forward(D(x), sf_degree(y)))            \
  X(special_chebyshev_polynomial_v, chebyshev_polynomial_v_forward(D(x), sf_degree(y)))            \
  X(special_chebyshev_polynomial_w, chebyshev_polynomial_w_forward(D(x), sf_degree(y)))            \
  X(special_shifted_chebyshev_polynomial_t, shifted_chebyshev_polynomial_t_forward(D(x), sf_degree(y))) \
  X(special_shifted_chebyshev_polynomial_u, shifted_chebyshev_polynomial_u_forward(D(x), sf_degree(y))) \
  X(special_shifted_chebyshev_polynomial_v, shifted_chebyshev_polynomial_v_forward(D(x), sf_degree(y))) \
  X(special_shifted_chebyshev_polynomial_w, shifted_chebyshev_polynomial_w_forward(D(x), sf_degree(y))) \
  X(special_hermite_polynomial_h, hermite_polynomial_h_forward(D(x), sf_degree(y), SF_HERMITE_LIMIT(x))) \
  X(special_hermite_polynomial_he, hermite_polynomial_he_forward(D(x), sf_degree(y), SF_HERMITE_LIMIT(x))) \
  X(special_laguerre_polynomial_l, laguerre_polynomial_l_forward(D(x), sf_degree(y)))              \
  X(special_legendre_polynomial_p, legendre_polynomial_p_forward(D(x), sf_degree(y)))

#define DEF_UNARY(NAME, E) EW_DEF_F(NAME, EW_FLOAT, 1, E)
#define DEF_BINARY(NAME, E) EW_DEF_F(NAME, EW_FLOAT, 2, E)
#define KERNEL(NAME, E) EW_KERNEL(NAME)
SPECIAL_UNARY_OPS(DEF_UNARY)
SPECIAL_UNARY_OPS(KERNEL)
SPECIAL_UNARY_NO_HALF_OPS(DEF_UNARY)
SPECIAL_BINARY_OPS(DEF_BINARY)

/* CPU has no float16/bfloat16 kernel for these: the computing dtype (the operands' common one,
 * integers computing in float32) decides, not out='s (int16 inputs into a float16 out= work) */
static tpurt_status no_half_check(const tpurt_op_call* c, const ew_op* op) {
  const tpurt_value* v[TPURT_EW_MAX_IN];
  tpurt_promo p;
  tpurt_promo_init(&p);
  ew_operands(c, op, v);
  for (int k = 0; k < op->nin; k++) tpurt_promo_add_value(&p, v[k]);
  int dt = tpurt_promo_result(&p);
  if (dt == TPURT_F16 || dt == TPURT_BF16)
    return tpurt_fail(TPURT_ERR_UNSUPPORTED, "\"%s_cpu\" not implemented for '%s'", op->name,
                      tpurt_dtype_c10_name((tpurt_dtype)dt));
  return TPURT_OK;
}
#define KERNEL_NO_HALF(NAME, E)                                                             \
  EW_LINK(NAME, NAME##_op)                                                                  \
  tpurt_status tpurt_plan_##NAME(const tpurt_op_call* c, tpurt_plan* p) { return no_half_check(c, &NAME##_op); } \
  tpurt_status tpurt_kernel_##NAME(const tpurt_op_call* c) {                                \
    tpurt_status s = no_half_check(c, &NAME##_op);                                          \
    return s ? s : ew_apply(c, &NAME##_op);                                                 \
  }
SPECIAL_UNARY_NO_HALF_OPS(KERNEL_NO_HALF)
SPECIAL_BINARY_OPS(KERNEL_NO_HALF)

EW_DEF_F(special_xlog1py, EW_FLOAT, 2, sf_xlog1py(D(x), D(y)))
EW_KERNEL(special_xlog1py)

/* Incomplete gamma: floating dtypes only (CPU has no integer kernel). */
EW_DEF_F(igamma, EW_SAME, 2, calc_igamma(D(x), D(y)))
EW_KERNEL(igamma)
EW_DEF_F(igammac, EW_SAME, 2, calc_igammac(D(x), D(y)))
EW_KERNEL(igammac)

/* polygamma(int n, Tensor self) and polygamma_(Tensor self, int n): PI(0) = n. */
EW_CHUNK(polygamma_f32, float, float, 1, sf_polygamma(PI(0), D(x)))
EW_CHUNK(polygamma_f64, double, double, 1, sf_polygamma(PI(0), D(x)))
static const ew_op polygamma_op = {"polygamma", {polygamma_f32, polygamma_f64, NULL}, EW_FLOAT, 1, 1, {1}};
static const ew_op polygamma_inplace_op = {"polygamma", {polygamma_f32, polygamma_f64, NULL}, EW_FLOAT, 1, 1, {0}};
EW_KERNEL(polygamma)
tpurt_status tpurt_kernel_polygamma_(const tpurt_op_call* c) { return ew_apply(c, &polygamma_inplace_op); }
