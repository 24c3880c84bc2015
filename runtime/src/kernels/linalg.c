/* Dense linear algebra on batches of small matrices, in complex double whatever the dtype (see
 * linalg.h): LU with partial pivoting (getrf's conventions: 1-based int32 pivots chosen by
 * cabs1, info = first exactly-zero pivot), LU solves, det/slogdet, inverse, solve, Cholesky,
 * Householder QR (geqrf's sign conventions) with geqrf/ormqr themselves, triangular solves.
 *
 * det and slogdet factor A^T instead of A when A is real and contiguous, as ATen does (their LU
 * and pivots outputs feed the backward's lu_solve with adjoint=!that); solve and inv factor A.
 * X op(A) = B is solved as op(A)^H X^H = B^H. */
#include <stdlib.h>

#include "linalg.h"

/* ---------------------------------------------------------------- factorizations */
/* In-place LU of row-major a (m x n) with row pivots piv[0..min(m,n)) (0-based, swaps in
 * order); returns getrf's info: 1-based index of the first exactly-zero pivot, else 0. */
static int64_t getrf(la_t* a, int64_t m, int64_t n, int* piv) {
  int64_t k = m < n ? m : n, info = 0;
  for (int64_t j = 0; j < k; j++) {
    int64_t p = j;
    for (int64_t i = j + 1; i < m; i++)
      if (la_abs1(a[i * n + j]) > la_abs1(a[p * n + j])) p = i;
    piv[j] = (int)p;
    if (a[p * n + j] != 0) {
      if (p != j)
        for (int64_t c = 0; c < n; c++) {
          la_t t = a[j * n + c];
          a[j * n + c] = a[p * n + c];
          a[p * n + c] = t;
        }
      for (int64_t i = j + 1; i < m; i++) a[i * n + j] /= a[j * n + j];
    } else if (!info) {
      info = j + 1;
    }
    for (int64_t i = j + 1; i < m; i++) {
      la_t l = a[i * n + j];
      if (l != 0)
        for (int64_t c = j + 1; c < n; c++) a[i * n + c] -= l * a[j * n + c];
    }
  }
  return info;
}

/* Solve (P L U) X = B (adjoint: (P L U)^H X = B) in place; b is row-major n x r. */
static void getrs(const la_t* lu, const int* piv, int64_t n, la_t* b, int64_t r, int adjoint) {
#define SWAP_ROWS(x, y)                     \
  for (int64_t c = 0; c < r; c++) {         \
    la_t t = b[(x) * r + c];                \
    b[(x) * r + c] = b[(y) * r + c];        \
    b[(y) * r + c] = t;                     \
  }
  if (!adjoint) {
    for (int64_t k = 0; k < n; k++)
      if (piv[k] != k) SWAP_ROWS(k, piv[k])
    for (int64_t i = 0; i < n; i++) /* L y = Pb, unit diagonal */
      for (int64_t k = 0; k < i; k++)
        for (int64_t c = 0; c < r; c++) b[i * r + c] -= lu[i * n + k] * b[k * r + c];
    for (int64_t i = n - 1; i >= 0; i--) /* U x = y */
      for (int64_t c = 0; c < r; c++) {
        la_t s = b[i * r + c];
        for (int64_t k = i + 1; k < n; k++) s -= lu[i * n + k] * b[k * r + c];
        b[i * r + c] = s / lu[i * n + i];
      }
  } else {
    for (int64_t i = 0; i < n; i++) /* U^H y = b */
      for (int64_t c = 0; c < r; c++) {
        la_t s = b[i * r + c];
        for (int64_t k = 0; k < i; k++) s -= conj(lu[k * n + i]) * b[k * r + c];
        b[i * r + c] = s / conj(lu[i * n + i]);
      }
    for (int64_t i = n - 1; i >= 0; i--) /* L^H z = y */
      for (int64_t k = i + 1; k < n; k++)
        for (int64_t c = 0; c < r; c++) b[i * r + c] -= conj(lu[k * n + i]) * b[k * r + c];
    for (int64_t k = n - 1; k >= 0; k--)
      if (piv[k] != k) SWAP_ROWS(k, piv[k])
  }
#undef SWAP_ROWS
}

/* ---------------------------------------------------------------- LU family */
/* scratch: the matrix and its pivots */
static la_dims lu_factor_dims(const tpurt_op_call* c) {
  const tpurt_tensor* A = &TPURT_ARG(c, lu_factor_ex, A)->t;
  int64_t m = la_rows(A, 0), n = la_cols(A, 0);
  return (la_dims){m * n, 0, m < n ? m : n};
}
LA_SCRATCH_PLAN(lu_factor_ex, lu_factor_dims)

tpurt_status tpurt_kernel_lu_factor_ex(const tpurt_op_call* c) {
  /* linalg_lu_factor_ex(A, *, pivot, check_errors) -> (LU, pivots, info) */
  const tpurt_tensor* A = &TPURT_ARG(c, lu_factor_ex, A)->t;
  tpurt_status st = dtype_check("linalg.lu_factor", A);
  if (st) return st;
  if (!TPURT_ARG(c, lu_factor_ex, pivot)->i) return tpurt_fail(TPURT_ERR_RUNTIME, "linalg.lu_factor: LU without pivoting is not implemented on the CPU");
  int nb;
  int64_t bs[TPURT_MAX_DIMS];
  if (!batch_of(A, 2, &nb, bs)) return TPURT_OK;
  mview a, lu;
  mv_init(&a, A, nb, 0);
  mv_init(&lu, &c->outs[0], nb, 0);
  int64_t m = a.rows, n = a.cols, k = m < n ? m : n;
  scratch s = {0};
  if ((st = scratch_alloc(&s, lu_factor_dims(c)))) return st;
  FOR_BATCH(b, nb, bs) {
    mv_load(&a, b, nb, s.a, LA_PLAIN);
    int64_t info = getrf(s.a, m, n, s.piv);
    mv_store(&lu, b, nb, s.a, LA_PLAIN);
    put_pivots(&c->outs[1], b, nb, s.piv, k);
    put_info(&c->outs[2], b, nb, info);
    if (info && TPURT_ARG(c, lu_factor_ex, check_errors)->i) {
      char at[48];
      la_batch_element(at, sizeof at, bs, nb, b, nb);
      st = tpurt_fail(TPURT_ERR_RUNTIME, "torch.linalg.lu_factor_ex: %sU[%lld,%lld] is zero and using it on lu_solve would "
                      "result in a division by zero. If you still want to perform the factorization, consider calling "
                      "linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)", at, (long long)info, (long long)info);
      break;
    }
  }
  tpurt_temp_release(s.a);
  return st;
}

