/* Spectral and symmetric-indefinite linear algebra, in complex double whatever the dtype (see
 * linalg.h): SVD by one-sided Jacobi, eigh by cyclic Jacobi (both by Householder reduction
 * from LA_HOUSEHOLDER_MIN columns, linalg_householder.c), least squares through the SVD,
 * Bunch-Kaufman LDL^T / LDL^H (LAPACK sytf2's and hetf2's pivot choices and pivots, sytrs's and
 * hetrs's solves), matrix_exp (ATen's Taylor degrees, thresholds and scaling),
 * householder_product (orgqr).
 *
 * The complex Jacobi rotations are the real ones applied after turning the off-diagonal entry
 * real by its phase; on real input the phase is +-1 and they are the real rotations exactly.
 * Singular and eigen vectors are unique only up to a phase (a sign when real): each is returned
 * with its largest-magnitude component real and positive (the first such on ties; for an SVD
 * pair the longer vector decides), so results are deterministic. Jacobi is chosen for its
 * accuracy (tiny singular values to full relative precision) and simplicity on small matrices;
 * the Householder reductions for the larger ones, whose cost does not grow with Jacobi's
 * sweeps. */
#include <float.h>

#include "linalg.h"

/* ---------------------------------------------------------------- SVD core */
/* One-sided Jacobi on the columns of row-major w (m x n): afterwards the columns are mutually
 * orthogonal (to working precision, relative to their norms) and v (n x n row-major, the
 * identity on entry) holds the product of the rotations, so w = A v. Convergence is quadratic;
 * the sweep cap only bounds the time a pathological input can take. */
static void jacobi_columns(la_t* w, int64_t m, int64_t n, la_t* v) {
  for (int sweep = 0; sweep < 80; sweep++) {
    int rotated = 0;
    for (int64_t i = 0; i < n - 1; i++)
      for (int64_t j = i + 1; j < n; j++) {
        double a = 0, b = 0;
        la_t g = 0;
        for (int64_t r = 0; r < m; r++) {
          la_t x = w[r * n + i], y = w[r * n + j];
          a += la_abs2(x);
          b += la_abs2(y);
          g += conj(x) * y;
        }
        double ag = cabs(g);
        if (ag == 0 || ag <= DBL_EPSILON * sqrt(a) * sqrt(b)) continue;
        rotated = 1;
        double zeta = (b - a) / (2 * ag);
        double t = copysign(1.0, zeta) / (fabs(zeta) + sqrt(1 + zeta * zeta));
        double cs = 1 / sqrt(1 + t * t);
        la_t sn = cs * t * (g / ag);
        for (int64_t r = 0; r < m; r++) {
          la_t x = w[r * n + i], y = w[r * n + j];
          w[r * n + i] = cs * x - conj(sn) * y;
          w[r * n + j] = sn * x + cs * y;
        }
        for (int64_t r = 0; r < n; r++) {
          la_t x = v[r * n + i], y = v[r * n + j];
          v[r * n + i] = cs * x - conj(sn) * y;
          v[r * n + j] = sn * x + cs * y;
        }
      }
    if (!rotated) return;
  }
}

/* Fills the columns of q (row-major rows x cols) not marked in have[] with unit vectors
 * orthogonal to every other column: the standard basis vector least represented in the
 * current span, orthogonalized twice (classical Gram-Schmidt with reorthogonalization). */
static void complete_basis(la_t* q, int64_t rows, int64_t cols, char* have, la_t* e) {
  for (int64_t c = 0; c < cols; c++) {
    if (have[c]) continue;
    int64_t best = 0;
    double best_res = -1;
    for (int64_t i = 0; i < rows; i++) { /* residual of e_i: 1 - sum_k |q[i,k]|^2 */
      double r = 1;
      for (int64_t k = 0; k < cols; k++)
        if (have[k]) r -= la_abs2(q[i * cols + k]);
      if (r > best_res + 1e-12) best_res = r, best = i;
    }
    for (int64_t i = 0; i < rows; i++) e[i] = i == best;
    for (int pass = 0; pass < 2; pass++)
      for (int64_t k = 0; k < cols; k++) {
        if (!have[k]) continue;
        la_t d = 0;
        for (int64_t i = 0; i < rows; i++) d += conj(q[i * cols + k]) * e[i];
        for (int64_t i = 0; i < rows; i++) e[i] -= d * q[i * cols + k];
      }
    double nrm = 0;
    for (int64_t i = 0; i < rows; i++) nrm += la_abs2(e[i]);
    nrm = sqrt(nrm);
    for (int64_t i = 0; i < rows; i++) q[i * cols + c] = e[i] / nrm;
    have[c] = 1;
  }
}

/* Index of the largest-magnitude entry of column c of row-major q (rows x cols), the first on ties. */
static int64_t argmax_abs(const la_t* q, int64_t rows, int64_t cols, int64_t c) {
  int64_t at = 0;
  for (int64_t i = 1; i < rows; i++)
    if (cabs(q[i * cols + c]) > cabs(q[at * cols + c])) at = i;
  return at;
}

/* Scratch (in la_t elements) svd_one needs for an m x n matrix; the left vectors' buffer only
 * when it computes vectors (uv), of min(m, n) columns unless full (p x p would be 16 TiB for a
 * 3 x 2^20 matrix). */
static int64_t svd_scratch(int64_t m, int64_t n, int full, int uv) {
  int64_t p = m > n ? m : n, q = m < n ? m : n, big = uv ? p * (full ? p : q) : 0;
  /* the q + q + p after p: sd (double), idx (int64), have (char); then la_svd_bidiag's */
  return p * q + q * q + big + p + q + q + p + (q >= LA_HOUSEHOLDER_MIN ? la_bidiag_scratch(p, q) : 0);
}

