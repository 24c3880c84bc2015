/* copy, fill, conj_physical, add: the kernels every other path relies on. add is also the worked example
 * of a binary elementwise kernel: promote, pick the compute type, run one chunk function. */
#include "../internal.h"
#include "vmath.h"
#include "elementwise.h" /* ew_round_reduced */

tpurt_status tpurt_kernel_copy(const tpurt_op_call* c) {
  /* tpurt::copy(Tensor src) -> out[0] */
  return tpurt_copy_tensor(&c->outs[0], &c->args[0].t);
}

tpurt_status tpurt_kernel_fill(const tpurt_op_call* c) {
  /* fill_.Scalar(Tensor self, Scalar value) / fill_.Tensor(self, Tensor value) / zero_(self) */
  const tpurt_tensor* out = &c->outs[0];
  if (c->nargs < 2) {
    tpurt_value zero = {.kind = TPURT_V_INT, .scalar_dtype = -1, .i = 0};
    int64_t st[1]; /* 8-byte aligned scalar storage */
    tpurt_tensor z = tpurt_scalar_tensor(&zero, st);
    return tpurt_copy_tensor(out, &z);
  }
  const tpurt_value* v = TPURT_ARG(c, fill, value);
  if (v->kind == TPURT_V_TENSOR && v->t.ndim != 0)
    return tpurt_fail(TPURT_ERR_RUNTIME,
                      "fill_ only supports 0-dimension value tensor but got tensor with %d dimensions.",
                      v->t.ndim);
  tpurt_status fits = tpurt_check_scalar_fits(v, out->dtype);
  if (fits) return fits;
  int64_t st[1]; /* 8-byte aligned scalar storage */
  tpurt_tensor s = tpurt_scalar_tensor(v, st);
  return tpurt_copy_tensor(out, &s);
}

static void neg_f32(int64_t n, void* o, const void* const* in, const void* ctx) {
  (void)ctx;
  const float* x = in[0];
  float* r = o;
  for (int64_t i = 0; i < n; i++) r[i] = -x[i];
}

tpurt_status tpurt_kernel_conj_physical(const tpurt_op_call* c) {
  /* conj_physical.out(self, *, out): complex64 as (re, -im) on the float parts; real
   * tensors are their own conjugate */
  const tpurt_tensor *self = &TPURT_ARG(c, conj_physical, self)->t, *out = &c->outs[0];
  if (self->dtype != TPURT_C64 || out->dtype != TPURT_C64) return tpurt_copy_tensor(out, self);
  tpurt_tensor ore = tpurt_c64_part(out, 0), oim = tpurt_c64_part(out, 1);
  tpurt_tensor sre = tpurt_c64_part(self, 0), sim = tpurt_c64_part(self, 1);
  tpurt_status s = tpurt_copy_tensor(&ore, &sre);
  return s ? s : tpurt_ew_run(&oim, 1, &sim, TPURT_CT_F32, neg_f32, NULL);
}

typedef struct { double alpha_f; int64_t alpha_i; } add_ctx;

/* x + alpha * y: one fused multiply-add for floats, as CPU's vectorized add (one instruction
 * in the builds with FMA, a libm call in the portable one) */
#define ADD_FN(NAME, T, ALPHA, MULADD)                                      \
  static void NAME(int64_t n, void* o, const void* const* in, const void* ctx) { \
    const add_ctx* a = ctx;                                                        \
    const T *x = in[0], *y = in[1];                                                \
    T* r = o;                                                                      \
    T al = (T)a->ALPHA;                                                            \
    if (al == (T)1)                                                                \
      for (int64_t i = 0; i < n; i++) r[i] = x[i] + y[i];                          \
    else                                                                           \
      for (int64_t i = 0; i < n; i++) r[i] = MULADD(al, y[i], x[i]);               \
  }
#define INT_MULADD(a, b, c) ((c) + (a) * (b))
ADD_FN(add_f32, float, alpha_f, fmaf)
ADD_FN(add_f64, double, alpha_f, fma)
ADD_FN(add_i64, int64_t, alpha_i, INT_MULADD)

tpurt_status tpurt_kernel_add(const tpurt_op_call* c) {
  /* add(Tensor self, Tensor|Scalar other, *, Scalar alpha=1) */
  tpurt_promo p;
  tpurt_promo_init(&p);
  tpurt_promo_add_value(&p, TPURT_ARG(c, add, self));
  tpurt_promo_add_value(&p, TPURT_ARG(c, add, other));
  int common = tpurt_promo_result(&p);
  if (common == TPURT_C64) return tpurt_add_complex(c);
  tpurt_ctype ct = tpurt_ctype_of(common);
  if (common == TPURT_BOOL) ct = TPURT_CT_I64;
  int64_t s0[1], s1[1];
  tpurt_tensor in[2] = {tpurt_scalar_tensor(TPURT_ARG(c, add, self), s0), tpurt_scalar_tensor(TPURT_ARG(c, add, other), s1)};
  add_ctx ctx = {1.0, 1};
  if (c->nargs > 2 && TPURT_ARG(c, add, alpha)->kind != TPURT_V_NONE) {
    ctx.alpha_f = tpurt_value_f(TPURT_ARG(c, add, alpha));
    /* CPU's add kernel takes alpha in float16/bfloat16 when those are the common dtype */
    if (common == TPURT_F16 || common == TPURT_BF16) ctx.alpha_f = ew_round_reduced(common, (float)ctx.alpha_f);
    ctx.alpha_i = tpurt_value_i(TPURT_ARG(c, add, alpha));
  }
  tpurt_ew_fn fn = ct == TPURT_CT_F32 ? add_f32 : ct == TPURT_CT_F64 ? add_f64 : add_i64;
  const tpurt_ew_via via = {common, 3, 1};
  return tpurt_ew_run_via(&c->outs[0], ct, 2, in, ct, &via, fn, &ctx);
}