/* scratch of unpacking the LU factorization `lu`: the factorization, lu_unpack_one's w, and
 * pivots followed by its perm */
static la_dims unpack_dims(const tpurt_tensor* lu) {
  int64_t m = la_rows(lu, 0), n = la_cols(lu, 0);
  return (la_dims){m * n, m * (m > n ? m : n), (m < n ? m : n) + m};
}
static la_dims lu_dims(const tpurt_op_call* c) { return unpack_dims(&TPURT_ARG(c, lu, A)->t); }
static la_dims lu_unpack_dims(const tpurt_op_call* c) { return unpack_dims(&TPURT_ARG(c, lu_unpack, LU_data)->t); }
LA_SCRATCH_PLAN(lu, lu_dims)
LA_SCRATCH_PLAN(lu_unpack, lu_unpack_dims)

/* P, L, U of a row-major LU factorization (P/L/U views with no elements are skipped);
 * w: scratch of m * max(m, n) elements, perm: m ints */
static void lu_unpack_one(const la_t* lu, const int* piv, int64_t m, int64_t n, const mview* P, const mview* L,
                          const mview* U, const int64_t* b, int nb, la_t* w, int* perm) {
  int64_t k = m < n ? m : n;
  if (tpurt_numel(P->t)) {
    for (int64_t i = 0; i < m; i++) perm[i] = (int)i;
    for (int64_t j = 0; j < k; j++) {
      int t = perm[j];
      perm[j] = perm[piv[j]];
      perm[piv[j]] = t;
    }
    /* row i of L U is row perm[i] of A: P[perm[i], i] = 1 */
    for (int64_t i = 0; i < m * m; i++) w[i] = 0;
    for (int64_t i = 0; i < m; i++) w[perm[i] * m + i] = 1;
    mv_store(P, b, nb, w, LA_PLAIN);
  }
  if (tpurt_numel(L->t)) {
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < k; j++) w[i * k + j] = j < i ? lu[i * n + j] : j == i ? 1 : 0;
    mv_store(L, b, nb, w, LA_PLAIN);
  }
  if (tpurt_numel(U->t)) {
    for (int64_t i = 0; i < k; i++)
      for (int64_t j = 0; j < n; j++) w[i * n + j] = j >= i ? lu[i * n + j] : 0;
    mv_store(U, b, nb, w, LA_PLAIN);
  }
}

tpurt_status tpurt_kernel_lu(const tpurt_op_call* c) {
  /* linalg_lu(A, *, pivot) -> (P [m, m], L [m, k], U [k, n]) with A = P L U */
  const tpurt_tensor* A = &TPURT_ARG(c, lu, A)->t;
  tpurt_status st = dtype_check("linalg.lu", A);
  if (st) return st;
  if (!TPURT_ARG(c, lu, pivot)->i) return tpurt_fail(TPURT_ERR_RUNTIME, "linalg.lu_factor: LU without pivoting is not implemented on the CPU");
  int nb;
  int64_t bs[TPURT_MAX_DIMS];
  if (!batch_of(A, 2, &nb, bs)) return TPURT_OK;
  mview a, P, L, U;
  mv_init(&a, A, nb, 0);
  mv_init(&P, &c->outs[0], nb, 0);
  mv_init(&L, &c->outs[1], nb, 0);
  mv_init(&U, &c->outs[2], nb, 0);
  int64_t m = a.rows, n = a.cols, k = m < n ? m : n;
  scratch s = {0};
  if ((st = scratch_alloc(&s, lu_dims(c)))) return st;
  FOR_BATCH(b, nb, bs) {
    mv_load(&a, b, nb, s.a, LA_PLAIN);
    getrf(s.a, m, n, s.piv);
    lu_unpack_one(s.a, s.piv, m, n, &P, &L, &U, b, nb, s.b, s.piv + k);
  }
  tpurt_temp_release(s.a);
  return TPURT_OK;
}

tpurt_status tpurt_kernel_lu_unpack(const tpurt_op_call* c) {
  /* lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots) -> (P, L, U); the outputs
   * not asked for have no elements */
  const tpurt_tensor* LU = &TPURT_ARG(c, lu_unpack, LU_data)->t;
  tpurt_status st = dtype_check("lu_unpack", LU);
  if (st) return st;
  int nb;
  int64_t bs[TPURT_MAX_DIMS];
  if (!batch_of(LU, 2, &nb, bs)) return TPURT_OK;
  mview lu, pv, P, L, U;
  mv_init(&lu, LU, nb, 0);
  mv_init(&pv, &TPURT_ARG(c, lu_unpack, LU_pivots)->t, nb, 1);
  mview* outs[3] = {&P, &L, &U};
  for (int o = 0; o < 3; o++) { /* an empty output may have fewer dims: give it a harmless view */
    if (tpurt_numel(&c->outs[o])) mv_init(outs[o], &c->outs[o], nb, 0);
    else *outs[o] = (mview){.t = &c->outs[o]};
  }
  int64_t m = lu.rows, n = lu.cols, k = m < n ? m : n;
  scratch s = {0};
  if ((st = scratch_alloc(&s, lu_unpack_dims(c)))) return st;
  FOR_BATCH(b, nb, bs) {
    mv_load(&lu, b, nb, s.a, LA_PLAIN);
    for (int64_t i = 0; i < k; i++) {
      int64_t p = tpurt_load_i64(mv_ptr(&pv, b, nb, i, 0), pv.t->dtype) - 1;
      if (p < 0 || p >= m) {
        st = tpurt_fail(TPURT_ERR_RUNTIME, "torch.lu_unpack: pivots must be in range [1, %lld], got %lld",
                        (long long)m, (long long)p + 1);
        break;
      }
      s.piv[i] = (int)p;
    }
    if (st) break;
    lu_unpack_one(s.a, s.piv, m, n, &P, &L, &U, b, nb, s.b, s.piv + k);
  }
  tpurt_temp_release(s.a);
  return st;
}

