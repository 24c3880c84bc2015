/* The vectorizable exp / exp2 / log / log2 / log10 / erf / sinh / cosh / tanh / sin / cos of kernels/vmath.h against libm in higher
 * precision, over a strided sweep of every float (and of the doubles exp takes; sin and cos
 * over the floats their reduction holds for: callers take libm past it), plus the specials. */
#include <float.h>
#include <math.h>
#include <stdint.h>

#include "check.h"
#include "kernels/vmath.h"

/* |got - want| in units of the last place of want rounded to float. */
static double ulps_f(float got, double want) {
  if (isnan(want)) return isnan(got) ? 0 : INFINITY;
  if (isinf(want) || (float)want == got) return (double)(float)want == got ? 0 : INFINITY;
  float w = (float)want;
  double ulp = (double)nextafterf(fabsf(w), INFINITY) - fabsf(w);
  if (fabsf(w) < FLT_MIN) ulp = 0x1p-149;
  return fabs((double)got - want) / ulp;
}

static int every_float(float x) { (void)x; return 1; }

static void sweep_where(const char* name, float (*f)(float), double (*ref)(double), double max_ulps,
                        int (*where)(float)) {
  double worst = 0;
  float at = 0;
  for (uint64_t u = 0; u < (1ull << 32); u += 251) {
    float x = vm_f32_of((uint32_t)u);
    if (!where(x)) continue;
    double e = ulps_f(f(x), ref(x));
    if (e > worst) worst = e, at = x;
  }
  CHECK(worst <= max_ulps, "%s: %.2f ulp at %a", name, worst, at);
}
static void sweep_f(const char* name, float (*f)(float), double (*ref)(double), double max_ulps) {
  sweep_where(name, f, ref, max_ulps, every_float);
}

static void sweep_exp_f64(void) {
  double worst = 0, at = 0;
  for (double x = -745.5; x < 709.8; x += 0.0123457) {
    long double want = expl((long double)x);
    double w = (double)want, got = vm_exp(x);
    double ulp = w < DBL_MIN ? 0x1p-1074 : nextafter(w, INFINITY) - w;
    double e = (double)fabsl((long double)got - want) / ulp;
    if (e > worst) worst = e, at = x;
  }
  CHECK(worst <= 1.1, "vm_exp: %.2f ulp at %a", worst, at);
}

static float f_exp(float x) { return vm_expf(x); }
static float f_erf(float x) { return vm_erff(x); }
static float f_tanh(float x) { return vm_tanhf(x); }
static float f_log(float x) { return vm_logf(x); }
static float f_log2(float x) { return vm_log2f(x); }
static float f_log10(float x) { return vm_log10f(x); }
static float f_exp2(float x) { return vm_exp2f(x); }
static float f_sinh(float x) { return vm_sinhf(x); }
static float f_cosh(float x) { return vm_coshf(x); }
static float f_sin(float x) { return vm_sinf(x); }
static float f_cos(float x) { return vm_cosf(x); }
static float f_expm1(float x) { return vm_expm1f(x); }
static float f_log1p(float x) { return vm_log1pf(x); }

int main(void) {
  sweep_f("vm_expf", f_exp, exp, 1.0);
  sweep_f("vm_erff", f_erf, erf, 1.5);
  sweep_f("vm_tanhf", f_tanh, tanh, 1.5);
  sweep_f("vm_logf", f_log, log, 1.0);
  sweep_f("vm_log2f", f_log2, log2, 1.5);
  sweep_f("vm_log10f", f_log10, log10, 2.0);
  sweep_f("vm_exp2f", f_exp2, exp2, 1.5);
  sweep_f("vm_sinhf", f_sinh, sinh, 0.5);
  sweep_f("vm_coshf", f_cosh, cosh, 0.5);
  sweep_f("vm_expm1f", f_expm1, expm1, 2.0);
  sweep_f("vm_log1pf", f_log1p, log1p, 2.0);
  sweep_where("vm_sinf", f_sin, sin, 1.0, vm_trig_in_range);
  sweep_where("vm_cosf", f_cos, cos, 1.0, vm_trig_in_range);
  sweep_exp_f64();
  CHECK(vm_logf(INFINITY) == INFINITY && vm_logf(0.0f) == -INFINITY && vm_logf(-0.0f) == -INFINITY &&
            isnan(vm_logf(-1.0f)) && isnan(vm_logf(NAN)) && vm_logf(1.0f) == 0 && vm_logf(0x1p-149f) == logf(0x1p-149f),
        "log specials");
  CHECK(vm_expm1f(INFINITY) == INFINITY && vm_expm1f(-INFINITY) == -1 && isnan(vm_expm1f(NAN)) &&
            signbit(vm_expm1f(-0.0f)) && vm_expm1f(100.0f) == INFINITY, "expm1 specials");
  CHECK(vm_log1pf(INFINITY) == INFINITY && vm_log1pf(-1.0f) == -INFINITY && isnan(vm_log1pf(-2.0f)) &&
            isnan(vm_log1pf(NAN)) && signbit(vm_log1pf(-0.0f)) && vm_log1pf(0x1p-30f) == 0x1p-30f, "log1p specials");
  CHECK(signbit(vm_sinf(-0.0f)) && vm_sinf(0.0f) == 0 && vm_cosf(0.0f) == 1 && vm_cosf(-0.0f) == 1, "sin/cos at 0");
  CHECK(!vm_trig_in_range(INFINITY) && !vm_trig_in_range(NAN) && !vm_trig_in_range(0x1p20f) && vm_trig_in_range(1e6f),
        "sin/cos range");
  CHECK(vm_expf(INFINITY) == INFINITY && vm_expf(-INFINITY) == 0 && isnan(vm_expf(NAN)), "expf specials");
  CHECK(vm_log2f(INFINITY) == INFINITY && vm_log2f(0.0f) == -INFINITY && isnan(vm_log2f(-1.0f)) && isnan(vm_log2f(NAN)) &&
            vm_log2f(1024.0f) == 10 && vm_log2f(0x1p-149f) == -149 && vm_log2f(1.0f) == 0,
        "log2 specials, powers of two exact");
  CHECK(vm_log10f(INFINITY) == INFINITY && vm_log10f(-0.0f) == -INFINITY && isnan(vm_log10f(-1.0f)) &&
            isnan(vm_log10f(NAN)) && vm_log10f(1.0f) == 0, "log10 specials");
  CHECK(vm_exp2f(INFINITY) == INFINITY && vm_exp2f(-INFINITY) == 0 && isnan(vm_exp2f(NAN)) && vm_exp2f(128.0f) == INFINITY &&
            vm_exp2f(127.0f) == 0x1p127f && vm_exp2f(-149.0f) == 0x1p-149f && vm_exp2f(-150.5f) == 0 && vm_exp2f(0) == 1,
        "exp2 specials, integers exact");
  CHECK(vm_exp(INFINITY) == INFINITY && vm_exp(-INFINITY) == 0 && isnan(vm_exp(NAN)), "exp specials");
  CHECK(vm_exp(0) == 1 && vm_expf(0) == 1, "exp(0)");
  CHECK(vm_erff(INFINITY) == 1 && vm_erff(-INFINITY) == -1 && isnan(vm_erff(NAN)), "erf specials");
  CHECK(vm_tanhf(INFINITY) == 1 && vm_tanhf(-INFINITY) == -1 && isnan(vm_tanhf(NAN)), "tanh specials");
  CHECK(signbit(vm_erff(-0.0f)) && signbit(vm_tanhf(-0.0f)), "odd at -0");
  return CHECK_DONE();
}
