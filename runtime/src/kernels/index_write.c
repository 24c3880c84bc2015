/* Kernels that place or pick elements by an index or mask: index_fill, index_reduce,
 * take / put_, masked_scatter, channel_shuffle, max_unpool2d/3d. out = self first where the op
 * updates; every index is validated before anything is written, as in index.c. */
#include <stdio.h>
#include <stdlib.h>

#include "../internal.h"
#include "f32_sums.h"

static size_t esize(const tpurt_tensor* t) { return tpurt_dtype_size((tpurt_dtype)t->dtype); }
static char* at(const tpurt_tensor* t, int64_t off) { return (char*)t->data + off * (int64_t)esize(t); }
static int64_t offset_of(const tpurt_tensor* t, const int64_t* idx) {
  int64_t off = 0;
  for (int d = 0; d < t->ndim; d++) off += idx[d] * t->strides[d];
  return off;
}
/* Element k of a 1-D (or 0-dim) index tensor. */
static int64_t index_at(const tpurt_tensor* ix, int64_t k) {
  return tpurt_load_i64(at(ix, ix->ndim ? k * ix->strides[0] : 0), ix->dtype);
}
/* Offset of flat (row-major) position k of t. */
static int64_t flat_offset(const tpurt_tensor* t, int64_t k) {
  int64_t off = 0;
  for (int d = t->ndim - 1; d >= 0; d--) off += (k % t->sizes[d]) * t->strides[d], k /= t->sizes[d];
  return off;
}
static int64_t wrap_dim(int64_t d, int ndim) { return d < 0 ? d + (ndim > 0 ? ndim : 1) : d; }

/* ---------------------------------------------------------------- index_fill */
tpurt_status tpurt_kernel_index_fill(const tpurt_op_call* c) {
  /* index_fill(self, dim, index, value): out = self; out[..., index[k], ...] = value
   * (negative indices count from the end) */
  const tpurt_tensor* out = &c->outs[0];
  const tpurt_tensor* ix = &TPURT_ARG(c, index_fill, index)->t;
  int64_t dim = wrap_dim(TPURT_ARG(c, index_fill, dim)->i, out->ndim), n = tpurt_numel(ix);
  int64_t size = out->ndim ? out->sizes[dim] : 1;
  if (TPURT_ARG(c, index_fill, value)->kind == TPURT_V_COMPLEX && out->dtype != TPURT_C64)
    return tpurt_fail(TPURT_ERR_RUNTIME, "index_fill_(): Converting complex Scalar to non-complex type is not supported");
  for (int64_t k = 0; k < n; k++) {
    int64_t v = index_at(ix, k);
    if (v < -size || v >= size)
      return tpurt_fail(TPURT_ERR_INDEX, "index %lld is out of bounds for dimension %lld with size %lld", (long long)v,
                        (long long)dim, (long long)size);
  }
  tpurt_status s = tpurt_copy_tensor(out, &TPURT_ARG(c, index_fill, self)->t);
  if (s || tpurt_numel(out) == 0) return s;
  char storage[8], val[8];
  tpurt_tensor v = TPURT_ARG(c, index_fill, value)->kind == TPURT_V_TENSOR ? TPURT_ARG(c, index_fill, value)->t : tpurt_scalar_tensor(TPURT_ARG(c, index_fill, value), storage);
  tpurt_convert_elem(val, out->dtype, v.data, v.dtype);
  /* a slice of out at index value along dim, walked over its other dims */
  tpurt_tensor slice = *out;
  if (out->ndim) slice.sizes[dim] = 1;
  size_t es = esize(out);
  for (int64_t k = 0; k < n; k++) {
    int64_t p = index_at(ix, k);
    p = p < 0 ? p + size : p;
    int64_t i[TPURT_MAX_DIMS] = {0};
    do {
      if (out->ndim) i[dim] = p;
      memcpy(at(out, offset_of(out, i)), val, es);
      if (out->ndim) i[dim] = 0;
    } while (tpurt_next_index(i, slice.sizes, slice.ndim));
  }
  return TPURT_OK;
}

