/* Which instruction set this build of the library was compiled for, and which builds the host
 * CPU runs. Also built alone (libtpurt-isa.so) so that torch_tpu can ask before it loads a
 * build of the runtime, and as the Makefile's probe of the host (TPURT_ISA_PROBE). */
#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#include <string.h>

#include "tpurt.h"

typedef struct {
  const char* name;
  const char* level;
  const char* needs;
} isa_entry;

static const isa_entry isas[] = {
#define TPURT_X(name, level, needs) {name, level, needs},
    TPURT_ISA_LIST(TPURT_X)
#undef TPURT_X
};
enum { ISA_COUNT = sizeof isas / sizeof isas[0] };

const char* tpurt_isa(void) {
#if defined(__AMX_BF16__) && defined(__AMX_TILE__)
  return "amx";
#elif defined(__AVX512BF16__)
  return "avx512bf16";
#elif defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  return "avx512";
#elif defined(__AVX2__) && defined(__FMA__)
  return "avx2";
#else
  return "portable";
#endif
}

const char* tpurt_sanitizer(void) {
#ifdef __SANITIZE_ADDRESS__
  return "asan";
#else
  return NULL;
#endif
}

const char* tpurt_isa_name(int i) { return i >= 0 && i < ISA_COUNT ? isas[i].name : NULL; }

static const isa_entry* find(const char* name) {
  for (int i = 0; name && i < ISA_COUNT; i++)
    if (strcmp(isas[i].name, name) == 0) return &isas[i];
  return NULL;
}

const char* tpurt_isa_needs(const char* name) {
  const isa_entry* e = find(name);
  return e ? e->needs : NULL;
}

/* The features that define each x86-64 level (the CPU and the OS's saved register state:
 * __builtin_cpu_supports checks both). */
const char* tpurt_isa_level(const char* name) {
  const isa_entry* e = find(name);
  return e ? e->level : NULL;
}

int tpurt_isa_host_runs(const char* name) {
  const isa_entry* e = find(name);
  if (!e) return 0;
  if (strcmp(e->name, "portable") == 0) return 1;
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  unsigned eax, ebx, ecx = 0, edx; /* F16C from CPUID: clang's __builtin_cpu_supports has no name for it */
  __get_cpuid(1, &eax, &ebx, &ecx, &edx);
  int v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && (ecx & bit_F16C) &&
           __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
  if (strcmp(e->name, "avx2") == 0) return v3;
  int v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl");
  if (strcmp(e->name, "avx512") == 0) return v4;
  if (strcmp(e->name, "avx512bf16") == 0) /* AVX512_BF16: CPUID 7.1 EAX bit 5 */
    return v4 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 5));
  /* amx: the tile and bf16 units (CPUID 7.0 EDX bits 24, 22), and Linux's permission to use their
   * state (asked once per process; the state is large, so it is off until asked for) */
  unsigned a7, b7, c7, d7;
  if (!v4 || !__get_cpuid_count(7, 0, &a7, &b7, &c7, &d7) || !(d7 & (1u << 24)) || !(d7 & (1u << 22))) return 0;
  return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
#else
  return 0;
#endif
}

#ifdef TPURT_ISA_PROBE
#include <stdio.h>
/* No argument: prints the widest build this host runs. `level NAME`: the compiler's name of the
 * build's x86-64 level (runtime/Makefile's -march, so the list above is the only one). */
int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "level") == 0) return tpurt_isa_level(argv[2]) ? puts(tpurt_isa_level(argv[2])) < 0 : 1;
  for (int i = 0; tpurt_isa_name(i); i++)
    if (tpurt_isa_host_runs(tpurt_isa_name(i))) return puts(tpurt_isa_name(i)) < 0;
  return 1;
}
#endif
