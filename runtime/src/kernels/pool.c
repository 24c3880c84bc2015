/* Pooling family: max pooling with indices, average pooling, adaptive average / max
 * pooling, 2-d and 3-d (1-d pooling dispatches to 2-d), each with its backward.
 *
 * Every op is one pass over output positions, each with a window [lo, hi) per spatial dim
 * (step = dilation) from a per-dim table; the tables encode the op's geometry exactly as
 * CPU's kernels compute it (padding, ceil_mode, adaptive start/end), so the loops
 * themselves are shared. Spatial dims are padded to 3 with leading size-1 dims; every
 * leading dim (batch, channels, or only channels) is a "plane". Values are compared and
 * summed in double (int64 for integer max pooling); backward passes accumulate into a
 * dense double buffer and store once. */
#include "spatial.h"

typedef struct { int64_t lo, hi, n; } win; /* n: the window's size before clipping (avg) */

typedef struct {
  spatial sp;
  int64_t dl[3]; /* dilation */
  win* w[3];
} pgeom;

enum { W_MAX, W_AVG, W_ADAPT };

/* Value i of an int-list argument (one value broadcasts; an empty list means dflt). */
static int64_t li(const tpurt_value* v, int i, int64_t dflt) {
  if (v->kind != TPURT_V_INTS || v->n == 0) return dflt;
  return v->ints[v->n == 1 ? 0 : i];
}

/* Window table for one dim of O outputs over I inputs. */
static void windows(win* w, int mode, int64_t O, int64_t I, int64_t k, int64_t s, int64_t p, int64_t d) {
  for (int64_t o = 0; o < O; o++) {
    int64_t lo, hi, n;
    if (mode == W_ADAPT) {
      lo = o * I / O;
      hi = ((o + 1) * I + O - 1) / O;
      n = hi - lo;
    } else if (mode == W_MAX) {
      lo = o * s - p;
      hi = lo + (k - 1) * d + 1 < I ? lo + (k - 1) * d + 1 : I;
      while (lo < 0) lo += d;
      n = 0;
    } else {
      lo = o * s - p;
      hi = lo + k < I + p ? lo + k : I + p;
      n = hi - lo;
      if (lo < 0) lo = 0;
      if (hi > I) hi = I;
    }
    w[o] = (win){lo, hi, n};
  }
}

/* in: the tensor with the input's spatial sizes; out: the one with the output's.
 * args a..a+3: kernel, stride, padding, dilation (ai < 0: absent). */
static tpurt_status geom_init(pgeom* g, int nsp, int mode, const tpurt_tensor* in, const tpurt_tensor* out,
                              const tpurt_op_call* c, int ak, int as, int ap, int ad) {
  if (!spatial_init(&g->sp, nsp, in, out, sizeof(win), (void**)g->w))
    return TPURT_ERR_OOM;
  for (int i = 0; i < 3; i++) {
    int j = i - (3 - nsp);
    int64_t k = 1, s = 1, p = 0, d = 1;
    if (j >= 0 && mode != W_ADAPT) {
      k = li(&c->args[ak], j, 1);
      s = li(&c->args[as], j, k);
      p = li(&c->args[ap], j, 0);
      d = ad >= 0 ? li(&c->args[ad], j, 1) : 1;
    }
    g->dl[i] = d;
    windows(g->w[i], j < 0 ? W_ADAPT : mode, g->sp.os[i], g->sp.is[i], k, s, p, d);
  }
  return TPURT_OK;
}

/* Loop over planes and output positions with the three windows a, b, w in scope. */
#define FOR_OUTPUTS(g, ...)                                                                  \
  SPATIAL_FOR_OUTPUTS(&(g)->sp, {                                                            \
    const win *a = &(g)->w[0][od], *b = &(g)->w[1][oh], *w = &(g)->w[2][ow];                 \
    __VA_ARGS__                                                                              \
  })

