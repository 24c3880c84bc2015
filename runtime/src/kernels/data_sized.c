/* Kernels whose output sizes depend on tensor data (TPURT_OPF_DATA_SIZED): nonzero,
 * masked_select, bincount, repeat_interleave, unique (+ unique_dim), unique_consecutive.
 * Each is called twice: first to read its inputs and declare its outputs (tpurt_sizing),
 * then to fill them. They validate their inputs themselves (PyTorch has no meta function
 * for them) and fail as CPU does. */
#include <stdlib.h>

#include "../internal.h"
#include "sort.h"

static size_t esize(const tpurt_tensor* t) { return tpurt_dtype_size((tpurt_dtype)t->dtype); }

static size_t cells_of(int64_t n) { return (size_t)(n > 0 ? n : 1); }

/* An array of n 8-byte values (int64 or double; at least one). */
static size_t array_bytes(int64_t n) { return cells_of(n) * sizeof(int64_t); }

/* A temporary's bytes as temp.c takes them from the call's scratch. */

static int is_integral(int dt) { return !tpurt_is_float(dt) && dt != TPURT_BOOL; }

/* ---------------------------------------------------------------- nonzero */
static int64_t count_nonzero(const tpurt_tensor* t) {
  int64_t n = 0, i[TPURT_MAX_DIMS] = {0};
  if (tpurt_numel(t) == 0) return 0;
  int fl = tpurt_is_float(t->dtype);
  do {
    const char* p = tpurt_elem_ptr(t, i);
    n += fl ? tpurt_load_f64(p, t->dtype) != 0 : tpurt_load_i64(p, t->dtype) != 0;
  } while (tpurt_next_index(i, t->sizes, t->ndim));
  return n;
}

/* Writes the coordinates of self's first `limit` nonzero elements (row-major) as rows of the
 * int64 matrix out; returns the number of rows written. */
static int64_t write_coords(const tpurt_tensor* self, const tpurt_tensor* out, int64_t limit) {
  int64_t i[TPURT_MAX_DIMS] = {0}, row = 0;
  if (limit <= 0 || tpurt_numel(self) == 0) return 0;
  int fl = tpurt_is_float(self->dtype);
  do {
    const char* p = tpurt_elem_ptr(self, i);
    if (fl ? tpurt_load_f64(p, self->dtype) == 0 : tpurt_load_i64(p, self->dtype) == 0) continue;
    for (int d = 0; d < self->ndim; d++)
      ((int64_t*)out->data)[row * out->strides[0] + d * out->strides[1]] = i[d];
    row++;
  } while (row < limit && tpurt_next_index(i, self->sizes, self->ndim));
  return row;
}

tpurt_status tpurt_kernel_nonzero(const tpurt_op_call* c) {
  /* nonzero(self) -> int64 [n, self.dim()]: coordinates of the nonzero elements, row-major */
  const tpurt_tensor* self = &TPURT_ARG(c, nonzero, self)->t;
  int64_t n = count_nonzero(self);
  if (tpurt_sizing(c)) {
    int64_t sizes[2] = {n, self->ndim};
    tpurt_declare_output(c, 0, TPURT_I64, 2, sizes);
    return TPURT_OK;
  }
  write_coords(self, &c->outs[0], n);
  return TPURT_OK;
}

tpurt_status tpurt_kernel_nonzero_static(const tpurt_op_call* c) {
  /* nonzero_static(self, *, size, fill_value) -> int64 [size, self.dim()]: nonzero's first
   * `size` rows, then rows of fill_value. Sized by the meta function, not by the data. */
  const tpurt_tensor *self = &TPURT_ARG(c, nonzero_static, self)->t, *out = &c->outs[0];
  int64_t rows = write_coords(self, out, out->sizes[0]), fill = TPURT_ARG(c, nonzero_static, fill_value)->i;
  for (int64_t r = rows; r < out->sizes[0]; r++)
    for (int64_t d = 0; d < out->sizes[1]; d++) ((int64_t*)out->data)[r * out->strides[0] + d * out->strides[1]] = fill;
  return TPURT_OK;
}

