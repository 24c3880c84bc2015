/* Elementwise family: binary and ternary ops (arithmetic, comparisons, logical/bitwise,
 * where, masked_fill, clamp, addcmul/addcdiv, lerp). */
#include "elementwise.h"

/* ---------------------------------------------------------------- helpers (CPU's rules) */
#define DEF_FLOAT_HELPERS(T, S)                                                          \
  /* remainder takes the divisor's sign */                                               \
  static inline T fremainder_##S(T a, T b) {                                             \
    T m = fmod(a, b);                                                                    \
    if (m != 0 && ((b < 0) != (m < 0))) m += b;                                          \
    return m;                                                                            \
  }                                                                                      \
  /* c10::div_floor_floating: exact floor of the quotient, rounded towards the nearest   \
   * integer when the division is inexact */                                             \
  static inline T fdiv_floor_##S(T a, T b) {                                             \
    if (b == 0) return a / b;                                                            \
    T mod = fmod(a, b), div = (a - mod) / b;                                             \
    if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;                                    \
    if (div == 0) return copysign((T)0, a / b);                                          \
    T fl = floor(div);                                                                   \
    return div - fl > (T)0.5 ? fl + 1 : fl;                                              \
  }                                                                                      \
  static inline T flerp_##S(T a, T b, T w) {                                             \
    return fabs(w) < (T)0.5 ? a + w * (b - a) : b - (b - a) * (1 - w);                   \
  }
DEF_FLOAT_HELPERS(float, f)
DEF_FLOAT_HELPERS(double, d)
#define FREMAINDER(a, b) _Generic((a), float: fremainder_f, double: fremainder_d)(a, b)
#define FDIV_FLOOR(a, b) _Generic((a), float: fdiv_floor_f, double: fdiv_floor_d)(a, b)
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
 * PF/PI(0) = alpha for sub). */
#define BINARY_SAME_OPS(X)                                                         \
  X(sub, x - PF(0) * y, ew_wsub(x, ew_wmul(PI(0), y)))                             \
  X(mul, x * y, ew_wmul(x, y))                                                     \
  X(maximum, EW_MAXN(x, y), EW_MAXI(x, y))                                         \
  X(minimum, EW_MINN(x, y), EW_MINI(x, y))                                         \
  X(div_trunc, trunc(x / y), idiv_trunc(P, x, y))                                  \
  X(div_floor, FDIV_FLOOR(x, y), idiv_floor(P, x, y))                              \
  X(remainder, FREMAINDER(x, y), iremainder(P, x, y))                              \
  X(fmod, fmod(x, y), ifmod(P, x, y))                                              \
  X(pow, pow(x, y), ipow(x, y))

/* Integer inputs promote to float. */
#define BINARY_FLOAT_OPS(X)                                       \
  X(div_true, x / y)                                              \
  X(atan2, atan2(x, y))                                           \
  X(copysign, copysign(x, y))                                     \
  X(hypot, hypot(x, y))                                           \
  X(xlogy, isnan(y) ? y : x == 0 ? 0 : x * log(y))

/* Integers and bool only. */
#define BINARY_INT_OPS(X) X(bitwise_and, x & y) X(bitwise_or, x | y) X(bitwise_xor, x ^ y)

/* Boolean results, computed in the common dtype. */
#define BINARY_BOOL_OPS(X)                                    \
  X(eq, x == y)                                               \
  X(ne, x != y)                                               \
  X(lt, x < y)                                                \
  X(le, x <= y)                                               \
  X(gt, x > y)                                                \
  X(ge, x >= y)                                               \
  X(logical_and, x != 0 && y != 0)                            \
  X(logical_or, x != 0 || y != 0)                             \
  X(logical_xor, (x != 0) != (y != 0))

#define DEF_SAME(NAME, E, IE) EW_DEF_FI(NAME, EW_SAME, 2, E, IE)
#define DEF_FLOAT(NAME, E) EW_DEF_F(NAME, EW_FLOAT, 2, E)
#define DEF_INT(NAME, IE) EW_DEF_I(NAME, EW_SAME, 2, IE)
#define DEF_BOOL(NAME, E) EW_DEF_BOOL(NAME, 2, E, E)
#define KERNEL2(NAME, E) EW_KERNEL(NAME)
BINARY_SAME_OPS(DEF_SAME)
BINARY_FLOAT_OPS(DEF_FLOAT)
BINARY_INT_OPS(DEF_INT)
BINARY_INT_OPS(KERNEL2)
BINARY_BOOL_OPS(DEF_BOOL)
BINARY_BOOL_OPS(KERNEL2)

#define BINARY_PLAIN(X) X(sub) X(mul) X(maximum) X(minimum) X(remainder) X(fmod) \
  X(atan2) X(copysign) X(hypot) X(xlogy)
BINARY_PLAIN(EW_KERNEL)

