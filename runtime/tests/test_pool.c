/* The worker pool and the stream command ring under ASan + UBSan: every item of a parallel
 * loop runs exactly once (also nested, from two threads at once and in a forked child), a
 * sliced loop claims its chunks in order with a slice per member,
 * more commands than the ring holds keep their order, small ops run inline on an idle
 * stream keep the strict-mode error contract, side streams start after the default
 * stream's earlier work, a helper never runs beside the loop's caller on its core (nor
 * keeps the narrower CPU mask it took to avoid it), and a team whose members no helper runs
 * (held, or without a core) still runs every member with its own id, stack and barriers. */
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "internal.h"

typedef struct {
  int64_t n;
  int* hits;
  int nested;
} loop_ctx;

static void count_items(void* p, int64_t b, int64_t e) {
  loop_ctx* c = p;
  for (int64_t i = b; i < e; i++) __atomic_fetch_add(&c->hits[i], 1, __ATOMIC_RELAXED);
  if (c->nested) { /* a loop inside a loop runs inline on the same thread */
    loop_ctx inner = {e - b, c->hits + b, 0};
    tpurt_parallel_for(inner.n, 3, count_items, &inner);
  }
}

static int all_equal(const int* v, int64_t n, int want) {
  for (int64_t i = 0; i < n; i++)
    if (v[i] != want) return 0;
  return 1;
}

static void test_parallel_for(void) {
  CHECK(tpurt_pool_threads() >= 1, "pool threads %d", tpurt_pool_threads());
  int64_t sizes[] = {1, 7, 64, 1000, 100003};
  int64_t grains[] = {1, 5, 64, 4096};
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
    for (size_t g = 0; g < sizeof grains / sizeof *grains; g++) {
      loop_ctx c = {sizes[s], calloc((size_t)sizes[s], sizeof(int)), 0};
      tpurt_parallel_for(c.n, grains[g], count_items, &c);
      CHECK(all_equal(c.hits, c.n, 1), "n=%lld grain=%lld: an item ran not exactly once", (long long)c.n,
            (long long)grains[g]);
      free(c.hits);
    }
  loop_ctx c = {5000, calloc(5000, sizeof(int)), 1};
  tpurt_parallel_for(c.n, 100, count_items, &c);
  CHECK(all_equal(c.hits, c.n, 2), "nested loop: items must run twice (outer + inner)");
  free(c.hits);
  tpurt_parallel_for(0, 1, count_items, &c); /* empty loop: no call */
}

/* A loop started inside a pool task (a kernel run per tile of a fused chain calls the engine,
 * which may start its own loop) runs serially on the task's thread: every inner item sees the
 * thread that runs the outer chunk. */
typedef struct {
  pthread_t outer;
  int other_thread;
} nest_ctx;
static void inner_items(void* p, int64_t b, int64_t e) {
  nest_ctx* c = p;
  if (!pthread_equal(c->outer, pthread_self())) __atomic_store_n(&c->other_thread, 1, __ATOMIC_RELAXED);
}
static int nested_other_thread;
static void outer_items(void* p, int64_t b, int64_t e) {
  nest_ctx inner = {pthread_self(), 0};
  tpurt_parallel_for(1 << 16, 1, inner_items, &inner);
  if (inner.other_thread) __atomic_store_n(&nested_other_thread, 1, __ATOMIC_RELAXED);
}
static void test_nested_serial(void) {
  tpurt_parallel_for(64, 1, outer_items, NULL);
  CHECK(!nested_other_thread, "a nested loop ran items on another thread");
}

static void* loop_thread(void* p) {
  loop_ctx* c = p;
  for (int r = 0; r < 50; r++) tpurt_parallel_for(c->n, 16, count_items, c);
  return NULL;
}

static void test_concurrent_loops(void) {
  loop_ctx a = {4096, calloc(4096, sizeof(int)), 0}, b = {4096, calloc(4096, sizeof(int)), 0};
  pthread_t t1, t2;
  pthread_create(&t1, NULL, loop_thread, &a);
  pthread_create(&t2, NULL, loop_thread, &b);
  pthread_join(t1, NULL);
  pthread_join(t2, NULL);
  CHECK(all_equal(a.hits, a.n, 50) && all_equal(b.hits, b.n, 50), "two threads' loops mixed up items");
  free(a.hits);
  free(b.hits);
}

