/* The caching allocator: device memory is host memory owned here, accounted per chip
 * against the generation's HBM capacity. Freed blocks stay cached for reuse (stream-
 * ordered, as CUDA's caching allocator) until empty_cache or memory pressure. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

#define INLINE_USES 4
#define SMALL_ROUND 512
#define LARGE_ROUND (1 << 20)
#define LARGE_THRESHOLD (1 << 20)

typedef struct block {
  char* ptr;
  size_t size, requested;
  int device, in_use;
  /* Streams that must finish before reuse, with their issue counts at the free: as many as
   * recorded (DDP/FSDP side streams), inline up to INLINE_USES and on the heap beyond. */
  int nuses, cap_uses;
  int32_t* use_stream;
  uint64_t* use_seq;
  int32_t inline_stream[INLINE_USES];
  uint64_t inline_seq[INLINE_USES];
  struct block *next_free, *next_all, *prev_all, *hash_next;
} block;

typedef struct device_pool {
  block* free_list; /* sorted by size, ascending */
  block* all;
  tpurt_memory_stats stats;
  int64_t capacity;
} device_pool;

#define HASH_SIZE 65536
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static device_pool pools[TPURT_MAX_DEVICES];
static block* by_ptr[HASH_SIZE];

static size_t hash_ptr(const void* p) { return ((uintptr_t)p >> 6) * 2654435761u % HASH_SIZE; }

static size_t round_size(size_t n) {
  if (n == 0) n = 1;
  if (n < LARGE_THRESHOLD) return (n + SMALL_ROUND - 1) / SMALL_ROUND * SMALL_ROUND;
  return (n + LARGE_ROUND - 1) / LARGE_ROUND * LARGE_ROUND;
}

static void fmt_bytes(char* buf, size_t n, double v) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, u++;
  snprintf(buf, n, u ? "%.2f %s" : "%.0f %s", v, units[u]);
}

static device_pool* pool_of(int device) {
  device_pool* p = &pools[device];
  if (!p->capacity) {
    tpurt_chip_info info = {.struct_size = sizeof info};
    tpurt_chip_get_info(device, &info);
    p->capacity = info.hbm_bytes;
    p->stats.struct_size = sizeof p->stats;
    p->stats.capacity_bytes = info.hbm_bytes;
  }
  return p;
}

static int reusable_on(const block* b, int32_t stream) {
  for (int i = 0; i < b->nuses; i++)
    if (b->use_stream[i] != stream && tpurt_stream_completed_seq(b->use_stream[i]) < b->use_seq[i])
      return 0;
  return 1;
}

/* No stream still has work issued that uses it. */
static int idle(const block* b) {
  for (int i = 0; i < b->nuses; i++)
    if (tpurt_stream_completed_seq(b->use_stream[i]) < b->use_seq[i]) return 0;
  return 1;
}

static void unlink_free(device_pool* p, block* b) {
  for (block** pp = &p->free_list; *pp; pp = &(*pp)->next_free)
    if (*pp == b) {
      *pp = b->next_free;
      return;
    }
}

static void insert_free(device_pool* p, block* b) {
  block** pp = &p->free_list;
  while (*pp && (*pp)->size < b->size) pp = &(*pp)->next_free;
  b->next_free = *pp;
  *pp = b;
}

static void release_block(device_pool* p, block* b) {
  block** hp = &by_ptr[hash_ptr(b->ptr)];
  while (*hp != b) hp = &(*hp)->hash_next;
  *hp = b->hash_next;
  if (b->prev_all) b->prev_all->next_all = b->next_all; else p->all = b->next_all;
  if (b->next_all) b->next_all->prev_all = b->prev_all;
  p->stats.reserved_bytes -= (int64_t)b->size;
  p->stats.segment_count--;
  p->stats.segment_free_count++;
  if (b->use_stream != b->inline_stream) free(b->use_stream), free(b->use_seq);
  free(b->ptr);
  free(b);
}

