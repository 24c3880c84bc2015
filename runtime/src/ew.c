/* The elementwise engine: broadcasting, dtype conversion to a compute type, chunked
 * dense loops. Every elementwise kernel is one chunk function run through here. */
#include <stdlib.h>

#include "internal.h"

#define CHUNK 1024
/* Outputs of at least this many elements are split over the worker pool, in claims of
 * about PAR_GRAIN_ELEMENTS. */
#define PAR_MIN_ELEMENTS (1 << 16)
#define PAR_GRAIN_ELEMENTS (1 << 14)

tpurt_ctype tpurt_ctype_of(int dt) {
  if (dt == TPURT_F64) return TPURT_CT_F64;
  if (dt == TPURT_C64) return TPURT_CT_C64;
  if (tpurt_is_float(dt)) return TPURT_CT_F32;
  return TPURT_CT_I64;
}

/* Float to integer as CPU's casts compile on x86-64 (cvtt*2si): truncation, and the "integer
 * indefinite" (the type's minimum) for NaN and values out of range. The 32-bit conversion
 * serves int32 and every narrower integer, whose bits are its low ones: 1e10 -> int16 is 0
 * on CPU (INT32_MIN's low bits), not 10000000000's low bits. */
static inline int64_t f_to_i64(double v) {
  if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0)) return INT64_MIN;
  return (int64_t)v;
}
static inline int32_t f_to_i32(double v) {
  if (!(v > -2147483649.0 && v < 2147483648.0)) return INT32_MIN;
  return (int32_t)v;
}

/* dst[0..n) (compute type ct, dense) <- src (dtype dt, element stride st) */
static void load(tpurt_ctype ct, void* dst, const char* src, int64_t st, int dt, int64_t n) {
#define LOAD_LOOP(T, CT, EXPR)                                   \
  do {                                                           \
    const T* s = (const T*)src;                                  \
    CT* d = (CT*)dst;                                            \
    for (int64_t i = 0; i < n; i++) { T x = s[i * st]; d[i] = (CT)(EXPR); } \
  } while (0)
#define LOAD_ALL(CT)                                                        \
  switch (dt) {                                                             \
    case TPURT_BOOL: LOAD_LOOP(uint8_t, CT, x != 0); break;                 \
    case TPURT_U8: LOAD_LOOP(uint8_t, CT, x); break;                        \
    case TPURT_I8: LOAD_LOOP(int8_t, CT, x); break;                         \
    case TPURT_I16: LOAD_LOOP(int16_t, CT, x); break;                       \
    case TPURT_I32: LOAD_LOOP(int32_t, CT, x); break;                       \
    case TPURT_I64: LOAD_LOOP(int64_t, CT, x); break;                       \
    case TPURT_F16: LOAD_LOOP(uint16_t, CT, tpurt_f16_to_f32(x)); break;    \
    case TPURT_BF16: LOAD_LOOP(uint16_t, CT, tpurt_bf16_to_f32(x)); break;  \
    case TPURT_F32: LOAD_LOOP(float, CT, x); break;                         \
    case TPURT_F64: LOAD_LOOP(double, CT, x); break;                        \
    case TPURT_C64: LOAD_LOOP(tpurt_c64, CT, x.re); break;                  \
  }
  if (ct == TPURT_CT_C64) {
    tpurt_c64* d = (tpurt_c64*)dst;
    if (dt == TPURT_C64) {
      const tpurt_c64* s = (const tpurt_c64*)src;
      for (int64_t i = 0; i < n; i++) d[i] = s[i * st];
      return;
    }
    /* real parts as f32 into the front of dst, then spread back to front (d[i] lies at or
     * after float i, so nothing is overwritten before it is read) */
    load(TPURT_CT_F32, dst, src, st, dt, n);
    const float* f = (const float*)dst;
    for (int64_t i = n - 1; i >= 0; i--) d[i] = (tpurt_c64){f[i], 0.0f};
    return;
  }
  if (ct == TPURT_CT_F32) { LOAD_ALL(float) }
  else if (ct == TPURT_CT_F64) { LOAD_ALL(double) }
  else {
    switch (dt) {
      case TPURT_F16: LOAD_LOOP(uint16_t, int64_t, f_to_i64(tpurt_f16_to_f32(x))); break;
      case TPURT_BF16: LOAD_LOOP(uint16_t, int64_t, f_to_i64(tpurt_bf16_to_f32(x))); break;
      case TPURT_F32: LOAD_LOOP(float, int64_t, f_to_i64(x)); break;
      case TPURT_F64: LOAD_LOOP(double, int64_t, f_to_i64(x)); break;
      case TPURT_C64: LOAD_LOOP(tpurt_c64, int64_t, f_to_i64(x.re)); break;
      default: LOAD_ALL(int64_t)
    }
  }
#undef LOAD_ALL
}