/* ---------------------------------------------------------------- masked_select */
/* a and b broadcast to one shape (as CPU: RuntimeError naming the first mismatched dim). */
static tpurt_status broadcast_pair(tpurt_tensor* a, tpurt_tensor* b) {
  int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
  tpurt_tensor ra = *a, rb = *b;
  ra.ndim = rb.ndim = nd;
  for (int d = 0; d < nd; d++) {
    int da = d - (nd - a->ndim), db = d - (nd - b->ndim);
    int64_t sa = da < 0 ? 1 : a->sizes[da], sb = db < 0 ? 1 : b->sizes[db];
    if (sa != sb && sa != 1 && sb != 1)
      return tpurt_fail(TPURT_ERR_RUNTIME,
                        "The size of tensor a (%lld) must match the size of tensor b (%lld) at non-singleton dimension %d",
                        (long long)sa, (long long)sb, d);
    int64_t s = sa == 1 ? sb : sa;
    ra.sizes[d] = rb.sizes[d] = s;
    ra.strides[d] = da < 0 || sa == 1 ? 0 : a->strides[da];
    rb.strides[d] = db < 0 || sb == 1 ? 0 : b->strides[db];
  }
  *a = ra, *b = rb;
  return TPURT_OK;
}

tpurt_status tpurt_kernel_masked_select(const tpurt_op_call* c) {
  /* masked_select(self, mask) -> 1-D: the elements of self (broadcast with mask) where
   * mask is true, row-major */
  tpurt_tensor self = TPURT_ARG(c, masked_select, self)->t, mask = TPURT_ARG(c, masked_select, mask)->t;
  if (mask.dtype != TPURT_BOOL) return tpurt_fail(TPURT_ERR_RUNTIME, "masked_select: expected BoolTensor for mask");
  tpurt_status s = broadcast_pair(&mask, &self);
  if (s) return s;
  if (tpurt_sizing(c)) {
    int64_t n = count_nonzero(&mask);
    tpurt_declare_output(c, 0, self.dtype, 1, &n);
    return TPURT_OK;
  }
  const tpurt_tensor* out = &c->outs[0];
  if (tpurt_numel(out) == 0) return TPURT_OK;
  size_t es = esize(out);
  int64_t i[TPURT_MAX_DIMS] = {0}, k = 0;
  do {
    if (*(const uint8_t*)tpurt_elem_ptr(&mask, i))
      memcpy((char*)out->data + (k++) * out->strides[0] * (int64_t)es, tpurt_elem_ptr(&self, i), es);
  } while (tpurt_next_index(i, self.sizes, self.ndim));
  return TPURT_OK;
}

