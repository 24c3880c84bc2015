/* <complex.h> for every compiler that builds the runtime: glibc defines C11's CMPLX and CMPLXF
 * for GCC only; clang (the fuzz build, runtime/Makefile) has the builtin they stand for. */
#ifndef TPURT_KERNELS_CMPLX_H
#define TPURT_KERNELS_CMPLX_H
#include <complex.h>
#if defined(__clang__) && !defined(CMPLXF)
#define CMPLXF(x, y) __builtin_complex((float)(x), (float)(y))
#define CMPLX(x, y) __builtin_complex((double)(x), (double)(y))
#endif
#endif
