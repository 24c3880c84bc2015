/* tpurt.h — the public C API of torch_tpu's emulated TPU runtime.
 *
 * One header, versioned. Everything a caller (the C++ glue, the C tests) may use is here.
 * Conventions:
 *   - Every call that can fail returns tpurt_status; on failure a message describing the
 *     failure (op, shapes, what was expected) is kept per thread: tpurt_last_error().
 *   - Device memory is host memory owned by the runtime; pointers to it are plain void*.
 *   - Unless stated otherwise every function may be called from any thread.
 *   - Nothing here aborts the process on bad input.
 */
#ifndef TPURT_H
#define TPURT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TPURT_VERSION_MAJOR 0
#define TPURT_VERSION_MINOR 18

/* ---------------------------------------------------------------- status codes */
/* X(code, value, the c10 error class the C++ boundary throws, which PyTorch turns into the
 * Python exception: Error RuntimeError, ValueError, IndexError, TypeError, OutOfMemoryError
 * torch.OutOfMemoryError, NotImplementedError, LinAlgError torch.linalg.LinAlgError) */
#define TPURT_STATUS_LIST(X)                     \
  X(TPURT_OK, 0, Error)                          \
  X(TPURT_ERR_RUNTIME, 1, Error)                 \
  X(TPURT_ERR_VALUE, 2, ValueError)              \
  X(TPURT_ERR_INDEX, 3, IndexError)              \
  X(TPURT_ERR_TYPE, 4, TypeError)                \
  X(TPURT_ERR_OOM, 5, OutOfMemoryError)          \
  X(TPURT_ERR_UNSUPPORTED, 6, NotImplementedError) \
  X(TPURT_ERR_LINALG, 7, LinAlgError)

typedef enum {
#define TPURT_X(code, value, exc) code = value,
  TPURT_STATUS_LIST(TPURT_X)
#undef TPURT_X
} tpurt_status;

/* Message of the last failure on the calling thread. Never NULL; valid until the next
 * failing call on this thread. */
const char* tpurt_last_error(void);
/* Name of a status code ("TPURT_ERR_OOM"); static storage. */
const char* tpurt_status_name(tpurt_status s);
/* Sets the calling thread's failure (what a command that reports another thread's failure
 * returns) and returns `code`. Since 0.9. */
tpurt_status tpurt_fail_message(tpurt_status code, const char* message);

/* ---------------------------------------------------------------- dtypes */
/* complex64 storage: interleaved real and imaginary float32, as c10::complex<float>. */
typedef struct tpurt_c64 {
  float re, im;
} tpurt_c64;

/* X(enum, C storage type, size in bytes, name, c10 name) — order is ours, not c10's. */
#define TPURT_DTYPE_LIST(X)                               \
  X(TPURT_BOOL, uint8_t, 1, "bool", "Bool")               \
  X(TPURT_U8, uint8_t, 1, "uint8", "Byte")                \
  X(TPURT_I8, int8_t, 1, "int8", "Char")                  \
  X(TPURT_I16, int16_t, 2, "int16", "Short")              \
  X(TPURT_I32, int32_t, 4, "int32", "Int")                \
  X(TPURT_I64, int64_t, 8, "int64", "Long")               \
  X(TPURT_F16, uint16_t, 2, "float16", "Half")            \
  X(TPURT_BF16, uint16_t, 2, "bfloat16", "BFloat16")      \
  X(TPURT_F32, float, 4, "float32", "Float")              \
  X(TPURT_F64, double, 8, "float64", "Double")            \
  X(TPURT_C64, tpurt_c64, 8, "complex64", "ComplexFloat")

typedef enum {
#define TPURT_X(e, ctype, size, name, c10_name) e,
  TPURT_DTYPE_LIST(TPURT_X)
#undef TPURT_X
  TPURT_DTYPE_COUNT
} tpurt_dtype;

size_t tpurt_dtype_size(tpurt_dtype d);
/* "float32" etc.; static storage; "?" for an unknown value. */
const char* tpurt_dtype_name(tpurt_dtype d);
/* "Float" etc., as PyTorch's messages name a dtype (c10::ScalarType); "?" for an unknown value. */
const char* tpurt_dtype_c10_name(tpurt_dtype d);

/* ---------------------------------------------------------------- limits */
#define TPURT_MAX_DIMS 16
#define TPURT_MAX_DEVICES 64 /* chips one process can see */

/* A strided view of device memory. Borrowed: the runtime never frees `data`.
 * `data` points at element 0 (storage offset already applied); strides are in elements
 * and may be 0 (broadcast) or negative. */
typedef struct tpurt_tensor {
  void* data;
  int32_t dtype; /* tpurt_dtype */
  int32_t ndim;
  int64_t sizes[TPURT_MAX_DIMS];
  int64_t strides[TPURT_MAX_DIMS];
} tpurt_tensor;

typedef enum {
  TPURT_V_NONE = 0,   /* absent optional argument */
  TPURT_V_TENSOR,     /* .t */
  TPURT_V_INT,        /* .i */
  TPURT_V_FLOAT,      /* .f */
  TPURT_V_BOOL,       /* .i (0 or 1) */
  TPURT_V_INTS,       /* .ints[0..n) */
  TPURT_V_FLOATS,     /* .floats[0..n) */
  TPURT_V_TENSORS,    /* .tensors[0..n); an element with data == NULL and ndim == -1 is None */
  TPURT_V_STRING,     /* .s (NUL-terminated) */
  TPURT_V_COMPLEX,    /* .c[0] real, .c[1] imaginary (a Python complex scalar) */
} tpurt_value_kind;

/* One argument of an op, in the order of its ATen schema. Scalars that arrive as 0-dim
 * CPU tensors are passed as INT/FLOAT/BOOL with `wrapped` = 1 (they then take part in
 * type promotion like Python numbers). */
typedef struct tpurt_value {
  int32_t kind; /* tpurt_value_kind */
  int32_t n;    /* element count for the list kinds */
  int32_t wrapped;
  int32_t scalar_dtype; /* for INT/FLOAT/BOOL that came from a 0-dim tensor: its dtype; else -1 */
  union {
    int64_t i;
    double f;
    tpurt_tensor t;
    const int64_t* ints;
    const double* floats;
    const tpurt_tensor* tensors;
    const char* s;
    double c[2];
  };
} tpurt_value;

/* ---------------------------------------------------------------- matmul precision */
/* Number of bf16 passes the emulated MXU uses for f32 operands, X(enum, passes, TorchTPU's
 * name): one bf16 pass with f32 accumulation, bf16_3x, about f32. */
