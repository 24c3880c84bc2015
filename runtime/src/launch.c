/* The op table and the launch path: look an ATen overload up, then run its kernel now
 * (debug mode), on the stream's worker (strict mode), or defer it into the stream's fused chain
 * (fused mode, fuse.c). Also the host<->device copies, the eager mode and matmul precision
 * switches, and the metrics counters. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

/* Every kernel; its descriptor links and plan hook where it has them (weak: NULL otherwise). */
#define OP(kernel, kind, flags, names)                                              \
  tpurt_status tpurt_kernel_##kernel(const tpurt_op_call* call);                    \
  extern const struct ew_op* const tpurt_ew_desc_##kernel __attribute__((weak));    \
  extern const struct red_link tpurt_red_desc_##kernel __attribute__((weak));       \
  tpurt_status tpurt_plan_##kernel(const tpurt_op_call* call, tpurt_plan* plan) __attribute__((weak));
#include "ops.def"
#undef OP

/* The kind column of the table: K_EW(operands), K_RED(identity), K_MATMUL(arg, arg), ... */
typedef struct op_kind {
  int kind, arity, identity, contract[2];
} op_kind;
#define K_OTHER {TPURT_KIND_OTHER, -1, TPURT_IDENTITY_NONE, {-1, -1}}
#define K_EW(n) {TPURT_KIND_ELEMENTWISE, n, TPURT_IDENTITY_NONE, {-1, -1}}
#define K_RED(id) {TPURT_KIND_REDUCTION, -1, TPURT_IDENTITY_##id, {-1, -1}}
#define K_SCAN {TPURT_KIND_SCAN, -1, TPURT_IDENTITY_NONE, {-1, -1}}
#define K_MATMUL(a, b) {TPURT_KIND_MATMUL, -1, TPURT_IDENTITY_NONE, {a, b}}
#define K_MOVE {TPURT_KIND_MOVEMENT, -1, TPURT_IDENTITY_NONE, {-1, -1}}
#define K_DATA {TPURT_KIND_DATA_SIZED, -1, TPURT_IDENTITY_NONE, {-1, -1}}
#define K_RANDOM {TPURT_KIND_RANDOM, -1, TPURT_IDENTITY_NONE, {-1, -1}}

/* The value kinds each argument may take (args.gen.h's TPURT_KINDS_<kernel>): validate.c. */
typedef struct arg_kinds {
  int count;
  uint16_t mask[TPURT_MAX_ARGS];
} arg_kinds;

typedef struct op_entry {
  const char* kernel;
  tpurt_kernel_fn fn;
  int flags;
  const char* names; /* space separated ATen overload names */
  op_kind kind;
  const struct ew_op* const* ew;
  const struct red_link* red;
  tpurt_status (*plan)(const tpurt_op_call* call, tpurt_plan* plan);
  arg_kinds kinds;
} op_entry;

