/* Fused eager mode: elementwise calls deferred into a stream's chain (stream.c holds it and
 * enqueues it before anything else observes the stream) run as ONE command over tiles of the
 * flat element range. Each tile runs every call of the chain in order, each on its slice of the
 * tensors (data advanced to the tile, sizes [tile], strides [1]; 0-dim operands as they are),
 * through the op's own kernel. So an op's output is still in cache when the next op reads it,
 * and each op's result is the kernel's own: elementwise kernels compute every element from the
 * same element of their operands, hence the results are bit-identical to strict mode's.
 *
 * What keeps that true, checked when a call joins a chain:
 *   - every tensor is dense (row-major) with the chain's element count and the same shape up to
 *     size-1 dims (so element i is element i everywhere), or a 0-dim operand;
 *   - memory written by the chain is touched by later calls only as that very tensor (same
 *     address, same element size): tiles reorder work across elements, so an op reading or
 *     writing a shifted view of an earlier output (or an earlier input) would see the wrong
 *     elements. Partial overlaps end the chain instead;
 *   - tiles are multiples of the elementwise engine's chunk (ew.c's CHUNK, 1024 elements), so
 *     every chunk function sees the elements strict mode gives it, and no tile is one element
 *     long (mul's reduced-float rule treats a one-element operand as a scalar).
 *
 * Foreach calls (an optimizer's _foreach_mul_, _foreach_lerp_, ...: lists of tensors, the output
 * list last) chain with each other: lane i is tensor i of every list, and each lane runs in tiles
 * through every call in order. That reorders work across lanes as tiles reorder it across
 * elements, so the rule holds per lane: memory the chain touches is shared only as the very
 * tensor of the same lane (a 0-dim operand, the same for every lane, is only read). An AdamW
 * chain touches hundreds of tensors, so it is checked on sorted disjoint regions. */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

/* Calls per chain: enough for an activation/normalisation chain or an optimizer's per-parameter
 * update; a longer run of elementwise ops becomes consecutive chains. */
#define CHAIN_MAX_OPS 16
/* A call's slot: the call and room for short lists (a rounding_mode string); foreach calls'
 * lists of tensors grow it. */
#define CHAIN_SLOT (sizeof(tpurt_op_call) + 256)
/* Tensors the overlap rule remembers per chain (an elementwise call has a handful). */
#define CHAIN_MAX_RANGES 128
/* Elements per tile, a multiple of ew.c's CHUNK. 32K: a tile of an f32 binary op touches 384 KiB,
 * so a chain's live tiles stay in a core's L2 (1 MiB on the bench host). Measured with
 * bench/bench_fused.py on the 2-core host, memory-bound chain: 16K 1.64x, 32K 1.70x, 64K 1.71x
 * over strict, within the noise of each other. */
#define TILE_ELEMENTS (32 * 1024)
/* Chains kept for reuse (a chain is ~160 KiB with its slots): one per command in flight is
 * typical, a few for streams running ahead. */
#define FREE_MAX 8

typedef struct range {
  uintptr_t lo, hi;
  size_t es;
  int lane; /* foreach chains: the list index; -1: a 0-dim operand of every lane */
} range;

struct tpurt_chain {
  int n, device;
  int64_t numel; /* elements of a plain chain; of all lanes of a foreach chain */
  int nwritten, ntouched;
  range written[CHAIN_MAX_RANGES]; /* plain chains: outputs of the chain's calls */
  range touched[CHAIN_MAX_RANGES]; /* plain chains: every tensor of the chain's calls */
  tpurt_op_call* calls[CHAIN_MAX_OPS]; /* slot_size[k] bytes each, kept with the chain */
  size_t slot_size[CHAIN_MAX_OPS];
  /* foreach chains (nlanes > 0): each lane's element count and first tile (lane_tile[nlanes]
   * = all tiles), and the tensors touched as sorted disjoint regions */
  int nlanes, lane_cap;
  int64_t *lane_numel, *lane_tile;
  range* regions;
  int nregions, region_cap;
  /* The run's first failure in chain order (as strict mode would report the earliest kernel). */
  pthread_mutex_t fail_mu;
  int failed_op;
  tpurt_status failed_status;
  char failed_msg[1024];
  char what[64]; /* the failing call's kernel, for the stream's error message */
  struct tpurt_chain* next_free;
};