static int64_t largest_free(const device_pool* p) {
  int64_t m = 0;
  for (const block* b = p->free_list; b; b = b->next_free)
    if ((int64_t)b->size > m) m = (int64_t)b->size;
  return m;
}

/* Frees the cached blocks no stream still uses (those are safe without synchronizing). After a
 * device synchronize that is every block cached then; blocks freed while the lock was released
 * for it may still be used by work issued since, and stay. */
static void flush_idle_locked(device_pool* p) {
  for (block** pp = &p->free_list; *pp;) {
    block* b = *pp;
    if (!idle(b)) {
      pp = &b->next_free;
      continue;
    }
    *pp = b->next_free;
    release_block(p, b);
  }
}

/* TPU_FAULT_ALLOC=N: whether this allocation fails. A hash of a shared draw counter
 * (splitmix64), so a run fails at the same points whatever the threads do between them. */
static int fault_injected(void) {
  static _Atomic uint64_t draws;
  long n = tpurt_fault_alloc_every();
  if (n <= 0) return 0;
  uint64_t x = atomic_fetch_add(&draws, 1) + 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return (x ^ (x >> 31)) % (uint64_t)n == 0;
}

/* may_wait: under memory pressure, synchronize the device and give the whole cache back
 * (a running kernel cannot: it may be what the device waits for). */
static tpurt_status allocate(int device, size_t nbytes, int32_t stream, int may_wait, void** out) {
  *out = NULL;
  if (device < 0 || device >= tpurt_device_count())
    return tpurt_device_count() ? tpurt_fail(TPURT_ERR_VALUE, "invalid device tpu:%d", device)
                                : tpurt_init();
  size_t size = round_size(nbytes);
  pthread_mutex_lock(&mu);
  device_pool* p = pool_of(device);
  if (fault_injected()) {
    p->stats.oom_count++;
    pthread_mutex_unlock(&mu);
    return tpurt_fail(TPURT_ERR_OOM, "TPU out of memory. Tried to allocate %zu bytes on tpu:%d (failure injected by "
                      "TPU_FAULT_ALLOC=%ld)", nbytes, device, tpurt_fault_alloc_every());
  }
  block* found = NULL;
  for (block* b = p->free_list; b; b = b->next_free) {
    if (b->size < size) continue;
    if (b->size > size + size / 4 + SMALL_ROUND) break; /* too wasteful: make a new one */
    /* A running kernel is earlier in its stream's order than work the host issued since: a
     * block freed after such work only becomes its once that work completed. */
    if (may_wait ? reusable_on(b, stream) : idle(b)) {
      found = b;
      break;
    }
  }
  if (found) {
    unlink_free(p, found);
  } else {
    if (p->stats.reserved_bytes + (int64_t)size > p->capacity && p->free_list) {
      /* Memory pressure: wait for the device, then give the cache back and retry. */
      if (may_wait) {
        pthread_mutex_unlock(&mu);
        tpurt_device_synchronize(device);
        pthread_mutex_lock(&mu);
      }
      flush_idle_locked(p);
      p->stats.cache_flushes++;
    }
    if (p->stats.reserved_bytes + (int64_t)size > p->capacity) {
      p->stats.oom_count++;
      char req[32], cap[32], alloc[32], resv[32], lf[32];
      fmt_bytes(req, sizeof req, (double)nbytes);
      fmt_bytes(cap, sizeof cap, (double)p->capacity);
      fmt_bytes(alloc, sizeof alloc, (double)p->stats.allocated_bytes);
      fmt_bytes(resv, sizeof resv, (double)p->stats.reserved_bytes);
      fmt_bytes(lf, sizeof lf, (double)largest_free(p));
      pthread_mutex_unlock(&mu);
      tpurt_chip_info info = {.struct_size = sizeof info};
      tpurt_chip_get_info(device, &info);
      return tpurt_fail(TPURT_ERR_OOM,
                        "TPU out of memory. Tried to allocate %s on tpu:%d (%s, HBM capacity %s); "
                        "%s is allocated by tensors, %s reserved in total, largest free cached "
                        "block %s. Free tensors you no longer need or lower the batch size.",
                        req, device, info.generation, cap, alloc, resv, lf);
    }
    char* mem = NULL;
    if (posix_memalign((void**)&mem, 64, size) != 0 || !(found = calloc(1, sizeof *found))) {
      free(mem);
      p->stats.oom_count++;
      pthread_mutex_unlock(&mu);
      return tpurt_fail(TPURT_ERR_OOM,
                        "host out of memory backing %zu bytes of emulated HBM on tpu:%d", size, device);
    }
    found->ptr = mem;
    found->size = size;
    found->use_stream = found->inline_stream;
    found->use_seq = found->inline_seq;
    found->cap_uses = INLINE_USES;
    found->device = device;
    size_t h = hash_ptr(mem);
    found->hash_next = by_ptr[h];
    by_ptr[h] = found;
    found->next_all = p->all;
    if (p->all) p->all->prev_all = found;
    p->all = found;
    p->stats.reserved_bytes += (int64_t)size;
    if (p->stats.reserved_bytes > p->stats.reserved_peak) p->stats.reserved_peak = p->stats.reserved_bytes;
    p->stats.segment_count++;
    p->stats.segment_alloc_count++;
  }
  found->in_use = 1;
  found->requested = nbytes;
  found->nuses = 1;
  found->use_stream[0] = stream;
  found->use_seq[0] = 0;
  p->stats.allocated_bytes += (int64_t)found->size;
  if (p->stats.allocated_bytes > p->stats.allocated_peak) p->stats.allocated_peak = p->stats.allocated_bytes;
  p->stats.requested_bytes += (int64_t)nbytes;
  p->stats.alloc_count++;
  pthread_mutex_unlock(&mu);
  tpurt_metrics_count_alloc();
  *out = found->ptr;
  return TPURT_OK;
}