/* scratch: LU, the right-hand sides (as op(B) when solving from the right), the pivots */
static la_dims lu_solve_dims(const tpurt_op_call* c) {
  const tpurt_tensor* B = &TPURT_ARG(c, lu_solve, B)->t;
  int64_t n = la_rows(&TPURT_ARG(c, lu_solve, LU)->t, 0);
  int64_t r = TPURT_ARG(c, lu_solve, left)->i ? la_cols(B, 0) : la_rows(B, 0);
  return (la_dims){n * n, n * r, n};
}
LA_SCRATCH_PLAN(lu_solve, lu_solve_dims)

tpurt_status tpurt_kernel_lu_solve(const tpurt_op_call* c) {
  /* linalg_lu_solve(LU, pivots, B, *, left, adjoint) */
  const tpurt_tensor *LU = &TPURT_ARG(c, lu_solve, LU)->t, *out = &c->outs[0];
  int left = (int)TPURT_ARG(c, lu_solve, left)->i, adjoint = (int)TPURT_ARG(c, lu_solve, adjoint)->i;
  int nb;
  int64_t bs[TPURT_MAX_DIMS];
  if (!batch_of(out, 2, &nb, bs)) return TPURT_OK;
  mview lu, piv, B, X;
  mv_init(&lu, LU, nb, 0);
  mv_init(&piv, &TPURT_ARG(c, lu_solve, pivots)->t, nb, 1);
  mv_init(&B, &TPURT_ARG(c, lu_solve, B)->t, nb, 0);
  mv_init(&X, out, nb, 0);
  int64_t n = lu.rows, r = left ? B.cols : B.rows;
  scratch s = {0};
  tpurt_status st = scratch_alloc(&s, lu_solve_dims(c));
  if (st) return st;
  FOR_BATCH(b, nb, bs) {
    mv_load(&lu, b, nb, s.a, LA_PLAIN);
    for (int64_t i = 0; i < n; i++) s.piv[i] = (int)tpurt_load_i64(mv_ptr(&piv, b, nb, i, 0), piv.t->dtype) - 1;
    mv_load(&B, b, nb, s.b, left ? LA_PLAIN : LA_ADJ);
    getrs(s.a, s.piv, n, s.b, r, left ? adjoint : !adjoint);
    mv_store(&X, b, nb, s.b, left ? LA_PLAIN : LA_ADJ);
  }
  tpurt_temp_release(s.a);
  return TPURT_OK;
}

/* scratch: the matrix and its pivots */
static la_dims det_dims(const tpurt_op_call* c) {
  int64_t n = la_rows(&TPURT_ARG(c, det, A)->t, 0);
  return (la_dims){n * n, 0, n};
}
LA_SCRATCH_PLAN(det, det_dims)
LA_SCRATCH_PLAN(slogdet, det_dims)

/* det and slogdet: LU of A^T when A is real and contiguous (ATen's choice), then the diagonal;
 * the sign is the product of the pivots' phases (+-1 for real A) */
_Static_assert(TPURT_ARG_slogdet_A == TPURT_ARG_det_A, "det_family serves det and slogdet");
static tpurt_status det_family(const tpurt_op_call* c, int slog) {
  const tpurt_tensor* A = &TPURT_ARG(c, det, A)->t;
  tpurt_status st = dtype_check(slog ? "linalg.slogdet" : "linalg.det", A);
  if (st) return st;
  int nb, trans = tpurt_is_contiguous(A) && A->dtype != TPURT_C64;
  int64_t bs[TPURT_MAX_DIMS];
  if (!batch_of(A, 2, &nb, bs)) return TPURT_OK;
  const tpurt_tensor *o_lu = &c->outs[slog ? 2 : 1], *o_piv = &c->outs[slog ? 3 : 2];
  mview a, lu;
  mv_init(&a, A, nb, 0);
  mv_init(&lu, o_lu, nb, 0);
  int64_t n = a.rows;
  scratch s = {0};
  if ((st = scratch_alloc(&s, det_dims(c)))) return st;
  FOR_BATCH(b, nb, bs) {
    mv_load(&a, b, nb, s.a, trans ? LA_TRANS : LA_PLAIN);
    getrf(s.a, n, n, s.piv);
    mv_store(&lu, b, nb, s.a, LA_PLAIN);
    put_pivots(o_piv, b, nb, s.piv, n);
    la_t det = 1, sign = 1;
    double logabs = 0;
    for (int64_t i = 0; i < n; i++) {
      la_t u = s.a[i * n + i];
      det *= u;
      logabs += log(cabs(u));
      sign *= la_phase(u);
      if (s.piv[i] != i) {
        det = -det;
        sign = -sign;
      }
      if (u == 0) sign = 0;
    }
    if (slog) {
      la_store(batch_ptr(&c->outs[0], b, nb), c->outs[0].dtype, sign);
      tpurt_store_f64(batch_ptr(&c->outs[1], b, nb), c->outs[1].dtype, sign == 0 ? -INFINITY : logabs);
    } else {
      la_store(batch_ptr(&c->outs[0], b, nb), c->outs[0].dtype, det);
    }
  }
  tpurt_temp_release(s.a);
  return TPURT_OK;
}
tpurt_status tpurt_kernel_det(const tpurt_op_call* c) { return det_family(c, 0); }
tpurt_status tpurt_kernel_slogdet(const tpurt_op_call* c) { return det_family(c, 1); }

