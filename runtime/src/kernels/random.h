/* The standard normal draw that random.c's normal_ and misc.c's normal with tensor parameters
 * share: Box-Muller on one Philox counter's four words. Every dtype but float64 draws in float
 * (vmath.h's log and cos, which vectorize; a TPU draws float32 normals in float32 too), float64
 * in double with libm's. */
#ifndef TPURT_KERNELS_RANDOM_H
#define TPURT_KERNELS_RANDOM_H
#include "../internal.h"
/* ISO C's rounding (no FMA contraction) in random.c and misc.c: the same draws in every build */
#ifndef VMATH_NO_CONTRACT
#define VMATH_NO_CONTRACT
#endif
#include "vmath.h"

static inline float tpurt_std_normal_f32(const uint32_t r[4]) {
  float u1 = (float)(1.0 - tpurt_u64_to_unit_f64(r[0], r[1])), u2 = (float)tpurt_u64_to_unit_f64(r[2], r[3]);
  return sqrtf(-2.0f * vm_logf(u1)) * vm_cosf(6.2831855f * u2); /* u1 in (0, 1]: the log is finite */
}
static inline double tpurt_std_normal_f64(const uint32_t r[4]) {
  double u1 = 1.0 - tpurt_u64_to_unit_f64(r[0], r[1]), u2 = tpurt_u64_to_unit_f64(r[2], r[3]);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
static inline double tpurt_std_normal(const uint32_t r[4], int dtype) {
  return dtype == TPURT_F64 ? tpurt_std_normal_f64(r) : tpurt_std_normal_f32(r);
}
#endif
