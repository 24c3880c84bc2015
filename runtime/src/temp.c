/* Kernel temporaries. A kernel's working memory (im2col columns, accumulators, dense copies of
 * strided operands) is device memory like a tensor's: it comes from the caller's planned
 * scratch (tpurt_op_call.scratch) while that lasts, else from the chip's caching allocator,
 * so peak memory and "fits on the chip" see it and a chip out of HBM fails the kernel with
 * OOM. Everything a kernel took is given back when it returns. */
#include <pthread.h>
#include <stdlib.h>

#include "internal.h"

#define ALIGN 64
/* Temporaries from the allocator start this far into their block: a kernel that still calls
 * free() on one aborts at once (not a valid heap pointer) instead of corrupting the cache. */
#define GUARD ALIGN

static _Thread_local tpurt_temp_ctx* current;
#define NOT_POPPABLE ((size_t)-1)

void tpurt_temp_begin(tpurt_temp_ctx* t, const tpurt_op_call* c) {
  memset(t, 0, sizeof *t);
  t->device = c->device;
  t->op = c->op;
  t->arena = c->scratch;
  t->arena_size = c->scratch && c->scratch_bytes > 0 ? (size_t)c->scratch_bytes : 0;
  t->last = NOT_POPPABLE;
  pthread_mutex_init(&t->mu, NULL);
  t->outer = current;
  current = t;
}

void tpurt_temp_end(tpurt_temp_ctx* t) {
  for (int i = 0; i < t->n; i++) tpurt_free_in_kernel(t->blocks[i]);
  free(t->blocks);
  pthread_mutex_destroy(&t->mu);
  current = t->outer;
}

tpurt_temp_ctx* tpurt_temp_current(void) { return current; }
void tpurt_temp_adopt(tpurt_temp_ctx* t) { current = t; }

/* Room for one more allocator block in the context's list (under t->mu). */
static int reserve_slot(tpurt_temp_ctx* t) {
  if (t->n < t->cap) return 1;
  int cap = t->cap * 2 + 8;
  void** blocks = realloc(t->blocks, sizeof(void*) * (size_t)cap);
  if (!blocks) return 0;
  t->blocks = blocks, t->cap = cap;
  return 1;
}

void* tpurt_temp(size_t bytes) {
  tpurt_temp_ctx* t = current;
  if (!t) {
    tpurt_fail(TPURT_ERR_RUNTIME, "kernel temporary requested outside a kernel");
    return NULL;
  }
  size_t need = (size_t)tpurt_temp_bytes(bytes);
  pthread_mutex_lock(&t->mu);
  void* p = NULL;
  if (t->arena && t->used + need <= t->arena_size) {
    p = t->arena + t->used;
    t->last = t->used;
    t->used += need;
  } else if (reserve_slot(t)) {
    if (!tpurt_malloc_in_kernel(t->device, bytes + GUARD, &p)) {
      t->blocks[t->n++] = p, p = (char*)p + GUARD;
      tpurt_metrics_count_unplanned_temp(t->op, (int64_t)bytes);
    }
  } else {
    tpurt_fail(TPURT_ERR_OOM, "host out of memory tracking kernel temporaries");
  }
  pthread_mutex_unlock(&t->mu);
  return p;
}

void* tpurt_temp_zeroed(size_t bytes) {
  void* p = tpurt_temp(bytes);
  if (p) memset(p, 0, bytes);
  return p;
}

void tpurt_temp_release(void* p) {
  tpurt_temp_ctx* t = current;
  if (!t || !p) return;
  pthread_mutex_lock(&t->mu);
  /* The arena is a stack: the latest temporary taken from it is given back for reuse (a loop
   * that takes and releases one per step needs one step's bytes, and its plan says so). */
  if (t->arena && (char*)p >= t->arena && (char*)p < t->arena + t->arena_size) {
    if ((size_t)((char*)p - t->arena) == t->last) t->used = t->last, t->last = NOT_POPPABLE;
    pthread_mutex_unlock(&t->mu);
    return;
  }
  for (int i = 0; i < t->n; i++)
    if ((char*)t->blocks[i] + GUARD == (char*)p) {
      t->blocks[i] = t->blocks[--t->n];
      tpurt_free_in_kernel((char*)p - GUARD);
      break;
    }
  pthread_mutex_unlock(&t->mu);
}
