/* The OpenMP entry points torch.compile's generated C++ kernels call, on the runtime's pool.
 *
 * Inductor's C++ loops are OpenMP (`#pragma omp parallel`, `omp for` with the static schedule,
 * `omp single`); GCC lowers them to the five calls below. Run by PyTorch's libgomp they would
 * bring a second team of spinning threads beside the pool's, and the two take each other's
 * cores (a compiled GPT step ran slower than eager). torch_tpu links each generated kernel
 * with -Wl,--wrap for exactly these symbols (torch_tpu/compiler/launch.py), which binds them to
 * the __wrap_ definitions here; a kernel that needs any other OpenMP symbol is built against
 * libgomp instead. */
#include "internal.h"

void __wrap_GOMP_parallel(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags);
void __wrap_GOMP_barrier(void);
int __wrap_GOMP_single_start(void);
int __wrap_omp_get_thread_num(void);
int __wrap_omp_get_num_threads(void);
int __wrap_omp_get_max_threads(void);

typedef struct {
  void (*fn)(void*);
  void* data;
} region;

static void run_region(void* ctx, int member, int size) {
  (void)member, (void)size;
  const region* r = ctx;
  r->fn(r->data);
}

void __wrap_GOMP_parallel(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags) {
  (void)flags;
  region r = {fn, data};
  tpurt_parallel_team((int)num_threads, run_region, &r);
}

void __wrap_GOMP_barrier(void) { tpurt_team_barrier(); }
int __wrap_GOMP_single_start(void) { return tpurt_team_single(); }
int __wrap_omp_get_thread_num(void) { return tpurt_team_member(); }
int __wrap_omp_get_num_threads(void) { return tpurt_team_size(); }
int __wrap_omp_get_max_threads(void) { return tpurt_pool_threads(); }
