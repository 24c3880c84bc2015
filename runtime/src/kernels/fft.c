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

static void plan_free(fft_plan* p) {
  if (!p) return;
  free(p->roots), free(p->chirp), free(p->kernel);
  plan_free(p->sub);
  free(p);
}

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

static fft_plan* plan_new(int64_t n) {
  fft_plan* p = calloc(1, sizeof *p);
  if (!p) return NULL;
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
    p->roots = malloc((size_t)(n ? n : 1) * sizeof(cplx));
    if (!p->roots) return plan_free(p), NULL;
    for (int64_t t = 0; t < n; t++) p->roots[t] = root_of_unity(t, n);
    p->scratch = n;
    return p;
  }
  p->nf = 0;
  int64_t m = p->m = smooth_size(2 * n - 1);
  p->sub = plan_new(m);
  p->chirp = malloc((size_t)n * sizeof(cplx));
  p->kernel = calloc((size_t)m, sizeof(cplx));
  cplx* tmp = malloc((size_t)m * sizeof(cplx));
  if (!p->sub || !p->chirp || !p->kernel || !tmp) return free(tmp), plan_free(p), NULL;
  /* k^2 mod 2n, kept exact by (k+1)^2 = k^2 + 2k + 1; exp(-pi i t/n) = exp(-2 pi i t/(2n)) */
  for (int64_t k = 0, t = 0; k < n; t = (t + 2 * k + 1) % (2 * n), k++) p->chirp[k] = root_of_unity(t, 2 * n);
  for (int64_t k = 0; k < n; k++) {
    p->kernel[k] = cconj(p->chirp[k]);
    if (k) p->kernel[m - k] = cconj(p->chirp[k]);
  }
  fft_exec(p->sub, p->kernel, tmp);
  for (int64_t k = 0; k < m; k++) p->kernel[k].re /= (double)m, p->kernel[k].im /= (double)m;
  free(tmp);
  p->scratch = m + p->sub->scratch;
  return p;
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

/* ---------------------------------------------------------------- lines over a dense buffer */
typedef enum { LINE_C2C, LINE_C2R } line_kind;

typedef struct {
  cplx* buf;
  const fft_plan* plan;
  int ndim, dim;
  const int64_t* region; /* sizes of the part of buf whose lines are transformed */
  int64_t bstrides[TPURT_MAX_DIMS];
  int inverse;
  line_kind kind;
  int64_t half; /* LINE_C2R: given entries along the line */
  int failed;
} line_job;

static void lines_chunk(void* ctx, int64_t begin, int64_t end) {
  line_job* J = ctx;
  const int64_t n = J->plan->n, st = J->bstrides[J->dim];
  cplx* x = malloc((size_t)(n + J->plan->scratch + 1) * sizeof(cplx));
  if (!x) {
    __atomic_store_n(&J->failed, 1, __ATOMIC_RELAXED);
    return;
  }
  cplx* tmp = x + n;
  for (int64_t l = begin; l < end; l++) {
    int64_t off = 0, r = l;
    for (int d = J->ndim - 1; d >= 0; d--) {
      if (d == J->dim) continue;
      off += (r % J->region[d]) * J->bstrides[d];
      r /= J->region[d];
    }
    cplx* line = J->buf + off;
    if (J->kind == LINE_C2R) {
      /* Hermitian extension; the inverse transform is conj(FFT(conj(X))) */
      for (int64_t k = 0; k < J->half; k++) x[k] = cconj(line[k * st]);
      for (int64_t k = J->half; k < n; k++) x[k] = line[(n - k) * st];
      fft_exec(J->plan, x, tmp);
      for (int64_t k = 0; k < n; k++) line[k * st] = (cplx){x[k].re, 0};
      continue;
    }
    for (int64_t k = 0; k < n; k++) x[k] = J->inverse ? cconj(line[k * st]) : line[k * st];
    fft_exec(J->plan, x, tmp);
    for (int64_t k = 0; k < n; k++) line[k * st] = J->inverse ? cconj(x[k]) : x[k];
  }
  free(x);
}

/* Transform every line along `dim` of the part `region` of the dense buffer of sizes bsizes. */
static tpurt_status transform_dim(cplx* buf, int ndim, const int64_t* bsizes, const int64_t* region,
                                  int dim, int64_t n, int inverse, line_kind kind, int64_t half) {
  int64_t lines = 1;
  for (int d = 0; d < ndim; d++)
    if (d != dim) lines *= region[d];
  if (lines == 0 || n <= 1) return TPURT_OK; /* a 1-point transform is the identity */
  line_job J = {.buf = buf, .ndim = ndim, .dim = dim, .region = region, .inverse = inverse,
                .kind = kind, .half = half};
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) J.bstrides[d] = s, s *= bsizes[d];
  fft_plan* plan = plan_new(n);
  if (!plan) return tpurt_fail(TPURT_ERR_OOM, "fft: out of host memory for a %lld-point plan", (long long)n);
  J.plan = plan;
  tpurt_parallel_for(lines, 1 + 32768 / n, lines_chunk, &J);
  plan_free(plan);
  if (J.failed) return tpurt_fail(TPURT_ERR_OOM, "fft: out of host memory for %lld-point lines", (long long)n);
  return TPURT_OK;
}

