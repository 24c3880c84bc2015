/* Cumulative ops (cumprod, logcumsumexp, cummax/cummin) on the line driver of sort.c, and
 * lookups in sorted data (searchsorted, bucketize), histc and isin. */
#include <stdlib.h>

#include "reduce.h"
#include "sort.h"

/* ---------------------------------------------------------------- cumulative ops */
static tpurt_status cumprod_line(tpurt_line* l, const void* ctx) {
  if (l->as_int) {
    const int64_t* x = l->keys;
    uint64_t acc = 1; /* wraps like CPU's integer arithmetic */
    for (int64_t j = 0; j < l->n; j++) tpurt_line_put_i(l, 0, j, (int64_t)(acc *= (uint64_t)x[j]));
  } else {
    const double* x = l->keys;
    double acc = 1;
    for (int64_t j = 0; j < l->n; j++) tpurt_line_put_f(l, 0, j, acc *= x[j]);
  }
  return TPURT_OK;
}

/* log(exp(x) + exp(y)) as CPU's _log_add_exp_helper: NaN propagates, equal infinities
 * stay as they are */
static double log_add_exp(double x, double y) {
  double mn = isnan(y) ? y : fmin(x, y), mx = isnan(y) ? y : fmax(x, y);
  if (isnan(x) && !isnan(y)) mn = mx = x;
  if (mn != mx || isfinite(mn)) return log1p(exp(mn - mx)) + mx;
  return x;
}

static tpurt_status logcumsumexp_line(tpurt_line* l, const void* ctx) {
  const double* x = l->keys;
  double acc = -INFINITY;
  for (int64_t j = 0; j < l->n; j++) tpurt_line_put_f(l, 0, j, acc = log_add_exp(acc, x[j]));
  return TPURT_OK;
}

/* cummax (ctx 0) / cummin (ctx 1): a tie or a NaN takes over the index (CPU uses >= / <=) */
static tpurt_status cumext_line(tpurt_line* l, const void* ctx) {
  int mn = *(const int*)ctx;
  int64_t best = 0;
  for (int64_t j = 0; j < l->n; j++) {
    int take;
    if (l->as_int) {
      int64_t x = ((const int64_t*)l->keys)[j], b = ((const int64_t*)l->keys)[best];
      take = mn ? x <= b : x >= b;
    } else {
      double x = ((const double*)l->keys)[j], b = ((const double*)l->keys)[best];
      take = isnan(x) || (!isnan(b) && (mn ? x <= b : x >= b));
    }
    if (take || j == 0) best = j;
    tpurt_line_put_key(l, 0, j, best);
    tpurt_line_put_i(l, 1, j, best);
  }
  return TPURT_OK;
}

#define SCAN_LAYOUT(k) (TPURT_ARG_##k##_self == TPURT_ARG_cumprod_self && TPURT_ARG_##k##_dim == TPURT_ARG_cumprod_dim)
_Static_assert(SCAN_LAYOUT(logcumsumexp) && SCAN_LAYOUT(cummax) && SCAN_LAYOUT(cummin),
               "scan serves cumprod, logcumsumexp, cummax and cummin");
#undef SCAN_LAYOUT
static tpurt_status scan(const tpurt_op_call* c, int as_int, tpurt_line_fn fn, const void* ctx) {
  const tpurt_tensor* in = &TPURT_ARG(c, cumprod, self)->t;
  int dim;
  tpurt_status s = tpurt_wrap_dim(TPURT_ARG(c, cumprod, dim)->i, in->ndim, &dim);
  if (s) return s;
  return tpurt_lines_run(in, dim, as_int, c->outs, c->nouts, fn, ctx);
}

tpurt_status tpurt_kernel_cumprod(const tpurt_op_call* c) {
  /* cumprod(self, dim, *, dtype) / cumprod_ / cumprod.out: an integer result multiplies as
   * int64 (wrapping), from the input truncated to integers first as CPU casts it; a narrower
   * float result from the input cast to it first (tpurt_red_input_as_out) */
  if (!tpurt_is_float(c->outs[0].dtype)) return scan(c, 1, cumprod_line, NULL);
  const tpurt_op_call* use;
  tpurt_status s = tpurt_red_call_as_out(c, TPURT_ARG_cumprod_self, &use);
  return s ? s : scan(use, 0, cumprod_line, NULL);
}
tpurt_status tpurt_kernel_logcumsumexp(const tpurt_op_call* c) { return scan(c, 0, logcumsumexp_line, NULL); }
tpurt_status tpurt_kernel_cummax(const tpurt_op_call* c) {
  static const int mn = 0;
  return scan(c, !tpurt_is_float(TPURT_ARG(c, cummax, self)->t.dtype), cumext_line, &mn);
}
tpurt_status tpurt_kernel_cummin(const tpurt_op_call* c) {
  static const int mn = 1;
  return scan(c, !tpurt_is_float(TPURT_ARG(c, cummin, self)->t.dtype), cumext_line, &mn);
}

