/* Reductions (sum, mean, prod, max/min and their arg/index forms, var/std, all/any, norms,
 * logsumexp, count_nonzero) and cumsum. Every reduction is a red_op run by one driver. */
#include <stdlib.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

#include "complex_math.h"
#include "reduce.h"
#include "vmath.h"

/* ---------------------------------------------------------------- strided load/store */
void tpurt_red_load(void* dst, int as_int, const void* src, int64_t st, int dt, int64_t n) {
/* the dense case gets its own loop: it vectorizes */
#define RL(T, CT, EXPR)                                                        \
  do {                                                                         \
    const T* s = (const T*)src;                                                \
    CT* d = (CT*)dst;                                                          \
    if (st == 1)                                                               \
      for (int64_t k = 0; k < n; k++) { T x = s[k]; d[k] = (CT)(EXPR); }       \
    else                                                                       \
      for (int64_t k = 0; k < n; k++) { T x = s[k * st]; d[k] = (CT)(EXPR); }  \
  } while (0)
#define RL_ALL(CT)                                                     \
  switch (dt) {                                                        \
    case TPURT_BOOL: RL(uint8_t, CT, x != 0); break;                   \
    case TPURT_U8: RL(uint8_t, CT, x); break;                          \
    case TPURT_I8: RL(int8_t, CT, x); break;                           \
    case TPURT_I16: RL(int16_t, CT, x); break;                         \
    case TPURT_I32: RL(int32_t, CT, x); break;                         \
    case TPURT_I64: RL(int64_t, CT, x); break;                         \
    case TPURT_F16: RL(uint16_t, CT, tpurt_f16_to_f32(x)); break;      \
    case TPURT_BF16: RL(uint16_t, CT, tpurt_bf16_to_f32(x)); break;    \
    case TPURT_F32: RL(float, CT, x); break;                           \
    case TPURT_F64: RL(double, CT, x); break;                          \
  }
  if (as_int) { RL_ALL(int64_t) } else { RL_ALL(double) }
#undef RL_ALL
#undef RL
}

void tpurt_red_store(void* dst, int64_t st, int dt, const double* src, int64_t n) {
#define RS(T, EXPR)                                                      \
  do {                                                                   \
    T* d = (T*)dst;                                                      \
    if (st == 1)                                                         \
      for (int64_t k = 0; k < n; k++) { double x = src[k]; d[k] = (T)(EXPR); } \
    else                                                                 \
      for (int64_t k = 0; k < n; k++) { double x = src[k]; d[k * st] = (T)(EXPR); } \
  } while (0)
  switch (dt) {
    case TPURT_F32: RS(float, x); break;
    case TPURT_F64: RS(double, x); break;
    case TPURT_BF16: RS(uint16_t, tpurt_f32_to_bf16((float)x)); break;
    case TPURT_F16: RS(uint16_t, tpurt_f32_to_f16((float)x)); break;
    default: {
      size_t es = tpurt_dtype_size((tpurt_dtype)dt);
      for (int64_t k = 0; k < n; k++) tpurt_store_f64((char*)dst + k * st * (int64_t)es, dt, src[k]);
    }
  }
#undef RS
}

tpurt_status tpurt_wrap_dim(int64_t dim, int ndim, int* out) {
  int n = ndim > 0 ? ndim : 1;
  if (dim < -n || dim >= n)
    return tpurt_fail(TPURT_ERR_INDEX, "Dimension out of range (expected to be in range of [%d, %d], but got %lld)",
                      -n, n - 1, (long long)dim);
  *out = (int)(dim < 0 ? dim + n : dim);
  return TPURT_OK;
}

tpurt_status tpurt_red_mask(const tpurt_tensor* in, const tpurt_value* dims, const tpurt_tensor* out,
                            uint32_t* mask) {
  uint32_t all = in->ndim ? (uint32_t)((1ull << in->ndim) - 1) : 0;
  *mask = 0;
  if (dims->kind == TPURT_V_NONE) {
    *mask = all;
    return TPURT_OK;
  }
  if (dims->kind == TPURT_V_INTS && dims->n == 0) {
    int same = out->ndim == in->ndim && tpurt_numel(out) == tpurt_numel(in);
    *mask = same ? 0 : all;
    return TPURT_OK;
  }
  int n = dims->kind == TPURT_V_INTS ? dims->n : 1;
  for (int k = 0; k < n; k++) {
    int d;
    tpurt_status s = tpurt_wrap_dim(dims->kind == TPURT_V_INTS ? dims->ints[k] : dims->i, in->ndim, &d);
    if (s) return s;
    if (in->ndim) *mask |= 1u << d;
  }
  return TPURT_OK;
}

/* ---------------------------------------------------------------- the driver */
typedef struct red_plan {
  int nk, nr;                       /* kept / reduced dims */
  int64_t ksize[TPURT_MAX_DIMS];    /* kept dims in output order */
  int64_t kin[TPURT_MAX_DIMS];      /* their input strides */
  int64_t kout[TPURT_MAX_OUTS][TPURT_MAX_DIMS];
  int64_t rsize[TPURT_MAX_DIMS], rst[TPURT_MAX_DIMS]; /* reduced dims, input order */
  int64_t rcount;
} red_plan;

static tpurt_status plan(const tpurt_tensor* in, uint32_t mask, const tpurt_tensor* outs, int nouts,
                         red_plan* p) {
  memset(p, 0, sizeof *p);
  p->rcount = 1;
  int keepdim = outs[0].ndim == in->ndim;
  for (int d = 0; d < in->ndim; d++) {
    if (mask >> d & 1) {
      p->rsize[p->nr] = in->sizes[d];
      p->rst[p->nr++] = in->strides[d];
      p->rcount *= in->sizes[d];
      continue;
    }
    int j = keepdim ? d : p->nk;
    for (int o = 0; o < nouts; o++) {
      if (j >= outs[o].ndim || outs[o].sizes[j] != in->sizes[d])
        return tpurt_fail(TPURT_ERR_VALUE, "reduction output %s does not match input %s",
                          tpurt_shape_str(&outs[o]), tpurt_shape_str(in));
      p->kout[o][p->nk] = outs[o].strides[j];
    }
    p->ksize[p->nk] = in->sizes[d];
    p->kin[p->nk++] = in->strides[d];
  }
  if (!keepdim && p->nk != outs[0].ndim)
    return tpurt_fail(TPURT_ERR_VALUE, "reduction output %s does not match input %s",
                      tpurt_shape_str(&outs[0]), tpurt_shape_str(in));
  /* Reduced dims that chain (a dense image's channels, rows and columns) are one: the row
   * folds then see whole runs, not 32-element rows (x.sum() on [4, 64, 32, 32] took 9x the
   * time of its flat view). Kept dims likewise, where the input and every output chain alike:
   * a sum over dim 0 of [8, 128, 768] then walks blocks of 1024 columns, not 128 rows of 768.
   * Same elements, same linear indices. */
  int64_t* rst = p->rst;
  p->nr = tpurt_merge_dims(p->nr, p->rsize, 1, &rst);
  int64_t* kst[TPURT_MAX_OUTS + 1] = {p->kin};
  for (int o = 0; o < nouts; o++) kst[o + 1] = p->kout[o];
  p->nk = tpurt_merge_dims(p->nk, p->ksize, nouts + 1, kst);
  if (p->nr == 0) { /* a single element per output: one reduced dim of size 1 */
    p->rsize[0] = 1;
    p->rst[0] = 0;
    p->nr = 1;
  }
  return TPURT_OK;
}

static void store_vals(const tpurt_tensor* outs, int nouts, const red_plan* p, const int64_t* kidx,
                       const red_val* v) {
  for (int o = 0; o < nouts; o++) {
    int64_t off = 0;
    for (int j = 0; j < p->nk; j++) off += kidx[j] * p->kout[o][j];
    char* dst = (char*)outs[o].data + off * (int64_t)tpurt_dtype_size((tpurt_dtype)outs[o].dtype);
    if (v[o].is_int) tpurt_store_i64(dst, outs[o].dtype, v[o].i);
    else tpurt_store_f64(dst, outs[o].dtype, v[o].f);
  }
}

static int64_t in_offset(const int64_t* idx, const int64_t* st, int n) {
  int64_t off = 0;
  for (int d = 0; d < n; d++) off += idx[d] * st[d];
  return off;
}

/* One reduction in progress; the work items of both modes below are independent output
 * elements (or blocks of them), so they are split over the worker pool when big enough.
 * Each output element is folded by one thread in the same order whatever the split. */
typedef struct red_job {
  const tpurt_tensor* in;
  const tpurt_tensor* outs;
  int nouts;
  const red_plan* p;
  const red_op* op;
  const red_ctx* ctx;
  int c;                         /* column mode: the kept dim innermost; -1: row mode */
  int64_t chunk;                 /* column mode: columns per block (at most RED_CHUNK) */
  int64_t osize[TPURT_MAX_DIMS]; /* column mode: kept sizes with dim c counted in blocks */
} red_job;

/* Work per claim of the pool, in input elements, and the least total worth splitting. */
#define RED_PAR_GRAIN (1 << 14)
#define RED_PAR_MIN (1 << 16)
/* Column mode splits columns into at least this many blocks when there are enough columns
 * (RED_COL_MIN_CHUNK at least per block). */
#define RED_COL_ITEMS 8
#define RED_COL_MIN_CHUNK 128

/* Folds the elements [l0, l1) (row-major linear index over the reduced dims) of the
 * reduced sub-space at `base` into *s; the last reduced dim is folded in dense runs. */
static void fold_range(const red_job* J, const char* base, int64_t l0, int64_t l1, red_state* s) {
  const red_plan* p = J->p;
  size_t es = tpurt_dtype_size((tpurt_dtype)J->in->dtype);
  _Alignas(64) int64_t buf[RED_CHUNK];
  int64_t ridx[TPURT_MAX_DIMS] = {0};
  int64_t len = p->rsize[p->nr - 1], st = p->rst[p->nr - 1];
  if (l0 >= l1) return;
  tpurt_unravel(l0 / len, p->rsize, p->nr - 1, ridx);
  for (int64_t lin = l0; lin < l1;) {
    const char* row = base + in_offset(ridx, p->rst, p->nr - 1) * (int64_t)es;
    int64_t j = lin % len, end = len < j + (l1 - lin) ? len : j + (l1 - lin);
    if (J->op->row_f32 && st == 1 && J->in->dtype == TPURT_F32) {
      J->op->row_f32(s, (const float*)row + j, end - j, lin, J->ctx);
      lin += end - j;
      j = end;
    }
    for (; j < end; j += RED_CHUNK) {
      int64_t n = end - j < RED_CHUNK ? end - j : RED_CHUNK;
      tpurt_red_load(buf, J->ctx->as_int, row + j * st * (int64_t)es, st, J->in->dtype, n);
      J->op->row(s, buf, n, lin, J->ctx);
      lin += n;
    }
    if (p->nr > 1) tpurt_next_index(ridx, p->rsize, p->nr - 1);
  }
}

