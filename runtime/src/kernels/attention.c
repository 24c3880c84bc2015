/* Fused scaled dot product attention (PyTorch's "overrideable" SDPA backend): forward and
 * backward, a block of query rows at a time, never materialising the [L, S] attention
 * matrix. Computes in float32, as CPU's flash attention and a TPU's do: operands are read as
 * floats (bf16/f16 exactly), dot products and softmax sums accumulate in float.
 * Supports an additive bias broadcast to [B, Hq, L, S], causal masking (top-left aligned,
 * as PyTorch's math path), any scale, and grouped-query attention (Hq a multiple of Hkv:
 * query head h reads key/value head h / (Hq / Hkv)). Dropout is left to the math path. */
#include <math.h>
#include <stdlib.h>

#include "../internal.h"
#include "vmath.h"

/* Query rows per block. As in flash attention, each key/value row loaded serves RB query
 * rows: the products run as register tiles of RB rows x TC columns (two vectors of VD
 * floats: 16 columns with AVX2, 12 of its 16 vector registers holding sums; 32 with
 * AVX-512). The tile's width never changes a result: each output element sums its terms in
 * index order in one accumulator. */
typedef float real;
enum { RB = 6 };
#ifdef __AVX512F__
enum { VD = 16 };
#else
enum { VD = 8 };
#endif
enum { TC = 2 * VD };
typedef real vd __attribute__((vector_size(VD * sizeof(real))));

typedef struct {
  int64_t B, Hq, Hk, L, S, E, Ev;
  int64_t Sp, Ep, Evp; /* S, E, Ev rounded up to whole tiles (TC columns) */
  real scale;
  int causal;
  const tpurt_tensor *q, *k, *v, *dout; /* read in place, any float dtype and strides */
  const tpurt_tensor* bias; /* NULL, or [B?, H?, L, S] with any strides (broadcast by stride 0) */
  float *out, *lse;         /* forward: dense [B, Hq, L, Ev], [B, Hq, L] */
  const float* lse_in;      /* backward: dense [B, Hq, L] */
  float *dq, *dk, *dv;      /* backward outputs, dense like q/k/v */
} attn_job;

/* Elements to allocate for n (at least one). */
static size_t cells(int64_t n) { return (size_t)(n > 0 ? n : 1); }
static int64_t pad_tile(int64_t n) { return (n + TC - 1) / TC * TC; }

/* Row i of head (b, h) of t [B, H, rows, d] as d floats at o (exact for f32/bf16/f16, the
 * dtypes the plan takes). Operands are converted per head / per block rather than as whole tensors up
 * front, so they stay in cache. */
static inline void load_row(const tpurt_tensor* t, int64_t b, int64_t h, int64_t i, real* o) {
  int64_t d = t->sizes[3], cs = t->strides[3], es = (int64_t)tpurt_dtype_size((tpurt_dtype)t->dtype);
  const char* row = (const char*)t->data + (b * t->strides[0] + h * t->strides[1] + i * t->strides[2]) * es;
  if (t->dtype == TPURT_F32 && cs == 1) { /* the common case */
    memcpy(o, row, (size_t)d * sizeof(float));
    return;
  }
  switch (t->dtype) {
    case TPURT_F32: for (int64_t e = 0; e < d; e++) o[e] = ((const float*)row)[e * cs]; break;
    case TPURT_BF16: for (int64_t e = 0; e < d; e++) o[e] = tpurt_bf16_to_f32(((const uint16_t*)row)[e * cs]); break;
    default: for (int64_t e = 0; e < d; e++) o[e] = tpurt_f16_to_f32(((const uint16_t*)row)[e * cs]); break; /* F16 */
  }
}

/* Rows i0 .. i0 + n - 1 of head (b, h) of t to dst, row stride ld (padding cells of dst are
 * never written: the scratch starts zeroed). */
static inline void load_rows(const tpurt_tensor* t, int64_t b, int64_t h, int64_t i0, int64_t n, real* dst,
                             int64_t ld) {
  for (int64_t i = 0; i < n; i++) load_row(t, b, h, i0 + i, dst + i * ld);
}

/* dst[e][j] = src[j][e] for n rows of d columns, in strips of 4 rows so that every store
 * fills neighbouring cells. */
static inline void transpose(const real* src, int64_t lds, int64_t n, int64_t d, real* dst, int64_t ldd) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4)
    for (int64_t e = 0; e < d; e++)
      for (int q = 0; q < 4; q++) dst[e * ldd + j + q] = src[(j + q) * lds + e];
  for (; j < n; j++)
    for (int64_t e = 0; e < d; e++) dst[e * ldd + j] = src[j * lds + e];
}