/* The scratch of scan's line driver. */
static tpurt_status plan_scan(const tpurt_op_call* c, tpurt_plan* p) {
  const tpurt_tensor* in = &TPURT_ARG(c, cumprod, self)->t;
  int dim;
  tpurt_status s = tpurt_wrap_dim(TPURT_ARG(c, cumprod, dim)->i, in->ndim, &dim);
  if (!s) p->scratch_bytes += tpurt_lines_bytes(in, dim);
  return s;
}
tpurt_status tpurt_plan_cumprod(const tpurt_op_call* c, tpurt_plan* p) {
  if (tpurt_is_float(c->outs[0].dtype)) p->scratch_bytes += tpurt_red_call_as_out_bytes(c, TPURT_ARG_cumprod_self);
  return plan_scan(c, p);
}
tpurt_status tpurt_plan_logcumsumexp(const tpurt_op_call* c, tpurt_plan* p) { return plan_scan(c, p); }
tpurt_status tpurt_plan_cummax(const tpurt_op_call* c, tpurt_plan* p) { return plan_scan(c, p); }
tpurt_status tpurt_plan_cummin(const tpurt_op_call* c, tpurt_plan* p) { return plan_scan(c, p); }

/* ---------------------------------------------------------------- dense scratch copies */
/* A dense copy of t takes 8 bytes an element (room for the widened keys), and one more. */
static size_t dense_copy_size(const tpurt_tensor* t) { return sizeof(int64_t) * (size_t)(tpurt_numel(t) + 1); }

/* A dense row-major copy of t converted to dtype `dt` (then widened to int64 or double for
 * comparison, after the rounding to dt happened); free d->data. */
static tpurt_status dense_copy(const tpurt_tensor* t, int dt, tpurt_tensor* d) {
  int64_t st = 1;
  *d = (tpurt_tensor){.dtype = dt, .ndim = t->ndim};
  for (int k = t->ndim - 1; k >= 0; k--) {
    d->sizes[k] = t->sizes[k];
    d->strides[k] = st;
    st *= t->sizes[k];
  }
  d->data = tpurt_temp(dense_copy_size(t));
  if (!d->data) return TPURT_ERR_OOM;
  tpurt_status s = tpurt_copy_tensor(d, t);
  if (s) {
    tpurt_temp_release(d->data);
    d->data = NULL;
  }
  return s;
}

/* Dense copy rounded to the common dtype `dt`, then held as int64 (integer dt) or double. */
static tpurt_status dense_keys(const tpurt_tensor* t, int dt, tpurt_tensor* d) {
  tpurt_tensor r;
  tpurt_status s = dense_copy(t, dt, &r);
  if (s) return s;
  if (dt == TPURT_I64 || dt == TPURT_F64) {
    *d = r;
    return TPURT_OK;
  }
  s = dense_copy(&r, tpurt_is_float(dt) ? TPURT_F64 : TPURT_I64, d);
  tpurt_temp_release(r.data);
  return s;
}
/* Both copies of a narrower dtype stay taken: the first is not the latest when released. */
static int64_t dense_keys_bytes(const tpurt_tensor* t, int dt) {
  return tpurt_temp_bytes(dense_copy_size(t)) * (dt == TPURT_I64 || dt == TPURT_F64 ? 1 : 2);
}

/* ---------------------------------------------------------------- searchsorted / bucketize */
/* First position in seq[0..m) (visited through sorter when given) whose value is >= v
 * (left) or > v (right); the negated tests mirror CPU's handling of NaN. */
#define BOUND(T)                                                                                   \
  static int64_t bound_##T(const T* seq, const int64_t* sorter, int64_t m, T v, int right) {       \
    int64_t lo = 0, hi = m;                                                                        \
    while (lo < hi) {                                                                              \
      int64_t mid = lo + ((hi - lo) >> 1);                                                         \
      T x = seq[sorter ? sorter[mid] : mid];                                                       \
      if (right ? !(x > v) : !(x >= v)) lo = mid + 1;                                              \
      else hi = mid;                                                                               \
    }                                                                                              \
    return lo;                                                                                     \
  }
