/* Streams (one worker thread each, started on first use) and events. A stream runs its
 * commands in issue order; the first failure since the last synchronizing call is kept
 * and reported by the next one, as CUDA does with asynchronous kernel errors.
 *
 * Fused mode: a stream also holds the chain of elementwise calls deferred since its last
 * command (fuse.c). The rule that keeps it correct: the chain is enqueued before anything else
 * is enqueued on the stream or observes it (synchronize, query, events, copies, a side stream
 * ordered after it), and until then it counts as issued work (`horizon`), so the allocator keeps
 * the blocks it uses from other streams and from kernel temporaries. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "internal.h"

/* Commands in flight per stream (CUDA's launch queue is ~1k); a full ring makes the
 * issuing thread wait. */
#define RING 64
/* The worker polls this long for the next command before sleeping, and a synchronizing
 * host thread polls this long for completion: eager ops come back to back and a futex
 * wake-up costs more than a small kernel. */
#define SPIN_NS 50000


/* A queued command. `arg` points at `payload` for commands issued with inline storage
 * (kernel launches: no allocation per op) or at caller memory. */
typedef struct command {
  tpurt_status (*fn)(void*);
  void* arg;
  void (*release)(void*);
  const char* what;
  struct stream_state* after; /* run only once this stream completed after_seq (or NULL) */
  uint64_t after_seq;
  uint64_t tag; /* the issuing thread's trace tag, taken while a trace records */
  const char* site; /* where the issuing thread issued it from (tpurt_set_issue_site), or NULL */
  _Alignas(64) char payload[TPURT_STREAM_PAYLOAD];
} command;

static __thread const char* issue_site;
void tpurt_set_issue_site(const char* site) { issue_site = site; }

/* Single consumer (the worker), producers serialized by mu. `issued` and `completed` are
 * written under mu by the producer / by the worker alone, and read without it. */
typedef struct stream_state {
  pthread_mutex_t mu;
  pthread_cond_t has_work, progressed;
  _Alignas(64) uint64_t issued; /* producer and worker lines apart: both are polled */
  uint64_t horizon; /* issued, plus one while a chain is pending: the command it will be */
  _Alignas(64) uint64_t completed;
  _Alignas(64) char after_counters;
  int device, index;
  int worker_sleeping; /* under mu */
  uint64_t wake_at;    /* lowest `completed` some waiter needs; UINT64_MAX when none */
  tpurt_status error;
  char error_msg[1200];
  tpurt_chain* chain; /* fused mode: calls deferred since the last command, never empty (under mu;
                         read without it, atomically, only to skip taking mu) */
  command ring[RING];
} stream_state;

static stream_state* streams[TPURT_MAX_DEVICES][TPURT_MAX_STREAMS_PER_DEVICE];
static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static int next_pool_index[TPURT_MAX_DEVICES];
static int worker_start_error; /* errno of the last failed pthread_create, for the message */
static _Thread_local int32_t current_stream[TPURT_MAX_DEVICES];
static _Thread_local int current_stream_set[TPURT_MAX_DEVICES];

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


static uint64_t load_seq(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }

/* Poll until *p >= target or SPIN_NS passed; returns whether it got there. */
static int spin_until(const uint64_t* p, uint64_t target) {
  int64_t end = 0;
  for (unsigned i = 0;; i++) {
    if (load_seq(p) >= target) return 1;
    if (i % 64 == 0) {
      int64_t t = tpurt_now_ns();
      if (!end) end = t + SPIN_NS;
      else if (t >= end) return 0;
    }
    tpurt_spin_pause(i);
  }
}

/* Wakes the threads waiting for progress once the lowest completion one of them needs is
 * reached (not on every command: a host thread waiting for ring space would otherwise
 * be woken per command). The seq_cst store of `completed` before the load of `wake_at`
 * pairs with the waiter's store of `wake_at` before its load of `completed`. */
static void publish_completed(stream_state* st, uint64_t seq) {
  __atomic_store_n(&st->completed, seq, __ATOMIC_SEQ_CST);
  if (seq >= __atomic_load_n(&st->wake_at, __ATOMIC_SEQ_CST)) {
    pthread_mutex_lock(&st->mu);
    __atomic_store_n(&st->wake_at, UINT64_MAX, __ATOMIC_SEQ_CST);
    pthread_cond_broadcast(&st->progressed);
    pthread_mutex_unlock(&st->mu);
  }
}

