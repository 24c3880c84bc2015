/* Host kernels (torch.compile's generated loops) as stream commands: the command carries the
 * function, its copied arguments and its name, so nothing is allocated per launch. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

typedef struct {
  tpurt_host_kernel_fn fn;
  int nargs, ncopies;
  char name[96];
  void* block; /* snapshots that did not fit the command, or NULL */
  int64_t args[TPURT_MAX_HOST_KERNEL_ARGS];
  tpurt_host_arg_copy copies[TPURT_MAX_HOST_KERNEL_ARGS]; /* in the caller's launch only */
} host_launch;
typedef struct {
  char name[96]; /* first: the command's name (tpurt_stream_enqueue_inline) */
  tpurt_host_kernel_fn fn;
  int nargs;
  void* block;
  int64_t args[TPURT_MAX_HOST_KERNEL_ARGS];
  _Alignas(64) unsigned char snapshots[TPURT_HOST_KERNEL_COPY_BYTES];
} host_command;
_Static_assert(sizeof(host_command) <= TPURT_STREAM_PAYLOAD, "a host kernel launch fits in a stream command");

static void fill_launch(void* payload, const void* src) {
  const host_launch* l = src;
  host_command* p = payload;
  p->fn = l->fn;
  p->nargs = l->nargs;
  p->block = l->block;
  memcpy(p->name, l->name, sizeof p->name);
  memcpy(p->args, l->args, (size_t)l->nargs * sizeof(int64_t));
  size_t at = 0;
  for (int i = 0; i < l->ncopies; i++) {
    const tpurt_host_arg_copy* c = &l->copies[i];
    memcpy(p->snapshots + at, c->src, (size_t)c->nbytes);
    p->args[c->arg] = (int64_t)(intptr_t)(p->snapshots + at);
    at += ((size_t)c->nbytes + 15) & ~(size_t)15;
  }
}

static tpurt_status run_launch(void* payload) {
  const host_command* p = payload;
  char msg[512] = "";
  int failed = p->fn(p->args, msg, sizeof msg);
  tpurt_free_in_kernel(p->block);
  if (!failed) return TPURT_OK;
  return tpurt_fail(TPURT_ERR_RUNTIME, "compiled kernel %s: %s", p->name, msg[0] ? msg : "failed");
}

tpurt_status tpurt_host_kernel_launch(int32_t stream, tpurt_host_kernel_fn fn, const int64_t* args, int nargs,
                                      const char* name, const tpurt_host_arg_copy* copies, int ncopies) {
  tpurt_status s = tpurt_init();
  if (s) return s;
  if (!fn) return tpurt_fail(TPURT_ERR_VALUE, "host kernel launch without a function");
  if (nargs < 0 || nargs > TPURT_MAX_HOST_KERNEL_ARGS || (nargs && !args))
    return tpurt_fail(TPURT_ERR_VALUE, "host kernel %s: %d arguments (at most %d)", name ? name : "?", nargs,
                      TPURT_MAX_HOST_KERNEL_ARGS);
  size_t snapshot_bytes = 0;
  if (ncopies < 0 || ncopies > nargs || (ncopies && !copies))
    return tpurt_fail(TPURT_ERR_VALUE, "host kernel %s: %d argument copies", name ? name : "?", ncopies);
  for (int i = 0; i < ncopies; i++) {
    if (copies[i].arg < 0 || copies[i].arg >= nargs || copies[i].nbytes < 0 || (copies[i].nbytes && !copies[i].src))
      return tpurt_fail(TPURT_ERR_VALUE, "host kernel %s: bad copy of argument %d", name ? name : "?", copies[i].arg);
    snapshot_bytes += ((size_t)copies[i].nbytes + 15) & ~(size_t)15;
  }
  /* Built on the caller's stack only up to the argument counts; the command copies as much. */
  host_launch l;
  l.fn = fn;
  l.nargs = nargs;
  l.ncopies = ncopies;
  snprintf(l.name, sizeof l.name, "%s", name ? name : "host kernel");
  if (nargs) memcpy(l.args, args, (size_t)nargs * sizeof(int64_t));
  /* Snapshots beyond the command's room go to a block of the stream's chip that the command
   * owns and gives back once the kernel ran (a compiled AdamW step reads one CPU step counter
   * per parameter: 52 of them outgrew the command, and the launch then waited for the stream,
   * the whole backward, every step). */
  l.block = NULL;
  if (snapshot_bytes > TPURT_HOST_KERNEL_COPY_BYTES) {
    s = tpurt_malloc(tpurt_stream_device(stream), snapshot_bytes, stream, &l.block);
    if (s) return s;
    char* block = l.block;
    size_t at = 0;
    for (int i = 0; i < ncopies; i++) {
      memcpy(block + at, copies[i].src, (size_t)copies[i].nbytes);
      l.args[copies[i].arg] = (int64_t)(intptr_t)(block + at);
      at += ((size_t)copies[i].nbytes + 15) & ~(size_t)15;
    }
    l.ncopies = 0;
  } else if (ncopies) {
    memcpy(l.copies, copies, (size_t)ncopies * sizeof *copies);
  }
  /* Always the worker: generated loops parallelise with OpenMP, whose thread team belongs to
   * the thread that opens the parallel region, so one thread must run them all. */
  s = tpurt_stream_enqueue_inline(stream, run_launch, fill_launch, &l, NULL);
  if (s) tpurt_free(l.block); /* not enqueued */
  /* debug mode (TPU_LAUNCH_BLOCKING=1): the error raises from the launch that caused it */
  if (!s && tpurt_get_eager_mode() == TPURT_MODE_DEBUG) s = tpurt_stream_synchronize(stream);
  return s;
}
