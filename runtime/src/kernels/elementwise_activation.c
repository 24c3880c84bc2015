/* Elementwise family: activation functions and their backward ops (formulas as in
 * PyTorch's CPU kernels, so results match to rounding). Where CPU's vectorized loop and its
 * scalar loop disagree on a NaN input (the hardtanh, elu, hardswish, shrink and logit
 * backwards), the comparisons are the scalar loop's: the formula CPU states, and what it
 * computes for small and strided tensors (every OpInfo sample, gradcheck) and a tensor's tail. */
#include "vmath.h"
#include "elementwise.h"

#define GELU_BETA (M_SQRT2 * M_2_SQRTPI * 0.5) /* sqrt(2/pi) */
#define GELU_KAPPA 0.044715

/* f32 uses the vectorizable exp/expm1/log1p/erf/tanh of vmath.h (gelu's erf as CPU's
 * vectorized kernel computes it), f64 libm's. */
#define DEF_ACT_HELPERS(T, S, EXP, EXPM1, LOG1P, ERF, TANH)                                \
  static inline T vexp_##S(T x) { return EXP(x); }                                        \
  static inline T vexpm1_##S(T x) { return EXPM1(x); }                                    \
  static inline T vlog1p_##S(T x) { return LOG1P(x); }                                    \
  static inline T vtanh_##S(T x) { return TANH(x); }                                      \
  static inline T sigm_##S(T x) { return 1 / (1 + EXP(-x)); }                              \
  static inline T gelu_##S(T x, int64_t mode) {                                            \
    if (mode == EW_MODE_TANH)                                                              \
      return (T)0.5 * x * (1 + TANH((T)GELU_BETA * (x + (T)GELU_KAPPA * x * x * x)));      \
    return x * (T)0.5 * (1 + ERF(x * (T)M_SQRT1_2));                                       \
  }                                                                                        \
  static inline T gelu_bw_##S(T g, T x, int64_t mode) {                                    \
    if (mode == EW_MODE_TANH) {                                                            \
      T inner = (T)GELU_BETA * (x + (T)GELU_KAPPA * x * x * x), t = TANH(inner);           \
      T left = (T)0.5 * x, right = 1 + t;                                                  \
      T dinner = (T)GELU_BETA * (1 + 3 * (T)GELU_KAPPA * x * x);                           \
      return g * ((T)0.5 * right + left * (1 - t * t) * dinner);                           \
    }                                                                                      \
    T cdf = (T)0.5 * (1 + ERF(x * (T)M_SQRT1_2));                                          \
    T pdf = EXP((T)-0.5 * x * x) * (T)(M_2_SQRTPI * M_SQRT1_2 * 0.5);                      \
    return g * (cdf + x * pdf);                                                            \
  }                                                                                        \
  static inline T silu_bw_##S(T g, T x) {                                                  \
    T s = sigm_##S(x);                                                                     \
    return g * s * (1 + x * (1 - s));                                                      \
  }                                                                                        \
  static inline T mish_bw_##S(T g, T x) { /* CPU's: in float for float16/bfloat16 */       \
    T s = sigm_##S(x), t = TANH(LOG1P(EXP(x)));                                            \
    return g * (t + x * s * (1 - t * t));                                                  \
  }                                                                                        \
  static inline T softplus_bw_##S(T g, T x, T beta, T threshold) {                         \
    T z = EXP(x * beta);                                                                   \
    return x * beta > threshold ? g : g * z / (z + 1);                                     \
  }                                                                                        \
  /* elu_backward from the input (is_result 0) or from the output (is_result 1) */         \
  static inline T elu_bw_##S(T g, T x, T alpha, T scale, T iscale, int64_t is_result) {    \
    if (!(x <= 0)) return g * scale;                                                       \
    return is_result ? g * iscale * (x + alpha * scale)                                    \
                     : g * iscale * alpha * scale * EXP(x * iscale);                       \
  }                                                                                        \
  static inline T logit_bw_##S(T g, T x, T eps) {                                          \
    int clamped = eps >= 0;                                                                \
    if (clamped ? (x < eps || x > 1 - eps) : (x < 0 || x > 1)) return clamped ? 0 : NAN;   \
    return x == 0 || x == 1 ? g * INFINITY : g / (x * (1 - x));                            \
  }
DEF_ACT_HELPERS(float, f, vm_expf, vm_expm1f, vm_log1pf, vm_erff_as, vm_tanhf)
DEF_ACT_HELPERS(double, d, exp, expm1, log1p, erf, tanh)
#define GENERIC(F, x) _Generic((x), float: F##_f, double: F##_d)
#define SIGM(x) GENERIC(sigm, x)(x)

/* One input (x = self); PF(k) = the k-th Scalar argument. */
#define ACT_UNARY_OPS(X)                                                              \
  X(silu, x / (1 + GENERIC(vexp, x)(-x)))                                             \
  X(mish, x * GENERIC(vtanh, x)(GENERIC(vlog1p, x)(GENERIC(vexp, x)(x))))             \
  X(leaky_relu, x > 0 ? x : x * PF(0))                                                \
  X(elu, x <= 0 ? GENERIC(vexpm1, x)(x * PF(2)) * PF(0) * PF(1) : x * PF(1))          \
  X(softplus, x * PF(0) > PF(1) ? x : GENERIC(vlog1p, x)(GENERIC(vexp, x)(x * PF(0))) / PF(0)) \
  X(hardswish, x * EW_MINI(EW_MAXI(x + 3, 0), 6) / 6)                                 \
  X(hardsigmoid, EW_MINI(EW_MAXI(x + 3, 0), 6) / 6)                                   \
  X(log_sigmoid_out, EW_MINI(x, 0) - GENERIC(vlog1p, x)(GENERIC(vexp, x)(-fabs(x))))  \
  X(log_sigmoid_buf, GENERIC(vexp, x)(-fabs(x)))

