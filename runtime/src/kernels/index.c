/* Indexing and shape kernels: embedding (+ dense backward), index_select, index_add, gather,
 * scatter/scatter_add, advanced indexing (index.Tensor, index_put), cat, tril/triu, arange,
 * flip, narrow_copy, roll. Data-moving kernels copy raw elements (outputs have self's dtype);
 * every index is validated before anything is read through it, so bad indices fail like CPU
 * does and never touch memory out of bounds. */
#include <stdio.h>
#include <stdlib.h>

#include "../internal.h"
#include "f32_sums.h"

/* ---------------------------------------------------------------- helpers */
static size_t esize(const tpurt_tensor* t) { return tpurt_dtype_size((tpurt_dtype)t->dtype); }

static int64_t wrap_dim(int64_t d, int ndim) {
  int n = ndim > 0 ? ndim : 1;
  return d < 0 ? d + n : d;
}

/* A 0-dim tensor as a 1-element 1-D view, so dim-wise kernels need no special case. */
static tpurt_tensor at_least_1d(const tpurt_tensor* t) {
  tpurt_tensor v = *t;
  if (v.ndim == 0) v.ndim = 1, v.sizes[0] = 1, v.strides[0] = 0;
  return v;
}

static int64_t offset_of(const tpurt_tensor* t, const int64_t* idx) {
  int64_t off = 0;
  for (int d = 0; d < t->ndim; d++) off += idx[d] * t->strides[d];
  return off;
}
static char* at(const tpurt_tensor* t, int64_t off) { return (char*)t->data + off * (int64_t)esize(t); }

static int64_t load_index(const tpurt_tensor* t, const int64_t* idx) {
  return tpurt_load_i64(at(t, offset_of(t, idx)), t->dtype);
}

/* Fail with `code` (the exception CPU raises for this op) unless every element of index
 * lies in [lo, size). */
static tpurt_status check_indices(const tpurt_tensor* index, int64_t lo, int64_t size, int dim,
                                  const char* what, tpurt_status code) {
  if (tpurt_numel(index) == 0) return TPURT_OK;
  int64_t i[TPURT_MAX_DIMS] = {0};
  do {
    int64_t v = load_index(index, i);
    if (v < lo || v >= size) {
      if (what) return tpurt_fail(code, "%s", what);
      return tpurt_fail(code, "index %lld is out of bounds for dimension %d with size %lld",
                        (long long)v, dim, (long long)size);
    }
  } while (tpurt_next_index(i, index->sizes, index->ndim));
  return TPURT_OK;
}

/* dst (+)= src for one element of dtype dt; add in double for floats, int64 otherwise. */
static void accumulate(char* dst, const char* src, int src_dt, int dt, double scale) {
  if (tpurt_is_float(dt)) tpurt_store_f64(dst, dt, tpurt_load_f64(dst, dt) + scale * tpurt_load_f64(src, src_dt));
  else tpurt_store_i64(dst, dt, (int64_t)((uint64_t)tpurt_load_i64(dst, dt) + (uint64_t)tpurt_load_i64(src, src_dt)));
}

/* ---------------------------------------------------------------- select / gather */
/* out[..., i, ...] = self[..., index[i], ...] along dim (index_select, embedding). */
enum { SELECT_BLOCK = 1024 };
/* Element offsets in o and s of the position `outer` over the dims before `dim`. */
static void outer_offsets(const int64_t* outer, int64_t dim, const tpurt_tensor* o, const tpurt_tensor* s, int64_t* ob,
                          int64_t* sb) {
  *ob = *sb = 0;
  for (int d = 0; d < dim; d++) *ob += outer[d] * o->strides[d], *sb += outer[d] * s->strides[d];
}
static tpurt_status select_rows(const tpurt_tensor* out, const tpurt_tensor* self_, int64_t dim,
                                const tpurt_tensor* index) {
  tpurt_tensor self = at_least_1d(self_), o = at_least_1d(out), ix = at_least_1d(index);
  tpurt_status s = check_indices(&ix, 0, self.sizes[dim], (int)dim, "index out of range in self", TPURT_ERR_INDEX);
  if (s || tpurt_numel(&o) == 0) return s;
  size_t es = esize(&o);
  /* The dims after `dim` as one run when both tensors hold them densely (an embedding row,
   * the rows index_select picks): a memcpy per (outer position, index) rather than an
   * element at a time with its offsets recomputed (10x CPU's time). */
  int64_t run = 1;
  int dense = 1;
  for (int d = o.ndim - 1; d > dim; d--) {
    if (o.sizes[d] == 1) continue;
    dense &= o.strides[d] == run && self.strides[d] == run;
    run *= o.sizes[d];
  }
  if (dense && run > 1) {
    int64_t outer[TPURT_MAX_DIMS] = {0};
    do {
      int64_t ob, sb;
      outer_offsets(outer, dim, &o, &self, &ob, &sb);
      for (int64_t k = 0; k < o.sizes[dim]; k++) {
        int64_t v = tpurt_load_i64(at(&ix, k * ix.strides[0]), ix.dtype);
        memcpy(at(&o, ob + k * o.strides[dim]), at(&self, sb + v * self.strides[dim]), (size_t)run * es);
      }
    } while (dim > 0 && tpurt_next_index(outer, o.sizes, (int)dim));
    return TPURT_OK;
  }
  if (dense && (es == 2 || es == 4 || es == 8)) { /* `dim` innermost: indices loaded once per block */
    int64_t nidx = o.sizes[dim], os = o.strides[dim], ss = self.strides[dim];
    for (int64_t k0 = 0; k0 < nidx; k0 += SELECT_BLOCK) {
      int64_t idx[SELECT_BLOCK], n = nidx - k0 < SELECT_BLOCK ? nidx - k0 : SELECT_BLOCK;
      for (int64_t k = 0; k < n; k++) idx[k] = tpurt_load_i64(at(&ix, (k0 + k) * ix.strides[0]), ix.dtype) * ss;
      int64_t outer[TPURT_MAX_DIMS] = {0};
      do {
        int64_t ob, sb;
        outer_offsets(outer, dim, &o, &self, &ob, &sb);
        char *dst = at(&o, ob + k0 * os), *src = at(&self, sb);
        switch (es) {
          case 2: for (int64_t k = 0; k < n; k++) ((uint16_t*)dst)[k * os] = ((const uint16_t*)src)[idx[k]]; break;
          case 4: for (int64_t k = 0; k < n; k++) ((uint32_t*)dst)[k * os] = ((const uint32_t*)src)[idx[k]]; break;
          default: for (int64_t k = 0; k < n; k++) ((uint64_t*)dst)[k * os] = ((const uint64_t*)src)[idx[k]]; break;
        }
      } while (dim > 0 && tpurt_next_index(outer, o.sizes, (int)dim));
    }
    return TPURT_OK;
  }
  int64_t i[TPURT_MAX_DIMS] = {0};
  do {
    int64_t src[TPURT_MAX_DIMS];
    memcpy(src, i, sizeof src);
    src[dim] = tpurt_load_i64(at(&ix, i[dim] * ix.strides[0]), ix.dtype);
    memcpy(at(&o, offset_of(&o, i)), at(&self, offset_of(&self, src)), es);
  } while (tpurt_next_index(i, o.sizes, o.ndim));
  return TPURT_OK;
}

