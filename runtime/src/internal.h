/* Shared internals of the runtime: error helpers, the op table, dtype conversion and the
 * elementwise engine every kernel family builds on. Not part of the public API. */
#ifndef TPURT_INTERNAL_H
#define TPURT_INTERNAL_H

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "tpurt.h"
#include "args.gen.h"

/* ---------------------------------------------------------------- errors */
/* Set the thread's error message and return `code` (printf-style). */
tpurt_status tpurt_fail(tpurt_status code, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* "[2, 3]" for a tensor's sizes, in a rotating thread-local buffer (valid for a few calls). */
const char* tpurt_shape_str(const tpurt_tensor* t);

/* ---------------------------------------------------------------- op table */
typedef tpurt_status (*tpurt_kernel_fn)(const tpurt_op_call* call);
/* A TPURT_OPF_DATA_SIZED kernel is also called by tpurt_op_size_outputs with nouts == 0:
 * it then validates its inputs, declares every output and returns without writing any. */
static inline int tpurt_sizing(const tpurt_op_call* c) { return c->nouts == 0; }
/* Elementwise plan: the dtype the descriptor computes in is one it has a chunk function for. */
struct ew_op;
tpurt_status tpurt_ew_plan(const tpurt_op_call* c, const struct ew_op* op);
/* Declare output `o` of a sizing call: dtype and sizes, dense strides. */
void tpurt_declare_output(const tpurt_op_call* c, int o, int dtype, int ndim, const int64_t* sizes);
/* The descriptors the table links an op to (kernels/elementwise.h EW_LINK, kernels/reduce.h
 * RED_LINK), NULL when it has none: a fuser chains their chunk functions. */
struct ew_op;
struct red_link;
const struct ew_op* tpurt_op_ew_desc(int op);
const struct red_link* tpurt_op_red_desc(int op);
/* A kernel's plan hook (tpurt_plan_<kernel>, optional): given the generic plan of the call
 * (outputs, bytes), it adds what only the kernel knows (its dtype checks for these shapes,
 * scratch bytes, flops) or fails like the kernel would. */
typedef tpurt_status (*tpurt_plan_fn)(const tpurt_op_call* call, tpurt_plan* plan);
tpurt_plan_fn tpurt_op_plan_hook(int op);
/* The launch path's decisions (launch.c), shared with the plan step: a call the runtime can
 * take at all (op id, argument counts); one that runs on the calling thread; one whose output
 * overlaps an input (the kernel then writes private temporaries that are copied out). */
tpurt_status tpurt_check_call(const tpurt_op_call* c, int need_data);
/* validate.c: the call's structure and every tensor descriptor (dtype, rank, sizes, a byte span
 * int64 can count; with need_data, data for every non-empty tensor). */
tpurt_status tpurt_check_descriptors(const tpurt_op_call* c, int need_data);
/* The kinds each argument of a valid op id may take, a bit per tpurt_value_kind, for the first
 * (returned) count arguments; -1: not checked (internal ops). */
int tpurt_op_arg_kinds(int op, const uint16_t** masks);
int tpurt_op_runs_blocking(const tpurt_op_call* c);
int tpurt_needs_private_outputs(const tpurt_op_call* c);
/* A call copied into dst, which has tpurt_call_lists_size(c) bytes after the struct for its
 * lists (the copy's lists point there). Only the arguments and outputs in use are copied; the
 * others read as absent. _fixed: the same without the lists (the copy's still point at c's). */
size_t tpurt_call_lists_size(const tpurt_op_call* c);
void tpurt_call_copy(tpurt_op_call* dst, const tpurt_op_call* c);
void tpurt_call_copy_fixed(tpurt_op_call* dst, const tpurt_op_call* c);
/* tpurt_op_run is these two: count the execution in the metrics; run the kernel (temporaries,
 * private outputs) uncounted. A fused chain counts each call once and executes it per tile. */
void tpurt_op_count_run(const tpurt_op_call* c);
tpurt_status tpurt_op_execute(const tpurt_op_call* c);

/* A TPU generation's public figures (generations.gen.h, generated from
 * torch_tpu/specs/tpu_specs.json); -1 marks a figure that is not published. */
typedef struct generation {
  const char* name;
  const char* aliases;
  double bf16_tflops, int8_tops, fp8_tflops;
  int64_t hbm_bytes;
  double hbm_GBps, ici_GBps_bidir;
  int tensorcores, mxu_per_tc, mxu_dim, chips_per_host, suffix_counts_tensorcores;
  double usd_per_chip_hour;
  int topology_dims, max_slice_chips;
} generation;
/* TPU_FAULT_ALLOC's N (about one device allocation in N fails), 0 when off (chip.c). */
long tpurt_fault_alloc_every(void);
/* The generation one of whose names is prefix[0..len), NULL if none (chip.c). */
const generation* tpurt_find_generation(const char* prefix, size_t len);
/* The generation a name, alias or slice name ("v6e-256") names, NULL if none. */
const generation* tpurt_generation_named(const char* name);

/* The argument `name` of the call to `kernel` (the ATen schema's name; args.gen.h, generated
 * by runtime/gen_args.py, holds its index, the same for every overload on the kernel's line). */
#define TPURT_ARG(c, kernel, name) (&(c)->args[TPURT_ARG_##kernel##_##name])

/* ---------------------------------------------------------------- waiting (streams, pool, collectives) */
/* A spin-wait's pause. */
static inline void tpurt_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
/* The pause of a spin-wait's i-th poll: a few microseconds of pause instructions, then a
 * yield per poll. The thread a spinner waits for (the host issuing, the worker running, a
 * helper finishing its chunk) often needs the spinner's core: the host thread, the stream
 * worker and the pool's helpers outnumber 2 cores, and a spinner that never yields holds
 * its core until the scheduler preempts it, milliseconds later. */
static inline void tpurt_spin_pause(unsigned i) {
  if (i < 64) tpurt_cpu_relax();
  else sched_yield();
}
/* CLOCK_MONOTONIC in nanoseconds. */
static inline int64_t tpurt_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The collectives' statistics (collective.c), cleared with the other metrics. */
void tpurt_comm_reset_stats(void);

/* ---------------------------------------------------------------- half types */
static inline float tpurt_bf16_to_f32(uint16_t v) {
  uint32_t u = (uint32_t)v << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
/* Round to nearest even; NaN stays NaN (quiet), overflow becomes inf. */
static inline uint16_t tpurt_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static inline float tpurt_round_bf16(float f) { return tpurt_bf16_to_f32(tpurt_f32_to_bf16(f)); }
static inline float tpurt_f16_to_f32(uint16_t v) {
  _Float16 h;
  memcpy(&h, &v, 2);
  return (float)h;
}
static inline uint16_t tpurt_f32_to_f16(float f) {
  _Float16 h = (_Float16)f;
  uint16_t v;
  memcpy(&v, &h, 2);
  return v;
}

/* ---------------------------------------------------------------- tensors */
int64_t tpurt_numel(const tpurt_tensor* t);
int tpurt_is_contiguous(const tpurt_tensor* t);
/* Dims sizes[0..n) walked by nst stride arrays st[k][0..n): size-1 dims dropped, and each dim
 * merged into the one before it where every stride array chains them (st[k][d-1] ==
 * st[k][d] * sizes[d]): the same elements in the same row-major order. Returns the new count
 * (0 when every size was 1). */
int tpurt_merge_dims(int n, int64_t* sizes, int nst, int64_t* const* st);
static inline int tpurt_is_float(int dt) {
  return dt == TPURT_F16 || dt == TPURT_BF16 || dt == TPURT_F32 || dt == TPURT_F64;
}
static inline int tpurt_is_complex(int dt) { return dt == TPURT_C64; }
/* The smallest and largest values of an integer (or bool) dtype: the identities of max and min. */
static inline int64_t tpurt_int_lowest(int dt) {
  return dt == TPURT_I8 ? INT8_MIN : dt == TPURT_I16 ? INT16_MIN : dt == TPURT_I32 ? INT32_MIN : dt == TPURT_I64 ? INT64_MIN : 0;
}
static inline int64_t tpurt_int_highest(int dt) {
  return dt == TPURT_BOOL ? 1 : dt == TPURT_U8 ? UINT8_MAX : dt == TPURT_I8 ? INT8_MAX : dt == TPURT_I16 ? INT16_MAX
       : dt == TPURT_I32 ? INT32_MAX : INT64_MAX;
}
/* Type promotion as torch.result_type: the category of tensors with dim > 0 wins over
 * 0-dim tensors, which win over Python scalars (wrapped numbers). */
typedef struct tpurt_promo {
  int dim_result, zero_result, wrapped_result; /* -1 when none seen */
} tpurt_promo;
void tpurt_promo_init(tpurt_promo* p);
void tpurt_promo_add_tensor(tpurt_promo* p, const tpurt_tensor* t);
void tpurt_promo_add_value(tpurt_promo* p, const tpurt_value* v);
int tpurt_promo_result(const tpurt_promo* p);
int tpurt_promote_types(int a, int b);

/* ---------------------------------------------------------------- elementwise engine */
/* Compute types: every operand is converted to one of these in chunks, the op's chunk
 * function runs on dense arrays, and the result is converted to the output's dtype. */
typedef enum { TPURT_CT_F32 = 0, TPURT_CT_F64 = 1, TPURT_CT_I64 = 2, TPURT_CT_C64 = 3 } tpurt_ctype;
#define TPURT_CT_COUNT 4
/* Compute type for an input dtype: f16/bf16/f32 -> f32, f64 -> f64, ints/bool -> i64,
 * complex64 -> c64 (tpurt_c64). Real values load into c64 with a zero imaginary part;
 * c64 values stored to (or loaded as) a real dtype keep their real part, as copy_ does. */
tpurt_ctype tpurt_ctype_of(int dtype);

#define TPURT_EW_MAX_IN 4
/* Chunk function: out[0..n) = f(in[k][0..n)) in compute type ct; ctx is the op's. */
typedef void (*tpurt_ew_fn)(int64_t n, void* out, const void* const* in, const void* ctx);

/* Run an elementwise op over `out`; inputs broadcast to out's shape. Each input is read
 * as compute type `ct`; the chunk function's result (also `ct`) is stored to out. */
tpurt_status tpurt_ew_run(const tpurt_tensor* out, int nin, const tpurt_tensor* in,
                          tpurt_ctype ct, tpurt_ew_fn fn, const void* ctx);
/* Like tpurt_ew_run with a different compute type for the result (e.g. isnan: f32 in,
 * i64 out). */
tpurt_status tpurt_ew_run2(const tpurt_tensor* out, tpurt_ctype out_ct, int nin,
                           const tpurt_tensor* in, tpurt_ctype in_ct, tpurt_ew_fn fn,
                           const void* ctx);
/* What CPU's TensorIterator rounds through: it casts each operand to the op's common dtype
 * and computes the result in that dtype before casting it to the output's. When the common
 * dtype is narrower than its compute type (f16/bf16 in f32, u8..i32/bool in i64), operands in
 * `inputs` (bit k: input k) of another dtype are rounded to `dtype` after loading, and with
 * `result` set the result is rounded to it before it is stored to an output of another dtype
 * (pow(2, uint8, out=int64) wraps in uint8 as on CPU). */
typedef struct tpurt_ew_via {
  int dtype;
  unsigned inputs;
  int result;
} tpurt_ew_via;
/* tpurt_ew_run2 rounding through via->dtype as above (via may be NULL: no rounding). */
tpurt_status tpurt_ew_run_via(const tpurt_tensor* out, tpurt_ctype out_ct, int nin,
                              const tpurt_tensor* in, tpurt_ctype in_ct, const tpurt_ew_via* via,
                              tpurt_ew_fn fn, const void* ctx);
/* add.Tensor/add.Scalar (+ in-place, out=) when the common dtype is complex64
 * (kernels/elementwise_binary.c; core.c's add handles the real dtypes). */
tpurt_status tpurt_add_complex(const tpurt_op_call* c);
/* A 0-dim tensor view of a scalar value, backed by `storage` (8 bytes, 8-byte aligned). */
tpurt_tensor tpurt_scalar_tensor(const tpurt_value* v, void* storage);
/* Scalar value as double / int64 (a complex scalar gives its real part). */
double tpurt_value_f(const tpurt_value* v);
int64_t tpurt_value_i(const tpurt_value* v);

/* Read/write one element as double (slow path helpers for small kernels). */
double tpurt_load_f64(const void* p, int dtype);
int64_t tpurt_load_i64(const void* p, int dtype);
void tpurt_store_f64(void* p, int dtype, double v);
void tpurt_store_i64(void* p, int dtype, int64_t v);
/* x rounded to a float dtype's precision: a double op followed by this is that dtype's own
 * arithmetic (double has more than twice the bits of f32), as CPU kernels computing in
 * scalar_t do it. */
static inline double tpurt_round_to(int dtype, double x) {
  uint64_t tmp = 0;
  tpurt_store_f64(&tmp, dtype, x);
  return tpurt_load_f64(&tmp, dtype);
}
/* Point i of linspace(a, b, steps) in a float dtype, as CPU's linspace kernel computes it
 * (kernels/misc.c); histogram bin edges are these. */
double tpurt_linspace_point(int dtype, double a, double b, int64_t steps, int64_t i);
/* Pointer to element at multi-index idx[0..ndim). */
static inline char* tpurt_elem_ptr(const tpurt_tensor* t, const int64_t* idx) {
  int64_t off = 0;
  for (int d = 0; d < t->ndim; d++) off += idx[d] * t->strides[d];
  return (char*)t->data + off * (int64_t)tpurt_dtype_size((tpurt_dtype)t->dtype);
}
/* Multi-index of row-major linear index `lin` over sizes[0..n). */
static inline void tpurt_unravel(int64_t lin, const int64_t* sizes, int n, int64_t* idx) {
  for (int d = n - 1; d >= 0; d--) {
    idx[d] = lin % sizes[d];
    lin /= sizes[d];
  }
}
/* The element offset (in elements, from t->data) of t's element number lin in row-major
 * logical order: where a factory writing "the i-th value" into an out= of any shape puts it. */
static inline int64_t tpurt_element_offset(const tpurt_tensor* t, int64_t lin) {
  if (t->ndim == 1) return lin * t->strides[0];
  int64_t off = 0;
  for (int d = t->ndim - 1; d >= 0; d--) {
    off += lin % t->sizes[d] * t->strides[d];
    lin /= t->sizes[d];
  }
  return off;
}
/* Advance a multi-index over sizes (last dim fastest); returns 0 when done. */
static inline int tpurt_next_index(int64_t* idx, const int64_t* sizes, int ndim) {
  for (int d = ndim - 1; d >= 0; d--) {
    if (++idx[d] < sizes[d]) return 1;
    idx[d] = 0;
  }
  return 0;
}
/* The same, stepping with it the offsets off[k] of nops operands whose strides are
 * st[k * TPURT_MAX_DIMS + d] (an operand walk without a multiply per dim per element). */
static inline int tpurt_next_index_offsets(int64_t* idx, const int64_t* sizes, int ndim, int nops,
                                           const int64_t* st, int64_t* off) {
  for (int d = ndim - 1; d >= 0; d--) {
    for (int k = 0; k < nops; k++) off[k] += st[k * TPURT_MAX_DIMS + d];
    if (++idx[d] < sizes[d]) return 1;
    for (int k = 0; k < nops; k++) off[k] -= idx[d] * st[k * TPURT_MAX_DIMS + d];
    idx[d] = 0;
  }
  return 0;
}

/* The real (part 0) or imaginary (part 1) float32 parts of a complex64 tensor, as a
 * float32 view of the same memory (strides doubled). */
static inline tpurt_tensor tpurt_c64_part(const tpurt_tensor* t, int part) {
  tpurt_tensor v = *t;
  v.dtype = TPURT_F32;
  v.data = (float*)t->data + part;
  for (int d = 0; d < t->ndim; d++) v.strides[d] *= 2;
  return v;
}

/* As c10's checked_convert: a complex scalar with a nonzero imaginary part does not fit a
 * real dtype (TPURT_ERR_RUNTIME, CPU's message); anything else fits. */
tpurt_status tpurt_check_scalar_fits(const tpurt_value* v, int dtype);
/* One element as complex64 (a real dtype gets imaginary part 0). */
tpurt_c64 tpurt_load_c64(const void* p, int dtype);
/* One element of dtype src_dt stored as dtype dt, converted as copy_ converts: complex to
 * real keeps the real part (bool: either part nonzero). */
void tpurt_convert_elem(void* dst, int dt, const void* src, int src_dt);

/* Strided copy with dtype conversion between two tensors of the same shape (src may
 * broadcast). Complex to real keeps the real part, real to complex sets the imaginary
 * part to 0, as PyTorch's copy_. */
tpurt_status tpurt_copy_tensor(const tpurt_tensor* dst, const tpurt_tensor* src);

/* A dense (row-major) view of `data` shaped like t, read as `dtype`: scratch results are
 * written through it into outputs of any strides. */
static inline tpurt_tensor tpurt_dense_like(const tpurt_tensor* t, void* data, int dtype) {
  tpurt_tensor d = *t;
  d.data = data;
  d.dtype = dtype;
  for (int64_t k = t->ndim - 1, st = 1; k >= 0; k--) {
    d.strides[k] = st;
    st *= t->sizes[k];
  }
  return d;
}

/* t <- the dense scratch `data` of dtype `dtype` shaped like it (cast to t's dtype). */
static inline tpurt_status tpurt_store_dense(const tpurt_tensor* t, void* data, int dtype) {
  tpurt_tensor d = tpurt_dense_like(t, data, dtype);
  return tpurt_copy_tensor(t, &d);
}

/* ---------------------------------------------------------------- Philox 4x32-10 */
void tpurt_philox(uint64_t seed, uint64_t counter, uint32_t out[4]);
/* One of Philox's ten rounds on counter words c[0..3] with key (k0, k1); the key then grows by
 * TPURT_PHILOX_W0 / W1. random.c runs it over lanes of counters, which vectorize. */
#define TPURT_PHILOX_W0 0x9E3779B9u
#define TPURT_PHILOX_W1 0xBB67AE85u
static inline void tpurt_philox_round(uint32_t* c0, uint32_t* c1, uint32_t* c2, uint32_t* c3, uint32_t k0, uint32_t k1) {
  uint64_t p0 = (uint64_t)0xD2511F53u * *c0, p1 = (uint64_t)0xCD9E8D57u * *c2;
  uint32_t n0 = (uint32_t)(p1 >> 32) ^ *c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ *c3 ^ k1;
  *c1 = (uint32_t)p1;
  *c3 = (uint32_t)p0;
  *c0 = n0;
  *c2 = n2;
}
static inline float tpurt_u32_to_unit_f32(uint32_t x) { /* [0, 1) */
  return (float)(x >> 8) * (1.0f / 16777216.0f);
}
static inline double tpurt_u64_to_unit_f64(uint32_t hi, uint32_t lo) {
  uint64_t x = ((uint64_t)hi << 32 | lo) >> 11;
  return (double)x * (1.0 / 9007199254740992.0);
}

/* ---------------------------------------------------------------- runtime internals */
void tpurt_metrics_count_op(int op, int f64);
void tpurt_metrics_count_copy(int kind /* 0 h2d, 1 d2h, 2 d2d */, int64_t bytes);
void tpurt_metrics_count_alloc(void);
void tpurt_metrics_count_kernel_error(void);
void tpurt_metrics_count_fused(int ops); /* one chain of `ops` calls ran as one command */
void tpurt_metrics_count_unplanned_temp(int op, int64_t bytes);
int tpurt_op_count(void); /* number of op ids */
/* Stream internals used by the allocator. issued: the sequence number the work issued so far
 * ends at, a pending fused chain included (it becomes the next command), so a block freed now
 * waits for the chain too. */
uint64_t tpurt_stream_issued_seq(int32_t stream);
uint64_t tpurt_stream_completed_seq(int32_t stream);
int tpurt_stream_valid(int32_t stream);
/* Inline storage of a queued command: a kernel call plus this much of its lists. */
#define TPURT_STREAM_PAYLOAD (sizeof(tpurt_op_call) + 2048)
/* Enqueue fn(payload) on a stream, payload being TPURT_STREAM_PAYLOAD bytes inside the
 * stream's command ring that fill(payload, src) writes while the slot is reserved: no
 * allocation per command. Waits while the ring is full. `what` NULL: the payload starts with
 * the command's NUL-terminated name (a compiled kernel's, which lives only there). */
tpurt_status tpurt_stream_enqueue_inline(int32_t stream, tpurt_status (*fn)(void*),
                                         void (*fill)(void* payload, const void* src), const void* src,
                                         const char* what);
/* When nothing is queued on the stream, run fn(arg) now on the calling thread (holding
 * the stream so nothing is queued meanwhile) and return 1; a failure becomes the
 * stream's pending error exactly as if the worker had run it. Else return 0. */
int tpurt_stream_run_if_idle(int32_t stream, tpurt_status (*fn)(void*), void* arg, const char* what);
/* ---------------------------------------------------------------- fused eager (fuse.c) */
/* A stream's pending chain (fused mode): elementwise calls over dense tensors of one element
 * count, or foreach calls over lists of one length and element counts, deferred by
 * tpurt_op_launch. stream.c keeps it (under the stream's lock) and enqueues it as one command
 * before anything else is enqueued on, or observes, the stream. */
typedef struct tpurt_chain tpurt_chain;
/* The element count of a call that can join a chain (outputs and tensor operands dense with
 * one element count, or 0-dim operands; no output partially overlapping an input; a foreach
 * call: the same per list index, summed over its lists' length), else -1. The op's kind
 * (elementwise) is the caller's check. */
int64_t tpurt_chain_numel(const tpurt_op_call* c);
/* Append a copy of c (tpurt_chain_numel(c) == numel) to *chain, a fresh chain when it is NULL:
 * 1 appended; 0 c does not fit the chain (full, another element count or device, or memory
 * shared with the chain's tensors in a way tiles would reorder): enqueue it, then append again;
 * -1 host out of memory (*chain unchanged). A chain is never left empty. */
int tpurt_chain_append(tpurt_chain** chain, const tpurt_op_call* c, int64_t numel);
/* The chain as a stream command: run it (on the worker), give it back afterwards, and the name
 * its failure reports (the failing call's kernel, written by the run). */
tpurt_status tpurt_chain_run(void* chain);
void tpurt_chain_release(void* chain);
const char* tpurt_chain_what(tpurt_chain* chain);
/* Fused mode (stream.c): defer c into the stream's chain (1), or not (0: the caller launches it
 * as strict mode does, and that enqueue puts the chain first). */
int tpurt_stream_defer(int32_t stream, const tpurt_op_call* c, int64_t numel);
/* Enqueue every stream's pending chain (mode changes). */
void tpurt_streams_flush_all(void);

/* ---------------------------------------------------------------- trace (trace.c) */
/* Nonzero while a trace records. */
extern int tpurt_trace_on;
static inline int tpurt_tracing(void) { return __builtin_expect(__atomic_load_n(&tpurt_trace_on, __ATOMIC_RELAXED), 0); }
/* The calling thread's tag (tpurt_trace_set_tag): a command records it when issued. */
uint64_t tpurt_trace_issuer_tag(void);
/* fn(arg) run as a command of `stream` named `what`, issued under `tag`, and recorded. */
tpurt_status tpurt_trace_run(int32_t stream, tpurt_status (*fn)(void*), void* arg, const char* what, uint64_t tag);
/* Every command runs through one of these, recorded while a trace records: a queued one with the
 * tag it was issued under, one run on the issuing thread with that thread's. */
static inline tpurt_status tpurt_run_command(int32_t stream, tpurt_status (*fn)(void*), void* arg, const char* what,
                                             uint64_t tag) {
  return tpurt_tracing() ? tpurt_trace_run(stream, fn, arg, what, tag) : fn(arg);
}
static inline tpurt_status tpurt_run_inline(int32_t stream, tpurt_status (*fn)(void*), void* arg, const char* what) {
  return tpurt_tracing() ? tpurt_trace_run(stream, fn, arg, what, tpurt_trace_issuer_tag()) : fn(arg);
}
/* An op call the running command executes (tpurt_op_count_run, while tracing): its figures join
 * the command's record. */
void tpurt_trace_note_call(const tpurt_op_call* c);
/* Wait until every stream ran the work issued to it, pending fused chains included; errors stay
 * pending (stream.c). */
void tpurt_streams_drain(void);

/* Allocator hooks used by the stream module (scratch memory for kernels is not used). */
void tpurt_allocator_flush_device(int device);


/* ---------------------------------------------------------------- worker pool (pool.c) */
/* fn(ctx, begin, end) over a sub-range of [0, n). */
typedef void (*tpurt_pool_fn)(void* ctx, int64_t begin, int64_t end);
/* Threads a parallel loop uses (the caller included): TPU_NUM_THREADS, else online CPUs. */
int tpurt_pool_threads(void);
/* Run fn over [0, n) cut into chunks [k*grain, (k+1)*grain) (the last one shorter) that
 * the pool's threads, the caller included, claim dynamically; returns when all are done.
 * Runs inline as one call over [0, n) when n <= grain, when called from inside a parallel
 * loop, or while another thread's loop runs. So fn must give the same result for any
 * split: chunks must write disjoint outputs (never combine partial sums across chunks). */
void tpurt_parallel_for(int64_t n, int64_t grain, tpurt_pool_fn fn, void* ctx);
/* fn(ctx, member, size) for `size` members at once (0: as many as the pool's threads), the
 * caller being member 0, so members may wait for each other (tpurt_team_barrier): each on a
 * thread of its own, or, when no helper has claimed it by the time another member waits, on
 * that member's thread as a fiber with a stack of its own (thread-local state other than the
 * member's id, size and single constructs is the thread's: keep nothing of it across a
 * barrier). Fewer members (one, inline) when the pool is busy or the call is nested: callers
 * must not depend on the size.
 * What torch.compile's generated OpenMP loops run on (omp.c). */
typedef void (*tpurt_team_fn)(void* ctx, int member, int size);
void tpurt_parallel_team(int size, tpurt_team_fn fn, void* ctx);
int tpurt_team_member(void); /* 0 outside a team */
int tpurt_team_size(void);   /* 1 outside a team */
void tpurt_team_barrier(void);
int tpurt_team_single(void); /* 1 for the member that runs the team's next single construct */
/* Tests: while held, helpers skip new jobs, so a team's caller runs every member (fibers). */
void tpurt_pool_hold_helpers(int hold);
/* A loop whose chunks need working memory: fn(ctx, slice, begin, end) over [0, n) cut into
 * chunks of `grain` (the last one shorter) claimed in order, as tpurt_parallel_for's are, by a
 * team of tpurt_sliced_workers(n, grain) members; member m works in slice m of `work`, the
 * slices slice_bytes apart. init (NULL for none) runs on a member's slice once, before it claims
 * any chunk. Returns when all chunks are done; does nothing for n <= 0.
 * The caller takes `work` (workers * slice_bytes) as one temporary before the loop and gives it
 * back after, and its plan hook counts those bytes with tpurt_sliced_workers: temporaries taken
 * per chunk would be given back by the threads out of order and never pop from the call's
 * planned scratch. A team with fewer members (nested call, busy pool) leaves the slices past
 * theirs unused. */
typedef void (*tpurt_slice_init_fn)(void* ctx, void* slice);
typedef void (*tpurt_slice_fn)(void* ctx, void* slice, int64_t begin, int64_t end);
void tpurt_parallel_sliced(int64_t n, int64_t grain, void* work, size_t slice_bytes, tpurt_slice_init_fn init,
                           tpurt_slice_fn fn, void* ctx);
/* Slices tpurt_parallel_sliced uses: min(chunks, pool threads), 0 for n <= 0. */
int tpurt_sliced_workers(int64_t n, int64_t grain);

/* ---------------------------------------------------------------- kernel temporaries (temp.c) */
/* A kernel's working memory: 64-byte aligned device memory counted against the chip's HBM,
 * from the call's planned scratch while it lasts, else the caching allocator; valid until the
 * kernel returns (tpurt_op_run gives it all back). NULL with the error set (OOM) when the chip
 * is full. Callable from the kernel's thread and from its parallel loops' helpers. */
void* tpurt_temp(size_t bytes);
void* tpurt_temp_zeroed(size_t bytes);
static inline void* tpurt_temp_calloc(size_t n, size_t size) { return tpurt_temp_zeroed(n * size); }
/* The scratch a temporary of `bytes` takes (tpurt_temp rounds each up to 64): what a plan hook
 * counts for it. */
static inline int64_t tpurt_temp_bytes(size_t bytes) { return ((int64_t)bytes + 63) & ~(int64_t)63; }
/* Give a temporary back before the kernel returns (a big buffer used by one phase). Scratch is
 * a stack that pops only its latest temporary: a plan counts every temporary taken, less
 * those given back (latest first) before the next is taken. */
void tpurt_temp_release(void* p);
typedef struct tpurt_temp_ctx {
  int device, op;
  char* arena;
  size_t arena_size, used, last; /* last: where the arena's latest temporary starts, while it may be popped */
  pthread_mutex_t mu;
  void** blocks;
  int n, cap;
  struct tpurt_temp_ctx* outer;
} tpurt_temp_ctx;
void tpurt_temp_begin(tpurt_temp_ctx* t, const tpurt_op_call* c);
void tpurt_temp_end(tpurt_temp_ctx* t);
/* The running kernel's context (for the pool's helpers to adopt), or NULL. */
tpurt_temp_ctx* tpurt_temp_current(void);
void tpurt_temp_adopt(tpurt_temp_ctx* t);
/* tpurt_malloc from inside a running kernel: takes only cached blocks no stream's issued work
 * still uses (the kernel is earlier in stream order than work the host issued since), never
 * waits for a stream (the kernel may be the work waited for); under memory pressure it gives
 * back only such idle blocks. */
tpurt_status tpurt_malloc_in_kernel(int device, size_t nbytes, void** out);
/* Give back what tpurt_malloc_in_kernel gave once the kernel is done with it: nothing else
 * uses it, so it is reusable at once, by anyone. */
void tpurt_free_in_kernel(void* ptr);

/* The GEMM's packing workspace: a 64-byte aligned host buffer of at least `bytes` that belongs
 * to the calling thread and is handed out again by its next call: valid until then, never
 * freed by the caller. Bounded (a few MiB: the emulator's stand-in for on-chip vector memory,
 * not HBM), and reused because fresh pages on every call cost page faults that take longer
 * than the kernel at moderate sizes. NULL when the host is out of memory. */
void* tpurt_scratch(size_t bytes);

#endif /* TPURT_INTERNAL_H */