/* Row mode: one state per output element. Items are output elements (row-major over the
 * kept dims). */
static void run_rows(void* arg, int64_t b, int64_t e) {
  const red_job* J = arg;
  const red_plan* p = J->p;
  size_t es = tpurt_dtype_size((tpurt_dtype)J->in->dtype);
  int64_t kidx[TPURT_MAX_DIMS] = {0};
  tpurt_unravel(b, p->ksize, p->nk, kidx);
  for (int64_t o = b; o < e; o++) {
    red_state s;
    J->op->init(&s, 1, J->ctx);
    fold_range(J, (const char*)J->in->data + in_offset(kidx, p->kin, p->nk) * (int64_t)es, 0, p->rcount, &s);
    red_val v[TPURT_MAX_OUTS];
    J->op->fin(&s, p->rcount, J->ctx, v);
    store_vals(J->outs, J->nouts, p, kidx, v);
    if (p->nk) tpurt_next_index(kidx, p->ksize, p->nk);
  }
}

/* Row mode for few, long outputs: each output's reduced sub-space is cut in `nblocks`
 * blocks of `block` elements, folded into parts[] by whichever thread claims them and
 * merged in block order afterwards; the blocks depend only on the sizes, so the result is
 * the same for any number of threads. Items are (output, block) pairs. */
typedef struct red_split {
  const red_job* J;
  int64_t block, nblocks;
  red_state* parts;
} red_split;

static void run_split(void* arg, int64_t b, int64_t e) {
  const red_split* S = arg;
  const red_plan* p = S->J->p;
  size_t es = tpurt_dtype_size((tpurt_dtype)S->J->in->dtype);
  for (int64_t u = b; u < e; u++) {
    int64_t kidx[TPURT_MAX_DIMS] = {0}, l0 = u % S->nblocks * S->block;
    tpurt_unravel(u / S->nblocks, p->ksize, p->nk, kidx);
    S->J->op->init(&S->parts[u], 1, S->J->ctx);
    fold_range(S->J, (const char*)S->J->in->data + in_offset(kidx, p->kin, p->nk) * (int64_t)es, l0,
               l0 + S->block < p->rcount ? l0 + S->block : p->rcount, &S->parts[u]);
  }
}

/* Splitting: at most RED_SPLIT_OUTS outputs, at least 2 blocks of >= RED_SPLIT_BLOCK elements,
 * at most RED_SPLIT_PARTS blocks per output (the block grows with the size instead). */
#define RED_SPLIT_OUTS 4
#define RED_SPLIT_BLOCK (1 << 16)
#define RED_SPLIT_PARTS 64

static void run_split_rows(const red_job* J, int64_t items) {
  const red_plan* p = J->p;
  int64_t block = (p->rcount + RED_SPLIT_PARTS - 1) / RED_SPLIT_PARTS;
  block = block < RED_SPLIT_BLOCK ? RED_SPLIT_BLOCK : (block + RED_CHUNK - 1) / RED_CHUNK * RED_CHUNK;
  red_state parts[RED_SPLIT_OUTS * RED_SPLIT_PARTS];
  red_split S = {J, block, (p->rcount + block - 1) / block, parts};
  tpurt_parallel_for(items * S.nblocks, 1, run_split, &S);
  int64_t kidx[TPURT_MAX_DIMS] = {0};
  for (int64_t o = 0; o < items; o++) {
    red_state* s = &parts[o * S.nblocks];
    for (int64_t q = 1; q < S.nblocks; q++) J->op->merge(s, &s[q], J->ctx);
    red_val v[TPURT_MAX_OUTS];
    J->op->fin(s, p->rcount, J->ctx, v);
    store_vals(J->outs, J->nouts, p, kidx, v);
    if (p->nk) tpurt_next_index(kidx, p->ksize, p->nk);
  }
}

/* Column mode: kept dim `c` is innermost; blocks of J->chunk of it hold one state per
 * column. Items are (kept index with dim c in blocks), row-major over J->osize. Each
 * column folds its rows in order, whatever the block width. */
#define COL_ROWS 64 /* rows handed to col_f32 at once */
static void run_cols(void* arg, int64_t b, int64_t e) {
  const red_job* J = arg;
  const red_plan* p = J->p;
  const red_op* op = J->op;
  int c = J->c;
  size_t es = tpurt_dtype_size((tpurt_dtype)J->in->dtype);
  _Alignas(64) int64_t buf[RED_CHUNK];
  _Alignas(64) double acc[RED_CHUNK];
  red_state states[RED_CHUNK];
  int64_t kidx[TPURT_MAX_DIMS], ridx[TPURT_MAX_DIMS];
  int64_t cs = p->kin[c];
  for (int64_t item = b; item < e; item++) {
    tpurt_unravel(item, J->osize, p->nk, kidx);
    int64_t c0 = kidx[c] * J->chunk;
    int64_t n = p->ksize[c] - c0 < J->chunk ? p->ksize[c] - c0 : J->chunk;
    kidx[c] = c0;
    const char* base = (const char*)J->in->data + in_offset(kidx, p->kin, p->nk) * (int64_t)es;
    memset(ridx, 0, sizeof ridx);
    int64_t roff = 0;
    /* dense float columns fold in place into dense sums (vectorized, same order); their
     * states differ only in f, held in acc */
    int dense_f32 = p->rcount > 0 && op->col_f32 && cs == 1 && J->in->dtype == TPURT_F32;
    if (dense_f32) {
      const float* rows[COL_ROWS];
      int more = 1;
      red_state s0;
      op->init(&s0, 1, J->ctx);
      for (int64_t k = 0; k < n; k++) acc[k] = s0.f;
      while (more) {
        int64_t nrows = 0;
        do rows[nrows++] = (const float*)base + roff;
        while ((more = tpurt_next_index_offsets(ridx, p->rsize, p->nr, 1, p->rst, &roff)) && nrows < COL_ROWS);
        op->col_f32(acc, rows, nrows, n, J->ctx);
      }
    } else {
      int64_t lin = 0;
      op->init(states, n, J->ctx);
      if (p->rcount > 0) do {
          tpurt_red_load(buf, J->ctx->as_int, base + roff * (int64_t)es, cs, J->in->dtype, n);
          op->col(states, buf, n, lin++, J->ctx);
        } while (tpurt_next_index_offsets(ridx, p->rsize, p->nr, 1, p->rst, &roff));
    }
    /* One float result per column is stored as one run: a sum over dim 0 of [8, 98304]
     * spent 9x its folding time finishing and storing element by element. */
    red_val v[TPURT_MAX_OUTS];
    if (dense_f32 && op->fin_f32) op->fin_f32(acc, n, p->rcount, J->ctx);
    int float_run = dense_f32 || (J->nouts == 1 && n > 0 && (op->fin(&states[0], p->rcount, J->ctx, v), !v[0].is_int));
    for (int64_t k = 0; float_run && !dense_f32 && k < n; k++) {
      op->fin(&states[k], p->rcount, J->ctx, v);
      acc[k] = v[0].f;
    }
    if (float_run) {
      int64_t off = 0;
      for (int j = 0; j < p->nk; j++) off += kidx[j] * p->kout[0][j];
      int odt = J->outs[0].dtype;
      tpurt_red_store((char*)J->outs[0].data + off * (int64_t)tpurt_dtype_size((tpurt_dtype)odt), p->kout[0][c],
                      odt, acc, n);
      continue;
    }
    for (int64_t k = 0; k < n; k++) {
      op->fin(&states[k], p->rcount, J->ctx, v);
      kidx[c] = c0 + k;
      store_vals(J->outs, J->nouts, p, kidx, v);
    }
  }
}

tpurt_status tpurt_red_run(const tpurt_tensor* in, uint32_t mask, const tpurt_tensor* outs, int nouts,
                           const red_op* op, red_ctx* ctx) {
  red_plan p;
  tpurt_status s = plan(in, mask, outs, nouts, &p);
  if (s) return s;
  for (int j = 0; j < p.nk; j++)
    if (p.ksize[j] == 0) return TPURT_OK;
  ctx->as_int = op->int_inputs && !tpurt_is_float(in->dtype);
  /* Column mode when some kept dim is denser than the innermost reduced dim. */
  int c = -1;
  int64_t rs = tpurt_iabs64(p.rst[p.nr - 1]);
  if (p.rsize[p.nr - 1] == 1) rs = INT64_MAX;
  for (int j = 0; j < p.nk; j++)
    if (p.ksize[j] > 1 && tpurt_iabs64(p.kin[j]) < rs && (c < 0 || tpurt_iabs64(p.kin[j]) <= tpurt_iabs64(p.kin[c]))) c = j;
  red_job job = {in, outs, nouts, &p, op, ctx, c, RED_CHUNK, {0}};
  int64_t items = 1, per_item = p.rcount > 0 ? p.rcount : 1;
  memcpy(job.osize, p.ksize, sizeof job.osize);
  if (c >= 0) {
    int64_t others = 1; /* kept elements besides dim c */
    for (int j = 0; j < p.nk; j++) others *= j == c ? 1 : p.ksize[j];
    /* Work enough for the pool in few blocks of columns (a sum over the tokens of
     * [batch, seq, features]): narrower blocks, so that every thread gets some, each still
     * reading runs of at least half a KiB of a row (the prefetcher's streams) */
    while (job.chunk > RED_COL_MIN_CHUNK && others * ((p.ksize[c] + job.chunk - 1) / job.chunk) < RED_COL_ITEMS &&
           others * p.ksize[c] * per_item >= RED_PAR_MIN)
      job.chunk /= 2;
    job.osize[c] = (p.ksize[c] + job.chunk - 1) / job.chunk;
    per_item *= p.ksize[c] < job.chunk ? p.ksize[c] : job.chunk;
  }
  for (int j = 0; j < p.nk; j++) items *= job.osize[j];
  if (c < 0 && op->merge && items <= RED_SPLIT_OUTS && p.rcount >= 2 * RED_SPLIT_BLOCK) {
    run_split_rows(&job, items);
    return TPURT_OK;
  }
  tpurt_pool_fn fn = c < 0 ? run_rows : run_cols;
  if (items > 1 && items * per_item >= RED_PAR_MIN)
    tpurt_parallel_for(items, (RED_PAR_GRAIN + per_item - 1) / per_item, fn, &job);
  else
    fn(&job, 0, items);
  return TPURT_OK;
}

/* ---------------------------------------------------------------- complex64 */
tpurt_tensor tpurt_red_pairs(const tpurt_tensor* t) {
  tpurt_tensor v = *t;
  v.dtype = TPURT_F32;
  for (int d = 0; d < t->ndim; d++) v.strides[d] = 2 * t->strides[d];
  v.sizes[t->ndim] = 2;
  v.strides[t->ndim] = 1;
  v.ndim = t->ndim + 1;
  return v;
}

/* One part (0 real, 1 imaginary) of a complex64 output as float32, with a trailing dim of
 * 1 when `keep` (the output keeps the input's rank, so the pair dim counts as kept too). */
