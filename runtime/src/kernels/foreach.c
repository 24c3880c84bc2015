/* _foreach_*, _fused_adam(w)_ and _fused_sgd_ kernels: what torch.optim (foreach=True / fused=True) and
 * clip_grad_norm_ dispatch. A foreach op is one elementwise expression run tensor by tensor
 * through the elementwise engine. Operand k of tensor i is element i of argument k when that
 * argument is a list (Tensor[] or Scalar[]), else the argument itself (a Scalar, or a 0-dim
 * tensor the engine broadcasts); an optional trailing coefficient (alpha, value) comes next.
 * The output list is the last argument: fresh tensors for functional overloads, self for
 * in-place ones. */
#include "../internal.h"

#include <tgmath.h>

/* ---------------------------------------------------------------- operands */
/* Element i of a list argument as a single value (a tensor or a scalar). */
static tpurt_value fe_elem(const tpurt_value* v, int i) {
  tpurt_value e = *v;
  if (v->kind == TPURT_V_TENSORS) {
    e.kind = TPURT_V_TENSOR;
    e.t = v->tensors[i];
  } else if (v->kind == TPURT_V_FLOATS) {
    e.kind = TPURT_V_FLOAT;
    e.f = v->floats[i];
  } else if (v->kind == TPURT_V_INTS) {
    e.kind = TPURT_V_INT;
    e.i = v->ints[i];
  }
  if (v->kind == TPURT_V_FLOATS || v->kind == TPURT_V_INTS) { /* Python numbers */
    e.wrapped = 1;
    e.scalar_dtype = -1;
  }
  return e;
}

/* List arguments must match the output list's length (PyTorch's meta checks it too). */
static tpurt_status fe_check_len(const tpurt_value* v, int n, const char* op) {
  int list = v->kind == TPURT_V_TENSORS || v->kind == TPURT_V_FLOATS || v->kind == TPURT_V_INTS;
  if (list && v->n != n)
    return tpurt_fail(TPURT_ERR_RUNTIME, "%s: Tensor lists must have the same number of tensors, got %d and %d",
                      op, n, v->n);
  return TPURT_OK;
}

static const tpurt_value* fe_outs(const tpurt_op_call* c) {
  const tpurt_value* o = c->nargs > 0 ? &c->args[c->nargs - 1] : NULL;
  return o && o->kind == TPURT_V_TENSORS ? o : NULL;
}

/* ---------------------------------------------------------------- elementwise foreach ops */
/* The coefficient (alpha / value); alpha: as add/sub read it, in float16/bfloat16 when the
 * tensors are (CPU's add kernel), else f. */
typedef struct fe_ctx { double f; int64_t i; double alpha; } fe_ctx;

static inline int fe_nan_f(float v) { return v != v; }
static inline int fe_nan_d(double v) { return v != v; }
static inline int fe_nan_i(int64_t v) { (void)v; return 0; }
#define FE_NAN(v) _Generic((v), float: fe_nan_f, double: fe_nan_d, default: fe_nan_i)(v)
/* maximum / minimum / clamp_min / clamp_max propagate NaN from either side */
#define FE_MAX(x, y) (FE_NAN(x) ? (x) : FE_NAN(y) ? (y) : (x) > (y) ? (x) : (y))
#define FE_MIN(x, y) (FE_NAN(x) ? (x) : FE_NAN(y) ? (y) : (x) < (y) ? (x) : (y))
/* at::lerp: the form that is exact at the nearer end point */
#define FE_LERP(x, y, w) (fabs(w) < 0.5 ? FE_FMA(w, (y) - (x), x) : FE_FMA((w) - 1, (y) - (x), y))
/* a * b + c rounded once for floats (the type of c picks the form), as CPU's vectorized add
 * (alpha) and lerp */
#define FE_FMA(a, b, c) _Generic((c), int64_t: (c) + (a) * (b), default: fma(a, b, c))
#define FE_ABS(x) ((x) <= 0 ? 0 - (x) : (x)) /* abs(-0.0) is +0.0 */
#define FE_SIGN(x) (((x) > 0) - ((x) < 0))
#define FE_COEF(T, c) _Generic((T)0, int64_t: (T)(c)->i, default: (T)(c)->f)

/* Selects on FP values (lerp's two forms, NaN-propagating max/min) may be if-converted:
 * FP exceptions are not observed and the results are the same, and the loops vectorize. */
#define FE_NOTRAP __attribute__((optimize("no-trapping-math")))

/* X(op, operands, expression of x, y, z (operands of one element) and a (coefficient)).
 * Each becomes tpurt_kernel_foreach_<op>. */
