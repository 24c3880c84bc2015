/* The matmul family's blocked GEMM core, shared with families that lower to matrix
 * products (convolution). Implemented in matmul.c. */
#ifndef TPURT_GEMM_H
#define TPURT_GEMM_H

#include "../internal.h"

/* A strided matrix: element (i, k) lives at data + (i * rs + k * cs) elements. */
typedef struct {
  const void* data;
  int dtype; /* f16/bf16/f32 (f32 compute), f64 (f64 compute) or integers (int64, wrapping);
              * both operands alike */
  int64_t rs, cs;
} tpurt_gemm_mat;

/* Bytes of scratch tpurt_gemm needs (any shape). */
size_t tpurt_gemm_scratch_bytes(void);
/* C[M x N] (dense, row stride ldc; float, double for f64 operands, int64_t for integer
 * ones) += A[M x K] * B[K x N] with the emulated MXU numerics for `precision`
 * (tpurt_precision), exactly as mm. */
void tpurt_gemm(int64_t M, int64_t N, int64_t K, const tpurt_gemm_mat* A, const tpurt_gemm_mat* B,
                int precision, void* c, int64_t ldc, void* ws);

#endif /* TPURT_GEMM_H */
