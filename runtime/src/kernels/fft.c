/* Discrete Fourier transforms: ATen's _fft_c2c, _fft_r2c and _fft_c2r (every torch.fft function
 * and stft/istft lower to these three).
 *
 * The signal is loaded into a dense complex-double buffer, transformed one dim at a time over
 * every line along that dim (lines split across the worker pool; each line is computed the same
 * way whatever thread runs it), scaled and stored. One 1-d plan per transformed dim: a
 * self-sorting (Stockham) mixed-radix FFT with radix 4/2/3/5 butterflies and a generic one for
 * other primes, or Bluestein's chirp-z convolution (at a 2^a 3^b 5^c length) when the length has
 * a large prime factor. Working in double with twiddles computed directly (never by recurrence)
 * keeps complex64 results closer to the exact transform than pocketfft's float32 arithmetic.
 *
 * Multi-dim real transforms follow pocketfft's order, which matters for inputs that are not
 * exactly Hermitian: r2c transforms the last dim first, then the others over the kept half;
 * c2r transforms the other dims over the given half first, then the last dim, reading only
 * the real part of its zero (and, for even lengths, Nyquist) frequency. */
#include <stdlib.h>

#include "reduce.h"

typedef struct {
  double re, im;
} cplx;

static inline cplx cmul(cplx a, cplx b) { return (cplx){a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re}; }
static inline cplx cadd(cplx a, cplx b) { return (cplx){a.re + b.re, a.im + b.im}; }
static inline cplx csub(cplx a, cplx b) { return (cplx){a.re - b.re, a.im - b.im}; }
static inline cplx cconj(cplx a) { return (cplx){a.re, -a.im}; }
static inline cplx cmul_mi(cplx a) { return (cplx){a.im, -a.re}; } /* a * -i */

/* exp(-2 pi i num / den) for 0 <= num < den, reduced to the first octant so that large
 * lengths keep full double accuracy. */
static cplx root_of_unity(int64_t num, int64_t den) {
  /* angle = 2 pi num/den; fold into [0, pi/4] by the symmetries of cos/sin */
  int64_t n8 = num * 8; /* num < den <= 2^40 or so: no overflow */
  int oct = (int)(n8 / den);
  int64_t rem = n8 - (int64_t)oct * den; /* angle = (oct + rem/den) * pi/4 */
  double c, s;
  if (oct & 1) {
    double a = (double)(den - rem) / (double)den * (M_PI / 4);
    c = sin(a), s = cos(a);
  } else {
    double a = (double)rem / (double)den * (M_PI / 4);
    c = cos(a), s = sin(a);
  }
  /* (c, s) = (cos, sin) of the angle within its quarter turn; rotate by quarter turns */
  double co, si;
  switch (oct >> 1) {
    case 0: co = c, si = s; break;
    case 1: co = -s, si = c; break;
    case 2: co = -c, si = -s; break;
    default: co = s, si = -c; break;
  }
  return (cplx){co, -si};
}

/* ---------------------------------------------------------------- 1-d plans */
#define FFT_MAX_FACTORS 64
/* Lengths with a prime factor above this go to Bluestein: a generic radix-p pass costs p
 * complex multiply-adds per element, Bluestein about 3 FFTs of 2-4x the length. */
#define FFT_MAX_DIRECT_PRIME 61

/* A plan is shaped from its length alone (plan_shape: the hook sizes it so), then its tables
 * are filled in memory the pass provides (plan_fill). */
typedef struct fft_plan {
  int64_t n;
  int nf;
  int factors[FFT_MAX_FACTORS];
  cplx* roots; /* exp(-2 pi i t / n), t in [0, n): direct plans */
  /* Bluestein: conv of x * chirp with conj(chirp), length m (2^a 3^b 5^c) */
  int64_t m;
  cplx* chirp;  /* exp(-pi i k^2 / n), k in [0, n) */
  cplx* kernel; /* FFT_m of the conj(chirp) kernel, divided by m */
  struct fft_plan* sub;
  int64_t scratch; /* complex scratch elements fft_exec needs */
} fft_plan;

static void fft_exec(const fft_plan* p, cplx* x, cplx* tmp);

