/* FFT kernels (_fft_c2c, _fft_r2c, _fft_c2r) through tpurt_op_run against a naive O(n^2) DFT in
 * double: every length 1..80 and larger smooth, prime (Bluestein) and mixed lengths, strided
 * inputs and outputs, dim subsets, every normalization, Hermitian round trips, empty tensors.
 * Run under ASan + UBSan by `make test`. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "internal.h"

/* A float32 result can be no closer than its own rounding (2^-24 relative, about 4e-8 RMS);
 * this leaves room for the double-precision transform's own error but not a float32 one. */
#define FFT_TOL 1.5e-7

static unsigned seed = 7;
static float frand(void) {
  seed = seed * 1103515245u + 12345u;
  return (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static tpurt_tensor tensor(void* data, int dtype, int ndim, const int64_t* sizes, const int64_t* strides) {
  tpurt_tensor t = {.data = data, .dtype = dtype, .ndim = ndim};
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    t.sizes[d] = sizes[d];
    t.strides[d] = strides ? strides[d] : s;
    s *= sizes[d];
  }
  return t;
}

static tpurt_status run_fft(const char* name, tpurt_tensor in, const int64_t* dims, int ndims, int norm,
                            int64_t last, tpurt_tensor out) {
  tpurt_op_call c;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  c.op = tpurt_op_lookup(name);
  c.nargs = 4, c.nouts = 1;
  c.args[0] = (tpurt_value){.kind = TPURT_V_TENSOR, .scalar_dtype = -1, .t = in};
  c.args[1] = (tpurt_value){.kind = TPURT_V_INTS, .n = ndims, .scalar_dtype = -1, .ints = dims};
  c.args[2] = (tpurt_value){.kind = TPURT_V_INT, .scalar_dtype = -1, .i = norm};
  c.args[3] = (tpurt_value){.kind = TPURT_V_INT, .scalar_dtype = -1, .i = last};
  c.outs[0] = out;
  tpurt_status s = tpurt_op_run(&c);
  CHECK(s == TPURT_OK, "%s: %s", name, tpurt_last_error());
  return s;
}

/* ---------------------------------------------------------------- reference */
/* In-place naive DFT along `dim` of a dense complex-double array (re, im pairs), sign -1
 * forward, +1 inverse; twiddles from exact (j k mod n) angles. */
static void ref_dft(double* x, int ndim, const int64_t* sizes, int dim, int sign) {
  int64_t n = sizes[dim], inner = 1, outer = 1;
  for (int d = dim + 1; d < ndim; d++) inner *= sizes[d];
  for (int d = 0; d < dim; d++) outer *= sizes[d];
  double* y = malloc(sizeof(double) * 2 * (size_t)(n ? n : 1));
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      double* line = x + 2 * (o * n * inner + i);
      for (int64_t k = 0; k < n; k++) {
        double re = 0, im = 0;
        for (int64_t j = 0; j < n; j++) {
          double a = sign * 2 * M_PI * (double)((j * k) % n) / (double)n, c = cos(a), s = sin(a);
          double xr = line[2 * j * inner], xi = line[2 * j * inner + 1];
          re += xr * c - xi * s, im += xr * s + xi * c;
        }
        y[2 * k] = re, y[2 * k + 1] = im;
      }
      for (int64_t k = 0; k < n; k++) line[2 * k * inner] = y[2 * k], line[2 * k * inner + 1] = y[2 * k + 1];
    }
  free(y);
}

/* RMS of (got - ref) over RMS of ref; got is n complex64 (or real when im_stride == 0). */
static double rel_err(const float* got, int cplx, const double* ref, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; i++) {
    double dr = (cplx ? got[2 * i] : got[i]) - ref[2 * i], di = cplx ? got[2 * i + 1] - ref[2 * i + 1] : 0;
    num += dr * dr + di * di, den += ref[2 * i] * ref[2 * i] + ref[2 * i + 1] * ref[2 * i + 1];
  }
  return den ? sqrt(num / den) : sqrt(num);
}

/* ---------------------------------------------------------------- tests */
static void test_c2c_lengths(void) {
  static const int64_t extra[] = {97, 121, 127, 128, 210, 243, 625, 1000, 1009, 2018, 3 * 67, 4096, 7 * 11 * 13};
  for (int i = 0; i < 80 + (int)(sizeof extra / sizeof extra[0]); i++) {
    int64_t n = i < 80 ? i + 1 : extra[i - 80];
    float* x = malloc(sizeof(float) * 2 * (size_t)n);
    float* y = malloc(sizeof(float) * 2 * (size_t)n);
    double* ref = malloc(sizeof(double) * 2 * (size_t)n);
    for (int64_t k = 0; k < 2 * n; k++) x[k] = frand(), ref[k] = x[k];
    for (int fwd = 0; fwd < 2; fwd++) {
      int64_t dim = 0;
      for (int64_t k = 0; k < 2 * n; k++) ref[k] = x[k];
      ref_dft(ref, 1, &n, 0, fwd ? -1 : 1);
      run_fft("_fft_c2c", tensor(x, TPURT_C64, 1, &n, NULL), &dim, 1, 0, fwd, tensor(y, TPURT_C64, 1, &n, NULL));
      double e = rel_err(y, 1, ref, n);
      CHECK(e < FFT_TOL, "c2c n=%lld forward=%d: relative error %g", (long long)n, fwd, e);
    }
    free(x), free(y), free(ref);
  }
}

