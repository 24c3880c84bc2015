/* NN kernels: softmax / log_softmax (+ backward), layer / group / batch norm (+ backward),
 * nll_loss (1d and 2d, + backward), mse_loss (+ backward). Everything computes in double on
 * dense copies of the lines/blocks it works on, so any input strides are fine. */
#include <stdlib.h>

#include "reduce.h"
#include "vmath.h"

/* ---------------------------------------------------------------- blocks
 * A tensor seen as [outer dims 0..k) x [inner dims k..nd): block `o` is the inner
 * sub-tensor at row-major outer index o, copied to/from a dense double array. */
static int64_t outer_offset(const tpurt_tensor* t, int k, int64_t o) {
  int flat = 1; /* outer dims that collapse to one stride need no division per dim */
  for (int d = 0; d + 1 < k && flat; d++) flat = t->strides[d] == t->strides[d + 1] * t->sizes[d + 1];
  if (flat) return k ? o * t->strides[k - 1] : 0;
  int64_t off = 0;
  for (int d = k - 1; d >= 0; d--) {
    off += (o % t->sizes[d]) * t->strides[d];
    o /= t->sizes[d];
  }
  return off;
}

static void block_io(const tpurt_tensor* t, int k, int64_t o, double* buf, int store) {
  size_t es = tpurt_dtype_size((tpurt_dtype)t->dtype);
  char* base = (char*)t->data + outer_offset(t, k, o) * (int64_t)es;
  int nd = t->ndim;
  if (k >= nd) {
    if (store) tpurt_red_store(base, 0, t->dtype, buf, 1);
    else tpurt_red_load(buf, 0, base, 0, t->dtype, 1);
    return;
  }
  int64_t idx[TPURT_MAX_DIMS] = {0}, len = t->sizes[nd - 1], st = t->strides[nd - 1];
  for (int d = k; d < nd; d++)
    if (t->sizes[d] == 0) return; /* an empty block (a normalized shape with a 0) has no element to move */
  /* inner dims whose strides chain into the last one's move as one run (an image plane) */
  int in = nd - 1;
  while (in > k && t->strides[in - 1] == st * len) len *= t->sizes[--in];
  do {
    int64_t off = 0;
    for (int d = k; d < in; d++) off += idx[d] * t->strides[d];
    char* p = base + off * (int64_t)es;
    if (store) tpurt_red_store(p, st, t->dtype, buf, len);
    else tpurt_red_load(buf, 0, p, st, t->dtype, len);
    buf += len;
  } while (in > k && tpurt_next_index(idx + k, t->sizes + k, in - k));
}
static void load_block(const tpurt_tensor* t, int k, int64_t o, double* buf) { block_io(t, k, o, buf, 0); }
static void store_block(const tpurt_tensor* t, int k, int64_t o, const double* buf) {
  block_io(t, k, o, (double*)buf, 1);
}

static int64_t prod_dims(const tpurt_tensor* t, int from, int to) {
  int64_t n = 1;
  for (int d = from; d < to; d++) n *= t->sizes[d];
  return n;
}

static int defined(const tpurt_tensor* t) { return t->ndim >= 0 && t->data; }

/* Work space of n doubles (at least one), and what a plan counts for it (temp.c's rounding). */
static size_t scratch_bytes(int64_t n) { return sizeof(double) * (size_t)(n > 0 ? n : 1); }
static double* scratch(int64_t n) { return tpurt_temp(scratch_bytes(n)); }
static int64_t planned(int64_t n) { return tpurt_temp_bytes(scratch_bytes(n)); }
#define OOM(op) tpurt_fail(TPURT_ERR_OOM, op ": out of host memory for scratch")

/* ---------------------------------------------------------------- pool loops with work space
 * A loop over n items on the pool (tpurt_parallel_sliced), each chunk using `per` doubles of
 * work space: a slice of one temporary. */
/* The loop's work space in a plan (none for no items). */
static int64_t loop_planned(int64_t n, int64_t grain, int64_t per) {
  return n > 0 ? planned(per * tpurt_sliced_workers(n, grain)) : 0;
}

/* 0 when out of memory for the work space. */
static int run_loop(int64_t n, int64_t grain, int64_t per, tpurt_slice_fn fn, void* ctx) {
  if (n <= 0) return 1;
  double* work = scratch(per * tpurt_sliced_workers(n, grain));
  if (!work) return 0;
  tpurt_parallel_sliced(n, grain, work, sizeof(double) * (size_t)per, NULL, fn, ctx);
  tpurt_temp_release(work);
  return 1;
}

/* ---------------------------------------------------------------- lines along one dim */
/* Call fn on every line along `dim` of same-shaped tensors t[0..nt): each line is loaded
 * into a dense double array (lines[k], length len); lines of tensors flagged in `outs`
 * are stored back afterwards. When another dim p is denser than `dim` (softmax over dim 0
 * or over channels), B neighbouring lines along p go together: each line position is then
 * one run of B elements along p instead of B scattered loads. */
typedef void (*line_fn)(double* const* lines, int64_t len);
/* The float32 version, called on the tensors' own memory when every tensor is float32 and
 * dense along `dim` (math in float, as CPU's vectorized kernels and a TPU's; sums in
 * double lanes), or NULL. */
typedef void (*line_fn_f)(float* const* lines, int64_t len);

#define LINE_TILE 16384 /* doubles per tensor in a tile of lines */

static void tile_io(const tpurt_tensor* t, char* base, int64_t std_, int64_t stp, int64_t len, int64_t b,
                    double* lines, double* row, int store) {
  size_t es = tpurt_dtype_size((tpurt_dtype)t->dtype);
  if (b == 1) {
    if (store) tpurt_red_store(base, std_, t->dtype, lines, len);
    else tpurt_red_load(lines, 0, base, std_, t->dtype, len);
    return;
  }
  for (int64_t j = 0; j < len; j++) {
    char* p = base + j * std_ * (int64_t)es;
    if (store) {
      for (int64_t q = 0; q < b; q++) row[q] = lines[q * len + j];
      tpurt_red_store(p, stp, t->dtype, row, b);
    } else {
      tpurt_red_load(row, 0, p, stp, t->dtype, b);
      for (int64_t q = 0; q < b; q++) lines[q * len + j] = row[q];
    }
  }
}

/* Tiles of lines: tile `item` is the row-major index over `sizes` (dim d collapsed to 1,
 * dim p counted in blocks of B). Tiles write disjoint lines, so they go to the pool. */
typedef struct lines_job {
  int nt;
  const tpurt_tensor* const* t;
  unsigned outs;
  int d, p, nd;
  int64_t len, B;
  int64_t sizes[TPURT_MAX_DIMS];
  line_fn fn;
  line_fn_f ffn; /* NULL, or the float32 lines' function (set when every tensor qualifies) */
  int64_t tiles, grain; /* the pool loop over tiles */
} lines_job;

/* A tile's work space: its lines of every tensor, and one row across them. */
static int64_t tile_elems(const lines_job* J) { return J->len * J->B * J->nt + J->B; }

static void line_tiles(void* arg, void* slice, int64_t lo, int64_t hi) {
  lines_job* J = arg;
  double* buf = slice;
  const tpurt_tensor* const* t = J->t;
  int nd = J->nd, d = J->d, p = J->p, nt = J->nt;
  int64_t len = J->len, B = J->B;
  double* row = buf + len * B * nt;
  int64_t idx[TPURT_MAX_DIMS];
  for (int64_t item = lo; item < hi; item++) {
    for (int64_t e = nd - 1, r = item; e >= 0; e--) {
      idx[e] = r % J->sizes[e];
      r /= J->sizes[e];
    }
    int64_t b = p >= 0 && (idx[p] + 1) * B > t[0]->sizes[p] ? t[0]->sizes[p] - idx[p] * B : B;
    char* base[4];
    for (int k = 0; k < nt; k++) {
      int64_t off = 0;
      for (int e = 0; e < nd; e++) off += idx[e] * (e == p ? B : 1) * t[k]->strides[e];
      base[k] = (char*)t[k]->data + off * (int64_t)tpurt_dtype_size((tpurt_dtype)t[k]->dtype);
    }
    if (J->ffn) {
      J->ffn((float* const*)base, len);
      continue;
    }
    for (int k = 0; k < nt; k++) {
      if (!(J->outs >> k & 1))
        tile_io(t[k], base[k], nd ? t[k]->strides[d] : 0, p >= 0 ? t[k]->strides[p] : 0, len, b, buf + k * len * B,
                row, 0);
    }
    for (int64_t q = 0; q < b; q++) {
      double* lines[4];
      for (int k = 0; k < nt; k++) lines[k] = buf + k * len * B + q * len;
      J->fn(lines, len);
    }
    for (int k = 0; k < nt; k++)
      if (J->outs >> k & 1)
        tile_io(t[k], base[k], nd ? t[k]->strides[d] : 0, p >= 0 ? t[k]->strides[p] : 0, len, b, buf + k * len * B,
                row, 1);
  }
}

/* Work per pool claim and the least total worth splitting, in elements per tensor. */
#define NN_PAR_GRAIN (1 << 14)
#define NN_PAR_MIN (1 << 16)

