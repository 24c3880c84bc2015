/* Odds and ends: diag_embed, trace, linalg_cross, cdist (forward and backward), complex,
 * polar, and the random ops that are not plain fills: multinomial, randperm, normal with
 * tensor parameters. Random ops draw from Philox counter rng_offset + i for output element i
 * (row-major), like random.c. */
#include "cmplx.h"
#include <stdlib.h>

#include "random.h"
#include "reduce.h"

/* ---------------------------------------------------------------- small helpers */
static char* at(const tpurt_tensor* t, int64_t off) {
  return (char*)t->data + off * (int64_t)tpurt_dtype_size((tpurt_dtype)t->dtype);
}

/* Strides of t broadcast to a shape of ndim dims (missing or size-1 dims: stride 0). */
static void bcast_strides(const tpurt_tensor* t, int ndim, int64_t* st) {
  for (int d = 0; d < ndim; d++) {
    int td = d - (ndim - t->ndim);
    st[d] = td < 0 || t->sizes[td] == 1 ? 0 : t->strides[td];
  }
}

static int64_t dot(const int64_t* idx, const int64_t* st, int n) {
  int64_t o = 0;
  for (int d = 0; d < n; d++) o += idx[d] * st[d];
  return o;
}

/* A temporary's bytes as temp.c takes them from the call's scratch. */

static tpurt_status fill_zero(const tpurt_tensor* t) {
  tpurt_value z = {.kind = TPURT_V_INT, .scalar_dtype = -1, .i = 0};
  int64_t st[1]; /* 8-byte aligned scalar storage */
  tpurt_tensor s = tpurt_scalar_tensor(&z, st);
  return tpurt_copy_tensor(t, &s);
}

/* ---------------------------------------------------------------- diag_embed / trace */
tpurt_status tpurt_kernel_diag_embed(const tpurt_op_call* c) {
  /* diag_embed(self, offset, dim1, dim2): zeros, then self's last dim copied onto the
   * (offset) diagonal of out's dims dim1/dim2 through a strided view of that diagonal */
  const tpurt_tensor *in = &TPURT_ARG(c, diag_embed, self)->t, *out = &c->outs[0];
  int64_t off = TPURT_ARG(c, diag_embed, offset)->i;
  int d1, d2;
  tpurt_status s = tpurt_wrap_dim(TPURT_ARG(c, diag_embed, dim1)->i, out->ndim, &d1);
  if (!s) s = tpurt_wrap_dim(TPURT_ARG(c, diag_embed, dim2)->i, out->ndim, &d2);
  if (!s) s = fill_zero(out);
  if (s || tpurt_numel(in) == 0) return s;
  tpurt_tensor diag = {.dtype = out->dtype, .ndim = 0};
  for (int d = 0; d < out->ndim; d++) {
    if (d == d1 || d == d2) continue;
    diag.sizes[diag.ndim] = out->sizes[d];
    diag.strides[diag.ndim++] = out->strides[d];
  }
  diag.sizes[diag.ndim] = in->ndim ? in->sizes[in->ndim - 1] : 1;
  diag.strides[diag.ndim++] = out->strides[d1] + out->strides[d2];
  diag.data = at(out, (off < 0 ? -off : 0) * out->strides[d1] + (off > 0 ? off : 0) * out->strides[d2]);
  return tpurt_copy_tensor(&diag, in);
}

tpurt_status tpurt_kernel_eye(const tpurt_op_call* c) {
  /* eye.out(n, *, out) / eye.m_out(n, m, *, out): zeros, then ones written through a strided
   * view of the main diagonal */
  const tpurt_tensor* out = &c->outs[0];
  tpurt_status s = fill_zero(out);
  if (s || out->ndim != 2) return s;
  tpurt_tensor diag = {.data = out->data, .dtype = out->dtype, .ndim = 1};
  diag.sizes[0] = out->sizes[0] < out->sizes[1] ? out->sizes[0] : out->sizes[1];
  diag.strides[0] = out->strides[0] + out->strides[1];
  tpurt_value one = {.kind = TPURT_V_INT, .scalar_dtype = -1, .i = 1};
  int64_t st[1]; /* 8-byte aligned scalar storage */
  tpurt_tensor v = tpurt_scalar_tensor(&one, st);
  return tpurt_copy_tensor(&diag, &v);
}

/* linspace.out / logspace.out as CPU's kernel computes them: the first half of the points
 * counts up from `a` and the second half down from `b`, so both ends are exact. f32 works in
 * float; 16-bit floats round their endpoints, and linspace rounds after every operation like
 * c10::Half while logspace steps in float; integer outputs take truncated endpoints and a
 * double step; a single point is the start itself (logspace: base^start in double). */
