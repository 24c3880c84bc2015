/* The linalg decompositions under ASan + UBSan (scratch sizing, strided and empty shapes):
 * SVD and eigh reconstruct their input (real and complex64), lstsq fills each driver's
 * outputs, LDL with 2x2 pivots solves, matrix_exp of a rotation generator is the rotation.
 * Values against LAPACK are checked by the Python tests (tests/test_linalg_decomp.py,
 * tests/test_linalg_complex.py). */
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "internal.h"

static tpurt_tensor mat(double* data, int ndim, const int64_t* sizes) {
  tpurt_tensor t = {.data = data, .dtype = TPURT_F64, .ndim = ndim};
  int64_t st = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    t.sizes[d] = sizes[d];
    t.strides[d] = st;
    st *= sizes[d];
  }
  return t;
}
#define T(data, ...) mat(data, sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), (int64_t[]){__VA_ARGS__})

static tpurt_value tv(tpurt_tensor t) { return (tpurt_value){.kind = TPURT_V_TENSOR, .scalar_dtype = -1, .t = t}; }
static tpurt_value iv(int64_t i) { return (tpurt_value){.kind = TPURT_V_INT, .scalar_dtype = -1, .i = i}; }
static tpurt_value sv(const char* s) { return (tpurt_value){.kind = TPURT_V_STRING, .scalar_dtype = -1, .s = s}; }
static tpurt_value none(void) { return (tpurt_value){.kind = TPURT_V_NONE, .scalar_dtype = -1}; }

static tpurt_status run(const char* op, int nargs, const tpurt_value* args, int nouts, const tpurt_tensor* outs) {
  tpurt_op_call c = {.struct_size = sizeof c, .op = tpurt_op_lookup(op), .nargs = nargs, .nouts = nouts};
  CHECK(c.op >= 0, "%s is in the table", op);
  memcpy(c.args, args, sizeof(tpurt_value) * (size_t)nargs);
  memcpy(c.outs, outs, sizeof(tpurt_tensor) * (size_t)nouts);
  return tpurt_op_run(&c);
}

static double* fill(int64_t n, unsigned seed) {
  double* p = malloc(sizeof(double) * (size_t)(n + 1));
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    p[i] = (double)((seed >> 8) & 0xffff) / 32768.0 - 1;
  }
  return p;
}

/* max |A - U diag(S) Vh| over a batch */
static double svd_residual(const double* a, const double* u, const double* s, const double* vh, int64_t nb, int64_t m,
                           int64_t n, int64_t uc, int64_t vr) {
  int64_t k = m < n ? m : n;
  double worst = 0;
  for (int64_t b = 0; b < nb; b++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double t = 0;
        for (int64_t l = 0; l < k; l++) t += u[b * m * uc + i * uc + l] * s[b * k + l] * vh[b * vr * n + l * n + j];
        worst = fmax(worst, fabs(t - a[b * m * n + i * n + j]));
      }
  return worst;
}

static void test_svd(void) {
  static const int64_t shapes[][3] = {{3, 5, 3}, {2, 3, 5}, {1, 4, 4}, {2, 0, 3}, {1, 6, 1}};
  for (int sh = 0; sh < 5; sh++)
    for (int full = 0; full < 2; full++) {
      int64_t nb = shapes[sh][0], m = shapes[sh][1], n = shapes[sh][2], k = m < n ? m : n;
      int64_t uc = full ? m : k, vr = full ? n : k;
      double *a = fill(nb * m * n, 7 + (unsigned)sh), *u = fill(nb * m * uc, 1), *s = fill(nb * k, 2),
             *vh = fill(nb * vr * n, 3);
      tpurt_value args[4] = {tv(T(a, nb, m, n)), iv(full), iv(1), none()};
      tpurt_tensor outs[3] = {T(u, nb, m, uc), T(s, nb, k), T(vh, nb, vr, n)};
      CHECK(run("_linalg_svd", 4, args, 3, outs) == TPURT_OK, "svd: %s", tpurt_last_error());
      double r = svd_residual(a, u, s, vh, nb, m, n, uc, vr);
      CHECK(r < 1e-12, "svd %lldx%lld full=%d: residual %g", (long long)m, (long long)n, full, r);
      for (int64_t b = 0; b < nb; b++) /* U^T U = I */
        for (int64_t i = 0; i < uc; i++)
          for (int64_t j = 0; j < uc; j++) {
            double t = 0;
            for (int64_t l = 0; l < m; l++) t += u[b * m * uc + l * uc + i] * u[b * m * uc + l * uc + j];
            CHECK(fabs(t - (i == j)) < 1e-12, "U orthonormal (%lld, %lld): %g", (long long)i, (long long)j, t);
          }
      free(a), free(u), free(s), free(vh);
    }
  double bad[4] = {1, NAN, 0, 1}, s2[2];
  tpurt_value args[4] = {tv(T(bad, 2, 2)), iv(0), iv(0), none()};
  tpurt_tensor outs[3] = {T(NULL, 0), T(s2, 2), T(NULL, 0)};
  CHECK(run("_linalg_svd", 4, args, 3, outs) == TPURT_ERR_LINALG, "non-finite input fails with LinAlgError");
  CHECK(strstr(tpurt_last_error(), "non-finite") != NULL, "message: %s", tpurt_last_error());
}