/* ---------------------------------------------------------------- solve / inverse */
/* scratch: A, X (as op(X) when solving from the right), the pivots; X is a batch of vectors when
 * it has a dim fewer than A */
static la_dims solve_dims(const tpurt_op_call* c, const tpurt_tensor* o_x, int left) {
  const tpurt_tensor* A = &TPURT_ARG(c, solve_ex, A)->t;
  int vec = o_x->ndim == A->ndim - 1;
  int64_t n = la_rows(A, 0), r = left ? la_cols(o_x, vec) : la_rows(o_x, vec);
  return (la_dims){n * n, n * r, n};
}
static la_dims solve_ex_dims(const tpurt_op_call* c) {
  return solve_dims(c, &c->outs[0], (int)TPURT_ARG(c, solve_ex, left)->i);
}
static la_dims inv_ex_dims(const tpurt_op_call* c) { return solve_dims(c, &c->outs[0], 1); }
LA_SCRATCH_PLAN(solve_ex, solve_ex_dims)
LA_SCRATCH_PLAN(inv_ex, inv_ex_dims)

/* CPU's error for a singular A (batched: the element's index in info) */
static tpurt_status singular_fail(const char* api, int ident, int64_t info, const tpurt_tensor* o_info,
                                  const int64_t* b, int nb) {
  char at[48];
  la_batch_element(at, sizeof at, o_info->sizes, o_info->ndim, b, nb);
  return ident ? tpurt_fail(TPURT_ERR_LINALG, "%s: %sThe diagonal element %lld is zero, the inversion could not be "
                            "completed because the input matrix is singular.", api, at, (long long)info)
               : tpurt_fail(TPURT_ERR_LINALG, "%s: %sThe solver failed because the input matrix is singular.", api, at);
}

/* solve's outputs when X has no elements: A's LU, pivots and info over A's own batch */
static tpurt_status solve_factor_only(const tpurt_tensor* A, const tpurt_tensor* o_lu, const tpurt_tensor* o_piv,
                                      const tpurt_tensor* o_info, int check, int ident, const char* api,
                                      const scratch* s) {
  int nb;
  int64_t bs[TPURT_MAX_DIMS];
  if (!batch_of(o_info, 0, &nb, bs) || tpurt_numel(A) == 0) return TPURT_OK;
  mview a, lu = {0};
  mv_init(&a, A, nb, 0);
  if (o_lu) mv_init(&lu, o_lu, nb, 0);
  int64_t n = a.rows;
  FOR_BATCH(b, nb, bs) {
    mv_load(&a, b, nb, s->a, LA_PLAIN);
    int64_t info = getrf(s->a, n, n, s->piv);
    if (o_lu) {
      mv_store(&lu, b, nb, s->a, LA_PLAIN);
      put_pivots(o_piv, b, nb, s->piv, n);
    }
    put_info(o_info, b, nb, info);
    if (info && check) return singular_fail(api, ident, info, o_info, b, nb);
  }
  return TPURT_OK;
}

/* X with A X = B (left) or X A = B, B = identity when ident; LU/pivots/info report A's
 * factorization. */
_Static_assert(TPURT_ARG_inv_ex_A == TPURT_ARG_solve_ex_A, "solve serves _linalg_solve_ex and linalg_inv_ex");
static tpurt_status solve(const tpurt_op_call* c, const tpurt_tensor* B, int left, int ident, const tpurt_tensor* o_x,
                          const tpurt_tensor* o_lu, const tpurt_tensor* o_piv, const tpurt_tensor* o_info,
                          int check, const char* api) {
  const tpurt_tensor* A = &TPURT_ARG(c, solve_ex, A)->t;
  tpurt_status st = dtype_check(api, A);
  if (st) return st;
  int vec = o_x->ndim == A->ndim - 1, nb;
  int64_t bs[TPURT_MAX_DIMS];
  /* no right-hand sides (an empty broadcast batch): LU, pivots and info still describe A, and a
   * singular A still raises, as on CPU */
  scratch s = {0};
  if (!batch_of(o_x, vec ? 1 : 2, &nb, bs)) {
    if (tpurt_numel(o_info) == 0 || tpurt_numel(A) == 0) return TPURT_OK;
    if ((st = scratch_alloc(&s, solve_dims(c, o_x, left)))) return st;
    st = solve_factor_only(A, o_lu, o_piv, o_info, check, ident, api, &s);
    tpurt_temp_release(s.a);
    return st;
  }
  mview a, x, b_ = {0}, lu = {0};
  mv_init(&a, A, nb, 0);
  mv_init(&x, o_x, nb, vec);
  if (!ident) mv_init(&b_, B, nb, vec);
  if (o_lu) mv_init(&lu, o_lu, nb, 0);
  int64_t n = a.rows, r = left ? x.cols : x.rows;
  if ((st = scratch_alloc(&s, solve_dims(c, o_x, left)))) return st;
  FOR_BATCH(b, nb, bs) {
    mv_load(&a, b, nb, s.a, LA_PLAIN);
    int64_t info = getrf(s.a, n, n, s.piv);
    if (o_lu) {
      mv_store(&lu, b, nb, s.a, LA_PLAIN);
      put_pivots(o_piv, b, nb, s.piv, n);
    }
    put_info(o_info, b, nb, info);
    if (info && check) {
      st = singular_fail(api, ident, info, o_info, b, nb);
      break;
    }
    if (ident) {
      for (int64_t i = 0; i < n * n; i++) s.b[i] = i % (n + 1) == 0;
    } else {
      mv_load(&b_, b, nb, s.b, left ? LA_PLAIN : LA_ADJ);
    }
    getrs(s.a, s.piv, n, s.b, r, !left);
    mv_store(&x, b, nb, s.b, left ? LA_PLAIN : LA_ADJ);
  }
  tpurt_temp_release(s.a);
  return st;
}

