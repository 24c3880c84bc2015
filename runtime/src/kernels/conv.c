/* Convolution family: convolution_overrideable and its backward; 1 to 3 spatial dims,
 * stride, padding, dilation, groups, transposed (output_padding), bias.
 *
 * Every convolution lowers to the matmul family's GEMM core (gemm.h: the MXU numerics of
 * mm, so call->precision applies exactly as for matmul), per sample and group. The lowering
 * is written for a "regular" convolution from a big tensor B (the spatial sizes of a
 * regular conv's input) to a small tensor S (its output), with the weight W [Cs, Cb/G, k..]
 * viewed per group as a [Cs/G, Cb/G * K] matrix:
 *   to_small  S[Cs/G, Ls]        = W_g * im2col(B)          (regular forward)
 *   to_big    B                 += col2im(W_g^T * S)        (regular input gradient)
 *   weight    W_g^T[Cb/G*K, Cs/G] += im2col(B) * S^T       (weight gradient)
 * A transposed convolution is the same thing with its input as S and its output as B.
 * im2col copies raw elements of B's dtype so that the GEMM's packing does the conversion
 * (and the bf16 rounding of DEFAULT precision) exactly as for mm; accumulation is f32
 * (f64 for float64 tensors) in dense scratch that is stored to the outputs at the end.
 * Integer tensors accumulate exactly in int64, wrapping: CPU's integer GEMM wraps in the
 * dtype, and sums and products modulo 2^64 store to the same narrower value. */
#include <stdlib.h>

#include "gemm.h"
#include "reduce.h"

/* ---------------------------------------------------------------- geometry */
typedef struct {
  int64_t N, G, Cb, Cs, Cbg, Csg;                  /* batch, groups, channels (per group) */
  int64_t bs[3], ss[3], k[3], st[3], pd[3], dl[3]; /* spatial, padded to 3 with leading 1s */
  int64_t Lb, Ls, Kk, CbK;                         /* spatial products, Cbg * Kk */
} geom;

/* Spatial value j (of nsp) of a list argument padded to 3 dims. */
static int64_t sp_arg(const tpurt_value* v, int i, int nsp, int64_t dflt) {
  int j = i - (3 - nsp);
  if (j < 0 || v->kind != TPURT_V_INTS || v->n == 0) return dflt;
  return v->ints[v->n == 1 ? 0 : j];
}
static int64_t sp_size(const tpurt_tensor* t, int i) {
  int j = i - (3 - (t->ndim - 2));
  return j < 0 ? 1 : t->sizes[2 + j];
}
static int64_t sp_stride(const tpurt_tensor* t, int i) {
  int j = i - (3 - (t->ndim - 2));
  return j < 0 ? 0 : t->strides[2 + j];
}

/* args: stride, padding, dilation at a, a+1, a+2; groups at ag. */
/* geom_init reads stride, padding, dilation as consecutive arguments in both schemas */
_Static_assert(TPURT_ARG_convolution_padding == TPURT_ARG_convolution_stride + 1 &&
                   TPURT_ARG_convolution_dilation == TPURT_ARG_convolution_stride + 2 &&
                   TPURT_ARG_convolution_backward_padding == TPURT_ARG_convolution_backward_stride + 1 &&
                   TPURT_ARG_convolution_backward_dilation == TPURT_ARG_convolution_backward_stride + 2,
               "convolution schemas: stride, padding, dilation in a row");
static void geom_init(geom* g, const tpurt_tensor* big, const tpurt_tensor* small, const tpurt_tensor* w,
                      const tpurt_op_call* c, int a, int ag) {
  int nsp = big->ndim - 2;
  g->N = big->sizes[0];
  g->G = tpurt_value_i(&c->args[ag]);
  g->Cs = w->sizes[0];
  g->Cbg = w->sizes[1];
  g->Cb = g->Cbg * g->G;
  g->Csg = g->Cs / g->G;
  g->Lb = g->Ls = g->Kk = 1;
  for (int i = 0; i < 3; i++) {
    g->bs[i] = sp_size(big, i);
    g->ss[i] = sp_size(small, i);
    g->k[i] = sp_size(w, i);
    g->st[i] = sp_arg(&c->args[a], i, nsp, 1);
    g->pd[i] = sp_arg(&c->args[a + 1], i, nsp, 0);
    g->dl[i] = sp_arg(&c->args[a + 2], i, nsp, 1);
    g->Lb *= g->bs[i];
    g->Ls *= g->ss[i];
    g->Kk *= g->k[i];
  }
  g->CbK = g->Cbg * g->Kk;
}

/* Small-side positions o in [lo, hi) whose big-side index o*s + off lies in [0, n). */
static void valid_range(int64_t off, int64_t s, int64_t n, int64_t len, int64_t* lo, int64_t* hi) {
  int64_t l = off >= 0 ? 0 : (-off + s - 1) / s;
  int64_t h = n - 1 - off < 0 ? 0 : (n - 1 - off) / s + 1;
  if (h > len) h = len;
  if (l > h) l = h;
  *lo = l;
  *hi = h;
}

/* Loop over every (row of the column matrix, small-side d/h position) with the big-side
 * row it reads, for channels [c0, c1); BODY sees ci, r (row), id, ih, inside (bool),
 * off/lo/hi for the w dim. A channel owns rows [ci*Kk, (ci+1)*Kk) of the column matrix and
 * plane ci of B, so channel ranges run in parallel with results independent of the split. */
#define FOR_COLS(g, c0, c1, BODY)                                                           \
  for (int64_t ci = (c0), r = (c0) * (g)->Kk; ci < (c1); ci++)                              \
    for (int64_t kd = 0; kd < (g)->k[0]; kd++)                                              \
      for (int64_t kh = 0; kh < (g)->k[1]; kh++)                                            \
        for (int64_t kw = 0; kw < (g)->k[2]; kw++, r++) {                                   \
          int64_t off = kw * (g)->dl[2] - (g)->pd[2], lo, hi;                               \
          valid_range(off, (g)->st[2], (g)->bs[2], (g)->ss[2], &lo, &hi);                   \
          for (int64_t od = 0; od < (g)->ss[0]; od++) {                                     \
            int64_t id = od * (g)->st[0] - (g)->pd[0] + kd * (g)->dl[0];                    \
            for (int64_t oh = 0; oh < (g)->ss[1]; oh++) {                                   \
              int64_t ih = oh * (g)->st[1] - (g)->pd[1] + kh * (g)->dl[1];                  \
              int64_t l0 = r * (g)->Ls + (od * (g)->ss[1] + oh) * (g)->ss[2];               \
              int inside = id >= 0 && id < (g)->bs[0] && ih >= 0 && ih < (g)->bs[1];        \
              BODY                                                                          \
            }                                                                               \
          }                                                                                 \
        }

/* Row r of the column matrix (channel ci, kernel offset kd, kh, kw), positions [start,
 * start + n), as raw elements of the image (zeros outside it): what im2col stores row by row,
 * and what the GEMM packs line by line from a float or double image without storing it
 * (gemm.h's line producer). */
typedef struct {
  const geom* g;
  const char* b; /* the image of one sample and group */
  int64_t sc, sb[3];
} col_lines;