/* SVD of row-major a (m x n), k = min(m, n): s[0..k) descending; when u/v are not NULL,
 * u (row-major m x uc, uc = m when full else k) and v (row-major n x vc, likewise) hold the
 * singular vectors as columns, A = U diag(s) V^H. ws: svd_scratch(m, n, full, u != NULL) elements. */
static void svd_one(const la_t* a, int64_t m, int64_t n, int full, double* s, la_t* u, la_t* v, la_t* ws) {
  /* Jacobi orthogonalizes the columns of the tall orientation: B = A (m >= n) or A^H */
  int tr = m < n;
  int64_t p = tr ? n : m, q = tr ? m : n, k = q;
  la_t *w = ws, *vv = w + p * q, *big = vv + q * q, *e = big + (u ? p * (full ? p : q) : 0);
  double* sd = (double*)(e + p);
  int64_t* idx = (int64_t*)(sd + q);
  char* have = (char*)(idx + q);
  for (int64_t i = 0; i < p; i++)
    for (int64_t j = 0; j < q; j++) w[i * q + j] = tr ? conj(a[j * n + i]) : a[i * n + j];
  if (q >= LA_HOUSEHOLDER_MIN) {
    la_svd_bidiag(w, p, q, vv, sd, u != NULL, e + p + q + q + p);
  } else {
    for (int64_t i = 0; i < q * q; i++) vv[i] = i % (q + 1) == 0;
    jacobi_columns(w, p, q, vv);
    for (int64_t j = 0; j < q; j++) {
      double t = 0;
      for (int64_t i = 0; i < p; i++) t += la_abs2(w[i * q + j]);
      sd[j] = sqrt(t);
    }
  }
  /* descending, stable among equal values */
  for (int64_t j = 0; j < q; j++) {
    int64_t x = j, t = j;
    while (t > 0 && sd[idx[t - 1]] < sd[x]) idx[t] = idx[t - 1], t--;
    idx[t] = x;
  }
  for (int64_t j = 0; j < k; j++) s[j] = sd[idx[j]];
  if (!u) return;
  /* left vectors of B: w's columns normalized (p x pc), right: vv's columns (q x q) */
  int64_t pc = full ? p : k;
  for (int64_t c = 0; c < pc; c++) have[c] = 0;
  for (int64_t j = 0; j < k; j++) {
    double nrm = s[j];
    have[j] = nrm > 0;
    for (int64_t i = 0; i < p; i++) big[i * pc + j] = have[j] ? w[i * q + idx[j]] / nrm : 0;
  }
  complete_basis(big, p, pc, have, e);
  /* canonical phase: the largest-magnitude component of each left vector real and positive
   * (the pair's right vector turns with it, leaving u v^H unchanged) */
  for (int64_t j = 0; j < pc; j++) {
    int64_t at = argmax_abs(big, p, pc, j);
    la_t ph = la_phase(big[at * pc + j]);
    if (ph == 1) continue;
    double lead = cabs(big[at * pc + j]);
    for (int64_t i = 0; i < p; i++) big[i * pc + j] *= conj(ph);
    big[at * pc + j] = lead; /* exactly real, not real to rounding */
    if (j < k)
      for (int64_t i = 0; i < q; i++) vv[i * q + idx[j]] *= conj(ph);
  }
  /* B's left vectors are A's left (m >= n) or right (m < n) vectors */
  la_t *lo = tr ? v : u, *ro = tr ? u : v;
  memcpy(lo, big, sizeof(la_t) * (size_t)(p * pc));
  for (int64_t i = 0; i < q; i++)
    for (int64_t j = 0; j < q; j++) ro[i * q + j] = vv[i * q + idx[j]];
}

static int all_finite(const la_t* a, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(creal(a[i])) || !isfinite(cimag(a[i]))) return 0;
  return 1;
}

/* CPU's message for a failed batch element: "(Batch element i): " only for batched inputs */
static tpurt_status batch_fail(const char* api, int nb, int64_t at, const char* what) {
  if (nb == 0) return tpurt_fail(TPURT_ERR_LINALG, "%s: %s", api, what);
  return tpurt_fail(TPURT_ERR_LINALG, "%s: (Batch element %lld): %s", api, (long long)at, what);
}

typedef struct svd_job {
  mview a, U, S, Vh;
  int nb, full, uv;
  int64_t m, n;
} svd_job;

static int svd_matrix(void* ctx, const int64_t* b, la_t* ws) {
  svd_job* J = ctx;
  int64_t m = J->m, n = J->n, k = m < n ? m : n, uc = J->full ? m : k;
  la_t *a = ws, *u = a + m * n, *v = u + (J->uv ? m * uc : 0), *w = v + (J->uv ? n * (J->full ? n : k) : 0);
  double* sv = (double*)(w + svd_scratch(m, n, J->full, J->uv));
  mv_load(&J->a, b, J->nb, a, LA_PLAIN);
  if (!all_finite(a, m * n)) return 1;
  svd_one(a, m, n, J->full, sv, J->uv ? u : NULL, J->uv ? v : NULL, w);
  mv_store_real(&J->S, b, J->nb, sv);
  if (J->uv) {
    mv_store(&J->U, b, J->nb, u, LA_PLAIN);
    mv_store(&J->Vh, b, J->nb, v, LA_ADJ);
  }
  return 0;
}

/* la_for_batch's scratch per matrix (svd_matrix's layout) and work per matrix, for an m x n A */
static int64_t svd_ws(int64_t m, int64_t n, int full, int uv) {
  int64_t k = m < n ? m : n;
  return m * n + k + (!uv ? 0 : full ? m * m + n * n : (m + n) * k) + svd_scratch(m, n, full, uv);
}
static int64_t svd_flops(int64_t m, int64_t n) {
  int64_t k = m < n ? m : n, p = m > n ? m : n;
  return 8 * p * k * k + 1;
}

