/* Matmul and index kernels through tpurt_op_run: the GEMM core against a naive double
 * reference (odd sizes crossing every block edge, transposed operands, all precisions), and
 * the index kernels' bounds checks. Run under ASan + UBSan by `make test`. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "internal.h"

static tpurt_tensor mat2d(void* data, int dtype, int64_t r, int64_t c, int64_t rs, int64_t cs) {
  tpurt_tensor t = {.data = data, .dtype = dtype, .ndim = 2};
  t.sizes[0] = r, t.sizes[1] = c, t.strides[0] = rs, t.strides[1] = cs;
  return t;
}
static tpurt_tensor vec1d(void* data, int dtype, int64_t n) {
  tpurt_tensor t = {.data = data, .dtype = dtype, .ndim = 1};
  t.sizes[0] = n, t.strides[0] = 1;
  return t;
}
static tpurt_value tv(tpurt_tensor t) {
  tpurt_value v = {.kind = TPURT_V_TENSOR, .scalar_dtype = -1, .t = t};
  return v;
}
static tpurt_value iv(int64_t i) {
  tpurt_value v = {.kind = TPURT_V_INT, .scalar_dtype = -1, .i = i};
  return v;
}
static tpurt_op_call call_of(const char* name, int precision) {
  tpurt_op_call c;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  c.op = tpurt_op_lookup(name);
  c.precision = precision;
  return c;
}

static float frand(unsigned* s) {
  *s = *s * 1103515245u + 12345u;
  return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* C = A * B with A given transposed in memory (K x M buffer read with strides 1, M). */
static void test_mm_precisions(void) {
  enum { M = 101, K = 300, N = 1031 }; /* past MC, KC/3 and NC edges */
  float* a = malloc(sizeof(float) * M * K);
  float* b = malloc(sizeof(float) * K * N);
  float* c = malloc(sizeof(float) * M * N);
  double* ref = calloc((size_t)M * N, sizeof(double));
  unsigned seed = 1;
  for (int i = 0; i < M * K; i++) a[i] = frand(&seed);
  for (int i = 0; i < K * N; i++) b[i] = frand(&seed);
  for (int i = 0; i < M; i++)
    for (int k = 0; k < K; k++)
      for (int j = 0; j < N; j++) ref[i * N + j] += (double)a[k * M + i] * b[k * N + j];
  const int precisions[3] = {TPURT_PRECISION_DEFAULT, TPURT_PRECISION_HIGH, TPURT_PRECISION_HIGHEST};
  double err[3];
  for (int p = 0; p < 3; p++) {
    tpurt_op_call cl = call_of("mm", precisions[p]);
    cl.nargs = 2, cl.nouts = 1;
    cl.args[0] = tv(mat2d(a, TPURT_F32, M, K, 1, M));
    cl.args[1] = tv(mat2d(b, TPURT_F32, K, N, N, 1));
    cl.outs[0] = mat2d(c, TPURT_F32, M, N, N, 1);
    CHECK(tpurt_op_run(&cl) == TPURT_OK, "mm: %s", tpurt_last_error());
    double num = 0, den = 0;
    for (int i = 0; i < M * N; i++) num += (c[i] - ref[i]) * (c[i] - ref[i]), den += ref[i] * ref[i];
    err[p] = sqrt(num / den);
  }
  CHECK(err[2] < 1e-6, "highest error %g", err[2]);
  CHECK(err[1] < 1e-5 && err[1] < err[0] / 100, "high error %g vs default %g", err[1], err[0]);
  CHECK(err[0] > 1e-4 && err[0] < 1e-2, "default error %g is not bf16-level", err[0]);
  free(a), free(b), free(c), free(ref);
}

/* DEFAULT precision is the product of the bf16-rounded operands summed in f32, on the FMA path
 * and on the bf16 units (the amx build's tiles, the avx512bf16 build's dot products) alike:
 * every element within the f32 rounding of its sum (a bound from the sum of |a||b| over K),
 * for either layout of either operand, with shapes
 * across the unit's tile (16, 32), run (256) and block (1024 columns) edges. A row of the
 * product equals the same row of a product with fewer rows, bit for bit. */