tpurt_status tpurt_malloc(int device, size_t nbytes, int32_t stream, void** out) {
  return allocate(device, nbytes, stream, 1, out);
}

tpurt_status tpurt_malloc_in_kernel(int device, size_t nbytes, void** out) {
  return allocate(device, nbytes, tpurt_stream_make(device, 0), 0, out);
}

static block* find_locked(const void* ptr) {
  for (block* b = by_ptr[hash_ptr(ptr)]; b; b = b->hash_next)
    if (b->ptr == ptr) return b;
  return NULL;
}

/* in_kernel: a kernel's temporary, which nothing uses once the kernel is done with it */
static void release(void* ptr, int in_kernel) {
  if (!ptr) return;
  pthread_mutex_lock(&mu);
  block* b = find_locked(ptr);
  if (b && b->in_use) {
    device_pool* p = &pools[b->device];
    b->in_use = 0;
    if (in_kernel) b->nuses = 0;
    for (int i = 0; i < b->nuses; i++) b->use_seq[i] = tpurt_stream_issued_seq(b->use_stream[i]);
    p->stats.allocated_bytes -= (int64_t)b->size;
    p->stats.requested_bytes -= (int64_t)b->requested;
    p->stats.free_count++;
    insert_free(p, b);
  }
  pthread_mutex_unlock(&mu);
}

void tpurt_free(void* ptr) { release(ptr, 0); }
void tpurt_free_in_kernel(void* ptr) { release(ptr, 1); }

/* Room for one more use; caller holds mu. */
static int grow_uses_locked(block* b) {
  if (b->nuses < b->cap_uses) return 1;
  int cap = 2 * b->cap_uses;
  int32_t* streams = malloc(cap * sizeof *streams);
  uint64_t* seqs = malloc(cap * sizeof *seqs);
  if (!streams || !seqs) {
    free(streams), free(seqs);
    return 0;
  }
  memcpy(streams, b->use_stream, b->nuses * sizeof *streams);
  memcpy(seqs, b->use_seq, b->nuses * sizeof *seqs);
  if (b->use_stream != b->inline_stream) free(b->use_stream), free(b->use_seq);
  b->use_stream = streams;
  b->use_seq = seqs;
  b->cap_uses = cap;
  return 1;
}

