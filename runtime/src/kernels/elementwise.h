/* The elementwise family's shared machinery: an op is a descriptor (chunk functions per
 * compute type + a dtype rule) generated from ONE expression, and one generic kernel body
 * (ew_apply) does promotion, scalar operands, parameters and the engine call.
 *
 * Expressions are written once for f32 and f64: <tgmath.h> makes exp(x) call expf for a
 * float x. Inside an expression: x, y, z are the operands in compute type ew_t; PF(k) and
 * PI(k) are the k-th non-operand argument (Scalar / float? / bool / str) as ew_t / int64,
 * PC(k) as complex. complex64 has expressions of its own (kernels/complex_math.h), so the
 * real chunk functions stay as they were. */
#ifndef TPURT_KERNELS_ELEMENTWISE_H
#define TPURT_KERNELS_ELEMENTWISE_H

#include <tgmath.h>

#include "../internal.h"
#include "complex_math.h"

#define EW_MAX_PAR 6

typedef struct ew_par {
  double f[EW_MAX_PAR];
  double fi[EW_MAX_PAR]; /* imaginary parts of complex parameters */
  int64_t i[EW_MAX_PAR];
  int* err; /* a chunk function sets *err on bad data (integer division by zero) */
  /* How CPU computes the op when the common dtype is float16/bfloat16 (EW_REDUCED_*, set
   * by the kernel): ew_run_op turns them into operand rounding and step_dt. */
  unsigned reduced;
  int step_dt; /* dtype each EW_STEP rounds to, or -1 (set by ew_run_op) */
  int complex_result; /* a complex parameter makes the common dtype complex64 (pow(x, 1+2j)) */
} ew_par;

/* CPU's reduced-float special cases. OPMATH_SCALAR: a second operand that is one value
 * broadcast over the output (a Python scalar, a 0-dim or 1-element tensor) is used in
 * float as given, not rounded to the common dtype (mul, div). STEPS: with any other
 * divisor CPU computes in c10::Half / BFloat16 arithmetic, each step rounded (div_trunc,
 * div_floor); expressions mark those steps with EW_STEP. */
enum { EW_REDUCED_OPMATH_SCALAR = 1, EW_REDUCED_STEPS = 2, EW_REDUCED_ALPHA = 4 };
/* ALPHA: PF(0) (add/sub's alpha) is read in the common dtype, as CPU's add kernel takes it. */

/* v rounded to P->step_dt (float16 or bfloat16), or v itself */
float ew_round_reduced(int dt, float v);
#define EW_STEP(v) (P->step_dt < 0 ? (ew_t)(v) : (ew_t)ew_round_reduced(P->step_dt, (float)(v)))

/* How the compute dtype follows from the promoted operand dtype. */
enum {
  EW_SAME,     /* compute in the common dtype (ints in i64) */
  EW_FLOAT,    /* integers promote to the output's float type (exp, true division) */
  EW_BOOL_OUT, /* compute in the common dtype, result is 0/1 (comparisons, isnan) */
};

typedef struct ew_op {
  const char* name;
  tpurt_ew_fn fn[TPURT_CT_COUNT]; /* by tpurt_ctype; NULL: dtype not supported (like CPU) */
  uint8_t rule;
  uint8_t nin;
  uint8_t promo;     /* bit k: operand k takes part in type promotion */
  int8_t arg[4];     /* argument index of each operand; the other arguments are parameters */
} ew_op;

/* The dtype op computes in for operands v (tensors or scalars) and an output of out_dtype;
 * whether it has a chunk function for it (else CPU's "not implemented for" failure). */
int ew_common_dtype(const ew_op* op, const tpurt_value* const* v, int complex_result, int out_dtype);
tpurt_status ew_supported(const ew_op* op, int common);
/* Run `op` into `out` over the operands v[0..nin) (tensors or scalars). */
tpurt_status ew_run_op(const tpurt_tensor* out, const ew_op* op, const tpurt_value* const* v,
                       const ew_par* par);
/* The operands and parameters of a call, as laid out by op->arg. */
void ew_operands(const tpurt_op_call* c, const ew_op* op, const tpurt_value** v);
void ew_params(const tpurt_op_call* c, const ew_op* op, ew_par* par);
/* The whole kernel of a plain op: operands and parameters from the call, into outs[0]. */
tpurt_status ew_apply(const tpurt_op_call* c, const ew_op* op);

/* String arguments as parameter codes. */
enum { EW_MODE_NONE = 0, EW_MODE_TANH = 1, EW_MODE_TRUNC = 2, EW_MODE_FLOOR = 3 };

#define PF(k) ((ew_t)ew_pf[k])
#define PI(k) (P->i[k])
#define PC(k) cx((float)P->f[k], (float)P->fi[k])