/* ---------------------------------------------------------------- bincount */
tpurt_status tpurt_kernel_bincount(const tpurt_op_call* c) {
  /* bincount(self, weights?, minlength) -> counts (int64), or sums of weights (float32 for
   * float32 weights, else float64, as CPU) per value of the non-negative 1-D int self */
  const tpurt_tensor* self = &TPURT_ARG(c, bincount, self)->t;
  const tpurt_value* wv = TPURT_ARG(c, bincount, weights);
  int64_t minlength = TPURT_ARG(c, bincount, minlength)->i;
  if (!is_integral(self->dtype))
    return tpurt_fail(TPURT_ERR_UNSUPPORTED, "\"bincount_cpu\" not implemented for '%s'", tpurt_dtype_c10_name(self->dtype));
  if (minlength < 0) return tpurt_fail(TPURT_ERR_RUNTIME, "minlength should be >= 0");
  if (self->ndim != 1) return tpurt_fail(TPURT_ERR_RUNTIME, "bincount only supports 1-d non-negative integral inputs.");
  int has_w = wv->kind == TPURT_V_TENSOR;
  int64_t n = self->sizes[0], maxv = -1;
  if (has_w && (wv->t.ndim != 1 || wv->t.sizes[0] != n))
    return tpurt_fail(TPURT_ERR_RUNTIME, "weights should be 1-d and have the same length as input");
  for (int64_t j = 0; j < n; j++) {
    int64_t v = tpurt_load_i64((const char*)self->data + j * self->strides[0] * (int64_t)esize(self), self->dtype);
    if (v < 0) return tpurt_fail(TPURT_ERR_RUNTIME, "bincount only supports 1-d non-negative integral inputs.");
    if (v > maxv) maxv = v;
  }
  int64_t bins = maxv + 1 > minlength ? maxv + 1 : minlength;
  if (tpurt_sizing(c)) {
    int dt = !has_w ? TPURT_I64 : wv->t.dtype == TPURT_F32 ? TPURT_F32 : TPURT_F64;
    tpurt_declare_output(c, 0, dt, 1, &bins);
    return TPURT_OK;
  }
  const tpurt_tensor* out = &c->outs[0];
  double* acc = tpurt_temp_zeroed(array_bytes(bins));
  if (!acc) return TPURT_ERR_OOM;
  for (int64_t j = 0; j < n; j++) {
    int64_t v = tpurt_load_i64((const char*)self->data + j * self->strides[0] * (int64_t)esize(self), self->dtype);
    acc[v] += has_w ? tpurt_load_f64((const char*)wv->t.data + j * wv->t.strides[0] * (int64_t)esize(&wv->t), wv->t.dtype)
                    : 1.0;
  }
  tpurt_tensor a = {.data = acc, .dtype = TPURT_F64, .ndim = 1, .sizes = {bins}, .strides = {1}};
  tpurt_status s = tpurt_copy_tensor(out, &a);
  tpurt_temp_release(acc);
  return s;
}

/* Only the run pass takes the accumulator: one double per bin, as many as the sizing pass
 * declared the output from the same data. */
tpurt_status tpurt_plan_bincount(const tpurt_op_call* c, tpurt_plan* p) {
  if (!tpurt_sizing(c)) p->scratch_bytes += tpurt_temp_bytes(array_bytes(c->outs[0].sizes[0]));
  return TPURT_OK;
}

/* ---------------------------------------------------------------- repeat_interleave */
tpurt_status tpurt_kernel_repeat_interleave(const tpurt_op_call* c) {
  /* repeat_interleave.Tensor(repeats, output_size?) -> [sum(repeats)] of repeats' dtype:
   * i repeated repeats[i] times */
  const tpurt_tensor* r = &TPURT_ARG(c, repeat_interleave, repeats)->t;
  if (tpurt_is_float(r->dtype))
    return tpurt_fail(TPURT_ERR_UNSUPPORTED, "\"repeat_interleave_cpu\" not implemented for '%s'", tpurt_dtype_c10_name(r->dtype));
  if (r->dtype != TPURT_I32 && r->dtype != TPURT_I64)
    return tpurt_fail(TPURT_ERR_RUNTIME, "repeats has to be Long or Int tensor");
  if (r->ndim != 1) return tpurt_fail(TPURT_ERR_RUNTIME, "repeat_interleave only accept 1D vector as repeat");
  int64_t n = r->sizes[0], total = 0;
  size_t es = esize(r);
  for (int64_t j = 0; j < n; j++) {
    int64_t v = tpurt_load_i64((const char*)r->data + j * r->strides[0] * (int64_t)es, r->dtype);
    if (v < 0) return tpurt_fail(TPURT_ERR_RUNTIME, "repeats can not be negative");
    total += v;
  }
  const tpurt_value* osz = TPURT_ARG(c, repeat_interleave, output_size);
  if (osz->kind == TPURT_V_INT && osz->i != total)
    return tpurt_fail(TPURT_ERR_RUNTIME, "allocated size does not match required size");
  if (tpurt_sizing(c)) {
    tpurt_declare_output(c, 0, r->dtype, 1, &total);
    return TPURT_OK;
  }
  const tpurt_tensor* out = &c->outs[0];
  int64_t k = 0;
  for (int64_t j = 0; j < n; j++) {
    int64_t v = tpurt_load_i64((const char*)r->data + j * r->strides[0] * (int64_t)es, r->dtype);
    for (int64_t t = 0; t < v; t++, k++) tpurt_store_i64((char*)out->data + k * out->strides[0] * (int64_t)es, out->dtype, j);
  }
  return TPURT_OK;
}

