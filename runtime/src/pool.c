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
 * helpers inside it. A team's members may wait for each other (barriers), so a member no
 * helper has claimed by the time another member must wait is claimed by the waiting thread
 * and run there on a stack of its own (a fiber), switched to whenever the thread would wait:
 * the team keeps its size, so its results keep their bits, and it never waits for a helper
 * that has no core (the host thread issuing and the stream worker hold both of a 2-core
 * machine's; a compiled step's small generated kernels waited 0.3-0.9 ms each for one).
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
  int pending;      /* members of the current team other than 0 still running */
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
  int team_next;         /* next member id a helper (or a waiting member's thread) claims */
  int barrier_waiting;   /* members arrived at the current barrier */
  unsigned barrier_gen;  /* bumped when a barrier releases */
  uint64_t single_taken; /* single constructs claimed so far */
  int hold_helpers;      /* tests: helpers skip jobs, so callers run every member themselves */
} pool = {.busy = PTHREAD_MUTEX_INITIALIZER, .mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static _Thread_local int in_loop; /* nested loops run inline */
static _Thread_local int thread_index; /* 0: the caller of a loop; helpers 1..T-1 */
typedef struct {
  int id, size;       /* in a team: member id and team size; else 0 and 1 */
  uint64_t singles;   /* single constructs this member reached */
} member_state;
static _Thread_local member_state member = {0, 1, 0};

static void run_member(int id) {
  member.id = id;
  member.size = pool.team_size;
  member.singles = 0;
  pool.team_fn(pool.ctx, id, pool.team_size);
  member.id = 0;
  member.size = 1;
}

/* ------------------------------------------------------------------------ fibers */
#if defined(__SANITIZE_ADDRESS__)
#define FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FIBER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define FIBER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FIBER_TSAN 1
#endif
#endif
#ifdef FIBER_ASAN
void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom, size_t size);
void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old, size_t* size_old);
#endif
#ifdef FIBER_TSAN
void* __tsan_get_current_fiber(void);
void* __tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void* fiber);
void __tsan_switch_to_fiber(void* fiber, unsigned flags);
#endif

/* A thread's default stack size (what a member running on a helper has); only the pages a
 * member touches are ever committed. */
#define FIBER_STACK_BYTES ((size_t)8 << 20)
#define FIBER_GUARD_BYTES ((size_t)4096)

/* A member a thread runs besides its own, or (slot 0) the thread's own stack. */
typedef struct {
  ucontext_t uc;
  member_state member; /* the member's state while switched out */
  int running;         /* started and not finished */
  char* stack;         /* mapped once per slot, kept with the thread */
  const void* stack_bottom;
  size_t stack_size;
#ifdef FIBER_TSAN
  void* tsan;
#endif
} fiber;

static _Thread_local struct {
  fiber* slot[MAX_THREADS]; /* [0]: the thread's own context; [1..used): this team's members */
  int used;                 /* 0: no fiber in use (slot 0 not set up) */
  int cur;
  int prev; /* the context switched from: ASan learns the thread's own stack from the first switch */
} fibers;

static pthread_key_t fiber_key; /* frees a thread's fiber slots when it exits */

static void fiber_slots_free(void* arg) {
  (void)arg;
  for (int i = 0; i < MAX_THREADS; i++) {
    fiber* f = fibers.slot[i];
    if (!f) continue;
    if (f->stack) munmap(f->stack, FIBER_STACK_BYTES + FIBER_GUARD_BYTES);
    free(f);
    fibers.slot[i] = NULL;
  }
}

static void switch_fiber(int to) {
  fiber *from = fibers.slot[fibers.cur], *next = fibers.slot[to];
  from->member = member;
  member = next->member;
  fibers.prev = fibers.cur;
  fibers.cur = to;
#ifdef FIBER_ASAN
  void* fake = NULL;
  __sanitizer_start_switch_fiber(from->running ? &fake : NULL, next->stack_bottom, next->stack_size);
#endif
#ifdef FIBER_TSAN
  __tsan_switch_to_fiber(next->tsan, 0);
#endif
  swapcontext(&from->uc, &next->uc);
#ifdef FIBER_ASAN
  fiber* came_from = fibers.slot[fibers.prev];
  __sanitizer_finish_switch_fiber(fake, &came_from->stack_bottom, &came_from->stack_size);
#endif
}

/* The thread's next context that still runs, after the current one; -1 when only this one. */
static int next_fiber(void) {
  for (int k = 1; k < fibers.used; k++) {
    int i = (fibers.cur + k) % fibers.used;
    if (fibers.slot[i]->running) return i;
  }
  return -1;
}

static void fiber_main(void) {
#ifdef FIBER_ASAN
  fiber* came_from = fibers.slot[fibers.prev];
  __sanitizer_finish_switch_fiber(NULL, &came_from->stack_bottom, &came_from->stack_size);
#endif
  fiber* me = fibers.slot[fibers.cur];
  run_member(me->member.id);
  me->running = 0;
  __atomic_fetch_sub(&pool.pending, 1, __ATOMIC_RELEASE);
  switch_fiber(next_fiber()); /* the thread's own context still runs: it waits for this one */
}