/* Sleeps until st->completed >= seq; caller holds mu. */
static void wait_locked(stream_state* st, uint64_t seq) {
  while (load_seq(&st->completed) < seq) {
    if (seq < __atomic_load_n(&st->wake_at, __ATOMIC_SEQ_CST)) __atomic_store_n(&st->wake_at, seq, __ATOMIC_SEQ_CST);
    if (load_seq(&st->completed) >= seq) break;
    pthread_cond_wait(&st->progressed, &st->mu);
  }
}

/* Blocks until st->completed >= seq (caller does not hold mu). */
static void wait_completed(stream_state* st, uint64_t seq) {
  if (load_seq(&st->completed) >= seq || spin_until(&st->completed, seq)) return;
  pthread_mutex_lock(&st->mu);
  wait_locked(st, seq);
  pthread_mutex_unlock(&st->mu);
}

/* A command failed: keep the first failure for the next synchronizing call. */
static void keep_failure_locked(stream_state* st, tpurt_status s, const char* what, const char* site) {
  tpurt_metrics_count_kernel_error();
  if (st->error != TPURT_OK) return;
  st->error = s;
  snprintf(st->error_msg, sizeof st->error_msg,
           "asynchronous tpu kernel '%s'%s%s failed: %s (raised at the next synchronization; "
           "set TPU_LAUNCH_BLOCKING=1 to raise it where the op was issued)",
           what ? what : "?", site ? " issued at " : "", site ? site : "", tpurt_last_error());
}

static void* worker_main(void* p) {
  stream_state* st = p;
  int32_t handle = tpurt_stream_make(st->device, st->index);
  for (uint64_t seq = 1;; seq++) {
    if (load_seq(&st->issued) < seq && !spin_until(&st->issued, seq)) {
      pthread_mutex_lock(&st->mu);
      st->worker_sleeping = 1;
      while (load_seq(&st->issued) < seq) pthread_cond_wait(&st->has_work, &st->mu);
      st->worker_sleeping = 0;
      pthread_mutex_unlock(&st->mu);
    }
    command* c = &st->ring[seq % RING];
    if (c->after) wait_completed(c->after, c->after_seq);
    tpurt_status s = tpurt_run_command(handle, c->fn, c->arg, c->what, c->tag);
    if (s != TPURT_OK) { /* before the release: a chain's `what` lives in its buffer */
      pthread_mutex_lock(&st->mu);
      keep_failure_locked(st, s, c->what, c->site);
      pthread_mutex_unlock(&st->mu);
    }
    if (c->release) c->release(c->arg);
    publish_completed(st, seq);
  }
  return NULL;
}

/* A forked child has no stream workers: it starts over with fresh streams (the parent's
 * states are left as they are, their workers exist only in the parent). */
static void streams_after_fork_child(void) {
  memset(streams, 0, sizeof streams);
  pthread_mutex_init(&registry_mu, NULL);
}
static void register_fork_handler(void) { pthread_atfork(NULL, NULL, streams_after_fork_child); }
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static stream_state* get_stream(int32_t s) {
  if (!tpurt_stream_valid(s)) return NULL;
  pthread_once(&fork_once, register_fork_handler);
  int dev = tpurt_stream_device(s), idx = tpurt_stream_index(s);
  stream_state* st = __atomic_load_n(&streams[dev][idx], __ATOMIC_ACQUIRE);
  if (st) return st;
  pthread_mutex_lock(&registry_mu);
  st = streams[dev][idx];
  if (!st) {
    if (posix_memalign((void**)&st, 64, sizeof *st)) st = NULL;
    if (st) {
      memset(st, 0, sizeof *st);
      st->wake_at = UINT64_MAX;
      st->device = dev;
      st->index = idx;
      pthread_mutex_init(&st->mu, NULL);
      pthread_cond_init(&st->has_work, NULL);
      pthread_cond_init(&st->progressed, NULL);
      pthread_t th;
      pthread_attr_t attr;
      pthread_attr_init(&attr);
      pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
      int err = pthread_create(&th, &attr, worker_main, st);
      pthread_attr_destroy(&attr);
      if (err) { /* no worker would ever run its commands: refuse the stream, try again next time */
        worker_start_error = err;
        pthread_cond_destroy(&st->progressed);
        pthread_cond_destroy(&st->has_work);
        pthread_mutex_destroy(&st->mu);
        free(st);
        st = NULL;
      } else {
        __atomic_store_n(&streams[dev][idx], st, __ATOMIC_RELEASE);
      }
    }
  }
  pthread_mutex_unlock(&registry_mu);
  return st;
}

