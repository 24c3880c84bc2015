/* Streams (one worker thread each, started on first use) and events. A stream runs its
 * commands in issue order; the first failure since the last synchronizing call is kept
 * and reported by the next one, as CUDA does with asynchronous kernel errors. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "internal.h"

#define MAX_DEVICES 64

typedef struct command {
  tpurt_status (*fn)(void*);
  void* arg;
  void (*release)(void*);
  const char* what;
  uint64_t seq;
  struct command* next;
} command;

typedef struct stream_state {
  pthread_mutex_t mu;
  pthread_cond_t has_work, progressed;
  command *head, *tail;
  uint64_t issued, completed;
  int started;
  tpurt_status error;
  char error_msg[1200];
} stream_state;

static stream_state* streams[MAX_DEVICES][TPURT_MAX_STREAMS_PER_DEVICE];
static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static int next_pool_index[MAX_DEVICES];
static _Thread_local int32_t current_stream[MAX_DEVICES];
static _Thread_local int current_stream_set[MAX_DEVICES];

int32_t tpurt_stream_make(int device, int index) {
  return device * TPURT_MAX_STREAMS_PER_DEVICE + index;
}
int tpurt_stream_device(int32_t s) { return s / TPURT_MAX_STREAMS_PER_DEVICE; }
int tpurt_stream_index(int32_t s) { return s % TPURT_MAX_STREAMS_PER_DEVICE; }

int tpurt_stream_valid(int32_t s) {
  return s >= 0 && tpurt_stream_device(s) < tpurt_device_count();
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void* worker_main(void* p) {
  stream_state* st = p;
  pthread_mutex_lock(&st->mu);
  for (;;) {
    while (!st->head) pthread_cond_wait(&st->has_work, &st->mu);
    command* c = st->head;
    pthread_mutex_unlock(&st->mu);
    tpurt_status s = c->fn(c->arg);
    if (c->release) c->release(c->arg);
    pthread_mutex_lock(&st->mu);
    if (s != TPURT_OK) {
      tpurt_metrics_count_kernel_error();
      if (st->error == TPURT_OK) {
        st->error = s;
        snprintf(st->error_msg, sizeof st->error_msg,
                 "asynchronous tpu kernel '%s' failed: %s (raised at the next synchronization; "
                 "set TPU_LAUNCH_BLOCKING=1 to raise it where the op was issued)",
                 c->what ? c->what : "?", tpurt_last_error());
      }
    }
    st->head = c->next;
    if (!st->head) st->tail = NULL;
    st->completed = c->seq;
    pthread_cond_broadcast(&st->progressed);
    free(c);
  }
  return NULL;
}

static stream_state* get_stream(int32_t s) {
  if (!tpurt_stream_valid(s)) return NULL;
  int dev = tpurt_stream_device(s), idx = tpurt_stream_index(s);
  stream_state* st = __atomic_load_n(&streams[dev][idx], __ATOMIC_ACQUIRE);
  if (st) return st;
  pthread_mutex_lock(&registry_mu);
  st = streams[dev][idx];
  if (!st) {
    st = calloc(1, sizeof *st);
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->has_work, NULL);
    pthread_cond_init(&st->progressed, NULL);
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_create(&th, &attr, worker_main, st);
    pthread_attr_destroy(&attr);
    __atomic_store_n(&streams[dev][idx], st, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&registry_mu);
  return st;
}

static tpurt_status bad_stream(int32_t s) {
  tpurt_status st = tpurt_init();
  if (st) return st;
  return tpurt_fail(TPURT_ERR_VALUE, "invalid tpu stream %d (device %d, index %d)", s,
                    tpurt_stream_device(s), tpurt_stream_index(s));
}

tpurt_status tpurt_stream_create(int device, int32_t* out) {
  if (device < 0 || device >= tpurt_device_count()) return bad_stream(tpurt_stream_make(device, 0));
  pthread_mutex_lock(&registry_mu);
  int idx = 1 + next_pool_index[device]++ % (TPURT_MAX_STREAMS_PER_DEVICE - 1);
  pthread_mutex_unlock(&registry_mu);
  *out = tpurt_stream_make(device, idx);
  return TPURT_OK;
}

int32_t tpurt_stream_get_current(int device) {
  if (device < 0 || device >= MAX_DEVICES) return 0;
  return current_stream_set[device] ? current_stream[device] : tpurt_stream_make(device, 0);
}

void tpurt_stream_set_current(int32_t s) {
  int dev = tpurt_stream_device(s);
  if (dev < 0 || dev >= MAX_DEVICES) return;
  current_stream[dev] = s;
  current_stream_set[dev] = 1;
}

static uint64_t enqueue_locked(stream_state* st, command* c) {
  c->seq = ++st->issued;
  c->next = NULL;
  if (st->tail) st->tail->next = c; else st->head = c;
  st->tail = c;
  pthread_cond_signal(&st->has_work);
  return c->seq;
}

static tpurt_status enqueue(int32_t s, tpurt_status (*fn)(void*), void* arg, void (*release)(void*),
                            const char* what, uint64_t* seq_out) {
  stream_state* st = get_stream(s);
  if (!st) {
    if (release) release(arg);
    return bad_stream(s);
  }
  command* c = malloc(sizeof *c);
  c->fn = fn;
  c->arg = arg;
  c->release = release;
  c->what = what;
  pthread_mutex_lock(&st->mu);
  uint64_t seq = enqueue_locked(st, c);
  pthread_mutex_unlock(&st->mu);
  if (seq_out) *seq_out = seq;
  return TPURT_OK;
}

tpurt_status tpurt_stream_enqueue(int32_t s, tpurt_status (*fn)(void*), void* arg,
                                  void (*release)(void*), const char* what) {
  return enqueue(s, fn, arg, release, what, NULL);
}

/* Waits until `seq` completed; takes (and clears) the stream's pending error. */
static tpurt_status wait_seq(stream_state* st, uint64_t seq) {
  pthread_mutex_lock(&st->mu);
  while (st->completed < seq) pthread_cond_wait(&st->progressed, &st->mu);
  tpurt_status e = st->error;
  if (e) {
    tpurt_fail(e, "%s", st->error_msg);
    st->error = TPURT_OK;
  }
  pthread_mutex_unlock(&st->mu);
  return e;
}