/* ---------------------------------------------------------------- index_copy */
tpurt_status tpurt_kernel_index_copy(const tpurt_op_call* c) {
  /* index_copy(self, dim, index, source): out = self; out[..., index[k], ...] =
   * source[..., k, ...], a repeated index keeping the last copy as CPU's loop does */
  const tpurt_tensor *out = &c->outs[0], *ix = &TPURT_ARG(c, index_copy, index)->t, *src = &TPURT_ARG(c, index_copy, source)->t;
  int64_t dim = wrap_dim(TPURT_ARG(c, index_copy, dim)->i, out->ndim), n = tpurt_numel(ix);
  int64_t size = out->ndim ? out->sizes[dim] : 1;
  for (int64_t k = 0; k < n; k++) {
    int64_t v = index_at(ix, k);
    if (v < 0 || v >= size)
      return tpurt_fail(TPURT_ERR_INDEX, "index_copy_(): index %lld is out of bounds for dimension %lld with size %lld",
                        (long long)v, (long long)dim, (long long)size);
  }
  tpurt_status s = tpurt_copy_tensor(out, &TPURT_ARG(c, index_copy, self)->t);
  if (s || tpurt_numel(src) == 0) return s;
  size_t es = esize(out);
  int64_t i[TPURT_MAX_DIMS] = {0};
  do {
    int64_t dst[TPURT_MAX_DIMS];
    memcpy(dst, i, sizeof dst);
    if (out->ndim) dst[dim] = index_at(ix, src->ndim ? i[dim] : 0);
    memcpy(at(out, offset_of(out, dst)), at(src, offset_of(src, i)), es);
  } while (tpurt_next_index(i, src->sizes, src->ndim));
  return TPURT_OK;
}

/* ---------------------------------------------------------------- index_reduce */
typedef enum { IR_PROD, IR_MEAN, IR_AMAX, IR_AMIN } ir_op;

static double ir_combine_f(ir_op r, double a, double b) {
  switch (r) {
    case IR_PROD: return a * b;
    case IR_MEAN: return a + b;
    case IR_AMAX: return isnan(a) || a >= b ? a : b;
    default: return isnan(a) || a <= b ? a : b;
  }
}
static int64_t ir_combine_i(ir_op r, int64_t a, int64_t b) {
  switch (r) {
    case IR_PROD: return (int64_t)((uint64_t)a * (uint64_t)b);
    case IR_MEAN: return (int64_t)((uint64_t)a + (uint64_t)b);
    case IR_AMAX: return a >= b ? a : b;
    default: return a <= b ? a : b;
  }
}

/* index_reduce accumulates in a dense f64 / i64 copy of out, with a count and a flag (taken
 * from source yet) per element. */
typedef union { double f; int64_t i; } ir_acc;
static int64_t index_reduce_bytes(int64_t total) {
  if (total == 0) return 0;
  return tpurt_temp_bytes((size_t)total * sizeof(ir_acc)) + tpurt_temp_bytes((size_t)total * sizeof(int64_t)) +
         tpurt_temp_bytes((size_t)total);
}