#define TPURT_PRECISION_LIST(X)              \
  X(TPURT_PRECISION_DEFAULT, 1, "default")   \
  X(TPURT_PRECISION_HIGH, 3, "high")         \
  X(TPURT_PRECISION_HIGHEST, 6, "highest")
typedef enum {
#define TPURT_X(e, passes, name) e = passes,
  TPURT_PRECISION_LIST(TPURT_X)
#undef TPURT_X
} tpurt_precision;

/* ---------------------------------------------------------------- op calls */
#define TPURT_MAX_ARGS 24
#define TPURT_MAX_OUTS 8

/* Everything a kernel needs. Built by the caller; tpurt_op_launch copies it (lists
 * included), so the caller's storage can go away as soon as launch returns. */
typedef struct tpurt_op_call {
  size_t struct_size; /* sizeof(tpurt_op_call) as the caller knows it */
  int32_t op;         /* id from tpurt_op_lookup */
  int32_t device;
  int32_t nargs;
  int32_t nouts;
  int32_t precision;  /* tpurt_precision in force when the op was issued */
  int32_t reserved;
  uint64_t rng_seed;   /* Philox key and counter base for ops flagged TPURT_OPF_RANDOM */
  uint64_t rng_offset;
  /* Device memory the kernel takes its temporaries from (tpurt_op_plan says how much), owned
   * by the caller and not touched by anyone else until the call completes on its stream.
   * NULL: tpurt_op_launch* allocates the planned bytes from the chip's allocator on the
   * issuing thread, in stream order (a chip out of HBM fails the launch, not the kernel), and
   * frees them once the command is queued. Either way they count against the chip's HBM; a
   * kernel that takes more than its plan counted gets the rest from the allocator while it
   * runs, counted in tpurt_metrics.unplanned_temp_bytes. Since 0.4 (launch-time scratch: 0.6). */
  void* scratch;
  int64_t scratch_bytes;
  tpurt_value args[TPURT_MAX_ARGS];
  tpurt_tensor outs[TPURT_MAX_OUTS]; /* preallocated with PyTorch's shapes/dtypes/strides */
} tpurt_op_call;

/* Op flags, from the op table. */
enum {
  TPURT_OPF_ALIAS_SAFE = 1 << 0, /* output may be the very same view as an input (elementwise) */
  TPURT_OPF_RANDOM = 1 << 1,     /* consumes Philox numbers: one counter per output element */
  TPURT_OPF_OUT_ARGS = 1 << 2,   /* outputs are listed in args as mutable tensors too (foreach_) */
  TPURT_OPF_DATA_SIZED = 1 << 3, /* output sizes may depend on tensor data: tpurt_op_size_outputs */
  TPURT_OPF_COMPLEX = 1 << 4,    /* the kernel handles complex64 tensors; others run on the CPU */
  TPURT_OPF_NO_OUT_OVERLAP = 1 << 5, /* as CPU, an out= tensor may not share any memory with an input */
  TPURT_OPF_EAGER_ERRORS = 1 << 6,   /* as CPU, errors found in the data (an index out of range) raise
                                        from the launch: it waits for the stream and runs the kernel */
  TPURT_OPF_HOST_INDICES = 1 << 7,   /* index tensors (a Tensor?[] argument) on the host are copied to the
                                        device first, as CUDA's advanced indexing does */
  TPURT_OPF_EAGER_INT_ERRORS = 1 << 8, /* as EAGER_ERRORS when the op's result is integral: CPU checks integer
                                          data eagerly (a division by zero, a negative integer power) */
  TPURT_OPF_SELF_OVERLAP_OK = 1 << 9,  /* may write through a self-overlapping (expanded) view: every element
                                          gets the same value (fill_) or an idempotent one
                                          (threshold_), as CPU allows */
  TPURT_OPF_INDEXED_WRITE = 1 << 10,   /* writes self (or a copy of it, out=) at indices (index_add_, scatter_,
                                          put_): as CPU, the written tensor shares no memory with the other
                                          inputs (index, source, values) (since 0.17) */
  TPURT_OPF_EXPANDED_SELF_SERIAL = 1 << 11, /* CPU writes an expanded (self-overlapping) self one element after
                                               another, with a deprecation warning (index_fill_, masked_fill_,
                                               index_put_; x[mask] = v): the caller runs such calls on the host
                                               for that order (since 0.18) */
};

/* ---------------------------------------------------------------- affine quantization (since 0.7) */
/* Two internal ops (tpurt_op_lookup("tpurt::quantize"), "tpurt::dequantize") move a quantized
 * tensor's values between float32 and its integer representation with the arithmetic of
 * PyTorch CPU's kernel for the tensor's scheme, so the two agree bit for bit (ties, NaN and
 * values beyond the integer range included). Arguments, by position:
 *   args[0]  tpurt::quantize: the float32 values; tpurt::dequantize: the integers (uint8, int8, int32)
 *   args[1]  scale: a FLOAT value (per tensor) or a tensor broadcasting to args[0] (per channel:
 *            float64 scales; FLOAT_QPARAMS: float32)
 *   args[2]  zero point: an INT value or a tensor broadcasting to args[0] (int64; FLOAT_QPARAMS: float32)
 *   args[3]  INT: the scheme, tpurt_qscheme
 *   outs[0]  tpurt::quantize: the integers (uint8, int8 or int32: the range clamped to);
 *            tpurt::dequantize: float32 */
/* X(enum, value, PyTorch's torch.qscheme name) */
#define TPURT_QSCHEME_LIST(X)                                                       \
  X(TPURT_QSCHEME_PER_TENSOR_AFFINE, 0, "per_tensor_affine")                        \
  X(TPURT_QSCHEME_PER_CHANNEL_AFFINE, 1, "per_channel_affine")                      \
  X(TPURT_QSCHEME_PER_CHANNEL_FLOAT_QPARAMS, 2, "per_channel_affine_float_qparams")
typedef enum {
#define TPURT_X(e, value, name) e = value,
  TPURT_QSCHEME_LIST(TPURT_X)
#undef TPURT_X
} tpurt_qscheme;

/* ---------------------------------------------------------------- op kinds (since 0.4) */
/* What an op is, from the op table: what a fuser and a cost model need to know of it. */
#define TPURT_OP_KIND_LIST(X)                         \
  X(TPURT_KIND_OTHER, "other")                        \
  X(TPURT_KIND_ELEMENTWISE, "elementwise")            \
  X(TPURT_KIND_REDUCTION, "reduction")                \
  X(TPURT_KIND_SCAN, "scan")                          \
  X(TPURT_KIND_MATMUL, "matmul")                      \
  X(TPURT_KIND_MOVEMENT, "movement")                  \
  X(TPURT_KIND_DATA_SIZED, "data_sized")              \
  X(TPURT_KIND_RANDOM, "random")                      \
  X(TPURT_KIND_COLLECTIVE, "collective")
