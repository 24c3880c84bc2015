/* complex64 kernels against double-precision C complex references: the engine's
 * conversions, unary and binary elementwise ops, reductions and matmul. */
#include <complex.h>
#include <math.h>
#include <string.h>

#include "check.h"
#include "internal.h"

#define N 12
static const double complex samples[N] = {
    0.5 + 0.25 * I, -1.5 + 2.0 * I, 3.0 - 0.75 * I, -0.2 - 0.9 * I, 1e-4 + 2e-4 * I, 0.0 + 1.0 * I,
    2.5 + 0.0 * I,  -0.7 + 0.1 * I, 0.3 - 3.0 * I,  1.1 + 1.1 * I,  -2.0 - 0.5 * I, 0.05 - 0.02 * I};

static tpurt_tensor vec(void* data, int dtype, int64_t n, int64_t stride) {
  tpurt_tensor t = {.data = data, .dtype = dtype, .ndim = 1};
  t.sizes[0] = n;
  t.strides[0] = stride;
  return t;
}
static tpurt_value tv(tpurt_tensor t) { return (tpurt_value){.kind = TPURT_V_TENSOR, .scalar_dtype = -1, .t = t}; }
static tpurt_value cv(double re, double im) {
  return (tpurt_value){.kind = TPURT_V_COMPLEX, .scalar_dtype = -1, .wrapped = 1, .c = {re, im}};
}
static tpurt_value fv(double f) { return (tpurt_value){.kind = TPURT_V_FLOAT, .scalar_dtype = -1, .wrapped = 1, .f = f}; }

static void fill(tpurt_c64* x) {
  for (int i = 0; i < N; i++) x[i] = (tpurt_c64){(float)creal(samples[i]), (float)cimag(samples[i])};
}
static double complex as_dc(tpurt_c64 z) { return CMPLX(z.re, z.im); }

/* |got - want| <= atol + rtol |want|, as torch.testing for complex64 */
static int close(double complex got, double complex want, double rtol, double atol) {
  if (creal(got) == creal(want) && cimag(got) == cimag(want)) return 1; /* infinities */
  return cabs(got - want) <= atol + rtol * cabs(want);
}

static tpurt_status run(const char* name, int nargs, const tpurt_value* args, tpurt_tensor out) {
  tpurt_op_call c = {.struct_size = sizeof c, .op = tpurt_op_lookup(name), .nargs = nargs, .nouts = 1};
  if (c.op < 0) return tpurt_fail(TPURT_ERR_VALUE, "no op %s", name);
  for (int k = 0; k < nargs; k++) c.args[k] = args[k];
  c.outs[0] = out;
  return tpurt_op_run(&c);
}

static void test_engine(void) {
  tpurt_c64 x[N], y[N];
  fill(x);
  /* strided complex copy, real -> complex, complex -> real (real part, as copy_) */
  tpurt_tensor src = vec(x, TPURT_C64, N / 2, 2), dst = vec(y, TPURT_C64, N / 2, 1);
  CHECK(tpurt_copy_tensor(&dst, &src) == TPURT_OK && y[1].re == x[2].re && y[1].im == x[2].im, "strided c64 copy");
  double d[3] = {1.5, -2, 7};
  tpurt_tensor ds = vec(d, TPURT_F64, 3, 1), cd = vec(y, TPURT_C64, 3, 1);
  CHECK(tpurt_copy_tensor(&cd, &ds) == TPURT_OK && y[2].re == 7 && y[2].im == 0 && y[0].re == 1.5f, "f64 -> c64");
  float f[3];
  tpurt_tensor fo = vec(f, TPURT_F32, 3, 1), cs = vec(x, TPURT_C64, 3, 1);
  CHECK(tpurt_copy_tensor(&fo, &cs) == TPURT_OK && f[1] == x[1].re, "c64 -> f32 keeps the real part");
  CHECK(tpurt_promote_types(TPURT_F32, TPURT_C64) == TPURT_C64 && tpurt_promote_types(TPURT_I64, TPURT_C64) == TPURT_C64,
        "complex wins promotion");
  tpurt_promo p;
  tpurt_promo_init(&p);
  tpurt_tensor ft = {.dtype = TPURT_F32, .ndim = 1};
  tpurt_promo_add_tensor(&p, &ft);
  tpurt_value py = cv(1, 2);
  tpurt_promo_add_value(&p, &py);
  CHECK(tpurt_promo_result(&p) == TPURT_C64, "f32 tensor * python complex -> complex64");
}

