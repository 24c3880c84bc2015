/* The MXU's bf16 pass on the host's own bf16 units, in the builds that have one: Intel AMX
 * (TDPBF16PS, the amx build) or AVX512-BF16 dot products (VDPBF16PS, the avx512bf16 build).
 * AMX multiplies a 16 x 32 tile of bf16 values by a 32 x 16 one into 16 x 16 f32 sums, 16 times
 * the multiply-adds of an AVX-512 FMA per cycle; VDPBF16PS adds two bf16 products into each of
 * 16 f32 lanes, twice an FMA's. So DEFAULT precision's f32 products and bf16 products run at
 * the speed their numerics allow, as on a TPU.
 *
 * Numerics: bf16 operands (DEFAULT precision rounds f32 ones to nearest even while packing, as
 * the FMA path does), f32 sums. Both treat bf16 subnormals as zero and flush subnormal sums to
 * zero, as TPUs do. AMX adds each 32-step group of products with its own internal rounding
 * (neither the FMA path's step-by-step order nor any other order reproduces it: ARCHITECTURE.md
 * "Instruction sets"). VDPBF16PS adds the pair's second product, rounds, then its first, and
 * rounds (Intel's definition; checked bit for bit on 3.2M sums on an AMD Zen 4): each pair is
 * packed (k + 1, k) so that it adds step k first, which is the FMA path's order, and a bf16
 * product is exact in f32, as inside an FMA, so the sums are the avx512 build's bits whenever
 * no value or sum is subnormal. Every C element is summed by one thread: its K steps in runs of
 * 256 from k = 0, each run's sum added to C in order, as the FMA path adds its runs; whatever
 * the shape around it, the blocking or the thread count. So a row of a product equals the same
 * row of a taller one, and a convolution (and its weight gradient, run by run) equals the
 * product of its columns, bit for bit, as in the other builds. */
#include "gemm.h"

#if defined(__AMX_BF16__) && defined(__AMX_TILE__)
#define UNIT_AMX 1
#define UNIT_DOT 0
#elif defined(__AVX512BF16__)
#define UNIT_AMX 0
#define UNIT_DOT 1
#else
#define UNIT_AMX 0
#define UNIT_DOT 0
#endif

#if UNIT_AMX || UNIT_DOT
#include <immintrin.h>
#include <pthread.h>

enum {
  TK = 32,       /* K steps per tile product */
  TN = 16,       /* columns (rows) of a C tile */
  KB = 256,      /* K steps per block: each block's sums are added to C, as the FMA path's KRUN */
  NB = 1024,     /* columns per packed block of B: KB x NB bf16 is 512 KiB, in L2 */
  TILE = 512,    /* bf16 values in one A or B tile (16 x 32) */
  STRIP = 32,    /* rows of C per work item: two tiles of rows */
};

/* isa.c's check of the host: CPUID, and for AMX Linux's permission for the tile state (asked there). */
static int granted;
static void request(void) { granted = tpurt_isa_host_runs(UNIT_AMX ? "amx" : "avx512bf16"); }

int tpurt_gemm_unit_ready(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, request);
  return granted;
}

/* VDPBF16PS adds a lane's high bf16 product first: its pairs hold (k + 1, k), AMX's (k, k + 1). */
enum { SWAP = UNIT_DOT ? 1 : 0 };

#if UNIT_AMX
/* Tile registers 0-3: a 32 x 32 block of C; 4-5: two row tiles of A; 6-7: two column tiles of
 * B. Loaded by every work item and released after it: other code on the same thread (oneDNN's
 * AMX kernels under PyTorch CPU's bf16 matmuls) configures the tiles its own way and releases
 * them, so a configuration kept per thread was gone at the next product (an invalid-opcode
 * fault at the first tile load). */
static void configure(void) {
  struct __attribute__((packed)) {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
  } cfg = {.palette = 1};
  for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  _tile_loadconfig(&cfg);
}
#endif

/* Up to 16 floats from src (n of them, zeros past) as bf16 in 32-bit lanes, rounded as
 * tpurt_f32_to_bf16 rounds (to nearest even, NaN kept quiet). */