static struct {
  pthread_mutex_t mu;
  tpurt_chain* list;
  int n;
} free_chains = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};

/* A forked child has only the forking thread: a lock some other thread held stays held. */
static void chains_after_fork_child(void) { pthread_mutex_init(&free_chains.mu, NULL); }
static void register_fork_handler(void) { pthread_atfork(NULL, NULL, chains_after_fork_child); }
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static tpurt_chain* take_chain(void) {
  pthread_once(&fork_once, register_fork_handler);
  pthread_mutex_lock(&free_chains.mu);
  tpurt_chain* ch = free_chains.list;
  if (ch) free_chains.list = ch->next_free, free_chains.n--;
  pthread_mutex_unlock(&free_chains.mu);
  if (!ch && (ch = calloc(1, sizeof *ch))) pthread_mutex_init(&ch->fail_mu, NULL);
  return ch;
}

void tpurt_chain_release(void* p) {
  tpurt_chain* ch = p;
  ch->n = ch->nwritten = ch->ntouched = ch->nlanes = ch->nregions = 0;
  pthread_mutex_lock(&free_chains.mu);
  int keep = free_chains.n < FREE_MAX;
  if (keep) ch->next_free = free_chains.list, free_chains.list = ch, free_chains.n++;
  pthread_mutex_unlock(&free_chains.mu);
  if (keep) return;
  for (int i = 0; i < CHAIN_MAX_OPS; i++) free(ch->calls[i]);
  free(ch->lane_numel);
  free(ch->lane_tile);
  free(ch->regions);
  pthread_mutex_destroy(&ch->fail_mu);
  free(ch);
}

/* "fused chain: add, mul, relu" (cut at 63 characters), the name a trace shows; a failure
 * overwrites it with the failing kernel's. */
const char* tpurt_chain_what(tpurt_chain* ch) {
  int at = snprintf(ch->what, sizeof ch->what, "fused chain:");
  for (int k = 0; k < ch->n && at < (int)sizeof ch->what; k++)
    at += snprintf(ch->what + at, sizeof ch->what - at, "%s %s", k ? "," : "", tpurt_op_kernel_name(ch->calls[k]->op));
  return ch->what;
}

/* ---------------------------------------------------------------- joining a chain */
static int is_dense(const tpurt_tensor* t) { return t->data && tpurt_is_contiguous(t); }

/* Same sizes once size-1 dims are dropped: dense tensors of one element count then number
 * their elements alike. */
static int same_shape(const tpurt_tensor* a, const tpurt_tensor* b) {
  int i = 0, j = 0;
  for (;;) {
    while (i < a->ndim && a->sizes[i] == 1) i++;
    while (j < b->ndim && b->sizes[j] == 1) j++;
    if (i == a->ndim || j == b->ndim) return i == a->ndim && j == b->ndim;
    if (a->sizes[i++] != b->sizes[j++]) return 0;
  }
}

/* The bytes a chainable tensor spans: all its elements (dense) or its one (0-dim). */
static range range_of(const tpurt_tensor* t) {
  size_t es = tpurt_dtype_size((tpurt_dtype)t->dtype);
  uintptr_t lo = (uintptr_t)t->data;
  return (range){lo, lo + (uintptr_t)tpurt_numel(t) * es, es, 0};
}
static int overlap(range a, range b) { return a.lo < b.hi && b.lo < a.hi; }
/* Shared memory that tiles handle: the same tensor, element for element. */
static int harmless(range a, range b) { return !overlap(a, b) || (a.lo == b.lo && a.hi == b.hi && a.es == b.es); }

/* The call's tensors (arguments, then outputs) as ranges; returns how many, or -1 when there
 * are more than fit. */
static int call_ranges(const tpurt_op_call* c, range* r, int cap, int* nin) {
  int n = 0;
  for (int a = 0; a < c->nargs; a++)
    if (c->args[a].kind == TPURT_V_TENSOR) {
      if (n == cap) return -1;
      r[n++] = range_of(&c->args[a].t);
    }
  *nin = n;
  for (int o = 0; o < c->nouts; o++) {
    if (n == cap) return -1;
    r[n++] = range_of(&c->outs[o]);
  }
  return n;
}