#define FE_OPS(X)                                  \
  X(add, 2, FE_FMA(alpha, y, x))                   \
  X(sub, 2, FE_FMA(-alpha, y, x))                  \
  X(mul, 2, x * y)                                 \
  X(div, 2, x / y)                                 \
  X(maximum, 2, FE_MAX(x, y))                      \
  X(minimum, 2, FE_MIN(x, y))                      \
  X(clamp_min, 2, FE_MAX(x, y))                    \
  X(clamp_max, 2, FE_MIN(x, y))                    \
  X(pow, 2, pow(x, y))                             \
  X(addcmul, 3, FE_FMA(a * y, z, x))               \
  X(addcdiv, 3, x + a * (y / z))                   \
  X(lerp, 3, FE_LERP(x, y, z))                     \
  X(abs, 1, FE_ABS(x))                             \
  X(neg, 1, -x)                                    \
  X(sign, 1, FE_SIGN(x))                           \
  X(zero, 1, 0)                                    \
  X(reciprocal, 1, 1 / x)                          \
  X(sqrt, 1, sqrt(x))                              \
  X(rsqrt, 1, 1 / sqrt(x))                         \
  X(exp, 1, exp(x))                                \
  X(expm1, 1, expm1(x))                            \
  X(log, 1, log(x))                                \
  X(log10, 1, log10(x))                            \
  X(log1p, 1, log1p(x))                            \
  X(log2, 1, log2(x))                              \
  X(sin, 1, sin(x))                                \
  X(cos, 1, cos(x))                                \
  X(tan, 1, tan(x))                                \
  X(asin, 1, asin(x))                              \
  X(acos, 1, acos(x))                              \
  X(atan, 1, atan(x))                              \
  X(sinh, 1, sinh(x))                              \
  X(cosh, 1, cosh(x))                              \
  X(tanh, 1, tanh(x))                              \
  X(sigmoid, 1, 1 / (1 + exp(-x)))                 \
  X(erf, 1, erf(x))                                \
  X(erfc, 1, erfc(x))                              \
  X(lgamma, 1, lgamma(x))                          \
  X(ceil, 1, ceil(x))                              \
  X(floor, 1, floor(x))                            \
  X(round, 1, nearbyint(x))                        \
  X(trunc, 1, trunc(x))                            \
  X(frac, 1, x - trunc(x))

#define FE_CHUNK(op, T, nin, expr)                                                        \
  FE_NOTRAP static void fe_##op##_##T(int64_t n, void* o, const void* const* in, const void* vctx) { \
    const T* X = in[0];                                                                    \
    const T* Y = nin > 1 ? (const T*)in[1] : X;                                            \
    const T* Z = nin > 2 ? (const T*)in[2] : X;                                            \
    const T a = FE_COEF(T, (const fe_ctx*)vctx);                                           \
    const T alpha = _Generic((T)0, int64_t: a, default: (T)((const fe_ctx*)vctx)->alpha);  \
    T* r = o;                                                                              \
    (void)a;                                                                               \
    (void)alpha;                                                                           \
    for (int64_t i = 0; i < n; i++) {                                                      \
      T x = X[i], y = Y[i], z = Z[i];                                                      \
      (void)x; (void)y; (void)z;                                                           \
      r[i] = (T)(expr);                                                                    \
    }                                                                                      \
  }

/* Coefficient of tensor i: the argument after the operands, when the overload has one. */
static fe_ctx fe_coef(const tpurt_op_call* c, int nin, int i) {
  fe_ctx k = {1.0, 1, 1.0};
  if (c->nargs - 1 > nin && c->args[nin].kind != TPURT_V_NONE) {
    tpurt_value v = fe_elem(&c->args[nin], i);
    k.f = tpurt_value_f(&v);
    k.i = tpurt_value_i(&v);
  }
  return k;
}