static const char* elem3(const tpurt_tensor* t, const int64_t* s, int64_t base, int64_t i, int64_t j, int64_t k) {
  return (const char*)t->data + (base + i * s[0] + j * s[1] + k * s[2]) * (int64_t)tpurt_dtype_size((tpurt_dtype)t->dtype);
}
static void strides3(const tpurt_tensor* t, int nsp, int64_t* s) {
  for (int i = 0; i < 3; i++) s[i] = sp_stride(t, nsp, i);
}
/* Spatial output position o of plane p -> element offset in t. */
static int64_t out_off(const tpurt_tensor* t, const pgeom* g, int64_t p, int64_t od, int64_t oh, int64_t ow) {
  int64_t s[3];
  strides3(t, g->sp.nsp, s);
  return plane_off(t, t->ndim - g->sp.nsp, p) + od * s[0] + oh * s[1] + ow * s[2];
}

/* ---------------------------------------------------------------- forward */
/* Max with CPU's NaN rule (a NaN wins and the last NaN's index is kept); T is double or
 * int64_t, LOAD its loader. A window wholly in the padding gives CPU's -inf (the dtype's
 * lowest for integers) and the index its scan would have started from. */
#define MAX_FWD(NAME, T, LOAD)                                                                  \
  static void NAME(const pgeom* g, const tpurt_tensor* in, const tpurt_tensor* out,             \
                   const tpurt_tensor* idx) {                                                   \
    int64_t si[3];                                                                              \
    strides3(in, g->sp.nsp, si);                                                                   \
    FOR_OUTPUTS(g, {                                                                            \
      int64_t ib = plane_off(in, in->ndim - g->sp.nsp, p);                                         \
      int64_t best = (a->lo * g->sp.is[1] + b->lo) * g->sp.is[2] + w->lo;                             \
      T m = _Generic((T)0, double: -INFINITY, default: tpurt_int_lowest(out->dtype));          \
      for (int64_t i = a->lo; i < a->hi; i += g->dl[0])                                         \
        for (int64_t j = b->lo; j < b->hi; j += g->dl[1])                                       \
          for (int64_t k = w->lo; k < w->hi; k += g->dl[2]) {                                   \
            T v = LOAD(elem3(in, si, ib, i, j, k), in->dtype);                                  \
            if (v > m || v != v) {                                                              \
              m = v;                                                                            \
              best = (i * g->sp.is[1] + j) * g->sp.is[2] + k;                                         \
            }                                                                                   \
          }                                                                                     \
      char* op = (char*)out->data + out_off(out, g, p, od, oh, ow) * (int64_t)tpurt_dtype_size((tpurt_dtype)out->dtype); \
      _Generic(m, double: tpurt_store_f64, default: tpurt_store_i64)(op, out->dtype, m);        \
      tpurt_store_i64((char*)idx->data + out_off(idx, g, p, od, oh, ow) * 8, TPURT_I64, best);  \
    })                                                                                          \
  }
MAX_FWD(max_fwd_f, double, tpurt_load_f64)
MAX_FWD(max_fwd_i, int64_t, tpurt_load_i64)

/* Average: divisor from the windows unless overridden (div != 0; CPU accepts a negative
 * one); count_include_pad uses the pre-clip sizes. An empty window gives 0. */
static void avg_fwd(const pgeom* g, const tpurt_tensor* in, const tpurt_tensor* out, int include_pad, int64_t div) {
  int64_t si[3];
  strides3(in, g->sp.nsp, si);
  size_t oes = tpurt_dtype_size((tpurt_dtype)out->dtype);
  FOR_OUTPUTS(g, {
    int64_t ib = plane_off(in, in->ndim - g->sp.nsp, p);
    double sum = 0;
    for (int64_t i = a->lo; i < a->hi; i++)
      for (int64_t j = b->lo; j < b->hi; j++)
        for (int64_t k = w->lo; k < w->hi; k++) sum += tpurt_load_f64(elem3(in, si, ib, i, j, k), in->dtype);
    int64_t cnt = (a->hi - a->lo) * (b->hi - b->lo) * (w->hi - w->lo);
    int64_t d = div != 0 ? div : include_pad ? a->n * b->n * w->n : cnt;
    char* op = (char*)out->data + out_off(out, g, p, od, oh, ow) * (int64_t)oes;
    tpurt_store_f64(op, out->dtype, cnt > 0 ? sum / (double)d : 0.0);
  })
}

