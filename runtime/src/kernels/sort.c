/* Sorting and selection along one dim: sort, topk, kthvalue, median/nanmedian, mode.
 *
 * Everything here is built on the line driver below (also used by scan.c): each 1-D line
 * of the input along `dim` is loaded into a dense key buffer (double, or int64 for integer
 * and bool inputs so 64-bit values stay exact) and a line function writes the outputs.
 * sort and median order with stable merge sorts on an index array, NaN largest, as CPU
 * (its median breaks ties by index); topk, kthvalue and mode follow CPU's own unstable
 * algorithms step by step (ports below), so tied values give CPU's indices. */
#include <stdlib.h>

#include "reduce.h"
#include "sort.h"

/* ---------------------------------------------------------------- the line driver */
/* A 0-dim tensor is a line of one element; outputs without the dim (keepdim=False) get it
 * back with size 1 so every output is addressed the same way. */
static void with_dim(tpurt_tensor* t, int ndim, int dim) {
  if (t->ndim == ndim) return;
  for (int d = t->ndim; d > dim; d--) {
    t->sizes[d] = t->sizes[d - 1];
    t->strides[d] = t->strides[d - 1];
  }
  t->sizes[dim] = 1;
  t->strides[dim] = 0;
  t->ndim++;
}

/* The driver's one temporary: keys, idx and tmp of n each, and one more element. */
static size_t line_scratch_size(int64_t n) { return sizeof(int64_t) * (size_t)(3 * n + 1); }

int64_t tpurt_lines_bytes(const tpurt_tensor* in, int dim) {
  if (in->ndim == 0) return tpurt_temp_bytes(line_scratch_size(1));
  for (int d = 0; d < in->ndim; d++)
    if (d != dim && in->sizes[d] == 0) return 0; /* no lines: nothing taken */
  return tpurt_temp_bytes(line_scratch_size(in->sizes[dim]));
}

tpurt_status tpurt_lines_run(const tpurt_tensor* in0, int dim, int as_int, const tpurt_tensor* outs0, int nouts,
                             tpurt_line_fn fn, const void* ctx) {
  tpurt_tensor in = *in0, outs[TPURT_MAX_OUTS];
  if (in.ndim == 0) {
    in.ndim = 1;
    in.sizes[0] = 1;
    in.strides[0] = 0;
  }
  for (int o = 0; o < nouts; o++) {
    outs[o] = outs0[o];
    with_dim(&outs[o], in.ndim, dim);
  }
  int64_t sizes[TPURT_MAX_DIMS], idx[TPURT_MAX_DIMS] = {0};
  for (int d = 0; d < in.ndim; d++) {
    sizes[d] = d == dim ? 1 : in.sizes[d];
    if (sizes[d] == 0) return TPURT_OK;
  }
  tpurt_line l = {.n = in.sizes[dim], .as_int = as_int, .nouts = nouts};
  int64_t* scratch = tpurt_temp(line_scratch_size(l.n));
  if (!scratch) return TPURT_ERR_OOM;
  l.keys = scratch;
  l.idx = scratch + l.n;
  l.tmp = scratch + 2 * l.n;
  size_t ies = tpurt_dtype_size((tpurt_dtype)in.dtype);
  for (int o = 0; o < nouts; o++) {
    l.ost[o] = outs[o].strides[dim];
    l.odt[o] = outs[o].dtype;
    l.olen[o] = outs[o].sizes[dim];
  }
  tpurt_status s = TPURT_OK;
  do {
    int64_t off = 0;
    for (int d = 0; d < in.ndim; d++) off += idx[d] * in.strides[d];
    tpurt_red_load(l.keys, as_int, (const char*)in.data + off * (int64_t)ies, in.strides[dim], in.dtype, l.n);
    for (int o = 0; o < nouts; o++) l.out[o] = tpurt_elem_ptr(&outs[o], idx);
    s = fn(&l, ctx);
  } while (!s && tpurt_next_index(idx, sizes, in.ndim));
  tpurt_temp_release(scratch);
  return s;
}