static double spaced_point(int dt, double a, double b, int64_t steps, int64_t i, int log_base) {
  int64_t k = i < steps / 2 ? i : steps - i - 1; /* steps from the nearer end */
  if (dt == TPURT_F32 || ((dt == TPURT_F16 || dt == TPURT_BF16) && log_base)) {
    float fa = (float)(dt == TPURT_F32 ? a : tpurt_round_to(dt, a)), fb = (float)(dt == TPURT_F32 ? b : tpurt_round_to(dt, b));
    float step = (fb - fa) / (float)(steps - 1);
    return i < steps / 2 ? fa + step * (float)k : fb - step * (float)k;
  }
  if (dt == TPURT_F16 || dt == TPURT_BF16) {
    double ha = tpurt_round_to(dt, a), hb = tpurt_round_to(dt, b);
    double step = tpurt_round_to(dt, tpurt_round_to(dt, hb - ha) / tpurt_round_to(dt, (double)(steps - 1)));
    double d = tpurt_round_to(dt, step * tpurt_round_to(dt, (double)k));
    return tpurt_round_to(dt, i < steps / 2 ? ha + d : hb - d);
  }
  double step = (b - a) / (double)(steps - 1);
  return i < steps / 2 ? a + step * (double)k : b - step * (double)k;
}

double tpurt_linspace_point(int dtype, double a, double b, int64_t steps, int64_t i) {
  return steps == 1 ? a : spaced_point(dtype, a, b, steps, i, 0);
}

static tpurt_c64 value_c64(const tpurt_value* v) {
  if (v->kind == TPURT_V_COMPLEX) return (tpurt_c64){(float)v->c[0], (float)v->c[1]};
  return (tpurt_c64){(float)tpurt_value_f(v), 0};
}

/* std::pow(double base, std::complex<double> y) as libstdc++ computes it. */
static double complex pow_real_base(double base, double complex y) {
  if (base > 0) {
    double r = pow(base, creal(y)), theta = cimag(y) * log(base);
    return CMPLX(r * cos(theta), r * sin(theta));
  }
  return cpow(CMPLX(base, 0), y);
}

/* complex64 linspace / logspace in c10::complex<float> arithmetic, as CPU: linspace divides
 * (end - start) by steps - 1 part by part; logspace divides by complex(steps - 1), which c10
 * does as a multiplication by the reciprocal, and raises the double base to each point in
 * double (a single point: base^start with start in double). */
_Static_assert(TPURT_ARG_logspace_start == TPURT_ARG_linspace_start && TPURT_ARG_logspace_end == TPURT_ARG_linspace_end &&
                   TPURT_ARG_logspace_steps == TPURT_ARG_linspace_steps,
               "spaced and spaced_c64 serve linspace and logspace (base: logspace only)");
static void spaced_c64(const tpurt_op_call* c, int64_t steps, int log_base) {
  const tpurt_tensor* out = &c->outs[0];
  double base = log_base ? tpurt_value_f(TPURT_ARG(c, logspace, base)) : 0;
  tpurt_c64 a = value_c64(TPURT_ARG(c, linspace, start)), b = value_c64(TPURT_ARG(c, linspace, end)), step = {0, 0};
  if (steps > 1) {
    float n1 = (float)(steps - 1), dre = b.re - a.re, dim = b.im - a.im;
    if (log_base) {
      float rat = 0.0f / n1, scl = 1.0f / (n1 + 0.0f * rat);
      step = (tpurt_c64){(dre + dim * rat) * scl, (dim - dre * rat) * scl};
    } else {
      step = (tpurt_c64){dre / n1, dim / n1};
    }
  }
  for (int64_t i = 0; i < steps; i++) {
    int up = i < steps / 2;
    float k = (float)(up ? i : steps - i - 1);
    tpurt_c64 v, sk = log_base ? (tpurt_c64){step.re * k - step.im * 0.0f, step.re * 0.0f + step.im * k}
                               : (tpurt_c64){step.re * k, step.im * k};
    v = up ? (tpurt_c64){a.re + sk.re, a.im + sk.im} : (tpurt_c64){b.re - sk.re, b.im - sk.im};
    if (steps == 1) v = a;
    if (log_base) {
      const tpurt_value* s0 = TPURT_ARG(c, linspace, start);
      double complex y = steps == 1 ? CMPLX(s0->kind == TPURT_V_COMPLEX ? s0->c[0] : tpurt_value_f(s0),
                                            s0->kind == TPURT_V_COMPLEX ? s0->c[1] : 0)
                                    : CMPLX((double)v.re, (double)v.im);
      double complex r = pow_real_base(base, y);
      v = (tpurt_c64){(float)creal(r), (float)cimag(r)};
    }
    memcpy(at(out, tpurt_element_offset(out, i)), &v, sizeof v);
  }
}

static tpurt_status spaced(const tpurt_op_call* c, int log_base) {
  const tpurt_tensor* out = &c->outs[0];
  int64_t steps = TPURT_ARG(c, linspace, steps)->i;
  if (steps < 0) return tpurt_fail(TPURT_ERR_RUNTIME, "number of steps must be non-negative");
  if (out->dtype == TPURT_C64) {
    spaced_c64(c, steps, log_base);
    return TPURT_OK;
  }
  double a = tpurt_value_f(TPURT_ARG(c, linspace, start)), b = tpurt_value_f(TPURT_ARG(c, linspace, end));
  double base = log_base ? tpurt_value_f(TPURT_ARG(c, logspace, base)) : 0;
  int integer = !tpurt_is_float(out->dtype);
  if (integer) a = trunc(a), b = trunc(b);
  for (int64_t i = 0; i < steps; i++) {
    double x = steps == 1 ? a : spaced_point(out->dtype, a, b, steps, i, log_base), v = x;
    if (log_base) v = steps == 1 || out->dtype == TPURT_F64 || integer ? pow(base, x) : powf((float)base, (float)x);
    if (integer) tpurt_store_i64(at(out, tpurt_element_offset(out, i)), out->dtype, (int64_t)v);
    else tpurt_store_f64(at(out, tpurt_element_offset(out, i)), out->dtype, v);
  }
  return TPURT_OK;
}