/* The tiles below are inlined into the row loops (vector code as wide as the build's
 * instruction set; vmath.h lets a*b+c contract to an FMA). Each output element
 * sums its terms in index order, in one accumulator, whatever tile it falls in, so results
 * do not depend on how rows are split over threads. */
/* LD/ST: unaligned vector load / store (macros: passing vectors by value changes the ABI). */
#define LD(v, p) memcpy(&(v), (p), sizeof(vd))
#define ST(p, v) memcpy((p), &(v), sizeof(vd))

/* s[r][j] = scale * (a_r . column j of bt), a_r of length n, bt n rows of stride ldb;
 * columns j < m (a multiple of TC). */
static inline void tile_dot(const real* const a[RB], const real* bt, int64_t ldb, int64_t n, int64_t m,
                            real scale, real* s, int64_t lds) {
  for (int64_t j = 0; j < m; j += TC) {
    vd acc[RB][2];
    for (int r = 0; r < RB; r++) acc[r][0] = acc[r][1] = (vd){0};
    for (int64_t e = 0; e < n; e++) {
      vd b0, b1;
      LD(b0, bt + e * ldb + j), LD(b1, bt + e * ldb + j + VD);
      for (int r = 0; r < RB; r++) {
        real x = a[r][e];
        acc[r][0] += x * b0;
        acc[r][1] += x * b1;
      }
    }
    for (int r = 0; r < RB; r++) {
      acc[r][0] *= scale, acc[r][1] *= scale;
      ST(s + r * lds + j, acc[r][0]), ST(s + r * lds + j + VD, acc[r][1]);
    }
  }
}

/* o[r][e] = sum over j < m of p[r][j] * x[j][e], for e < n (a multiple of TC). The sum over
 * keys runs in blocks of MIX_BLOCK, each summed on its own and then added to the total: a
 * float32 sum over thousands of keys in one accumulator lost more than CPU's blocked GEMM. */
enum { MIX_BLOCK = 64 };
static inline void tile_mix(const real* p, int64_t ldp, int64_t m, const real* x, int64_t ldx, int64_t n,
                            real* o, int64_t ldo) {
  for (int64_t e = 0; e < n; e += TC) {
    vd acc[RB][2];
    for (int r = 0; r < RB; r++) acc[r][0] = acc[r][1] = (vd){0};
    for (int64_t j0 = 0; j0 < m; j0 += MIX_BLOCK) {
      vd part[RB][2];
      for (int r = 0; r < RB; r++) part[r][0] = part[r][1] = (vd){0};
      for (int64_t j = j0; j < m && j < j0 + MIX_BLOCK; j++) {
        vd x0, x1;
        LD(x0, x + j * ldx + e), LD(x1, x + j * ldx + e + VD);
        for (int r = 0; r < RB; r++) {
          real w = p[r * ldp + j];
          part[r][0] += w * x0;
          part[r][1] += w * x1;
        }
      }
      for (int r = 0; r < RB; r++) acc[r][0] += part[r][0], acc[r][1] += part[r][1];
    }
    for (int r = 0; r < RB; r++) ST(o + r * ldo + e, acc[r][0]), ST(o + r * ldo + e + VD, acc[r][1]);
  }
}

/* c[j][e] += p[r][j] * x_r[e] for r = 0, 1, ... in turn (the order of one row at a time),
 * for j < m and e < n (a multiple of TC). */
static inline void tile_update(const real* p, int64_t ldp, int64_t m, const real* const x[RB], int64_t n,
                               real* c, int64_t ldc) {
  for (int64_t e = 0; e < n; e += TC) {
    vd xr[RB][2];
    for (int r = 0; r < RB; r++) LD(xr[r][0], x[r] + e), LD(xr[r][1], x[r] + e + VD);
    for (int64_t j = 0; j < m; j++) {
      vd c0, c1;
      LD(c0, c + j * ldc + e), LD(c1, c + j * ldc + e + VD);
      for (int r = 0; r < RB; r++) {
        real w = p[r * ldp + j];
        c0 += w * xr[r][0];
        c1 += w * xr[r][1];
      }
      ST(c + j * ldc + e, c0), ST(c + j * ldc + e + VD, c1);
    }
  }
}

/* Keys that row i can see: past them a causal row's scores are -inf, whose weights are
 * exactly 0 and add nothing. */
static inline int64_t live(const attn_job* J, int64_t i) { return J->causal && i + 1 < J->S ? i + 1 : J->S; }