#define COL_LINE(T)                                                                             \
  static void col_line_##T(const void* ctx, int64_t r, int64_t start, int64_t n, void* out) {  \
    const col_lines* cl = ctx;                                                                  \
    const geom* g = cl->g;                                                                      \
    int64_t ci = r / g->Kk, kk = r % g->Kk;                                                     \
    int64_t kw = kk % g->k[2], kh = kk / g->k[2] % g->k[1], kd = kk / (g->k[2] * g->k[1]);      \
    int64_t off = kw * g->dl[2] - g->pd[2], lo, hi;                                             \
    valid_range(off, g->st[2], g->bs[2], g->ss[2], &lo, &hi);                                   \
    /* output rows (od, oh) in turn from start's; dst indexed by ow within each */             \
    int64_t ow0 = start % g->ss[2], oh = start / g->ss[2] % g->ss[1], od = start / (g->ss[2] * g->ss[1]); \
    const T* plane = (const T*)cl->b + ci * cl->sc;                                             \
    T* d = (T*)out - ow0;                                                                       \
    for (int64_t left = n; left > 0; ow0 = 0) {                                                 \
      int64_t seg = g->ss[2] - ow0 < left ? g->ss[2] - ow0 : left;                              \
      int64_t id = od * g->st[0] - g->pd[0] + kd * g->dl[0], ih = oh * g->st[1] - g->pd[1] + kh * g->dl[1]; \
      int64_t a = ow0 > lo ? ow0 : lo, z = ow0 + seg < hi ? ow0 + seg : hi;                     \
      if (id < 0 || id >= g->bs[0] || ih < 0 || ih >= g->bs[1] || a >= z) {                     \
        memset(d + ow0, 0, sizeof(T) * (size_t)seg);                                            \
      } else {                                                                                  \
        const T* src = plane + id * cl->sb[0] + ih * cl->sb[1];                                 \
        memset(d + ow0, 0, sizeof(T) * (size_t)(a - ow0));                                      \
        if (g->st[2] == 1 && cl->sb[2] == 1)                                                    \
          memcpy(d + a, src + a + off, sizeof(T) * (size_t)(z - a));                            \
        else                                                                                    \
          for (int64_t ow = a; ow < z; ow++) d[ow] = src[(ow * g->st[2] + off) * cl->sb[2]];    \
        memset(d + z, 0, sizeof(T) * (size_t)(ow0 + seg - z));                                  \
      }                                                                                         \
      left -= seg, d += g->ss[2];                                                               \
      if (++oh == g->ss[1]) oh = 0, od++;                                                       \
    }                                                                                           \
  }
COL_LINE(uint8_t)
COL_LINE(uint16_t)
COL_LINE(uint32_t)
COL_LINE(uint64_t)

/* The line producer for elements of es bytes. */
static tpurt_gemm_line_fn col_line(size_t es) {
  return es == 1 ? col_line_uint8_t : es == 2 ? col_line_uint16_t : es == 4 ? col_line_uint32_t : col_line_uint64_t;
}

/* Channels per parallel chunk: about 64K column elements (the hand-off costs more). */
static int64_t channel_grain(const geom* g) {
  int64_t per = g->Kk * g->Ls;
  return per >= 65536 ? 1 : 65536 / (per ? per : 1);
}

typedef struct {
  char* col;
  size_t es;
  col_lines cl;
} im2col_job;

/* A channel owns rows [ci*Kk, (ci+1)*Kk) of the column matrix: channel ranges run in parallel. */
static void im2col_channels(void* arg, int64_t c0, int64_t c1) {
  const im2col_job* j = arg;
  int64_t Ls = j->cl.g->Ls, Kk = j->cl.g->Kk;
  tpurt_gemm_line_fn line = col_line(j->es);
  for (int64_t r = c0 * Kk; r < c1 * Kk; r++) line(&j->cl, r, 0, Ls, j->col + (size_t)(r * Ls) * j->es);
}

/* col[CbK x Ls] <- B as raw elements of es bytes (any dtype), channels split over the pool. */
static void im2col_raw(void* col, const void* b, size_t es, int64_t sc, const int64_t* sb, const geom* g) {
  im2col_job j = {col, es, {g, b, sc, {sb[0], sb[1], sb[2]}}};
  tpurt_parallel_for(g->Cbg, channel_grain(g), im2col_channels, &j);
}

/* Float and double convolutions pack their columns from the image; others im2col first. */
static int lines_from_image(int dtype) { return dtype == TPURT_F32 || dtype == TPURT_F64; }

typedef struct {
  const void* col;
  void* b;
  const geom* g;
} col2im_job;
/* dense B plane block [Cbg, bs..] += col2im(col[CbK x Ls]), each sum passed through ROUND
 * (the bf16/f16 variants round after every add, as CPU's col2im accumulates in the dtype). */
#define COL2IM(NAME, T, ROUND)                                                                  \
  static void col2im_##NAME##_channels(void* arg, int64_t c0, int64_t c1) {                    \
    const col2im_job* j = arg;                                                                  \
    const T* col = j->col;                                                                      \
    T* b = j->b;                                                                                \
    const geom* g = j->g;                                                                       \
    FOR_COLS(g, c0, c1, {                                                                       \
      if (!inside) continue;                                                                    \
      T* dst = b + ci * g->Lb + (id * g->bs[1] + ih) * g->bs[2];                                \
      const T* src = col + l0;                                                                  \
      for (int64_t ow = lo; ow < hi; ow++) dst[ow * g->st[2] + off] = ROUND(dst[ow * g->st[2] + off] + src[ow]); \
    })                                                                                          \
  }                                                                                             \
  static void col2im_##NAME(const T* col, T* b, const geom* g) {                               \
    col2im_job j = {col, b, g};                                                                 \
    tpurt_parallel_for(g->Cbg, channel_grain(g), col2im_##NAME##_channels, &j);                 \
  }
static inline float round_f16(float x) { return (float)(_Float16)x; }
COL2IM(float, float, )
COL2IM(double, double, )
COL2IM(u64, uint64_t, ) /* int64 accumulators, wrapping */
COL2IM(bf16, float, tpurt_round_bf16)
COL2IM(f16, float, round_f16)

/* ---------------------------------------------------------------- operands */
/* A tensor whose dims [d0, ndim) walk as one dim with stride fs: the tensor itself, or a
 * dense copy (owned) when its strides don't allow that. */
typedef struct {
  tpurt_tensor t;
  int64_t fs;
  void* owned;
} operand;

static int flat_stride(const tpurt_tensor* t, int d0, int64_t* fs) {
  int64_t expect = -1;
  *fs = 1;
  for (int d = t->ndim - 1; d >= d0; d--) {
    if (t->sizes[d] == 1) continue;
    if (expect >= 0 && t->strides[d] != expect) return 0;
    if (expect < 0) *fs = t->strides[d], expect = t->strides[d];
    expect *= t->sizes[d];
  }
  return 1;
}

/* Temporaries (kernel and plan hook take the same): the dense copy of an operand whose strides
 * do not flatten, the column matrix (widest element), the accumulator. */
static size_t operand_bytes(const tpurt_tensor* t, int d0) {
  int64_t fs;
  return flat_stride(t, d0, &fs) ? 0 : (size_t)tpurt_numel(t) * tpurt_dtype_size((tpurt_dtype)t->dtype);
}

static tpurt_status operand_init(operand* o, const tpurt_tensor* t, int d0) {
  o->t = *t;
  o->owned = NULL;
  if (flat_stride(t, d0, &o->fs)) return TPURT_OK;
  o->owned = tpurt_temp(operand_bytes(t, d0));
  if (!o->owned) return TPURT_ERR_OOM;
  o->t = tpurt_dense_like(t, o->owned, t->dtype);
  o->fs = 1;
  return tpurt_copy_tensor(&o->t, t);
}