/* Smallest 2^a 3^b 5^c >= n: Bluestein's convolution length, padded no more than needed. */
static int64_t smooth_size(int64_t n) {
  int64_t best = 1;
  while (best < n) best *= 2;
  for (int64_t f5 = 1; f5 < best; f5 *= 5)
    for (int64_t f35 = f5; f35 < best; f35 *= 3) {
      int64_t v = f35;
      while (v < n) v *= 2;
      if (v < best) best = v;
    }
  return best;
}

/* p's factors and, for Bluestein, its sub plan (shaped in `sub`); no tables yet. */
static void plan_shape(fft_plan* p, fft_plan* sub, int64_t n) {
  memset(p, 0, sizeof *p);
  p->n = n;
  int64_t r = n;
  int big_prime = 0;
  while (r % 4 == 0) p->factors[p->nf++] = 4, r /= 4;
  if (r % 2 == 0) p->factors[p->nf++] = 2, r /= 2;
  for (int64_t f = 3; r > 1; f += 2) {
    if (f * f > r) f = r; /* r is prime */
    while (r % f == 0) {
      if (f > FFT_MAX_DIRECT_PRIME) big_prime = 1;
      p->factors[p->nf++] = (int)(f > FFT_MAX_DIRECT_PRIME ? 0 : f), r /= f;
    }
  }
  if (!big_prime) {
    p->scratch = n;
    return;
  }
  p->nf = 0;
  p->m = smooth_size(2 * n - 1);
  p->sub = sub;
  plan_shape(sub, NULL, p->m); /* 2^a 3^b 5^c: a direct plan */
  p->scratch = p->m + sub->scratch;
}

/* Complex entries of p's tables: the roots, or the chirp, the kernel and the sub plan's. */
static int64_t plan_elems(const fft_plan* p) { return p->sub ? p->n + p->m + plan_elems(p->sub) : p->n; }

/* Fills p's tables into mem (plan_elems(p) entries); tmp holds p->scratch entries. */
static void plan_fill(fft_plan* p, cplx* mem, cplx* tmp) {
  const int64_t n = p->n;
  if (!p->sub) {
    p->roots = mem;
    for (int64_t t = 0; t < n; t++) p->roots[t] = root_of_unity(t, n);
    return;
  }
  const int64_t m = p->m;
  p->chirp = mem, p->kernel = mem + n;
  plan_fill(p->sub, mem + n + m, tmp);
  /* k^2 mod 2n, kept exact by (k+1)^2 = k^2 + 2k + 1; exp(-pi i t/n) = exp(-2 pi i t/(2n)) */
  for (int64_t k = 0, t = 0; k < n; t = (t + 2 * k + 1) % (2 * n), k++) p->chirp[k] = root_of_unity(t, 2 * n);
  memset(p->kernel, 0, (size_t)m * sizeof(cplx));
  for (int64_t k = 0; k < n; k++) {
    p->kernel[k] = cconj(p->chirp[k]);
    if (k) p->kernel[m - k] = cconj(p->chirp[k]);
  }
  fft_exec(p->sub, p->kernel, tmp);
  for (int64_t k = 0; k < m; k++) p->kernel[k].re /= (double)m, p->kernel[k].im /= (double)m;
}

/* One Stockham pass of radix p: A holds L-point transforms of the R = n/L residue classes
 * (A[j*R + k] = transform k, frequency j); B gets the L*p-point transforms of the R/p classes.
 * The body turns a[0..p) (twiddled inputs) into outputs dst[m * os]. */
#define STOCKHAM_PASS(...)                                                                  \
  for (int64_t j = 0; j < L; j++) {                                                         \
    for (int q = 1; q < p; q++) tw[q] = w[q * j * Rp]; /* exp(-2 pi i q j / (L p)) */       \
    for (int64_t k = 0; k < Rp; k++) {                                                      \
      const cplx* src = A + j * R + k;                                                      \
      cplx* dst = B + j * Rp + k;                                                           \
      a[0] = src[0];                                                                        \
      for (int q = 1; q < p; q++) a[q] = cmul(src[q * Rp], tw[q]);                          \
      __VA_ARGS__;                                                                          \
    }                                                                                       \
  }