tpurt_status tpurt_kernel_index_select(const tpurt_op_call* c) {
  /* index_select(self, dim, index) */
  const tpurt_tensor* self = &TPURT_ARG(c, index_select, self)->t;
  if (self->ndim == 0 && tpurt_numel(&TPURT_ARG(c, index_select, index)->t) != 1)
    return tpurt_fail(TPURT_ERR_RUNTIME, "index_select(): Index to scalar can have only 1 value, got %lld value(s)",
                      (long long)tpurt_numel(&TPURT_ARG(c, index_select, index)->t));
  return select_rows(&c->outs[0], self, wrap_dim(TPURT_ARG(c, index_select, dim)->i, self->ndim), &TPURT_ARG(c, index_select, index)->t);
}

tpurt_status tpurt_kernel_embedding(const tpurt_op_call* c) {
  /* embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse): rows of weight;
   * out is indices.shape + [D], viewed as [numel(indices), D] when indices are contiguous
   * in out's leading dims (always: out is freshly allocated and dense). */
  const tpurt_tensor *w = &TPURT_ARG(c, embedding, weight)->t, *ind = &TPURT_ARG(c, embedding, indices)->t, *out = &c->outs[0];
  tpurt_status s = check_indices(ind, 0, w->sizes[0], 0, "index out of range in self", TPURT_ERR_INDEX);
  if (s || tpurt_numel(out) == 0) return s;
  size_t es = esize(out);
  int64_t D = w->sizes[1], ostride = out->strides[out->ndim - 1];
  int64_t i[TPURT_MAX_DIMS] = {0};
  int dense = ostride == 1 && w->strides[1] == 1; /* whole rows at once */
  do {
    int64_t row = load_index(ind, i), ooff = 0;
    for (int d = 0; d < ind->ndim; d++) ooff += i[d] * out->strides[d];
    if (dense) memcpy(at(out, ooff), at(w, row * w->strides[0]), (size_t)D * es);
    else
      for (int64_t j = 0; j < D; j++)
        memcpy(at(out, ooff + j * ostride), at(w, row * w->strides[0] + j * w->strides[1]), es);
  } while (tpurt_next_index(i, ind->sizes, ind->ndim));
  return TPURT_OK;
}

/* embedding_dense_backward's sums (a double per output element) and counts (one per row) */
static size_t embedding_acc_size(int64_t nw, int64_t D) { return sizeof(double) * (size_t)(nw * D > 0 ? nw * D : 1); }
static size_t embedding_count_size(int64_t nw) { return sizeof(int64_t) * (size_t)(nw ? nw : 1); }

