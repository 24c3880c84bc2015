/* Random kernels. Element i (row-major over the output's shape, whatever its strides) draws
 * from Philox counter rng_offset + i, so results depend only on (seed, offset, shape). */
#include "../internal.h"

typedef double (*draw_fn)(const uint32_t r[4], const double* p);

/* Fills t element by element: v = draw(philox(seed, offset + i), params). */
static tpurt_status fill_random(const tpurt_op_call* c, const tpurt_tensor* t, draw_fn draw, const double* p,
                                int integer) {
  int64_t n = tpurt_numel(t), idx[TPURT_MAX_DIMS] = {0};
  if (n == 0) return TPURT_OK;
  for (int64_t i = 0; i < n; i++) {
    uint32_t r[4];
    tpurt_philox(c->rng_seed, c->rng_offset + (uint64_t)i, r);
    double v = draw(r, p);
    char* e = tpurt_elem_ptr(t, idx);
    if (integer) tpurt_store_i64(e, t->dtype, (int64_t)v);
    else tpurt_store_f64(e, t->dtype, v);
    tpurt_next_index(idx, t->sizes, t->ndim);
  }
  return TPURT_OK;
}

static double unit(const uint32_t r[4], int k) { return tpurt_u64_to_unit_f64(r[k], r[k + 1]); }