void tpurt_line_put_f(const tpurt_line* l, int o, int64_t j, double v) {
  tpurt_store_f64(l->out[o] + j * l->ost[o] * (int64_t)tpurt_dtype_size((tpurt_dtype)l->odt[o]), l->odt[o], v);
}
void tpurt_line_put_i(const tpurt_line* l, int o, int64_t j, int64_t v) {
  tpurt_store_i64(l->out[o] + j * l->ost[o] * (int64_t)tpurt_dtype_size((tpurt_dtype)l->odt[o]), l->odt[o], v);
}
void tpurt_line_put_key(const tpurt_line* l, int o, int64_t j, int64_t k) {
  if (l->as_int) tpurt_line_put_i(l, o, j, ((const int64_t*)l->keys)[k]);
  else tpurt_line_put_f(l, o, j, ((const double*)l->keys)[k]);
}

/* ---------------------------------------------------------------- stable index sort */
#define F_ASC(a, b) (isnan(b) ? !isnan(a) : (a) < (b)) /* a goes first; NaN is largest */
#define F_DESC(a, b) (isnan(a) ? !isnan(b) : (a) > (b))
#define I_ASC(a, b) ((a) < (b))
#define I_DESC(a, b) ((a) > (b))

/* Insertion sort of runs of 16, then bottom-up merges; a right element only moves ahead
 * of a left one when strictly before it, which keeps the sort stable. */
#define DEF_MSORT(NAME, T, BEFORE)                                                        \
  static void NAME(int64_t* idx, int64_t* tmp, int64_t n, const T* k) {                   \
    for (int64_t lo = 0; lo < n; lo += 16) {                                              \
      int64_t hi = lo + 16 < n ? lo + 16 : n;                                             \
      for (int64_t i = lo + 1; i < hi; i++) {                                             \
        int64_t v = idx[i], j = i;                                                        \
        for (; j > lo && BEFORE(k[v], k[idx[j - 1]]); j--) idx[j] = idx[j - 1];           \
        idx[j] = v;                                                                       \
      }                                                                                   \
    }                                                                                     \
    int64_t *a = idx, *b = tmp;                                                           \
    for (int64_t w = 16; w < n; w *= 2) {                                                 \
      for (int64_t lo = 0; lo < n; lo += 2 * w) {                                         \
        int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;      \
        int64_t i = lo, j = mid, o = lo;                                                  \
        while (i < mid && j < hi) b[o++] = BEFORE(k[a[j]], k[a[i]]) ? a[j++] : a[i++];    \
        while (i < mid) b[o++] = a[i++];                                                  \
        while (j < hi) b[o++] = a[j++];                                                   \
      }                                                                                   \
      int64_t* t = a;                                                                     \
      a = b;                                                                              \
      b = t;                                                                              \
    }                                                                                     \
    if (a != idx) memcpy(idx, a, sizeof(int64_t) * (size_t)n);                            \
  }
DEF_MSORT(msort_f_asc, double, F_ASC)
DEF_MSORT(msort_f_desc, double, F_DESC)
DEF_MSORT(msort_i_asc, int64_t, I_ASC)
DEF_MSORT(msort_i_desc, int64_t, I_DESC)

void tpurt_line_sort(tpurt_line* l, int desc) {
  for (int64_t i = 0; i < l->n; i++) l->idx[i] = i;
  if (l->as_int) (desc ? msort_i_desc : msort_i_asc)(l->idx, l->tmp, l->n, l->keys);
  else (desc ? msort_f_desc : msort_f_asc)(l->idx, l->tmp, l->n, l->keys);
}

/* ---------------------------------------------------------------- line functions */
/* sort / topk: the first olen[0] elements of the line in order */
static tpurt_status sorted_line(tpurt_line* l, const void* ctx) {
  tpurt_line_sort(l, *(const int*)ctx);
  for (int64_t j = 0; j < l->olen[0]; j++) {
    tpurt_line_put_key(l, 0, j, l->idx[j]);
    tpurt_line_put_i(l, 1, j, l->idx[j]);
  }
  return TPURT_OK;
}

/* median (ctx 0): a NaN anywhere is the result (the first one); nanmedian (ctx 1): the
 * lower median of the non-NaN elements, NaN when there are none */