static const op_entry ops[] = {
#define OP(kernel, kind, flags, names) \
  {#kernel, tpurt_kernel_##kernel, flags, names, kind, &tpurt_ew_desc_##kernel, &tpurt_red_desc_##kernel, tpurt_plan_##kernel, \
   TPURT_KINDS_##kernel},
#include "ops.def"
#undef OP
};
enum { OP_COUNT = sizeof ops / sizeof ops[0] };

#define MAX_NAMES 2048
static struct {
  char* names[MAX_NAMES];
  int op_of[MAX_NAMES];
  int count;
} name_table;
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static void build_names(void) {
  for (int op = 0; op < OP_COUNT; op++) {
    const char* p = ops[op].names;
    while (*p) {
      while (*p == ' ') p++;
      size_t n = strcspn(p, " ");
      if (n && name_table.count < MAX_NAMES) {
        char* s = malloc(n + 1);
        memcpy(s, p, n);
        s[n] = 0;
        name_table.op_of[name_table.count] = op;
        name_table.names[name_table.count++] = s;
      }
      p += n;
    }
  }
}

int tpurt_op_count(void) { return OP_COUNT; }

int tpurt_op_name_count(void) {
  pthread_once(&names_once, build_names);
  return name_table.count;
}

const char* tpurt_op_name(int i) {
  pthread_once(&names_once, build_names);
  return i >= 0 && i < name_table.count ? name_table.names[i] : NULL;
}

int tpurt_op_lookup(const char* name) {
  pthread_once(&names_once, build_names);
  for (int i = 0; i < name_table.count; i++)
    if (strcmp(name_table.names[i], name) == 0) return name_table.op_of[i];
  return -1;
}

const char* tpurt_op_kernel_name(int op) { return op >= 0 && op < OP_COUNT ? ops[op].kernel : "?"; }
int tpurt_op_flags(int op) { return op >= 0 && op < OP_COUNT ? ops[op].flags : 0; }

const struct ew_op* tpurt_op_ew_desc(int op) { return op >= 0 && op < OP_COUNT && ops[op].ew ? *ops[op].ew : NULL; }
const struct red_link* tpurt_op_red_desc(int op) { return op >= 0 && op < OP_COUNT ? ops[op].red : NULL; }
int tpurt_op_arg_kinds(int op, const uint16_t** masks) {
  *masks = ops[op].kinds.mask;
  return ops[op].kinds.count;
}
tpurt_plan_fn tpurt_op_plan_hook(int op) { return op >= 0 && op < OP_COUNT ? ops[op].plan : NULL; }

tpurt_status tpurt_op_get_info(int op, tpurt_op_info* out) {
  if (op < 0 || op >= OP_COUNT) return tpurt_fail(TPURT_ERR_VALUE, "unknown op id %d", op);
  const op_entry* e = &ops[op];
  tpurt_op_info i = {sizeof i, e->kernel, e->flags, e->kind.kind, e->kind.arity, e->kind.identity,
                     {e->kind.contract[0], e->kind.contract[1]}, tpurt_op_ew_desc(op) || e->red};
  size_t n = out->struct_size && out->struct_size < sizeof i ? out->struct_size : sizeof i;
  memcpy(out, &i, n);
  out->struct_size = n;
  return TPURT_OK;
}

static const char* const kind_names[] = {
#define TPURT_X(e, name) name,
    TPURT_OP_KIND_LIST(TPURT_X)
#undef TPURT_X
};
static const char* const identity_names[] = {
#define TPURT_X(e, name) name,
    TPURT_IDENTITY_LIST(TPURT_X)
#undef TPURT_X
};
const char* tpurt_op_kind_name(int k) { return k >= 0 && k < TPURT_KIND_COUNT ? kind_names[k] : "?"; }
const char* tpurt_identity_name(int i) {
  return i >= 0 && i < (int)(sizeof identity_names / sizeof *identity_names) ? identity_names[i] : "?";
}

/* ---------------------------------------------------------------- modes */
static int eager_mode = TPURT_MODE_STRICT;
static int matmul_precision = TPURT_PRECISION_DEFAULT;

/* Chains deferred under the old mode are enqueued now: a program switching modes expects the
 * work it issued before to be on its way (stream.c enqueues them before anything observes a
 * stream anyway, whatever the mode). */
void tpurt_set_eager_mode(tpurt_eager_mode m) {
  __atomic_store_n(&eager_mode, (int)m, __ATOMIC_RELAXED);
  tpurt_streams_flush_all();
}
tpurt_eager_mode tpurt_get_eager_mode(void) {
  tpurt_init();
  return (tpurt_eager_mode)__atomic_load_n(&eager_mode, __ATOMIC_RELAXED);
}
void tpurt_set_matmul_precision(tpurt_precision p) { __atomic_store_n(&matmul_precision, (int)p, __ATOMIC_RELAXED); }
tpurt_precision tpurt_get_matmul_precision(void) {
  return (tpurt_precision)__atomic_load_n(&matmul_precision, __ATOMIC_RELAXED);
}

/* ---------------------------------------------------------------- metrics */
static struct {
  tpurt_metrics m;
  int64_t per_op[OP_COUNT];
  int64_t unplanned_per_op[OP_COUNT];
} metrics;

static void add(int64_t* c, int64_t v) { __atomic_fetch_add(c, v, __ATOMIC_RELAXED); }

void tpurt_metrics_count_op(int op, int f64) {
  add(&metrics.m.ops_executed, 1);
  if (f64) add(&metrics.m.ops_f64, 1);
  if (op >= 0 && op < OP_COUNT) add(&metrics.per_op[op], 1);
}
void tpurt_metrics_count_copy(int kind, int64_t bytes) {
  int64_t* c[3][2] = {{&metrics.m.h2d_count, &metrics.m.h2d_bytes},
                      {&metrics.m.d2h_count, &metrics.m.d2h_bytes},
                      {&metrics.m.d2d_count, &metrics.m.d2d_bytes}};
  add(c[kind][0], 1);
  add(c[kind][1], bytes);
}
void tpurt_metrics_count_alloc(void) { add(&metrics.m.alloc_count, 1); }
void tpurt_metrics_count_kernel_error(void) { add(&metrics.m.kernel_errors, 1); }
void tpurt_metrics_count_fused(int ops) {
  add(&metrics.m.fused_chains, 1);
  add(&metrics.m.fused_ops, ops);
}

void tpurt_metrics_count_unplanned_temp(int op, int64_t bytes) {
  add(&metrics.m.unplanned_temp_bytes, bytes);
  if (op >= 0 && op < OP_COUNT) add(&metrics.unplanned_per_op[op], bytes);
}

void tpurt_metrics_get(tpurt_metrics* out) {
  tpurt_metrics m;
  for (size_t i = 0; i < sizeof m / sizeof(int64_t); i++)
    ((int64_t*)&m)[i] = __atomic_load_n(&((int64_t*)&metrics.m)[i], __ATOMIC_RELAXED);
  m.struct_size = sizeof m;
  size_t n = out->struct_size && out->struct_size < sizeof m ? out->struct_size : sizeof m;
  memcpy(out, &m, n);
  out->struct_size = n;
}
int64_t tpurt_metrics_op_count(int op) {
  return op >= 0 && op < OP_COUNT ? __atomic_load_n(&metrics.per_op[op], __ATOMIC_RELAXED) : 0;
}
int64_t tpurt_metrics_op_unplanned_bytes(int op) {
  return op >= 0 && op < OP_COUNT ? __atomic_load_n(&metrics.unplanned_per_op[op], __ATOMIC_RELAXED) : 0;
}
void tpurt_metrics_reset(void) {
  memset(&metrics, 0, sizeof metrics);
  tpurt_comm_reset_stats();
}

/* ---------------------------------------------------------------- running an op */
static void extent(const tpurt_tensor* t, uintptr_t* lo, uintptr_t* hi) {
  intptr_t a = 0, b = 0;
  for (int d = 0; d < t->ndim; d++) {
    if (t->sizes[d] == 0) { *lo = 1; *hi = 0; return; }
    intptr_t span = (intptr_t)(t->sizes[d] - 1) * t->strides[d];
    if (span < 0) a += span; else b += span;
  }
  size_t es = tpurt_dtype_size((tpurt_dtype)t->dtype);
  *lo = (uintptr_t)t->data + a * (intptr_t)es;
  *hi = (uintptr_t)t->data + b * (intptr_t)es + es;
}

static int same_view(const tpurt_tensor* a, const tpurt_tensor* b) {
  if (a->data != b->data || a->ndim != b->ndim || a->dtype != b->dtype) return 0;
  for (int d = 0; d < a->ndim; d++)
    if (a->sizes[d] != b->sizes[d] || (a->sizes[d] > 1 && a->strides[d] != b->strides[d])) return 0;
  return 1;
}

static int overlaps(const tpurt_tensor* out, const tpurt_tensor* in, int alias_safe) {
  if (!in->data || !out->data) return 0;
  uintptr_t a0, a1, b0, b1;
  extent(out, &a0, &a1);
  extent(in, &b0, &b1);
  if (a0 >= a1 || b0 >= b1 || a1 <= b0 || b1 <= a0) return 0;
  return !(alias_safe && same_view(out, in));
}

static int needs_private_outputs(const tpurt_op_call* c) {
  int safe = ops[c->op].flags & TPURT_OPF_ALIAS_SAFE;
  if (ops[c->op].flags & TPURT_OPF_OUT_ARGS) return 0;
  for (int o = 0; o < c->nouts; o++)
    for (int a = 0; a < c->nargs; a++) {
      const tpurt_value* v = &c->args[a];
      if (v->kind == TPURT_V_TENSOR && overlaps(&c->outs[o], &v->t, safe)) return 1;
      if (v->kind == TPURT_V_TENSORS)
        for (int k = 0; k < v->n; k++)
          if (overlaps(&c->outs[o], &v->tensors[k], safe)) return 1;
    }
  return 0;
}

static int uses_f64(const tpurt_op_call* c) {
  for (int o = 0; o < c->nouts; o++)
    if (c->outs[o].dtype == TPURT_F64) return 1;
  for (int a = 0; a < c->nargs; a++) {
    const tpurt_value* v = &c->args[a];
    if (v->kind == TPURT_V_TENSOR && v->t.dtype == TPURT_F64) return 1;
    if (v->kind == TPURT_V_TENSORS)
      for (int k = 0; k < v->n; k++)
        if (v->tensors[k].dtype == TPURT_F64) return 1;
  }
  return 0;
}

int tpurt_needs_private_outputs(const tpurt_op_call* c) { return needs_private_outputs(c); }

/* An output shares memory with an input: compute into private temporaries, then copy. */
static tpurt_status run_private(const tpurt_op_call* c) {
  tpurt_op_call* tmp = tpurt_temp(sizeof *tmp);
  tpurt_status s = tmp ? TPURT_OK : TPURT_ERR_OOM;
  if (tmp) memcpy(tmp, c, sizeof *tmp);
  for (int o = 0; o < c->nouts && !s; o++) {
    tpurt_tensor* t = &tmp->outs[o];
    t->data = tpurt_temp((size_t)tpurt_numel(t) * tpurt_dtype_size((tpurt_dtype)t->dtype));
    if (!t->data) s = TPURT_ERR_OOM;
    *t = tpurt_dense_like(t, t->data, t->dtype);
  }
  if (!s) s = ops[c->op].fn(tmp);
  for (int o = 0; o < c->nouts && !s; o++) s = tpurt_copy_tensor(&c->outs[o], &tmp->outs[o]);
  return s;
}

void tpurt_op_count_run(const tpurt_op_call* c) {
  tpurt_metrics_count_op(c->op, uses_f64(c));
  if (tpurt_tracing()) tpurt_trace_note_call(c);
}

tpurt_status tpurt_op_run(const tpurt_op_call* c) {
  if (c->op < 0 || c->op >= OP_COUNT) return tpurt_fail(TPURT_ERR_VALUE, "unknown op id %d", c->op);
  tpurt_op_count_run(c);
  return tpurt_op_execute(c);
}

tpurt_status tpurt_op_execute(const tpurt_op_call* c) {
  tpurt_temp_ctx temps;
  tpurt_temp_begin(&temps, c);
  tpurt_status s = needs_private_outputs(c) ? run_private(c) : ops[c->op].fn(c);
  tpurt_temp_end(&temps);
  return s;
}

/* Bytes the lists of a call take when copied (each rounded up to 8). */
static size_t list_bytes(const tpurt_value* v) {
  switch (v->kind) {
    case TPURT_V_INTS: return sizeof(int64_t) * (size_t)v->n;
    case TPURT_V_FLOATS: return sizeof(double) * (size_t)v->n;
    case TPURT_V_TENSORS: return sizeof(tpurt_tensor) * (size_t)v->n;
    case TPURT_V_STRING: return (strlen(v->s) + 8) & ~(size_t)7;
    default: return 0;
  }
}

static size_t lists_size(const tpurt_op_call* c) {
  size_t n = 0;
  for (int a = 0; a < c->nargs; a++) n += list_bytes(&c->args[a]);
  return n;
}

/* Copy a call into dst (a tpurt_op_call followed by room for its lists): only the
 * arguments and outputs in use are copied (a call struct is ~9 KiB, a small op uses a
 * few hundred bytes of it); the unused ones read as NONE / no tensor, like the caller's
 * zeroed struct. Lists move into the storage after the struct. */
size_t tpurt_call_lists_size(const tpurt_op_call* c) { return lists_size(c); }

void tpurt_call_copy_fixed(tpurt_op_call* dst, const tpurt_op_call* c) {
  memcpy(dst, c, offsetof(tpurt_op_call, args));
  memcpy(dst->args, c->args, sizeof(tpurt_value) * (size_t)c->nargs);
  for (int a = c->nargs; a < TPURT_MAX_ARGS; a++) dst->args[a].kind = TPURT_V_NONE;
  memcpy(dst->outs, c->outs, sizeof(tpurt_tensor) * (size_t)c->nouts);
  for (int o = c->nouts; o < TPURT_MAX_OUTS; o++) {
    dst->outs[o].data = NULL;
    dst->outs[o].ndim = 0;
  }
}

void tpurt_call_copy(tpurt_op_call* dst, const tpurt_op_call* c) {
  tpurt_call_copy_fixed(dst, c);
  char* p = (char*)(dst + 1);
  for (int a = 0; a < c->nargs; a++) {
    tpurt_value* v = &dst->args[a];
    size_t n = list_bytes(v);
    if (!n) continue;
    memcpy(p, v->ints, v->kind == TPURT_V_STRING ? strlen(v->s) + 1 : n);
    v->ints = (const int64_t*)p;
    p += n;
  }
}

static void fill_call(void* payload, const void* src) { tpurt_call_copy(payload, src); }

/* Elements an op touches (tensor arguments and outputs), capped at `cap`. */
static int64_t touched_elements(const tpurt_op_call* c, int64_t cap) {
  int64_t n = 0;
  for (int o = 0; o < c->nouts && n < cap; o++) n += tpurt_numel(&c->outs[o]);
  for (int a = 0; a < c->nargs && n < cap; a++) {
    const tpurt_value* v = &c->args[a];
    if (v->kind == TPURT_V_TENSOR) n += tpurt_numel(&v->t);
    else if (v->kind == TPURT_V_TENSORS)
      for (int k = 0; k < v->n && n < cap; k++) n += v->tensors[k].ndim >= 0 ? tpurt_numel(&v->tensors[k]) : 0;
  }
  return n;
}

/* Ops touching at most this many elements run on the issuing thread when their stream is
 * idle (strict mode keeps its contract: order, and failures raised at the next
 * synchronization). A hand-off to the worker costs microseconds, more than such a kernel;
 * bigger ops go to the worker so the host runs ahead. */
#define INLINE_MAX_ELEMENTS 4096

static tpurt_status run_cloned(void* p) { return tpurt_op_run(p); }

int tpurt_op_runs_blocking(const tpurt_op_call* c) {
  int flags = ops[c->op].flags;
  int eager = (flags & TPURT_OPF_EAGER_ERRORS) ||
              ((flags & TPURT_OPF_EAGER_INT_ERRORS) && c->nouts > 0 && !tpurt_is_float(c->outs[0].dtype) &&
               !tpurt_is_complex(c->outs[0].dtype));
  return eager || tpurt_get_eager_mode() == TPURT_MODE_DEBUG;
}

tpurt_status tpurt_check_call(const tpurt_op_call* c, int need_data) {
  tpurt_status s = tpurt_init();
  if (s) return s;
  if (c->op < 0 || c->op >= OP_COUNT) return tpurt_fail(TPURT_ERR_VALUE, "unknown op id %d", c->op);
  return tpurt_check_descriptors(c, need_data);
}

/* A call launched without scratch gets its planned bytes here, on the issuing thread (see
 * tpurt_op_call.scratch): written into the caller's call for the launch, which copies it, and
 * taken back by scratch_done. The block is freed in stream order, so nothing reuses it before
 * the kernel ran. */
static tpurt_status scratch_attach(int32_t stream, const tpurt_op_call* c, void** block) {
  *block = NULL;
  if (c->scratch) return TPURT_OK;
  int64_t n = tpurt_op_scratch_bytes(c);
  if (n <= 0) return TPURT_OK;
  tpurt_status s = tpurt_malloc(c->device, (size_t)n, stream, block);
  if (s) return s;
  tpurt_op_call* w = (tpurt_op_call*)c; /* the caller's, handed over for the launch */
  w->scratch = *block, w->scratch_bytes = n;
  return TPURT_OK;
}

static tpurt_status scratch_done(const tpurt_op_call* c, void* block, tpurt_status s) {
  if (block) {
    tpurt_op_call* w = (tpurt_op_call*)c;
    w->scratch = NULL, w->scratch_bytes = 0;
    tpurt_free(block);
  }
  return s;
}

static tpurt_status launch_blocking(int32_t stream, const tpurt_op_call* c) {
  tpurt_status s = tpurt_stream_synchronize(stream);
  void* block;
  if (!s) s = scratch_attach(stream, c, &block);
  return s ? s : scratch_done(c, block, tpurt_run_inline(stream, run_cloned, (void*)c, ops[c->op].kernel));
}

tpurt_status tpurt_op_launch_blocking(int32_t stream, const tpurt_op_call* c) {
  tpurt_status s = tpurt_check_call(c, 1);
  return s ? s : launch_blocking(stream, c);
}

/* Fused mode: an elementwise call over dense tensors (foreach calls too: their outputs are
 * their OUT_ARGS) waits in the stream's chain (fuse.c). A small one does not: strict mode runs
 * it on the issuing thread when the stream is idle, which a chain cannot beat. Returns whether
 * the call was deferred. */
static int defer(int32_t stream, const tpurt_op_call* c) {
  const op_entry* e = &ops[c->op];
  if (e->kind.kind != TPURT_KIND_ELEMENTWISE || (e->flags & (TPURT_OPF_RANDOM | TPURT_OPF_DATA_SIZED)))
    return 0;
  if (touched_elements(c, INLINE_MAX_ELEMENTS + 1) <= INLINE_MAX_ELEMENTS) return 0;
  int64_t n = tpurt_chain_numel(c);
  return n > 0 && tpurt_stream_defer(stream, c, n);
}

static tpurt_status enqueue(int32_t stream, const tpurt_op_call* c) {
  if (touched_elements(c, INLINE_MAX_ELEMENTS + 1) <= INLINE_MAX_ELEMENTS &&
      tpurt_stream_run_if_idle(stream, run_cloned, (void*)c, ops[c->op].kernel))
    return TPURT_OK;
  size_t extra = lists_size(c);
  if (sizeof(tpurt_op_call) + extra <= TPURT_STREAM_PAYLOAD)
    return tpurt_stream_enqueue_inline(stream, run_cloned, fill_call, c, ops[c->op].kernel);
  /* long lists (foreach over many tensors): a heap copy */
  tpurt_op_call* copy = malloc(sizeof *copy + extra);
  if (!copy) return tpurt_fail(TPURT_ERR_OOM, "host out of memory queueing op %s", ops[c->op].kernel);
  tpurt_call_copy(copy, c);
  return tpurt_stream_enqueue(stream, run_cloned, copy, free, ops[c->op].kernel);
}

tpurt_status tpurt_op_launch(int32_t stream, const tpurt_op_call* c) {
  tpurt_status s = tpurt_check_call(c, 1);
  if (s) return s;
  if (tpurt_op_runs_blocking(c)) return launch_blocking(stream, c);
  /* anything not deferred takes strict mode's path, whose enqueue puts the chain first */
  if (__atomic_load_n(&eager_mode, __ATOMIC_RELAXED) == TPURT_MODE_FUSED && defer(stream, c)) return TPURT_OK;
  void* block;
  if ((s = scratch_attach(stream, c, &block))) return s;
  return scratch_done(c, block, enqueue(stream, c));
}

/* ---------------------------------------------------------------- data-sized outputs */
tpurt_status tpurt_stream_run_blocking(int32_t s, tpurt_status (*fn)(void*), void* arg, const char* what);

/* The sizing call belongs to tpurt_op_size_outputs' caller, who handed it over writable. */
void tpurt_declare_output(const tpurt_op_call* c, int o, int dtype, int ndim, const int64_t* sizes) {
  tpurt_tensor* t = &((tpurt_op_call*)c)->outs[o];
  memset(t, 0, sizeof *t);
  t->dtype = dtype;
  t->ndim = ndim;
  int64_t st = 1;
  for (int d = ndim - 1; d >= 0; d--) t->sizes[d] = sizes[d], t->strides[d] = st, st *= sizes[d] > 1 ? sizes[d] : 1;
}

/* Outputs left undeclared keep ndim -1; the declared ones are the leading run. */
static tpurt_status size_cmd(void* p) {
  tpurt_op_call* c = p;
  c->nouts = 0;
  for (int o = 0; o < TPURT_MAX_OUTS; o++) c->outs[o].ndim = -1, c->outs[o].data = NULL;
  tpurt_temp_ctx temps;
  tpurt_temp_begin(&temps, c);
  tpurt_status s = ops[c->op].fn(c);
  tpurt_temp_end(&temps);
  while (c->nouts < TPURT_MAX_OUTS && c->outs[c->nouts].ndim >= 0) c->nouts++;
  return s;
}

tpurt_status tpurt_op_size_outputs(int32_t stream, tpurt_op_call* c) {
  tpurt_status s = tpurt_init();
  if (s) return s;
  if (c->op < 0 || c->op >= OP_COUNT || !(ops[c->op].flags & TPURT_OPF_DATA_SIZED))
    return tpurt_fail(TPURT_ERR_VALUE, "op id %d does not size its outputs from data", c->op);
  /* The caller waits anyway: earlier failures raise as asynchronous ones, this kernel's own
   * (bad data) with its message, from the call. */
  s = tpurt_stream_synchronize(stream);
  void* block;
  if (!s) s = scratch_attach(stream, c, &block);
  return s ? s : scratch_done(c, block, tpurt_run_inline(stream, size_cmd, c, ops[c->op].kernel));
}

/* ---------------------------------------------------------------- host <-> device copies */

typedef struct { void* dst; const void* src; size_t n; } copy_arg;

static tpurt_status copy_cmd(void* p) {
  copy_arg* a = p;
  if (a->n) memcpy(a->dst, a->src, a->n);
  return TPURT_OK;
}

tpurt_status tpurt_memcpy_h2d(int32_t stream, void* dev, const void* host, size_t nbytes) {
  copy_arg a = {dev, host, nbytes};
  tpurt_metrics_count_copy(0, (int64_t)nbytes);
  return tpurt_stream_run_blocking(stream, copy_cmd, &a, "host-to-device copy");
}

tpurt_status tpurt_memcpy_d2h(int32_t stream, void* host, const void* dev, size_t nbytes) {
  copy_arg a = {host, dev, nbytes};
  tpurt_metrics_count_copy(1, (int64_t)nbytes);
  return tpurt_stream_run_blocking(stream, copy_cmd, &a, "device-to-host copy");
}