tpurt_status tpurt_plan_svd(const tpurt_op_call* c, tpurt_plan* p) {
  const tpurt_tensor* A = &TPURT_ARG(c, svd, A)->t;
  int64_t m = la_rows(A, 0), n = la_cols(A, 0), ws = svd_ws(m, n, (int)TPURT_ARG(c, svd, full_matrices)->i,
                                                             (int)TPURT_ARG(c, svd, compute_uv)->i);
  p->scratch_bytes += la_batch_bytes(A->ndim - 2, A->sizes, ws, svd_flops(m, n));
  return TPURT_OK;
}

tpurt_status tpurt_kernel_svd(const tpurt_op_call* c) {
  /* _linalg_svd(A, full_matrices, compute_uv, driver) -> (U, S, Vh); U and Vh have no elements
   * unless compute_uv */
  const tpurt_tensor* A = &TPURT_ARG(c, svd, A)->t;
  tpurt_status st = dtype_check("linalg.svd", A);
  if (st) return st;
  svd_job J = {.full = (int)TPURT_ARG(c, svd, full_matrices)->i, .uv = (int)TPURT_ARG(c, svd, compute_uv)->i};
  int64_t bs[TPURT_MAX_DIMS], at = 0;
  if (!batch_of(A, 2, &J.nb, bs)) return TPURT_OK;
  mv_init(&J.a, A, J.nb, 0);
  mv_init(&J.S, &c->outs[1], J.nb, 1);
  if (J.uv) {
    mv_init(&J.U, &c->outs[0], J.nb, 0);
    mv_init(&J.Vh, &c->outs[2], J.nb, 0);
  }
  int64_t m = J.m = J.a.rows, n = J.n = J.a.cols;
  int code;
  st = la_for_batch(J.nb, bs, svd_ws(m, n, J.full, J.uv), svd_flops(m, n), svd_matrix, &J, &code, &at);
  if (!st && code)
    st = batch_fail("linalg.svd", J.nb, at, "The algorithm failed to converge because the input matrix contained "
                    "non-finite values.");
  return st;
}

/* ---------------------------------------------------------------- eigh */
/* Cyclic Jacobi on row-major Hermitian a (n x n, real diagonal): afterwards the real parts of
 * its diagonal hold the eigenvalues and v (the identity on entry) the eigenvectors as columns
 * (sweep cap as jacobi_columns). */
static void jacobi_eigh(la_t* a, int64_t n, la_t* v) {
  for (int sweep = 0; sweep < 80; sweep++) {
    int rotated = 0;
    for (int64_t p = 0; p < n - 1; p++)
      for (int64_t q = p + 1; q < n; q++) {
        la_t apq = a[p * n + q];
        double g = cabs(apq), app = creal(a[p * n + p]), aqq = creal(a[q * n + q]);
        if (g == 0 || g <= DBL_EPSILON * sqrt(fabs(app)) * sqrt(fabs(aqq))) continue;
        rotated = 1;
        double theta = (aqq - app) / (2 * g);
        double t = copysign(1.0, theta) / (fabs(theta) + sqrt(1 + theta * theta));
        double cs = 1 / sqrt(1 + t * t);
        la_t sn = t * cs * (apq / g);
        for (int64_t r = 0; r < n; r++) { /* A J, then J^H (A J), and V J */
          la_t x = a[r * n + p], y = a[r * n + q];
          a[r * n + p] = cs * x - conj(sn) * y;
          a[r * n + q] = sn * x + cs * y;
        }
        for (int64_t r = 0; r < n; r++) {
          la_t x = a[p * n + r], y = a[q * n + r];
          a[p * n + r] = cs * x - sn * y;
          a[q * n + r] = conj(sn) * x + cs * y;
        }
        a[p * n + q] = a[q * n + p] = 0;
        for (int64_t r = 0; r < n; r++) {
          la_t x = v[r * n + p], y = v[r * n + q];
          v[r * n + p] = cs * x - conj(sn) * y;
          v[r * n + q] = sn * x + cs * y;
        }
      }
    if (!rotated) return;
  }
}

typedef struct eigh_job {
  mview a, W, V;
  int nb, upper, want_v;
  int64_t n;
} eigh_job;

static int eigh_matrix(void* ctx, const int64_t* b, la_t* ws) {
  eigh_job* J = ctx;
  int64_t n = J->n;
  la_t *a = ws, *v = a + n * n, *o = v + n * n;
  double* w = (double*)(o + n * n);
  int64_t* ord = (int64_t*)(w + n);
  mv_load(&J->a, b, J->nb, a, LA_PLAIN);
  for (int64_t i = 0; i < n; i++) { /* the Hermitian matrix of one triangle (LAPACK: real diagonal) */
    for (int64_t j = 0; j < i; j++) {
      la_t x = J->upper ? conj(a[j * n + i]) : a[i * n + j];
      a[i * n + j] = x;
      a[j * n + i] = conj(x);
    }
    a[i * n + i] = creal(a[i * n + i]);
  }
  if (!all_finite(a, n * n)) return 1;
  if (n >= LA_HOUSEHOLDER_MIN) {
    la_eigh_tridiag(a, n, J->want_v ? v : NULL, (la_t*)(ord + n));
  } else {
    for (int64_t i = 0; i < n * n; i++) v[i] = i % (n + 1) == 0;
    jacobi_eigh(a, n, v);
  }
  for (int64_t j = 0; j < n; j++) { /* ascending, stable among equal values */
    int64_t t = j;
    while (t > 0 && creal(a[ord[t - 1] * (n + 1)]) > creal(a[j * (n + 1)])) ord[t] = ord[t - 1], t--;
    ord[t] = j;
  }
  for (int64_t j = 0; j < n; j++) w[j] = creal(a[ord[j] * (n + 1)]);
  mv_store_real(&J->W, b, J->nb, w);
  if (!J->want_v) return 0;
  for (int64_t j = 0; j < n; j++) {
    int64_t c = ord[j], at = argmax_abs(v, n, n, c);
    la_t ph = conj(la_phase(v[at * n + c]));
    for (int64_t i = 0; i < n; i++) o[i * n + j] = ph * v[i * n + c];
    o[at * n + j] = cabs(v[at * n + c]); /* exactly real, not real to rounding */
  }
  mv_store(&J->V, b, J->nb, o, LA_PLAIN);
  return 0;
}

