/* Graphs of planned calls: a fixed sequence of op calls over named buffers, checked and
 * planned once (tpurt_graph_instantiate), then run many times on one stream, each launch one
 * command on it. Intermediates live in one arena laid out by liveness: buffers whose
 * [first use, last use] call ranges overlap never share bytes, the others may. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

typedef struct gbuf {
  int kind;
  int64_t nbytes;
  int first, last; /* calls using it; first = -1: unused */
  int64_t offset;  /* in the arena, for intermediates */
} gbuf;

typedef struct gcall {
  tpurt_op_call* call; /* owned copy, lists after the struct */
  tpurt_graph_ref* refs;
  int nrefs;
  tpurt_plan plan;
} gcall;

struct tpurt_graph {
  int device, instantiated;
  int32_t stream; /* of the launches so far, -1 before the first */
  gbuf* bufs;
  int nbufs;
  gcall* calls;
  int ncalls;
  void *arena, *scratch;
  tpurt_graph_stats stats;
};

tpurt_status tpurt_graph_create(int device, tpurt_graph** out) {
  *out = NULL;
  tpurt_status s = tpurt_init();
  if (s) return s;
  if (device < 0 || device >= tpurt_device_count()) return tpurt_fail(TPURT_ERR_VALUE, "invalid device tpu:%d", device);
  tpurt_graph* g = calloc(1, sizeof *g);
  if (!g) return tpurt_fail(TPURT_ERR_OOM, "host out of memory for a graph");
  g->device = device;
  g->stream = -1;
  *out = g;
  return TPURT_OK;
}

void tpurt_graph_destroy(tpurt_graph* g) {
  if (!g) return;
  if (g->stream >= 0) tpurt_stream_synchronize(g->stream); /* its launches use the arena */
  tpurt_free(g->arena);
  tpurt_free(g->scratch);
  for (int i = 0; i < g->ncalls; i++) free(g->calls[i].call), free(g->calls[i].refs);
  free(g->calls);
  free(g->bufs);
  free(g);
}

static tpurt_status fixed(const tpurt_graph* g) {
  return g->instantiated ? tpurt_fail(TPURT_ERR_VALUE, "graph: already instantiated, it cannot change") : TPURT_OK;
}

tpurt_status tpurt_graph_add_buffer(tpurt_graph* g, tpurt_buffer_kind kind, int64_t nbytes, int32_t* id) {
  tpurt_status s = fixed(g);
  if (s) return s;
  if (kind < TPURT_BUFFER_INPUT || kind > TPURT_BUFFER_INTERMEDIATE || nbytes < 0)
    return tpurt_fail(TPURT_ERR_VALUE, "graph: buffer kind %d of %lld bytes", (int)kind, (long long)nbytes);
  gbuf* b = realloc(g->bufs, sizeof *b * (size_t)(g->nbufs + 1));
  if (!b) return tpurt_fail(TPURT_ERR_OOM, "host out of memory for a graph buffer");
  g->bufs = b;
  b[g->nbufs] = (gbuf){kind, nbytes, -1, -1, 0};
  *id = g->nbufs++;
  return TPURT_OK;
}

/* The tensor a reference names in a call, or NULL. */
static tpurt_tensor* ref_tensor(tpurt_op_call* c, const tpurt_graph_ref* r) {
  if (r->slot < 0) return -r->slot - 1 < c->nouts ? &c->outs[-r->slot - 1] : NULL;
  if (r->slot >= c->nargs) return NULL;
  tpurt_value* v = &c->args[r->slot];
  if (v->kind == TPURT_V_TENSOR) return r->element == 0 ? &v->t : NULL;
  if (v->kind == TPURT_V_TENSORS && r->element >= 0 && r->element < v->n)
    return (tpurt_tensor*)&v->tensors[r->element];
  return NULL;
}

tpurt_status tpurt_graph_add_call(tpurt_graph* g, const tpurt_op_call* call, const tpurt_graph_ref* refs, int nrefs) {
  tpurt_status s = fixed(g);
  if (!s) s = tpurt_check_call(call, 0);
  if (s) return s;
  gcall gc = {malloc(sizeof(tpurt_op_call) + tpurt_call_lists_size(call)), malloc(sizeof *refs * (size_t)(nrefs + 1)),
              nrefs, {0}};
  gcall* calls = realloc(g->calls, sizeof *calls * (size_t)(g->ncalls + 1));
  if (calls) g->calls = calls;
  if (!gc.call || !gc.refs || !calls) {
    free(gc.call), free(gc.refs);
    return tpurt_fail(TPURT_ERR_OOM, "host out of memory for a graph call");
  }
  tpurt_call_copy(gc.call, call);
  memcpy(gc.refs, refs, sizeof *refs * (size_t)nrefs);
  for (int i = 0; i < nrefs; i++) {
    const tpurt_graph_ref* r = &refs[i];
    if (!ref_tensor(gc.call, r) || r->buffer < 0 || r->buffer >= g->nbufs || r->offset < 0) {
      free(gc.call), free(gc.refs);
      return tpurt_fail(TPURT_ERR_VALUE, "graph call %d (%s): reference %d (slot %d, element %d, buffer %d) names no "
                        "tensor of the call or no buffer", g->ncalls, tpurt_op_kernel_name(call->op), i, r->slot,
                        r->element, r->buffer);
    }
  }
  g->calls[g->ncalls++] = gc;
  return TPURT_OK;
}

