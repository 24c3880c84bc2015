/* Elementwise family: the generic kernel body (promotion, scalar operands, parameters) and
 * the unary ops. Binary/ternary ops are in elementwise_binary.c, activations and their
 * backward ops in elementwise_activation.c. */
#include <float.h>

#define VMATH_NO_CONTRACT
#include "vmath.h"
#include "elementwise.h"

/* float32 exp, exp2, expm1, log, log2, log10, log1p, sinh, cosh, tanh, sigmoid, erf, sin and
 * cos through vmath.h's vectorizable versions (within 2 ulp; libm's scalar calls made them
 * 6-20x slower than PyTorch CPU's SIMD ones, as a TPU's vector unit also approximates them);
 * float64 keeps libm's (the names below are the double functions: tgmath's macros expand only
 * before a parenthesis). */
#define EW_VM(VF, DF, x) _Generic((x), float: VF, default: DF)(x)
#define EW_EXP(x) EW_VM(vm_expf, exp, x)
#define EW_TANH(x) EW_VM(vm_tanhf, tanh, x)
#define EW_ERF(x) EW_VM(vm_erff, erf, x)
#define EW_LOG(x) EW_VM(vm_logf, log, x)
#define EW_EXPM1(x) EW_VM(vm_expm1f, expm1, x)
#define EW_LOG1P(x) EW_VM(vm_log1pf, log1p, x)
#define EW_EXP2(x) EW_VM(vm_exp2f, exp2, x)
#define EW_LOG2(x) EW_VM(vm_log2f, log2, x)
#define EW_LOG10(x) EW_VM(vm_log10f, log10, x)
#define EW_SINH(x) EW_VM(vm_sinhf, sinh, x)
#define EW_COSH(x) EW_VM(vm_coshf, cosh, x)

/* ---------------------------------------------------------------- generic kernel body */
/* A scalar operand as a 0-dim tensor. For integer common dtypes the scalar is first cast to
 * that dtype, as CPU does (uint8 == -1 compares against 255); float scalars stay double. */
static tpurt_tensor operand(const tpurt_value* v, int common, int64_t* storage) {
  if (v->kind == TPURT_V_TENSOR) return v->t;
  tpurt_tensor t;
  memset(&t, 0, sizeof t);
  t.data = storage;
  t.dtype = tpurt_is_float(common) ? TPURT_F64 : common;
  if (v->kind == TPURT_V_COMPLEX) return tpurt_scalar_tensor(v, storage);
  if (v->kind == TPURT_V_FLOAT) tpurt_store_f64(storage, t.dtype, v->f);
  else tpurt_store_i64(storage, t.dtype, v->i);
  return t;
}

int ew_common_dtype(const ew_op* op, const tpurt_value* const* v, int complex_result, int out_dtype) {
  tpurt_promo p;
  tpurt_promo_init(&p);
  for (int k = 0; k < op->nin; k++)
    if (op->promo & (1u << k)) tpurt_promo_add_value(&p, v[k]);
  int common = tpurt_promo_result(&p);
  if (complex_result && !tpurt_is_complex(common)) common = TPURT_C64;
  if (op->rule == EW_FLOAT && !tpurt_is_float(common) && !tpurt_is_complex(common))
    /* CPU promotes integer inputs to the default float dtype and casts the result to out=
     * (special_zeta(int16, int32, out=float16) computes in float32): an f64 output means the
     * default dtype is float64 or out= asks for it, anything else computes in f32 */
    common = out_dtype == TPURT_F64 ? TPURT_F64 : TPURT_F32;
  return common;
}

tpurt_status ew_supported(const ew_op* op, int common) {
  if (op->fn[tpurt_ctype_of(common)]) return TPURT_OK;
  return tpurt_fail(TPURT_ERR_UNSUPPORTED, "\"%s\" not implemented for '%s'", op->name,
                    tpurt_dtype_c10_name((tpurt_dtype)common));
}

tpurt_status tpurt_ew_plan(const tpurt_op_call* c, const ew_op* op) {
  const tpurt_value* v[TPURT_EW_MAX_IN];
  ew_operands(c, op, v);
  return ew_supported(op, ew_common_dtype(op, v, 0, c->nouts > 0 ? c->outs[0].dtype : -1));
}