tpurt_status tpurt_kernel_div(const tpurt_op_call* c) {
  /* div(self, other[, *, str? rounding_mode]): the mode is the first parameter (None and
   * out= tensors read as EW_MODE_NONE) */
  ew_par par;
  ew_params(c, &div_true_op, &par);
  int mode = (int)par.i[0];
  const ew_op* op = mode == EW_MODE_TRUNC ? &div_trunc_op : mode == EW_MODE_FLOOR ? &div_floor_op : &div_true_op;
  return ew_apply(c, op);
}

/* floor_divide(self, other): div with rounding_mode='floor' (no mode parameter) */
tpurt_status tpurt_kernel_floor_divide(const tpurt_op_call* c) { return ew_apply(c, &div_floor_op); }

tpurt_status tpurt_kernel_pow(const tpurt_op_call* c) {
  const tpurt_value *base = &c->args[0], *e = &c->args[1];
  if (base->kind == TPURT_V_TENSOR && !tpurt_is_float(base->t.dtype) && e->kind == TPURT_V_INT &&
      e->i < 0)
    return tpurt_fail(TPURT_ERR_RUNTIME, "Integers to negative integer powers are not allowed.");
  return ew_apply(c, &pow_op);
}

/* ---------------------------------------------------------------- ternary ops */
/* where(condition, self, other): the condition does not take part in promotion */
EW_CHUNK(where_f32, float, float, 3, x != 0 ? y : z)
EW_CHUNK(where_f64, double, double, 3, x != 0 ? y : z)
EW_CHUNK(where_i64, int64_t, int64_t, 3, x != 0 ? y : z)
static const ew_op where_op = {"where", {where_f32, where_f64, where_i64}, EW_SAME, 3, 6, {0, 1, 2}};
EW_KERNEL(where)

/* masked_fill(self, mask, value): only self decides the dtype; value is cast to it */
EW_CHUNK(masked_fill_f32, float, float, 3, y != 0 ? z : x)
EW_CHUNK(masked_fill_f64, double, double, 3, y != 0 ? z : x)
EW_CHUNK(masked_fill_i64, int64_t, int64_t, 3, y != 0 ? z : x)
static const ew_op masked_fill_op = {
    "masked_fill", {masked_fill_f32, masked_fill_f64, masked_fill_i64}, EW_SAME, 3, 1, {0, 1, 2}};
EW_KERNEL(masked_fill)

/* clamp(self, min, max) = minimum(maximum(self, min), max): NaN anywhere propagates */
EW_DEF_FI(clamp_both, EW_SAME, 3, EW_MINN(EW_MAXN(x, y), z), EW_MINI(EW_MAXI(x, y), z))

static tpurt_status clamp_run(const tpurt_op_call* c, const tpurt_value* lo, const tpurt_value* hi) {
  const tpurt_value* self = &c->args[0];
  ew_par par;
  memset(&par, 0, sizeof par);
  if (lo->kind != TPURT_V_NONE && hi->kind != TPURT_V_NONE)
    return ew_run_op(&c->outs[0], &clamp_both_op, (const tpurt_value*[]){self, lo, hi}, &par);
  if (lo->kind != TPURT_V_NONE) return ew_run_op(&c->outs[0], &maximum_op, (const tpurt_value*[]){self, lo}, &par);
  if (hi->kind != TPURT_V_NONE) return ew_run_op(&c->outs[0], &minimum_op, (const tpurt_value*[]){self, hi}, &par);
  return tpurt_fail(TPURT_ERR_RUNTIME, "torch.clamp: At least one of 'min' or 'max' must not be None");
}

tpurt_status tpurt_kernel_clamp(const tpurt_op_call* c) { return clamp_run(c, &c->args[1], &c->args[2]); }
tpurt_status tpurt_kernel_clamp_min(const tpurt_op_call* c) {
  const tpurt_value none = {.kind = TPURT_V_NONE, .scalar_dtype = -1};
  return clamp_run(c, &c->args[1], &none);
}
tpurt_status tpurt_kernel_clamp_max(const tpurt_op_call* c) {
  const tpurt_value none = {.kind = TPURT_V_NONE, .scalar_dtype = -1};
  return clamp_run(c, &none, &c->args[1]);
}

/* addcmul / addcdiv(self, tensor1, tensor2, *, value): PF/PI(0) = value */
EW_DEF_FI(addcmul, EW_SAME, 3, x + PF(0) * y * z, ew_wadd(x, ew_wmul(ew_wmul(PI(0), y), z)))
EW_KERNEL(addcmul)
EW_DEF_F(addcdiv, EW_SAME, 3, x + PF(0) * y / z)
EW_KERNEL(addcdiv)
/* lerp(self, end, weight): the weight is a third operand (Scalar or Tensor) */
EW_DEF_F(lerp, EW_SAME, 3, FLERP(x, y, z))
EW_KERNEL(lerp)