typedef enum {
#define TPURT_X(e, name) e,
  TPURT_OP_KIND_LIST(TPURT_X)
#undef TPURT_X
  TPURT_KIND_COUNT
} tpurt_op_kind;
/* The value a reduction's accumulator starts from; NONE: no identity (max of nothing is an
 * error, var of nothing NaN). */
#define TPURT_IDENTITY_LIST(X) \
  X(TPURT_IDENTITY_NONE, "none") X(TPURT_IDENTITY_ZERO, "zero") X(TPURT_IDENTITY_ONE, "one") X(TPURT_IDENTITY_NEG_INF, "-inf")
typedef enum {
#define TPURT_X(e, name) e,
  TPURT_IDENTITY_LIST(TPURT_X)
#undef TPURT_X
} tpurt_identity;

typedef struct tpurt_op_info {
  size_t struct_size;
  const char* kernel; /* static storage */
  int32_t flags;      /* TPURT_OPF_* */
  int32_t kind;       /* tpurt_op_kind */
  int32_t arity;      /* ELEMENTWISE: operands (tensors or scalars) it combines, else -1 */
  int32_t identity;   /* REDUCTION: tpurt_identity, else NONE */
  int32_t contract[2]; /* MATMUL: argument indices of the two contracted operands, else -1 */
  int32_t fusable;    /* 1 when the op's elementwise or reduction descriptor is linked: its
                         chunk functions can be chained by a fuser */
} tpurt_op_info;
tpurt_status tpurt_op_get_info(int op, tpurt_op_info* out);
/* "elementwise" etc.; "?" for an unknown value; static storage. */
const char* tpurt_op_kind_name(int kind);
const char* tpurt_identity_name(int identity);

/* Number of ATen overload names the runtime implements natively. */
int tpurt_op_name_count(void);
/* i-th ATen overload name ("add.Tensor", "add_.Tensor", ...); static storage. */
const char* tpurt_op_name(int i);
/* Op id for an overload name, or -1 when no native kernel exists. */
int tpurt_op_lookup(const char* aten_overload_name);
/* Kernel name for an op id ("add"); static storage. */
const char* tpurt_op_kernel_name(int op);
int tpurt_op_flags(int op);

/* Run an op on `stream`: synchronously in debug mode (the kernel's status comes back
 * here), else enqueued (a kernel failure is reported by the next synchronizing call on that
 * stream). In fused mode (since 0.5) an elementwise call over dense tensors may instead wait in
 * the stream's chain, which is enqueued before anything else reaches or observes the stream;
 * the tensors' memory must stay valid until then, as for any enqueued call (the allocator's
 * blocks do). Every entry point that takes a call (launch, plan, cost, graph) first checks its
 * structure (since 0.11): op id, argument counts, each value's kind against the op's ATen schema,
 * list counts and pointers, and each tensor descriptor (dtype, 0-16 dims, sizes >= 0, an element
 * count and byte span int64 counts, an address span that does not wrap; launches also need data
 * for every non-empty tensor), and refuses a malformed call (TPURT_ERR_VALUE, TYPE or
 * UNSUPPORTED). Whether the shapes and dtypes suit the op, and whether a view lies inside its
 * memory, is the caller's (PyTorch's meta functions and allocator); kernels report what only they
 * can see, such as an index out of range. runtime/fuzz holds the fuzz target of this contract. */
tpurt_status tpurt_op_launch(int32_t stream, const tpurt_op_call* call);
/* Run an op in stream order and return its own status: waits for `stream` (an earlier
 * failure comes back as that asynchronous one), then runs the kernel on the calling thread,
 * as debug mode does. Since 0.3. */
tpurt_status tpurt_op_launch_blocking(int32_t stream, const tpurt_op_call* call);
/* Run an op now, on the calling thread (used by tests and by the stream workers). */
tpurt_status tpurt_op_run(const tpurt_op_call* call);
/* For ops flagged TPURT_OPF_DATA_SIZED (nonzero, masked_select, x[mask], ...), whose output
 * sizes no meta function can know: waits for the work queued on `stream`, then has the
 * kernel read its inputs and write each output's dtype, ndim and sizes to call->outs[0..
 * call->nouts) (data NULL, strides dense). The caller then allocates those outputs and
 * launches the same call. `call` is the caller's; outs and nouts are overwritten. Fails like
 * the kernel would on bad input. */
tpurt_status tpurt_op_size_outputs(int32_t stream, tpurt_op_call* call);

/* ---------------------------------------------------------------- plans (since 0.4) */
/* One batched matrix product out[batch][m][n] = a[batch][m][k] b[batch][k][n]; causal: only the
 * blocks on and below the diagonal are computed (flash attention's causal skip). Since 0.8. */
typedef struct tpurt_gemm_shape {
  int64_t batch, m, n, k;
  int32_t causal;
} tpurt_gemm_shape;
#define TPURT_MAX_GEMMS 5
/* What the runtime will do with a call, decided from its descriptors alone: tensor data may
 * be NULL (then nothing is known of overlaps). Everything a kernel would refuse for shapes
 * and dtypes alone is refused here, with the kernel's message. */
typedef struct tpurt_plan {
  size_t struct_size;
  int32_t kind;             /* the op's tpurt_op_kind */
  int32_t outputs_from_data; /* TPURT_OPF_DATA_SIZED: output sizes come from tpurt_op_size_outputs */
  int32_t private_outputs;  /* an output overlaps an input: the kernel writes a private copy first
                               (part of scratch_bytes) */
  int32_t runs_blocking;    /* tpurt_op_launch runs it on the calling thread (data errors raise from it) */
  int64_t scratch_bytes;    /* device scratch the kernel's temporaries take (see tpurt_op_call.scratch) */
  int64_t flops;            /* floating-point (or integer) operations, 0 when not modelled */
  int64_t bytes_moved;      /* bytes the call reads and writes of its tensors */
  tpurt_tensor outs[TPURT_MAX_OUTS]; /* the layout each output is written in (data as given) */
  int32_t nouts;
  /* Since 0.8: the matrix products the op performs, for the cost model's MXU padding (none
   * for ops of other kinds). flops counts them at their true sizes. */
  tpurt_gemm_shape gemms[TPURT_MAX_GEMMS];
  int32_t ngemms;
} tpurt_plan;
/* The scratch bytes `call` needs as given (its data pointers decide private outputs): what
 * tpurt_op_plan reports in scratch_bytes, without its checks. Since 0.6. */