/* ---------------------------------------------------------------- sliced loops */
typedef struct {
  pthread_t owner; /* the thread whose member initialized the slice */
  int inits;
  int64_t last; /* begin of the slice's latest chunk, -1 before the first */
} slice_log;

typedef struct {
  int64_t n, grain;
  int* hits;
  char* work;
  size_t slice_bytes;
  int slices;
  int bad; /* a chunk not on the grain, out of claim order, or in another member's slice */
} sliced_ctx;

static void slice_init(void* p, void* slice) {
  sliced_ctx* c = p;
  slice_log* s = slice;
  if ((char*)slice != c->work + (size_t)tpurt_team_member() * c->slice_bytes)
    __atomic_store_n(&c->bad, 1, __ATOMIC_RELAXED);
  *s = (slice_log){pthread_self(), s->inits + 1, -1};
}

static void slice_chunk(void* p, void* slice, int64_t b, int64_t e) {
  sliced_ctx* c = p;
  slice_log* s = slice;
  if (!pthread_equal(s->owner, pthread_self()) || s->inits != 1 || b <= s->last || b % c->grain ||
      e != (b + c->grain < c->n ? b + c->grain : c->n))
    __atomic_store_n(&c->bad, 1, __ATOMIC_RELAXED);
  s->last = b;
  memset(s + 1, 0xab, c->slice_bytes - sizeof *s); /* the whole slice is the member's (ASan: and no more) */
  for (int64_t i = b; i < e; i++) __atomic_fetch_add(&c->hits[i], 1, __ATOMIC_RELAXED);
}

/* Runs a sliced loop; returns the slices it initialized, or -1 when it went wrong. */
static int run_sliced(int64_t n, int64_t grain) {
  sliced_ctx c = {n, grain, calloc((size_t)n + 1, sizeof(int)), NULL, sizeof(slice_log) + 40, 0, 0};
  c.slices = tpurt_sliced_workers(n, grain);
  c.work = calloc((size_t)c.slices, c.slice_bytes); /* exactly: ASan catches a slice past the last */
  tpurt_parallel_sliced(n, grain, c.work, c.slice_bytes, slice_init, slice_chunk, &c);
  int inited = 0;
  for (int m = 0; m < c.slices; m++) inited += ((slice_log*)(c.work + (size_t)m * c.slice_bytes))->inits;
  int ok = !c.bad && all_equal(c.hits, n, 1);
  free(c.hits);
  free(c.work);
  return ok ? inited : -1;
}

static void nested_sliced(void* p, int64_t b, int64_t e) {
  int* inited = p;
  for (int64_t i = b; i < e; i++) __atomic_store_n(&inited[i], run_sliced(1000, 7), __ATOMIC_RELAXED);
}

static void test_parallel_sliced(void) {
  int nt = tpurt_pool_threads();
  CHECK(tpurt_sliced_workers(0, 4) == 0 && tpurt_sliced_workers(-3, 4) == 0, "no items: no workers");
  CHECK(tpurt_sliced_workers(1, 4) == 1 && tpurt_sliced_workers(9, 4) == (nt < 3 ? nt : 3),
        "workers: one per chunk up to the pool's threads");
  CHECK(tpurt_sliced_workers(1000, 1) == nt, "workers: at most the pool's threads (%d)", nt);
  int64_t sizes[] = {1, 7, 64, 1000, 100003};
  int64_t grains[] = {1, 5, 64, 4096};
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
    for (size_t g = 0; g < sizeof grains / sizeof *grains; g++) {
      int inited = run_sliced(sizes[s], grains[g]);
      CHECK(inited >= 1 && inited <= tpurt_sliced_workers(sizes[s], grains[g]),
            "n=%lld grain=%lld: items not run once in order, shared slices or %d inits", (long long)sizes[s],
            (long long)grains[g], inited);
    }
  CHECK(run_sliced(0, 3) == 0, "an empty sliced loop runs nothing");
  /* inside a parallel loop the team is one member: only slice 0 is used */
  int inited[4] = {0};
  tpurt_parallel_for(4, 1, nested_sliced, inited);
  for (int i = 0; i < 4; i++) CHECK(inited[i] == 1, "nested sliced loop %d: %d slices initialized", i, inited[i]);
}

/* ---------------------------------------------------------------- stream ring */
typedef struct {
  int* log;
  int* next;
  int id;
} order_arg;

static tpurt_status log_order(void* p) {
  order_arg* a = p;
  a->log[(*a->next)++] = a->id; /* the worker runs commands one at a time */
  return TPURT_OK;
}