/* ---------------------------------------------------------------- fractional max */
/* x rounded to dtype dt, as CPU's scalar_t arithmetic rounds every step. */
static double in_dtype(double x, int dt) {
  char b[8];
  tpurt_store_f64(b, dt, x);
  return tpurt_load_f64(b, dt);
}

/* C's int cast, saturating where it would be undefined (a sample far outside [0, 1)). */
static int64_t trunc_int(double x) { return x > -2147483648.0 && x < 2147483648.0 ? (int)x : x > 0 ? INT32_MAX : INT32_MIN; }

/* CPU's generate_intervals in the samples' dtype: window o of O over I starts at
 * int((o + u) * alpha) - int(u * alpha), alpha = (I - k) / (O - 1); the last at I - k.
 * Fails (as CPU's assert does) when a sample outside [0, 1) puts a window outside. */
static tpurt_status fractional_windows(win* w, double u, int dt, int64_t O, int64_t I, int64_t k, int nsp) {
  double alpha = O > 1 ? in_dtype(in_dtype((double)(I - k), dt) / in_dtype((double)(O - 1), dt), dt) : 0;
  int64_t base = trunc_int(in_dtype(u * alpha, dt));
  for (int64_t o = 0; o < O; o++) {
    int64_t lo = o == O - 1 ? I - k : trunc_int(in_dtype(in_dtype((double)o + u, dt) * alpha, dt)) - base;
    if (lo < 0 || lo + k > I)
      return tpurt_fail(TPURT_ERR_RUNTIME, "fractional_max_pool%dd: random sample %g puts a window outside the input",
                        nsp, u);
    w[o] = (win){lo, lo + k, k};
  }
  return TPURT_OK;
}

/* fractional_max_poolNd(self, kernel_size, output_size, random_samples) -> (out, indices).
 * Each plane (n, c) has its own windows, from samples[n, c, :] (depth, height, width order
 * for 3-d; width first for 2-d), so the engine runs once per plane on one-plane views. */
_Static_assert(TPURT_ARG_fractional_max_pool3d_self == TPURT_ARG_fractional_max_pool2d_self &&
                   TPURT_ARG_fractional_max_pool3d_kernel_size == TPURT_ARG_fractional_max_pool2d_kernel_size &&
                   TPURT_ARG_fractional_max_pool3d_random_samples == TPURT_ARG_fractional_max_pool2d_random_samples,
               "fractional_max_pool serves fractional_max_pool2d and fractional_max_pool3d");