/* Per-worker scratch, zeroed once (padding cells stay 0): the current key/value head
 * (k rows, k and v transposed, v rows), the block's q and dout rows, two RB x Sp score
 * tiles, an RB x max(Ep, Evp) result tile, and for the backward the kv head's dk and dv sums
 * and their current parts. */
typedef struct {
  real *k, *kt, *vt, *v, *q, *dout, *s, *t, *acc, *zero, *dk, *dv, *dkp, *dvp;
  int64_t head; /* b * Hk + hk loaded, -1 for none */
} attn_scratch;
enum { NPARTS = 14 };

/* Values of a worker's scratch, in whole 64-byte lines so that workers never share one; each
 * part's into sizes unless NULL. */
static int64_t scratch_layout(const attn_job* J, int backward, int64_t* sizes) {
  int64_t d = J->Ep > J->Evp ? J->Ep : J->Evp;
  int64_t parts[NPARTS] = {J->S * J->Ep, J->E * J->Sp, J->Ev * J->Sp, J->S * J->Evp, RB * J->Ep, RB * J->Evp,
                           RB * J->Sp,   RB * J->Sp,   RB * d,        d,
                           backward ? J->S * J->Ep : 0, backward ? J->S * J->Evp : 0,
                           backward ? J->S * J->Ep : 0, backward ? J->S * J->Evp : 0};
  int64_t total = 0;
  for (int i = 0; i < NPARTS; i++) {
    if (sizes) sizes[i] = parts[i];
    total += parts[i];
  }
  return pad_tile(total > 0 ? total : 1);
}

static void scratch_init(const attn_job* J, int backward, real* p, attn_scratch* w) {
  int64_t sizes[NPARTS];
  scratch_layout(J, backward, sizes);
  real** parts[NPARTS] = {&w->k, &w->kt, &w->vt, &w->v,    &w->q,  &w->dout,
                            &w->s, &w->t,  &w->acc, &w->zero, &w->dk, &w->dv, &w->dkp, &w->dvp};
  for (int i = 0; i < NPARTS; i++) *parts[i] = p, p += sizes[i];
  w->head = -1;
}

/* The pool's threads claim chunks of a pass's n tasks, about 4 per thread (each chunk converts
 * every key/value head it touches), on tpurt_parallel_sliced: a member's slice is its view (in
 * a whole 64-byte line) then its scratch. */
static int64_t team_grain(int64_t n) { return (n + 4 * tpurt_pool_threads() - 1) / (4 * tpurt_pool_threads()); }
enum { VIEW_BYTES = (sizeof(attn_scratch) + 63) & ~63 };
static size_t slice_bytes(const attn_job* J, int backward) {
  return VIEW_BYTES + sizeof(real) * (size_t)scratch_layout(J, backward, NULL);
}
/* Bytes of the temporary holding the slices. */
static size_t team_bytes(const attn_job* J, int backward, int64_t n) {
  return (size_t)tpurt_sliced_workers(n, team_grain(n)) * slice_bytes(J, backward);
}

typedef void (*attn_pass)(attn_job* J, attn_scratch* w, int64_t begin, int64_t end);
typedef struct {
  attn_job* J;
  attn_pass pass;
  int backward;
} attn_team;

/* Each member zeroes its own scratch, in parallel. */
static void team_init(void* ctx, void* slice) {
  attn_team* T = ctx;
  real* cells = (real*)((char*)slice + VIEW_BYTES);
  memset(cells, 0, slice_bytes(T->J, T->backward) - VIEW_BYTES);
  scratch_init(T->J, T->backward, cells, slice);
}

static void team_chunk(void* ctx, void* slice, int64_t begin, int64_t end) {
  attn_team* T = ctx;
  T->pass(T->J, slice, begin, end);
}

/* The pass over tasks [0, n) on the pool; results do not depend on which thread ran which task. */
static tpurt_status run_team(attn_job* J, int backward, int64_t n, attn_pass pass) {
  if (n <= 0) return TPURT_OK;
  void* ws = tpurt_temp(team_bytes(J, backward, n));
  if (!ws) return TPURT_ERR_OOM;
  attn_team T = {J, pass, backward};
  tpurt_parallel_sliced(n, team_grain(n), ws, slice_bytes(J, backward), team_init, team_chunk, &T);
  tpurt_temp_release(ws);
  return TPURT_OK;
}

/* Loads key/value head t = b * Hk + hk in the layouts a pass reads, unless already there. */
static void load_head(const attn_job* J, attn_scratch* w, int64_t t, int backward) {
  if (w->head == t) return;
  int64_t b = t / J->Hk, hk = t % J->Hk;
  load_rows(J->k, b, hk, 0, J->S, w->k, J->Ep);
  load_rows(J->v, b, hk, 0, J->S, w->v, J->Evp);
  transpose(w->k, J->Ep, J->S, J->E, w->kt, J->Sp);
  if (backward) transpose(w->v, J->Evp, J->S, J->Ev, w->vt, J->Sp);
  w->head = t;
}