/* A forked child (DataLoader workers) has no helper threads: its loops must run inline,
 * and its streams need workers of their own. */
static void test_fork(void) {
  loop_ctx warm = {100000, calloc(100000, sizeof(int)), 0};
  tpurt_parallel_for(warm.n, 64, count_items, &warm); /* helpers exist in the parent */
  int next = 0, log[1];
  order_arg a = {log, &next, 5};
  tpurt_stream_enqueue(0, log_order, &a, NULL, "log"); /* the parent's stream worker runs */
  tpurt_stream_synchronize(0);
  pid_t pid = fork();
  if (pid == 0) {
    loop_ctx c = {100000, calloc(100000, sizeof(int)), 0};
    tpurt_parallel_for(c.n, 64, count_items, &c);
    /* and streams work in the child: it gets its own workers */
    next = 0;
    tpurt_stream_enqueue(0, log_order, &a, NULL, "log");
    int ok = tpurt_stream_synchronize(0) == TPURT_OK && next == 1;
    _exit(all_equal(c.hits, c.n, 1) && ok ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "parallel loop in a forked child failed (status %d)", status);
  free(warm.hits);
}

static tpurt_status slow_cmd(void* p) {
  (void)p;
  struct timespec ts = {0, 20 * 1000 * 1000};
  nanosleep(&ts, NULL);
  return TPURT_OK;
}

static void test_ring_order(void) {
  enum { N = 1000 }; /* many times the ring size: the issuing thread must wait for room */
  int32_t s;
  CHECK(tpurt_stream_create(0, &s) == TPURT_OK, "stream_create: %s", tpurt_last_error());
  int* log = calloc(N, sizeof(int));
  order_arg* args = calloc(N, sizeof(order_arg));
  int next = 0;
  tpurt_stream_enqueue(s, slow_cmd, NULL, NULL, "slow");
  for (int i = 0; i < N; i++) {
    args[i] = (order_arg){log, &next, i};
    CHECK(tpurt_stream_enqueue(s, log_order, &args[i], NULL, "log") == TPURT_OK, "enqueue %d", i);
  }
  CHECK(tpurt_stream_synchronize(s) == TPURT_OK, "synchronize: %s", tpurt_last_error());
  CHECK(tpurt_stream_query(s) == 1, "stream not idle after synchronize");
  int ordered = next == N;
  for (int i = 0; i < N && ordered; i++) ordered = log[i] == i;
  CHECK(ordered, "commands ran out of order or not at all (%d of %d)", next, N);
  free(log);
  free(args);
}

static tpurt_status failing_cmd(void* p) {
  (void)p;
  return tpurt_fail(TPURT_ERR_INDEX, "index 9 is out of bounds");
}

static int slow_done;
static tpurt_status slow_then_flag(void* p) {
  slow_cmd(p);
  __atomic_store_n(&slow_done, 1, __ATOMIC_SEQ_CST);
  return TPURT_OK;
}
static tpurt_status saw_flag(void* p) {
  *(int*)p = __atomic_load_n(&slow_done, __ATOMIC_SEQ_CST);
  return TPURT_OK;
}

/* Side-stream work starts after default-stream work issued before it (queued or inline). */
static void test_default_stream_first(void) {
  int32_t side;
  tpurt_stream_create(0, &side);
  int seen = -1, seen_inline = -1;
  tpurt_stream_enqueue(0, slow_then_flag, NULL, NULL, "slow");
  tpurt_stream_enqueue(side, saw_flag, &seen, NULL, "check");
  tpurt_stream_synchronize(side);
  CHECK(seen == 1, "side stream ran before the default stream's earlier work");
  slow_done = 0;
  tpurt_stream_enqueue(0, slow_then_flag, NULL, NULL, "slow");
  if (!tpurt_stream_run_if_idle(side, saw_flag, &seen_inline, "check"))
    tpurt_stream_enqueue(side, saw_flag, &seen_inline, NULL, "check");
  tpurt_device_synchronize(0);
  CHECK(seen_inline == 1, "an inline side-stream op ran before the default stream's earlier work");
}

static void test_inline_when_idle(void) {
  int32_t s;
  tpurt_stream_create(0, &s);
  tpurt_stream_synchronize(s);
  int next = 0, log[2];
  order_arg a = {log, &next, 7};
  CHECK(tpurt_stream_run_if_idle(s, log_order, &a, "log") == 1 && next == 1, "idle stream must run inline");
  /* a failure ran inline is kept for the next synchronization, like the worker does */
  CHECK(tpurt_stream_run_if_idle(s, failing_cmd, NULL, "bad_kernel") == 1, "idle stream must run inline");
  tpurt_status st = tpurt_stream_synchronize(s);
  CHECK(st == TPURT_ERR_INDEX && strstr(tpurt_last_error(), "bad_kernel") &&
            strstr(tpurt_last_error(), "out of bounds"),
        "inline failure not reported at sync: %d %s", st, tpurt_last_error());
  CHECK(tpurt_stream_synchronize(s) == TPURT_OK, "error must be cleared after it was raised");
  /* busy stream: not inline (order) */
  tpurt_stream_enqueue(s, slow_cmd, NULL, NULL, "slow");
  CHECK(tpurt_stream_run_if_idle(s, log_order, &a, "log") == 0, "busy stream must not run inline");
  tpurt_stream_synchronize(s);
}

/* Per-thread GEMM workspace: reused for smaller requests, grown for larger ones, and a buffer
 * past the keep limit is not held for a small request. */
static void test_scratch(void) {
  char* a = tpurt_scratch(1000);
  CHECK(a && (uintptr_t)a % 64 == 0, "scratch must be 64-byte aligned");
  memset(a, 1, 1000);
  CHECK(tpurt_scratch(10) == a, "a smaller request must reuse the buffer");
  char* big = tpurt_scratch((size_t)100 << 20);
  CHECK(big != NULL, "a 100 MiB scratch must be allocatable");
  CHECK(tpurt_scratch((size_t)90 << 20) == big, "a large request under the buffer reuses it");
  char* small = tpurt_scratch(4096);
  CHECK(small != NULL, "scratch after a big one");
  memset(small, 2, 4096); /* ASan: must be a live, big-enough buffer */
}

typedef struct {
  pthread_t caller;
  int cpu[256];
  int by_caller[256];
} where_ctx;

static void record_cpu(void* p, int64_t b, int64_t e) {
  where_ctx* w = p;
  int64_t t0 = tpurt_now_ns();
  while (tpurt_now_ns() - t0 < 500000) {} /* long enough for a parked helper to wake and join */
  for (int64_t i = b; i < e; i++) {
    w->cpu[i] = sched_getcpu();
    w->by_caller[i] = pthread_equal(pthread_self(), w->caller);
  }
}

static void test_helpers_step_aside(void) {
  cpu_set_t all;
  CHECK(sched_getaffinity(0, sizeof all, &all) == 0, "sched_getaffinity");
  int nt = tpurt_pool_threads();
  if (CPU_COUNT(&all) < 2 || nt < 2 || nt > 64) return;
  int items = 4 * nt;
  int helpers_ran = 0;
  for (int round = 0; round < 40; round++) {
    int c = 0, seen = 0; /* pin the caller to each allowed CPU in turn */
    for (int k = 0; k < CPU_SETSIZE; k++)
      if (CPU_ISSET(k, &all) && seen++ == round % CPU_COUNT(&all)) c = k;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(c, &one);
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0, "pin to %d", c);
    where_ctx w = {.caller = pthread_self()};
    tpurt_parallel_for(items, 1, record_cpu, &w);
    for (int i = 0; i < items; i++) {
      if (w.by_caller[i]) continue;
      helpers_ran++;
      CHECK(w.cpu[i] != c, "round %d: a helper ran item %d on the caller's CPU %d", round, i, c);
    }
  }
  CHECK(sched_setaffinity(0, sizeof all, &all) == 0, "unpin");
  CHECK(helpers_ran > 0, "no helper took an item in 40 loops");
  /* every thread (the helpers included) has the process's mask again; a helper woken after
   * the last loop closed may still be between stepping aside and back: a few tries */
  int narrow = 0;
  for (int attempt = 0; attempt < 50; attempt++) {
    narrow = 0;
    DIR* d = opendir("/proc/self/task");
    CHECK(d != NULL, "/proc/self/task");
    for (struct dirent* e; d && (e = readdir(d));) {
      cpu_set_t m;
      if (e->d_name[0] != '.' && (sched_getaffinity(atoi(e->d_name), sizeof m, &m) || !CPU_EQUAL(&m, &all)))
        narrow++;
    }
    if (d) closedir(d);
    if (!narrow) break;
    struct timespec ms = {0, 2000000};
    nanosleep(&ms, NULL);
  }
  CHECK(narrow == 0, "%d thread(s) kept a narrower CPU mask", narrow);
}