static tpurt_tensor cx_part(const tpurt_tensor* t, int part, int keep) {
  tpurt_tensor v = tpurt_red_pairs(t);
  v.data = (float*)t->data + part;
  v.sizes[t->ndim] = 1;
  v.ndim = t->ndim + keep;
  return v;
}

/* ---------------------------------------------------------------- the ops */
static void init_zero(red_state* s, int64_t n, const red_ctx* c) { memset(s, 0, sizeof *s * (size_t)n); }

/* Integer folds wrap like C's unsigned arithmetic, as ATen's do in practice. */
#define WRAP_ADD(a, b) ((int64_t)((uint64_t)(a) + (uint64_t)(b)))
#define WRAP_MUL(a, b) ((int64_t)((uint64_t)(a) * (uint64_t)(b)))

/* sum / nansum (flag) / mean share the fold; they differ in fin. */
static void sum_row(red_state* s, const void* x, int64_t n, int64_t idx0, const red_ctx* c) {
  if (c->as_int) {
    const int64_t* v = x;
    int64_t a = s->i;
    for (int64_t k = 0; k < n; k++) a = WRAP_ADD(a, v[k]);
    s->i = a;
    return;
  }
  const double* v = x;
  double a0 = 0, a1 = 0, a2 = 0, a3 = 0; /* independent chains: lets the loop vectorize */
  int64_t k = 0;
  if (c->flag) {
    for (; k < n; k++) a0 += isnan(v[k]) ? 0 : v[k];
  } else {
    for (; k + 4 <= n; k += 4) { a0 += v[k]; a1 += v[k + 1]; a2 += v[k + 2]; a3 += v[k + 3]; }
    for (; k < n; k++) a0 += v[k];
  }
  s->f += (a0 + a1) + (a2 + a3);
}
static void sum_col(red_state* s, const void* x, int64_t n, int64_t idx, const red_ctx* c) {
  if (c->as_int) {
    const int64_t* v = x;
    for (int64_t k = 0; k < n; k++) s[k].i = WRAP_ADD(s[k].i, v[k]);
    return;
  }
  const double* v = x;
  if (c->flag) for (int64_t k = 0; k < n; k++) s[k].f += isnan(v[k]) ? 0 : v[k];
  else for (int64_t k = 0; k < n; k++) s[k].f += v[k];
}
static void sum_fin(const red_state* s, int64_t count, const red_ctx* c, red_val* o) {
  o[0] = (red_val){s->f, s->i, c->as_int};
}
static void mean_fin(const red_state* s, int64_t count, const red_ctx* c, red_val* o) {
  o[0] = (red_val){s->f / (double)count, 0, 0};
}
static void mean_fin_f32(double* acc, int64_t n, int64_t count, const red_ctx* c) {
  for (int64_t k = 0; k < n; k++) acc[k] = acc[k] / (double)count;
}
/* 32 double lanes over float32: four independent vector chains with AVX-512, eight with AVX2
 * (one chain was bound by the add's latency, not by memory), summed in a fixed tree, so the
 * order depends only on n, never on the build or the thread count. The lanes are four
 * vectors of eight (lanes 8q..8q+7 in a[q]) and the tree is folded in them: element by
 * element through the stack it cost more than summing a 128-element row. */
typedef double red_vd8 __attribute__((vector_size(64)));
#define SUM_LANES 32
static inline double sum_lanes(const double* lanes) {
  red_vd8 a[4];
  memcpy(a, lanes, sizeof a);
  red_vd8 t = (a[0] + a[2]) + (a[1] + a[3]); /* lane j + (j + 16), then + (j + 8) */
  double u0 = t[0] + t[4], u1 = t[1] + t[5], u2 = t[2] + t[6], u3 = t[3] + t[7];
  return (u0 + u2) + (u1 + u3);
}
/* (the lanes as a plain array: GCC converts a whole vector of floats to doubles in one
 * instruction there, but in two halves and a merge from __builtin_convertvector) */
static void sum_row_f32(red_state* s, const float* v, int64_t n, int64_t idx0, const red_ctx* c) {
  _Alignas(64) double a[SUM_LANES] = {0};
  double t = 0;
  int64_t k = 0;
  if (c->flag) {
    for (; k + SUM_LANES <= n; k += SUM_LANES)
      for (int j = 0; j < SUM_LANES; j++) a[j] += isnan(v[k + j]) ? 0 : (double)v[k + j];
    for (; k < n; k++) t += isnan(v[k]) ? 0 : (double)v[k];
  } else {
    for (; k + SUM_LANES <= n; k += SUM_LANES) {
      __builtin_prefetch(v + k + 512); /* 2 KiB ahead: one core's streaming alone leaves memory idle */
      for (int j = 0; j < SUM_LANES; j++) a[j] += (double)v[k + j];
    }
    for (; k < n; k++) t += (double)v[k];
  }
  s->f += sum_lanes(a) + t;
}
/* Sixty-four columns at a time through all the rows, their sums in eight vectors of
 * doubles (the pass over acc per eight rows, not vectorized across rows, was 2.2x CPU's
 * time); each column still adds its rows one after another, in order. */
/* Adds rows [0, nrows) of columns [k, k + 64) into acc in eight vectors of doubles. With
 * AVX-512 they are eight named registers: GCC kept one vector of an array of 64 doubles on the
 * stack, a store-to-load chain per row (a sum over dims (0, 1) of [8, 128, 768]: 2.4x CPU's
 * time on a Zen 4). Each column adds its rows in order either way. */
#ifdef __AVX512F__
static inline void sum_cols_64(double* acc, const float* const* rows, int64_t nrows, int64_t k) {
  __m512d a0 = _mm512_loadu_pd(acc + k), a1 = _mm512_loadu_pd(acc + k + 8), a2 = _mm512_loadu_pd(acc + k + 16),
          a3 = _mm512_loadu_pd(acc + k + 24), a4 = _mm512_loadu_pd(acc + k + 32), a5 = _mm512_loadu_pd(acc + k + 40),
          a6 = _mm512_loadu_pd(acc + k + 48), a7 = _mm512_loadu_pd(acc + k + 56);
  for (int64_t r = 0; r < nrows; r++) {
    const float* x = rows[r] + k;
    a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm256_loadu_ps(x)));
    a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_loadu_ps(x + 8)));
    a2 = _mm512_add_pd(a2, _mm512_cvtps_pd(_mm256_loadu_ps(x + 16)));
    a3 = _mm512_add_pd(a3, _mm512_cvtps_pd(_mm256_loadu_ps(x + 24)));
    a4 = _mm512_add_pd(a4, _mm512_cvtps_pd(_mm256_loadu_ps(x + 32)));
    a5 = _mm512_add_pd(a5, _mm512_cvtps_pd(_mm256_loadu_ps(x + 40)));
    a6 = _mm512_add_pd(a6, _mm512_cvtps_pd(_mm256_loadu_ps(x + 48)));
    a7 = _mm512_add_pd(a7, _mm512_cvtps_pd(_mm256_loadu_ps(x + 56)));
  }
  _mm512_storeu_pd(acc + k, a0), _mm512_storeu_pd(acc + k + 8, a1), _mm512_storeu_pd(acc + k + 16, a2);
  _mm512_storeu_pd(acc + k + 24, a3), _mm512_storeu_pd(acc + k + 32, a4), _mm512_storeu_pd(acc + k + 40, a5);
  _mm512_storeu_pd(acc + k + 48, a6), _mm512_storeu_pd(acc + k + 56, a7);
}
#else
static inline void sum_cols_64(double* acc, const float* const* rows, int64_t nrows, int64_t k) {
  _Alignas(64) double a[64];
  memcpy(a, acc + k, sizeof a);
  for (int64_t r = 0; r < nrows; r++)
    for (int j = 0; j < 64; j++) a[j] += (double)rows[r][k + j];
  memcpy(acc + k, a, sizeof a);
}
#endif
static void sum_col_f32(double* acc, const float* const* rows, int64_t nrows, int64_t n, const red_ctx* c) {
  int64_t k = 0;
  if (!c->flag) { /* eight vectors in flight, then one */
    for (; k + 64 <= n; k += 64) sum_cols_64(acc, rows, nrows, k);
    for (; k + 8 <= n; k += 8) {
      double a[8];
      memcpy(a, acc + k, sizeof a);
      for (int64_t r = 0; r < nrows; r++)
        for (int j = 0; j < 8; j++) a[j] += (double)rows[r][k + j];
      memcpy(acc + k, a, sizeof a);
    }
  }
  for (int64_t r = 0; r < nrows; r++) {
    const float* x = rows[r];
    if (c->flag) for (int64_t j = k; j < n; j++) acc[j] += isnan(x[j]) ? 0 : (double)x[j];
    else for (int64_t j = k; j < n; j++) acc[j] += (double)x[j];
  }
}
static void sum_merge(red_state* a, const red_state* b, const red_ctx* c) {
  a->f += b->f;
  a->i = WRAP_ADD(a->i, b->i);
}

/* complex sum / mean over float pairs: f += real parts (even linear index), g += imaginary */
static void csum_row(red_state* s, const void* x, int64_t n, int64_t idx0, const red_ctx* c) {
  const double* v = x;
  double a[2] = {0, 0};
  for (int64_t k = 0; k < n; k++) a[(idx0 + k) & 1] += v[k];
  s->f += a[0];
  s->g += a[1];
}
static void csum_col(red_state* s, const void* x, int64_t n, int64_t idx, const red_ctx* c) {
  const double* v = x;
  if (idx & 1) for (int64_t k = 0; k < n; k++) s[k].g += v[k];
  else for (int64_t k = 0; k < n; k++) s[k].f += v[k];
}
/* 8 double lanes (fixed order, as sum_row_f32); lane j always holds the parity of idx0 + j */
static void csum_row_f32(red_state* s, const float* v, int64_t n, int64_t idx0, const red_ctx* c) {
  double a[8] = {0}, t[2] = {0, 0};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    for (int j = 0; j < 8; j++) a[j] += (double)v[k + j];
  for (; k < n; k++) t[(idx0 + k) & 1] += (double)v[k];
  double even = (a[0] + a[2]) + (a[4] + a[6]), odd = (a[1] + a[3]) + (a[5] + a[7]);
  s->f += (idx0 & 1 ? odd : even) + t[0];
  s->g += (idx0 & 1 ? even : odd) + t[1];
}
static void csum_merge(red_state* a, const red_state* b, const red_ctx* c) {
  a->f += b->f;
  a->g += b->g;
}
static void csum_fin(const red_state* s, int64_t count, const red_ctx* c, red_val* o) {
  o[0] = (red_val){s->f, 0, 0};
  o[1] = (red_val){s->g, 0, 0};
}
static void cmean_fin(const red_state* s, int64_t count, const red_ctx* c, red_val* o) {
  double n = (double)(count / 2);
  o[0] = (red_val){s->f / n, 0, 0};
  o[1] = (red_val){s->g / n, 0, 0};
}
static const red_op op_csum = {.init = init_zero, .row = csum_row, .col = csum_col, .fin = csum_fin, .merge = csum_merge, .row_f32 = csum_row_f32};
static const red_op op_cmean = {.init = init_zero, .row = csum_row, .col = csum_col, .fin = cmean_fin, .merge = csum_merge, .row_f32 = csum_row_f32};
static const red_op op_sum = {.int_inputs = 1, .init = init_zero, .row = sum_row, .col = sum_col, .fin = sum_fin, .merge = sum_merge, .row_f32 = sum_row_f32, .col_f32 = sum_col_f32, .cx = &op_csum, .cx_parts = 1};
static const red_op op_mean = {.init = init_zero, .row = sum_row, .col = sum_col, .fin = mean_fin, .merge = sum_merge, .row_f32 = sum_row_f32, .col_f32 = sum_col_f32, .fin_f32 = mean_fin_f32, .cx = &op_cmean, .cx_parts = 1};