static tpurt_status median_line(tpurt_line* l, const void* ctx) {
  int skip_nan = *(const int*)ctx;
  tpurt_line_sort(l, 0);
  int64_t m = l->n;
  if (!l->as_int)
    while (m > 0 && isnan(((const double*)l->keys)[l->idx[m - 1]])) m--;
  int64_t r;
  if (m == l->n || (skip_nan && m > 0)) r = l->idx[(m - 1) / 2];
  else r = l->idx[skip_nan ? 0 : m]; /* first NaN: stable order keeps NaNs in input order */
  if (l->n == 0) {
    tpurt_line_put_f(l, 0, 0, NAN);
    if (l->nouts > 1) tpurt_line_put_i(l, 1, 0, 0);
    return TPURT_OK;
  }
  tpurt_line_put_key(l, 0, 0, r);
  if (l->nouts > 1) tpurt_line_put_i(l, 1, 0, r);
  return TPURT_OK;
}

/* ---------------------------------------------------------------- topk */
/* CPU's topk runs libstdc++'s std::nth_element + std::sort (or std::partial_sort when
 * k * 64 <= n) on (value, index) pairs, which are not stable: tied values come out in the
 * order those algorithms leave them. The port below follows libstdc++'s code step by step on
 * the index array, so ties and sorted=False orders match CPU's. */
typedef enum {
  STL_ASC,     /* NaN last (topk smallest) */
  STL_DESC,    /* NaN first (topk largest; kthvalue's "greater or NaN") */
  STL_ASC_RAW, /* plain a < b, no order for NaN (mode) */
} stl_order;

typedef struct {
  const double* f;
  const int64_t* i;
  stl_order order;
  tpurt_less_fn less; /* when set, the order instead of the keys */
  const void* ctx;
} stl_cmp;

/* comp(a, b): a goes before b */
static int stl_less(const stl_cmp* c, int64_t a, int64_t b) {
  if (c->less) return c->less(c->ctx, a, b);
  if (c->i) return c->order == STL_DESC ? c->i[a] > c->i[b] : c->i[a] < c->i[b];
  double x = c->f[a], y = c->f[b];
  if (c->order == STL_DESC) return (isnan(x) && !isnan(y)) || x > y;
  if (c->order == STL_ASC) return (!isnan(x) && isnan(y)) || x < y;
  return x < y;
}
static void stl_swap(int64_t* a, int64_t* b) {
  int64_t t = *a;
  *a = *b, *b = t;
}
static int stl_lg(int64_t n) {
  int r = 0;
  while (n > 1) n >>= 1, r++;
  return r;
}
static void stl_adjust_heap(const stl_cmp* c, int64_t* f, int64_t hole, int64_t len, int64_t value) {
  int64_t top = hole, child = hole;
  while (child < (len - 1) / 2) {
    child = 2 * (child + 1);
    if (stl_less(c, f[child], f[child - 1])) child--;
    f[hole] = f[child], hole = child;
  }
  if ((len & 1) == 0 && child == (len - 2) / 2) {
    child = 2 * (child + 1);
    f[hole] = f[child - 1], hole = child - 1;
  }
  for (int64_t parent = (hole - 1) / 2; hole > top && stl_less(c, f[parent], value); parent = (hole - 1) / 2)
    f[hole] = f[parent], hole = parent;
  f[hole] = value;
}
static void stl_make_heap(const stl_cmp* c, int64_t* f, int64_t len) {
  if (len < 2) return;
  for (int64_t parent = (len - 2) / 2;; parent--) {
    stl_adjust_heap(c, f, parent, len, f[parent]);
    if (parent == 0) return;
  }
}
static void stl_pop_heap(const stl_cmp* c, int64_t* f, int64_t len, int64_t* result) {
  int64_t value = *result;
  *result = f[0];
  stl_adjust_heap(c, f, 0, len, value);
}
static void stl_heap_select(const stl_cmp* c, int64_t* f, int64_t middle, int64_t last) {
  stl_make_heap(c, f, middle);
  for (int64_t i = middle; i < last; i++)
    if (stl_less(c, f[i], f[0])) stl_pop_heap(c, f, middle, &f[i]);
}
static void stl_partial_sort(const stl_cmp* c, int64_t* f, int64_t middle, int64_t last) {
  stl_heap_select(c, f, middle, last);
  for (int64_t n = middle; n > 1; n--) stl_pop_heap(c, f, n - 1, &f[n - 1]);
}
/* libstdc++'s is unguarded: its sort guarantees an element to the left stops the scan. With
 * NaN keys (mode compares with a plain <, no order for NaN) that guarantee can fail; the
 * bound `first` keeps this inside the line and changes nothing where libstdc++ is defined. */