static void stockham_pass(const fft_plan* pl, int p, int64_t L, const cplx* A, cplx* B) {
  const int64_t n = pl->n, Rp = n / (L * p), R = Rp * p, os = L * Rp;
  const cplx* w = pl->roots;
  cplx a[FFT_MAX_DIRECT_PRIME], tw[FFT_MAX_DIRECT_PRIME];
  switch (p) {
    case 2:
      STOCKHAM_PASS(dst[0] = cadd(a[0], a[1]); dst[os] = csub(a[0], a[1]));
      break;
    case 3: {
      const double s3 = 0.86602540378443864676;
      STOCKHAM_PASS({
        cplx t = cadd(a[1], a[2]), u = {a[0].re - 0.5 * t.re, a[0].im - 0.5 * t.im};
        cplx d = csub(a[1], a[2]), v = {s3 * d.im, -s3 * d.re}; /* -i s3 (a1 - a2) */
        dst[0] = cadd(a[0], t), dst[os] = cadd(u, v), dst[2 * os] = csub(u, v);
      });
      break;
    }
    case 4:
      STOCKHAM_PASS({
        cplx s02 = cadd(a[0], a[2]), d02 = csub(a[0], a[2]);
        cplx s13 = cadd(a[1], a[3]), d13 = cmul_mi(csub(a[1], a[3]));
        dst[0] = cadd(s02, s13), dst[os] = cadd(d02, d13);
        dst[2 * os] = csub(s02, s13), dst[3 * os] = csub(d02, d13);
      });
      break;
    case 5: {
      const double c1 = 0.30901699437494742410, c2 = -0.80901699437494742410;
      const double s1 = 0.95105651629515357212, s2 = 0.58778525229247312917;
      STOCKHAM_PASS({
        cplx t1 = cadd(a[1], a[4]), t2 = cadd(a[2], a[3]);
        cplx d1 = csub(a[1], a[4]), d2 = csub(a[2], a[3]);
        cplx u1 = {a[0].re + c1 * t1.re + c2 * t2.re, a[0].im + c1 * t1.im + c2 * t2.im};
        cplx u2 = {a[0].re + c2 * t1.re + c1 * t2.re, a[0].im + c2 * t1.im + c1 * t2.im};
        /* -i (s1 d1 + s2 d2) and -i (s2 d1 - s1 d2) */
        cplx v1 = {s1 * d1.im + s2 * d2.im, -(s1 * d1.re + s2 * d2.re)};
        cplx v2 = {s2 * d1.im - s1 * d2.im, -(s2 * d1.re - s1 * d2.re)};
        dst[0] = cadd(a[0], cadd(t1, t2));
        dst[os] = cadd(u1, v1), dst[4 * os] = csub(u1, v1);
        dst[2 * os] = cadd(u2, v2), dst[3 * os] = csub(u2, v2);
      });
      break;
    }
    default: {
      const int64_t step = n / p; /* exp(-2 pi i t / p) = w[(t mod p) * step] */
      STOCKHAM_PASS({
        for (int mm = 0; mm < p; mm++) {
          cplx acc = a[0];
          for (int q = 1; q < p; q++) acc = cadd(acc, cmul(a[q], w[(int64_t)((q * mm) % p) * step]));
          dst[mm * os] = acc;
        }
      });
    }
  }
}
#undef STOCKHAM_PASS

/* Forward transform of x[0..n) in place; tmp holds p->scratch elements. */
static void fft_exec(const fft_plan* p, cplx* x, cplx* tmp) {
  const int64_t n = p->n;
  if (!p->sub) {
    cplx *a = x, *b = tmp;
    int64_t L = 1;
    for (int f = 0; f < p->nf; f++) {
      stockham_pass(p, p->factors[f], L, a, b);
      L *= p->factors[f];
      cplx* t = a;
      a = b, b = t;
    }
    if (a != x) memcpy(x, a, (size_t)n * sizeof(cplx));
    return;
  }
  const int64_t m = p->m;
  cplx *y = tmp, *rest = tmp + m;
  for (int64_t k = 0; k < n; k++) y[k] = cmul(x[k], p->chirp[k]);
  memset(y + n, 0, (size_t)(m - n) * sizeof(cplx));
  fft_exec(p->sub, y, rest);
  /* inverse FFT of y * kernel as conj(FFT(conj(.))) */
  for (int64_t k = 0; k < m; k++) y[k] = cconj(cmul(y[k], p->kernel[k]));
  fft_exec(p->sub, y, rest);
  for (int64_t k = 0; k < n; k++) x[k] = cmul(cconj(y[k]), p->chirp[k]);
}

