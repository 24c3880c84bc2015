/* The caching allocator under many streams (DDP/FSDP side streams): every recorded stream
 * keeps a freed block from reuse, a cache flush never frees a block that work issued while it
 * waited still uses, and a stream whose worker thread cannot start fails instead of hanging. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "internal.h"

/* A command that holds its stream until the test opens it. */
typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int open;
} gate;

static void gate_init(gate* g) {
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->cv, NULL);
  g->open = 0;
}
static tpurt_status gate_wait(void* p) {
  gate* g = p;
  pthread_mutex_lock(&g->mu);
  while (!g->open) pthread_cond_wait(&g->cv, &g->mu);
  pthread_mutex_unlock(&g->mu);
  return TPURT_OK;
}
static void gate_open(gate* g) {
  pthread_mutex_lock(&g->mu);
  g->open = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Six side streams use a block; the last one recorded is still busy when the block is freed:
 * an allocation of the same size must not get it back (four were kept before). */
static void test_many_recorded_streams(void) {
  int32_t s0 = tpurt_stream_make(0, 0);
  void* a;
  CHECK(tpurt_malloc(0, 4096, s0, &a) == TPURT_OK, "malloc");
  for (int i = 1; i <= 6; i++)
    CHECK(tpurt_record_stream(a, tpurt_stream_make(0, i)) == TPURT_OK, "record stream %d", i);
  gate g;
  gate_init(&g);
  tpurt_stream_enqueue(tpurt_stream_make(0, 6), gate_wait, &g, NULL, "held by the test");
  tpurt_free(a);
  void* b;
  CHECK(tpurt_malloc(0, 4096, s0, &b) == TPURT_OK, "malloc");
  CHECK(b != a, "a block still used by the sixth recorded stream was handed out again");
  gate_open(&g);
  tpurt_device_synchronize(0);
  void* c;
  CHECK(tpurt_malloc(0, 4096, s0, &c) == TPURT_OK && c == a, "reused once every stream finished");
  tpurt_free(b);
  tpurt_free(c);
  CHECK(tpurt_record_stream(c, -5) == TPURT_ERR_VALUE, "an invalid stream is refused");
}

typedef struct {
  size_t nbytes;
  tpurt_status status;
  void* ptr;
} alloc_job;

static void* allocate_in_thread(void* p) {
  alloc_job* j = p;
  j->status = tpurt_malloc(0, j->nbytes, tpurt_stream_make(0, 0), &j->ptr);
  return NULL;
}

/* Under memory pressure an allocation synchronizes the device with the lock released, then
 * flushes the cache. A block freed meanwhile, used by work issued on a stream the
 * synchronize had already passed, must survive the flush. */
static void test_flush_spares_blocks_freed_while_waiting(void) {
  tpurt_empty_cache();
  int32_t s1 = tpurt_stream_make(0, 1), s2 = tpurt_stream_make(0, 2);
  void* cached;
  tpurt_malloc(0, 1 << 20, s1, &cached);
  tpurt_free(cached); /* something to flush: the pressure path needs a non-empty cache */
  void* used;
  CHECK(tpurt_malloc(0, 8 << 20, s1, &used) == TPURT_OK, "malloc");
  tpurt_stream_synchronize(s1);
  gate g2, g1;
  gate_init(&g2);
  gate_init(&g1);
  tpurt_stream_enqueue(s2, gate_wait, &g2, NULL, "holds the synchronize");
  tpurt_memory_stats m = {.struct_size = sizeof m};
  tpurt_memory_get_stats(0, &m);
  /* over capacity while `used` is reserved (and the 1 MiB cached block is), under without it */
  alloc_job job = {.nbytes = (size_t)m.capacity_bytes - (4 << 20)};
  pthread_t th;
  pthread_create(&th, NULL, allocate_in_thread, &job);
  sleep_ms(100); /* the allocating thread is now synchronizing stream 2, past stream 1 */
  tpurt_stream_enqueue(s1, gate_wait, &g1, NULL, "uses the block after the synchronize passed");
  tpurt_free(used); /* its use on stream 1 is the gated command */
  gate_open(&g2);
  pthread_join(th, NULL);
  CHECK(job.status == TPURT_ERR_OOM, "still over capacity: the in-use block is not given back (%s)",
        tpurt_status_name(job.status));
  CHECK(tpurt_pointer_device(used) == 0, "a block that stream 1's pending work uses was freed by the flush");
  gate_open(&g1);
  tpurt_device_synchronize(0);
  tpurt_empty_cache();
  CHECK(tpurt_pointer_device(used) == -1, "released once its stream finished");
}

/* A stream whose worker thread cannot start (no address space for its stack) reports it. */
static void test_worker_start_failure(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return; /* the sanitizers cannot map their memory under the cap: `make test` runs this without them */
#endif
  pid_t pid = fork();
  if (pid == 0) {
    struct rlimit lim = {0, 0};
    getrlimit(RLIMIT_AS, &lim);
    FILE* f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (!f || fscanf(f, "%lu", &pages) != 1) _exit(3);
    fclose(f);
    lim.rlim_cur = pages * (unsigned long)sysconf(_SC_PAGESIZE) + (1 << 20);
    setrlimit(RLIMIT_AS, &lim);
    /* glibc reuses the stacks of exited threads: the first streams may still start */
    tpurt_status s = TPURT_OK;
    for (int i = 9; i < TPURT_MAX_STREAMS_PER_DEVICE && s == TPURT_OK; i++)
      s = tpurt_stream_synchronize(tpurt_stream_make(0, i));
    int named = strstr(tpurt_last_error(), "could not start the worker thread") != NULL;
    if (s != TPURT_ERR_RUNTIME || !named) fprintf(stderr, "%s: %s\n", tpurt_status_name(s), tpurt_last_error());
    _exit(s == TPURT_ERR_RUNTIME && named ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "stream without a worker: exit %d signal %d",
        WIFEXITED(status) ? WEXITSTATUS(status) : -1, WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

int main(void) {
  CHECK(tpurt_init() == TPURT_OK, "%s", tpurt_last_error());
  test_many_recorded_streams();
  test_flush_spares_blocks_freed_while_waiting();
  test_worker_start_failure();
  return CHECK_DONE();
}