/* ---------------------------------------------------------------- load / store */
/* Visit every index of `sizes`, with the element offsets a (strides sa) and b (strides sb). */
#define FOR_EACH_INDEX(ndim, sizes, sa, sb, a, b, BODY)                          \
  do {                                                                           \
    int64_t idx_[TPURT_MAX_DIMS] = {0}, a = 0, b = 0, total_ = 1;                \
    for (int d_ = 0; d_ < (ndim); d_++) total_ *= (sizes)[d_];                   \
    for (int64_t i_ = 0; i_ < total_; i_++) {                                    \
      BODY;                                                                      \
      for (int d_ = (ndim) - 1; d_ >= 0; d_--) {                                 \
        a += (sa)[d_], b += (sb)[d_];                                            \
        if (++idx_[d_] < (sizes)[d_]) break;                                     \
        a -= (sa)[d_] * (sizes)[d_], b -= (sb)[d_] * (sizes)[d_], idx_[d_] = 0;  \
      }                                                                          \
    }                                                                            \
  } while (0)

static void dense_strides(int ndim, const int64_t* sizes, int64_t* strides) {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) strides[d] = s, s *= sizes[d];
}

/* buf[region] <- in[region] (real or complex64 input) */
static void load(cplx* buf, const int64_t* bsizes, const tpurt_tensor* in, const int64_t* region) {
  int64_t bs[TPURT_MAX_DIMS];
  dense_strides(in->ndim, bsizes, bs);
  const char* src = in->data;
  if (in->dtype == TPURT_C64) {
    const tpurt_c64* s = in->data;
    FOR_EACH_INDEX(in->ndim, region, in->strides, bs, ia, ib, buf[ib] = ((cplx){s[ia].re, s[ia].im}));
  } else if (in->dtype == TPURT_F32) {
    const float* s = in->data;
    FOR_EACH_INDEX(in->ndim, region, in->strides, bs, ia, ib, buf[ib] = ((cplx){s[ia], 0}));
  } else {
    const int64_t es = (int64_t)tpurt_dtype_size(in->dtype);
    FOR_EACH_INDEX(in->ndim, region, in->strides, bs, ia, ib,
                   buf[ib] = ((cplx){tpurt_load_f64(src + ia * es, in->dtype), 0}));
  }
}

/* out <- scale * buf[out's sizes] (complex64, or the real part for a real output) */
static void store(const tpurt_tensor* out, const cplx* buf, const int64_t* bsizes, double scale) {
  int64_t bs[TPURT_MAX_DIMS];
  dense_strides(out->ndim, bsizes, bs);
  if (out->dtype == TPURT_C64) {
    tpurt_c64* o = out->data;
    FOR_EACH_INDEX(out->ndim, out->sizes, out->strides, bs, ia, ib,
                   o[ia] = ((tpurt_c64){(float)(buf[ib].re * scale), (float)(buf[ib].im * scale)}));
  } else if (out->dtype == TPURT_F32) {
    float* o = out->data;
    FOR_EACH_INDEX(out->ndim, out->sizes, out->strides, bs, ia, ib, o[ia] = (float)(buf[ib].re * scale));
  } else {
    char* o = out->data;
    const int64_t es = (int64_t)tpurt_dtype_size(out->dtype);
    FOR_EACH_INDEX(out->ndim, out->sizes, out->strides, bs, ia, ib,
                   tpurt_store_f64(o + ia * es, out->dtype, buf[ib].re * scale));
  }
}

/* ---------------------------------------------------------------- kernels */
typedef struct {
  int ndim, ndims;
  int dims[TPURT_MAX_DIMS];
  double scale;
} fft_args;

/* dims (wrapped, distinct) and the normalization scale of a signal of `sizes` */
static tpurt_status parse(const tpurt_op_call* c, const char* op, const int64_t* sizes, int ndim, fft_args* a) {
  const tpurt_value* dv = &c->args[1];
  a->ndim = ndim, a->ndims = dv->n;
  if (dv->n > ndim) return tpurt_fail(TPURT_ERR_RUNTIME, "%s: %d dims for a %d-dim tensor", op, dv->n, ndim);
  double signal = 1;
  for (int i = 0; i < dv->n; i++) {
    tpurt_status s = tpurt_wrap_dim(dv->ints[i], ndim, &a->dims[i]);
    if (s) return s;
    for (int k = 0; k < i; k++)
      if (a->dims[k] == a->dims[i]) return tpurt_fail(TPURT_ERR_RUNTIME, "%s: dim %d repeated", op, a->dims[i]);
    signal *= (double)sizes[a->dims[i]];
  }
  switch (c->args[2].i) {
    case 0: a->scale = 1; break;
    case 1: a->scale = 1 / sqrt(signal); break;
    case 2: a->scale = 1 / signal; break;
    default: return tpurt_fail(TPURT_ERR_RUNTIME, "%s: unsupported normalization %lld", op, (long long)c->args[2].i);
  }
  return TPURT_OK;
}