/* count_nonzero: an int64 count of x != 0 */
static void cnz_row(red_state* s, const void* x, int64_t n, int64_t idx0, const red_ctx* c) {
  const double* v = x;
  for (int64_t k = 0; k < n; k++) s->i += v[k] != 0;
}
static void cnz_col(red_state* s, const void* x, int64_t n, int64_t idx, const red_ctx* c) {
  const double* v = x;
  for (int64_t k = 0; k < n; k++) s[k].i += v[k] != 0;
}
static void int_fin(const red_state* s, int64_t count, const red_ctx* c, red_val* o) {
  o[0] = (red_val){0, s->i, 1};
}
static const red_op op_count_nonzero = {.init = init_zero, .row = cnz_row, .col = cnz_col, .fin = int_fin};

/* prod */
static void init_one(red_state* s, int64_t n, const red_ctx* c) {
  for (int64_t k = 0; k < n; k++) s[k] = (red_state){1, 0, 1, 0};
}
static void prod_row(red_state* s, const void* x, int64_t n, int64_t idx0, const red_ctx* c) {
  if (c->as_int) {
    const int64_t* v = x;
    for (int64_t k = 0; k < n; k++) s->i = WRAP_MUL(s->i, v[k]);
  } else {
    const double* v = x;
    for (int64_t k = 0; k < n; k++) s->f *= v[k];
  }
}
static void prod_col(red_state* s, const void* x, int64_t n, int64_t idx, const red_ctx* c) {
  if (c->as_int) {
    const int64_t* v = x;
    for (int64_t k = 0; k < n; k++) s[k].i = WRAP_MUL(s[k].i, v[k]);
  } else {
    const double* v = x;
    for (int64_t k = 0; k < n; k++) s[k].f *= v[k];
  }
}

/* complex prod over the float pairs (re at even, im at odd linear index): (f, g) is the
 * running product in double; column mode keeps a pending real part's bits in j */
static void cprod_mul(red_state* s, double re, double im) {
  double a = s->f, b = s->g;
  s->f = a * re - b * im;
  s->g = a * im + b * re;
}
static void cprod_row(red_state* s, const void* x, int64_t n, int64_t idx0, const red_ctx* c) {
  const double* v = x;
  for (int64_t k = 0; k + 1 < n; k += 2) cprod_mul(s, v[k], v[k + 1]);
}
static void cprod_col(red_state* s, const void* x, int64_t n, int64_t idx, const red_ctx* c) {
  const double* v = x;
  for (int64_t k = 0; k < n; k++) {
    if (idx % 2 == 0) {
      memcpy(&s[k].j, &v[k], sizeof(double));
      continue;
    }
    double re;
    memcpy(&re, &s[k].j, sizeof re);
    cprod_mul(&s[k], re, v[k]);
  }
}
static void cprod_init(red_state* s, int64_t n, const red_ctx* c) {
  for (int64_t k = 0; k < n; k++) s[k] = (red_state){1, 0, 0, 0};
}
static void cprod_fin(const red_state* s, int64_t count, const red_ctx* c, red_val* o) {
  o[0] = (red_val){s->f, 0, 0};
  o[1] = (red_val){s->g, 0, 0};
}
static const red_op op_cprod = {.init = cprod_init, .row = cprod_row, .col = cprod_col, .fin = cprod_fin};
static const red_op op_prod = {.int_inputs = 1, .init = init_one, .row = prod_row, .col = prod_col, .fin = sum_fin, .cx = &op_cprod};

/* all (flag 0) / any (flag 1): i holds the running truth value */
static void init_all_any(red_state* s, int64_t n, const red_ctx* c) {
  for (int64_t k = 0; k < n; k++) s[k] = (red_state){0, 0, !c->flag, 0};
}
static void allany_row(red_state* s, const void* x, int64_t n, int64_t idx0, const red_ctx* c) {
  const double* v = x;
  for (int64_t k = 0; k < n && s->i == !c->flag; k++)
    if ((v[k] != 0) == c->flag) s->i = c->flag;
}
static void allany_col(red_state* s, const void* x, int64_t n, int64_t idx, const red_ctx* c) {
  const double* v = x;
  for (int64_t k = 0; k < n; k++)
    if ((v[k] != 0) == c->flag) s[k].i = c->flag;
}
static const red_op op_all_any = {.init = init_all_any, .row = allany_row, .col = allany_col, .fin = int_fin};

/* max (flag 0) / min (flag 1) with the first index of the extreme; NaN wins (first NaN).
 * j = -1 until the first element. Values in f (floats) or i (ints). */
/* f starts at the fold's identity (-inf for max) for ext_col_f32, which has no j */
static void init_ext(red_state* s, int64_t n, const red_ctx* c) {
  for (int64_t k = 0; k < n; k++) s[k] = (red_state){c->flag ? INFINITY : -INFINITY, 0, 0, -1};
}
static inline void ext_f(red_state* s, double x, int64_t idx, int mn) {
  if (s->j < 0 || (isnan(x) ? !isnan(s->f) : (mn ? x < s->f : x > s->f))) {
    s->f = x;
    s->j = idx;
  }
}
static inline void ext_i(red_state* s, int64_t x, int64_t idx, int mn) {
  if (s->j < 0 || (mn ? x < s->i : x > s->i)) {
    s->i = x;
    s->j = idx;
  }
}
static void ext_row(red_state* s, const void* x, int64_t n, int64_t idx0, const red_ctx* c) {
  if (c->as_int) for (int64_t k = 0; k < n; k++) ext_i(s, ((const int64_t*)x)[k], idx0 + k, c->flag);
  else for (int64_t k = 0; k < n; k++) ext_f(s, ((const double*)x)[k], idx0 + k, c->flag);
}
static void ext_col(red_state* s, const void* x, int64_t n, int64_t idx, const red_ctx* c) {
  if (c->as_int) for (int64_t k = 0; k < n; k++) ext_i(&s[k], ((const int64_t*)x)[k], idx, c->flag);
  else for (int64_t k = 0; k < n; k++) ext_f(&s[k], ((const double*)x)[k], idx, c->flag);
}
static void ext_fin_val(const red_state* s, int64_t count, const red_ctx* c, red_val* o) {
  o[0] = (red_val){s->f, s->i, c->as_int};
}
static void ext_fin_both(const red_state* s, int64_t count, const red_ctx* c, red_val* o) {
  o[0] = (red_val){s->f, s->i, c->as_int};
  o[1] = (red_val){0, s->j < 0 ? 0 : s->j, 1};
}
static void ext_fin_idx(const red_state* s, int64_t count, const red_ctx* c, red_val* o) {
  o[0] = (red_val){0, s->j < 0 ? 0 : s->j, 1};
}
/* b's elements come after a's, so b only wins where it is strictly better: first index kept */
static void ext_merge(red_state* a, const red_state* b, const red_ctx* c) {
  if (b->j < 0) return;
  if (c->as_int) ext_i(a, b->i, b->j, c->flag);
  else ext_f(a, b->f, b->j, c->flag);
}
/* Dense float32 runs, folded as ext_row folds elements one by one (the same value and
 * index: the first occurrence's, so -0 and +0 ties keep the first one's sign): 64 lanes
 * (EXT_NV vectors of EXT_VL) each keep their extreme and where they first saw it, taking an element only when it
 * is strictly better, so NaN never enters; a NaN only marks its lane, and then the first NaN
 * is searched for. One compare per vector feeds both blends; the lanes fold as a tree. The
 * element loop with its branches was 8-16x CPU's time; a max scan then a search for the
 * extreme's first position, 2x. */
typedef float ext_vf __attribute__((vector_size(64)));
typedef int32_t ext_vi __attribute__((vector_size(64)));
enum { EXT_VL = 16, EXT_NV = 4 }; /* lanes per vector, vectors in flight */
/* x where `take`, else a (lane masks of -1 / 0) */
#define EXT_PICK_F(take, x, a) ((ext_vf)(((ext_vi)(x) & (take)) | ((ext_vi)(a) & ~(take))))
#define EXT_PICK_I(take, x, a) (((x) & (take)) | ((a) & ~(take)))
/* The 16 lanes rotated down by 8, 4, 2, 1 (__builtin_shufflevector: GCC 12+ and clang) */
#define EXT_ROT8(v) __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7)
#define EXT_ROT4(v) __builtin_shufflevector(v, v, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3)
#define EXT_ROT2(v) __builtin_shufflevector(v, v, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1)
#define EXT_ROT1(v) __builtin_shufflevector(v, v, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0)
/* a fold of 16 lanes into lane 0: HALVE(rot) folds lane j + h into lane j */
#define EXT_HALVINGS(HALVE)                                                 \
  do {                                                                      \
    HALVE(EXT_ROT8);                                                        \
    HALVE(EXT_ROT4);                                                        \
    HALVE(EXT_ROT2);                                                        \
    HALVE(EXT_ROT1);                                                        \
  } while (0)
