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
 * helpers inside it. A team does not either: members no helper has taken run on the caller's
 * thread, each on a stack of its own, switched at barriers (below, "Members on the caller").
 *
 * Oversubscription: PyTorch's CPU intra-op threads and this pool only compete when CPU
 * tensor math runs while tpu work is still queued (strict mode). Programs that use the
 * tpu device keep their math on it, and the benchmark times each device to completion
 * (loss.item() / synchronize) before the other's turn, so the two never overlap there;
 * a program that does mix them can set TPU_NUM_THREADS (or torch.set_num_threads). */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
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
  int team_next;         /* next member id to claim (helpers, or the caller) */
  int64_t team_start;    /* when the team started (tpurt_now_ns) */
  int team_helpers_off;  /* tests: helpers leave teams to the caller */
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

/* ---- Members on the caller. A team's members must run at once (they wait for each other at
 * barriers), and a helper that is parked, or whose core the host thread holds, took 0.1-1 ms
 * to come: the first kernel of a compiled step waited 1.04 ms for a helper to run a 68 us
 * kernel's other half. So the caller runs members no helper has taken itself, each on a stack
 * of its own (a fiber), switching between them where one waits at a barrier. Which thread
 * runs a member never changes what it computes (Inductor splits loops by member id and
 * count), so results stay those of the full team. */
#define MEMBER_STACK_BYTES ((size_t)1 << 20)
#define CLAIM_AFTER_NS 10000 /* a helper that is awake takes its member within ~1 us */

#if defined(__SANITIZE_ADDRESS__)
#define POOL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POOL_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define POOL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define POOL_TSAN 1
#endif
#endif
#ifdef POOL_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef POOL_TSAN
#include <sanitizer/tsan_interface.h>
#endif

typedef struct {
  ucontext_t uc;
  char* stack; /* mapped once per slot and kept; slot 0 is the thread's own stack */
  int id, done, waiting;
  unsigned waiting_gen; /* the barrier generation it waits at, while `waiting` */
  uint64_t singles;
  const void* bottom; /* the stack, for ASan */
  size_t size;
  void* tsan_fiber;
} fiber;

static _Thread_local struct {
  fiber* f; /* MAX_THREADS slots, allocated at the thread's first team */
  int count, current, from;
} local;

static void fiber_switch(int to, int leaving) {
  fiber *a = &local.f[local.current], *b = &local.f[to];
  a->singles = member.singles;
  local.from = local.current, local.current = to;
  member.id = b->id, member.singles = b->singles;
#ifdef POOL_ASAN
  void* fake = NULL;
  __sanitizer_start_switch_fiber(leaving ? NULL : &fake, b->bottom, b->size);
#endif
#ifdef POOL_TSAN
  __tsan_switch_to_fiber(b->tsan_fiber, 0);
#endif
  (void)leaving;
  swapcontext(&a->uc, &b->uc);
#ifdef POOL_ASAN
  __sanitizer_finish_switch_fiber(fake, &local.f[local.from].bottom, &local.f[local.from].size);
#endif
}

/* A fiber's life: its member, then back to slot 0 for good (slot 0 runs the waits that pick
 * what runs next). */
static void fiber_main(void) {
#ifdef POOL_ASAN
  __sanitizer_finish_switch_fiber(NULL, &local.f[local.from].bottom, &local.f[local.from].size);
#endif
  fiber* f = &local.f[local.current];
  member.id = f->id, member.size = pool.team_size, member.singles = 0;
  pool.team_fn(pool.ctx, f->id, pool.team_size);
  f->done = 1;
  fiber_switch(0, 1);
}