/* la_for_batch's scratch per matrix (eigh_matrix's layout) and work per matrix, for an n x n A */
static int64_t eigh_ws(int64_t n) { return 3 * n * n + 2 * n + (n >= LA_HOUSEHOLDER_MIN ? la_tridiag_scratch(n) : 0); }
static int64_t eigh_flops(int64_t n) { return 16 * n * n * n + 1; }

tpurt_status tpurt_plan_eigh(const tpurt_op_call* c, tpurt_plan* p) {
  const tpurt_tensor* A = &TPURT_ARG(c, eigh, A)->t;
  int64_t n = la_rows(A, 0);
  p->scratch_bytes += la_batch_bytes(A->ndim - 2, A->sizes, eigh_ws(n), eigh_flops(n));
  return TPURT_OK;
}

tpurt_status tpurt_kernel_eigh(const tpurt_op_call* c) {
  /* _linalg_eigh(A, UPLO, compute_v) -> (eigenvalues ascending, eigenvectors); only the UPLO
   * triangle of A is read */
  const tpurt_tensor* A = &TPURT_ARG(c, eigh, A)->t;
  tpurt_status st = dtype_check("linalg.eigh", A);
  if (st) return st;
  eigh_job J = {.upper = TPURT_ARG(c, eigh, UPLO)->kind == TPURT_V_STRING && (TPURT_ARG(c, eigh, UPLO)->s[0] == 'U' || TPURT_ARG(c, eigh, UPLO)->s[0] == 'u'),
                .want_v = (int)TPURT_ARG(c, eigh, compute_v)->i};
  int64_t bs[TPURT_MAX_DIMS], at = 0;
  if (!batch_of(A, 2, &J.nb, bs)) return TPURT_OK;
  mv_init(&J.a, A, J.nb, 0);
  mv_init(&J.W, &c->outs[0], J.nb, 1);
  if (J.want_v) mv_init(&J.V, &c->outs[1], J.nb, 0);
  int64_t n = J.n = J.a.rows;
  int code;
  st = la_for_batch(J.nb, bs, eigh_ws(n), eigh_flops(n), eigh_matrix, &J, &code, &at);
  if (!st && code) /* LAPACK's info for a NaN input is not reproducible: report 1 */
    st = batch_fail("linalg.eigh", J.nb, at, "The algorithm failed to converge because the input matrix is "
                    "ill-conditioned or has too many repeated eigenvalues (error code: 1).");
  return st;
}

/* ---------------------------------------------------------------- least squares */
/* scratch: A, its SVD's u and v, U^H b, the solution, the residuals (then the singular values);
 * b, then svd_one's workspace. B is a batch of vectors when it has a dim fewer than A. */
static la_dims lstsq_dims(const tpurt_op_call* c) {
  const tpurt_tensor *A = &TPURT_ARG(c, lstsq, self)->t, *B = &TPURT_ARG(c, lstsq, b)->t;
  int64_t m = la_rows(A, 0), n = la_cols(A, 0), k = m < n ? m : n, r = la_cols(&c->outs[0], B->ndim == A->ndim - 1);
  return (la_dims){m * n + k + m * k + n * k + k * r + n * r + r, m * r + svd_scratch(m, n, 0, 1), 0};
}
LA_SCRATCH_PLAN(lstsq, lstsq_dims)

