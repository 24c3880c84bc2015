/* Resampling family: upsampling (nearest, nearest-exact, linear, bilinear, bicubic,
 * trilinear, antialiased bilinear) and reflection / replication padding, each with its
 * backward.
 *
 * All of them are separable gathers: output index o of spatial dim d reads taps
 * (input index, weight; as many as the mode needs) from a per-dim table, and an output element is the sum over the
 * product of its dims' taps. The tables reproduce CPU's index and weight arithmetic
 * (UpSample.h: float scales for float tensors, double for float64) so that the gathers
 * land on the same source elements. Single-tap, weight-one tables (nearest, padding) copy
 * raw elements (exact for every dtype); the rest sum in double. Backward passes scatter
 * grad_output through the same taps into a dense double buffer stored once. Spatial dims
 * are padded to 3 with leading size-1 dims; every leading dim is a "plane". */
#include <math.h>
#include "spatial.h"

typedef struct {
  int n;
  int64_t* i; /* n input indices and weights, in the geometry's store */
  double* w;
} tap;

typedef struct {
  spatial sp;
  tap* t[3];
  void* store; /* every tap's indices and weights */
  int raw;     /* every tap is a single weight-one copy */
} rgeom;

/* R_AA: antialiased bilinear, whose taps widen with the downscaling factor */
typedef enum { R_NEAREST, R_EXACT, R_LINEAR, R_CUBIC, R_AA, R_REFLECT, R_REPLICATE } rmode;

/* ---------------------------------------------------------------- tap tables */
/* TAPS(T, SFX): CPU's index arithmetic in T (float, or double for float64 tensors). */
#define TAPS(T, SFX)                                                                            \
  static T scales_value_##SFX(double scale, int64_t I, int64_t O) {                            \
    return scale > 0 ? (T)(1.0 / scale) : (T)I / (T)O;                                         \
  }                                                                                             \
  static T area_scale_##SFX(int64_t I, int64_t O, int align, double scale) {                   \
    if (align) return O > 1 ? (T)(I - 1) / (T)(O - 1) : (T)0;                                  \
    return scales_value_##SFX(scale, I, O);                                                    \
  }                                                                                             \
  static T source_index_##SFX(T scale, int64_t o, int align, int cubic) {                      \
    if (align) return scale * (T)o;                                                            \
    T src = scale * ((T)o + (T)0.5) - (T)0.5;                                                  \
    return !cubic && src < 0 ? (T)0 : src;                                                     \
  }                                                                                             \
  /* input index floor(x) clamped to I-1 and lambda = x - index clamped to [0, 1] */           \
  static int64_t guard_##SFX(T x, int64_t I, T* lambda) {                                       \
    int64_t i = (int64_t)floor(x);                                                             \
    if (i > I - 1) i = I - 1;                                                                  \
    T l = x - (T)i;                                                                            \
    *lambda = l < 0 ? (T)0 : l > 1 ? (T)1 : l;                                                 \
    return i;                                                                                  \
  }                                                                                             \
  static T cc1_##SFX(T x, T A) { return ((A + 2) * x - (A + 3)) * x * x + 1; }                  \
  static T cc2_##SFX(T x, T A) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; }            \
  static void interp_##SFX(tap* t, rmode m, int64_t o, int64_t I, int64_t O, int align, double scale) { \
    T s = area_scale_##SFX(I, O, align, scale), l;                                             \
    int64_t i = guard_##SFX(source_index_##SFX(s, o, align, m == R_CUBIC), I, &l);             \
    if (m == R_LINEAR) {                                                                       \
      t->n = 2;                                                                                \
      t->i[0] = i;                                                                             \
      t->i[1] = i + (i < I - 1 ? 1 : 0);                                                       \
      t->w[0] = (T)1 - l;                                                                      \
      t->w[1] = l;                                                                             \
      return;                                                                                  \
    }                                                                                          \
    const T A = (T)-0.75;                                                                      \
    T c[4] = {cc2_##SFX(l + (T)1, A), cc1_##SFX(l, A), cc1_##SFX((T)1 - l, A),                  \
              cc2_##SFX(((T)1 - l) + (T)1, A)};                                                \
    t->n = 4;                                                                                  \
    for (int j = 0; j < 4; j++) {                                                              \
      int64_t k = i - 1 + j;                                                                   \
      t->i[j] = k < 0 ? 0 : k > I - 1 ? I - 1 : k;                                             \
      t->w[j] = c[j];                                                                          \
    }                                                                                          \
  }                                                                                            \
  /* antialiased bilinear (CPU's _compute_weights_aa): a triangle filter stretched by the */  \
  /* downscaling factor, normalized; at most aa_width taps */                                  \
  static int aa_width_##SFX(int64_t I, int64_t O, int align, double scale) {                   \
    T s = area_scale_##SFX(I, O, align, scale);                                                \
    return (int)ceil(s >= 1 ? s : (T)1) * 2 + 1;                                               \
  }                                                                                            \
  static void aa_##SFX(tap* t, int64_t o, int64_t I, int64_t O, int align, double scale, int maxn) { \
    T s = area_scale_##SFX(I, O, align, scale);                                                \
    T support = s >= 1 ? s : (T)1, invscale = s >= 1 ? (T)(1.0 / s) : (T)1;                   \
    T center = (T)(s * ((double)o + 0.5)), total = 0;                                          \
    int64_t lo = (int64_t)((double)(center - support) + 0.5);                                  \
    int64_t hi = (int64_t)((double)(center + support) + 0.5);                                  \
    if (lo < 0) lo = 0;                                                                        \
    int64_t n = (hi < I ? hi : I) - lo;                                                        \
    n = n < 0 ? 0 : n > maxn ? maxn : n;                                                       \
    t->n = (int)n;                                                                             \
    for (int64_t j = 0; j < n; j++) {                                                          \
      T x = (T)(((double)((T)(j + lo) - center) + 0.5) * (double)invscale);                    \
      if (x < 0) x = -x;                                                                       \
      T w = x < 1 ? (T)(1.0 - x) : (T)0;                                                       \
      t->i[j] = lo + j;                                                                        \
      t->w[j] = w; /* exact in double; normalized in T below */                               \
      total += w;                                                                              \
    }                                                                                          \
    for (int64_t j = 0; total != 0 && j < n; j++) t->w[j] = (T)((T)t->w[j] / total);          \
  }