static range* foreach_regions(const tpurt_op_call* c, int* count);

/* A foreach call: no outputs of its own, the output list as its last argument. */
static int is_foreach(const tpurt_op_call* c) {
  return c->nouts == 0 && c->nargs > 0 && c->args[c->nargs - 1].kind == TPURT_V_TENSORS;
}

/* Tensor i of every list of a foreach call dense with the output's element count and shape;
 * scalar lists as long as the lists; other tensors 0-dim. Returns all lanes' elements or -1. */
static int64_t foreach_numel(const tpurt_op_call* c) {
  const tpurt_value* outs = &c->args[c->nargs - 1];
  int64_t total = 0;
  if (c->scratch || outs->n < 1) return -1;
  for (int a = 0; a < c->nargs; a++) {
    const tpurt_value* v = &c->args[a];
    if ((v->kind == TPURT_V_TENSORS || v->kind == TPURT_V_FLOATS || v->kind == TPURT_V_INTS) && v->n != outs->n)
      return -1;
    if (v->kind == TPURT_V_TENSOR && (v->t.ndim != 0 || !v->t.data)) return -1;
    if (v->kind != TPURT_V_TENSORS) continue;
    for (int i = 0; i < v->n; i++) {
      const tpurt_tensor *t = &v->tensors[i], *o = &outs->tensors[i];
      if (t->ndim < 0 || !is_dense(t) || tpurt_numel(t) < 1 || tpurt_numel(t) != tpurt_numel(o) || !same_shape(t, o))
        return -1;
    }
  }
  for (int i = 0; i < outs->n; i++) total += tpurt_numel(&outs->tensors[i]);
  int n;
  range* r = foreach_regions(c, &n); /* its lanes share no memory but as the very same tensor */
  if (!r) return -1;
  free(r);
  return total;
}

int64_t tpurt_chain_numel(const tpurt_op_call* c) {
  if (is_foreach(c)) return foreach_numel(c);
  if (c->nouts < 1 || c->scratch) return -1;
  const tpurt_tensor* o0 = &c->outs[0];
  int64_t n = tpurt_numel(o0);
  if (n < 1) return -1;
  for (int o = 0; o < c->nouts; o++) {
    const tpurt_tensor* t = &c->outs[o];
    if (!is_dense(t) || tpurt_numel(t) != n || !same_shape(t, o0)) return -1;
  }
  for (int a = 0; a < c->nargs; a++) {
    const tpurt_value* v = &c->args[a];
    if (v->kind == TPURT_V_TENSORS) return -1;
    if (v->kind != TPURT_V_TENSOR) continue;
    const tpurt_tensor* t = &v->t;
    if (t->ndim == 0 ? !t->data : !is_dense(t) || tpurt_numel(t) != n || !same_shape(t, o0)) return -1;
  }
  /* Within the call: an output may be an input (in place) but not part of one, nor share
   * memory with another output. */
  range r[TPURT_MAX_ARGS + TPURT_MAX_OUTS];
  int nin, nr = call_ranges(c, r, TPURT_MAX_ARGS + TPURT_MAX_OUTS, &nin);
  for (int o = nin; o < nr; o++)
    for (int k = 0; k < nr; k++)
      if (k != o && (k < nin ? !harmless(r[o], r[k]) : overlap(r[o], r[k]))) return -1;
  return n;
}

/* Whether c's tensors meet the chain's only as the very tensors it already has (see the top). */
static int fits(const tpurt_chain* ch, const range* r, int nin, int nr) {
  for (int k = 0; k < nr; k++)
    for (int w = 0; w < ch->nwritten; w++)
      if (!harmless(r[k], ch->written[w])) return 0;
  for (int o = nin; o < nr; o++)
    for (int t = 0; t < ch->ntouched; t++)
      if (!harmless(r[o], ch->touched[t])) return 0;
  return 1;
}

/* ---------------------------------------------------------------- foreach lanes */
static int region_order(const void* pa, const void* pb) {
  const range *a = pa, *b = pb;
  if (a->lo != b->lo) return a->lo < b->lo ? -1 : 1;
  if (a->hi != b->hi) return a->hi < b->hi ? -1 : 1;
  if (a->es != b->es) return a->es < b->es ? -1 : 1;
  return a->lane - b->lane;
}
static int same_region(range a, range b) { return a.lo == b.lo && a.hi == b.hi && a.es == b.es && a.lane == b.lane; }