/* 3-d input read through a permutation (non-contiguous), dims {2, 0}, every normalization,
 * output written with padded strides. */
static void test_c2c_strided_dims(void) {
  enum { A = 6, B = 5, C = 9 };
  float* base = malloc(sizeof(float) * 2 * A * B * C);
  for (int i = 0; i < 2 * A * B * C; i++) base[i] = frand();
  /* logical [A, B, C] over memory laid out [C, A, B] */
  const int64_t sizes[3] = {A, B, C}, in_st[3] = {B, 1, A * B}, out_st[3] = {B * (C + 1), C + 1, 1};
  float* out = calloc(2 * A * B * (C + 1), sizeof(float));
  double* ref = malloc(sizeof(double) * 2 * A * B * C);
  for (int norm = 0; norm < 3; norm++) {
    for (int a = 0; a < A; a++)
      for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
          int64_t src = a * in_st[0] + b * in_st[1] + c * in_st[2], dst = (a * B + b) * C + c;
          ref[2 * dst] = base[2 * src], ref[2 * dst + 1] = base[2 * src + 1];
        }
    ref_dft(ref, 3, sizes, 2, 1);
    ref_dft(ref, 3, sizes, 0, 1);
    double scale = norm == 0 ? 1 : norm == 1 ? 1 / sqrt(A * C) : 1.0 / (A * C);
    for (int i = 0; i < 2 * A * B * C; i++) ref[i] *= scale;
    const int64_t dims[2] = {2, -3};
    run_fft("_fft_c2c.out", tensor(base, TPURT_C64, 3, sizes, in_st), dims, 2, norm, 0,
            tensor(out, TPURT_C64, 3, sizes, out_st));
    float* got = malloc(sizeof(float) * 2 * A * B * C);
    for (int r = 0; r < A * B; r++) memcpy(got + 2 * r * C, out + 2 * r * (C + 1), sizeof(float) * 2 * C);
    double e = rel_err(got, 1, ref, A * B * C);
    CHECK(e < FFT_TOL, "c2c strided dims norm=%d: relative error %g", norm, e);
    free(got);
  }
  free(base), free(out), free(ref);
}

/* r2c over (0, 2) of a real [4, 3, n] slice with a step of 2 along its last dim */
static void test_r2c(void) {
  static const int64_t lens[] = {1, 2, 7, 8, 15, 67, 128};
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
    for (int onesided = 0; onesided < 2; onesided++) {
      const int64_t n = lens[li], h = onesided ? n / 2 + 1 : n, sizes[3] = {4, 3, n};
      const int64_t st[3] = {3 * 2 * n, 2 * n, 2}, osz[3] = {4, 3, h};
      float* x = malloc(sizeof(float) * 4 * 3 * 2 * (size_t)n);
      for (int64_t i = 0; i < 4 * 3 * 2 * n; i++) x[i] = frand();
      double* ref = calloc(2 * 4 * 3 * (size_t)n, sizeof(double));
      for (int64_t i = 0; i < 4 * 3 * n; i++) ref[2 * i] = x[2 * i];
      ref_dft(ref, 3, sizes, 2, -1);
      ref_dft(ref, 3, sizes, 0, -1);
      double* kept = malloc(sizeof(double) * 2 * 4 * 3 * (size_t)h);
      for (int64_t r = 0; r < 12; r++) memcpy(kept + 2 * r * h, ref + 2 * r * n, sizeof(double) * 2 * (size_t)h);
      float* y = malloc(sizeof(float) * 2 * 12 * (size_t)h);
      const int64_t dims[2] = {0, 2};
      run_fft("_fft_r2c", tensor(x, TPURT_F32, 3, sizes, st), dims, 2, 0, onesided, tensor(y, TPURT_C64, 3, osz, NULL));
      double e = rel_err(y, 1, kept, 12 * h);
      CHECK(e < FFT_TOL, "r2c n=%lld onesided=%d: relative error %g", (long long)n, onesided, e);
      free(x), free(ref), free(kept), free(y);
    }
}

/* c2r over (1, 2) of arbitrary (non-Hermitian) [2, 5, n/2+1] input: the other dim's inverse
 * first, then the last dim's Hermitian extension whose zero and Nyquist frequencies count only
 * by their real part. */