tpurt_status tpurt_kernel_embedding_dense_backward(const tpurt_op_call* c) {
  /* embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
   * rows of grad summed per index in double; padding rows get nothing; with
   * scale_grad_by_freq each row is divided by how often its index occurs. */
  const tpurt_tensor *g = &TPURT_ARG(c, embedding_dense_backward, grad_output)->t, *ind = &TPURT_ARG(c, embedding_dense_backward, indices)->t, *out = &c->outs[0];
  int64_t nw = TPURT_ARG(c, embedding_dense_backward, num_weights)->i, pad = TPURT_ARG(c, embedding_dense_backward, padding_idx)->i, scale = TPURT_ARG(c, embedding_dense_backward, scale_grad_by_freq)->i;
  int64_t D = out->sizes[1], n = tpurt_numel(ind);
  tpurt_status s = check_indices(ind, 0, nw, 0, "index out of range in self", TPURT_ERR_INDEX);
  if (s) return s;
  double* acc = tpurt_temp_zeroed(embedding_acc_size(nw, D));
  int64_t* count = tpurt_temp_zeroed(embedding_count_size(nw));
  if (!acc || !count) {
    tpurt_temp_release(acc), tpurt_temp_release(count);
    return TPURT_ERR_OOM;
  }
  int64_t i[TPURT_MAX_DIMS] = {0};
  if (scale && n)
    do count[load_index(ind, i)]++; while (tpurt_next_index(i, ind->sizes, ind->ndim));
  memset(i, 0, sizeof i);
  int64_t gs = g->strides[g->ndim - 1];
  if (n) do {
    int64_t row = load_index(ind, i);
    if (row == pad) continue;
    double f = scale ? 1.0 / (double)count[row] : 1.0;
    int64_t goff = 0;
    for (int d = 0; d < ind->ndim; d++) goff += i[d] * g->strides[d];
    double* a = acc + row * D;
    if (g->dtype == TPURT_F32) { /* the common case without a load call per element */
      const float* gr = (const float*)at(g, goff);
      for (int64_t j = 0; j < D; j++) a[j] += f * gr[j * gs];
    } else {
      for (int64_t j = 0; j < D; j++) a[j] += f * tpurt_load_f64(at(g, goff + j * gs), g->dtype);
    }
  } while (tpurt_next_index(i, ind->sizes, ind->ndim));
  tpurt_tensor a = {.data = acc, .dtype = TPURT_F64, .ndim = 2, .sizes = {nw, D}, .strides = {D, 1}};
  s = tpurt_copy_tensor(out, &a);
  tpurt_temp_release(acc), tpurt_temp_release(count);
  return s;
}
tpurt_status tpurt_plan_embedding_dense_backward(const tpurt_op_call* c, tpurt_plan* p) {
  int64_t nw = TPURT_ARG(c, embedding_dense_backward, num_weights)->i, D = c->outs[0].sizes[1];
  p->scratch_bytes += tpurt_temp_bytes(embedding_acc_size(nw, D)) + tpurt_temp_bytes(embedding_count_size(nw));
  return TPURT_OK;
}

tpurt_status tpurt_kernel_gather(const tpurt_op_call* c) {
  /* gather(self, dim, index, sparse_grad): out[i] = self[i with i[dim] = index[i]] */
  tpurt_tensor self = at_least_1d(&TPURT_ARG(c, gather, self)->t), ix = at_least_1d(&TPURT_ARG(c, gather, index)->t), o = at_least_1d(&c->outs[0]);
  int64_t dim = wrap_dim(TPURT_ARG(c, gather, dim)->i, TPURT_ARG(c, gather, self)->t.ndim);
  tpurt_status s = check_indices(&ix, 0, self.sizes[dim], (int)dim, NULL, TPURT_ERR_RUNTIME);
  if (s || tpurt_numel(&o) == 0) return s;
  size_t es = esize(&o);
  int64_t i[TPURT_MAX_DIMS] = {0};
  do {
    int64_t src[TPURT_MAX_DIMS];
    memcpy(src, i, sizeof src);
    src[dim] = load_index(&ix, i);
    memcpy(at(&o, offset_of(&o, i)), at(&self, offset_of(&self, src)), es);
  } while (tpurt_next_index(i, o.sizes, o.ndim));
  return TPURT_OK;
}

/* ---------------------------------------------------------------- scatter */
tpurt_status tpurt_plan_index_add(const tpurt_op_call* c, tpurt_plan* p) {
  p->scratch_bytes += f32_sums_scratch(c);
  return TPURT_OK;
}

tpurt_status tpurt_plan_scatter_add(const tpurt_op_call* c, tpurt_plan* p) {
  p->scratch_bytes += f32_sums_scratch(c);
  return TPURT_OK;
}

tpurt_status tpurt_plan_scatter(const tpurt_op_call* c, tpurt_plan* p) {
  const tpurt_value* r = c->nargs > 4 ? TPURT_ARG(c, scatter, reduce) : NULL;
  if (r && r->kind == TPURT_V_STRING && strcmp(r->s, "add") == 0) p->scratch_bytes += f32_sums_scratch(c);
  return TPURT_OK;
}
typedef enum { RED_NONE, RED_ADD, RED_MUL } reduce_op;