static inline __m512i bf16_lanes(const float* src, int64_t n) {
  __mmask16 live = n >= 16 ? 0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
  __m512 v = _mm512_maskz_loadu_ps(live, src);
  __m512i u = _mm512_castps_si512(v), hi = _mm512_srli_epi32(u, 16);
  __m512i r = _mm512_srli_epi32(
      _mm512_add_epi32(u, _mm512_add_epi32(_mm512_and_si512(hi, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7fff))), 16);
  return _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
}
/* 32 values (n live) as 32 bf16 in order. */
static inline __m512i bf16_run(const float* src, int64_t n) {
  __m256i lo = _mm512_cvtepi32_epi16(bf16_lanes(src, n)), hi = _mm512_cvtepi32_epi16(bf16_lanes(src + 16, n - 16));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
/* 32 consecutive K steps as 16 pairs in 32-bit lanes (each pair's halves swapped for VDPBF16PS). */
static inline __m512i bf16_pairs(const float* src, int64_t n) {
  __m512i v = bf16_run(src, n);
  return SWAP ? _mm512_rol_epi32(v, 16) : v;
}

/* Steps k and k + 1 (bf16 in the low halves of 32-bit lanes) as the unit's pairs. */
static inline __m512i pair_lanes(__m512i first, __m512i second) {
  return SWAP ? _mm512_or_si512(_mm512_slli_epi32(first, 16), second)
              : _mm512_or_si512(first, _mm512_slli_epi32(second, 16));
}

/* HIGH precision's bf16_3x: n values as their three bf16 parts along K, (hi, hi, lo) for A and
 * (hi, lo, hi) for B, so that the sum over K is hi*hi + hi*lo + lo*hi (matmul.c's put_f32). */
static void expand3(const float* src, int64_t n, int b_side, float* dst) {
  for (int64_t q = 0; q < n; q++) {
    float hi = tpurt_round_bf16(src[q]), lo = tpurt_round_bf16(src[q] - hi);
    dst[3 * q] = hi, dst[3 * q + 1] = b_side ? lo : hi, dst[3 * q + 2] = b_side ? hi : lo;
  }
}

typedef struct {
  int64_t M, N, K;
  const tpurt_gemm_mat *A, *B;
  float* c;
  int64_t ldc;
  uint16_t* bp; /* the packed B block: column tile t, K tile q at bp + (t * kt + q) * TILE */
  int x;        /* packed steps per K step: 1, or 3 for bf16_3x */
  int64_t j0, nc, k0, kc, kcx, kt; /* K steps [k0, k0 + kc) of the block, kcx = kc * x packed */
  int store;          /* the first K block starts the sums at zero */
  const float* bias;  /* added to every row after the last K block */
} job;

/* Packed row e of the B block (K step k0 + e / x, its part e % x) over columns [c0, c1). */
static const float* packed_row(const job* g, int64_t e, int64_t c0, int64_t c1, float* buf) {
  const float* src = g->B->rows ? (const float*)g->B->rows[g->k0 + e / g->x] + g->j0 + c0 /* in place (f32) */
                                : tpurt_gemm_line_f32(buf, g->B, g->k0 + e / g->x, g->j0 + c0, c1 - c0, 0);
  if (g->x == 1) return src;
  for (int64_t j = 0; j < c1 - c0; j++) { /* B's parts: (hi, lo, hi) */
    float hi = tpurt_round_bf16(src[j]);
    buf[j] = e % 3 == 1 ? tpurt_round_bf16(src[j] - hi) : hi;
  }
  return buf;
}

/* r[i] lane j -> r[j] lane i, for 16 vectors of 16 32-bit lanes: pairs, then 64-bit halves,
 * then 128-bit quarters twice. */
static inline void transpose16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]), t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  for (int i = 0; i < 16; i += 4) {
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]), u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]), u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  /* u[4b + c], quarter l: column 4l + c of rows 4b .. 4b + 3 */
  for (int c = 0; c < 4; c++) {
    t[c] = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88), t[4 + c] = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xdd);
    t[8 + c] = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88), t[12 + c] = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xdd);
  }
  for (int c = 0; c < 8; c++)
    r[c] = _mm512_shuffle_i32x4(t[c], t[8 + c], 0x88), r[8 + c] = _mm512_shuffle_i32x4(t[c], t[8 + c], 0xdd);
}

/* Column tiles [t0, t1) of the B block: tile row p holds the pairs (k, k + 1) = (2p, 2p + 1) of
 * its 16 columns side by side (the unit's layout). Past K and past N: zeros. */