tpurt_status tpurt_kernel_lstsq(const tpurt_op_call* c) {
  /* linalg_lstsq.out(A, B, rcond, driver, *, solution, residuals, rank, singular_values): the
   * minimum-norm solution through the SVD, singular values at most rcond times the largest
   * counting as zero (gelsy/gelsd/gelss's rank rule; gels assumes full rank). The outputs a
   * driver does not produce have no elements (the meta function's shapes). */
  const tpurt_tensor *A = &TPURT_ARG(c, lstsq, self)->t, *B = &TPURT_ARG(c, lstsq, b)->t, *X = &c->outs[0], *R = &c->outs[1], *K = &c->outs[2],
                     *SV = &c->outs[3];
  tpurt_status st = dtype_check("torch.linalg.lstsq", A);
  if (st) return st;
  int vec = B->ndim == A->ndim - 1, nb; /* lstsq's rule: one dim fewer is a vector rhs */
  const char* driver = TPURT_ARG(c, lstsq, driver)->kind == TPURT_V_STRING ? TPURT_ARG(c, lstsq, driver)->s : "gelsy";
  int gels = strcmp(driver, "gels") == 0;
  int64_t bs[TPURT_MAX_DIMS];
  if (!batch_of(X, vec ? 1 : 2, &nb, bs)) return TPURT_OK;
  mview a, bv, x, res = {0}, sv = {0};
  mv_init(&a, A, nb, 0);
  mv_init(&bv, B, nb, vec);
  mv_init(&x, X, nb, vec);
  if (tpurt_numel(R)) mv_init(&res, R, nb, 1);
  if (tpurt_numel(SV)) mv_init(&sv, SV, nb, 1);
  int64_t m = a.rows, n = a.cols, k = m < n ? m : n, r = x.cols;
  double rcond = TPURT_ARG(c, lstsq, rcond)->kind == TPURT_V_FLOAT ? TPURT_ARG(c, lstsq, rcond)->f
                 : (A->dtype == TPURT_F64 ? DBL_EPSILON : FLT_EPSILON) * (double)(m > n ? m : n);
  scratch s = {0};
  if ((st = scratch_alloc(&s, lstsq_dims(c)))) return st;
  la_t *u = s.a + m * n, *v = u + m * k, *utb = v + n * k, *xs = utb + k * r;
  double *sg = (double*)(xs + n * r), *rs = sg + k;
  FOR_BATCH(b, nb, bs) {
    mv_load(&a, b, nb, s.a, LA_PLAIN);
    mv_load(&bv, b, nb, s.b, LA_PLAIN);
    if (!all_finite(s.a, m * n)) {
      st = tpurt_fail(TPURT_ERR_LINALG, "torch.linalg.lstsq: The algorithm failed to converge because the input "
                      "matrix contained non-finite values.");
      break;
    }
    svd_one(s.a, m, n, 0, sg, u, v, s.b + m * r);
    int64_t rank = 0;
    while (rank < k && sg[rank] > (gels ? 0 : rcond * sg[0])) rank++;
    for (int64_t i = 0; i < rank; i++) /* x = V_r diag(1/s_r) U_r^H b */
      for (int64_t cc = 0; cc < r; cc++) {
        la_t t = 0;
        for (int64_t j = 0; j < m; j++) t += conj(u[j * k + i]) * s.b[j * r + cc];
        utb[i * r + cc] = t / sg[i];
      }
    for (int64_t j = 0; j < n; j++)
      for (int64_t cc = 0; cc < r; cc++) {
        la_t t = 0;
        for (int64_t i = 0; i < rank; i++) t += v[j * k + i] * utb[i * r + cc];
        xs[j * r + cc] = t;
      }
    mv_store(&x, b, nb, xs, LA_PLAIN);
    if (tpurt_numel(K)) put_info(K, b, nb, rank);
    if (tpurt_numel(SV)) mv_store_real(&sv, b, nb, sg);
    if (tpurt_numel(R)) { /* squared residual norm of each column; gels's quick return for an
                             empty A zeroes B, so CPU reports 0 there */
      for (int64_t cc = 0; cc < r; cc++) {
        if (gels && k == 0) {
          rs[cc] = 0;
          continue;
        }
        double acc = 0;
        for (int64_t i = 0; i < m; i++) {
          la_t t = -s.b[i * r + cc];
          for (int64_t j = 0; j < n; j++) t += s.a[i * n + j] * xs[j * r + cc];
          acc += la_abs2(t);
        }
        rs[cc] = acc;
      }
      mv_store_real(&res, b, nb, rs);
    }
  }
  tpurt_temp_release(s.a);
  return st;
}

/* ---------------------------------------------------------------- Bunch-Kaufman LDL^T */
/* LAPACK sytf2, or hetf2 when herm (A = L D L^H: conjugates where the transpose enters, a real
 * diagonal, and the 2x2 pivots scaled by |d21|), with uplo = 'L' on row-major a (n x n, lower
 * triangle read and written): 1x1 and 2x2 pivots chosen by the Bunch-Kaufman rule with
 * alpha = (1 + sqrt(17)) / 8 on cabs1 magnitudes (|x| when real); piv gets LAPACK's 1-based ipiv
 * (a 2x2 block stores -p on both of its rows). Returns info: the 1-based index of the first
 * exactly-zero diagonal block, else 0. */
