/* Helpers shared by the linalg kernels (linalg.c: LU, Cholesky, QR, triangular solves;
 * linalg_decomp.c: SVD, eigh, lstsq, LDL, matrix_exp, householder_product): strided batched
 * matrix views loaded into and stored from row-major complex-double scratch.
 *
 * Every algorithm computes in complex double whatever the dtype (float32, float64, complex64):
 * one body serves all three. A real matrix is a complex one with zero imaginary parts, on which
 * complex +, -, * and / round exactly as the real operations do (for finite values), and on
 * which LAPACK's complex conventions (conjugate transposes, cabs1 pivoting, zlarfg's
 * reflectors) reduce to its real ones; so real results are those of a real implementation. */
#ifndef TPURT_KERNELS_LINALG_H
#define TPURT_KERNELS_LINALG_H
#include "cmplx.h"
#include <stdio.h>
#include <stdlib.h>

#include "reduce.h"

typedef double _Complex la_t;

/* LAPACK's cabs1 (|re| + |im|): the magnitude izamax and the pivot rules compare */
static inline double la_abs1(la_t z) { return fabs(creal(z)) + fabs(cimag(z)); }
/* |z|^2, without the hypot of cabs */
static inline double la_abs2(la_t z) { return creal(z) * creal(z) + cimag(z) * cimag(z); }
/* z scaled to unit modulus: the phase (1 for 0) */
static inline la_t la_phase(la_t z) { return z == 0 ? 1 : z / cabs(z); }

/* ---------------------------------------------------------------- batched matrix views */
typedef struct mview {
  const tpurt_tensor* t;
  int64_t rows, cols, rs, cs;
  int64_t bst[TPURT_MAX_DIMS]; /* batch strides over the iteration's batch dims */
} mview;

/* Rows and columns of t's trailing matrix (or vector, as one column: vec = 1). */
static inline int64_t la_rows(const tpurt_tensor* t, int vec) { return t->sizes[t->ndim - (vec ? 1 : 2)]; }
static inline int64_t la_cols(const tpurt_tensor* t, int vec) { return vec ? 1 : t->sizes[t->ndim - 1]; }

/* A view of t's trailing matrix (or vector, as one column: vec = 1) with its batch dims
 * broadcast to the nb iteration dims. */
static inline void mv_init(mview* v, const tpurt_tensor* t, int nb, int vec) {
  int nd = t->ndim, tb = vec ? nd - 1 : nd - 2;
  v->t = t;
  v->rows = la_rows(t, vec);
  v->rs = t->strides[vec ? nd - 1 : nd - 2];
  v->cols = la_cols(t, vec);
  v->cs = vec ? 0 : t->strides[nd - 1];
  for (int d = 0; d < nb; d++) {
    int td = d - (nb - tb);
    v->bst[d] = td < 0 || t->sizes[td] == 1 ? 0 : t->strides[td];
  }
}

static inline char* mv_ptr(const mview* v, const int64_t* b, int nb, int64_t i, int64_t j) {
  int64_t o = i * v->rs + j * v->cs;
  for (int d = 0; d < nb; d++) o += b[d] * v->bst[d];
  return (char*)v->t->data + o * (int64_t)tpurt_dtype_size((tpurt_dtype)v->t->dtype);
}

/* How a matrix is read into or written from scratch: as it is, transposed, or conjugate
 * transposed (the same as transposed for real dtypes). */
enum { LA_PLAIN, LA_TRANS, LA_ADJ };

static inline la_t la_load(const void* p, int dtype) {
  if (dtype != TPURT_C64) return tpurt_load_f64(p, dtype);
  const tpurt_c64* z = p;
  return CMPLX(z->re, z->im);
}
/* a real dtype keeps the real part */
static inline void la_store(void* p, int dtype, la_t x) {
  if (dtype != TPURT_C64) {
    tpurt_store_f64(p, dtype, creal(x));
    return;
  }
  tpurt_c64* z = p;
  z->re = (float)creal(x);
  z->im = (float)cimag(x);
}