/* The tiles of t[0..nt) along dim (none for an empty tensor) and how the pool claims them. */
static tpurt_status lines_setup(int nt, const tpurt_tensor* const* t, unsigned outs, int64_t dim, line_fn fn,
                                line_fn_f ffn, lines_job* J) {
  int d;
  tpurt_status s = tpurt_wrap_dim(dim, t[0]->ndim, &d);
  if (s) return s;
  int nd = t[0]->ndim;
  int64_t len = nd ? t[0]->sizes[d] : 1;
  *J = (lines_job){nt, t, outs, d, -1, nd, len, 1, {0}, fn, NULL, 0, 1};
  if (tpurt_numel(t[0]) == 0) return TPURT_OK;
  int p = -1;
  for (int e = 0; e < nd; e++)
    if (e != d && t[0]->sizes[e] > 1 && tpurt_iabs64(t[0]->strides[e]) < tpurt_iabs64(t[0]->strides[d]) &&
        (p < 0 || tpurt_iabs64(t[0]->strides[e]) < tpurt_iabs64(t[0]->strides[p])))
      p = e;
  int64_t B = 1;
  if (p >= 0) {
    B = LINE_TILE / len;
    B = B < 1 ? 1 : B > t[0]->sizes[p] ? t[0]->sizes[p] : B;
  }
  J->p = p, J->B = B;
  int dense_f32 = ffn != NULL && p < 0; /* (a plan passes only the first tensor, and no ffn) */
  for (int k = 0; dense_f32 && k < nt; k++)
    dense_f32 = t[k]->dtype == TPURT_F32 && (len == 1 || (nd && t[k]->strides[d] == 1));
  J->ffn = dense_f32 ? ffn : NULL;
  memcpy(J->sizes, t[0]->sizes, sizeof J->sizes);
  if (nd) J->sizes[d] = 1;
  if (p >= 0) J->sizes[p] = (J->sizes[p] + B - 1) / B;
  int64_t tiles = 1;
  for (int e = 0; e < nd; e++) tiles *= J->sizes[e];
  int64_t per_tile = len * B;
  J->tiles = tiles;
  J->grain = tiles > 1 && tiles * per_tile >= NN_PAR_MIN ? (NN_PAR_GRAIN + per_tile - 1) / per_tile : tiles;
  return TPURT_OK;
}

static tpurt_status for_lines(int nt, const tpurt_tensor* const* t, unsigned outs, int64_t dim, line_fn fn,
                              line_fn_f ffn) {
  lines_job J;
  tpurt_status s = lines_setup(nt, t, outs, dim, fn, ffn, &J);
  if (s) return s;
  return run_loop(J.tiles, J.grain, tile_elems(&J), line_tiles, &J) ? TPURT_OK : OOM("softmax");
}

/* The work space of for_lines over nt tensors shaped like `first` (all lines_setup reads). */
static tpurt_status plan_lines(int nt, const tpurt_tensor* first, int64_t dim, tpurt_plan* p) {
  lines_job J;
  tpurt_status s = lines_setup(nt, &first, 0, dim, NULL, NULL, &J);
  if (!s) p->scratch_bytes += loop_planned(J.tiles, J.grain, tile_elems(&J));
  return s;
}

/* ---------------------------------------------------------------- softmax */
/* The line loops vectorize (vmath.h's exp). Sums fold in fixed lanes, so their order depends
 * only on the line length: 32 lanes while a line has 32 values left (four independent vector
 * chains: one chain waits on every addition's latency), then 8, then one, and the lanes fold
 * as a tree. */
#define LANES 8
#define WIDE_LANES 32
/* The lanes' tree: acc[0] becomes their sum, each level adding the upper half to the lower.
 * Loops of constant length, which vectorize (a loop over the halving width became scalar
 * additions through the stack: 15-20% of a layer norm backward of 256-wide rows). */
static inline void fold_wide_lanes(double* acc) {
  _Static_assert(WIDE_LANES == 32, "the fold below is written for 32 lanes");
  for (int j = 0; j < 16; j++) acc[j] += acc[j + 16];
  for (int j = 0; j < 8; j++) acc[j] += acc[j + 8];
  for (int j = 0; j < 4; j++) acc[j] += acc[j + 4];
  for (int j = 0; j < 2; j++) acc[j] += acc[j + 2];
  acc[0] += acc[1];
}

#define LANE_SUM(name, params, term)                                      \
  static inline double name params {                                      \
    double acc[WIDE_LANES] = {0}, s = 0;                                  \
    int64_t k = 0;                                                        \
    for (; k + WIDE_LANES <= n; k += WIDE_LANES)                          \
      for (int j = 0; j < WIDE_LANES; j++) acc[j] += term(k + j);         \
    for (; k + LANES <= n; k += LANES)                                    \
      for (int j = 0; j < LANES; j++) acc[j] += term(k + j);              \
    for (; k < n; k++) s += term(k);                                      \
    fold_wide_lanes(acc);                                                 \
    return s + acc[0];                                                    \
  }
#define SUM_TERM(i) x[i]
#define DOT_TERM(i) (x[i] * y[i])
#define SUM_F_TERM(i) ((double)x[i])
#define SQDEV_F_TERM(i) (((double)x[i] - m) * ((double)x[i] - m))
#define SQDEV_TERM(i) ((x[i] - m) * (x[i] - m))
LANE_SUM(line_sum, (const double* x, int64_t n), SUM_TERM)
LANE_SUM(line_dot, (const double* x, const double* y, int64_t n), DOT_TERM)
LANE_SUM(line_sum_f, (const float* x, int64_t n), SUM_F_TERM)
LANE_SUM(line_sqdev_f, (const float* x, double m, int64_t n), SQDEV_F_TERM)
LANE_SUM(line_sqdev, (const double* x, double m, int64_t n), SQDEV_TERM)

/* The largest of x[0..n), in W lanes (as many as a vector of T holds with AVX-512). */
#define LINE_MAX(name, T, W)                                                            \
  static inline T name(const T* x, int64_t n) {                                         \
    T acc[W], m = -INFINITY;                                                            \
    for (int j = 0; j < W; j++) acc[j] = -INFINITY;                                     \
    int64_t k = 0;                                                                      \
    for (; k + W <= n; k += W)                                                          \
      for (int j = 0; j < W; j++) acc[j] = x[k + j] > acc[j] ? x[k + j] : acc[j];       \
    for (; k < n; k++) m = x[k] > m ? x[k] : m;                                         \
    for (int j = 0; j < W; j++) m = acc[j] > m ? acc[j] : m;                            \
    return m;                                                                           \
  }
LINE_MAX(line_max, double, LANES)
LINE_MAX(line_max_f, float, 2 * LANES)
/* lines: [0] input, [1] output */
static void softmax_line(double* const* l, int64_t n) {
  const double* x = l[0];
  double* y = l[1];
  double m = line_max(x, n);
  for (int64_t k = 0; k < n; k++) y[k] = vm_exp(x[k] - m);
  double sum = line_sum(y, n);
  for (int64_t k = 0; k < n; k++) y[k] /= sum;
}
static void log_softmax_line(double* const* l, int64_t n) {
  const double* x = l[0];
  double* y = l[1];
  double m = line_max(x, n);
  for (int64_t k = 0; k < n; k++) y[k] = vm_exp(x[k] - m);
  double log_sum = log(line_sum(y, n));
  for (int64_t k = 0; k < n; k++) y[k] = (x[k] - m) - log_sum;
}
/* lines: [0] grad_output, [1] output, [2] grad_input */
static void softmax_bwd_line(double* const* l, int64_t n) {
  double dot = line_dot(l[0], l[1], n);
  for (int64_t k = 0; k < n; k++) l[2][k] = l[1][k] * (l[0][k] - dot);
}
static void log_softmax_bwd_line(double* const* l, int64_t n) {
  double sum = line_sum(l[0], n);
  for (int64_t k = 0; k < n; k++) l[2][k] = l[0][k] - vm_exp(l[1][k]) * sum;
}

#define DOT_F_TERM(i) ((double)x[i] * y[i])
#define EXP_F_TERM(i) ((double)vm_expf(x[i] - m))
LANE_SUM(line_dot_f, (const float* x, const float* y, int64_t n), DOT_F_TERM)
LANE_SUM(line_sumexp_f, (const float* x, float m, int64_t n), EXP_F_TERM)
static void softmax_line_f(float* const* l, int64_t n) {
  const float* x = l[0];
  float* y = l[1];
  float m = line_max_f(x, n);
  for (int64_t k = 0; k < n; k++) y[k] = vm_expf(x[k] - m);
  float inv = (float)(1 / line_sum_f(y, n));
  for (int64_t k = 0; k < n; k++) y[k] *= inv;
}
static void log_softmax_line_f(float* const* l, int64_t n) {
  const float* x = l[0];
  float* y = l[1];
  float m = line_max_f(x, n);
  /* y is not written before: it may be x. As CPU, (x - max) - log(sum): x - (max + log(sum))
   * rounds the sum to x's magnitude (0.31 off for values near 1e7) */
  float log_sum = (float)log(line_sumexp_f(x, m, n));
  for (int64_t k = 0; k < n; k++) y[k] = (x[k] - m) - log_sum;
}
static void softmax_bwd_line_f(float* const* l, int64_t n) {
  float dot = (float)line_dot_f(l[0], l[1], n);
  for (int64_t k = 0; k < n; k++) l[2][k] = l[1][k] * (l[0][k] - dot);
}
static void log_softmax_bwd_line_f(float* const* l, int64_t n) {
  float sum = (float)line_sum_f(l[0], n);
  for (int64_t k = 0; k < n; k++) l[2][k] = l[0][k] - vm_expf(l[1][k]) * sum;
}