tpurt_status tpurt_kernel_index_reduce(const tpurt_op_call* c) {
  /* index_reduce(self, dim, index, source, reduce, *, include_self): out = self;
   * out[..., index[k], ...] (reduce)= source[..., k, ...]; without include_self the indexed
   * slots start from the reduction's identity. mean divides by the count (floor for ints). */
  const tpurt_tensor* out = &c->outs[0];
  const tpurt_tensor *ix = &TPURT_ARG(c, index_reduce, index)->t, *src = &TPURT_ARG(c, index_reduce, source)->t;
  const char* rs = TPURT_ARG(c, index_reduce, reduce)->s;
  int include_self = TPURT_ARG(c, index_reduce, include_self)->i != 0;
  ir_op r = strcmp(rs, "prod") == 0 ? IR_PROD : strcmp(rs, "mean") == 0 ? IR_MEAN
          : strcmp(rs, "amax") == 0 ? IR_AMAX : strcmp(rs, "amin") == 0 ? IR_AMIN : -1;
  if ((int)r < 0)
    return tpurt_fail(TPURT_ERR_RUNTIME, "index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got %s.", rs);
  int64_t dim = wrap_dim(TPURT_ARG(c, index_reduce, dim)->i, out->ndim), n = tpurt_numel(ix);
  int64_t size = out->ndim ? out->sizes[dim] : 1;
  for (int64_t k = 0; k < n; k++) {
    int64_t v = index_at(ix, k);
    if (v < 0 || v >= size) return tpurt_fail(TPURT_ERR_INDEX, "index out of range in self");
  }
  int64_t total = tpurt_numel(out);
  tpurt_status s = tpurt_copy_tensor(out, &TPURT_ARG(c, index_reduce, self)->t);
  if (s || total == 0) return s;
  int fl = tpurt_is_float(out->dtype);
  ir_acc* acc = tpurt_temp((size_t)total * sizeof *acc);
  int64_t* cnt = tpurt_temp_calloc((size_t)total, sizeof *cnt);
  char* touched = tpurt_temp_calloc((size_t)total, 1);
  if (!acc || !cnt || !touched) {
    tpurt_temp_release(acc), tpurt_temp_release(cnt), tpurt_temp_release(touched);
    return TPURT_ERR_OOM;
  }
  tpurt_tensor dense = *out; /* row-major positions of out */
  int64_t st = 1;
  for (int d = out->ndim - 1; d >= 0; d--) dense.strides[d] = st, st *= out->sizes[d];
  int64_t i[TPURT_MAX_DIMS] = {0};
  do {
    int64_t p = offset_of(&dense, i);
    const char* e = at(out, offset_of(out, i));
    if (fl) acc[p].f = tpurt_load_f64(e, out->dtype);
    else acc[p].i = tpurt_load_i64(e, out->dtype);
    cnt[p] = include_self;
  } while (tpurt_next_index(i, out->sizes, out->ndim));
  if (tpurt_numel(src)) {
    memset(i, 0, sizeof i);
    do {
      int64_t dst[TPURT_MAX_DIMS];
      memcpy(dst, i, sizeof dst);
      if (out->ndim) dst[dim] = index_at(ix, i[dim]);
      int64_t p = offset_of(&dense, dst);
      const char* e = at(src, offset_of(src, i));
      if (!include_self && !touched[p]) {
        touched[p] = 1;
        if (fl) acc[p].f = tpurt_load_f64(e, src->dtype);
        else acc[p].i = tpurt_load_i64(e, src->dtype);
      } else if (fl) {
        acc[p].f = ir_combine_f(r, acc[p].f, tpurt_load_f64(e, src->dtype));
      } else {
        acc[p].i = ir_combine_i(r, acc[p].i, tpurt_load_i64(e, src->dtype));
      }
      cnt[p]++;
    } while (tpurt_next_index(i, src->sizes, src->ndim));
  }
  memset(i, 0, sizeof i);
  do {
    int64_t p = offset_of(&dense, i);
    char* e = at(out, offset_of(out, i));
    if (r == IR_MEAN && cnt[p] > 1) {
      if (fl) acc[p].f /= (double)cnt[p];
      else acc[p].i = acc[p].i / cnt[p] - ((acc[p].i % cnt[p] != 0) && ((acc[p].i < 0) != (cnt[p] < 0)));
    }
    if (fl) tpurt_store_f64(e, out->dtype, acc[p].f);
    else tpurt_store_i64(e, out->dtype, acc[p].i);
  } while (tpurt_next_index(i, out->sizes, out->ndim));
  tpurt_temp_release(acc), tpurt_temp_release(cnt), tpurt_temp_release(touched);
  return TPURT_OK;
}
tpurt_status tpurt_plan_index_reduce(const tpurt_op_call* c, tpurt_plan* p) {
  p->scratch_bytes += index_reduce_bytes(tpurt_numel(&c->outs[0]));
  return TPURT_OK;
}

/* ---------------------------------------------------------------- scatter_reduce */
typedef enum { SRD_SUM, SRD_PROD, SRD_MEAN, SRD_AMAX, SRD_AMIN } srd_op;
static const char* const SRD_NAMES[] = {"sum", "prod", "mean", "amax", "amin"};
/* The srd_op named by scatter_reduce's reduce argument; 5 when it names none. */
static int srd_of(const tpurt_op_call* c) {
  int r = 0;
  while (r < 5 && strcmp(TPURT_ARG(c, scatter_reduce, reduce)->s, SRD_NAMES[r])) r++;
  return r;
}

/* *d (op)= *s in d's dtype (float32 for a float16/bfloat16 out: f32_sums.h), rounding after each
 * element like CPU's loop; ints wrap. */