/* The one driver of every elementwise foreach op. fns is indexed by tpurt_ctype. */
static tpurt_status fe_run(const tpurt_op_call* c, int nin, const tpurt_ew_fn fns[3], const char* op) {
  const tpurt_value* outs = fe_outs(c);
  if (!outs || c->nargs - 1 < nin) return tpurt_fail(TPURT_ERR_VALUE, "%s: malformed call", op);
  for (int k = 0; k <= nin && k < c->nargs - 1; k++) {
    tpurt_status s = fe_check_len(&c->args[k], outs->n, op);
    if (s) return s;
  }
  for (int i = 0; i < outs->n; i++) {
    const tpurt_tensor* out = &outs->tensors[i];
    tpurt_tensor in[TPURT_EW_MAX_IN];
    int64_t storage[TPURT_EW_MAX_IN][1];
    int is_int_scalar[TPURT_EW_MAX_IN];
    tpurt_promo p;
    tpurt_promo_init(&p);
    for (int k = 0; k < nin; k++) {
      tpurt_value v = fe_elem(&c->args[k], i);
      tpurt_promo_add_value(&p, &v);
      in[k] = tpurt_scalar_tensor(&v, storage[k]);
      is_int_scalar[k] = v.kind == TPURT_V_INT;
    }
    /* CPU casts a Python int to an integer common dtype first (uint8 vs -1 sees 255) */
    int common = tpurt_promo_result(&p);
    if (!tpurt_is_float(common) && common != TPURT_I64 && common != TPURT_BOOL)
      for (int k = 0; k < nin; k++)
        if (is_int_scalar[k]) {
          int64_t narrow = 0;
          tpurt_store_i64(&narrow, common, storage[k][0]);
          storage[k][0] = tpurt_load_i64(&narrow, common);
        }
    /* integer operands of a float result (div, sqrt, ...) compute in float */
    tpurt_ctype ct = tpurt_ctype_of(tpurt_promote_types(tpurt_promo_result(&p), out->dtype));
    fe_ctx k = fe_coef(c, nin, i);
    k.alpha = out->dtype == TPURT_F16 ? tpurt_f16_to_f32(tpurt_f32_to_f16((float)k.f))
              : out->dtype == TPURT_BF16 ? tpurt_round_bf16((float)k.f)
                                         : k.f;
    tpurt_status s = tpurt_ew_run(out, nin, in, ct, fns[ct], &k);
    if (s) return s;
  }
  return TPURT_OK;
}

