/* SVD and eigh of the larger matrices (linalg_decomp.c picks these from LA_HOUSEHOLDER_MIN
 * columns): Householder reduction to a real bidiagonal (SVD, LAPACK zgebd2's reflectors) or
 * real symmetric tridiagonal (eigh, zhetd2's), whose zlarfg betas make the reduced matrix real;
 * then implicit-shift QR on the bidiagonal (EISPACK svd / Golub and Van Loan 8.6) or QL on the
 * tridiagonal (EISPACK tql2), the rotations applied to the reflectors' products.
 *
 * Why not Jacobi everywhere: Jacobi costs about 10 sweeps of n^2/2 rotations, each a pass over
 * two columns (or rows and columns); at 1000 x 1000 that was minutes where LAPACK takes a
 * fraction of a second. These cost one reduction (4 p q^2 or 4/3 n^3 flops... times the
 * complex factor) plus the rotations. Their values are accurate to eps times the largest
 * (LAPACK's bound), not each to its own relative precision as Jacobi's are: the small matrices
 * keep Jacobi.
 *
 * Vectors are held transposed (row j = the j-th column of U, V or Q) so that reflectors and
 * rotations run over contiguous memory. */
#include <float.h>

#include "linalg.h"

/* conj(a) * b and a * b without the C99 NaN recovery path (inputs are finite here) */
static inline la_t cj_mul(la_t a, la_t b) {
  return CMPLX(creal(a) * creal(b) + cimag(a) * cimag(b), creal(a) * cimag(b) - cimag(a) * creal(b));
}
static inline la_t c_mul(la_t a, la_t b) {
  return CMPLX(creal(a) * creal(b) - cimag(a) * cimag(b), creal(a) * cimag(b) + cimag(a) * creal(b));
}

/* zlarfg on x[0], x[s], ..., x[(n - 1) s]: returns tau of H = I - tau v v^H with H^H x = beta e1;
 * afterwards x[0] = beta (real) and x[i s] = v_i (v_0 = 1 implied). */
static la_t reflector(la_t* x, int64_t n, int64_t s) {
  la_t alpha = x[0];
  double xn = 0;
  for (int64_t i = 1; i < n; i++) xn = hypot(xn, cabs(x[i * s]));
  if (xn == 0 && cimag(alpha) == 0) return 0;
  double beta = -copysign(hypot(cabs(alpha), xn), creal(alpha));
  la_t scale = 1 / (alpha - beta);
  for (int64_t i = 1; i < n; i++) x[i * s] = c_mul(x[i * s], scale);
  x[0] = beta;
  return CMPLX((beta - creal(alpha)) / beta, -cimag(alpha) / beta);
}

/* rows i and j of the transposed vectors (length len): the plane rotation EISPACK applies to
 * columns i and j of U or V */
static void rotate_rows(la_t* t, int64_t len, int64_t i, int64_t j, double c, double s) {
  la_t *x = t + i * len, *y = t + j * len;
  for (int64_t r = 0; r < len; r++) {
    la_t a = x[r], b = y[r];
    x[r] = a * c + b * s;
    y[r] = b * c - a * s;
  }
}

/* y (rows of length len, rows c0..c1) <- y (I - tau v v^H)^T applied as H to each row read as a
 * column over positions from..len-1: y_c -= tau (v^H y_c) v, v = (1, tail...) at from */
static void reflect_rows(la_t* y, int64_t len, int64_t c0, int64_t c1, int64_t from, const la_t* v, la_t tau) {
  for (int64_t c = c0; c < c1; c++) {
    la_t* row = y + c * len;
    la_t d = row[from];
    for (int64_t r = from + 1; r < len; r++) d += cj_mul(v[r], row[r]);
    d = c_mul(d, tau);
    row[from] -= d;
    for (int64_t r = from + 1; r < len; r++) row[r] -= c_mul(d, v[r]);
  }
}