static void test_default_is_the_f32_sum_of_bf16_products(void) {
  static const int shapes[][3] = {{1, 5, 3}, {33, 70, 17}, {64, 256, 64}, {101, 300, 1031}, {40, 513, 48}};
  unsigned seed = 7;
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    int M = shapes[si][0], K = shapes[si][1], N = shapes[si][2];
    float* a = malloc(sizeof(float) * M * K);
    float* b = malloc(sizeof(float) * K * N);
    float* c = malloc(sizeof(float) * M * N);
    float* c1 = malloc(sizeof(float) * N);
    for (int i = 0; i < M * K; i++) a[i] = frand(&seed) * 3;
    for (int i = 0; i < K * N; i++) b[i] = frand(&seed);
    for (int layout = 0; layout < 4; layout++) { /* bit 0: A column-major, bit 1: B column-major */
      int64_t ars = layout & 1 ? 1 : K, acs = layout & 1 ? M : 1, brs = layout & 2 ? 1 : N, bcs = layout & 2 ? K : 1;
      tpurt_op_call cl = call_of("mm", TPURT_PRECISION_DEFAULT);
      cl.nargs = 2, cl.nouts = 1;
      cl.args[0] = tv(mat2d(a, TPURT_F32, M, K, ars, acs));
      cl.args[1] = tv(mat2d(b, TPURT_F32, K, N, brs, bcs));
      cl.outs[0] = mat2d(c, TPURT_F32, M, N, N, 1);
      CHECK(tpurt_op_run(&cl) == TPURT_OK, "mm: %s", tpurt_last_error());
      int bad = 0;
      for (int i = 0; i < M && !bad; i++)
        for (int j = 0; j < N && !bad; j++) {
          double exact = 0, mag = 0;
          for (int k = 0; k < K; k++) {
            double p = (double)tpurt_round_bf16(a[i * ars + k * acs]) * tpurt_round_bf16(b[k * brs + j * bcs]);
            exact += p, mag += fabs(p);
          }
          double bound = (K / 32 + 8) * 0x1p-23 * mag;
          if (fabs(c[i * N + j] - exact) > bound) {
            CHECK(0, "%dx%dx%d layout %d: c[%d][%d] = %.9g, exact %.9g (bound %g)", M, K, N, layout, i, j, c[i * N + j],
                  exact, bound);
            bad = 1;
          }
        }
      /* the last row alone */
      cl.args[0] = tv(mat2d(a + (int64_t)(M - 1) * ars, TPURT_F32, 1, K, ars, acs));
      cl.outs[0] = mat2d(c1, TPURT_F32, 1, N, N, 1);
      CHECK(tpurt_op_run(&cl) == TPURT_OK, "mm: %s", tpurt_last_error());
      CHECK(memcmp(c1, c + (int64_t)(M - 1) * N, sizeof(float) * N) == 0, "%dx%dx%d layout %d: a row alone differs", M, K,
            N, layout);
    }
    free(a), free(b), free(c), free(c1);
  }
}