/* ---------------------------------------------------------------- unique */
tpurt_status tpurt_kernel_unique(const tpurt_op_call* c) {
  /* _unique2(self, sorted, return_inverse, return_counts) -> (values sorted ascending as CPU
   * always does, inverse (self's shape, or [0]), counts ([n], or [0])); the older
   * _unique(self, sorted, return_inverse) is the same without counts */
  const tpurt_tensor* self = &TPURT_ARG(c, unique, self)->t;
  int with_counts = c->nargs > 3, want_inv = TPURT_ARG(c, unique, return_inverse)->i != 0, want_cnt = with_counts && TPURT_ARG(c, unique, return_counts)->i != 0;
  int64_t n = tpurt_numel(self);
  tpurt_line l = {.n = n, .as_int = !tpurt_is_float(self->dtype)};
  l.keys = tpurt_temp(array_bytes(n));
  l.idx = tpurt_temp(array_bytes(n));
  l.tmp = tpurt_temp(array_bytes(n));
  int64_t* group = tpurt_temp(array_bytes(n)); /* group of each sorted position */
  tpurt_status s = TPURT_OK;
  if (!l.keys || !l.idx || !l.tmp || !group) {
    s = TPURT_ERR_OOM;
    goto done;
  }
  int64_t i[TPURT_MAX_DIMS] = {0}, j = 0;
  if (n) do {
    const char* p = tpurt_elem_ptr(self, i);
    if (l.as_int) ((int64_t*)l.keys)[j] = tpurt_load_i64(p, self->dtype);
    else ((double*)l.keys)[j] = tpurt_load_f64(p, self->dtype);
    l.idx[j] = j;
    j++;
  } while (tpurt_next_index(i, self->sizes, self->ndim));
  tpurt_line_sort(&l, 0);
  int64_t groups = 0;
  for (j = 0; j < n; j++) {
    int same = j > 0 && (l.as_int ? ((int64_t*)l.keys)[l.idx[j]] == ((int64_t*)l.keys)[l.idx[j - 1]]
                                  : ((double*)l.keys)[l.idx[j]] == ((double*)l.keys)[l.idx[j - 1]]);
    if (!same) groups++;
    group[j] = groups - 1;
  }
  if (tpurt_sizing(c)) {
    int64_t zero = 0;
    tpurt_declare_output(c, 0, self->dtype, 1, &groups);
    if (want_inv) tpurt_declare_output(c, 1, TPURT_I64, self->ndim, self->sizes);
    else tpurt_declare_output(c, 1, TPURT_I64, 1, &zero);
    if (with_counts) tpurt_declare_output(c, 2, TPURT_I64, 1, want_cnt ? &groups : &zero);
    goto done;
  }
  const tpurt_tensor *vals = &c->outs[0], *inv = &c->outs[1], *cnt = &c->outs[with_counts ? 2 : 1];
  size_t es = esize(vals);
  if (want_cnt)
    for (j = 0; j < groups; j++) ((int64_t*)cnt->data)[j * cnt->strides[0]] = 0;
  for (j = 0; j < n; j++) {
    int64_t g = group[j], src = l.idx[j];
    if (j == 0 || g != group[j - 1]) {
      /* the flat position src of self, as a multi-index */
      int64_t rem = src, off = 0;
      for (int d = self->ndim - 1; d >= 0; d--) off += (rem % self->sizes[d]) * self->strides[d], rem /= self->sizes[d];
      memcpy((char*)vals->data + g * vals->strides[0] * (int64_t)es, (const char*)self->data + off * (int64_t)es, es);
    }
    if (want_cnt) ((int64_t*)cnt->data)[g * cnt->strides[0]]++;
    if (want_inv) {
      int64_t rem = src, off = 0;
      for (int d = inv->ndim - 1; d >= 0; d--) off += (rem % inv->sizes[d]) * inv->strides[d], rem /= inv->sizes[d];
      ((int64_t*)inv->data)[off] = g;
    }
  }
done:
  tpurt_temp_release(l.keys), tpurt_temp_release(l.idx), tpurt_temp_release(l.tmp), tpurt_temp_release(group);
  return s;
}