/* The position of the first extreme (max, or min when `mn`) of w[0..m), or of its first NaN. */
static inline __attribute__((always_inline)) int32_t ext_first_f32(const float* w, int32_t m, int mn) {
  const float start = mn ? INFINITY : -INFINITY;
  ext_vf acc[EXT_NV];
  ext_vi at[EXT_NV], nan[EXT_NV], lane;
  for (int j = 0; j < EXT_VL; j++) lane[j] = j;
  for (int q = 0; q < EXT_NV; q++) {
    acc[q] = (ext_vf){0} + start;
    at[q] = lane - lane;
    nan[q] = at[q];
  }
  int32_t k = 0;
  for (; k + EXT_VL * EXT_NV <= m; k += EXT_VL * EXT_NV)
    for (int q = 0; q < EXT_NV; q++) {
      ext_vf x;
      memcpy(&x, w + k + q * EXT_VL, sizeof x);
      ext_vi take = mn ? x < acc[q] : x > acc[q];
      acc[q] = EXT_PICK_F(take, x, acc[q]);
      at[q] = EXT_PICK_I(take, lane + (k + q * EXT_VL), at[q]);
      nan[q] |= x != x;
    }
  /* the lanes folded as a tree: vectors pairwise, then halves of one vector */
  ext_vi any_nan = nan[0] | nan[1] | nan[2] | nan[3];
#define EXT_FOLD(A, AT, B, BT)                                                          \
  do {                                                                                \
    ext_vi take_ = (mn ? (B) < (A) : (B) > (A)) | (((B) == (A)) & ((BT) < (AT)));     \
    A = EXT_PICK_F(take_, B, A);                                                      \
    AT = EXT_PICK_I(take_, BT, AT);                                                   \
  } while (0)
  EXT_FOLD(acc[0], at[0], acc[2], at[2]);
  EXT_FOLD(acc[1], at[1], acc[3], at[3]);
  EXT_FOLD(acc[0], at[0], acc[1], at[1]);
#define EXT_HALVE(ROT)                      \
  do {                                      \
    ext_vf hb = ROT(acc[0]);                \
    ext_vi ht = ROT(at[0]);                 \
    EXT_FOLD(acc[0], at[0], hb, ht);        \
    any_nan |= ROT(any_nan);                \
  } while (0)
  EXT_HALVINGS(EXT_HALVE);
#undef EXT_HALVE
#undef EXT_FOLD
  float b = acc[0][0];
  int32_t first = at[0][0], saw_nan = any_nan[0];
  for (; k < m; k++) { /* after all the lanes' elements: order kept */
    float x = w[k];
    if (mn ? x < b : x > b) b = x, first = k;
    saw_nan |= x != x;
  }
  if (saw_nan) {
    first = 0;
    while (w[first] == w[first]) first++;
    return first;
  }
  return b == start ? 0 : first; /* nothing taken: every element is `start`, the first wins */
}
static void ext_row_f32(red_state* s, const float* v, int64_t n, int64_t idx0, const red_ctx* c) {
  for (int64_t k0 = 0; k0 < n; k0 += INT32_MAX / 2) { /* lane positions are int32 */
    int32_t m = (int32_t)(n - k0 < INT32_MAX / 2 ? n - k0 : INT32_MAX / 2);
    int32_t first = c->flag ? ext_first_f32(v + k0, m, 1) : ext_first_f32(v + k0, m, 0);
    ext_f(s, v[k0 + first], idx0 + k0 + first, c->flag);
  }
}
/* The extreme alone (amax, max()): the same value as ext_first_f32's element, without
 * tracking positions (one max per vector: 1.6x faster). Positions matter to the value only
 * for a zero extreme (the first zero's sign); merged with s as the run's first element. */
static inline __attribute__((always_inline)) float ext_value_f32(const float* w, int64_t m, int mn) {
  const float start = mn ? INFINITY : -INFINITY;
  ext_vf acc[EXT_NV];
  ext_vi nan[EXT_NV];
  for (int q = 0; q < EXT_NV; q++) {
    acc[q] = (ext_vf){0} + start;
    nan[q] = (ext_vi){0};
  }
  int64_t k = 0;
  for (; k + EXT_VL * EXT_NV <= m; k += EXT_VL * EXT_NV)
    for (int q = 0; q < EXT_NV; q++) {
      ext_vf x;
      memcpy(&x, w + k + q * EXT_VL, sizeof x);
      acc[q] = mn ? EXT_PICK_F(x < acc[q], x, acc[q]) : EXT_PICK_F(x > acc[q], x, acc[q]);
      nan[q] |= x != x;
    }
  /* a tree, in vectors: a chain over the lanes cost more than a 1024-element row's scan */
  ext_vi any_nan = nan[0] | nan[1] | nan[2] | nan[3];
  for (int q = 1; q < EXT_NV; q++)
    acc[0] = mn ? EXT_PICK_F(acc[q] < acc[0], acc[q], acc[0]) : EXT_PICK_F(acc[q] > acc[0], acc[q], acc[0]);
#define EXT_HALVE(ROT)                                                                      \
  do {                                                                                      \
    ext_vf x = ROT(acc[0]);                                                                 \
    acc[0] = mn ? EXT_PICK_F(x < acc[0], x, acc[0]) : EXT_PICK_F(x > acc[0], x, acc[0]);    \
    any_nan |= ROT(any_nan);                                                                \
  } while (0)
  EXT_HALVINGS(EXT_HALVE);
#undef EXT_HALVE
  float b = acc[0][0];
  int saw_nan = any_nan[0];
  for (; k < m; k++) {
    float x = w[k];
    b = (mn ? x < b : x > b) ? x : b;
    saw_nan |= x != x;
  }
  if (saw_nan) return NAN;
  if (b == 0)
    for (k = 0; w[k] != 0; k++) {}
  return b == 0 ? w[k] : b;
}
static void ext_value_row_f32(red_state* s, const float* v, int64_t n, int64_t idx0, const red_ctx* c) {
  if (n > 0) ext_f(s, c->flag ? ext_value_f32(v, n, 1) : ext_value_f32(v, n, 0), idx0, c->flag);
}
/* Dense float32 columns of the extreme alone: a NaN stays, a tie keeps the first value (sign of
 * zero), as ext_f folds them. Sixteen columns at a time through all the rows, in float (the
 * values are floats: exact): the staged element loop was 10x CPU's time, a pass over the
 * double states per row 2.7x. */
static void ext_col_f32(double* acc, const float* const* rows, int64_t nrows, int64_t n, const red_ctx* c) {
  int64_t k = 0;
  for (int nv = EXT_NV; nv >= 1; nv /= EXT_NV) /* EXT_NV vectors in flight, then one */
    for (; k + nv * EXT_VL <= n; k += nv * EXT_VL) {
      ext_vf a[EXT_NV];
      for (int q = 0; q < nv; q++)
        for (int j = 0; j < EXT_VL; j++) a[q][j] = (float)acc[k + q * EXT_VL + j];
      for (int64_t r = 0; r < nrows; r++)
        for (int q = 0; q < nv; q++) {
          ext_vf x;
          memcpy(&x, rows[r] + k + q * EXT_VL, sizeof x);
          ext_vi take = (a[q] == a[q]) & ((x != x) | (c->flag ? x < a[q] : x > a[q]));
          a[q] = EXT_PICK_F(take, x, a[q]);
        }
      for (int q = 0; q < nv; q++)
        for (int j = 0; j < EXT_VL; j++) acc[k + q * EXT_VL + j] = a[q][j];
    }
  for (; k < n; k++)
    for (int64_t r = 0; r < nrows; r++) {
      double a = acc[k], v = rows[r][k];
      acc[k] = a != a ? a : v != v ? v : (c->flag ? v < a : v > a) ? v : a;
    }
}
static const red_op op_ext_val = {.int_inputs = 1, .init = init_ext, .row = ext_row, .col = ext_col, .fin = ext_fin_val, .merge = ext_merge, .row_f32 = ext_value_row_f32,
                                  .col_f32 = ext_col_f32};
static const red_op op_ext_both = {.int_inputs = 1, .init = init_ext, .row = ext_row, .col = ext_col, .fin = ext_fin_both, .merge = ext_merge, .row_f32 = ext_row_f32};
static const red_op op_ext_idx = {.int_inputs = 1, .init = init_ext, .row = ext_row, .col = ext_col, .fin = ext_fin_idx, .merge = ext_merge, .row_f32 = ext_row_f32};

/* var/std (+mean): Welford per element in column mode, chunk two-pass + Chan merge in row
 * mode. f = mean, g = M2, i = count. p = correction; flag bit 0 = sqrt, bit 1 = also mean. */
static void welford_merge(red_state* s, double mean_b, double m2_b, int64_t nb) {
  int64_t n = s->i + nb;
  if (!nb) return;
  double d = mean_b - s->f;
  s->f += d * (double)nb / (double)n;
  s->g += m2_b + d * d * (double)s->i * (double)nb / (double)n;
  s->i = n;
}
static void var_row(red_state* s, const void* x, int64_t n, int64_t idx0, const red_ctx* c) {
  const double* v = x;
  double sum = 0, m2 = 0;
  for (int64_t k = 0; k < n; k++) sum += v[k];
  double mean = sum / (double)n;
  for (int64_t k = 0; k < n; k++) m2 += (v[k] - mean) * (v[k] - mean);
  welford_merge(s, mean, m2, n);
}
static void var_col(red_state* s, const void* x, int64_t n, int64_t idx, const red_ctx* c) {
  const double* v = x;
  double inv = 1.0 / (double)(idx + 1);
  for (int64_t k = 0; k < n; k++) {
    double d = v[k] - s[k].f;
    s[k].f += d * inv;
    s[k].g += d * (v[k] - s[k].f);
  }
  for (int64_t k = 0; k < n; k++) s[k].i = idx + 1;
}
static void var_fin(const red_state* s, int64_t count, const red_ctx* c, red_val* o) {
  double div = (double)count - c->p;
  double var = s->g / (div > 0 ? div : 0);
  o[0] = (red_val){(c->flag & 1) ? sqrt(var) : var, 0, 0};
  if (c->flag & 2) o[1] = (red_val){count ? s->f : NAN, 0, 0};
}
static void var_merge(red_state* a, const red_state* b, const red_ctx* c) { welford_merge(a, b->f, b->g, b->i); }
static const red_op op_var = {.init = init_zero, .row = var_row, .col = var_col, .fin = var_fin, .merge = var_merge};

/* linalg_vector_norm: p in ctx; f accumulates sum |x|^p, max |x| or min |x| */
static inline double norm_term(double a, double p) {
  return p == 2 ? a * a : p == 1 ? a : p == 0 ? (a != 0) : pow(a, p);
}
static void init_norm(red_state* s, int64_t n, const red_ctx* c) {
  double v = isinf(c->p) && c->p < 0 ? INFINITY : 0;
  for (int64_t k = 0; k < n; k++) s[k] = (red_state){v, 0, 0, 0};
}
static inline double norm_fold(double acc, double x, double p) {
  double a = fabs(x);
  if (isinf(p)) return isnan(a) || isnan(acc) ? NAN : (p > 0 ? (a > acc ? a : acc) : (a < acc ? a : acc));
  return acc + norm_term(a, p);
}
static void norm_row(red_state* s, const void* x, int64_t n, int64_t idx0, const red_ctx* c) {
  const double* v = x;
  double p = c->p, acc = s->f;
  if (p == 2) for (int64_t k = 0; k < n; k++) acc += v[k] * v[k];
  else for (int64_t k = 0; k < n; k++) acc = norm_fold(acc, v[k], p);
  s->f = acc;
}
static void norm_col(red_state* s, const void* x, int64_t n, int64_t idx, const red_ctx* c) {
  const double* v = x;
  for (int64_t k = 0; k < n; k++) s[k].f = norm_fold(s[k].f, v[k], c->p);
}
static void norm_fin(const red_state* s, int64_t count, const red_ctx* c, red_val* o) {
  double p = c->p, r = s->f;
  if (p == 2) r = sqrt(r);
  else if (p != 1 && p != 0 && !isinf(p)) r = pow(r, 1.0 / p);
  o[0] = (red_val){r, 0, 0};
}
static void norm_merge(red_state* a, const red_state* b, const red_ctx* c) {
  a->f = isinf(c->p) ? norm_fold(a->f, b->f, c->p) : a->f + b->f;
}
/* Dense float32 runs of the 2-norm (op_norm2): squares summed in SUM_LANES double lanes
 * (fixed order, as sum_row_f32; the staged element loop summed in one chain). */