static const char* at(const tpurt_tensor* t, int64_t elems) {
  return (const char*)t->data + elems * (int64_t)tpurt_dtype_size((tpurt_dtype)t->dtype);
}

/* ---------------------------------------------------------------- the three products */
typedef struct {
  geom g;
  int prec, acc_dt; /* accumulator dtype: f32, f64, or i64 for integer tensors */
  size_t aes;       /* its element size */
  void *ws, *col; /* GEMM scratch; column matrix (CbK x Ls, widest element), taken when needed */
} conv_run;

static size_t col_bytes(const geom* g) { return (size_t)(g->CbK * g->Ls) * 8; }
static size_t acc_dtype_size(int dtype) { return dtype == TPURT_F64 || !tpurt_is_float(dtype) ? 8 : 4; }
static int unit_strides(const geom* g) { return g->st[0] == 1 && g->st[1] == 1 && g->st[2] == 1; }

/* The GEMM's packing workspace stays the thread's own (tpurt_scratch): bounded, the emulator's
 * stand-in for on-chip vector memory, not HBM. */
static tpurt_status run_init(conv_run* r, int dtype, int prec) {
  r->prec = prec;
  r->acc_dt = dtype == TPURT_F64 ? TPURT_F64 : tpurt_is_float(dtype) ? TPURT_F32 : TPURT_I64;
  r->aes = tpurt_dtype_size((tpurt_dtype)r->acc_dt);
  r->col = NULL;
  r->ws = tpurt_scratch(tpurt_gemm_scratch_bytes());
  return r->ws ? TPURT_OK : tpurt_fail(TPURT_ERR_OOM, "convolution: host out of memory for the GEMM workspace");
}

/* The column matrix's storage, taken on first use (kernels whose columns are never stored
 * take none). */
static void* col_storage(conv_run* r) {
  if (!r->col) r->col = tpurt_temp(col_bytes(&r->g));
  return r->col;
}

/* ------------------------------------------------ stride 1: the columns read in place */
/* A stride-1 convolution reads its column matrix in place from a zero-padded copy of the
 * image (P = the padded sizes): output position p = (od*P1 + oh)*P2 + ow, in padded
 * coordinates, reads input p + (kd*dl0*P1 + kh*dl1)*P2 + kw*dl2, so row r of the columns
 * is the padded image from its own offset on, contiguous. The GEMM runs over the Np
 * positions from the first output to the last (each output row's P2 - Wo padded columns
 * are computed and dropped) with B as those rows in place: no im2col, no packing (the copy
 * rounds to bf16 where packing would). Its [Csg x Np] result's valid columns are then copied
 * into the accumulator. Same K order, same sums: the bits of the packed path. */
typedef struct {
  int64_t P[3], plane, Np;
} padded_geom;

static padded_geom padded_of(const geom* g) {
  padded_geom q;
  /* the image behind pd zeros, then zeros up to the last position read: output ss - 1 at
   * tap k - 1, past bs + 2 pd when the small side is longer (a stride-1 transposed
   * convolution's output_padding, seen through the flipped weight) */
  for (int i = 0; i < 3; i++) {
    int64_t read = g->ss[i] + g->dl[i] * (g->k[i] - 1);
    q.P[i] = g->bs[i] + 2 * g->pd[i] > read ? g->bs[i] + 2 * g->pd[i] : read;
  }
  q.plane = q.P[0] * q.P[1] * q.P[2];
  q.Np = ((g->ss[0] - 1) * q.P[1] + g->ss[1] - 1) * q.P[2] + g->ss[2];
  return q;
}

/* Stride 1, floats or doubles, no negative padding, and a precision whose operands the GEMM
 * may read unpacked (not HIGH's split). */
static int in_place_ok(const geom* g, int dtype, int prec) {
  if (!unit_strides(g) || !lines_from_image(dtype) || tpurt_gemm_rows_form(dtype, prec) == TPURT_GEMM_ROWS_NO) return 0;
  for (int i = 0; i < 3; i++)
    if (g->pd[i] < 0 || g->ss[i] <= 0) return 0;
  return 1;
}

/* Temporaries: the padded image, its row pointers; the in-place product's [Csg x Np]. */
static size_t padded_bytes(const geom* g, size_t es) {
  return (size_t)(g->Cbg * padded_of(g).plane + TPURT_GEMM_ROW_SLACK) * es;
}
static size_t rows_bytes(const geom* g) { return (size_t)g->CbK * sizeof(void*); }
static size_t result_bytes(const geom* g, size_t aes) { return (size_t)(g->Csg * padded_of(g).Np) * aes; }
static size_t padded_image_bytes(const geom* g, int dtype) {
  return tpurt_temp_bytes(padded_bytes(g, tpurt_dtype_size((tpurt_dtype)dtype))) + tpurt_temp_bytes(rows_bytes(g));
}

/* The padded copy of one sample and group of the image (bf16-rounded where packing would
 * round), and where each row of the column matrix starts in it. */
typedef struct {
  const geom* g;
  padded_geom q;
  int dtype, round;
  char* pad;
  const void** rows;
} padded_image;

static tpurt_status padded_init(padded_image* p, const geom* g, int dtype, int prec) {
  size_t es = tpurt_dtype_size((tpurt_dtype)dtype);
  *p = (padded_image){g, padded_of(g), dtype, tpurt_gemm_rows_form(dtype, prec) == TPURT_GEMM_ROWS_BF16,
                      tpurt_temp_zeroed(padded_bytes(g, es)), tpurt_temp(rows_bytes(g))};
  if (!p->pad || !p->rows) return TPURT_ERR_OOM;
  for (int64_t row = 0; row < g->CbK; row++) {
    int64_t ci = row / g->Kk, kk = row % g->Kk;
    int64_t kw = kk % g->k[2], kh = kk / g->k[2] % g->k[1], kd = kk / (g->k[2] * g->k[1]);
    p->rows[row] = p->pad + (size_t)(ci * p->q.plane + (kd * g->dl[0] * p->q.P[1] + kh * g->dl[1]) * p->q.P[2] + kw * g->dl[2]) * es;
  }
  return TPURT_OK;
}

typedef struct {
  const padded_image* p;
  const char* b; /* one sample and group of the image */
  int64_t sc, sb[3];
} pad_job;

/* Channels [c0, c1) of the image into the padded copy's interior (its border stays zero). */
static void pad_channels(void* arg, int64_t c0, int64_t c1) {
  const pad_job* j = arg;
  const geom* g = j->p->g;
  const padded_geom* q = &j->p->q;
  for (int64_t ci = c0; ci < c1; ci++)
    for (int64_t id = 0; id < g->bs[0]; id++)
      for (int64_t ih = 0; ih < g->bs[1]; ih++) {
        int64_t src = ci * j->sc + id * j->sb[0] + ih * j->sb[1];
        int64_t dst = ci * q->plane + ((id + g->pd[0]) * q->P[1] + ih + g->pd[1]) * q->P[2] + g->pd[2];
        if (j->p->dtype == TPURT_F64) {
          const double* x = (const double*)j->b + src;
          double* d = (double*)j->p->pad + dst;
          for (int64_t iw = 0; iw < g->bs[2]; iw++) d[iw] = x[iw * j->sb[2]];
        } else {
          const float* x = (const float*)j->b + src;
          float* d = (float*)j->p->pad + dst;
          for (int64_t iw = 0; iw < g->bs[2]; iw++) d[iw] = j->p->round ? tpurt_round_bf16(x[iw * j->sb[2]]) : x[iw * j->sb[2]];
        }
      }
}