/* ---------------------------------------------------------------- lines */
/* Where a pass reads its lines from or writes them to: the op's input or output tensor, or
 * the dense complex-double work buffer that carries a multi-dim transform between passes. */
typedef struct {
  char* data;
  int dtype; /* a tpurt_dtype, or -1 for the work buffer */
  int64_t esize;
  const int64_t* strides;
} endpoint;

static endpoint tensor_end(const tpurt_tensor* t) {
  return (endpoint){t->data, t->dtype, (int64_t)tpurt_dtype_size((tpurt_dtype)t->dtype), t->strides};
}

/* Lines along a dim that is not the innermost one are moved in groups of up to FFT_GROUP
 * neighbours, element k of every line of a group together, so that each cache line and page
 * touched serves the whole group (about 2x faster for 1024-point lines). */
#define FFT_GROUP 32

/* x[v*n + k] <- entry k (k < cnt, stride st) of line v at element offset off[v], v < g
 * (conjugated when conj) */
static void read_lines(const endpoint* e, const int64_t* off, int g, int64_t st, int64_t cnt, cplx* x, int64_t n,
                       int conj) {
  const double sg = conj ? -1 : 1;
  for (int64_t k = 0; k < cnt; k++)
    for (int v = 0; v < g; v++) {
      const int64_t i = off[v] + k * st;
      cplx* o = x + v * n + k;
      if (e->dtype < 0)
        *o = (cplx){((const cplx*)e->data)[i].re, sg * ((const cplx*)e->data)[i].im};
      else if (e->dtype == TPURT_C64)
        *o = (cplx){((const tpurt_c64*)e->data)[i].re, sg * ((const tpurt_c64*)e->data)[i].im};
      else if (e->dtype == TPURT_F32)
        *o = (cplx){((const float*)e->data)[i], 0};
      else
        *o = (cplx){tpurt_load_f64(e->data + i * e->esize, e->dtype), 0};
    }
}

/* entry k (k < cnt, stride st) of line v at offset off[v] <- scale * x[v*n + k] (conjugated
 * when conj; the real part for a real tensor) */
static void write_lines(const endpoint* e, const int64_t* off, int g, int64_t st, int64_t cnt, const cplx* x,
                        int64_t n, int conj, double scale) {
  const double si = conj ? -scale : scale;
  for (int64_t k = 0; k < cnt; k++)
    for (int v = 0; v < g; v++) {
      const int64_t i = off[v] + k * st;
      const cplx y = x[v * n + k];
      if (e->dtype < 0)
        ((cplx*)e->data)[i] = (cplx){scale * y.re, si * y.im};
      else if (e->dtype == TPURT_C64)
        ((tpurt_c64*)e->data)[i] = (tpurt_c64){(float)(scale * y.re), (float)(si * y.im)};
      else if (e->dtype == TPURT_F32)
        ((float*)e->data)[i] = (float)(scale * y.re);
      else
        tpurt_store_f64(e->data + i * e->esize, e->dtype, scale * y.re);
    }
}

typedef enum {
  LINE_C2C, /* n entries in, n out */
  LINE_C2R, /* `given` entries of a Hermitian spectrum in, n real values out (inverse only) */
  LINE_COPY, /* no transform: a transform over no dims is a copy */
} line_kind;

/* One pass: an n-point transform of every line along `dim` of `region`. */
typedef struct {
  endpoint src, dst;
  const fft_plan* plan;
  int ndim, dim;
  const int64_t* region; /* sizes of the lines' index space (its size along dim is ignored) */
  int inverse;
  line_kind kind;
  int64_t given; /* entries read per line (< n: zeros follow, then for LINE_C2R the Hermitian
                  * extension from n/2+1 on) */
  int64_t kept;  /* entries written per line */
  double scale;
  int64_t group; /* lines moved together */
} pass_job;

