/* Elementwise family: binary and ternary ops (arithmetic, comparisons, logical/bitwise,
 * where, masked_fill, clamp, addcmul/addcdiv, lerp). */
#include "vmath.h" /* contraction: the fused multiply-adds of lerp and add/sub with alpha */
#include "elementwise.h"

/* ---------------------------------------------------------------- helpers (CPU's rules) */
/* c10::div_floor_floating from a's exact remainder mod b: exact floor of the quotient,
 * rounded towards the nearest integer when the division is inexact; STEP rounds each step
 * (EW_STEP: as in c10::Half arithmetic). Selects, no early returns, so that a loop without
 * steps vectorizes. */
#define DIV_FLOOR_FROM_MOD(T, STEP, a, b, mod)                                           \
  T div = STEP(STEP(a - mod) / b);                                                       \
  div = (mod != 0) & ((b < 0) != (mod < 0)) ? STEP(div - 1) : div;                       \
  T fl = floor(div);                                                                     \
  T res = STEP(div - fl) > (T)0.5 ? STEP(fl + 1) : fl;                                   \
  res = div == 0 ? copysign((T)0, STEP(a / b)) : res;                                    \
  return b == 0 ? a / b : res;
#define NO_STEP(v) (v)
#define DEF_FLOAT_HELPERS(T, S)                                                          \
  /* remainder takes the divisor's sign */                                               \
  static inline T fremainder_##S(T a, T b) {                                             \
    T m = fmod(a, b);                                                                    \
    if (m != 0 && ((b < 0) != (m < 0))) m += b;                                          \
    return m;                                                                            \
  }                                                                                      \
  static inline T fdiv_floor_##S(const ew_par* P, T a, T b) {                            \
    typedef T ew_t;                                                                      \
    T mod = fmod(a, b);                                                                  \
    DIV_FLOOR_FROM_MOD(T, EW_STEP, a, b, mod)                                            \
  }                                                                                      \
  static inline T flerp_##S(T a, T b, T w) { /* CPU's vectorized lerp: one fused rounding */ \
    return fabs(w) < (T)0.5 ? FMA_##S(w, b - a, a) : FMA_##S(w - 1, b - a, b);           \
  }
#define FMA_f fmaf
#define FMA_d fma
DEF_FLOAT_HELPERS(float, f)
DEF_FLOAT_HELPERS(double, d)
#define FREMAINDER(a, b) _Generic((a), float: fremainder_f, double: fremainder_d)(a, b)
#define FLERP(a, b, w) _Generic((a), float: flerp_f, double: flerp_d)(a, b, w)

/* Integer division family: a zero divisor is flagged (CPU raises ZeroDivisionError) and
 * b == -1 is negation, so INT64_MIN / -1 wraps instead of trapping. */
static inline int64_t idiv_trunc(const ew_par* P, int64_t a, int64_t b) {
  if (b == 0) return ew_zero_div(P);
  return b == -1 ? ew_wneg(a) : a / b;
}
static inline int64_t idiv_floor(const ew_par* P, int64_t a, int64_t b) {
  if (b == 0) return ew_zero_div(P);
  if (b == -1) return ew_wneg(a);
  int64_t q = a / b;
  return ((a < 0) != (b < 0)) && a % b ? q - 1 : q;
}
static inline int64_t ifmod(const ew_par* P, int64_t a, int64_t b) {
  if (b == 0) return ew_zero_div(P);
  return b == -1 ? 0 : a % b;
}
static inline int64_t iremainder(const ew_par* P, int64_t a, int64_t b) {
  int64_t r = ifmod(P, a, b);
  return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}
/* calc_gcd on magnitudes (unsigned, so INT64_MIN has one). */
static inline int64_t igcd(int64_t x, int64_t y) {
  uint64_t a = x < 0 ? 0 - (uint64_t)x : (uint64_t)x, b = y < 0 ? 0 - (uint64_t)y : (uint64_t)y;
  while (a) {
    uint64_t c = a;
    a = b % a;
    b = c;
  }
  return (int64_t)b;
}
static inline int64_t ilcm(int64_t x, int64_t y) {
  int64_t g = igcd(x, y);
  if (!g) return 0;
  int64_t r = ew_wmul(x / g, y);
  return r < 0 ? ew_wneg(r) : r;
}
/* CPU's powi: negative exponents give 0 except for bases 1 and -1; products wrap. */
static inline int64_t ipow(int64_t a, int64_t b) {
  if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
  uint64_t r = 1, base = (uint64_t)a;
  for (; b; b >>= 1, base *= base)
    if (b & 1) r *= base;
  return (int64_t)r;
}