tpurt_status tpurt_kernel_solve_ex(const tpurt_op_call* c) {
  /* _linalg_solve_ex(A, B, *, left, check_errors) -> (result, LU, pivots, info) */
  return solve(c, &TPURT_ARG(c, solve_ex, B)->t, (int)TPURT_ARG(c, solve_ex, left)->i, 0, &c->outs[0], &c->outs[1], &c->outs[2], &c->outs[3],
               (int)TPURT_ARG(c, solve_ex, check_errors)->i, "torch.linalg.solve_ex");
}

tpurt_status tpurt_kernel_inv_ex(const tpurt_op_call* c) {
  /* linalg_inv_ex(A, *, check_errors) -> (inverse, info): solve A X = I */
  return solve(c, NULL, 1, 1, &c->outs[0], NULL, NULL, &c->outs[1], (int)TPURT_ARG(c, inv_ex, check_errors)->i, "linalg.inv_ex");
}

/* ---------------------------------------------------------------- Cholesky */
/* scratch: the factor */
static la_dims cholesky_dims(const tpurt_tensor* A) {
  int64_t n = la_rows(A, 0);
  return (la_dims){n * n, 0, 0};
}
static la_dims cholesky_ex_dims(const tpurt_op_call* c) { return cholesky_dims(&TPURT_ARG(c, cholesky_ex, self)->t); }
static la_dims cholesky_old_dims(const tpurt_op_call* c) { return cholesky_dims(&TPURT_ARG(c, cholesky, self)->t); }
LA_SCRATCH_PLAN(cholesky_ex, cholesky_ex_dims)
LA_SCRATCH_PLAN(cholesky, cholesky_old_dims)

/* potrf on the lower triangle of A into L, or on the upper one into U = L^H when upper (L is then
 * the factor of A^H, whose lower triangle that is); as LAPACK, the diagonal's imaginary parts are
 * not read. info (NULL: none) gets the order of the first leading minor that is not positive
 * definite, which is an error when check_errors. */
static tpurt_status cholesky_run(const char* name, const tpurt_tensor* A, int upper, const tpurt_tensor* out,
                                 const tpurt_tensor* o_info, int check_errors) {
  tpurt_status st = dtype_check(name, A);
  if (st) return st;
  int nb;
  int64_t bs[TPURT_MAX_DIMS];
  if (!batch_of(A, 2, &nb, bs)) return TPURT_OK;
  mview a, l;
  mv_init(&a, A, nb, 0);
  mv_init(&l, out, nb, 0);
  int64_t n = a.rows;
  scratch s = {0};
  if ((st = scratch_alloc(&s, cholesky_dims(A)))) return st;
  FOR_BATCH(b, nb, bs) {
    la_t* L = s.a;
    mv_load(&a, b, nb, L, upper ? LA_ADJ : LA_PLAIN);
    int64_t info = 0;
    for (int64_t j = 0; j < n && !info; j++) {
      double d = creal(L[j * n + j]);
      for (int64_t k = 0; k < j; k++) d -= la_abs2(L[j * n + k]);
      if (!(d > 0)) {
        info = j + 1;
        break;
      }
      d = sqrt(d);
      L[j * n + j] = d;
      for (int64_t i = j + 1; i < n; i++) {
        la_t v = L[i * n + j];
        for (int64_t k = 0; k < j; k++) v -= L[i * n + k] * conj(L[j * n + k]);
        L[i * n + j] = v / d;
      }
    }
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = i + 1; j < n; j++) L[i * n + j] = 0;
    mv_store(&l, b, nb, L, upper ? LA_ADJ : LA_PLAIN);
    if (o_info) put_info(o_info, b, nb, info);
    if (info && check_errors) {
      char at[48];
      la_batch_element(at, sizeof at, A->sizes, nb, b, nb);
      st = tpurt_fail(TPURT_ERR_LINALG, "%s: %sThe factorization could not be completed because the input is not "
                      "positive-definite (the leading minor of order %lld is not positive-definite).", name, at,
                      (long long)info);
      break;
    }
  }
  tpurt_temp_release(s.a);
  return st;
}

tpurt_status tpurt_kernel_cholesky_ex(const tpurt_op_call* c) {
  /* linalg_cholesky_ex(A, *, upper, check_errors) -> (L or L^H, info) */
  return cholesky_run("linalg.cholesky_ex", &TPURT_ARG(c, cholesky_ex, self)->t, (int)TPURT_ARG(c, cholesky_ex, upper)->i, &c->outs[0], &c->outs[1],
                      (int)TPURT_ARG(c, cholesky_ex, check_errors)->i);
}

tpurt_status tpurt_kernel_cholesky(const tpurt_op_call* c) {
  /* cholesky(A, upper) (deprecated): always checks */
  return cholesky_run("cholesky", &TPURT_ARG(c, cholesky, self)->t, (int)TPURT_ARG(c, cholesky, upper)->i, &c->outs[0], NULL, 1);
}

/* ---------------------------------------------------------------- QR */
/* y (row-major rows x r) <- H y, or H^H y when adj, for H = I - tau v v^H with v = (1, the
 * column of v below row j) (LAPACK's zlarf on the rows from j). */