/* One block: rows i0 .. i0 + nr - 1 (nr <= RB) of (b, h). Rows past nr read a zero row and
 * get zero weights, so a short block runs the same tiles. */
typedef struct {
  int64_t b, h, hk, i0, r0; /* r0: flat index of row i0 in [B, Hq, L] */
  int nr;
  int64_t nb, m; /* keys any row of the block sees, and that rounded up to a tile */
  const real *q[RB], *dout[RB];
} attn_block;

static attn_block block_at(const attn_job* J, attn_scratch* w, int64_t bh, int64_t i0, int backward) {
  attn_block k = {.b = bh / J->Hq, .h = bh % J->Hq, .i0 = i0, .r0 = bh * J->L + i0};
  k.hk = k.h / (J->Hq / J->Hk);
  k.nr = (int)(J->L - i0 < RB ? J->L - i0 : RB);
  k.nb = live(J, i0 + k.nr - 1);
  k.m = pad_tile(k.nb);
  load_head(J, w, k.b * J->Hk + k.hk, backward);
  load_rows(J->q, k.b, k.h, i0, k.nr, w->q, J->Ep);
  if (backward) load_rows(J->dout, k.b, k.h, i0, k.nr, w->dout, J->Evp);
  for (int r = 0; r < RB; r++) {
    k.q[r] = r < k.nr ? w->q + r * J->Ep : w->zero;
    k.dout[r] = r < k.nr ? w->dout + r * J->Evp : w->zero;
  }
  return k;
}

/* s[r][j] = scale * q_r . k_j + bias, -inf where masked, for the block's keys. */
static inline void block_scores(const attn_job* J, const attn_scratch* w, const attn_block* k, real* s) {
  tile_dot(k->q, w->kt, J->Sp, J->E, k->m, J->scale, s, J->Sp);
  for (int r = 0; r < k->nr; r++) {
    int64_t i = k->i0 + r, nj = live(J, i);
    real* sr = s + r * J->Sp;
    for (int64_t j = nj; j < k->nb; j++) sr[j] = -INFINITY;
    const tpurt_tensor* bt = J->bias;
    if (!bt) continue;
    int nd = bt->ndim;
    int64_t idx[4] = {k->b, k->h, i, 0}, off = 0;
    for (int d = 0; d < nd; d++) off += (bt->sizes[d] == 1 ? 0 : idx[4 - nd + d]) * bt->strides[d];
    int64_t es = (int64_t)tpurt_dtype_size((tpurt_dtype)bt->dtype);
    const char* brow = (const char*)bt->data + off * es;
    int64_t bstride = (bt->sizes[nd - 1] == 1 ? 0 : bt->strides[nd - 1]) * es;
    for (int64_t j = 0; j < nj; j++) {
      if (bt->dtype == TPURT_BOOL) sr[j] = *(const uint8_t*)(brow + j * bstride) ? sr[j] : -INFINITY;
      else sr[j] += (real)tpurt_load_f64(brow + j * bstride, bt->dtype);
    }
  }
}

/* Blocks [begin, end) of all (b, h, row block): out_i = softmax(s) v, lse_i = log sum exp s. */
static void fwd_blocks(attn_job* J, attn_scratch* w, int64_t begin, int64_t end) {
  int64_t nblk = (J->L + RB - 1) / RB;
  for (int64_t u = begin; u < end; u++) {
    attn_block k = block_at(J, w, u / nblk, u % nblk * RB, 0);
    block_scores(J, w, &k, w->s);
    /* The rows' max and sum chains interleave (each still in key order): a lone chain of
     * dependent additions would wait on every one. Keys past a row's own are -inf, whose
     * exp is exactly 0 and adds nothing. */
    real mx[RB];
    double sum[RB]; /* in double: one add per probability, a sixty-fourth of the products */
    for (int r = 0; r < RB; r++) mx[r] = -INFINITY, sum[r] = 0;
    for (int64_t j = 0; j < k.nb; j++)
      for (int r = 0; r < RB; r++) mx[r] = w->s[r * J->Sp + j] > mx[r] ? w->s[r * J->Sp + j] : mx[r];
    for (int r = 0; r < RB; r++) {
      real* s = w->s + r * J->Sp;
      if (r >= k.nr) memset(s, 0, (size_t)k.nb * sizeof(real));
      else for (int64_t j = 0; j < k.nb; j++) s[j] = vm_expf(s[j] - mx[r]); /* all -inf: NaN, as the math path's softmax */
    }
    for (int64_t j = 0; j < k.nb; j++)
      for (int r = 0; r < RB; r++) sum[r] += w->s[r * J->Sp + j];
    for (int r = 0; r < k.nr; r++) J->lse[k.r0 + r] = (float)(mx[r] + log(sum[r]));
    tile_mix(w->s, J->Sp, k.nb, w->v, J->Evp, J->Evp, w->acc, J->Evp);
    for (int r = 0; r < k.nr; r++) {
      float* o = J->out + (k.r0 + r) * J->Ev;
      for (int64_t e = 0; e < J->Ev; e++) o[e] = (float)(w->acc[r * J->Evp + e] / sum[r]);
    }
  }
}