static void norm2_row_f32(red_state* s, const float* v, int64_t n, int64_t idx0, const red_ctx* c) {
  _Alignas(64) double a[SUM_LANES] = {0};
  double t = 0;
  int64_t k = 0;
  for (; k + SUM_LANES <= n; k += SUM_LANES)
    for (int j = 0; j < SUM_LANES; j++) a[j] += (double)v[k + j] * v[k + j];
  for (; k < n; k++) t += (double)v[k] * v[k];
  s->f += sum_lanes(a) + t;
}
static const red_op op_norm = {.init = init_norm, .row = norm_row, .col = norm_col, .fin = norm_fin, .merge = norm_merge};
static const red_op op_norm2 = {.init = init_norm, .row = norm_row, .col = norm_col, .fin = norm_fin, .merge = norm_merge, .row_f32 = norm2_row_f32};
/* The norm op for p: the 2-norm has its float32 row loop. */
static const red_op* norm_op(double p) { return p == 2 ? &op_norm2 : &op_norm; }

/* logsumexp, online: f = running max, g = sum exp(x - f), i = saw NaN */
static void init_lse(red_state* s, int64_t n, const red_ctx* c) {
  for (int64_t k = 0; k < n; k++) s[k] = (red_state){-INFINITY, 0, 0, 0};
}
static inline void lse_fold(red_state* s, double x) {
  if (isnan(x)) s->i = 1;
  else if (x > s->f) {
    s->g = s->g * exp(s->f - x) + 1;
    s->f = x;
  } else if (!isinf(x)) {
    s->g += exp(x - s->f);
  }
}
static void lse_row(red_state* s, const void* x, int64_t n, int64_t idx0, const red_ctx* c) {
  for (int64_t k = 0; k < n; k++) lse_fold(s, ((const double*)x)[k]);
}
static void lse_col(red_state* s, const void* x, int64_t n, int64_t idx, const red_ctx* c) {
  for (int64_t k = 0; k < n; k++) lse_fold(&s[k], ((const double*)x)[k]);
}
static void lse_fin(const red_state* s, int64_t count, const red_ctx* c, red_val* o) {
  double r = s->i ? NAN : isinf(s->f) ? s->f : s->f + log(s->g);
  o[0] = (red_val){r, 0, 0};
}
static const red_op op_lse = {.init = init_lse, .row = lse_row, .col = lse_col, .fin = lse_fin};

/* ---------------------------------------------------------------- complex64 driver */
/* Merge dim d of a float-pair view with its trailing pair dim when d is dense in complex
 * elements (float stride 2): one dim of twice the size, stride 1. */
static int merge_pair(tpurt_tensor* v, int d) {
  int p = v->ndim - 1;
  if (d < 0 || d >= p || v->strides[d] != 2) return 0;
  v->sizes[d] *= 2;
  v->strides[d] = 1;
  for (int e = d + 1; e < p; e++) v->sizes[e] = v->sizes[e + 1], v->strides[e] = v->strides[e + 1];
  v->ndim = p;
  return 1;
}

/* Reduce the float parts of a complex64 input apart into complex64 outputs (sum, var): the
 * pair dim stays kept, merged with the innermost dim when that one is kept and dense in
 * the input and every output (then columns are dense). */
static tpurt_status red_run_parts(const tpurt_tensor* in, uint32_t mask, const tpurt_tensor* outs, int nouts,
                                  const red_op* op, red_ctx* ctx) {
  tpurt_tensor v = tpurt_red_pairs(in), o[TPURT_MAX_OUTS];
  int last = in->ndim - 1, merged = last >= 0 && !(mask >> last & 1) && merge_pair(&v, last);
  for (int k = 0; k < nouts; k++) {
    o[k] = tpurt_red_pairs(&outs[k]);
    merged = merged && merge_pair(&o[k], outs[k].ndim - 1);
  }
  if (!merged) {
    v = tpurt_red_pairs(in);
    for (int k = 0; k < nouts; k++) o[k] = tpurt_red_pairs(&outs[k]);
  }
  return tpurt_red_run(&v, mask, o, nouts, op, ctx);
}

/* Reduce a complex64 input through its float pairs: parts ops (sum, mean) with the
 * innermost dim kept as red_run_parts; everything else runs op->cx over pairs (re at even,
 * im at odd linear index), merged with the innermost dim when that one is reduced and
 * dense (dense row folds). */
static tpurt_status red_run_complex(const tpurt_tensor* in, uint32_t mask, const tpurt_tensor* outs, int nouts,
                                    const red_op* op, red_ctx* ctx) {
  if (in->ndim >= TPURT_MAX_DIMS || !op->cx || outs[0].dtype != TPURT_C64 || nouts != 1)
    return tpurt_fail(TPURT_ERR_UNSUPPORTED, "reduction of complex64 %s into %s not supported",
                      tpurt_shape_str(in), tpurt_dtype_name((tpurt_dtype)outs[0].dtype));
  int last = in->ndim - 1;
  int inner_reduced = last >= 0 && (mask >> last & 1);
  if (op->cx_parts && !inner_reduced) return red_run_parts(in, mask, outs, 1, op, ctx);
  tpurt_tensor v = tpurt_red_pairs(in), o[2];
  int keep = outs[0].ndim == in->ndim;
  if (inner_reduced && merge_pair(&v, last)) {
    o[0] = cx_part(&outs[0], 0, 0);
    o[1] = cx_part(&outs[0], 1, 0);
    return tpurt_red_run(&v, mask, o, 2, op->cx, ctx);
  }
  o[0] = cx_part(&outs[0], 0, keep);
  o[1] = cx_part(&outs[0], 1, keep);
  return tpurt_red_run(&v, mask | 1u << in->ndim, o, 2, op->cx, ctx);
}

/* ---------------------------------------------------------------- kernels */
static const tpurt_value NONE_DIMS = {.kind = TPURT_V_NONE, .scalar_dtype = -1};

static tpurt_status scratch_like(const tpurt_tensor* t, int dt, tpurt_tensor* s);
static int64_t scratch_like_bytes(const tpurt_tensor* t, int dt);

/* CPU reduces (and scans) in the output's dtype: the input is cast to it first, element by
 * element (sum(x, out=int64) is sum(x.long()); sum(x, dtype=float16) sums x.half()). A cast
 * that can change values (to an integer, or to a narrower float) is done here: *conv is the
 * converted input (a temporary). Widening casts are exact and skipped. */
int tpurt_red_casts_input(int in, int out) {
  if (!tpurt_is_float(in) || tpurt_is_complex(out) || in == out) return 0;
  if (!tpurt_is_float(out)) return 1;
  int exact = out == TPURT_F64 || (out == TPURT_F32 && (in == TPURT_F16 || in == TPURT_BF16));
  return !exact;
}
tpurt_status tpurt_red_input_as_out(const tpurt_tensor* in, const tpurt_tensor* out, tpurt_tensor* conv,
                                    const tpurt_tensor** use) {
  *use = in;
  conv->data = NULL;
  if (!tpurt_red_casts_input(in->dtype, out->dtype)) return TPURT_OK;
  tpurt_status s = scratch_like(in, out->dtype, conv);
  if (!s) s = tpurt_copy_tensor(conv, in);
  if (s) return s;
  *use = conv;
  return TPURT_OK;
}
int64_t tpurt_red_input_as_out_bytes(const tpurt_tensor* in, const tpurt_tensor* out) {
  return tpurt_red_casts_input(in->dtype, out->dtype) ? scratch_like_bytes(in, out->dtype) : 0;
}

/* Reduce args[0] over the dims in args[dim_arg] (-1: every dim) into the call's outputs. */
static tpurt_status reduce(const tpurt_op_call* c, int dim_arg, const red_op* op, red_ctx ctx) {
  const tpurt_tensor* in = &TPURT_ARG(c, sum, self)->t;
  uint32_t mask;
  tpurt_status s = tpurt_red_mask(in, dim_arg < 0 ? &NONE_DIMS : &c->args[dim_arg], &c->outs[0], &mask);
  if (s) return s;
  if (in->dtype == TPURT_C64) return red_run_complex(in, mask, c->outs, c->nouts, op, &ctx);
  return tpurt_red_run(in, mask, c->outs, c->nouts, op, &ctx);
}

tpurt_status tpurt_red_call_as_out(const tpurt_op_call* c, int self_arg, const tpurt_op_call** use) {
  tpurt_tensor conv;
  const tpurt_tensor* in;
  *use = c;
  tpurt_status s = tpurt_red_input_as_out(&c->args[self_arg].t, &c->outs[0], &conv, &in);
  if (s || !conv.data) return s;
  tpurt_op_call* view = tpurt_temp(sizeof *view); /* the same call over the converted input */
  if (!view) return TPURT_ERR_OOM;
  memcpy(view, c, sizeof *view);
  view->args[self_arg].t = conv;
  *use = view;
  return TPURT_OK;
}
int64_t tpurt_red_call_as_out_bytes(const tpurt_op_call* c, int self_arg) {
  const tpurt_tensor *in = &c->args[self_arg].t, *out = &c->outs[0];
  return tpurt_red_casts_input(in->dtype, out->dtype)
             ? tpurt_red_input_as_out_bytes(in, out) + tpurt_temp_bytes(sizeof(tpurt_op_call))
             : 0;
}

/* sum / prod / nansum / mean: the input in the output's dtype, as CPU */
static tpurt_status reduce_in_out_dtype(const tpurt_op_call* c, int dim_arg, const red_op* op, red_ctx ctx) {
  const tpurt_op_call* use;
  tpurt_status s = tpurt_red_call_as_out(c, TPURT_ARG_sum_self, &use);
  return s ? s : reduce(use, dim_arg, op, ctx);
}
static tpurt_status plan_in_out_dtype(const tpurt_op_call* c, tpurt_plan* p) {
  p->scratch_bytes += tpurt_red_call_as_out_bytes(c, TPURT_ARG_sum_self);
  return TPURT_OK;
}

/* correction: Scalar? (None means 1) */
static double correction_of(const tpurt_value* v) { return v->kind == TPURT_V_NONE ? 1.0 : tpurt_value_f(v); }

#define RED_LINK(name, dim_arg, op, ...) const red_link tpurt_red_desc_##name = {&op, {__VA_ARGS__}, dim_arg};
/* reduce reads self at sum's index: every line it serves agrees */
#define RED_SELF_AGREES(name) _Static_assert(TPURT_ARG_##name##_self == TPURT_ARG_sum_self, "reduce serves " #name);
#define RED_KERNEL(name, dim_arg, op, ...) \
  RED_LINK(name, dim_arg, op, __VA_ARGS__) \
  RED_SELF_AGREES(name)                    \
  tpurt_status tpurt_kernel_##name(const tpurt_op_call* c) { return reduce(c, dim_arg, &op, (red_ctx){__VA_ARGS__}); }