/* The next slot's stack, mapped at its first use and kept for the thread's later teams. */
static int slot_ready(fiber* f) {
  if (f->stack) return 1;
  void* p = mmap(NULL, MEMBER_STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (p == MAP_FAILED) return 0;
  f->stack = p;
#ifdef POOL_TSAN
  f->tsan_fiber = __tsan_create_fiber(0);
#endif
  return 1;
}

/* A member no helper has taken yet, run here: once the team has run long enough that an
 * awake helper would have taken it, and only with a stack at hand. */
static int claim_member(void) {
  if (local.count >= MAX_THREADS || (!pool.team_helpers_off && tpurt_now_ns() - pool.team_start < CLAIM_AFTER_NS))
    return 0;
  fiber* f = &local.f[local.count];
  if (!slot_ready(f)) return 0;
  int id = __atomic_fetch_add(&pool.team_next, 1, __ATOMIC_ACQ_REL);
  if (id >= pool.team_size) return 0;
  getcontext(&f->uc);
  f->uc.uc_stack.ss_sp = f->stack;
  f->uc.uc_stack.ss_size = MEMBER_STACK_BYTES;
  f->uc.uc_link = NULL;
  makecontext(&f->uc, fiber_main, 0);
  f->bottom = f->stack, f->size = MEMBER_STACK_BYTES;
  f->id = id, f->done = 0, f->waiting = 0, f->singles = 0;
  fiber_switch(local.count++, 0);
  return 1;
}

/* While this thread's current member waits: runs another of its members that can go on, or a
 * member nobody has claimed. Returns whether anything ran. */
static int run_other_member(void) {
  unsigned gen = __atomic_load_n(&pool.barrier_gen, __ATOMIC_ACQUIRE);
  for (int i = 1; i <= local.count; i++) {
    int k = (local.current + i) % local.count;
    fiber* f = &local.f[k];
    if (k != local.current && !f->done && !(f->waiting && f->waiting_gen == gen)) {
      fiber_switch(k, 0);
      return 1;
    }
  }
  return claim_member();
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
      if (!pool.team_fn) run_chunks();
      else if (!pool.team_helpers_off) run_team_share();
      tpurt_temp_adopt(NULL);
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
  pthread_mutex_lock(&pool.mu);
  __atomic_store_n(&pool.join, (uint64_t)(uint32_t)(pool.gen + 1) << 32, __ATOMIC_RELAXED);
  __atomic_fetch_add(&pool.gen, 1, __ATOMIC_RELEASE);
  if (pool.sleepers) pthread_cond_broadcast(&pool.wake);
  pthread_mutex_unlock(&pool.mu);
  in_loop = 1;
  callers_share();
  in_loop = 0;
  /* A loop is done when its chunks are, a team when its members are: the caller claims what
   * helpers that have not woken yet would have taken, then closes the job to them and waits
   * only for those inside (it waited for a parked helper's wake-up, 0.1-0.2 ms on a VM, to
   * learn that nothing was left). */
  __atomic_fetch_or(&pool.join, JOIN_CLOSED, __ATOMIC_ACQ_REL);
  while (__atomic_load_n(&pool.join, __ATOMIC_ACQUIRE) & JOIN_COUNT) sched_yield();
}

/* Member 0, then every member this thread holds or can still claim, to the end. */
static void run_team_callers_share(void) {
  if (!local.f && !(local.f = calloc(MAX_THREADS, sizeof *local.f))) {
    run_member(0); /* no slots: the helpers run the other members */
    return;
  }
  local.count = 1, local.current = 0;
  local.f[0] = (fiber){.id = 0};
#ifdef POOL_TSAN
  local.f[0].tsan_fiber = __tsan_get_current_fiber();
#endif
  run_member(0);
  local.f[0].done = 1;
  for (unsigned spins = 0;; spins++) {
    int left = 0;
    for (int k = 1; k < local.count; k++) left |= !local.f[k].done;
    if (run_other_member()) continue;
    if (!left && __atomic_load_n(&pool.team_next, __ATOMIC_ACQUIRE) >= pool.team_size) break;
    tpurt_spin_pause(spins);
  }
  local.count = 0;
}

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
  pool.team_start = tpurt_now_ns();
  pool.barrier_waiting = 0;
  pool.single_taken = 0;
  run_job(run_team_callers_share);
  pool.team_fn = NULL;
  pthread_mutex_unlock(&pool.busy);
}

void tpurt_pool_team_helpers(int on) { pool.team_helpers_off = !on; }

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
  fiber* me = local.count ? &local.f[local.current] : NULL; /* the caller: it may run others */
  if (me) me->waiting = 1, me->waiting_gen = gen;
  for (unsigned spins = 0; __atomic_load_n(&pool.barrier_gen, __ATOMIC_ACQUIRE) == gen; spins++) {
    if (me && run_other_member()) continue;
    if (spins < 4096) tpurt_cpu_relax();
    else sched_yield();
  }
  if (me) me->waiting = 0;
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