static void test_eigh(void) {
  int64_t nb = 3, n = 5;
  double *a = fill(nb * n * n, 11), *w = fill(nb * n, 1), *v = fill(nb * n * n, 2);
  for (int64_t b = 0; b < nb; b++) /* symmetric, so both triangles agree */
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < i; j++) a[b * n * n + j * n + i] = a[b * n * n + i * n + j];
  tpurt_value args[3] = {tv(T(a, nb, n, n)), sv("U"), iv(1)};
  tpurt_tensor outs[2] = {T(w, nb, n), T(v, nb, n, n)};
  CHECK(run("_linalg_eigh", 3, args, 2, outs) == TPURT_OK, "eigh: %s", tpurt_last_error());
  double worst = 0;
  for (int64_t b = 0; b < nb; b++) {
    for (int64_t i = 0; i + 1 < n; i++) CHECK(w[b * n + i] <= w[b * n + i + 1], "ascending");
    for (int64_t i = 0; i < n; i++) /* A v_j = w_j v_j */
      for (int64_t j = 0; j < n; j++) {
        double t = 0;
        for (int64_t l = 0; l < n; l++) t += a[b * n * n + i * n + l] * v[b * n * n + l * n + j];
        worst = fmax(worst, fabs(t - w[b * n + j] * v[b * n * n + i * n + j]));
      }
  }
  CHECK(worst < 1e-12, "eigh residual %g", worst);
  free(a), free(w), free(v);
}

static void test_lstsq(void) {
  static const char* drivers[] = {"gels", "gelsy", "gelsd", "gelss"};
  int64_t m = 6, n = 3, r = 2;
  for (int d = 0; d < 4; d++) {
    double *a = fill(m * n, 5), *b = fill(m * r, 6), x[6], res[2], sing[3];
    int64_t rank = -1;
    int has_rank = d > 0, has_sv = d > 1, has_res = d != 1;
    tpurt_value args[4] = {tv(T(a, m, n)), tv(T(b, m, r)), none(), sv(drivers[d])};
    tpurt_tensor outs[4] = {T(x, n, r), has_res ? T(res, r) : T(NULL, 0),
                            {.data = &rank, .dtype = TPURT_I64, .ndim = has_rank ? 0 : 1}, has_sv ? T(sing, n) : T(NULL, 0)};
    CHECK(run("linalg_lstsq.out", 4, args, 4, outs) == TPURT_OK, "lstsq %s: %s", drivers[d], tpurt_last_error());
    /* the normal equations A^T (A x - b) = 0 hold */
    for (int64_t j = 0; j < n; j++)
      for (int64_t c = 0; c < r; c++) {
        double t = 0;
        for (int64_t i = 0; i < m; i++) {
          double e = -b[i * r + c];
          for (int64_t l = 0; l < n; l++) e += a[i * n + l] * x[l * r + c];
          t += a[i * n + j] * e;
        }
        CHECK(fabs(t) < 1e-12, "lstsq %s normal equations: %g", drivers[d], t);
      }
    if (has_rank) CHECK(rank == 3, "lstsq %s rank %lld", drivers[d], (long long)rank);
    if (has_sv) CHECK(sing[0] >= sing[1] && sing[1] >= sing[2] && sing[2] > 0, "singular values descending");
    free(a), free(b);
  }
}