/* ---------------------------------------------------------------- binary ops */
/* Same dtype in and out: name, float expression, int64 expression (x = self, y = other;
 * PF/PI(0) = alpha for sub and rsub). */
#define BINARY_SAME_OPS(X)                                                         \
  X(maximum, EW_MAXN(x, y), EW_MAXI(x, y))                                         \
  X(minimum, EW_MINN(x, y), EW_MINI(x, y))                                         \
  X(div_trunc, trunc(EW_STEP(x / y)), idiv_trunc(P, x, y))                                  \
  X(fmax, fmax(x, y), EW_MAXI(x, y))                                               \
  X(fmin, fmin(x, y), EW_MINI(x, y))                                               \
  X(heaviside, x == 0 ? y : x > 0, x == 0 ? y : x > 0)

/* Integer inputs promote to float. */
#define BINARY_FLOAT_OPS(X)                                       \
  X(atan2, atan2(x, y))                                           \
  X(copysign, copysign(x, y))                                     \
  X(hypot, hypot(x, y))                                           \
  X(xlogy, isnan(y) ? y : x == 0 ? 0 : x * log(y))                \

/* Integers and bool only. */
#define BINARY_INT_OPS(X) X(bitwise_and, x & y) X(bitwise_or, x | y) X(bitwise_xor, x ^ y)
/* Shifts by a negative count or at least the width give what CPU gives: 0 to the left, the
 * sign to the right. In int64 this also covers narrower dtypes: bits shifted past their
 * width are dropped by the store. */
EW_DEF_I(lshift, EW_SAME, 2, y < 0 || y >= 64 ? 0 : (int64_t)((uint64_t)x << y))
EW_DEF_I(rshift, EW_SAME, 2, x >> (y < 0 || y >= 64 ? 63 : y))
/* Floats only (CPU has no integer logaddexp). */
/* log(1 + e^v) for v <= 0: float32 through vmath.h's vector functions (libm's, called per
 * element, were 5x CPU's time), float64 through libm */
#define LOG1P_EXP(v) _Generic((v), float: vm_log1pf(vm_expf((float)(v))), double: log1p(exp((double)(v))))
EW_DEF_F(logaddexp, EW_SAME, 2, isinf(x) && x == y ? x : (x > y ? x : y) + LOG1P_EXP(-fabs(x - y)))
EW_DEF_F(logaddexp2, EW_SAME, 2, isinf(x) && x == y ? x : fmax(x, y) + log1p(exp2(-fabs(x - y))) / M_LN2)
EW_DEF_I(gcd, EW_SAME, 2, igcd(x, y))
EW_DEF_I(lcm, EW_SAME, 2, ilcm(x, y))

/* Boolean results, computed in the common dtype. */
#define BINARY_BOOL_OPS(X)                                    \
  X(lt, x < y)                                                \
  X(le, x <= y)                                               \
  X(gt, x > y)                                                \
  X(ge, x >= y)                                               \
  X(logical_and, x != 0 && y != 0)                            \
  X(logical_or, x != 0 || y != 0)                             \
  X(logical_xor, (x != 0) != (y != 0))

/* Defined for complex64 too: name, float, int64 and complex expressions. */
#define BINARY_SAME_CX_OPS(X) X(mul, x * y, ew_wmul(x, y), cx_mul(x, y))
/* x + alpha * y as CPU's vectorized add computes it: one fused multiply-add (sub and rsub are
 * add with -alpha): one instruction in the builds with FMA, a libm call in the portable one */
#define ALPHA_OPS(X)                                                                         \
  X(add_any, fma(PF(0), y, x), ew_wadd(x, ew_wmul(PI(0), y)), x + cx_mul(PC(0), y))          \
  X(sub, fma(-PF(0), y, x), ew_wsub(x, ew_wmul(PI(0), y)), x - cx_mul(PC(0), y))             \
  X(rsub, fma(-PF(0), x, y), ew_wsub(y, ew_wmul(PI(0), x)), y - cx_mul(PC(0), x))