/* Sample n, group grp of B into the padded copy. */
static void padded_fill(const padded_image* p, const tpurt_tensor* B, int64_t n, int64_t grp) {
  const geom* g = p->g;
  pad_job j = {p, at(B, n * B->strides[0] + grp * g->Cbg * B->strides[1]), B->strides[1],
               {sp_stride(B, 0), sp_stride(B, 1), sp_stride(B, 2)}};
  tpurt_parallel_for(g->Cbg, (65536 + p->q.plane - 1) / p->q.plane, pad_channels, &j);
}

/* acc [N, Cs, Ls] (dense, zeroed) = W * im2col(B), the columns read in place. */
static tpurt_status to_small_in_place(const conv_run* r, const tpurt_tensor* B, const operand* W, void* acc) {
  const geom* g = &r->g;
  padded_image p;
  tpurt_status s = padded_init(&p, g, B->dtype, r->prec);
  char* res = s ? NULL : tpurt_temp(result_bytes(g, r->aes));
  if (!res) return TPURT_ERR_OOM;
  int64_t Np = p.q.Np;
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t grp = 0; grp < g->G; grp++) {
      padded_fill(&p, B, n, grp);
      memset(res, 0, result_bytes(g, r->aes));
      tpurt_gemm_mat a = {.data = at(&W->t, grp * g->Csg * W->t.strides[0]), .dtype = W->t.dtype, .rs = W->t.strides[0], .cs = W->fs};
      tpurt_gemm_mat b = {.dtype = B->dtype, .rs = Np, .cs = 1, .rows = (const void* const*)p.rows};
      tpurt_gemm(g->Csg, Np, g->CbK, &a, &b, r->prec, res, Np, r->ws);
      char* c = (char*)acc + (size_t)((n * g->Cs + grp * g->Csg) * g->Ls) * r->aes;
      for (int64_t co = 0; co < g->Csg; co++)
        for (int64_t od = 0; od < g->ss[0]; od++)
          for (int64_t oh = 0; oh < g->ss[1]; oh++)
            memcpy(c + (size_t)((co * g->ss[0] + od) * g->ss[1] + oh) * g->ss[2] * r->aes,
                   res + (size_t)(co * Np + (od * p.q.P[1] + oh) * p.q.P[2]) * r->aes, (size_t)g->ss[2] * r->aes);
    }
  return TPURT_OK;
}

/* The column matrix of sample n, group grp of B as the GEMM operand `m` (rows CbK, columns
 * Ls; transposed when `t`): produced from the image line by line (cl), or im2col'ed into
 * the column storage. */
static tpurt_status columns(conv_run* r, const tpurt_tensor* B, int64_t n, int64_t grp, int t, col_lines* cl,
                            tpurt_gemm_mat* m) {
  const geom* g = &r->g;
  int64_t sb[3] = {sp_stride(B, 0), sp_stride(B, 1), sp_stride(B, 2)}, sc = B->strides[1];
  const char* b = at(B, n * B->strides[0] + grp * g->Cbg * sc);
  *m = (tpurt_gemm_mat){.dtype = B->dtype, .rs = t ? 1 : g->Ls, .cs = t ? g->Ls : 1};
  if (lines_from_image(B->dtype)) {
    *cl = (col_lines){g, b, sc, {sb[0], sb[1], sb[2]}};
    m->line = col_line(tpurt_dtype_size((tpurt_dtype)B->dtype));
    m->ctx = cl;
    return TPURT_OK;
  }
  if (!(m->data = col_storage(r))) return TPURT_ERR_OOM;
  im2col_raw(r->col, b, tpurt_dtype_size((tpurt_dtype)B->dtype), sc, sb, g);
  return TPURT_OK;
}

/* acc [N, Cs, Ls] (dense, zeroed) = W * im2col(B) */
static tpurt_status to_small(conv_run* r, const tpurt_tensor* B, const operand* W, void* acc) {
  const geom* g = &r->g;
  if (in_place_ok(g, B->dtype, r->prec)) return to_small_in_place(r, B, W, acc);
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t grp = 0; grp < g->G; grp++) {
      col_lines cl;
      tpurt_gemm_mat a = {.data = at(&W->t, grp * g->Csg * W->t.strides[0]), .dtype = W->t.dtype, .rs = W->t.strides[0], .cs = W->fs}, b;
      tpurt_status s = columns(r, B, n, grp, 0, &cl, &b);
      if (s) return s;
      char* c = (char*)acc + (size_t)((n * g->Cs + grp * g->Csg) * g->Ls) * r->aes;
      tpurt_gemm(g->Csg, g->Ls, g->CbK, &a, &b, r->prec, c, g->Ls, r->ws);
    }
  return TPURT_OK;
}

/* Temporaries to_small takes for geometry g: the in-place path's, or none (columns from the
 * image) with *col set when it needs the column storage. */
static size_t to_small_bytes(const geom* g, int dtype, int prec, int* col) {
  if (in_place_ok(g, dtype, prec)) return padded_image_bytes(g, dtype) + tpurt_temp_bytes(result_bytes(g, acc_dtype_size(dtype)));
  if (!lines_from_image(dtype)) *col = 1;
  return 0;
}

/* acc [N, Cb, Lb] (dense, zeroed) += col2im(W^T * S) */
static tpurt_status to_big(conv_run* r, const operand* S, const operand* W, void* acc) {
  const geom* g = &r->g;
  if (!col_storage(r)) return TPURT_ERR_OOM;
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t grp = 0; grp < g->G; grp++) {
      memset(r->col, 0, (size_t)(g->CbK * g->Ls) * r->aes);
      tpurt_gemm_mat a = {.data = at(&W->t, grp * g->Csg * W->t.strides[0]), .dtype = W->t.dtype, .rs = W->fs, .cs = W->t.strides[0]};
      tpurt_gemm_mat b = {.data = at(&S->t, n * S->t.strides[0] + grp * g->Csg * S->t.strides[1]), .dtype = S->t.dtype,
                          .rs = S->t.strides[1], .cs = S->fs};
      tpurt_gemm(g->CbK, g->Ls, g->Csg, &a, &b, r->prec, r->col, g->Ls, r->ws);
      char* dst = (char*)acc + (size_t)((n * g->Cb + grp * g->Cbg) * g->Lb) * r->aes;
      if (r->acc_dt == TPURT_F64) col2im_double(r->col, (double*)dst, g);
      else if (r->acc_dt == TPURT_I64) col2im_u64(r->col, (uint64_t*)dst, g);
      else col2im_float(r->col, (float*)dst, g);
    }
  return TPURT_OK;
}

/* to_big_direct's geometry: the regular convolution of S with the flipped weight. */
static geom flipped(const geom* g) {
  geom h = *g;
  h.Cb = g->Cs, h.Cbg = g->Csg, h.Cs = g->Cb, h.Csg = g->Cbg;
  h.Lb = g->Ls, h.Ls = g->Lb, h.CbK = h.Cbg * g->Kk;
  for (int i = 0; i < 3; i++) {
    h.bs[i] = g->ss[i], h.ss[i] = g->bs[i];
    h.pd[i] = g->dl[i] * (g->k[i] - 1) - g->pd[i];
  }
  return h;
}