TAPS(float, f)
TAPS(double, d)

/* Nearest: float arithmetic whatever the dtype, as CPU's nearest_idx. */
static int64_t nearest(rmode m, int64_t o, int64_t I, int64_t O, double scale) {
  if (m == R_NEAREST && O == I) return o;
  if (m == R_NEAREST && O == 2 * I) return o >> 1;
  float s = scales_value_f(scale, I, O);
  int64_t i = m == R_NEAREST ? (int64_t)floorf((float)o * s) : (int64_t)floorf((float)(((double)o + 0.5) * s));
  return i < I - 1 ? i : I - 1;
}

/* One tap for padding: output o reads input o - pad, reflected or clamped at the edges. */
static int64_t pad_index(rmode m, int64_t o, int64_t I, int64_t pad) {
  int64_t x = o - pad;
  if (m == R_REPLICATE) return x < 0 ? 0 : x > I - 1 ? I - 1 : x;
  if (x < 0) x = -x;
  if (x > I - 1) x = 2 * (I - 1) - x;
  return x;
}

static void one(tap* t, int64_t i) {
  t->n = 1;
  t->i[0] = i;
  t->w[0] = 1.0;
}

typedef struct {
  rmode m;
  int align, dbl;
  double scale[3]; /* <= 0: none */
  int64_t pad[3];  /* left/top/front pads for the padding modes */
} rparams;

/* Most taps one output position of dim i (a padded leading dim when fake) reads. */
static int max_taps(const rparams* rp, int fake, int64_t I, int64_t O, double scale) {
  if (fake) return 1;
  switch (rp->m) {
    case R_LINEAR: return 2;
    case R_CUBIC: return 4;
    case R_AA: return rp->dbl ? aa_width_d(I, O, rp->align, scale) : aa_width_f(I, O, rp->align, scale);
    default: return 1;
  }
}