int64_t tpurt_op_scratch_bytes(const tpurt_op_call* call);
/* Plan `call`. TPURT_OK: supported, *out filled. TPURT_ERR_UNSUPPORTED (or the error the kernel
 * would raise for these shapes and dtypes): not supported, tpurt_last_error() says why. */
tpurt_status tpurt_op_plan(const tpurt_op_call* call, tpurt_plan* out);

/* ---------------------------------------------------------------- cost model (since 0.8) */
/* What work would take on a real TPU generation, from its public figures (tpu_specs.json):
 * the time of each engine and the roofline, their largest. `generation` is a generation's name
 * or alias ("v6e", "tpu7x", "v5litepod") or a slice name ("v6e-256"). The formulas, their
 * sources and the calibration constants are in runtime/src/cost.c, in one place. */
/* X(enum, name): what sets a cost's time. */
#define TPURT_BOUND_LIST(X)                                                  \
  X(TPURT_BOUND_NONE, "none") /* no work */                                 \
  X(TPURT_BOUND_MXU, "mxu")                                                 \
  X(TPURT_BOUND_VPU, "vpu")                                                 \
  X(TPURT_BOUND_HBM, "hbm")                                                 \
  X(TPURT_BOUND_ICI, "ici")                                                 \
  X(TPURT_BOUND_LATENCY, "latency") /* a collective's per-hop latency floor */
typedef enum {
#define TPURT_X(e, name) e,
  TPURT_BOUND_LIST(TPURT_X)
#undef TPURT_X
  TPURT_BOUND_COUNT
} tpurt_bound;
typedef struct tpurt_cost {
  size_t struct_size;
  double seconds;                  /* the roofline: the largest engine time */
  double mxu_seconds, vpu_seconds, hbm_seconds, ici_seconds;
  double flops;                    /* the work at its true sizes */
  double mxu_flops;                /* matrix-unit work after padding each GEMM to the MXU tile */
  double hbm_bytes, ici_bytes;     /* bytes through HBM; bytes each chip sends over ICI */
  int32_t bound;                   /* tpurt_bound: which time sets seconds */
} tpurt_cost;
/* Matrix products of dtype (bf16/f16/f32 run at the bf16 peak, as TPUs do at DEFAULT
 * precision; int8 at the int8 peak) plus hbm_bytes of traffic. */
tpurt_status tpurt_gemm_cost(const char* generation, const tpurt_gemm_shape* gemms, int ngemms, int32_t dtype,
                             int64_t hbm_bytes, tpurt_cost* out);
/* One op of the op table: its plan's GEMMs on the MXU, its other operations on the VPU, the
 * bytes it reads and writes through HBM. Data pointers may be NULL. */
tpurt_status tpurt_op_cost(const tpurt_op_call* call, const char* generation, tpurt_cost* out);
/* X(enum, name) */
#define TPURT_COLLECTIVE_LIST(X)                           \
  X(TPURT_COLLECTIVE_ALL_REDUCE, "all_reduce")             \
  X(TPURT_COLLECTIVE_ALL_GATHER, "all_gather")             \
  X(TPURT_COLLECTIVE_REDUCE_SCATTER, "reduce_scatter")     \
  X(TPURT_COLLECTIVE_ALL_TO_ALL, "all_to_all")
typedef enum {
#define TPURT_X(e, name) e,
  TPURT_COLLECTIVE_LIST(TPURT_X)
#undef TPURT_X
  TPURT_COLLECTIVE_COUNT
} tpurt_collective;
/* A collective over the torus axes of a slice: naxes axes of axis_sizes[i] chips each,
 * wraparound[i] nonzero where the axis closes into a ring. bytes: the full array per chip
 * (the gathered result of an all-gather, the input of a reduce-scatter or all-reduce, what
 * each chip sends in total in an all-to-all). */
tpurt_status tpurt_collective_cost(const char* generation, int32_t collective, int64_t bytes, const int32_t* axis_sizes,
                                   const int32_t* wraparound, int32_t naxes, tpurt_cost* out);

/* ---------------------------------------------------------------- graphs (since 0.4) */
/* A sequence of planned calls over a set of buffers, validated once and launched many times.
 * Buffers are inputs and outputs (bound at each launch) or intermediates (the graph owns them:
 * one arena sized by liveness, so intermediates that are never live together share memory).
 * A call's tensors name a buffer through tpurt_graph_ref instead of a data pointer. */
typedef struct tpurt_graph tpurt_graph;
typedef enum { TPURT_BUFFER_INPUT = 0, TPURT_BUFFER_OUTPUT = 1, TPURT_BUFFER_INTERMEDIATE = 2 } tpurt_buffer_kind;
/* The tensor at `slot` of a call lives in `buffer` at `offset` bytes. slot >= 0: argument slot
 * (element `element` of a tensor list, else 0); slot < 0: output -slot-1. */
typedef struct tpurt_graph_ref {
  int32_t slot, element, buffer;
  int64_t offset;
} tpurt_graph_ref;
typedef struct tpurt_graph_stats {
  size_t struct_size;
  int32_t ncalls, nbuffers;
  int64_t intermediate_bytes; /* sum of the intermediates' sizes */
  int64_t arena_bytes;        /* what the graph allocates for them after liveness planning */
  int64_t scratch_bytes;      /* the largest call scratch (calls run one after another) */
  int64_t flops, bytes_moved; /* sums over the planned calls */
} tpurt_graph_stats;
tpurt_status tpurt_graph_create(int device, tpurt_graph** out);
void tpurt_graph_destroy(tpurt_graph* g); /* waits for its launches */
tpurt_status tpurt_graph_add_buffer(tpurt_graph* g, tpurt_buffer_kind kind, int64_t nbytes, int32_t* id);
/* Append a call (copied, lists included); tensors named in refs take no data pointer. */
tpurt_status tpurt_graph_add_call(tpurt_graph* g, const tpurt_op_call* call, const tpurt_graph_ref* refs, int nrefs);
/* Check every reference (buffer exists, the tensor fits in it), plan every call, lay out the
 * intermediates by liveness and allocate the arena and scratch. Once; the graph is then fixed. */