tpurt_status tpurt_stream_synchronize(int32_t s) {
  stream_state* st = get_stream(s);
  if (!st) return bad_stream(s);
  pthread_mutex_lock(&st->mu);
  uint64_t seq = st->issued;
  pthread_mutex_unlock(&st->mu);
  return wait_seq(st, seq);
}

int tpurt_stream_query(int32_t s) {
  stream_state* st = get_stream(s);
  if (!st) return 1;
  pthread_mutex_lock(&st->mu);
  int done = st->completed == st->issued;
  pthread_mutex_unlock(&st->mu);
  return done;
}

uint64_t tpurt_stream_issued_seq(int32_t s) {
  stream_state* st = get_stream(s);
  if (!st) return 0;
  pthread_mutex_lock(&st->mu);
  uint64_t v = st->issued;
  pthread_mutex_unlock(&st->mu);
  return v;
}

uint64_t tpurt_stream_completed_seq(int32_t s) {
  stream_state* st = get_stream(s);
  if (!st) return 0;
  pthread_mutex_lock(&st->mu);
  uint64_t v = st->completed;
  pthread_mutex_unlock(&st->mu);
  return v;
}

tpurt_status tpurt_device_synchronize(int device) {
  if (device < 0 || device >= tpurt_device_count()) return bad_stream(tpurt_stream_make(device, 0));
  tpurt_status first = TPURT_OK;
  char msg[1200] = "";
  for (int i = 0; i < TPURT_MAX_STREAMS_PER_DEVICE; i++) {
    if (!__atomic_load_n(&streams[device][i], __ATOMIC_ACQUIRE)) continue;
    tpurt_status s = tpurt_stream_synchronize(tpurt_stream_make(device, i));
    if (s && !first) {
      first = s;
      snprintf(msg, sizeof msg, "%s", tpurt_last_error());
    }
  }
  return first ? tpurt_fail(first, "%s", msg) : TPURT_OK;
}

/* Runs fn(arg) on the stream and waits for it: the host-blocking copies use this. */
tpurt_status tpurt_stream_run_blocking(int32_t s, tpurt_status (*fn)(void*), void* arg,
                                       const char* what) {
  uint64_t seq;
  tpurt_status st = enqueue(s, fn, arg, NULL, what, &seq);
  if (st) return st;
  return wait_seq(get_stream(s), seq);
}

/* ---------------------------------------------------------------- events */
struct tpurt_event {
  pthread_mutex_t mu;
  int enable_timing;
  int32_t stream; /* -1: never recorded */
  uint64_t seq;
  uint64_t version;
  double time_ms;
  int time_valid;
};