/* Taps per output position of each dim (maxn) and in all (returned; the store holds them). */
static int64_t tap_counts(const rparams* rp, int nsp, const tpurt_tensor* in, const tpurt_tensor* out, int maxn[3]) {
  int64_t total = 0;
  for (int i = 0; i < 3; i++) {
    int64_t O = sp_size(out, nsp, i);
    maxn[i] = max_taps(rp, i < 3 - nsp, sp_size(in, nsp, i), O, rp->scale[i]);
    total += maxn[i] * O;
  }
  return total;
}
static size_t store_bytes(int64_t total) { return (sizeof(int64_t) + sizeof(double)) * (size_t)(total ? total : 1); }

/* in / out: tensors with the input's / output's spatial sizes. */
static tpurt_status geom_init(rgeom* g, int nsp, const rparams* rp, const tpurt_tensor* in, const tpurt_tensor* out) {
  g->store = NULL;
  if (!spatial_init(&g->sp, nsp, in, out, sizeof(tap), (void**)g->t))
    return TPURT_ERR_OOM;
  int maxn[3];
  int64_t total = tap_counts(rp, nsp, in, out, maxn);
  g->store = tpurt_temp(store_bytes(total));
  if (!g->store) {
    tpurt_temp_release(g->t[0]);
    return TPURT_ERR_OOM;
  }
  int64_t* idx = g->store;
  double* wts = (double*)(idx + total);
  g->raw = rp->m != R_LINEAR && rp->m != R_CUBIC && rp->m != R_AA;
  for (int i = 0; i < 3; i++) {
    int64_t I = g->sp.is[i], O = g->sp.os[i];
    int fake = i < 3 - nsp;
    for (int64_t o = 0; o < O; o++, idx += maxn[i], wts += maxn[i]) {
      tap* t = &g->t[i][o];
      t->i = idx;
      t->w = wts;
      if (fake) one(t, o);
      else if (rp->m == R_NEAREST || rp->m == R_EXACT) one(t, nearest(rp->m, o, I, O, rp->scale[i]));
      else if (rp->m == R_REFLECT || rp->m == R_REPLICATE) one(t, pad_index(rp->m, o, I, rp->pad[i]));
      else if (rp->m == R_AA && rp->dbl) aa_d(t, o, I, O, rp->align, rp->scale[i], maxn[i]);
      else if (rp->m == R_AA) aa_f(t, o, I, O, rp->align, rp->scale[i], maxn[i]);
      else if (rp->dbl) interp_d(t, rp->m, o, I, O, rp->align, rp->scale[i]);
      else interp_f(t, rp->m, o, I, O, rp->align, rp->scale[i]);
    }
  }
  return TPURT_OK;
}

static void geom_free(rgeom* g) {
  tpurt_temp_release(g->t[0]);
  tpurt_temp_release(g->store);
}

#define FOR_OUTPUTS(g, ...)                                                                    \
  SPATIAL_FOR_OUTPUTS(&(g)->sp, {                                                              \
    const tap *ta = &(g)->t[0][od], *tb = &(g)->t[1][oh], *tc = &(g)->t[2][ow];                \
    __VA_ARGS__                                                                                \
  })

/* ---------------------------------------------------------------- forward / backward */
#define RAW_COPY(T)                                                                              \
  static void copy_##T(const rgeom* g, const tpurt_tensor* in, const tpurt_tensor* out) {       \
    int64_t si[3], so[3];                                                                        \
    for (int i = 0; i < 3; i++) si[i] = sp_stride(in, g->sp.nsp, i), so[i] = sp_stride(out, g->sp.nsp, i); \
    FOR_OUTPUTS(g, {                                                                             \
      const T* src = (const T*)in->data + plane_off(in, in->ndim - g->sp.nsp, p);                  \
      T* dst = (T*)out->data + plane_off(out, out->ndim - g->sp.nsp, p);                           \
      dst[od * so[0] + oh * so[1] + ow * so[2]] = src[ta->i[0] * si[0] + tb->i[0] * si[1] + tc->i[0] * si[2]]; \
    })                                                                                           \
  }
RAW_COPY(uint8_t)
RAW_COPY(uint16_t)
RAW_COPY(uint32_t)
RAW_COPY(uint64_t)