tpurt_status tpurt_kernel_linspace(const tpurt_op_call* c) {
  /* linspace.out(Scalar start, Scalar end, int steps, *, Tensor(a!) out) */
  return spaced(c, 0);
}

tpurt_status tpurt_kernel_logspace(const tpurt_op_call* c) {
  /* logspace.out(Scalar start, Scalar end, int steps, float base=10.0, *, Tensor(a!) out) */
  return spaced(c, 1);
}

tpurt_status tpurt_kernel_trace(const tpurt_op_call* c) {
  /* trace(self): sum of the main diagonal of a matrix, in double or int64 */
  const tpurt_tensor* in = &TPURT_ARG(c, trace, self)->t;
  if (in->ndim != 2) return tpurt_fail(TPURT_ERR_RUNTIME, "trace: expected a matrix, but got tensor with dim %d", in->ndim);
  int64_t n = in->sizes[0] < in->sizes[1] ? in->sizes[0] : in->sizes[1], st = in->strides[0] + in->strides[1];
  int as_int = !tpurt_is_float(in->dtype);
  double f = 0;
  int64_t i = 0;
  for (int64_t k = 0; k < n; k++) {
    if (as_int) i = (int64_t)((uint64_t)i + (uint64_t)tpurt_load_i64(at(in, k * st), in->dtype));
    else f += tpurt_load_f64(at(in, k * st), in->dtype);
  }
  if (as_int) tpurt_store_i64(c->outs[0].data, c->outs[0].dtype, i);
  else tpurt_store_f64(c->outs[0].data, c->outs[0].dtype, f);
  return TPURT_OK;
}

/* ---------------------------------------------------------------- linalg_cross */
tpurt_status tpurt_kernel_linalg_cross(const tpurt_op_call* c) {
  /* linalg_cross(self, other, *, dim): inputs broadcast to out; dim has size 3 */
  const tpurt_tensor *a = &TPURT_ARG(c, linalg_cross, self)->t, *b = &TPURT_ARG(c, linalg_cross, other)->t, *out = &c->outs[0];
  int dim, nd = out->ndim;
  tpurt_status s = tpurt_wrap_dim(TPURT_ARG(c, linalg_cross, dim)->i, nd, &dim);
  if (s) return s;
  if (out->sizes[dim] != 3)
    return tpurt_fail(TPURT_ERR_RUNTIME, "linalg.cross: inputs dimension %d must have length 3. Got %lld and %lld",
                      dim, (long long)out->sizes[dim], (long long)out->sizes[dim]);
  if (tpurt_numel(out) == 0) return TPURT_OK;
  int64_t sa[TPURT_MAX_DIMS], sb[TPURT_MAX_DIMS], sizes[TPURT_MAX_DIMS], idx[TPURT_MAX_DIMS] = {0};
  bcast_strides(a, nd, sa);
  bcast_strides(b, nd, sb);
  memcpy(sizes, out->sizes, sizeof sizes);
  sizes[dim] = 1;
  int as_int = !tpurt_is_float(out->dtype);
  do {
    int64_t oa = dot(idx, sa, nd), ob = dot(idx, sb, nd), oo = dot(idx, out->strides, nd);
    if (as_int) {
      int64_t x[3], y[3];
      for (int k = 0; k < 3; k++) {
        x[k] = tpurt_load_i64(at(a, oa + k * sa[dim]), a->dtype);
        y[k] = tpurt_load_i64(at(b, ob + k * sb[dim]), b->dtype);
      }
      for (int k = 0; k < 3; k++) {
        int p = (k + 1) % 3, q = (k + 2) % 3;
        tpurt_store_i64(at(out, oo + k * out->strides[dim]), out->dtype, x[p] * y[q] - x[q] * y[p]);
      }
    } else {
      double x[3], y[3];
      for (int k = 0; k < 3; k++) {
        x[k] = tpurt_load_f64(at(a, oa + k * sa[dim]), a->dtype);
        y[k] = tpurt_load_f64(at(b, ob + k * sb[dim]), b->dtype);
      }
      for (int k = 0; k < 3; k++) {
        int p = (k + 1) % 3, q = (k + 2) % 3;
        tpurt_store_f64(at(out, oo + k * out->strides[dim]), out->dtype, x[p] * y[q] - x[q] * y[p]);
      }
    }
  } while (tpurt_next_index(idx, sizes, nd));
  return TPURT_OK;
}

/* ---------------------------------------------------------------- cdist */
/* A batch of [rows, m] matrices addressed through (possibly broadcast) batch strides. */
typedef struct mat {
  const tpurt_tensor* t;
  int64_t bst[TPURT_MAX_DIMS]; /* batch strides over the output's batch dims */
} mat;