static tpurt_status fractional_max_pool(const tpurt_op_call* c, int nsp) {
  const tpurt_tensor *in = &TPURT_ARG(c, fractional_max_pool2d, self)->t, *rs = &TPURT_ARG(c, fractional_max_pool2d, random_samples)->t;
  pgeom g;
  tpurt_status s = geom_init(&g, nsp, W_ADAPT, in, &c->outs[0], c, -1, -1, -1, -1);
  if (s) return s;
  int64_t P = g.sp.P, C = in->sizes[in->ndim - nsp - 1];
  g.sp.P = 1;
  /* CPU's checks and words: each plane reads its own nsp samples */
  if (rs->ndim != 3) return tpurt_fail(TPURT_ERR_RUNTIME, "Expect _random_samples to have 3 dimensions, got %d", rs->ndim);
  if (C > 0 && rs->sizes[0] < P / C)
    return tpurt_fail(TPURT_ERR_RUNTIME, "Expect _random_samples.size(0) no less then input batch size.");
  if (rs->sizes[1] != C) return tpurt_fail(TPURT_ERR_RUNTIME, "Expect _random_samples.size(1) equals to input channel size.");
  if (rs->sizes[2] != nsp)
    return tpurt_fail(TPURT_ERR_RUNTIME, "Expect _random_samples.size(2) equals to %d; got %lld.", nsp, (long long)rs->sizes[2]);
  size_t rses = tpurt_dtype_size((tpurt_dtype)rs->dtype);
  for (int64_t p = 0; p < P; p++) {
    const char* u = (const char*)rs->data + ((p / C) * rs->strides[0] + (p % C) * rs->strides[1]) * (int64_t)rses;
    for (int i = 3 - nsp; i < 3; i++) {
      int j = i - (3 - nsp), k = nsp == 2 ? 1 - j : j; /* sample index of spatial dim j */
      double ui = tpurt_load_f64(u + k * rs->strides[2] * (int64_t)rses, rs->dtype);
      s = fractional_windows(g.w[i], ui, rs->dtype, g.sp.os[i], g.sp.is[i], li(TPURT_ARG(c, fractional_max_pool2d, kernel_size), j, 1), nsp);
      if (s) break;
    }
    if (s) break;
    tpurt_tensor v[3] = {*in, c->outs[0], c->outs[1]};
    for (int t = 0; t < 3; t++) {
      v[t].data = (char*)v[t].data + plane_off(&v[t], v[t].ndim - nsp, p) * (int64_t)tpurt_dtype_size((tpurt_dtype)v[t].dtype);
      for (int d = 0; d < v[t].ndim - nsp; d++) v[t].sizes[d] = 1;
    }
    if (tpurt_is_float(in->dtype)) max_fwd_f(&g, &v[0], &v[1], &v[2]);
    else max_fwd_i(&g, &v[0], &v[1], &v[2]);
  }
  tpurt_temp_release(g.w[0]);
  return s;
}

/* ---------------------------------------------------------------- backward */
static double* acc_alloc(const tpurt_tensor* gi) { return tpurt_temp_zeroed(spatial_acc_bytes(gi)); }

/* grad_input[plane, indices] += grad_output (max and adaptive max pooling). */
static tpurt_status max_bwd(const pgeom* g, const tpurt_tensor* go, const tpurt_tensor* idx, const tpurt_tensor* gi,
                            const char* what) {
  int64_t plane = g->sp.is[0] * g->sp.is[1] * g->sp.is[2];
  if (tpurt_numel(gi) != g->sp.P * plane)
    return tpurt_fail(TPURT_ERR_RUNTIME, "%s: grad_input %s does not match the input", what, tpurt_shape_str(gi));
  double* acc = acc_alloc(gi);
  if (!acc) return TPURT_ERR_OOM;
  size_t ges = tpurt_dtype_size((tpurt_dtype)go->dtype), ies = tpurt_dtype_size((tpurt_dtype)idx->dtype);
  FOR_OUTPUTS(g, {
    (void)a;
    (void)b;
    (void)w;
    int64_t k = tpurt_load_i64((const char*)idx->data + out_off(idx, g, p, od, oh, ow) * (int64_t)ies, idx->dtype);
    if (k < 0 || k >= plane) {
      tpurt_temp_release(acc);
      return tpurt_fail(TPURT_ERR_RUNTIME, "%s: found an invalid max index: %lld (output volumes are of size %lld)",
                        what, (long long)k, (long long)plane);
    }
    acc[p * plane + k] += tpurt_load_f64((const char*)go->data + out_off(go, g, p, od, oh, ow) * (int64_t)ges, go->dtype);
  })
  tpurt_status s = tpurt_store_dense(gi, acc, TPURT_F64);
  tpurt_temp_release(acc);
  return s;
}