int64_t la_bidiag_scratch(int64_t p, int64_t q) { return p * q + q * q + 4 * q + 2 * p; }
int64_t la_tridiag_scratch(int64_t n) { return n * n + 4 * n; }

/* Implicit-shift QR on the upper bidiagonal (d, the diagonal; f[i] = the entry above d[i],
 * f[0] = 0) until f is negligible, the rotations applied to the rows of ut (U^T, q x p) and
 * vt (V^T, q x q) when they are not NULL; then d >= 0. */
static void bidiag_qr(double* d, double* f, int64_t q, la_t* ut, int64_t p, la_t* vt) {
  double anorm = 0;
  for (int64_t i = 0; i < q; i++) anorm = fmax(anorm, fabs(d[i]) + fabs(f[i]));
  double tiny = DBL_EPSILON * anorm;
  for (int64_t k = q - 1; k >= 0; k--) {
    for (int its = 0; its < 75; its++) {
      int64_t l = k, cancel = 1;
      for (; l >= 0; l--) { /* the largest l with f[l] negligible, or d[l - 1] negligible */
        if (fabs(f[l]) <= tiny) {
          cancel = 0;
          break;
        }
        if (fabs(d[l - 1]) <= tiny) break; /* f[0] = 0 stops the loop at l = 0 */
      }
      if (cancel) { /* d[l - 1] ~ 0: rotate f[l] away into row l - 1 */
        double c = 0, s = 1;
        for (int64_t i = l; i <= k; i++) {
          double g = s * f[i];
          f[i] *= c;
          if (fabs(g) <= tiny) break;
          double h = hypot(g, d[i]);
          c = d[i] / h;
          s = -g / h;
          d[i] = h;
          if (ut) rotate_rows(ut, p, l - 1, i, c, s);
        }
      }
      double z = d[k];
      if (l == k) { /* converged: make the singular value non-negative */
        if (z < 0) {
          d[k] = -z;
          if (vt)
            for (int64_t r = 0; r < q; r++) vt[k * q + r] = -vt[k * q + r];
        }
        break;
      }
      /* shift from the trailing 2 x 2, then chase the bulge from l to k */
      double x = d[l], y = d[k - 1], g = f[k - 1], h = f[k];
      double fs = ((y - z) * (y + z) + (g - h) * (g + h)) / (2 * h * y);
      g = hypot(fs, 1);
      fs = ((x - z) * (x + z) + h * (y / (fs + copysign(g, fs)) - h)) / x;
      double c = 1, s = 1;
      for (int64_t j = l; j < k; j++) {
        int64_t i = j + 1;
        g = f[i];
        y = d[i];
        h = s * g;
        g = c * g;
        z = hypot(fs, h);
        f[j] = z;
        c = fs / z;
        s = h / z;
        fs = x * c + g * s;
        g = g * c - x * s;
        h = y * s;
        y *= c;
        if (vt) rotate_rows(vt, q, j, i, c, s);
        z = hypot(fs, h);
        d[j] = z;
        if (z != 0) {
          c = fs / z;
          s = h / z;
        }
        fs = c * g + s * y;
        x = c * y - s * g;
        if (ut) rotate_rows(ut, p, j, i, c, s);
      }
      f[l] = 0;
      f[k] = fs;
      d[k] = x;
    }
  }
}