static cplx* buffer_new(int ndim, const int64_t* sizes) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= sizes[d];
  return calloc((size_t)(n ? n : 1), sizeof(cplx));
}

static tpurt_status oom(const char* op, const tpurt_tensor* t) {
  return tpurt_fail(TPURT_ERR_OOM, "%s: out of host memory for a %s work buffer", op, tpurt_shape_str(t));
}

/* _fft_c2c(self, dim[], normalization, forward) */
tpurt_status tpurt_kernel_fft_c2c(const tpurt_op_call* c) {
  const tpurt_tensor *in = &c->args[0].t, *out = &c->outs[0];
  fft_args a;
  tpurt_status s = parse(c, "_fft_c2c", in->sizes, in->ndim, &a);
  if (s || tpurt_numel(out) == 0) return s;
  cplx* buf = buffer_new(in->ndim, in->sizes);
  if (!buf) return oom("_fft_c2c", in);
  load(buf, in->sizes, in, in->sizes);
  for (int i = 0; i < a.ndims && !s; i++) {
    int d = a.dims[i];
    s = transform_dim(buf, in->ndim, in->sizes, in->sizes, d, in->sizes[d], !c->args[3].i, LINE_C2C, 0);
  }
  if (!s) store(out, buf, in->sizes, a.scale);
  free(buf);
  return s;
}

/* _fft_r2c(self, dim[], normalization, onesided): the last dim's real transform in full, then
 * the other dims over the part of it the output keeps */
tpurt_status tpurt_kernel_fft_r2c(const tpurt_op_call* c) {
  const tpurt_tensor *in = &c->args[0].t, *out = &c->outs[0];
  fft_args a;
  tpurt_status s = parse(c, "_fft_r2c", in->sizes, in->ndim, &a);
  if (s || tpurt_numel(out) == 0) return s;
  cplx* buf = buffer_new(in->ndim, in->sizes);
  if (!buf) return oom("_fft_r2c", in);
  load(buf, in->sizes, in, in->sizes);
  int64_t region[TPURT_MAX_DIMS];
  memcpy(region, in->sizes, sizeof region);
  if (a.ndims) {
    int last = a.dims[a.ndims - 1];
    s = transform_dim(buf, in->ndim, in->sizes, region, last, in->sizes[last], 0, LINE_C2C, 0);
    region[last] = out->sizes[last];
  }
  for (int i = 0; i + 1 < a.ndims && !s; i++) {
    int d = a.dims[i];
    s = transform_dim(buf, in->ndim, in->sizes, region, d, in->sizes[d], 0, LINE_C2C, 0);
  }
  if (!s) store(out, buf, in->sizes, a.scale);
  free(buf);
  return s;
}

/* _fft_c2r(self, dim[], normalization, last_dim_size): the other dims' inverse transforms over
 * the first last_dim_size/2+1 entries of the last dim, then its Hermitian inverse transform */
tpurt_status tpurt_kernel_fft_c2r(const tpurt_op_call* c) {
  const tpurt_tensor *in = &c->args[0].t, *out = &c->outs[0];
  fft_args a;
  tpurt_status s = parse(c, "_fft_c2r", out->sizes, out->ndim, &a);
  if (s || tpurt_numel(out) == 0) return s;
  cplx* buf = buffer_new(out->ndim, out->sizes);
  if (!buf) return oom("_fft_c2r", out);
  int64_t region[TPURT_MAX_DIMS];
  memcpy(region, out->sizes, sizeof region);
  int last = a.ndims ? a.dims[a.ndims - 1] : -1;
  int64_t n = last >= 0 ? out->sizes[last] : 0, half = n / 2 + 1;
  if (last >= 0) region[last] = half < in->sizes[last] ? half : in->sizes[last];
  load(buf, out->sizes, in, region);
  if (last >= 0) region[last] = half < n ? half : n;
  for (int i = 0; i + 1 < a.ndims && !s; i++) {
    int d = a.dims[i];
    s = transform_dim(buf, out->ndim, out->sizes, region, d, out->sizes[d], 1, LINE_C2C, 0);
  }
  if (last >= 0 && !s) {
    region[last] = n;
    s = transform_dim(buf, out->ndim, out->sizes, region, last, n, 1, LINE_C2R, half < n ? half : n);
  }
  if (!s) store(out, buf, out->sizes, a.scale);
  free(buf);
  return s;
}