tpurt_status ew_run_op(const tpurt_tensor* out, const ew_op* op, const tpurt_value* const* v,
                       const ew_par* par) {
  int common = ew_common_dtype(op, v, par->complex_result, out->dtype);
  tpurt_status s = ew_supported(op, common);
  if (s) return s;
  tpurt_ctype ct = tpurt_ctype_of(common);
  tpurt_ew_fn fn = op->fn[ct];
  int64_t storage[TPURT_EW_MAX_IN];
  tpurt_tensor in[TPURT_EW_MAX_IN];
  for (int k = 0; k < op->nin; k++) in[k] = operand(v[k], common, &storage[k]);
  int err = 0;
  ew_par local = *par;
  local.err = &err;
  local.step_dt = -1;
  /* As CPU: promoted operands are rounded to the common dtype, and so is the result. */
  tpurt_ew_via via = {common, op->promo, op->rule != EW_BOOL_OUT};
  if (common == TPURT_F16 || common == TPURT_BF16) {
    int one_value = op->nin > 1 && (in[1].ndim == 0 || tpurt_numel(&in[1]) == 1 || tpurt_numel(out) == 1);
    if ((local.reduced & EW_REDUCED_OPMATH_SCALAR) && one_value) via.inputs &= ~2u;
    if ((local.reduced & EW_REDUCED_STEPS) && !one_value) local.step_dt = common;
    if (local.reduced & EW_REDUCED_ALPHA) local.f[0] = ew_round_reduced(common, (float)local.f[0]);
  }
  s = tpurt_ew_run_via(out, op->rule == EW_BOOL_OUT ? TPURT_CT_I64 : ct, op->nin, in, ct, &via, fn,
                                    &local);
  if (!s && err) s = tpurt_fail(TPURT_ERR_RUNTIME, "ZeroDivisionError");
  return s;
}

float ew_round_reduced(int dt, float v) {
  return dt == TPURT_F16 ? tpurt_f16_to_f32(tpurt_f32_to_f16(v)) : tpurt_bf16_to_f32(tpurt_f32_to_bf16(v));
}

void ew_operands(const tpurt_op_call* c, const ew_op* op, const tpurt_value** v) {
  for (int k = 0; k < op->nin; k++) v[k] = &c->args[op->arg[k]];
}

static int mode_code(const char* s) {
  if (!strcmp(s, "tanh")) return EW_MODE_TANH;
  if (!strcmp(s, "trunc")) return EW_MODE_TRUNC;
  if (!strcmp(s, "floor")) return EW_MODE_FLOOR;
  return EW_MODE_NONE;
}

void ew_params(const tpurt_op_call* c, const ew_op* op, ew_par* par) {
  memset(par, 0, sizeof *par);
  int k = 0;
  for (int a = 0; a < c->nargs && k < EW_MAX_PAR; a++) {
    int is_operand = 0;
    for (int j = 0; j < op->nin; j++) is_operand |= op->arg[j] == a;
    if (is_operand) continue;
    const tpurt_value* v = &c->args[a];
    switch (v->kind) {
      case TPURT_V_INT:
      case TPURT_V_BOOL:
      case TPURT_V_FLOAT:
        par->f[k] = tpurt_value_f(v);
        par->i[k] = tpurt_value_i(v);
        break;
      case TPURT_V_COMPLEX:
        par->f[k] = v->c[0];
        par->fi[k] = v->c[1];
        par->i[k] = tpurt_value_i(v);
        break;
      case TPURT_V_NONE: /* an absent float? reads as NaN: expressions test it with !(p >= 0) */
        par->f[k] = NAN;
        break;
      case TPURT_V_STRING:
        par->f[k] = par->i[k] = mode_code(v->s);
        break;
      default: /* out= tensors: not parameters */
        break;
    }
    k++;
  }
}

tpurt_status ew_apply(const tpurt_op_call* c, const ew_op* op) {
  const tpurt_value* v[TPURT_EW_MAX_IN];
  ew_par par;
  ew_operands(c, op, v);
  ew_params(c, op, &par);
  return ew_run_op(&c->outs[0], op, v, &par);
}

