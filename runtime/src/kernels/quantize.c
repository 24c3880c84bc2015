/* tpurt::quantize and tpurt::dequantize (tpurt.h, "affine quantization"): a quantized tensor's
 * integers from float32 values and back, computed as PyTorch CPU computes them for each scheme.
 * CPU (an x86 build: fbgemm's kernels; ARM builds round otherwise) uses three different
 * arithmetics, checked value for value against it (tests/test_quantized.py), and each is kept
 * here as it is, roundings and overflows included:
 *
 *   per tensor, 8-bit   fbgemm's AVX2 Quantize (the LEGACY variant ATen calls): one fused
 *                       multiply-add x * (1/scale) + zero_point in float, rounded to nearest
 *                       even; its clamp to int32 first sends NaN to the top of the range
 *   per tensor, int32,  fbgemm's scalar Quantize (ATen's quantize_val): x * (1/scale) rounded
 *   per channel         to float, plus zero_point in float, rounded to nearest even, clamped in
 *                       double; NaN is what x86 makes of converting it (INT32_MIN, whose low
 *                       byte is 0)
 *   float qparams       ATen's quantize_val_float_qparams: lrintf(x * inv + zero_point) in float
 *                       (inv = 1 for a zero scale), the long narrowed to int, then clamped
 *
 * and back: per tensor fbgemm's Dequantize, scale * (q - zero_point) in float over the int32
 * difference; per channel ((float)q - zero_point) * scale in double, then float; float qparams
 * ((float)q - zero_point) * scale in float.
 *
 * Every operand is read as double (exact for float32 values, float64 scales and integer zero
 * points), so one chunk function serves broadcast per-channel parameters and per-tensor values. */
#include "../internal.h"

typedef struct {
  int scheme; /* tpurt_qscheme */
  int wide;   /* int32 integers: per-tensor quantization takes fbgemm's scalar path */
  double qmin, qmax;
} quant_ctx;

/* lrintf as x86 glibc computes it, out-of-range and NaN values included (LONG_MIN), which
 * C leaves unspecified */
static int64_t lrintf_x86(float v) {
  if (!(fabsf(v) < 9.2233720368547758e18f)) return INT64_MIN;
  return (int64_t)rintf(v);
}

static void quantize_chunk(int64_t n, void* o, const void* const* in, const void* ctx) {
  const quant_ctx* q = ctx;
  const double *x = in[0], *s = in[1], *z = in[2];
  int64_t* r = o;
  for (int64_t i = 0; i < n; i++) {
    const float xf = (float)x[i], sf = (float)s[i], zf = (float)z[i];
    if (q->scheme == TPURT_QSCHEME_PER_CHANNEL_FLOAT_QPARAMS) {
      const float inv = sf == 0 ? 1.0f : 1.0f / sf;
      const float t = xf * inv; /* two roundings: CPU's build does not contract this */
      const int32_t v = (int32_t)(uint32_t)(uint64_t)lrintf_x86(t + zf);
      r[i] = v < q->qmin ? (int64_t)q->qmin : v > q->qmax ? (int64_t)q->qmax : v;
      continue;
    }
    const float inv = 1.0f / sf;
    double v;
    if (q->scheme == TPURT_QSCHEME_PER_TENSOR_AFFINE && !q->wide) {
      const float f = fmaf(xf, inv, zf);
      if (isnan(f)) {
        r[i] = (int64_t)q->qmax;
        continue;
      }
      v = rintf(f);
    } else {
      const float t = xf * inv;
      const float f = zf + t;
      if (isnan(f)) {
        r[i] = INT32_MIN; /* the store keeps the low bits: 0 for 8-bit integers */
        continue;
      }
      v = rintf(f);
    }
    r[i] = (int64_t)(v < q->qmin ? q->qmin : v > q->qmax ? q->qmax : v);
  }
}