/* dst (dtype dt, element stride st) <- src[0..n) (compute type ct, dense) */
static void store(tpurt_ctype ct, char* dst, int64_t st, int dt, const void* src, int64_t n) {
#define STORE_LOOP(T, CT, EXPR)                                  \
  do {                                                           \
    const CT* s = (const CT*)src;                                \
    T* d = (T*)dst;                                              \
    for (int64_t i = 0; i < n; i++) { CT x = s[i]; d[i * st] = (T)(EXPR); } \
  } while (0)
#define STORE_INTS(CT, CONV, CONV32)                                     \
  case TPURT_BOOL: STORE_LOOP(uint8_t, CT, x != 0); break;               \
  case TPURT_U8: STORE_LOOP(uint8_t, CT, (uint8_t)CONV32(x)); break;     \
  case TPURT_I8: STORE_LOOP(int8_t, CT, (int8_t)CONV32(x)); break;       \
  case TPURT_I16: STORE_LOOP(int16_t, CT, (int16_t)CONV32(x)); break;    \
  case TPURT_I32: STORE_LOOP(int32_t, CT, (int32_t)CONV32(x)); break;    \
  case TPURT_I64: STORE_LOOP(int64_t, CT, CONV(x)); break;
#define STORE_FLOATS(CT)                                                   \
  case TPURT_F16: STORE_LOOP(uint16_t, CT, tpurt_f32_to_f16((float)x)); break;   \
  case TPURT_BF16: STORE_LOOP(uint16_t, CT, tpurt_f32_to_bf16((float)x)); break; \
  case TPURT_F32: STORE_LOOP(float, CT, x); break;                         \
  case TPURT_F64: STORE_LOOP(double, CT, x); break;                       \
  case TPURT_C64:                                                          \
    for (int64_t i = 0; i < n; i++) ((tpurt_c64*)dst)[i * st] = (tpurt_c64){(float)((const CT*)src)[i], 0.0f}; \
    break;
#define ID(x) (x)
  if (ct == TPURT_CT_C64) {
    const tpurt_c64* s = (const tpurt_c64*)src;
    if (dt == TPURT_C64) {
      for (int64_t i = 0; i < n; i++) ((tpurt_c64*)dst)[i * st] = s[i];
      return;
    }
    /* the real parts (for bool: whether either part is nonzero, as copy_) */
    float re[256];
    for (int64_t b = 0; b < n; b += 256) {
      int64_t m = n - b < 256 ? n - b : 256;
      for (int64_t i = 0; i < m; i++) re[i] = dt == TPURT_BOOL ? s[b + i].re != 0 || s[b + i].im != 0 : s[b + i].re;
      store(TPURT_CT_F32, dst + b * st * (int64_t)tpurt_dtype_size((tpurt_dtype)dt), st, dt, re, m);
    }
  } else if (ct == TPURT_CT_F32) {
    switch (dt) { STORE_INTS(float, f_to_i64, f_to_i32) STORE_FLOATS(float) }
  } else if (ct == TPURT_CT_F64) {
    switch (dt) { STORE_INTS(double, f_to_i64, f_to_i32) STORE_FLOATS(double) }
  } else {
    switch (dt) { STORE_INTS(int64_t, ID, ID) STORE_FLOATS(int64_t) }
  }
#undef ID
}

