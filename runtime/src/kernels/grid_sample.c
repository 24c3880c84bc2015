/* grid_sampler_2d / grid_sampler_3d and their backward (F.grid_sample): bilinear, nearest
 * and bicubic (2-d only) interpolation with zeros, border or reflection padding.
 *
 * Each grid point's source coordinate follows CPU's GridSampler.h step by step
 * (unnormalize, clip / reflect, and for bicubic the per-tap clip / reflect of
 * get_value_bounded). Every mode is separable: per spatial dim the point reads up to 4
 * taps (input index, weight, d weight / d coordinate), and a value is the sum over the
 * product of its dims' taps. A 2-d sampler is a 3-d one whose depth is a single tap of
 * weight 1. Arithmetic is double for every dtype, rounded once on store, which is at least
 * as close to float64 as CPU's reduced-precision kernels. Out-of-range taps read zero and
 * receive no gradient. */
#include <stdlib.h>

#include "../internal.h"

enum { GS_BILINEAR, GS_NEAREST, GS_BICUBIC };
enum { GS_ZEROS, GS_BORDER, GS_REFLECTION };

typedef struct {
  int n;
  int64_t i[4];
  double w[4], dw[4];
  double mult; /* d source coordinate / d grid value */
} gtaps;

typedef struct {
  int nsp, interp, pad, align;
} gmode;

static double clip(double x, int64_t size, double* g) {
  double hi = (double)(size - 1);
  if (x <= 0) return *g = 0, 0;
  if (x >= hi) return *g = 0, hi;
  return *g = 1, x;
}

/* Reflect x into [lo, hi], given as twice their values so half integers stay exact. */
static double reflect(double x, int64_t twice_lo, int64_t twice_hi, double* g) {
  if (twice_lo == twice_hi) return *g = 0, 0;
  double lo = (double)twice_lo / 2, span = (double)(twice_hi - twice_lo) / 2;
  double sign = 1;
  x -= lo;
  if (x < 0) sign = -1, x = -x;
  double extra = fmod(x, span);
  if (fmod(floor(x / span), 2) == 0) return *g = sign, extra + lo; /* an even number of flips */
  return *g = -sign, span - extra + lo;
}

/* compute_coordinates: border / reflection padding of an unnormalized coordinate. */
static double pad_coord(double x, int64_t size, const gmode* m, double* g) {
  double gc, gr = 1;
  if (m->pad == GS_ZEROS) return *g = 1, x;
  if (m->pad == GS_REFLECTION)
    x = m->align ? reflect(x, 0, 2 * (size - 1), &gr) : reflect(x, -1, 2 * size - 1, &gr);
  x = clip(x, size, &gc);
  *g = gr * gc;
  return x;
}

/* A coordinate CPU's int64 cast would put out of range (NaN, inf, huge) maps to an index far
 * out of range, with room for the neighbouring taps. */
#define GS_FAR ((int64_t)1 << 62)
static int64_t to_index(double x) { return fabs(x) < (double)GS_FAR ? (int64_t)x : -GS_FAR; }

static void taps_of(gtaps* t, double coord, int64_t size, const gmode* m) {
  double x = m->align ? ((coord + 1) / 2) * (double)(size - 1) : ((coord + 1) * (double)size - 1) / 2;
  t->mult = m->align ? (double)(size - 1) / 2 : (double)size / 2;
  if (m->interp == GS_BICUBIC) {
    /* taps at floor(x) - 1 .. + 2, each padded on its own (get_value_bounded) */
    const double A = -0.75;
    double f = floor(x), s = x - f, g;
    double u[4] = {s + 1, s, 1 - s, 2 - s};
    t->n = 4;
    for (int k = 0; k < 4; k++) {
      double a = u[k];
      int outer = k == 0 || k == 3;
      t->w[k] = outer ? ((A * a - 5 * A) * a + 8 * A) * a - 4 * A : ((A + 2) * a - (A + 3)) * a * a + 1;
      /* d w / d x: the distance a grows with x for the two left taps and shrinks for the right */
      double da = outer ? (3 * A * a - 10 * A) * a + 8 * A : (3 * (A + 2) * a - 2 * (A + 3)) * a;
      t->dw[k] = k < 2 ? da : -da;
      t->i[k] = to_index(pad_coord(f - 1 + k, size, m, &g));
    }
    return;
  }
  double g;
  x = pad_coord(x, size, m, &g);
  t->mult *= g;
  if (m->interp == GS_NEAREST) {
    t->n = 1;
    t->i[0] = to_index(nearbyint(x));
    t->w[0] = 1;
    t->dw[0] = 0;
    return;
  }
  double f = floor(x);
  int64_t i = to_index(f);
  t->n = 2;
  t->i[0] = i;
  t->i[1] = i + 1;
  t->w[0] = f + 1 - x;
  t->w[1] = x - f;
  t->dw[0] = -1;
  t->dw[1] = 1;
}

