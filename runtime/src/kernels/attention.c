/* Fused scaled dot product attention (PyTorch's "overrideable" SDPA backend): forward and
 * backward, one softmax row at a time, never materialising the [L, S] attention matrix.
 * q/k/v are read as dense f64 copies; dot products and softmax sums accumulate in double.
 * Supports an additive bias broadcast to [B, Hq, L, S], causal masking (top-left aligned,
 * as PyTorch's math path), any scale, and grouped-query attention (Hq a multiple of Hkv:
 * query head h reads key/value head h / (Hq / Hkv)). Dropout is left to the math path. */
#include <math.h>
#include <stdlib.h>

#include "../internal.h"
#include "vmath.h"

typedef struct {
  int64_t B, Hq, Hk, L, S, E, Ev;
  double scale;
  int causal;
  const double *q, *k, *v; /* dense [B, H, rows, dim] */
  const tpurt_tensor* bias; /* NULL, or [B?, H?, L, S] with any strides (broadcast by stride 0) */
  float *out, *lse;         /* forward: dense [B, Hq, L, Ev], [B, Hq, L] */
  const double* dout;       /* backward input, dense like out */
  const float* lse_in;
  float *dq, *dk, *dv;      /* backward outputs, dense like q/k/v */
  tpurt_status status;
} attn_job;

/* Elements to allocate for n (at least one, so malloc never sees 0). */
static size_t cells(int64_t n) { return (size_t)(n > 0 ? n : 1); }

/* A dense copy of t as f32 or (the operands, converted once rather than in every dot
 * product) f64; NULL on OOM. */
static void* dense_as(const tpurt_tensor* t, int dtype) {
  int64_t n = tpurt_numel(t);
  void* p = malloc(cells(n) * tpurt_dtype_size((tpurt_dtype)dtype));
  if (!p) return NULL;
  tpurt_tensor d = *t;
  d.data = p, d.dtype = dtype;
  int64_t st = 1;
  for (int i = t->ndim - 1; i >= 0; i--) d.strides[i] = st, st *= t->sizes[i];
  if (tpurt_copy_tensor(&d, t)) {
    free(p);
    return NULL;
  }
  return p;
}

/* The row loops (TPURT_VEC_ATTRS) get an AVX2 clone picked at load time, 4 doubles a
 * vector, and exp is vmath's vectorizable vm_exp (<= 1.05 ulp in double). */
typedef double v4d __attribute__((vector_size(32)));

/* a . b of float values held as doubles, in 8 interleaved partial sums folded in a fixed
 * order (a serial sum cannot vectorize). Products of floats are exact in double, so only
 * the order of the additions differs from a serial loop, and it is the same for any
 * thread count. */
static inline double dot(const double* a, const double* b, int64_t n) {
  v4d s0 = {0, 0, 0, 0}, s1 = s0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    v4d a0, a1, b0, b1;
    memcpy(&a0, a + i, sizeof a0), memcpy(&a1, a + i + 4, sizeof a1);
    memcpy(&b0, b + i, sizeof b0), memcpy(&b1, b + i + 4, sizeof b1);
    s0 += a0 * b0;
    s1 += a1 * b1;
  }
  s0 += s1;
  double s = (s0[0] + s0[1]) + (s0[2] + s0[3]);
  for (; i < n; i++) s += (double)a[i] * b[i];
  return s;
}