static void interp_fwd(const rgeom* g, const tpurt_tensor* in, const tpurt_tensor* out) {
  int64_t si[3], so[3];
  for (int i = 0; i < 3; i++) si[i] = sp_stride(in, g->sp.nsp, i), so[i] = sp_stride(out, g->sp.nsp, i);
  size_t ies = tpurt_dtype_size((tpurt_dtype)in->dtype), oes = tpurt_dtype_size((tpurt_dtype)out->dtype);
  /* Integer images (uint8) round and saturate, as CPU's resampler does: bicubic overshoots
   * below 0 and above 255, which a plain conversion would wrap around. */
  int saturate = !tpurt_is_float(out->dtype) && !tpurt_is_complex(out->dtype);
  double lo = (double)tpurt_int_lowest(out->dtype), hi = (double)tpurt_int_highest(out->dtype);
  FOR_OUTPUTS(g, {
    const char* src = (const char*)in->data + plane_off(in, in->ndim - g->sp.nsp, p) * (int64_t)ies;
    double v = 0;
    for (int a = 0; a < ta->n; a++)
      for (int b = 0; b < tb->n; b++) {
        double wab = ta->w[a] * tb->w[b];
        for (int c = 0; c < tc->n; c++)
          v += wab * tc->w[c] *
               tpurt_load_f64(src + (ta->i[a] * si[0] + tb->i[b] * si[1] + tc->i[c] * si[2]) * (int64_t)ies, in->dtype);
      }
    char* dst = (char*)out->data + (plane_off(out, out->ndim - g->sp.nsp, p) + od * so[0] + oh * so[1] + ow * so[2]) * (int64_t)oes;
    if (saturate) v = fmin(fmax(floor(v + 0.5), lo), hi);
    tpurt_store_f64(dst, out->dtype, v);
  })
}

static tpurt_status forward(const rgeom* g, const tpurt_tensor* in, const tpurt_tensor* out) {
  if (!g->raw || in->dtype != out->dtype) {
    interp_fwd(g, in, out);
    return TPURT_OK;
  }
  switch (tpurt_dtype_size((tpurt_dtype)in->dtype)) {
    case 1: copy_uint8_t(g, in, out); break;
    case 2: copy_uint16_t(g, in, out); break;
    case 4: copy_uint32_t(g, in, out); break;
    default: copy_uint64_t(g, in, out); break;
  }
  return TPURT_OK;
}

/* grad_input (in's spatial sizes) <- scatter of grad_output through the taps. */
static tpurt_status backward(const rgeom* g, const tpurt_tensor* go, const tpurt_tensor* gi) {
  double* acc = tpurt_temp_zeroed(spatial_acc_bytes(gi));
  if (!acc) return TPURT_ERR_OOM;
  int64_t so[3], plane = g->sp.is[0] * g->sp.is[1] * g->sp.is[2];
  for (int i = 0; i < 3; i++) so[i] = sp_stride(go, g->sp.nsp, i);
  size_t ges = tpurt_dtype_size((tpurt_dtype)go->dtype);
  FOR_OUTPUTS(g, {
    double v = tpurt_load_f64((const char*)go->data + (plane_off(go, go->ndim - g->sp.nsp, p) + od * so[0] + oh * so[1] +
                                                       ow * so[2]) * (int64_t)ges, go->dtype);
    double* ap = acc + p * plane;
    for (int a = 0; a < ta->n; a++)
      for (int b = 0; b < tb->n; b++)
        for (int c = 0; c < tc->n; c++)
          ap[(ta->i[a] * g->sp.is[1] + tb->i[b]) * g->sp.is[2] + tc->i[c]] += ta->w[a] * tb->w[b] * tc->w[c] * v;
  })
  tpurt_status s = tpurt_store_dense(gi, acc, TPURT_F64);
  tpurt_temp_release(acc);
  return s;
}

/* ---------------------------------------------------------------- kernels */
static double opt_f(const tpurt_value* v) { return v->kind == TPURT_V_NONE ? 0.0 : tpurt_value_f(v); }

/* A call of the family: its parameters and the tensors with the input's / output's spatial
 * sizes (a backward's grad_input / grad_output). */
typedef struct {
  rparams rp;
  int nsp, bwd;
  const tpurt_tensor *in, *out;
} rcall;

/* upsample_*(self, output_size, [align_corners,] scales...) and
 * upsample_*_backward(grad_output, output_size, input_size, [align_corners,] scales...) */