/* The job's sizes from q [B, Hq, L, E], k [B, Hk, S, E], v [B, Hk, S, Ev]. */
static attn_job job_of(const tpurt_tensor* q, const tpurt_tensor* k, const tpurt_tensor* v, int causal) {
  attn_job J = {.B = q->sizes[0], .Hq = q->sizes[1], .Hk = k->sizes[1], .L = q->sizes[2], .S = k->sizes[2],
                .E = q->sizes[3], .Ev = v->sizes[3], .causal = causal, .q = q, .k = k, .v = v};
  J.Sp = pad_tile(J.S), J.Ep = pad_tile(J.E), J.Evp = pad_tile(J.Ev);
  return J;
}

/* Tasks of the passes: the forward's blocks of query rows, the backward's (b, kv head) groups. */
static int64_t fwd_tasks(const attn_job* J) { return J->B * J->Hq * ((J->L + RB - 1) / RB); }
static int64_t bwd_tasks(const attn_job* J) { return J->B * J->Hk; }

/* What a temporary of n bytes takes from planned scratch (tpurt_temp rounds to 64). */

/* Where output t (n elements) is written as dense f32: its own memory when it is dense f32
 * already (no copy afterwards), else scratch for tpurt_store_dense. NULL on OOM. */
static int in_place(const tpurt_tensor* t, int64_t n) {
  return t->ndim >= 0 && n > 0 && t->dtype == TPURT_F32 && tpurt_is_contiguous(t) && tpurt_numel(t) == n;
}
static size_t f32_bytes(int64_t n) { return cells(n) * sizeof(float); }
static size_t out_buf_bytes(const tpurt_tensor* t, int64_t n) { return in_place(t, n) ? 0 : f32_bytes(n); }
static float* out_buf(const tpurt_tensor* t, int64_t n) {
  return in_place(t, n) ? t->data : tpurt_temp(out_buf_bytes(t, n));
}
static tpurt_status out_done(const tpurt_tensor* t, float* buf, tpurt_status s) {
  if (buf == t->data) return s;
  if (!s && t->ndim >= 0 && t->data && tpurt_numel(t)) s = tpurt_store_dense(t, buf, TPURT_F32);
  tpurt_temp_release(buf);
  return s;
}

/* The products of attention as a TPU's flash kernel does them (scores QK^T, then PV; the
 * backward recomputes the scores and forms dV, dP, dQ, dK), for the cost model, and their
 * flops. A causal mask over a square score matrix skips half of every product. */
static void attention_gemms(const attn_job* J, int causal, int backward, tpurt_plan* p) {
  int64_t bh = J->B * J->Hq;
  int half = causal && J->L == J->S;
  const tpurt_gemm_shape fwd[] = {{bh, J->L, J->S, J->E, half}, {bh, J->L, J->Ev, J->S, half}};
  const tpurt_gemm_shape bwd[] = {{bh, J->L, J->S, J->E, half}, {bh, J->S, J->Ev, J->L, half}, {bh, J->L, J->S, J->Ev, half},
                            {bh, J->L, J->E, J->S, half}, {bh, J->S, J->E, J->L, half}};
  const tpurt_gemm_shape* g = backward ? bwd : fwd;
  p->ngemms = backward ? 5 : 2;
  p->flops = 0;
  for (int i = 0; i < p->ngemms; i++) {
    p->gemms[i] = g[i];
    p->flops += 2 * g[i].batch * g[i].m * g[i].n * g[i].k / (g[i].causal ? 2 : 1);
  }
}

/* What the fused kernel takes (its plan hook; the C++ layer's backend choice asks the plan,
 * so these limits live here only): no dropout, 4-D query/key/value, query heads a multiple
 * of key heads. */