/* Whether values of compute type tpurt_ctype_of(dt) need rounding to be dt's. */
static int narrower_than_ctype(int dt) {
  return dt != TPURT_F32 && dt != TPURT_F64 && dt != TPURT_I64 && dt != TPURT_C64;
}

/* buf[0..n) (compute type ct) <- the same values rounded to dtype dt and read back */
static void round_through(tpurt_ctype ct, void* buf, int dt, int64_t n) {
  _Alignas(8) char tmp[256 * 8];
  size_t cs = ct == TPURT_CT_F32 ? 4 : 8;
  for (int64_t b = 0; b < n; b += 256) {
    int64_t m = n - b < 256 ? n - b : 256;
    char* p = (char*)buf + b * (int64_t)cs;
    store(ct, tmp, 1, dt, p, m);
    load(ct, p, tmp, 1, dt, m);
  }
}

static int native_of(tpurt_ctype ct, int dt) {
  return (ct == TPURT_CT_F32 && dt == TPURT_F32) || (ct == TPURT_CT_F64 && dt == TPURT_F64) ||
         (ct == TPURT_CT_I64 && dt == TPURT_I64) || (ct == TPURT_CT_C64 && dt == TPURT_C64);
}

/* A collapsed elementwise problem: rows (all dims but the last) x the inner dim, the inner
 * dim cut in chunks of CHUNK; work item r * nchunks + j is chunk j of row r. */
typedef struct ew_plan {
  const tpurt_tensor* out;
  const tpurt_tensor* in;
  int nin;
  tpurt_ctype out_ct, in_ct;
  tpurt_ew_fn fn;
  const void* ctx;
  int m;
  int64_t size[TPURT_MAX_DIMS];
  int64_t st[TPURT_EW_MAX_IN + 1][TPURT_MAX_DIMS];
  int64_t inner, nchunks;
  int via;              /* dtype results and rounded inputs go through, or -1 */
  unsigned via_inputs;  /* bit k: input k is rounded to `via` after loading */
  int via_result;
} ew_plan;