/* The call's tensors with their lanes, sorted, duplicates merged; NULL when two of them share
 * memory otherwise (tpurt_chain_numel refuses such a call), or out of memory. */
static range* foreach_regions(const tpurt_op_call* c, int* count) {
  int n = 0, cap = 0;
  for (int a = 0; a < c->nargs; a++) cap += c->args[a].kind == TPURT_V_TENSORS ? c->args[a].n : c->args[a].kind == TPURT_V_TENSOR;
  range* r = malloc(sizeof *r * (size_t)(cap ? cap : 1));
  if (!r) return NULL;
  for (int a = 0; a < c->nargs; a++) {
    const tpurt_value* v = &c->args[a];
    if (v->kind == TPURT_V_TENSOR) r[n] = range_of(&v->t), r[n++].lane = -1;
    else if (v->kind == TPURT_V_TENSORS)
      for (int i = 0; i < v->n; i++) r[n] = range_of(&v->tensors[i]), r[n++].lane = i;
  }
  qsort(r, (size_t)n, sizeof *r, region_order);
  int m = 0;
  for (int k = 0; k < n; k++) {
    if (m && same_region(r[m - 1], r[k])) continue;
    if (m && overlap(r[m - 1], r[k])) { /* after sorting, any overlap shows between neighbours */
      free(r);
      return NULL;
    }
    r[m++] = r[k];
  }
  *count = m;
  return r;
}

/* Whether the call's regions meet the chain's only as the very same regions. */
static int foreach_fits(const tpurt_chain* ch, const range* r, int n) {
  for (int k = 0; k < n; k++) {
    int lo = 0, hi = ch->nregions; /* the first region ending after r[k] starts */
    while (lo < hi) {
      int mid = (lo + hi) / 2;
      if (ch->regions[mid].hi <= r[k].lo) lo = mid + 1;
      else hi = mid;
    }
    if (lo < ch->nregions && overlap(ch->regions[lo], r[k]) && !same_region(ch->regions[lo], r[k])) return 0;
  }
  return 1;
}

/* The chain's regions with r[0..n) merged in, still sorted. */
static int foreach_merge(tpurt_chain* ch, const range* r, int n) {
  if (ch->nregions + n > ch->region_cap) {
    int cap = 2 * (ch->nregions + n);
    range* g = realloc(ch->regions, sizeof *g * (size_t)cap);
    if (!g) return 0;
    ch->regions = g, ch->region_cap = cap;
  }
  int i = ch->nregions - 1, j = n - 1, out = ch->nregions + n - 1;
  while (j >= 0) { /* from the back, in place */
    if (i >= 0 && same_region(ch->regions[i], r[j])) j--;
    else if (i >= 0 && region_order(&ch->regions[i], &r[j]) > 0) ch->regions[out--] = ch->regions[i--];
    else ch->regions[out--] = r[j--];
  }
  /* duplicates left a gap at the front */
  int gap = out + 1 - (i + 1);
  if (gap) memmove(ch->regions + i + 1, ch->regions + out + 1, sizeof *r * (size_t)(ch->nregions + n - out - 1));
  ch->nregions += n - gap;
  return 1;
}

static int same_lanes(const tpurt_chain* ch, const tpurt_value* outs) {
  if (ch->nlanes != outs->n) return 0;
  for (int i = 0; i < outs->n; i++)
    if (ch->lane_numel[i] != tpurt_numel(&outs->tensors[i])) return 0;
  return 1;
}

static int64_t tile_count(int64_t numel);

static int set_lanes(tpurt_chain* ch, const tpurt_value* outs) {
  if (outs->n > ch->lane_cap) {
    int64_t* a = realloc(ch->lane_numel, sizeof *a * (size_t)outs->n);
    if (a) ch->lane_numel = a;
    int64_t* b = realloc(ch->lane_tile, sizeof *b * (size_t)(outs->n + 1));
    if (b) ch->lane_tile = b;
    if (!a || !b) return 0;
    ch->lane_cap = outs->n;
  }
  ch->nlanes = outs->n;
  ch->lane_tile[0] = 0;
  for (int i = 0; i < outs->n; i++) {
    ch->lane_numel[i] = tpurt_numel(&outs->tensors[i]);
    ch->lane_tile[i + 1] = ch->lane_tile[i] + tile_count(ch->lane_numel[i]);
  }
  return 1;
}

