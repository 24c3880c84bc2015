/* histogram (int bins or a bin-edge tensor) and histogramdd's parts (_histogramdd_bin_edges,
 * _histogramdd_from_bin_cts, _histogramdd_from_bin_tensors), as CPU's Histogram.cpp and
 * HistogramKernel.cpp compute them: input read as M points of D coordinates (its last dim;
 * histogram flattens to D = 1); edges from `range` or the data's min/max through linspace in
 * the input dtype; equal-width bins found by a linear guess corrected against the edges,
 * given edges by std::upper_bound; the last bin closed on the right; weights added in the
 * input dtype in point order; density divides by the total, then by each bin's width.
 * Shapes and argument checks are the meta functions' (torch_tpu/meta/histogram.py); what
 * depends on the data (a non-finite range) is checked here. */
#include <stdlib.h>

#include "../internal.h"

typedef struct {
  const tpurt_tensor* in;
  int flat; /* histogram: every element is a point (D = 1) */
  int64_t m, d;
  const tpurt_tensor* weight; /* NULL or M elements in row-major order */
  int dt;
} points;

static points points_of(const tpurt_tensor* in, int flat, const tpurt_value* weight) {
  points p = {.in = in, .flat = flat, .dt = in->dtype};
  p.d = flat || in->ndim == 0 ? 1 : in->sizes[in->ndim - 1];
  p.m = p.d ? tpurt_numel(in) / p.d : 0;
  if (!flat && p.d == 0) {
    p.m = 1;
    for (int k = 0; k + 1 < in->ndim; k++) p.m *= in->sizes[k];
  }
  p.weight = weight->kind == TPURT_V_TENSOR ? &weight->t : NULL;
  return p;
}
/* Offset of row-major flat index k over dims [0, nd) of t. */
static int64_t flat_offset(const tpurt_tensor* t, int nd, int64_t k) {
  int64_t off = 0;
  for (int d = nd - 1; d >= 0; d--) off += (k % t->sizes[d]) * t->strides[d], k /= t->sizes[d];
  return off;
}
static double load_at(const tpurt_tensor* t, int64_t off) {
  return tpurt_load_f64((const char*)t->data + off * (int64_t)tpurt_dtype_size((tpurt_dtype)t->dtype), t->dtype);
}
static double coord(const points* p, int64_t i, int64_t d) {
  const tpurt_tensor* t = p->in;
  if (p->flat) return load_at(t, flat_offset(t, t->ndim, i));
  return load_at(t, flat_offset(t, t->ndim - 1, i) + d * t->strides[t->ndim - 1]);
}
static double weight_of(const points* p, int64_t i) {
  return p->weight ? load_at(p->weight, flat_offset(p->weight, p->weight->ndim, i)) : 1.0;
}

static tpurt_status check_float(const tpurt_tensor* in) {
  if (tpurt_is_float(in->dtype)) return TPURT_OK;
  return tpurt_fail(TPURT_ERR_UNSUPPORTED, "\"histogramdd\" not implemented for '%s'", tpurt_dtype_c10_name((tpurt_dtype)in->dtype));
}

/* Outer edges of dimension d: `range` (2 per dim) or the data's min and max (NaN wins),
 * widened by 0.5 each way when equal; [0, 1] for no points. */