/* Runs work items [b, e) on the calling thread. */
static void ew_items(void* arg, int64_t b, int64_t e) {
  const ew_plan* p = arg;
  const tpurt_tensor* out = p->out;
  int m = p->m, nin = p->nin;
  _Alignas(64) char bufs[TPURT_EW_MAX_IN + 1][CHUNK * 8];
  int64_t loaded_row[TPURT_EW_MAX_IN], loaded_n[TPURT_EW_MAX_IN];
  for (int k = 0; k < nin; k++) loaded_row[k] = -1, loaded_n[k] = 0;
  /* per operand (0 = out, k + 1 = input k): element size, byte strides, and whether its
   * chunks are used in place (unit stride, native type, no rounding) */
  int64_t es[TPURT_EW_MAX_IN + 1], bst[TPURT_EW_MAX_IN + 1][TPURT_MAX_DIMS];
  int direct[TPURT_EW_MAX_IN + 1];
  for (int k = 0; k <= nin; k++) {
    const tpurt_tensor* t = k ? &p->in[k - 1] : out;
    es[k] = (int64_t)tpurt_dtype_size((tpurt_dtype)t->dtype);
    for (int d = 0; d < m; d++) bst[k][d] = p->st[k][d] * es[k];
    direct[k] = p->st[k][m - 1] == 1 &&
                (k ? native_of(p->in_ct, t->dtype) && !((p->via_inputs >> (k - 1)) & 1)
                   : native_of(p->out_ct, t->dtype) && !p->via_result);
  }
  int64_t row = b / p->nchunks, jc = b % p->nchunks;
  /* The row's index is divided out once; later rows step it like an odometer (a division per
   * dim per row cost more than copying a 64-element row). */
  int64_t idx[TPURT_MAX_DIMS], off[TPURT_EW_MAX_IN + 1];
  for (int64_t d = m - 2, r = row; d >= 0; d--) {
    idx[d] = r % p->size[d];
    r /= p->size[d];
  }
  for (int k = 0; k <= nin; k++) {
    off[k] = 0;
    for (int d = 0; d < m - 1; d++) off[k] += idx[d] * bst[k][d];
  }
  int all_direct = 1;
  for (int k = 0; k <= nin; k++) all_direct &= direct[k];
  if (all_direct && p->nchunks == 1 && m >= 2) {
    /* rows that fit one chunk, every operand in place: a plain two-level loop (the common
     * strided case: a transposed or sliced operand; per-row bookkeeping was half the time of
     * copying a 64-element row) */
    const void* ins[TPURT_EW_MAX_IN];
    while (b < e) {
      int64_t run = p->size[m - 2] - idx[m - 2];
      if (run > e - b) run = e - b;
      for (int64_t r = 0; r < run; r++) {
        for (int k = 0; k < nin; k++) ins[k] = (const char*)p->in[k].data + off[k + 1] + r * bst[k + 1][m - 2];
        p->fn(p->inner, (char*)out->data + off[0] + r * bst[0][m - 2], ins, p->ctx);
      }
      b += run;
      idx[m - 2] += run - 1; /* at the run's last row, then one step on (carrying) */
      for (int k = 0; k <= nin; k++) off[k] += (run - 1) * bst[k][m - 2];
      tpurt_next_index_offsets(idx, p->size, m - 1, nin + 1, bst[0], off);
    }
    return;
  }
  while (b < e) {
    for (; jc < p->nchunks && b < e; jc++, b++) {
      int64_t j = jc * CHUNK;
      int64_t n = p->inner - j < CHUNK ? p->inner - j : CHUNK;
      const void* ins[TPURT_EW_MAX_IN];
      for (int k = 0; k < nin; k++) {
        const char* ptr = (const char*)p->in[k].data + off[k + 1] + j * bst[k + 1][m - 1];
        if (direct[k + 1]) {
          ins[k] = ptr;
          continue;
        }
        /* a broadcast operand is loaded once per row (the longest chunk it needs) */
        int64_t s = p->st[k + 1][m - 1];
        if (s != 0 || loaded_row[k] != row || loaded_n[k] < n) {
          int64_t ln = s == 0 ? (p->inner < CHUNK ? p->inner : CHUNK) : n;
          load(p->in_ct, bufs[k + 1], ptr, s, p->in[k].dtype, ln);
          if ((p->via_inputs >> k) & 1) round_through(p->in_ct, bufs[k + 1], p->via, ln);
          loaded_row[k] = row;
          loaded_n[k] = ln;
        }
        ins[k] = bufs[k + 1];
      }
      char* op = (char*)out->data + off[0] + j * bst[0][m - 1];
      if (direct[0]) {
        p->fn(n, op, ins, p->ctx);
      } else {
        p->fn(n, bufs[0], ins, p->ctx);
        if (p->via_result) round_through(p->out_ct, bufs[0], p->via, n);
        store(p->out_ct, op, p->st[0][m - 1], out->dtype, bufs[0], n);
      }
    }
    row++;
    jc = 0;
    tpurt_next_index_offsets(idx, p->size, m - 1, nin + 1, bst[0], off);
  }
}

tpurt_status tpurt_ew_run2(const tpurt_tensor* out, tpurt_ctype out_ct, int nin, const tpurt_tensor* in,
                           tpurt_ctype in_ct, tpurt_ew_fn fn, const void* ctx) {
  return tpurt_ew_run_via(out, out_ct, nin, in, in_ct, NULL, fn, ctx);
}