/* Integer arithmetic wraps like PyTorch's, without signed-overflow UB. */
static inline int64_t ew_wadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t ew_wsub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static inline int64_t ew_wmul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
static inline int64_t ew_wneg(int64_t a) { return (int64_t)(0 - (uint64_t)a); }
/* Flag a division by zero (CPU raises ZeroDivisionError for integer division). */
static inline int64_t ew_zero_div(const ew_par* P) {
  *P->err = 1;
  return 0;
}

/* NaN-propagating maximum / minimum (torch.maximum, clamp), as two selects in turn: GCC left
 * `isnan(a) || a > b ? a : b` nested in another (clamp) scalar and branchy, 14x CPU's time. */
#define EW_MAXN(a, b) ({ __typeof__(a) ew_a_ = (a), ew_b_ = (b), ew_m_ = ew_a_ > ew_b_ ? ew_a_ : ew_b_; \
                         ew_a_ != ew_a_ ? ew_a_ : ew_m_; })
#define EW_MINN(a, b) ({ __typeof__(a) ew_a_ = (a), ew_b_ = (b), ew_m_ = ew_a_ < ew_b_ ? ew_a_ : ew_b_; \
                         ew_a_ != ew_a_ ? ew_a_ : ew_m_; })
/* std::max / std::min: for floats NaN in a passes, NaN in b does not */
#define EW_MAXI(a, b) ((a) < (b) ? (b) : (a))
#define EW_MINI(a, b) ((b) < (a) ? (b) : (a))

/* Chunk function NAME: R[i] = EXPR over NIN operands of type T, result type RT. */
#define EW_CHUNK_HEAD(NAME, T, RT, NIN)                                                   \
  static void NAME(int64_t n, void* o, const void* const* in, const void* ctx) {        \
    typedef T ew_t;                                                                      \
    const ew_par* P = ctx;                                                               \
    const ew_t* A0 = in[0];                                                              \
    const ew_t* A1 = (NIN) > 1 ? (const ew_t*)in[1] : A0;                               \
    const ew_t* A2 = (NIN) > 2 ? (const ew_t*)in[2] : A0;                               \
    RT* R = o;                                                                           \
    /* the parameters as locals: read in a conditional arm (leaky_relu_backward's slope)   \
     * they were a load the loop could not hoist, which kept it scalar and branchy */      \
    double ew_pf[EW_MAX_PAR] = {0};                                                      \
    if (P) memcpy(ew_pf, P->f, sizeof ew_pf); /* no ctx: an op without parameters */     \
    (void)P, (void)ew_pf;
#define EW_CHUNK_LOOP(RT, EXPR)                                                           \
  for (int64_t i = 0; i < n; i++) {                                                      \
    ew_t x = A0[i], y = A1[i], z = A2[i];                                                \
    (void)x, (void)y, (void)z;                                                           \
    R[i] = (RT)(EXPR);                                                                   \
  }
#define EW_CHUNK(NAME, T, RT, NIN, EXPR) \
  EW_CHUNK_HEAD(NAME, T, RT, NIN)        \
  EW_CHUNK_LOOP(RT, EXPR)                \
  }

/* EW_CHUNK for an op whose EXPR reads the string mode (PI(0), gelu's approximate) as the
 * constant EW_MODE: one loop per mode. With the mode read inside the loop the compiler
 * if-converts both sides and blends them, so gelu computed tanh's division with erf's
 * polynomials for every element (a third of its time on a host with a slow divider). */
#define EW_CHUNK_MODE(NAME, T, RT, NIN, EXPR) \
  EW_CHUNK_HEAD(NAME, T, RT, NIN)             \
  if (PI(0) == EW_MODE_TANH) {                \
    enum { EW_MODE = EW_MODE_TANH };          \
    EW_CHUNK_LOOP(RT, EXPR)                   \
  } else {                                    \
    enum { EW_MODE = EW_MODE_NONE };          \
    EW_CHUNK_LOOP(RT, EXPR)                   \
  }                                           \
  }

/* A float32 chunk of a unary function whose vector version VF holds where IN_RANGE(x) does
 * and whose results always do (sin, cos): the vector loop keeps out-of-range inputs (inf,
 * NaN, huge arguments) as they are, then a pass computes those with libm's SF. In place
 * (out == in) too: the second pass reads what the first one left. */
#define EW_CHUNK_RANGE(NAME, IN_RANGE, VF, SF)                                            \
  static void NAME(int64_t n, void* o, const void* const* in, const void* ctx) {        \
    const float* A = in[0];                                                              \
    float* R = o;                                                                        \
    (void)ctx;                                                                           \
    for (int64_t i = 0; i < n; i++) R[i] = IN_RANGE(A[i]) ? VF(A[i]) : A[i];             \
    for (int64_t i = 0; i < n; i++)                                                      \
      if (!IN_RANGE(R[i])) R[i] = SF(R[i]);                                              \
  }