static tpurt_status outer_edges(const points* p, const tpurt_value* range, int64_t d, double* lo, double* hi) {
  if (range->kind == TPURT_V_FLOATS) {
    *lo = range->floats[2 * d], *hi = range->floats[2 * d + 1];
  } else if (p->m > 0) {
    if (p->dt != TPURT_F32 && p->dt != TPURT_F64)
      return tpurt_fail(TPURT_ERR_UNSUPPORTED, "\"histogramdd\" not implemented for '%s'", tpurt_dtype_c10_name((tpurt_dtype)p->dt));
    *lo = INFINITY, *hi = -INFINITY;
    for (int64_t i = 0; i < p->m; i++) {
      double v = coord(p, i, d);
      if (isnan(v) || isnan(*lo)) {
        *lo = *hi = NAN;
        continue;
      }
      *lo = v < *lo ? v : *lo, *hi = v > *hi ? v : *hi;
    }
  } else {
    *lo = 0, *hi = 1;
  }
  if (!isfinite(*lo) || !isfinite(*hi))
    return tpurt_fail(TPURT_ERR_RUNTIME, "torch.histogramdd: dimension %lld's range [%g, %g] is not finite", (long long)d,
                      *lo, *hi);
  if (*lo > *hi)
    return tpurt_fail(TPURT_ERR_RUNTIME, "torch.histogramdd: min should not exceed max, but got min %g max %g for dimension %lld",
                      *lo, *hi, (long long)d);
  if (*lo == *hi) *lo -= 0.5, *hi += 0.5;
  return TPURT_OK;
}

/* Per-dimension bin edges as doubles (already rounded to the dtype). */
typedef struct {
  int64_t n[TPURT_MAX_DIMS]; /* edges per dim */
  double* e[TPURT_MAX_DIMS];
  int linear;                /* edges from linspace: linear guess + local search */
} edge_set;

static void edges_free(edge_set* es, int64_t D) {
  for (int64_t d = 0; d < D; d++) tpurt_temp_release(es->e[d]);
}

/* The edges of a dimension: bins + 1 of them from a bin count, a copy of a bin tensor's. */
static size_t count_edges_size(int64_t bins) { return sizeof(double) * (size_t)(bins + 1); }
static size_t tensor_edges_size(const tpurt_tensor* b) {
  int64_t n = tpurt_numel(b);
  return sizeof(double) * (size_t)(n ? n : 1);
}

/* Edges from bin counts (bins: an int list, or one int for histogram). */
static tpurt_status edges_from_counts(const points* p, const int64_t* bins, const tpurt_value* range, edge_set* es) {
  memset(es, 0, sizeof *es);
  es->linear = 1;
  if (p->d > TPURT_MAX_DIMS) return tpurt_fail(TPURT_ERR_RUNTIME, "histogramdd: at most %d dimensions", TPURT_MAX_DIMS);
  for (int64_t d = 0; d < p->d; d++) {
    double lo = 0, hi = 1;
    tpurt_status s = outer_edges(p, range, d, &lo, &hi);
    if (!s && !(es->e[d] = tpurt_temp(count_edges_size(bins[d]))))
      s = TPURT_ERR_OOM;
    if (s) {
      edges_free(es, p->d);
      return s;
    }
    es->n[d] = bins[d] + 1;
    for (int64_t k = 0; k <= bins[d]; k++) es->e[d][k] = tpurt_round_to(p->dt, tpurt_linspace_point(p->dt, lo, hi, bins[d] + 1, k));
  }
  return TPURT_OK;
}

static tpurt_status edges_from_tensors(const points* p, const tpurt_tensor* const* bins, edge_set* es) {
  memset(es, 0, sizeof *es);
  if (p->d > TPURT_MAX_DIMS) return tpurt_fail(TPURT_ERR_RUNTIME, "histogramdd: at most %d dimensions", TPURT_MAX_DIMS);
  for (int64_t d = 0; d < p->d; d++) {
    const tpurt_tensor* b = bins[d];
    int64_t n = tpurt_numel(b);
    if (!(es->e[d] = tpurt_temp(tensor_edges_size(b)))) {
      edges_free(es, p->d);
      return TPURT_ERR_OOM;
    }
    es->n[d] = n;
    for (int64_t k = 0; k < n; k++) es->e[d][k] = load_at(b, b->ndim ? k * b->strides[0] : 0);
  }
  return TPURT_OK;
}

/* std::upper_bound over e[first, last) - e: the first edge greater than v. */
static int64_t upper_bound(const double* e, int64_t first, int64_t last, double v) {
  int64_t count = last - first;
  while (count > 0) {
    int64_t step = count / 2, it = first + step;
    if (!(v < e[it])) first = it + 1, count -= step + 1;
    else count = step;
  }
  return first;
}