static int64_t sytf2_lower(la_t* a, int64_t n, int* piv, int herm) {
  const double alpha = (1 + sqrt(17.0)) / 8;
  int64_t info = 0;
#define A_(i, j) a[(i) * n + (j)]
#define SWAP(x, y) do { la_t t_ = (x); (x) = (y); (y) = t_; } while (0)
#define CJ(x) (herm ? conj(x) : (x))
#define REAL_DIAG(j) do { if (herm) A_(j, j) = creal(A_(j, j)); } while (0)
  for (int64_t j = 0; j < n; j++) REAL_DIAG(j); /* hetf2 reads only the diagonal's real parts */
  for (int64_t k = 0; k < n;) {
    int64_t kstep = 1, kp = k, imax = k;
    double absakk = la_abs1(A_(k, k)), colmax = 0;
    for (int64_t i = k + 1; i < n; i++)
      if (la_abs1(A_(i, k)) > colmax) colmax = la_abs1(A_(i, k)), imax = i;
    if (fmax(absakk, colmax) == 0 || isnan(absakk)) {
      if (!info) info = k + 1;
    } else {
      if (absakk < alpha * colmax) {
        /* the largest off-diagonal magnitude in row/column imax */
        double rowmax = 0;
        for (int64_t j = k; j < imax; j++) rowmax = fmax(rowmax, la_abs1(A_(imax, j)));
        for (int64_t j = imax + 1; j < n; j++) rowmax = fmax(rowmax, la_abs1(A_(j, imax)));
        if (absakk >= alpha * colmax * (colmax / rowmax)) kp = k;
        else if (la_abs1(A_(imax, imax)) >= alpha * rowmax) kp = imax;
        else kp = imax, kstep = 2;
      }
      int64_t kk = k + kstep - 1;
      if (kp != kk) { /* interchange rows and columns kk and kp of the trailing submatrix */
        for (int64_t i = kp + 1; i < n; i++) SWAP(A_(i, kk), A_(i, kp));
        for (int64_t j = kk + 1; j < kp; j++) {
          la_t t = CJ(A_(j, kk));
          A_(j, kk) = CJ(A_(kp, j));
          A_(kp, j) = t;
        }
        if (herm) A_(kp, kk) = conj(A_(kp, kk));
        SWAP(A_(kk, kk), A_(kp, kp));
        if (kstep == 2) SWAP(A_(k + 1, k), A_(kp, k));
      }
      if (kstep == 1) {
        la_t d11 = 1 / A_(k, k);
        for (int64_t j = k + 1; j < n; j++) {
          for (int64_t i = j; i < n; i++) A_(i, j) -= d11 * A_(i, k) * CJ(A_(j, k));
          REAL_DIAG(j);
        }
        for (int64_t i = k + 1; i < n; i++) A_(i, k) *= d11;
      } else if (k < n - 2) {
        /* sytf2 divides by d21, hetf2 by |d21| and multiplies by its phase e where sytf2 has 1 */
        la_t d21 = A_(k + 1, k), d = herm ? cabs(d21) : d21, e = herm ? d21 / d : 1;
        la_t d11 = A_(k + 1, k + 1) / d, d22 = A_(k, k) / d;
        la_t t = 1 / (d11 * d22 - 1);
        t /= d;
        for (int64_t j = k + 2; j < n; j++) {
          la_t wk = t * (d11 * A_(j, k) - (herm ? e * A_(j, k + 1) : A_(j, k + 1)));
          la_t wkp1 = t * (d22 * A_(j, k + 1) - (herm ? conj(e) * A_(j, k) : A_(j, k)));
          for (int64_t i = j; i < n; i++) A_(i, j) -= A_(i, k) * CJ(wk) + A_(i, k + 1) * CJ(wkp1);
          A_(j, k) = wk;
          A_(j, k + 1) = wkp1;
          REAL_DIAG(j);
        }
      }
    }
    if (kstep == 1) piv[k] = (int)kp + 1;
    else piv[k] = piv[k + 1] = -(int)(kp + 1);
    k += kstep;
  }
  return info;
}

/* sytrs, or hetrs when herm (uplo = 'L'): b (row-major n x r) <- A^-1 b for A = L D L^T (L D L^H)
 * as sytf2_lower left it */
static void sytrs_lower(const la_t* a, int64_t n, const int* piv, la_t* b, int64_t r, int herm) {
#define B_(i, j) b[(i) * r + (j)]
#define SWAP_ROWS(x, y) \
  for (int64_t cc = 0; cc < r; cc++) SWAP(B_(x, cc), B_(y, cc))
  for (int64_t k = 0; k < n;) { /* L D y = P b */
    if (piv[k] > 0) {
      int64_t kp = piv[k] - 1;
      if (kp != k) SWAP_ROWS(k, kp);
      for (int64_t i = k + 1; i < n; i++)
        for (int64_t cc = 0; cc < r; cc++) B_(i, cc) -= A_(i, k) * B_(k, cc);
      la_t dk = herm ? creal(A_(k, k)) : A_(k, k);
      for (int64_t cc = 0; cc < r; cc++) B_(k, cc) /= dk;
      k++;
    } else {
      int64_t kp = -piv[k] - 1;
      if (kp != k + 1) SWAP_ROWS(k + 1, kp);
      for (int64_t i = k + 2; i < n; i++)
        for (int64_t cc = 0; cc < r; cc++) B_(i, cc) -= A_(i, k) * B_(k, cc) + A_(i, k + 1) * B_(k + 1, cc);
      la_t akm1k = A_(k + 1, k), akm1 = A_(k, k) / CJ(akm1k), ak = A_(k + 1, k + 1) / akm1k, denom = akm1 * ak - 1;
      for (int64_t cc = 0; cc < r; cc++) {
        la_t bkm1 = B_(k, cc) / CJ(akm1k), bk = B_(k + 1, cc) / akm1k;
        B_(k, cc) = (ak * bkm1 - bk) / denom;
        B_(k + 1, cc) = (akm1 * bk - bkm1) / denom;
      }
      k += 2;
    }
  }
  for (int64_t k = n - 1; k >= 0;) { /* L^T P^T x = y (L^H) */
    if (piv[k] > 0) {
      for (int64_t i = k + 1; i < n; i++)
        for (int64_t cc = 0; cc < r; cc++) B_(k, cc) -= CJ(A_(i, k)) * B_(i, cc);
      int64_t kp = piv[k] - 1;
      if (kp != k) SWAP_ROWS(k, kp);
      k--;
    } else {
      for (int64_t i = k + 1; i < n; i++)
        for (int64_t cc = 0; cc < r; cc++) {
          B_(k, cc) -= CJ(A_(i, k)) * B_(i, cc);
          B_(k - 1, cc) -= CJ(A_(i, k - 1)) * B_(i, cc);
        }
      int64_t kp = -piv[k] - 1;
      if (kp != k) SWAP_ROWS(k, kp);
      k -= 2;
    }
  }
#undef SWAP_ROWS
#undef B_
}
#undef REAL_DIAG
#undef CJ
#undef SWAP
#undef A_

/* scratch: the matrix and its pivots */
static la_dims ldl_factor_dims(const tpurt_op_call* c) {
  int64_t n = la_rows(&TPURT_ARG(c, ldl_factor_ex, self)->t, 0);
  return (la_dims){n * n, 0, n};
}
LA_SCRATCH_PLAN(ldl_factor_ex, ldl_factor_dims)