tpurt_status tpurt_record_stream(void* ptr, int32_t stream) {
  if (!tpurt_stream_valid(stream)) return tpurt_fail(TPURT_ERR_VALUE, "record_stream: invalid tpu stream %d", stream);
  tpurt_status st = TPURT_OK;
  pthread_mutex_lock(&mu);
  block* b = find_locked(ptr);
  if (b && b->in_use) {
    int known = 0;
    for (int i = 0; i < b->nuses; i++) known |= b->use_stream[i] == stream;
    if (!known && grow_uses_locked(b)) b->use_stream[b->nuses++] = stream;
    else if (!known) st = TPURT_ERR_OOM;
  }
  pthread_mutex_unlock(&mu);
  return st ? tpurt_fail(st, "out of host memory recording a stream's use of a tpu tensor") : TPURT_OK;
}

int tpurt_pointer_device(const void* ptr) {
  int dev = -1;
  pthread_mutex_lock(&mu);
  block* b = find_locked(ptr);
  if (b) dev = b->device;
  for (int d = 0; dev < 0 && d < TPURT_MAX_DEVICES; d++)
    for (b = pools[d].all; b; b = b->next_all)
      if ((const char*)ptr >= b->ptr && (const char*)ptr < b->ptr + b->size) {
        dev = d;
        break;
      }
  pthread_mutex_unlock(&mu);
  return dev;
}

void tpurt_allocator_flush_device(int device) {
  tpurt_device_synchronize(device);
  pthread_mutex_lock(&mu);
  flush_idle_locked(&pools[device]);
  pthread_mutex_unlock(&mu);
}

void tpurt_empty_cache(void) {
  for (int d = 0; d < tpurt_device_count(); d++) tpurt_allocator_flush_device(d);
}

tpurt_status tpurt_memory_get_stats(int device, tpurt_memory_stats* out) {
  if (device < 0 || device >= tpurt_device_count())
    return tpurt_fail(TPURT_ERR_VALUE, "invalid device tpu:%d", device);
  pthread_mutex_lock(&mu);
  device_pool* p = pool_of(device);
  tpurt_memory_stats s = p->stats;
  s.largest_free_block = largest_free(p);
  pthread_mutex_unlock(&mu);
  size_t n = out->struct_size && out->struct_size < sizeof s ? out->struct_size : sizeof s;
  memcpy(out, &s, n);
  out->struct_size = n;
  return TPURT_OK;
}

tpurt_status tpurt_memory_reset_peak(int device) {
  if (device < 0 || device >= tpurt_device_count())
    return tpurt_fail(TPURT_ERR_VALUE, "invalid device tpu:%d", device);
  pthread_mutex_lock(&mu);
  device_pool* p = pool_of(device);
  p->stats.allocated_peak = p->stats.allocated_bytes;
  p->stats.reserved_peak = p->stats.reserved_bytes;
  pthread_mutex_unlock(&mu);
  return TPURT_OK;
}

tpurt_status tpurt_memory_reset_counts(int device) {
  if (device < 0 || device >= tpurt_device_count())
    return tpurt_fail(TPURT_ERR_VALUE, "invalid device tpu:%d", device);
  pthread_mutex_lock(&mu);
  device_pool* p = pool_of(device);
  p->stats.alloc_count = p->stats.free_count = 0;
  p->stats.segment_alloc_count = p->stats.segment_free_count = 0;
  p->stats.cache_flushes = p->stats.oom_count = 0;
  pthread_mutex_unlock(&mu);
  return TPURT_OK;
}