tpurt_status tpurt_graph_instantiate(tpurt_graph* g);
tpurt_status tpurt_graph_get_stats(const tpurt_graph* g, tpurt_graph_stats* out);
/* Run every call in order on `stream`. buffers[id] is the device pointer of each input and
 * output buffer (entries of intermediates are ignored). Enqueued as one command; errors are
 * reported like a kernel's. */
tpurt_status tpurt_graph_launch(tpurt_graph* g, int32_t stream, void* const* buffers);

/* ---------------------------------------------------------------- host kernels (since 0.5) */
/* A loop nest compiled for the host (torch.compile's generated C++ kernels): fn(args, msg,
 * msg_size) returns 0, or nonzero after writing why into msg. It runs on the stream's worker,
 * in order with the op launches around it, so it reads what earlier ops wrote and later ops
 * read what it writes, with no host synchronisation. args (device pointers and integers) are
 * copied, and so is name (for error messages). copies[i] snapshots nbytes at src and points
 * args[copies[i].arg] at the snapshot: a small host-memory input (a CPU scalar tensor) is read
 * as it was at launch, as CUDA passes scalars by value, however the host changes it later.
 * Snapshots travel in the command up to TPURT_HOST_KERNEL_COPY_BYTES together, beyond that in a
 * block of the stream's chip that the command frees once the kernel ran. Failures are reported
 * like a kernel's. */
typedef int (*tpurt_host_kernel_fn)(const int64_t* args, char* msg, size_t msg_size);
typedef struct tpurt_host_arg_copy {
  int32_t arg;
  int32_t nbytes;
  const void* src;
} tpurt_host_arg_copy;
#define TPURT_MAX_HOST_KERNEL_ARGS 512
#define TPURT_HOST_KERNEL_COPY_BYTES 1024 /* snapshots held in the command itself */
tpurt_status tpurt_host_kernel_launch(int32_t stream, tpurt_host_kernel_fn fn, const int64_t* args, int nargs,
                                      const char* name, const tpurt_host_arg_copy* copies, int ncopies);

/* ---------------------------------------------------------------- instruction sets (since 0.10; amx 0.14; avx512bf16 0.15) */
/* The library is built once per x86-64 level and torch_tpu loads one build: the one TPU_ISA
 * names, else the widest the host runs. X(name, compiler level, what the host needs), widest
 * first. Every build gives the same bits as every other with FMA (avx512, avx2); portable has
 * no FMA, so its contracted expressions round twice; amx is avx512 with products of bf16
 * values (DEFAULT precision) on the host's matrix unit, which rounds its sums its own way, and
 * avx512bf16 is avx512 with those products as AVX512-BF16 dot products, the avx512 build's bits
 * except that subnormal bf16 values and sums are flushed to zero (ARCHITECTURE.md, "Instruction
 * sets"). */
#define TPURT_ISA_LIST(X)                                                                   \
  X("amx", "x86-64-v4", "AVX-512 and AMX-BF16 (Sapphire Rapids and later; Linux must permit its state)") \
  X("avx512bf16", "x86-64-v4", "AVX-512 and AVX512-BF16 (AMD Zen 4, Intel Cooper Lake and later)") \
  X("avx512", "x86-64-v4", "AVX-512 F, BW, CD, DQ and VL")         \
  X("avx2", "x86-64-v3", "AVX2, FMA, F16C, BMI1 and BMI2")          \
  X("portable", "x86-64", "nothing beyond x86-64 (the only build on other CPUs)")
/* The instruction set this library was compiled for: a name of the list. */
const char* tpurt_isa(void);
/* "asan" for the build with AddressSanitizer + UBSan (runtime/Makefile `asan`), else NULL. */
const char* tpurt_sanitizer(void);
/* The i-th name of the list (widest first), NULL past its end. */
const char* tpurt_isa_name(int i);
/* What the named build needs from the CPU, and the compiler's name of that level (static
 * storage); NULL for a name not in the list. */
const char* tpurt_isa_needs(const char* name);
const char* tpurt_isa_level(const char* name);
/* 1 when this host's CPU runs the named build, else 0 (also for names not in the list). */
int tpurt_isa_host_runs(const char* name);

/* ---------------------------------------------------------------- environment (since 0.4) */
/* Every environment variable torch_tpu reads (the runtime, or Python through tpurt_env_get): X(enum, name, what it does). */
#define TPURT_ENV_LIST(X)                                                                                   \
  X(TPURT_ENV_ACCELERATOR_TYPE, "TPU_ACCELERATOR_TYPE", "emulated slice, e.g. v6e-8 (default v6e-1)")       \
  X(TPURT_ENV_VISIBLE_CHIPS, "TPU_VISIBLE_CHIPS", "comma-separated chips of this host the process sees")     \
  X(TPURT_ENV_WORKER_ID, "TPU_WORKER_ID", "this host's index in a multi-host slice (chip numbering)")       \
  X(TPURT_ENV_TOPOLOGY, "TPU_TOPOLOGY", "slice topology, e.g. 2x4 (default: the generation's for its size)") \
  X(TPURT_ENV_LAUNCH_BLOCKING, "TPU_LAUNCH_BLOCKING", "1: debug eager mode, every op synchronous")           \
  X(TPURT_ENV_DEFER_AND_FUSE, "TORCH_TPU_DEFER_AND_FUSE", "1: fused eager mode, elementwise chains run as one command (TPU_LAUNCH_BLOCKING wins)") \
  X(TPURT_ENV_ISA, "TPU_ISA", "the kernels' instruction set: amx, avx512bf16, avx512, avx2 or portable (default: the widest this host runs; read when torch_tpu is imported)") \
  X(TPURT_ENV_SANITIZER, "TPU_SANITIZER", "asan: load the runtime built with ASan + UBSan (make test-asan; needs the ASan runtime in LD_PRELOAD)") \
  X(TPURT_ENV_NUM_THREADS, "TPU_NUM_THREADS", "host threads the emulated chip computes with (default: all CPUs)") \
  X(TPURT_ENV_HBM_BYTES, "TPU_HBM_BYTES", "override each chip's HBM capacity in bytes (tests of OOM)")        \
  X(TPURT_ENV_EXPLAIN_RECOMPILES, "TPU_EXPLAIN_RECOMPILES", "1: torch.compile(backend='tpu') prints each recompile's cause") \
  X(TPURT_ENV_FAULT_ALLOC, "TPU_FAULT_ALLOC", "N: about one device allocation in N fails as out of memory (tests of OOM handling)") \
  X(TPURT_ENV_WORKER_HOSTNAMES, "TPU_WORKER_HOSTNAMES", "the slice's hosts, comma-separated, host TPU_WORKER_ID=i the i-th (launch addresses)") \
  X(TPURT_ENV_LOCAL_RANK, "LOCAL_RANK", "set by torchrun: with LOCAL_WORLD_SIZE and no TPU_VISIBLE_CHIPS, the process sees chip LOCAL_RANK of its host as tpu:0") \
  X(TPURT_ENV_LOCAL_WORLD_SIZE, "LOCAL_WORLD_SIZE", "set by torchrun: the processes on this host, at most its chips (one process per chip)")