static void test_ldl(void) {
  /* [[0, 1, 0], [1, 0, 0], [0, 0, 2]]: a zero diagonal forces a 2x2 pivot */
  double a[9] = {0, 1, 0, 1, 0, 0, 0, 0, 2}, ld[9], b[3] = {1, 2, 3}, x[3];
  int32_t piv[3], info = -1;
  tpurt_value args[3] = {tv(T(a, 3, 3)), iv(0), iv(0)};
  tpurt_tensor po = {.data = piv, .dtype = TPURT_I32, .ndim = 1, .sizes = {3}, .strides = {1}};
  tpurt_tensor io = {.data = &info, .dtype = TPURT_I32, .ndim = 0};
  tpurt_tensor outs[3] = {T(ld, 3, 3), po, io};
  CHECK(run("linalg_ldl_factor_ex", 3, args, 3, outs) == TPURT_OK, "ldl: %s", tpurt_last_error());
  CHECK(piv[0] == -2 && piv[1] == -2 && piv[2] == 3 && info == 0, "pivots %d %d %d info %d", piv[0], piv[1], piv[2], info);
  tpurt_value sargs[4] = {tv(T(ld, 3, 3)), tv(po), tv(T(b, 3, 1)), iv(0)};
  tpurt_tensor sout[1] = {T(x, 3, 1)};
  CHECK(run("linalg_ldl_solve", 4, sargs, 1, sout) == TPURT_OK, "ldl_solve: %s", tpurt_last_error());
  CHECK(fabs(x[0] - 2) < 1e-15 && fabs(x[1] - 1) < 1e-15 && fabs(x[2] - 1.5) < 1e-15, "x = %g %g %g", x[0], x[1], x[2]);
  piv[0] = 7; /* out of range */
  CHECK(run("linalg_ldl_solve", 4, sargs, 1, sout) == TPURT_ERR_RUNTIME, "bad pivot fails");
}

static void test_matrix_exp(void) {
  /* exp([[0, -t], [t, 0]]) is the rotation by t, for t on both sides of the thresholds */
  static const double ts[] = {1e-9, 0.01, 0.3, 1.0, 5.0, 100.0};
  for (int i = 0; i < 6; i++) {
    double t = ts[i], a[4] = {0, -t, t, 0}, e[4];
    tpurt_value args[1] = {tv(T(a, 2, 2))};
    tpurt_tensor outs[1] = {T(e, 2, 2)};
    CHECK(run("linalg_matrix_exp", 1, args, 1, outs) == TPURT_OK, "matrix_exp: %s", tpurt_last_error());
    CHECK(fabs(e[0] - cos(t)) < 1e-13 && fabs(e[2] - sin(t)) < 1e-13, "t=%g: %g %g", t, e[0], e[2]);
  }
}

static void test_householder_product(void) {
  int64_t m = 5, n = 3;
  double *a = fill(m * n, 9), tau[3], q[15];
  tpurt_value gargs[1] = {tv(T(a, m, n))};
  tpurt_tensor gouts[2] = {T(a, m, n), T(tau, 3)};
  CHECK(run("geqrf", 1, gargs, 2, gouts) == TPURT_OK, "geqrf: %s", tpurt_last_error());
  tpurt_value args[2] = {tv(T(a, m, n)), tv(T(tau, 3))};
  tpurt_tensor outs[1] = {T(q, m, n)};
  CHECK(run("linalg_householder_product", 2, args, 1, outs) == TPURT_OK, "householder_product: %s", tpurt_last_error());
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      double t = 0;
      for (int64_t l = 0; l < m; l++) t += q[l * n + i] * q[l * n + j];
      CHECK(fabs(t - (i == j)) < 1e-14, "Q^T Q = I at (%lld, %lld): %g", (long long)i, (long long)j, t);
    }
  free(a);
}