static const gtaps unit = {1, {0}, {1}, {0}, 0};

/* Geometry shared by forward and backward: sizes and strides padded to 3 spatial dims. */
typedef struct {
  gmode m;
  int64_t N, C, is[3], os[3];
  int64_t si[5], sg[5]; /* input (N, C, d, h, w), grid (N, d, h, w, coord) element strides */
} ggeom;

/* a0: input; grid, interpolation_mode, padding_mode, align_corners follow it */
#define GRID_LAYOUT(k)                                                                              \
  (TPURT_ARG_##k##_grid == TPURT_ARG_##k##_input + 1 &&                                             \
   TPURT_ARG_##k##_interpolation_mode == TPURT_ARG_##k##_input + 2 &&                               \
   TPURT_ARG_##k##_padding_mode == TPURT_ARG_##k##_input + 3 &&                                     \
   TPURT_ARG_##k##_align_corners == TPURT_ARG_##k##_input + 4)
_Static_assert(GRID_LAYOUT(grid_sampler_2d) && GRID_LAYOUT(grid_sampler_3d) && GRID_LAYOUT(grid_sampler_2d_backward) &&
                   GRID_LAYOUT(grid_sampler_3d_backward),
               "grid_sampler schemas: input, grid, interpolation_mode, padding_mode, align_corners in a row");
#undef GRID_LAYOUT
static void geom_init(ggeom* G, const tpurt_op_call* c, int nsp, int a0) {
  const tpurt_tensor *in = &c->args[a0].t, *grid = &c->args[a0 + 1].t;
  G->m = (gmode){nsp, (int)tpurt_value_i(&c->args[a0 + 2]), (int)tpurt_value_i(&c->args[a0 + 3]),
                 (int)tpurt_value_i(&c->args[a0 + 4])};
  G->N = in->sizes[0];
  G->C = in->sizes[1];
  G->si[0] = in->strides[0];
  G->si[1] = in->strides[1];
  G->sg[0] = grid->strides[0];
  G->sg[4] = grid->strides[grid->ndim - 1];
  for (int i = 0; i < 3; i++) {
    int j = i - (3 - nsp);
    G->is[i] = j < 0 ? 1 : in->sizes[2 + j];
    G->os[i] = j < 0 ? 1 : grid->sizes[1 + j];
    G->si[2 + i] = j < 0 ? 0 : in->strides[2 + j];
    G->sg[1 + i] = j < 0 ? 0 : grid->strides[1 + j];
  }
}

/* The taps of grid point (n, d, h, w): t[0] depth, t[1] height, t[2] width. The grid's
 * last dim holds x (width) first. */
static void point_taps(const ggeom* G, const tpurt_tensor* grid, int64_t n, int64_t d, int64_t h, int64_t w, gtaps t[3]) {
  int64_t base = n * G->sg[0] + d * G->sg[1] + h * G->sg[2] + w * G->sg[3];
  size_t es = tpurt_dtype_size((tpurt_dtype)grid->dtype);
  for (int i = 0; i < 3; i++) {
    int k = 2 - i; /* coordinate index */
    if (k >= G->m.nsp) {
      t[i] = unit;
      continue;
    }
    double v = tpurt_load_f64((const char*)grid->data + (base + k * G->sg[4]) * (int64_t)es, grid->dtype);
    taps_of(&t[i], v, G->is[i], &G->m);
  }
}

static int inside(int64_t i, int64_t n) { return i >= 0 && i < n; }

#define FOR_POINTS(G, ...)                                 \
  for (int64_t n = 0; n < (G)->N; n++)                     \
    for (int64_t d = 0; d < (G)->os[0]; d++)               \
      for (int64_t h = 0; h < (G)->os[1]; h++)             \
        for (int64_t w = 0; w < (G)->os[2]; w++) __VA_ARGS__

_Static_assert(TPURT_ARG_grid_sampler_3d_input == TPURT_ARG_grid_sampler_2d_input && TPURT_ARG_grid_sampler_3d_grid == TPURT_ARG_grid_sampler_2d_grid &&
                   TPURT_ARG_grid_sampler_3d_interpolation_mode == TPURT_ARG_grid_sampler_2d_interpolation_mode &&
                   TPURT_ARG_grid_sampler_3d_padding_mode == TPURT_ARG_grid_sampler_2d_padding_mode &&
                   TPURT_ARG_grid_sampler_3d_align_corners == TPURT_ARG_grid_sampler_2d_align_corners,
               "forward serves grid_sampler_2d and grid_sampler_3d");
static tpurt_status forward(const tpurt_op_call* c, int nsp) {
  /* grid_sampler_Nd(input, grid, interpolation_mode, padding_mode, align_corners) */
  ggeom G;
  geom_init(&G, c, nsp, TPURT_ARG_grid_sampler_2d_input);
  const tpurt_tensor *in = &TPURT_ARG(c, grid_sampler_2d, input)->t, *grid = &TPURT_ARG(c, grid_sampler_2d, grid)->t, *out = &c->outs[0];
  size_t ies = tpurt_dtype_size((tpurt_dtype)in->dtype), oes = tpurt_dtype_size((tpurt_dtype)out->dtype);
  int64_t so[5] = {out->strides[0], out->strides[1], 0, 0, 0};
  for (int i = 0; i < 3; i++) so[2 + i] = i < 3 - nsp ? 0 : out->strides[2 + i - (3 - nsp)];
  FOR_POINTS(&G, {
    gtaps t[3];
    point_taps(&G, grid, n, d, h, w, t);
    for (int64_t ch = 0; ch < G.C; ch++) {
      const char* src = (const char*)in->data + (n * G.si[0] + ch * G.si[1]) * (int64_t)ies;
      double v = 0;
      for (int a = 0; a < t[0].n; a++)
        for (int b = 0; b < t[1].n; b++)
          for (int e = 0; e < t[2].n; e++) {
            if (!inside(t[0].i[a], G.is[0]) || !inside(t[1].i[b], G.is[1]) || !inside(t[2].i[e], G.is[2])) continue;
            int64_t off = t[0].i[a] * G.si[2] + t[1].i[b] * G.si[3] + t[2].i[e] * G.si[4];
            v += t[0].w[a] * t[1].w[b] * t[2].w[e] * tpurt_load_f64(src + off * (int64_t)ies, in->dtype);
          }
      int64_t o = n * so[0] + ch * so[1] + d * so[2] + h * so[3] + w * so[4];
      tpurt_store_f64((char*)out->data + o * (int64_t)oes, out->dtype, v);
    }
  })
  return TPURT_OK;
}

_Static_assert(TPURT_ARG_grid_sampler_3d_backward_grad_output == TPURT_ARG_grid_sampler_2d_backward_grad_output &&
                   TPURT_ARG_grid_sampler_3d_backward_input == TPURT_ARG_grid_sampler_2d_backward_input &&
                   TPURT_ARG_grid_sampler_3d_backward_grid == TPURT_ARG_grid_sampler_2d_backward_grid &&
                   TPURT_ARG_grid_sampler_3d_backward_interpolation_mode == TPURT_ARG_grid_sampler_2d_backward_interpolation_mode &&
                   TPURT_ARG_grid_sampler_3d_backward_padding_mode == TPURT_ARG_grid_sampler_2d_backward_padding_mode &&
                   TPURT_ARG_grid_sampler_3d_backward_align_corners == TPURT_ARG_grid_sampler_2d_backward_align_corners,
               "backward serves grid_sampler_2d_backward and grid_sampler_3d_backward");
/* The backward's accumulators: ni grad_input and ng grad_grid elements, in double. */
static size_t acc_bytes(int64_t ni, int64_t ng) { return sizeof(double) * (size_t)(ni + ng + 1); }

static tpurt_status backward(const tpurt_op_call* c, int nsp) {
  /* grid_sampler_Nd_backward(grad_output, input, grid, interpolation_mode, padding_mode,
   * align_corners, output_mask) -> (grad_input, grad_grid) */
  ggeom G;
  geom_init(&G, c, nsp, TPURT_ARG_grid_sampler_2d_backward_input);
  const tpurt_tensor *go = &TPURT_ARG(c, grid_sampler_2d_backward, grad_output)->t, *in = &TPURT_ARG(c, grid_sampler_2d_backward, input)->t, *grid = &TPURT_ARG(c, grid_sampler_2d_backward, grid)->t;
  const tpurt_tensor *gi = &c->outs[0], *gg = &c->outs[1];
  int want_gi = gi->ndim >= 0 && gi->data != NULL;
  int64_t ni = want_gi ? tpurt_numel(gi) : 0, ng = tpurt_numel(gg);
  double* acc = tpurt_temp_zeroed(acc_bytes(ni, ng));
  if (!acc) return TPURT_ERR_OOM;
  double *agi = acc, *agg = acc + ni;
  size_t ies = tpurt_dtype_size((tpurt_dtype)in->dtype), ges = tpurt_dtype_size((tpurt_dtype)go->dtype);
  int64_t sgo[5] = {go->strides[0], go->strides[1], 0, 0, 0};
  for (int i = 0; i < 3; i++) sgo[2 + i] = i < 3 - nsp ? 0 : go->strides[2 + i - (3 - nsp)];
  int64_t plane = G.is[0] * G.is[1] * G.is[2];
  int64_t pt = 0;
  FOR_POINTS(&G, {
    gtaps t[3];
    point_taps(&G, grid, n, d, h, w, t);
    double gd[3] = {0, 0, 0}; /* d loss / d source coordinate, per spatial dim */
    for (int64_t ch = 0; ch < G.C; ch++) {
      const char* src = (const char*)in->data + (n * G.si[0] + ch * G.si[1]) * (int64_t)ies;
      double g = tpurt_load_f64((const char*)go->data + (n * sgo[0] + ch * sgo[1] + d * sgo[2] + h * sgo[3] + w * sgo[4]) *
                                                         (int64_t)ges, go->dtype);
      double* ap = agi + (n * G.C + ch) * plane;
      for (int a = 0; a < t[0].n; a++)
        for (int b = 0; b < t[1].n; b++)
          for (int e = 0; e < t[2].n; e++) {
            int64_t i0 = t[0].i[a], i1 = t[1].i[b], i2 = t[2].i[e];
            if (!inside(i0, G.is[0]) || !inside(i1, G.is[1]) || !inside(i2, G.is[2])) continue;
            double wa = t[0].w[a], wb = t[1].w[b], we = t[2].w[e];
            if (want_gi) ap[(i0 * G.is[1] + i1) * G.is[2] + i2] += wa * wb * we * g;
            double v = g * tpurt_load_f64(src + (i0 * G.si[2] + i1 * G.si[3] + i2 * G.si[4]) * (int64_t)ies, in->dtype);
            gd[0] += t[0].dw[a] * wb * we * v;
            gd[1] += wa * t[1].dw[b] * we * v;
            gd[2] += wa * wb * t[2].dw[e] * v;
          }
    }
    for (int k = 0; k < nsp; k++) agg[pt * nsp + k] = t[2 - k].mult * gd[2 - k];
    pt++;
  })
  tpurt_status s = want_gi ? tpurt_store_dense(gi, agi, TPURT_F64) : TPURT_OK;
  if (!s) s = tpurt_store_dense(gg, agg, TPURT_F64);
  tpurt_temp_release(acc);
  return s;
}

tpurt_status tpurt_kernel_grid_sampler_2d(const tpurt_op_call* c) { return forward(c, 2); }
tpurt_status tpurt_kernel_grid_sampler_3d(const tpurt_op_call* c) { return forward(c, 3); }
tpurt_status tpurt_kernel_grid_sampler_2d_backward(const tpurt_op_call* c) { return backward(c, 2); }
tpurt_status tpurt_kernel_grid_sampler_3d_backward(const tpurt_op_call* c) { return backward(c, 3); }

/* The backward's one temporary; a grad_input not asked for (undefined) takes no room. */
static tpurt_status plan_backward(const tpurt_op_call* c, tpurt_plan* p) {
  const tpurt_tensor *gi = &c->outs[0], *gg = &c->outs[1];
  p->scratch_bytes += tpurt_temp_bytes(acc_bytes(gi->ndim >= 0 ? tpurt_numel(gi) : 0, tpurt_numel(gg)));
  return TPURT_OK;
}
tpurt_status tpurt_plan_grid_sampler_2d_backward(const tpurt_op_call* c, tpurt_plan* p) { return plan_backward(c, p); }
tpurt_status tpurt_plan_grid_sampler_3d_backward(const tpurt_op_call* c, tpurt_plan* p) { return plan_backward(c, p); }