typedef struct {
  const char* op;
  double complex (*ref)(double complex);
} unary_case;

static double complex r_sigmoid(double complex z) { return 1 / (1 + cexp(-z)); }
static double complex r_recip(double complex z) { return 1 / z; }
static double complex r_rsqrt(double complex z) { return 1 / csqrt(z); }
static double complex r_log2(double complex z) { return clog(z) / M_LN2; }
static double complex r_log10(double complex z) { return clog(z) / M_LN10; }
static double complex r_exp2(double complex z) { return cexp(z * M_LN2); }
static double complex r_log1p(double complex z) { return clog(1 + z); }
static double complex r_expm1(double complex z) { return cexp(z) - 1; }
static double complex r_neg(double complex z) { return -z; }
static double complex r_sgn(double complex z) { return z / cabs(z); }

static void test_unary(void) {
  static const unary_case cases[] = {
      {"exp", cexp},     {"log", clog},        {"sqrt", csqrt},     {"sin", csin},        {"cos", ccos},
      {"tan", ctan},     {"asin", casin},      {"acos", cacos},     {"atan", catan},      {"sinh", csinh},
      {"cosh", ccosh},   {"tanh", ctanh},      {"asinh", casinh},   {"acosh", cacosh},    {"atanh", catanh},
      {"sigmoid", r_sigmoid}, {"reciprocal", r_recip}, {"rsqrt", r_rsqrt}, {"log2", r_log2}, {"log10", r_log10},
      {"exp2", r_exp2},  {"log1p", r_log1p},   {"expm1", r_expm1},  {"neg", r_neg},       {"sgn", r_sgn},
  };
  tpurt_c64 x[N], y[N];
  fill(x);
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    tpurt_value a = tv(vec(x, TPURT_C64, N, 1));
    tpurt_status s = run(cases[k].op, 1, &a, vec(y, TPURT_C64, N, 1));
    CHECK(s == TPURT_OK, "%s: %s", cases[k].op, tpurt_last_error());
    CHECK(tpurt_op_flags(tpurt_op_lookup(cases[k].op)) & TPURT_OPF_COMPLEX, "%s is flagged", cases[k].op);
    for (int i = 0; i < N && s == TPURT_OK; i++) {
      double complex want = cases[k].ref(as_dc(x[i]));
      CHECK(close(as_dc(y[i]), want, 2e-6, 1e-6), "%s(%g%+gi) = %g%+gi, want %g%+gi", cases[k].op, x[i].re, x[i].im,
            y[i].re, y[i].im, creal(want), cimag(want));
    }
  }
  /* log1p and expm1 keep their accuracy near 0, where log(1 + z) and exp(z) - 1 lose it */
  tpurt_c64 tiny = {1e-7f, -3e-8f}, r;
  tpurt_value a = tv(vec(&tiny, TPURT_C64, 1, 1));
  run("log1p", 1, &a, vec(&r, TPURT_C64, 1, 1));
  CHECK(close(as_dc(r), as_dc(tiny) - as_dc(tiny) * as_dc(tiny) / 2, 1e-6, 0), "log1p(tiny) = %g%+gi", r.re, r.im);
  /* real results: abs (hypot) and angle */
  float m[N];
  for (int op = 0; op < 2; op++) {
    a = tv(vec(x, TPURT_C64, N, 1));
    CHECK(run(op ? "angle" : "abs", 1, &a, vec(m, TPURT_F32, N, 1)) == TPURT_OK, "%s", tpurt_last_error());
    for (int i = 0; i < N; i++) {
      double want = op ? carg(as_dc(x[i])) : cabs(as_dc(x[i]));
      CHECK(fabs(m[i] - want) <= 1e-6 * fabs(want) + 1e-7, "%s[%d] = %g, want %g", op ? "angle" : "abs", i, m[i], want);
    }
  }
  tpurt_c64 big = {3e30f, 4e30f};
  a = tv(vec(&big, TPURT_C64, 1, 1));
  run("abs", 1, &a, vec(m, TPURT_F32, 1, 1));
  CHECK(fabsf(m[0] - 5e30f) <= 1e25f, "abs does not overflow: %g", m[0]);
}

