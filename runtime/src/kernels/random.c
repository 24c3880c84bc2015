/* Random kernels. Element i (row-major over the output's shape, whatever its strides) draws
 * from Philox counter rng_offset + i, so results depend only on (seed, offset, shape): the
 * pool's threads fill blocks of elements in any order, and Philox runs RNG_LANES counters at
 * once in lanes the compiler vectorizes (the same words as tpurt_philox). */
#include <stdlib.h>

#include "random.h"

#define RNG_LANES 16
#define RNG_GRAIN 8192 /* elements a pool thread claims at once */

/* Philox 4x32-10 of counters counter .. counter + RNG_LANES - 1: word w of counter j in r[w][j]. */
static void philox_lanes(uint64_t seed, uint64_t counter, uint32_t r[4][RNG_LANES]) {
  uint32_t c0[RNG_LANES], c1[RNG_LANES], c2[RNG_LANES] = {0}, c3[RNG_LANES] = {0};
  for (int j = 0; j < RNG_LANES; j++) {
    uint64_t ctr = counter + (uint64_t)j;
    c0[j] = (uint32_t)ctr;
    c1[j] = (uint32_t)(ctr >> 32);
  }
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int round = 0; round < 10; round++) {
    for (int j = 0; j < RNG_LANES; j++) tpurt_philox_round(&c0[j], &c1[j], &c2[j], &c3[j], k0, k1);
    k0 += TPURT_PHILOX_W0;
    k1 += TPURT_PHILOX_W1;
  }
  memcpy(r[0], c0, sizeof c0);
  memcpy(r[1], c1, sizeof c1);
  memcpy(r[2], c2, sizeof c2);
  memcpy(r[3], c3, sizeof c3);
}

typedef struct {
  const tpurt_op_call* c;
  const tpurt_tensor* t;
  double p[2]; /* the draw's parameters */
  int integer;
  int64_t from;   /* random_'s integers: from + (64 random bits mod range), in int64 */
  uint64_t range; /* 0: the full 2^64 */
} fill_job;

/* fill_<draw>(job, b, e): elements [b, e) of the job's tensor, v = draw(philox(seed, offset + i),
 * params); one function per draw so that the draw inlines into the loop. */
#define FILL_BLOCK(draw)                                                                          \
  static void fill_##draw(void* arg, int64_t b, int64_t e) {                                     \
    const fill_job* J = arg;                                                                      \
    const tpurt_tensor* t = J->t;                                                                 \
    const double p[2] = {J->p[0], J->p[1]};           /* locals: the stores cannot alias them */   \
    int64_t idx[TPURT_MAX_DIMS] = {0};                                                            \
    tpurt_unravel(b, t->sizes, t->ndim, idx);                                                     \
    int contiguous = tpurt_is_contiguous(t);                                                     \
    float* dense = !J->integer && t->dtype == TPURT_F32 && contiguous ? (float*)t->data : NULL;   \
    uint8_t* mask = !J->integer && t->dtype == TPURT_BOOL && contiguous ? (uint8_t*)t->data : NULL; \
    uint32_t r[4][RNG_LANES];                                                                     \
    for (int64_t i0 = b; i0 < e; i0 += RNG_LANES) {                                               \
      philox_lanes(J->c->rng_seed, J->c->rng_offset + (uint64_t)i0, r);                           \
      int m = e - i0 < RNG_LANES ? (int)(e - i0) : RNG_LANES;                                     \
      if (dense) {                                                                                \
        for (int j = 0; j < m; j++) {                                                             \
          const uint32_t w[4] = {r[0][j], r[1][j], r[2][j], r[3][j]};                            \
          dense[i0 + j] = (float)draw_##draw(w, p);                                            \
        }                                                                                         \
        continue;                                                                                 \
      }                                                                                           \
      if (mask) { /* dropout's: bool as copy_ converts, nonzero (NaN too) to true */              \
        for (int j = 0; j < m; j++) {                                                             \
          const uint32_t w[4] = {r[0][j], r[1][j], r[2][j], r[3][j]};                            \
          mask[i0 + j] = draw_##draw(w, p) != 0;                                                  \
        }                                                                                         \
        continue;                                                                                 \
      }                                                                                           \
      for (int j = 0; j < m; j++) {                                                               \
        const uint32_t w[4] = {r[0][j], r[1][j], r[2][j], r[3][j]};                              \
        double v = draw_##draw(w, p);                                                          \
        char* el = tpurt_elem_ptr(t, idx);                                                        \
        if (J->integer) tpurt_store_i64(el, t->dtype, (int64_t)v);                                \
        else tpurt_store_f64(el, t->dtype, v);                                                    \
        tpurt_next_index(idx, t->sizes, t->ndim);                                                 \
      }                                                                                           \
    }                                                                                             \
  }