/* ---------------------------------------------------------------- unary ops */
/* Inverse error function: rational first guess + two Newton steps (PyTorch's calc_erfinv). */
static double ew_erfinv(double y) {
  static const double a[4] = {0.886226899, -1.645349621, 0.914624893, -0.140543331};
  static const double b[4] = {-2.118377725, 1.442710462, -0.329097515, 0.012229801};
  static const double c[4] = {-1.970840454, -1.624906493, 3.429567803, 1.641345311};
  static const double d[2] = {3.543889200, 1.637067800};
  double ya = fabs(y), x;
  if (ya > 1) return NAN;
  if (ya == 1) return copysign(INFINITY, y);
  if (ya <= 0.7) {
    double z = y * y;
    x = y * (((a[3] * z + a[2]) * z + a[1]) * z + a[0]) /
        ((((b[3] * z + b[2]) * z + b[1]) * z + b[0]) * z + 1);
  } else {
    double z = sqrt(-log((1 - ya) / 2));
    x = copysign(((c[3] * z + c[2]) * z + c[1]) * z + c[0], y) / ((d[1] * z + d[0]) * z + 1);
  }
  for (int i = 0; i < 2; i++) x -= (erf(x) - y) / (M_2_SQRTPI * exp(-x * x));
  return x;
}

/* Integer inputs promote to float, complex64 too: name, expression of x, complex one. */
#define UNARY_FLOAT_CX_OPS(X)                                                    \
  X(exp, EW_EXP(x), cexpf(x))                                                    \
  X(exp2, EW_EXP2(x), cx_exp2(x))                                                 \
  X(expm1, EW_EXPM1(x), cx_expm1(x))                                             \
  X(log, EW_LOG(x), clogf(x))                                                    \
  X(log2, EW_LOG2(x), cx_log2(x))                                                 \
  X(log10, EW_LOG10(x), cx_log10(x))                                                \
  X(log1p, EW_LOG1P(x), cx_log1p(x))                                             \
  X(sqrt, sqrt(x), csqrtf(x))                                                    \
  X(rsqrt, 1 / sqrt(x), cx_rsqrt(x))                                             \
  X(tan, tan(x), ctanf(x))                                                       \
  X(asin, asin(x), casinf(x))                                                    \
  X(acos, acos(x), cacosf(x))                                                    \
  X(atan, atan(x), catanf(x))                                                    \
  X(sinh, EW_SINH(x), csinhf(x))                                                  \
  X(cosh, EW_COSH(x), ccoshf(x))                                                  \
  X(tanh, EW_TANH(x), ctanhf(x))                                                 \
  X(asinh, asinh(x), casinhf(x))                                                 \
  X(acosh, acosh(x), cacoshf(x))                                                 \
  X(atanh, atanh(x), catanhf(x))                                                 \
  X(sigmoid, 1 / (1 + EW_EXP(-x)), cx_sigmoid(x))                                \
  X(reciprocal, 1 / x, cx_recip(x))

/* Integer inputs promote to float; no complex64 (like CPU): name, expression of x. */
#define UNARY_FLOAT_OPS(X)                                                       \
  X(erf, EW_ERF(x))                                                              \
  X(erfc, erfc(x))                                                               \
  X(erfinv, ew_erfinv(x))                                                        \
  /* eps (PF(0)) absent or negative: no clamping */                              \
  X(logit, log(ew_logit_in(x, PF(0)) / (1 - ew_logit_in(x, PF(0)))))
#define ew_logit_in(x, eps) (!((eps) >= 0) ? (x) : (x) < (eps) ? (eps) : (x) > 1 - (eps) ? 1 - (eps) : (x))

/* Same dtype in and out, integers too: name, float expression, int64 expression. */
#define UNARY_SAME_OPS(X)                                      \
  X(sign, (0 < x) - (x < 0), (0 < x) - (x < 0))                \
  X(floor, floor(x), x)                                        \
  X(ceil, ceil(x), x)                                          \
  X(trunc, trunc(x), x)                                        \
  X(round, nearbyint(x), x) /* half to even */                 \
  X(relu, isnan(x) ? x : x < 0 ? 0 : x, x < 0 ? 0 : x)          \
  X(nan_to_num, isnan(x) ? PF(0) : x == INFINITY ? PF(1) : x == -INFINITY ? PF(2) : x, x)