BOUND(double)
BOUND(int64_t)

/* search's temporaries: seq's and vals' keys, sorter's copy, and one result per value */
static size_t search_results_size(const tpurt_tensor* vals) { return sizeof(int64_t) * (size_t)(tpurt_numel(vals) + 1); }
static int64_t search_bytes(const tpurt_tensor* seq, const tpurt_tensor* vals, const tpurt_tensor* sorter) {
  int common = tpurt_promote_types(seq->dtype, vals->dtype);
  return dense_keys_bytes(seq, common) + dense_keys_bytes(vals, common) +
         (sorter ? tpurt_temp_bytes(dense_copy_size(sorter)) : 0) + tpurt_temp_bytes(search_results_size(vals));
}

/* out[...] = bound in seq's row for each value; seq is 1-D or has vals' leading dims. */
static tpurt_status search(const tpurt_tensor* out, const tpurt_tensor* seq, const tpurt_tensor* vals,
                           const tpurt_tensor* sorter, int right) {
  int common = tpurt_promote_types(seq->dtype, vals->dtype);
  int as_int = !tpurt_is_float(common);
  int64_t m = seq->ndim ? seq->sizes[seq->ndim - 1] : 1;
  int64_t nv = tpurt_numel(vals), row = vals->ndim ? vals->sizes[vals->ndim - 1] : 1;
  tpurt_tensor s = {0}, v = {0}, so = {0};
  tpurt_status st = dense_keys(seq, common, &s);
  if (!st) st = dense_keys(vals, common, &v);
  if (!st && sorter) st = dense_copy(sorter, TPURT_I64, &so);
  int64_t* res = st ? NULL : tpurt_temp(search_results_size(vals));
  if (!st && !res) st = TPURT_ERR_OOM;
  const int64_t* srt = so.data;
  for (int64_t i = 0; !st && i < nv; i++) {
    int64_t base = seq->ndim > 1 ? (i / row) * m : 0;
    if (srt) {
      for (int64_t k = 0; k < m; k++)
        if (srt[base + k] < 0 || srt[base + k] >= m) {
          st = tpurt_fail(TPURT_ERR_RUNTIME, "torch.searchsorted(): sorter index out of range");
          break;
        }
      if (st) break;
    }
    res[i] = as_int ? bound_int64_t((const int64_t*)s.data + base, srt ? srt + base : NULL, m,
                                    ((const int64_t*)v.data)[i], right)
                    : bound_double((const double*)s.data + base, srt ? srt + base : NULL, m,
                                   ((const double*)v.data)[i], right);
  }
  if (!st) st = tpurt_store_dense(out, res, TPURT_I64);
  tpurt_temp_release(res);
  tpurt_temp_release(s.data);
  tpurt_temp_release(v.data);
  tpurt_temp_release(so.data);
  return st;
}

static const tpurt_tensor* searchsorted_sorter(const tpurt_op_call* c) {
  return TPURT_ARG(c, searchsorted, sorter)->kind == TPURT_V_TENSOR ? &TPURT_ARG(c, searchsorted, sorter)->t : NULL;
}

tpurt_status tpurt_kernel_searchsorted(const tpurt_op_call* c) {
  /* searchsorted.Tensor/.Scalar(sorted_sequence, self, *, out_int32, right, side?, sorter?) */
  int64_t st[1];
  tpurt_tensor vals = tpurt_scalar_tensor(TPURT_ARG(c, searchsorted, self), st);
  int right = (int)TPURT_ARG(c, searchsorted, right)->i;
  if (TPURT_ARG(c, searchsorted, side)->kind == TPURT_V_STRING) right = strcmp(TPURT_ARG(c, searchsorted, side)->s, "right") == 0;
  return search(&c->outs[0], &TPURT_ARG(c, searchsorted, sorted_sequence)->t, &vals, searchsorted_sorter(c), right);
}
tpurt_status tpurt_plan_searchsorted(const tpurt_op_call* c, tpurt_plan* p) {
  int64_t st[1];
  tpurt_tensor vals = tpurt_scalar_tensor(TPURT_ARG(c, searchsorted, self), st);
  p->scratch_bytes += search_bytes(&TPURT_ARG(c, searchsorted, sorted_sequence)->t, &vals, searchsorted_sorter(c));
  return TPURT_OK;
}