/* Both passes sort: keys, two index arrays and the groups, one entry per element each. */
tpurt_status tpurt_plan_unique(const tpurt_op_call* c, tpurt_plan* p) {
  p->scratch_bytes += 4 * tpurt_temp_bytes(array_bytes(tpurt_numel(&TPURT_ARG(c, unique, self)->t)));
  return TPURT_OK;
}

/* ---------------------------------------------------------------- unique_consecutive */
/* Offset of element e of slice k: slices run along dim (or, with dim < 0, are the single
 * elements of self in row-major order). */
static int64_t slice_elem(const tpurt_tensor* t, int dim, int64_t k, int64_t e) {
  int64_t off = 0;
  for (int d = t->ndim - 1; d >= 0; d--) {
    if (d == dim) continue;
    off += (e % t->sizes[d]) * t->strides[d], e /= t->sizes[d];
  }
  if (dim >= 0) return off + k * t->strides[dim];
  off = 0;
  for (int d = t->ndim - 1; d >= 0; d--) off += (k % t->sizes[d]) * t->strides[d], k /= t->sizes[d];
  return off;
}

static int slices_equal(const tpurt_tensor* t, int dim, int64_t a, int64_t b, int64_t per) {
  size_t es = esize(t);
  for (int64_t e = 0; e < per; e++) {
    const char* pa = (const char*)t->data + slice_elem(t, dim, a, e) * (int64_t)es;
    const char* pb = (const char*)t->data + slice_elem(t, dim, b, e) * (int64_t)es;
    if (tpurt_is_float(t->dtype) ? tpurt_load_f64(pa, t->dtype) != tpurt_load_f64(pb, t->dtype)
                                 : tpurt_load_i64(pa, t->dtype) != tpurt_load_i64(pb, t->dtype))
      return 0;
  }
  return 1;
}