/* A team like torch.compile's OpenMP regions: static splits by member id, barriers between
 * loops, single constructs, a stack array that must survive the switches between members a
 * thread runs as fibers. */
#define TEAM_ITEMS 1000
typedef struct {
  double in[TEAM_ITEMS], mid[TEAM_ITEMS], partial[64];
  double total;
  int ran[64], bad, singles;
} team_work;

static void team_body(void* p, int member, int size) {
  team_work* w = p;
  if (tpurt_team_member() != member || tpurt_team_size() != size) __atomic_add_fetch(&w->bad, 1, __ATOMIC_RELAXED);
  volatile int mine[256];
  for (int i = 0; i < 256; i++) mine[i] = member * 1000 + i;
  int64_t per = (TEAM_ITEMS + size - 1) / size, b = member * per, e = b + per < TEAM_ITEMS ? b + per : TEAM_ITEMS;
  for (int64_t i = b; i < e; i++) w->mid[i] = w->in[i] * 2 + 1;
  tpurt_team_barrier();
  double s = 0; /* reads other members' writes: needs the barrier */
  for (int64_t i = e; i < e + per; i++) s += w->mid[i % TEAM_ITEMS];
  w->partial[member] = s;
  if (tpurt_team_single()) __atomic_add_fetch(&w->singles, 1, __ATOMIC_RELAXED);
  tpurt_team_barrier();
  if (tpurt_team_single()) {
    double t = 0;
    for (int m = 0; m < size; m++) t += w->partial[m];
    w->total = t;
    __atomic_add_fetch(&w->singles, 1, __ATOMIC_RELAXED);
  }
  tpurt_team_barrier();
  for (int i = 0; i < 256; i++)
    if (mine[i] != member * 1000 + i) __atomic_add_fetch(&w->bad, 1, __ATOMIC_RELAXED);
  if (tpurt_team_member() != member || tpurt_team_size() != size) __atomic_add_fetch(&w->bad, 1, __ATOMIC_RELAXED);
  w->ran[member]++;
}