/* hist (the D-dim output) = the histogram of the points over es. */
static tpurt_status fill_hist(const points* p, const edge_set* es, int density, const tpurt_tensor* hist) {
  int dt = p->dt;
  int64_t idx[TPURT_MAX_DIMS] = {0}, total = tpurt_numel(hist);
  if (total)
    do tpurt_store_f64(tpurt_elem_ptr(hist, idx), hist->dtype, 0.0); while (tpurt_next_index(idx, hist->sizes, hist->ndim));
  if (p->d == 0) return TPURT_OK;
  for (int64_t i = 0; i < p->m; i++) {
    int64_t off = 0, d;
    for (d = 0; d < p->d; d++) {
      const double* e = es->e[d];
      int64_t ne = es->n[d], pos;
      double v = coord(p, i, d), lo = e[0], hi = e[ne - 1];
      if (ne < 2 || !(v >= lo && v <= hi)) break; /* no bins, or outside them */
      if (es->linear) {
        double g = tpurt_round_to(dt, tpurt_round_to(dt, tpurt_round_to(dt, v - lo) * tpurt_round_to(dt, (double)(ne - 1))) /
                                          tpurt_round_to(dt, hi - lo));
        pos = (int64_t)g;
        int64_t a = pos - 1 > 0 ? pos - 1 : 0, b = pos + 2 < ne ? pos + 2 : ne;
        pos = upper_bound(e, a, b, v) - 1;
      } else {
        pos = upper_bound(e, 0, ne, v) - 1;
      }
      if (pos == ne - 1) pos--;
      off += pos * hist->strides[d];
    }
    if (d < p->d) continue;
    char* h = (char*)hist->data + off * (int64_t)tpurt_dtype_size((tpurt_dtype)hist->dtype);
    tpurt_store_f64(h, dt, tpurt_load_f64(h, dt) + weight_of(p, i));
  }
  if (!density || !total) return TPURT_OK;
  double sum = 0;
  memset(idx, 0, sizeof idx);
  /* in order, in the dtype: CPU's sum for a histogram this small */
  do sum = tpurt_round_to(dt, sum + tpurt_load_f64(tpurt_elem_ptr(hist, idx), dt));
  while (tpurt_next_index(idx, hist->sizes, hist->ndim));
  memset(idx, 0, sizeof idx);
  do {
    char* h = tpurt_elem_ptr(hist, idx);
    double v = tpurt_round_to(dt, tpurt_load_f64(h, dt) / sum);
    for (int64_t d = 0; d < p->d; d++)
      v = tpurt_round_to(dt, v / tpurt_round_to(dt, es->e[d][idx[d] + 1] - es->e[d][idx[d]]));
    tpurt_store_f64(h, dt, v);
  } while (tpurt_next_index(idx, hist->sizes, hist->ndim));
  return TPURT_OK;
}

static tpurt_status store_edges(const edge_set* es, int64_t d, const tpurt_tensor* out) {
  for (int64_t k = 0; k < es->n[d]; k++)
    tpurt_store_f64((char*)out->data + k * out->strides[0] * (int64_t)tpurt_dtype_size((tpurt_dtype)out->dtype), out->dtype,
                    es->e[d][k]);
  return TPURT_OK;
}