typedef enum {
#define TPURT_X(e, name, doc) e,
  TPURT_ENV_LIST(TPURT_X)
#undef TPURT_X
  TPURT_ENV_COUNT
} tpurt_env;
/* The variable's name and description (static storage), NULL outside the table. */
const char* tpurt_env_name(int e);
const char* tpurt_env_doc(int e);
/* Its value in this process, NULL when unset or empty. */
const char* tpurt_env_get(tpurt_env e);

/* ---------------------------------------------------------------- chips */
typedef struct tpurt_chip_info {
  size_t struct_size;
  char generation[16];       /* "v6e" */
  char accelerator_type[32]; /* "v6e-1" */
  char topology[32];         /* "1x1", "2x4" */
  int32_t global_index;      /* chip index within the slice */
  int64_t hbm_bytes;
  double bf16_tflops;
  double hbm_GBps;
  double ici_GBps_bidir;
  int32_t mxu_dim;
  int32_t mxu_count;
  int32_t tensorcores;
  double usd_per_chip_hour; /* < 0 when not published */
  int32_t slice_chips;      /* chips in the slice (since 0.8) */
} tpurt_chip_info;

/* Reads TPU_ACCELERATOR_TYPE / TPU_VISIBLE_CHIPS (default: one v6e chip). Idempotent;
 * called implicitly by every other entry point. Fails with VALUE for an unknown type. */
tpurt_status tpurt_init(void);
int tpurt_device_count(void);
tpurt_status tpurt_chip_get_info(int device, tpurt_chip_info* out);
/* The figures of a generation as an emulated chip of it would report them (no device
 * involved): a generation's name or alias, or a slice name ("v6e-256"). Since 0.8. */
tpurt_status tpurt_generation_get_info(const char* generation, tpurt_chip_info* out);
/* Current device of the calling thread (default 0). */
int tpurt_device_get(void);
tpurt_status tpurt_device_set(int device);

/* ---------------------------------------------------------------- memory */
/* Allocate device memory from the caching allocator, ordered on `stream`. Fails with OOM
 * when the chip's HBM capacity would be exceeded, after flushing the cache once.
 * The caller owns the block until tpurt_free. nbytes == 0 gives a valid non-NULL block. */
tpurt_status tpurt_malloc(int device, size_t nbytes, int32_t stream, void** out);
/* Give a block back to the cache. NULL is ignored. */
void tpurt_free(void* ptr);
/* The block may be used by `stream` as well: it is not reused before that stream's
 * work issued so far completes. */
tpurt_status tpurt_record_stream(void* ptr, int32_t stream); /* status since 0.9 */
/* Device of a pointer returned by tpurt_malloc (or inside such a block), -1 if none. */
int tpurt_pointer_device(const void* ptr);
/* Release cached blocks of every device back to the host (synchronizes first). */
void tpurt_empty_cache(void);

typedef struct tpurt_memory_stats {
  size_t struct_size;
  int64_t allocated_bytes, allocated_peak;
  int64_t reserved_bytes, reserved_peak;
  int64_t requested_bytes;
  int64_t alloc_count, free_count;   /* client calls */
  int64_t segment_count;             /* live host segments */
  int64_t segment_alloc_count, segment_free_count;
  int64_t cache_flushes, oom_count;
  int64_t capacity_bytes;
  int64_t largest_free_block;        /* cached, reusable */
} tpurt_memory_stats;

tpurt_status tpurt_memory_get_stats(int device, tpurt_memory_stats* out);
tpurt_status tpurt_memory_reset_peak(int device);
tpurt_status tpurt_memory_reset_counts(int device);

/* ---------------------------------------------------------------- streams and events */
/* Streams are small integers per device: 0 is the default stream of every device.
 * A stream handle encodes (device, index): tpurt_stream_make(device, index). */
#define TPURT_MAX_STREAMS_PER_DEVICE 32
/* The stream tpu_dist's collectives run on (since 0.9); tpurt_stream_create never hands it out. */
#define TPURT_COMM_STREAM_INDEX (TPURT_MAX_STREAMS_PER_DEVICE - 1)
int32_t tpurt_stream_make(int device, int index);
int tpurt_stream_device(int32_t stream);
int tpurt_stream_index(int32_t stream);
/* A fresh stream index on device (1..MAX-1, recycled round-robin like CUDA's pool). */
tpurt_status tpurt_stream_create(int device, int32_t* out);
/* Current stream of the calling thread for a device (default stream unless set). */
int32_t tpurt_stream_get_current(int device);
void tpurt_stream_set_current(int32_t stream);
/* Wait for all work on the stream; returns the first kernel failure since the last
 * synchronizing call (and clears it). */
tpurt_status tpurt_stream_synchronize(int32_t stream);
/* 1 when all issued work completed. */
int tpurt_stream_query(int32_t stream);
tpurt_status tpurt_device_synchronize(int device);
/* Where the calling thread issues its next work from ("train.py:42"; static storage; NULL: not
 * known): each command it enqueues keeps it, and an asynchronous failure names it beside the op.
 * Since 0.11. */
void tpurt_set_issue_site(const char* site);
/* Run fn(arg) on the stream's worker, in order. fn's status is reported like a kernel's. */
tpurt_status tpurt_stream_enqueue(int32_t stream, tpurt_status (*fn)(void* arg), void* arg,
                                  void (*release)(void* arg), const char* what);

typedef struct tpurt_event tpurt_event;
tpurt_status tpurt_event_create(int enable_timing, tpurt_event** out);
void tpurt_event_destroy(tpurt_event* ev);
tpurt_status tpurt_event_record(tpurt_event* ev, int32_t stream);
/* Make `stream` wait until the event's last recording completes. */
tpurt_status tpurt_event_wait(tpurt_event* ev, int32_t stream);
/* 1 when the last recording completed (or it was never recorded). */
int tpurt_event_query(tpurt_event* ev);
tpurt_status tpurt_event_synchronize(tpurt_event* ev);
tpurt_status tpurt_event_elapsed_ms(tpurt_event* start, tpurt_event* end, double* out_ms);