/* Backward ops: x = grad_output, y = self (or the forward's output), z = third tensor. */
#define ACT_BACKWARD_OPS(X)                                                                    \
  X(silu_backward, 2, GENERIC(silu_bw, x)(x, y))                                      \
  X(mish_backward, 2, GENERIC(mish_bw, x)(x, y))                                      \
  X(sigmoid_backward, 2, x * (1 - y) * y)                                             \
  X(tanh_backward, 2, x * (1 - y * y))                                                \
  X(leaky_relu_backward, 2, y > 0 ? x : x * PF(0))                                    \
  X(hardtanh_backward, 2, y <= PF(0) || y >= PF(1) ? 0 : x)                           \
  X(softplus_backward, 2, GENERIC(softplus_bw, x)(x, y, PF(0), PF(1)))                \
  X(hardswish_backward, 2, y <= -3 ? 0 : y < 3 ? x * (y / 3 + (ew_t)0.5) : x)         \
  X(hardsigmoid_backward, 2, y > -3 && y < 3 ? x * (ew_t)(1.0 / 6) : 0)               \
  X(logit_backward, 2, GENERIC(logit_bw, x)(x, y, PF(0)))                             \
  X(log_sigmoid_backward, 3, ((y < 0 ? 1 : 0) - (y < 0 ? 1 : -1) * (z / (1 + z))) * x)

#define DEF_ACT_UNARY(NAME, E) EW_DEF_F(NAME, EW_SAME, 1, E)
#define DEF_ACT_BACKWARD(NAME, NIN, E) EW_DEF_F(NAME, EW_SAME, NIN, E)
#define KERNEL2(NAME, E) EW_KERNEL(NAME)
#define KERNEL3(NAME, NIN, E) EW_KERNEL(NAME)
ACT_UNARY_OPS(DEF_ACT_UNARY)
ACT_BACKWARD_OPS(DEF_ACT_BACKWARD)
ACT_BACKWARD_OPS(KERNEL3)
/* gelu(self, approximate) / gelu_backward(grad_output, self, approximate): a loop per mode */
EW_CHUNK_MODE(gelu_f32, float, float, 1, gelu_f(x, EW_MODE))
EW_CHUNK_MODE(gelu_f64, double, double, 1, gelu_d(x, EW_MODE))
EW_DESC(gelu, EW_SAME, 1, gelu_f32, gelu_f64, NULL)
EW_CHUNK_MODE(gelu_backward_f32, float, float, 2, gelu_bw_f(x, y, EW_MODE))
EW_CHUNK_MODE(gelu_backward_f64, double, double, 2, gelu_bw_d(x, y, EW_MODE))
EW_DESC(gelu_backward, EW_SAME, 2, gelu_backward_f32, gelu_backward_f64, NULL)
EW_KERNEL(gelu_backward)
#define ACT_PLAIN(X) X(gelu) X(silu) X(mish) X(leaky_relu) X(elu) X(softplus) X(hardswish) X(hardsigmoid)
ACT_PLAIN(EW_KERNEL)

/* Ops that also take integers. */
/* threshold_backward(grad_output, self, threshold): relu's backward */
EW_DEF_FI(threshold_backward, EW_SAME, 2, y <= PF(0) ? 0 : x, y <= PI(0) ? 0 : x)
EW_KERNEL(threshold_backward)
/* hardtanh(self, min_val, max_val) is a clamp */
EW_DEF_FI(hardtanh, EW_SAME, 1, EW_MINN(EW_MAXN(x, PF(0)), PF(1)), EW_MINI(EW_MAXI(x, PI(0)), PI(1)))
EW_KERNEL(hardtanh)

/* elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result) */
EW_CHUNK(elu_backward_f32, float, float, 2, elu_bw_f(x, y, PF(0), PF(1), PF(2), PI(3)))
EW_CHUNK(elu_backward_f64, double, double, 2, elu_bw_d(x, y, PF(0), PF(1), PF(2), PI(3)))
static const ew_op elu_backward_op = {
    "elu_backward", {elu_backward_f32, elu_backward_f64, NULL}, EW_SAME, 2, 3, {0, 5}};
EW_KERNEL(elu_backward)

tpurt_status tpurt_kernel_log_sigmoid_forward(const tpurt_op_call* c) {
  /* -> (output, buffer): the buffer exp(-|x|) feeds log_sigmoid_backward */
  const tpurt_value* v[1];
  ew_par par;
  ew_operands(c, &log_sigmoid_out_op, v);
  ew_params(c, &log_sigmoid_out_op, &par);
  tpurt_status s = ew_run_op(&c->outs[0], &log_sigmoid_out_op, v, &par);
  return s ? s : ew_run_op(&c->outs[1], &log_sigmoid_buf_op, v, &par);
}