/* Descriptors. F: float dtypes only; FI: floats and integers (IEXPR on int64). Operands are
 * args[0..NIN) and all promote; BOOL variants store 0/1. */
#define EW_DESC(NAME, RULE, NIN, F32, F64, I64) \
  static const ew_op NAME##_op = {#NAME, {F32, F64, I64}, RULE, NIN, (1u << (NIN)) - 1, {0, 1, 2, 3}};
#define EW_DEF_F(NAME, RULE, NIN, EXPR)               \
  EW_CHUNK(NAME##_f32, float, float, NIN, EXPR)       \
  EW_CHUNK(NAME##_f64, double, double, NIN, EXPR)     \
  EW_DESC(NAME, RULE, NIN, NAME##_f32, NAME##_f64, NULL)
#define EW_DEF_FI(NAME, RULE, NIN, EXPR, IEXPR)       \
  EW_CHUNK(NAME##_f32, float, float, NIN, EXPR)       \
  EW_CHUNK(NAME##_f64, double, double, NIN, EXPR)     \
  EW_CHUNK(NAME##_i64, int64_t, int64_t, NIN, IEXPR)  \
  EW_DESC(NAME, RULE, NIN, NAME##_f32, NAME##_f64, NAME##_i64)
#define EW_DEF_I(NAME, RULE, NIN, IEXPR)              \
  EW_CHUNK(NAME##_i64, int64_t, int64_t, NIN, IEXPR)  \
  EW_DESC(NAME, RULE, NIN, NULL, NULL, NAME##_i64)
#define EW_DEF_BOOL(NAME, NIN, EXPR, IEXPR)           \
  EW_CHUNK(NAME##_f32, float, int64_t, NIN, EXPR)     \
  EW_CHUNK(NAME##_f64, double, int64_t, NIN, EXPR)    \
  EW_CHUNK(NAME##_i64, int64_t, int64_t, NIN, IEXPR)  \
  EW_DESC(NAME, EW_BOOL_OUT, NIN, NAME##_f32, NAME##_f64, NAME##_i64)

/* Variants with a complex64 chunk function: CEXPR in cx_t, over the same operands. */
#define EW_DESC_C(NAME, RULE, NIN, F32, F64, I64, C64) \
  static const ew_op NAME##_op = {#NAME, {F32, F64, I64, C64}, RULE, NIN, (1u << (NIN)) - 1, {0, 1, 2, 3}};
#define EW_DEF_FC(NAME, RULE, NIN, EXPR, CEXPR)       \
  EW_CHUNK(NAME##_f32, float, float, NIN, EXPR)       \
  EW_CHUNK(NAME##_f64, double, double, NIN, EXPR)     \
  EW_CHUNK(NAME##_c64, cx_t, cx_t, NIN, CEXPR)        \
  EW_DESC_C(NAME, RULE, NIN, NAME##_f32, NAME##_f64, NULL, NAME##_c64)
#define EW_DEF_FIC(NAME, RULE, NIN, EXPR, IEXPR, CEXPR) \
  EW_CHUNK(NAME##_f32, float, float, NIN, EXPR)         \
  EW_CHUNK(NAME##_f64, double, double, NIN, EXPR)       \
  EW_CHUNK(NAME##_i64, int64_t, int64_t, NIN, IEXPR)    \
  EW_CHUNK(NAME##_c64, cx_t, cx_t, NIN, CEXPR)          \
  EW_DESC_C(NAME, RULE, NIN, NAME##_f32, NAME##_f64, NAME##_i64, NAME##_c64)
#define EW_DEF_BOOL_C(NAME, NIN, EXPR, IEXPR, CEXPR)  \
  EW_CHUNK(NAME##_f32, float, int64_t, NIN, EXPR)     \
  EW_CHUNK(NAME##_f64, double, int64_t, NIN, EXPR)    \
  EW_CHUNK(NAME##_i64, int64_t, int64_t, NIN, IEXPR)  \
  EW_CHUNK(NAME##_c64, cx_t, int64_t, NIN, CEXPR)     \
  EW_DESC_C(NAME, EW_BOOL_OUT, NIN, NAME##_f32, NAME##_f64, NAME##_i64, NAME##_c64)

/* The op table links a kernel to the descriptor that computes it (tpurt_op_ew_desc), so a
 * fuser can chain its chunk functions: one link per kernel whose descriptor says everything
 * about its math (dtype checks around it aside). */
#define EW_LINK(KERNEL, DESC) const ew_op* const tpurt_ew_desc_##KERNEL = &(DESC);

/* The kernel of an op whose descriptor says everything. */
#define EW_KERNEL(NAME) \
  EW_LINK(NAME, NAME##_op) \
  tpurt_status tpurt_kernel_##NAME(const tpurt_op_call* c) { return ew_apply(c, &NAME##_op); }

#endif /* TPURT_KERNELS_ELEMENTWISE_H */