tpurt_status tpurt_plan_sdpa_fused(const tpurt_op_call* c, tpurt_plan* p) {
  const tpurt_tensor *q = &TPURT_ARG(c, sdpa_fused, query)->t, *k = &TPURT_ARG(c, sdpa_fused, key)->t, *v = &TPURT_ARG(c, sdpa_fused, value)->t;
  if (TPURT_ARG(c, sdpa_fused, dropout_p)->f != 0.0)
    return tpurt_fail(TPURT_ERR_UNSUPPORTED, "tpu fused attention: dropout_p must be 0 (the math path handles dropout)");
  const tpurt_tensor* operands[] = {q, k, v};
  for (int i = 0; i < 3; i++) {
    int dt = operands[i]->dtype;
    if (dt != TPURT_F32 && dt != TPURT_BF16 && dt != TPURT_F16)
      return tpurt_fail(TPURT_ERR_UNSUPPORTED, "tpu fused attention computes in float32: %s operands take the math path",
                        tpurt_dtype_name((tpurt_dtype)dt));
  }
  if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4)
    return tpurt_fail(TPURT_ERR_RUNTIME, "tpu fused attention expects 4-D query/key/value, got %s, %s, %s",
                      tpurt_shape_str(q), tpurt_shape_str(k), tpurt_shape_str(v));
  if (k->sizes[1] == 0 || q->sizes[1] % k->sizes[1])
    return tpurt_fail(TPURT_ERR_RUNTIME, "tpu fused attention: query heads (%lld) must be a multiple of key heads (%lld)",
                      (long long)q->sizes[1], (long long)k->sizes[1]);
  /* One kv head serves each group of query heads, key and value alike: other layouts (key
   * and value with different head counts under enable_gqa, each repeated on its own) take the
   * math path, which PyTorch checks. */
  if (v->sizes[1] != k->sizes[1] || v->sizes[0] != k->sizes[0] || q->sizes[0] != k->sizes[0] ||
      v->sizes[2] != k->sizes[2] || q->sizes[3] != k->sizes[3])
    return tpurt_fail(TPURT_ERR_UNSUPPORTED, "tpu fused attention: query %s, key %s and value %s do not share batch, "
                      "heads and lengths (the math path takes them)", tpurt_shape_str(q), tpurt_shape_str(k), tpurt_shape_str(v));
  if (!p) return TPURT_OK;
  attn_job J = job_of(q, k, v, 0);
  attention_gemms(&J, TPURT_ARG(c, sdpa_fused, is_causal)->i != 0, 0, p);
  int64_t rows = J.B * J.Hq * J.L;
  /* the backend choice plans a call without outputs: count their buffers */
  tpurt_tensor none = {.ndim = -1};
  const tpurt_tensor *out = c->nouts > 0 ? &c->outs[0] : &none, *lse = c->nouts > 1 ? &c->outs[1] : &none;
  p->scratch_bytes += tpurt_temp_bytes(out_buf_bytes(out, rows * J.Ev)) + tpurt_temp_bytes(out_buf_bytes(lse, rows)) +
                      tpurt_temp_bytes(team_bytes(&J, 0, fwd_tasks(&J)));
  return TPURT_OK;
}

tpurt_status tpurt_kernel_sdpa_fused(const tpurt_op_call* c) {
  /* _scaled_dot_product_fused_attention_overrideable(q, k, v, attn_bias?, dropout_p,
   * is_causal, return_debug_mask, *, scale?) -> (out, logsumexp, cum_seq_q, cum_seq_k,
   * max_q, max_k, philox_seed, philox_offset, debug_attn_mask) */
  const tpurt_tensor *q = &TPURT_ARG(c, sdpa_fused, query)->t, *k = &TPURT_ARG(c, sdpa_fused, key)->t, *v = &TPURT_ARG(c, sdpa_fused, value)->t;
  tpurt_status s = tpurt_plan_sdpa_fused(c, NULL);
  if (s) return s;
  attn_job J = job_of(q, k, v, TPURT_ARG(c, sdpa_fused, is_causal)->i != 0);
  J.scale = TPURT_ARG(c, sdpa_fused, scale)->kind == TPURT_V_FLOAT ? TPURT_ARG(c, sdpa_fused, scale)->f : 1.0 / sqrt((double)J.E);
  J.bias = TPURT_ARG(c, sdpa_fused, attn_bias)->kind == TPURT_V_TENSOR ? &TPURT_ARG(c, sdpa_fused, attn_bias)->t : NULL;
  int64_t rows = J.B * J.Hq * J.L;
  float* out = out_buf(&c->outs[0], rows * J.Ev);
  float* lse = out_buf(&c->outs[1], rows);
  if (!out || !lse) {
    s = TPURT_ERR_OOM;
  } else {
    J.out = out, J.lse = lse;
    s = run_team(&J, 0, fwd_tasks(&J), fwd_blocks);
  }
  if (out) s = out_done(&c->outs[0], out, s);
  if (lse) s = out_done(&c->outs[1], lse, s);
  return s;
}