static rcall upsample_call(const tpurt_op_call* c, rmode m, int nsp, int bwd) {
  int interp = m == R_LINEAR || m == R_CUBIC || m == R_AA;
  int a0 = bwd ? TPURT_ARG_upsample_nearest1d_backward_input_size + 1 : TPURT_ARG_upsample_nearest1d_output_size + 1; /* align_corners, or the first scale */
  const tpurt_tensor* in = bwd ? &c->outs[0] : &TPURT_ARG(c, upsample_nearest1d, self)->t;
  const tpurt_tensor* out = bwd ? &TPURT_ARG(c, upsample_nearest1d_backward, grad_output)->t : &c->outs[0];
  rcall r = {{m, interp ? (int)tpurt_value_i(&c->args[a0]) : 0, in->dtype == TPURT_F64, {0}, {0}}, nsp, bwd, in, out};
  for (int i = 0; i < 3; i++) {
    int j = i - (3 - nsp), k = a0 + interp + j;
    r.rp.scale[i] = j >= 0 && k < c->nargs ? opt_f(&c->args[k]) : 0.0;
  }
  return r;
}

/* *_padNd(self, padding) and *_padNd_backward(grad_output, self, padding); padding lists
 * (left, right) pairs from the last dim backwards. */
static rcall pad_call(const tpurt_op_call* c, rmode m, int nsp, int bwd) {
  const tpurt_value* pv = &c->args[bwd ? TPURT_ARG_reflection_pad1d_backward_padding : TPURT_ARG_reflection_pad1d_padding];
  const tpurt_tensor* in = bwd ? &c->outs[0] : &TPURT_ARG(c, reflection_pad1d, self)->t;
  const tpurt_tensor* out = bwd ? &TPURT_ARG(c, reflection_pad1d_backward, grad_output)->t : &c->outs[0];
  rcall r = {{m, 0, 0, {0}, {0}}, nsp, bwd, in, out};
  for (int j = 0; j < nsp; j++) r.rp.pad[3 - 1 - j] = pv->ints[2 * j];
  return r;
}

static tpurt_status resample(rcall r) {
  rgeom g;
  tpurt_status s = geom_init(&g, r.nsp, &r.rp, r.in, r.out);
  if (s) return s;
  s = r.bwd ? backward(&g, r.out, r.in) : forward(&g, r.in, r.out);
  geom_free(&g);
  return s;
}

/* Temporaries: geom_init's tables and tap store, backward's accumulator. */
static tpurt_status plan_resample(rcall r, tpurt_plan* p) {
  int maxn[3];
  p->scratch_bytes += tpurt_temp_bytes(spatial_table_bytes(r.nsp, r.out, sizeof(tap))) +
                      tpurt_temp_bytes(store_bytes(tap_counts(&r.rp, r.nsp, r.in, r.out, maxn)));
  if (r.bwd) p->scratch_bytes += tpurt_temp_bytes(spatial_acc_bytes(r.in));
  return TPURT_OK;
}

/* upsample reads the arguments at upsample_nearest1d's indices: every upsample line agrees */
#define UPSAMPLE_KERNEL(NAME, MODE, N)                                                                            \
  _Static_assert(TPURT_ARG_##NAME##_self == TPURT_ARG_upsample_nearest1d_self &&                                  \
                     TPURT_ARG_##NAME##_output_size == TPURT_ARG_upsample_nearest1d_output_size &&                \
                     TPURT_ARG_##NAME##_backward_grad_output == TPURT_ARG_upsample_nearest1d_backward_grad_output && \
                     TPURT_ARG_##NAME##_backward_input_size == TPURT_ARG_upsample_nearest1d_backward_input_size,  \
                 "upsample serves " #NAME " and " #NAME "_backward");                                           \
  tpurt_status tpurt_kernel_##NAME(const tpurt_op_call* c) { return resample(upsample_call(c, MODE, N, 0)); }     \
  tpurt_status tpurt_kernel_##NAME##_backward(const tpurt_op_call* c) {                                            \
    return resample(upsample_call(c, MODE, N, 1));                                                                 \
  }                                                                                                                \
  tpurt_status tpurt_plan_##NAME(const tpurt_op_call* c, tpurt_plan* p) {                                          \
    return plan_resample(upsample_call(c, MODE, N, 0), p);                                                         \
  }                                                                                                                \
  tpurt_status tpurt_plan_##NAME##_backward(const tpurt_op_call* c, tpurt_plan* p) {                               \
    return plan_resample(upsample_call(c, MODE, N, 1), p);                                                         \
  }