void la_svd_bidiag(la_t* w, int64_t p, int64_t q, la_t* vv, double* s, int vectors, la_t* ws) {
  la_t *ut = ws, *vt = ut + p * q, *tq = vt + q * q, *tp = tq + q, *acc = tp + q, *col = acc + p;
  double *d = (double*)(col + p), *f = d + q;
  for (int64_t i = 0; i < q; i++) {
    /* H_i from the left zeroes column i below the diagonal */
    tq[i] = reflector(w + i * q + i, p - i, q);
    d[i] = creal(w[i * q + i]);
    if (tq[i] != 0 && i + 1 < q) { /* rows i.. of columns i+1..: C -= conj(tau) v (v^H C) */
      for (int64_t c = i + 1; c < q; c++) acc[c] = w[i * q + c];
      for (int64_t r = i + 1; r < p; r++) {
        la_t vr = w[r * q + i];
        for (int64_t c = i + 1; c < q; c++) acc[c] += cj_mul(vr, w[r * q + c]);
      }
      la_t t = conj(tq[i]);
      for (int64_t c = i + 1; c < q; c++) {
        acc[c] = c_mul(acc[c], t);
        w[i * q + c] -= acc[c];
      }
      for (int64_t r = i + 1; r < p; r++) {
        la_t vr = w[r * q + i];
        for (int64_t c = i + 1; c < q; c++) w[r * q + c] -= c_mul(vr, acc[c]);
      }
    }
    f[i] = 0;
    if (i + 1 >= q) {
      tp[i] = 0;
      continue;
    }
    /* G_i from the right zeroes row i beyond the superdiagonal: zlarfg of the row's conjugate */
    la_t* u = w + i * q + i + 1;
    int64_t nu = q - i - 1;
    for (int64_t c = 0; c < nu; c++) u[c] = conj(u[c]);
    tp[i] = reflector(u, nu, 1);
    if (tp[i] != 0) /* rows i+1..: C -= tau (C u) u^H */
      for (int64_t r = i + 1; r < p; r++) {
        la_t* row = w + r * q + i + 1;
        la_t t = row[0];
        for (int64_t c = 1; c < nu; c++) t += c_mul(row[c], u[c]);
        t = c_mul(t, tp[i]);
        row[0] -= t;
        for (int64_t c = 1; c < nu; c++) row[c] -= cj_mul(u[c], t);
      }
  }
  for (int64_t i = 1; i < q; i++) f[i] = creal(w[(i - 1) * q + i]);
  if (vectors) { /* U = H_0 ... H_{q-1} I[:, :q], V = G_0 ... G_{q-2}, built backwards */
    for (int64_t i = 0; i < q * p; i++) ut[i] = 0;
    for (int64_t i = 0; i < q; i++) ut[i * p + i] = 1;
    for (int64_t i = q - 1; i >= 0; i--) {
      if (tq[i] == 0) continue;
      for (int64_t r = i + 1; r < p; r++) col[r] = w[r * q + i];
      reflect_rows(ut, p, i, q, i, col, tq[i]);
    }
    for (int64_t i = 0; i < q * q; i++) vt[i] = i % (q + 1) == 0;
    for (int64_t i = q - 2; i >= 0; i--) {
      if (tp[i] == 0) continue;
      la_t* u = w + i * q + i + 1;
      for (int64_t r = i + 2; r < q; r++) col[r] = u[r - i - 1];
      reflect_rows(vt, q, i + 1, q, i + 1, col, tp[i]);
    }
  }
  bidiag_qr(d, f, q, vectors ? ut : NULL, p, vectors ? vt : NULL);
  for (int64_t j = 0; j < q; j++) s[j] = d[j];
  if (!vectors) return;
  for (int64_t r = 0; r < p; r++)
    for (int64_t j = 0; j < q; j++) w[r * q + j] = ut[j * p + r] * d[j];
  for (int64_t r = 0; r < q; r++)
    for (int64_t j = 0; j < q; j++) vv[r * q + j] = vt[j * q + r];
}

/* Implicit QL on the symmetric tridiagonal (diagonal d, e[i] between i and i + 1, e[n - 1] = 0)
 * until e is negligible, the rotations applied to the rows of zt (Q^T, n x n) when not NULL. */