/* grad_input[window] += grad_output / divisor (average and adaptive average pooling). */
static tpurt_status avg_bwd(const pgeom* g, const tpurt_tensor* go, const tpurt_tensor* gi, int include_pad, int64_t div) {
  double* acc = acc_alloc(gi);
  if (!acc) return TPURT_ERR_OOM;
  int64_t plane = g->sp.is[0] * g->sp.is[1] * g->sp.is[2];
  size_t ges = tpurt_dtype_size((tpurt_dtype)go->dtype);
  FOR_OUTPUTS(g, {
    int64_t cnt = (a->hi - a->lo) * (b->hi - b->lo) * (w->hi - w->lo);
    if (cnt <= 0) continue;
    int64_t d = div != 0 ? div : include_pad ? a->n * b->n * w->n : cnt;
    double v = tpurt_load_f64((const char*)go->data + out_off(go, g, p, od, oh, ow) * (int64_t)ges, go->dtype) / (double)d;
    double* ap = acc + p * plane;
    for (int64_t i = a->lo; i < a->hi; i++)
      for (int64_t j = b->lo; j < b->hi; j++)
        for (int64_t k = w->lo; k < w->hi; k++) ap[(i * g->sp.is[1] + j) * g->sp.is[2] + k] += v;
  })
  tpurt_status s = tpurt_store_dense(gi, acc, TPURT_F64);
  tpurt_temp_release(acc);
  return s;
}

/* ---------------------------------------------------------------- kernels */
static int64_t opt_int(const tpurt_value* v) { return v->kind == TPURT_V_NONE ? 0 : tpurt_value_i(v); }

_Static_assert(TPURT_ARG_max_pool3d_self == TPURT_ARG_max_pool2d_self && TPURT_ARG_adaptive_max_pool2d_self == TPURT_ARG_max_pool2d_self &&
                   TPURT_ARG_adaptive_max_pool3d_self == TPURT_ARG_max_pool2d_self &&
                   TPURT_ARG_max_pool3d_kernel_size == TPURT_ARG_max_pool2d_kernel_size &&
                   TPURT_ARG_max_pool3d_stride == TPURT_ARG_max_pool2d_stride &&
                   TPURT_ARG_max_pool3d_padding == TPURT_ARG_max_pool2d_padding &&
                   TPURT_ARG_max_pool3d_dilation == TPURT_ARG_max_pool2d_dilation,
               "max_pool serves max_pool2d/3d_with_indices (window arguments) and adaptive_max_pool2d/3d (self only)");
static tpurt_status max_pool(const tpurt_op_call* c, int nsp, int mode) {
  /* max_poolNd_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode) or
   * adaptive_max_poolNd(self, output_size) -> (out, indices) */
  pgeom g;
  tpurt_status s = geom_init(&g, nsp, mode, &TPURT_ARG(c, max_pool2d, self)->t, &c->outs[0], c, TPURT_ARG_max_pool2d_kernel_size, TPURT_ARG_max_pool2d_stride, TPURT_ARG_max_pool2d_padding, TPURT_ARG_max_pool2d_dilation);
  if (s) return s;
  if (tpurt_is_float(TPURT_ARG(c, max_pool2d, self)->t.dtype)) max_fwd_f(&g, &TPURT_ARG(c, max_pool2d, self)->t, &c->outs[0], &c->outs[1]);
  else max_fwd_i(&g, &TPURT_ARG(c, max_pool2d, self)->t, &c->outs[0], &c->outs[1]);
  tpurt_temp_release(g.w[0]);
  return TPURT_OK;
}