#define FE_KERNEL(op, nin, expr)                                                         \
  FE_CHUNK(op, float, nin, expr)                                                         \
  FE_CHUNK(op, double, nin, expr)                                                        \
  FE_CHUNK(op, int64_t, nin, expr)                                                       \
  tpurt_status tpurt_kernel_foreach_##op(const tpurt_op_call* c) {                      \
    static const tpurt_ew_fn fns[3] = {fe_##op##_float, fe_##op##_double, fe_##op##_int64_t}; \
    return fe_run(c, nin, fns, "_foreach_" #op);                                         \
  }
FE_OPS(FE_KERNEL)

tpurt_status tpurt_kernel_foreach_copy(const tpurt_op_call* c) {
  /* _foreach_copy_(Tensor(a!)[] self, Tensor[] src, bool non_blocking) */
  const tpurt_value* outs = fe_outs(c);
  if (!outs || c->nargs < 3) return tpurt_fail(TPURT_ERR_VALUE, "_foreach_copy_: malformed call");
  tpurt_status s = fe_check_len(TPURT_ARG(c, foreach_copy, src), outs->n, "_foreach_copy_");
  for (int i = 0; i < outs->n && !s; i++) s = tpurt_copy_tensor(&outs->tensors[i], &TPURT_ARG(c, foreach_copy, src)->tensors[i]);
  return s;
}

/* ---------------------------------------------------------------- reductions */
/* A reduction runs through the engine too (it handles strides and dtypes): the input is
 * read as f64 and the chunk function folds it into the accumulator it is given as ctx; the
 * engine's output is a stride-0 f64 sink that nothing reads. */
typedef enum { RED_SUM_POW, RED_SUM_ABS, RED_SUM_SQ, RED_MAX_ABS, RED_MIN_ABS, RED_NONZERO, RED_MAX } fe_red_mode;
typedef struct fe_acc { fe_red_mode mode; double p, acc; } fe_acc;

static void fe_reduce_chunk(int64_t n, void* o, const void* const* in, const void* ctx) {
  fe_acc* a = (fe_acc*)ctx; /* ours: fe_reduce passes a mutable accumulator */
  const double* x = in[0];
  double acc = a->acc;
  switch (a->mode) {
    case RED_SUM_POW: for (int64_t i = 0; i < n; i++) acc += pow(fabs(x[i]), a->p); break;
    case RED_SUM_ABS: for (int64_t i = 0; i < n; i++) acc += fabs(x[i]); break;
    case RED_SUM_SQ: for (int64_t i = 0; i < n; i++) acc += x[i] * x[i]; break;
    case RED_MAX_ABS: for (int64_t i = 0; i < n; i++) acc = FE_MAX(acc, fabs(x[i])); break;
    case RED_MIN_ABS: for (int64_t i = 0; i < n; i++) acc = FE_MIN(acc, fabs(x[i])); break;
    case RED_NONZERO: for (int64_t i = 0; i < n; i++) acc += x[i] != 0; break;
    case RED_MAX: for (int64_t i = 0; i < n; i++) acc = FE_MAX(acc, x[i]); break;
  }
  a->acc = acc;
  memset(o, 0, (size_t)n * sizeof(double));
}

static double fe_reduce(const tpurt_tensor* t, fe_red_mode mode, double p) {
  fe_acc a = {mode, p, mode == RED_MIN_ABS ? INFINITY : mode == RED_MAX ? -INFINITY : 0.0};
  double sink;
  tpurt_tensor out = *t;
  out.data = &sink;
  out.dtype = TPURT_F64;
  for (int d = 0; d < out.ndim; d++) out.strides[d] = 0;
  tpurt_ew_run(&out, 1, t, TPURT_CT_F64, fe_reduce_chunk, &a);
  return a.acc;
}

/* The reduction behind a p-norm / power sum, and whether the p-th root follows. */
static fe_red_mode fe_norm_mode(double p) {
  if (p == 2) return RED_SUM_SQ;
  if (p == 1) return RED_SUM_ABS;
  if (p == 0) return RED_NONZERO;
  if (isinf(p)) return p > 0 ? RED_MAX_ABS : RED_MIN_ABS;
  return RED_SUM_POW;
}

_Static_assert(TPURT_ARG_foreach_powsum_self == TPURT_ARG_foreach_norm_self && TPURT_ARG_foreach_powsum_ord == TPURT_ARG_foreach_norm_ord,
               "fe_norm serves _foreach_norm and _foreach_powsum");
static tpurt_status fe_norm(const tpurt_op_call* c, int root, const char* op) {
  /* _foreach_norm.Scalar / _foreach_powsum.Scalar(Tensor[] self, Scalar ord, ScalarType? dtype) */
  const tpurt_value* outs = fe_outs(c);
  if (!outs || c->nargs < 3) return tpurt_fail(TPURT_ERR_VALUE, "%s: malformed call", op);
  tpurt_status s = fe_check_len(TPURT_ARG(c, foreach_norm, self), outs->n, op);
  if (s) return s;
  double p = tpurt_value_f(TPURT_ARG(c, foreach_norm, ord));
  fe_red_mode mode = fe_norm_mode(p);
  for (int i = 0; i < outs->n; i++) {
    double r = fe_reduce(&TPURT_ARG(c, foreach_norm, self)->tensors[i], mode, p);
    if (root && mode == RED_SUM_SQ) r = sqrt(r);
    else if (root && mode == RED_SUM_POW) r = pow(r, 1.0 / p);
    tpurt_store_f64(outs->tensors[i].data, outs->tensors[i].dtype, r);
  }
  return TPURT_OK;
}

tpurt_status tpurt_kernel_foreach_norm(const tpurt_op_call* c) { return fe_norm(c, 1, "_foreach_norm"); }
tpurt_status tpurt_kernel_foreach_powsum(const tpurt_op_call* c) { return fe_norm(c, 0, "_foreach_powsum"); }

tpurt_status tpurt_kernel_foreach_max(const tpurt_op_call* c) {
  /* _foreach_max(Tensor[] self) -> Tensor[] of 0-dim maxima */
  const tpurt_value* outs = fe_outs(c);
  if (!outs || c->nargs < 2) return tpurt_fail(TPURT_ERR_VALUE, "_foreach_max: malformed call");
  for (int i = 0; i < outs->n; i++) {
    const tpurt_tensor* t = &TPURT_ARG(c, foreach_max, self)->tensors[i];
    if (tpurt_numel(t) == 0)
      return tpurt_fail(TPURT_ERR_RUNTIME, "max(): Expected reduction dim to be specified for input.numel() == 0.");
    tpurt_store_f64(outs->tensors[i].data, outs->tensors[i].dtype, fe_reduce(t, RED_MAX, 0));
  }
  return TPURT_OK;
}

/* ---------------------------------------------------------------- fused Adam / AdamW */
/* The fused step is a few elementwise passes per tensor in the order of PyTorch's CPU
 * kernel; the gradient as used (sign, Adam's weight decay) is recomputed from grad and the
 * not yet updated param in each pass instead of being stored. */
typedef struct adam_ctx {
  double lr, beta1, beta2, wd, eps, step_size, bc2_sqrt;
  int adamw, maximize;
} adam_ctx;

#define ADAM_GRAD(T, k, g, p) ((T)((k)->maximize ? -(g) : (g)) + ((k)->adamw ? (T)0 : (p) * (T)(k)->wd))

#define ADAM_CHUNKS(T)                                                                         \
  /* exp_avg.lerp_(grad, 1 - beta1); in: exp_avg, grad, param */                             \
  static void adam_m_##T(int64_t n, void* o, const void* const* in, const void* vk) {          \
    const adam_ctx* k = vk;                                                                    \
    const T *m = in[0], *g = in[1], *p = in[2];                                                \
    const T w = (T)(1 - k->beta1);                                                             \
    T* r = o;                                                                                  \
    for (int64_t i = 0; i < n; i++) r[i] = FE_LERP(m[i], ADAM_GRAD(T, k, g[i], p[i]), w);      \
  }                                                                                            \
  /* exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2); in: exp_avg_sq, grad, param */  \
  static void adam_v_##T(int64_t n, void* o, const void* const* in, const void* vk) {          \
    const adam_ctx* k = vk;                                                                    \
    const T *v = in[0], *g = in[1], *p = in[2];                                                \
    T* r = o;                                                                                  \
    for (int64_t i = 0; i < n; i++) {                                                          \
      T gg = ADAM_GRAD(T, k, g[i], p[i]);                                                      \
      r[i] = v[i] * (T)k->beta2 + (T)(1 - k->beta2) * gg * gg;                                 \
    }                                                                                          \
  }                                                                                            \
  /* param update; in: param, exp_avg, exp_avg_sq (or max_exp_avg_sq) */                     \
  static void adam_p_##T(int64_t n, void* o, const void* const* in, const void* vk) {          \
    const adam_ctx* k = vk;                                                                    \
    const T *p = in[0], *m = in[1], *v = in[2];                                                \
    const T decay = k->adamw ? (T)1 - (T)(k->lr * k->wd) : (T)1;                               \
    T* r = o;                                                                                  \
    for (int64_t i = 0; i < n; i++) {                                                          \
      T denom = sqrt(v[i]) / (T)k->bc2_sqrt + (T)k->eps;                                       \
      r[i] = p[i] * decay - (T)k->step_size * m[i] / denom;                                    \
    }                                                                                          \
  }