tpurt_status tpurt_kernel_unique_consecutive(const tpurt_op_call* c) {
  /* unique_consecutive(self, return_inverse, return_counts, dim?) -> (values, inverse,
   * counts): runs of equal elements (or of equal slices along dim) collapse to one */
  const tpurt_tensor* self = &TPURT_ARG(c, unique_consecutive, self)->t;
  int want_inv = TPURT_ARG(c, unique_consecutive, return_inverse)->i != 0, want_cnt = TPURT_ARG(c, unique_consecutive, return_counts)->i != 0;
  int dim = -1;
  if (TPURT_ARG(c, unique_consecutive, dim)->kind == TPURT_V_INT) {
    int64_t d = TPURT_ARG(c, unique_consecutive, dim)->i, nd = self->ndim ? self->ndim : 1;
    if (d < -nd || d >= nd)
      return tpurt_fail(TPURT_ERR_INDEX, "Dimension out of range (expected to be in range of [%lld, %lld], but got %lld)",
                        (long long)-nd, (long long)nd - 1, (long long)d);
    dim = (int)(d < 0 ? d + nd : d);
    if (self->ndim == 0) dim = -1;
  }
  int64_t n = dim >= 0 ? self->sizes[dim] : tpurt_numel(self);
  int64_t per = dim >= 0 && n ? tpurt_numel(self) / n : 1, groups = 0;
  for (int64_t k = 0; k < n; k++) groups += k == 0 || !slices_equal(self, dim, k - 1, k, per);
  if (tpurt_sizing(c)) {
    int64_t zero = 0, vs[TPURT_MAX_DIMS];
    memcpy(vs, self->sizes, sizeof vs);
    if (dim >= 0) vs[dim] = groups;
    tpurt_declare_output(c, 0, self->dtype, dim >= 0 ? self->ndim : 1, dim >= 0 ? vs : &groups);
    if (!want_inv) tpurt_declare_output(c, 1, TPURT_I64, 1, &zero);
    else if (dim >= 0) tpurt_declare_output(c, 1, TPURT_I64, 1, &n);
    else tpurt_declare_output(c, 1, TPURT_I64, self->ndim, self->sizes);
    tpurt_declare_output(c, 2, TPURT_I64, 1, want_cnt ? &groups : &zero);
    return TPURT_OK;
  }
  const tpurt_tensor *vals = &c->outs[0], *inv = &c->outs[1], *cnt = &c->outs[2];
  size_t es = esize(self);
  int64_t g = -1;
  for (int64_t k = 0; k < n; k++) {
    if (k == 0 || !slices_equal(self, dim, k - 1, k, per)) {
      g++;
      for (int64_t e = 0; e < per; e++)
        memcpy((char*)vals->data + slice_elem(vals, dim, g, e) * (int64_t)es,
               (const char*)self->data + slice_elem(self, dim, k, e) * (int64_t)es, es);
      if (want_cnt) ((int64_t*)cnt->data)[g * cnt->strides[0]] = 0;
    }
    if (want_cnt) ((int64_t*)cnt->data)[g * cnt->strides[0]]++;
    if (want_inv) ((int64_t*)inv->data)[dim >= 0 ? k * inv->strides[0] : slice_elem(inv, -1, k, 0)] = g;
  }
  return TPURT_OK;
}

/* ---------------------------------------------------------------- unique_dim */
typedef struct {
  const tpurt_tensor* t;
  int dim;
  int64_t per;
} slice_order;

/* CPU's comparator: slice x before slice y when, at the first element where one is < or >
 * the other, it is <. NaN is neither, so slices with NaN sort where std::sort leaves them. */
static int slice_less(const void* ctx, int64_t x, int64_t y) {
  const slice_order* o = ctx;
  size_t es = esize(o->t);
  int fl = tpurt_is_float(o->t->dtype);
  for (int64_t e = 0; e < o->per; e++) {
    const char* pa = (const char*)o->t->data + slice_elem(o->t, o->dim, x, e) * (int64_t)es;
    const char* pb = (const char*)o->t->data + slice_elem(o->t, o->dim, y, e) * (int64_t)es;
    if (fl) {
      double va = tpurt_load_f64(pa, o->t->dtype), vb = tpurt_load_f64(pb, o->t->dtype);
      if (va < vb) return 1;
      if (va > vb) return 0;
    } else {
      int64_t ia = tpurt_load_i64(pa, o->t->dtype), ib = tpurt_load_i64(pb, o->t->dtype);
      if (ia < ib) return 1;
      if (ia > ib) return 0;
    }
  }
  return 0;
}