/* _softmax(self, dim, half_to_float) / _log_softmax likewise */
tpurt_status tpurt_kernel_softmax(const tpurt_op_call* c) {
  const tpurt_tensor* t[2] = {&TPURT_ARG(c, softmax, self)->t, &c->outs[0]};
  return for_lines(2, t, 2, TPURT_ARG(c, softmax, dim)->i, softmax_line, softmax_line_f);
}
tpurt_status tpurt_kernel_log_softmax(const tpurt_op_call* c) {
  const tpurt_tensor* t[2] = {&TPURT_ARG(c, log_softmax, self)->t, &c->outs[0]};
  return for_lines(2, t, 2, TPURT_ARG(c, log_softmax, dim)->i, log_softmax_line, log_softmax_line_f);
}
/* _softmax_backward_data(grad_output, output, dim, input_dtype) */
tpurt_status tpurt_kernel_softmax_backward(const tpurt_op_call* c) {
  const tpurt_tensor* t[3] = {&TPURT_ARG(c, softmax_backward, grad_output)->t, &TPURT_ARG(c, softmax_backward, output)->t, &c->outs[0]};
  return for_lines(3, t, 4, TPURT_ARG(c, softmax_backward, dim)->i, softmax_bwd_line, softmax_bwd_line_f);
}
tpurt_status tpurt_kernel_log_softmax_backward(const tpurt_op_call* c) {
  const tpurt_tensor* t[3] = {&TPURT_ARG(c, log_softmax_backward, grad_output)->t, &TPURT_ARG(c, log_softmax_backward, output)->t, &c->outs[0]};
  return for_lines(3, t, 4, TPURT_ARG(c, log_softmax_backward, dim)->i, log_softmax_bwd_line, log_softmax_bwd_line_f);
}

tpurt_status tpurt_plan_softmax(const tpurt_op_call* c, tpurt_plan* p) {
  return plan_lines(2, &TPURT_ARG(c, softmax, self)->t, TPURT_ARG(c, softmax, dim)->i, p);
}
tpurt_status tpurt_plan_log_softmax(const tpurt_op_call* c, tpurt_plan* p) {
  return plan_lines(2, &TPURT_ARG(c, log_softmax, self)->t, TPURT_ARG(c, log_softmax, dim)->i, p);
}
tpurt_status tpurt_plan_softmax_backward(const tpurt_op_call* c, tpurt_plan* p) {
  return plan_lines(3, &TPURT_ARG(c, softmax_backward, grad_output)->t, TPURT_ARG(c, softmax_backward, dim)->i, p);
}
tpurt_status tpurt_plan_log_softmax_backward(const tpurt_op_call* c, tpurt_plan* p) {
  return plan_lines(3, &TPURT_ARG(c, log_softmax_backward, grad_output)->t, TPURT_ARG(c, log_softmax_backward, dim)->i,
                    p);
}

/* ---------------------------------------------------------------- layer norm */
/* Leading dims of `in` that are not normalized; fails when normalized_shape doesn't match. */
static tpurt_status norm_axis(const tpurt_tensor* in, const tpurt_value* shape, int* k) {
  int n = shape->n;
  *k = in->ndim - n;
  if (*k < 0) return tpurt_fail(TPURT_ERR_RUNTIME, "layer_norm: normalized_shape longer than input %s", tpurt_shape_str(in));
  for (int d = 0; d < n; d++)
    if (in->sizes[*k + d] != shape->ints[d])
      return tpurt_fail(TPURT_ERR_RUNTIME, "layer_norm: normalized_shape does not match input %s", tpurt_shape_str(in));
  return TPURT_OK;
}

/* Optional per-feature tensor as a dense array of n doubles (fill when absent). */
static void load_param(const tpurt_value* v, double* dst, int64_t n, double fill) {
  if (v->kind == TPURT_V_TENSOR) load_block(&v->t, 0, 0, dst);
  else for (int64_t k = 0; k < n; k++) dst[k] = fill;
}

/* Two-pass mean and biased variance of n values (double, or float read in place). */
static inline void mean_var_float(const float* x, int64_t n, double* mean, double* var) {
  double m = n ? line_sum_f(x, n) / (double)n : 0;
  *mean = m;
  *var = n ? line_sqdev_f(x, m, n) / (double)n : NAN; /* as CPU: no values, mean 0 and variance NaN */
}
static inline void mean_var(const double* x, int64_t n, double* mean, double* var) {
  double m = n ? line_sum(x, n) / (double)n : 0;
  *mean = m;
  *var = n ? line_sqdev(x, m, n) / (double)n : NAN;
}
static inline void mean_rstd(const double* x, int64_t n, double eps, double* mean, double* rstd) {
  double var;
  mean_var(x, n, mean, &var);
  *rstd = 1.0 / sqrt(var + eps);
}

/* Layer norm reads and writes dense float32 rows in place (the common case) instead of
 * staging them as doubles, and computes them in float (as a TPU does: f32 math, here with
 * the row sums in double), 16 lanes a vector instead of 8; other dtypes and layouts are
 * staged and computed in double. */
static int ln_dense(const tpurt_tensor* t) { return t->dtype == TPURT_F32 && tpurt_is_contiguous(t); }

/* native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (out, mean, rstd) */
typedef struct ln_job {
  const tpurt_op_call* c;
  int k;
  int64_t n;
  double eps;
  const double *w, *b;
  const float *wf, *bf; /* w and b in float, for dense float32 rows */
} ln_job;

/* The pool claims rows in chunks of about NN_PAR_GRAIN elements when there are enough. */
static int64_t ln_grain(int64_t m, int64_t n) {
  return m > 1 && m * n >= NN_PAR_MIN ? (NN_PAR_GRAIN + n - 1) / (n ? n : 1) : m;
}

/* Rows [lo, hi): each normalized independently, x holding one (the pool splits them). */
static void ln_rows(void* arg, void* slice, int64_t lo, int64_t hi) {
  ln_job* J = arg;
  double* x = slice;
  const tpurt_op_call* c = J->c;
  int64_t n = J->n;
  int dense = ln_dense(&TPURT_ARG(c, layer_norm, input)->t) && ln_dense(&c->outs[0]) && ln_dense(&c->outs[1]) && ln_dense(&c->outs[2]);
  for (int64_t o = lo; o < hi; o++) {
    double mean, rstd;
    if (dense) {
      const float* xr = (const float*)TPURT_ARG(c, layer_norm, input)->t.data + o * n;
      float* yr = (float*)c->outs[0].data + o * n;
      double var;
      mean_var_float(xr, n, &mean, &var);
      rstd = 1.0 / sqrt(var + J->eps);
      const float mf = (float)mean, rf = (float)rstd, *wf = J->wf, *bf = J->bf;
      for (int64_t j = 0; j < n; j++) yr[j] = (xr[j] - mf) * rf * wf[j] + bf[j];
      ((float*)c->outs[1].data)[o] = (float)mean;
      ((float*)c->outs[2].data)[o] = (float)rstd;
      continue;
    }
    load_block(&TPURT_ARG(c, layer_norm, input)->t, J->k, o, x);
    mean_rstd(x, n, J->eps, &mean, &rstd);
    for (int64_t j = 0; j < n; j++) x[j] = (x[j] - mean) * rstd * J->w[j] + J->b[j];
    store_block(&c->outs[0], J->k, o, x);
    store_block(&c->outs[1], J->k, o, &mean);
    store_block(&c->outs[2], J->k, o, &rstd);
  }
}

tpurt_status tpurt_kernel_layer_norm(const tpurt_op_call* c) {
  const tpurt_tensor* in = &TPURT_ARG(c, layer_norm, input)->t;
  int k;
  tpurt_status s = norm_axis(in, TPURT_ARG(c, layer_norm, normalized_shape), &k);
  if (s) return s;
  int64_t m = prod_dims(in, 0, k), n = prod_dims(in, k, in->ndim);
  double* buf = scratch(3 * n);
  if (!buf) return OOM("layer_norm");
  double *w = buf, *b = buf + n;
  float *wf = (float*)(buf + 2 * n), *bf = wf + n;
  load_param(TPURT_ARG(c, layer_norm, weight), w, n, 1);
  load_param(TPURT_ARG(c, layer_norm, bias), b, n, 0);
  for (int64_t j = 0; j < n; j++) wf[j] = (float)w[j], bf[j] = (float)b[j];
  ln_job J = {c, k, n, tpurt_value_f(TPURT_ARG(c, layer_norm, eps)), w, b, wf, bf};
  int ok = run_loop(m, ln_grain(m, n), n, ln_rows, &J);
  tpurt_temp_release(buf);
  return ok ? TPURT_OK : OOM("layer_norm");
}

/* weight and bias, then a row per worker */
tpurt_status tpurt_plan_layer_norm(const tpurt_op_call* c, tpurt_plan* p) {
  const tpurt_tensor* in = &TPURT_ARG(c, layer_norm, input)->t;
  int k;
  tpurt_status s = norm_axis(in, TPURT_ARG(c, layer_norm, normalized_shape), &k);
  if (s) return s;
  int64_t m = prod_dims(in, 0, k), n = prod_dims(in, k, in->ndim);
  p->scratch_bytes += planned(3 * n) + loop_planned(m, ln_grain(m, n), n);
  return TPURT_OK;
}

/* One row of the layer norm backward: x becomes x-hat, dw / db accumulate, g = dy * w.
 * Parameters, as restrict, let the loop vectorize. */
static void ln_bwd_row(int64_t n, double mean, double rstd, double* restrict x,
                                       const double* restrict dy, const double* restrict w, double* restrict dw,
                                       double* restrict db, double* restrict g) {
  for (int64_t j = 0; j < n; j++) {
    x[j] = (x[j] - mean) * rstd;
    dw[j] += dy[j] * x[j];
    db[j] += dy[j];
    g[j] = dy[j] * w[j];
  }
}

