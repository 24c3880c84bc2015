/* Matmul family: mm, bmm, addmm, baddbmm, addbmm, addmv, mv, dot. Every op is one call of
 * the same blocked GEMM core (packing handles any strides, batching and the emulated MXU
 * numerics) followed by one elementwise epilogue (alpha, beta*self, dtype rounding).
 *
 * MXU numerics for float32 operands (call->precision):
 *   DEFAULT  one bf16 pass: both operands rounded to bf16 (nearest even) while packing; the
 *            bf16*bf16 products are exact in f32, accumulation is f32.
 *   HIGH     bf16_3x: x = hi + lo (hi = bf16(x), lo = bf16(x - hi)); the packed K axis is
 *            tripled so the core sums hi*hi + hi*lo + lo*hi in f32.
 *   HIGHEST  plain f32.
 * bf16/f16 operands convert exactly to f32 (products f32, accumulation f32), f64 is plain
 * double, integers accumulate in int64. */
#include <stdlib.h>

#include "../internal.h"
#include "gemm.h"

/* ---------------------------------------------------------------- operands */
/* A strided matrix, or one without storage (gemm.h). */
typedef tpurt_gemm_mat mat;

/* How a loaded f32 value becomes packed values: 1 copy, 1 bf16, or 3 bf16 parts. */
typedef enum { PASS_F32 = 0, PASS_BF16 = 1, PASS_BF16X3 = 3 } pass_mode;

static pass_mode pass_of(int dtype, int precision) {
  if (dtype != TPURT_F32 || precision >= TPURT_PRECISION_HIGHEST) return PASS_F32;
  return precision >= TPURT_PRECISION_HIGH ? PASS_BF16X3 : PASS_BF16;
}

static const char* elem(const mat* m, int64_t i, int64_t k) {
  return m->data + (i * m->rs + k * m->cs) * (int64_t)tpurt_dtype_size((tpurt_dtype)m->dtype);
}

/* dst[0..n) <- n elements from p with element stride st, converted to float / double. */
static void load_f32(float* dst, const char* p, int64_t st, int dt, int64_t n) {
  switch (dt) {
    case TPURT_F32:
      if (st == 1) memcpy(dst, p, sizeof(float) * (size_t)n);
      else for (int64_t i = 0; i < n; i++) dst[i] = ((const float*)p)[i * st];
      break;
    case TPURT_BF16: for (int64_t i = 0; i < n; i++) dst[i] = tpurt_bf16_to_f32(((const uint16_t*)p)[i * st]); break;
    case TPURT_F16: for (int64_t i = 0; i < n; i++) dst[i] = tpurt_f16_to_f32(((const uint16_t*)p)[i * st]); break;
  }
}
static void load_f64(double* dst, const char* p, int64_t st, int dt, int64_t n) {
  (void)dt; /* the double core only sees float64 operands */
  for (int64_t i = 0; i < n; i++) dst[i] = ((const double*)p)[i * st];
}

/* ---------------------------------------------------------------- the core */
/* Register-blocked micro-kernel on packed panels: an MR x NR tile of C += A_panel * B_panel
 * over kc packed steps. Vector extensions give the compiler the tile shape directly, as wide
 * as the build's instruction set (runtime/Makefile builds one library per x86-64 level).
 * Every C element sums its K steps in the same order in every build: the tile shape changes
 * which elements a call computes, never an element's sum. */
/* Each K block reads and writes all of C once: a long K block halves that traffic against
 * 256, which is what bounds the core when other tenants share the L3. The micro-kernel
 * still works in runs of KRUN steps (a B panel's run: 16 KiB with AVX2, 48 KiB with AVX-512). */
#define KC 512 /* packed K per block */
#define KRUN 256 /* packed steps the micro-kernel sums in registers before adding to C */
#define MC 96  /* rows of A per block (A block: 192 KiB, L2); a multiple of every MR */
#define NC 1056 /* columns per block: a multiple of every NR (16, 48, 24, 8) */

/* Registers: 16 vectors of 32 bytes with AVX2 (tiles of 6 rows x 2 vectors: 6 x 16 f32,
 * 4 x 8 f64), 32 of 64 bytes with AVX-512 (8 rows x 3 vectors: 8 x 48 f32, 8 x 24 f64):
 * accumulators plus the B vectors and the broadcast A value. 8 rows divide the channel
 * counts of convolutions (64, 128, ...), which 12 rows left a partly empty panel in. */
#ifdef __AVX512F__
#define VEC_BYTES 64
#define VECS 3
#define ROWS_F32 8
#define ROWS_F64 8
#else
#define VEC_BYTES 32
#define VECS 2
#define ROWS_F32 6
#define ROWS_F64 4
#endif
#define NR_MAX (VECS * VEC_BYTES / 4) /* the widest tile's columns (f32) */
/* The tile's B vectors as separate variables (an array of them was kept on the stack). A
 * column panel's last tile may hold fewer live vectors (N = 256 fills 5 1/3 panels of 48):
 * a kernel for 1 or 2 vectors reads only those, so the zero columns cost nothing. */