#define POOL_BWD_LAYOUT(k)                                                                    \
  (TPURT_ARG_##k##_grad_output == TPURT_ARG_max_pool2d_backward_grad_output &&                \
   TPURT_ARG_##k##_self == TPURT_ARG_max_pool2d_backward_self)
_Static_assert(POOL_BWD_LAYOUT(max_pool3d_backward) && POOL_BWD_LAYOUT(adaptive_max_pool2d_backward) &&
                   POOL_BWD_LAYOUT(adaptive_max_pool3d_backward) && POOL_BWD_LAYOUT(fractional_max_pool2d_backward) &&
                   POOL_BWD_LAYOUT(fractional_max_pool3d_backward),
               "max_pool_backward serves the max_pool, adaptive_max_pool and fractional_max_pool backward lines");
#undef POOL_BWD_LAYOUT
static tpurt_status max_pool_backward(const tpurt_op_call* c, int nsp, int aidx, const char* what) {
  /* (grad_output, self, ..., indices at aidx) -> grad_input */
  pgeom g;
  tpurt_status s = geom_init(&g, nsp, W_ADAPT, &TPURT_ARG(c, max_pool2d_backward, self)->t, &TPURT_ARG(c, max_pool2d_backward, grad_output)->t, c, -1, -1, -1, -1);
  if (s) return s;
  s = max_bwd(&g, &TPURT_ARG(c, max_pool2d_backward, grad_output)->t, &c->args[aidx].t, &c->outs[0], what);
  tpurt_temp_release(g.w[0]);
  return s;
}

_Static_assert(TPURT_ARG_avg_pool3d_self == TPURT_ARG_avg_pool2d_self && TPURT_ARG_avg_pool3d_kernel_size == TPURT_ARG_avg_pool2d_kernel_size &&
                   TPURT_ARG_avg_pool3d_stride == TPURT_ARG_avg_pool2d_stride &&
                   TPURT_ARG_avg_pool3d_padding == TPURT_ARG_avg_pool2d_padding &&
                   TPURT_ARG_avg_pool3d_count_include_pad == TPURT_ARG_avg_pool2d_count_include_pad &&
                   TPURT_ARG_avg_pool3d_divisor_override == TPURT_ARG_avg_pool2d_divisor_override,
               "avg_pool serves avg_pool2d and avg_pool3d");
static tpurt_status avg_pool(const tpurt_op_call* c, int nsp) {
  /* avg_poolNd(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override) */
  pgeom g;
  tpurt_status s = geom_init(&g, nsp, W_AVG, &TPURT_ARG(c, avg_pool2d, self)->t, &c->outs[0], c, TPURT_ARG_avg_pool2d_kernel_size, TPURT_ARG_avg_pool2d_stride, TPURT_ARG_avg_pool2d_padding, -1);
  if (s) return s;
  avg_fwd(&g, &TPURT_ARG(c, avg_pool2d, self)->t, &c->outs[0], (int)tpurt_value_i(TPURT_ARG(c, avg_pool2d, count_include_pad)), opt_int(TPURT_ARG(c, avg_pool2d, divisor_override)));
  tpurt_temp_release(g.w[0]);
  return TPURT_OK;
}

_Static_assert(TPURT_ARG_avg_pool3d_backward_grad_output == TPURT_ARG_avg_pool2d_backward_grad_output &&
                   TPURT_ARG_avg_pool3d_backward_self == TPURT_ARG_avg_pool2d_backward_self &&
                   TPURT_ARG_avg_pool3d_backward_kernel_size == TPURT_ARG_avg_pool2d_backward_kernel_size &&
                   TPURT_ARG_avg_pool3d_backward_stride == TPURT_ARG_avg_pool2d_backward_stride &&
                   TPURT_ARG_avg_pool3d_backward_padding == TPURT_ARG_avg_pool2d_backward_padding &&
                   TPURT_ARG_avg_pool3d_backward_count_include_pad == TPURT_ARG_avg_pool2d_backward_count_include_pad &&
                   TPURT_ARG_avg_pool3d_backward_divisor_override == TPURT_ARG_avg_pool2d_backward_divisor_override,
               "avg_pool_backward serves avg_pool2d_backward and avg_pool3d_backward");
static tpurt_status avg_pool_backward(const tpurt_op_call* c, int nsp) {
  /* avg_poolNd_backward(grad_output, self, kernel_size, stride, padding, ceil_mode,
   *                     count_include_pad, divisor_override) */
  pgeom g;
  tpurt_status s = geom_init(&g, nsp, W_AVG, &TPURT_ARG(c, avg_pool2d_backward, self)->t, &TPURT_ARG(c, avg_pool2d_backward, grad_output)->t, c, TPURT_ARG_avg_pool2d_backward_kernel_size, TPURT_ARG_avg_pool2d_backward_stride, TPURT_ARG_avg_pool2d_backward_padding, -1);
  if (s) return s;
  s = avg_bwd(&g, &TPURT_ARG(c, avg_pool2d_backward, grad_output)->t, &c->outs[0], (int)tpurt_value_i(TPURT_ARG(c, avg_pool2d_backward, count_include_pad)), opt_int(TPURT_ARG(c, avg_pool2d_backward, divisor_override)));
  tpurt_temp_release(g.w[0]);
  return s;
}

_Static_assert(TPURT_ARG_adaptive_avg_pool3d_self == TPURT_ARG_adaptive_avg_pool2d_self,
               "adaptive_avg serves _adaptive_avg_pool2d and _adaptive_avg_pool3d");
static tpurt_status adaptive_avg(const tpurt_op_call* c, int nsp) {
  /* _adaptive_avg_poolNd(self, output_size) */
  pgeom g;
  tpurt_status s = geom_init(&g, nsp, W_ADAPT, &TPURT_ARG(c, adaptive_avg_pool2d, self)->t, &c->outs[0], c, -1, -1, -1, -1);
  if (s) return s;
  avg_fwd(&g, &TPURT_ARG(c, adaptive_avg_pool2d, self)->t, &c->outs[0], 0, 0);
  tpurt_temp_release(g.w[0]);
  return TPURT_OK;
}

_Static_assert(TPURT_ARG_adaptive_avg_pool3d_backward_grad_output == TPURT_ARG_adaptive_avg_pool2d_backward_grad_output &&
                   TPURT_ARG_adaptive_avg_pool3d_backward_self == TPURT_ARG_adaptive_avg_pool2d_backward_self,
               "adaptive_avg_backward serves _adaptive_avg_pool2d_backward and _adaptive_avg_pool3d_backward");
static tpurt_status adaptive_avg_backward(const tpurt_op_call* c, int nsp) {
  /* _adaptive_avg_poolNd_backward(grad_output, self) */
  pgeom g;
  tpurt_status s = geom_init(&g, nsp, W_ADAPT, &TPURT_ARG(c, adaptive_avg_pool2d_backward, self)->t, &TPURT_ARG(c, adaptive_avg_pool2d_backward, grad_output)->t, c, -1, -1, -1, -1);
  if (s) return s;
  s = avg_bwd(&g, &TPURT_ARG(c, adaptive_avg_pool2d_backward, grad_output)->t, &c->outs[0], 0, 0);
  tpurt_temp_release(g.w[0]);
  return s;
}

#define POOL_KERNELS(N)                                                                                    \
  tpurt_status tpurt_kernel_max_pool##N##d(const tpurt_op_call* c) { return max_pool(c, N, W_MAX); }       \
  tpurt_status tpurt_kernel_max_pool##N##d_backward(const tpurt_op_call* c) {                              \
    return max_pool_backward(c, N, TPURT_ARG_max_pool##N##d_backward_indices, "max_pool" #N "d_with_indices_backward"); \
  }                                                                                                        \
  tpurt_status tpurt_kernel_adaptive_max_pool##N##d(const tpurt_op_call* c) { return max_pool(c, N, W_ADAPT); } \
  tpurt_status tpurt_kernel_adaptive_max_pool##N##d_backward(const tpurt_op_call* c) {                     \
    return max_pool_backward(c, N, TPURT_ARG_adaptive_max_pool##N##d_backward_indices, "adaptive_max_pool" #N "d_backward"); \
  }                                                                                                        \
  tpurt_status tpurt_kernel_avg_pool##N##d(const tpurt_op_call* c) { return avg_pool(c, N); }              \
  tpurt_status tpurt_kernel_avg_pool##N##d_backward(const tpurt_op_call* c) { return avg_pool_backward(c, N); } \
  tpurt_status tpurt_kernel_adaptive_avg_pool##N##d(const tpurt_op_call* c) { return adaptive_avg(c, N); } \
  tpurt_status tpurt_kernel_adaptive_avg_pool##N##d_backward(const tpurt_op_call* c) {                     \
    return adaptive_avg_backward(c, N);                                                                    \
  }