static void test_binary(void) {
  tpurt_c64 x[N], y[N], o[N];
  fill(x);
  for (int i = 0; i < N; i++) y[i] = x[N - 1 - i];
  tpurt_value ab[3] = {tv(vec(x, TPURT_C64, N, 1)), tv(vec(y, TPURT_C64, N, 1)), cv(0.5, -2)};
  const char* names[] = {"mul.Tensor", "div.Tensor", "sub.Tensor", "pow.Tensor_Tensor", "rsub.Tensor"};
  for (int k = 0; k < 5; k++) {
    CHECK(run(names[k], k == 2 || k == 4 ? 3 : 2, ab, vec(o, TPURT_C64, N, 1)) == TPURT_OK, "%s: %s", names[k],
          tpurt_last_error());
    for (int i = 0; i < N; i++) {
      double complex a = as_dc(x[i]), b = as_dc(y[i]), alpha = 0.5 - 2 * I;
      double complex want = k == 0 ? a * b : k == 1 ? a / b : k == 2 ? a - alpha * b : k == 3 ? cpow(a, b) : b - alpha * a;
      CHECK(close(as_dc(o[i]), want, 1e-5, 1e-6), "%s[%d] = %g%+gi, want %g%+gi", names[k], i, o[i].re, o[i].im,
            creal(want), cimag(want));
    }
  }
  /* c10's scaled division: no overflow for large divisors, complex inf/nan for 0 */
  tpurt_c64 p = {1e30f, 1e30f}, q = {2e30f, -1e30f}, r;
  tpurt_value pq[2] = {tv(vec(&p, TPURT_C64, 1, 1)), tv(vec(&q, TPURT_C64, 1, 1))};
  run("div.Tensor", 2, pq, vec(&r, TPURT_C64, 1, 1));
  CHECK(fabsf(r.re - 0.2f) < 1e-6f && fabsf(r.im - 0.6f) < 1e-6f, "large division: %g%+gi", r.re, r.im);
  /* real tensor times a Python complex: promoted to complex64 */
  float re[3] = {1, -2, 0.5};
  tpurt_value rc[2] = {tv(vec(re, TPURT_F32, 3, 1)), cv(0, 2)};
  CHECK(run("mul.Tensor", 2, rc, vec(o, TPURT_C64, 3, 1)) == TPURT_OK && o[1].re == 0 && o[1].im == -4,
        "f32 * 2j: %g%+gi (%s)", o[1].re, o[1].im, tpurt_last_error());
  /* pow with a Scalar exponent: 2 multiplies out; 0.5 is sqrt; others through cpow */
  const double exps[3] = {2, 0.5, 1.7};
  for (int k = 0; k < 3; k++) {
    tpurt_value pe[2] = {tv(vec(x, TPURT_C64, N, 1)), fv(exps[k])};
    CHECK(run("pow.Tensor_Scalar", 2, pe, vec(o, TPURT_C64, N, 1)) == TPURT_OK, "%s", tpurt_last_error());
    for (int i = 0; i < N; i++) {
      double complex want = cpow(as_dc(x[i]), exps[k]);
      CHECK(close(as_dc(o[i]), want, 1e-5, 1e-6), "pow(x, %g)[%d] = %g%+gi, want %g%+gi", exps[k], i, o[i].re,
            o[i].im, creal(want), cimag(want));
    }
  }
  /* addcmul / addcdiv with a complex value, lerp with a complex weight */
  tpurt_value t3[4] = {tv(vec(x, TPURT_C64, N, 1)), tv(vec(y, TPURT_C64, N, 1)), tv(vec(x, TPURT_C64, N, 1)), cv(2, 1)};
  const char* tern[] = {"addcmul", "addcdiv", "lerp.Scalar"};
  for (int k = 0; k < 3; k++) {
    tpurt_value args[4] = {t3[0], t3[1], k == 2 ? t3[3] : t3[2], t3[3]};
    CHECK(run(tern[k], k == 2 ? 3 : 4, args, vec(o, TPURT_C64, N, 1)) == TPURT_OK, "%s: %s", tern[k], tpurt_last_error());
    for (int i = 0; i < N; i++) {
      double complex a = as_dc(x[i]), b = as_dc(y[i]), v = 2 + I;
      double complex want = k == 0 ? a + v * b * a : k == 1 ? a + v * b / a : a + v * (b - a);
      CHECK(close(as_dc(o[i]), want, 1e-5, 1e-6), "%s[%d] = %g%+gi, want %g%+gi", tern[k], i, o[i].re, o[i].im,
            creal(want), cimag(want));
    }
  }
  /* isnan / isinf look at both parts */
  tpurt_c64 odd[3] = {{1, NAN}, {INFINITY, 0}, {1, 2}};
  uint8_t flags[3];
  tpurt_value ov = tv(vec(odd, TPURT_C64, 3, 1));
  CHECK(run("isnan", 1, &ov, vec(flags, TPURT_BOOL, 3, 1)) == TPURT_OK && flags[0] && !flags[1] && !flags[2], "isnan");
  CHECK(run("isinf", 1, &ov, vec(flags, TPURT_BOOL, 3, 1)) == TPURT_OK && !flags[0] && flags[1] && !flags[2], "isinf");
  /* eq compares both parts */
  uint8_t eq[N];
  tpurt_value e2[2] = {tv(vec(x, TPURT_C64, N, 1)), tv(vec(x, TPURT_C64, N, 1))};
  tpurt_c64 x2[N];
  memcpy(x2, x, sizeof x2);
  x2[3].im += 1;
  e2[1] = tv(vec(x2, TPURT_C64, N, 1));
  CHECK(run("eq.Tensor", 2, e2, vec(eq, TPURT_BOOL, N, 1)) == TPURT_OK && eq[0] == 1 && eq[3] == 0, "eq");
}