static void srd_combine(char* d, const char* s, int dt, int src_dt, srd_op r) {
  if (tpurt_is_float(dt)) {
    double a = tpurt_load_f64(d, dt), b = tpurt_load_f64(s, src_dt);
    double v = r == SRD_PROD ? a * b : r == SRD_AMAX ? (isnan(b) || a < b ? b : a)
             : r == SRD_AMIN ? (isnan(b) || b < a ? b : a) : a + b;
    tpurt_store_f64(d, dt, v);
  } else {
    int64_t a = tpurt_load_i64(d, dt), b = tpurt_load_i64(s, src_dt);
    int64_t v = r == SRD_PROD ? (int64_t)((uint64_t)a * (uint64_t)b) : r == SRD_AMAX ? (a < b ? b : a)
              : r == SRD_AMIN ? (b < a ? b : a) : (int64_t)((uint64_t)a + (uint64_t)b);
    tpurt_store_i64(d, dt, dt == TPURT_BOOL ? v != 0 : v);
  }
}
/* The value a slot starts from without include_self. */
static void srd_identity(char* d, int dt, srd_op r) {
  if (tpurt_is_float(dt)) {
    tpurt_store_f64(d, dt, r == SRD_PROD ? 1.0 : r == SRD_AMAX ? -INFINITY : r == SRD_AMIN ? INFINITY : 0.0);
    return;
  }
  tpurt_store_i64(d, dt, r == SRD_PROD ? 1 : r == SRD_AMAX ? tpurt_int_lowest(dt) : r == SRD_AMIN ? tpurt_int_highest(dt) : 0);
}