static void pack_b(void* arg, int64_t t0, int64_t t1) {
  const job* g = arg;
  _Alignas(64) float buf[NB], buf2[NB];
  int64_t c0 = t0 * TN, c1 = t1 * TN < g->nc ? t1 * TN : g->nc;
  int by_cols = tpurt_gemm_by_cols(g->B);
  /* Zeros where the stores below write nothing (clearing the whole block first was a fifth of a
   * convolution's product): tiles past the live columns; the pair rows past K of the row-major
   * layout; the partial last tile of the column-major one, whose columns are stored one by one. */
  for (int64_t t = t0; t < t1; t++) {
    uint16_t* tile = g->bp + t * g->kt * TILE;
    int64_t from = t * TN >= g->nc || (by_cols && (t + 1) * TN > g->nc) ? 0 : by_cols ? g->kt * TK / 2 : (g->kcx + 1) / 2;
    memset(tile + from * 32, 0, sizeof(uint16_t) * (size_t)((g->kt * TK / 2 - from) * 32));
  }
  if (by_cols && g->x == 1 && !g->B->line && g->B->dtype == TPURT_F32) {
    /* column-major f32 B (W.t() of a Linear), 16 columns at a time: each column's 32 steps are
     * 16 pairs in a vector; transposed in registers into the tile's 16 pair rows (a scatter per
     * column and K tile was a third of a Linear's forward product) */
    const float* b = (const float*)g->B->data;
    for (int64_t j = c0; j < c1; j += TN) {
      int64_t live = c1 - j < TN ? c1 - j : TN;
      for (int64_t q = 0; q < g->kt; q++) {
        __m512i r[16];
        for (int c = 0; c < 16; c++)
          r[c] = c < live ? bf16_pairs(b + (g->k0 + q * TK) * g->B->rs + (g->j0 + j + c) * g->B->cs, g->kc - q * TK)
                          : _mm512_setzero_si512();
        transpose16(r);
        uint16_t* t = g->bp + ((j / TN) * g->kt + q) * TILE;
        for (int p = 0; p < 16; p++) _mm512_storeu_si512(t + p * 32, r[p]);
      }
    }
  } else if (by_cols) { /* column-major B (W.t()): a column's 32 steps are a column of 16 pairs */
    const __m512i rows = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                            _mm512_set1_epi32(TN));
    for (int64_t j = c0; j < c1; j++) {
      const float* src = tpurt_gemm_line_f32(buf, g->B, g->k0, g->j0 + j, g->kc, 1);
      if (g->x == 3) expand3(src, g->kc, 1, buf2), src = buf2;
      uint32_t* t = (uint32_t*)(g->bp + (j / TN) * g->kt * TILE) + j % TN;
      for (int64_t q = 0; q < g->kt; q++)
        _mm512_i32scatter_epi32(t + q * TILE / 2, rows, bf16_pairs(src + q * TK, g->kcx - q * TK), 4);
    }
  } else /* row-major B: two (packed) rows' 16 columns interleaved into a tile row */
    for (int64_t k = 0; k < g->kcx; k += 2) {
      const float* r0 = packed_row(g, k, c0, c1, buf);
      const float* r1 = k + 1 < g->kcx ? packed_row(g, k + 1, c0, c1, buf2) : NULL;
      uint16_t* t = g->bp + (k / TK) * TILE + (k % TK / 2) * 32;
      for (int64_t j = c0; j < c1; j += TN) {
        __m512i first = bf16_lanes(r0 + (j - c0), c1 - j);
        __m512i second = r1 ? bf16_lanes(r1 + (j - c0), c1 - j) : _mm512_setzero_si512();
        __m512i pair = pair_lanes(first, second);
        _mm512_storeu_si512(t + (j / TN) * g->kt * TILE, pair);
      }
    }
}

/* Column-major f32 A (x.t() of a weight gradient: row i's step k at data[i + k * cs]), 16 rows
 * at a time: a tile's 16 pairs of steps are read as 32 dense runs of the rows, paired, and
 * transposed in registers into the rows' tile rows (a 16-bit store per element was half of a
 * weight gradient's product). DEFAULT precision only (x == 1). */