#define RED_KERNEL_OUT_DTYPE(name, dim_arg, op, ...)                                                       \
  RED_LINK(name, dim_arg, op, __VA_ARGS__)                                                                \
  RED_SELF_AGREES(name)                                                                                   \
  tpurt_status tpurt_kernel_##name(const tpurt_op_call* c) {                                               \
    return reduce_in_out_dtype(c, dim_arg, &op, (red_ctx){__VA_ARGS__});                                   \
  }                                                                                                       \
  tpurt_status tpurt_plan_##name(const tpurt_op_call* c, tpurt_plan* p) { return plan_in_out_dtype(c, p); }

/* sum(self, dtype) / sum.dim_IntList(self, dim, keepdim, dtype) / nansum(self, dim, keepdim, dtype) */
RED_KERNEL_OUT_DTYPE(sum, -1, op_sum, 0)
RED_KERNEL_OUT_DTYPE(sum_dim, TPURT_ARG_sum_dim_dim, op_sum, 0)
RED_KERNEL_OUT_DTYPE(nansum, TPURT_ARG_nansum_dim, op_sum, .flag = 1)
RED_KERNEL_OUT_DTYPE(mean, -1, op_mean, 0)
RED_KERNEL_OUT_DTYPE(mean_dim, TPURT_ARG_mean_dim_dim, op_mean, 0)
RED_KERNEL_OUT_DTYPE(prod, -1, op_prod, 0)
RED_KERNEL_OUT_DTYPE(prod_dim, TPURT_ARG_prod_dim_dim, op_prod, 0)
RED_KERNEL(count_nonzero, TPURT_ARG_count_nonzero_dim, op_count_nonzero, 0)
/* all(self) / all.dim(self, dim, keepdim) / all.dims(self, dim?, keepdim); any likewise */
RED_KERNEL(all, -1, op_all_any, .flag = 0)
RED_KERNEL(all_dim, TPURT_ARG_all_dim_dim, op_all_any, .flag = 0)
RED_KERNEL(any, -1, op_all_any, .flag = 1)
RED_KERNEL(any_dim, TPURT_ARG_any_dim_dim, op_all_any, .flag = 1)
/* amax(self, dim, keepdim), max(self), max.dim(self, dim, keepdim) -> (values, indices),
 * argmax(self, dim?, keepdim) */
RED_KERNEL(amax, TPURT_ARG_amax_dim, op_ext_val, .flag = 0)
RED_KERNEL(amin, TPURT_ARG_amin_dim, op_ext_val, .flag = 1)
RED_KERNEL(max, -1, op_ext_val, .flag = 0)
RED_KERNEL(min, -1, op_ext_val, .flag = 1)
RED_KERNEL(max_dim, TPURT_ARG_max_dim_dim, op_ext_both, .flag = 0)
RED_KERNEL(min_dim, TPURT_ARG_min_dim_dim, op_ext_both, .flag = 1)
RED_KERNEL(argmax, TPURT_ARG_argmax_dim, op_ext_idx, .flag = 0)
RED_KERNEL(argmin, TPURT_ARG_argmin_dim, op_ext_idx, .flag = 1)

/* aminmax(self, *, dim?, keepdim) -> (min, max): two passes of the extreme op */
tpurt_status tpurt_kernel_aminmax(const tpurt_op_call* c) {
  const tpurt_tensor* in = &TPURT_ARG(c, aminmax, self)->t;
  uint32_t mask;
  tpurt_status s = tpurt_red_mask(in, TPURT_ARG(c, aminmax, dim), &c->outs[0], &mask);
  for (int k = 0; k < 2 && !s; k++) {
    red_ctx ctx = {.flag = k == 0};
    s = tpurt_red_run(in, mask, &c->outs[k], 1, &op_ext_val, &ctx);
  }
  return s;
}

/* A dense scratch tensor of t's sizes in dtype dt (a kernel temporary). */
static size_t scratch_like_size(const tpurt_tensor* t, int dt) {
  return (size_t)tpurt_numel(t) * tpurt_dtype_size((tpurt_dtype)dt);
}
static int64_t scratch_like_bytes(const tpurt_tensor* t, int dt) { return tpurt_temp_bytes(scratch_like_size(t, dt)); }
static tpurt_status scratch_like(const tpurt_tensor* t, int dt, tpurt_tensor* s) {
  *s = *t;
  s->dtype = dt;
  int64_t n = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    s->strides[d] = n;
    n *= t->sizes[d];
  }
  s->data = tpurt_temp(scratch_like_size(t, dt));
  return s->data ? TPURT_OK : TPURT_ERR_OOM;
}

/* complex64 var/std as CPU computes them: var(real) + var(imag), each in float32 */
static void cx_add_parts(int64_t n, void* o, const void* const* in, const void* ctx) {
  const tpurt_c64* v = in[0];
  float* r = o;
  for (int64_t i = 0; i < n; i++) r[i] = v[i].re + v[i].im;
}
static void cx_add_parts_sqrt(int64_t n, void* o, const void* const* in, const void* ctx) {
  const tpurt_c64* v = in[0];
  float* r = o;
  for (int64_t i = 0; i < n; i++) r[i] = sqrtf(v[i].re + v[i].im);
}

static tpurt_status var_complex(const tpurt_op_call* c, int flags) {
  const tpurt_tensor* in = &TPURT_ARG(c, var, self)->t;
  uint32_t mask;
  tpurt_tensor parts;
  tpurt_status s = tpurt_red_mask(in, TPURT_ARG(c, var, dim), &c->outs[0], &mask);
  if (s || (s = scratch_like(&c->outs[0], TPURT_C64, &parts))) return s;
  tpurt_tensor o[2] = {parts, c->outs[1]};
  red_ctx ctx = {.p = correction_of(TPURT_ARG(c, var, correction)), .flag = flags & 2};
  s = in->ndim < TPURT_MAX_DIMS ? red_run_parts(in, mask, o, flags & 2 ? 2 : 1, &op_var, &ctx)
                                : tpurt_fail(TPURT_ERR_UNSUPPORTED, "var of a %d-dim complex64 tensor", in->ndim);
  if (!s) s = tpurt_ew_run2(&c->outs[0], TPURT_CT_F32, 1, &parts, TPURT_CT_C64, flags & 1 ? cx_add_parts_sqrt : cx_add_parts, NULL);
  return s;
}

/* var_complex's sums of the parts */
static tpurt_status plan_var(const tpurt_op_call* c, tpurt_plan* p) {
  if (TPURT_ARG(c, var, self)->t.dtype == TPURT_C64) p->scratch_bytes += scratch_like_bytes(&c->outs[0], TPURT_C64);
  return TPURT_OK;
}