/* The same for a dense float32 row, in float with double sums; x-hat and g are computed again
 * for grad_input (dx, or NULL) instead of stored. */
static void ln_bwd_row_f32(int64_t n, float mean, float rstd, const float* restrict x, const float* restrict dy,
                           const float* restrict w, double* restrict dw, double* restrict db, float* restrict dx) {
  double ag[WIDE_LANES] = {0}, agx[WIDE_LANES] = {0}, sg = 0, sgx = 0;
  int64_t k = 0;
  for (; k + WIDE_LANES <= n; k += WIDE_LANES)
    for (int j = 0; j < WIDE_LANES; j++) {
      float xh = (x[k + j] - mean) * rstd, g = dy[k + j] * w[k + j];
      dw[k + j] += (double)(dy[k + j] * xh);
      db[k + j] += (double)dy[k + j];
      ag[j] += (double)g;
      agx[j] += (double)(g * xh);
    }
  for (; k < n; k++) {
    float xh = (x[k] - mean) * rstd, g = dy[k] * w[k];
    dw[k] += (double)(dy[k] * xh);
    db[k] += (double)dy[k];
    sg += (double)g;
    sgx += (double)(g * xh);
  }
  if (!dx) return;
  fold_wide_lanes(ag);
  fold_wide_lanes(agx);
  const float mg = (float)((sg + ag[0]) / (double)n), mgx = (float)((sgx + agx[0]) / (double)n);
  for (int64_t j = 0; j < n; j++) {
    float xh = (x[j] - mean) * rstd;
    dx[j] = rstd * (dy[j] * w[j] - mg - xh * mgx);
  }
}

/* native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight?, bias?,
 * output_mask) -> (grad_input, grad_weight, grad_bias); masked-off outputs are undefined.
 * Rows go in fixed blocks (ln_bwd_block_rows: from the shape alone) that the pool runs in
 * parallel, each summing grad_weight / grad_bias over its rows into a partial of its own; the
 * partials then add up in block order, so the bits do not depend on the thread count. */
typedef struct lnb_job {
  const tpurt_op_call* c;
  int k;
  int64_t m, n, rows; /* rows: per block */
  const double* w;
  const float* wf; /* w in float, for dense float32 rows */
  double* part; /* per block: its grad_weight then grad_bias partial, 2n doubles */
} lnb_job;

#define LN_BWD_MAX_BLOCKS 64 /* bounds the partials' memory (2n doubles per block) */
static int64_t ln_bwd_block_rows(int64_t m, int64_t n) {
  int64_t rows = (NN_PAR_GRAIN + n - 1) / (n ? n : 1), fewest = (m + LN_BWD_MAX_BLOCKS - 1) / LN_BWD_MAX_BLOCKS;
  return rows > fewest ? rows : (fewest ? fewest : 1);
}
static int64_t ln_bwd_blocks(int64_t m, int64_t n) {
  int64_t rows = ln_bwd_block_rows(m, n);
  return m > 0 ? (m + rows - 1) / rows : 1; /* one (zero) partial for no rows */
}

/* Blocks [lo, hi); the slice holds one row's x, dy and g (3n doubles). */
static void ln_bwd_blocks_run(void* arg, void* slice, int64_t lo, int64_t hi) {
  lnb_job* J = arg;
  const tpurt_op_call* c = J->c;
  const tpurt_tensor *dy_t = &TPURT_ARG(c, layer_norm_backward, grad_out)->t, *in = &TPURT_ARG(c, layer_norm_backward, input)->t;
  const tpurt_tensor *mean_t = &TPURT_ARG(c, layer_norm_backward, mean)->t, *rstd_t = &TPURT_ARG(c, layer_norm_backward, rstd)->t;
  int64_t n = J->n;
  double *x = slice, *dy = x + n, *g = x + 2 * n;
  int want_dx = defined(&c->outs[0]);
  int dense = ln_dense(in) && ln_dense(dy_t) && ln_dense(mean_t) && ln_dense(rstd_t) && (!want_dx || ln_dense(&c->outs[0]));
  for (int64_t blk = lo; blk < hi; blk++) {
    double *dw = J->part + blk * 2 * n, *db = dw + n;
    for (int64_t j = 0; j < 2 * n; j++) dw[j] = 0;
    int64_t end = (blk + 1) * J->rows < J->m ? (blk + 1) * J->rows : J->m;
    for (int64_t o = blk * J->rows; o < end; o++) {
      if (dense) {
        ln_bwd_row_f32(n, ((const float*)mean_t->data)[o], ((const float*)rstd_t->data)[o],
                       (const float*)in->data + o * n, (const float*)dy_t->data + o * n, J->wf, dw, db,
                       want_dx ? (float*)c->outs[0].data + o * n : NULL);
        continue;
      }
      double mean, rstd;
      load_block(in, J->k, o, x);
      load_block(dy_t, J->k, o, dy);
      load_block(mean_t, J->k, o, &mean);
      load_block(rstd_t, J->k, o, &rstd);
      ln_bwd_row(n, mean, rstd, x, dy, J->w, dw, db, g);
      if (!want_dx) continue;
      double sg = line_sum(g, n) / (double)n, sgx = line_dot(g, x, n) / (double)n;
      for (int64_t j = 0; j < n; j++) x[j] = rstd * (g[j] - sg - x[j] * sgx);
      store_block(&c->outs[0], J->k, o, x);
    }
  }
}

tpurt_status tpurt_kernel_layer_norm_backward(const tpurt_op_call* c) {
  const tpurt_tensor* in = &TPURT_ARG(c, layer_norm_backward, input)->t;
  int k;
  tpurt_status s = norm_axis(in, TPURT_ARG(c, layer_norm_backward, normalized_shape), &k);
  if (s) return s;
  int64_t m = prod_dims(in, 0, k), n = prod_dims(in, k, in->ndim), blocks = ln_bwd_blocks(m, n);
  double* buf = scratch(2 * n + 2 * n * blocks);
  if (!buf) return OOM("layer_norm_backward");
  float* wf = (float*)(buf + n);
  lnb_job J = {c, k, m, n, ln_bwd_block_rows(m, n), buf, wf, buf + 2 * n};
  load_param(TPURT_ARG(c, layer_norm_backward, weight), buf, n, 1);
  for (int64_t j = 0; j < n; j++) wf[j] = (float)buf[j];
  for (int64_t j = 0; j < 2 * n; j++) J.part[j] = 0; /* no rows: no block runs */
  int ok = run_loop(m > 0 ? blocks : 0, 1, 3 * n, ln_bwd_blocks_run, &J);
  for (int64_t blk = 1; ok && blk < blocks; blk++)
    for (int64_t j = 0; j < 2 * n; j++) J.part[j] += J.part[blk * 2 * n + j];
  if (ok && defined(&c->outs[1])) store_block(&c->outs[1], 0, 0, J.part);
  if (ok && defined(&c->outs[2])) store_block(&c->outs[2], 0, 0, J.part + n);
  tpurt_temp_release(buf);
  return ok ? TPURT_OK : OOM("layer_norm_backward");
}

tpurt_status tpurt_plan_layer_norm_backward(const tpurt_op_call* c, tpurt_plan* p) {
  const tpurt_tensor* in = &TPURT_ARG(c, layer_norm_backward, input)->t;
  int k;
  tpurt_status s = norm_axis(in, TPURT_ARG(c, layer_norm_backward, normalized_shape), &k);
  if (s) return s;
  int64_t m = prod_dims(in, 0, k), n = prod_dims(in, k, in->ndim), blocks = ln_bwd_blocks(m, n);
  p->scratch_bytes += planned(2 * n + 2 * n * blocks) + loop_planned(m > 0 ? blocks : 0, 1, 3 * n);
  return TPURT_OK;
}

/* ---------------------------------------------------------------- nll_loss */
enum { RED_NONE = 0, RED_MEAN = 1, RED_SUM = 2 };

/* Walk target elements; self is target's shape with the class dim inserted at 1 (at 0 for
 * an unbatched 1-D self). fn gets the self element offset for (position, class). */
typedef struct nll_args {
  const tpurt_tensor *self, *target;
  const tpurt_value* weight;
  int64_t ignore;
  int cdim;
} nll_args;