static tpurt_status fill_random(const tpurt_op_call* c, const tpurt_tensor* t, tpurt_pool_fn fill, const double* p,
                                int np, int integer) {
  fill_job J = {.c = c, .t = t, .integer = integer};
  memcpy(J.p, p, sizeof(double) * (size_t)np);
  tpurt_parallel_for(tpurt_numel(t), RNG_GRAIN, fill, &J);
  return TPURT_OK;
}

static inline double unit(const uint32_t r[4], int k) { return tpurt_u64_to_unit_f64(r[k], r[k + 1]); }

/* p: mean, std; in float for every dtype but float64 (random.h) */
static inline double draw_normal(const uint32_t r[4], const double* p) { return p[0] + p[1] * tpurt_std_normal_f32(r); }
static inline double draw_normal_f64(const uint32_t r[4], const double* p) { return p[0] + p[1] * tpurt_std_normal_f64(r); }
static inline double draw_uniform(const uint32_t r[4], const double* p) { return p[0] + (p[1] - p[0]) * unit(r, 0); }
static inline double draw_bernoulli(const uint32_t r[4], const double* p) { return unit(r, 0) < p[0] ? 1.0 : 0.0; }
static inline double draw_exponential(const uint32_t r[4], const double* p) { return -log(1.0 - unit(r, 0)) / p[0]; }
static inline double draw_geometric(const uint32_t r[4], const double* p) { /* trials until the first success */
  return ceil(log(1.0 - unit(r, 0)) / log1p(-p[0]));
}
static inline double draw_cauchy(const uint32_t r[4], const double* p) {
  return p[0] + p[1] * tan(3.141592653589793 * (unit(r, 0) - 0.5));
}
static inline double draw_log_normal(const uint32_t r[4], const double* p) { return exp(draw_normal_f64(r, p)); }
FILL_BLOCK(normal)
FILL_BLOCK(normal_f64)
FILL_BLOCK(uniform)
FILL_BLOCK(bernoulli)
FILL_BLOCK(exponential)
FILL_BLOCK(geometric)
FILL_BLOCK(cauchy)
FILL_BLOCK(log_normal)

/* CPU's continuous draws have no integer kernels: its NotImplementedError, in its kernel's name */
static tpurt_status floats_only(const tpurt_op_call* c, const char* kernel) {
  int dt = c->outs[0].dtype;
  if (tpurt_is_float(dt) || dt == TPURT_C64) return TPURT_OK;
  return tpurt_fail(TPURT_ERR_UNSUPPORTED, "\"%s\" not implemented for '%s'", kernel, tpurt_dtype_c10_name((tpurt_dtype)dt));
}

tpurt_status tpurt_kernel_normal(const tpurt_op_call* c) {
  /* normal_(Tensor(a!) self, float mean=0, float std=1, *, Generator? generator=None) */
  double p[2] = {tpurt_value_f(TPURT_ARG(c, normal, mean)), tpurt_value_f(TPURT_ARG(c, normal, std))};
  tpurt_status s = floats_only(c, "normal_kernel_cpu");
  if (s) return s;
  if (p[1] < 0) return tpurt_fail(TPURT_ERR_RUNTIME, "normal expects std >= 0.0, but found std %g", p[1]);
  return fill_random(c, &c->outs[0], c->outs[0].dtype == TPURT_F64 ? fill_normal_f64 : fill_normal, p, 2, 0);
}