POOL_KERNELS(2)
POOL_KERNELS(3)

#define FRACTIONAL_KERNELS(N)                                                                             \
  tpurt_status tpurt_kernel_fractional_max_pool##N##d(const tpurt_op_call* c) { return fractional_max_pool(c, N); } \
  tpurt_status tpurt_kernel_fractional_max_pool##N##d_backward(const tpurt_op_call* c) {                  \
    return max_pool_backward(c, N, TPURT_ARG_fractional_max_pool##N##d_backward_indices, "fractional_max_pool" #N "d_backward"); \
  }
FRACTIONAL_KERNELS(2)
FRACTIONAL_KERNELS(3)

/* ---------------------------------------------------------------- plans */
/* Temporaries: the window tables, one entry per output position of `sized` (the tensor with the
 * output's spatial sizes), and for a backward the accumulator of grad_input gi. */
static tpurt_status plan_pool(tpurt_plan* p, int nsp, const tpurt_tensor* sized, const tpurt_tensor* gi) {
  p->scratch_bytes += tpurt_temp_bytes(spatial_table_bytes(nsp, sized, sizeof(win)));
  if (gi) p->scratch_bytes += tpurt_temp_bytes(spatial_acc_bytes(gi));
  return TPURT_OK;
}

/* Forwards size their tables by the output; backwards by grad_output, and accumulate outs[0]. */
#define POOL_PLAN(NAME, N, SIZED, GI) \
  tpurt_status tpurt_plan_##NAME(const tpurt_op_call* c, tpurt_plan* p) { return plan_pool(p, N, SIZED, GI); }