/* to_big for unit strides, as a regular convolution of S with the transposed, flipped
 * weight W'[g*Cbg + ci, co, k'] = W[g*Csg + co, ci, k-1-k'] and padding dl*(k-1) - pd:
 * the GEMM's K is then Csg*K instead of Csg (a far better shape), and no col2im. */
static tpurt_status to_big_direct(const conv_run* r, const tpurt_tensor* S, const tpurt_tensor* w, void* acc) {
  const geom* g = &r->g;
  conv_run d = *r;
  d.g = flipped(g);
  d.col = NULL;
  const geom* h = &d.g;
  size_t es = tpurt_dtype_size((tpurt_dtype)w->dtype);
  operand W = {*w, 1, tpurt_temp((size_t)tpurt_numel(w) * es)};
  tpurt_status s = W.owned ? TPURT_OK : TPURT_ERR_OOM;
  W.t.sizes[0] = h->Cs;
  W.t.sizes[1] = h->Cbg;
  W.t = tpurt_dense_like(&W.t, W.owned, w->dtype);
  for (int64_t grp = 0; !s && grp < g->G; grp++) {
    tpurt_tensor dst = W.t, src = *w;
    dst.sizes[0] = src.sizes[0] = g->Cbg;
    dst.sizes[1] = src.sizes[1] = g->Csg;
    dst.data = (char*)at(&W.t, grp * g->Cbg * W.t.strides[0]);
    int64_t off = grp * g->Csg * w->strides[0];
    src.strides[0] = w->strides[1];
    src.strides[1] = w->strides[0];
    for (int i = 2; i < w->ndim; i++) {
      off += (w->sizes[i] - 1) * w->strides[i];
      src.strides[i] = -w->strides[i];
    }
    src.data = (char*)at(w, off);
    s = tpurt_copy_tensor(&dst, &src);
  }
  if (!s) s = to_small(&d, S, &W, acc);
  return s;
}

/* Temporaries to_big_direct takes: the flipped weight and its to_small's (with the column
 * storage of the flipped geometry when that needs one). */
static size_t to_big_direct_bytes(const geom* g, const tpurt_tensor* w, int dtype, int prec) {
  geom h = flipped(g);
  int col = 0;
  size_t b = tpurt_temp_bytes((size_t)tpurt_numel(w) * tpurt_dtype_size((tpurt_dtype)w->dtype)) +
             to_small_bytes(&h, dtype, prec, &col);
  return b + (col ? tpurt_temp_bytes(col_bytes(&h)) : 0);
}

/* The in-place weight gradient's K offsets: output position l's place in padded coordinates. */
static size_t koff_bytes(const geom* g) { return (size_t)g->Ls * sizeof(int64_t); }

/* acc [G][CbK][Csg] (dense, zeroed) += im2col(B) * S^T, summed over the batch. The column
 * matrix is A (this orientation measured faster than S * im2col(B)^T: 208 vs 179 GFLOP/s at
 * C=64, 264 vs 180 at C=128): read in place from the padded image at stride 1 (row r at its
 * offset, position l at koff[l]), else im2col'ed and packed. */
static tpurt_status weight_grad(conv_run* r, const tpurt_tensor* B, const operand* S, void* acc) {
  const geom* g = &r->g;
  if (in_place_ok(g, B->dtype, r->prec)) {
    padded_image p;
    tpurt_status s = padded_init(&p, g, B->dtype, r->prec);
    int64_t* koff = s ? NULL : tpurt_temp(koff_bytes(g));
    if (!koff) return TPURT_ERR_OOM;
    for (int64_t l = 0; l < g->Ls; l++)
      koff[l] = (l / (g->ss[1] * g->ss[2]) * p.q.P[1] + l / g->ss[2] % g->ss[1]) * p.q.P[2] + l % g->ss[2];
    for (int64_t n = 0; n < g->N; n++)
      for (int64_t grp = 0; grp < g->G; grp++) {
        padded_fill(&p, B, n, grp);
        tpurt_gemm_mat a = {.dtype = B->dtype, .rows = (const void* const*)p.rows, .koff = koff};
        tpurt_gemm_mat b = {.data = at(&S->t, n * S->t.strides[0] + grp * g->Csg * S->t.strides[1]), .dtype = S->t.dtype,
                            .rs = S->fs, .cs = S->t.strides[1]};
        char* c = (char*)acc + (size_t)(grp * g->CbK * g->Csg) * r->aes;
        tpurt_gemm(g->CbK, g->Csg, g->Ls, &a, &b, r->prec, c, g->Csg, r->ws);
      }
    return TPURT_OK;
  }
  if (!col_storage(r)) return TPURT_ERR_OOM;
  int64_t sb[3] = {sp_stride(B, 0), sp_stride(B, 1), sp_stride(B, 2)}, sc = B->strides[1];
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t grp = 0; grp < g->G; grp++) {
      im2col_raw(r->col, at(B, n * B->strides[0] + grp * g->Cbg * sc), tpurt_dtype_size((tpurt_dtype)B->dtype), sc, sb, g);
      tpurt_gemm_mat a = {.data = r->col, .dtype = B->dtype, .rs = g->Ls, .cs = 1};
      tpurt_gemm_mat b = {.data = at(&S->t, n * S->t.strides[0] + grp * g->Csg * S->t.strides[1]), .dtype = S->t.dtype,
                          .rs = S->fs, .cs = S->t.strides[1]};
      char* c = (char*)acc + (size_t)(grp * g->CbK * g->Csg) * r->aes;
      tpurt_gemm(g->CbK, g->Csg, g->Ls, &a, &b, r->prec, c, g->Csg, r->ws);
    }
  return TPURT_OK;
}

/* ---------------------------------------------------------------- stores */
static void bias_f32(int64_t n, void* o, const void* const* in, const void* ctx) {
  const float *a = in[0], *b = in[1];
  float* r = o;
  for (int64_t i = 0; i < n; i++) r[i] = a[i] + b[i];
}
static void bias_f64(int64_t n, void* o, const void* const* in, const void* ctx) {
  const double *a = in[0], *b = in[1];
  double* r = o;
  for (int64_t i = 0; i < n; i++) r[i] = a[i] + b[i];
}
static void bias_i64(int64_t n, void* o, const void* const* in, const void* ctx) {
  const int64_t *a = in[0], *b = in[1];
  int64_t* r = o;
  for (int64_t i = 0; i < n; i++) r[i] = (int64_t)((uint64_t)a[i] + (uint64_t)b[i]);
}

/* out <- acc (dense, out's shape) + bias broadcast over channels (bias may be NONE). */
static tpurt_status store_out(const conv_run* r, const tpurt_tensor* out, void* acc, const tpurt_value* bias) {
  tpurt_tensor in[2] = {tpurt_dense_like(out, acc, r->acc_dt)};
  if (bias->kind != TPURT_V_TENSOR) return tpurt_copy_tensor(out, &in[0]);
  in[1] = *out;
  in[1].data = bias->t.data;
  in[1].dtype = bias->t.dtype;
  for (int d = 0; d < out->ndim; d++) in[1].strides[d] = d == 1 ? bias->t.strides[0] : 0;
  tpurt_ctype ct = tpurt_ctype_of(r->acc_dt);
  return tpurt_ew_run(out, 2, in, ct, ct == TPURT_CT_F64 ? bias_f64 : ct == TPURT_CT_I64 ? bias_i64 : bias_f32, NULL);
}