static void mat_init(mat* m, const tpurt_tensor* t, const tpurt_tensor* out) {
  tpurt_tensor batch = *t;
  batch.ndim -= 2;
  m->t = t;
  bcast_strides(&batch, out->ndim - 2, m->bst);
}
static double mat_get(const mat* m, const int64_t* bidx, int nb, int64_t r, int64_t k) {
  const tpurt_tensor* t = m->t;
  int64_t o = dot(bidx, m->bst, nb) + r * t->strides[t->ndim - 2] + k * t->strides[t->ndim - 1];
  return tpurt_load_f64(at(t, o), t->dtype);
}

/* A coordinate difference rounded like CPU's, which computes it in the input's type (the
 * p=inf gradient compares it with the distance for equality). */
static double diff_of(double a, double b, int dt) { return dt == TPURT_F64 ? a - b : (double)(float)(a - b); }

static double pdist(const mat* x1, const mat* x2, const int64_t* b, int nb, int64_t i, int64_t j, int64_t m, double p) {
  double acc = 0;
  for (int64_t k = 0; k < m; k++) {
    double d = fabs(diff_of(mat_get(x1, b, nb, i, k), mat_get(x2, b, nb, j, k), x1->t->dtype));
    if (p == 0) acc += d != 0;
    else if (isinf(p)) acc = d > acc || isnan(d) ? d : acc;
    else if (p == 1) acc += d;
    else if (p == 2) acc += d * d;
    else acc += pow(d, p);
  }
  if (p == 2) return sqrt(acc);
  if (p == 0 || p == 1 || isinf(p)) return acc;
  return pow(acc, 1.0 / p);
}

tpurt_status tpurt_kernel_cdist_forward(const tpurt_op_call* c) {
  /* _cdist_forward(x1 [..., P, M], x2 [..., R, M], float p, int? compute_mode) -> [..., P, R] */
  const tpurt_tensor* out = &c->outs[0];
  double p = tpurt_value_f(TPURT_ARG(c, cdist_forward, p));
  if (p < 0) return tpurt_fail(TPURT_ERR_RUNTIME, "cdist only supports non-negative p values");
  if (tpurt_numel(out) == 0) return TPURT_OK;
  mat x1, x2;
  mat_init(&x1, &TPURT_ARG(c, cdist_forward, x1)->t, out);
  mat_init(&x2, &TPURT_ARG(c, cdist_forward, x2)->t, out);
  int nb = out->ndim - 2;
  int64_t m = x1.t->sizes[x1.t->ndim - 1], b[TPURT_MAX_DIMS] = {0};
  do {
    for (int64_t i = 0; i < out->sizes[nb]; i++)
      for (int64_t j = 0; j < out->sizes[nb + 1]; j++) {
        int64_t o = dot(b, out->strides, nb) + i * out->strides[nb] + j * out->strides[nb + 1];
        tpurt_store_f64(at(out, o), out->dtype, pdist(&x1, &x2, b, nb, i, j, m, p));
      }
  } while (nb > 0 && tpurt_next_index(b, out->sizes, nb));
  return TPURT_OK;
}

static double sgn(double x) { return (double)((x > 0) - (x < 0)); }

/* d dist / d x1 times grad for one coordinate difference (CPU's Dist<T>::backward forms) */
static double cdist_grad(double diff, double dist, double grad, double p) {
  if (p == 0) return 0;
  if (p == 1) return grad * sgn(diff);
  if (isinf(p)) return grad * sgn(diff) * (1 - fmin(1, ceil(fabs(fabs(diff) - dist))));
  if (dist == 0) return 0;
  if (p == 2) return grad * diff / dist;
  if (p < 2) return diff == 0 && p < 1 ? 0 : sgn(diff) * pow(fabs(diff), p - 1) * grad / pow(dist, p - 1);
  return diff * pow(fabs(diff), p - 2) * grad / pow(dist, p - 1);
}

tpurt_status tpurt_kernel_cdist_backward(const tpurt_op_call* c) {
  /* _cdist_backward(grad [..., P, R], x1 [..., P, M], x2 [..., R, M], float p, cdist) -> [..., P, M] */
  const tpurt_tensor *out = &c->outs[0], *g = &TPURT_ARG(c, cdist_backward, grad)->t, *dist = &TPURT_ARG(c, cdist_backward, cdist)->t;
  double p = tpurt_value_f(TPURT_ARG(c, cdist_backward, p));
  if (tpurt_numel(out) == 0) return TPURT_OK;
  if (tpurt_numel(g) == 0) return fill_zero(out); /* an empty batch (or P, R = 0): no contributions */
  mat x1, x2, gm, dm;
  mat_init(&x1, &TPURT_ARG(c, cdist_backward, x1)->t, g);
  mat_init(&x2, &TPURT_ARG(c, cdist_backward, x2)->t, g);
  mat_init(&gm, g, g);
  mat_init(&dm, dist, g);
  int nb = g->ndim - 2;
  int64_t P = g->sizes[nb], R = g->sizes[nb + 1], m = x1.t->sizes[x1.t->ndim - 1], b[TPURT_MAX_DIMS] = {0};
  do {
    for (int64_t i = 0; i < P; i++)
      for (int64_t k = 0; k < m; k++) {
        double acc = 0, a = mat_get(&x1, b, nb, i, k);
        for (int64_t j = 0; j < R; j++)
          acc += cdist_grad(diff_of(a, mat_get(&x2, b, nb, j, k), x1.t->dtype), mat_get(&dm, b, nb, i, j), mat_get(&gm, b, nb, i, j), p);
        int64_t o = dot(b, out->strides, nb) + i * out->strides[nb] + k * out->strides[nb + 1];
        tpurt_store_f64(at(out, o), out->dtype, acc);
      }
  } while (nb > 0 && tpurt_next_index(b, g->sizes, nb));
  return TPURT_OK;
}