static double team_expected(int size) {
  double mid[TEAM_ITEMS], t = 0;
  for (int i = 0; i < TEAM_ITEMS; i++) mid[i] = (double)(i % 17) * 2 + 1;
  int64_t per = (TEAM_ITEMS + size - 1) / size;
  for (int m = 0; m < size; m++) {
    int64_t e = m * per + per < TEAM_ITEMS ? m * per + per : TEAM_ITEMS;
    double s = 0;
    for (int64_t i = e; i < e + per; i++) s += mid[i % TEAM_ITEMS];
    t += s;
  }
  return t;
}

static void run_team_check(const char* how, int round) {
  static team_work w;
  memset(&w, 0, sizeof w);
  for (int i = 0; i < TEAM_ITEMS; i++) w.in[i] = i % 17;
  tpurt_parallel_team(0, team_body, &w);
  int size = tpurt_pool_threads();
  CHECK(w.bad == 0, "%s round %d: %d wrong ids, sizes or stack values", how, round, w.bad);
  CHECK(w.singles == 2, "%s round %d: %d single constructs ran (want 2)", how, round, w.singles);
  for (int m = 0; m < size; m++) CHECK(w.ran[m] == 1, "%s round %d: member %d ran %d times", how, round, m, w.ran[m]);
  CHECK(w.total == team_expected(size), "%s round %d: total %.17g, want %.17g", how, round, w.total, team_expected(size));
}

static void test_team_fibers(void) {
  /* no helper takes the job: the caller runs members 1..T-1 on fibers, switching at barriers */
  tpurt_pool_hold_helpers(1);
  for (int r = 0; r < 5; r++) run_team_check("helpers held", r);
  tpurt_pool_hold_helpers(0);
  /* members outnumber the cores (main sets more threads than CPUs): some run as fibers */
  for (int r = 0; r < 300; r++) run_team_check("helpers free", r);
}

int main(void) {
  /* more pool threads than this 2-core machine has cores: a team's members outnumber them */
  setenv("TPU_NUM_THREADS", "4", 0);
  test_scratch();
  test_parallel_for();
  test_nested_serial();
  test_concurrent_loops();
  test_parallel_sliced();
  test_fork();
  test_ring_order();
  test_inline_when_idle();
  test_default_stream_first();
  test_helpers_step_aside();
  test_team_fibers();
  return CHECK_DONE();
}