/* ---------------------------------------------------------------- copies */
/* Host -> device and device -> host byte copies, ordered on `stream`. Both return after
 * the copy is done (host memory may be pageable). dev points into a tpurt_malloc block. */
tpurt_status tpurt_memcpy_h2d(int32_t stream, void* dev, const void* host, size_t nbytes);
tpurt_status tpurt_memcpy_d2h(int32_t stream, void* host, const void* dev, size_t nbytes);

/* ---------------------------------------------------------------- collectives (since 0.9) */
/* The emulated ICI between the processes of one host (one process per chip): a shared-memory
 * segment per process group. Rank 0 creates it (tpurt_comm_create), every rank opens it by name
 * (the name travels through the c10d store), and rank 0 unlinks it once all have it mapped, so
 * nothing is left behind however the job ends. Collectives are blocking calls on the calling
 * thread; every rank must issue the same ones in the same order. Each checks that the group's
 * ranks agree on what they call (a mismatch fails on every rank), fails within about a second on
 * every rank when a peer process dies, and fails at the group's timeout when a peer stops calling.
 * After any failure the group is broken: later calls fail at once. Reductions run in rank order,
 * once per element, so every rank gets bit-identical results; float16/bfloat16 accumulate in
 * float32. Byte counts and offsets are per rank; buffers are host-addressable tensor memory. */
typedef struct tpurt_comm tpurt_comm;
#define TPURT_COMM_KIND_LIST(X)                      \
  X(TPURT_COMM_ALL_REDUCE, "all_reduce")             \
  X(TPURT_COMM_REDUCE, "reduce")                     \
  X(TPURT_COMM_REDUCE_SCATTER, "reduce_scatter")     \
  X(TPURT_COMM_BROADCAST, "broadcast")               \
  X(TPURT_COMM_ALL_GATHER, "all_gather")             \
  X(TPURT_COMM_GATHER, "gather")                     \
  X(TPURT_COMM_SCATTER, "scatter")                   \
  X(TPURT_COMM_ALL_TO_ALL, "all_to_all")             \
  X(TPURT_COMM_BARRIER, "barrier")                   \
  X(TPURT_COMM_SEND_RECV, "send_recv")
typedef enum {
#define TPURT_X(e, name) e,
  TPURT_COMM_KIND_LIST(TPURT_X)
#undef TPURT_X
  TPURT_COMM_KIND_COUNT
} tpurt_comm_kind;
/* What this process's collectives did, per kind: calls that succeeded, their bytes (per rank:
 * all_reduce/reduce_scatter's input, all_gather's output, all_to_all's sends, the data otherwise),
 * wall seconds, and the seconds the emulated generation's ICI would take (the cost model,
 * tpurt_collective_cost, over a ring of the group's chips; NaN for kinds it has no model of). */
typedef struct {
  int64_t calls, bytes;
  double seconds, ici_seconds;
} tpurt_comm_kind_stats;
void tpurt_comm_get_stats(tpurt_comm_kind_stats out[TPURT_COMM_KIND_COUNT]);
/* Counts a collective that ran elsewhere (Gloo, for a group spanning hosts) in those stats: its
 * kind, bytes as above, wall seconds and group size (the ring the ICI estimate prices). Since 0.12. */
tpurt_status tpurt_comm_record(int kind, int64_t bytes, double seconds, int32_t group_size);
const char* tpurt_comm_kind_name(int kind);
/* The order of c10d::ReduceOp. */
typedef enum {
  TPURT_RED_SUM, TPURT_RED_AVG, TPURT_RED_PRODUCT, TPURT_RED_MIN, TPURT_RED_MAX,
  TPURT_RED_BAND, TPURT_RED_BOR, TPURT_RED_BXOR, TPURT_RED_PREMUL_SUM
} tpurt_reduce_op;
/* A new segment for `size` ranks; its name (at most 63 characters) goes to name_out. Also unlinks
 * the segments of earlier jobs whose creating process no longer exists. */
tpurt_status tpurt_comm_create(int size, char* name_out, size_t name_len);
/* `label` names the group in messages ("tpu_dist group 0"); timeout_s bounds every wait. */
tpurt_status tpurt_comm_open(const char* name, int rank, int size, double timeout_s, const char* label,
                             tpurt_comm** out);
tpurt_status tpurt_comm_unlink(const char* name);
void tpurt_comm_destroy(tpurt_comm* c);
/* Number of collectives this rank has issued on the group. */
uint64_t tpurt_comm_seq(const tpurt_comm* c);
void tpurt_comm_set_timeout(tpurt_comm* c, double timeout_s);
/* counted = 0: this group's collectives are not counted in tpurt_comm_get_stats. For a group that
 * is one part of a larger collective (the ranks of one host, in a group spanning hosts), whose
 * caller counts the whole once with tpurt_comm_record. Default 1. Since 0.13. */
void tpurt_comm_set_counted(tpurt_comm* c, int counted);
/* Messages name rank r as names[r] (size entries, copied): the ranks of one host in a group
 * spanning hosts keep their group-wide numbers. Since 0.13. */
tpurt_status tpurt_comm_set_rank_names(tpurt_comm* c, const int32_t* names);
/* Breaks the group on every rank with `message`: a failure outside the segment (the Gloo hop of a
 * group spanning hosts) ends the waits of this host's ranks too. Returns the failure. Since 0.13. */
tpurt_status tpurt_comm_fail(tpurt_comm* c, const char* message);
/* Whether a reduction exists for a dtype (no bitwise ops on floats, no avg/premul_sum on
 * integers or bool, only sums on complex): TPURT_OK or a VALUE failure saying why. */
tpurt_status tpurt_check_reduction(tpurt_dtype dtype, tpurt_reduce_op op);
/* out may equal in. count: elements per rank. scale: PREMUL_SUM's factor. */
tpurt_status tpurt_all_reduce(tpurt_comm* c, const void* in, void* out, int64_t count, tpurt_dtype dtype,
                              tpurt_reduce_op op, double scale);
/* Only root's out is written (others may pass NULL). */
tpurt_status tpurt_reduce(tpurt_comm* c, const void* in, void* out, int64_t count, tpurt_dtype dtype,
                          tpurt_reduce_op op, double scale, int root);
/* in: size * count elements, block r reduced over the ranks into rank r's out (count elements). */
tpurt_status tpurt_reduce_scatter(tpurt_comm* c, const void* in, void* out, int64_t count, tpurt_dtype dtype,
                                  tpurt_reduce_op op, double scale);