tpurt_status tpurt_kernel_ldl_factor_ex(const tpurt_op_call* c) {
  /* linalg_ldl_factor_ex(A, *, hermitian, check_errors) -> (LD, pivots, info): hermitian selects
   * hetrf for complex inputs; real ones use sytrf either way, as on CPU */
  const tpurt_tensor* A = &TPURT_ARG(c, ldl_factor_ex, self)->t;
  tpurt_status st = dtype_check("torch.linalg.ldl_factor_ex", A);
  if (st) return st;
  int nb, herm = TPURT_ARG(c, ldl_factor_ex, hermitian)->i && A->dtype == TPURT_C64;
  int64_t bs[TPURT_MAX_DIMS];
  if (!batch_of(A, 2, &nb, bs)) return TPURT_OK;
  mview a, ld, pv;
  mv_init(&a, A, nb, 0);
  mv_init(&ld, &c->outs[0], nb, 0);
  mv_init(&pv, &c->outs[1], nb, 1);
  int64_t n = a.rows;
  scratch s = {0};
  if ((st = scratch_alloc(&s, ldl_factor_dims(c)))) return st;
  FOR_BATCH(b, nb, bs) {
    mv_load(&a, b, nb, s.a, LA_PLAIN);
    int64_t info = sytf2_lower(s.a, n, s.piv, herm);
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = i + 1; j < n; j++) s.a[i * n + j] = 0;
    mv_store(&ld, b, nb, s.a, LA_PLAIN);
    for (int64_t i = 0; i < n; i++) tpurt_store_i64(mv_ptr(&pv, b, nb, i, 0), pv.t->dtype, s.piv[i]);
    put_info(&c->outs[2], b, nb, info);
    if (info && TPURT_ARG(c, ldl_factor_ex, check_errors)->i) {
      char at[48];
      la_batch_element(at, sizeof at, bs, nb, b, nb);
      st = tpurt_fail(TPURT_ERR_RUNTIME, "torch.linalg.ldl_factor_ex: %sUnknown error code: %lld.", at, (long long)info);
      break;
    }
  }
  tpurt_temp_release(s.a);
  return st;
}

/* scratch: LD, X, the pivots */
static la_dims ldl_solve_dims(const tpurt_op_call* c) {
  int64_t n = la_rows(&TPURT_ARG(c, ldl_solve, LD)->t, 0);
  return (la_dims){n * n, n * la_cols(&c->outs[0], 0), n};
}
LA_SCRATCH_PLAN(ldl_solve, ldl_solve_dims)

tpurt_status tpurt_kernel_ldl_solve(const tpurt_op_call* c) {
  /* linalg_ldl_solve(LD, pivots, B, *, hermitian) */
  const tpurt_tensor *LD = &TPURT_ARG(c, ldl_solve, LD)->t, *out = &c->outs[0];
  tpurt_status st = dtype_check("torch.linalg.ldl_solve", LD);
  if (st) return st;
  int nb, herm = TPURT_ARG(c, ldl_solve, hermitian)->i && LD->dtype == TPURT_C64;
  int64_t bs[TPURT_MAX_DIMS];
  if (!batch_of(out, 2, &nb, bs)) return TPURT_OK;
  mview ld, pv, B, X;
  mv_init(&ld, LD, nb, 0);
  mv_init(&pv, &TPURT_ARG(c, ldl_solve, pivots)->t, nb, 1);
  mv_init(&B, &TPURT_ARG(c, ldl_solve, B)->t, nb, 0);
  mv_init(&X, out, nb, 0);
  int64_t n = ld.rows, r = X.cols;
  scratch s = {0};
  if ((st = scratch_alloc(&s, ldl_solve_dims(c)))) return st;
  FOR_BATCH(b, nb, bs) {
    mv_load(&ld, b, nb, s.a, LA_PLAIN);
    for (int64_t i = 0; i < n; i++) {
      int64_t p = tpurt_load_i64(mv_ptr(&pv, b, nb, i, 0), pv.t->dtype);
      if (p == 0 || p > n || -p > n) {
        st = tpurt_fail(TPURT_ERR_RUNTIME, "torch.linalg.ldl_solve: pivots must be in range [-%lld, %lld] and "
                        "nonzero, got %lld", (long long)n, (long long)n, (long long)p);
        break;
      }
      s.piv[i] = (int)p;
    }
    if (st) break;
    mv_load(&B, b, nb, s.b, LA_PLAIN);
    sytrs_lower(s.a, n, s.piv, s.b, r, herm);
    mv_store(&X, b, nb, s.b, LA_PLAIN);
  }
  tpurt_temp_release(s.a);
  return st;
}

/* ---------------------------------------------------------------- matrix_exp */
/* ATen's mexp: the Taylor degree is the lowest whose threshold bounds the 1-norm, else degree
 * 18 on A / 2^s, squared s times, s = ceil(log2(norm / theta_18)). The thresholds are the
 * dtype's (single ones for float32 and complex64); the polynomial is evaluated in complex double
 * by Horner's rule. */
static const int mexp_degree[6] = {1, 2, 4, 8, 12, 18};
static const double mexp_theta_f32[6] = {(float)1.192092800768788e-07, (float)5.978858893805233e-04,
                                         (float)5.116619363445086e-02, (float)5.800524627688768e-01,
                                         (float)1.461661507209034e+00, (float)3.010066362817634e+00};
static const double mexp_theta_f64[6] = {2.220446049250313e-16, 2.580956802971767e-08, 3.397168839976962e-04,
                                         4.991228871115323e-02, 2.996158913811580e-01, 1.090863719290036e+00};