/* Bytes [lo, hi) of a tensor relative to its element 0; lo > hi when it is empty. */
static void byte_extent(const tpurt_tensor* t, int64_t* lo, int64_t* hi) {
  int64_t a = 0, b = 0, es = (int64_t)tpurt_dtype_size((tpurt_dtype)t->dtype);
  for (int d = 0; d < t->ndim; d++) {
    if (t->sizes[d] == 0) {
      *lo = 1, *hi = 0;
      return;
    }
    int64_t span = (t->sizes[d] - 1) * t->strides[d];
    if (span < 0) a += span; else b += span;
  }
  *lo = a * es, *hi = b * es + es;
}

/* A distinct address range per buffer while planning: the plan sees which tensors of a call
 * share a buffer (so may overlap) without any memory behind them. */
static char* planning_base(int buffer) { return (char*)((uintptr_t)(buffer + 1) << 40); }

static int lifetimes_overlap(const gbuf* a, const gbuf* b) { return a->first <= b->last && b->first <= a->last; }

/* First-fit by decreasing size: each intermediate at the lowest 64-aligned offset that clears
 * every placed one whose lifetime overlaps its own. The arena's size, -1 out of host memory. */
static int64_t layout(gbuf* bufs, int n) {
  int* order = malloc(sizeof(int) * (size_t)(n + 1));
  if (!order) return -1;
  int m = 0;
  for (int i = 0; i < n; i++)
    if (bufs[i].kind == TPURT_BUFFER_INTERMEDIATE && bufs[i].first >= 0) order[m++] = i;
  for (int i = 1; i < m; i++)
    for (int j = i; j > 0 && bufs[order[j]].nbytes > bufs[order[j - 1]].nbytes; j--) {
      int t = order[j];
      order[j] = order[j - 1], order[j - 1] = t;
    }
  int64_t total = 0;
  for (int i = 0; i < m; i++) {
    gbuf* b = &bufs[order[i]];
    int64_t off = 0;
    for (int moved = 1; moved;) {
      moved = 0;
      for (int j = 0; j < i; j++) {
        const gbuf* p = &bufs[order[j]];
        int64_t pend = p->offset + ((p->nbytes + 63) & ~(int64_t)63);
        if (lifetimes_overlap(b, p) && off < pend && p->offset < off + b->nbytes) off = pend, moved = 1;
      }
    }
    b->offset = off;
    if (off + b->nbytes > total) total = off + b->nbytes;
  }
  free(order);
  return total;
}

tpurt_status tpurt_graph_instantiate(tpurt_graph* g) {
  tpurt_status s = fixed(g);
  if (s) return s;
  tpurt_graph_stats st = {sizeof st, g->ncalls, g->nbufs, 0, 0, 0, 0, 0};
  for (int i = 0; i < g->ncalls; i++) {
    gcall* gc = &g->calls[i];
    for (int k = 0; k < gc->nrefs; k++) {
      const tpurt_graph_ref* r = &gc->refs[k];
      tpurt_tensor* t = ref_tensor(gc->call, r);
      gbuf* b = &g->bufs[r->buffer];
      int64_t lo, hi;
      byte_extent(t, &lo, &hi);
      if (lo <= hi && (r->offset + lo < 0 || r->offset + hi > b->nbytes))
        return tpurt_fail(TPURT_ERR_VALUE, "graph call %d (%s): a tensor %s at offset %lld needs bytes [%lld, %lld) of "
                          "buffer %d, which has %lld", i, tpurt_op_kernel_name(gc->call->op), tpurt_shape_str(t),
                          (long long)r->offset, (long long)(r->offset + lo), (long long)(r->offset + hi), r->buffer,
                          (long long)b->nbytes);
      t->data = planning_base(r->buffer) + r->offset;
      if (b->first < 0) b->first = i;
      b->last = i;
    }
    gc->plan.struct_size = sizeof gc->plan;
    s = tpurt_op_plan(gc->call, &gc->plan);
    if (s) return s; /* the plan's message says why */
    if (gc->plan.outputs_from_data)
      return tpurt_fail(TPURT_ERR_UNSUPPORTED, "graph call %d (%s): output sizes depend on the data; a graph's are fixed",
                        i, tpurt_op_kernel_name(gc->call->op));
    if (gc->plan.scratch_bytes > st.scratch_bytes) st.scratch_bytes = gc->plan.scratch_bytes;
    st.flops += gc->plan.flops;
    st.bytes_moved += gc->plan.bytes_moved;
  }
  for (int i = 0; i < g->nbufs; i++)
    if (g->bufs[i].kind == TPURT_BUFFER_INTERMEDIATE) st.intermediate_bytes += g->bufs[i].nbytes;
  st.arena_bytes = layout(g->bufs, g->nbufs);
  if (st.arena_bytes < 0) return tpurt_fail(TPURT_ERR_OOM, "host out of memory laying out a graph");
  int32_t s0 = tpurt_stream_make(g->device, 0);
  if ((st.arena_bytes && (s = tpurt_malloc(g->device, (size_t)st.arena_bytes, s0, &g->arena))) ||
      (st.scratch_bytes && (s = tpurt_malloc(g->device, (size_t)st.scratch_bytes, s0, &g->scratch))))
    return s;
  g->stats = st;
  g->instantiated = 1;
  return TPURT_OK;
}

