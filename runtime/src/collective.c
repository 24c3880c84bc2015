/* Collectives between the processes of one host over a shared-memory segment per process group:
 * the emulated ICI (tpurt.h states the contract). Every collective starts at a barrier where each
 * rank has posted what it calls (kind, dtype, count, op, root); data then moves in rounds through
 * one staging slot per rank: each rank writes its part into its own slot, a barrier, each rank
 * reads what it needs (reduces its 1/size share of the round, in rank order, for reductions),
 * a barrier. Point-to-point messages go through one single-buffered channel per ordered pair.
 * Waits spin briefly, then sleep on a futex in the segment; a sleeping waiter checks the deadline
 * and its peers' processes every POLL_MS, so a killed peer surfaces in well under a second. */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define NAME_PREFIX "tpu_dist."
#define MAGIC 0x7470755f64697374ull
#define SPIN_NS 30000
#define POLL_MS 100
#define BLOCK 256 /* elements a reduction converts at a time */


static const char* const kind_names[] = {
#define TPURT_X(e, name) name,
    TPURT_COMM_KIND_LIST(TPURT_X)
#undef TPURT_X
};
const char* tpurt_comm_kind_name(int kind) {
  return kind >= 0 && kind < TPURT_COMM_KIND_COUNT ? kind_names[kind] : "?";
}
static const char* const op_names[] = {"sum", "avg", "product", "min", "max", "band", "bor", "bxor", "premul_sum"};

/* What a rank calls; every rank of the group must post the same. */
typedef struct {
  int32_t kind, dtype, op, root;
  int64_t count; /* elements (reductions) or bytes (data movement) per rank */
} fingerprint;

/* A rank's post for its collective number `seq` (1-based). */
typedef struct {
  uint64_t seq;
  fingerprint fp;
  int64_t max_send; /* all_to_all: its largest send to one peer */
} post;

typedef struct {
  _Alignas(64) _Atomic uint64_t arrived; /* barriers this rank has reached */
  _Atomic int32_t pid;
  /* by parity of seq: a rank that finished a collective without data rounds may post its next
   * while a slower one still reads this one (never further ahead: the next begin waits for all) */
  post posts[2];
} rank_state;

typedef struct {
  _Alignas(64) _Atomic uint64_t sent, received; /* pieces */
  int64_t piece, total, tag;
} channel;

typedef struct {
  uint64_t magic;
  int32_t size;
  int64_t slot_bytes, chan_bytes;
  _Alignas(64) _Atomic uint32_t futex; /* bumped at every post; sleepers wait on it */
  _Atomic int32_t sleepers;
  _Atomic int32_t failed; /* 0, 1 while the failure is written, 2 once readable */
  char failure[768];
} header;

struct tpurt_comm {
  char* base;
  size_t map_bytes;
  header* h;
  rank_state* ranks;
  int64_t* sends; /* 2 x size x size: all_to_all send bytes by parity of seq (as posts), row = sender */
  channel* chans; /* size x size: row = sender */
  char *slots, *chan_data;
  int rank, size;
  int uncounted;  /* tpurt_comm_set_counted(c, 0) */
  int32_t* names; /* tpurt_comm_set_rank_names, or NULL */
  double timeout_s;
  uint64_t barriers, seq;
  char label[64];
  char desc[160]; /* the collective in progress, for messages */
};

static size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

static int64_t slot_bytes_for(int size) { return size <= 8 ? 4 << 20 : size <= 32 ? 1 << 20 : 256 << 10; }
static int64_t chan_bytes_for(int size) { return size <= 8 ? 256 << 10 : 64 << 10; }

typedef struct {
  size_t ranks, sends, chans, slots, chan_data, total;
} layout;

static layout layout_for(int size) {
  layout l;
  size_t n = (size_t)size;
  l.ranks = align_up(sizeof(header), 64);
  l.sends = align_up(l.ranks + n * sizeof(rank_state), 64);
  l.chans = align_up(l.sends + 2 * n * n * sizeof(int64_t), 64);
  l.slots = align_up(l.chans + n * n * sizeof(channel), 4096);
  l.chan_data = l.slots + n * (size_t)slot_bytes_for(size);
  l.total = l.chan_data + n * n * (size_t)chan_bytes_for(size);
  return l;
}

static char* slot(tpurt_comm* c, int r) { return c->slots + (size_t)r * c->h->slot_bytes; }
static char* chan_buf(tpurt_comm* c, int from, int to) {
  return c->chan_data + ((size_t)from * c->size + to) * c->h->chan_bytes;
}