/* Scores of row i of (b, h): s[j] = scale * q_i . k_j + bias, -inf where masked. */
static inline void scores(const attn_job* J, int64_t b, int64_t h, int64_t i, double* s) {
  int64_t hk = h / (J->Hq / J->Hk);
  const double* qi = J->q + ((b * J->Hq + h) * J->L + i) * J->E;
  const double* kb = J->k + (b * J->Hk + hk) * J->S * J->E;
  const tpurt_tensor* bt = J->bias;
  const char* brow = NULL;
  int64_t bstride = 0;
  if (bt) {
    int nd = bt->ndim;
    int64_t idx[4] = {b, h, i, 0}, off = 0;
    for (int d = 0; d < nd; d++) off += (bt->sizes[d] == 1 ? 0 : idx[4 - nd + d]) * bt->strides[d];
    brow = (const char*)bt->data + off * (int64_t)tpurt_dtype_size((tpurt_dtype)bt->dtype);
    bstride = (bt->sizes[nd - 1] == 1 ? 0 : bt->strides[nd - 1]) * (int64_t)tpurt_dtype_size((tpurt_dtype)bt->dtype);
  }
  for (int64_t j = 0; j < J->S; j++) {
    if (J->causal && j > i) {
      s[j] = -INFINITY;
      continue;
    }
    s[j] = J->scale * dot(qi, kb + j * J->E, J->E);
    if (brow) {
      if (bt->dtype == TPURT_BOOL) s[j] = *(const uint8_t*)(brow + j * bstride) ? s[j] : -INFINITY;
      else s[j] += tpurt_load_f64(brow + j * bstride, bt->dtype);
    }
  }
}

/* Keys that row i can see: past them a causal row's scores are -inf, whose weights are
 * exactly 0 and add nothing. */
static inline int64_t live(const attn_job* J, int64_t i) { return J->causal && i + 1 < J->S ? i + 1 : J->S; }

/* Rows [begin, end) of all (b, h, i): out_i = softmax(s) v, lse_i = log sum exp s. */
TPURT_VEC_ATTRS static void fwd_rows(void* ctx, int64_t begin, int64_t end) {
  attn_job* J = ctx;
  double* s = malloc(cells(J->S) * sizeof(double));
  double* acc = malloc(cells(J->Ev) * sizeof(double));
  if (!s || !acc) {
    J->status = TPURT_ERR_OOM;
    free(s), free(acc);
    return;
  }
  for (int64_t r = begin; r < end; r++) {
    int64_t i = r % J->L, bh = r / J->L, h = bh % J->Hq, b = bh / J->Hq;
    int64_t hk = h / (J->Hq / J->Hk);
    scores(J, b, h, i, s);
    int64_t nj = live(J, i);
    double m = -INFINITY, sum = 0;
    for (int64_t j = 0; j < nj; j++) m = s[j] > m ? s[j] : m;
    for (int64_t j = 0; j < nj; j++) s[j] = vm_exp(s[j] - m); /* all -inf: NaN, as the math path's softmax */
    for (int64_t e = 0; e < J->Ev; e++) acc[e] = 0;
    const double* vb = J->v + (b * J->Hk + hk) * J->S * J->Ev;
    for (int64_t j = 0; j < nj; j++) {
      double p = s[j];
      sum += p;
      if (p != 0)
        for (int64_t e = 0; e < J->Ev; e++) acc[e] += p * vb[j * J->Ev + e];
    }
    float* o = J->out + r * J->Ev;
    for (int64_t e = 0; e < J->Ev; e++) o[e] = (float)(acc[e] / sum);
    J->lse[r] = (float)(m + log(sum));
  }
  free(s), free(acc);
}