/* dk/dv's sums over query rows run in parts of PART_BLOCKS row blocks, each summed on its own
 * (dkp, dvp) and then added to the total (rows [0, n) of them: the keys the part touched):
 * in one float32 accumulator over thousands of rows they lost 3x CPU's accuracy. */
enum { PART_BLOCKS = 8 };
static void add_part(real* total, real* part, int64_t n) {
  for (int64_t i = 0; i < n; i++) total[i] += part[i];
  memset(part, 0, (size_t)n * sizeof(real));
}

/* Backward for the query heads of one (b, kv head) group: dq for those heads, dk/dv for
 * the kv head (summed over the group, so one task owns each). */
static void bwd_groups(attn_job* J, attn_scratch* w, int64_t begin, int64_t end) {
  real *dk = w->dk, *dv = w->dv;
  int64_t g = J->Hq / J->Hk;
  for (int64_t t = begin; t < end; t++) {
    int64_t b = t / J->Hk, hk = t % J->Hk, blocks = 0, touched = 0;
    memset(dk, 0, (size_t)(J->S * J->Ep) * sizeof(real));
    memset(dv, 0, (size_t)(J->S * J->Evp) * sizeof(real));
    for (int64_t h = hk * g; h < (hk + 1) * g; h++)
      for (int64_t i0 = 0; i0 < J->L; i0 += RB) {
        attn_block k = block_at(J, w, b * J->Hq + h, i0, 1);
        real *p = w->s, *ds = w->t; /* ds first holds dp = dout_i . v_j */
        block_scores(J, w, &k, p);
        tile_dot(k.dout, w->vt, J->Sp, J->Ev, k.m, 1.0, ds, J->Sp);
        /* Keys past a row's own have score -inf: weight and gradient exactly 0. Rows
         * past nr get zero weights. */
        real D[RB] = {0};
        for (int r = 0; r < RB; r++) {
          real* pr = p + r * J->Sp;
          if (r >= k.nr) {
            memset(pr, 0, (size_t)k.nb * sizeof(real));
            continue;
          }
          real lse = J->lse_in[k.r0 + r];
          for (int64_t j = 0; j < k.nb; j++) {
            real e = vm_expf(pr[j] - lse);
            pr[j] = e == e ? e : 0; /* NaN (a row with no key) as 0; as a select, so it vectorizes */
          }
        }
        /* D = dout_i . out_i, from the probabilities rather than the stored (rounded) out:
         * ds = p (dp - D) cancels, and bf16 rounding of out would dominate it. The rows'
         * sums interleave, each in key order. */
        for (int64_t j = 0; j < k.nb; j++)
          for (int r = 0; r < RB; r++) {
            real pj = p[r * J->Sp + j];
            D[r] += pj != 0 ? pj * ds[r * J->Sp + j] : 0;
          }
        for (int r = 0; r < RB; r++) {
          real *pr = p + r * J->Sp, *dsr = ds + r * J->Sp;
          for (int64_t j = 0; j < k.nb; j++) dsr[j] = pr[j] != 0 ? pr[j] * (dsr[j] - D[r]) * J->scale : 0;
        }
        tile_update(p, J->Sp, k.nb, k.dout, J->Evp, w->dvp, J->Evp);
        tile_update(ds, J->Sp, k.nb, k.q, J->Ep, w->dkp, J->Ep);
        touched = k.nb > touched ? k.nb : touched;
        if (++blocks % PART_BLOCKS == 0) {
          add_part(dk, w->dkp, touched * J->Ep), add_part(dv, w->dvp, touched * J->Evp);
          touched = 0;
        }
        tile_mix(ds, J->Sp, k.nb, w->k, J->Ep, J->Ep, w->acc, J->Ep);
        for (int r = 0; r < k.nr; r++)
          for (int64_t e = 0; e < J->E; e++) J->dq[(k.r0 + r) * J->E + e] = w->acc[r * J->Ep + e];
      }
    add_part(dk, w->dkp, touched * J->Ep), add_part(dv, w->dvp, touched * J->Evp);
    float* dkb = J->dk + t * J->S * J->E;
    float* dvb = J->dv + t * J->S * J->Ev;
    for (int64_t j = 0; j < J->S; j++) {
      for (int64_t e = 0; e < J->E; e++) dkb[j * J->E + e] = dk[j * J->Ep + e];
      for (int64_t e = 0; e < J->Ev; e++) dvb[j * J->Ev + e] = dv[j * J->Evp + e];
    }
  }
}