/* c <- a b for row-major n x n matrices (c distinct from a and b) */
static void matmul_nn(const la_t* a, const la_t* b, la_t* c, int64_t n) {
  for (int64_t i = 0; i < n * n; i++) c[i] = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t k = 0; k < n; k++) {
      la_t x = a[i * n + k];
      for (int64_t j = 0; j < n; j++) c[i * n + j] += x * b[k * n + j];
    }
}

/* exp(a) into e; a is scaled in place; w: n * n scratch */
static void mexp_one(la_t* a, int64_t n, const double* theta, la_t* e, la_t* w) {
  double norm = 0;
  for (int64_t j = 0; j < n; j++) {
    double t = 0;
    for (int64_t i = 0; i < n; i++) t += cabs(a[i * n + j]);
    norm = fmax(norm, t);
  }
  if (!isfinite(norm)) { /* CPU's squarings spread the inf/NaN over the whole matrix */
    for (int64_t i = 0; i < n * n; i++) e[i] = NAN;
    return;
  }
  int d = 0;
  while (d < 5 && !(norm <= theta[d])) d++;
  int64_t sq = d == 5 ? (int64_t)fmax(0, ceil(log2(norm / theta[5]))) : 0;
  double scale = ldexp(1.0, (int)-sq);
  for (int64_t i = 0; i < n * n; i++) a[i] *= scale;
  /* T = I + a/1 (I + a/2 (I + ... (I + a/deg))) */
  for (int64_t i = 0; i < n * n; i++) e[i] = i % (n + 1) == 0;
  for (int j = mexp_degree[d]; j >= 1; j--) {
    matmul_nn(a, e, w, n);
    for (int64_t i = 0; i < n * n; i++) e[i] = w[i] / j + (i % (n + 1) == 0);
  }
  for (int64_t q = 0; q < sq; q++) {
    matmul_nn(e, e, w, n);
    memcpy(e, w, sizeof(la_t) * (size_t)(n * n));
  }
}

/* scratch: the matrix, then its exponential and mexp_one's w */
static la_dims matrix_exp_dims(const tpurt_op_call* c) {
  int64_t n = la_rows(&TPURT_ARG(c, matrix_exp, self)->t, 0);
  return (la_dims){n * n, 2 * n * n, 0};
}
LA_SCRATCH_PLAN(matrix_exp, matrix_exp_dims)

tpurt_status tpurt_kernel_matrix_exp(const tpurt_op_call* c) {
  /* linalg_matrix_exp(A) */
  const tpurt_tensor* A = &TPURT_ARG(c, matrix_exp, self)->t;
  /* CPU takes bfloat16 and float16 here too (with double's degree thresholds, as below) */
  tpurt_status st = A->dtype == TPURT_BF16 || A->dtype == TPURT_F16 ? TPURT_OK : dtype_check("linalg.matrix_exp", A);
  if (st) return st;
  int nb;
  int64_t bs[TPURT_MAX_DIMS];
  if (!batch_of(A, 2, &nb, bs)) return TPURT_OK;
  mview a, o;
  mv_init(&a, A, nb, 0);
  mv_init(&o, &c->outs[0], nb, 0);
  int64_t n = a.rows;
  scratch s = {0};
  if ((st = scratch_alloc(&s, matrix_exp_dims(c)))) return st;
  FOR_BATCH(b, nb, bs) {
    mv_load(&a, b, nb, s.a, LA_PLAIN);
    if (n == 1) s.b[0] = cexp(s.a[0]); /* ATen: exp itself for 1 x 1 */
    else mexp_one(s.a, n, A->dtype == TPURT_F32 || A->dtype == TPURT_C64 ? mexp_theta_f32 : mexp_theta_f64, s.b, s.b + n * n);
    mv_store(&o, b, nb, s.b, LA_PLAIN);
  }
  tpurt_temp_release(s.a);
  return TPURT_OK;
}

/* ---------------------------------------------------------------- householder_product */
/* scratch: the reflectors and tau, then the product */
static la_dims householder_dims(const tpurt_op_call* c) {
  const tpurt_tensor* A = &TPURT_ARG(c, householder_product, input)->t;
  int64_t mn = la_rows(A, 0) * la_cols(A, 0);
  return (la_dims){mn + la_rows(&TPURT_ARG(c, householder_product, tau)->t, 1), mn, 0};
}
LA_SCRATCH_PLAN(householder_product, householder_dims)

tpurt_status tpurt_kernel_householder_product(const tpurt_op_call* c) {
  /* linalg_householder_product(A, tau) -> the first n columns of H_0 ... H_{k-1} (orgqr) */
  const tpurt_tensor *A = &TPURT_ARG(c, householder_product, input)->t, *out = &c->outs[0];
  tpurt_status st = dtype_check("torch.linalg.householder_product", A);
  if (st) return st;
  int nb;
  int64_t bs[TPURT_MAX_DIMS];
  if (!batch_of(out, 2, &nb, bs)) return TPURT_OK;
  mview a, t, o;
  mv_init(&a, A, nb, 0);
  mv_init(&t, &TPURT_ARG(c, householder_product, tau)->t, nb, 1);
  mv_init(&o, out, nb, 0);
  int64_t m = a.rows, n = a.cols, k = t.rows;
  scratch s = {0};
  if ((st = scratch_alloc(&s, householder_dims(c)))) return st;
  FOR_BATCH(b, nb, bs) {
    mv_load(&a, b, nb, s.a, LA_PLAIN);
    mv_load(&t, b, nb, s.a + m * n, LA_PLAIN);
    for (int64_t i = 0; i < m * n; i++) s.b[i] = i / n == i % n;
    la_apply_q(s.a, n, s.a + m * n, k, s.b, m, n, 0);
    mv_store(&o, b, nb, s.b, LA_PLAIN);
  }
  tpurt_temp_release(s.a);
  return TPURT_OK;
}