tpurt_status tpurt_kernel_scatter_reduce(const tpurt_op_call* c) {
  /* scatter_reduce.two(self, dim, index, src, reduce, *, include_self): out = self; then
   * out[i with i[dim] = index[i]] (reduce)= src[i], each slot taking its elements in order
   * along dim as CPU's loop does; without include_self the scattered slots start from the
   * identity. mean divides the sum by the count (self included), floor for integers. */
  const tpurt_tensor* out = &c->outs[0];
  tpurt_tensor o = *out, ix = TPURT_ARG(c, scatter_reduce, index)->t, src = TPURT_ARG(c, scatter_reduce, src)->t;
  if (o.ndim == 0) o.ndim = 1, o.sizes[0] = 1, o.strides[0] = 0;
  if (ix.ndim == 0) ix.ndim = 1, ix.sizes[0] = 1, ix.strides[0] = 0;
  if (src.ndim == 0) src.ndim = 1, src.sizes[0] = 1, src.strides[0] = 0;
  int r = srd_of(c);
  if (r == 5)
    return tpurt_fail(TPURT_ERR_RUNTIME, "reduce argument must be either sum, prod, mean, amax or amin, got %s",
                      TPURT_ARG(c, scatter_reduce, reduce)->s);
  if (r == SRD_MEAN && out->dtype == TPURT_BOOL)
    return tpurt_fail(TPURT_ERR_UNSUPPORTED, "\"scatter_gather_tensor_cpu_reduce_mean\" not implemented for 'Bool'");
  int include_self = TPURT_ARG(c, scatter_reduce, include_self)->i != 0, dt = out->dtype;
  int64_t dim = wrap_dim(TPURT_ARG(c, scatter_reduce, dim)->i, out->ndim), size = o.sizes[dim];
  int64_t n = tpurt_numel(&ix), total = tpurt_numel(out), i[TPURT_MAX_DIMS] = {0};
  for (int64_t k = 0; k < n; k++) {
    int64_t v = tpurt_load_i64(at(&ix, flat_offset(&ix, k)), ix.dtype);
    if (v < 0 || v >= size)
      return tpurt_fail(TPURT_ERR_RUNTIME, "index %lld is out of bounds for dimension %lld with size %lld", (long long)v,
                        (long long)dim, (long long)size);
  }
  tpurt_status s = tpurt_copy_tensor(out, &TPURT_ARG(c, scatter_reduce, self)->t);
  if (s || n == 0) return s;
  /* sum, prod and mean of float16/bfloat16 combine in float32 (as CPU), amax/amin are exact */
  tpurt_tensor sums = *out;
  if (r != SRD_AMAX && r != SRD_AMIN && (s = f32_sums_begin(out, &sums))) return f32_sums_end(out, &sums, s);
  if (sums.data != out->data) {
    int nd = o.ndim;
    o = sums, dt = sums.dtype;
    if (out->ndim == 0) o.ndim = nd, o.sizes[0] = 1, o.strides[0] = 0;
  }
  int64_t* count = NULL;
  if (r == SRD_MEAN && !(count = tpurt_temp_calloc((size_t)total, sizeof *count)))
    return f32_sums_end(out, &sums, TPURT_ERR_OOM);
  /* dense row-major position of an out element, for the counts */
  tpurt_tensor dense = o;
  int64_t st = 1;
  for (int d = o.ndim - 1; d >= 0; d--) dense.strides[d] = st, st *= o.sizes[d];
  for (int pass = include_self; pass < 2; pass++) {
    memset(i, 0, sizeof i);
    do {
      int64_t dst[TPURT_MAX_DIMS];
      memcpy(dst, i, sizeof dst);
      dst[dim] = tpurt_load_i64(at(&ix, offset_of(&ix, i)), ix.dtype);
      char* d = at(&o, offset_of(&o, dst));
      if (pass == 0) {
        srd_identity(d, dt, (srd_op)r);
      } else {
        srd_combine(d, at(&src, offset_of(&src, i)), dt, src.dtype, (srd_op)r);
        if (count) count[offset_of(&dense, dst)]++;
      }
    } while (tpurt_next_index(i, ix.sizes, ix.ndim));
  }
  if (count) {
    memset(i, 0, sizeof i);
    do {
      int64_t k = count[offset_of(&dense, i)] + include_self;
      char* d = at(&o, offset_of(&o, i));
      if (k <= 1) continue;
      if (tpurt_is_float(dt)) {
        tpurt_store_f64(d, dt, tpurt_load_f64(d, dt) / tpurt_round_to(dt, (double)k));
      } else {
        int64_t v = tpurt_load_i64(d, dt);
        tpurt_store_i64(d, dt, v / k - ((v % k != 0) && (v < 0)));
      }
    } while (tpurt_next_index(i, o.sizes, o.ndim));
    tpurt_temp_release(count);
  }
  return f32_sums_end(out, &sums, TPURT_OK);
}
/* mean's count per element of out; the float32 copy */
tpurt_status tpurt_plan_scatter_reduce(const tpurt_op_call* c, tpurt_plan* p) {
  int r = srd_of(c);
  if (r == SRD_MEAN && tpurt_numel(&TPURT_ARG(c, scatter_reduce, index)->t))
    p->scratch_bytes += tpurt_temp_bytes((size_t)tpurt_numel(&c->outs[0]) * sizeof(int64_t));
  if (r != SRD_AMAX && r != SRD_AMIN) p->scratch_bytes += f32_sums_scratch(c);
  return TPURT_OK;
}

/* ---------------------------------------------------------------- take / put_ */
static tpurt_status check_flat_indices(const tpurt_tensor* ix, int64_t numel) {
  int64_t n = tpurt_numel(ix);
  if (n && numel == 0) return tpurt_fail(TPURT_ERR_INDEX, "cannot do a non-empty take from an empty axes.");
  for (int64_t k = 0; k < n; k++) {
    int64_t v = tpurt_load_i64(at(ix, flat_offset(ix, k)), ix->dtype);
    if (v < -numel || v >= numel)
      return tpurt_fail(TPURT_ERR_INDEX, "out of range: tried to access index %lld on a tensor of %lld elements.",
                        (long long)v, (long long)numel);
  }
  return TPURT_OK;
}

tpurt_status tpurt_kernel_take(const tpurt_op_call* c) {
  /* take(self, index): out (index's shape) = self.flatten()[index] */
  const tpurt_tensor *self = &TPURT_ARG(c, take, self)->t, *ix = &TPURT_ARG(c, take, index)->t, *out = &c->outs[0];
  int64_t numel = tpurt_numel(self), n = tpurt_numel(ix);
  tpurt_status s = check_flat_indices(ix, numel);
  if (s) return s;
  size_t es = esize(out);
  for (int64_t k = 0; k < n; k++) {
    int64_t v = tpurt_load_i64(at(ix, flat_offset(ix, k)), ix->dtype);
    memcpy(at(out, flat_offset(out, k)), at(self, flat_offset(self, v < 0 ? v + numel : v)), es);
  }
  return TPURT_OK;
}