static tpurt_tensor mat(void* data, int dtype, int64_t r, int64_t c, int64_t rs, int64_t cs) {
  tpurt_tensor t = {.data = data, .dtype = dtype, .ndim = 2, .sizes = {r, c}, .strides = {rs, cs}};
  return t;
}

/* x as [3, 4]; reductions over dim d compared with double sums / products / moments */
static void test_reduce(void) {
  tpurt_c64 x[N], o[N];
  fill(x);
  float f[N];
  for (int d = 0; d < 2; d++) {
    int64_t dims[1] = {d}, nout = d ? 3 : 4, nred = d ? 4 : 3;
    tpurt_value a[4] = {tv(mat(x, TPURT_C64, 3, 4, 4, 1)), {.kind = TPURT_V_INTS, .n = 1, .ints = dims, .scalar_dtype = -1},
                        {.kind = TPURT_V_BOOL, .scalar_dtype = -1}, {.kind = TPURT_V_NONE, .scalar_dtype = -1}};
    tpurt_value pd[4] = {a[0], {.kind = TPURT_V_INT, .i = d, .scalar_dtype = -1}, a[2], a[3]};
    const char* ops[] = {"sum.dim_IntList", "mean.dim", "prod.dim_int"};
    for (int k = 0; k < 3; k++) {
      CHECK(run(ops[k], 4, k == 2 ? pd : a, vec(o, TPURT_C64, nout, 1)) == TPURT_OK, "%s: %s", ops[k], tpurt_last_error());
      for (int i = 0; i < nout; i++) {
        double complex acc = k == 2 ? 1 : 0;
        for (int j = 0; j < nred; j++) {
          double complex v = as_dc(x[d ? i * 4 + j : j * 4 + i]);
          acc = k == 2 ? acc * v : acc + v;
        }
        if (k == 1) acc /= nred;
        CHECK(close(as_dc(o[i]), acc, 1e-6, 1e-6), "%s dim %d [%d] = %g%+gi, want %g%+gi", ops[k], d, i, o[i].re,
              o[i].im, creal(acc), cimag(acc));
      }
    }
    /* var / std (correction 1): var(re) + var(im) */
    tpurt_value va[4] = {a[0], a[1], {.kind = TPURT_V_NONE, .scalar_dtype = -1}, a[2]};
    for (int k = 0; k < 2; k++) {
      CHECK(run(k ? "std.correction" : "var.correction", 4, va, vec(f, TPURT_F32, nout, 1)) == TPURT_OK, "var: %s",
            tpurt_last_error());
      for (int i = 0; i < nout; i++) {
        double complex mean = 0;
        double m2 = 0;
        for (int j = 0; j < nred; j++) mean += as_dc(x[d ? i * 4 + j : j * 4 + i]) / nred;
        for (int j = 0; j < nred; j++) m2 += pow(cabs(as_dc(x[d ? i * 4 + j : j * 4 + i]) - mean), 2);
        double want = k ? sqrt(m2 / (nred - 1)) : m2 / (nred - 1);
        CHECK(fabs(f[i] - want) <= 1e-5 * want, "%s dim %d [%d] = %g, want %g", k ? "std" : "var", d, i, f[i], want);
      }
    }
    /* vector norms of |z| */
    const double ords[3] = {2, INFINITY, 1.5};
    for (int k = 0; k < 3; k++) {
      tpurt_value na[5] = {a[0], fv(ords[k]), a[1], a[2], a[3]};
      CHECK(run("linalg_vector_norm", 5, na, vec(f, TPURT_F32, nout, 1)) == TPURT_OK, "norm: %s", tpurt_last_error());
      for (int i = 0; i < nout; i++) {
        double acc = 0;
        for (int j = 0; j < nred; j++) {
          double m = cabs(as_dc(x[d ? i * 4 + j : j * 4 + i]));
          acc = isinf(ords[k]) ? fmax(acc, m) : acc + pow(m, ords[k]);
        }
        double want = isinf(ords[k]) ? acc : pow(acc, 1 / ords[k]);
        CHECK(fabs(f[i] - want) <= 1e-6 * want, "norm(%g) dim %d [%d] = %g, want %g", ords[k], d, i, f[i], want);
      }
    }
    /* logsumexp: log(sum(exp(z))) */
    tpurt_value la[3] = {a[0], a[1], a[2]};
    CHECK(run("logsumexp", 3, la, vec(o, TPURT_C64, nout, 1)) == TPURT_OK, "logsumexp: %s", tpurt_last_error());
    for (int i = 0; i < nout; i++) {
      double complex acc = 0;
      for (int j = 0; j < nred; j++) acc += cexp(as_dc(x[d ? i * 4 + j : j * 4 + i]));
      CHECK(close(as_dc(o[i]), clog(acc), 1e-6, 1e-6), "logsumexp dim %d [%d] = %g%+gi, want %g%+gi", d, i, o[i].re,
            o[i].im, creal(clog(acc)), cimag(clog(acc)));
    }
    /* cumsum along d */
    CHECK(run("cumsum", 3, pd, mat(o, TPURT_C64, 3, 4, 4, 1)) == TPURT_OK, "cumsum: %s", tpurt_last_error());
    for (int i = 0; i < N; i++) {
      int r = i / 4, col = i % 4;
      double complex acc = 0;
      for (int j = 0; j <= (d ? col : r); j++) acc += as_dc(x[d ? r * 4 + j : j * 4 + col]);
      CHECK(close(as_dc(o[i]), acc, 1e-6, 1e-6), "cumsum dim %d [%d]", d, i);
    }
  }
  /* column mode: a stride-0 kept dim (x[0:4] expanded to [3, 4]), prod over dim 1 */
  tpurt_value ex[4] = {tv(mat(x, TPURT_C64, 3, 4, 0, 1)), {.kind = TPURT_V_INT, .i = 1, .scalar_dtype = -1},
                       {.kind = TPURT_V_BOOL, .scalar_dtype = -1}, {.kind = TPURT_V_NONE, .scalar_dtype = -1}};
  CHECK(run("prod.dim_int", 4, ex, vec(o, TPURT_C64, 3, 1)) == TPURT_OK, "prod: %s", tpurt_last_error());
  double complex want = as_dc(x[0]) * as_dc(x[1]) * as_dc(x[2]) * as_dc(x[3]);
  for (int i = 0; i < 3; i++) CHECK(close(as_dc(o[i]), want, 1e-6, 0), "prod of expanded rows [%d] = %g%+gi", i, o[i].re, o[i].im);
  /* transposed input (no dense dim): sums over pairs; keepdim output */
  tpurt_value tr[4] = {tv(mat(x, TPURT_C64, 4, 3, 1, 4)), {.kind = TPURT_V_INTS, .n = 1, .ints = (int64_t[]){1}, .scalar_dtype = -1},
                       {.kind = TPURT_V_BOOL, .i = 1, .scalar_dtype = -1}, {.kind = TPURT_V_NONE, .scalar_dtype = -1}};
  CHECK(run("sum.dim_IntList", 4, tr, mat(o, TPURT_C64, 4, 1, 1, 1)) == TPURT_OK, "sum: %s", tpurt_last_error());
  for (int i = 0; i < 4; i++) {
    double complex acc = as_dc(x[i]) + as_dc(x[4 + i]) + as_dc(x[8 + i]);
    CHECK(close(as_dc(o[i]), acc, 1e-6, 1e-6), "sum of transposed [%d] = %g%+gi", i, o[i].re, o[i].im);
  }
  /* a long dense sum: split over blocks, integers so the double sum is exact */
  enum { BIG = 300001 };
  static tpurt_c64 big[BIG];
  double complex exact = 0;
  for (int i = 0; i < BIG; i++) {
    big[i] = (tpurt_c64){(float)(i % 7 - 3), (float)(i % 5)};
    exact += as_dc(big[i]);
  }
  tpurt_c64 bs;
  tpurt_value ba[2] = {tv(vec(big, TPURT_C64, BIG, 1)), {.kind = TPURT_V_NONE, .scalar_dtype = -1}};
  CHECK(run("sum", 2, ba, (tpurt_tensor){.data = &bs, .dtype = TPURT_C64, .ndim = 0}) == TPURT_OK &&
            bs.re == creal(exact) && bs.im == cimag(exact),
        "long sum = %g%+gi, want %g%+gi", bs.re, bs.im, creal(exact), cimag(exact));
  /* full sum into a 0-dim output */
  tpurt_c64 total;
  tpurt_tensor scalar = {.data = &total, .dtype = TPURT_C64, .ndim = 0};
  tpurt_value sa[2] = {tv(vec(x, TPURT_C64, N, 1)), {.kind = TPURT_V_NONE, .scalar_dtype = -1}};
  CHECK(run("sum", 2, sa, scalar) == TPURT_OK, "sum: %s", tpurt_last_error());
  double complex acc = 0;
  for (int i = 0; i < N; i++) acc += as_dc(x[i]);
  CHECK(close(as_dc(total), acc, 1e-6, 1e-6), "sum = %g%+gi", total.re, total.im);
}