tpurt_status tpurt_ew_run_via(const tpurt_tensor* out, tpurt_ctype out_ct, int nin, const tpurt_tensor* in,
                              tpurt_ctype in_ct, const tpurt_ew_via* via, tpurt_ew_fn fn, const void* ctx) {
  if (nin > TPURT_EW_MAX_IN) return tpurt_fail(TPURT_ERR_UNSUPPORTED, "elementwise op with %d inputs", nin);
  int nd = out->ndim;
  int64_t size[TPURT_MAX_DIMS];
  int64_t st[TPURT_EW_MAX_IN + 1][TPURT_MAX_DIMS];
  for (int d = 0; d < nd; d++) {
    size[d] = out->sizes[d];
    st[0][d] = out->strides[d];
  }
  for (int k = 0; k < nin; k++) {
    const tpurt_tensor* t = &in[k];
    if (t->ndim > nd) return tpurt_fail(TPURT_ERR_VALUE, "input %s has more dims than output %s",
                                        tpurt_shape_str(t), tpurt_shape_str(out));
    for (int d = 0; d < nd; d++) {
      int td = d - (nd - t->ndim);
      if (td < 0 || t->sizes[td] == 1) st[k + 1][d] = 0;
      else if (t->sizes[td] == out->sizes[d]) st[k + 1][d] = t->strides[td];
      else
        return tpurt_fail(TPURT_ERR_VALUE, "shape %s does not broadcast to %s", tpurt_shape_str(t),
                          tpurt_shape_str(out));
    }
  }
  int nops = nin + 1;
  for (int d = 0; d < nd; d++)
    if (size[d] == 0) return TPURT_OK;
  int64_t* stp[TPURT_EW_MAX_IN + 1] = {0};
  for (int k = 0; k < nops; k++) stp[k] = st[k];
  int m = tpurt_merge_dims(nd, size, nops, stp);
  if (m == 0) {
    size[0] = 1;
    for (int k = 0; k < nops; k++) st[k][0] = 0;
    m = 1;
  }
  ew_plan p = {out, in, nin, out_ct, in_ct, fn, ctx, m, {0}, {{0}}, size[m - 1], (size[m - 1] + CHUNK - 1) / CHUNK,
               -1, 0, 0};
  if (via && via->dtype >= 0 && narrower_than_ctype(via->dtype)) {
    p.via = via->dtype;
    for (int k = 0; k < nin; k++)
      if (((via->inputs >> k) & 1) && in[k].dtype != via->dtype) p.via_inputs |= 1u << k;
    p.via_result = via->result && out->dtype != via->dtype;
  }
  memcpy(p.size, size, sizeof size);
  memcpy(p.st, st, sizeof st);
  int64_t rows = 1;
  int sink = 0;
  for (int d = 0; d < m - 1; d++) rows *= size[d];
  for (int d = 0; d < m; d++) sink |= size[d] > 1 && st[0][d] == 0;
  /* Large outputs are split over the pool; a stride-0 output is a sink some chunk
   * functions fold state into (through ctx), so those stay on one thread, in order. */
  int64_t items = rows * p.nchunks, per_item = p.inner < CHUNK ? p.inner : CHUNK;
  if (!sink && rows * p.inner >= PAR_MIN_ELEMENTS)
    tpurt_parallel_for(items, (PAR_GRAIN_ELEMENTS + per_item - 1) / per_item, ew_items, &p);
  else
    ew_items(&p, 0, items);
  return TPURT_OK;
}

tpurt_status tpurt_ew_run(const tpurt_tensor* out, int nin, const tpurt_tensor* in, tpurt_ctype ct,
                          tpurt_ew_fn fn, const void* ctx) {
  return tpurt_ew_run2(out, ct, nin, in, ct, fn, ctx);
}