/* ---------------------------------------------------------------- appending */
/* Room in slot k for a copy of c. */
static int slot_for(tpurt_chain* ch, int k, const tpurt_op_call* c) {
  size_t need = sizeof(tpurt_op_call) + tpurt_call_lists_size(c);
  if (need < CHAIN_SLOT) need = CHAIN_SLOT;
  if (ch->slot_size[k] >= need) return 1;
  void* p = realloc(ch->calls[k], need);
  if (!p) return 0;
  ch->calls[k] = p, ch->slot_size[k] = need;
  return 1;
}

int tpurt_chain_append(tpurt_chain** pch, const tpurt_op_call* c, int64_t numel) {
  tpurt_chain* ch = *pch;
  int fe = is_foreach(c);
  range r[TPURT_MAX_ARGS + TPURT_MAX_OUTS];
  range* fr = NULL;
  int nin = 0, nr = 0;
  if (fe) {
    if (!(fr = foreach_regions(c, &nr))) return ch ? 0 : -1;
  } else {
    nr = call_ranges(c, r, TPURT_MAX_ARGS + TPURT_MAX_OUTS, &nin);
  }
  const tpurt_value* outs = fe ? &c->args[c->nargs - 1] : NULL;
  if (ch && (ch->n == CHAIN_MAX_OPS || numel != ch->numel || c->device != ch->device || fe != (ch->nlanes > 0) ||
             (fe ? !same_lanes(ch, outs) || !foreach_fits(ch, fr, nr)
                 : ch->ntouched + nr > CHAIN_MAX_RANGES || !fits(ch, r, nin, nr)))) {
    free(fr);
    return 0;
  }
  int fresh = !ch;
  if (fresh && !(ch = take_chain())) {
    free(fr);
    return -1;
  }
  if (!slot_for(ch, ch->n, c) || (fresh && fe && !set_lanes(ch, outs)) || (fe && !foreach_merge(ch, fr, nr))) {
    free(fr);
    if (fresh) tpurt_chain_release(ch);
    return fresh ? -1 : 0;
  }
  free(fr);
  if (fresh) ch->numel = numel, ch->device = c->device;
  tpurt_call_copy(ch->calls[ch->n++], c);
  for (int k = 0; k < (fe ? 0 : nr); k++) {
    ch->touched[ch->ntouched++] = r[k];
    if (k >= nin) ch->written[ch->nwritten++] = r[k];
  }
  *pch = ch;
  return 1;
}

/* ---------------------------------------------------------------- running a chain */
/* Tile t of ntiles: start and length. A remainder of one element joins the last full tile. */
static int64_t tile_count(int64_t numel) {
  return numel <= TILE_ELEMENTS ? 1 : numel / TILE_ELEMENTS + (numel % TILE_ELEMENTS > 1);
}

typedef struct tile_job {
  tpurt_chain* ch;
  int64_t ntiles;
} tile_job;

static void slice(tpurt_tensor* t, int64_t start, int64_t len) {
  if (t->ndim == 0) return; /* a 0-dim operand: the same value for every element */
  t->data = (char*)t->data + start * (int64_t)tpurt_dtype_size((tpurt_dtype)t->dtype);
  t->ndim = 1;
  t->sizes[0] = len;
  t->strides[0] = 1;
}

static void record_failure(tpurt_chain* ch, int k, tpurt_status s) {
  pthread_mutex_lock(&ch->fail_mu);
  if (k < ch->failed_op) {
    ch->failed_op = k;
    ch->failed_status = s;
    snprintf(ch->failed_msg, sizeof ch->failed_msg, "%s", tpurt_last_error());
  }
  pthread_mutex_unlock(&ch->fail_mu);
}

/* Tiles [b, e), each through every call in order. A failing call does not stop the later ones,
 * as a failing kernel does not stop the stream. */