ADAM_CHUNKS(float)
ADAM_CHUNKS(double)

/* The same step in one pass when every tensor is dense in its compute type (the common
 * case): per element the three passes' expressions in the same types and order (same
 * results), each tensor read and written once. Chunks of elements go to the pool. */
typedef struct adam_job {
  const adam_ctx* k;
  void *p, *m, *v, *vmax;
  const void* g;
} adam_job;

/* FE_LERP's branch on w, ADAM_GRAD's on the flags and amsgrad's maximum become compile-
 * time constants of one loop per case (FE_NOTRAP for the selects left), so it vectorizes. */
#define ADAM_ONE_PASS(T)                                                                   \
  FE_NOTRAP static inline __attribute__((always_inline)) void adam_loop_##T(             \
      int64_t n, const adam_ctx* k, T* restrict p, T* restrict m, T* restrict v, T* restrict vx, \
      const T* restrict g, const int adamw, const int maximize, const int ams, const int near) { \
    const T w = (T)(1 - k->beta1), b2 = (T)k->beta2, c2 = (T)(1 - k->beta2), wd = (T)k->wd;   \
    const T bc = (T)k->bc2_sqrt, eps = (T)k->eps, step = (T)k->step_size;                  \
    const T decay = adamw ? (T)1 - (T)(k->lr * k->wd) : (T)1;                              \
    for (int64_t i = 0; i < n; i++) {                                                      \
      T gi = (maximize ? -g[i] : g[i]) + (adamw ? (T)0 : p[i] * wd);                       \
      T mi = near ? m[i] + w * (gi - m[i]) : gi - (gi - m[i]) * (1 - w); /* FE_LERP */     \
      T vi = v[i] * b2 + c2 * gi * gi;                                                     \
      m[i] = mi, v[i] = vi;                                                                \
      if (ams) vi = vx[i] = FE_MAX(vx[i], vi);                                             \
      T denom = sqrt(vi) / bc + eps;                                                       \
      p[i] = p[i] * decay - step * mi / denom;                                             \
    }                                                                                      \
  }                                                                                        \
  FE_NOTRAP static void adam_all_##T(void* arg, int64_t b, int64_t e) {                  \
    const adam_job* J = arg;                                                               \
    const adam_ctx* k = J->k;                                                              \
    T *p = (T*)J->p + b, *m = (T*)J->m + b, *v = (T*)J->v + b, *vx = J->vmax ? (T*)J->vmax + b : NULL; \
    const T* g = (const T*)J->g + b;                                                       \
    int near = fabs((T)(1 - k->beta1)) < 0.5, c = k->adamw * 8 + k->maximize * 4 + (vx != NULL) * 2 + near; \
    switch (c) {                                                                           \
      ADAM_CASES(T)                                                                        \
    }                                                                                      \
  }
