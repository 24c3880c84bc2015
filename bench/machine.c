/* Machine ceilings for bench/run.py: FMA peak and memory bandwidth, measured with plain C,
 * built on the fly for the widest instruction set the host runs (bench/run.py passes the
 * -march of that build of the runtime; the vector width follows from it).
 *   machine_isa(): which ("avx512", "avx2", "portable": scalar, for non-x86).
 *   peak_gflops(threads, seconds): every thread runs 12 independent FMA chains of one vector
 *     each (enough to cover FMA latency x throughput on current x86 cores); flops = 2 * lanes
 *     * 12 per iteration.
 *   unit_peak_gflops(threads, seconds): the bf16 unit's rate, where the build has one, else 0:
 *     Intel AMX (built with -mamx-tile -mamx-bf16, where Linux grants it): every thread runs
 *     four independent tile products (TDPBF16PS, 16 x 16 x 32 multiply-adds each); AVX512-BF16
 *     (built with -mavx512bf16): 12 independent VDPBF16PS chains (32 multiply-adds each).
 *   bandwidth_gbps(kind, threads, nbytes): kind 0 = memcpy (read+write bytes counted),
 *     kind 1 = STREAM triad a = b + s*c (3 arrays counted); arrays split across threads. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__AVX512F__)
#define LANES 16
#define ISA "avx512"
#elif defined(__AVX2__) && defined(__FMA__)
#define LANES 8
#define ISA "avx2"
#else
#define LANES 1
#define ISA "portable"
#endif
typedef float vec __attribute__((vector_size(LANES * 4)));

const char* machine_isa(void) { return ISA; }

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct { double seconds; double flops; float sink; } peak_arg;

__attribute__((optimize("fp-contract=fast"))) static void* peak_thread(void* p) {
  peak_arg* a = p;
  long iters = 0;
  double t0 = now();
  vec acc[12], m, x;
  for (int l = 0; l < LANES; l++) m[l] = 0.999999f, x[l] = 1e-7f;
  for (int i = 0; i < 12; i++)
    for (int l = 0; l < LANES; l++) acc[i][l] = (float)i;
  while (now() - t0 < a->seconds) {
    for (int r = 0; r < 100000; r++)
#pragma GCC unroll 12 /* the chains must live in registers, not in acc[] on the stack */
      for (int i = 0; i < 12; i++) acc[i] = acc[i] * m + x;
    iters += 100000;
  }
  float sink = 0;
  for (int i = 0; i < 12; i++)
    for (int l = 0; l < LANES; l++) sink += acc[i][l];
  a->sink = sink;
  a->flops = (double)iters * 12 * LANES * 2;
  return NULL;
}

/* GFLOP/s of `threads` threads each running fn for `seconds`. */
static double gflops_of(void* (*fn)(void*), int threads, double seconds) {
  pthread_t th[64];
  peak_arg args[64];
  if (threads > 64) threads = 64;
  double t0 = now();
  for (int i = 0; i < threads; i++) {
    args[i].seconds = seconds;
    pthread_create(&th[i], NULL, fn, &args[i]);
  }
  double flops = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(th[i], NULL);
    flops += args[i].flops;
  }
  return flops / (now() - t0) / 1e9;
}

double peak_gflops(int threads, double seconds) { return gflops_of(peak_thread, threads, seconds); }

#if defined(__AMX_BF16__) && defined(__AMX_TILE__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

static void* unit_thread(void* p) {
  peak_arg* a = p;
  struct __attribute__((packed)) {
    unsigned char palette, start_row, reserved[14];
    unsigned short colsb[16];
    unsigned char rows[16];
  } cfg = {.palette = 1};
  for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  static const unsigned short zeros[512] __attribute__((aligned(64)));
  _tile_loadconfig(&cfg);
  _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
  _tile_loadd(4, zeros, 64); _tile_loadd(5, zeros, 64); _tile_loadd(6, zeros, 64); _tile_loadd(7, zeros, 64);
  long iters = 0;
  double t0 = now();
  while (now() - t0 < a->seconds) {
    for (int r = 0; r < 10000; r++) {
      _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);
    }
    iters += 10000;
  }
  _tile_release();
  a->flops = (double)iters * 4 * 16 * 16 * 32 * 2;
  return NULL;
}

double unit_peak_gflops(int threads, double seconds) {
  if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) != 0) return 0;
  return gflops_of(unit_thread, threads, seconds);
}
#elif defined(__AVX512BF16__)
#include <immintrin.h>

static void* unit_thread(void* p) {
  peak_arg* a = p;
  __m512 acc[12];
  for (int j = 0; j < 12; j++) acc[j] = _mm512_setzero_ps();
  __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80); /* bf16 pairs (1, 1) */
  long iters = 0;
  double t0 = now();
  while (now() - t0 < a->seconds) {
    for (int r = 0; r < 100000; r++)
      for (int j = 0; j < 12; j++) acc[j] = _mm512_dpbf16_ps(acc[j], x, x);
    iters += 100000;
  }
  for (int j = 1; j < 12; j++) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  float sink[16];
  _mm512_storeu_ps(sink, acc[0]);
  a->flops = (double)iters * 12 * 32 * 2 + (sink[0] < 0); /* the sums kept alive */
  return NULL;
}

double unit_peak_gflops(int threads, double seconds) { return gflops_of(unit_thread, threads, seconds); }
#else
double unit_peak_gflops(int threads, double seconds) { (void)threads, (void)seconds; return 0; }
#endif

typedef struct { int kind; float *a, *b, *c; size_t n; int reps; } bw_arg;

static void* bw_thread(void* p) {
  bw_arg* a = p;
  for (int r = 0; r < a->reps; r++) {
    if (a->kind == 0) memcpy(a->a, a->b, a->n * 4);
    else
      for (size_t i = 0; i < a->n; i++) a->a[i] = a->b[i] + 3.0f * a->c[i];
  }
  return NULL;
}

double bandwidth_gbps(int kind, int threads, size_t nbytes) {
  size_t n = nbytes / 4;
  float *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4);
  for (size_t i = 0; i < n; i++) a[i] = 0, b[i] = (float)i, c[i] = 1;
  pthread_t th[64];
  bw_arg args[64];
  if (threads > 64) threads = 64;
  double best = 0;
  for (int trial = 0; trial < 5; trial++) {
    double t0 = now();
    for (int i = 0; i < threads; i++) {
      size_t lo = n * i / threads, hi = n * (i + 1) / threads;
      args[i] = (bw_arg){kind, a + lo, b + lo, c + lo, hi - lo, 2};
      pthread_create(&th[i], NULL, bw_thread, &args[i]);
    }
    for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
    double dt = now() - t0;
    double bytes = 2.0 * n * 4 * (kind == 0 ? 2 : 3);
    if (bytes / dt > best) best = bytes / dt;
  }
  free(a), free(b), free(c);
  return best / 1e9;
}