tpurt_status tpurt_broadcast(tpurt_comm* c, void* buf, int64_t bytes, int root);
/* out: size * bytes, rank r's in at r * bytes. */
tpurt_status tpurt_all_gather(tpurt_comm* c, const void* in, void* out, int64_t bytes);
/* root's out receives every rank's in (size * bytes); others may pass NULL. */
tpurt_status tpurt_gather(tpurt_comm* c, const void* in, void* out, int64_t bytes, int root);
/* root's in holds size * bytes; rank r gets block r. */
tpurt_status tpurt_scatter(tpurt_comm* c, const void* in, void* out, int64_t bytes, int root);
/* Byte counts and offsets per peer, as many as ranks: rank r's send to q must equal q's recv from r. */
tpurt_status tpurt_all_to_all(tpurt_comm* c, const void* in, const int64_t* send_bytes, const int64_t* send_offsets,
                              void* out, const int64_t* recv_bytes, const int64_t* recv_offsets);
tpurt_status tpurt_barrier(tpurt_comm* c);
/* Point-to-point: a batch of sends and receives progressed together (batch_isend_irecv), so
 * two ranks that send to each other do not wait on each other. In order per (peer, direction). */
typedef struct {
  int is_send, peer, tag;
  void* buf;
  int64_t bytes;
} tpurt_p2p;
tpurt_status tpurt_p2p_run(tpurt_comm* c, const tpurt_p2p* ops, int n);

/* ---------------------------------------------------------------- trace (since 0.8) */
/* While a trace records, every command a stream runs leaves one record: kernels, fused chains,
 * graphs, compiled kernels, copies, event records and waits. Calls run on the issuing thread
 * (debug mode, small ops on an idle stream, blocking launches) are recorded on their stream the
 * same way. A profiler turns the records into its device timeline. With no trace recording, a
 * command costs one test of a flag where it is issued, run and counted. */
#define TPURT_TRACE_MAX_ARGS 4
typedef struct tpurt_trace_arg {
  const char* key; /* static storage */
  double value;
} tpurt_trace_arg;
typedef struct tpurt_trace_record {
  size_t struct_size;
  int64_t start_ns, end_ns; /* when the command ran, on tpurt_trace_now_ns's clock */
  uint64_t tag;             /* the issuing thread's tag when it issued the command; 0: none (a
                               fused chain, whose calls were issued under several tags) */
  int32_t stream;           /* the stream handle (tpurt_stream_device / tpurt_stream_index) */
  int32_t nargs;
  /* "emulator_us": end - start in microseconds; for commands running op calls, summed over the
   * calls: "flops" and "bytes" (tpurt_plan's flops and bytes_moved) */
  tpurt_trace_arg args[TPURT_TRACE_MAX_ARGS];
  char name[64]; /* the kernel ("addmm"), "fused chain: add, mul", a compiled kernel's name,
                    "host-to-device copy", "event record", ... (cut at 63 characters) */
} tpurt_trace_record;
/* Start recording; the records of an earlier trace are dropped. */
tpurt_status tpurt_trace_start(void);
/* Wait until every stream ran the work issued to it (pending errors stay pending), then stop
 * recording. The records stay until the next tpurt_trace_start. */
void tpurt_trace_stop(void);
/* Records taken so far, in the order their commands started (on one stream: the order it ran
 * them). */
int64_t tpurt_trace_count(void);
/* Record i (0 <= i < tpurt_trace_count()); NULL out of range or while its command runs. Owned
 * by the runtime, valid until the next tpurt_trace_start. */
const tpurt_trace_record* tpurt_trace_get(int64_t i);
/* Records the trace had no room for (it holds the first 1M). */
int64_t tpurt_trace_dropped(void);
/* The calling thread's tag, which commands it issues while a trace records carry: a profiler sets
 * the id of the host op being dispatched, so device records link back to it. 0: none. */
void tpurt_trace_set_tag(uint64_t tag);
/* Now on the records' clock (CLOCK_MONOTONIC), in nanoseconds. */
int64_t tpurt_trace_now_ns(void);

/* ---------------------------------------------------------------- modes */
/* X(enum, value, TorchTPU's name): strict runs asynchronously (the default), debug
 * synchronously (TPU_LAUNCH_BLOCKING=1), fused (since 0.5; TORCH_TPU_DEFER_AND_FUSE=1) as strict,
 * except that elementwise calls over dense tensors of one size are deferred into a per-stream
 * chain that runs as one command, tile by tile, when anything else observes the stream: results
 * are bit-identical to strict's. */
#define TPURT_EAGER_MODE_LIST(X)     \
  X(TPURT_MODE_STRICT, 0, "strict")  \
  X(TPURT_MODE_DEBUG, 1, "debug")    \
  X(TPURT_MODE_FUSED, 2, "fused")
typedef enum {
#define TPURT_X(e, value, name) e = value,
  TPURT_EAGER_MODE_LIST(TPURT_X)
#undef TPURT_X
} tpurt_eager_mode;
/* Switching mode first enqueues every stream's pending fused chain. */
void tpurt_set_eager_mode(tpurt_eager_mode m);
tpurt_eager_mode tpurt_get_eager_mode(void);
/* Precision stamped on ops issued from now on by the calling thread's process. */
void tpurt_set_matmul_precision(tpurt_precision p);
tpurt_precision tpurt_get_matmul_precision(void);

/* ---------------------------------------------------------------- metrics */
typedef struct tpurt_metrics {
  size_t struct_size;
  int64_t ops_executed;
  int64_t ops_f64; /* ops that ran with float64 tensors: not native on real TPUs */
  int64_t h2d_count, h2d_bytes;
  int64_t d2h_count, d2h_bytes;
  int64_t d2d_count, d2d_bytes;
  int64_t alloc_count;
  int64_t kernel_errors;
  int64_t fused_chains, fused_ops; /* since 0.5: chains of two or more ops run as one command, and their ops */
  int64_t unplanned_temp_bytes; /* since 0.6: kernel temporaries beyond the call's scratch (a plan that undercounts) */
} tpurt_metrics;
void tpurt_metrics_get(tpurt_metrics* out);
/* Executions of op id so far. */
int64_t tpurt_metrics_op_count(int op);
/* Bytes of temporaries op id's kernel took beyond its calls' scratch so far. Since 0.6. */
int64_t tpurt_metrics_op_unplanned_bytes(int op);
void tpurt_metrics_reset(void); /* and the collectives' (tpurt_comm_get_stats) */

#ifdef __cplusplus
}
#endif
#endif /* TPURT_H */