#define ADAM_CASE(T, c) case c: adam_loop_##T(e - b, k, p, m, v, vx, g, c >> 3 & 1, c >> 2 & 1, c >> 1 & 1, c & 1); break;
#define ADAM_CASES(T) ADAM_CASE(T, 0) ADAM_CASE(T, 1) ADAM_CASE(T, 2) ADAM_CASE(T, 3) ADAM_CASE(T, 4) \
  ADAM_CASE(T, 5) ADAM_CASE(T, 6) ADAM_CASE(T, 7) ADAM_CASE(T, 8) ADAM_CASE(T, 9) ADAM_CASE(T, 10)    \
  ADAM_CASE(T, 11) ADAM_CASE(T, 12) ADAM_CASE(T, 13) ADAM_CASE(T, 14) ADAM_CASE(T, 15)
ADAM_ONE_PASS(float)
ADAM_ONE_PASS(double)

static int adam_dense(const tpurt_tensor* t, const tpurt_tensor* param) {
  return t->dtype == param->dtype && tpurt_numel(t) == tpurt_numel(param) && tpurt_is_contiguous(t);
}

static tpurt_status adam_tensor(const adam_ctx* k, tpurt_ctype ct, const tpurt_tensor* param,
                                const tpurt_tensor* grad, const tpurt_tensor* m, const tpurt_tensor* v,
                                const tpurt_tensor* vmax) {
  int d = ct == TPURT_CT_F64;
  if ((param->dtype == TPURT_F32 || param->dtype == TPURT_F64) && adam_dense(param, param) && adam_dense(grad, param) &&
      adam_dense(m, param) && adam_dense(v, param) && (!vmax || adam_dense(vmax, param))) {
    adam_job J = {k, param->data, m->data, v->data, vmax ? vmax->data : NULL, grad->data};
    tpurt_parallel_for(tpurt_numel(param), 1 << 14, d ? adam_all_double : adam_all_float, &J);
    return TPURT_OK;
  }
  tpurt_tensor in[3] = {*m, *grad, *param};
  tpurt_status s = tpurt_ew_run(m, 3, in, ct, d ? adam_m_double : adam_m_float, k);
  in[0] = *v;
  if (!s) s = tpurt_ew_run(v, 3, in, ct, d ? adam_v_double : adam_v_float, k);
  if (!s && vmax) {
    tpurt_tensor mx[2] = {*vmax, *v};
    fe_ctx one = {1.0, 1, 1.0};
    s = tpurt_ew_run(vmax, 2, mx, ct, d ? fe_maximum_double : fe_maximum_float, &one);
  }
  tpurt_tensor pin[3] = {*param, *m, vmax ? *vmax : *v};
  if (!s) s = tpurt_ew_run(param, 3, pin, ct, d ? adam_p_double : adam_p_float, k);
  return s;
}

#define ADAMW_AGREES(x) (TPURT_ARG_fused_adamw_##x == TPURT_ARG_fused_adam_##x)
_Static_assert(ADAMW_AGREES(self) && ADAMW_AGREES(grads) && ADAMW_AGREES(exp_avgs) && ADAMW_AGREES(exp_avg_sqs) &&
                   ADAMW_AGREES(max_exp_avg_sqs) && ADAMW_AGREES(state_steps) && ADAMW_AGREES(lr) && ADAMW_AGREES(beta1) &&
                   ADAMW_AGREES(beta2) && ADAMW_AGREES(weight_decay) && ADAMW_AGREES(eps) && ADAMW_AGREES(amsgrad) &&
                   ADAMW_AGREES(maximize) && ADAMW_AGREES(grad_scale) && ADAMW_AGREES(found_inf),
               "fused_adam serves _fused_adam_ and _fused_adamw_");
#undef ADAMW_AGREES
/* the loop below checks the lists grads .. state_steps */
_Static_assert(TPURT_ARG_fused_adam_exp_avgs == TPURT_ARG_fused_adam_grads + 1 &&
                   TPURT_ARG_fused_adam_exp_avg_sqs == TPURT_ARG_fused_adam_grads + 2 &&
                   TPURT_ARG_fused_adam_max_exp_avg_sqs == TPURT_ARG_fused_adam_grads + 3 &&
                   TPURT_ARG_fused_adam_state_steps == TPURT_ARG_fused_adam_grads + 4,
               "_fused_adam_: the tensor lists grads .. state_steps in a row");