/* a (row-major) <- op(matrix), op by mode (LA_PLAIN, LA_TRANS, LA_ADJ) */
static inline void mv_load(const mview* v, const int64_t* b, int nb, la_t* a, int mode) {
  for (int64_t i = 0; i < v->rows; i++)
    for (int64_t j = 0; j < v->cols; j++) {
      la_t x = la_load(mv_ptr(v, b, nb, i, j), v->t->dtype);
      if (mode == LA_PLAIN) a[i * v->cols + j] = x;
      else a[j * v->rows + i] = mode == LA_ADJ ? conj(x) : x;
    }
}

/* the matrix <- op(a) for row-major a, op by mode */
static inline void mv_store(const mview* v, const int64_t* b, int nb, const la_t* a, int mode) {
  for (int64_t i = 0; i < v->rows; i++)
    for (int64_t j = 0; j < v->cols; j++) {
      la_t x = mode == LA_PLAIN ? a[i * v->cols + j] : mode == LA_ADJ ? conj(a[j * v->rows + i]) : a[j * v->rows + i];
      la_store(mv_ptr(v, b, nb, i, j), v->t->dtype, x);
    }
}

/* the matrix <- row-major real a: singular values, eigenvalues, residuals (real outputs) */
static inline void mv_store_real(const mview* v, const int64_t* b, int nb, const double* a) {
  for (int64_t i = 0; i < v->rows; i++)
    for (int64_t j = 0; j < v->cols; j++) tpurt_store_f64(mv_ptr(v, b, nb, i, j), v->t->dtype, a[i * v->cols + j]);
}

/* Element of a per-batch output (info, det, sign: t's dims are the trailing batch dims). */
static inline char* batch_ptr(const tpurt_tensor* t, const int64_t* b, int nb) {
  int64_t o = 0;
  for (int d = 0; d < t->ndim; d++) o += b[d + (nb - t->ndim)] * (t->sizes[d] == 1 ? 0 : t->strides[d]);
  return (char*)t->data + o * (int64_t)tpurt_dtype_size((tpurt_dtype)t->dtype);
}
static inline void put_info(const tpurt_tensor* t, const int64_t* b, int nb, int64_t v) {
  tpurt_store_i64(batch_ptr(t, b, nb), t->dtype, v);
}
static inline void put_pivots(const tpurt_tensor* t, const int64_t* b, int nb, const int* piv, int64_t k) {
  mview v;
  mv_init(&v, t, nb, 1);
  for (int64_t i = 0; i < k; i++) tpurt_store_i64(mv_ptr(&v, b, nb, i, 0), t->dtype, piv[i] + 1);
}

/* The iteration batch: t's leading ndim - mdims dims. Returns 0 when it is empty. */
static inline int batch_of(const tpurt_tensor* t, int mdims, int* nb, int64_t* sizes) {
  *nb = t->ndim - mdims;
  for (int d = 0; d < *nb; d++)
    if ((sizes[d] = t->sizes[d]) == 0) return 0;
  return 1;
}
#define FOR_BATCH(b, nb, sizes) \
  for (int64_t b[TPURT_MAX_DIMS] = {0}, _go = 1; _go; _go = (nb) > 0 && tpurt_next_index(b, sizes, nb))

/* CPU's "(Batch element i): " before a failed element's message, i its index in the failing
 * op's batch sizes[0..nd) (the last nd of the iteration's nb dims; a size-1 dim broadcasts);
 * "" when the op is not batched */
static inline void la_batch_element(char* buf, size_t cap, const int64_t* sizes, int nd, const int64_t* b, int nb) {
  buf[0] = 0;
  if (nd <= 0) return;
  int64_t lin = 0;
  for (int d = 0; d < nd; d++) lin = lin * sizes[d] + (sizes[d] == 1 ? 0 : b[nb - nd + d]);
  snprintf(buf, cap, "(Batch element %lld): ", (long long)lin);
}