tpurt_status tpurt_kernel_uniform(const tpurt_op_call* c) {
  /* uniform_(Tensor(a!) self, float from=0, float to=1, *, Generator? generator=None) */
  double p[2] = {tpurt_value_f(TPURT_ARG(c, uniform, from)), tpurt_value_f(TPURT_ARG(c, uniform, to))};
  tpurt_status s = floats_only(c, "check_uniform_bounds");
  return s ? s : fill_random(c, &c->outs[0], fill_uniform, p, 2, 0);
}

tpurt_status tpurt_kernel_bernoulli_scalar(const tpurt_op_call* c) {
  /* bernoulli_.float(Tensor(a!) self, float p=0.5, *, Generator? generator=None) */
  double p = tpurt_value_f(TPURT_ARG(c, bernoulli_scalar, p));
  if (!(p >= 0 && p <= 1)) return tpurt_fail(TPURT_ERR_RUNTIME, "bernoulli_ expects p to be in [0, 1], but got p=%g", p);
  return fill_random(c, &c->outs[0], fill_bernoulli, &p, 1, 0);
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

/* random_'s integers, exact in int64 (a double would round draws above 2^53) */
static void fill_int(void* arg, int64_t b, int64_t e) {
  const fill_job* J = arg;
  const tpurt_tensor* t = J->t;
  int64_t idx[TPURT_MAX_DIMS] = {0};
  tpurt_unravel(b, t->sizes, t->ndim, idx);
  uint32_t r[4][RNG_LANES];
  for (int64_t i0 = b; i0 < e; i0 += RNG_LANES) {
    philox_lanes(J->c->rng_seed, J->c->rng_offset + (uint64_t)i0, r);
    int m = e - i0 < RNG_LANES ? (int)(e - i0) : RNG_LANES;
    for (int j = 0; j < m; j++) {
      uint64_t x = (uint64_t)r[0][j] << 32 | r[1][j];
      tpurt_store_i64(tpurt_elem_ptr(t, idx), t->dtype, (int64_t)((uint64_t)J->from + (J->range ? x % J->range : x)));
      tpurt_next_index(idx, t->sizes, t->ndim);
    }
  }
}

/* std::numeric_limits<scalar_t>::digits of a float dtype */
static int float_digits(int dt) { return dt == TPURT_F16 ? 11 : dt == TPURT_BF16 ? 8 : dt == TPURT_F32 ? 24 : 53; }
/* the dtype's largest value (floats: 2^digits, the largest integer below which all are held) */
static int64_t random_max(int dt) {
  switch (dt) {
    case TPURT_BOOL: return 1;
    case TPURT_U8: return UINT8_MAX;
    case TPURT_I8: return INT8_MAX;
    case TPURT_I16: return INT16_MAX;
    case TPURT_I32: return INT32_MAX;
    case TPURT_I64: return INT64_MAX;
    default: return (int64_t)1 << float_digits(dt);
  }
}
static int64_t random_lowest(int dt) { return tpurt_is_float(dt) ? INT64_MIN : tpurt_int_lowest(dt); }
/* v as the dtype holds it (CPU's static_cast<scalar_t>(v)), back in int64 */
static int64_t held_as(int dt, int64_t v) {
  unsigned char b[8];
  tpurt_store_f64(b, dt, (double)v);
  double h = tpurt_load_f64(b, dt);
  return h >= 0x1p63 ? INT64_MAX : h < -0x1p63 ? INT64_MIN : (int64_t)h;
}
/* CPU's update_from / update_to: a bound the float dtype rounds past moves inside by one step */
static int64_t log2_floor(uint64_t v) {
  int64_t n = 0;
  while (v >>= 1) ++n;
  return n;
}
static int64_t update_from(int dt, int64_t from) {
  int64_t up = held_as(dt, from + 1);
  if (up < from) from = up + ((int64_t)1 << (log2_floor((uint64_t)llabs(from + 1)) - float_digits(dt) + 1));
  return from;
}
static int64_t update_to(int dt, int64_t to) {
  int64_t down = held_as(dt, to - 1);
  if (down >= to) to = down - ((int64_t)1 << (log2_floor((uint64_t)llabs(to - 1)) - float_digits(dt) + 1));
  return to;
}
/* CPU's check_from_to_in_range, in its words (the dtype as caffe2 names it); floats' precision
 * warnings are raised by torch_tpu/tpu_checks.py */
static const char* typemeta_name(int dt) {
  static const char* names[] = {[TPURT_BOOL] = "bool", [TPURT_U8] = "unsigned char", [TPURT_I8] = "signed char",
                                [TPURT_I16] = "short int", [TPURT_I32] = "int", [TPURT_I64] = "long int",
                                [TPURT_F16] = "c10::Half", [TPURT_BF16] = "c10::BFloat16", [TPURT_F32] = "float",
                                [TPURT_F64] = "double"};
  return names[dt];
}
static tpurt_status from_to_in_range(int dt, int64_t from, int64_t to_inc) {
  double lo = dt == TPURT_F16 ? -65504.0 : (double)random_lowest(dt), hi = dt == TPURT_F16 ? 65504.0 : tpurt_is_float(dt) ? 0x1p63 : (double)random_max(dt);
  if (!((double)from >= lo && (double)from <= hi)) return tpurt_fail(TPURT_ERR_RUNTIME, "from is out of bounds for %s", typemeta_name(dt));
  if (!((double)to_inc >= lo && (double)to_inc <= hi)) return tpurt_fail(TPURT_ERR_RUNTIME, "to - 1 is out of bounds for %s", typemeta_name(dt));
  return TPURT_OK;
}

/* random_ (to = NULL, default: [0, the dtype's largest]), random_.to ([0, to)), random_.from
 * ([from, to), or [from, the dtype's largest] without to): CPU's random_from_to_impl */
static tpurt_status random_range(const tpurt_op_call* c, int64_t from, const tpurt_value* to, int default_range) {
  const tpurt_tensor* out = &c->outs[0];
  int dt = out->dtype, fl = tpurt_is_float(dt);
  fill_job J = {.c = c, .t = out, .integer = 1, .from = from};
  tpurt_status s = TPURT_OK;
  if (default_range) {
    J.range = (uint64_t)random_max(dt) + 1;
  } else if (to && to->kind != TPURT_V_NONE) {
    int64_t t = to->i;
    if (from >= t)
      return tpurt_fail(TPURT_ERR_RUNTIME, "random_ expects 'from' to be less than 'to', but got from=%lld >= to=%lld",
                        (long long)from, (long long)t);
    if (fl) {
      from = update_from(dt, from), t = update_to(dt, t);
      if (from >= t)
        return tpurt_fail(TPURT_ERR_RUNTIME, "random_ expects 'from' casted to dtype to be less than 'to' casted to "
                          "dtype, but got from=%lld >= to=%lld", (long long)from, (long long)t);
    }
    if ((s = from_to_in_range(dt, from, t - 1))) return s;
    J.from = from, J.range = (uint64_t)t - (uint64_t)from;
  } else if (from != INT64_MIN) {
    int64_t to_inc = random_max(dt);
    if (fl) {
      from = update_from(dt, from);
      if (from >= to_inc)
        return tpurt_fail(TPURT_ERR_RUNTIME, "random_ expects 'from' casted to dtype to be less than or equal to "
                          "'to_inc' casted to dtype, but got from=%lld > to_inc=%lld", (long long)from, (long long)to_inc);
    }
    if ((s = from_to_in_range(dt, from, to_inc))) return s;
    J.from = from, J.range = (uint64_t)to_inc - (uint64_t)from + 1;
  } else if (dt == TPURT_F16 || dt == TPURT_BOOL) { /* the full 2^64: CPU's kernel has no such dtype */
    return tpurt_fail(TPURT_ERR_UNSUPPORTED, "\"random_full_64_bits_range_kernel_cpu\" not implemented for '%s'",
                      tpurt_dtype_c10_name((tpurt_dtype)dt));
  } else if (dt != TPURT_I64 && dt != TPURT_F64 && dt != TPURT_F32 && dt != TPURT_BF16) {
    return tpurt_fail(TPURT_ERR_RUNTIME, "random_full_64_bits_range_kernel_cpu handles only int64, double, float and "
                      "bfloat16");
  }
  tpurt_parallel_for(tpurt_numel(out), RNG_GRAIN, fill_int, &J);
  return TPURT_OK;
}
tpurt_status tpurt_kernel_random_int(const tpurt_op_call* c) { return random_range(c, 0, NULL, 1); }
tpurt_status tpurt_kernel_random_to(const tpurt_op_call* c) { return random_range(c, 0, TPURT_ARG(c, random_to, to), 0); }
tpurt_status tpurt_kernel_random_from(const tpurt_op_call* c) {
  return random_range(c, TPURT_ARG(c, random_from, from)->i, TPURT_ARG(c, random_from, to), 0);
}

tpurt_status tpurt_kernel_exponential(const tpurt_op_call* c) {
  /* exponential_(Tensor(a!) self, float lambd=1, *, Generator? generator=None) */
  double l = tpurt_value_f(TPURT_ARG(c, exponential, lambd));
  if (!(l > 0)) return tpurt_fail(TPURT_ERR_RUNTIME, "exponential_ expects lambda > 0.0, but found lambda=%g", l);
  return fill_random(c, &c->outs[0], fill_exponential, &l, 1, 0);
}

tpurt_status tpurt_kernel_geometric(const tpurt_op_call* c) {
  /* geometric_(Tensor(a!) self, float p, *, Generator? generator=None) */
  double p = tpurt_value_f(TPURT_ARG(c, geometric, p));
  if (c->outs[0].dtype == TPURT_BOOL) return tpurt_fail(TPURT_ERR_UNSUPPORTED, "\"geometric_cpu\" not implemented for 'Bool'");
  if (!(p > 0 && p < 1)) return tpurt_fail(TPURT_ERR_RUNTIME, "geometric_ expects p to be in (0, 1), but got p=%g", p);
  return fill_random(c, &c->outs[0], fill_geometric, &p, 1, 0);
}

tpurt_status tpurt_kernel_cauchy(const tpurt_op_call* c) {
  /* cauchy_(Tensor(a!) self, float median=0, float sigma=1, *, Generator? generator=None) */
  double p[2] = {tpurt_value_f(TPURT_ARG(c, cauchy, median)), tpurt_value_f(TPURT_ARG(c, cauchy, sigma))};
  if (!(p[1] > 0)) return tpurt_fail(TPURT_ERR_RUNTIME, "cauchy_ expects sigma > 0.0, but found sigma=%g", p[1]);
  return fill_random(c, &c->outs[0], fill_cauchy, p, 2, 0);
}

tpurt_status tpurt_kernel_log_normal(const tpurt_op_call* c) {
  /* log_normal_(Tensor(a!) self, float mean=1, float std=2, *, Generator? generator=None) */
  double p[2] = {tpurt_value_f(TPURT_ARG(c, log_normal, mean)), tpurt_value_f(TPURT_ARG(c, log_normal, std))};
  tpurt_status s = floats_only(c, "log_normal_cpu");
  if (s) return s;
  if (!(p[1] > 0)) return tpurt_fail(TPURT_ERR_RUNTIME, "log_normal_ expects std > 0.0, but found std=%g", p[1]);
  return fill_random(c, &c->outs[0], fill_log_normal, p, 2, 0);
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
  tpurt_status s = fill_random(c, mask, fill_bernoulli, &keep, 1, 0);
  if (s) return s;
  return masked_scale(out, x, mask, keep > 0 ? 1.0 / keep : 0.0);
}

tpurt_status tpurt_kernel_native_dropout_backward(const tpurt_op_call* c) {
  /* native_dropout_backward(Tensor grad_output, Tensor mask, float scale) */
  return masked_scale(&c->outs[0], &TPURT_ARG(c, native_dropout_backward, grad_output)->t, &TPURT_ARG(c, native_dropout_backward, mask)->t, tpurt_value_f(TPURT_ARG(c, native_dropout_backward, scale)));
}