static void apply_reflector(const la_t* v, int64_t ldv, la_t tau, int64_t j, la_t* y, int64_t rows, int64_t r,
                            int64_t c0, int adj) {
  la_t t = adj ? conj(tau) : tau;
  for (int64_t cc = c0; cc < r; cc++) {
    la_t w = y[j * r + cc];
    for (int64_t i = j + 1; i < rows; i++) w += conj(v[i * ldv + j]) * y[i * r + cc];
    w *= t;
    y[j * r + cc] -= w;
    for (int64_t i = j + 1; i < rows; i++) y[i * r + cc] -= w * v[i * ldv + j];
  }
}

/* geqrf on row-major x (m x n) in place: R on and above the diagonal, the Householder vectors
 * below it (v_j = 1 implied), their scale factors in tau[0..min(m, n)). LAPACK's zlarfg
 * conventions: beta = -sign(re alpha) * norm (real), tau = (beta - alpha) / beta, no reflection
 * (tau = 0) for a column already zero below a real diagonal. */
void la_householder_qr(la_t* x, int64_t m, int64_t n, la_t* tau) {
  int64_t k = m < n ? m : n;
  for (int64_t j = 0; j < k; j++) {
    la_t alpha = x[j * n + j];
    double xn = 0;
    for (int64_t i = j + 1; i < m; i++) xn = hypot(xn, cabs(x[i * n + j]));
    tau[j] = 0;
    if (xn == 0 && cimag(alpha) == 0) continue;
    double beta = -copysign(hypot(cabs(alpha), xn), creal(alpha));
    tau[j] = CMPLX((beta - creal(alpha)) / beta, -cimag(alpha) / beta);
    for (int64_t i = j + 1; i < m; i++) x[i * n + j] /= alpha - beta;
    x[j * n + j] = beta;
    apply_reflector(x, n, tau[j], j, x, m, n, j + 1, 1); /* H^H on the trailing columns */
  }
}

/* y (row-major rows x r) <- Q y, or Q^H y when adj, for Q = H_0 ... H_{k-1} given by the
 * reflectors below the diagonal of v (row stride ldv) and tau (ormqr / orgqr). */
void la_apply_q(const la_t* v, int64_t ldv, const la_t* tau, int64_t k, la_t* y, int64_t rows, int64_t r, int adj) {
  for (int64_t jj = 0; jj < k; jj++) {
    int64_t j = adj ? jj : k - 1 - jj;
    if (tau[j] != 0) apply_reflector(v, ldv, tau[j], j, y, rows, r, 0, adj);
  }
}

/* scratch: the matrix and tau */
static la_dims geqrf_dims(const tpurt_op_call* c) {
  const tpurt_tensor* A = &TPURT_ARG(c, geqrf, self)->t;
  int64_t m = la_rows(A, 0), n = la_cols(A, 0);
  return (la_dims){m * n + (m < n ? m : n), 0, 0};
}
LA_SCRATCH_PLAN(geqrf, geqrf_dims)

tpurt_status tpurt_kernel_geqrf(const tpurt_op_call* c) {
  /* geqrf(A) -> (a, tau) */
  const tpurt_tensor* A = &TPURT_ARG(c, geqrf, self)->t;
  tpurt_status st = dtype_check("geqrf", A);
  if (st) return st;
  int nb;
  int64_t bs[TPURT_MAX_DIMS];
  if (!batch_of(A, 2, &nb, bs)) return TPURT_OK;
  mview a, o, t;
  mv_init(&a, A, nb, 0);
  mv_init(&o, &c->outs[0], nb, 0);
  mv_init(&t, &c->outs[1], nb, 1);
  int64_t m = a.rows, n = a.cols, k = m < n ? m : n;
  scratch s = {0};
  if ((st = scratch_alloc(&s, geqrf_dims(c)))) return st;
  FOR_BATCH(b, nb, bs) {
    mv_load(&a, b, nb, s.a, LA_PLAIN);
    la_householder_qr(s.a, m, n, s.a + m * n);
    mv_store(&o, b, nb, s.a, LA_PLAIN);
    if (k) mv_store(&t, b, nb, s.a + m * n, LA_PLAIN);
  }
  tpurt_temp_release(s.a);
  return TPURT_OK;
}

/* scratch: the reflectors and tau, then C */
static la_dims ormqr_dims(const tpurt_op_call* c) {
  const tpurt_tensor *A = &TPURT_ARG(c, ormqr, self)->t, *C = &TPURT_ARG(c, ormqr, input3)->t;
  int64_t k = la_rows(&TPURT_ARG(c, ormqr, input2)->t, 1);
  return (la_dims){la_rows(A, 0) * la_cols(A, 0) + k, la_rows(C, 0) * la_cols(C, 0), 0};
}
LA_SCRATCH_PLAN(ormqr, ormqr_dims)

tpurt_status tpurt_kernel_ormqr(const tpurt_op_call* c) {
  /* ormqr(A, tau, C, left, transpose): op(Q) C or C op(Q), op(Q) = Q^H when transpose;
   * C op(Q) = (op(Q)^H C^H)^H */
  const tpurt_tensor *A = &TPURT_ARG(c, ormqr, self)->t, *out = &c->outs[0];
  tpurt_status st = dtype_check("ormqr", A);
  if (st) return st;
  int left = (int)TPURT_ARG(c, ormqr, left)->i, trans = (int)TPURT_ARG(c, ormqr, transpose)->i, nb;
  int64_t bs[TPURT_MAX_DIMS];
  if (!batch_of(out, 2, &nb, bs)) return TPURT_OK;
  mview a, t, C, o;
  mv_init(&a, A, nb, 0);
  mv_init(&t, &TPURT_ARG(c, ormqr, input2)->t, nb, 1);
  mv_init(&C, &TPURT_ARG(c, ormqr, input3)->t, nb, 0);
  mv_init(&o, out, nb, 0);
  int64_t rows = a.rows, k = t.rows, r = left ? C.cols : C.rows;
  scratch s = {0};
  if ((st = scratch_alloc(&s, ormqr_dims(c)))) return st;
  FOR_BATCH(b, nb, bs) {
    mv_load(&a, b, nb, s.a, LA_PLAIN);
    mv_load(&t, b, nb, s.a + a.rows * a.cols, LA_PLAIN);
    mv_load(&C, b, nb, s.b, left ? LA_PLAIN : LA_ADJ);
    la_apply_q(s.a, a.cols, s.a + a.rows * a.cols, k, s.b, rows, r, left ? trans : !trans);
    mv_store(&o, b, nb, s.b, left ? LA_PLAIN : LA_ADJ);
  }
  tpurt_temp_release(s.a);
  return TPURT_OK;
}