/* Lines [begin, end), in the calling worker's slice: a group of lines, then the plan's scratch. */
static void pass_lines(void* ctx, void* slice, int64_t begin, int64_t end) {
  const pass_job* J = ctx;
  cplx* x = slice;
  const int64_t n = J->plan->n, ss = J->src.strides[J->dim], ds = J->dst.strides[J->dim], group = J->group;
  cplx* tmp = x + group * n;
  const int64_t zero_to = J->kind == LINE_C2R ? n / 2 + 1 : n;
  for (int64_t l0 = begin; l0 < end; l0 += group) {
    const int g = (int)(end - l0 < group ? end - l0 : group);
    int64_t so[FFT_GROUP], dof[FFT_GROUP];
    for (int v = 0; v < g; v++) {
      int64_t r = l0 + v;
      so[v] = dof[v] = 0;
      for (int d = J->ndim - 1; d >= 0; d--) {
        if (d == J->dim) continue;
        int64_t i = r % J->region[d];
        so[v] += i * J->src.strides[d], dof[v] += i * J->dst.strides[d];
        r /= J->region[d];
      }
    }
    /* the inverse transform is conj(FFT(conj(X))) */
    read_lines(&J->src, so, g, ss, J->given, x, n, J->inverse);
    for (int v = 0; v < g; v++) {
      cplx* xv = x + v * n;
      memset(xv + J->given, 0, (size_t)(zero_to - J->given) * sizeof(cplx));
      /* conj of the Hermitian extension X[k] = conj(X[n - k]) */
      for (int64_t k = zero_to; k < n; k++) xv[k] = cconj(xv[n - k]);
      if (J->kind != LINE_COPY) fft_exec(J->plan, xv, tmp);
    }
    write_lines(&J->dst, dof, g, ds, J->kept, x, n, J->inverse, J->scale);
  }
}

/* ---------------------------------------------------------------- kernels */
/* A transform as a sequence of 1-d passes over dims[0..ndims): the first reads the input, the
 * last writes the output (scaled), and a dense work buffer of `bsizes` carries the rest. */
typedef struct {
  const char* op;
  const tpurt_tensor *in, *out;
  int ndims;
  int dims[TPURT_MAX_DIMS];
  double scale;
  int64_t bsizes[TPURT_MAX_DIMS], bstrides[TPURT_MAX_DIMS];
  cplx* buf;
  /* A plan hook's run: nothing is read, written or taken, only the temporaries' bytes counted:
   * the work buffer's, and the largest pass's (each gives its one temporary back, popping it
   * from the call's scratch, before the next takes its own). */
  int measure;
  int64_t buf_bytes, pass_bytes;
} fft_run;


/* One temporary per pass: the plan's tables, then the slices of tpurt_parallel_sliced, which
 * the pool's threads claim lines on. */
static tpurt_status run_pass(fft_run* R, pass_job* J, int64_t n) {
  int64_t lines = 1;
  for (int d = 0; d < J->ndim; d++)
    if (d != J->dim) lines *= J->region[d];
  if (lines == 0) return TPURT_OK;
  fft_plan plan, sub;
  plan_shape(&plan, &sub, n);
  J->plan = &plan;
  const int64_t ss = J->src.strides[J->dim], ds = J->dst.strides[J->dim];
  int64_t group = ss == 1 && ds == 1 ? 1 : (1 << 16) / n;
  J->group = group < 1 ? 1 : group > FFT_GROUP ? FFT_GROUP : group;
  const int64_t per = J->group * n + plan.scratch + 1, grain = 1 + 32768 / n;
  size_t bytes = sizeof(cplx) * (size_t)(plan_elems(&plan) + tpurt_sliced_workers(lines, grain) * per);
  if (R->measure) {
    if (tpurt_temp_bytes(bytes) > R->pass_bytes) R->pass_bytes = tpurt_temp_bytes(bytes);
    return TPURT_OK;
  }
  cplx* block = tpurt_temp(bytes);
  if (!block) return TPURT_ERR_OOM;
  cplx* work = block + plan_elems(&plan);
  plan_fill(&plan, block, work); /* worker 0's slice is free until the loop */
  tpurt_parallel_sliced(lines, grain, work, sizeof(cplx) * (size_t)per, NULL, pass_lines, J);
  tpurt_temp_release(block);
  return TPURT_OK;
}

/* dims (wrapped, distinct) and the normalization scale of a signal of `sizes` */
_Static_assert(TPURT_ARG_fft_r2c_self == TPURT_ARG_fft_c2c_self && TPURT_ARG_fft_r2c_dim == TPURT_ARG_fft_c2c_dim &&
                   TPURT_ARG_fft_r2c_normalization == TPURT_ARG_fft_c2c_normalization &&
                   TPURT_ARG_fft_c2r_self == TPURT_ARG_fft_c2c_self && TPURT_ARG_fft_c2r_dim == TPURT_ARG_fft_c2c_dim &&
                   TPURT_ARG_fft_c2r_normalization == TPURT_ARG_fft_c2c_normalization,
               "parse serves _fft_c2c, _fft_r2c and _fft_c2r: self, dim, normalization alike");