typedef struct { tpurt_event* ev; uint64_t version; } record_arg;

static tpurt_status record_cmd(void* p) {
  record_arg* a = p;
  pthread_mutex_lock(&a->ev->mu);
  if (a->ev->version == a->version) {
    a->ev->time_ms = now_ms();
    a->ev->time_valid = 1;
  }
  pthread_mutex_unlock(&a->ev->mu);
  return TPURT_OK;
}

tpurt_status tpurt_event_create(int enable_timing, tpurt_event** out) {
  tpurt_event* ev = calloc(1, sizeof *ev);
  if (!ev) return tpurt_fail(TPURT_ERR_OOM, "out of host memory creating an event");
  pthread_mutex_init(&ev->mu, NULL);
  ev->enable_timing = enable_timing;
  ev->stream = -1;
  *out = ev;
  return TPURT_OK;
}

void tpurt_event_destroy(tpurt_event* ev) {
  if (!ev) return;
  tpurt_event_synchronize(ev);
  pthread_mutex_destroy(&ev->mu);
  free(ev);
}

tpurt_status tpurt_event_record(tpurt_event* ev, int32_t s) {
  stream_state* st = get_stream(s);
  if (!st) return bad_stream(s);
  record_arg* a = malloc(sizeof *a);
  command* c = malloc(sizeof *c);
  pthread_mutex_lock(&ev->mu);
  a->ev = ev;
  a->version = ++ev->version;
  ev->time_valid = 0;
  c->fn = record_cmd;
  c->arg = a;
  c->release = free;
  c->what = "event record";
  pthread_mutex_lock(&st->mu);
  ev->seq = enqueue_locked(st, c);
  pthread_mutex_unlock(&st->mu);
  ev->stream = s;
  pthread_mutex_unlock(&ev->mu);
  return TPURT_OK;
}

int tpurt_event_query(tpurt_event* ev) {
  pthread_mutex_lock(&ev->mu);
  int32_t s = ev->stream;
  uint64_t seq = ev->seq;
  pthread_mutex_unlock(&ev->mu);
  return s < 0 || tpurt_stream_completed_seq(s) >= seq;
}

tpurt_status tpurt_event_synchronize(tpurt_event* ev) {
  pthread_mutex_lock(&ev->mu);
  int32_t s = ev->stream;
  uint64_t seq = ev->seq;
  pthread_mutex_unlock(&ev->mu);
  if (s < 0) return TPURT_OK;
  stream_state* st = get_stream(s);
  pthread_mutex_lock(&st->mu);
  while (st->completed < seq) pthread_cond_wait(&st->progressed, &st->mu);
  pthread_mutex_unlock(&st->mu);
  return TPURT_OK;
}

typedef struct { int32_t stream; uint64_t seq; } wait_arg;

static tpurt_status wait_cmd(void* p) {
  wait_arg* a = p;
  stream_state* st = get_stream(a->stream);
  pthread_mutex_lock(&st->mu);
  while (st->completed < a->seq) pthread_cond_wait(&st->progressed, &st->mu);
  pthread_mutex_unlock(&st->mu);
  return TPURT_OK;
}

tpurt_status tpurt_event_wait(tpurt_event* ev, int32_t s) {
  pthread_mutex_lock(&ev->mu);
  int32_t src = ev->stream;
  uint64_t seq = ev->seq;
  pthread_mutex_unlock(&ev->mu);
  if (src < 0 || src == s) return tpurt_stream_valid(s) ? TPURT_OK : bad_stream(s);
  wait_arg* a = malloc(sizeof *a);
  a->stream = src;
  a->seq = seq;
  return enqueue(s, wait_cmd, a, free, "event wait", NULL);
}

tpurt_status tpurt_event_elapsed_ms(tpurt_event* a, tpurt_event* b, double* out_ms) {
  if (!a->enable_timing || !b->enable_timing)
    return tpurt_fail(TPURT_ERR_VALUE, "Both events must be created with enable_timing=True");
  if (a->stream < 0 || b->stream < 0)
    return tpurt_fail(TPURT_ERR_VALUE, "Both events must be recorded before calculating elapsed time");
  tpurt_event_synchronize(a);
  tpurt_event_synchronize(b);
  if (!a->time_valid || !b->time_valid)
    return tpurt_fail(TPURT_ERR_VALUE, "Both events must be recorded before calculating elapsed time");
  *out_ms = b->time_ms - a->time_ms;
  return TPURT_OK;
}