static inline int is_float_ok(int dt) { return dt == TPURT_F32 || dt == TPURT_F64 || dt == TPURT_C64; }
static inline tpurt_status dtype_check(const char* api, const tpurt_tensor* t) {
  if (is_float_ok(t->dtype)) return TPURT_OK;
  return tpurt_fail(TPURT_ERR_RUNTIME, "%s: Expected a floating point or complex tensor as input. Got %s", api,
                    tpurt_dtype_name((tpurt_dtype)t->dtype));
}

/* ---------------------------------------------------------------- scratch */
/* A kernel's scratch, one temporary whose sizes each kernel gives by a function of its call's
 * descriptors that its plan hook calls too. */
typedef struct scratch {
  la_t* a; /* matrix */
  la_t* b; /* right-hand sides / second matrix */
  int* piv;
} scratch;
typedef struct {
  int64_t na, nb, np; /* elements of a and b, pivots */
} la_dims;

static inline size_t scratch_bytes(la_dims d) {
  return sizeof(la_t) * (size_t)(d.na + d.nb + 2) + sizeof(int) * (size_t)(d.np + 1);
}

static inline tpurt_status scratch_alloc(scratch* s, la_dims d) {
  s->a = tpurt_temp(scratch_bytes(d));
  if (!s->a) return TPURT_ERR_OOM;
  s->b = s->a + d.na + 1;
  s->piv = (int*)(s->b + d.nb + 1);
  return TPURT_OK;
}

/* The plan hook of a kernel whose one temporary is its scratch of DIMS(c). */
#define LA_SCRATCH_PLAN(KERNEL, DIMS)                                             \
  tpurt_status tpurt_plan_##KERNEL(const tpurt_op_call* c, tpurt_plan* p) {      \
    p->scratch_bytes += tpurt_temp_bytes(scratch_bytes(DIMS(c)));                   \
    return TPURT_OK;                                                             \
  }

/* ---------------------------------------------------------------- batches across the pool */
/* One matrix of a batch: its batch index b, ws: the per-thread scratch. Returns 0, or a
 * kernel-defined nonzero code that la_for_batch reports. */
typedef int (*la_matrix_fn)(void* ctx, const int64_t* b, la_t* ws);

/* matrices in the batch bs[0..nb) */
static inline int64_t la_batch_count(int nb, const int64_t* bs) {
  int64_t count = 1;
  for (int d = 0; d < nb; d++) count *= bs[d];
  return count;
}

/* The pool's threads claim chunks of about 64K flops of matrices (tpurt_parallel_sliced), each
 * thread working in a slice of its own of one scratch. */
static inline int64_t la_batch_grain(int64_t flops) { return 1 + (1 << 16) / (flops + 1); }
/* la_t elements from one thread's scratch to the next: ws_elems in whole 64-byte lines */
static inline int64_t la_ws_stride(int64_t ws_elems) { return (ws_elems + 1 + 3) & ~(int64_t)3; }
/* Bytes of the threads' scratch: a slice per worker. */
static inline size_t la_ws_bytes(int64_t count, int64_t ws_elems, int64_t flops) {
  return sizeof(la_t) * (size_t)(tpurt_sliced_workers(count, la_batch_grain(flops)) * la_ws_stride(ws_elems));
}

/* Bytes of la_for_batch's temporaries (its users' plan hooks count them): the per-matrix codes
 * and the threads' scratch. */
static inline int64_t la_batch_bytes(int nb, const int64_t* bs, int64_t ws_elems, int64_t flops) {
  int64_t count = la_batch_count(nb, bs);
  return tpurt_temp_bytes(sizeof(int) * (size_t)count) + tpurt_temp_bytes(la_ws_bytes(count, ws_elems, flops));
}