/* ---------------------------------------------------------------- copy */
static void copy_f32(int64_t n, void* o, const void* const* in, const void* ctx) {
  (void)ctx;
  memcpy(o, in[0], (size_t)n * 4);
}
static void copy_f64(int64_t n, void* o, const void* const* in, const void* ctx) {
  (void)ctx;
  memcpy(o, in[0], (size_t)n * 8);
}

/* complex to bool is "re != 0 or im != 0", not the real part's truth */
static void nonzero_c64(int64_t n, void* o, const void* const* in, const void* ctx) {
  (void)ctx;
  const float *re = in[0], *im = in[1];
  float* r = o;
  for (int64_t i = 0; i < n; i++) r[i] = re[i] != 0 || im[i] != 0;
}

tpurt_status tpurt_copy_tensor(const tpurt_tensor* dst, const tpurt_tensor* src) {
  int64_t n = tpurt_numel(dst);
  size_t es = tpurt_dtype_size((tpurt_dtype)dst->dtype);
  tpurt_metrics_count_copy(2, n * (int64_t)es);
  if (dst->dtype == src->dtype && tpurt_is_contiguous(dst) && tpurt_is_contiguous(src) &&
      tpurt_numel(src) == n) {
    if (n && dst->data != src->data) memmove(dst->data, src->data, (size_t)n * es);
    return TPURT_OK;
  }
  if (dst->dtype != src->dtype && (dst->dtype == TPURT_C64 || src->dtype == TPURT_C64)) {
    if (src->dtype == TPURT_C64) {
      tpurt_tensor parts[2] = {tpurt_c64_part(src, 0), tpurt_c64_part(src, 1)};
      if (dst->dtype == TPURT_BOOL) return tpurt_ew_run(dst, 2, parts, TPURT_CT_F32, nonzero_c64, NULL);
      return tpurt_copy_tensor(dst, &parts[0]);
    }
    tpurt_tensor re = tpurt_c64_part(dst, 0), im = tpurt_c64_part(dst, 1);
    tpurt_status s = tpurt_copy_tensor(&re, src);
    tpurt_value zero = {.kind = TPURT_V_INT, .scalar_dtype = -1, .i = 0};
    int64_t st[1];
    tpurt_tensor z = tpurt_scalar_tensor(&zero, st);
    return s ? s : tpurt_copy_tensor(&im, &z);
  }
  /* float32 to float32 as float32: dense runs are then copied in place, without staging
   * through a wider type (f32 loads and stores are bit exact) */
  if (dst->dtype == TPURT_F32 && src->dtype == TPURT_F32) return tpurt_ew_run(dst, 1, src, TPURT_CT_F32, copy_f32, NULL);
  /* Same-width bit copies go through an integer compute type so bf16/f16 (and the float
   * pairs of complex64) stay bit exact. */
  if (dst->dtype == src->dtype && (es == 2 || es == 1 || es == 4 || dst->dtype == TPURT_C64)) {
    tpurt_tensor d = *dst, s = *src;
    int as = es == 1 ? TPURT_U8 : es == 2 ? TPURT_I16 : es == 4 ? TPURT_I32 : TPURT_I64;
    if (dst->dtype != TPURT_BOOL) d.dtype = s.dtype = as;
    return tpurt_ew_run(&d, 1, &s, TPURT_CT_I64, copy_f64, NULL);
  }
  tpurt_ctype ct = tpurt_ctype_of(src->dtype);
  if (tpurt_is_float(src->dtype) && dst->dtype == TPURT_F64) ct = TPURT_CT_F64;
  if (ct == TPURT_CT_I64 && tpurt_is_float(dst->dtype) && dst->dtype != TPURT_F64) ct = TPURT_CT_F64;
  return tpurt_ew_run(dst, 1, src, ct, ct == TPURT_CT_F32 ? copy_f32 : copy_f64, NULL);
}