static void test_c2r(void) {
  static const int64_t lens[] = {1, 2, 3, 8, 9, 61, 64, 67};
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
    const int64_t n = lens[li], h = n / 2 + 1, isz[3] = {2, 5, h}, osz[3] = {2, 5, n};
    float* x = malloc(sizeof(float) * 2 * 10 * (size_t)h);
    for (int64_t i = 0; i < 2 * 10 * h; i++) x[i] = frand();
    double* ref = malloc(sizeof(double) * 2 * 10 * (size_t)h);
    for (int64_t i = 0; i < 2 * 10 * h; i++) ref[i] = x[i];
    ref_dft(ref, 3, isz, 1, 1);
    double* full = calloc(2 * 10 * (size_t)n, sizeof(double));
    for (int64_t r = 0; r < 10; r++) {
      double *f = full + 2 * r * n, *g = ref + 2 * r * h;
      for (int64_t k = 0; k < n; k++) {
        int64_t src = k < h ? k : n - k;
        f[2 * k] = g[2 * src], f[2 * k + 1] = k < h ? g[2 * src + 1] : -g[2 * src + 1];
      }
      f[1] = 0;
      if (n % 2 == 0) f[2 * (n / 2) + 1] = 0;
    }
    ref_dft(full, 3, osz, 2, 1);
    for (int64_t i = 0; i < 10 * n; i++) full[2 * i] /= (double)(5 * n), full[2 * i + 1] = 0;
    float* y = malloc(sizeof(float) * 10 * (size_t)n);
    const int64_t dims[2] = {1, 2};
    run_fft("_fft_c2r", tensor(x, TPURT_C64, 3, isz, NULL), dims, 2, 2, n, tensor(y, TPURT_F32, 3, osz, NULL));
    double e = rel_err(y, 0, full, 10 * n);
    CHECK(e < FFT_TOL, "c2r n=%lld: relative error %g", (long long)n, e);
    free(x), free(ref), free(full), free(y);
  }
}

/* irfft(rfft(x)) == x for a batch large enough to be split across the pool */
static void test_round_trip(void) {
  enum { BATCH = 300, N = 250 };
  const int64_t sz[2] = {BATCH, N}, hsz[2] = {BATCH, N / 2 + 1}, dim = 1;
  float* x = malloc(sizeof(float) * BATCH * N);
  float* X = malloc(sizeof(float) * 2 * BATCH * (N / 2 + 1));
  float* y = malloc(sizeof(float) * BATCH * N);
  double* ref = calloc(2 * BATCH * N, sizeof(double));
  for (int i = 0; i < BATCH * N; i++) x[i] = frand(), ref[2 * i] = x[i];
  run_fft("_fft_r2c", tensor(x, TPURT_F32, 2, sz, NULL), &dim, 1, 1, 1, tensor(X, TPURT_C64, 2, hsz, NULL));
  run_fft("_fft_c2r", tensor(X, TPURT_C64, 2, hsz, NULL), &dim, 1, 1, N, tensor(y, TPURT_F32, 2, sz, NULL));
  double e = rel_err(y, 0, ref, BATCH * N);
  CHECK(e < 2 * FFT_TOL, "rfft/irfft ortho round trip: relative error %g", e);
  free(x), free(X), free(y), free(ref);
}

/* Empty tensors write nothing; c2c over no dims is a copy (here of a reversed view); real
 * transforms need a dim. */
static void test_edges(void) {
  float in[4] = {1, 2, 3, 4}, out[4] = {-1, -1, -1, -1};
  const int64_t zero[2] = {0, 2}, two[1] = {2}, back[1] = {-1}, dim = 1;
  run_fft("_fft_c2c", tensor(in, TPURT_C64, 2, zero, NULL), &dim, 1, 0, 1, tensor(out, TPURT_C64, 2, zero, NULL));
  CHECK(out[0] == -1, "empty c2c wrote");
  run_fft("_fft_c2c", tensor(in + 2, TPURT_C64, 1, two, back), NULL, 0, 0, 1, tensor(out, TPURT_C64, 1, two, NULL));
  CHECK(out[0] == 3 && out[1] == 4 && out[2] == 1 && out[3] == 2, "c2c over no dims is a copy");
  tpurt_op_call c;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c, c.op = tpurt_op_lookup("_fft_r2c"), c.nargs = 4, c.nouts = 1;
  c.args[0] = (tpurt_value){.kind = TPURT_V_TENSOR, .scalar_dtype = -1, .t = tensor(in, TPURT_F32, 1, two, NULL)};
  c.args[1] = (tpurt_value){.kind = TPURT_V_INTS, .n = 0, .scalar_dtype = -1, .ints = two};
  c.outs[0] = tensor(out, TPURT_C64, 1, two, NULL);
  CHECK(tpurt_op_run(&c) == TPURT_ERR_RUNTIME, "r2c over no dims must fail");
}

int main(void) {
  test_c2c_lengths();
  test_c2c_strided_dims();
  test_r2c();
  test_c2r();
  test_round_trip();
  test_edges();
  return CHECK_DONE();
}