/* ---------------------------------------------------------------- random */
static double unit(const tpurt_op_call* c, uint64_t i) {
  uint32_t r[4];
  tpurt_philox(c->rng_seed, c->rng_offset + i, r);
  return tpurt_u64_to_unit_f64(r[0], r[1]);
}

/* Standard normal as random.c draws it for the output's dtype. */
static double std_normal(const tpurt_op_call* c, uint64_t i) {
  uint32_t r[4];
  tpurt_philox(c->rng_seed, c->rng_offset + i, r);
  return tpurt_std_normal(r, c->outs[0].dtype);
}

tpurt_status tpurt_kernel_normal_tensor(const tpurt_op_call* c) {
  /* normal.Tensor_float(mean, float std) / normal.float_Tensor(float mean, std) /
   * normal.Tensor_Tensor(mean, std), + out: mean and std broadcast to out */
  const tpurt_tensor* out = &c->outs[0];
  int64_t s0[1], s1[1];
  tpurt_tensor mean = tpurt_scalar_tensor(TPURT_ARG(c, normal_tensor, mean), s0), sd = tpurt_scalar_tensor(TPURT_ARG(c, normal_tensor, std), s1);
  int nd = out->ndim;
  int64_t sm[TPURT_MAX_DIMS], ss[TPURT_MAX_DIMS], idx[TPURT_MAX_DIMS] = {0}, n = tpurt_numel(out);
  bcast_strides(&mean, nd, sm);
  bcast_strides(&sd, nd, ss);
  for (int64_t i = 0; i < n; i++, tpurt_next_index(idx, out->sizes, nd)) { /* checked before any draw */
    double v = tpurt_load_f64(at(&sd, dot(idx, ss, nd)), sd.dtype);
    if (!(v >= 0)) return tpurt_fail(TPURT_ERR_RUNTIME, "normal expects all elements of std >= 0.0");
  }
  memset(idx, 0, sizeof idx);
  for (int64_t i = 0; i < n; i++, tpurt_next_index(idx, out->sizes, nd)) {
    double m = tpurt_load_f64(at(&mean, dot(idx, sm, nd)), mean.dtype);
    double v = tpurt_load_f64(at(&sd, dot(idx, ss, nd)), sd.dtype);
    tpurt_store_f64(at(out, dot(idx, out->strides, nd)), out->dtype, m + v * std_normal(c, (uint64_t)i));
  }
  return TPURT_OK;
}

/* randperm's permutation, one spare entry so n = 0 takes a valid block. */
static size_t perm_bytes(int64_t n) { return sizeof(int64_t) * (size_t)(n + 1); }

tpurt_status tpurt_plan_randperm(const tpurt_op_call* c, tpurt_plan* p) {
  int64_t n = TPURT_ARG(c, randperm, n)->i;
  if (n >= 0) p->scratch_bytes += tpurt_temp_bytes(perm_bytes(n));
  return TPURT_OK;
}

tpurt_status tpurt_kernel_randperm(const tpurt_op_call* c) {
  /* randperm.generator_out(n, *, generator, out): Fisher-Yates, swap i draws counter i */
  const tpurt_tensor* out = &c->outs[0];
  int64_t n = TPURT_ARG(c, randperm, n)->i;
  if (n < 0) return tpurt_fail(TPURT_ERR_RUNTIME, "n must be non-negative, got%lld", (long long)n);
  int64_t* p = tpurt_temp(perm_bytes(n));
  if (!p) return TPURT_ERR_OOM;
  for (int64_t i = 0; i < n; i++) p[i] = i;
  for (int64_t i = n - 1; i > 0; i--) {
    uint32_t r[4];
    tpurt_philox(c->rng_seed, c->rng_offset + (uint64_t)i, r);
    int64_t j = (int64_t)((((uint64_t)r[0] << 32) | r[1]) % (uint64_t)(i + 1)), t = p[i];
    p[i] = p[j];
    p[j] = t;
  }
  int64_t st = out->ndim ? out->strides[0] : 0;
  for (int64_t i = 0; i < n; i++) tpurt_store_i64(at(out, i * st), out->dtype, p[i]);
  tpurt_temp_release(p);
  return TPURT_OK;
}

/* Category of cumulative mass u in w[0..n) skipping taken ones (taken may be NULL). */
static int64_t pick(const double* w, const uint8_t* taken, int64_t n, double u) {
  int64_t last = -1;
  for (int64_t k = 0; k < n; k++) {
    if ((taken && taken[k]) || w[k] == 0) continue;
    last = k;
    if ((u -= w[k]) < 0) return k;
  }
  if (last >= 0) return last; /* rounding left u at the very end */
  for (int64_t k = 0; k < n; k++) /* only zero-probability categories remain */
    if (!taken || !taken[k]) return k;
  return 0;
}

