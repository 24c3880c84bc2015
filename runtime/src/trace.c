/* The trace: while one records, every command a stream runs leaves a record of when it ran on the
 * emulator, under which name, and which host op issued it (the issuing thread's tag), for a
 * profiler's device timeline. Records live in chunks taken as the trace grows and kept for the
 * next trace, so recording never frees memory a late writer could still touch. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "internal.h"

/* Records per chunk, and the most a trace holds (1M records, 168 MiB): beyond that it counts
 * what it drops rather than grow without bound in a long profiled run. */
#define CHUNK 4096
#define MAX_CHUNKS 256

int tpurt_trace_on;

static struct {
  pthread_mutex_t mu; /* taking a chunk */
  tpurt_trace_record* chunks[MAX_CHUNKS];
  int64_t count, dropped;
} trace = {PTHREAD_MUTEX_INITIALIZER, {0}, 0, 0};

static _Thread_local uint64_t issuer_tag;
/* The record of the command this thread runs, for tpurt_trace_note_call. */
static _Thread_local tpurt_trace_record* running;

int64_t tpurt_trace_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void tpurt_trace_set_tag(uint64_t tag) { issuer_tag = tag; }
uint64_t tpurt_trace_issuer_tag(void) { return issuer_tag; }

/* A forked child (a DataLoader worker) is not profiled: the profiler reading the records is the
 * parent's. A lock some other thread held stays held in the child. */
static void trace_after_fork_child(void) {
  pthread_mutex_init(&trace.mu, NULL);
  tpurt_trace_on = 0;
}
static void register_fork_handler(void) { pthread_atfork(NULL, NULL, trace_after_fork_child); }
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

tpurt_status tpurt_trace_start(void) {
  tpurt_status s = tpurt_init();
  if (s) return s;
  pthread_once(&fork_once, register_fork_handler);
  __atomic_store_n(&trace.count, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&trace.dropped, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&tpurt_trace_on, 1, __ATOMIC_SEQ_CST);
  return TPURT_OK;
}

/* Commands issued while the trace recorded finish before it stops, so each has its record closed
 * when the profiler reads them, and none writes into the next trace's records. */
void tpurt_trace_stop(void) {
  tpurt_streams_drain();
  __atomic_store_n(&tpurt_trace_on, 0, __ATOMIC_SEQ_CST);
}

int64_t tpurt_trace_count(void) {
  int64_t n = __atomic_load_n(&trace.count, __ATOMIC_ACQUIRE);
  return n < (int64_t)CHUNK * MAX_CHUNKS ? n : (int64_t)CHUNK * MAX_CHUNKS;
}

int64_t tpurt_trace_dropped(void) { return __atomic_load_n(&trace.dropped, __ATOMIC_RELAXED); }

const tpurt_trace_record* tpurt_trace_get(int64_t i) {
  if (i < 0 || i >= tpurt_trace_count()) return NULL;
  tpurt_trace_record* chunk = __atomic_load_n(&trace.chunks[i / CHUNK], __ATOMIC_ACQUIRE);
  if (!chunk) return NULL;
  tpurt_trace_record* r = &chunk[i % CHUNK];
  return __atomic_load_n(&r->end_ns, __ATOMIC_ACQUIRE) ? r : NULL;
}

/* A fresh record, or NULL when the trace is full (counted as dropped). */
static tpurt_trace_record* open_record(void) {
  int64_t i = __atomic_fetch_add(&trace.count, 1, __ATOMIC_ACQ_REL);
  tpurt_trace_record* chunk = i < (int64_t)CHUNK * MAX_CHUNKS ? __atomic_load_n(&trace.chunks[i / CHUNK], __ATOMIC_ACQUIRE) : NULL;
  if (!chunk && i < (int64_t)CHUNK * MAX_CHUNKS) {
    pthread_mutex_lock(&trace.mu);
    chunk = trace.chunks[i / CHUNK];
    if (!chunk && (chunk = malloc(sizeof(tpurt_trace_record) * CHUNK)))
      __atomic_store_n(&trace.chunks[i / CHUNK], chunk, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&trace.mu);
  }
  if (!chunk) {
    __atomic_fetch_add(&trace.dropped, 1, __ATOMIC_RELAXED);
    return NULL;
  }
  tpurt_trace_record* r = &chunk[i % CHUNK];
  memset(r, 0, sizeof *r);
  r->struct_size = sizeof *r;
  return r;
}

/* Adds `value` to the record's arg `key` (a static string), appending it if new: a command of
 * several calls (a fused chain, a graph) sums their figures. */
static void add_arg(tpurt_trace_record* r, const char* key, double value) {
  for (int i = 0; i < r->nargs; i++)
    if (r->args[i].key == key) {
      r->args[i].value += value;
      return;
    }
  if (r->nargs < TPURT_TRACE_MAX_ARGS) r->args[r->nargs++] = (tpurt_trace_arg){key, value};
}

/* The one place an op call's figures join its command's record: the plan's flops and bytes.
 * The cost model's estimate of the call belongs here too, as one more add_arg. */
void tpurt_trace_note_call(const tpurt_op_call* c) {
  tpurt_trace_record* r = running;
  if (!r) return;
  tpurt_chip_info chip = {.struct_size = sizeof chip};
  tpurt_cost cost = {.struct_size = sizeof cost};
  if (tpurt_chip_get_info(c->device, &chip) || tpurt_op_cost(c, chip.generation, &cost))
    return; /* the kernel reports its own refusal */
  add_arg(r, "flops", cost.flops);
  add_arg(r, "bytes", cost.hbm_bytes);
  add_arg(r, "estimated_tpu_us", cost.seconds * 1e6); /* what the chip's generation would take (cost.c) */
}

tpurt_status tpurt_trace_run(int32_t stream, tpurt_status (*fn)(void*), void* arg, const char* what, uint64_t tag) {
  tpurt_trace_record* r = open_record();
  if (!r) return fn(arg);
  r->stream = stream;
  r->tag = tag;
  snprintf(r->name, sizeof r->name, "%s", what ? what : "?");
  running = r;
  r->start_ns = tpurt_trace_now_ns();
  tpurt_status s = fn(arg);
  int64_t end = tpurt_trace_now_ns();
  running = NULL;
  add_arg(r, "emulator_us", (double)(end - r->start_ns) / 1e3);
  __atomic_store_n(&r->end_ns, end, __ATOMIC_RELEASE); /* last: the record is complete */
  return s;
}
