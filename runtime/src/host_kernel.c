/* Host kernels (torch.compile's generated loops) as stream commands: the command carries the
 * function, its copied arguments and its name, so nothing is allocated per launch. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

typedef struct {
  tpurt_host_kernel_fn fn;
  int nargs;
  char name[96];
  int64_t args[TPURT_MAX_HOST_KERNEL_ARGS];
} host_launch;
_Static_assert(sizeof(host_launch) <= TPURT_STREAM_PAYLOAD, "a host launch fits in a stream command");

static void fill_launch(void* payload, const void* src) {
  const host_launch* l = src;
  host_launch* p = payload;
  p->fn = l->fn;
  p->nargs = l->nargs;
  memcpy(p->name, l->name, sizeof p->name);
  memcpy(p->args, l->args, (size_t)l->nargs * sizeof(int64_t));
}

static tpurt_status run_launch(void* payload) {
  const host_launch* p = payload;
  char msg[512] = "";
  if (!p->fn(p->args, msg, sizeof msg)) return TPURT_OK;
  return tpurt_fail(TPURT_ERR_RUNTIME, "compiled kernel %s: %s", p->name, msg[0] ? msg : "failed");
}

tpurt_status tpurt_host_kernel_launch(int32_t stream, tpurt_host_kernel_fn fn, const int64_t* args, int nargs,
                                      const char* name) {
  tpurt_status s = tpurt_init();
  if (s) return s;
  if (!fn) return tpurt_fail(TPURT_ERR_VALUE, "host kernel launch without a function");
  if (nargs < 0 || nargs > TPURT_MAX_HOST_KERNEL_ARGS || (nargs && !args))
    return tpurt_fail(TPURT_ERR_VALUE, "host kernel %s: %d arguments (at most %d)", name ? name : "?", nargs,
                      TPURT_MAX_HOST_KERNEL_ARGS);
  /* Built on the caller's stack only up to the argument count; the command copies as much. */
  host_launch l;
  l.fn = fn;
  l.nargs = nargs;
  snprintf(l.name, sizeof l.name, "%s", name ? name : "host kernel");
  if (nargs) memcpy(l.args, args, (size_t)nargs * sizeof(int64_t));
  /* Always the worker: generated loops parallelise with OpenMP, whose thread team belongs to
   * the thread that opens the parallel region, so one thread must run them all. */
  s = tpurt_stream_enqueue_inline(stream, run_launch, fill_launch, &l, "compiled graph");
  /* debug mode (TPU_LAUNCH_BLOCKING=1): the error raises from the launch that caused it */
  if (!s && tpurt_get_eager_mode() == TPURT_MODE_DEBUG) s = tpurt_stream_synchronize(stream);
  return s;
}