/* linalg_qr's mode: Q and R complete (m columns of Q, m rows of R) or reduced; Q or not */
static const char* qr_mode(const tpurt_op_call* c) {
  return TPURT_ARG(c, qr, mode)->kind == TPURT_V_STRING ? TPURT_ARG(c, qr, mode)->s : "reduced";
}
/* scratch: the factorization and tau, then a matrix of Q's or R's rows */
static la_dims qr_dims(const tpurt_op_call* c) {
  const tpurt_tensor* A = &TPURT_ARG(c, qr, A)->t;
  int64_t m = la_rows(A, 0), n = la_cols(A, 0), k = m < n ? m : n, qc = strcmp(qr_mode(c), "complete") == 0 ? m : k;
  return (la_dims){m * n + k, m * (qc > n ? qc : n), 0};
}
LA_SCRATCH_PLAN(qr, qr_dims)

tpurt_status tpurt_kernel_qr(const tpurt_op_call* c) {
  /* linalg_qr(A, mode) -> (Q, R): Householder reflections with geqrf's conventions
   * (beta = -sign(alpha) * norm, no reflection for an already-zero column) */
  const tpurt_tensor* A = &TPURT_ARG(c, qr, A)->t;
  tpurt_status st = dtype_check("linalg.qr", A);
  if (st) return st;
  const char* mode = qr_mode(c);
  int complete = strcmp(mode, "complete") == 0, want_q = strcmp(mode, "r") != 0, nb;
  int64_t bs[TPURT_MAX_DIMS];
  if (!batch_of(A, 2, &nb, bs)) return TPURT_OK;
  mview a, q = {0}, r;
  mv_init(&a, A, nb, 0);
  if (want_q) mv_init(&q, &c->outs[0], nb, 0);
  mv_init(&r, &c->outs[1], nb, 0);
  int64_t m = a.rows, n = a.cols, k = m < n ? m : n, qc = complete ? m : k, rr = complete ? m : k;
  scratch s = {0};
  if ((st = scratch_alloc(&s, qr_dims(c)))) return st;
  la_t* tau = s.a + m * n;
  FOR_BATCH(b, nb, bs) {
    la_t* x = s.a;
    mv_load(&a, b, nb, x, LA_PLAIN);
    la_householder_qr(x, m, n, tau);
    la_t* o = s.b;
    for (int64_t i = 0; i < rr; i++)
      for (int64_t j = 0; j < n; j++) o[i * n + j] = j >= i ? x[i * n + j] : 0;
    mv_store(&r, b, nb, o, LA_PLAIN);
    if (!want_q) continue;
    /* Q = H_0 ... H_{k-1} applied to the first qc columns of the identity */
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < qc; j++) o[i * qc + j] = i == j;
    la_apply_q(x, n, tau, k, o, m, qc, 0);
    mv_store(&q, b, nb, o, LA_PLAIN);
  }
  tpurt_temp_release(s.a);
  return TPURT_OK;
}

/* ---------------------------------------------------------------- triangular solves */
/* x (row-major n x r) <- T^-1 x for the upper (else lower) triangle of row-major t */
static void trsm(const la_t* t, int64_t n, int upper, int unit, la_t* x, int64_t r) {
  for (int64_t ii = 0; ii < n; ii++) {
    int64_t i = upper ? n - 1 - ii : ii; /* back substitution for upper, forward for lower */
    for (int64_t cc = 0; cc < r; cc++) {
      la_t v = x[i * r + cc];
      for (int64_t k = upper ? i + 1 : 0; k < (upper ? n : i); k++) v -= t[i * n + k] * x[k * r + cc];
      x[i * r + cc] = unit ? v : v / t[i * n + i];
    }
  }
}

/* scratch of tri_solve: A, then X (as op(X) when solving from the right) */
static la_dims tri_dims(const tpurt_op_call* c, int a_arg, int left) {
  int64_t n = la_rows(&c->args[a_arg].t, 0), r = left ? la_cols(&c->outs[0], 0) : la_rows(&c->outs[0], 0);
  return (la_dims){n * n, n * r, 0};
}
static la_dims solve_triangular_dims(const tpurt_op_call* c) {
  return tri_dims(c, TPURT_ARG_solve_triangular_self, (int)TPURT_ARG(c, solve_triangular, left)->i);
}
static la_dims triangular_solve_dims(const tpurt_op_call* c) { return tri_dims(c, TPURT_ARG_triangular_solve_A, 1); }
LA_SCRATCH_PLAN(solve_triangular, solve_triangular_dims)
LA_SCRATCH_PLAN(triangular_solve, triangular_solve_dims)

/* outs[0] <- op(A)^-1 B (left) or B op(A)^-1 for triangular A, with A = args[a_arg] and
 * B = args[b_arg]; op transposes when trans. X op(A) = B is solved as op(A)^T X^T = B^T. */