/* self_arg: self; target, weight and ignore_index at +1, +2 and +4 */
#define NLL_LAYOUT(k)                                             \
  (TPURT_ARG_##k##_target == TPURT_ARG_##k##_self + 1 &&          \
   TPURT_ARG_##k##_weight == TPURT_ARG_##k##_self + 2 &&          \
   TPURT_ARG_##k##_ignore_index == TPURT_ARG_##k##_self + 4)
_Static_assert(NLL_LAYOUT(nll_loss) && NLL_LAYOUT(nll_loss_backward), "nll_loss schemas: self, target, weight, _, ignore_index");
#undef NLL_LAYOUT
static nll_args nll_parse(const tpurt_op_call* c, int self_arg) {
  nll_args a = {&c->args[self_arg].t, &c->args[self_arg + 1].t, &c->args[self_arg + 2], c->args[self_arg + 4].i,
                0};
  a.cdim = a.self->ndim == 1 ? 0 : 1;
  return a;
}

/* self offset of the class-0 element for target multi-index idx */
static int64_t nll_self_offset(const nll_args* a, const int64_t* idx) {
  int64_t off = 0;
  for (int d = 0, e = 0; d < a->self->ndim; d++)
    if (d != a->cdim) off += idx[e++] * a->self->strides[d];
  return off;
}

static double nll_weight(const nll_args* a, int64_t cls) {
  if (a->weight->kind != TPURT_V_TENSOR) return 1.0;
  const tpurt_tensor* w = &a->weight->t;
  return tpurt_load_f64((char*)w->data + cls * w->strides[0] * (int64_t)tpurt_dtype_size((tpurt_dtype)w->dtype),
                        w->dtype);
}

/* Visit every target element: fn(ctx, target idx, target class, self offset, weight);
 * ignored targets get weight 0. Fails on out-of-range targets like CPU. */
typedef void (*nll_fn)(void* ctx, const int64_t* idx, int64_t cls, int64_t self_off, double w);

static tpurt_status nll_walk(const nll_args* a, nll_fn fn, void* ctx) {
  const tpurt_tensor* t = a->target;
  int64_t nclass = a->self->sizes[a->cdim];
  int64_t idx[TPURT_MAX_DIMS] = {0};
  if (tpurt_numel(t) == 0) return TPURT_OK;
  do {
    int64_t cls = tpurt_load_i64(tpurt_elem_ptr(t, idx), t->dtype);
    double w = 0;
    if (cls != a->ignore) {
      if (cls < 0 || cls >= nclass) return tpurt_fail(TPURT_ERR_INDEX, "Target %lld is out of bounds.", (long long)cls);
      w = nll_weight(a, cls);
    }
    fn(ctx, idx, cls, nll_self_offset(a, idx) + (cls == a->ignore ? 0 : cls * a->self->strides[a->cdim]), w);
  } while (t->ndim && tpurt_next_index(idx, t->sizes, t->ndim));
  return TPURT_OK;
}

typedef struct nll_fwd_ctx {
  const nll_args* a;
  const tpurt_tensor* out; /* per-element output (reduction none) or NULL */
  double sum, total_w;
} nll_fwd_ctx;

static void nll_fwd_elem(void* p, const int64_t* idx, int64_t cls, int64_t off, double w) {
  nll_fwd_ctx* c = p;
  const tpurt_tensor* s = c->a->self;
  double v = w == 0 ? 0 : -w * tpurt_load_f64((char*)s->data + off * (int64_t)tpurt_dtype_size((tpurt_dtype)s->dtype), s->dtype);
  c->sum += v;
  c->total_w += w;
  if (c->out) tpurt_store_f64(tpurt_elem_ptr(c->out, idx), c->out->dtype, v);
}

/* nll_loss_forward(self, target, weight?, reduction, ignore_index) -> (output, total_weight);
 * also nll_loss2d_forward. */
tpurt_status tpurt_kernel_nll_loss(const tpurt_op_call* c) {
  nll_args a = nll_parse(c, TPURT_ARG_nll_loss_self);
  int64_t red = TPURT_ARG(c, nll_loss, reduction)->i;
  nll_fwd_ctx ctx = {&a, red == RED_NONE ? &c->outs[0] : NULL, 0, 0};
  tpurt_status s = nll_walk(&a, nll_fwd_elem, &ctx);
  if (s) return s;
  if (red != RED_NONE) tpurt_store_f64(c->outs[0].data, c->outs[0].dtype, red == RED_MEAN ? ctx.sum / ctx.total_w : ctx.sum);
  /* CPU leaves total_weight 0 for a batched 'none' reduction */
  double tw = red == RED_NONE && a.self->ndim > 1 ? 0 : ctx.total_w;
  tpurt_store_f64(c->outs[1].data, c->outs[1].dtype, tw);
  return TPURT_OK;
}

typedef struct nll_bwd_ctx {
  const tpurt_tensor *gi, *go;
  double scale; /* reduced grad_output, already divided by total weight for mean */
} nll_bwd_ctx;

static void nll_bwd_elem(void* p, const int64_t* idx, int64_t cls, int64_t off, double w) {
  nll_bwd_ctx* c = p;
  if (w == 0) return;
  double g = c->go->ndim > 0 ? tpurt_load_f64(tpurt_elem_ptr(c->go, idx), c->go->dtype) : c->scale;
  tpurt_store_f64((char*)c->gi->data + off * (int64_t)tpurt_dtype_size((tpurt_dtype)c->gi->dtype), c->gi->dtype, -w * g);
}

/* nll_loss_backward(grad_output, self, target, weight?, reduction, ignore_index, total_weight)
 * -> grad_input; also nll_loss2d_backward. */
tpurt_status tpurt_kernel_nll_loss_backward(const tpurt_op_call* c) {
  nll_args a = nll_parse(c, TPURT_ARG_nll_loss_backward_self);
  const tpurt_tensor *go = &TPURT_ARG(c, nll_loss_backward, grad_output)->t, *gi = &c->outs[0];
  int64_t red = TPURT_ARG(c, nll_loss_backward, reduction)->i;
  tpurt_value zero = {.kind = TPURT_V_INT, .scalar_dtype = -1, .i = 0};
  int64_t st[1]; /* 8-byte aligned scalar storage */
  tpurt_tensor z = tpurt_scalar_tensor(&zero, st);
  tpurt_tensor gz = *gi;
  tpurt_status s = tpurt_copy_tensor(&gz, &z);
  if (s) return s;
  /* grad_input shares self's strides layout only by shape: walk offsets on grad_input */
  nll_args ag = a;
  ag.self = gi;
  nll_bwd_ctx ctx = {gi, go, 0};
  if (red != RED_NONE || go->ndim == 0) {
    ctx.scale = tpurt_load_f64(go->data, go->dtype);
    if (red == RED_MEAN) ctx.scale /= tpurt_load_f64(TPURT_ARG(c, nll_loss_backward, total_weight)->t.data, TPURT_ARG(c, nll_loss_backward, total_weight)->t.dtype);
  }
  return nll_walk(&ag, nll_bwd_elem, &ctx);
}

/* ---------------------------------------------------------------- mse_loss */
typedef struct mse_ctx {
  double* sum;
  double scale;
} mse_ctx;

static void sq_diff_sum(int64_t n, void* o, const void* const* in, const void* p) {
  const mse_ctx* c = p;
  const double *x = in[0], *y = in[1];
  double* r = o;
  double s = 0;
  for (int64_t k = 0; k < n; k++) s += r[k] = (x[k] - y[k]) * (x[k] - y[k]);
  if (c->sum) *c->sum += s;
}

static tpurt_status broadcast_shape(const tpurt_tensor* a, const tpurt_tensor* b, tpurt_tensor* out) {
  int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
  memset(out, 0, sizeof *out);
  out->ndim = nd;
  for (int d = 0; d < nd; d++) {
    int da = d - (nd - a->ndim), db = d - (nd - b->ndim);
    int64_t sa = da >= 0 ? a->sizes[da] : 1, sb = db >= 0 ? b->sizes[db] : 1;
    if (sa != sb && sa != 1 && sb != 1)
      return tpurt_fail(TPURT_ERR_RUNTIME, "mse_loss: shapes %s and %s do not broadcast", tpurt_shape_str(a),
                        tpurt_shape_str(b));
    out->sizes[d] = sa == 1 ? sb : sa;
  }
  return TPURT_OK;
}

/* mse_loss(self, target, reduction) */
tpurt_status tpurt_kernel_mse_loss(const tpurt_op_call* c) {
  tpurt_tensor in[2] = {TPURT_ARG(c, mse_loss, self)->t, TPURT_ARG(c, mse_loss, target)->t};
  int64_t red = TPURT_ARG(c, mse_loss, reduction)->i;
  if (red == RED_NONE) return tpurt_ew_run(&c->outs[0], 2, in, TPURT_CT_F64, sq_diff_sum, &(mse_ctx){NULL, 0});
  /* Reduced: run the elementwise engine over the broadcast shape into a zero-stride sink. */
  double sum = 0, sink = 0;
  tpurt_tensor shape;
  tpurt_status s = broadcast_shape(&in[0], &in[1], &shape);
  if (s) return s;
  shape.dtype = TPURT_F64;
  shape.data = &sink;
  s = tpurt_ew_run(&shape, 2, in, TPURT_CT_F64, sq_diff_sum, &(mse_ctx){&sum, 0});
  if (s) return s;
  int64_t n = tpurt_numel(&shape);
  tpurt_store_f64(c->outs[0].data, c->outs[0].dtype, red == RED_MEAN ? sum / (double)n : sum);
  return TPURT_OK;
}

static void mse_bwd(int64_t n, void* o, const void* const* in, const void* p) {
  const mse_ctx* c = p;
  const double *g = in[0], *x = in[1], *y = in[2];
  double* r = o;
  for (int64_t k = 0; k < n; k++) r[k] = c->scale * (x[k] - y[k]) * g[k];
}

/* mse_loss_backward(grad_output, self, target, reduction) -> grad_input (self's shape) */
tpurt_status tpurt_kernel_mse_loss_backward(const tpurt_op_call* c) {
  const tpurt_tensor* gi = &c->outs[0];
  double scale = TPURT_ARG(c, mse_loss_backward, reduction)->i == RED_MEAN ? 2.0 / (double)tpurt_numel(gi) : 2.0;
  tpurt_tensor in[3] = {TPURT_ARG(c, mse_loss_backward, grad_output)->t, TPURT_ARG(c, mse_loss_backward, self)->t, TPURT_ARG(c, mse_loss_backward, target)->t};
  return tpurt_ew_run(gi, 3, in, TPURT_CT_F64, mse_bwd, &(mse_ctx){NULL, scale});
}

/* ---------------------------------------------------------------- group norm */
/* Store v at element (i, j) of a 2-D tensor (mean/rstd are [N, group]). */
static void store_2d(const tpurt_tensor* t, int64_t i, int64_t j, double v) {
  int64_t off = i * t->strides[0] + j * t->strides[1];
  tpurt_store_f64((char*)t->data + off * (int64_t)tpurt_dtype_size((tpurt_dtype)t->dtype), t->dtype, v);
}
static double load_2d(const tpurt_tensor* t, int64_t i, int64_t j) {
  int64_t off = i * t->strides[0] + j * t->strides[1];
  return tpurt_load_f64((char*)t->data + off * (int64_t)tpurt_dtype_size((tpurt_dtype)t->dtype), t->dtype);
}

/* native_group_norm(input, weight?, bias?, N, C, HxW, group, eps) -> (out, mean, rstd).
 * Sample n is the dense block of C * HxW values; group g is a contiguous range of it. */
tpurt_status tpurt_kernel_group_norm(const tpurt_op_call* c) {
  const tpurt_tensor* in = &TPURT_ARG(c, group_norm, input)->t;
  int64_t N = TPURT_ARG(c, group_norm, N)->i, C = TPURT_ARG(c, group_norm, C)->i, HW = TPURT_ARG(c, group_norm, HxW)->i, G = TPURT_ARG(c, group_norm, group)->i;
  double eps = tpurt_value_f(TPURT_ARG(c, group_norm, eps));
  int64_t D = C / G * HW; /* elements per group */
  double* buf = scratch(C * HW + 2 * C);
  if (!buf) return OOM("group_norm");
  double *x = buf, *w = buf + C * HW, *b = w + C;
  load_param(TPURT_ARG(c, group_norm, weight), w, C, 1);
  load_param(TPURT_ARG(c, group_norm, bias), b, C, 0);
  for (int64_t n = 0; n < N; n++) {
    load_block(in, 1, n, x);
    for (int64_t g = 0; g < G; g++) {
      double mean, rstd, *xg = x + g * D;
      mean_rstd(xg, D, eps, &mean, &rstd);
      for (int64_t j = 0; j < D; j++) {
        int64_t ch = (g * D + j) / HW;
        xg[j] = (xg[j] - mean) * rstd * w[ch] + b[ch];
      }
      store_2d(&c->outs[1], n, g, mean);
      store_2d(&c->outs[2], n, g, rstd);
    }
    if (C * HW > 0) store_block(&c->outs[0], 1, n, x);
  }
  tpurt_temp_release(buf);
  return TPURT_OK;
}

/* a sample, weight and bias */
tpurt_status tpurt_plan_group_norm(const tpurt_op_call* c, tpurt_plan* p) {
  int64_t C = TPURT_ARG(c, group_norm, C)->i, HW = TPURT_ARG(c, group_norm, HxW)->i;
  p->scratch_bytes += planned(C * HW + 2 * C);
  return TPURT_OK;
}

/* native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C, HxW, group,
 * output_mask) -> (grad_input, grad_weight, grad_bias) */
tpurt_status tpurt_kernel_group_norm_backward(const tpurt_op_call* c) {
  const tpurt_tensor *dy_t = &TPURT_ARG(c, group_norm_backward, grad_out)->t, *in = &TPURT_ARG(c, group_norm_backward, input)->t;
  int64_t N = TPURT_ARG(c, group_norm_backward, N)->i, C = TPURT_ARG(c, group_norm_backward, C)->i, HW = TPURT_ARG(c, group_norm_backward, HxW)->i, G = TPURT_ARG(c, group_norm_backward, group)->i;
  int64_t D = C / G * HW;
  double* buf = scratch(2 * C * HW + 3 * C);
  if (!buf) return OOM("group_norm_backward");
  double *x = buf, *dy = x + C * HW, *w = dy + C * HW, *dw = w + C, *db = dw + C;
  load_param(TPURT_ARG(c, group_norm_backward, weight), w, C, 1);
  for (int64_t k = 0; k < 2 * C; k++) dw[k] = 0;
  for (int64_t n = 0; n < N; n++) {
    load_block(in, 1, n, x);
    load_block(dy_t, 1, n, dy);
    for (int64_t g = 0; g < G; g++) {
      double mean = load_2d(&TPURT_ARG(c, group_norm_backward, mean)->t, n, g), rstd = load_2d(&TPURT_ARG(c, group_norm_backward, rstd)->t, n, g);
      double *xg = x + g * D, *dyg = dy + g * D, sg = 0, sgx = 0;
      for (int64_t j = 0; j < D; j++) {
        int64_t ch = (g * D + j) / HW;
        xg[j] = (xg[j] - mean) * rstd;
        dw[ch] += dyg[j] * xg[j];
        db[ch] += dyg[j];
        sg += dyg[j] * w[ch];
        sgx += dyg[j] * w[ch] * xg[j];
      }
      sg /= (double)D;
      sgx /= (double)D;
      for (int64_t j = 0; j < D; j++) {
        int64_t ch = (g * D + j) / HW;
        xg[j] = rstd * (dyg[j] * w[ch] - sg - xg[j] * sgx);
      }
    }
    if (defined(&c->outs[0]) && C * HW > 0) store_block(&c->outs[0], 1, n, x);
  }
  if (defined(&c->outs[1])) store_block(&c->outs[1], 0, 0, dw);
  if (defined(&c->outs[2])) store_block(&c->outs[2], 0, 0, db);
  tpurt_temp_release(buf);
  return TPURT_OK;
}

/* a sample of input and of grad_out, weight, and the two parameter gradients */
tpurt_status tpurt_plan_group_norm_backward(const tpurt_op_call* c, tpurt_plan* p) {
  int64_t C = TPURT_ARG(c, group_norm_backward, C)->i, HW = TPURT_ARG(c, group_norm_backward, HxW)->i;
  p->scratch_bytes += planned(2 * C * HW + 3 * C);
  return TPURT_OK;
}

/* ---------------------------------------------------------------- batch norm */
/* Values per channel of an [N, C, *] tensor. */
static int64_t channel_elems(const tpurt_tensor* t) { return t->sizes[0] * prod_dims(t, 2, t->ndim); }

/* Channel c of an [N, C, *] tensor as a dense array of N * HxW values. */
static void channel_io(const tpurt_tensor* t, int64_t ch, double* buf, int store) {
  int64_t N = t->sizes[0], C = t->sizes[1], HW = prod_dims(t, 2, t->ndim);
  for (int64_t n = 0; n < N; n++) block_io(t, 2, n * C + ch, buf + n * HW, store);
}

static double vec_get(const tpurt_value* v, int64_t k, double dflt) {
  if (v->kind != TPURT_V_TENSOR || v->t.ndim < 0 || !v->t.data) return dflt;
  const tpurt_tensor* t = &v->t;
  return tpurt_load_f64((char*)t->data + k * t->strides[0] * (int64_t)tpurt_dtype_size((tpurt_dtype)t->dtype), t->dtype);
}
static void vec_set(const tpurt_tensor* t, int64_t k, double v) {
  if (t->ndim < 1 || !t->data || t->sizes[0] <= k) return;
  tpurt_store_f64((char*)t->data + k * t->strides[0] * (int64_t)tpurt_dtype_size((tpurt_dtype)t->dtype), t->dtype, v);
}

/* Shared by the batch-norm forward overloads: positions of the optional arguments (-1
 * when the overload has none) and whether it trains. */
enum { BN_ALWAYS = -1, BN_NEVER = -2 };
typedef struct bn_args {
  int running_mean, running_var, momentum, eps;
  int training; /* arg index of the flag, BN_ALWAYS or BN_NEVER */
} bn_args;

#define BN_LAYOUT(k)                                              \
  (TPURT_ARG_##k##_input == TPURT_ARG_batch_norm_input &&         \
   TPURT_ARG_##k##_weight == TPURT_ARG_batch_norm_weight &&       \
   TPURT_ARG_##k##_bias == TPURT_ARG_batch_norm_bias)
_Static_assert(BN_LAYOUT(batch_norm_no_stats) && BN_LAYOUT(batch_norm_no_training) && BN_LAYOUT(batch_norm_with_update),
               "batch_norm serves the four batch-norm forward lines: input, weight, bias alike");
#undef BN_LAYOUT
/* Channels are independent: chunks of them run on the pool, each on its own work space. */
static int64_t bn_grain(int64_t M) { return M >= 65536 ? 1 : 65536 / (M ? M : 1); }

typedef struct {
  const tpurt_op_call* c;
  const tpurt_tensor* in;
  const tpurt_value *rm, *rv;
  int train;
  double mom, eps;
  int64_t M;
  int f32; /* backward: float32 operands with dense planes */
} bn_job;

static void bn_channels(void* ctx, void* slice, int64_t c0, int64_t c1) {
  const bn_job* j = ctx;
  const tpurt_op_call* c = j->c;
  const tpurt_value *rm = j->rm, *rv = j->rv;
  const tpurt_tensor* in = j->in;
  int train = j->train;
  double mom = j->mom, eps = j->eps, *x = slice;
  int64_t M = j->M;
  for (int64_t ch = c0; ch < c1; ch++) {
    double mean, invstd;
    channel_io(in, ch, x, 0);
    if (train) {
      double var;
      mean_var(x, M, &mean, &var);
      invstd = 1.0 / sqrt(var + eps);
      if (rm->kind == TPURT_V_TENSOR) vec_set(&rm->t, ch, (1 - mom) * vec_get(rm, ch, 0) + mom * mean);
      if (rv->kind == TPURT_V_TENSOR) {
        double unbiased = M > 1 ? var * (double)M / (double)(M - 1) : var;
        vec_set(&rv->t, ch, (1 - mom) * vec_get(rv, ch, 0) + mom * unbiased);
      }
    } else {
      mean = vec_get(rm, ch, 0);
      invstd = 1.0 / sqrt(vec_get(rv, ch, 1) + eps);
    }
    double w = vec_get(TPURT_ARG(c, batch_norm, weight), ch, 1), b = vec_get(TPURT_ARG(c, batch_norm, bias), ch, 0);
    for (int64_t k = 0; k < M; k++) x[k] = (x[k] - mean) * invstd * w + b;
    channel_io(&c->outs[0], ch, x, 1);
    if (train) {
      vec_set(&c->outs[1], ch, mean);
      vec_set(&c->outs[2], ch, invstd);
    }
  }
}

static tpurt_status batch_norm(const tpurt_op_call* c, bn_args a) {
  static const tpurt_value none = {.kind = TPURT_V_NONE, .scalar_dtype = -1};
  const tpurt_tensor* in = &TPURT_ARG(c, batch_norm, input)->t;
  bn_job j = {c, in, a.running_mean >= 0 ? &c->args[a.running_mean] : &none, a.running_var >= 0 ? &c->args[a.running_var] : &none,
              a.training == BN_ALWAYS || (a.training >= 0 && c->args[a.training].i), tpurt_value_f(&c->args[a.momentum]),
              tpurt_value_f(&c->args[a.eps]), channel_elems(in), 0};
  return run_loop(in->sizes[1], bn_grain(j.M), j.M, bn_channels, &j) ? TPURT_OK : OOM("batch_norm");
}

/* Plans of the four forward lines: a channel per worker (their input is at the same place). */
static tpurt_status plan_batch_norm(const tpurt_op_call* c, tpurt_plan* p) {
  const tpurt_tensor* in = &TPURT_ARG(c, batch_norm, input)->t;
  int64_t M = channel_elems(in);
  p->scratch_bytes += loop_planned(in->sizes[1], bn_grain(M), M);
  return TPURT_OK;
}
tpurt_status tpurt_plan_batch_norm(const tpurt_op_call* c, tpurt_plan* p) { return plan_batch_norm(c, p); }
tpurt_status tpurt_plan_batch_norm_no_stats(const tpurt_op_call* c, tpurt_plan* p) { return plan_batch_norm(c, p); }
tpurt_status tpurt_plan_batch_norm_no_training(const tpurt_op_call* c, tpurt_plan* p) { return plan_batch_norm(c, p); }
tpurt_status tpurt_plan_batch_norm_with_update(const tpurt_op_call* c, tpurt_plan* p) { return plan_batch_norm(c, p); }

/* native_batch_norm(input, weight?, bias?, running_mean?, running_var?, training, momentum, eps)
 * and _native_batch_norm_legit (same arguments, running stats mutable) */
tpurt_status tpurt_kernel_batch_norm(const tpurt_op_call* c) { return batch_norm(c, (bn_args){TPURT_ARG_batch_norm_running_mean, TPURT_ARG_batch_norm_running_var, TPURT_ARG_batch_norm_momentum, TPURT_ARG_batch_norm_eps, TPURT_ARG_batch_norm_training}); }
/* _native_batch_norm_legit.no_stats(input, weight?, bias?, training, momentum, eps) */
tpurt_status tpurt_kernel_batch_norm_no_stats(const tpurt_op_call* c) {
  return batch_norm(c, (bn_args){-1, -1, TPURT_ARG_batch_norm_no_stats_momentum, TPURT_ARG_batch_norm_no_stats_eps, TPURT_ARG_batch_norm_no_stats_training});
}
/* _native_batch_norm_legit_no_training(input, weight?, bias?, running_mean, running_var, momentum, eps) */
tpurt_status tpurt_kernel_batch_norm_no_training(const tpurt_op_call* c) {
  return batch_norm(c, (bn_args){TPURT_ARG_batch_norm_no_training_running_mean, TPURT_ARG_batch_norm_no_training_running_var, TPURT_ARG_batch_norm_no_training_momentum, TPURT_ARG_batch_norm_no_training_eps, BN_NEVER});
}
/* _batch_norm_with_update(input, weight?, bias?, running_mean, running_var, momentum, eps)
 * -> (out, save_mean, save_invstd, reserve); reserve is empty on CPU */
tpurt_status tpurt_kernel_batch_norm_with_update(const tpurt_op_call* c) {
  return batch_norm(c, (bn_args){TPURT_ARG_batch_norm_with_update_running_mean, TPURT_ARG_batch_norm_with_update_running_var, TPURT_ARG_batch_norm_with_update_momentum, TPURT_ARG_batch_norm_with_update_eps, BN_ALWAYS});
}

/* native_batch_norm_backward(grad_out, input, weight?, running_mean?, running_var?, save_mean?,
 * save_invstd?, train, eps, output_mask) -> (grad_input, grad_weight, grad_bias), and
 * batch_norm_backward (same arguments with `update` for train, then the unused reserve) */
/* Sums of the float32 backward: BN_LANES double lanes per plane, in a fixed order. */
enum { BN_LANES = 8 };

/* A float32 [N, C, *] tensor whose planes (dims 2..) are dense: float planes are read and
 * written in place (no double staging). */
static int dense_f32_planes(const tpurt_tensor* t) {
  if (t->dtype != TPURT_F32 || t->ndim < 2) return 0;
  for (int64_t d = t->ndim - 1, st = 1; d >= 2; st *= t->sizes[d--])
    if (t->sizes[d] != 1 && t->strides[d] != st) return 0;
  return 1;
}
static const float* plane_f32(const tpurt_tensor* t, int64_t n, int64_t ch) {
  return (const float*)t->data + n * t->strides[0] + ch * t->strides[1];
}

/* One channel of the float backward: its sums in BN_LANES double lanes per plane, then the
 * input gradient from the same normalized values, computed again. */
static void bn_backward_channel_f32(const bn_job* j, int64_t ch, double mean, double invstd, double w) {
  const tpurt_op_call* c = j->c;
  const tpurt_tensor *dy_t = &TPURT_ARG(c, batch_norm_backward, grad_out)->t, *in = j->in, *gi = &c->outs[0];
  int64_t N = in->sizes[0], HW = j->M / (N ? N : 1);
  double sdy = 0, sdyx = 0;
  for (int64_t n = 0; n < N; n++) {
    const float *x = plane_f32(in, n, ch), *dy = plane_f32(dy_t, n, ch);
    double ly[BN_LANES] = {0}, lyx[BN_LANES] = {0};
    int64_t k = 0;
    for (; k + BN_LANES <= HW; k += BN_LANES)
      for (int l = 0; l < BN_LANES; l++) {
        double d = dy[k + l];
        ly[l] += d;
        lyx[l] += d * (((double)x[k + l] - mean) * invstd);
      }
    for (; k < HW; k++) sdy += dy[k], sdyx += dy[k] * (((double)x[k] - mean) * invstd);
    for (int l = 0; l < BN_LANES; l++) sdy += ly[l], sdyx += lyx[l];
  }
  vec_set(&c->outs[1], ch, sdyx);
  vec_set(&c->outs[2], ch, sdy);
  if (!defined(gi)) return;
  double mdy = sdy / (double)j->M, mdyx = sdyx / (double)j->M, s = w * invstd;
  for (int64_t n = 0; n < N; n++) {
    const float *x = plane_f32(in, n, ch), *dy = plane_f32(dy_t, n, ch);
    float* o = (float*)plane_f32(gi, n, ch);
    if (j->train)
      for (int64_t k = 0; k < HW; k++) o[k] = (float)(s * ((double)dy[k] - mdy - (((double)x[k] - mean) * invstd) * mdyx));
    else
      for (int64_t k = 0; k < HW; k++) o[k] = (float)(s * (double)dy[k]);
  }
}

static void bn_backward_channels(void* ctx, void* slice, int64_t c0, int64_t c1) {
  const bn_job* j = ctx;
  const tpurt_op_call* c = j->c;
  const tpurt_tensor *dy_t = &TPURT_ARG(c, batch_norm_backward, grad_out)->t, *in = j->in;
  int train = j->train;
  double eps = j->eps, *x = slice, *dy = j->f32 ? NULL : x + j->M; /* f32: a one-double slice */
  int64_t M = j->M;
  for (int64_t ch = c0; ch < c1; ch++) {
    double mean = train ? vec_get(TPURT_ARG(c, batch_norm_backward, save_mean), ch, 0) : vec_get(TPURT_ARG(c, batch_norm_backward, running_mean), ch, 0);
    double invstd = train ? vec_get(TPURT_ARG(c, batch_norm_backward, save_invstd), ch, 1) : 1.0 / sqrt(vec_get(TPURT_ARG(c, batch_norm_backward, running_var), ch, 1) + eps);
    double w = vec_get(TPURT_ARG(c, batch_norm_backward, weight), ch, 1), sdy = 0, sdyx = 0;
    if (j->f32) {
      bn_backward_channel_f32(j, ch, mean, invstd, w);
      continue;
    }
    channel_io(in, ch, x, 0);
    channel_io(dy_t, ch, dy, 0);
    for (int64_t k = 0; k < M; k++) {
      x[k] = (x[k] - mean) * invstd;
      sdy += dy[k];
      sdyx += dy[k] * x[k];
    }
    vec_set(&c->outs[1], ch, sdyx);
    vec_set(&c->outs[2], ch, sdy);
    if (!defined(&c->outs[0])) continue;
    double mdy = sdy / (double)M, mdyx = sdyx / (double)M;
    for (int64_t k = 0; k < M; k++)
      x[k] = train ? w * invstd * (dy[k] - mdy - x[k] * mdyx) : w * invstd * dy[k];
    channel_io(&c->outs[0], ch, x, 1);
  }
}

/* Float32 planes in place, or a channel of input and of grad_out staged as doubles. */
static int bn_backward_f32(const tpurt_op_call* c) {
  const tpurt_tensor *gi = &c->outs[0];
  return dense_f32_planes(&TPURT_ARG(c, batch_norm_backward, input)->t) &&
         dense_f32_planes(&TPURT_ARG(c, batch_norm_backward, grad_out)->t) && (!defined(gi) || dense_f32_planes(gi));
}
static int64_t bn_backward_work(const tpurt_op_call* c, int64_t M) { return bn_backward_f32(c) ? 1 : 2 * M; }

tpurt_status tpurt_kernel_batch_norm_backward(const tpurt_op_call* c) {
  const tpurt_tensor* in = &TPURT_ARG(c, batch_norm_backward, input)->t;
  bn_job j = {c, in, NULL, NULL, (int)TPURT_ARG(c, batch_norm_backward, train)->i, 0,
              tpurt_value_f(TPURT_ARG(c, batch_norm_backward, eps)), channel_elems(in), bn_backward_f32(c)};
  return run_loop(in->sizes[1], bn_grain(j.M), bn_backward_work(c, j.M), bn_backward_channels, &j) ? TPURT_OK
                                                                                                  : OOM("batch_norm_backward");
}

tpurt_status tpurt_plan_batch_norm_backward(const tpurt_op_call* c, tpurt_plan* p) {
  const tpurt_tensor* in = &TPURT_ARG(c, batch_norm_backward, input)->t;
  int64_t M = channel_elems(in);
  p->scratch_bytes += loop_planned(in->sizes[1], bn_grain(M), bn_backward_work(c, M));
  return TPURT_OK;
}

/* ---------------------------------------------------------------- multilabel margin loss */
/* Sample n of a (N, D) or (D) tensor, element d. */
static char* row_elem(const tpurt_tensor* t, int64_t n, int64_t d) {
  int64_t off = t->ndim == 2 ? n * t->strides[0] + d * t->strides[1] : t->ndim == 1 ? d * t->strides[0] : 0;
  return (char*)t->data + off * (int64_t)tpurt_dtype_size((tpurt_dtype)t->dtype);
}
/* x rounded to dtype dt, as CPU's scalar_t arithmetic rounds each step. */
static double round_to(double x, int dt) {
  char b[8];
  tpurt_store_f64(b, dt, x);
  return tpurt_load_f64(b, dt);
}

typedef struct {
  const tpurt_tensor *x, *target;
  int64_t N, D;
} mlm;

/* Targets of a row are its entries up to the first -1; CPU checks every entry is in [-1, D)
 * and takes float32 / float64 only. */
static int64_t mlm_classes(const tpurt_tensor* x) { return x->ndim == 0 ? 1 : x->sizes[x->ndim - 1]; }

static tpurt_status mlm_init(mlm* m, const tpurt_tensor* x, const tpurt_tensor* target, const char* frame) {
  if (x->dtype != TPURT_F32 && x->dtype != TPURT_F64)
    return tpurt_fail(TPURT_ERR_UNSUPPORTED, "\"%s\" not implemented for '%s'", frame, tpurt_dtype_c10_name((tpurt_dtype)x->dtype));
  m->x = x;
  m->target = target;
  m->D = mlm_classes(x);
  m->N = x->ndim == 2 ? x->sizes[0] : 1;
  for (int64_t n = 0; n < m->N; n++)
    for (int64_t d = 0; d < m->D; d++) {
      int64_t t = tpurt_load_i64(row_elem(target, n, d), target->dtype);
      if (t < -1 || t >= m->D) return tpurt_fail(TPURT_ERR_RUNTIME, "argument #2 'target' is out of range");
    }
  return TPURT_OK;
}

/* For every (target j, non-target d) pair of row n with a positive margin z = 1 - x[j] + x[d]
 * (rounded in the input's dtype as CPU computes it), calls visit. */
#define FOR_MARGINS(m, n, is_target, visit)                                                     \
  for (int64_t a = 0; a < (m)->D; a++) {                                                        \
    int64_t j = tpurt_load_i64(row_elem((m)->target, n, a), (m)->target->dtype);                \
    if (j < 0) break;                                                                           \
    double xj = tpurt_load_f64(row_elem((m)->x, n, j), (m)->x->dtype);                          \
    for (int64_t d = 0; d < (m)->D; d++) {                                                      \
      if (is_target[d]) continue;                                                               \
      int dt = (m)->x->dtype;                                                                   \
      double z = round_to(round_to(1 - xj, dt) + tpurt_load_f64(row_elem((m)->x, n, d), dt), dt); \
      if (z > 0) visit                                                                          \
    }                                                                                           \
  }

static void mlm_is_target(const mlm* m, int64_t n, double* is_target) {
  for (int64_t d = 0; d < m->D; d++) is_target[d] = 0;
  for (int64_t a = 0; a < m->D; a++) {
    int64_t j = tpurt_load_i64(row_elem(m->target, n, a), m->target->dtype);
    if (j < 0) break;
    is_target[j] = 1;
  }
}

/* multilabel_margin_loss_forward(self, target, reduction) -> (output, is_target): per row the
 * sum of margins over D, summed in double as CPU's accscalar_t; mean divides by N too. */
tpurt_status tpurt_kernel_multilabel_margin_loss(const tpurt_op_call* c) {
  mlm m;
  tpurt_status s = mlm_init(&m, &TPURT_ARG(c, multilabel_margin_loss, self)->t, &TPURT_ARG(c, multilabel_margin_loss, target)->t, "multilabel_margin_loss_forward_out_frame");
  if (s) return s;
  int64_t red = tpurt_value_i(TPURT_ARG(c, multilabel_margin_loss, reduction));
  const tpurt_tensor *out = &c->outs[0], *ist = &c->outs[1];
  double* is_target = scratch(m.D);
  if (!is_target) return OOM("multilabel_margin_loss");
  double total = 0;
  for (int64_t n = 0; n < m.N; n++) {
    double sum = 0;
    mlm_is_target(&m, n, is_target);
    for (int64_t d = 0; d < m.D; d++) tpurt_store_f64(row_elem(ist, n, d), ist->dtype, is_target[d]);
    FOR_MARGINS(&m, n, is_target, { sum += z; })
    sum = round_to(sum, m.x->dtype); /* CPU's row sum comes back as scalar_t */
    if (red == 0 && out->ndim == 1) tpurt_store_f64(row_elem(out, 0, n), out->dtype, sum / (double)m.D);
    total += sum;
  }
  if (red != 0 || out->ndim == 0) {
    total /= (double)m.D;
    if (red == 1) total /= (double)m.N;
    tpurt_store_f64(out->data, out->dtype, total);
  }
  tpurt_temp_release(is_target);
  return TPURT_OK;
}

/* a row's target flags */
tpurt_status tpurt_plan_multilabel_margin_loss(const tpurt_op_call* c, tpurt_plan* p) {
  p->scratch_bytes += planned(mlm_classes(&TPURT_ARG(c, multilabel_margin_loss, self)->t));
  return TPURT_OK;
}

/* multilabel_margin_loss_backward(grad_output, self, target, reduction, is_target): each
 * positive margin moves g = 1/D (1/(N*D) for mean) from its target to its non-target, added
 * in the input's dtype in CPU's order, then scaled by grad_output. */
tpurt_status tpurt_kernel_multilabel_margin_loss_backward(const tpurt_op_call* c) {
  mlm m;
  tpurt_status s = mlm_init(&m, &TPURT_ARG(c, multilabel_margin_loss_backward, self)->t, &TPURT_ARG(c, multilabel_margin_loss_backward, target)->t, "multilabel_margin_loss_backward_out_frame");
  if (s) return s;
  const tpurt_tensor *go = &TPURT_ARG(c, multilabel_margin_loss_backward, grad_output)->t, *gi = &c->outs[0];
  int64_t red = tpurt_value_i(TPURT_ARG(c, multilabel_margin_loss_backward, reduction));
  int dt = gi->dtype;
  double g = round_to(red == 1 ? 1.0 / (double)(m.N * m.D) : 1.0 / (double)m.D, dt);
  double* buf = scratch(2 * m.D);
  if (!buf) return OOM("multilabel_margin_loss_backward");
  double *is_target = buf, *row = buf + m.D;
  for (int64_t n = 0; n < m.N; n++) {
    for (int64_t d = 0; d < m.D; d++) {
      is_target[d] = tpurt_load_f64(row_elem(&TPURT_ARG(c, multilabel_margin_loss_backward, is_target)->t, n, d), TPURT_ARG(c, multilabel_margin_loss_backward, is_target)->t.dtype);
      row[d] = 0;
    }
    FOR_MARGINS(&m, n, is_target, {
      row[j] = round_to(row[j] - g, dt);
      row[d] = round_to(row[d] + g, dt);
    })
    double scale = tpurt_load_f64(row_elem(go, 0, go->ndim == 1 ? n : 0), go->dtype); /* per row or one */
    for (int64_t d = 0; d < m.D; d++) tpurt_store_f64(row_elem(gi, n, d), dt, round_to(row[d] * scale, dt));
  }
  tpurt_temp_release(buf);
  return TPURT_OK;
}

/* a row's target flags and gradient */
tpurt_status tpurt_plan_multilabel_margin_loss_backward(const tpurt_op_call* c, tpurt_plan* p) {
  p->scratch_bytes += planned(2 * mlm_classes(&TPURT_ARG(c, multilabel_margin_loss_backward, self)->t));
  return TPURT_OK;
}