static tpurt_status parse(const tpurt_op_call* c, const char* op, const int64_t* sizes, fft_run* R) {
  const tpurt_value* dv = TPURT_ARG(c, fft_c2c, dim);
  const int ndim = TPURT_ARG(c, fft_c2c, self)->t.ndim;
  R->op = op, R->in = &TPURT_ARG(c, fft_c2c, self)->t, R->out = &c->outs[0], R->ndims = dv->n, R->buf = NULL;
  if (dv->n == 0 && strcmp(op, "_fft_c2c"))
    return tpurt_fail(TPURT_ERR_RUNTIME, "%s: at least one dim to transform is required", op);
  if (dv->n > ndim) return tpurt_fail(TPURT_ERR_RUNTIME, "%s: %d dims for a %d-dim tensor", op, dv->n, ndim);
  double signal = 1;
  for (int i = 0; i < dv->n; i++) {
    tpurt_status s = tpurt_wrap_dim(dv->ints[i], ndim, &R->dims[i]);
    if (s) return s;
    for (int k = 0; k < i; k++)
      if (R->dims[k] == R->dims[i]) return tpurt_fail(TPURT_ERR_RUNTIME, "%s: dim %d repeated", op, R->dims[i]);
    signal *= (double)sizes[R->dims[i]];
  }
  switch (TPURT_ARG(c, fft_c2c, normalization)->i) {
    case 0: R->scale = 1; break;
    case 1: R->scale = 1 / sqrt(signal); break;
    case 2: R->scale = 1 / signal; break;
    default: return tpurt_fail(TPURT_ERR_RUNTIME, "%s: unsupported normalization %lld", op, (long long)TPURT_ARG(c, fft_c2c, normalization)->i);
  }
  return TPURT_OK;
}

/* Pass i of the run over `region`: n-point lines, `given` read, `kept` written. */
static tpurt_status pass(fft_run* R, int i, const int64_t* region, int64_t n, int inverse, line_kind kind,
                         int64_t given, int64_t kept) {
  const int ndim = R->in->ndim, last = i == R->ndims - 1;
  if (n == 0) return tpurt_fail(TPURT_ERR_RUNTIME, "Invalid number of data points (0) specified");
  if (i == 0 && !last) { /* the buffer carries the passes from the first to the last */
    int64_t total = 1;
    for (int d = ndim - 1; d >= 0; d--) R->bstrides[d] = total, total *= R->bsizes[d];
    size_t bytes = (size_t)(total ? total : 1) * sizeof(cplx);
    if (R->measure) R->buf_bytes = tpurt_temp_bytes(bytes);
    else if (!(R->buf = tpurt_temp(bytes))) return TPURT_ERR_OOM;
  }
  const endpoint work = {(char*)R->buf, -1, sizeof(cplx), R->bstrides};
  pass_job J = {.src = i == 0 ? tensor_end(R->in) : work, .dst = last ? tensor_end(R->out) : work,
                .ndim = ndim, .dim = R->dims[i], .region = region, .inverse = inverse, .kind = kind,
                .given = given < n ? given : n, .kept = kept, .scale = last ? R->scale : 1};
  return run_pass(R, &J, n);
}

typedef tpurt_status (*fft_body)(const tpurt_op_call* c, fft_run* R);

static tpurt_status run(const tpurt_op_call* c, fft_body body) {
  fft_run R = {0};
  tpurt_status s = body(c, &R);
  tpurt_temp_release(R.buf);
  return s;
}

static tpurt_status measure(const tpurt_op_call* c, tpurt_plan* p, fft_body body) {
  fft_run R = {.measure = 1};
  tpurt_status s = body(c, &R);
  if (!s) p->scratch_bytes += R.buf_bytes + R.pass_bytes;
  return s;
}

