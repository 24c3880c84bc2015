/* The worker pool kernels split large loops over: T threads in all, the calling thread
 * (usually a stream worker) plus T-1 persistent helpers, T = TPU_NUM_THREADS or the
 * number of online CPUs. A loop of n items is cut into fixed chunks of `grain` items that
 * the threads claim one by one (a thread slowed down by a busy machine just claims fewer),
 * so the chunks never depend on timing, only which thread runs each. Thread k claims from
 * the k-th of T equal runs of chunks first and only then from the others' runs: back-to-back
 * kernels over the same tensors (a training step's activations of a few MiB) then find
 * their part in the core's own cache, as with OpenMP's static schedule (a 1 MiB add took
 * 23 us against PyTorch CPU's 12 when any thread claimed any chunk).
 *
 * One parallel loop runs at a time: a second caller (another stream) or a nested call runs
 * its loop inline instead of waiting. Helpers spin briefly after each loop (kernels issue
 * loops back to back) and then sleep on a condition variable. A loop does not wait for a
 * helper still waking up: the caller claims its chunks, closes the loop and waits only for
 * helpers inside it; a team (every member on its own thread) waits for all.
 *
 * Oversubscription: PyTorch's CPU intra-op threads and this pool only compete when CPU
 * tensor math runs while tpu work is still queued (strict mode). Programs that use the
 * tpu device keep their math on it, and the benchmark times each device to completion
 * (loss.item() / synchronize) before the other's turn, so the two never overlap there;
 * a program that does mix them can set TPU_NUM_THREADS (or torch.set_num_threads). */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define MAX_THREADS 64
#define SPIN_NS 50000 /* polling before a helper sleeps: loops of one kernel come back to back */