tpurt_status tpurt_kernel_put(const tpurt_op_call* c) {
  /* put_(self, index, source, accumulate): self.flatten()[index] = source.flatten() (+= with
   * accumulate, duplicates adding up) */
  const tpurt_tensor *out = &c->outs[0], *ix = &TPURT_ARG(c, put, index)->t, *src = &TPURT_ARG(c, put, source)->t;
  int acc = TPURT_ARG(c, put, accumulate)->i != 0;
  int64_t numel = tpurt_numel(out), n = tpurt_numel(ix);
  tpurt_status s = check_flat_indices(ix, numel);
  if (!s) s = tpurt_copy_tensor(out, &TPURT_ARG(c, put, self)->t); /* out may be a private buffer (self overlaps it) */
  if (s) return s;
  tpurt_tensor sums = *out;
  if (acc && (s = f32_sums_begin(out, &sums))) return f32_sums_end(out, &sums, s);
  out = &sums;
  for (int64_t k = 0; k < n; k++) {
    int64_t v = tpurt_load_i64(at(ix, flat_offset(ix, k)), ix->dtype);
    char* d = at(out, flat_offset(out, v < 0 ? v + numel : v));
    const char* e = at(src, flat_offset(src, k));
    if (out->dtype == TPURT_C64) {
      tpurt_c64 a = tpurt_load_c64(d, out->dtype), b = tpurt_load_c64(e, src->dtype);
      tpurt_c64 v = acc ? (tpurt_c64){a.re + b.re, a.im + b.im} : b;
      memcpy(d, &v, sizeof v);
    } else if (tpurt_is_float(out->dtype))
      tpurt_store_f64(d, out->dtype, (acc ? tpurt_load_f64(d, out->dtype) : 0.0) + tpurt_load_f64(e, src->dtype));
    else
      tpurt_store_i64(d, out->dtype, (int64_t)((acc ? (uint64_t)tpurt_load_i64(d, out->dtype) : 0u) +
                                               (uint64_t)tpurt_load_i64(e, src->dtype)));
  }
  return f32_sums_end(&c->outs[0], &sums, TPURT_OK);
}
tpurt_status tpurt_plan_put(const tpurt_op_call* c, tpurt_plan* p) {
  if (TPURT_ARG(c, put, accumulate)->i) p->scratch_bytes += f32_sums_scratch(c);
  return TPURT_OK;
}

/* ---------------------------------------------------------------- masked_scatter */
tpurt_status tpurt_kernel_masked_scatter(const tpurt_op_call* c) {
  /* masked_scatter(self, mask, source): out = self; the positions where mask (broadcast to
   * self) is true take source's elements in order, row-major */
  const tpurt_tensor *out = &c->outs[0], *src = &TPURT_ARG(c, masked_scatter, source)->t;
  tpurt_tensor mask = TPURT_ARG(c, masked_scatter, mask)->t;
  if (mask.dtype != TPURT_BOOL)
    return tpurt_fail(TPURT_ERR_RUNTIME, "masked_scatter_ only supports boolean masks, but got mask with dtype %s",
                      tpurt_dtype_name(mask.dtype));
  tpurt_tensor m = *out; /* mask viewed with out's shape */
  m.data = mask.data, m.dtype = mask.dtype;
  for (int d = 0; d < out->ndim; d++) {
    int md = d - (out->ndim - mask.ndim);
    m.strides[d] = md < 0 || mask.sizes[md] == 1 ? 0 : mask.strides[md];
  }
  int64_t ones = 0, nsrc = tpurt_numel(src), i[TPURT_MAX_DIMS] = {0};
  if (tpurt_numel(out))
    do ones += *(const uint8_t*)at(&m, offset_of(&m, i)) != 0; while (tpurt_next_index(i, out->sizes, out->ndim));
  if (ones > nsrc) return tpurt_fail(TPURT_ERR_RUNTIME, "Number of elements of source < number of ones in mask");
  tpurt_status s = tpurt_copy_tensor(out, &TPURT_ARG(c, masked_scatter, self)->t);
  if (s || ones == 0) return s;
  int64_t k = 0;
  memset(i, 0, sizeof i);
  do {
    if (!*(const uint8_t*)at(&m, offset_of(&m, i))) continue;
    const char* e = at(src, flat_offset(src, k++));
    char* d = at(out, offset_of(out, i));
    tpurt_convert_elem(d, out->dtype, e, src->dtype);
  } while (tpurt_next_index(i, out->sizes, out->ndim));
  return TPURT_OK;
}