static void dequantize_chunk(int64_t n, void* o, const void* const* in, const void* ctx) {
  const quant_ctx* q = ctx;
  const double *x = in[0], *s = in[1], *z = in[2];
  float* r = o;
  for (int64_t i = 0; i < n; i++) {
    if (q->scheme == TPURT_QSCHEME_PER_TENSOR_AFFINE) {
      const int32_t d = (int32_t)((uint32_t)(int32_t)x[i] - (uint32_t)(int32_t)z[i]); /* int32 wraps */
      r[i] = (float)s[i] * (float)d;
    } else if (q->scheme == TPURT_QSCHEME_PER_CHANNEL_AFFINE) {
      r[i] = (float)((double)((float)x[i] - (float)z[i]) * s[i]);
    } else {
      r[i] = ((float)x[i] - (float)z[i]) * (float)s[i];
    }
  }
}

static int quantized_int_dtype(int dt) { return dt == TPURT_U8 || dt == TPURT_I8 || dt == TPURT_I32; }

/* The operands (values or tensors as 0-dim tensors) and the scheme, checked. */
static tpurt_status quant_args(const tpurt_op_call* c, const char* op, int ints, tpurt_tensor in[3], int64_t st[2],
                               quant_ctx* q) {
  if (c->nargs != 4 || c->nouts != 1 || c->args[0].kind != TPURT_V_TENSOR || c->args[3].kind != TPURT_V_INT)
    return tpurt_fail(TPURT_ERR_VALUE, "%s: expected (values, scale, zero_point, scheme) and one output", op);
  const tpurt_tensor *a = &c->args[0].t, *out = &c->outs[0];
  const tpurt_tensor* integers = ints ? a : out;
  const tpurt_tensor* floats = ints ? out : a;
  if (!quantized_int_dtype(integers->dtype) || floats->dtype != TPURT_F32)
    return tpurt_fail(TPURT_ERR_UNSUPPORTED, "%s: %s integers and %s values (expected uint8, int8 or int32, and float32)",
                      op, tpurt_dtype_name(integers->dtype), tpurt_dtype_name(floats->dtype));
  q->scheme = (int)c->args[3].i;
  if (q->scheme < TPURT_QSCHEME_PER_TENSOR_AFFINE || q->scheme > TPURT_QSCHEME_PER_CHANNEL_FLOAT_QPARAMS)
    return tpurt_fail(TPURT_ERR_VALUE, "%s: unknown scheme %d", op, q->scheme);
  q->wide = integers->dtype == TPURT_I32;
  q->qmin = integers->dtype == TPURT_U8 ? 0 : integers->dtype == TPURT_I8 ? -128 : (double)INT32_MIN;
  q->qmax = integers->dtype == TPURT_U8 ? 255 : integers->dtype == TPURT_I8 ? 127 : (double)INT32_MAX;
  in[0] = *a;
  in[1] = tpurt_scalar_tensor(&c->args[1], &st[0]);
  in[2] = tpurt_scalar_tensor(&c->args[2], &st[1]);
  return TPURT_OK;
}

tpurt_status tpurt_kernel_quantize(const tpurt_op_call* c) {
  tpurt_tensor in[3];
  int64_t st[2];
  quant_ctx q;
  tpurt_status s = quant_args(c, "tpurt::quantize", 0, in, st, &q);
  return s ? s : tpurt_ew_run2(&c->outs[0], TPURT_CT_I64, 3, in, TPURT_CT_F64, quantize_chunk, &q);
}

tpurt_status tpurt_kernel_dequantize(const tpurt_op_call* c) {
  tpurt_tensor in[3];
  int64_t st[2];
  quant_ctx q;
  tpurt_status s = quant_args(c, "tpurt::dequantize", 1, in, st, &q);
  return s ? s : tpurt_ew_run2(&c->outs[0], TPURT_CT_F32, 3, in, TPURT_CT_F64, dequantize_chunk, &q);
}