/* complex64 tensors of n values from fill(), contiguous */
static tpurt_tensor cmat(int ndim, const int64_t* sizes, unsigned seed) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= sizes[d];
  double* re = fill(2 * n, seed);
  tpurt_c64* z = malloc(sizeof(tpurt_c64) * (size_t)(n + 1));
  for (int64_t i = 0; i < n; i++) z[i] = (tpurt_c64){(float)re[2 * i], (float)re[2 * i + 1]};
  free(re);
  tpurt_tensor t = mat(NULL, ndim, sizes);
  t.data = z;
  t.dtype = TPURT_C64;
  return t;
}
#define CT(seed, ...) cmat(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), (int64_t[]){__VA_ARGS__}, seed)
static double complex cz(const tpurt_tensor* t, int64_t i) {
  const tpurt_c64* z = (const tpurt_c64*)t->data + i;
  return CMPLX(z->re, z->im);
}

static void test_complex_svd_eigh(void) {
  static const int64_t shapes[][3] = {{2, 3, 5}, {1, 5, 3}, {2, 0, 3}};
  for (int sh = 0; sh < 3; sh++)
    for (int full = 0; full < 2; full++) {
      int64_t nb = shapes[sh][0], m = shapes[sh][1], n = shapes[sh][2], k = m < n ? m : n;
      int64_t uc = full ? m : k, vr = full ? n : k;
      tpurt_tensor a = CT(1, nb, m, n), u = CT(2, nb, m, uc), vh = CT(3, nb, vr, n);
      float* s = calloc((size_t)(nb * k + 1), sizeof(float));
      tpurt_tensor st = mat(NULL, 2, (int64_t[]){nb, k});
      st.data = s, st.dtype = TPURT_F32;
      tpurt_value args[4] = {tv(a), iv(full), iv(1), none()};
      tpurt_tensor outs[3] = {u, st, vh};
      CHECK(run("_linalg_svd", 4, args, 3, outs) == TPURT_OK, "complex svd: %s", tpurt_last_error());
      double worst = 0;
      for (int64_t b = 0; b < nb; b++)
        for (int64_t i = 0; i < m; i++)
          for (int64_t j = 0; j < n; j++) {
            double complex t = 0;
            for (int64_t l = 0; l < k; l++) t += cz(&u, b * m * uc + i * uc + l) * s[b * k + l] * cz(&vh, b * vr * n + l * n + j);
            worst = fmax(worst, cabs(t - cz(&a, b * m * n + i * n + j)));
          }
      CHECK(worst < 1e-5, "complex svd %lldx%lld full=%d: residual %g", (long long)m, (long long)n, full, worst);
      free(a.data), free(u.data), free(vh.data), free(s);
    }
  int64_t nb = 2, n = 4;
  tpurt_tensor a = CT(4, nb, n, n), v = CT(5, nb, n, n);
  float w[8];
  tpurt_tensor wt = mat(NULL, 2, (int64_t[]){nb, n});
  wt.data = w, wt.dtype = TPURT_F32;
  tpurt_value args[3] = {tv(a), sv("L"), iv(1)};
  tpurt_tensor outs[2] = {wt, v};
  CHECK(run("_linalg_eigh", 3, args, 2, outs) == TPURT_OK, "complex eigh: %s", tpurt_last_error());
  double worst = 0;
  for (int64_t b = 0; b < nb; b++) /* H v_j = w_j v_j for H the Hermitian matrix of the lower triangle */
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) {
        double complex t = 0;
        for (int64_t l = 0; l < n; l++) {
          double complex h = l < i ? cz(&a, b * n * n + i * n + l) : l > i ? conj(cz(&a, b * n * n + l * n + i))
                                                                           : creal(cz(&a, b * n * n + i * n + i));
          t += h * cz(&v, b * n * n + l * n + j);
        }
        worst = fmax(worst, cabs(t - w[b * n + j] * cz(&v, b * n * n + i * n + j)));
      }
  CHECK(worst < 1e-5, "complex eigh residual %g", worst);
  free(a.data), free(v.data);
}

int main(void) {
  CHECK(tpurt_init() == TPURT_OK, "%s", tpurt_last_error());
  test_svd();
  test_eigh();
  test_lstsq();
  test_ldl();
  test_matrix_exp();
  test_householder_product();
  test_complex_svd_eigh();
  return CHECK_DONE();
}