static void pack_a_cols_f32(const job* g, int64_t r0, int64_t rows, uint16_t* ap) {
  const float* a = (const float*)g->A->data;
  int64_t cs = g->A->cs;
  for (int h = 0; h * 16 < rows; h++) {
    int64_t live = rows - h * 16;
    for (int64_t q = 0; q < g->kt; q++) {
      __m512i r[16];
      for (int p = 0; p < 16; p++) {
        int64_t k = q * TK + 2 * p;
        const float* col = a + r0 + h * 16 + (g->k0 + k) * cs;
        __m512i first = k < g->kc ? bf16_lanes(col, live) : _mm512_setzero_si512();
        __m512i second = k + 1 < g->kc ? bf16_lanes(col + cs, live) : _mm512_setzero_si512();
        r[p] = pair_lanes(first, second);
      }
      transpose16(r);
      uint16_t* t = ap + (h * g->kt + q) * TILE;
      for (int i = 0; i < 16 && i < live; i++) _mm512_storeu_si512(t + i * TK, r[i]);
    }
  }
}

/* Rows [r0, r0 + STRIP) of A over the K block as two row tiles per K tile: ap + (h * kt + q) * TILE. */
static void pack_a(const job* g, int64_t r0, uint16_t* ap) {
  _Alignas(64) float buf[KB], parts[KB];
  int64_t rows = g->M - r0 < STRIP ? g->M - r0 : STRIP;
  if (rows < STRIP || g->kcx % TK) memset(ap, 0, sizeof(uint16_t) * (size_t)(2 * g->kt * TILE));
  if (tpurt_gemm_by_cols(g->A) && g->x == 1 && !g->A->line && g->A->dtype == TPURT_F32)
    pack_a_cols_f32(g, r0, rows, ap);
  else if (tpurt_gemm_by_cols(g->A)) /* x.t() of a weight gradient: a step's 32 rows are a column of two tiles */
    for (int64_t k = 0; k < g->kc; k++) {
      const float* col = tpurt_gemm_line_f32(buf, g->A, r0, g->k0 + k, rows, 1);
      for (int part = 0; part < g->x; part++) { /* A's parts: (hi, hi, lo) */
        if (g->x == 3)
          for (int64_t r = 0; r < rows; r++) {
            float hi = tpurt_round_bf16(col[r]);
            parts[r] = part == 2 ? tpurt_round_bf16(col[r] - hi) : hi;
          }
        _Alignas(64) uint16_t v[STRIP];
        _mm512_storeu_si512(v, bf16_run(g->x == 3 ? parts : col, rows));
        int64_t e = k * g->x + part;
        uint16_t* t = ap + (e / TK) * TILE + (e % TK ^ SWAP);
        for (int64_t r = 0; r < rows; r++) t[(r / 16) * g->kt * TILE + (r % 16) * TK] = v[r];
      }
    }
  else {
    /* A in place (f32; a convolution's weight gradient): row i's step k at rows[i][koff[k]].
     * The offsets run in steps of one along an output row: copied as runs, found once per block. */
    int64_t run_k[KB + 1], runs = 0;
    const int64_t* koff = g->A->rows ? g->A->koff + g->k0 : NULL;
    for (int64_t k = 0; koff && k < g->kc; k++)
      if (k == 0 || koff[k] != koff[k - 1] + 1) run_k[runs++] = k;
    run_k[runs] = g->kc;
    for (int64_t r = 0; r < rows; r++) {
      const float* src = buf;
      if (koff)
        for (int64_t q = 0; q < runs; q++)
          memcpy(buf + run_k[q], (const float*)g->A->rows[r0 + r] + koff[run_k[q]], sizeof(float) * (size_t)(run_k[q + 1] - run_k[q]));
      else
        src = tpurt_gemm_line_f32(buf, g->A, r0 + r, g->k0, g->kc, 0);
      if (g->x == 3) expand3(src, g->kc, 0, parts), src = parts;
      uint16_t* t = ap + (r / 16) * g->kt * TILE + (r % 16) * TK;
      for (int64_t q = 0; q < g->kt; q++) _mm512_storeu_si512(t + q * TILE, bf16_pairs(src + q * TK, g->kcx - q * TK));
    }
  }
}

/* The block's sums of rows [0, rows) x columns [0, cols) of a C tile at ct (sums[r * ld + q]):
 * C = sums (first block) or C + sums, as the FMA path adds each run of KRUN steps (a sum carried
 * across blocks would not be C + the block's product, which the weight gradient's per-run
 * order relies on); then + bias after the product's last block. */