static tpurt_status fused_adam(const tpurt_op_call* c, int adamw, const char* op) {
  /* (self[], grads[], exp_avgs[], exp_avg_sqs[], max_exp_avg_sqs[], state_steps[], lr, beta1,
   *  beta2, weight_decay, eps, amsgrad, maximize, grad_scale?, found_inf?) + output list */
  if (!fe_outs(c) || c->nargs < 16) return tpurt_fail(TPURT_ERR_VALUE, "%s: malformed call", op);
  const tpurt_value* a = c->args;
  int n = a[TPURT_ARG_fused_adam_self].n, amsgrad = (int)tpurt_value_i(&a[TPURT_ARG_fused_adam_amsgrad]);
  for (int k = TPURT_ARG_fused_adam_grads; k < TPURT_ARG_fused_adam_state_steps + 1; k++) {
    if (k == TPURT_ARG_fused_adam_max_exp_avg_sqs && !amsgrad) continue;
    tpurt_status s = fe_check_len(&a[k], n, op);
    if (s) return s;
  }
  if (a[TPURT_ARG_fused_adam_found_inf].kind != TPURT_V_NONE && tpurt_value_f(&a[TPURT_ARG_fused_adam_found_inf]) == 1.0) return TPURT_OK; /* found_inf */
  adam_ctx k = {.lr = tpurt_value_f(&a[TPURT_ARG_fused_adam_lr]), .beta1 = tpurt_value_f(&a[TPURT_ARG_fused_adam_beta1]), .beta2 = tpurt_value_f(&a[TPURT_ARG_fused_adam_beta2]),
                .wd = tpurt_value_f(&a[TPURT_ARG_fused_adam_weight_decay]), .eps = tpurt_value_f(&a[TPURT_ARG_fused_adam_eps]), .adamw = adamw,
                .maximize = (int)tpurt_value_i(&a[TPURT_ARG_fused_adam_maximize])};
  for (int i = 0; i < n; i++) {
    const tpurt_tensor* param = &a[TPURT_ARG_fused_adam_self].tensors[i];
    const tpurt_tensor* grad = &a[TPURT_ARG_fused_adam_grads].tensors[i];
    if (!tpurt_is_float(param->dtype))
      return tpurt_fail(TPURT_ERR_RUNTIME, "%s: expected floating point params, got %s", op,
                        tpurt_dtype_name((tpurt_dtype)param->dtype));
    tpurt_ctype ct = tpurt_ctype_of(param->dtype);
    double step = tpurt_load_f64(a[TPURT_ARG_fused_adam_state_steps].tensors[i].data, a[TPURT_ARG_fused_adam_state_steps].tensors[i].dtype);
    k.step_size = k.lr / (1 - pow(k.beta1, step));
    k.bc2_sqrt = sqrt(1 - pow(k.beta2, step));
    tpurt_status s = TPURT_OK;
    if (a[TPURT_ARG_fused_adam_grad_scale].kind != TPURT_V_NONE) { /* grads are unscaled in place first */
      int64_t st[1]; /* 8-byte aligned scalar storage */
      tpurt_tensor gs[2] = {*grad, tpurt_scalar_tensor(&a[TPURT_ARG_fused_adam_grad_scale], st)};
      fe_ctx one = {1.0, 1, 1.0};
      s = tpurt_ew_run(grad, 2, gs, ct, ct == TPURT_CT_F64 ? fe_div_double : fe_div_float, &one);
    }
    if (!s) s = adam_tensor(&k, ct, param, grad, &a[TPURT_ARG_fused_adam_exp_avgs].tensors[i], &a[TPURT_ARG_fused_adam_exp_avg_sqs].tensors[i],
                            amsgrad ? &a[TPURT_ARG_fused_adam_max_exp_avg_sqs].tensors[i] : NULL);
    if (s) return s;
  }
  return TPURT_OK;
}

tpurt_status tpurt_kernel_fused_adam(const tpurt_op_call* c) { return fused_adam(c, 0, "_fused_adam_"); }
tpurt_status tpurt_kernel_fused_adamw(const tpurt_op_call* c) { return fused_adam(c, 1, "_fused_adamw_"); }

/* ---------------------------------------------------------------- fused SGD */
typedef struct sgd_ctx {
  double wd, momentum, lr, dampening;
  int nesterov, maximize, first;
} sgd_ctx;

/* CPU's sgd_math: g = +-grad + wd * param; buf = first ? g : momentum * buf + (1 - dampening) * g;
 * param -= lr * (momentum == 0 ? g : nesterov ? g + momentum * buf : buf) */
#define SGD_GRAD(T, k, g, p) ((T)((k)->maximize ? -(g) : (g)) + ((k)->wd != 0 ? (p) * (T)(k)->wd : (T)0))
#define SGD_CHUNKS(T)                                                                          \
  /* momentum buffer; in: buf, grad, param */                                                  \
  static void sgd_buf_##T(int64_t n, void* o, const void* const* in, const void* vk) {         \
    const sgd_ctx* k = vk;                                                                     \
    const T *b = in[0], *g = in[1], *p = in[2];                                                \
    T* r = o;                                                                                  \
    for (int64_t i = 0; i < n; i++) {                                                          \
      T gv = SGD_GRAD(T, k, g[i], p[i]);                                                       \
      r[i] = k->first ? gv : b[i] * (T)k->momentum + gv * (T)(1 - k->dampening);               \
    }                                                                                          \
  }                                                                                            \
  /* param update; in: param, grad, buf (grad again without momentum) */                     \
  static void sgd_p_##T(int64_t n, void* o, const void* const* in, const void* vk) {           \
    const sgd_ctx* k = vk;                                                                     \
    const T *p = in[0], *g = in[1], *b = in[2];                                                \
    T* r = o;                                                                                  \
    for (int64_t i = 0; i < n; i++) {                                                          \
      T gv = SGD_GRAD(T, k, g[i], p[i]);                                                       \
      if (k->momentum != 0) gv = k->nesterov ? gv + b[i] * (T)k->momentum : b[i];              \
      r[i] = p[i] - gv * (T)k->lr;                                                             \
    }                                                                                          \
  }