/* ---------------------------------------------------------------- scalars */
tpurt_tensor tpurt_scalar_tensor(const tpurt_value* v, void* storage) {
  tpurt_tensor t;
  memset(&t, 0, sizeof t);
  t.data = storage;
  if (v->kind == TPURT_V_FLOAT) {
    t.dtype = TPURT_F64;
    memcpy(storage, &v->f, 8);
  } else if (v->kind == TPURT_V_COMPLEX) {
    tpurt_c64 c = {(float)v->c[0], (float)v->c[1]};
    t.dtype = TPURT_C64;
    memcpy(storage, &c, 8);
  } else if (v->kind == TPURT_V_TENSOR) {
    return v->t;
  } else {
    t.dtype = TPURT_I64;
    memcpy(storage, &v->i, 8);
  }
  return t;
}

double tpurt_value_f(const tpurt_value* v) {
  if (v->kind == TPURT_V_FLOAT) return v->f;
  if (v->kind == TPURT_V_COMPLEX) return v->c[0];
  if (v->kind == TPURT_V_INT || v->kind == TPURT_V_BOOL) return (double)v->i;
  if (v->kind == TPURT_V_TENSOR) return tpurt_load_f64(v->t.data, v->t.dtype);
  return 0;
}

int64_t tpurt_value_i(const tpurt_value* v) {
  if (v->kind == TPURT_V_FLOAT) return f_to_i64(v->f);
  if (v->kind == TPURT_V_COMPLEX) return f_to_i64(v->c[0]);
  if (v->kind == TPURT_V_INT || v->kind == TPURT_V_BOOL) return v->i;
  if (v->kind == TPURT_V_TENSOR) return tpurt_load_i64(v->t.data, v->t.dtype);
  return 0;
}

double tpurt_load_f64(const void* p, int dt) {
  double d = 0;
  load(TPURT_CT_F64, &d, p, 0, dt, 1);
  return d;
}
int64_t tpurt_load_i64(const void* p, int dt) {
  int64_t v = 0;
  load(TPURT_CT_I64, &v, p, 0, dt, 1);
  return v;
}
void tpurt_store_f64(void* p, int dt, double v) { store(TPURT_CT_F64, p, 0, dt, &v, 1); }
void tpurt_store_i64(void* p, int dt, int64_t v) { store(TPURT_CT_I64, p, 0, dt, &v, 1); }

tpurt_status tpurt_check_scalar_fits(const tpurt_value* v, int dt) {
  if (v->kind != TPURT_V_COMPLEX || dt == TPURT_C64 || v->c[1] == 0) return TPURT_OK;
  return tpurt_fail(TPURT_ERR_RUNTIME, "value cannot be converted to type %s without overflow",
                    tpurt_dtype_name((tpurt_dtype)dt));
}

tpurt_c64 tpurt_load_c64(const void* p, int dt) {
  tpurt_c64 v = {0, 0};
  if (dt == TPURT_C64) memcpy(&v, p, sizeof v);
  else if (tpurt_is_float(dt)) v.re = (float)tpurt_load_f64(p, dt);
  else v.re = (float)tpurt_load_i64(p, dt);
  return v;
}

void tpurt_convert_elem(void* dst, int dt, const void* src, int src_dt) {
  if (dt == src_dt) {
    memcpy(dst, src, tpurt_dtype_size((tpurt_dtype)dt));
  } else if (dt == TPURT_C64) {
    tpurt_c64 v = tpurt_load_c64(src, src_dt);
    memcpy(dst, &v, sizeof v);
  } else if (src_dt == TPURT_C64) {
    tpurt_c64 v = tpurt_load_c64(src, src_dt);
    if (dt == TPURT_BOOL) *(uint8_t*)dst = v.re != 0 || v.im != 0;
    else tpurt_store_f64(dst, dt, v.re);
  } else if (tpurt_is_float(dt)) {
    tpurt_store_f64(dst, dt, tpurt_load_f64(src, src_dt));
  } else {
    tpurt_store_i64(dst, dt, tpurt_load_i64(src, src_dt));
  }
}