/* ---------------------------------------------------------------- channel_shuffle */
tpurt_status tpurt_kernel_channel_shuffle(const tpurt_op_call* c) {
  /* channel_shuffle(self [N, C, *], groups): out channel j*groups + g = in channel g*(C/groups) + j */
  const tpurt_tensor *self = &TPURT_ARG(c, channel_shuffle, self)->t, *out = &c->outs[0];
  int64_t groups = TPURT_ARG(c, channel_shuffle, groups)->i, C = self->sizes[1], per = C / groups;
  if (tpurt_numel(out) == 0) return TPURT_OK;
  size_t es = esize(out);
  int64_t i[TPURT_MAX_DIMS] = {0};
  do {
    int64_t src[TPURT_MAX_DIMS];
    memcpy(src, i, sizeof src);
    src[1] = (i[1] % groups) * per + i[1] / groups;
    memcpy(at(out, offset_of(out, i)), at(self, offset_of(self, src)), es);
  } while (tpurt_next_index(i, out->sizes, out->ndim));
  return TPURT_OK;
}

/* ---------------------------------------------------------------- max_unpool */
/* out [.., *spatial] = 0, then each plane's out.flatten()[indices[k]] = self's plane[k]; the
 * last `sd` dims are spatial, everything before is planes. */
_Static_assert(TPURT_ARG_max_unpool3d_self == TPURT_ARG_max_unpool2d_self && TPURT_ARG_max_unpool3d_indices == TPURT_ARG_max_unpool2d_indices,
               "max_unpool serves max_unpool2d and max_unpool3d");
static tpurt_status max_unpool(const tpurt_op_call* c, int sd) {
  const tpurt_tensor *self = &TPURT_ARG(c, max_unpool2d, self)->t, *ix = &TPURT_ARG(c, max_unpool2d, indices)->t, *out = &c->outs[0];
  int nd = out->ndim, pd = nd - sd;
  int64_t planes = 1, ospatial = 1, ispatial = 1;
  for (int d = 0; d < pd; d++) planes *= out->sizes[d];
  for (int d = pd; d < nd; d++) ospatial *= out->sizes[d], ispatial *= self->sizes[d];
  for (int64_t p = 0; p < planes * ispatial; p++) {
    int64_t v = tpurt_load_i64(at(ix, flat_offset(ix, p)), ix->dtype);
    if (v < 0 || v >= ospatial) {
      char shape[64] = "";
      for (int d = pd; d < nd; d++)
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), d > pd ? "x%lld" : "%lld", (long long)out->sizes[d]);
      return tpurt_fail(TPURT_ERR_RUNTIME, "Found an invalid max index: %lld (output volumes are of size %s", (long long)v,
                        shape);
    }
  }
  char zero[8] = {0};
  size_t es = esize(out);
  for (int64_t p = 0; p < planes * ospatial; p++) memcpy(at(out, flat_offset(out, p)), zero, es);
  for (int64_t p = 0; p < planes * ispatial; p++) {
    int64_t v = tpurt_load_i64(at(ix, flat_offset(ix, p)), ix->dtype);
    memcpy(at(out, flat_offset(out, (p / ispatial) * ospatial + v)), at(self, flat_offset(self, p)), es);
  }
  return TPURT_OK;
}

tpurt_status tpurt_kernel_max_unpool2d(const tpurt_op_call* c) {
  /* max_unpool2d(self [N?, C, H, W], indices, output_size) */
  return max_unpool(c, 2);
}

tpurt_status tpurt_kernel_max_unpool3d(const tpurt_op_call* c) {
  /* max_unpool3d(self [N?, C, D, H, W], indices, output_size, stride, padding) */
  return max_unpool(c, 3);
}