static double draw_normal(const uint32_t r[4], const double* p) {
  double u1 = 1.0 - unit(r, 0), u2 = unit(r, 2); /* u1 in (0, 1] keeps log finite */
  return p[0] + p[1] * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
static double draw_uniform(const uint32_t r[4], const double* p) { return p[0] + (p[1] - p[0]) * unit(r, 0); }
static double draw_bernoulli(const uint32_t r[4], const double* p) { return unit(r, 0) < p[0] ? 1.0 : 0.0; }
static double draw_exponential(const uint32_t r[4], const double* p) { return -log(1.0 - unit(r, 0)) / p[0]; }
static double draw_geometric(const uint32_t r[4], const double* p) { /* trials until the first success */
  return ceil(log(1.0 - unit(r, 0)) / log1p(-p[0]));
}
static double draw_cauchy(const uint32_t r[4], const double* p) {
  return p[0] + p[1] * tan(3.141592653589793 * (unit(r, 0) - 0.5));
}
static double draw_log_normal(const uint32_t r[4], const double* p) { return exp(draw_normal(r, p)); }
static double draw_int(const uint32_t r[4], const double* p) {
  uint64_t x = (uint64_t)r[0] << 32 | r[1];
  uint64_t range = (uint64_t)p[1];
  return p[0] + (double)(range ? x % range : 0);
}

tpurt_status tpurt_kernel_normal(const tpurt_op_call* c) {
  /* normal_(Tensor(a!) self, float mean=0, float std=1, *, Generator? generator=None) */
  double p[2] = {tpurt_value_f(TPURT_ARG(c, normal, mean)), tpurt_value_f(TPURT_ARG(c, normal, std))};
  if (p[1] < 0) return tpurt_fail(TPURT_ERR_RUNTIME, "normal expects std >= 0.0, but found std %g", p[1]);
  return fill_random(c, &c->outs[0], draw_normal, p, 0);
}

tpurt_status tpurt_kernel_uniform(const tpurt_op_call* c) {
  /* uniform_(Tensor(a!) self, float from=0, float to=1, *, Generator? generator=None) */
  double p[2] = {tpurt_value_f(TPURT_ARG(c, uniform, from)), tpurt_value_f(TPURT_ARG(c, uniform, to))};
  return fill_random(c, &c->outs[0], draw_uniform, p, 0);
}

tpurt_status tpurt_kernel_bernoulli_scalar(const tpurt_op_call* c) {
  /* bernoulli_.float(Tensor(a!) self, float p=0.5, *, Generator? generator=None) */
  double p = tpurt_value_f(TPURT_ARG(c, bernoulli_scalar, p));
  if (!(p >= 0 && p <= 1)) return tpurt_fail(TPURT_ERR_RUNTIME, "bernoulli_ expects p to be in [0, 1], but got p=%g", p);
  return fill_random(c, &c->outs[0], draw_bernoulli, &p, 0);
}

/* out[i] ~ Bernoulli(prob broadcast to out) */
static tpurt_status bernoulli_draws(const tpurt_op_call* c, const tpurt_tensor* prob) {
  const tpurt_tensor* out = &c->outs[0];
  int64_t n = tpurt_numel(out), idx[TPURT_MAX_DIMS] = {0}, pidx[TPURT_MAX_DIMS];
  for (int64_t i = 0; i < n; i++) {
    for (int d = 0; d < prob->ndim; d++) { /* prob broadcasts to out (trailing dims) */
      int od = d + out->ndim - prob->ndim;
      pidx[d] = prob->sizes[d] == 1 ? 0 : idx[od];
    }
    double p = tpurt_load_f64(tpurt_elem_ptr(prob, pidx), prob->dtype);
    if (!(p >= 0 && p <= 1))
      return tpurt_fail(TPURT_ERR_RUNTIME, "Expected p_in >= 0 && p_in <= 1 to be true, but got false.");
    uint32_t r[4];
    tpurt_philox(c->rng_seed, c->rng_offset + (uint64_t)i, r);
    tpurt_store_f64(tpurt_elem_ptr(out, idx), out->dtype, draw_bernoulli(r, &p));
    tpurt_next_index(idx, out->sizes, out->ndim);
  }
  return TPURT_OK;
}

tpurt_status tpurt_kernel_bernoulli_tensor(const tpurt_op_call* c) {
  return bernoulli_draws(c, &TPURT_ARG(c, bernoulli_tensor, p)->t); /* bernoulli_.Tensor(self, p, *, gen) */
}
tpurt_status tpurt_kernel_bernoulli_self(const tpurt_op_call* c) {
  return bernoulli_draws(c, &TPURT_ARG(c, bernoulli_self, self)->t); /* bernoulli(self, *, gen): self holds p */
}

/* Largest integer that the dtype holds exactly (floats: 2^mantissa bits). */
static double dtype_int_max(int dt) {
  switch (dt) {
    case TPURT_BOOL: return 1;
    case TPURT_U8: return 255;
    case TPURT_I8: return 127;
    case TPURT_I16: return 32767;
    case TPURT_I32: return 2147483647.0;
    case TPURT_F16: return 2048;
    case TPURT_BF16: return 256;
    case TPURT_F32: return 16777216;
    default: return 9007199254740992.0;
  }
}

/* Integers from [from, to); to = NULL: up to the dtype's largest exactly held integer */
static tpurt_status random_range(const tpurt_op_call* c, double from, const tpurt_value* to) {
  const tpurt_tensor* out = &c->outs[0];
  double p[2] = {from, (!to || to->kind == TPURT_V_NONE ? dtype_int_max(out->dtype) + 1 : (double)to->i) - from};
  if (p[1] <= 0)
    return tpurt_fail(TPURT_ERR_RUNTIME, "random_ expects 'from' to be less than 'to', but got from=%g >= to=%g", p[0], p[0] + p[1]);
  return fill_random(c, out, draw_int, p, 1);
}
tpurt_status tpurt_kernel_random_int(const tpurt_op_call* c) { return random_range(c, 0, NULL); }
tpurt_status tpurt_kernel_random_to(const tpurt_op_call* c) { return random_range(c, 0, TPURT_ARG(c, random_to, to)); }
tpurt_status tpurt_kernel_random_from(const tpurt_op_call* c) {
  return random_range(c, (double)TPURT_ARG(c, random_from, from)->i, TPURT_ARG(c, random_from, to));
}

tpurt_status tpurt_kernel_exponential(const tpurt_op_call* c) {
  /* exponential_(Tensor(a!) self, float lambd=1, *, Generator? generator=None) */
  double l = tpurt_value_f(TPURT_ARG(c, exponential, lambd));
  if (!(l > 0)) return tpurt_fail(TPURT_ERR_RUNTIME, "exponential_ expects lambda > 0.0, but found lambda=%g", l);
  return fill_random(c, &c->outs[0], draw_exponential, &l, 0);
}

tpurt_status tpurt_kernel_geometric(const tpurt_op_call* c) {
  /* geometric_(Tensor(a!) self, float p, *, Generator? generator=None) */
  double p = tpurt_value_f(TPURT_ARG(c, geometric, p));
  if (!(p > 0 && p < 1)) return tpurt_fail(TPURT_ERR_RUNTIME, "geometric_ expects p to be in (0, 1), but got p=%g", p);
  return fill_random(c, &c->outs[0], draw_geometric, &p, 0);
}

tpurt_status tpurt_kernel_cauchy(const tpurt_op_call* c) {
  /* cauchy_(Tensor(a!) self, float median=0, float sigma=1, *, Generator? generator=None) */
  double p[2] = {tpurt_value_f(TPURT_ARG(c, cauchy, median)), tpurt_value_f(TPURT_ARG(c, cauchy, sigma))};
  if (!(p[1] > 0)) return tpurt_fail(TPURT_ERR_RUNTIME, "cauchy_ expects sigma > 0.0, but found sigma=%g", p[1]);
  return fill_random(c, &c->outs[0], draw_cauchy, p, 0);
}

tpurt_status tpurt_kernel_log_normal(const tpurt_op_call* c) {
  /* log_normal_(Tensor(a!) self, float mean=1, float std=2, *, Generator? generator=None) */
  double p[2] = {tpurt_value_f(TPURT_ARG(c, log_normal, mean)), tpurt_value_f(TPURT_ARG(c, log_normal, std))};
  if (!(p[1] > 0)) return tpurt_fail(TPURT_ERR_RUNTIME, "log_normal_ expects std > 0.0, but found std=%g", p[1]);
  return fill_random(c, &c->outs[0], draw_log_normal, p, 0);
}

typedef struct { double scale; } dropout_ctx;

static void scale_by_mask_f32(int64_t n, void* o, const void* const* in, const void* ctx) {
  const float *x = in[0], *m = in[1];
  float s = (float)((const dropout_ctx*)ctx)->scale, *r = o;
  for (int64_t i = 0; i < n; i++) r[i] = x[i] * m[i] * s;
}
static void scale_by_mask_f64(int64_t n, void* o, const void* const* in, const void* ctx) {
  const double *x = in[0], *m = in[1];
  double s = ((const dropout_ctx*)ctx)->scale, *r = o;
  for (int64_t i = 0; i < n; i++) r[i] = x[i] * m[i] * s;
}

static tpurt_status masked_scale(const tpurt_tensor* out, const tpurt_tensor* x, const tpurt_tensor* mask, double scale) {
  tpurt_tensor in[2] = {*x, *mask};
  dropout_ctx ctx = {scale};
  tpurt_ctype ct = x->dtype == TPURT_F64 ? TPURT_CT_F64 : TPURT_CT_F32;
  return tpurt_ew_run(out, 2, in, ct, ct == TPURT_CT_F64 ? scale_by_mask_f64 : scale_by_mask_f32, &ctx);
}

tpurt_status tpurt_kernel_native_dropout(const tpurt_op_call* c) {
  /* native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor mask) */
  const tpurt_tensor *x = &TPURT_ARG(c, native_dropout, input)->t, *out = &c->outs[0], *mask = &c->outs[1];
  double p = tpurt_value_f(TPURT_ARG(c, native_dropout, p));
  int train = TPURT_ARG(c, native_dropout, train)->kind == TPURT_V_NONE || TPURT_ARG(c, native_dropout, train)->i;
  double keep = 1.0 - p;
  if (!train || p == 0) {
    double one = 1.0;
    tpurt_value v = {.kind = TPURT_V_FLOAT, .scalar_dtype = -1, .f = one};
    int64_t st[1]; /* 8-byte aligned scalar storage */
    tpurt_tensor t = tpurt_scalar_tensor(&v, st);
    tpurt_status s = tpurt_copy_tensor(mask, &t);
    return s ? s : tpurt_copy_tensor(out, x);
  }
  tpurt_status s = fill_random(c, mask, draw_bernoulli, &keep, 0);
  if (s) return s;
  return masked_scale(out, x, mask, keep > 0 ? 1.0 / keep : 0.0);
}

tpurt_status tpurt_kernel_native_dropout_backward(const tpurt_op_call* c) {
  /* native_dropout_backward(Tensor grad_output, Tensor mask, float scale) */
  return masked_scale(&c->outs[0], &TPURT_ARG(c, native_dropout_backward, grad_output)->t, &TPURT_ARG(c, native_dropout_backward, mask)->t, tpurt_value_f(TPURT_ARG(c, native_dropout_backward, scale)));
}