/* ---------------------------------------------------------------- segments */
static int process_alive(int pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  const char* paren = strrchr(buf, ')'); /* the state follows the command name */
  return !(paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X'));
}

/* Segments are named tpu_dist.<creator pid>.<random>; one whose creator is gone was left by a
 * job killed between creating it and every rank mapping it. */
static void remove_orphans(void) {
  DIR* d = opendir("/dev/shm");
  if (!d) return;
  for (struct dirent* e; (e = readdir(d));) {
    if (strncmp(e->d_name, NAME_PREFIX, strlen(NAME_PREFIX))) continue;
    int pid = atoi(e->d_name + strlen(NAME_PREFIX));
    if (pid > 0 && !process_alive(pid)) {
      char name[300];
      snprintf(name, sizeof name, "/%s", e->d_name);
      shm_unlink(name);
    }
  }
  closedir(d);
}

tpurt_status tpurt_comm_create(int size, char* name_out, size_t name_len) {
  if (size < 1 || size > 4096) return tpurt_fail(TPURT_ERR_VALUE, "tpu_dist: a group of %d ranks", size);
  remove_orphans();
  uint64_t r[2];
  int fd = -1;
  char name[64];
  for (int attempt = 0; attempt < 8 && fd < 0; attempt++) {
    if (getentropy(r, sizeof r)) return tpurt_fail(TPURT_ERR_RUNTIME, "tpu_dist: no entropy for a segment name");
    snprintf(name, sizeof name, "/" NAME_PREFIX "%d.%016llx%016llx", (int)getpid(), (unsigned long long)r[0],
             (unsigned long long)r[1]);
    fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  }
  if (fd < 0) return tpurt_fail(TPURT_ERR_RUNTIME, "tpu_dist: cannot create shared memory %s: %s", name, strerror(errno));
  layout l = layout_for(size);
  /* reserve the pages now: on a full /dev/shm (a container's default is 64 MiB) touching an
   * unbacked page later would be a SIGBUS in the middle of a collective */
  int e = ftruncate(fd, (off_t)l.total) ? errno : posix_fallocate(fd, 0, (off_t)l.total);
  if (e) {
    close(fd);
    shm_unlink(name);
    struct statvfs vfs;
    unsigned long long free_mib = statvfs("/dev/shm", &vfs) ? 0 : (unsigned long long)vfs.f_bavail * vfs.f_frsize >> 20;
    return tpurt_fail(TPURT_ERR_RUNTIME, "tpu_dist: cannot reserve %zu MiB of shared memory for a group of %d ranks in "
                      "/dev/shm (%s; %llu MiB free there): give it more room (docker run --shm-size=1g)",
                      l.total >> 20, size, strerror(e), free_mib);
  }
  header* h = mmap(NULL, sizeof *h, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (h == MAP_FAILED) {
    shm_unlink(name);
    return tpurt_fail(TPURT_ERR_RUNTIME, "tpu_dist: cannot map shared memory: %s", strerror(errno));
  }
  h->size = size;
  h->slot_bytes = slot_bytes_for(size);
  h->chan_bytes = chan_bytes_for(size);
  __atomic_store_n(&h->magic, MAGIC, __ATOMIC_RELEASE);
  munmap(h, sizeof *h);
  if (strlen(name) >= name_len) return tpurt_fail(TPURT_ERR_VALUE, "tpu_dist: name buffer too small");
  strcpy(name_out, name);
  return TPURT_OK;
}

tpurt_status tpurt_comm_unlink(const char* name) {
  if (shm_unlink(name) && errno != ENOENT)
    return tpurt_fail(TPURT_ERR_RUNTIME, "tpu_dist: cannot unlink %s: %s", name, strerror(errno));
  return TPURT_OK;
}

tpurt_status tpurt_comm_open(const char* name, int rank, int size, double timeout_s, const char* label,
                             tpurt_comm** out) {
  *out = NULL;
  if (size < 1 || rank < 0 || rank >= size)
    return tpurt_fail(TPURT_ERR_VALUE, "tpu_dist: rank %d of a group of %d", rank, size);
  int fd = shm_open(name, O_RDWR, 0600);
  if (fd < 0) return tpurt_fail(TPURT_ERR_RUNTIME, "tpu_dist: cannot open shared memory %s: %s", name, strerror(errno));
  layout l = layout_for(size);
  struct stat st;
  if (fstat(fd, &st) || (size_t)st.st_size != l.total) {
    close(fd);
    return tpurt_fail(TPURT_ERR_RUNTIME, "tpu_dist: shared memory %s does not hold a group of %d ranks", name, size);
  }
  char* base = mmap(NULL, l.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) return tpurt_fail(TPURT_ERR_RUNTIME, "tpu_dist: cannot map %zu bytes: %s", l.total, strerror(errno));
  tpurt_comm* c = calloc(1, sizeof *c);
  if (!c) {
    munmap(base, l.total);
    return tpurt_fail(TPURT_ERR_OOM, "tpu_dist: out of host memory");
  }
  c->base = base;
  c->map_bytes = l.total;
  c->h = (header*)base;
  c->ranks = (rank_state*)(base + l.ranks);
  c->sends = (int64_t*)(base + l.sends);
  c->chans = (channel*)(base + l.chans);
  c->slots = base + l.slots;
  c->chan_data = base + l.chan_data;
  c->rank = rank;
  c->size = size;
  c->timeout_s = timeout_s > 0 ? timeout_s : 1800;
  snprintf(c->label, sizeof c->label, "%s", label ? label : "tpu_dist");
  if (__atomic_load_n(&c->h->magic, __ATOMIC_ACQUIRE) != MAGIC || c->h->size != size) {
    tpurt_comm_destroy(c);
    return tpurt_fail(TPURT_ERR_RUNTIME, "tpu_dist: shared memory %s is not a tpu_dist segment", name);
  }
  atomic_store(&c->ranks[rank].pid, (int32_t)getpid());
  *out = c;
  return TPURT_OK;
}

void tpurt_comm_destroy(tpurt_comm* c) {
  if (!c) return;
  munmap(c->base, c->map_bytes);
  free(c->names);
  free(c);
}

tpurt_status tpurt_comm_set_rank_names(tpurt_comm* c, const int32_t* names) {
  int32_t* copy = malloc(sizeof *copy * (size_t)c->size);
  if (!copy) return tpurt_fail(TPURT_ERR_OOM, "tpu_dist: out of host memory");
  memcpy(copy, names, sizeof *copy * (size_t)c->size);
  free(c->names);
  c->names = copy;
  return TPURT_OK;
}

/* Rank r as messages name it. */
static int named(const tpurt_comm* c, int r) { return c->names ? c->names[r] : r; }

uint64_t tpurt_comm_seq(const tpurt_comm* c) { return c->seq; }
void tpurt_comm_set_timeout(tpurt_comm* c, double timeout_s) { c->timeout_s = timeout_s > 0 ? timeout_s : 1800; }
void tpurt_comm_set_counted(tpurt_comm* c, int counted) { c->uncounted = !counted; }

/* ---------------------------------------------------------------- waiting and failing */
static void wake(tpurt_comm* c) {
  atomic_fetch_add(&c->h->futex, 1);
  if (atomic_load(&c->h->sleepers) > 0) syscall(SYS_futex, &c->h->futex, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* The group's failure, as this rank reports it. */
static tpurt_status broken(tpurt_comm* c) {
  for (int i = 0; i < 1000 && atomic_load(&c->h->failed) == 1; i++) usleep(100); /* being written */
  return tpurt_fail(TPURT_ERR_RUNTIME, "%s: %s on rank %d failed: %s", c->label, c->desc, named(c, c->rank), c->h->failure);
}

/* Records the first failure in the segment, where every rank's waits see it, and reports it. */
static tpurt_status fail_group(tpurt_comm* c, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static tpurt_status fail_group(tpurt_comm* c, const char* fmt, ...) {
  int32_t expected = 0;
  if (atomic_compare_exchange_strong(&c->h->failed, &expected, 1)) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->h->failure, sizeof c->h->failure, fmt, ap);
    va_end(ap);
    atomic_store(&c->h->failed, 2);
    wake(c);
  }
  return broken(c);
}

tpurt_status tpurt_comm_fail(tpurt_comm* c, const char* message) { return fail_group(c, "%s", message); }

typedef int (*ready_fn)(tpurt_comm* c, const void* arg, int* waiting_for);

/* A failure only if the wait is still unmet once a peer is seen dead or the deadline has passed:
 * a peer may finish this wait, return and exit between the last `ready` and its pid's check. */
static tpurt_status check_peers(tpurt_comm* c, ready_fn ready, const void* arg, int waiting_for, int64_t deadline) {
  for (int r = 0; r < c->size; r++) {
    int32_t pid = atomic_load(&c->ranks[r].pid);
    if (r != c->rank && pid > 0 && !process_alive(pid) && !ready(c, arg, &waiting_for))
      return fail_group(c, "rank %d (pid %d) exited or was killed during %s; the group cannot continue", named(c, r), (int)pid,
                        c->desc);
  }
  if (tpurt_now_ns() < deadline || ready(c, arg, &waiting_for)) return TPURT_OK;
  if (waiting_for < 0) return fail_group(c, "%s timed out after %.0f s", c->desc, c->timeout_s);
  const post* a = &c->ranks[waiting_for].posts[0];
  const post* last = a[1].seq > a[0].seq ? &a[1] : a;
  return fail_group(c, "%s timed out after %.0f s waiting for rank %d, which last entered collective #%llu (%s); "
                    "it stopped calling collectives or called different ones",
                    c->desc, c->timeout_s, named(c, waiting_for), (unsigned long long)last->seq,
                    last->seq ? kind_names[last->fp.kind] : "none");
}

static tpurt_status wait_until(tpurt_comm* c, ready_fn ready, const void* arg) {
  int waiting_for = -1;
  int64_t start = tpurt_now_ns();
  /* `failed` is read before `ready`: a rank that completes this wait and then fails the group
   * (tpurt_comm_fail after the collective) must not fail the ranks still finishing it. */
  for (unsigned i = 0;; i++) {
    int failed = atomic_load(&c->h->failed) != 0;
    if (ready(c, arg, &waiting_for)) return TPURT_OK;
    if (failed) return broken(c);
    if (i % 64 == 0 && tpurt_now_ns() - start > SPIN_NS) break;
    tpurt_cpu_relax();
  }
  int64_t deadline = start + (int64_t)(c->timeout_s * 1e9), next_check = 0;
  for (;;) {
    uint32_t v = atomic_load(&c->h->futex);
    atomic_fetch_add(&c->h->sleepers, 1);
    int failed = atomic_load(&c->h->failed) != 0, done = ready(c, arg, &waiting_for);
    if (!done && !failed) {
      struct timespec ts = {0, POLL_MS * 1000000L};
      syscall(SYS_futex, &c->h->futex, FUTEX_WAIT, v, &ts, NULL, 0);
      failed = atomic_load(&c->h->failed) != 0;
      done = ready(c, arg, &waiting_for);
    }
    atomic_fetch_sub(&c->h->sleepers, 1);
    if (done) return TPURT_OK;
    if (failed) return broken(c);
    int64_t t = tpurt_now_ns();
    if (t >= next_check) {
      tpurt_status s = check_peers(c, ready, arg, waiting_for, deadline);
      if (s) return s;
      next_check = t + POLL_MS * 1000000LL;
    }
  }
}

static int all_arrived(tpurt_comm* c, const void* arg, int* waiting_for) {
  uint64_t k = *(const uint64_t*)arg;
  for (int r = 0; r < c->size; r++)
    if (atomic_load_explicit(&c->ranks[r].arrived, memory_order_acquire) < k) {
      *waiting_for = r;
      return 0;
    }
  return 1;
}

/* Every rank has reached this point (and sees what the others wrote before it). */
static tpurt_status sync_ranks(tpurt_comm* c) {
  uint64_t k = ++c->barriers;
  atomic_store_explicit(&c->ranks[c->rank].arrived, k, memory_order_release);
  wake(c);
  return wait_until(c, all_arrived, &k);
}

/* ---------------------------------------------------------------- starting a collective */
static void describe(char* out, size_t n, uint64_t seq, const fingerprint* f) {
  int len = snprintf(out, n, "%s #%llu", kind_names[f->kind], (unsigned long long)seq);
  if (f->kind == TPURT_COMM_BARRIER || f->kind == TPURT_COMM_ALL_TO_ALL) return;
  if (f->dtype >= 0)
    len += snprintf(out + len, n - len, " (%s, %lld elements", tpurt_dtype_name((tpurt_dtype)f->dtype),
                    (long long)f->count);
  else
    len += snprintf(out + len, n - len, " (%lld bytes", (long long)f->count);
  if (f->op >= 0) len += snprintf(out + len, n - len, ", %s", op_names[f->op]);
  if (f->root >= 0) len += snprintf(out + len, n - len, ", root %d", f->root);
  snprintf(out + len, n - len, ")");
}

static post* my_post(tpurt_comm* c, int r) { return &c->ranks[r].posts[c->seq & 1]; }

static tpurt_status begin(tpurt_comm* c, fingerprint fp, int64_t max_send) {
  c->seq++;
  describe(c->desc, sizeof c->desc, c->seq, &fp);
  if (atomic_load(&c->h->failed)) return broken(c);
  if (fp.root >= c->size) return fail_group(c, "%s: root %d is not a rank of this group of %d", c->desc, fp.root, c->size);
  post* me = my_post(c, c->rank);
  me->seq = c->seq;
  me->fp = fp;
  me->max_send = max_send;
  tpurt_status s = sync_ranks(c);
  if (s) return s;
  for (int r = 0; r < c->size; r++) {
    const post* o = my_post(c, r);
    if (o->seq == c->seq && !memcmp(&o->fp, &fp, sizeof fp)) continue;
    char theirs[160];
    describe(theirs, sizeof theirs, o->seq, &o->fp);
    return fail_group(c, "mismatched collectives: rank %d called %s while rank %d called %s", named(c, c->rank), c->desc,
                      named(c, r), theirs);
  }
  return TPURT_OK;
}


tpurt_status tpurt_check_reduction(tpurt_dtype dt, tpurt_reduce_op op) {
  if ((unsigned)dt >= TPURT_DTYPE_COUNT || (unsigned)op > TPURT_RED_PREMUL_SUM)
    return tpurt_fail(TPURT_ERR_VALUE, "unknown dtype %d or reduce op %d", (int)dt, (int)op);
  int bitwise = op == TPURT_RED_BAND || op == TPURT_RED_BOR || op == TPURT_RED_BXOR;
  int ok = dt == TPURT_C64 ? op == TPURT_RED_SUM || op == TPURT_RED_AVG || op == TPURT_RED_PREMUL_SUM
           : tpurt_is_float(dt) ? !bitwise
                                : op != TPURT_RED_AVG && op != TPURT_RED_PREMUL_SUM; /* integers, bool */
  return ok ? TPURT_OK
            : tpurt_fail(TPURT_ERR_VALUE, "reduce op %s is not supported for %s tensors", op_names[op], tpurt_dtype_name(dt));
}

/* The same inside a collective (after begin: every rank fails alike). */
static tpurt_status check_reduction(tpurt_comm* c, tpurt_dtype dt, tpurt_reduce_op op) {
  tpurt_status s = tpurt_check_reduction(dt, op);
  if (!s) return TPURT_OK;
  char why[256];
  snprintf(why, sizeof why, "%s", tpurt_last_error());
  return tpurt_fail(s, "%s: %s: %s", c->label, c->desc, why);
}

/* acc[0:m] op= v[0:m], the op chosen outside the loop so each loop vectorizes. NaN wins in min and
 * max, as torch.minimum/maximum. */
#define COMBINE_LOOPS(T)                                                                         \
  static void combine_##T(T* acc, const T* v, int64_t m, tpurt_reduce_op op) {                   \
    switch (op) {                                                                                \
      case TPURT_RED_PRODUCT: for (int64_t i = 0; i < m; i++) acc[i] *= v[i]; break;              \
      case TPURT_RED_MIN:                                                                        \
        for (int64_t i = 0; i < m; i++) acc[i] = acc[i] != acc[i] ? acc[i] : (v[i] != v[i] || v[i] < acc[i]) ? v[i] : acc[i]; \
        break;                                                                                   \
      case TPURT_RED_MAX:                                                                        \
        for (int64_t i = 0; i < m; i++) acc[i] = acc[i] != acc[i] ? acc[i] : (v[i] != v[i] || v[i] > acc[i]) ? v[i] : acc[i]; \
        break;                                                                                   \
      default: for (int64_t i = 0; i < m; i++) acc[i] += v[i];                                   \
    }                                                                                            \
  }
COMBINE_LOOPS(float)
COMBINE_LOOPS(double)

/* src block as float: f32 in place, halves converted into tmp. */
static const float* floats(const char* p, tpurt_dtype dt, int64_t b, int64_t m, float* tmp) {
  if (dt == TPURT_F32) return (const float*)p + b;
  const uint16_t* h = (const uint16_t*)p + b;
  if (dt == TPURT_BF16) {
    uint32_t* bits = (uint32_t*)(void*)tmp; /* as tpurt_bf16_to_f32, in a loop that vectorizes */
    for (int64_t i = 0; i < m; i++) bits[i] = (uint32_t)h[i] << 16;
  } else
    for (int64_t i = 0; i < m; i++) tmp[i] = tpurt_f16_to_f32(h[i]);
  return tmp;
}

static int64_t load_i(const char* p, tpurt_dtype dt, int64_t i) {
  switch (dt) {
    case TPURT_I8: return ((const int8_t*)p)[i];
    case TPURT_I16: return ((const int16_t*)p)[i];
    case TPURT_I32: return ((const int32_t*)p)[i];
    case TPURT_I64: return ((const int64_t*)p)[i];
    default: return ((const uint8_t*)p)[i];
  }
}
static void store_i(char* p, tpurt_dtype dt, int64_t i, int64_t v) {
  switch (dt) {
    case TPURT_I8: ((int8_t*)p)[i] = (int8_t)v; break;
    case TPURT_I16: ((int16_t*)p)[i] = (int16_t)v; break;
    case TPURT_I32: ((int32_t*)p)[i] = (int32_t)v; break;
    case TPURT_I64: ((int64_t*)p)[i] = v; break;
    default: ((uint8_t*)p)[i] = (uint8_t)v;
  }
}

/* tpurt_f32_to_bf16 (round to nearest even, NaN stays quiet NaN) without a branch, so it vectorizes. */
static void store_bf16(uint16_t* out, const float* f, int64_t m) {
  const uint32_t* u = (const uint32_t*)(const void*)f;
  for (int64_t i = 0; i < m; i++) {
    uint32_t rounded = (u[i] + 0x7fffu + ((u[i] >> 16) & 1u)) >> 16, quiet = (u[i] >> 16) | 0x40u;
    out[i] = (uint16_t)((u[i] & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
  }
}

/* dst[0:n] = src[0][0:n] op src[1][0:n] op ... in rank order. dst may be one of the sources. */
static void reduce_into(const char* const* src, int nsrc, char* dst, int64_t n, tpurt_dtype dt, tpurt_reduce_op op,
                        double scale) {
  int premul = op == TPURT_RED_PREMUL_SUM;
  if (dt == TPURT_C64) { /* sums only: two float lanes */
    dt = TPURT_F32;
    n *= 2;
  }
  for (int64_t b = 0; b < n; b += BLOCK) {
    int64_t m = n - b < BLOCK ? n - b : BLOCK;
    if (dt == TPURT_F64) {
      double acc[BLOCK], v[BLOCK];
      memcpy(acc, (const double*)src[0] + b, m * sizeof(double));
      if (premul)
        for (int64_t i = 0; i < m; i++) acc[i] *= scale;
      for (int r = 1; r < nsrc; r++) {
        const double* s = (const double*)src[r] + b;
        if (premul) {
          for (int64_t i = 0; i < m; i++) v[i] = s[i] * scale;
          s = v;
        }
        combine_double(acc, s, m, op);
      }
      if (op == TPURT_RED_AVG)
        for (int64_t i = 0; i < m; i++) acc[i] /= nsrc;
      memcpy((double*)dst + b, acc, m * sizeof(double));
    } else if (tpurt_is_float(dt)) {
      float acc[BLOCK], tmp[BLOCK], fscale = (float)scale;
      memcpy(acc, floats(src[0], dt, b, m, tmp), m * sizeof(float));
      if (premul)
        for (int64_t i = 0; i < m; i++) acc[i] *= fscale;
      for (int r = 1; r < nsrc; r++) {
        const float* v = floats(src[r], dt, b, m, tmp);
        if (premul) {
          if (v != tmp) memcpy(tmp, v, m * sizeof(float));
          for (int64_t i = 0; i < m; i++) tmp[i] *= fscale;
          v = tmp;
        }
        combine_float(acc, v, m, op);
      }
      if (op == TPURT_RED_AVG)
        for (int64_t i = 0; i < m; i++) acc[i] /= nsrc;
      if (dt == TPURT_F32) memcpy((float*)dst + b, acc, m * sizeof(float));
      else if (dt == TPURT_BF16)
        store_bf16((uint16_t*)dst + b, acc, m);
      else
        for (int64_t i = 0; i < m; i++) ((uint16_t*)dst)[b + i] = tpurt_f32_to_f16(acc[i]);
    } else { /* integers and bool: modular arithmetic in 64 bits, truncated on store */
      int boolean = dt == TPURT_BOOL;
      int64_t acc[BLOCK];
      for (int64_t i = 0; i < m; i++) acc[i] = load_i(src[0], dt, b + i);
      for (int r = 1; r < nsrc; r++)
        for (int64_t i = 0; i < m; i++) {
          int64_t v = load_i(src[r], dt, b + i), a = acc[i];
          switch (op) {
            case TPURT_RED_PRODUCT: a = boolean ? (a && v) : (int64_t)((uint64_t)a * (uint64_t)v); break;
            case TPURT_RED_MIN: a = v < a ? v : a; break;
            case TPURT_RED_MAX: a = v > a ? v : a; break;
            case TPURT_RED_BAND: a &= v; break;
            case TPURT_RED_BOR: a |= v; break;
            case TPURT_RED_BXOR: a ^= v; break;
            default: a = boolean ? (a || v) : (int64_t)((uint64_t)a + (uint64_t)v);
          }
          acc[i] = a;
        }
      for (int64_t i = 0; i < m; i++) store_i(dst, dt, b + i, acc[i]);
    }
  }
}

/* ---------------------------------------------------------------- statistics */
static pthread_mutex_t stats_mu = PTHREAD_MUTEX_INITIALIZER;
static tpurt_comm_kind_stats stats[TPURT_COMM_KIND_COUNT];

/* The cost model's collective for each kind it prices, plus one (0: no model). */
static const int modelled[TPURT_COMM_KIND_COUNT] = {
    [TPURT_COMM_ALL_REDUCE] = TPURT_COLLECTIVE_ALL_REDUCE + 1, [TPURT_COMM_ALL_GATHER] = TPURT_COLLECTIVE_ALL_GATHER + 1,
    [TPURT_COMM_REDUCE_SCATTER] = TPURT_COLLECTIVE_REDUCE_SCATTER + 1, [TPURT_COMM_ALL_TO_ALL] = TPURT_COLLECTIVE_ALL_TO_ALL + 1};

void tpurt_comm_get_stats(tpurt_comm_kind_stats out[TPURT_COMM_KIND_COUNT]) {
  pthread_mutex_lock(&stats_mu);
  memcpy(out, stats, sizeof stats);
  pthread_mutex_unlock(&stats_mu);
  for (int k = 0; k < TPURT_COMM_KIND_COUNT; k++)
    if (!modelled[k]) out[k].ici_seconds = NAN;
}

void tpurt_comm_reset_stats(void) {
  pthread_mutex_lock(&stats_mu);
  memset(stats, 0, sizeof stats);
  pthread_mutex_unlock(&stats_mu);
}

/* The ICI estimate treats the group's chips as one ring (a torus axis with its wraparound): what
 * a 1-D mesh axis of the slice is. */
tpurt_status tpurt_comm_record(int kind, int64_t bytes, double seconds, int32_t group_size) {
  if (kind < 0 || kind >= TPURT_COMM_KIND_COUNT || bytes < 0 || group_size < 1)
    return tpurt_fail(TPURT_ERR_VALUE, "tpurt_comm_record: kind %d, %lld bytes, group of %d", kind, (long long)bytes,
                      (int)group_size);
  double ici = 0;
  tpurt_chip_info chip = {.struct_size = sizeof chip};
  if (modelled[kind] && group_size > 1 && tpurt_chip_get_info(0, &chip) == TPURT_OK) {
    int32_t axis = group_size, wrap = 1;
    tpurt_cost cost = {.struct_size = sizeof cost};
    if (tpurt_collective_cost(chip.generation, modelled[kind] - 1, bytes, &axis, &wrap, 1, &cost) == TPURT_OK)
      ici = cost.seconds;
  }
  pthread_mutex_lock(&stats_mu);
  stats[kind].calls++;
  stats[kind].bytes += bytes;
  stats[kind].seconds += seconds;
  stats[kind].ici_seconds += ici;
  pthread_mutex_unlock(&stats_mu);
  return TPURT_OK;
}

/* Counts a collective that returned `s` after starting at t0. */
static tpurt_status accounted(tpurt_comm* c, tpurt_comm_kind k, int64_t bytes, int64_t t0, tpurt_status s) {
  if (s || c->uncounted) return s;
  return tpurt_comm_record(k, bytes, (tpurt_now_ns() - t0) / 1e9, c->size);
}

/* ---------------------------------------------------------------- collectives */
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* all_reduce (root < 0) and reduce: per round each rank stages its part, reduces its share of
 * it over every rank's slot into its own slot, and copies every share out. */
static tpurt_status reduce_rounds(tpurt_comm* c, const char* in, char* out, int64_t count, tpurt_dtype dt,
                                  tpurt_reduce_op op, double scale, int root) {
  fingerprint fp = {root < 0 ? TPURT_COMM_ALL_REDUCE : TPURT_COMM_REDUCE, dt, op, root, count};
  tpurt_status s = begin(c, fp, 0);
  if (s || (s = check_reduction(c, dt, op))) return s;
  int64_t es = (int64_t)tpurt_dtype_size(dt), chunk = c->h->slot_bytes / es, N = c->size;
  const char* src[4096];
  for (int64_t off = 0; off < count; off += chunk) {
    int64_t n = min64(chunk, count - off), share = (n + N - 1) / N;
    memcpy(slot(c, c->rank), in + off * es, (size_t)(n * es));
    if ((s = sync_ranks(c))) return s;
    int64_t lo = min64(n, c->rank * share), hi = min64(n, lo + share);
    if (hi > lo) {
      for (int r = 0; r < N; r++) src[r] = slot(c, r) + lo * es;
      reduce_into(src, (int)N, slot(c, c->rank) + lo * es, hi - lo, dt, op, scale);
    }
    if ((s = sync_ranks(c))) return s;
    if (root < 0 || root == c->rank)
      for (int q = 0; q < N; q++) {
        int64_t qlo = min64(n, q * share), qhi = min64(n, qlo + share);
        memcpy(out + (off + qlo) * es, slot(c, q) + qlo * es, (size_t)((qhi - qlo) * es));
      }
    if (off + n < count && (s = sync_ranks(c))) return s; /* the next collective starts with one */
  }
  return TPURT_OK;
}

tpurt_status tpurt_all_reduce(tpurt_comm* c, const void* in, void* out, int64_t count, tpurt_dtype dtype,
                              tpurt_reduce_op op, double scale) {
  int64_t t0 = tpurt_now_ns();
  return accounted(c, TPURT_COMM_ALL_REDUCE, count * (int64_t)tpurt_dtype_size(dtype), t0,
                   reduce_rounds(c, in, out, count, dtype, op, scale, -1));
}

tpurt_status tpurt_reduce(tpurt_comm* c, const void* in, void* out, int64_t count, tpurt_dtype dtype,
                          tpurt_reduce_op op, double scale, int root) {
  if (root < 0) return tpurt_fail(TPURT_ERR_VALUE, "%s: reduce to root %d", c->label, root);
  int64_t t0 = tpurt_now_ns();
  return accounted(c, TPURT_COMM_REDUCE, count * (int64_t)tpurt_dtype_size(dtype), t0,
                   reduce_rounds(c, in, out, count, dtype, op, scale, root));
}

static tpurt_status reduce_scatter_rounds(tpurt_comm* c, const void* in_, void* out_, int64_t count, tpurt_dtype dt,
                                          tpurt_reduce_op op, double scale) {
  const char* in = in_;
  char* out = out_;
  fingerprint fp = {TPURT_COMM_REDUCE_SCATTER, dt, op, -1, count};
  tpurt_status s = begin(c, fp, 0);
  if (s || (s = check_reduction(c, dt, op))) return s;
  int64_t es = (int64_t)tpurt_dtype_size(dt), N = c->size, sub = c->h->slot_bytes / es / N;
  const char* src[4096];
  for (int64_t off = 0; off < count; off += sub) {
    int64_t n = min64(sub, count - off);
    for (int p = 0; p < N; p++) memcpy(slot(c, c->rank) + p * sub * es, in + (p * count + off) * es, (size_t)(n * es));
    if ((s = sync_ranks(c))) return s;
    for (int r = 0; r < N; r++) src[r] = slot(c, r) + c->rank * sub * es;
    reduce_into(src, (int)N, out + off * es, n, dt, op, scale);
    if (off + n < count && (s = sync_ranks(c))) return s;
  }
  return TPURT_OK;
}

tpurt_status tpurt_reduce_scatter(tpurt_comm* c, const void* in, void* out, int64_t count, tpurt_dtype dtype,
                                  tpurt_reduce_op op, double scale) {
  int64_t t0 = tpurt_now_ns();
  return accounted(c, TPURT_COMM_REDUCE_SCATTER, count * c->size * (int64_t)tpurt_dtype_size(dtype), t0,
                   reduce_scatter_rounds(c, in, out, count, dtype, op, scale));
}

/* Data movement: rounds of up to `piece` bytes of each rank's block. */
typedef enum { MOVE_BROADCAST, MOVE_ALL_GATHER, MOVE_GATHER, MOVE_SCATTER } move_kind;
static const tpurt_comm_kind move_kinds[] = {TPURT_COMM_BROADCAST, TPURT_COMM_ALL_GATHER, TPURT_COMM_GATHER,
                                            TPURT_COMM_SCATTER};

static tpurt_status move(tpurt_comm* c, move_kind how, const char* in, char* out, int64_t bytes, int root) {
  fingerprint fp = {move_kinds[how], -1, -1, root, bytes};
  tpurt_status s = begin(c, fp, 0);
  if (s) return s;
  int N = c->size, me = c->rank;
  int64_t piece = c->h->slot_bytes;
  for (int64_t off = 0; off < bytes; off += piece) {
    size_t n = (size_t)min64(piece, bytes - off);
    if (how == MOVE_SCATTER) {
      if (me == root)
        for (int p = 0; p < N; p++) memcpy(slot(c, p), in + p * bytes + off, n);
    } else if (how != MOVE_BROADCAST || me == root) {
      memcpy(slot(c, me), in + off, n);
    }
    if ((s = sync_ranks(c))) return s;
    switch (how) {
      case MOVE_BROADCAST:
        if (me != root) memcpy(out + off, slot(c, root), n);
        break;
      case MOVE_SCATTER: memcpy(out + off, slot(c, me), n); break;
      case MOVE_GATHER:
        if (me != root) break;
        __attribute__((fallthrough)); /* the root gathers as all_gather does */
      case MOVE_ALL_GATHER:
        for (int q = 0; q < N; q++) memcpy(out + q * bytes + off, slot(c, q), n);
        break;
    }
    if (off + (int64_t)n < bytes && (s = sync_ranks(c))) return s;
  }
  return TPURT_OK;
}

static tpurt_status move_rounds(tpurt_comm* c, move_kind how, const char* in, char* out, int64_t bytes, int root) {
  int64_t t0 = tpurt_now_ns();
  return accounted(c, move_kinds[how], how == MOVE_ALL_GATHER ? bytes * c->size : bytes, t0,
                   move(c, how, in, out, bytes, root));
}

static tpurt_status check_root(tpurt_comm* c, int root) {
  return root >= 0 ? TPURT_OK : tpurt_fail(TPURT_ERR_VALUE, "%s: root %d", c->label, root);
}

tpurt_status tpurt_broadcast(tpurt_comm* c, void* buf, int64_t bytes, int root) {
  tpurt_status s = check_root(c, root);
  return s ? s : move_rounds(c, MOVE_BROADCAST, buf, buf, bytes, root);
}
tpurt_status tpurt_all_gather(tpurt_comm* c, const void* in, void* out, int64_t bytes) {
  return move_rounds(c, MOVE_ALL_GATHER, in, out, bytes, -1);
}
tpurt_status tpurt_gather(tpurt_comm* c, const void* in, void* out, int64_t bytes, int root) {
  tpurt_status s = check_root(c, root);
  return s ? s : move_rounds(c, MOVE_GATHER, in, out, bytes, root);
}
tpurt_status tpurt_scatter(tpurt_comm* c, const void* in, void* out, int64_t bytes, int root) {
  tpurt_status s = check_root(c, root);
  return s ? s : move_rounds(c, MOVE_SCATTER, in, out, bytes, root);
}

static tpurt_status all_to_all_rounds(tpurt_comm* c, const void* in_, const int64_t* send_bytes, const int64_t* send_offsets,
                                      void* out_, const int64_t* recv_bytes, const int64_t* recv_offsets) {
  const char* in = in_;
  char* out = out_;
  int N = c->size, me = c->rank;
  int64_t max_send = 0;
  for (int p = 0; p < N; p++) {
    c->sends[(((c->seq + 1) & 1) * N + me) * (size_t)N + p] = send_bytes[p]; /* for the coming seq */
    if (send_bytes[p] > max_send) max_send = send_bytes[p];
  }
  fingerprint fp = {TPURT_COMM_ALL_TO_ALL, -1, -1, -1, 0};
  tpurt_status s = begin(c, fp, max_send);
  if (s) return s;
  int64_t rounds_bytes = 0;
  for (int r = 0; r < N; r++) {
    int64_t sent = c->sends[((c->seq & 1) * N + r) * (size_t)N + me];
    if (sent != recv_bytes[r])
      return fail_group(c, "%s: rank %d sends %lld bytes to rank %d, which expects %lld", c->desc, r, (long long)sent,
                        me, (long long)recv_bytes[r]);
    if (my_post(c, r)->max_send > rounds_bytes) rounds_bytes = my_post(c, r)->max_send;
  }
  int64_t sub = c->h->slot_bytes / N / 64 * 64;
  for (int64_t base = 0; base < rounds_bytes; base += sub) {
    for (int p = 0; p < N; p++) {
      int64_t n = min64(sub, send_bytes[p] - base);
      if (n > 0) memcpy(slot(c, me) + p * sub, in + send_offsets[p] + base, (size_t)n);
    }
    if ((s = sync_ranks(c))) return s;
    for (int r = 0; r < N; r++) {
      int64_t n = min64(sub, recv_bytes[r] - base);
      if (n > 0) memcpy(out + recv_offsets[r] + base, slot(c, r) + me * sub, (size_t)n);
    }
    if (base + sub < rounds_bytes && (s = sync_ranks(c))) return s;
  }
  return TPURT_OK;
}

tpurt_status tpurt_all_to_all(tpurt_comm* c, const void* in, const int64_t* send_bytes, const int64_t* send_offsets,
                              void* out, const int64_t* recv_bytes, const int64_t* recv_offsets) {
  int64_t t0 = tpurt_now_ns(), sent = 0;
  for (int p = 0; p < c->size; p++) sent += send_bytes[p];
  return accounted(c, TPURT_COMM_ALL_TO_ALL, sent, t0,
                   all_to_all_rounds(c, in, send_bytes, send_offsets, out, recv_bytes, recv_offsets));
}

tpurt_status tpurt_barrier(tpurt_comm* c) {
  fingerprint fp = {TPURT_COMM_BARRIER, -1, -1, -1, 0};
  int64_t t0 = tpurt_now_ns();
  return accounted(c, TPURT_COMM_BARRIER, 0, t0, begin(c, fp, 0));
}

/* ---------------------------------------------------------------- point-to-point */
typedef struct {
  const tpurt_p2p* ops;
  int64_t* done; /* bytes moved per op */
  int n;
} p2p_batch;

static int finished(const tpurt_p2p* o, int64_t done) { return done >= 0 && done >= o->bytes; }

/* Messages between two ranks arrive in the order they were issued: an op waits for the batch's
 * earlier ones in the same direction with the same peer. */
static int queued_behind(const tpurt_p2p* ops, const int64_t* done, int i) {
  for (int j = 0; j < i; j++)
    if (ops[j].is_send == ops[i].is_send && ops[j].peer == ops[i].peer && !finished(&ops[j], done[j])) return 1;
  return 0;
}

/* Whether some unfinished op of the batch can move a piece now. */
static int p2p_can_move(tpurt_comm* c, const void* arg, int* waiting_for) {
  const p2p_batch* b = arg;
  for (int i = 0; i < b->n; i++) {
    const tpurt_p2p* o = &b->ops[i];
    if (finished(o, b->done[i]) || queued_behind(b->ops, b->done, i)) continue;
    channel* ch = o->is_send ? &c->chans[(size_t)c->rank * c->size + o->peer] : &c->chans[(size_t)o->peer * c->size + c->rank];
    uint64_t sent = atomic_load(&ch->sent), received = atomic_load(&ch->received);
    if (o->is_send ? sent == received : sent > received) return 1;
    *waiting_for = o->peer;
  }
  return 0;
}

static tpurt_status p2p_rounds(tpurt_comm* c, const tpurt_p2p* ops, int n);

tpurt_status tpurt_p2p_run(tpurt_comm* c, const tpurt_p2p* ops, int n) {
  int64_t t0 = tpurt_now_ns(), bytes = 0;
  for (int i = 0; i < n; i++) bytes += ops[i].bytes;
  return accounted(c, TPURT_COMM_SEND_RECV, bytes, t0, p2p_rounds(c, ops, n));
}

static tpurt_status p2p_rounds(tpurt_comm* c, const tpurt_p2p* ops, int n) {
  if (atomic_load(&c->h->failed)) return broken(c);
  for (int i = 0; i < n; i++)
    if (ops[i].peer < 0 || ops[i].peer >= c->size || ops[i].peer == c->rank || ops[i].bytes < 0)
      return tpurt_fail(TPURT_ERR_VALUE, "%s: %s peer %d from rank %d of a group of %d", c->label,
                        ops[i].is_send ? "send to" : "recv from", ops[i].peer, c->rank, c->size);
  int64_t done_local[64];
  int64_t* done = n <= 64 ? done_local : malloc(sizeof *done * (size_t)n);
  if (!done) return tpurt_fail(TPURT_ERR_OOM, "tpu_dist: out of host memory");
  /* an empty message is still one (empty) piece: done < 0 until it moved */
  for (int i = 0; i < n; i++) done[i] = ops[i].bytes ? 0 : -1;
  p2p_batch batch = {ops, done, n};
  snprintf(c->desc, sizeof c->desc, "send/recv");
  int64_t piece = c->h->chan_bytes;
  tpurt_status s = TPURT_OK;
  for (;;) {
    int pending = 0, moved = 0;
    for (int i = 0; i < n; i++) {
      const tpurt_p2p* o = &ops[i];
      if (finished(o, done[i])) continue;
      pending++;
      if (queued_behind(ops, done, i)) continue;
      int from = o->is_send ? c->rank : o->peer, to = o->is_send ? o->peer : c->rank;
      channel* ch = &c->chans[(size_t)from * c->size + to];
      uint64_t sent = atomic_load(&ch->sent), received = atomic_load(&ch->received);
      int64_t at = done[i] < 0 ? 0 : done[i], m = min64(piece, o->bytes - at);
      if (o->is_send && sent == received) {
        ch->piece = m;
        ch->total = o->bytes;
        ch->tag = o->tag;
        memcpy(chan_buf(c, from, to), (char*)o->buf + at, (size_t)m);
        atomic_store(&ch->sent, sent + 1);
      } else if (!o->is_send && sent > received) {
        if (ch->total != o->bytes || ch->tag != o->tag || ch->piece != m) {
          s = fail_group(c, "send/recv mismatch: rank %d sends %lld bytes with tag %lld to rank %d, which receives %lld "
                         "bytes with tag %d", from, (long long)ch->total, (long long)ch->tag, to, (long long)o->bytes,
                         o->tag);
          break;
        }
        memcpy((char*)o->buf + at, chan_buf(c, from, to), (size_t)m);
        atomic_store(&ch->received, received + 1);
      } else {
        continue;
      }
      done[i] = at + m;
      moved = 1;
      wake(c);
    }
    if (s || !pending) break;
    if (!moved && (s = wait_until(c, p2p_can_move, &batch))) break;
  }
  if (done != done_local) free(done);
  return s;
}
