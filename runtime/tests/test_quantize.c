/* tpurt::quantize / tpurt::dequantize: the roundings and overflows of CPU's three arithmetics
 * (values from PyTorch CPU; tests/test_quantized.py compares whole tensors against it). Run
 * under ASan + UBSan by `make test`. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "internal.h"

enum { N = 8 };

static tpurt_tensor vec(void* data, int dtype, int64_t n) {
  tpurt_tensor t = {.data = data, .dtype = dtype, .ndim = 1};
  t.sizes[0] = n;
  t.strides[0] = 1;
  return t;
}

static void* device(const void* host, size_t n) {
  void* p;
  tpurt_malloc(0, n, 0, &p);
  tpurt_memcpy_h2d(0, p, host, n);
  return p;
}

/* quantize n floats with a per-tensor scale and zero point into dtype, results as int64 */
static tpurt_status quantize(const float* x, int n, double scale, int64_t zp, int scheme, int dtype, int64_t* got) {
  size_t es = tpurt_dtype_size(dtype);
  void *dx = device(x, (size_t)n * 4), *dq = device(x, (size_t)n * es);
  tpurt_op_call c = {.struct_size = sizeof c, .op = tpurt_op_lookup("tpurt::quantize"), .nargs = 4, .nouts = 1};
  c.args[0] = (tpurt_value){.kind = TPURT_V_TENSOR, .scalar_dtype = -1, .t = vec(dx, TPURT_F32, n)};
  c.args[1] = (tpurt_value){.kind = TPURT_V_FLOAT, .scalar_dtype = -1, .f = scale};
  c.args[2] = (tpurt_value){.kind = TPURT_V_INT, .scalar_dtype = -1, .i = zp};
  c.args[3] = (tpurt_value){.kind = TPURT_V_INT, .scalar_dtype = -1, .i = scheme};
  c.outs[0] = vec(dq, dtype, n);
  tpurt_status s = tpurt_op_run(&c);
  unsigned char raw[N * 4];
  tpurt_memcpy_d2h(0, raw, dq, (size_t)n * es);
  for (int i = 0; i < n; i++)
    got[i] = dtype == TPURT_U8 ? raw[i] : dtype == TPURT_I8 ? (int8_t)raw[i] : ((int32_t*)raw)[i];
  tpurt_free(dx);
  tpurt_free(dq);
  return s;
}

static void test_quantize_per_tensor(void) {
  const float nan = NAN, inf = INFINITY;
  /* ties go to even; 8-bit rounds x/scale + zero_point once (a fused multiply-add): with scale 0.1
   * (1/scale is 10 in float) -14.85f * 10 + 100 is -48.5000038 exactly, so -49, where rounding the
   * product first gives -148.5 + 100 = -48.5, so -48; NaN goes to the top of the range */
  float x[N] = {0.05f, 0.15f, -14.85f, 1e20f, -1e20f, nan, inf, -0.25f};
  int64_t q[N];
  CHECK(quantize(x, N, 0.1, 100, TPURT_QSCHEME_PER_TENSOR_AFFINE, TPURT_I8, q) == TPURT_OK, "%s", tpurt_last_error());
  int64_t want8[N] = {100, 102, -49, 127, -128, 127, 127, 98};
  for (int i = 0; i < N; i++)
    CHECK(q[i] == want8[i], "qint8[%d] = %lld, want %lld", i, (long long)q[i], (long long)want8[i]);
  /* int32 rounds the product to float first (fbgemm's scalar path); NaN is x86's INT32_MIN */
  CHECK(quantize(x, N, 0.1, 100, TPURT_QSCHEME_PER_TENSOR_AFFINE, TPURT_I32, q) == TPURT_OK, "%s", tpurt_last_error());
  int64_t want32[N] = {100, 102, -48, INT32_MAX, INT32_MIN, INT32_MIN, INT32_MAX, 98};
  for (int i = 0; i < N; i++)
    CHECK(q[i] == want32[i], "qint32[%d] = %lld, want %lld", i, (long long)q[i], (long long)want32[i]);
  /* the per-channel arithmetic on uint8: NaN keeps INT32_MIN's low byte, 0 */
  CHECK(quantize(x, N, 0.1, 100, TPURT_QSCHEME_PER_CHANNEL_AFFINE, TPURT_U8, q) == TPURT_OK, "%s", tpurt_last_error());
  int64_t wantu8[N] = {100, 102, 0, 255, 0, 0, 255, 98};
  for (int i = 0; i < N; i++)
    CHECK(q[i] == wantu8[i], "quint8[%d] = %lld, want %lld", i, (long long)q[i], (long long)wantu8[i]);
  /* float qparams narrow lrintf's long to int: 3e9 wraps negative, infinities and NaN become 0 */
  float y[N] = {3e9f, -3e9f, inf, nan, 1.5f, 2.5f, -0.5f, 1e9f};
  CHECK(quantize(y, N, 1.0, 3, TPURT_QSCHEME_PER_CHANNEL_FLOAT_QPARAMS, TPURT_U8, q) == TPURT_OK, "%s",
        tpurt_last_error());
  int64_t wantfq[N] = {0, 255, 0, 0, 4, 6, 2, 255};
  for (int i = 0; i < N; i++)
    CHECK(q[i] == wantfq[i], "float qparams[%d] = %lld, want %lld", i, (long long)q[i], (long long)wantfq[i]);
  /* a float output is refused */
  CHECK(quantize(x, N, 0.1, 0, TPURT_QSCHEME_PER_TENSOR_AFFINE, TPURT_F32, q) == TPURT_ERR_UNSUPPORTED, "float output");
}

static void test_dequantize(void) {
  /* per tensor: the int32 difference wraps, then scale * (float)difference */
  int32_t q[2] = {INT32_MIN, 7};
  void *dq = device(q, sizeof q), *dr;
  tpurt_malloc(0, 8, 0, &dr);
  tpurt_op_call c = {.struct_size = sizeof c, .op = tpurt_op_lookup("tpurt::dequantize"), .nargs = 4, .nouts = 1};
  c.args[0] = (tpurt_value){.kind = TPURT_V_TENSOR, .scalar_dtype = -1, .t = vec(dq, TPURT_I32, 2)};
  c.args[1] = (tpurt_value){.kind = TPURT_V_FLOAT, .scalar_dtype = -1, .f = 0.5};
  c.args[2] = (tpurt_value){.kind = TPURT_V_INT, .scalar_dtype = -1, .i = 1};
  c.args[3] = (tpurt_value){.kind = TPURT_V_INT, .scalar_dtype = -1, .i = TPURT_QSCHEME_PER_TENSOR_AFFINE};
  c.outs[0] = vec(dr, TPURT_F32, 2);
  CHECK(tpurt_op_run(&c) == TPURT_OK, "%s", tpurt_last_error());
  float r[2];
  tpurt_memcpy_d2h(0, r, dr, sizeof r);
  CHECK(r[0] == 0.5f * (float)INT32_MAX && r[1] == 3.0f, "dequantize: %g %g", r[0], r[1]);
  tpurt_free(dq);
  tpurt_free(dr);
}

int main(void) {
  test_quantize_per_tensor();
  test_dequantize();
  return CHECK_DONE();
}