/* mm / addmm / vdot at HIGHEST precision (plain f32 products) against double sums */
static void test_matmul(void) {
  tpurt_c64 x[N], y[N], o[N];
  fill(x);
  for (int i = 0; i < N; i++) y[i] = (tpurt_c64){x[N - 1 - i].im, -x[N - 1 - i].re};
  /* [3, 4] @ [4, 3] with y read transposed (strides 1, 4) */
  tpurt_op_call c = {.struct_size = sizeof c, .op = tpurt_op_lookup("addmm"), .nargs = 5, .nouts = 1,
                     .precision = TPURT_PRECISION_HIGHEST};
  tpurt_c64 bias[3] = {{1, 2}, {-1, 0.5f}, {0, -3}};
  c.args[0] = tv(vec(bias, TPURT_C64, 3, 1));
  c.args[1] = tv(mat(x, TPURT_C64, 3, 4, 4, 1));
  c.args[2] = tv(mat(y, TPURT_C64, 4, 3, 1, 4));
  c.args[3] = cv(0.5, 1);
  c.args[4] = cv(2, -1);
  c.outs[0] = mat(o, TPURT_C64, 3, 3, 3, 1);
  CHECK(tpurt_op_run(&c) == TPURT_OK, "addmm: %s", tpurt_last_error());
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) {
      double complex acc = 0;
      for (int k = 0; k < 4; k++) acc += as_dc(x[i * 4 + k]) * as_dc(y[j * 4 + k]);
      double complex want = (2 - I) * acc + (0.5 + I) * as_dc(bias[j]);
      CHECK(close(as_dc(o[i * 3 + j]), want, 1e-5, 1e-5), "addmm[%d,%d] = %g%+gi, want %g%+gi", i, j, o[i * 3 + j].re,
            o[i * 3 + j].im, creal(want), cimag(want));
    }
  /* dot and vdot (conjugates its first operand) */
  for (int v = 0; v < 2; v++) {
    tpurt_c64 r;
    tpurt_op_call d = {.struct_size = sizeof d, .op = tpurt_op_lookup(v ? "vdot" : "dot"), .nargs = 2, .nouts = 1,
                       .precision = TPURT_PRECISION_HIGHEST};
    d.args[0] = tv(vec(x, TPURT_C64, N, 1));
    d.args[1] = tv(vec(y, TPURT_C64, N, 1));
    d.outs[0] = (tpurt_tensor){.data = &r, .dtype = TPURT_C64, .ndim = 0};
    CHECK(tpurt_op_run(&d) == TPURT_OK, "dot: %s", tpurt_last_error());
    double complex acc = 0;
    for (int k = 0; k < N; k++) acc += (v ? conj(as_dc(x[k])) : as_dc(x[k])) * as_dc(y[k]);
    CHECK(close(as_dc(r), acc, 1e-5, 1e-6), "%s = %g%+gi, want %g%+gi", v ? "vdot" : "dot", r.re, r.im, creal(acc),
          cimag(acc));
  }
}

int main(void) {
  tpurt_init();
  test_engine();
  test_unary();
  test_binary();
  test_reduce();
  test_matmul();
  return CHECK_DONE();
}