SGD_CHUNKS(float)
SGD_CHUNKS(double)

tpurt_status tpurt_kernel_fused_sgd(const tpurt_op_call* c) {
  /* (self[], grads[], momentum_buffer_list[], weight_decay, momentum, lr (float or Tensor),
   *  dampening, nesterov, maximize, is_first_step, grad_scale?, found_inf?) + output list */
  const char* op = "_fused_sgd_";
  if (!fe_outs(c) || c->nargs < 13) return tpurt_fail(TPURT_ERR_VALUE, "%s: malformed call", op);
  const tpurt_value* a = c->args;
  int n = a[TPURT_ARG_fused_sgd_self].n;
  sgd_ctx k = {.wd = tpurt_value_f(&a[TPURT_ARG_fused_sgd_weight_decay]), .momentum = tpurt_value_f(&a[TPURT_ARG_fused_sgd_momentum]), .dampening = tpurt_value_f(&a[TPURT_ARG_fused_sgd_dampening]),
               .nesterov = (int)tpurt_value_i(&a[TPURT_ARG_fused_sgd_nesterov]), .maximize = (int)tpurt_value_i(&a[TPURT_ARG_fused_sgd_maximize]),
               .first = (int)tpurt_value_i(&a[TPURT_ARG_fused_sgd_is_first_step])};
  k.lr = a[TPURT_ARG_fused_sgd_lr].kind == TPURT_V_TENSOR ? tpurt_load_f64(a[TPURT_ARG_fused_sgd_lr].t.data, a[TPURT_ARG_fused_sgd_lr].t.dtype) : tpurt_value_f(&a[TPURT_ARG_fused_sgd_lr]);
  tpurt_status s = fe_check_len(&a[TPURT_ARG_fused_sgd_grads], n, op);
  if (!s && k.momentum != 0) s = fe_check_len(&a[TPURT_ARG_fused_sgd_momentum_buffer_list], n, op);
  if (s) return s;
  if (a[TPURT_ARG_fused_sgd_found_inf].kind != TPURT_V_NONE && tpurt_value_f(&a[TPURT_ARG_fused_sgd_found_inf]) == 1.0) return TPURT_OK; /* found_inf */
  for (int i = 0; i < n; i++) {
    const tpurt_tensor *param = &a[TPURT_ARG_fused_sgd_self].tensors[i], *grad = &a[TPURT_ARG_fused_sgd_grads].tensors[i];
    if (!tpurt_is_float(param->dtype))
      return tpurt_fail(TPURT_ERR_RUNTIME, "%s: expected floating point params, got %s", op,
                        tpurt_dtype_name((tpurt_dtype)param->dtype));
    tpurt_ctype ct = tpurt_ctype_of(param->dtype);
    int d = ct == TPURT_CT_F64;
    if (a[TPURT_ARG_fused_sgd_grad_scale].kind != TPURT_V_NONE) { /* grads are unscaled in place first */
      int64_t st[1]; /* 8-byte aligned scalar storage */
      tpurt_tensor gs[2] = {*grad, tpurt_scalar_tensor(&a[TPURT_ARG_fused_sgd_grad_scale], st)};
      fe_ctx one = {1.0, 1, 1.0};
      s = tpurt_ew_run(grad, 2, gs, ct, d ? fe_div_double : fe_div_float, &one);
    }
    const tpurt_tensor* buf = k.momentum != 0 ? &a[TPURT_ARG_fused_sgd_momentum_buffer_list].tensors[i] : grad;
    tpurt_tensor in[3] = {*buf, *grad, *param};
    if (!s && k.momentum != 0) s = tpurt_ew_run(buf, 3, in, ct, d ? sgd_buf_double : sgd_buf_float, &k);
    tpurt_tensor pin[3] = {*param, *grad, *buf};
    if (!s) s = tpurt_ew_run(param, 3, pin, ct, d ? sgd_p_double : sgd_p_float, &k);
    if (s) return s;
  }
  return TPURT_OK;
}