static void stl_linear_insert(const stl_cmp* c, const int64_t* first, int64_t* last) {
  int64_t val = *last, *next = last - 1;
  while (last > first && stl_less(c, val, *next)) *last = *next, last = next, next--;
  *last = val;
}
static void stl_insertion_sort(const stl_cmp* c, int64_t* f, int64_t* l) {
  if (f == l) return;
  for (int64_t* i = f + 1; i != l; i++) {
    if (stl_less(c, *i, *f)) {
      int64_t val = *i;
      memmove(f + 1, f, (size_t)(i - f) * sizeof *f);
      *f = val;
    } else {
      stl_linear_insert(c, f, i);
    }
  }
}
static int64_t* stl_partition_pivot(const stl_cmp* c, int64_t* f, int64_t* l) {
  int64_t *a = f + 1, *b = f + (l - f) / 2, *z = l - 1; /* median of three to *f */
  if (stl_less(c, *a, *b)) {
    if (stl_less(c, *b, *z)) stl_swap(f, b);
    else if (stl_less(c, *a, *z)) stl_swap(f, z);
    else stl_swap(f, a);
  } else if (stl_less(c, *a, *z)) stl_swap(f, a);
  else if (stl_less(c, *b, *z)) stl_swap(f, z);
  else stl_swap(f, b);
  int64_t *lo = f + 1, *hi = l;
  for (;;) {
    while (stl_less(c, *lo, *f)) lo++;
    hi--;
    while (stl_less(c, *f, *hi)) hi--;
    if (!(lo < hi)) return lo;
    stl_swap(lo, hi);
    lo++;
  }
}
static void stl_nth_element(const stl_cmp* c, int64_t* f, int64_t* nth, int64_t* l) {
  if (f == l || nth == l) return;
  int depth = stl_lg(l - f) * 2;
  while (l - f > 3) {
    if (depth == 0) {
      stl_heap_select(c, f, nth + 1 - f, l - f);
      stl_swap(f, nth);
      return;
    }
    depth--;
    int64_t* cut = stl_partition_pivot(c, f, l);
    if (cut <= nth) f = cut;
    else l = cut;
  }
  stl_insertion_sort(c, f, l);
}
static void stl_introsort_loop(const stl_cmp* c, int64_t* f, int64_t* l, int depth) {
  while (l - f > 16) {
    if (depth == 0) {
      stl_partial_sort(c, f, l - f, l - f);
      return;
    }
    depth--;
    int64_t* cut = stl_partition_pivot(c, f, l);
    stl_introsort_loop(c, cut, l, depth);
    l = cut;
  }
}
static void stl_sort(const stl_cmp* c, int64_t* f, int64_t* l) {
  if (f == l) return;
  stl_introsort_loop(c, f, l, stl_lg(l - f) * 2);
  if (l - f > 16) {
    stl_insertion_sort(c, f, f + 16);
    for (int64_t* i = f + 16; i != l; i++) stl_linear_insert(c, f, i);
  } else {
    stl_insertion_sort(c, f, l);
  }
}

void tpurt_std_sort(int64_t* idx, int64_t n, tpurt_less_fn less, const void* ctx) {
  stl_cmp c = {NULL, NULL, STL_ASC, less, ctx};
  stl_sort(&c, idx, idx + n);
}

typedef struct {
  int64_t k;
  int largest, sorted;
} topk_ctx;

static tpurt_status topk_line(tpurt_line* l, const void* ctx) {
  const topk_ctx* t = ctx;
  if (t->k == 0) return TPURT_OK;
  stl_cmp c = {l->as_int ? NULL : l->keys, l->as_int ? l->keys : NULL, t->largest ? STL_DESC : STL_ASC, NULL, NULL};
  int64_t* q = l->idx;
  for (int64_t j = 0; j < l->n; j++) q[j] = j;
  if (t->k * 64 <= l->n) {
    stl_partial_sort(&c, q, t->k, l->n);
  } else {
    stl_nth_element(&c, q, q + t->k - 1, q + l->n);
    if (t->sorted) stl_sort(&c, q, q + t->k - 1);
  }
  for (int64_t j = 0; j < t->k; j++) {
    tpurt_line_put_key(l, 0, j, q[j]);
    tpurt_line_put_i(l, 1, j, q[j]);
  }
  return TPURT_OK;
}