static void run_tiles(void* p, int64_t b, int64_t e) {
  const tile_job* job = p;
  tpurt_chain* ch = job->ch;
  tpurt_op_call call; /* the tile's view of one call; lists stay the chain's */
  for (int64_t t = b; t < e; t++) {
    int64_t start = t * TILE_ELEMENTS, len = t == job->ntiles - 1 ? ch->numel - start : TILE_ELEMENTS;
    for (int k = 0; k < ch->n; k++) {
      tpurt_call_copy_fixed(&call, ch->calls[k]);
      if (job->ntiles > 1) {
        for (int a = 0; a < call.nargs; a++)
          if (call.args[a].kind == TPURT_V_TENSOR) slice(&call.args[a].t, start, len);
        for (int o = 0; o < call.nouts; o++) slice(&call.outs[o], start, len);
      }
      tpurt_status s = tpurt_op_execute(&call);
      if (s) record_failure(ch, k, s);
    }
  }
}

/* Foreach chains: work unit u is a tile of one lane; each call runs on that lane alone (its
 * lists cut to the lane's element, sliced to the tile). */
static void run_lane_tiles(void* p, int64_t b, int64_t e) {
  const tile_job* job = p;
  tpurt_chain* ch = job->ch;
  tpurt_op_call call;
  tpurt_tensor lane_t[TPURT_MAX_ARGS];
  for (int64_t u = b; u < e; u++) {
    int lo = 0, hi = ch->nlanes - 1; /* the lane whose tiles hold u */
    while (lo < hi) {
      int mid = (lo + hi + 1) / 2;
      if (ch->lane_tile[mid] <= u) lo = mid;
      else hi = mid - 1;
    }
    int lane = lo;
    int64_t ntiles = ch->lane_tile[lane + 1] - ch->lane_tile[lane], t = u - ch->lane_tile[lane];
    int64_t start = t * TILE_ELEMENTS, len = t == ntiles - 1 ? ch->lane_numel[lane] - start : TILE_ELEMENTS;
    for (int k = 0; k < ch->n; k++) {
      tpurt_call_copy_fixed(&call, ch->calls[k]);
      for (int a = 0; a < call.nargs; a++) {
        tpurt_value* v = &call.args[a];
        if (v->kind == TPURT_V_TENSORS) {
          lane_t[a] = v->tensors[lane];
          if (ntiles > 1) slice(&lane_t[a], start, len);
          v->tensors = &lane_t[a];
        } else if (v->kind == TPURT_V_FLOATS) {
          v->floats += lane;
        } else if (v->kind == TPURT_V_INTS) {
          v->ints += lane;
        } else {
          continue;
        }
        v->n = 1;
      }
      tpurt_status s = tpurt_op_execute(&call);
      if (s) record_failure(ch, k, s);
    }
  }
}

tpurt_status tpurt_chain_run(void* p) {
  tpurt_chain* ch = p;
  if (ch->n == 1) { /* nothing to fuse: the call as strict mode runs it */
    tpurt_status s = tpurt_op_run(ch->calls[0]);
    if (s) snprintf(ch->what, sizeof ch->what, "%s", tpurt_op_kernel_name(ch->calls[0]->op));
    return s;
  }
  for (int k = 0; k < ch->n; k++) tpurt_op_count_run(ch->calls[k]);
  tpurt_metrics_count_fused(ch->n);
  ch->failed_op = INT_MAX;
  tile_job job = {ch, ch->nlanes ? ch->lane_tile[ch->nlanes] : tile_count(ch->numel)};
  /* one tile per claim: a tile is already tens of microseconds of work. A kernel's own
   * parallel loop inside a tile runs inline (the pool runs nested loops on the calling thread) */
  tpurt_parallel_for(job.ntiles, 1, ch->nlanes ? run_lane_tiles : run_tiles, &job);
  if (ch->failed_op == INT_MAX) return TPURT_OK;
  int k = ch->failed_op;
  snprintf(ch->what, sizeof ch->what, "%s", tpurt_op_kernel_name(ch->calls[k]->op));
  return tpurt_fail(ch->failed_status, "%s (call %d of a fused chain of %d)", ch->failed_msg, k + 1, ch->n);
}