#define FOR_V1(X) X(0)
#define FOR_V2(X) X(0) X(1)
#define FOR_V3(X) X(0) X(1) X(2)
#define MICRO_LOAD_B(h)                \
  __typeof__(acc[0][0]) bv##h;         \
  memcpy(&bv##h, b + (k * VECS + h) * w, sizeof bv##h);
#define MICRO_LOAD_ROW(h)              \
  __typeof__(acc[0][0]) bv##h;         \
  memcpy(&bv##h, brow[k] + bj + h * w, sizeof bv##h);
#define MICRO_FMA(h) acc[i][h] += ai * bv##h;
/* A's value for row i at step k: packed, or from its rows in place at step k's offset */
#define A_STEP_PACKED()
#define A_LOAD_PACKED(i, ROWS) a[k * ROWS + i]
#define A_STEP_ROWS() const int64_t o = koff[k];
#define A_LOAD_ROWS(i, ROWS) arow[i][o]

/* MICRO(T, SFX, ROWS, NV): a tile of ROWS x (NV vectors of W lanes) over a panel whose K
 * steps are VECS vectors apart. fp-contract: the multiply-adds are FMAs in every build that
 * has them. C tile = (store ? 0 : C tile) + the sum of the kc packed steps, then + bias[j]
 * when bias is not NULL (the last run of a product: addmm's bias added to the rounded C
 * value, as its epilogue would, without a pass of its own).
 * micro_rows_*: the same over B's rows in place, step k's values from brow[k] + bj on;
 * micro_arows_*: over A's rows in place, row i's value at step k is arow[i][koff[k]]. */
#define MICRO(T, SFX, ROWS, NV)                                                                \
  MICRO_GEN(T, SFX, ROWS, NV, micro_##SFX##_##NV, const T* restrict a, A_STEP_PACKED, A_LOAD_PACKED,     \
            const T* restrict b, MICRO_LOAD_B)                                                    \
  MICRO_GEN(T, SFX, ROWS, NV, micro_rows_##SFX##_##NV, const T* restrict a, A_STEP_PACKED, A_LOAD_PACKED, \
            const T* const* restrict brow MICRO_COMMA int64_t bj, MICRO_LOAD_ROW)                \
  MICRO_GEN(T, SFX, ROWS, NV, micro_arows_##SFX##_##NV,                                          \
            const T* const* restrict arow MICRO_COMMA const int64_t* restrict koff, A_STEP_ROWS,  \
            A_LOAD_ROWS, const T* restrict b, MICRO_LOAD_B)
#define MICRO_COMMA ,
#define MICRO_GEN(T, SFX, ROWS, NV, NAME, A_PARAMS, STEP_A, LOAD_A, B_PARAMS, LOAD_B)          \
  __attribute__((optimize("fp-contract=fast"))) static void NAME(int64_t kc, A_PARAMS, B_PARAMS, \
                                      T* restrict c, int64_t ldc, int mr, int nr, int store,     \
                                      const T* restrict bias) {                                   \
    v##SFX acc[ROWS][NV];                                                                       \
    const int64_t w = W_##SFX;                                                                 \
    memset(acc, 0, sizeof acc);                                                                \
    for (int i = 0; i < ROWS; i++) /* the C tile is needed after the loop: fetch it now */     \
      __builtin_prefetch(c + i * ldc, 1), __builtin_prefetch(c + i * ldc + NV * W_##SFX - 1, 1); \
    _Pragma("GCC unroll 4")                                                                    \
    for (int64_t k = 0; k < kc; k++) {                                                         \
      STEP_A()                                                                                 \
      FOR_V##NV(LOAD_B)                                                                        \
      for (int i = 0; i < ROWS; i++) {                                                          \
        T ai = LOAD_A(i, ROWS);                                                                 \
        FOR_V##NV(MICRO_FMA)                                                                   \
      }                                                                                        \
    }                                                                                          \
    if (mr == ROWS && nr == NV * W_##SFX) { /* full tile: vector read-modify-write of C */     \
      for (int i = 0; i < ROWS; i++)                                                           \
        for (int h = 0; h < NV; h++) {                                                         \
          v##SFX cv = acc[i][h];                                                               \
          if (!store) {                                                                        \
            v##SFX old;                                                                        \
            memcpy(&old, c + i * ldc + h * W_##SFX, sizeof old);                               \
            cv += old;                                                                         \
          }                                                                                    \
          if (bias) {                                                                          \
            v##SFX bv;                                                                         \
            memcpy(&bv, bias + h * W_##SFX, sizeof bv);                                        \
            cv += bv;                                                                          \
          }                                                                                    \
          memcpy(c + i * ldc + h * W_##SFX, &cv, sizeof cv);                                   \
        }                                                                                      \
      return;                                                                                  \
    }                                                                                          \
    for (int i = 0; i < mr; i++)                                                               \
      for (int j = 0; j < nr; j++) {                                                           \
        T v = store ? acc[i][j / W_##SFX][j % W_##SFX] : c[i * ldc + j] + acc[i][j / W_##SFX][j % W_##SFX]; \
        c[i * ldc + j] = bias ? v + bias[j] : v;                                               \
      }                                                                                        \
  }

#define MICRO_EXPANDED(T, SFX, ROWS, NV) MICRO(T, SFX, ROWS, NV) /* NV = VECS expanded first */
/* GEMM_CORE(T, SFX, ROWS): W lanes per vector; the tile is ROWS x (VECS*W), its last column
 * panel's tile as narrow as its live vectors. Every C element sums its K steps in the same
 * order in every variant. */
#if VECS == 3
#define MICRO_NARROW(T, SFX, ROWS) MICRO(T, SFX, ROWS, 1) MICRO(T, SFX, ROWS, 2)
#define MICRO_CALL(NAME, nv, ...) \
  ((nv) == 3 ? NAME##_3(__VA_ARGS__) : (nv) == 2 ? NAME##_2(__VA_ARGS__) : NAME##_1(__VA_ARGS__))
#else
#define MICRO_NARROW(T, SFX, ROWS) MICRO(T, SFX, ROWS, 1)
#define MICRO_CALL(NAME, nv, ...) ((nv) == 2 ? NAME##_2(__VA_ARGS__) : NAME##_1(__VA_ARGS__))
#endif
#define GEMM_CORE(T, SFX, ROWS)                                                                 \
  typedef T v##SFX __attribute__((vector_size(VEC_BYTES)));                                    \
  enum { W_##SFX = VEC_BYTES / sizeof(T), MR_##SFX = ROWS, NR_##SFX = VECS * W_##SFX };        \
  MICRO_EXPANDED(T, SFX, ROWS, VECS)                                                           \
  MICRO_NARROW(T, SFX, ROWS)
GEMM_CORE(float, f32, ROWS_F32)
GEMM_CORE(double, f64, ROWS_F64)

/* Packed values per K step for a pass mode. */
static int expand_of(pass_mode p) { return p == PASS_BF16X3 ? 3 : 1; }

/* Write n loaded values row[0..n) to packed slots: value q goes to dst[q * step] (+ st,
 * + 2 * st for its bf16_3x parts). `b_side` picks which factor gets the low part: A packs
 * (hi, hi, lo) and B packs (hi, lo, hi) so the K-sum is hi*hi + hi*lo + lo*hi. The pass
 * mode is switched on once per run so each loop is plain (and vectorizes at step 1). */
static void put_f32(float* restrict dst, int64_t step, int64_t st, const float* restrict row, int64_t n, pass_mode p,
                    int b_side) {
  switch (p) {
    case PASS_F32:
      if (step == 1) memcpy(dst, row, sizeof(float) * (size_t)n);
      else for (int64_t q = 0; q < n; q++) dst[q * step] = row[q];
      break;
    case PASS_BF16:
      if (step == 1) for (int64_t q = 0; q < n; q++) dst[q] = tpurt_round_bf16(row[q]); /* vectorizes */
      else for (int64_t q = 0; q < n; q++) dst[q * step] = tpurt_round_bf16(row[q]);
      break;
    case PASS_BF16X3:
      for (int64_t q = 0; q < n; q++) {
        float hi = tpurt_round_bf16(row[q]), lo = tpurt_round_bf16(row[q] - hi);
        dst[q * step] = hi;
        dst[q * step + st] = b_side ? lo : hi;
        dst[q * step + 2 * st] = b_side ? hi : lo;
      }
      break;
  }
}
static void put_f64(double* restrict dst, int64_t step, int64_t st, const double* restrict row, int64_t n,
                    pass_mode p, int b_side) {
  (void)st, (void)p, (void)b_side;
  for (int64_t q = 0; q < n; q++) dst[q * step] = row[q];
}

/* A loaded value as packed in a one-value pass mode (PASS_F32 or PASS_BF16). */
static inline float one_pass_f32(float v, pass_mode p) { return p == PASS_BF16 ? tpurt_round_bf16(v) : v; }
static inline double one_pass_f64(double v, pass_mode p) { (void)p; return v; }

/* n values of m from element (i, k) on, as T: along its row (`along_col` 0) or its column
 * (1). Read in place when they already are dense T (a dense row, or the column of a
 * transposed operand: the common cases), else converted into `buf`. */
static const float* line_of_f32(float* buf, const mat* m, int64_t i, int64_t k, int64_t n, int along_col) {
  if (m->line) { /* read along its dense direction, as every caller does */
    m->line(m->ctx, along_col ? k : i, along_col ? i : k, n, buf);
    return buf;
  }
  int64_t st = along_col ? m->rs : m->cs;
  if (m->dtype == TPURT_F32 && st == 1) return (const float*)elem(m, i, k);
  load_f32(buf, elem(m, i, k), st, m->dtype, n);
  return buf;
}
static const double* line_of_f64(double* buf, const mat* m, int64_t i, int64_t k, int64_t n, int along_col) {
  if (m->line) {
    m->line(m->ctx, along_col ? k : i, along_col ? i : k, n, buf);
    return buf;
  }
  int64_t st = along_col ? m->rs : m->cs;
  if (m->dtype == TPURT_F64 && st == 1) return (const double*)elem(m, i, k);
  load_f64(buf, elem(m, i, k), st, m->dtype, n);
  return buf;
}
/* Column-major operands (x.t(), W.t() of a Linear) are packed along their dense columns:
 * read along rows they would touch one cache line per element. */
static int by_cols(const mat* m) { return tpurt_gemm_by_cols(m); }

/* Pack A rows [i0, i0+mc) x K [k0, k0+kc) into MR-row panels: panel r, packed step q,
 * row r' at ap[r * MR * kcx + q * MR + r']; rows past mc are zero. Pack B K [k0, k0+kc)
 * x cols [j0, j0+nc) into NR-col panels likewise, by columns (column-major B) or by a
 * range of its K rows (row-major B: threads split K so each reads whole rows, which the
 * hardware prefetcher streams; split by panels each read short runs of every row); the
 * columns past nc of the last panel are zeroed by the caller. `row` holds max(kc, mc, nc)
 * values. Both read their operand along its dense direction. */
#define PACKERS(T, SFX)                                                                         \
  /* Dense rows of A, one value per element: a panel's MR rows at a time, in blocks of       \
   * PACK_K steps loaded as rows (vector loads) and written as the panel's steps (a small      \
   * transpose the compiler turns into shuffles); one strided store per element was a sixth \
   * of the time of a Linear layer's product. */                                             \
  static void pack_a_rows_##SFX(T* restrict ap, const mat* A, int64_t i0, int64_t mc, int64_t k0, \
                                int64_t kc, pass_mode p) {                                     \
    for (int64_t i = 0; i < mc; i += MR_##SFX) {                                               \
      int rows = mc - i < MR_##SFX ? (int)(mc - i) : MR_##SFX;                                 \
      const T* src[MR_##SFX];                                                                  \
      for (int r = 0; r < MR_##SFX; r++) src[r] = (const T*)elem(A, i0 + i + (r < rows ? r : 0), k0); \
      T* dst = ap + i * kc;                                                                    \
      int64_t k = 0;                                                                           \
      for (; k + PACK_K <= kc; k += PACK_K) {                                                  \
        T t[MR_##SFX][PACK_K];                                                                 \
        if (p == PASS_BF16) /* the pass mode and the padding outside the loops: they vectorize */ \
          for (int r = 0; r < MR_##SFX; r++)                                                   \
            for (int q = 0; q < PACK_K; q++) t[r][q] = one_pass_##SFX(src[r][k + q], PASS_BF16); \
        else                                                                                   \
          for (int r = 0; r < MR_##SFX; r++)                                                   \
            for (int q = 0; q < PACK_K; q++) t[r][q] = src[r][k + q];                          \
        for (int r = rows; r < MR_##SFX; r++)                                                  \
          for (int q = 0; q < PACK_K; q++) t[r][q] = 0;                                        \
        for (int q = 0; q < PACK_K; q++)                                                       \
          for (int r = 0; r < MR_##SFX; r++) dst[(k + q) * MR_##SFX + r] = t[r][q];            \
      }                                                                                        \
      for (; k < kc; k++)                                                                      \
        for (int r = 0; r < MR_##SFX; r++) dst[k * MR_##SFX + r] = r < rows ? one_pass_##SFX(src[r][k], p) : 0; \
    }                                                                                          \
  }                                                                                            \
  static void pack_a_##SFX(T* ap, const mat* A, int64_t i0, int64_t mc, int64_t k0, int64_t kc,  \
                           pass_mode p, T* row) {                                              \
    int x = expand_of(p);                                                                      \
    int64_t kcx = kc * x, full = mc / MR_##SFX * MR_##SFX;                                     \
    if (full < mc) /* the padded rows of the last panel */                                     \
      memset(ap + full * kcx, 0, sizeof(T) * (size_t)(MR_##SFX * kcx));                        \
    if (by_cols(A))                                                                            \
      for (int64_t k = 0; k < kc; k++) {                                                       \
        /* each step reads a short run of another row of the stored matrix (a page or more     \
         * apart): no hardware stream follows that, so fetch the runs PACK_AHEAD steps ahead */ \
        if (k + PACK_AHEAD < kc && A->dtype == tpurt_dtype_of_##SFX)                           \
          for (int64_t r = 0; r < mc; r += 64 / (int64_t)sizeof(T))                            \
            __builtin_prefetch(elem(A, i0 + r, k0 + k + PACK_AHEAD));                          \
        const T* src = line_of_##SFX(row, A, i0, k0 + k, mc, 1);                                    \
        for (int64_t r = 0; r < mc; r += MR_##SFX) /* MR contiguous values into each panel */  \
          put_##SFX(ap + r * kcx + k * x * MR_##SFX, 1, MR_##SFX, src + r,                     \
                    mc - r < MR_##SFX ? mc - r : MR_##SFX, p, 0);                              \
      }                                                                                        \
    else if (x == 1 && A->dtype == tpurt_dtype_of_##SFX && A->cs == 1)                         \
      pack_a_rows_##SFX(ap, A, i0, mc, k0, kc, p);                                             \
    else                                                                                       \
      for (int64_t i = 0; i < mc; i++) {                                                       \
        const T* src = line_of_##SFX(row, A, i0 + i, k0, kc, 0);                                    \
        put_##SFX(ap + (i / MR_##SFX) * MR_##SFX * kcx + i % MR_##SFX, x * MR_##SFX, MR_##SFX, src, kc, p, 0); \
      }                                                                                        \
  }                                                                                            \
  static void pack_b_cols_##SFX(T* bp, const mat* B, int64_t k0, int64_t kc, int64_t j0,       \
                                int64_t nc, pass_mode p, T* row) {                             \
    int64_t kcx = kc * expand_of(p);                                                           \
    for (int64_t j = 0; j < nc; j++)                                                           \
      put_##SFX(bp + j / NR_##SFX * NR_##SFX * kcx + j % NR_##SFX, expand_of(p) * NR_##SFX,    \
                NR_##SFX, line_of_##SFX(row, B, k0, j0 + j, kc, 1), kc, p, 1);                      \
  }                                                                                            \
  static void pack_b_rows_##SFX(T* bp, const mat* B, int64_t k0, int64_t kc, int64_t ka,       \
                                int64_t kb, int64_t j0, int64_t nc, pass_mode p, T* row) {     \
    int x = expand_of(p);                                                                      \
    int64_t kcx = kc * x;                                                                      \
    for (int64_t k = ka; k < kb; k++) {                                                        \
      const T* src = line_of_##SFX(row, B, k0 + k, j0, nc, 0);                                      \
      for (int64_t j = 0; j < nc; j += NR_##SFX)                                               \
        put_##SFX(bp + j * kcx + k * x * NR_##SFX, 1, NR_##SFX, src + j,                       \
                  nc - j < NR_##SFX ? nc - j : NR_##SFX, p, 1);                                \
    }                                                                                          \
  }
#define PACK_K 16
#define PACK_AHEAD 8
enum { tpurt_dtype_of_f32 = TPURT_F32, tpurt_dtype_of_f64 = TPURT_F64 };
PACKERS(float, f32)
PACKERS(double, f64)

/* Products of bf16 values (and HIGH's bf16 parts) go to the matrix unit when the build and host have one. */
static int bf16_values(const mat* m, pass_mode p) { return m->dtype == TPURT_BF16 || (m->dtype == TPURT_F32 && p == PASS_BF16); }
static int unit_gemm_f32(int64_t M, int64_t N, int64_t K, const mat* A, const mat* B, pass_mode pa, pass_mode pb,
                         float* c, int64_t ldc, float* ws, int store, const float* bias) {
  if (pa == PASS_BF16X3 || pb == PASS_BF16X3) /* HIGH: f32 operands, three bf16 parts each */
    return A->dtype == TPURT_F32 && B->dtype == TPURT_F32 && tpurt_gemm_unit(M, N, K, A, B, 3, c, ldc, ws, store, bias);
  return bf16_values(A, pa) && bf16_values(B, pb) && tpurt_gemm_unit(M, N, K, A, B, 1, c, ldc, ws, store, bias);
}
static int unit_gemm_f64(int64_t M, int64_t N, int64_t K, const mat* A, const mat* B, pass_mode pa, pass_mode pb,
                         double* c, int64_t ldc, double* ws, int store, const double* bias) {
  (void)M, (void)N, (void)K, (void)A, (void)B, (void)pa, (void)pb, (void)c, (void)ldc, (void)ws, (void)store, (void)bias;
  return 0;
}

/* C[M x N] (dense, row stride ldc) += A[M x K] * B[K x N]. `ws` is scratch from
 * gemm_scratch_bytes. The K blocking keeps every packed step count a multiple of the
 * expansion so hi/lo parts of one product never straddle blocks.
 *
 * Threads (tpurt_parallel_for): per (N block, K block), the B block is packed by column
 * panels in parallel, then the rows of C are cut in MR-aligned chunks, each thread
 * packing its own A blocks (on its stack) and running the micro-kernel over the shared
 * packed B. Every C element is summed by one thread in the same K order whatever the
 * thread count, so results do not depend on it. */
#define GEMM(T, SFX)                                                                           \
  typedef struct {                                                                             \
    const mat *A, *B;                                                                          \
    pass_mode pa, pb;                                                                          \
    int x;                                                                                     \
    int64_t j0, nc, k0, kc;                                                                    \
    T *bp, *c;                                                                                 \
    int64_t ldc;                                                                               \
    int64_t M, panels_m, chunks; /* rows, their MR-row panels, row chunks per B block */      \
    int64_t col_groups;          /* each row chunk's columns cut in this many groups */       \
    int own_b;                   /* one row chunk: each column group packs its own B panels */ \
    int k_inside;                /* B not shared between items: each runs all K blocks */     \
    int64_t kb;                  /* K per block */                                             \
    int store;                   /* the first K block stores into C instead of adding */      \
    int64_t K;                                                                                 \
    const T* bias;               /* NULL, or N values added to every row at the end */        \
  } gemm_job_##SFX;                                                                            \
  /* Column panels [p0, p1) of the B block (column-major B). */                               \
  static void gemm_pack_b_cols_##SFX(void* arg, int64_t p0, int64_t p1) {                      \
    const gemm_job_##SFX* g = arg;                                                             \
    _Alignas(64) T row[KC];                                                                    \
    int64_t j1 = p1 * NR_##SFX < g->nc ? p1 * NR_##SFX : g->nc;                                \
    pack_b_cols_##SFX(g->bp + p0 * NR_##SFX * g->kc * g->x, g->B, g->k0, g->kc,                \
                      g->j0 + p0 * NR_##SFX, j1 - p0 * NR_##SFX, g->pb, row);                  \
  }                                                                                            \
  /* K rows [ka, kb) of the B block (row-major B). */                                          \
  static void gemm_pack_b_rows_##SFX(void* arg, int64_t ka, int64_t kb) {                      \
    const gemm_job_##SFX* g = arg;                                                             \
    _Alignas(64) T row[NC];                                                                    \
    pack_b_rows_##SFX(g->bp, g->B, g->k0, g->kc, ka, kb, g->j0, g->nc, g->pb, row);            \
  }                                                                                            \
  /* Items [q0, q1) of C against the packed B block: item q is row chunk q / col_groups,     \
   * column group q % col_groups. Chunk c is panels [P*c/chunks, P*(c+1)/chunks): sizes      \
   * differ by at most one panel, so equally fast threads finish together (fixed-size chunks  \
   * left a remainder to one thread at every K block); column groups likewise. */            \
  static void gemm_item_##SFX(const gemm_job_##SFX* g, int64_t q0);                          \
  static void gemm_rows_##SFX(void* arg, int64_t q0, int64_t q1) {                             \
    const gemm_job_##SFX* g = arg;                                                             \
    for (int64_t q = q0; q < q1; q++) { /* one item at a time: each has its own rows and columns */ \
      if (!g->k_inside) {                                                                      \
        gemm_item_##SFX(g, q);                                                                 \
        continue;                                                                              \
      }                                                                                        \
      gemm_job_##SFX k = *g; /* every K block of the item, in order */                         \
      for (k.k0 = 0; k.k0 < k.K; k.k0 += k.kb) {                                               \
        k.kc = k.K - k.k0 < k.kb ? k.K - k.k0 : k.kb;                                          \
        gemm_item_##SFX(&k, q);                                                                \
      }                                                                                        \
    }                                                                                          \
  }                                                                                            \
  static void gemm_item_##SFX(const gemm_job_##SFX* g, int64_t q0) {                           \
    int64_t q1;                                                                                \
    int64_t panels_n = (g->nc + NR_##SFX - 1) / NR_##SFX, cg = q0 % g->col_groups;             \
    int64_t c0 = panels_n * cg / g->col_groups * NR_##SFX;                                     \
    int64_t c1 = panels_n * (cg + 1) / g->col_groups * NR_##SFX;                               \
    if (c1 > g->nc) c1 = g->nc;                                                                \
    q0 /= g->col_groups, q1 = q0 + 1;                                                          \
    _Alignas(64) T ap[KC * (MC + MR_##SFX)];                                                   \
    _Alignas(64) T row[NC];                                                                    \
    int64_t kcx = g->kc * g->x;                                                                \
    const T* const* brows = (const T* const*)g->B->rows; /* B in place: nothing packed */      \
    const T* const* arows = (const T* const*)g->A->rows; /* A in place likewise */             \
    /* Packed B: panel jr at bb + jr * kcx. An item packing its own columns keeps them at a   \
     * place that does not move with the K block's size (c0 full-size blocks in): the items   \
     * run their K blocks unsynchronized, and one packing a short last block at c0 * kcx      \
     * overwrote the columns another was still reading. */                                   \
    T* bb = g->own_b ? g->bp + c0 * (g->kb * g->x) - c0 * kcx : g->bp;                         \
    if (g->own_b && c1 == g->nc && g->nc % NR_##SFX) /* the padded columns of the last panel */ \
      memset(bb + g->nc / NR_##SFX * NR_##SFX * kcx, 0, sizeof(T) * (size_t)(NR_##SFX * kcx));     \
    if (g->own_b && by_cols(g->B))                                                             \
      pack_b_cols_##SFX(bb + c0 * kcx, g->B, g->k0, g->kc, g->j0 + c0, c1 - c0, g->pb, row);     \
    else if (g->own_b)                                                                         \
      pack_b_rows_##SFX(bb + c0 * kcx, g->B, g->k0, g->kc, 0, g->kc, g->j0 + c0, c1 - c0, g->pb, row); \
    int store = g->store && g->k0 == 0;                                                        \
    int last = g->bias && g->k0 + g->kc >= g->K; /* the product's last K block */             \
    int64_t run = KRUN / g->x * g->x;                                                          \
    int64_t r0 = g->panels_m * q0 / g->chunks * MR_##SFX;                                      \
    int64_t r1 = g->panels_m * q1 / g->chunks * MR_##SFX;                                      \
    if (r1 > g->M) r1 = g->M;                                                                  \
    for (int64_t i0 = r0; i0 < r1; i0 += MC) {                                                 \
      int64_t mc = r1 - i0 < MC ? r1 - i0 : MC;                                                \
      if (!arows) pack_a_##SFX(ap, g->A, i0, mc, g->k0, g->kc, g->pa, row);                     \
      /* Runs of `run` steps, each added to the C tile: the f32 sums are those of K blocks  \
       * of `run` steps. Runs are the middle loop so a run of the B panel (16-48 KiB)         \
       * stays in L1 (AVX2) or L2 for all the row panels; C tiles of a column panel in L2.   */\
      for (int64_t jr = c0; jr < c1; jr += NR_##SFX)                                           \
        for (int64_t q = 0; q < kcx; q += run)                                                 \
          for (int64_t ir = 0; ir < mc; ir += MR_##SFX) {                                      \
            int mr = mc - ir < MR_##SFX ? (int)(mc - ir) : MR_##SFX;                           \
            int nr = g->nc - jr < NR_##SFX ? (int)(g->nc - jr) : NR_##SFX;                     \
            int nv = (nr + W_##SFX - 1) / W_##SFX, steps = kcx - q < run ? kcx - q : run;      \
            T* ct = g->c + (i0 + ir) * g->ldc + g->j0 + jr;                                    \
            const T* bias = last && q + run >= kcx ? g->bias + g->j0 + jr : NULL;              \
            if (arows) { /* the panel's rows; past M, the last row again (not stored) */       \
              const T* ar[MR_##SFX];                                                           \
              for (int i = 0; i < MR_##SFX; i++) ar[i] = arows[i0 + ir + (i < mr ? i : mr - 1)];  \
              MICRO_CALL(micro_arows_##SFX, nv, steps, ar, g->A->koff + g->k0 + q,              \
                         bb + jr * kcx + q * NR_##SFX, ct, g->ldc, mr, nr, store && q == 0, bias); \
            } else if (brows)                                                                  \
              MICRO_CALL(micro_rows_##SFX, nv, steps, ap + ir * kcx + q * MR_##SFX,             \
                         brows + g->k0 + q, g->j0 + jr, ct, g->ldc, mr, nr, store && q == 0, bias); \
            else                                                                               \
              MICRO_CALL(micro_##SFX, nv, steps, ap + ir * kcx + q * MR_##SFX,                  \
                         bb + jr * kcx + q * NR_##SFX, ct, g->ldc, mr, nr, store && q == 0, bias); \
          }                                                                                    \
    }                                                                                          \
  }                                                                                            \
  /* C = A * B when `store` (K > 0), else C += A * B; then C += bias (a row) unless NULL. */ \
  static void gemm_##SFX(int64_t M, int64_t N, int64_t K, const mat* A, const mat* B,         \
                         pass_mode pa, pass_mode pb, T* c, int64_t ldc, T* ws, int store,      \
                         const T* bias) {                                                      \
    if (unit_gemm_##SFX(M, N, K, A, B, pa, pb, c, ldc, ws, store, bias)) return;                \
    int x = expand_of(pa) > expand_of(pb) ? expand_of(pa) : expand_of(pb);                     \
    if (x == 3) pa = pb = PASS_BF16X3;                                                         \
    int64_t kb = KC / x;                                                                       \
    int64_t panels_m = (M + MR_##SFX - 1) / MR_##SFX;                                          \
    gemm_job_##SFX g = {A, B, pa, pb, x, 0, 0, 0, 0, ws, c, ldc, M, panels_m, 1, 1, 0, 0, kb, store, K, bias}; \
    /* Work items for the pool: none below ~1 MFLOP per block (the hand-off costs more). */  \
    int nt = tpurt_pool_threads();                                                             \
    int small = M * N * (K < kb ? K : kb) < (1 << 19);                                         \
    if (!small && nt > 1) {                                                                    \
      /* Row chunks of about MC rows, nt of them at least: a chunk runs each B panel over all \
       * its rows, so short chunks re-read B from the outer caches once per chunk. Up to MC  \
       * rows (a convolution's channels, a weight gradient's) are one chunk. */              \
      int64_t per = (panels_m + nt * (MC / MR_##SFX) - 1) / (nt * (MC / MR_##SFX));            \
      g.chunks = panels_m <= MC / MR_##SFX ? 1 : nt * per;                                     \
      if (g.chunks > panels_m / 4) g.chunks = panels_m / 4 > 1 ? panels_m / 4 : 1;             \
      /* rows enough for 4 chunks per thread of 4+ panels: as many chunks as that, not       \
       * column groups, which pack the same rows of A once per group (256^3 and 512^3: 4-7%) */ \
      if (g.chunks < 4 * nt && panels_m / 4 >= 4 * nt) g.chunks = panels_m / 4;               \
      /* few chunks: cut the columns too, in groups of 2+ panels, a multiple of nt items;     \
       * each group packs its rows of A again. One chunk (up to MC rows): nt groups, each    \
       * packing its own columns of B too (no pass of its own): a 64-row A packed by 8 groups \
       * cost a quarter of a convolution's product. */                                        \
      int64_t panels_n = ((N < NC ? N : NC) + NR_##SFX - 1) / NR_##SFX;                        \
      if (g.chunks < 4 * nt) {                                                                 \
        int64_t items = g.chunks == 1 || B->rows ? nt : 4 * nt;                                \
        g.col_groups = (items + g.chunks - 1) / g.chunks;                                      \
        if (g.col_groups > panels_n / 2) g.col_groups = panels_n / 2 > 1 ? panels_n / 2 : 1;   \
        if (g.col_groups * g.chunks % nt && g.col_groups > nt) g.col_groups -= g.col_groups * g.chunks % nt; \
      }                                                                                        \
    }                                                                                          \
    /* Items that pack their own B (or read it in place) run every K block themselves: one   \
     * hand-off to the pool per column block instead of one per K block (a convolution's     \
     * GEMMs have several K blocks per sample). */                                            \
    g.own_b = g.chunks == 1 && !small && !B->rows;                                             \
    g.k_inside = g.own_b || B->rows;                                                           \
    for (g.j0 = 0; g.j0 < N; g.j0 += NC) {                                                     \
      g.nc = N - g.j0 < NC ? N - g.j0 : NC;                                                    \
      if (g.k_inside) {                                                                        \
        tpurt_parallel_for(g.chunks * g.col_groups, 1, gemm_rows_##SFX, &g);                   \
        continue;                                                                              \
      }                                                                                        \
      for (g.k0 = 0; g.k0 < K; g.k0 += kb) {                                                   \
        g.kc = K - g.k0 < kb ? K - g.k0 : kb;                                                  \
        int64_t panels = (g.nc + NR_##SFX - 1) / NR_##SFX, full = g.nc / NR_##SFX * NR_##SFX;   \
        if (full < g.nc) /* the padded columns of the last panel */                            \
          memset(g.bp + full * g.kc * x, 0, sizeof(T) * (size_t)(NR_##SFX * g.kc * x));         \
        if (by_cols(B))                                                                        \
          tpurt_parallel_for(panels, small ? panels : 1, gemm_pack_b_cols_##SFX, &g);          \
        else                                                                                   \
          tpurt_parallel_for(g.kc, small ? g.kc : 64, gemm_pack_b_rows_##SFX, &g);              \
        tpurt_parallel_for(g.chunks * g.col_groups, 1, gemm_rows_##SFX, &g);                   \
      }                                                                                        \
    }                                                                                          \
  }
GEMM(float, f32)
GEMM(double, f64)

/* Bytes of scratch gemm_* needs for up to N columns: the packed B block (in the widest type). */
static size_t gemm_scratch_bytes(int64_t N) { return (size_t)KC * ((N < NC ? (size_t)N : NC) + NR_MAX) * sizeof(double); }

/* Integer matmul (CPU supports it): int64 accumulation, simple loops over dense copies. */
static void gemm_i64(int64_t M, int64_t N, int64_t K, const mat* A, const mat* B, int64_t* c,
                     int64_t ldc, int64_t* brow) {
  for (int64_t k = 0; k < K; k++) {
    for (int64_t j = 0; j < N; j++) brow[j] = tpurt_load_i64(elem(B, k, j), B->dtype);
    for (int64_t i = 0; i < M; i++) {
      int64_t a = tpurt_load_i64(elem(A, i, k), A->dtype);
      /* wrap like CPU's integer arithmetic instead of overflowing */
      for (int64_t j = 0; j < N; j++) c[i * ldc + j] = (int64_t)((uint64_t)c[i * ldc + j] + (uint64_t)a * (uint64_t)brow[j]);
    }
  }
}

/* ---------------------------------------------------------------- op plumbing */
/* A batch of matmul problems: nb times C_b (+)= A_b * B_b, operand b at data + b*bs. */
typedef struct {
  int64_t nb, M, N, K;
  mat A, B;
  int64_t a_bs, b_bs;
  int64_t c_bs; /* 0: every batch accumulates into the same C (addbmm) */
} problem;

static mat mat_of(const tpurt_tensor* t, int d_row, int d_col) {
  mat m = {.data = t->data, .dtype = t->dtype, .rs = d_row >= 0 ? t->strides[d_row] : 0,
           .cs = d_col >= 0 ? t->strides[d_col] : 0};
  return m;
}

typedef struct { double alpha, beta; int64_t alpha_i, beta_i; } epi_ctx;

#define EPI_FN(NAME, T, A, B)                                                      \
  static void NAME##_1(int64_t n, void* o, const void* const* in, const void* ctx) { \
    const epi_ctx* e = ctx;                                                        \
    const T* acc = in[0];                                                          \
    T* r = o;                                                                      \
    T al = (T)e->A;                                                                \
    for (int64_t i = 0; i < n; i++) r[i] = al * acc[i];                            \
  }                                                                                \
  static void NAME##_2(int64_t n, void* o, const void* const* in, const void* ctx) { \
    const epi_ctx* e = ctx;                                                        \
    const T *acc = in[0], *s = in[1];                                              \
    T* r = o;                                                                      \
    T al = (T)e->A, be = (T)e->B;                                                  \
    for (int64_t i = 0; i < n; i++) r[i] = al * acc[i] + be * s[i];                \
  }
EPI_FN(epi_f32, float, alpha, beta)
EPI_FN(epi_f64, double, alpha, beta)
EPI_FN(epi_i64, int64_t, alpha_i, beta_i)

/* Batches [b0, b1) of a problem into the dense accumulator, with their own scratch. */
#define BATCH_PAR_MAX_MNK (1 << 22)
typedef struct {
  const problem* pr;
  void* acc;
  size_t es;
  tpurt_ctype ct;
  pass_mode pa, pb;
  int store; /* the accumulator is not zeroed: each product's first K block stores */
  int oom;
  const float* bias; /* addmm's bias row, added in the GEMM (see row_bias) */
} batch_job;

static void run_batches(void* arg, int64_t b0, int64_t b1) {
  batch_job* J = arg;
  const problem* pr = J->pr;
  void* ws = tpurt_scratch(J->ct == TPURT_CT_I64 ? sizeof(int64_t) * (size_t)(pr->N ? pr->N : 1)
                                                                   : gemm_scratch_bytes(pr->N));
  if (!ws) {
    __atomic_store_n(&J->oom, 1, __ATOMIC_RELAXED);
    return;
  }
  size_t a_es = tpurt_dtype_size((tpurt_dtype)pr->A.dtype), b_es = tpurt_dtype_size((tpurt_dtype)pr->B.dtype);
  for (int64_t b = b0; b < b1; b++) {
    mat A = pr->A, B = pr->B;
    A.data += b * pr->a_bs * (int64_t)a_es;
    B.data += b * pr->b_bs * (int64_t)b_es;
    char* cb = (char*)J->acc + b * pr->c_bs * pr->M * pr->N * (int64_t)J->es;
    int store = J->store && (pr->c_bs || b == 0); /* addbmm: later batches add to the first */
    if (J->ct == TPURT_CT_F32) gemm_f32(pr->M, pr->N, pr->K, &A, &B, J->pa, J->pb, (float*)cb, pr->N, ws, store, J->bias);
    else if (J->ct == TPURT_CT_F64) gemm_f64(pr->M, pr->N, pr->K, &A, &B, J->pa, J->pb, (double*)cb, pr->N, ws, store, NULL);
    else gemm_i64(pr->M, pr->N, pr->K, &A, &B, (int64_t*)cb, pr->N, ws);
  }
}

/* ---------------------------------------------------------------- accumulators */
/* The dtype a product of dt operands accumulates in: complex64 (from its float parts), else
 * its compute type. */
static int acc_dtype_of(int dt) {
  if (dt == TPURT_C64) return TPURT_C64;
  tpurt_ctype ct = tpurt_ctype_of(dt);
  return ct == TPURT_CT_F32 ? TPURT_F32 : ct == TPURT_CT_F64 ? TPURT_F64 : TPURT_I64;
}
/* A dense output of the accumulator's dtype is the accumulator itself (no temporary). */
static int acc_is_out(const tpurt_tensor* out, int acc_dt) { return out->dtype == acc_dt && tpurt_is_contiguous(out); }
static size_t acc_bytes(const tpurt_tensor* out, int acc_dt) {
  return (size_t)tpurt_numel(out) * tpurt_dtype_size((tpurt_dtype)acc_dt);
}
/* complex64's four real products, each shaped like out */
static size_t parts_bytes(const tpurt_tensor* out) { return 4 * sizeof(float) * (size_t)tpurt_numel(out); }


/* The temporaries run_matmul_conj takes for dt operands into out. */
static int64_t matmul_scratch(const tpurt_tensor* out, int dt) {
  int acc_dt = acc_dtype_of(dt);
  int64_t n = acc_is_out(out, acc_dt) ? 0 : tpurt_temp_bytes(acc_bytes(out, acc_dt));
  return dt == TPURT_C64 ? n + tpurt_temp_bytes(parts_bytes(out)) : n;
}

/* ---------------------------------------------------------------- complex64 */
/* A complex64 product is four real ones on the float parts (a complex matrix's real and
 * imaginary parts are float matrices with doubled strides), each through the f32 core and
 * so with the call's MXU precision: P0 = Ar Br, P1 = Ai Bi, P2 = Ar Bi, P3 = Ai Br, then
 * C = (P0 - P1) + (P2 + P3) i, or (P0 + P1) + (P2 - P3) i when A is conjugated (vdot). */
static mat cx_part(const mat* m, int part) {
  mat r = {.data = m->data + 4 * part, .dtype = TPURT_F32, .rs = 2 * m->rs, .cs = 2 * m->cs};
  return r;
}

typedef struct { float ar, ai, br, bi; } cx_epi_ctx; /* alpha, beta */

static void cx_epi_1(int64_t n, void* o, const void* const* in, const void* ctx) {
  const cx_epi_ctx* e = ctx;
  const tpurt_c64* acc = in[0];
  tpurt_c64* r = o;
  for (int64_t i = 0; i < n; i++)
    r[i] = (tpurt_c64){e->ar * acc[i].re - e->ai * acc[i].im, e->ar * acc[i].im + e->ai * acc[i].re};
}
static void cx_epi_2(int64_t n, void* o, const void* const* in, const void* ctx) {
  const cx_epi_ctx* e = ctx;
  const tpurt_c64 *acc = in[0], *s = in[1];
  tpurt_c64* r = o;
  for (int64_t i = 0; i < n; i++)
    r[i] = (tpurt_c64){e->ar * acc[i].re - e->ai * acc[i].im + (e->br * s[i].re - e->bi * s[i].im),
                       e->ar * acc[i].im + e->ai * acc[i].re + (e->br * s[i].im + e->bi * s[i].re)};
}

static void cx_scalar(const tpurt_value* v, float* re, float* im) {
  *re = (float)tpurt_value_f(v);
  *im = v->kind == TPURT_V_COMPLEX ? (float)v->c[1] : 0.0f;
}

static tpurt_status run_matmul_complex(const tpurt_op_call* c, const problem* pr, const tpurt_value* self,
                                       const tpurt_value* beta, const tpurt_value* alpha, int conj_a) {
  const tpurt_tensor* out = &c->outs[0];
  int64_t nacc = tpurt_numel(out), mn = pr->M * pr->N;
  int direct = acc_is_out(out, TPURT_C64);
  float* parts = tpurt_temp_zeroed(parts_bytes(out));
  tpurt_c64* acc = direct ? out->data : tpurt_temp(acc_bytes(out, TPURT_C64));
  void* ws = tpurt_scratch(gemm_scratch_bytes(pr->N));
  if (!parts || !acc) return TPURT_ERR_OOM;
  if (!ws) return tpurt_fail(TPURT_ERR_OOM, "matmul: host out of memory for the GEMM workspace");
  pass_mode pm = pass_of(TPURT_F32, c->precision);
  for (int64_t b = 0; b < pr->nb; b++) {
    mat A = pr->A, B = pr->B;
    A.data += b * pr->a_bs * 8;
    B.data += b * pr->b_bs * 8;
    for (int q = 0; q < 4; q++) {
      mat a = cx_part(&A, q == 1 || q == 3), bm = cx_part(&B, q == 1 || q == 2);
      gemm_f32(pr->M, pr->N, pr->K, &a, &bm, pm, pm, parts + q * nacc + b * pr->c_bs * mn, pr->N, ws, 0, NULL);
    }
  }
  float sg = conj_a ? 1.0f : -1.0f;
  for (int64_t i = 0; i < nacc; i++)
    acc[i] = (tpurt_c64){parts[i] + sg * parts[nacc + i], parts[2 * nacc + i] - sg * parts[3 * nacc + i]};
  cx_epi_ctx e = {1, 0, 0, 0};
  if (alpha) cx_scalar(alpha, &e.ar, &e.ai);
  if (beta) cx_scalar(beta, &e.br, &e.bi);
  int nin = self && self->kind == TPURT_V_TENSOR && (e.br != 0 || e.bi != 0) ? 2 : 1;
  if (direct && nin == 1 && e.ar == 1 && e.ai == 0) return TPURT_OK;
  tpurt_tensor in[2] = {*out};
  in[0].data = acc;
  in[0].dtype = TPURT_C64;
  for (int64_t d = out->ndim - 1, st = 1; d >= 0; d--) {
    in[0].strides[d] = st;
    st *= out->sizes[d];
  }
  if (nin == 2) in[1] = self->t;
  return tpurt_ew_run(out, nin, in, TPURT_CT_C64, nin == 2 ? cx_epi_2 : cx_epi_1, &e);
}

/* A float32 self that is one row broadcast over a 2-D out (a Linear's bias) as N dense
 * values, else NULL: with alpha = beta = 1 the GEMM adds it to each rounded C value in its
 * last store, which is exactly the epilogue's acc + self without the epilogue's pass. */
static const float* row_bias(const tpurt_tensor* s, const tpurt_tensor* out, const problem* pr) {
  if (s->dtype != TPURT_F32 || out->ndim != 2 || out->sizes[0] != pr->M || out->sizes[1] != pr->N || s->ndim > 2 ||
      s->ndim < 1 || s->sizes[s->ndim - 1] != pr->N || (pr->N > 1 && s->strides[s->ndim - 1] != 1))
    return NULL;
  if (s->ndim == 2 && s->sizes[0] != 1 && s->strides[0] != 0) return NULL;
  return s->data;
}

/* Run the problem into a dense accumulator shaped like out, then out = alpha*acc +
 * beta*self (self broadcast; beta == 0 ignores self entirely, NaNs included, as CPU). */
static tpurt_status run_matmul_conj(const tpurt_op_call* c, const problem* pr, const tpurt_value* self,
                                    const tpurt_value* beta, const tpurt_value* alpha, int conj_a) {
  const tpurt_tensor* out = &c->outs[0];
  int dt = pr->A.dtype;
  if (pr->A.dtype != pr->B.dtype)  /* CPU refuses mixed operands rather than promoting */
    return tpurt_fail(TPURT_ERR_RUNTIME, "expected m1 and m2 to have the same dtype, but got: %s != %s",
                      tpurt_dtype_name((tpurt_dtype)pr->A.dtype), tpurt_dtype_name((tpurt_dtype)pr->B.dtype));
  if (self && self->kind == TPURT_V_TENSOR && self->t.dtype != dt)
    return tpurt_fail(TPURT_ERR_RUNTIME, "self and mat2 must have the same dtype, but got %s and %s",
                      tpurt_dtype_name((tpurt_dtype)self->t.dtype), tpurt_dtype_name((tpurt_dtype)dt));
  if (dt == TPURT_C64) return run_matmul_complex(c, pr, self, beta, alpha, conj_a);
  if (dt == TPURT_BOOL)
    return tpurt_fail(TPURT_ERR_RUNTIME, "\"addmm_impl_cpu_\" not implemented for 'Bool'");
  tpurt_ctype ct = tpurt_ctype_of(dt);
  int acc_dt = acc_dtype_of(dt);
  size_t es = tpurt_dtype_size((tpurt_dtype)acc_dt);
  /* A direct accumulator: the epilogue runs in place, or not at all for alpha = 1 without self. */
  int direct = acc_is_out(out, acc_dt);
  /* Float products with K > 0 write every element on their first K block: no zeroing. */
  int store = ct != TPURT_CT_I64 && pr->K > 0 && pr->nb > 0;
  size_t bytes = acc_bytes(out, acc_dt);
  void* acc = direct ? out->data : store ? tpurt_temp(bytes) : tpurt_temp_zeroed(bytes);
  if (!acc) return TPURT_ERR_OOM;
  if (direct && !store) memset(acc, 0, bytes);
  epi_ctx e = {1, 0, 1, 0};
  if (alpha) e.alpha = tpurt_value_f(alpha), e.alpha_i = tpurt_value_i(alpha);
  if (beta) e.beta = tpurt_value_f(beta), e.beta_i = tpurt_value_i(beta);
  int nin = self && self->kind == TPURT_V_TENSOR && (ct == TPURT_CT_I64 ? e.beta_i != 0 : e.beta != 0) ? 2 : 1;
  const float* bias = ct == TPURT_CT_F32 && direct && store && pr->nb == 1 && nin == 2 && e.alpha == 1 && e.beta == 1
                          ? row_bias(&self->t, out, pr) : NULL;
  batch_job J = {pr, acc, es, ct, pass_of(pr->A.dtype, c->precision), pass_of(pr->B.dtype, c->precision), store, 0,
                 bias};
  /* Many small independent batches (attention's bmm): one batch per thread at a time beats
   * splitting each small GEMM over the pool (two hand-offs per batch). Every batch is still
   * one gemm call, so results are those of the sequential loop. */
  int nt = tpurt_pool_threads();
  if (pr->c_bs && pr->nb > 1 && pr->M * pr->N * pr->K < BATCH_PAR_MAX_MNK)
    tpurt_parallel_for(pr->nb, (pr->nb + 2 * nt - 1) / (2 * nt), run_batches, &J);
  else
    run_batches(&J, 0, pr->nb);
  if (J.oom) return tpurt_fail(TPURT_ERR_OOM, "matmul: host out of memory for the GEMM workspace");

  tpurt_tensor in[2];
  in[0] = *out;
  in[0].data = acc;
  in[0].dtype = acc_dt;
  for (int64_t d = out->ndim - 1, st = 1; d >= 0; d--) {
    in[0].strides[d] = st;
    st *= out->sizes[d];
  }
  if (bias) return TPURT_OK; /* alpha = beta = 1 and the bias is in: out is done */
  if (nin == 2) in[1] = self->t;
  tpurt_ew_fn fn = ct == TPURT_CT_F32 ? (nin == 2 ? epi_f32_2 : epi_f32_1)
                 : ct == TPURT_CT_F64 ? (nin == 2 ? epi_f64_2 : epi_f64_1)
                                      : (nin == 2 ? epi_i64_2 : epi_i64_1);
  if (direct && nin == 1 && (ct == TPURT_CT_I64 ? e.alpha_i == 1 : e.alpha == 1)) return TPURT_OK;
  return tpurt_ew_run(out, nin, in, ct, fn, &e);
}

static tpurt_status run_matmul(const tpurt_op_call* c, const problem* pr, const tpurt_value* self,
                               const tpurt_value* beta, const tpurt_value* alpha) {
  return run_matmul_conj(c, pr, self, beta, alpha, 0);
}

/* 2-D problem from self (M x K) and mat2 (K x N). */
static problem problem_2d(const tpurt_tensor* a, const tpurt_tensor* b) {
  problem p = {1, a->sizes[0], b->sizes[1], a->sizes[1], mat_of(a, 0, 1), mat_of(b, 0, 1), 0, 0, 1};
  return p;
}
/* Batched problem from (nb x M x K) and (nb x K x N); c_bs 0 sums the batches. */
static problem problem_3d(const tpurt_tensor* a, const tpurt_tensor* b, int64_t c_bs) {
  problem p = {a->sizes[0], a->sizes[1], b->sizes[2], a->sizes[2], mat_of(a, 1, 2), mat_of(b, 1, 2),
               a->strides[0], b->strides[0], c_bs};
  return p;
}
/* Matrix (M x K) times vector (K): the vector is a K x 1 matrix. */
static problem problem_mv(const tpurt_tensor* a, const tpurt_tensor* v) {
  problem p = {1, a->sizes[0], 1, a->sizes[1], mat_of(a, 0, 1), mat_of(v, 0, -1), 0, 0, 1};
  return p;
}

/* Plans: the accumulators of the first operand's dtype (a mismatched second one fails the
 * kernel before it takes any). */
#define MATMUL_PLAN(K, A)                                                    \
  tpurt_status tpurt_plan_##K(const tpurt_op_call* c, tpurt_plan* p) {      \
    p->scratch_bytes += matmul_scratch(&c->outs[0], TPURT_ARG(c, K, A)->t.dtype); \
    return TPURT_OK;                                                         \
  }
MATMUL_PLAN(mm, self)
MATMUL_PLAN(bmm, self)
MATMUL_PLAN(addmm, mat1)
MATMUL_PLAN(baddbmm, batch1)
MATMUL_PLAN(addbmm, batch1)
MATMUL_PLAN(mv, self)
MATMUL_PLAN(addmv, mat)
MATMUL_PLAN(dot, self)
MATMUL_PLAN(vdot, self)
#undef MATMUL_PLAN

tpurt_status tpurt_kernel_mm(const tpurt_op_call* c) {
  /* mm(self, mat2) */
  problem p = problem_2d(&TPURT_ARG(c, mm, self)->t, &TPURT_ARG(c, mm, mat2)->t);
  return run_matmul(c, &p, NULL, NULL, NULL);
}

tpurt_status tpurt_kernel_bmm(const tpurt_op_call* c) {
  /* bmm(self, mat2) */
  problem p = problem_3d(&TPURT_ARG(c, bmm, self)->t, &TPURT_ARG(c, bmm, mat2)->t, 1);
  return run_matmul(c, &p, NULL, NULL, NULL);
}

tpurt_status tpurt_kernel_addmm(const tpurt_op_call* c) {
  /* addmm(self, mat1, mat2, *, beta, alpha) */
  problem p = problem_2d(&TPURT_ARG(c, addmm, mat1)->t, &TPURT_ARG(c, addmm, mat2)->t);
  return run_matmul(c, &p, TPURT_ARG(c, addmm, self), TPURT_ARG(c, addmm, beta), TPURT_ARG(c, addmm, alpha));
}

tpurt_status tpurt_kernel_baddbmm(const tpurt_op_call* c) {
  /* baddbmm(self, batch1, batch2, *, beta, alpha) */
  problem p = problem_3d(&TPURT_ARG(c, baddbmm, batch1)->t, &TPURT_ARG(c, baddbmm, batch2)->t, 1);
  return run_matmul(c, &p, TPURT_ARG(c, baddbmm, self), TPURT_ARG(c, baddbmm, beta), TPURT_ARG(c, baddbmm, alpha));
}

tpurt_status tpurt_kernel_addbmm(const tpurt_op_call* c) {
  /* addbmm(self, batch1, batch2, *, beta, alpha): the batch sum is one longer K-sum */
  problem p = problem_3d(&TPURT_ARG(c, addbmm, batch1)->t, &TPURT_ARG(c, addbmm, batch2)->t, 0);
  return run_matmul(c, &p, TPURT_ARG(c, addbmm, self), TPURT_ARG(c, addbmm, beta), TPURT_ARG(c, addbmm, alpha));
}

tpurt_status tpurt_kernel_mv(const tpurt_op_call* c) {
  /* mv(self, vec) */
  problem p = problem_mv(&TPURT_ARG(c, mv, self)->t, &TPURT_ARG(c, mv, vec)->t);
  return run_matmul(c, &p, NULL, NULL, NULL);
}

tpurt_status tpurt_kernel_addmv(const tpurt_op_call* c) {
  /* addmv(self, mat, vec, *, beta, alpha) */
  problem p = problem_mv(&TPURT_ARG(c, addmv, mat)->t, &TPURT_ARG(c, addmv, vec)->t);
  return run_matmul(c, &p, TPURT_ARG(c, addmv, self), TPURT_ARG(c, addmv, beta), TPURT_ARG(c, addmv, alpha));
}

/* dot(self, tensor): a 1 x K times K x 1 problem; vdot conjugates self. Products are f32 at
 * every MXU precision: XLA rewrites a vector-vector dot into multiply + reduce (dot strength
 * reduction), which runs on the vector unit, and PyTorch's own inner/tensordot reaches dot
 * for contiguous vectors but mul + sum for strided ones, so the precision must not follow
 * the layout. */
_Static_assert(TPURT_ARG_vdot_self == TPURT_ARG_dot_self && TPURT_ARG_vdot_other == TPURT_ARG_dot_tensor, "dot_run serves dot and vdot");
static tpurt_status dot_run(const tpurt_op_call* c, int conj_a) {
  const tpurt_tensor *a = &TPURT_ARG(c, dot, self)->t, *b = &TPURT_ARG(c, dot, tensor)->t;
  problem p = {1, 1, 1, a->sizes[0], mat_of(a, -1, 0), mat_of(b, 0, -1), 0, 0, 1};
  tpurt_op_call vector_unit = *c;
  vector_unit.precision = TPURT_PRECISION_HIGHEST;
  return run_matmul_conj(&vector_unit, &p, NULL, NULL, NULL, conj_a);
}
tpurt_status tpurt_kernel_dot(const tpurt_op_call* c) { return dot_run(c, 0); }
tpurt_status tpurt_kernel_vdot(const tpurt_op_call* c) { return dot_run(c, 1); }

/* ---------------------------------------------------------------- shared core (gemm.h) */
const float* tpurt_gemm_line_f32(float* buf, const tpurt_gemm_mat* m, int64_t i, int64_t k, int64_t n, int along_col) {
  return line_of_f32(buf, m, i, k, n, along_col);
}

size_t tpurt_gemm_scratch_bytes(void) { return gemm_scratch_bytes(NC); }

int tpurt_gemm_rows_form(int dtype, int precision) {
  if (dtype == TPURT_F64) return TPURT_GEMM_ROWS_AS_IS;
  if (dtype != TPURT_F32) return TPURT_GEMM_ROWS_NO;
  pass_mode p = pass_of(dtype, precision);
  return p == PASS_F32 ? TPURT_GEMM_ROWS_AS_IS : p == PASS_BF16 ? TPURT_GEMM_ROWS_BF16 : TPURT_GEMM_ROWS_NO;
}

void tpurt_gemm(int64_t M, int64_t N, int64_t K, const tpurt_gemm_mat* A, const tpurt_gemm_mat* B,
                int precision, void* c, int64_t ldc, void* ws) {
  mat a = *A, b = *B;
  if (!tpurt_is_float(a.dtype)) { /* ws holds one row of B for up to NC columns at a time */
    for (int64_t j0 = 0; j0 < N; j0 += NC) {
      mat bj = b;
      bj.data = elem(&b, 0, j0);
      gemm_i64(M, N - j0 < NC ? N - j0 : NC, K, &a, &bj, (int64_t*)c + j0, ldc, ws);
    }
    return;
  }
  pass_mode pa = pass_of(a.dtype, precision), pb = pass_of(b.dtype, precision);
  if (a.dtype == TPURT_F64) gemm_f64(M, N, K, &a, &b, pa, pb, c, ldc, ws, 0, NULL);
  else gemm_f32(M, N, K, &a, &b, pa, pb, c, ldc, ws, 0, NULL);
}