/* ---------------------------------------------------------------- kthvalue / mode */
/* kthvalue: CPU's quickselect (Sedgewick's, kept from TH) on (value, index) pairs with
 * "greater, or NaN" as the order; tied values end where its swaps leave them, so the index
 * returned is CPU's. */
static tpurt_status kth_line(tpurt_line* l, const void* ctx) {
  stl_cmp c = {l->as_int ? NULL : l->keys, l->as_int ? l->keys : NULL, STL_DESC, NULL, NULL};
  int64_t *a = l->idx, k = *(const int64_t*)ctx, lo = 0, hi = l->n - 1;
  for (int64_t j = 0; j < l->n; j++) a[j] = j;
  while (hi > lo) {
    if (hi == lo + 1) {
      if (stl_less(&c, a[lo], a[hi])) stl_swap(&a[lo], &a[hi]);
      break;
    }
    stl_swap(&a[(lo + hi) >> 1], &a[lo + 1]); /* median of three to a[lo] */
    if (stl_less(&c, a[lo + 1], a[hi])) stl_swap(&a[lo + 1], &a[hi]);
    if (stl_less(&c, a[lo], a[hi])) stl_swap(&a[lo], &a[hi]);
    if (stl_less(&c, a[lo + 1], a[lo])) stl_swap(&a[lo + 1], &a[lo]);
    int64_t i = lo + 1, j = hi, piv = a[lo];
    for (;;) {
      do i++;
      while (stl_less(&c, piv, a[i]));
      do j--;
      while (stl_less(&c, a[j], piv));
      if (j < i) break;
      stl_swap(&a[i], &a[j]);
    }
    stl_swap(&a[lo], &a[j]);
    if (j <= k) lo = i;
    if (j >= k) hi = j - 1;
  }
  tpurt_line_put_key(l, 0, 0, a[k]);
  tpurt_line_put_i(l, 1, 0, a[k]);
  return TPURT_OK;
}

/* mode: CPU std::sorts (value, index) pairs by value with a plain <, then takes the last
 * element of the first longest run of equal values (NaN equals nothing); the index is
 * wherever std::sort put that element, so the port of libstdc++'s sort above decides it. */
static tpurt_status mode_line(tpurt_line* l, const void* ctx) {
  (void)ctx;
  stl_cmp c = {l->as_int ? NULL : l->keys, l->as_int ? l->keys : NULL, STL_ASC_RAW, NULL, NULL};
  int64_t* a = l->idx;
  for (int64_t j = 0; j < l->n; j++) a[j] = j;
  stl_sort(&c, a, a + l->n);
  const double* f = l->keys;
  const int64_t* iv = l->keys;
  int64_t best = -1, best_n = 0, run = 0;
  for (int64_t j = 0; j < l->n; j++) {
    run++;
    int64_t x = a[j], y = j + 1 < l->n ? a[j + 1] : -1;
    if (y < 0 || (l->as_int ? iv[x] != iv[y] : f[x] != f[y])) {
      if (run > best_n) best_n = run, best = x;
      run = 0;
    }
  }
  if (best < 0) return TPURT_OK;
  tpurt_line_put_key(l, 0, 0, best);
  tpurt_line_put_i(l, 1, 0, best);
  return TPURT_OK;
}

/* ---------------------------------------------------------------- kernels */
#define SELF_AT_SORTS(k) (TPURT_ARG_##k##_self == TPURT_ARG_sort_self)
_Static_assert(SELF_AT_SORTS(sort_stable) && SELF_AT_SORTS(topk) && SELF_AT_SORTS(kthvalue) && SELF_AT_SORTS(median_dim) &&
                   SELF_AT_SORTS(nanmedian_dim) && SELF_AT_SORTS(mode),
               "dim_of and sort_run read self at sort's index");
#undef SELF_AT_SORTS
static tpurt_status dim_of(const tpurt_op_call* c, int arg, int* dim) {
  return tpurt_wrap_dim(c->args[arg].i, TPURT_ARG(c, sort, self)->t.ndim, dim);
}
static int int_keys(const tpurt_tensor* t) { return !tpurt_is_float(t->dtype); }