/* dW (W's shape) <- acc [G][CbK][Csg], one strided copy per group. */
static tpurt_status store_weight(const conv_run* r, const tpurt_tensor* dw, void* acc) {
  const geom* g = &r->g;
  for (int64_t grp = 0; grp < g->G; grp++) {
    tpurt_tensor dst = *dw, src = *dw;
    dst.sizes[0] = src.sizes[0] = g->Csg;
    dst.data = (char*)at(dw, grp * g->Csg * dw->strides[0]);
    src.data = (char*)acc + (size_t)(grp * g->CbK * g->Csg) * r->aes;
    src.dtype = r->acc_dt;
    src.strides[0] = 1;
    for (int64_t d = dw->ndim - 1, st = g->Csg; d >= 1; d--) {
      src.strides[d] = st;
      st *= dw->sizes[d];
    }
    tpurt_status s = tpurt_copy_tensor(&dst, &src);
    if (s) return s;
  }
  return TPURT_OK;
}

static void sum_row(red_state* s, const void* x, int64_t n, int64_t idx0, const red_ctx* c) {
  const double* v = x;
  double a = 0;
  for (int64_t k = 0; k < n; k++) a += v[k];
  s->f += a;
}
static void sum_col(red_state* s, const void* x, int64_t n, int64_t idx, const red_ctx* c) {
  const double* v = x;
  for (int64_t k = 0; k < n; k++) s[k].f += v[k];
}
static void init_zero(red_state* s, int64_t n, const red_ctx* c) { memset(s, 0, sizeof *s * (size_t)n); }
static void sum_fin(const red_state* s, int64_t count, const red_ctx* c, red_val* o) { o[0] = (red_val){s->f, 0, 0}; }
static const red_op op_sum = {.init = init_zero, .row = sum_row, .col = sum_col, .fin = sum_fin};

/* grad_bias [C] <- grad_output summed over every dim but 1. */
static tpurt_status bias_grad(const tpurt_tensor* go, const tpurt_tensor* gb) {
  red_ctx ctx = {0};
  uint32_t mask = ((1u << go->ndim) - 1) & ~2u;
  return tpurt_red_run(go, mask, gb, 1, &op_sum, &ctx);
}

/* ---------------------------------------------------------------- kernels */
/* CPU runs integer convolutions on its slow kernels: int64 in every one, the other integer
 * types only in the plain one (not transposed, not dilated), bool in none. */
static tpurt_status conv_dtype_check(const geom* g, int dtype, int transposed, int nsp) {
  if (tpurt_is_float(dtype) || dtype == TPURT_I64) return TPURT_OK;
  int dilated = g->dl[0] != 1 || g->dl[1] != 1 || g->dl[2] != 1;
  const char* k = transposed ? (nsp == 3 ? "slow_conv_transpose3d_out_cpu" : "slow_conv_transpose2d_out_cpu")
                  : dilated            ? "slow_conv_dilated<>"
                  : dtype != TPURT_BOOL ? NULL
                  : nsp == 3           ? "compute_columns3d"
                                       : "slow_conv2d_cpu";
  if (!k) return TPURT_OK;
  return tpurt_fail(TPURT_ERR_UNSUPPORTED, "\"%s\" not implemented for '%s'", k, tpurt_dtype_c10_name((tpurt_dtype)dtype));
}

static void* acc_alloc(const conv_run* r, int64_t n) { return tpurt_temp_zeroed((size_t)n * r->aes); }

/* The convolution as GEMMs per group over im2col columns (the cost model pads them to the
 * MXU): the forward or input gradient [N*Ls x CbK] x [CbK x Csg], the weight gradient
 * [Csg x N*Ls] x [N*Ls x CbK]; and their flops. */
static void conv_gemms(const geom* g, int data, int weight, tpurt_plan* p) {
  p->ngemms = 0;
  if (data) p->gemms[p->ngemms++] = (tpurt_gemm_shape){g->G, g->N * g->Ls, g->Csg, g->CbK, 0};
  if (weight) p->gemms[p->ngemms++] = (tpurt_gemm_shape){g->G, g->Csg, g->CbK, g->N * g->Ls, 0};
  p->flops = 2 * g->N * g->G * g->Csg * g->Ls * g->CbK * p->ngemms;
}

/* Bytes of the temporaries the kernels below take, in the order they take them. */
tpurt_status tpurt_plan_convolution(const tpurt_op_call* c, tpurt_plan* p) {
  const tpurt_tensor *x = &TPURT_ARG(c, convolution, input)->t, *w = &TPURT_ARG(c, convolution, weight)->t, *out = &c->outs[0];
  int transposed = (int)tpurt_value_i(TPURT_ARG(c, convolution, transposed));
  geom g;
  geom_init(&g, transposed ? out : x, transposed ? x : out, w, c, TPURT_ARG_convolution_stride, TPURT_ARG_convolution_groups);
  tpurt_status s = conv_dtype_check(&g, x->dtype, transposed, x->ndim - 2);
  if (s) return s;
  int direct = transposed && unit_strides(&g), col = 0;
  p->scratch_bytes += tpurt_temp_bytes((size_t)tpurt_numel(out) * acc_dtype_size(x->dtype)) + tpurt_temp_bytes(operand_bytes(w, 1));
  if (direct) p->scratch_bytes += to_big_direct_bytes(&g, w, x->dtype, c->precision);
  else if (transposed) p->scratch_bytes += tpurt_temp_bytes(operand_bytes(x, 2)), col = 1;
  else p->scratch_bytes += to_small_bytes(&g, x->dtype, c->precision, &col);
  if (col) p->scratch_bytes += tpurt_temp_bytes(col_bytes(&g));
  conv_gemms(&g, 1, 0, p);
  return TPURT_OK;
}

tpurt_status tpurt_plan_convolution_backward(const tpurt_op_call* c, tpurt_plan* p) {
  const tpurt_tensor *go = &TPURT_ARG(c, convolution_backward, grad_output)->t, *x = &TPURT_ARG(c, convolution_backward, input)->t,
                     *w = &TPURT_ARG(c, convolution_backward, weight)->t;
  const tpurt_tensor *gi = &c->outs[0], *gw = &c->outs[1];
  int transposed = (int)tpurt_value_i(TPURT_ARG(c, convolution_backward, transposed));
  const tpurt_tensor *B = transposed ? go : x, *Sraw = transposed ? x : go;
  geom g;
  geom_init(&g, B, Sraw, w, c, TPURT_ARG_convolution_backward_stride, TPURT_ARG_convolution_backward_groups);
  size_t aes = acc_dtype_size(x->dtype);
  int col = 0;
  p->scratch_bytes += tpurt_temp_bytes(operand_bytes(Sraw, 2));
  if (gi->ndim >= 0) {
    p->scratch_bytes += tpurt_temp_bytes(operand_bytes(w, 1)) + tpurt_temp_bytes((size_t)tpurt_numel(gi) * aes);
    if (!transposed && unit_strides(&g)) p->scratch_bytes += to_big_direct_bytes(&g, w, x->dtype, c->precision);
    else if (!transposed) col = 1;
    else p->scratch_bytes += to_small_bytes(&g, x->dtype, c->precision, &col);
  }
  if (gw->ndim >= 0) {
    p->scratch_bytes += tpurt_temp_bytes((size_t)tpurt_numel(gw) * aes);
    if (in_place_ok(&g, B->dtype, c->precision)) p->scratch_bytes += padded_image_bytes(&g, B->dtype) + tpurt_temp_bytes(koff_bytes(&g));
    else col = 1;
  }
  if (col) p->scratch_bytes += tpurt_temp_bytes(col_bytes(&g));
  conv_gemms(&g, gi->ndim >= 0, gw->ndim >= 0, p);
  return TPURT_OK;
}