static tpurt_status tri_solve(const tpurt_op_call* c, int a_arg, int b_arg, int upper, int left, int trans, int unit,
                              const char* api) {
  const tpurt_tensor* out = &c->outs[0];
  tpurt_status st = dtype_check(api, &c->args[a_arg].t);
  if (st) return st;
  int nb, ta = trans != !left; /* load A transposed: once per transposition */
  int64_t bs[TPURT_MAX_DIMS];
  if (!batch_of(out, 2, &nb, bs)) return TPURT_OK;
  mview a, B, X;
  mv_init(&a, &c->args[a_arg].t, nb, 0);
  mv_init(&B, &c->args[b_arg].t, nb, 0);
  mv_init(&X, out, nb, 0);
  int64_t n = a.rows, r = left ? X.cols : X.rows;
  scratch s = {0};
  if ((st = scratch_alloc(&s, tri_dims(c, a_arg, left)))) return st;
  FOR_BATCH(b, nb, bs) {
    mv_load(&a, b, nb, s.a, ta ? LA_TRANS : LA_PLAIN);
    mv_load(&B, b, nb, s.b, left ? LA_PLAIN : LA_TRANS);
    trsm(s.a, n, ta ? !upper : upper, unit, s.b, r);
    mv_store(&X, b, nb, s.b, left ? LA_PLAIN : LA_TRANS);
  }
  tpurt_temp_release(s.a);
  return TPURT_OK;
}

tpurt_status tpurt_kernel_solve_triangular(const tpurt_op_call* c) {
  /* linalg_solve_triangular(A, B, *, upper, left, unitriangular): only A's upper (lower)
   * triangle is read */
  return tri_solve(c, TPURT_ARG_solve_triangular_self, TPURT_ARG_solve_triangular_B, (int)TPURT_ARG(c, solve_triangular, upper)->i, (int)TPURT_ARG(c, solve_triangular, left)->i, 0, (int)TPURT_ARG(c, solve_triangular, unitriangular)->i, "linalg.solve_triangular");
}

tpurt_status tpurt_kernel_triangular_solve(const tpurt_op_call* c) {
  /* triangular_solve(B, A, upper, transpose, unitriangular) -> (solution, copy of A) */
  tpurt_status st = tri_solve(c, TPURT_ARG_triangular_solve_A, TPURT_ARG_triangular_solve_self, (int)TPURT_ARG(c, triangular_solve, upper)->i, 1, (int)TPURT_ARG(c, triangular_solve, transpose)->i, (int)TPURT_ARG(c, triangular_solve, unitriangular)->i, "triangular_solve");
  return st ? st : tpurt_copy_tensor(&c->outs[1], &TPURT_ARG(c, triangular_solve, A)->t);
}

/* scratch of cholesky_apply with factor F: the factor, then X */
static la_dims cholesky_apply_dims(const tpurt_op_call* c, const tpurt_tensor* F) {
  int64_t n = la_rows(F, 0);
  return (la_dims){n * n, n * la_cols(&c->outs[0], 0), 0};
}
static la_dims cholesky_solve_dims(const tpurt_op_call* c) {
  return cholesky_apply_dims(c, &TPURT_ARG(c, cholesky_solve, A)->t);
}
static la_dims cholesky_inverse_dims(const tpurt_op_call* c) {
  return cholesky_apply_dims(c, &TPURT_ARG(c, cholesky_inverse, self)->t);
}
LA_SCRATCH_PLAN(cholesky_solve, cholesky_solve_dims)
LA_SCRATCH_PLAN(cholesky_inverse, cholesky_inverse_dims)

/* (L L^H)^-1 B, or (U^H U)^-1 B when upper, for Cholesky factors; B = identity when NULL */
static tpurt_status cholesky_apply(const tpurt_op_call* c, const tpurt_tensor* F, const tpurt_tensor* B, int upper,
                                   const char* api) {
  const tpurt_tensor* out = &c->outs[0];
  tpurt_status st = dtype_check(api, F);
  if (st) return st;
  int nb;
  int64_t bs[TPURT_MAX_DIMS];
  if (!batch_of(out, 2, &nb, bs)) return TPURT_OK;
  mview f, bv = {0}, X;
  mv_init(&f, F, nb, 0);
  if (B) mv_init(&bv, B, nb, 0);
  mv_init(&X, out, nb, 0);
  int64_t n = f.rows, r = X.cols;
  scratch s = {0};
  if ((st = scratch_alloc(&s, cholesky_apply_dims(c, F)))) return st;
  FOR_BATCH(b, nb, bs) {
    mv_load(&f, b, nb, s.a, upper ? LA_ADJ : LA_PLAIN); /* as the lower factor L either way */
    if (B) mv_load(&bv, b, nb, s.b, LA_PLAIN);
    else
      for (int64_t i = 0; i < n * r; i++) s.b[i] = i % (r + 1) == 0;
    trsm(s.a, n, 0, 0, s.b, r); /* L y = b */
    for (int64_t i = 0; i < n; i++) /* L^H x = y: the conjugate transpose in place */
      for (int64_t j = i; j < n; j++) {
        la_t t = s.a[i * n + j];
        s.a[i * n + j] = conj(s.a[j * n + i]);
        s.a[j * n + i] = conj(t);
      }
    trsm(s.a, n, 1, 0, s.b, r);
    mv_store(&X, b, nb, s.b, LA_PLAIN);
  }
  tpurt_temp_release(s.a);
  return TPURT_OK;
}

tpurt_status tpurt_kernel_cholesky_solve(const tpurt_op_call* c) {
  /* _cholesky_solve_helper(B, A, upper) */
  return cholesky_apply(c, &TPURT_ARG(c, cholesky_solve, A)->t, &TPURT_ARG(c, cholesky_solve, self)->t, (int)TPURT_ARG(c, cholesky_solve, upper)->i, "cholesky_solve");
}

tpurt_status tpurt_kernel_cholesky_inverse(const tpurt_op_call* c) {
  /* cholesky_inverse(L, upper) */
  return cholesky_apply(c, &TPURT_ARG(c, cholesky_inverse, self)->t, NULL, (int)TPURT_ARG(c, cholesky_inverse, upper)->i, "cholesky_inverse");
}