/* Every sort here is stable, which unstable sorts may be too. */
static tpurt_status sort_run(const tpurt_op_call* c, int dim_arg, int desc) {
  int dim;
  tpurt_status s = dim_of(c, dim_arg, &dim);
  if (s) return s;
  const tpurt_tensor* in = &TPURT_ARG(c, sort, self)->t;
  return tpurt_lines_run(in, dim, int_keys(in), c->outs, 2, sorted_line, &desc);
}
tpurt_status tpurt_kernel_sort(const tpurt_op_call* c) { /* sort(self, dim, descending) */
  return sort_run(c, TPURT_ARG_sort_dim, (int)TPURT_ARG(c, sort, descending)->i);
}
tpurt_status tpurt_kernel_sort_stable(const tpurt_op_call* c) { /* sort.stable(self, *, stable?, dim, descending) */
  return sort_run(c, TPURT_ARG_sort_stable_dim, (int)TPURT_ARG(c, sort_stable, descending)->i);
}

tpurt_status tpurt_kernel_topk(const tpurt_op_call* c) {
  /* topk(self, k, dim, largest, sorted): CPU's selection, ties and unsorted order included */
  const tpurt_tensor* in = &TPURT_ARG(c, topk, self)->t;
  int dim;
  tpurt_status s = dim_of(c, TPURT_ARG_topk_dim, &dim);
  if (s) return s;
  int64_t n = in->ndim ? in->sizes[dim] : 1, k = TPURT_ARG(c, topk, k)->i;
  if (k < 0 || k > n) return tpurt_fail(TPURT_ERR_RUNTIME, "selected index k out of range");
  topk_ctx t = {k, (int)TPURT_ARG(c, topk, largest)->i, (int)TPURT_ARG(c, topk, sorted)->i};
  return tpurt_lines_run(in, dim, int_keys(in), c->outs, 2, topk_line, &t);
}

tpurt_status tpurt_kernel_kthvalue(const tpurt_op_call* c) {
  /* kthvalue(self, k, dim, keepdim) */
  const tpurt_tensor* in = &TPURT_ARG(c, kthvalue, self)->t;
  int dim;
  tpurt_status s = dim_of(c, TPURT_ARG_kthvalue_dim, &dim);
  if (s) return s;
  int64_t n = in->ndim ? in->sizes[dim] : 1, k = TPURT_ARG(c, kthvalue, k)->i;
  if (k < 1 || k > n)
    return tpurt_fail(TPURT_ERR_INDEX, "kthvalue(): selected number k out of range for dimension %d", dim);
  int64_t r = k - 1;
  return tpurt_lines_run(in, dim, int_keys(in), c->outs, 2, kth_line, &r);
}

/* median(self) / nanmedian(self): the whole tensor as one line, via a dense copy */
_Static_assert(TPURT_ARG_nanmedian_self == TPURT_ARG_median_self, "median_all serves median and nanmedian");
static size_t median_flat_size(int64_t n) { return sizeof(int64_t) * (size_t)(n + 1); }
static tpurt_status median_all(const tpurt_op_call* c, int skip_nan) {
  const tpurt_tensor* in = &TPURT_ARG(c, median, self)->t;
  int64_t n = tpurt_numel(in);
  tpurt_tensor flat = {.dtype = int_keys(in) ? TPURT_I64 : TPURT_F64, .ndim = in->ndim};
  memcpy(flat.sizes, in->sizes, sizeof flat.sizes);
  int64_t st = 1;
  for (int d = in->ndim - 1; d >= 0; st *= in->sizes[d], d--) flat.strides[d] = st;
  flat.data = tpurt_temp(median_flat_size(n));
  if (!flat.data) return TPURT_ERR_OOM;
  tpurt_status s = tpurt_copy_tensor(&flat, in);
  tpurt_tensor line = {.data = flat.data, .dtype = flat.dtype, .ndim = 1, .sizes = {n}, .strides = {1}};
  if (!s) s = tpurt_lines_run(&line, 0, int_keys(in), c->outs, 1, median_line, &skip_nan);
  tpurt_temp_release(flat.data);
  return s;
}