static void add_sums(const job* g, float* ct, const float* sums, int64_t ld, int64_t rows, int64_t cols, int first,
                     int last, int64_t j) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t q = 0; q < cols; q++) ct[r * g->ldc + q] = first ? sums[r * ld + q] : ct[r * g->ldc + q] + sums[r * ld + q];
  if (last && g->bias)
    for (int64_t r = 0; r < rows; r++)
      for (int64_t q = 0; q < cols; q++) ct[r * g->ldc + q] += g->bias[g->j0 + j + q];
}

#if UNIT_AMX
/* Row strips [s0, s1) of C against the packed B block. */
static void strips(void* arg, int64_t s0, int64_t s1) {
  const job* g = arg;
  configure();
  _Alignas(64) uint16_t ap[2 * (KB / TK) * TILE];
  _Alignas(64) float sums[STRIP * STRIP];
  int first = g->store && g->k0 == 0, last = g->k0 + g->kc >= g->K;
  for (int64_t s = s0; s < s1; s++) {
    int64_t r0 = s * STRIP, rows = g->M - r0 < STRIP ? g->M - r0 : STRIP;
    pack_a(g, r0, ap);
    for (int64_t j = 0; j < g->nc; j += 2 * TN) {
      int64_t cols = g->nc - j < 2 * TN ? g->nc - j : 2 * TN;
      float* ct = g->c + r0 * g->ldc + g->j0 + j;
      _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
      const uint16_t* b0 = g->bp + (j / TN) * g->kt * TILE;
      const uint16_t* b1 = b0 + g->kt * TILE; /* past nc: the zero padding of the block */
      for (int64_t q = 0; q < g->kt; q++) {
        _tile_loadd(4, ap + q * TILE, 64); _tile_loadd(5, ap + (g->kt + q) * TILE, 64);
        _tile_loadd(6, b0 + q * TILE, 64); _tile_loadd(7, b1 + q * TILE, 64);
        _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);
      }
      int direct = first && rows == STRIP && cols == 2 * TN && !(last && g->bias);
      float* out = direct ? ct : sums;
      int64_t ld = direct ? g->ldc : STRIP;
      _tile_stored(0, out, ld * 4); _tile_stored(1, out + TN, ld * 4);
      _tile_stored(2, out + TN * ld, ld * 4); _tile_stored(3, out + TN * ld + TN, ld * 4);
      if (!direct) add_sums(g, ct, sums, STRIP, rows, cols, first, last, j);
    }
  }
  _tile_release();
}
#else
enum { DR = 8, DV = 3 }; /* a dot tile: 8 rows x 3 vectors of 16 columns (24 sums in registers) */

/* acc + the lane pairs' products of a and b (VDPBF16PS). Inline assembly: clang 16 (the fuzz
 * build) crashes compiling the intrinsic on its __m512bh casts. */