static void tridiag_ql(double* d, double* e, int64_t n, la_t* zt) {
  for (int64_t l = 0; l < n; l++) {
    for (int its = 0; its < 60; its++) {
      int64_t m = l;
      for (; m < n - 1; m++)
        if (fabs(e[m]) <= DBL_EPSILON * (fabs(d[m]) + fabs(d[m + 1]))) break;
      if (m == l) break;
      double g = (d[l + 1] - d[l]) / (2 * e[l]), r = hypot(g, 1);
      g = d[m] - d[l] + e[l] / (g + copysign(r, g));
      double s = 1, c = 1, p = 0;
      int64_t i = m - 1;
      for (; i >= l; i--) {
        double f = s * e[i], b = c * e[i];
        e[i + 1] = r = hypot(f, g);
        if (r == 0) { /* recover from underflow: deflate and restart */
          d[i + 1] -= p;
          e[m] = 0;
          break;
        }
        s = f / r;
        c = g / r;
        g = d[i + 1] - p;
        r = (d[i] - g) * s + 2 * c * b;
        p = s * r;
        d[i + 1] = g + p;
        g = c * r - b;
        if (zt) rotate_rows(zt, n, i, i + 1, c, -s);
      }
      if (r == 0 && i >= l) continue;
      d[l] -= p;
      e[l] = g;
      e[m] = 0;
    }
  }
}

void la_eigh_tridiag(la_t* a, int64_t n, la_t* v, la_t* ws) {
  la_t *zt = ws, *tau = zt + n * n, *x = tau + n, *u = x + n;
  double *d = (double*)(u + n), *e = d + n;
  for (int64_t k = 0; k + 1 < n; k++) {
    /* H_k zeroes column k below the subdiagonal (the last one, of length 1, makes it real);
     * then A22 <- H_k^H A22 H_k = A22 - u x'^H - x' u^H with x = tau A22 u and
     * x' = x - tau (x^H u) u / 2 (zhetd2), u = (1, the reflector's tail) */
    int64_t m = n - k - 1;
    la_t* col = a + (k + 1) * n + k;
    tau[k] = reflector(col, m, n);
    e[k] = creal(col[0]);
    if (tau[k] == 0) continue;
    u[0] = 1;
    for (int64_t r = 1; r < m; r++) u[r] = col[r * n];
    la_t xhu = 0;
    for (int64_t r = 0; r < m; r++) {
      const la_t* row = a + (k + 1 + r) * n + k + 1;
      la_t t = 0;
      for (int64_t c = 0; c < m; c++) t += c_mul(row[c], u[c]);
      x[r] = c_mul(t, tau[k]);
      xhu += cj_mul(x[r], u[r]);
    }
    la_t alpha = -0.5 * c_mul(tau[k], xhu);
    for (int64_t r = 0; r < m; r++) x[r] += c_mul(alpha, u[r]);
    for (int64_t r = 0; r < m; r++) {
      la_t* row = a + (k + 1 + r) * n + k + 1;
      la_t ur = u[r], xr = x[r];
      for (int64_t c = 0; c < m; c++) row[c] -= cj_mul(x[c], ur) + cj_mul(u[c], xr);
    }
  }
  for (int64_t i = 0; i < n; i++) d[i] = creal(a[i * n + i]);
  e[n - 1] = 0;
  if (v) { /* Q = H_0 ... H_{n-2}, built backwards */
    for (int64_t i = 0; i < n * n; i++) zt[i] = i % (n + 1) == 0;
    for (int64_t k = n - 2; k >= 0; k--) {
      if (tau[k] == 0) continue;
      for (int64_t r = k + 2; r < n; r++) x[r] = a[r * n + k];
      reflect_rows(zt, n, k + 1, n, k + 1, x, tau[k]);
    }
  }
  tridiag_ql(d, e, n, v ? zt : NULL);
  for (int64_t i = 0; i < n; i++) a[i * n + i] = d[i];
  if (v)
    for (int64_t r = 0; r < n; r++)
      for (int64_t j = 0; j < n; j++) v[r * n + j] = zt[j * n + r];
}