tpurt_status tpurt_graph_get_stats(const tpurt_graph* g, tpurt_graph_stats* out) {
  if (!g->instantiated) return tpurt_fail(TPURT_ERR_VALUE, "graph: not instantiated");
  size_t n = out->struct_size && out->struct_size < sizeof g->stats ? out->struct_size : sizeof g->stats;
  memcpy(out, &g->stats, n);
  out->struct_size = n;
  return TPURT_OK;
}

typedef struct launch {
  tpurt_graph* g;
  void* buffers[]; /* per buffer id: the device pointer its references resolve to */
} launch;

/* One launch, on the stream's worker: every call with its references resolved, in order. The
 * graph's own call copies are patched in place: its launches run one after another on one
 * stream, and its calls are nobody else's. */
static tpurt_status run_launch(void* p) {
  launch* L = p;
  tpurt_graph* g = L->g;
  for (int i = 0; i < g->ncalls; i++) {
    tpurt_op_call* c = g->calls[i].call;
    for (int k = 0; k < g->calls[i].nrefs; k++) {
      const tpurt_graph_ref* r = &g->calls[i].refs[k];
      ref_tensor(c, r)->data = (char*)L->buffers[r->buffer] + r->offset;
    }
    c->scratch = g->scratch;
    c->scratch_bytes = g->stats.scratch_bytes;
    tpurt_status s = tpurt_op_run(c);
    if (s) {
      char why[512];
      snprintf(why, sizeof why, "%s", tpurt_last_error());
      return tpurt_fail(s, "graph call %d (%s): %s", i, tpurt_op_kernel_name(c->op), why);
    }
  }
  return TPURT_OK;
}

tpurt_status tpurt_graph_launch(tpurt_graph* g, int32_t stream, void* const* buffers) {
  if (!g->instantiated) return tpurt_fail(TPURT_ERR_VALUE, "graph: launch before tpurt_graph_instantiate");
  if (!tpurt_stream_valid(stream) || tpurt_stream_device(stream) != g->device)
    return tpurt_fail(TPURT_ERR_VALUE, "graph: stream %d is not a stream of tpu:%d", stream, g->device);
  if (g->stream >= 0 && g->stream != stream)
    return tpurt_fail(TPURT_ERR_VALUE, "graph: launched on stream %d before; its intermediates are ordered on one stream",
                      g->stream);
  launch* L = malloc(sizeof *L + sizeof(void*) * (size_t)(g->nbufs + 1));
  if (!L) return tpurt_fail(TPURT_ERR_OOM, "host out of memory launching a graph");
  L->g = g;
  for (int i = 0; i < g->nbufs; i++) {
    const gbuf* b = &g->bufs[i];
    L->buffers[i] = b->kind == TPURT_BUFFER_INTERMEDIATE ? (char*)g->arena + b->offset : buffers[i];
    if (b->kind != TPURT_BUFFER_INTERMEDIATE && b->first >= 0 && !buffers[i]) {
      free(L);
      return tpurt_fail(TPURT_ERR_VALUE, "graph: no device pointer for %s buffer %d",
                        b->kind == TPURT_BUFFER_INPUT ? "input" : "output", i);
    }
  }
  g->stream = stream;
  return tpurt_stream_enqueue(stream, run_launch, L, free, "graph");
}