static fiber* fiber_slot(int i) {
  if (fibers.slot[i]) return fibers.slot[i];
  fiber* f = calloc(1, sizeof *f);
  if (!f) return NULL;
  if (i > 0) {
    void* m = mmap(NULL, FIBER_STACK_BYTES + FIBER_GUARD_BYTES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (m == MAP_FAILED) {
      free(f);
      return NULL;
    }
    mprotect(m, FIBER_GUARD_BYTES, PROT_NONE); /* stacks grow down into the guard */
    f->stack = m;
    f->stack_bottom = (char*)m + FIBER_GUARD_BYTES;
    f->stack_size = FIBER_STACK_BYTES;
  }
  if (!fibers.slot[0] && i > 0 && !fiber_slot(0)) {
    if (f->stack) munmap(f->stack, FIBER_STACK_BYTES + FIBER_GUARD_BYTES);
    free(f);
    return NULL;
  }
  pthread_setspecific(fiber_key, f);
  return fibers.slot[i] = f;
}

/* Claims a member nobody runs yet and starts it here on a stack of its own. Returns whether it did. */
static int adopt_member(void) {
  if (fibers.used >= MAX_THREADS || __atomic_load_n(&pool.team_next, __ATOMIC_RELAXED) >= pool.team_size) return 0;
  int slot = fibers.used ? fibers.used : 1;
  fiber* f = fiber_slot(slot);
  if (!f) return 0;
  int id = __atomic_fetch_add(&pool.team_next, 1, __ATOMIC_RELAXED);
  if (id >= pool.team_size) return 0;
  if (!fibers.used) { /* the thread's own context joins the set */
    fibers.used = 1;
    fibers.cur = 0;
    fibers.slot[0]->running = 1;
#ifdef FIBER_TSAN
    fibers.slot[0]->tsan = __tsan_get_current_fiber();
#endif
  }
  fibers.used = slot + 1;
  getcontext(&f->uc);
  f->uc.uc_stack.ss_sp = f->stack + FIBER_GUARD_BYTES;
  f->uc.uc_stack.ss_size = FIBER_STACK_BYTES;
  f->uc.uc_link = NULL;
  makecontext(&f->uc, fiber_main, 0);
  f->member = (member_state){id, pool.team_size, 0};
  f->running = 1;
#ifdef FIBER_TSAN
  f->tsan = __tsan_create_fiber(0);
#endif
  switch_fiber(slot);
  return 1;
}

/* The thread's fibers are done (its own context waited for them): forget them. */
static void fibers_reset(void) {
#ifdef FIBER_TSAN
  for (int i = 1; i < fibers.used; i++) __tsan_destroy_fiber(fibers.slot[i]->tsan);
#endif
  fibers.used = 0;
  fibers.cur = 0;
}

/* A step of a team member's wait: runs a member nobody has claimed (WAIT_ADOPTED: that was
 * work, look again at once), else switches to another member this thread runs until that one
 * waits too (WAIT_SWITCHED), else nothing (WAIT_IDLE). Waiters pause after the last two: members
 * of one thread that all wait must still let the core go to the member they wait for. */
enum { WAIT_IDLE, WAIT_SWITCHED, WAIT_ADOPTED };
static int team_wait_step(void) {
  if (adopt_member()) return WAIT_ADOPTED;
  int next = fibers.used ? next_fiber() : -1;
  if (next < 0) return WAIT_IDLE;
  switch_fiber(next);
  return WAIT_SWITCHED;
}

/* Waits (running this thread's fibers) until every fiber this thread started is done. */
static void own_fibers_finish(void) {
  while (fibers.used && next_fiber() >= 0)
    if (team_wait_step() != WAIT_ADOPTED) sched_yield();
  if (fibers.used) fibers_reset();
}

/* A helper's share of a team: one member, and whatever members it adopts while waiting. */
static void run_team_share(void) {
  int id = __atomic_fetch_add(&pool.team_next, 1, __ATOMIC_RELAXED);
  if (id >= pool.team_size) return;
  run_member(id);
  own_fibers_finish();
  __atomic_fetch_sub(&pool.pending, 1, __ATOMIC_RELEASE);
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
    if (!__atomic_load_n(&pool.hold_helpers, __ATOMIC_RELAXED) && try_join(g)) {
      tpurt_temp_adopt(pool.temp);
      if (pool.team_fn) run_team_share();
      else run_chunks();
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
  pthread_key_create(&fiber_key, fiber_slots_free);
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
  if (pool.team_fn) __atomic_store_n(&pool.pending, pool.team_size - 1, __ATOMIC_RELAXED);
  pthread_mutex_lock(&pool.mu);
  __atomic_store_n(&pool.join, (uint64_t)(uint32_t)(pool.gen + 1) << 32, __ATOMIC_RELAXED);
  __atomic_fetch_add(&pool.gen, 1, __ATOMIC_RELEASE);
  if (pool.sleepers) pthread_cond_broadcast(&pool.wake);
  pthread_mutex_unlock(&pool.mu);
  in_loop = 1;
  callers_share();
  in_loop = 0;
  /* A team is done when its members are: the caller runs those no helper claimed (fibers).
   * A loop is done when its chunks are: the caller claims the chunks of helpers that have not
   * woken yet. Then it closes the job to late helpers and waits only for those inside (it
   * waited for a parked helper's wake-up, 0.1-0.2 ms on a VM, to learn that nothing was left). */
  if (pool.team_fn) {
    while (__atomic_load_n(&pool.pending, __ATOMIC_ACQUIRE) > 0)
      if (team_wait_step() != WAIT_ADOPTED) sched_yield();
    if (fibers.used) fibers_reset();
  }
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

void tpurt_pool_hold_helpers(int hold) { __atomic_store_n(&pool.hold_helpers, hold, __ATOMIC_RELAXED); }

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
    if (team_wait_step() == WAIT_ADOPTED) continue;
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
  if (__atomic_load_n(&L->next, __ATOMIC_RELAXED) >= L->n) return; /* came too late: no init */
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