/* Why get_stream gave NULL: not a stream, or its worker thread could not start. */
static tpurt_status bad_stream(int32_t s) {
  tpurt_status st = tpurt_init();
  if (st) return st;
  if (tpurt_stream_valid(s))
    return tpurt_fail(TPURT_ERR_RUNTIME, "could not start the worker thread of tpu stream %d (device %d, index %d): "
                      "%s; the host is out of threads or memory", s, tpurt_stream_device(s), tpurt_stream_index(s),
                      strerror(__atomic_load_n(&worker_start_error, __ATOMIC_RELAXED)));
  return tpurt_fail(TPURT_ERR_VALUE, "invalid tpu stream %d (device %d, index %d)", s,
                    tpurt_stream_device(s), tpurt_stream_index(s));
}

tpurt_status tpurt_stream_create(int device, int32_t* out) {
  if (device < 0 || device >= tpurt_device_count()) return bad_stream(tpurt_stream_make(device, 0));
  pthread_mutex_lock(&registry_mu);
  int idx = 1 + next_pool_index[device]++ % (TPURT_COMM_STREAM_INDEX - 1); /* 1 .. COMM - 1 */
  pthread_mutex_unlock(&registry_mu);
  *out = tpurt_stream_make(device, idx);
  return TPURT_OK;
}

int32_t tpurt_stream_get_current(int device) {
  if (device < 0 || device >= TPURT_MAX_DEVICES) return 0;
  return current_stream_set[device] ? current_stream[device] : tpurt_stream_make(device, 0);
}

void tpurt_stream_set_current(int32_t s) {
  int dev = tpurt_stream_device(s);
  if (dev < 0 || dev >= TPURT_MAX_DEVICES) return;
  current_stream[dev] = s;
  current_stream_set[dev] = 1;
}

/* Work on a side stream starts after the default stream's work issued before it, like
 * CUDA's legacy default stream: tensors made on the default stream (torch.zeros, copies
 * to the device) are ready when side-stream code uses them, however the workers happen
 * to be scheduled. Returns the default stream when that applies and it is busy. */
static stream_state* busy_default_stream(const stream_state* st, uint64_t* seq) {
  if (st->index == 0) return NULL;
  stream_state* d0 = __atomic_load_n(&streams[st->device][0], __ATOMIC_ACQUIRE);
  if (!d0) return NULL;
  *seq = load_seq(&d0->issued);
  return load_seq(&d0->completed) < *seq ? d0 : NULL;
}

/* Waits until the ring has a free slot; caller holds mu, which a wait releases. A full ring
 * makes the caller sleep until half of it drained, so a host thread that runs ahead sleeps once
 * per RING/2 commands. It does not poll first: half a ring is many kernels away, and a polling
 * host thread would take the core the worker and the pool's helpers need (64K-element adds
 * ran 7x slower on 2 cores). */
static void wait_room_locked(stream_state* st) {
  while (st->issued - load_seq(&st->completed) >= RING - 1) wait_locked(st, st->issued - RING / 2);
}

/* Publishes the reserved slot; caller holds mu. Returns its sequence number. */
static uint64_t commit_locked(stream_state* st) {
  uint64_t seq = st->issued + 1;
  __atomic_store_n(&st->issued, seq, __ATOMIC_SEQ_CST);
  __atomic_store_n(&st->horizon, seq, __ATOMIC_SEQ_CST);
  if (st->worker_sleeping) pthread_cond_signal(&st->has_work);
  return seq;
}