tpurt_status tpurt_kernel_bucketize(const tpurt_op_call* c) {
  /* bucketize.Tensor/.Scalar(self, boundaries, *, out_int32, right) */
  int64_t st[1];
  tpurt_tensor vals = tpurt_scalar_tensor(TPURT_ARG(c, bucketize, self), st);
  return search(&c->outs[0], &TPURT_ARG(c, bucketize, boundaries)->t, &vals, NULL, (int)TPURT_ARG(c, bucketize, right)->i);
}
tpurt_status tpurt_plan_bucketize(const tpurt_op_call* c, tpurt_plan* p) {
  int64_t st[1];
  tpurt_tensor vals = tpurt_scalar_tensor(TPURT_ARG(c, bucketize, self), st);
  p->scratch_bytes += search_bytes(&TPURT_ARG(c, bucketize, boundaries)->t, &vals, NULL);
  return TPURT_OK;
}

/* ---------------------------------------------------------------- histc */
/* CPU's histc bins by its linear formula alone, (y - L) * bins / (R - L) in the input's own
 * arithmetic (float for f32, every step rounded for 16-bit floats), L and R the outer edges as
 * its linspace gives them in that dtype: no search against the inner edges (torch.histogram
 * does one; histc does not, so an element on an inner edge may land in either bin). */
static int64_t histc_bin(int dt, double y, double L, double R, int64_t bins) {
  double p;
  if (dt == TPURT_F64) {
    p = (y - L) * (double)bins / (R - L);
  } else if (dt == TPURT_F32) {
    float d = (float)y - (float)L, w = (float)R - (float)L;
    p = (d * (float)bins) / w;
  } else {
    double d = tpurt_round_to(dt, y - L), w = tpurt_round_to(dt, R - L);
    p = tpurt_round_to(dt, tpurt_round_to(dt, d * tpurt_round_to(dt, (double)bins)) / w);
  }
  int64_t b = (int64_t)p;
  return b >= bins ? bins - 1 : b < 0 ? 0 : b; /* the last bin holds R */
}

/* histc's counts */
static size_t histc_bins_size(int64_t bins) { return sizeof(double) * (size_t)bins; }

tpurt_status tpurt_kernel_histc(const tpurt_op_call* c) {
  /* histc(self, bins, min, max): elements outside [min, max] (and NaN) are ignored; the last
   * bin includes max; min == max means the data's range */
  const tpurt_tensor* in = &TPURT_ARG(c, histc, self)->t;
  int64_t bins = TPURT_ARG(c, histc, bins)->i;
  if (bins <= 0) return tpurt_fail(TPURT_ERR_RUNTIME, "torch.histc(): bins must be > 0, but got %lld for dimension 0",
                                   (long long)bins);
  double lo = tpurt_value_f(TPURT_ARG(c, histc, min)), hi = tpurt_value_f(TPURT_ARG(c, histc, max));
  tpurt_tensor x;
  tpurt_status s = dense_copy(in, TPURT_F64, &x);
  if (s) return s;
  const double* v = x.data;
  int64_t n = tpurt_numel(in);
  if (lo == hi && n > 0) {
    lo = INFINITY;
    hi = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
      if (isnan(v[i])) { lo = hi = NAN; break; }
      lo = fmin(lo, v[i]);
      hi = fmax(hi, v[i]);
    }
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  double* h = tpurt_temp(histc_bins_size(bins));
  if (!isfinite(lo) || !isfinite(hi))
    s = tpurt_fail(TPURT_ERR_RUNTIME, "torch.histc: range of [%g, %g] is not finite", lo, hi);
  else if (!(lo < hi)) s = tpurt_fail(TPURT_ERR_RUNTIME, "torch.histc: max must be larger than min");
  else if (!h) s = TPURT_ERR_OOM;
  if (!s) {
    memset(h, 0, sizeof(double) * (size_t)bins);
    /* the outer edges of CPU's linspace(min, max, bins + 1) in the input's dtype */
    double L = tpurt_round_to(in->dtype, tpurt_linspace_point(in->dtype, lo, hi, bins + 1, 0));
    double R = tpurt_round_to(in->dtype, tpurt_linspace_point(in->dtype, lo, hi, bins + 1, bins));
    /* integer input bins in integer arithmetic, (y - min) * bins / (max - min), as CUDA does
     * (CPU has no integer histc); edges rounded to an integer dtype would merge bins */
    int integral = !tpurt_is_float(in->dtype);
    int64_t ilo = (int64_t)lo, ihi = (int64_t)hi;
    for (int64_t i = 0; i < n; i++) {
      double y = v[i];
      if (integral) {
        int64_t iy = (int64_t)y;
        if (iy < ilo || iy > ihi) continue;
        int64_t p = (iy - ilo) * bins / (ihi - ilo);
        h[p == bins ? p - 1 : p] += 1;
        continue;
      }
      if (!(y >= L && y <= R)) continue;
      h[histc_bin(in->dtype, y, L, R, bins)] += 1;
    }
    tpurt_tensor hd = {.data = h, .dtype = TPURT_F64, .ndim = 1, .sizes = {bins}, .strides = {1}};
    s = tpurt_copy_tensor(&c->outs[0], &hd);
  }
  tpurt_temp_release(h);
  tpurt_temp_release(x.data);
  return s;
}
tpurt_status tpurt_plan_histc(const tpurt_op_call* c, tpurt_plan* p) {
  int64_t bins = TPURT_ARG(c, histc, bins)->i;
  if (bins > 0)
    p->scratch_bytes += tpurt_temp_bytes(dense_copy_size(&TPURT_ARG(c, histc, self)->t)) + tpurt_temp_bytes(histc_bins_size(bins));
  return TPURT_OK;
}