/* var.correction(self, dim?, *, correction?, keepdim) and std / var_mean / std_mean */
#define VAR_KERNEL(name, flags) \
  RED_SELF_AGREES(name) \
  _Static_assert(TPURT_ARG_##name##_self == TPURT_ARG_var_self && TPURT_ARG_##name##_dim == TPURT_ARG_var_dim && \
                     TPURT_ARG_##name##_correction == TPURT_ARG_var_correction, \
                 "var_complex serves " #name); \
  tpurt_status tpurt_kernel_##name(const tpurt_op_call* c) { \
    if (TPURT_ARG(c, name, self)->t.dtype == TPURT_C64) return var_complex(c, flags); \
    return reduce(c, TPURT_ARG_##name##_dim, &op_var, (red_ctx){.p = correction_of(TPURT_ARG(c, name, correction)), .flag = flags}); \
  } \
  tpurt_status tpurt_plan_##name(const tpurt_op_call* c, tpurt_plan* p) { return plan_var(c, p); }
VAR_KERNEL(var, 0)
VAR_KERNEL(std, 1)
VAR_KERNEL(var_mean, 2)
VAR_KERNEL(std_mean, 3)

/* Norms of complex64 inputs are norms of |z| (hypot, as std::abs), taken into a scratch. */
static void cx_abs(int64_t n, void* o, const void* const* in, const void* ctx) {
  const tpurt_c64* v = in[0];
  float* r = o;
  for (int64_t i = 0; i < n; i++) r[i] = hypotf(v[i].re, v[i].im);
}

/* norm_run reads self at vector_norm's index; reduce reads it at sum's */
_Static_assert(TPURT_ARG_norm_self == TPURT_ARG_vector_norm_self && TPURT_ARG_norm_dim_self == TPURT_ARG_vector_norm_self &&
                   TPURT_ARG_vector_norm_self == TPURT_ARG_sum_self,
               "norm_run serves linalg_vector_norm, norm and norm.ScalarOpt_dim");
static tpurt_status norm_run(const tpurt_op_call* c, int dim_arg, double p) {
  const tpurt_tensor* in = &TPURT_ARG(c, vector_norm, self)->t;
  red_ctx ctx = {.p = p};
  if (in->dtype != TPURT_C64) return reduce(c, dim_arg, norm_op(p), ctx);
  uint32_t mask;
  tpurt_tensor mag;
  tpurt_status s = tpurt_red_mask(in, dim_arg < 0 ? &NONE_DIMS : &c->args[dim_arg], &c->outs[0], &mask);
  if (s || (s = scratch_like(in, TPURT_F32, &mag))) return s;
  s = tpurt_ew_run2(&mag, TPURT_CT_F32, 1, in, TPURT_CT_C64, cx_abs, NULL);
  if (!s) s = tpurt_red_run(&mag, mask, c->outs, 1, norm_op(p), &ctx);
  return s;
}
static tpurt_status plan_norm(const tpurt_op_call* c, tpurt_plan* p) {
  const tpurt_tensor* in = &TPURT_ARG(c, vector_norm, self)->t;
  if (in->dtype == TPURT_C64) p->scratch_bytes += scratch_like_bytes(in, TPURT_F32);
  return TPURT_OK;
}

/* complex64 logsumexp as CPU: m = amax of the real parts over dims (0 where infinite),
 * then log(sum(exp(z - m))) + m, through scratch tensors */
static void lse_shift_exp(int64_t n, void* o, const void* const* in, const void* ctx) {
  const cx_t *z = in[0], *m = in[1];
  cx_t* r = o;
  for (int64_t i = 0; i < n; i++) r[i] = cexpf(z[i] - m[i]);
}
static void lse_log_add(int64_t n, void* o, const void* const* in, const void* ctx) {
  const cx_t *s = in[0], *m = in[1];
  cx_t* r = o;
  for (int64_t i = 0; i < n; i++) r[i] = clogf(s[i]) + m[i];
}

/* in with the dims in mask reduced to size 1 */
static tpurt_tensor kept_dims(const tpurt_tensor* in, uint32_t mask) {
  tpurt_tensor keep = *in;
  for (int d = 0; d < in->ndim; d++)
    if (mask >> d & 1) keep.sizes[d] = 1;
  return keep;
}

static tpurt_status logsumexp_complex(const tpurt_op_call* c, uint32_t mask) {
  const tpurt_tensor *in = &TPURT_ARG(c, logsumexp, self)->t, *out = &c->outs[0];
  tpurt_tensor keep = kept_dims(in, mask), m, e;
  tpurt_status s = scratch_like(&keep, TPURT_F32, &m);
  if (s) return s;
  if ((s = scratch_like(in, TPURT_C64, &e))) return s;
  tpurt_tensor re = cx_part(in, 0, 0);
  red_ctx ext = {.flag = 0}, sum = {0};
  s = tpurt_red_run(&re, mask, &m, 1, &op_ext_val, &ext);
  float* mf = m.data;
  for (int64_t i = 0, n = tpurt_numel(&m); i < n && !s; i++)
    if (isinf(mf[i])) mf[i] = 0;
  tpurt_tensor zm[2] = {*in, m};
  if (!s) s = tpurt_ew_run(&e, 2, zm, TPURT_CT_C64, lse_shift_exp, NULL);
  if (!s) s = red_run_complex(&e, mask, out, 1, &op_sum, &sum);
  tpurt_tensor sm[2] = {*out, *out}; /* m in out's shape: the kept dims in the same order */
  sm[1].data = m.data;
  sm[1].dtype = TPURT_F32;
  for (int64_t d = out->ndim - 1, st = 1; d >= 0; d--) {
    sm[1].strides[d] = st;
    st *= out->sizes[d];
  }
  if (!s) s = tpurt_ew_run(out, 2, sm, TPURT_CT_C64, lse_log_add, NULL);
  return s;
}

/* logsumexp(self, dim, keepdim) */
tpurt_status tpurt_kernel_logsumexp(const tpurt_op_call* c) {
  const tpurt_tensor* in = &TPURT_ARG(c, logsumexp, self)->t;
  uint32_t mask;
  tpurt_status s = tpurt_red_mask(in, TPURT_ARG(c, logsumexp, dim), &c->outs[0], &mask);
  if (s) return s;
  if (in->dtype == TPURT_C64) return logsumexp_complex(c, mask);
  red_ctx ctx = {0};
  return tpurt_red_run(in, mask, c->outs, c->nouts, &op_lse, &ctx);
}
/* logsumexp_complex's amax of the real parts and its shifted exponentials */
tpurt_status tpurt_plan_logsumexp(const tpurt_op_call* c, tpurt_plan* p) {
  const tpurt_tensor* in = &TPURT_ARG(c, logsumexp, self)->t;
  uint32_t mask;
  if (in->dtype != TPURT_C64) return TPURT_OK;
  tpurt_status s = tpurt_red_mask(in, TPURT_ARG(c, logsumexp, dim), &c->outs[0], &mask);
  if (s) return s;
  tpurt_tensor keep = kept_dims(in, mask);
  p->scratch_bytes += scratch_like_bytes(&keep, TPURT_F32) + scratch_like_bytes(in, TPURT_C64);
  return TPURT_OK;
}

/* linalg_vector_norm(self, ord, dim?, keepdim, *, dtype) */
tpurt_status tpurt_kernel_vector_norm(const tpurt_op_call* c) { return norm_run(c, TPURT_ARG_vector_norm_dim, tpurt_value_f(TPURT_ARG(c, vector_norm, ord))); }
/* norm(self, Scalar? p, [dim, keepdim,] ...): vector_norm with p = None meaning 2 */
static double norm_p(const tpurt_value* v) { return v->kind == TPURT_V_NONE ? 2.0 : tpurt_value_f(v); }
tpurt_status tpurt_kernel_norm(const tpurt_op_call* c) { return norm_run(c, -1, norm_p(TPURT_ARG(c, norm, p))); }
tpurt_status tpurt_kernel_norm_dim(const tpurt_op_call* c) { return norm_run(c, TPURT_ARG_norm_dim_dim, norm_p(TPURT_ARG(c, norm_dim, p))); }
tpurt_status tpurt_plan_vector_norm(const tpurt_op_call* c, tpurt_plan* p) { return plan_norm(c, p); }
tpurt_status tpurt_plan_norm(const tpurt_op_call* c, tpurt_plan* p) { return plan_norm(c, p); }
tpurt_status tpurt_plan_norm_dim(const tpurt_op_call* c, tpurt_plan* p) { return plan_norm(c, p); }

/* renorm(self, p, dim, maxnorm): every slice along dim whose p-norm over the other dims
 * exceeds maxnorm is scaled by maxnorm / (norm + 1e-7). As CPU, the factors are rounded to
 * self's dtype before the multiply. */
#define RENORM_MUL(T)                                                                \
  static void renorm_mul_##T(int64_t n, void* o, const void* const* in, const void* ctx) { \
    const T *x = in[0], *f = in[1];                                                  \
    T* r = o;                                                                        \
    for (int64_t i = 0; i < n; i++) r[i] = x[i] * f[i];                              \
  }
RENORM_MUL(float)
RENORM_MUL(double)

/* renorm's norms and factors, one each per slice along dim */
static size_t renorm_size(int64_t slices) { return sizeof(double) * (size_t)(2 * slices); }

tpurt_status tpurt_kernel_renorm(const tpurt_op_call* c) {
  const tpurt_tensor *in = &TPURT_ARG(c, renorm, self)->t, *out = &c->outs[0];
  double maxnorm = tpurt_value_f(TPURT_ARG(c, renorm, maxnorm));
  int dim;
  tpurt_status s = tpurt_wrap_dim(TPURT_ARG(c, renorm, dim)->i, in->ndim, &dim);
  if (s || tpurt_numel(in) == 0) return s;
  int64_t n = in->sizes[dim];
  double* norm = tpurt_temp(renorm_size(n));
  if (!norm) return TPURT_ERR_OOM;
  tpurt_tensor nt = {.data = norm, .dtype = TPURT_F64, .ndim = in->ndim}, ft;
  for (int d = 0; d < in->ndim; d++) {
    nt.sizes[d] = d == dim ? n : 1;
    nt.strides[d] = d == dim ? 1 : 0;
  }
  ft = nt;
  ft.data = norm + n;
  ft.dtype = in->dtype;
  red_ctx ctx = {.p = tpurt_value_f(TPURT_ARG(c, renorm, p))};
  s = tpurt_red_run(in, ((1u << in->ndim) - 1) & ~(1u << dim), &nt, 1, norm_op(ctx.p), &ctx);
  size_t es = tpurt_dtype_size((tpurt_dtype)in->dtype);
  for (int64_t k = 0; k < n && !s; k++)
    tpurt_store_f64((char*)ft.data + k * (int64_t)es, in->dtype, norm[k] > maxnorm ? maxnorm / (norm[k] + 1e-7) : 1.0);
  tpurt_ctype ct = tpurt_ctype_of(in->dtype);
  tpurt_tensor ins[2] = {*in, ft};
  if (!s) s = tpurt_ew_run(out, 2, ins, ct, ct == TPURT_CT_F64 ? renorm_mul_double : renorm_mul_float, NULL);
  return s;
}

tpurt_status tpurt_plan_renorm(const tpurt_op_call* c, tpurt_plan* p) {
  const tpurt_tensor* in = &TPURT_ARG(c, renorm, self)->t;
  int dim;
  tpurt_status s = tpurt_wrap_dim(TPURT_ARG(c, renorm, dim)->i, in->ndim, &dim);
  if (!s && tpurt_numel(in)) p->scratch_bytes += tpurt_temp_bytes(renorm_size(in->sizes[dim]));
  return s;
}

/* A running double/int64 sum along dim, one line at a time. */
static void cumsum_run(const tpurt_tensor* in, const tpurt_tensor* out, int dim) {
  int nd = in->ndim;
  int64_t len = nd ? in->sizes[dim] : 1, ist = nd ? in->strides[dim] : 0, ost = nd ? out->strides[dim] : 0;
  int64_t sizes[TPURT_MAX_DIMS], idx[TPURT_MAX_DIMS] = {0};
  memcpy(sizes, in->sizes, sizeof sizes);
  if (nd) sizes[dim] = 1;
  int as_int = !tpurt_is_float(in->dtype) && !tpurt_is_float(out->dtype);
  size_t ies = tpurt_dtype_size((tpurt_dtype)in->dtype), oes = tpurt_dtype_size((tpurt_dtype)out->dtype);
  _Alignas(64) int64_t buf[RED_CHUNK];
  do {
    const char* src = (const char*)in->data + in_offset(idx, in->strides, nd) * (int64_t)ies;
    char* dst = (char*)out->data + in_offset(idx, out->strides, nd) * (int64_t)oes;
    double fa = 0;
    int64_t ia = 0;
    for (int64_t j = 0; j < len; j += RED_CHUNK) {
      int64_t n = len - j < RED_CHUNK ? len - j : RED_CHUNK;
      tpurt_red_load(buf, as_int, src + j * ist * (int64_t)ies, ist, in->dtype, n);
      if (as_int) {
        for (int64_t k = 0; k < n; k++) buf[k] = ia = WRAP_ADD(ia, buf[k]);
        for (int64_t k = 0; k < n; k++) tpurt_store_i64(dst + (j + k) * ost * (int64_t)oes, out->dtype, buf[k]);
      } else {
        double* f = (double*)buf;
        for (int64_t k = 0; k < n; k++) f[k] = fa += f[k];
        tpurt_red_store(dst + j * ost * (int64_t)oes, ost, out->dtype, f, n);
      }
    }
  } while (nd && tpurt_next_index(idx, sizes, nd));
}

/* cumsum(self, dim, *, dtype); complex64 sums its real and imaginary parts apart */
tpurt_status tpurt_kernel_cumsum(const tpurt_op_call* c) {
  const tpurt_tensor* in = &TPURT_ARG(c, cumsum, self)->t;
  const tpurt_tensor* out = &c->outs[0];
  int dim;
  tpurt_status s = tpurt_wrap_dim(TPURT_ARG(c, cumsum, dim)->i, in->ndim, &dim);
  if (s || tpurt_numel(in) == 0) return s;
  if (in->dtype != TPURT_C64 && out->dtype != TPURT_C64) {
    tpurt_tensor conv;
    const tpurt_tensor* use;
    s = tpurt_red_input_as_out(in, out, &conv, &use);
    if (!s) cumsum_run(use, out, dim);
    return s;
  }
  if (in->dtype != out->dtype || in->ndim >= TPURT_MAX_DIMS)
    return tpurt_fail(TPURT_ERR_UNSUPPORTED, "cumsum from %s to %s not supported", tpurt_dtype_name((tpurt_dtype)in->dtype),
                      tpurt_dtype_name((tpurt_dtype)out->dtype));
  if (in->ndim == 0) return tpurt_copy_tensor(out, in);
  tpurt_tensor pi = tpurt_red_pairs(in), po = tpurt_red_pairs(out);
  cumsum_run(&pi, &po, dim);
  return TPURT_OK;
}
/* cumsum's input in the output's dtype (tpurt_red_input_as_out) */
tpurt_status tpurt_plan_cumsum(const tpurt_op_call* c, tpurt_plan* p) {
  const tpurt_tensor *in = &TPURT_ARG(c, cumsum, self)->t, *out = &c->outs[0];
  if (tpurt_numel(in)) p->scratch_bytes += tpurt_red_input_as_out_bytes(in, out);
  return TPURT_OK;
}