tpurt_status tpurt_kernel_unique_dim(const tpurt_op_call* c) {
  /* unique_dim(self, dim, sorted, return_inverse, return_counts) -> (the distinct slices
   * along dim in lexicographic order, inverse [size(dim)], counts) — CPU fills inverse and
   * counts whatever the flags say */
  const tpurt_tensor* self = &TPURT_ARG(c, unique_dim, self)->t;
  int64_t d = TPURT_ARG(c, unique_dim, dim)->i, nd = self->ndim ? self->ndim : 1;
  if (d < -nd || d >= nd)
    return tpurt_fail(TPURT_ERR_INDEX, "Dimension out of range (expected to be in range of [%lld, %lld], but got %lld)",
                      (long long)-nd, (long long)nd - 1, (long long)d);
  if (self->ndim == 0) return tpurt_fail(TPURT_ERR_RUNTIME, "unique_dim: a 0-dim tensor has no dim to take slices along");
  slice_order o = {self, (int)(d < 0 ? d + nd : d), 0};
  int64_t n = self->sizes[o.dim];
  if (n != 0 && tpurt_numel(self) == 0)
    return tpurt_fail(TPURT_ERR_RUNTIME, "There are 0 sized dimensions, and they aren't selected, so unique cannot be applied");
  int zero_dims = 0;
  for (int d = 0; d < self->ndim; d++) zero_dims += self->sizes[d] == 0;
  if (n == 0 && zero_dims > 1)
    return tpurt_fail(TPURT_ERR_RUNTIME, "Number of zero sized dimensions is more than one, so unique cannot be applied ");
  o.per = n ? tpurt_numel(self) / n : 0;
  int64_t* idx = tpurt_temp(array_bytes(n));
  if (!idx) return TPURT_ERR_OOM;
  for (int64_t k = 0; k < n; k++) idx[k] = k;
  tpurt_std_sort(idx, n, slice_less, &o);
  /* as CPU, each slice is compared with the first of the current group */
  int64_t groups = 0;
  for (int64_t k = 0, head = 0; k < n; k++)
    if (k == 0 || !slices_equal(self, o.dim, idx[head], idx[k], o.per)) groups++, head = k;
  if (tpurt_sizing(c)) {
    int64_t vs[TPURT_MAX_DIMS];
    memcpy(vs, self->sizes, sizeof vs);
    vs[o.dim] = groups;
    tpurt_declare_output(c, 0, self->dtype, self->ndim, vs);
    tpurt_declare_output(c, 1, TPURT_I64, 1, &n);
    tpurt_declare_output(c, 2, TPURT_I64, 1, &groups);
    tpurt_temp_release(idx);
    return TPURT_OK;
  }
  const tpurt_tensor *vals = &c->outs[0], *inv = &c->outs[1], *cnt = &c->outs[2];
  size_t es = esize(self);
  int64_t g = -1;
  for (int64_t k = 0, head = 0; k < n; k++) {
    if (k == 0 || !slices_equal(self, o.dim, idx[head], idx[k], o.per)) {
      g++;
      head = k;
      for (int64_t e = 0; e < o.per; e++)
        memcpy((char*)vals->data + slice_elem(vals, o.dim, g, e) * (int64_t)es,
               (const char*)self->data + slice_elem(self, o.dim, idx[k], e) * (int64_t)es, es);
      ((int64_t*)cnt->data)[g * cnt->strides[0]] = 0;
    }
    ((int64_t*)cnt->data)[g * cnt->strides[0]]++;
    ((int64_t*)inv->data)[idx[k] * inv->strides[0]] = g;
  }
  tpurt_temp_release(idx);
  return TPURT_OK;
}

/* Both passes sort the indices of the slices along dim (a bad dim is the kernel's to report). */
tpurt_status tpurt_plan_unique_dim(const tpurt_op_call* c, tpurt_plan* p) {
  const tpurt_tensor* self = &TPURT_ARG(c, unique_dim, self)->t;
  int64_t d = TPURT_ARG(c, unique_dim, dim)->i, nd = self->ndim;
  if (d >= -nd && d < nd) p->scratch_bytes += tpurt_temp_bytes(array_bytes(self->sizes[d < 0 ? d + nd : d]));
  return TPURT_OK;
}