/* ---------------------------------------------------------------- type promotion */
int tpurt_promote_types(int a, int b) {
  if (a < 0) return b;
  if (b < 0 || a == b) return a;
  if (a == TPURT_BOOL) return b;
  if (b == TPURT_BOOL) return a;
  /* complex64 is the one complex dtype (with float64 c10 gives complex128, which the
   * runtime does not hold: such outputs never reach a kernel) */
  if (tpurt_is_complex(a) || tpurt_is_complex(b)) return TPURT_C64;
  int fa = tpurt_is_float(a), fb = tpurt_is_float(b);
  if (fa && !fb) return a;
  if (fb && !fa) return b;
  if (fa && fb) {
    if ((a == TPURT_F16 && b == TPURT_BF16) || (a == TPURT_BF16 && b == TPURT_F16)) return TPURT_F32;
    return tpurt_dtype_size((tpurt_dtype)a) >= tpurt_dtype_size((tpurt_dtype)b) ? a : b;
  }
  /* integers: uint8 with a signed type needs the next wider signed type */
  if (a == TPURT_U8 || b == TPURT_U8) {
    int other = a == TPURT_U8 ? b : a;
    return other == TPURT_I8 ? TPURT_I16 : other;
  }
  return tpurt_dtype_size((tpurt_dtype)a) >= tpurt_dtype_size((tpurt_dtype)b) ? a : b;
}

void tpurt_promo_init(tpurt_promo* p) { p->dim_result = p->zero_result = p->wrapped_result = -1; }

void tpurt_promo_add_tensor(tpurt_promo* p, const tpurt_tensor* t) {
  if (t->ndim > 0) p->dim_result = tpurt_promote_types(p->dim_result, t->dtype);
  else p->zero_result = tpurt_promote_types(p->zero_result, t->dtype);
}

void tpurt_promo_add_value(tpurt_promo* p, const tpurt_value* v) {
  if (v->kind == TPURT_V_TENSOR) {
    tpurt_promo_add_tensor(p, &v->t);
    return;
  }
  int dt;
  if (v->kind == TPURT_V_FLOAT) dt = TPURT_F32; /* Python floats take the default dtype */
  else if (v->kind == TPURT_V_COMPLEX) dt = TPURT_C64;
  else if (v->kind == TPURT_V_INT) dt = TPURT_I64;
  else if (v->kind == TPURT_V_BOOL) dt = TPURT_BOOL;
  else return;
  if (v->scalar_dtype >= 0 && !v->wrapped) {
    p->zero_result = tpurt_promote_types(p->zero_result, v->scalar_dtype);
    return;
  }
  if (v->scalar_dtype >= 0 && tpurt_is_float(v->scalar_dtype)) dt = TPURT_F32;
  p->wrapped_result = tpurt_promote_types(p->wrapped_result, dt);
}

/* bool < integers < floats < complex */
static int category(int dt) {
  return dt < 0 ? -1 : dt == TPURT_BOOL ? 0 : tpurt_is_complex(dt) ? 3 : tpurt_is_float(dt) ? 2 : 1;
}

/* A lower-priority operand only matters when its category is higher. */
static int combine(int higher, int lower) {
  if (category(lower) > category(higher)) return tpurt_promote_types(higher, lower);
  return higher >= 0 ? higher : lower;
}

int tpurt_promo_result(const tpurt_promo* p) {
  return combine(p->dim_result, combine(p->zero_result, p->wrapped_result));
}

/* ---------------------------------------------------------------- Philox 4x32-10 */
void tpurt_philox(uint64_t seed, uint64_t counter, uint32_t out[4]) {
  uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int r = 0; r < 10; r++) {
    tpurt_philox_round(&c0, &c1, &c2, &c3, k0, k1);
    k0 += TPURT_PHILOX_W0;
    k1 += TPURT_PHILOX_W1;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}