static void combine(char* dst, const char* src, int src_dt, int dt, reduce_op r) {
  if (r == RED_NONE) {
    tpurt_convert_elem(dst, dt, src, src_dt);
  } else if (dt == TPURT_C64) { /* in float, as c10::complex<float> */
    tpurt_c64 a = tpurt_load_c64(dst, dt), b = tpurt_load_c64(src, src_dt);
    tpurt_c64 v = r == RED_ADD ? (tpurt_c64){a.re + b.re, a.im + b.im}
                               : (tpurt_c64){a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
    memcpy(dst, &v, sizeof v);
  } else if (r == RED_ADD) {
    accumulate(dst, src, src_dt, dt, 1.0);
  } else if (tpurt_is_float(dt)) {
    tpurt_store_f64(dst, dt, tpurt_load_f64(dst, dt) * tpurt_load_f64(src, src_dt));
  } else {
    tpurt_store_i64(dst, dt, (int64_t)((uint64_t)tpurt_load_i64(dst, dt) * (uint64_t)tpurt_load_i64(src, src_dt)));
  }
}

/* out = self; then out[i with i[dim] = index[i]] (reduce)= src[i] (or the scalar). */
_Static_assert(TPURT_ARG_scatter_add_self == TPURT_ARG_scatter_self && TPURT_ARG_scatter_add_dim == TPURT_ARG_scatter_dim &&
                   TPURT_ARG_scatter_add_index == TPURT_ARG_scatter_index && TPURT_ARG_scatter_add_src == TPURT_ARG_scatter_src,
               "scatter_into serves scatter and scatter_add");
static tpurt_status scatter_into(const tpurt_op_call* c, reduce_op red) {
  const tpurt_value* srcv = TPURT_ARG(c, scatter, src);
  tpurt_tensor o = at_least_1d(&c->outs[0]), ix = at_least_1d(&TPURT_ARG(c, scatter, index)->t);
  int64_t dim = wrap_dim(TPURT_ARG(c, scatter, dim)->i, c->outs[0].ndim);
  tpurt_status s = check_indices(&ix, 0, o.sizes[dim], (int)dim, NULL, TPURT_ERR_RUNTIME);
  if (!s) s = tpurt_check_scalar_fits(srcv, o.dtype);
  if (!s) s = tpurt_copy_tensor(&c->outs[0], &TPURT_ARG(c, scatter, self)->t);
  if (s || tpurt_numel(&ix) == 0) return s;
  char scalar[8], held[8];
  tpurt_tensor src = tpurt_scalar_tensor(srcv, scalar);
  int scalar_src = srcv->kind != TPURT_V_TENSOR;
  if (!scalar_src) src = at_least_1d(&src);
  if (scalar_src) { /* CPU combines value.to<scalar_t>(): the value rounded to self's dtype first */
    tpurt_convert_elem(held, o.dtype, scalar, src.dtype);
    src.data = held;
    src.dtype = o.dtype;
  }
  tpurt_tensor acc = o;
  if (red == RED_ADD && (s = f32_sums_begin(&o, &acc))) return f32_sums_end(&o, &acc, s);
  int64_t i[TPURT_MAX_DIMS] = {0};
  do {
    int64_t dst[TPURT_MAX_DIMS];
    memcpy(dst, i, sizeof dst);
    dst[dim] = load_index(&ix, i);
    const char* sp = scalar_src ? (const char*)src.data : at(&src, offset_of(&src, i));
    combine(at(&acc, offset_of(&acc, dst)), sp, src.dtype, acc.dtype, red);
  } while (tpurt_next_index(i, ix.sizes, ix.ndim));
  return f32_sums_end(&o, &acc, TPURT_OK);
}

tpurt_status tpurt_kernel_scatter(const tpurt_op_call* c) {
  /* scatter(self, dim, index, src|value, *, reduce="add"|"multiply") */
  reduce_op red = RED_NONE;
  if (c->nargs > 4 && TPURT_ARG(c, scatter, reduce)->kind == TPURT_V_STRING) {
    const char* r = TPURT_ARG(c, scatter, reduce)->s;
    if (strcmp(r, "add") == 0) red = RED_ADD;
    else if (strcmp(r, "multiply") == 0) red = RED_MUL;
    else return tpurt_fail(TPURT_ERR_RUNTIME, "reduce argument must be either add or multiply. Got %s", r);
  }
  return scatter_into(c, red);
}

tpurt_status tpurt_kernel_scatter_add(const tpurt_op_call* c) {
  /* scatter_add(self, dim, index, src) */
  return scatter_into(c, RED_ADD);
}


tpurt_status tpurt_kernel_index_add(const tpurt_op_call* c) {
  /* index_add(self, dim, index, source, *, alpha): out = self; out[index[i]] += alpha*source[i] */
  tpurt_tensor o = at_least_1d(&c->outs[0]), ix = at_least_1d(&TPURT_ARG(c, index_add, index)->t), src = at_least_1d(&TPURT_ARG(c, index_add, source)->t);
  int64_t dim = wrap_dim(TPURT_ARG(c, index_add, dim)->i, c->outs[0].ndim);
  /* as CPU: indices are checked only when a source element moves into a non-empty self */
  tpurt_status s = tpurt_copy_tensor(&c->outs[0], &TPURT_ARG(c, index_add, self)->t);
  if (s || tpurt_numel(&src) == 0 || tpurt_numel(&o) == 0) return s;
  /* CPU's 1-d path raises IndexError, its slice-by-slice path (self.dim() > 1) RuntimeError */
  int sliced = c->outs[0].ndim > 1;
  if ((s = check_indices(&ix, 0, o.sizes[dim], (int)dim, sliced ? NULL : "index out of range in self",
                         sliced ? TPURT_ERR_RUNTIME : TPURT_ERR_INDEX)))
    return s;
  double alpha = c->nargs > 4 ? tpurt_value_f(TPURT_ARG(c, index_add, alpha)) : 1.0;
  int64_t alpha_i = c->nargs > 4 ? tpurt_value_i(TPURT_ARG(c, index_add, alpha)) : 1;
  tpurt_tensor acc;
  s = f32_sums_begin(&o, &acc);
  int64_t i[TPURT_MAX_DIMS] = {0};
  if (!s) do {
    int64_t dst[TPURT_MAX_DIMS];
    memcpy(dst, i, sizeof dst);
    dst[dim] = tpurt_load_i64(at(&ix, i[dim] * ix.strides[0]), ix.dtype);
    char* dp = at(&acc, offset_of(&acc, dst));
    const char* sp = at(&src, offset_of(&src, i));
    if (tpurt_is_float(acc.dtype)) accumulate(dp, sp, src.dtype, acc.dtype, alpha);
    else tpurt_store_i64(dp, acc.dtype, (int64_t)((uint64_t)tpurt_load_i64(dp, acc.dtype) +
                                                   (uint64_t)alpha_i * (uint64_t)tpurt_load_i64(sp, src.dtype)));
  } while (tpurt_next_index(i, src.sizes, src.ndim));
  return f32_sums_end(&o, &acc, s);
}

/* ---------------------------------------------------------------- advanced indexing */
/* self[indices]: each non-None index tensor indexes one self dim (a bool mask of k dims
 * becomes k int64 tensors of its nonzero coordinates). The index tensors broadcast to one
 * shape B; the result is the non-indexed dims with B inserted where the indexed dims were
 * (if they are adjacent) or in front (if not), as NumPy does. */
typedef struct {
  int n;                           /* indexed dims */
  int dim[TPURT_MAX_DIMS];         /* self dim of each */
  tpurt_tensor ix[TPURT_MAX_DIMS]; /* index tensors, broadcast to B (stride 0) */
  int bnd;
  int64_t bshape[TPURT_MAX_DIMS];
  int before;                      /* result dims before the B block */
  int ndim;                        /* result dims */
  int64_t shape[TPURT_MAX_DIMS];
  int64_t* masks;                  /* storage of the mask coordinates */
} index_plan;

/* Coordinates of the nonzero elements of mask (k dims) as k int64 columns of plan->masks. */
static tpurt_status expand_mask(index_plan* p, const tpurt_tensor* mask, const tpurt_tensor* self, int sd,
                                int64_t** cursor) {
  int k = mask->ndim;
  if (sd + k > self->ndim) return tpurt_fail(TPURT_ERR_INDEX, "too many indices for tensor of dimension %d", self->ndim);
  for (int d = 0; d < k; d++)
    if (mask->sizes[d] != self->sizes[sd + d])
      return tpurt_fail(TPURT_ERR_INDEX,
                        "The shape of the mask %s at index %d does not match the shape of the indexed tensor %s at index %d",
                        tpurt_shape_str(mask), d, tpurt_shape_str(self), sd + d);
  int64_t nnz = 0, i[TPURT_MAX_DIMS] = {0};
  if (tpurt_numel(mask))
    do nnz += load_index(mask, i) != 0; while (tpurt_next_index(i, mask->sizes, k));
  int64_t* cols = *cursor;
  *cursor += nnz * k;
  int64_t j = 0;
  memset(i, 0, sizeof i);
  if (tpurt_numel(mask))
    do {
      if (load_index(mask, i) != 0) {
        for (int d = 0; d < k; d++) cols[d * nnz + j] = i[d];
        j++;
      }
    } while (tpurt_next_index(i, mask->sizes, k));
  for (int d = 0; d < k; d++) {
    tpurt_tensor t = {.data = cols + d * nnz, .dtype = TPURT_I64, .ndim = 1, .sizes = {nnz}, .strides = {1}};
    p->dim[p->n] = sd + d;
    p->ix[p->n++] = t;
  }
  return TPURT_OK;
}

static tpurt_status broadcast_indices(index_plan* p) {
  p->bnd = 0;
  for (int k = 0; k < p->n; k++) p->bnd = p->ix[k].ndim > p->bnd ? p->ix[k].ndim : p->bnd;
  for (int d = 0; d < p->bnd; d++) p->bshape[d] = 1;
  for (int k = 0; k < p->n; k++) {
    const tpurt_tensor* t = &p->ix[k];
    for (int d = 0; d < t->ndim; d++) {
      int64_t* b = &p->bshape[p->bnd - t->ndim + d];
      if (*b == 1) *b = t->sizes[d];
      else if (t->sizes[d] != 1 && t->sizes[d] != *b) {
        char shapes[512] = "";
        for (int j = 0; j < p->n; j++) {
          size_t l = strlen(shapes);
          snprintf(shapes + l, sizeof shapes - l, "%s%s", j ? ", " : "", tpurt_shape_str(&p->ix[j]));
        }
        return tpurt_fail(TPURT_ERR_INDEX, "shape mismatch: indexing tensors could not be broadcast together with shapes %s",
                          shapes);
      }
    }
  }
  for (int k = 0; k < p->n; k++) { /* re-describe each index with B's rank, broadcast dims stride 0 */
    tpurt_tensor t = p->ix[k], b = t;
    b.ndim = p->bnd;
    for (int d = 0; d < p->bnd; d++) {
      int td = d - (p->bnd - t.ndim);
      b.sizes[d] = p->bshape[d];
      b.strides[d] = td < 0 || t.sizes[td] == 1 ? 0 : t.strides[td];
    }
    p->ix[k] = b;
  }
  return TPURT_OK;
}

/* Room for the coordinates of every element of the masks in list: as many as a mask of all
 * true needs (which elements are true is data). */
static size_t masks_size(const tpurt_value* list) {
  int64_t cells = 0;
  for (int e = 0; e < list->n; e++) {
    const tpurt_tensor* t = &list->tensors[e];
    if (t->ndim >= 0 && (t->dtype == TPURT_BOOL || t->dtype == TPURT_U8)) cells += tpurt_numel(t) * t->ndim;
  }
  return sizeof(int64_t) * (size_t)(cells ? cells : 1);
}

static tpurt_status plan_index(index_plan* p, const tpurt_tensor* self, const tpurt_value* list) {
  memset(p, 0, sizeof *p);
  p->masks = tpurt_temp(masks_size(list));
  if (!p->masks) return TPURT_ERR_OOM;
  int64_t* cursor = p->masks;
  int sd = 0;
  for (int e = 0; e < list->n; e++) {
    const tpurt_tensor* t = &list->tensors[e];
    if (t->ndim < 0) { sd++; continue; } /* None: a full slice */
    tpurt_status s;
    if (t->dtype == TPURT_BOOL || t->dtype == TPURT_U8) {
      s = expand_mask(p, t, self, sd, &cursor);
      sd += t->ndim;
    } else if (sd >= self->ndim) {
      s = tpurt_fail(TPURT_ERR_INDEX, "too many indices for tensor of dimension %d", self->ndim);
    } else {
      s = TPURT_OK; /* bounds checked below, once the result's size is known */
      p->dim[p->n] = sd++;
      p->ix[p->n++] = *t;
    }
    if (s) return s;
  }
  tpurt_status s = broadcast_indices(p);
  if (s) return s;
  int adjacent = 1;
  for (int k = 1; k < p->n; k++) adjacent &= p->dim[k] == p->dim[k - 1] + 1;
  p->before = adjacent && p->n ? p->dim[0] : 0;
  int r = 0, indexed[TPURT_MAX_DIMS] = {0};
  for (int k = 0; k < p->n; k++) indexed[p->dim[k]] = 1;
  for (int d = 0; d < p->before; d++) p->shape[r++] = self->sizes[d];
  for (int d = 0; d < p->bnd; d++) p->shape[r++] = p->bshape[d];
  for (int d = p->before; d < self->ndim; d++)
    if (!indexed[d]) p->shape[r++] = self->sizes[d];
  p->ndim = r;
  /* As CPU's index kernel, which checks indices as it moves elements: none when the result is
   * empty (a (1, 0) tensor indexed by [0, 1] gives a (2, 0) result, no error). The dim named
   * is the index tensor's position among them. */
  int64_t moved = 1;
  for (int d = 0; d < r; d++) moved *= p->shape[d];
  for (int k = 0; k < p->n && moved; k++) {
    int64_t size = self->sizes[p->dim[k]];
    if (size == 0 && tpurt_numel(&p->ix[k]) > 0) return tpurt_fail(TPURT_ERR_INDEX, "index is out of bounds for dimension with size 0");
    tpurt_status s = check_indices(&p->ix[k], -size, size, k, NULL, TPURT_ERR_INDEX);
    if (s) return s;
  }
  return TPURT_OK;
}

/* Offset in self of the element at result multi-index ri. */
static int64_t plan_offset(const index_plan* p, const tpurt_tensor* self, const int64_t* ri) {
  const int64_t* bi = ri + p->before;
  int64_t off = 0;
  for (int k = 0; k < p->n; k++) {
    int64_t v = load_index(&p->ix[k], bi), size = self->sizes[p->dim[k]];
    off += (v < 0 ? v + size : v) * self->strides[p->dim[k]];
  }
  int indexed[TPURT_MAX_DIMS] = {0};
  for (int k = 0; k < p->n; k++) indexed[p->dim[k]] = 1;
  int r = 0;
  for (int d = 0; d < p->before; d++) off += ri[r++] * self->strides[d];
  r += p->bnd;
  for (int d = p->before; d < self->ndim; d++)
    if (!indexed[d]) off += ri[r++] * self->strides[d];
  return off;
}

tpurt_status tpurt_kernel_index(const tpurt_op_call* c) {
  /* index.Tensor(self, Tensor?[] indices) */
  const tpurt_tensor *self = &TPURT_ARG(c, index, self)->t, *out = tpurt_sizing(c) ? NULL : &c->outs[0];
  index_plan p;
  tpurt_status s = plan_index(&p, self, TPURT_ARG(c, index, indices));
  if (!s && tpurt_sizing(c)) { /* bool masks: PyTorch's meta function cannot size the result */
    tpurt_declare_output(c, 0, self->dtype, p.ndim, p.shape);
    tpurt_temp_release(p.masks);
    return TPURT_OK;
  }
  if (!s && (p.ndim != out->ndim || memcmp(p.shape, out->sizes, sizeof(int64_t) * (size_t)p.ndim)))
    s = tpurt_fail(TPURT_ERR_RUNTIME, "index: result shape %s does not match the planned one", tpurt_shape_str(out));
  if (!s && tpurt_numel(out)) {
    size_t es = esize(out);
    int64_t i[TPURT_MAX_DIMS] = {0};
    do memcpy(at(out, offset_of(out, i)), at(self, plan_offset(&p, self, i)), es);
    while (tpurt_next_index(i, out->sizes, out->ndim));
  }
  tpurt_temp_release(p.masks);
  return s;
}

tpurt_status tpurt_plan_index(const tpurt_op_call* c, tpurt_plan* p) {
  p->scratch_bytes += tpurt_temp_bytes(masks_size(TPURT_ARG(c, index, indices)));
  return TPURT_OK;
}

tpurt_status tpurt_kernel_index_put(const tpurt_op_call* c) {
  /* index_put(self, Tensor?[] indices, values, accumulate[, unsafe]) and its in-place forms:
   * out = self; out[indices] = values (broadcast to the indexing result), or += with
   * accumulate (duplicates add up). values may be a CPU scalar (as CUDA allows). */
  char storage[8];
  tpurt_tensor scalar_vals = tpurt_scalar_tensor(TPURT_ARG(c, index_put, values), storage);
  const tpurt_tensor *out = &c->outs[0], *vals = &scalar_vals;
  int acc = TPURT_ARG(c, index_put, accumulate)->i != 0;
  index_plan p;
  tpurt_status s = plan_index(&p, out, TPURT_ARG(c, index_put, indices));
  if (!s) s = tpurt_copy_tensor(out, &TPURT_ARG(c, index_put, self)->t);
  int64_t n = 1;
  for (int d = 0; d < p.ndim; d++) n *= p.shape[d];
  /* values broadcast to the result shape */
  tpurt_tensor v = *vals, result = {0};
  if (!s) {
    result.ndim = p.ndim;
    memcpy(result.sizes, p.shape, sizeof(int64_t) * (size_t)p.ndim);
  }
  int fits = vals->ndim <= p.ndim;
  if (!s && fits) {
    v.ndim = p.ndim;
    for (int d = 0; d < p.ndim; d++) {
      int vd = d - (p.ndim - vals->ndim);
      v.sizes[d] = p.shape[d];
      v.strides[d] = vd < 0 || vals->sizes[vd] == 1 ? 0 : vals->strides[vd];
      fits &= vd < 0 || vals->sizes[vd] == 1 || vals->sizes[vd] == p.shape[d];
    }
  }
  if (!s && !fits)
    s = tpurt_fail(TPURT_ERR_RUNTIME, "shape mismatch: value tensor of shape %s cannot be broadcast to indexing result "
                   "of shape %s", tpurt_shape_str(vals), tpurt_shape_str(&result));
  if (!s && n) {
    tpurt_tensor sums = *out;
    if (acc) s = f32_sums_begin(out, &sums);
    int64_t i[TPURT_MAX_DIMS] = {0};
    if (!s) do combine(at(&sums, plan_offset(&p, &sums, i)), at(&v, offset_of(&v, i)), v.dtype, sums.dtype,
                       acc ? RED_ADD : RED_NONE);
    while (!s && tpurt_next_index(i, p.shape, p.ndim));
    if (acc) s = f32_sums_end(out, &sums, s);
  }
  tpurt_temp_release(p.masks);
  return s;
}
tpurt_status tpurt_plan_index_put(const tpurt_op_call* c, tpurt_plan* p) {
  p->scratch_bytes += tpurt_temp_bytes(masks_size(TPURT_ARG(c, index_put, indices)));
  if (TPURT_ARG(c, index_put, accumulate)->i) p->scratch_bytes += f32_sums_scratch(c);
  return TPURT_OK;
}

/* ---------------------------------------------------------------- shape kernels */
tpurt_status tpurt_kernel_cat(const tpurt_op_call* c) {
  /* cat(Tensor[] tensors, dim): each input is copied into its slice of out (with dtype
   * promotion); legacy 1-D empty inputs are skipped as on CPU. */
  const tpurt_tensor* out = &c->outs[0];
  const tpurt_value* list = TPURT_ARG(c, cat, tensors);
  int64_t dim = wrap_dim(TPURT_ARG(c, cat, dim)->i, out->ndim), pos = 0;
  for (int k = 0; k < list->n; k++) {
    const tpurt_tensor* t = &list->tensors[k];
    if (t->ndim == 1 && t->sizes[0] == 0 && out->ndim != 1) continue;
    tpurt_tensor slice = *out;
    slice.sizes[dim] = t->sizes[dim];
    slice.data = at(out, pos * out->strides[dim]);
    pos += t->sizes[dim];
    if (tpurt_numel(&slice) == 0) continue;
    tpurt_status s = tpurt_copy_tensor(&slice, t);
    if (s) return s;
  }
  return TPURT_OK;
}

/* out = self with the elements outside the triangle zeroed (zero bits are 0 in every dtype). */
_Static_assert(TPURT_ARG_triu_self == TPURT_ARG_tril_self && TPURT_ARG_triu_diagonal == TPURT_ARG_tril_diagonal,
               "triangle serves tril and triu");
static tpurt_status triangle(const tpurt_op_call* c, int lower) {
  const tpurt_tensor* out = &c->outs[0];
  int64_t diag = TPURT_ARG(c, tril, diagonal)->i;
  tpurt_status s = tpurt_copy_tensor(out, &TPURT_ARG(c, tril, self)->t);
  if (s || tpurt_numel(out) == 0) return s;
  size_t es = esize(out);
  int nd = out->ndim;
  int64_t i[TPURT_MAX_DIMS] = {0};
  do {
    int64_t k = i[nd - 1] - i[nd - 2];
    if (lower ? k > diag : k < diag) memset(at(out, offset_of(out, i)), 0, es);
  } while (tpurt_next_index(i, out->sizes, nd));
  return TPURT_OK;
}
tpurt_status tpurt_kernel_tril(const tpurt_op_call* c) { return triangle(c, 1); }
tpurt_status tpurt_kernel_triu(const tpurt_op_call* c) { return triangle(c, 0); }

tpurt_status tpurt_kernel_arange(const tpurt_op_call* c) {
  /* arange.start_out(start, end, step, *, out): out's i-th element (in logical order, an out=
   * of any shape) = start + i*step (double for floats, as CPU's accumulate type; int64 for
   * integers) */
  const tpurt_tensor* out = &c->outs[0];
  int64_t n = tpurt_numel(out);
  if (tpurt_is_float(out->dtype)) {
    double a = tpurt_value_f(TPURT_ARG(c, arange, start)), step = tpurt_value_f(TPURT_ARG(c, arange, step));
    for (int64_t i = 0; i < n; i++) tpurt_store_f64(at(out, tpurt_element_offset(out, i)), out->dtype, a + (double)i * step);
  } else {
    int64_t a = tpurt_value_i(TPURT_ARG(c, arange, start)), step = tpurt_value_i(TPURT_ARG(c, arange, step));
    for (int64_t i = 0; i < n; i++) tpurt_store_i64(at(out, tpurt_element_offset(out, i)), out->dtype, a + i * step);
  }
  return TPURT_OK;
}

tpurt_status tpurt_kernel_flip(const tpurt_op_call* c) {
  /* flip(self, dims): a reversed view of self (negative strides) copied to out */
  tpurt_tensor v = TPURT_ARG(c, flip, self)->t;
  const tpurt_value* dims = TPURT_ARG(c, flip, dims);
  for (int k = 0; k < dims->n && v.ndim > 0; k++) { /* a 0-dim tensor flips to itself */
    int64_t d = wrap_dim(dims->ints[k], v.ndim);
    if (v.sizes[d] == 0) return TPURT_OK;
    v.data = at(&v, (v.sizes[d] - 1) * v.strides[d]);
    v.strides[d] = -v.strides[d];
  }
  return tpurt_copy_tensor(&c->outs[0], &v);
}

tpurt_status tpurt_kernel_narrow_copy(const tpurt_op_call* c) {
  /* narrow_copy(self, dim, start, length): the meta function made CPU's checks; a view
   * of self copied to out */
  tpurt_tensor v = TPURT_ARG(c, narrow_copy, self)->t;
  int64_t d = wrap_dim(TPURT_ARG(c, narrow_copy, dim)->i, v.ndim), start = TPURT_ARG(c, narrow_copy, start)->i;
  if (start < 0) start += v.sizes[d];
  v.data = at(&v, start * v.strides[d]);
  v.sizes[d] = TPURT_ARG(c, narrow_copy, length)->i;
  return tpurt_copy_tensor(&c->outs[0], &v);
}

static int64_t mod(int64_t a, int64_t n) { return ((a % n) + n) % n; }

tpurt_status tpurt_kernel_roll(const tpurt_op_call* c) {
  /* roll(self, shifts, dims): out[i] = self[i - shift] per rolled dim; without dims the
   * tensor is rolled as if flattened. */
  const tpurt_tensor *self = &TPURT_ARG(c, roll, self)->t, *out = &c->outs[0];
  const tpurt_value *shifts = TPURT_ARG(c, roll, shifts), *dims = TPURT_ARG(c, roll, dims);
  int64_t n = tpurt_numel(out);
  if (n == 0) return TPURT_OK;
  size_t es = esize(out);
  int nd = out->ndim;
  int64_t shift[TPURT_MAX_DIMS] = {0}, flat_shift = 0;
  if (dims->n == 0) flat_shift = mod(shifts->ints[0], n);
  for (int k = 0; k < dims->n; k++) {
    int64_t d = wrap_dim(dims->ints[k], nd);
    shift[d] = mod(shift[d] + shifts->ints[k], out->sizes[d]);
  }
  int64_t i[TPURT_MAX_DIMS] = {0}, flat = 0;
  do {
    int64_t src[TPURT_MAX_DIMS];
    if (dims->n == 0) { /* unravel (flat - shift) in row-major order */
      int64_t f = mod(flat++ - flat_shift, n);
      for (int d = nd - 1; d >= 0; d--) src[d] = f % out->sizes[d], f /= out->sizes[d];
    } else {
      for (int d = 0; d < nd; d++) src[d] = mod(i[d] - shift[d], out->sizes[d]);
    }
    memcpy(at(out, offset_of(out, i)), at(self, offset_of(self, src)), es);
  } while (tpurt_next_index(i, out->sizes, nd));
  return TPURT_OK;
}
