/* The matmul family's blocked GEMM core, shared with families that lower to matrix
 * products (convolution). Implemented in matmul.c. */
#ifndef TPURT_GEMM_H
#define TPURT_GEMM_H

#include "../internal.h"

/* Writes n elements of line i of a matrix, from position `start` on, to dst. */
typedef void (*tpurt_gemm_line_fn)(const void* ctx, int64_t i, int64_t start, int64_t n, void* dst);

/* A strided matrix: element (i, k) lives at data + (i * rs + k * cs) elements. Or, for B
 * only, a matrix never stored (a convolution's im2col columns): `line` produces it a line
 * at a time along its dense direction (rows when cs == 1, columns when rs == 1; rs and cs
 * still say which), as f32 for f32 or f64 for f64 dtypes, and `data` is unused. */
typedef struct {
  const char* data;
  int dtype; /* f16/bf16/f32 (f32 compute), f64 (f64 compute) or integers (int64, wrapping);
              * both operands alike */
  int64_t rs, cs;
  tpurt_gemm_line_fn line;
  const void* ctx;
  /* Read in place by the micro-kernel (no packing), values already what packing would make of
   * them (tpurt_gemm_rows_form). B: K row pointers, element (k, j) at rows[k][j], each row
   * readable TPURT_GEMM_ROW_SLACK elements past N. A: M row pointers and K offsets, element
   * (i, k) at rows[i][koff[k]]. */
  const void* const* rows;
  const int64_t* koff;
} tpurt_gemm_mat;

enum { TPURT_GEMM_ROW_SLACK = 64 };
/* Whether an operand may be read in place (`rows`) for `dtype` at `precision`, and in what form:
 * NO (HIGH precision's split needs packing; not a float or double), AS_IS, or BF16 (each
 * value tpurt_round_bf16'ed first: DEFAULT precision's one bf16 pass). */
enum { TPURT_GEMM_ROWS_NO = -1, TPURT_GEMM_ROWS_AS_IS = 0, TPURT_GEMM_ROWS_BF16 = 1 };
int tpurt_gemm_rows_form(int dtype, int precision);

/* Bytes of scratch tpurt_gemm needs (any shape). */
size_t tpurt_gemm_scratch_bytes(void);
/* C[M x N] (dense, row stride ldc; float, double for f64 operands, int64_t for integer
 * ones) += A[M x K] * B[K x N] with the emulated MXU numerics for `precision`
 * (tpurt_precision), exactly as mm. */
void tpurt_gemm(int64_t M, int64_t N, int64_t K, const tpurt_gemm_mat* A, const tpurt_gemm_mat* B,
                int precision, void* c, int64_t ldc, void* ws);

/* Whether m is read along its columns: column-major operands, line producers of columns. */
static inline int tpurt_gemm_by_cols(const tpurt_gemm_mat* m) { return m->rs == 1 && m->cs != 1; }
/* n values of a float matrix (f32/bf16/f16 data or a line producer) from element (i, k) on,
 * along its row (along_col 0) or its column, as f32: in place when they are dense f32, else
 * converted into buf. */
const float* tpurt_gemm_line_f32(float* buf, const tpurt_gemm_mat* m, int64_t i, int64_t k, int64_t n, int along_col);

/* The product on the host's bf16 unit (matmul_unit.c; the amx build's tiles, the avx512bf16
 * build's dot products): C = A * B (store) or
 * C += A * B, then + bias, for operands whose values are bf16 (DEFAULT precision's one pass, or
 * bf16 tensors; x = 1) or f32 at HIGH precision (bf16_3x: each value as three bf16 parts along
 * K; x = 3). Returns 0 without touching C where it does not run: another build, a host without
 * the unit (or, for AMX, without the kernel's permission), an empty product. Operands read in
 * place (`rows`, f32) are packed from their rows. ws: tpurt_gemm_scratch_bytes() or the matmul family's scratch for N columns. */
int tpurt_gemm_unit(int64_t M, int64_t N, int64_t K, const tpurt_gemm_mat* A, const tpurt_gemm_mat* B, int x, float* c,
                   int64_t ldc, void* ws, int store, const float* bias);
/* 1 when this build has a bf16 unit path and the host lets the process use it. */
int tpurt_gemm_unit_ready(void);

#endif /* TPURT_GEMM_H */