static struct {
  int nthreads;
  pthread_mutex_t busy; /* held by the thread running a parallel loop */
  pthread_mutex_t mu;
  pthread_cond_t wake;
  uint64_t gen;     /* bumped per loop; helpers run when it changes */
  int sleepers;     /* helpers blocked on `wake` (under mu) */
  int pending;      /* helpers still running the current team */
  /* Joining the current job: its generation (gen's low 32 bits) above bit 32, JOIN_CLOSED, and
   * the count of helpers inside it. */
  _Alignas(64) uint64_t join;
  tpurt_pool_fn fn;
  void* ctx;
  int64_t n, grain;
  int64_t runs; /* runs of chunks, one per thread (nthreads) */
  struct {
    _Alignas(64) int64_t next; /* first unclaimed item of this thread's run */
    int64_t end;
  } run[MAX_THREADS];
  tpurt_temp_ctx* temp; /* the calling kernel's temporaries, which helpers may take too */
  int caller_cpu;       /* the CPU the loop's caller ran on when it started the loop */
  /* A team (tpurt_parallel_team) instead of a loop: every member on a thread of its own. */
  tpurt_team_fn team_fn;
  int team_size;
  int team_next;         /* next member id a helper claims */
  int barrier_waiting;   /* members arrived at the current barrier */
  unsigned barrier_gen;  /* bumped when a barrier releases */
  uint64_t single_taken; /* single constructs claimed so far */
} pool = {.busy = PTHREAD_MUTEX_INITIALIZER, .mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static _Thread_local int in_loop; /* nested loops run inline */
static _Thread_local int thread_index; /* 0: the caller of a loop; helpers 1..T-1 */
static _Thread_local struct {
  int id, size;       /* in a team: member id and team size; else 0 and 1 */
  uint64_t singles;   /* single constructs this member reached */
} member = {0, 1, 0};

static void run_member(int id) {
  member.id = id;
  member.size = pool.team_size;
  member.singles = 0;
  pool.team_fn(pool.ctx, id, pool.team_size);
  member.id = 0;
  member.size = 1;
}

/* A helper's share of a team: one member at most, so members never wait on each other
 * from the same thread. */
static void run_team_share(void) {
  int id = __atomic_fetch_add(&pool.team_next, 1, __ATOMIC_RELAXED);
  if (id < pool.team_size) run_member(id);
}

/* Claim and run chunks of the current loop until none is left: this thread's run first. */
static void run_chunks(void) {
  int64_t n = pool.n, grain = pool.grain, runs = pool.runs;
  for (int64_t k = 0; k < runs; k++) {
    int64_t r = (thread_index + k) % runs, end = pool.run[r].end;
    for (;;) {
      int64_t b = __atomic_fetch_add(&pool.run[r].next, grain, __ATOMIC_RELAXED);
      if (b >= end) break;
      pool.fn(pool.ctx, b, b + grain < n ? b + grain : n);
    }
  }
}

/* A helper woken on the core of the loop's caller would run its share after the caller's,
 * not beside it: the scheduler places a woken thread near its waker, and on a 2-core machine
 * with the host thread polling the other core, the caller and a helper shared one core for
 * whole runs (a 256^3 GEMM took its one-thread time). Such a helper moves itself to the
 * other CPUs it may use for this loop (its mask saved in *saved). Returns whether it did. */
static int step_aside(cpu_set_t* saved) {
  int cpu = sched_getcpu();
  if (cpu < 0 || cpu != __atomic_load_n(&pool.caller_cpu, __ATOMIC_RELAXED) ||
      sched_getaffinity(0, sizeof *saved, saved) || CPU_COUNT(saved) < 2 || !CPU_ISSET(cpu, saved))
    return 0;
  cpu_set_t others = *saved;
  CPU_CLR(cpu, &others);
  return sched_setaffinity(0, sizeof others, &others) == 0;
}

#define JOIN_CLOSED (1ull << 31)
#define JOIN_COUNT (JOIN_CLOSED - 1)

/* Enters job `g` unless it is over (or closed to late helpers). */
static int try_join(uint64_t g) {
  uint64_t s = __atomic_load_n(&pool.join, __ATOMIC_ACQUIRE);
  for (;;) {
    if (s >> 32 != (uint32_t)g || (s & JOIN_CLOSED)) return 0;
    if (__atomic_compare_exchange_n(&pool.join, &s, s + 1, 1, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return 1;
  }
}

static void* helper_main(void* p) {
  thread_index = (int)(intptr_t)p;
  uint64_t seen = 0;
  in_loop = 1;
  for (;;) {
    uint64_t g;
    int64_t spin_end = tpurt_now_ns() + SPIN_NS;
    unsigned spins = 0;
    while ((g = __atomic_load_n(&pool.gen, __ATOMIC_ACQUIRE)) == seen) {
      if (++spins % 64 || tpurt_now_ns() < spin_end) {
        tpurt_spin_pause(spins);
        continue;
      }
      pthread_mutex_lock(&pool.mu);
      pool.sleepers++;
      while (__atomic_load_n(&pool.gen, __ATOMIC_ACQUIRE) == seen) pthread_cond_wait(&pool.wake, &pool.mu);
      pool.sleepers--;
      pthread_mutex_unlock(&pool.mu);
    }
    seen = g;
    cpu_set_t saved;
    int moved = step_aside(&saved);
    if (try_join(g)) {
      tpurt_temp_adopt(pool.temp);
      int team = pool.team_fn != NULL;
      if (team) run_team_share();
      else run_chunks();
      tpurt_temp_adopt(NULL);
      if (team) __atomic_fetch_sub(&pool.pending, 1, __ATOMIC_RELEASE);
      __atomic_fetch_sub(&pool.join, 1, __ATOMIC_RELEASE);
    }
    if (moved) sched_setaffinity(0, sizeof saved, &saved);
  }
  return NULL;
}

/* A forked child has only the forking thread: its loops run inline from then on. */
static void pool_after_fork_child(void) {
  pool.nthreads = 1;
  pthread_mutex_init(&pool.busy, NULL);
  pthread_mutex_init(&pool.mu, NULL);
  pthread_cond_init(&pool.wake, NULL);
  pool.sleepers = 0;
}

static void pool_init(void) {
  pthread_atfork(NULL, NULL, pool_after_fork_child);
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int n = ncpu > 0 ? (int)ncpu : 1;
  const char* env = tpurt_env_get(TPURT_ENV_NUM_THREADS);
  if (env) {
    int v = atoi(env);
    if (v >= 1) n = v;
  }
  if (n > MAX_THREADS) n = MAX_THREADS;
  pool.nthreads = n;
  for (int i = 1; i < n; i++) {
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &attr, helper_main, (void*)(intptr_t)i)) pool.nthreads = i;
    pthread_attr_destroy(&attr);
    if (pool.nthreads == i) break;
  }
}

int tpurt_pool_threads(void) {
  pthread_once(&pool_once, pool_init);
  return pool.nthreads;
}

/* The job set up in `pool` (a loop or a team; the caller holds pool.busy): wakes the helpers,
 * runs the caller's share, waits for theirs. */
static void run_job(void (*callers_share)(void)) {
  pool.temp = tpurt_temp_current();
  __atomic_store_n(&pool.caller_cpu, sched_getcpu(), __ATOMIC_RELAXED);
  __atomic_store_n(&pool.pending, pool.nthreads - 1, __ATOMIC_RELAXED);
  pthread_mutex_lock(&pool.mu);
  __atomic_store_n(&pool.join, (uint64_t)(uint32_t)(pool.gen + 1) << 32, __ATOMIC_RELAXED);
  __atomic_fetch_add(&pool.gen, 1, __ATOMIC_RELEASE);
  if (pool.sleepers) pthread_cond_broadcast(&pool.wake);
  pthread_mutex_unlock(&pool.mu);
  in_loop = 1;
  callers_share();
  in_loop = 0;
  /* A team needs every member. A loop is done when its chunks are: the caller claims the
   * chunks of helpers that have not woken yet, then closes the loop to them and waits only
   * for those inside (it waited for a parked helper's wake-up, 0.1-0.2 ms on a VM, to learn
   * that nothing was left). */
  if (pool.team_fn)
    while (__atomic_load_n(&pool.pending, __ATOMIC_ACQUIRE) > 0) sched_yield();
  __atomic_fetch_or(&pool.join, JOIN_CLOSED, __ATOMIC_ACQ_REL);
  while (__atomic_load_n(&pool.join, __ATOMIC_ACQUIRE) & JOIN_COUNT) sched_yield();
}

static void run_first_member(void) { run_member(0); }

void tpurt_parallel_for(int64_t n, int64_t grain, tpurt_pool_fn fn, void* ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int nt = tpurt_pool_threads();
  if (nt == 1 || n <= grain || in_loop || pthread_mutex_trylock(&pool.busy)) {
    fn(ctx, 0, n);
    return;
  }
  pool.fn = fn;
  pool.ctx = ctx;
  pool.n = n;
  pool.grain = grain;
  int64_t chunks = (n + grain - 1) / grain;
  pool.runs = nt;
  for (int r = 0; r < nt; r++) { /* run r: chunks [r*chunks/nt, (r+1)*chunks/nt) */
    pool.run[r].next = r * chunks / nt * grain;
    pool.run[r].end = (r + 1) * chunks / nt * grain;
  }
  run_job(run_chunks);
  pthread_mutex_unlock(&pool.busy);
}

void tpurt_parallel_team(int size, tpurt_team_fn fn, void* ctx) {
  int nt = tpurt_pool_threads();
  if (size <= 0 || size > nt) size = nt;
  if (size == 1 || in_loop || pthread_mutex_trylock(&pool.busy)) {
    int id = member.id, was = member.size;
    uint64_t singles = member.singles;
    member.id = 0, member.size = 1;
    fn(ctx, 0, 1);
    member.id = id, member.size = was, member.singles = singles;
    return;
  }
  pool.team_fn = fn;
  pool.ctx = ctx;
  pool.team_size = size;
  pool.team_next = 1;
  pool.barrier_waiting = 0;
  pool.single_taken = 0;
  run_job(run_first_member);
  pool.team_fn = NULL;
  pthread_mutex_unlock(&pool.busy);
}

int tpurt_team_member(void) { return member.id; }
int tpurt_team_size(void) { return member.size; }

/* Every member waits for the others. Spins (members arrive close together), yielding the
 * core after a while: on a machine shared with other work the one it waits for may need it. */
void tpurt_team_barrier(void) {
  if (member.size <= 1) return;
  unsigned gen = __atomic_load_n(&pool.barrier_gen, __ATOMIC_ACQUIRE);
  if (__atomic_add_fetch(&pool.barrier_waiting, 1, __ATOMIC_ACQ_REL) == member.size) {
    __atomic_store_n(&pool.barrier_waiting, 0, __ATOMIC_RELAXED);
    __atomic_add_fetch(&pool.barrier_gen, 1, __ATOMIC_RELEASE);
    return;
  }
  for (unsigned spins = 0; __atomic_load_n(&pool.barrier_gen, __ATOMIC_ACQUIRE) == gen; spins++) {
    if (spins < 4096) tpurt_cpu_relax();
    else sched_yield();
  }
}

/* The member that reaches the team's k-th single construct first runs it. */
int tpurt_team_single(void) {
  if (member.size <= 1) return 1;
  uint64_t mine = ++member.singles, seen = __atomic_load_n(&pool.single_taken, __ATOMIC_ACQUIRE);
  return seen < mine &&
         __atomic_compare_exchange_n(&pool.single_taken, &seen, mine, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/* A sliced loop: its chunks run on the team's members, each in a slice of its own. */
typedef struct {
  int64_t n, grain, next; /* next: first unclaimed item */
  char* work;
  size_t slice_bytes;
  tpurt_slice_init_fn init;
  tpurt_slice_fn fn;
  void* ctx;
} sliced_loop;

/* Chunks are claimed in order, as tpurt_parallel_for's are, so each item runs the same
 * whatever member runs it. */
static void sliced_member(void* arg, int id, int size) {
  sliced_loop* L = arg;
  (void)size;
  void* slice = L->work + (size_t)id * L->slice_bytes;
  if (L->init) L->init(L->ctx, slice);
  for (int64_t b; (b = __atomic_fetch_add(&L->next, L->grain, __ATOMIC_RELAXED)) < L->n;)
    L->fn(L->ctx, slice, b, L->n - b < L->grain ? L->n : b + L->grain);
}

int tpurt_sliced_workers(int64_t n, int64_t grain) {
  if (n <= 0) return 0;
  int64_t chunks = (n - 1) / (grain < 1 ? 1 : grain) + 1, nt = tpurt_pool_threads();
  return (int)(chunks < nt ? chunks : nt);
}

void tpurt_parallel_sliced(int64_t n, int64_t grain, void* work, size_t slice_bytes, tpurt_slice_init_fn init,
                           tpurt_slice_fn fn, void* ctx) {
  int workers = tpurt_sliced_workers(n, grain);
  if (!workers) return;
  sliced_loop L = {n, grain < 1 ? 1 : grain, 0, work, slice_bytes, init, fn, ctx};
  tpurt_parallel_team(workers, sliced_member, &L);
}

static _Thread_local struct {
  void* p;
  size_t bytes;
} scratch;

/* A buffer above this is not kept for smaller requests: one huge product must not pin its
 * workspace to the thread for the rest of the process. */
#define SCRATCH_KEEP_MAX ((size_t)64 << 20)

void* tpurt_scratch(size_t bytes) {
  size_t have = scratch.bytes;
  if (bytes <= have && (have <= SCRATCH_KEEP_MAX || bytes > SCRATCH_KEEP_MAX)) return scratch.p;
  free(scratch.p);
  scratch.p = NULL;
  scratch.bytes = 0;
  bytes = (bytes + 4095) & ~(size_t)4095;
  if (posix_memalign(&scratch.p, 64, bytes)) return scratch.p = NULL;
  scratch.bytes = bytes;
  return scratch.p;
}