/* ---------------------------------------------------------------- isin */
static int cmp_f64(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}
static int cmp_i64(const void* a, const void* b) {
  int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;
  return (x > y) - (x < y);
}

/* isin compares in the promoted dtype of its operands */
static int isin_dtype(const tpurt_op_call* c) {
  tpurt_promo p;
  tpurt_promo_init(&p);
  tpurt_promo_add_value(&p, TPURT_ARG(c, isin, elements));
  tpurt_promo_add_value(&p, TPURT_ARG(c, isin, test_elements));
  return tpurt_promo_result(&p);
}
static size_t isin_results_size(const tpurt_tensor* el) { return (size_t)tpurt_numel(el) + 1; }

tpurt_status tpurt_kernel_isin(const tpurt_op_call* c) {
  /* isin.Tensor_Tensor/.Tensor_Scalar/.Scalar_Tensor(elements, test_elements, *, assume_unique,
   * invert): equality in the promoted dtype; NaN is in nothing */
  int64_t s0[1], s1[1];
  tpurt_tensor el = tpurt_scalar_tensor(TPURT_ARG(c, isin, elements), s0), te = tpurt_scalar_tensor(TPURT_ARG(c, isin, test_elements), s1);
  int common = isin_dtype(c), as_int = !tpurt_is_float(common), invert = (int)TPURT_ARG(c, isin, invert)->i;
  tpurt_tensor e = {0}, t = {0};
  tpurt_status s = dense_keys(&el, common, &e);
  if (!s) s = dense_keys(&te, common, &t);
  int64_t ne = tpurt_numel(&el), nt = tpurt_numel(&te);
  uint8_t* r = s ? NULL : tpurt_temp(isin_results_size(&el));
  if (!s && !r) s = TPURT_ERR_OOM;
  if (!s) {
    if (!as_int) { /* NaN matches nothing, and would break the sort's ordering */
      double* tv = t.data;
      int64_t k = 0;
      for (int64_t i = 0; i < nt; i++)
        if (!isnan(tv[i])) tv[k++] = tv[i];
      nt = k;
    }
    qsort(t.data, (size_t)nt, 8, as_int ? cmp_i64 : cmp_f64);
    for (int64_t i = 0; i < ne; i++) {
      void* key = (char*)e.data + i * 8;
      int found = !as_int && isnan(*(double*)key) ? 0 : bsearch(key, t.data, (size_t)nt, 8, as_int ? cmp_i64 : cmp_f64) != NULL;
      r[i] = (uint8_t)(found ^ invert);
    }
    s = tpurt_store_dense(&c->outs[0], r, TPURT_BOOL);
  }
  tpurt_temp_release(r);
  tpurt_temp_release(e.data);
  tpurt_temp_release(t.data);
  return s;
}
tpurt_status tpurt_plan_isin(const tpurt_op_call* c, tpurt_plan* p) {
  int64_t s0[1], s1[1];
  tpurt_tensor el = tpurt_scalar_tensor(TPURT_ARG(c, isin, elements), s0), te = tpurt_scalar_tensor(TPURT_ARG(c, isin, test_elements), s1);
  int common = isin_dtype(c);
  p->scratch_bytes += dense_keys_bytes(&el, common) + dense_keys_bytes(&te, common) + tpurt_temp_bytes(isin_results_size(&el));
  return TPURT_OK;
}