UPSAMPLE_KERNEL(upsample_nearest1d, R_NEAREST, 1)
UPSAMPLE_KERNEL(upsample_nearest2d, R_NEAREST, 2)
UPSAMPLE_KERNEL(upsample_nearest3d, R_NEAREST, 3)
UPSAMPLE_KERNEL(upsample_nearest_exact1d, R_EXACT, 1)
UPSAMPLE_KERNEL(upsample_nearest_exact2d, R_EXACT, 2)
UPSAMPLE_KERNEL(upsample_nearest_exact3d, R_EXACT, 3)
UPSAMPLE_KERNEL(upsample_linear1d, R_LINEAR, 1)
UPSAMPLE_KERNEL(upsample_bilinear2d, R_LINEAR, 2)
UPSAMPLE_KERNEL(upsample_trilinear3d, R_LINEAR, 3)
UPSAMPLE_KERNEL(upsample_bicubic2d, R_CUBIC, 2)
UPSAMPLE_KERNEL(upsample_bilinear2d_aa, R_AA, 2)
/* the interpolating modes read align_corners at a0 */
#define UPSAMPLE_ALIGN_AT_A0(NAME)                                                                  \
  (TPURT_ARG_##NAME##_align_corners == TPURT_ARG_upsample_nearest1d_output_size + 1 &&              \
   TPURT_ARG_##NAME##_backward_align_corners == TPURT_ARG_upsample_nearest1d_backward_input_size + 1)
_Static_assert(UPSAMPLE_ALIGN_AT_A0(upsample_linear1d) && UPSAMPLE_ALIGN_AT_A0(upsample_bilinear2d) &&
                   UPSAMPLE_ALIGN_AT_A0(upsample_trilinear3d) && UPSAMPLE_ALIGN_AT_A0(upsample_bicubic2d) &&
                   UPSAMPLE_ALIGN_AT_A0(upsample_bilinear2d_aa),
               "upsample: align_corners right after output_size / input_size");
#undef UPSAMPLE_ALIGN_AT_A0

/* pad reads the arguments at reflection_pad1d's indices: every pad line agrees */
#define PAD_KERNEL(NAME, MODE, N)                                                                  \
  _Static_assert(TPURT_ARG_##NAME##_self == TPURT_ARG_reflection_pad1d_self &&                     \
                     TPURT_ARG_##NAME##_padding == TPURT_ARG_reflection_pad1d_padding &&           \
                     TPURT_ARG_##NAME##_backward_grad_output == TPURT_ARG_reflection_pad1d_backward_grad_output && \
                     TPURT_ARG_##NAME##_backward_padding == TPURT_ARG_reflection_pad1d_backward_padding, \
                 "pad serves " #NAME " and " #NAME "_backward");                                   \
  tpurt_status tpurt_kernel_##NAME(const tpurt_op_call* c) { return resample(pad_call(c, MODE, N, 0)); } \
  tpurt_status tpurt_kernel_##NAME##_backward(const tpurt_op_call* c) { return resample(pad_call(c, MODE, N, 1)); } \
  tpurt_status tpurt_plan_##NAME(const tpurt_op_call* c, tpurt_plan* p) {                           \
    return plan_resample(pad_call(c, MODE, N, 0), p);                                              \
  }                                                                                                \
  tpurt_status tpurt_plan_##NAME##_backward(const tpurt_op_call* c, tpurt_plan* p) {                \
    return plan_resample(pad_call(c, MODE, N, 1), p);                                              \
  }
PAD_KERNEL(reflection_pad1d, R_REFLECT, 1)
PAD_KERNEL(reflection_pad2d, R_REFLECT, 2)
PAD_KERNEL(reflection_pad3d, R_REFLECT, 3)
PAD_KERNEL(replication_pad1d, R_REPLICATE, 1)
PAD_KERNEL(replication_pad2d, R_REPLICATE, 2)
PAD_KERNEL(replication_pad3d, R_REPLICATE, 3)