/* multinomial's row of n weights (double) and n taken flags. */
static size_t draw_bytes(int64_t n) { return sizeof(double) * (size_t)n + (size_t)n + 8; }

tpurt_status tpurt_plan_multinomial(const tpurt_op_call* c, tpurt_plan* p) {
  const tpurt_tensor* in = &TPURT_ARG(c, multinomial, self)->t;
  if (in->ndim > 0) p->scratch_bytes += tpurt_temp_bytes(draw_bytes(in->sizes[in->ndim - 1]));
  return TPURT_OK;
}

tpurt_status tpurt_kernel_multinomial(const tpurt_op_call* c) {
  /* multinomial(self [n] or [rows, n], num_samples, replacement, *, generator) + out.
   * Sample j of row r draws counter r * num_samples + j; without replacement each draw
   * picks from the mass not taken yet. */
  const tpurt_tensor *in = &TPURT_ARG(c, multinomial, self)->t, *out = &c->outs[0];
  int64_t k = TPURT_ARG(c, multinomial, num_samples)->i, n = in->sizes[in->ndim - 1], rows = in->ndim == 2 ? in->sizes[0] : 1;
  int repl = (int)TPURT_ARG(c, multinomial, replacement)->i;
  int64_t ist = in->strides[in->ndim - 1], irs = in->ndim == 2 ? in->strides[0] : 0;
  int64_t ost = out->strides[out->ndim - 1], ors = out->ndim == 2 ? out->strides[0] : 0;
  double* w = tpurt_temp(draw_bytes(n));
  if (!w) return TPURT_ERR_OOM;
  uint8_t* taken = (uint8_t*)(w + n);
  tpurt_status s = TPURT_OK;
  for (int64_t r = 0; r < rows && !s; r++) {
    double total = 0;
    for (int64_t j = 0; j < n; j++) {
      w[j] = tpurt_load_f64(at(in, r * irs + j * ist), in->dtype);
      if (!(w[j] >= 0 && isfinite(w[j])))
        s = tpurt_fail(TPURT_ERR_RUNTIME, "probability tensor contains either `inf`, `nan` or element < 0");
      total += w[j];
    }
    if (!s && !(total > 0)) s = tpurt_fail(TPURT_ERR_RUNTIME, "invalid multinomial distribution (sum of probabilities <= 0)");
    memset(taken, 0, (size_t)n);
    for (int64_t j = 0; j < k && !s; j++) {
      int64_t cat = pick(w, repl ? NULL : taken, n, unit(c, (uint64_t)(r * k + j)) * total);
      if (!repl) {
        taken[cat] = 1;
        total -= w[cat];
      }
      tpurt_store_i64(at(out, r * ors + j * ost), out->dtype, cat);
    }
  }
  tpurt_temp_release(w);
  return s;
}

/* ---------------------------------------------------------------- embedding_bag */
enum { BAG_SUM = 0, BAG_MEAN = 1, BAG_MAX = 2 };

static int64_t ld_i(const tpurt_tensor* t, int64_t i) { return tpurt_load_i64(at(t, i * t->strides[0]), t->dtype); }
static double ld_f(const tpurt_tensor* t, int64_t i, int64_t j) {
  return tpurt_load_f64(at(t, i * t->strides[0] + j * t->strides[1]), t->dtype);
}
static void st_f(const tpurt_tensor* t, int64_t i, int64_t j, double v) {
  tpurt_store_f64(at(t, i * t->strides[0] + j * t->strides[1]), t->dtype, v);
}

/* One bag's accumulator: a double per embedding column (weight's D). */
static size_t bag_acc_bytes(int64_t D) { return sizeof(double) * (size_t)(D + 1); }

tpurt_status tpurt_plan_embedding_bag(const tpurt_op_call* c, tpurt_plan* p) {
  p->scratch_bytes += tpurt_temp_bytes(bag_acc_bytes(TPURT_ARG(c, embedding_bag, weight)->t.sizes[1]));
  return TPURT_OK;
}