tpurt_status tpurt_kernel_sdpa_fused(const tpurt_op_call* c) {
  /* _scaled_dot_product_fused_attention_overrideable(q, k, v, attn_bias?, dropout_p,
   * is_causal, return_debug_mask, *, scale?) -> (out, logsumexp, cum_seq_q, cum_seq_k,
   * max_q, max_k, philox_seed, philox_offset, debug_attn_mask) */
  const tpurt_tensor *q = &c->args[0].t, *k = &c->args[1].t, *v = &c->args[2].t;
  if (c->args[4].f != 0.0)
    return tpurt_fail(TPURT_ERR_UNSUPPORTED, "tpu fused attention: dropout_p must be 0 (the math path handles dropout)");
  if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4)
    return tpurt_fail(TPURT_ERR_RUNTIME, "tpu fused attention expects 4-D query/key/value, got %s, %s, %s",
                      tpurt_shape_str(q), tpurt_shape_str(k), tpurt_shape_str(v));
  attn_job J = {.B = q->sizes[0], .Hq = q->sizes[1], .Hk = k->sizes[1], .L = q->sizes[2], .S = k->sizes[2],
                .E = q->sizes[3], .Ev = v->sizes[3], .causal = c->args[5].i != 0};
  if (J.Hk == 0 || J.Hq % J.Hk)
    return tpurt_fail(TPURT_ERR_RUNTIME, "tpu fused attention: query heads (%lld) must be a multiple of key heads (%lld)",
                      (long long)J.Hq, (long long)J.Hk);
  J.scale = c->args[7].kind == TPURT_V_FLOAT ? c->args[7].f : 1.0 / sqrt((double)J.E);
  J.bias = c->args[3].kind == TPURT_V_TENSOR ? &c->args[3].t : NULL;
  int64_t rows = J.B * J.Hq * J.L;
  double *fq = dense_as(q, TPURT_F64), *fk = dense_as(k, TPURT_F64), *fv = dense_as(v, TPURT_F64);
  float* out = malloc(cells(rows * J.Ev) * sizeof(float));
  float* lse = malloc(cells(rows) * sizeof(float));
  tpurt_status s = TPURT_OK;
  if (!fq || !fk || !fv || !out || !lse) {
    s = tpurt_fail(TPURT_ERR_OOM, "tpu fused attention: host out of memory for scratch");
  } else {
    J.q = fq, J.k = fk, J.v = fv, J.out = out, J.lse = lse;
    tpurt_parallel_for(rows, 1 + 65536 / (J.S * (J.E + J.Ev) + 1), fwd_rows, &J);
    if (J.status) s = tpurt_fail(J.status, "tpu fused attention: host out of memory for scratch");
    if (!s) s = tpurt_store_dense(&c->outs[0], out, TPURT_F32);
    if (!s) s = tpurt_store_dense(&c->outs[1], lse, TPURT_F32);
  }
  free(fq), free(fk), free(fv), free(out), free(lse);
  return s;
}

/* Backward for the query heads of one (b, kv head) group: dq for those heads, dk/dv for
 * the kv head (summed over the group, so one task owns each). */
TPURT_VEC_ATTRS static void bwd_groups(void* ctx, int64_t begin, int64_t end) {
  attn_job* J = ctx;
  double* s = malloc(cells(J->S) * sizeof(double));
  double* dk = malloc(cells(J->S * J->E) * sizeof(double));
  double* dv = malloc(cells(J->S * J->Ev) * sizeof(double));
  double* dq = malloc(cells(J->E) * sizeof(double));
  double* dp = malloc(cells(J->S) * sizeof(double));
  if (!s || !dk || !dv || !dq || !dp) {
    J->status = TPURT_ERR_OOM;
    free(s), free(dk), free(dv), free(dq), free(dp);
    return;
  }
  int64_t g = J->Hq / J->Hk;
  for (int64_t t = begin; t < end; t++) {
    int64_t b = t / J->Hk, hk = t % J->Hk;
    const double* kb = J->k + (b * J->Hk + hk) * J->S * J->E;
    const double* vb = J->v + (b * J->Hk + hk) * J->S * J->Ev;
    for (int64_t x = 0; x < J->S * J->E; x++) dk[x] = 0;
    for (int64_t x = 0; x < J->S * J->Ev; x++) dv[x] = 0;
    for (int64_t h = hk * g; h < (hk + 1) * g; h++)
      for (int64_t i = 0; i < J->L; i++) {
        int64_t r = (b * J->Hq + h) * J->L + i;
        const double *doi = J->dout + r * J->Ev, *qi = J->q + r * J->E;
        scores(J, b, h, i, s);
        /* D = dout_i . out_i, from the probabilities rather than the stored (rounded) out:
         * ds = p (dp - D) cancels, and bf16 rounding of out would dominate it. */
        double lse = J->lse_in[r], D = 0;
        int64_t nj = live(J, i);
        for (int64_t j = 0; j < nj; j++) s[j] = vm_exp(s[j] - lse);
        for (int64_t j = 0; j < nj; j++) {
          double p = s[j];
          s[j] = p == 0 || isnan(p) ? 0 : p;
          dp[j] = s[j] ? dot(doi, vb + j * J->Ev, J->Ev) : 0;
          D += s[j] * dp[j];
        }
        for (int64_t e = 0; e < J->E; e++) dq[e] = 0;
        for (int64_t j = 0; j < nj; j++) {
          double p = s[j];
          if (p == 0) continue;
          double ds = p * (dp[j] - D) * J->scale;
          for (int64_t e = 0; e < J->Ev; e++) dv[j * J->Ev + e] += p * doi[e];
          for (int64_t e = 0; e < J->E; e++) {
            dq[e] += ds * kb[j * J->E + e];
            dk[j * J->E + e] += ds * qi[e];
          }
        }
        for (int64_t e = 0; e < J->E; e++) J->dq[r * J->E + e] = (float)dq[e];
      }
    float* dkb = J->dk + (b * J->Hk + hk) * J->S * J->E;
    float* dvb = J->dv + (b * J->Hk + hk) * J->S * J->Ev;
    for (int64_t x = 0; x < J->S * J->E; x++) dkb[x] = (float)dk[x];
    for (int64_t x = 0; x < J->S * J->Ev; x++) dvb[x] = (float)dv[x];
  }
  free(s), free(dk), free(dv), free(dq), free(dp);
}