static int chain_pending(stream_state* st) { return __atomic_load_n(&st->chain, __ATOMIC_ACQUIRE) != NULL; }

/* Enqueues the pending chain as the next command; caller holds mu. Waiting for room releases
 * mu, so another thread may enqueue it (or start a new one) meanwhile: loop until none is left. */
static void flush_chain_locked(stream_state* st) {
  while (st->chain) {
    wait_room_locked(st);
    tpurt_chain* ch = st->chain;
    if (!ch) break;
    command* c = &st->ring[(st->issued + 1) % RING];
    c->after = busy_default_stream(st, &c->after_seq);
    c->fn = tpurt_chain_run;
    c->arg = ch;
    c->release = tpurt_chain_release;
    c->what = tpurt_chain_what(ch);
    c->tag = 0; /* its calls were issued under several tags, from several places */
    c->site = NULL;
    __atomic_store_n(&st->chain, NULL, __ATOMIC_RELEASE);
    commit_locked(st);
  }
}

static void flush_chain(stream_state* st) {
  if (!st || !chain_pending(st)) return;
  pthread_mutex_lock(&st->mu);
  flush_chain_locked(st);
  pthread_mutex_unlock(&st->mu);
}

/* A side stream's command starts after the default stream's earlier work (busy_default_stream),
 * that stream's pending chain included: it is enqueued first (before taking the side stream's
 * lock, so locks are never nested). */
static void flush_default_chain(const stream_state* st) {
  if (st->index) flush_chain(__atomic_load_n(&streams[st->device][0], __ATOMIC_ACQUIRE));
}

/* The next free slot, with the pending chain enqueued before it; caller holds mu. */
static command* reserve_locked(stream_state* st) {
  do {
    flush_chain_locked(st);
    wait_room_locked(st);
  } while (st->chain); /* waiting released mu and someone deferred a call meanwhile */
  command* c = &st->ring[(st->issued + 1) % RING];
  c->after = busy_default_stream(st, &c->after_seq);
  c->tag = tpurt_tracing() ? tpurt_trace_issuer_tag() : 0;
  c->site = issue_site;
  return c;
}

int tpurt_stream_defer(int32_t s, const tpurt_op_call* c, int64_t numel) {
  stream_state* st = get_stream(s);
  if (!st) return 0;
  flush_default_chain(st); /* the call comes after the default stream's work issued so far */
  pthread_mutex_lock(&st->mu);
  tpurt_chain* ch = st->chain;
  int added = tpurt_chain_append(&ch, c, numel);
  if (added == 0) { /* it does not fit the pending chain: that one goes, c starts the next */
    flush_chain_locked(st);
    ch = st->chain; /* NULL, unless another thread deferred while the flush waited for room */
    added = tpurt_chain_append(&ch, c, numel);
  }
  if (added == 1) {
    __atomic_store_n(&st->chain, ch, __ATOMIC_RELEASE);
    __atomic_store_n(&st->horizon, st->issued + 1, __ATOMIC_SEQ_CST);
  }
  pthread_mutex_unlock(&st->mu);
  return added == 1;
}

void tpurt_streams_flush_all(void) {
  for (int d = 0; d < TPURT_MAX_DEVICES; d++)
    for (int i = 0; i < TPURT_MAX_STREAMS_PER_DEVICE; i++) flush_chain(__atomic_load_n(&streams[d][i], __ATOMIC_ACQUIRE));
}

void tpurt_streams_drain(void) {
  for (int d = 0; d < TPURT_MAX_DEVICES; d++)
    for (int i = 0; i < TPURT_MAX_STREAMS_PER_DEVICE; i++) {
      stream_state* st = __atomic_load_n(&streams[d][i], __ATOMIC_ACQUIRE);
      if (!st) continue;
      flush_chain(st);
      wait_completed(st, load_seq(&st->issued));
    }
}