#define DEF_ALPHA(NAME, E, IE, CE)                                                          \
  EW_CHUNK(NAME##_f32, float, float, 2, E)                             \
  EW_CHUNK(NAME##_f64, double, double, 2, E)                           \
  EW_CHUNK(NAME##_i64, int64_t, int64_t, 2, IE)                                             \
  EW_CHUNK(NAME##_c64, cx_t, cx_t, 2, CE)                                                   \
  EW_DESC_C(NAME, EW_SAME, 2, NAME##_f32, NAME##_f64, NAME##_i64, NAME##_c64)
ALPHA_OPS(DEF_ALPHA)
/* pow's exponent as a Scalar (PC(0)) takes ATen's shortcuts for small integral powers. */
EW_DEF_FIC(pow, EW_SAME, 2, pow(x, y), ipow(x, y), cpowf(x, y))
EW_CHUNK(pow_scalar_c64, cx_t, cx_t, 1, cx_pow_scalar(x, PC(0)))
static const ew_op pow_scalar_op = {"pow", {NULL, NULL, NULL, pow_scalar_c64}, EW_SAME, 1, 1, {0}};
EW_DEF_FC(div_true, EW_FLOAT, 2, x / y, cx_div(x, y))
EW_DEF_BOOL_C(eq, 2, x == y, x == y, x == y)
EW_DEF_BOOL_C(ne, 2, x != y, x != y, x != y)
EW_KERNEL(eq)
EW_KERNEL(ne)

#define DEF_SAME_CX(NAME, E, IE, CE) EW_DEF_FIC(NAME, EW_SAME, 2, E, IE, CE)
#define DEF_SAME(NAME, E, IE) EW_DEF_FI(NAME, EW_SAME, 2, E, IE)
#define DEF_FLOAT(NAME, E) EW_DEF_F(NAME, EW_FLOAT, 2, E)
#define DEF_INT(NAME, IE) EW_DEF_I(NAME, EW_SAME, 2, IE)
#define DEF_BOOL(NAME, E) EW_DEF_BOOL(NAME, 2, E, E)
#define KERNEL2(NAME, E) EW_KERNEL(NAME)
BINARY_SAME_CX_OPS(DEF_SAME_CX)
BINARY_SAME_OPS(DEF_SAME)
BINARY_FLOAT_OPS(DEF_FLOAT)
BINARY_INT_OPS(DEF_INT)
BINARY_INT_OPS(KERNEL2)
BINARY_BOOL_OPS(DEF_BOOL)
BINARY_BOOL_OPS(KERNEL2)

/* fmod and remainder on float32: vm_fmodf where it is exact (|a| < 2^28 |b|, b finite),
 * libm's fmodf in a second pass for the other lanes (one libm call per element was 9x CPU's
 * vectorized fmod). A block goes through a local buffer, so an output that is one of the
 * inputs still reads them intact. remainder then takes the divisor's sign, as CPU's. */
enum { FMOD_BLOCK = 256 };
static void fmod_block_f32(int64_t n, float* restrict r, const float* a, const float* b, int python_sign) {
  for (int64_t i = 0; i < n; i++) r[i] = vm_fmodf_in_range(a[i], b[i]) ? vm_fmodf(a[i], b[i]) : 0;
  for (int64_t i = 0; i < n; i++)
    if (!vm_fmodf_in_range(a[i], b[i])) r[i] = fmodf(a[i], b[i]);
  if (python_sign)
    for (int64_t i = 0; i < n; i++) r[i] = (r[i] != 0) & ((b[i] < 0) != (r[i] < 0)) ? r[i] + b[i] : r[i];
}
#define FMOD_CHUNK(NAME, PYTHON_SIGN)                                                   \
  static void NAME(int64_t n, void* o, const void* const* in, const void* ctx) {       \
    const float *a = in[0], *b = in[1];                                                 \
    float* r = o;                                                                       \
    (void)ctx;                                                                          \
    for (int64_t i0 = 0; i0 < n; i0 += FMOD_BLOCK) {                                    \
      _Alignas(64) float t[FMOD_BLOCK];                                                 \
      int64_t m = n - i0 < FMOD_BLOCK ? n - i0 : FMOD_BLOCK;                            \
      fmod_block_f32(m, t, a + i0, b + i0, PYTHON_SIGN);                                \
      memcpy(r + i0, t, sizeof(float) * (size_t)m);                                     \
    }                                                                                   \
  }
FMOD_CHUNK(fmod_f32, 0)
FMOD_CHUNK(remainder_f32, 1)
/* div_floor (floor_divide, `//`) on float32: DIV_FLOOR_FROM_MOD on fmod_block_f32's exact
 * remainders (fmod was one libm call per element: 14x CPU's time). float16/bfloat16 round
 * every step (a call) and keep the scalar loop. */
static inline float div_floor_mod_f32(float a, float b, float mod) { DIV_FLOOR_FROM_MOD(float, NO_STEP, a, b, mod) }
static void div_floor_f32(int64_t n, void* o, const void* const* in, const void* ctx) {
  const ew_par* P = ctx;
  const float *a = in[0], *b = in[1];
  float* r = o;
  if (P->step_dt >= 0) {
    for (int64_t i = 0; i < n; i++) r[i] = fdiv_floor_f(P, a[i], b[i]);
    return;
  }
  for (int64_t i0 = 0; i0 < n; i0 += FMOD_BLOCK) {
    _Alignas(64) float t[FMOD_BLOCK];
    int64_t m = n - i0 < FMOD_BLOCK ? n - i0 : FMOD_BLOCK;
    fmod_block_f32(m, t, a + i0, b + i0, 0);
    for (int64_t i = 0; i < m; i++) t[i] = div_floor_mod_f32(a[i0 + i], b[i0 + i], t[i]);
    memcpy(r + i0, t, sizeof(float) * (size_t)m);
  }
}
EW_CHUNK(div_floor_f64, double, double, 2, fdiv_floor_d(P, x, y))
EW_CHUNK(div_floor_i64, int64_t, int64_t, 2, idiv_floor(P, x, y))
EW_DESC(div_floor, EW_SAME, 2, div_floor_f32, div_floor_f64, div_floor_i64)
EW_CHUNK(fmod_f64, double, double, 2, fmod(x, y))
EW_CHUNK(fmod_i64, int64_t, int64_t, 2, ifmod(P, x, y))
EW_DESC(fmod, EW_SAME, 2, fmod_f32, fmod_f64, fmod_i64)
EW_CHUNK(remainder_f64, double, double, 2, FREMAINDER(x, y))
EW_CHUNK(remainder_i64, int64_t, int64_t, 2, iremainder(P, x, y))
EW_DESC(remainder, EW_SAME, 2, remainder_f32, remainder_f64, remainder_i64)

#define BINARY_PLAIN(X) X(maximum) X(minimum) X(remainder) X(fmod) \
  X(atan2) X(copysign) X(hypot) X(xlogy) X(fmax) X(fmin) X(logaddexp) X(logaddexp2)
BINARY_PLAIN(EW_KERNEL)

/* add for complex64 operands: core.c keeps the real dtypes' add on its own fast loops */
tpurt_status tpurt_add_complex(const tpurt_op_call* c) { return ew_apply(c, &add_any_op); }

/* An op whose float16/bfloat16 case CPU computes its own way (EW_REDUCED_*). */
static tpurt_status apply_reduced(const tpurt_op_call* c, const ew_op* op, unsigned reduced) {
  const tpurt_value* v[TPURT_EW_MAX_IN];
  ew_par par;
  ew_operands(c, op, v);
  ew_params(c, op, &par);
  par.reduced = reduced;
  return ew_run_op(&c->outs[0], op, v, &par);
}

EW_LINK(mul, mul_op)
tpurt_status tpurt_kernel_mul(const tpurt_op_call* c) { return apply_reduced(c, &mul_op, EW_REDUCED_OPMATH_SCALAR); }

tpurt_status tpurt_kernel_div(const tpurt_op_call* c) {
  /* div(self, other[, *, str? rounding_mode]): the mode is the first parameter (None and
   * out= tensors read as EW_MODE_NONE) */
  ew_par par;
  ew_params(c, &div_true_op, &par);
  int mode = (int)par.i[0];
  if (mode == EW_MODE_NONE) return apply_reduced(c, &div_true_op, EW_REDUCED_OPMATH_SCALAR);
  return apply_reduced(c, mode == EW_MODE_TRUNC ? &div_trunc_op : &div_floor_op,
                       EW_REDUCED_OPMATH_SCALAR | EW_REDUCED_STEPS);
}

/* nextafter in the output dtype: float and double directly; bfloat16 / float16 step their
 * 16-bit patterns as c10's nextafter does (musl's algorithm). PI(0) = output dtype. */
static double nextafter16(double from, double to, int dt) {
  if (isnan(from) || isnan(to)) return from + to;
  uint16_t f, t;
  tpurt_store_f64(&f, dt, from);
  tpurt_store_f64(&t, dt, to);
  const uint16_t sign = 0x8000;
  if (f == t) return from;
  uint16_t af = f & ~sign, at = t & ~sign;
  if (!af) {
    if (!at) return to;
    f = (t & sign) | 1;
  } else if (af > at || ((f ^ t) & sign)) {
    f--;
  } else {
    f++;
  }
  return tpurt_load_f64(&f, dt);
}
EW_DEF_F(nextafter, EW_SAME, 2,
         PI(0) == TPURT_F16 || PI(0) == TPURT_BF16 ? (ew_t)nextafter16(x, y, (int)PI(0)) : nextafter(x, y))

tpurt_status tpurt_kernel_nextafter(const tpurt_op_call* c) {
  const tpurt_value* v[2];
  ew_par par;
  ew_operands(c, &nextafter_op, v);
  ew_params(c, &nextafter_op, &par);
  par.i[0] = c->outs[0].dtype;
  return ew_run_op(&c->outs[0], &nextafter_op, v, &par);
}

/* sub / rsub: alpha in float16/bfloat16 when those are the common dtype, as CPU */
static tpurt_status alpha_apply(const tpurt_op_call* c, const ew_op* op) {
  const tpurt_value* v[TPURT_EW_MAX_IN];
  ew_par par;
  ew_operands(c, op, v);
  ew_params(c, op, &par);
  par.reduced |= EW_REDUCED_ALPHA;
  return ew_run_op(&c->outs[0], op, v, &par);
}
EW_LINK(sub, sub_op)
tpurt_status tpurt_kernel_sub(const tpurt_op_call* c) { return alpha_apply(c, &sub_op); }

tpurt_status tpurt_kernel_rsub(const tpurt_op_call* c) {
  /* CPU's sub_check: no bool operand (rsub's meta function does not check) */
  for (int k = 0; k < 2; k++)
    if (c->args[k].kind == TPURT_V_TENSOR && c->args[k].t.dtype == TPURT_BOOL)
      return tpurt_fail(TPURT_ERR_RUNTIME, "Subtraction, the `-` operator, with a bool tensor is not supported. "
                        "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
  return alpha_apply(c, &rsub_op);
}

tpurt_status tpurt_kernel_floor_divide(const tpurt_op_call* c) {
  return apply_reduced(c, &div_floor_op, EW_REDUCED_OPMATH_SCALAR | EW_REDUCED_STEPS);
}

/* Integer-only ops CPU does not define for bool (bool would compute in int64 here). */
static tpurt_status int_only_check(const tpurt_op_call* c, const ew_op* op) {
  if (c->nouts > 0 && c->outs[0].dtype == TPURT_BOOL)
    return tpurt_fail(TPURT_ERR_UNSUPPORTED, "\"%s\" not implemented for 'Bool'", op->name);
  return TPURT_OK;
}
static tpurt_status int_only(const tpurt_op_call* c, const ew_op* op) {
  tpurt_status s = int_only_check(c, op);
  return s ? s : ew_apply(c, op);
}
EW_LINK(gcd, gcd_op)
tpurt_status tpurt_plan_gcd(const tpurt_op_call* c, tpurt_plan* p) { return int_only_check(c, &gcd_op); }
tpurt_status tpurt_kernel_gcd(const tpurt_op_call* c) { return int_only(c, &gcd_op); }
EW_LINK(lcm, lcm_op)
tpurt_status tpurt_plan_lcm(const tpurt_op_call* c, tpurt_plan* p) { return int_only_check(c, &lcm_op); }
tpurt_status tpurt_kernel_lcm(const tpurt_op_call* c) { return int_only(c, &lcm_op); }
EW_LINK(lshift, lshift_op)
tpurt_status tpurt_plan_lshift(const tpurt_op_call* c, tpurt_plan* p) { return int_only_check(c, &lshift_op); }
tpurt_status tpurt_kernel_lshift(const tpurt_op_call* c) { return int_only(c, &lshift_op); }
EW_LINK(rshift, rshift_op)
tpurt_status tpurt_plan_rshift(const tpurt_op_call* c, tpurt_plan* p) { return int_only_check(c, &rshift_op); }
tpurt_status tpurt_kernel_rshift(const tpurt_op_call* c) { return int_only(c, &rshift_op); }
EW_KERNEL(heaviside)

/* pow(float Tensor, real Scalar) for the exponents ATen's pow_tensor_scalar_optimized_kernel
 * computes as products and roots, with CPU's values (a libm pow per element was 26x CPU's
 * time for x.pow(2), RMSNorm's square); sqrt, rsqrt and reciprocal are those ops' own. */
EW_DEF_F(pow_square, EW_SAME, 1, x * x)
EW_DEF_F(pow_cube, EW_SAME, 1, x * x * x)
EW_DEF_F(pow_inv_square, EW_SAME, 1, 1 / (x * x))
extern const ew_op* const tpurt_ew_desc_sqrt;
extern const ew_op* const tpurt_ew_desc_rsqrt;
extern const ew_op* const tpurt_ew_desc_reciprocal;
static const ew_op* pow_shortcut(const tpurt_value* base, const tpurt_value* e, const tpurt_tensor* out) {
  if (base->kind != TPURT_V_TENSOR || !tpurt_is_float(base->t.dtype) || out->dtype != base->t.dtype ||
      (e->kind != TPURT_V_FLOAT && e->kind != TPURT_V_INT))
    return NULL;
  double v = tpurt_value_f(e);
  return v == 2 ? &pow_square_op : v == 3 ? &pow_cube_op : v == -2 ? &pow_inv_square_op : v == 0.5 ? tpurt_ew_desc_sqrt
       : v == -0.5 ? tpurt_ew_desc_rsqrt : v == -1 ? tpurt_ew_desc_reciprocal : NULL;
}

tpurt_status tpurt_kernel_pow(const tpurt_op_call* c) {
  const tpurt_value *base = TPURT_ARG(c, pow, self), *e = TPURT_ARG(c, pow, exponent);
  const ew_op* shortcut = pow_shortcut(base, e, &c->outs[0]);
  if (shortcut) {
    ew_par par;
    memset(&par, 0, sizeof par);
    return ew_run_op(&c->outs[0], shortcut, (const tpurt_value*[]){base}, &par);
  }
  if (base->kind == TPURT_V_TENSOR && !tpurt_is_float(base->t.dtype) && !tpurt_is_complex(base->t.dtype) &&
      e->kind == TPURT_V_INT && e->i < 0)
    return tpurt_fail(TPURT_ERR_RUNTIME, "Integers to negative integer powers are not allowed.");
  /* complex pow(Tensor, Scalar): the exponent is a parameter, not an operand */
  if (e->kind != TPURT_V_TENSOR && base->kind == TPURT_V_TENSOR && c->outs[0].dtype == TPURT_C64) {
    ew_par par;
    memset(&par, 0, sizeof par);
    par.f[0] = tpurt_value_f(e);
    par.fi[0] = e->kind == TPURT_V_COMPLEX ? e->c[1] : 0;
    par.complex_result = 1; /* a real base with a complex exponent */
    return ew_run_op(&c->outs[0], &pow_scalar_op, (const tpurt_value*[]){base}, &par);
  }
  return ew_apply(c, &pow_op);
}

/* ---------------------------------------------------------------- ternary ops */
/* where(condition, self, other): the condition does not take part in promotion */
EW_CHUNK(where_f32, float, float, 3, x != 0 ? y : z)
EW_CHUNK(where_f64, double, double, 3, x != 0 ? y : z)
EW_CHUNK(where_i64, int64_t, int64_t, 3, x != 0 ? y : z)
EW_CHUNK(where_c64, cx_t, cx_t, 3, x != 0 ? y : z)
static const ew_op where_op = {"where", {where_f32, where_f64, where_i64, where_c64}, EW_SAME, 3, 6, {0, 1, 2}};
EW_KERNEL(where)

/* masked_fill(self, mask, value): only self decides the dtype; value is cast to it */
EW_CHUNK(masked_fill_f32, float, float, 3, y != 0 ? z : x)
EW_CHUNK(masked_fill_f64, double, double, 3, y != 0 ? z : x)
EW_CHUNK(masked_fill_i64, int64_t, int64_t, 3, y != 0 ? z : x)
EW_CHUNK(masked_fill_c64, cx_t, cx_t, 3, y != 0 ? z : x)
static const ew_op masked_fill_op = {
    "masked_fill", {masked_fill_f32, masked_fill_f64, masked_fill_i64, masked_fill_c64}, EW_SAME, 3, 1, {0, 1, 2}};
EW_KERNEL(masked_fill)

/* clamp(self, min, max) = minimum(maximum(self, min), max): NaN anywhere propagates */
EW_DEF_FI(clamp_both, EW_SAME, 3, EW_MINN(EW_MAXN(x, y), z), EW_MINI(EW_MAXI(x, y), z))

_Static_assert(TPURT_ARG_clamp_min_self == TPURT_ARG_clamp_self && TPURT_ARG_clamp_max_self == TPURT_ARG_clamp_self,
               "clamp_run serves clamp, clamp_min and clamp_max");
static tpurt_status clamp_run(const tpurt_op_call* c, const tpurt_value* lo, const tpurt_value* hi) {
  const tpurt_value* self = TPURT_ARG(c, clamp, self);
  ew_par par;
  memset(&par, 0, sizeof par);
  if (lo->kind != TPURT_V_NONE && hi->kind != TPURT_V_NONE)
    return ew_run_op(&c->outs[0], &clamp_both_op, (const tpurt_value*[]){self, lo, hi}, &par);
  if (lo->kind != TPURT_V_NONE) return ew_run_op(&c->outs[0], &maximum_op, (const tpurt_value*[]){self, lo}, &par);
  if (hi->kind != TPURT_V_NONE) return ew_run_op(&c->outs[0], &minimum_op, (const tpurt_value*[]){self, hi}, &par);
  return tpurt_fail(TPURT_ERR_RUNTIME, "torch.clamp: At least one of 'min' or 'max' must not be None");
}

tpurt_status tpurt_kernel_clamp(const tpurt_op_call* c) { return clamp_run(c, TPURT_ARG(c, clamp, min), TPURT_ARG(c, clamp, max)); }
tpurt_status tpurt_kernel_clamp_min(const tpurt_op_call* c) {
  const tpurt_value none = {.kind = TPURT_V_NONE, .scalar_dtype = -1};
  return clamp_run(c, TPURT_ARG(c, clamp_min, min), &none);
}
tpurt_status tpurt_kernel_clamp_max(const tpurt_op_call* c) {
  const tpurt_value none = {.kind = TPURT_V_NONE, .scalar_dtype = -1};
  return clamp_run(c, &none, TPURT_ARG(c, clamp_max, max));
}

/* addcmul / addcdiv(self, tensor1, tensor2, *, value): PF/PI(0) = value */
/* addcmul: (value * tensor1) * tensor2 + self with the last two fused, as CPU's vectorized kernel */
EW_CHUNK(addcmul_f32, float, float, 3, fma(PF(0) * y, z, x))
EW_CHUNK(addcmul_f64, double, double, 3, fma(PF(0) * y, z, x))
EW_CHUNK(addcmul_i64, int64_t, int64_t, 3, ew_wadd(x, ew_wmul(ew_wmul(PI(0), y), z)))
EW_CHUNK(addcmul_c64, cx_t, cx_t, 3, x + cx_mul(cx_mul(PC(0), y), z))
EW_DESC_C(addcmul, EW_SAME, 3, addcmul_f32, addcmul_f64, addcmul_i64, addcmul_c64)
EW_KERNEL(addcmul)
EW_DEF_FC(addcdiv, EW_SAME, 3, x + PF(0) * y / z, x + cx_div(cx_mul(PC(0), y), z))
EW_KERNEL(addcdiv)
/* lerp(self, end, weight): the weight is a third operand (Scalar or Tensor) */
EW_CHUNK(lerp_f32, float, float, 3, FLERP(x, y, z))
EW_CHUNK(lerp_f64, double, double, 3, FLERP(x, y, z))
EW_CHUNK(lerp_c64, cx_t, cx_t, 3, cx_lerp(x, y, z))
/* Only self and end promote: CPU reads a Scalar weight in float (opmath) as given, not rounded
 * to a float16/bfloat16 common dtype; a Tensor weight has self's dtype already. */
static const ew_op lerp_op = {"lerp", {lerp_f32, lerp_f64, NULL, lerp_c64}, EW_SAME, 3, 0x3, {0, 1, 2, 3}};
EW_KERNEL(lerp)