tpurt_status tpurt_kernel_convolution(const tpurt_op_call* c) {
  /* convolution_overrideable(input, weight, bias?, stride, padding, dilation, transposed,
   *                          output_padding, groups) */
  const tpurt_tensor *x = &TPURT_ARG(c, convolution, input)->t, *w = &TPURT_ARG(c, convolution, weight)->t, *out = &c->outs[0];
  int transposed = (int)tpurt_value_i(TPURT_ARG(c, convolution, transposed));
  conv_run r = {0};
  geom_init(&r.g, transposed ? out : x, transposed ? x : out, w, c, TPURT_ARG_convolution_stride, TPURT_ARG_convolution_groups);
  tpurt_status s = conv_dtype_check(&r.g, x->dtype, transposed, x->ndim - 2);
  if (s) return s;
  operand W = {0}, S = {0};
  s = run_init(&r, x->dtype, c->precision);
  void* acc = s ? NULL : acc_alloc(&r, tpurt_numel(out));
  if (!s && !acc) s = TPURT_ERR_OOM;
  if (!s) s = operand_init(&W, w, 1);
  int direct = transposed && unit_strides(&r.g);
  if (!s && transposed && !direct) s = operand_init(&S, x, 2);
  if (!s && direct) s = to_big_direct(&r, x, w, acc);
  else if (!s && transposed) s = to_big(&r, &S, &W, acc);
  else if (!s) s = to_small(&r, x, &W, acc);
  if (!s) s = store_out(&r, out, acc, TPURT_ARG(c, convolution, bias));
  return s;
}

tpurt_status tpurt_kernel_convolution_backward(const tpurt_op_call* c) {
  /* convolution_backward_overrideable(grad_output, input, weight, stride, padding, dilation,
   *   transposed, output_padding, groups, output_mask) -> (grad_input, grad_weight, grad_bias);
   * outputs not asked for arrive undefined (ndim -1). */
  const tpurt_tensor *go = &TPURT_ARG(c, convolution_backward, grad_output)->t, *x = &TPURT_ARG(c, convolution_backward, input)->t,
                     *w = &TPURT_ARG(c, convolution_backward, weight)->t;
  const tpurt_tensor *gi = &c->outs[0], *gw = &c->outs[1], *gb = &c->outs[2];
  int transposed = (int)tpurt_value_i(TPURT_ARG(c, convolution_backward, transposed));
  /* regular: B = input, S = grad_output; transposed: B = grad_output, S = input */
  const tpurt_tensor *B = transposed ? go : x, *Sraw = transposed ? x : go;
  conv_run r = {0};
  geom_init(&r.g, B, Sraw, w, c, TPURT_ARG_convolution_backward_stride, TPURT_ARG_convolution_backward_groups);
  operand W = {0}, S = {0};
  void *acc_i, *acc_w;
  tpurt_status s = run_init(&r, x->dtype, c->precision);
  if (!s) s = operand_init(&S, Sraw, 2);
  if (!s && gi->ndim >= 0) {
    s = operand_init(&W, w, 1);
    acc_i = s ? NULL : acc_alloc(&r, tpurt_numel(gi));
    if (!s && !acc_i) s = TPURT_ERR_OOM;
    if (!s && !transposed && unit_strides(&r.g)) s = to_big_direct(&r, Sraw, w, acc_i);
    else if (!s && !transposed) s = to_big(&r, &S, &W, acc_i);
    else if (!s) s = to_small(&r, go, &W, acc_i);
    if (!s) {
      tpurt_tensor src = tpurt_dense_like(gi, acc_i, r.acc_dt);
      s = tpurt_copy_tensor(gi, &src);
    }
  }
  if (!s && gw->ndim >= 0) {
    acc_w = acc_alloc(&r, tpurt_numel(gw));
    if (!acc_w) s = TPURT_ERR_OOM;
    if (!s) s = weight_grad(&r, B, &S, acc_w);
    if (!s) s = store_weight(&r, gw, acc_w);
  }
  if (!s && gb->ndim >= 0) s = bias_grad(go, gb);
  return s;
}

/* ---------------------------------------------------------------- aten::im2col / col2im */
/* The unfold/fold pair on (N, C, H, W) or unbatched (C, H, W) images is the column matrix
 * of a one-group 2-d convolution with Cbg = C (rows (c * kh + i) * kw + j, columns
 * oh * ow), so it runs on the convolution's own walkers. PyTorch's meta functions check
 * the arguments and size the outputs. */
typedef struct {
  geom g;
  int64_t sn, sc, sb[3]; /* image strides: batch (0 unbatched), channel, spatial */
} fold;

/* args: kernel_size, dilation, padding, stride */
_Static_assert(TPURT_ARG_im2col_dilation == TPURT_ARG_im2col_kernel_size + 1 &&
                   TPURT_ARG_im2col_padding == TPURT_ARG_im2col_kernel_size + 2 &&
                   TPURT_ARG_im2col_stride == TPURT_ARG_im2col_kernel_size + 3 &&
                   TPURT_ARG_col2im_dilation == TPURT_ARG_col2im_kernel_size + 1 &&
                   TPURT_ARG_col2im_padding == TPURT_ARG_col2im_kernel_size + 2 &&
                   TPURT_ARG_col2im_stride == TPURT_ARG_col2im_kernel_size + 3,
               "im2col / col2im schemas: kernel_size, dilation, padding, stride in a row");
static void fold_init(fold* f, const tpurt_tensor* img, const tpurt_value* args) {
  int b = img->ndim == 4;
  geom* g = &f->g;
  memset(f, 0, sizeof *f);
  g->N = b ? img->sizes[0] : 1;
  g->G = 1;
  g->Cb = g->Cbg = img->sizes[b];
  g->Lb = g->Ls = g->Kk = 1;
  f->sn = b ? img->strides[0] : 0;
  f->sc = img->strides[b];
  for (int i = 0; i < 3; i++) {
    int d = i - 1; /* two spatial dims behind a leading size-1 one */
    g->bs[i] = d < 0 ? 1 : img->sizes[b + 1 + d];
    g->k[i] = d < 0 ? 1 : args[0].ints[d];
    g->dl[i] = d < 0 ? 1 : args[1].ints[d];
    g->pd[i] = d < 0 ? 0 : args[2].ints[d];
    g->st[i] = d < 0 ? 1 : args[3].ints[d];
    g->ss[i] = (g->bs[i] + 2 * g->pd[i] - g->dl[i] * (g->k[i] - 1) - 1) / g->st[i] + 1;
    f->sb[i] = d < 0 ? 0 : img->strides[b + 1 + d];
    g->Lb *= g->bs[i];
    g->Ls *= g->ss[i];
    g->Kk *= g->k[i];
  }
  g->CbK = g->Cbg * g->Kk;
}