/* addmm with beta = 0 must not read NaN from self; ints accumulate exactly. */
static void test_addmm_beta0_and_ints(void) {
  float self[4] = {NAN, NAN, NAN, NAN}, a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1}, out[4];
  tpurt_op_call cl = call_of("addmm", TPURT_PRECISION_HIGHEST);
  cl.nargs = 5, cl.nouts = 1;
  cl.args[0] = tv(mat2d(self, TPURT_F32, 2, 2, 2, 1));
  cl.args[1] = tv(mat2d(a, TPURT_F32, 2, 2, 2, 1));
  cl.args[2] = tv(mat2d(b, TPURT_F32, 2, 2, 2, 1));
  cl.args[3] = iv(0);
  cl.args[4] = iv(2);
  cl.outs[0] = mat2d(out, TPURT_F32, 2, 2, 2, 1);
  CHECK(tpurt_op_run(&cl) == TPURT_OK, "addmm: %s", tpurt_last_error());
  CHECK(out[0] == 2 && out[1] == 4 && out[2] == 6 && out[3] == 8, "addmm beta=0: %g %g %g %g", out[0], out[1],
        out[2], out[3]);

  int32_t x[3] = {100000, 3, -7}, y[3] = {30000, 5, 2}, r = 0;
  tpurt_op_call d = call_of("dot", TPURT_PRECISION_DEFAULT);
  d.nargs = 2, d.nouts = 1;
  d.args[0] = tv(vec1d(x, TPURT_I32, 3));
  d.args[1] = tv(vec1d(y, TPURT_I32, 3));
  d.outs[0] = (tpurt_tensor){.data = &r, .dtype = TPURT_I32, .ndim = 0};
  CHECK(tpurt_op_run(&d) == TPURT_OK, "dot: %s", tpurt_last_error());
  CHECK(r == (int32_t)(uint32_t)(3000000000LL + 15 - 14), "int dot wraps like int32: %d", r);
}

/* Bad indices fail with CPU's messages and never read or write out of bounds (ASan). */
static void test_index_bounds(void) {
  float w[6] = {0, 1, 2, 3, 4, 5}, out[4] = {-1, -1, -1, -1};
  int64_t good[2] = {2, 0}, bad[2] = {1, 3};
  tpurt_op_call e = call_of("embedding", 0);
  e.nargs = 2, e.nouts = 1;
  e.args[0] = tv(mat2d(w, TPURT_F32, 3, 2, 2, 1));
  e.args[1] = tv(vec1d(good, TPURT_I64, 2));
  e.outs[0] = mat2d(out, TPURT_F32, 2, 2, 2, 1);
  CHECK(tpurt_op_run(&e) == TPURT_OK, "embedding: %s", tpurt_last_error());
  CHECK(out[0] == 4 && out[1] == 5 && out[2] == 0 && out[3] == 1, "embedding rows %g %g %g %g", out[0], out[1],
        out[2], out[3]);
  e.args[1] = tv(vec1d(bad, TPURT_I64, 2));
  CHECK(tpurt_op_run(&e) == TPURT_ERR_INDEX, "embedding out of range must fail");
  CHECK(strcmp(tpurt_last_error(), "index out of range in self") == 0, "message: %s", tpurt_last_error());

  /* x[idx] = v with idx = [1, 3] on a 3-element tensor */
  float x[3] = {0, 0, 0}, v = 7;
  tpurt_tensor list[1] = {vec1d(bad, TPURT_I64, 2)};
  tpurt_op_call p = call_of("index_put_", 0);
  p.nargs = 4, p.nouts = 1;
  p.args[0] = tv(vec1d(x, TPURT_F32, 3));
  p.args[1] = (tpurt_value){.kind = TPURT_V_TENSORS, .n = 1, .scalar_dtype = -1, .tensors = list};
  p.args[2] = tv((tpurt_tensor){.data = &v, .dtype = TPURT_F32, .ndim = 0});
  p.args[3] = iv(0);
  p.outs[0] = vec1d(x, TPURT_F32, 3);
  CHECK(tpurt_op_run(&p) == TPURT_ERR_INDEX, "index_put out of range must fail");
  CHECK(strstr(tpurt_last_error(), "index 3 is out of bounds for dimension 0 with size 3"), "message: %s",
        tpurt_last_error());
  CHECK(x[1] == 0, "nothing written before the failure");
  /* a bool mask selects positions 0 and 2 */
  uint8_t mask[3] = {1, 0, 1};
  list[0] = vec1d(mask, TPURT_BOOL, 3);
  CHECK(tpurt_op_run(&p) == TPURT_OK, "index_put mask: %s", tpurt_last_error());
  CHECK(x[0] == 7 && x[1] == 0 && x[2] == 7, "mask put %g %g %g", x[0], x[1], x[2]);
}

int main(void) {
  test_index_bounds();
  test_mm_precisions();
  test_default_is_the_f32_sum_of_bf16_products();
  test_addmm_beta0_and_ints();
  return CHECK_DONE();
}