static tpurt_status enqueue(int32_t s, tpurt_status (*fn)(void*), void* arg, void (*release)(void*),
                            const char* what, uint64_t* seq_out) {
  stream_state* st = get_stream(s);
  if (!st) {
    if (release) release(arg);
    return bad_stream(s);
  }
  flush_default_chain(st);
  pthread_mutex_lock(&st->mu);
  command* c = reserve_locked(st);
  c->fn = fn;
  c->arg = arg;
  c->release = release;
  c->what = what;
  uint64_t seq = commit_locked(st);
  pthread_mutex_unlock(&st->mu);
  if (seq_out) *seq_out = seq;
  return TPURT_OK;
}

tpurt_status tpurt_stream_enqueue(int32_t s, tpurt_status (*fn)(void*), void* arg,
                                  void (*release)(void*), const char* what) {
  return enqueue(s, fn, arg, release, what, NULL);
}

tpurt_status tpurt_stream_enqueue_inline(int32_t s, tpurt_status (*fn)(void*),
                                         void (*fill)(void* payload, const void* src), const void* src,
                                         const char* what) {
  stream_state* st = get_stream(s);
  if (!st) return bad_stream(s);
  flush_default_chain(st);
  pthread_mutex_lock(&st->mu);
  command* c = reserve_locked(st);
  fill(c->payload, src);
  c->fn = fn;
  c->arg = c->payload;
  c->release = NULL;
  c->what = what ? what : c->payload;
  commit_locked(st);
  pthread_mutex_unlock(&st->mu);
  return TPURT_OK;
}

int tpurt_stream_run_if_idle(int32_t s, tpurt_status (*fn)(void*), void* arg, const char* what) {
  stream_state* st = get_stream(s);
  if (!st) return 0;
  uint64_t dep;
  stream_state* d0 = st->index ? __atomic_load_n(&streams[st->device][0], __ATOMIC_ACQUIRE) : NULL;
  /* a pending chain (its own, or the default stream's for a side stream) is work not yet done */
  if (load_seq(&st->completed) != load_seq(&st->issued) || chain_pending(st) || (d0 && chain_pending(d0)) ||
      busy_default_stream(st, &dep))
    return 0;
  pthread_mutex_lock(&st->mu);
  int idle = load_seq(&st->completed) == st->issued && !st->chain && !busy_default_stream(st, &dep);
  if (idle) {
    tpurt_status e = tpurt_run_inline(s, fn, arg, what);
    if (e) keep_failure_locked(st, e, what, issue_site);
  }
  pthread_mutex_unlock(&st->mu);
  return idle;
}

/* Waits until `seq` completed; takes (and clears) the stream's pending error. */
static tpurt_status wait_seq(stream_state* st, uint64_t seq) {
  wait_completed(st, seq);
  if (!__atomic_load_n(&st->error, __ATOMIC_ACQUIRE)) return TPURT_OK;
  pthread_mutex_lock(&st->mu);
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
  flush_chain(st);
  return wait_seq(st, load_seq(&st->issued));
}

int tpurt_stream_query(int32_t s) {
  stream_state* st = get_stream(s);
  if (!st) return 1;
  flush_chain(st);
  uint64_t issued = load_seq(&st->issued);
  return load_seq(&st->completed) == issued;
}

uint64_t tpurt_stream_issued_seq(int32_t s) {
  stream_state* st = get_stream(s);
  return st ? load_seq(&st->horizon) : 0;
}

uint64_t tpurt_stream_completed_seq(int32_t s) {
  stream_state* st = get_stream(s);
  return st ? load_seq(&st->completed) : 0;
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
  uint64_t seq = 0;
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
  flush_default_chain(st);
  pthread_mutex_lock(&ev->mu);
  pthread_mutex_lock(&st->mu);
  command* c = reserve_locked(st);
  record_arg* a = (record_arg*)c->payload;
  a->ev = ev;
  a->version = ++ev->version;
  ev->time_valid = 0;
  c->fn = record_cmd;
  c->arg = a;
  c->release = NULL;
  c->what = "event record";
  ev->seq = commit_locked(st);
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
  wait_completed(get_stream(s), seq);
  return TPURT_OK;
}

typedef struct { int32_t stream; uint64_t seq; } wait_arg;

static tpurt_status wait_cmd(void* p) {
  wait_arg* a = p;
  wait_completed(get_stream(a->stream), a->seq);
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
