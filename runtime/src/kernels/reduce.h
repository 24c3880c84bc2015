/* The reduction driver shared by the reduce and nn families.
 *
 * A reduction folds every input element of the reduced sub-space into one small state per
 * output element. The driver walks the input in one of two orders so that the innermost
 * loop is always over a dense-ish run of memory:
 *   - row mode: the last reduced dim is innermost; a run of it is folded into ONE state;
 *   - column mode: a kept dim has the smallest stride (e.g. sum over dim 0 of [N, C]); a
 *     run of that dim is folded element-wise into a block of states, one per column.
 * Float inputs are folded as double, integer/bool inputs as int64 when the op asks. */
#ifndef TPURT_REDUCE_H
#define TPURT_REDUCE_H

#include "../internal.h"

typedef struct red_state {
  double f, g;  /* float accumulators (sum, running max, mean, ...) */
  int64_t i, j; /* int accumulator / counts / arg index */
} red_state;

/* One finalized result; `is_int` selects which field is stored. */
typedef struct red_val {
  double f;
  int64_t i;
  int is_int;
} red_val;

typedef struct red_ctx {
  int as_int; /* inputs arrive as int64 (else double) */
  double p;   /* op parameter: norm order, correction */
  int flag;   /* op parameter: nan-skipping, min (vs max) */
} red_ctx;

typedef struct red_op red_op;
struct red_op {
  int int_inputs; /* fold integer/bool inputs as int64 (exact); else as double */
  void (*init)(red_state* s, int64_t n, const red_ctx* c);
  /* fold x[0..n) into *s; x[k] has linear index idx0 + k in the reduced sub-space */
  void (*row)(red_state* s, const void* x, int64_t n, int64_t idx0, const red_ctx* c);
  /* fold x[k] into s[k] for k < n; every x[k] has linear index idx in the reduced sub-space */
  void (*col)(red_state* s, const void* x, int64_t n, int64_t idx, const red_ctx* c);
  /* results for outs[0..nouts); count = size of the reduced sub-space */
  void (*fin)(const red_state* s, int64_t count, const red_ctx* c, red_val* out);
  /* fold state b (of the elements right after a's) into a; NULL: a reduction into few
   * outputs is not split over threads */
  void (*merge)(red_state* a, const red_state* b, const red_ctx* c);
  /* like row, on n dense float32 elements in place (no staging copy as double); NULL: staged */
  void (*row_f32)(red_state* s, const float* x, int64_t n, int64_t idx0, const red_ctx* c);
  /* like col, on nrows rows (in fold order) of n dense float32 elements in place, folded
   * into the states' f fields held as n dense doubles (acc[k] is s[k].f); NULL: staged
   * through col */
  void (*col_f32)(double* acc, const float* const* rows, int64_t nrows, int64_t n, const red_ctx* c);
  /* with col_f32 (whose ops have one float result): acc's n states into their results, in
   * place, as fin computes them; NULL: the results are acc itself */
  void (*fin_f32)(double* acc, int64_t n, int64_t count, const red_ctx* c);
  /* complex64 inputs (tpurt_red_pairs): the op that folds each element's float pair (real
   * part at even, imaginary at odd linear index of the reduced sub-space) into two outputs
   * (real, imaginary parts); NULL: complex64 not supported */
  const struct red_op* cx;
  int cx_parts; /* complex64 inputs may also be reduced as their float parts apart (sum) */
};

/* What a reduction kernel runs, linked from the op table (tpurt_op_red_desc) so a fuser can
 * fold a producer's chunks straight into the states: the fold functions, the op's fixed
 * parameters, and which argument holds the reduced dims (-1: all dims). */
typedef struct red_link {
  const red_op* op;
  red_ctx ctx;
  int dim_arg;
} red_link;

/* A complex64 tensor as its float32 pairs: the same dims plus a trailing dim of 2 (stride 1). */
tpurt_tensor tpurt_red_pairs(const tpurt_tensor* t);

/* Bit d set = dim d of `in` is reduced. `dims` is NONE, INT or INTS; NONE reduces every dim;
 * an empty list does too, except when `out` has in's shape (then nothing is reduced). */
tpurt_status tpurt_red_mask(const tpurt_tensor* in, const tpurt_value* dims,
                            const tpurt_tensor* out, uint32_t* mask);
/* Whether CPU's cast of a reduction's (or scan's) input to the output dtype can change values:
 * to an integer, or to a narrower float (sum(x, dtype=float16) sums x.half()). */
int tpurt_red_casts_input(int in_dtype, int out_dtype);
/* *use: `in`, or the converted input in *conv (a temporary) where that cast changes values;
 * tpurt_red_input_as_out_bytes: its scratch, for a plan. */
tpurt_status tpurt_red_input_as_out(const tpurt_tensor* in, const tpurt_tensor* out, tpurt_tensor* conv,
                                    const tpurt_tensor** use);
int64_t tpurt_red_input_as_out_bytes(const tpurt_tensor* in, const tpurt_tensor* out);
/* *use: c, or a copy of c whose argument self_arg is that converted input (a temporary);
 * tpurt_red_call_as_out_bytes: its scratch, for a plan. */
tpurt_status tpurt_red_call_as_out(const tpurt_op_call* c, int self_arg, const tpurt_op_call** use);
int64_t tpurt_red_call_as_out_bytes(const tpurt_op_call* c, int self_arg);
/* Reduce `in` over the dims in `mask` into outs[0..nouts) (all of the same shape: keepdim
 * or not). ctx->as_int is set by the driver. */
tpurt_status tpurt_red_run(const tpurt_tensor* in, uint32_t mask, const tpurt_tensor* outs,
                           int nouts, const red_op* op, red_ctx* ctx);

/* dst[0..n) (double, or int64 when as_int) <- n elements of dtype dt at src, stride st */
void tpurt_red_load(void* dst, int as_int, const void* src, int64_t st, int dt, int64_t n);
/* n doubles -> dtype dt at dst, stride st (bf16/f16 via f32, round to nearest even) */
void tpurt_red_store(void* dst, int64_t st, int dt, const double* src, int64_t n);
/* Wrap a possibly negative dim for a tensor of ndim dims (0-dim tensors take dim 0/-1). */
tpurt_status tpurt_wrap_dim(int64_t dim, int ndim, int* out);

#define RED_CHUNK 1024

static inline int64_t tpurt_iabs64(int64_t x) { return x < 0 ? -x : x; }

#endif /* TPURT_REDUCE_H */