typedef struct la_batch_job {
  la_matrix_fn fn;
  void* ctx;
  int nb;
  const int64_t* bs;
  int* codes; /* per matrix, in batch order */
} la_batch_job;

/* Matrices [begin, end), in one thread's scratch ws. */
static inline void la_batch_chunk(void* p, void* ws, int64_t begin, int64_t end) {
  la_batch_job* J = (la_batch_job*)p;
  int64_t b[TPURT_MAX_DIMS];
  for (int64_t i = begin; i < end; i++) {
    for (int64_t d = J->nb - 1, r = i; d >= 0; d--) { /* batch index i, row-major over bs */
      b[d] = r % J->bs[d];
      r /= J->bs[d];
    }
    J->codes[i] = J->fn(J->ctx, b, (la_t*)ws);
  }
}

/* fn on every matrix of the batch bs[0..nb), split across the worker pool (each matrix writes
 * only its own outputs, so results do not depend on the split); ws_elems: la_t elements of
 * scratch per matrix; flops: rough work per matrix. Returns the first nonzero code in batch
 * order (its batch index in *at), or 0. */
static inline tpurt_status la_for_batch(int nb, const int64_t* bs, int64_t ws_elems, int64_t flops, la_matrix_fn fn,
                                        void* ctx, int* code, int64_t* at) {
  int64_t count = la_batch_count(nb, bs);
  *code = 0;
  int* codes = tpurt_temp(sizeof(int) * (size_t)count);
  la_t* ws = codes ? tpurt_temp(la_ws_bytes(count, ws_elems, flops)) : NULL;
  if (!ws) return TPURT_ERR_OOM;
  la_batch_job J = {fn, ctx, nb, bs, codes};
  tpurt_parallel_sliced(count, la_batch_grain(flops), ws, sizeof(la_t) * (size_t)la_ws_stride(ws_elems), NULL,
                        la_batch_chunk, &J);
  tpurt_temp_release(ws);
  for (int64_t i = 0; i < count && !*code; i++)
    if (codes[i]) *code = codes[i], *at = i;
  tpurt_temp_release(codes);
  return TPURT_OK;
}

/* ---------------------------------------------------------------- shared factorizations (linalg.c) */
/* geqrf on row-major x (m x n) in place: R on and above the diagonal, the reflectors below it,
 * their factors in tau[0..min(m, n)) (LAPACK's sign conventions). */
void la_householder_qr(la_t* x, int64_t m, int64_t n, la_t* tau);
/* y (row-major rows x r) <- Q y, or Q^H y when adj, for Q = H_0 ... H_{k-1} given by the
 * reflectors below the diagonal of v (row stride ldv) and tau. */
void la_apply_q(const la_t* v, int64_t ldv, const la_t* tau, int64_t k, la_t* y, int64_t rows, int64_t r, int adj);

/* ---------------------------------------------------------------- larger matrices (linalg_householder.c) */
/* From this many columns (of the SVD's tall orientation, or of eigh's matrix) the SVD and eigh
 * reduce by Householder reflectors instead of Jacobi. */
#define LA_HOUSEHOLDER_MIN 24
/* la_svd_bidiag's and la_eigh_tridiag's scratch in la_t elements */
int64_t la_bidiag_scratch(int64_t p, int64_t q);
int64_t la_tridiag_scratch(int64_t n);
/* SVD of row-major w (p x q, p >= q): s[0..q) the singular values (unsorted, >= 0); when vectors,
 * w becomes U diag(s) and vv (q x q) V, so that A = w vv^H and w's columns are orthogonal. */
void la_svd_bidiag(la_t* w, int64_t p, int64_t q, la_t* vv, double* s, int vectors, la_t* ws);
/* Eigen-decomposition of row-major Hermitian a (n x n, both triangles): afterwards a's diagonal
 * holds the eigenvalues (unsorted) and v, when not NULL, the eigenvectors as columns. */
void la_eigh_tridiag(la_t* a, int64_t n, la_t* v, la_t* ws);

#endif