/* Boolean results: name, float expression, int64 expression. */
#define UNARY_BOOL_OPS(X)                       \
  X(isposinf, x == INFINITY, 0)                 \
  X(isneginf, x == -INFINITY, 0)                \
  X(signbit, signbit(x) != 0, x < 0)            \
  X(logical_not, !x, !x)

#define DEF_UNARY_FLOAT_CX(NAME, E, CE) EW_DEF_FC(NAME, EW_FLOAT, 1, E, CE)
#define DEF_UNARY_FLOAT(NAME, E) EW_DEF_F(NAME, EW_FLOAT, 1, E)
#define DEF_UNARY_SAME(NAME, E, IE) EW_DEF_FI(NAME, EW_SAME, 1, E, IE)
#define DEF_UNARY_BOOL(NAME, E, IE) EW_DEF_BOOL(NAME, 1, E, IE)
#define KERNEL2(NAME, E) EW_KERNEL(NAME)
#define KERNEL3(NAME, E, IE) EW_KERNEL(NAME)
UNARY_FLOAT_CX_OPS(DEF_UNARY_FLOAT_CX)
UNARY_FLOAT_CX_OPS(KERNEL3)
/* sin / cos: the float32 vector version where its reduction is exact, libm past it */
EW_CHUNK_RANGE(sin_f32, vm_trig_in_range, vm_sinf, sinf)
EW_CHUNK(sin_f64, double, double, 1, sin(x))
EW_CHUNK(sin_c64, cx_t, cx_t, 1, csinf(x))
EW_DESC_C(sin, EW_FLOAT, 1, sin_f32, sin_f64, NULL, sin_c64)
EW_KERNEL(sin)
EW_CHUNK_RANGE(cos_f32, vm_trig_in_range, vm_cosf, cosf)
EW_CHUNK(cos_f64, double, double, 1, cos(x))
EW_CHUNK(cos_c64, cx_t, cx_t, 1, ccosf(x))
EW_DESC_C(cos, EW_FLOAT, 1, cos_f32, cos_f64, NULL, cos_c64)
EW_KERNEL(cos)
UNARY_FLOAT_OPS(DEF_UNARY_FLOAT)
UNARY_FLOAT_OPS(KERNEL2)
UNARY_SAME_OPS(DEF_UNARY_SAME)
UNARY_BOOL_OPS(DEF_UNARY_BOOL)
UNARY_BOOL_OPS(KERNEL3)
/* complex64: either part */
EW_DEF_BOOL_C(isnan, 1, isnan(x), 0, isnan(crealf(x)) || isnan(cimagf(x)))
EW_DEF_BOOL_C(isinf, 1, isinf(x), 0, isinf(crealf(x)) || isinf(cimagf(x)))
EW_KERNEL(isnan)
EW_KERNEL(isinf)

#define UNARY_SAME_PLAIN(X) X(sign) X(floor) X(ceil) X(trunc) X(round) X(relu)
UNARY_SAME_PLAIN(EW_KERNEL)

/* Defined for complex64 too: neg, sgn (z / |z|), abs and angle (real results). */
EW_DEF_FIC(neg, EW_SAME, 1, -x, ew_wneg(x), -x)
EW_DEF_FIC(sgn, EW_SAME, 1, (0 < x) - (x < 0), (0 < x) - (x < 0), cx_sgn(x))
EW_KERNEL(neg)
EW_KERNEL(sgn)
EW_DEF_FI(abs, EW_SAME, 1, fabs(x), x < 0 ? ew_wneg(x) : x)
/* angle: pi for negative reals, 0 otherwise, NaN kept; integers promote to float */
EW_DEF_F(angle, EW_FLOAT, 1, isnan(x) ? x : x < 0 ? (ew_t)M_PI : 0)