/* _fft_c2c(self, dim[], normalization, forward) */
static tpurt_status c2c(const tpurt_op_call* c, fft_run* R) {
  tpurt_status s = parse(c, "_fft_c2c", TPURT_ARG(c, fft_c2c, self)->t.sizes, R);
  if (s || tpurt_numel(R->out) == 0) return s;
  memcpy(R->bsizes, R->in->sizes, sizeof R->bsizes);
  if (R->ndims == 0) {
    if (R->in->ndim == 0) {
      if (!R->measure) *(tpurt_c64*)R->out->data = *(const tpurt_c64*)R->in->data;
      return TPURT_OK;
    }
    R->ndims = 1, R->dims[0] = R->in->ndim - 1;
    return pass(R, 0, R->in->sizes, R->in->sizes[R->dims[0]], 0, LINE_COPY, R->in->sizes[R->dims[0]],
                R->in->sizes[R->dims[0]]);
  }
  for (int i = 0; i < R->ndims && !s; i++) {
    int64_t n = R->in->sizes[R->dims[i]];
    s = pass(R, i, R->in->sizes, n, !TPURT_ARG(c, fft_c2c, forward)->i, LINE_C2C, n, n);
  }
  return s;
}
tpurt_status tpurt_kernel_fft_c2c(const tpurt_op_call* c) { return run(c, c2c); }
tpurt_status tpurt_plan_fft_c2c(const tpurt_op_call* c, tpurt_plan* p) { return measure(c, p, c2c); }

/* _fft_r2c(self, dim[], normalization, onesided): the last dim's transform first, then the
 * other dims over the part of it the output keeps */
static tpurt_status r2c(const tpurt_op_call* c, fft_run* R) {
  tpurt_status s = parse(c, "_fft_r2c", TPURT_ARG(c, fft_r2c, self)->t.sizes, R);
  if (s || tpurt_numel(R->out) == 0) return s;
  /* passes in the order last dim, dims[0], dims[1], ... */
  int last = R->dims[R->ndims - 1];
  memmove(R->dims + 1, R->dims, (size_t)(R->ndims - 1) * sizeof(int));
  R->dims[0] = last;
  int64_t region[TPURT_MAX_DIMS];
  memcpy(region, R->in->sizes, sizeof region);
  memcpy(R->bsizes, R->out->sizes, sizeof R->bsizes);
  const int64_t n = R->in->sizes[last], kept = R->out->sizes[last];
  s = pass(R, 0, region, n, 0, LINE_C2C, n, kept);
  region[last] = kept;
  for (int i = 1; i < R->ndims && !s; i++) {
    int64_t m = R->in->sizes[R->dims[i]];
    s = pass(R, i, region, m, 0, LINE_C2C, m, m);
  }
  return s;
}
tpurt_status tpurt_kernel_fft_r2c(const tpurt_op_call* c) { return run(c, r2c); }
tpurt_status tpurt_plan_fft_r2c(const tpurt_op_call* c, tpurt_plan* p) { return measure(c, p, r2c); }

/* _fft_c2r(self, dim[], normalization, last_dim_size): the other dims' inverse transforms over
 * the first last_dim_size/2+1 entries of the last dim, then its Hermitian inverse transform */
static tpurt_status c2r(const tpurt_op_call* c, fft_run* R) {
  tpurt_status s = parse(c, "_fft_c2r", c->outs[0].sizes, R);
  if (s || tpurt_numel(R->out) == 0) return s;
  const int last = R->dims[R->ndims - 1];
  const int64_t n = R->out->sizes[last], half = n / 2 + 1;
  const int64_t given = half < R->in->sizes[last] ? half : R->in->sizes[last];
  int64_t region[TPURT_MAX_DIMS];
  memcpy(region, R->out->sizes, sizeof region);
  memcpy(R->bsizes, R->out->sizes, sizeof R->bsizes);
  region[last] = given;
  for (int i = 0; i + 1 < R->ndims && !s; i++) {
    int64_t m = R->out->sizes[R->dims[i]];
    s = pass(R, i, region, m, 1, LINE_C2C, m, m);
  }
  if (!s) s = pass(R, R->ndims - 1, region, n, 1, LINE_C2R, given, n);
  return s;
}
tpurt_status tpurt_kernel_fft_c2r(const tpurt_op_call* c) { return run(c, c2r); }
tpurt_status tpurt_plan_fft_c2r(const tpurt_op_call* c, tpurt_plan* p) { return measure(c, p, c2r); }