tpurt_status tpurt_kernel_embedding_bag(const tpurt_op_call* c) {
  /* _embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse,
   * per_sample_weights?, include_last_offset, padding_idx) -> (out, offset2bag, bag_size,
   * max_indices). offset2bag and bag_size (non-padding count) are always filled: the
   * backward here reads them (CPU's own fast path leaves them empty). */
  const tpurt_tensor *w = &TPURT_ARG(c, embedding_bag, weight)->t, *ind = &TPURT_ARG(c, embedding_bag, indices)->t, *off = &TPURT_ARG(c, embedding_bag, offsets)->t;
  const tpurt_tensor *out = &c->outs[0], *o2b = &c->outs[1], *bsz = &c->outs[2], *maxi = &c->outs[3];
  const tpurt_tensor* psw = TPURT_ARG(c, embedding_bag, per_sample_weights)->kind == TPURT_V_TENSOR ? &TPURT_ARG(c, embedding_bag, per_sample_weights)->t : NULL;
  int mode = (int)TPURT_ARG(c, embedding_bag, mode)->i;
  int64_t pad = TPURT_ARG(c, embedding_bag, padding_idx)->i, n = ind->sizes[0], nw = w->sizes[0], D = w->sizes[1];
  int64_t nbags = out->sizes[0];
  if (psw && mode != BAG_SUM)
    return tpurt_fail(TPURT_ERR_RUNTIME, "embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                      "supported for mode='sum' (got mode='%s'). Please open a feature request on GitHub.",
                      mode == BAG_MEAN ? "mean" : "max");
  double* acc = tpurt_temp(bag_acc_bytes(D));
  if (!acc) return TPURT_ERR_OOM;
  tpurt_status s = TPURT_OK;
  for (int64_t i = 0; i < tpurt_numel(bsz); i++) tpurt_store_i64(at(bsz, i * bsz->strides[0]), bsz->dtype, 0);
  for (int64_t b = 0; b < nbags && !s; b++) {
    /* the last bag runs to the end of indices, whatever a last offset says (as on CPU) */
    int64_t start = ld_i(off, b), end = b + 1 < nbags ? ld_i(off, b + 1) : n, count = 0;
    if (start < 0 || start > n || end > n || end < start) {
      s = tpurt_fail(TPURT_ERR_RUNTIME, "embedding_bag: offsets[%lld] = %lld is out of range for %lld indices",
                     (long long)b, (long long)start, (long long)n);
      break;
    }
    for (int64_t j = 0; j < D; j++) acc[j] = 0;
    for (int64_t i = start; i < end; i++) {
      int64_t k = ld_i(ind, i);
      if (k < 0 || k >= nw) {
        s = tpurt_fail(TPURT_ERR_RUNTIME, "embedding_bag: Expected idx >= 0 && idx < num_embeddings but found idx to be %lld",
                       (long long)k);
        break;
      }
      tpurt_store_i64(at(o2b, i * o2b->strides[0]), o2b->dtype, b);
      if (k == pad) continue;
      double sc = psw ? tpurt_load_f64(at(psw, i * psw->strides[0]), psw->dtype) : 1;
      for (int64_t j = 0; j < D; j++) {
        double v = ld_f(w, k, j);
        if (mode != BAG_MAX) acc[j] += sc * v;
        else if (count == 0 || v > acc[j]) { /* the first maximum wins */
          acc[j] = v;
          tpurt_store_i64(at(maxi, b * maxi->strides[0] + j * maxi->strides[1]), maxi->dtype, k);
        }
      }
      count++;
    }
    for (int64_t j = 0; j < D; j++) {
      if (mode == BAG_MAX && count == 0)
        tpurt_store_i64(at(maxi, b * maxi->strides[0] + j * maxi->strides[1]), maxi->dtype, 0);
      st_f(out, b, j, mode == BAG_MEAN && count ? acc[j] / (double)count : acc[j]);
    }
    tpurt_store_i64(at(bsz, b * bsz->strides[0]), bsz->dtype, count);
  }
  tpurt_temp_release(acc);
  return s;
}

/* The arguments both backward overloads share, by name. */
typedef struct {
  const tpurt_tensor *grad, *indices, *offset2bag, *bag_size, *maximum_indices, *per_sample_weights;
  int scale_grad_by_freq, mode;
  int64_t padding_idx;
} bag_grad_args;
#define BAG_GRAD_ARGS(c, K)                                                                            \
  (bag_grad_args) {                                                                                    \
    &TPURT_ARG(c, K, grad)->t, &TPURT_ARG(c, K, indices)->t, &TPURT_ARG(c, K, offset2bag)->t,          \
        &TPURT_ARG(c, K, bag_size)->t, &TPURT_ARG(c, K, maximum_indices)->t,                          \
        TPURT_ARG(c, K, per_sample_weights)->kind == TPURT_V_TENSOR ? &TPURT_ARG(c, K, per_sample_weights)->t : NULL, \
        (int)TPURT_ARG(c, K, scale_grad_by_freq)->i, (int)TPURT_ARG(c, K, mode)->i, TPURT_ARG(c, K, padding_idx)->i \
  }

/* The backward's counts per weight row and gradient accumulator (out: [num_weights, D]). */
static size_t bag_count_bytes(const tpurt_tensor* out) { return sizeof(int64_t) * (size_t)(out->sizes[0] + 1); }
static size_t bag_grad_bytes(const tpurt_tensor* out) {
  return sizeof(double) * (size_t)(out->sizes[0] * out->sizes[1] + 1);
}
static int64_t bag_backward_scratch(const tpurt_op_call* c) {
  return tpurt_temp_bytes(bag_count_bytes(&c->outs[0])) + tpurt_temp_bytes(bag_grad_bytes(&c->outs[0]));
}