/* A complex64 input with a real result: the chunk function maps c64 to f32. */
_Static_assert(TPURT_ARG_angle_self == TPURT_ARG_abs_self, "cx_to_real serves abs and angle");
static tpurt_status cx_to_real(const tpurt_op_call* c, const ew_op* op, tpurt_ew_fn cfn) {
  if (TPURT_ARG(c, abs, self)->kind == TPURT_V_TENSOR && TPURT_ARG(c, abs, self)->t.dtype == TPURT_C64)
    return tpurt_ew_run2(&c->outs[0], TPURT_CT_F32, 1, &TPURT_ARG(c, abs, self)->t, TPURT_CT_C64, cfn, NULL);
  return ew_apply(c, op);
}
EW_CHUNK(abs_c64, cx_t, float, 1, cabsf(x))
EW_CHUNK(angle_c64, cx_t, float, 1, cargf(x))
tpurt_status tpurt_kernel_abs(const tpurt_op_call* c) { return cx_to_real(c, &abs_op, abs_c64); }
tpurt_status tpurt_kernel_angle(const tpurt_op_call* c) { return cx_to_real(c, &angle_op, angle_c64); }

EW_DEF_F(frac, EW_SAME, 1, x - trunc(x))
EW_KERNEL(frac)
EW_DEF_I(bitwise_not_int, EW_SAME, 1, ~x)

tpurt_status tpurt_kernel_bitwise_not(const tpurt_op_call* c) {
  /* ~ on bool is logical not (~1 would read back as true) */
  int bool_in = TPURT_ARG(c, bitwise_not, self)->kind == TPURT_V_TENSOR && TPURT_ARG(c, bitwise_not, self)->t.dtype == TPURT_BOOL;
  return ew_apply(c, bool_in ? &logical_not_op : &bitwise_not_int_op);
}

/* round.decimals(self, *, int decimals): PF(1) = 10^|decimals|, PI(1) = decimals < 0. */
EW_DEF_F(round_decimals, EW_SAME, 1,
         PI(1) ? nearbyint(x / PF(1)) * PF(1) : nearbyint(x * PF(1)) / PF(1))

tpurt_status tpurt_kernel_round_decimals(const tpurt_op_call* c) {
  const tpurt_value* v[1];
  ew_par par;
  ew_operands(c, &round_decimals_op, v);
  ew_params(c, &round_decimals_op, &par);
  int64_t d = par.i[0];
  par.f[1] = pow(10.0, (double)(d < 0 ? -d : d));
  par.i[1] = d < 0;
  return ew_run_op(&c->outs[0], &round_decimals_op, v, &par);
}

/* frexp(self) -> (mantissa, exponent): two passes over self, the exponent computed as int64. */
static inline double ew_frexp_m(double x) {
  int e;
  return frexp(x, &e);
}
static inline int64_t ew_frexp_e(double x) {
  int e = 0;
  frexp(x, &e);
  return e;
}
EW_DEF_F(frexp_mantissa, EW_SAME, 1, ew_frexp_m(x))
EW_CHUNK(frexp_exp_f32, float, int64_t, 1, ew_frexp_e(x))
EW_CHUNK(frexp_exp_f64, double, int64_t, 1, ew_frexp_e(x))
static const ew_op frexp_exp_op = {"frexp", {frexp_exp_f32, frexp_exp_f64, NULL}, EW_BOOL_OUT, 1, 1, {0}};

tpurt_status tpurt_kernel_frexp(const tpurt_op_call* c) {
  const tpurt_value* v[1] = {TPURT_ARG(c, frexp, self)};
  ew_par par;
  memset(&par, 0, sizeof par);
  tpurt_status s = ew_run_op(&c->outs[0], &frexp_mantissa_op, v, &par);
  return s ? s : ew_run_op(&c->outs[1], &frexp_exp_op, v, &par);
}

static double dtype_max(int dt) {
  switch (dt) {
    case TPURT_F16: return 65504.0;
    case TPURT_BF16: return 3.3895313892515355e38;
    case TPURT_F32: return FLT_MAX;
    default: return DBL_MAX;
  }
}

tpurt_status tpurt_kernel_nan_to_num(const tpurt_op_call* c) {
  /* nan_to_num(self, float? nan, float? posinf, float? neginf): absent ones default to 0 and
   * the output dtype's finite extremes */
  const tpurt_value* v[1];
  ew_par par;
  ew_operands(c, &nan_to_num_op, v);
  ew_params(c, &nan_to_num_op, &par);
  double m = dtype_max(c->outs[0].dtype);
  if (isnan(par.f[0])) par.f[0] = 0;
  if (isnan(par.f[1])) par.f[1] = m;
  if (isnan(par.f[2])) par.f[2] = -m;
  return ew_run_op(&c->outs[0], &nan_to_num_op, v, &par);
}