tpurt_status tpurt_kernel_sdpa_fused_backward(const tpurt_op_call* c) {
  /* _scaled_dot_product_fused_attention_overrideable_backward(grad_out, q, k, v, attn_bias,
   * grad_input_mask[4], out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p,
   * is_causal, philox_seed, philox_offset, *, scale?) -> (dq, dk, dv, d_attn_bias) */
  const tpurt_tensor *go = &c->args[0].t, *q = &c->args[1].t, *k = &c->args[2].t, *v = &c->args[3].t;
  const tpurt_value* mask = &c->args[5];
  if (mask->n > 3 && mask->ints[3] && c->args[4].kind == TPURT_V_TENSOR)
    return tpurt_fail(TPURT_ERR_UNSUPPORTED, "tpu fused attention: no gradient for attn_bias (use the math path)");
  attn_job J = {.B = q->sizes[0], .Hq = q->sizes[1], .Hk = k->sizes[1], .L = q->sizes[2], .S = k->sizes[2],
                .E = q->sizes[3], .Ev = v->sizes[3], .causal = c->args[13].i != 0};
  J.scale = c->args[16].kind == TPURT_V_FLOAT ? c->args[16].f : 1.0 / sqrt((double)J.E);
  J.bias = c->args[4].kind == TPURT_V_TENSOR ? &c->args[4].t : NULL;
  double *fq = dense_as(q, TPURT_F64), *fk = dense_as(k, TPURT_F64), *fv = dense_as(v, TPURT_F64),
         *fgo = dense_as(go, TPURT_F64);
  float* flse = dense_as(&c->args[7].t, TPURT_F32);
  int64_t nq = tpurt_numel(q), nk = tpurt_numel(k), nv = tpurt_numel(v);
  float* dq = malloc(cells(nq) * sizeof(float));
  float* dk = malloc(cells(nk) * sizeof(float));
  float* dv = malloc(cells(nv) * sizeof(float));
  tpurt_status s = TPURT_OK;
  if (!fq || !fk || !fv || !fgo || !flse || !dq || !dk || !dv) {
    s = tpurt_fail(TPURT_ERR_OOM, "tpu fused attention backward: host out of memory for scratch");
  } else {
    J.q = fq, J.k = fk, J.v = fv, J.dout = fgo, J.lse_in = flse, J.dq = dq, J.dk = dk, J.dv = dv;
    tpurt_parallel_for(J.B * J.Hk, 1, bwd_groups, &J);
    if (J.status) s = tpurt_fail(J.status, "tpu fused attention backward: host out of memory for scratch");
    float* grads[3] = {dq, dk, dv};
    for (int o = 0; o < 3 && !s; o++)
      if (c->outs[o].ndim >= 0 && c->outs[o].data && tpurt_numel(&c->outs[o])) s = tpurt_store_dense(&c->outs[o], grads[o], TPURT_F32);
  }
  free(fq), free(fk), free(fv), free(fgo), free(flse), free(dq), free(dk), free(dv);
  return s;
}