#define POOL_PLANS(N)                                                                                         \
  POOL_PLAN(max_pool##N##d, N, &c->outs[0], NULL)                                                             \
  POOL_PLAN(max_pool##N##d_backward, N, &TPURT_ARG(c, max_pool2d_backward, grad_output)->t, &c->outs[0])      \
  POOL_PLAN(adaptive_max_pool##N##d, N, &c->outs[0], NULL)                                                    \
  POOL_PLAN(adaptive_max_pool##N##d_backward, N, &TPURT_ARG(c, max_pool2d_backward, grad_output)->t, &c->outs[0]) \
  POOL_PLAN(fractional_max_pool##N##d, N, &c->outs[0], NULL)                                                  \
  POOL_PLAN(fractional_max_pool##N##d_backward, N, &TPURT_ARG(c, max_pool2d_backward, grad_output)->t, &c->outs[0]) \
  POOL_PLAN(avg_pool##N##d, N, &c->outs[0], NULL)                                                             \
  POOL_PLAN(avg_pool##N##d_backward, N, &TPURT_ARG(c, avg_pool2d_backward, grad_output)->t, &c->outs[0])      \
  POOL_PLAN(adaptive_avg_pool##N##d, N, &c->outs[0], NULL)                                                    \
  POOL_PLAN(adaptive_avg_pool##N##d_backward, N, &TPURT_ARG(c, adaptive_avg_pool2d_backward, grad_output)->t,     \
            &c->outs[0])
POOL_PLANS(2)
POOL_PLANS(3)