static inline __m512 dot_pairs(__m512 acc, __m512i a, __m512i b) {
  __asm__("vdpbf16ps %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}

/* C rows [r, r + mr) of the strip at r0 x column tiles [t, t + NV) over the block's K tiles:
 * A's pair p of row i is the 32-bit word at ap + (i / 16 * kt + p / 16) * TILE + i % 16 * TK +
 * p % 16 * 2, B's pair p of column tile t the vector at bp + t * kt * TILE + p * 32. */
static inline __attribute__((always_inline)) void dot_tile(const job* g, const uint16_t* ap, int64_t r0, int64_t r,
                                                           int64_t t, int NV, int first, int last) {
  __m512 acc[DR][DV];
  for (int i = 0; i < DR; i++)
    for (int v = 0; v < NV; v++) acc[i][v] = _mm512_setzero_ps();
  const uint16_t* a = ap + (r / 16) * g->kt * TILE + (r % 16) * TK;
  const uint16_t* b = g->bp + t * g->kt * TILE;
  for (int64_t p = 0; p < g->kt * (TK / 2); p++) {
    const uint16_t* ak = a + (p / 16) * TILE + (p % 16) * 2;
    __m512i bv[DV];
    for (int v = 0; v < NV; v++) bv[v] = _mm512_loadu_si512(b + v * g->kt * TILE + p * 32);
    for (int i = 0; i < DR; i++) {
      int32_t w;
      memcpy(&w, ak + i * TK, sizeof w);
      __m512i av = _mm512_set1_epi32(w);
      for (int v = 0; v < NV; v++) acc[i][v] = dot_pairs(acc[i][v], av, bv[v]);
    }
  }
  int64_t j = t * TN, rows = g->M - r0 - r < DR ? g->M - r0 - r : DR, cols = g->nc - j < NV * TN ? g->nc - j : NV * TN;
  float* ct = g->c + (r0 + r) * g->ldc + g->j0 + j;
  if (rows == DR && cols == NV * TN && !(last && g->bias)) { /* a full tile: vector stores */
    for (int i = 0; i < DR; i++)
      for (int v = 0; v < NV; v++) {
        float* cv = ct + i * g->ldc + v * TN;
        _mm512_storeu_ps(cv, first ? acc[i][v] : _mm512_add_ps(_mm512_loadu_ps(cv), acc[i][v]));
      }
    return;
  }
  _Alignas(64) float sums[DR * DV * TN];
  for (int i = 0; i < DR; i++)
    for (int v = 0; v < NV; v++) _mm512_storeu_ps(sums + i * DV * TN + v * TN, acc[i][v]);
  add_sums(g, ct, sums, DV * TN, rows, cols, first, last, j);
}

/* Row strips [s0, s1) of C against the packed B block: each strip's A packed once, then tiles of
 * DR rows x DV column tiles, the columns outer so a tile's B vectors serve the strip's rows. */
static void strips(void* arg, int64_t s0, int64_t s1) {
  const job* g = arg;
  _Alignas(64) uint16_t ap[2 * (KB / TK) * TILE];
  int first = g->store && g->k0 == 0, last = g->k0 + g->kc >= g->K;
  int64_t tiles = (g->nc + TN - 1) / TN;
  for (int64_t s = s0; s < s1; s++) {
    int64_t r0 = s * STRIP, rows = g->M - r0 < STRIP ? g->M - r0 : STRIP;
    pack_a(g, r0, ap);
    for (int64_t t = 0; t < tiles; t += DV)
      for (int64_t r = 0; r < rows; r += DR) {
        int nv = tiles - t < DV ? (int)(tiles - t) : DV;
        if (nv == 3) dot_tile(g, ap, r0, r, t, 3, first, last);
        else if (nv == 2) dot_tile(g, ap, r0, r, t, 2, first, last);
        else dot_tile(g, ap, r0, r, t, 1, first, last);
      }
  }
}
#endif

int tpurt_gemm_unit(int64_t M, int64_t N, int64_t K, const tpurt_gemm_mat* A, const tpurt_gemm_mat* B, int x,
                   float* c, int64_t ldc, void* ws, int store, const float* bias) {
  if (M <= 0 || N <= 0 || K <= 0 || !tpurt_gemm_unit_ready()) return 0;
  job g = {M, N, K, A, B, c, ldc, ws, x, 0, 0, 0, 0, 0, 0, store, bias};
  int64_t run = KB / x; /* K steps per run: 256, or 85 (255 packed steps) for bf16_3x */
  int64_t nstrips = (M + STRIP - 1) / STRIP;
  /* Strips per item: one unless the block is too small to share (the hand-off costs more). */
  for (g.j0 = 0; g.j0 < N; g.j0 += NB) {
    g.nc = N - g.j0 < NB ? N - g.j0 : NB;
    int64_t tiles = (g.nc + 2 * TN - 1) / (2 * TN) * 2; /* a whole pair: the last may be zeros */
    for (g.k0 = 0; g.k0 < K; g.k0 += run) {
      g.kc = K - g.k0 < run ? K - g.k0 : run;
      g.kcx = g.kc * x;
      g.kt = (g.kcx + TK - 1) / TK;
      int small = M * g.nc * g.kc < (1 << 21);
      /* B in one even share per thread: a line producer (a convolution's columns) pays its
       * setup per call, and 32-column calls made im2col a third of a convolution's time */
      int64_t share = (tiles / tpurt_pool_threads() + 1) & ~(int64_t)1;
      tpurt_parallel_for(tiles, small ? tiles : share, pack_b, &g);
      tpurt_parallel_for(nstrips, small ? nstrips : 1, strips, &g);
    }
  }
  return 1;
}

#else /* builds without a bf16 unit */
int tpurt_gemm_unit_ready(void) { return 0; }
int tpurt_gemm_unit(int64_t M, int64_t N, int64_t K, const tpurt_gemm_mat* A, const tpurt_gemm_mat* B, int x,
                   float* c, int64_t ldc, void* ws, int store, const float* bias) {
  (void)M, (void)N, (void)K, (void)A, (void)B, (void)x, (void)c, (void)ldc, (void)ws, (void)store, (void)bias;
  return 0;
}
#endif