/* Temporaries, as es-byte elements: the column matrices [N][CbK x Ls] (im2col's output, col2im's
 * converted input) and col2im's image accumulator [N][Cb x Lb]. */
static size_t fold_cols_bytes(const geom* g, size_t es) { return (size_t)(g->N * g->CbK * g->Ls) * es; }
static size_t fold_image_bytes(const geom* g, size_t es) { return (size_t)(g->N * g->Cb * g->Lb) * es; }
/* col2im sums in float, double for float64 */
static int col2im_acc_dtype(int dtype) { return dtype == TPURT_F64 ? TPURT_F64 : TPURT_F32; }

/* CPU's kernels take floats and bool only. */
static tpurt_status fold_dtype_check(const char* op, int dtype) {
  if (tpurt_is_float(dtype) || dtype == TPURT_BOOL) return TPURT_OK;
  return tpurt_fail(TPURT_ERR_UNSUPPORTED, "\"%s_out_cpu\" not implemented for '%s'", op, tpurt_dtype_c10_name((tpurt_dtype)dtype));
}


tpurt_status tpurt_kernel_im2col(const tpurt_op_call* c) {
  /* im2col(self, kernel_size, dilation, padding, stride): raw elements, zeros outside */
  const tpurt_tensor *img = &TPURT_ARG(c, im2col, self)->t, *out = &c->outs[0];
  /* raw elements, so complex64 moves like any 8-byte type */
  tpurt_status s = img->dtype == TPURT_C64 ? TPURT_OK : fold_dtype_check("im2col", img->dtype);
  if (s) return s;
  fold f;
  fold_init(&f, img, TPURT_ARG(c, im2col, kernel_size));
  const geom* g = &f.g;
  size_t es = tpurt_dtype_size((tpurt_dtype)img->dtype), block = (size_t)(g->CbK * g->Ls);
  char* cols = tpurt_temp(fold_cols_bytes(g, es));
  if (!cols) return TPURT_ERR_OOM;
  for (int64_t n = 0; n < g->N; n++) im2col_raw(cols + (size_t)n * block * es, at(img, n * f.sn), es, f.sc, f.sb, g);
  tpurt_tensor src = tpurt_dense_like(out, cols, out->dtype);
  return tpurt_copy_tensor(out, &src);
}

tpurt_status tpurt_kernel_col2im(const tpurt_op_call* c) {
  /* col2im(self, output_size, kernel_size, dilation, padding, stride): sums overlapping
   * columns in CPU's order, in float (double for float64); bool sums are counts, which store
   * as "any" like CPU's bool += */
  const tpurt_tensor *cols = &TPURT_ARG(c, col2im, self)->t, *img = &c->outs[0];
  tpurt_status s = fold_dtype_check("col2im", cols->dtype);
  if (s) return s;
  fold f;
  fold_init(&f, img, TPURT_ARG(c, col2im, kernel_size));
  const geom* g = &f.g;
  int acc_dt = col2im_acc_dtype(img->dtype);
  size_t aes = tpurt_dtype_size((tpurt_dtype)acc_dt), cblock = (size_t)(g->CbK * g->Ls), iblock = (size_t)(g->Cb * g->Lb);
  char* col = tpurt_temp(fold_cols_bytes(g, aes));
  char* acc = tpurt_temp_zeroed(fold_image_bytes(g, aes));
  tpurt_tensor dcol = tpurt_dense_like(cols, col, acc_dt), dimg = tpurt_dense_like(img, acc, acc_dt);
  s = col && acc ? tpurt_copy_tensor(&dcol, cols) : TPURT_ERR_OOM;
  for (int64_t n = 0; !s && n < g->N; n++) {
    const void* cn = col + (size_t)n * cblock * aes;
    void* bn = acc + (size_t)n * iblock * aes;
    switch (img->dtype) {
      case TPURT_F64: col2im_double(cn, bn, g); break;
      case TPURT_BF16: col2im_bf16(cn, bn, g); break;
      case TPURT_F16: col2im_f16(cn, bn, g); break;
      default: col2im_float(cn, bn, g); break;
    }
  }
  if (!s) s = tpurt_copy_tensor(img, &dimg);
  return s;
}

tpurt_status tpurt_plan_im2col(const tpurt_op_call* c, tpurt_plan* p) {
  const tpurt_tensor* img = &TPURT_ARG(c, im2col, self)->t;
  fold f;
  fold_init(&f, img, TPURT_ARG(c, im2col, kernel_size));
  p->scratch_bytes += tpurt_temp_bytes(fold_cols_bytes(&f.g, tpurt_dtype_size((tpurt_dtype)img->dtype)));
  return TPURT_OK;
}

tpurt_status tpurt_plan_col2im(const tpurt_op_call* c, tpurt_plan* p) {
  const tpurt_tensor* img = &c->outs[0];
  fold f;
  fold_init(&f, img, TPURT_ARG(c, col2im, kernel_size));
  size_t aes = tpurt_dtype_size((tpurt_dtype)col2im_acc_dtype(img->dtype));
  p->scratch_bytes += tpurt_temp_bytes(fold_cols_bytes(&f.g, aes)) + tpurt_temp_bytes(fold_image_bytes(&f.g, aes));
  return TPURT_OK;
}

/* *d += *s, rounded to d's dtype as CPU's scalar_t accumulation does. */
static void add_elem(char* d, int ddt, const char* s, int sdt) {
  if (tpurt_is_float(ddt)) tpurt_store_f64(d, ddt, tpurt_load_f64(d, ddt) + tpurt_load_f64(s, sdt));
  else tpurt_store_i64(d, ddt, tpurt_load_i64(d, ddt) + tpurt_load_i64(s, sdt));
}

/* ---------------------------------------------------------------- aten::unfold_backward */
tpurt_status tpurt_kernel_unfold_backward(const tpurt_op_call* c) {
  /* unfold_backward(grad_in, input_sizes, dim, size, step): grad_in has input's dims with
   * `dim` counting windows, plus a last dim of `size`; window w, offset j lands on index
   * w * step + j of `dim`. grad_in walks in row-major order, so each output element
   * receives its windows in increasing order, rounding after each add as CPU does. */
  const tpurt_tensor *g = &TPURT_ARG(c, unfold_backward, grad_in)->t, *out = &c->outs[0];
  int64_t step = tpurt_value_i(TPURT_ARG(c, unfold_backward, step));
  int dim = (int)tpurt_value_i(TPURT_ARG(c, unfold_backward, dim));
  if (dim < 0) dim += out->ndim > 0 ? out->ndim : 1;
  size_t es = tpurt_dtype_size((tpurt_dtype)out->dtype);
  int64_t idx[TPURT_MAX_DIMS] = {0};
  if (tpurt_numel(out) > 0) {
    do memset(tpurt_elem_ptr(out, idx), 0, es);
    while (tpurt_next_index(idx, out->sizes, out->ndim));
  }
  if (tpurt_numel(g) == 0) return TPURT_OK;
  memset(idx, 0, sizeof idx);
  do {
    int64_t o = 0, j = idx[g->ndim - 1];
    for (int d = 0; d < out->ndim; d++) o += (d == dim ? idx[d] * step + j : idx[d]) * out->strides[d];
    if (out->ndim == 0) o = 0;
    add_elem((char*)out->data + o * (int64_t)es, out->dtype, tpurt_elem_ptr(g, idx), g->dtype);
  } while (tpurt_next_index(idx, g->sizes, g->ndim));
  return TPURT_OK;
}