/* -> [num_weights, D] */
static tpurt_status bag_backward(const tpurt_op_call* c, bag_grad_args A) {
  const tpurt_tensor *g = A.grad, *ind = A.indices, *o2b = A.offset2bag, *bsz = A.bag_size;
  const tpurt_tensor *maxi = A.maximum_indices, *out = &c->outs[0], *psw = A.per_sample_weights;
  int freq = A.scale_grad_by_freq, mode = A.mode;
  int64_t pad = A.padding_idx, n = ind->sizes[0], nw = out->sizes[0], D = out->sizes[1];
  tpurt_status s = fill_zero(out);
  int64_t* cnt = s ? NULL : tpurt_temp_zeroed(bag_count_bytes(out));
  double* acc = s ? NULL : tpurt_temp_zeroed(bag_grad_bytes(out));
  if (!s && (!cnt || !acc)) s = TPURT_ERR_OOM;
  if (!s && mode == BAG_MAX) {
    for (int64_t b = 0; b < g->sizes[0]; b++) {
      if (ld_i(bsz, b) == 0) continue;
      for (int64_t j = 0; j < D; j++) {
        int64_t k = tpurt_load_i64(at(maxi, b * maxi->strides[0] + j * maxi->strides[1]), maxi->dtype);
        acc[k * D + j] += ld_f(g, b, j);
      }
    }
  } else if (!s) {
    for (int64_t i = 0; i < n && freq; i++) cnt[ld_i(ind, i)]++;
    for (int64_t i = 0; i < n; i++) {
      int64_t k = ld_i(ind, i), b = ld_i(o2b, i);
      if (k == pad) continue;
      double sc = psw ? tpurt_load_f64(at(psw, i * psw->strides[0]), psw->dtype) : 1;
      if (mode == BAG_MEAN) sc /= (double)ld_i(bsz, b);
      if (freq) sc /= (double)cnt[k];
      for (int64_t j = 0; j < D; j++) acc[k * D + j] += sc * ld_f(g, b, j);
    }
  }
  for (int64_t k = 0; !s && k < nw; k++)
    for (int64_t j = 0; j < D; j++) st_f(out, k, j, acc[k * D + j]);
  tpurt_temp_release(cnt);
  tpurt_temp_release(acc);
  return s;
}

tpurt_status tpurt_plan_embedding_bag_dense_backward(const tpurt_op_call* c, tpurt_plan* p) {
  p->scratch_bytes += bag_backward_scratch(c);
  return TPURT_OK;
}

tpurt_status tpurt_kernel_embedding_bag_dense_backward(const tpurt_op_call* c) {
  return bag_backward(c, BAG_GRAD_ARGS(c, embedding_bag_dense_backward));
}

tpurt_status tpurt_kernel_embedding_bag_psw_backward(const tpurt_op_call* c) {
  /* _embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets, offset2bag,
   * mode, padding_idx) -> [n]: grad[bag] . weight[index], 0 for padding */
  const tpurt_tensor *g = &TPURT_ARG(c, embedding_bag_psw_backward, grad)->t, *w = &TPURT_ARG(c, embedding_bag_psw_backward, weight)->t, *ind = &TPURT_ARG(c, embedding_bag_psw_backward, indices)->t, *o2b = &TPURT_ARG(c, embedding_bag_psw_backward, offset2bag)->t;
  const tpurt_tensor* out = &c->outs[0];
  int64_t pad = TPURT_ARG(c, embedding_bag_psw_backward, padding_idx)->i, D = w->sizes[1];
  if (TPURT_ARG(c, embedding_bag_psw_backward, mode)->i != BAG_SUM)
    return tpurt_fail(TPURT_ERR_RUNTIME, "embedding_bag_backward: per_sample_weights only supported for mode='sum'");
  for (int64_t i = 0; i < ind->sizes[0]; i++) {
    int64_t k = ld_i(ind, i), b = ld_i(o2b, i);
    double acc = 0;
    for (int64_t j = 0; k != pad && j < D; j++) acc += ld_f(g, b, j) * ld_f(w, k, j);
    tpurt_store_f64(at(out, i * out->strides[0]), out->dtype, acc);
  }
  return TPURT_OK;
}

/* ---------------------------------------------------------------- complex / polar */
tpurt_status tpurt_kernel_complex(const tpurt_op_call* c) {
  /* complex.out(real, imag, *, out): the two float parts of out, each broadcast from its input */
  const tpurt_tensor* out = &c->outs[0];
  tpurt_tensor re = tpurt_c64_part(out, 0), im = tpurt_c64_part(out, 1);
  tpurt_status s = tpurt_copy_tensor(&re, &TPURT_ARG(c, complex, real)->t);
  return s ? s : tpurt_copy_tensor(&im, &TPURT_ARG(c, complex, imag)->t);
}

static void polar_re(int64_t n, void* o, const void* const* in, const void* ctx) {
  const float *r = in[0], *t = in[1];
  float* y = o;
  for (int64_t i = 0; i < n; i++) y[i] = r[i] * cosf(t[i]);
}
static void polar_im(int64_t n, void* o, const void* const* in, const void* ctx) {
  const float *r = in[0], *t = in[1];
  float* y = o;
  for (int64_t i = 0; i < n; i++) y[i] = r[i] * sinf(t[i]);
}

tpurt_status tpurt_kernel_polar(const tpurt_op_call* c) {
  /* polar.out(abs, angle, *, out): (abs * cos(angle), abs * sin(angle)) in float, as CPU */
  const tpurt_tensor* out = &c->outs[0];
  tpurt_tensor in[2] = {TPURT_ARG(c, polar, abs)->t, TPURT_ARG(c, polar, angle)->t};
  tpurt_tensor re = tpurt_c64_part(out, 0), im = tpurt_c64_part(out, 1);
  tpurt_status s = tpurt_ew_run(&re, 2, in, TPURT_CT_F32, polar_re, NULL);
  return s ? s : tpurt_ew_run(&im, 2, in, TPURT_CT_F32, polar_im, NULL);
}