/* histogramdd from bin counts; `edges_out` (D tensors) or `hist` may be NULL. */
#define HIST_COUNTS_LAYOUT(k)                                                                     \
  (TPURT_ARG_##k##_self == TPURT_ARG_histogram_bin_ct_self &&                                      \
   TPURT_ARG_##k##_range == TPURT_ARG_histogram_bin_ct_range &&                                    \
   TPURT_ARG_##k##_weight == TPURT_ARG_histogram_bin_ct_weight &&                                  \
   TPURT_ARG_##k##_density == TPURT_ARG_histogram_bin_ct_density)
_Static_assert(HIST_COUNTS_LAYOUT(histogramdd_bin_edges) && HIST_COUNTS_LAYOUT(histogramdd_from_bin_cts),
               "from_counts serves histogram.bin_ct, _histogramdd_bin_edges and _histogramdd_from_bin_cts");
#undef HIST_COUNTS_LAYOUT
static tpurt_status from_counts(const tpurt_op_call* c, int flat, const int64_t* bins, const tpurt_tensor* hist,
                                const tpurt_tensor* edges_out) {
  /* (self, bins, *, range, weight, density) */
  const tpurt_tensor* in = &TPURT_ARG(c, histogram_bin_ct, self)->t;
  tpurt_status s = check_float(in);
  if (s) return s;
  points p = points_of(in, flat, TPURT_ARG(c, histogram_bin_ct, weight));
  edge_set es;
  if ((s = edges_from_counts(&p, bins, TPURT_ARG(c, histogram_bin_ct, range), &es))) return s;
  if (hist) s = fill_hist(&p, &es, (int)TPURT_ARG(c, histogram_bin_ct, density)->i, hist);
  for (int64_t d = 0; !s && edges_out && d < p.d; d++) s = store_edges(&es, d, &edges_out[d]);
  edges_free(&es, p.d);
  return s;
}

_Static_assert(TPURT_ARG_histogramdd_from_bin_tensors_self == TPURT_ARG_histogram_bins_tensor_self &&
                   TPURT_ARG_histogramdd_from_bin_tensors_weight == TPURT_ARG_histogram_bins_tensor_weight &&
                   TPURT_ARG_histogramdd_from_bin_tensors_density == TPURT_ARG_histogram_bins_tensor_density,
               "from_tensors serves histogram.bins_tensor and _histogramdd_from_bin_tensors");
static tpurt_status from_tensors(const tpurt_op_call* c, int flat, const tpurt_tensor* const* bins,
                                 const tpurt_tensor* hist, const tpurt_tensor* edges_out) {
  /* (self, bins, *, weight, density) */
  const tpurt_tensor* in = &TPURT_ARG(c, histogram_bins_tensor, self)->t;
  tpurt_status s = check_float(in);
  if (s) return s;
  points p = points_of(in, flat, TPURT_ARG(c, histogram_bins_tensor, weight));
  edge_set es;
  if ((s = edges_from_tensors(&p, bins, &es))) return s;
  s = fill_hist(&p, &es, (int)TPURT_ARG(c, histogram_bins_tensor, density)->i, hist);
  if (!s && edges_out) s = store_edges(&es, 0, edges_out);
  edges_free(&es, p.d);
  return s;
}

tpurt_status tpurt_kernel_histogram_bin_ct(const tpurt_op_call* c) {
  /* histogram.bin_ct(self, bins, *, range, weight, density) -> (hist, bin_edges) */
  int64_t bins = TPURT_ARG(c, histogram_bin_ct, bins)->i;
  return from_counts(c, 1, &bins, &c->outs[0], &c->outs[1]);
}

tpurt_status tpurt_kernel_histogram_bins_tensor(const tpurt_op_call* c) {
  /* histogram.bins_tensor(self, bins, *, weight, density) -> (hist, bin_edges = bins) */
  const tpurt_tensor* bins = &TPURT_ARG(c, histogram_bins_tensor, bins)->t;
  return from_tensors(c, 1, &bins, &c->outs[0], &c->outs[1]);
}

tpurt_status tpurt_kernel_histogramdd_bin_edges(const tpurt_op_call* c) {
  /* _histogramdd_bin_edges(self, bins, *, range, weight, density) -> Tensor[] (the output
   * list is the last argument) */
  const tpurt_value* outs = &c->args[c->nargs - 1];
  if (outs->kind != TPURT_V_TENSORS || outs->n != TPURT_ARG(c, histogramdd_bin_edges, bins)->n)
    return tpurt_fail(TPURT_ERR_VALUE, "_histogramdd_bin_edges: malformed call");
  return from_counts(c, 0, TPURT_ARG(c, histogramdd_bin_edges, bins)->ints, NULL, outs->tensors);
}

tpurt_status tpurt_kernel_histogramdd_from_bin_cts(const tpurt_op_call* c) {
  /* _histogramdd_from_bin_cts(self, bins, *, range, weight, density) -> hist */
  return from_counts(c, 0, TPURT_ARG(c, histogramdd_from_bin_cts, bins)->ints, &c->outs[0], NULL);
}

tpurt_status tpurt_kernel_histogramdd_from_bin_tensors(const tpurt_op_call* c) {
  /* _histogramdd_from_bin_tensors(self, bins, *, weight, density) -> hist */
  const tpurt_value* b = TPURT_ARG(c, histogramdd_from_bin_tensors, bins);
  const tpurt_tensor* bins[TPURT_MAX_DIMS];
  if (b->n > TPURT_MAX_DIMS) return tpurt_fail(TPURT_ERR_RUNTIME, "histogramdd: at most %d dimensions", TPURT_MAX_DIMS);
  for (int d = 0; d < b->n; d++) bins[d] = &b->tensors[d];
  return from_tensors(c, 0, bins, &c->outs[0], NULL);
}

/* ---------------------------------------------------------------- plan hooks: the edges of every dimension */
static tpurt_status plan_counts(const tpurt_op_call* c, int flat, const int64_t* bins, int64_t nbins, tpurt_plan* p) {
  points pts = points_of(&TPURT_ARG(c, histogram_bin_ct, self)->t, flat, TPURT_ARG(c, histogram_bin_ct, weight));
  for (int64_t d = 0; d < pts.d && d < nbins && d < TPURT_MAX_DIMS; d++)
    p->scratch_bytes += tpurt_temp_bytes(count_edges_size(bins[d]));
  return TPURT_OK;
}
static tpurt_status plan_tensors(const tpurt_op_call* c, int flat, const tpurt_tensor* bins, int64_t nbins, tpurt_plan* p) {
  points pts = points_of(&TPURT_ARG(c, histogram_bins_tensor, self)->t, flat, TPURT_ARG(c, histogram_bins_tensor, weight));
  for (int64_t d = 0; d < pts.d && d < nbins && d < TPURT_MAX_DIMS; d++)
    p->scratch_bytes += tpurt_temp_bytes(tensor_edges_size(&bins[d]));
  return TPURT_OK;
}
tpurt_status tpurt_plan_histogram_bin_ct(const tpurt_op_call* c, tpurt_plan* p) {
  return plan_counts(c, 1, &TPURT_ARG(c, histogram_bin_ct, bins)->i, 1, p);
}
tpurt_status tpurt_plan_histogram_bins_tensor(const tpurt_op_call* c, tpurt_plan* p) {
  return plan_tensors(c, 1, &TPURT_ARG(c, histogram_bins_tensor, bins)->t, 1, p);
}
tpurt_status tpurt_plan_histogramdd_bin_edges(const tpurt_op_call* c, tpurt_plan* p) {
  const tpurt_value* b = TPURT_ARG(c, histogramdd_bin_edges, bins);
  return plan_counts(c, 0, b->ints, b->n, p);
}
tpurt_status tpurt_plan_histogramdd_from_bin_cts(const tpurt_op_call* c, tpurt_plan* p) {
  const tpurt_value* b = TPURT_ARG(c, histogramdd_from_bin_cts, bins);
  return plan_counts(c, 0, b->ints, b->n, p);
}
tpurt_status tpurt_plan_histogramdd_from_bin_tensors(const tpurt_op_call* c, tpurt_plan* p) {
  const tpurt_value* b = TPURT_ARG(c, histogramdd_from_bin_tensors, bins);
  return plan_tensors(c, 0, b->tensors, b->n, p);
}