tpurt_status tpurt_kernel_sdpa_fused_backward(const tpurt_op_call* c) {
  /* _scaled_dot_product_fused_attention_overrideable_backward(grad_out, q, k, v, attn_bias,
   * grad_input_mask[4], out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p,
   * is_causal, philox_seed, philox_offset, *, scale?) -> (dq, dk, dv, d_attn_bias) */
  const tpurt_tensor *go = &TPURT_ARG(c, sdpa_fused_backward, grad_out)->t, *q = &TPURT_ARG(c, sdpa_fused_backward, query)->t, *k = &TPURT_ARG(c, sdpa_fused_backward, key)->t, *v = &TPURT_ARG(c, sdpa_fused_backward, value)->t;
  const tpurt_tensor* lse = &TPURT_ARG(c, sdpa_fused_backward, logsumexp)->t;
  const tpurt_value* mask = TPURT_ARG(c, sdpa_fused_backward, grad_input_mask);
  if (mask->n > 3 && mask->ints[3] && TPURT_ARG(c, sdpa_fused_backward, attn_bias)->kind == TPURT_V_TENSOR)
    return tpurt_fail(TPURT_ERR_UNSUPPORTED, "tpu fused attention: no gradient for attn_bias (use the math path)");
  attn_job J = job_of(q, k, v, TPURT_ARG(c, sdpa_fused_backward, is_causal)->i != 0);
  J.dout = go;
  J.scale = TPURT_ARG(c, sdpa_fused_backward, scale)->kind == TPURT_V_FLOAT ? TPURT_ARG(c, sdpa_fused_backward, scale)->f : 1.0 / sqrt((double)J.E);
  J.bias = TPURT_ARG(c, sdpa_fused_backward, attn_bias)->kind == TPURT_V_TENSOR ? &TPURT_ARG(c, sdpa_fused_backward, attn_bias)->t : NULL;
  float* flse = tpurt_temp(f32_bytes(tpurt_numel(lse)));
  float* dq = out_buf(&c->outs[0], tpurt_numel(q));
  float* dk = out_buf(&c->outs[1], tpurt_numel(k));
  float* dv = out_buf(&c->outs[2], tpurt_numel(v));
  tpurt_status s = TPURT_OK;
  if (flse) {
    tpurt_tensor d = tpurt_dense_like(lse, flse, TPURT_F32);
    if (tpurt_copy_tensor(&d, lse)) tpurt_temp_release(flse), flse = NULL;
  }
  if (!flse || !dq || !dk || !dv) {
    s = TPURT_ERR_OOM;
  } else {
    J.lse_in = flse, J.dq = dq, J.dk = dk, J.dv = dv;
    s = run_team(&J, 1, bwd_tasks(&J), bwd_groups);
  }
  float* grads[3] = {dq, dk, dv};
  for (int o = 0; o < 3; o++)
    if (grads[o]) s = out_done(&c->outs[o], grads[o], s);
  tpurt_temp_release(flse);
  return s;
}

/* The backward's temporaries: the logsumexp as f32, the gradients' buffers, the workers' scratch. */
tpurt_status tpurt_plan_sdpa_fused_backward(const tpurt_op_call* c, tpurt_plan* p) {
  const tpurt_tensor *q = &TPURT_ARG(c, sdpa_fused_backward, query)->t, *k = &TPURT_ARG(c, sdpa_fused_backward, key)->t,
                     *v = &TPURT_ARG(c, sdpa_fused_backward, value)->t;
  attn_job J = job_of(q, k, v, 0);
  attention_gemms(&J, TPURT_ARG(c, sdpa_fused_backward, is_causal)->i != 0, 1, p);
  p->scratch_bytes += tpurt_temp_bytes(f32_bytes(tpurt_numel(&TPURT_ARG(c, sdpa_fused_backward, logsumexp)->t))) +
                      tpurt_temp_bytes(out_buf_bytes(&c->outs[0], tpurt_numel(q))) +
                      tpurt_temp_bytes(out_buf_bytes(&c->outs[1], tpurt_numel(k))) +
                      tpurt_temp_bytes(out_buf_bytes(&c->outs[2], tpurt_numel(v))) +
                      tpurt_temp_bytes(team_bytes(&J, 1, bwd_tasks(&J)));
  return TPURT_OK;
}