_Static_assert(TPURT_ARG_nanmedian_dim_self == TPURT_ARG_median_dim_self && TPURT_ARG_nanmedian_dim_dim == TPURT_ARG_median_dim_dim,
               "median_dim serves median.dim and nanmedian.dim");
static tpurt_status median_dim(const tpurt_op_call* c, int skip_nan) {
  const tpurt_tensor* in = &TPURT_ARG(c, median_dim, self)->t;
  int dim;
  tpurt_status s = dim_of(c, TPURT_ARG_median_dim_dim, &dim);
  if (s) return s;
  if (in->ndim && in->sizes[dim] == 0)
    return tpurt_fail(TPURT_ERR_INDEX, "median(): Expected reduction dim %d to have non-zero size.", dim);
  return tpurt_lines_run(in, dim, int_keys(in), c->outs, 2, median_line, &skip_nan);
}

tpurt_status tpurt_kernel_median(const tpurt_op_call* c) { return median_all(c, 0); }
tpurt_status tpurt_kernel_nanmedian(const tpurt_op_call* c) { return median_all(c, 1); }
tpurt_status tpurt_kernel_median_dim(const tpurt_op_call* c) { return median_dim(c, 0); }
tpurt_status tpurt_kernel_nanmedian_dim(const tpurt_op_call* c) { return median_dim(c, 1); }

tpurt_status tpurt_kernel_mode(const tpurt_op_call* c) {
  /* mode(self, dim, keepdim) */
  const tpurt_tensor* in = &TPURT_ARG(c, mode, self)->t;
  int dim;
  tpurt_status s = dim_of(c, TPURT_ARG_mode_dim, &dim);
  if (s) return s;
  return tpurt_lines_run(in, dim, int_keys(in), c->outs, 2, mode_line, NULL);
}

/* ---------------------------------------------------------------- plan hooks */
/* The line driver's scratch over self along the dim argument. */
static tpurt_status plan_lines(const tpurt_op_call* c, int dim_arg, tpurt_plan* p) {
  int dim;
  tpurt_status s = dim_of(c, dim_arg, &dim);
  if (!s) p->scratch_bytes += tpurt_lines_bytes(&TPURT_ARG(c, sort, self)->t, dim);
  return s;
}
tpurt_status tpurt_plan_sort(const tpurt_op_call* c, tpurt_plan* p) { return plan_lines(c, TPURT_ARG_sort_dim, p); }
tpurt_status tpurt_plan_sort_stable(const tpurt_op_call* c, tpurt_plan* p) { return plan_lines(c, TPURT_ARG_sort_stable_dim, p); }
tpurt_status tpurt_plan_topk(const tpurt_op_call* c, tpurt_plan* p) { return plan_lines(c, TPURT_ARG_topk_dim, p); }
tpurt_status tpurt_plan_kthvalue(const tpurt_op_call* c, tpurt_plan* p) { return plan_lines(c, TPURT_ARG_kthvalue_dim, p); }
tpurt_status tpurt_plan_median_dim(const tpurt_op_call* c, tpurt_plan* p) { return plan_lines(c, TPURT_ARG_median_dim_dim, p); }
tpurt_status tpurt_plan_nanmedian_dim(const tpurt_op_call* c, tpurt_plan* p) { return plan_lines(c, TPURT_ARG_nanmedian_dim_dim, p); }
tpurt_status tpurt_plan_mode(const tpurt_op_call* c, tpurt_plan* p) { return plan_lines(c, TPURT_ARG_mode_dim, p); }

/* median_all's dense copy, and the driver's scratch over it as one line */
static tpurt_status plan_median_all(const tpurt_op_call* c, tpurt_plan* p) {
  int64_t n = tpurt_numel(&TPURT_ARG(c, median, self)->t);
  tpurt_tensor line = {.ndim = 1, .sizes = {n}};
  p->scratch_bytes += tpurt_temp_bytes(median_flat_size(n)) + tpurt_lines_bytes(&line, 0);
  return TPURT_OK;
}
tpurt_status tpurt_plan_median(const tpurt_op_call* c, tpurt_plan* p) { return plan_median_all(c, p); }
tpurt_status tpurt_plan_nanmedian(const tpurt_op_call* c, tpurt_plan* p) { return plan_median_all(c, p); }
