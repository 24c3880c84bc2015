/* Fused eager mode: chains of elementwise calls built by hand (tpurt_op_lookup /
 * tpurt_op_launch) give results bit-identical to strict mode for sizes below, at and across the
 * tile, in float32 and bfloat16; a chain waits until the stream is observed (synchronize,
 * a side stream, a mode change); a non-fusable op and the length limit split chains; a failing
 * call is reported at the next synchronization naming its kernel; memory freed while a chain
 * is pending is not handed to another stream; shifted views of a chain's outputs end it; foreach
 * calls chain lane by lane, and not when one lane reads another's tensor. Run
 * under ASan + UBSan by `make test`. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "internal.h"

static tpurt_tensor dense1d(void* data, int dtype, int64_t n) {
  tpurt_tensor t = {.data = data, .dtype = dtype, .ndim = 1};
  t.sizes[0] = n;
  t.strides[0] = 1;
  return t;
}
static tpurt_tensor scalar0d(void* data, int dtype) { return (tpurt_tensor){.data = data, .dtype = dtype, .ndim = 0}; }
static tpurt_value tv(tpurt_tensor t) { return (tpurt_value){.kind = TPURT_V_TENSOR, .scalar_dtype = -1, .t = t}; }
static tpurt_value fv(double f) { return (tpurt_value){.kind = TPURT_V_FLOAT, .scalar_dtype = -1, .f = f}; }

static tpurt_op_call make_call(const char* name, int nargs) {
  tpurt_op_call c;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  c.op = tpurt_op_lookup(name);
  c.nargs = nargs;
  c.nouts = 1;
  c.precision = TPURT_PRECISION_HIGHEST;
  CHECK(c.op >= 0, "no op %s", name);
  return c;
}

static void launch(const tpurt_op_call* c, int32_t stream) {
  tpurt_status s = tpurt_op_launch(stream, c);
  CHECK(s == TPURT_OK, "launch %s: %s", tpurt_op_kernel_name(c->op), tpurt_last_error());
}

/* out = op(a) */
static void unary(const char* op, tpurt_tensor a, tpurt_tensor out) {
  tpurt_op_call c = make_call(op, 1);
  c.args[0] = tv(a);
  c.outs[0] = out;
  launch(&c, 0);
}
/* out = op(a, b) (b a tensor or a value) */
static void binary(const char* op, tpurt_tensor a, tpurt_value b, tpurt_tensor out) {
  tpurt_op_call c = make_call(op, 2);
  c.args[0] = tv(a);
  c.args[1] = b;
  c.outs[0] = out;
  launch(&c, 0);
}

static tpurt_metrics metrics(void) {
  tpurt_metrics m = {.struct_size = sizeof m};
  tpurt_metrics_get(&m);
  return m;
}

/* Deterministic values in [-4, 4), with a few special ones. */
static void fill_input(float* x, int64_t n) {
  uint32_t s = 12345;
  for (int64_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = (float)(s >> 8) / 16777216.0f * 8.0f - 4.0f;
  }
  if (n > 3) x[0] = 0.0f, x[1] = -0.0f, x[2] = 1e-30f;
}

#define NBUF 12
typedef struct program {
  int dtype;
  int64_t n;
  void* buf[NBUF]; /* device memory, n elements each */
  void* zero_dim;  /* a 0-dim device operand */
} program;

static void program_init(program* p, int dtype, int64_t n) {
  p->dtype = dtype;
  p->n = n;
  size_t es = tpurt_dtype_size((tpurt_dtype)dtype);
  float* host = malloc((size_t)n * sizeof(float));
  fill_input(host, n);
  for (int b = 0; b < NBUF; b++) {
    CHECK(tpurt_malloc(0, (size_t)n * es, 0, &p->buf[b]) == TPURT_OK, "malloc");
    memset(p->buf[b], 0x5a, (size_t)n * es);
  }
  /* x in the wanted dtype */
  if (dtype == TPURT_F32) memcpy(p->buf[0], host, (size_t)n * 4);
  else
    for (int64_t i = 0; i < n; i++) ((uint16_t*)p->buf[0])[i] = tpurt_f32_to_bf16(host[i]);
  tpurt_malloc(0, 8, 0, &p->zero_dim);
  if (dtype == TPURT_F32) *(float*)p->zero_dim = 0.75f;
  else *(uint16_t*)p->zero_dim = tpurt_f32_to_bf16(0.75f);
  free(host);
}

static void program_free(program* p) {
  for (int b = 0; b < NBUF; b++) tpurt_free(p->buf[b]);
  tpurt_free(p->zero_dim);
}

static tpurt_tensor B(const program* p, int b) { return dense1d(p->buf[b], p->dtype, p->n); }

/* An activation/normalisation-style chain of 11 elementwise calls (one in place, one with a 0-dim
 * operand, scalars); with `reduce_at` >= 0 a sum (a reduction: not fusable) of buffer 5 comes
 * after that many calls and the next call multiplies by it. */
static void program_issue(const program* p, int reduce_at) {
  int k = 0;
#define STEP(stmt)                                                                                 \
  do {                                                                                             \
    if (k++ == reduce_at) {                                                                        \
      tpurt_op_call s = make_call("sum", 2);                                                       \
      s.args[0] = tv(B(p, 5));                                                                     \
      s.args[1] = (tpurt_value){.kind = TPURT_V_NONE, .scalar_dtype = -1};                         \
      s.outs[0] = scalar0d(p->zero_dim, p->dtype);                                                 \
      launch(&s, 0);                                                                               \
    }                                                                                              \
    stmt;                                                                                          \
  } while (0)
  STEP(unary("sigmoid", B(p, 0), B(p, 1)));
  STEP(binary("mul.Tensor", B(p, 0), tv(B(p, 1)), B(p, 2))); /* x * sigmoid(x) */
  STEP(unary("tanh", B(p, 2), B(p, 3)));
  STEP(binary("mul.Scalar", B(p, 3), fv(1.7), B(p, 4)));
  {
    tpurt_op_call c = make_call("add.Tensor", 3);
    c.args[0] = tv(B(p, 4));
    c.args[1] = tv(B(p, 0));
    c.args[2] = fv(0.5);
    c.outs[0] = B(p, 5);
    STEP(launch(&c, 0));
  }
  STEP(unary("exp_", B(p, 5), B(p, 5))); /* in place */
  {
    tpurt_op_call c = make_call("clamp", 3);
    c.args[0] = tv(B(p, 5));
    c.args[1] = fv(0.25);
    c.args[2] = fv(2.5);
    c.outs[0] = B(p, 6);
    STEP(launch(&c, 0));
  }
  STEP(binary("mul.Tensor", B(p, 6), tv(scalar0d(p->zero_dim, p->dtype)), B(p, 7)));
  STEP(unary("abs", B(p, 7), B(p, 8)));
  STEP(unary("sqrt", B(p, 8), B(p, 9)));
  STEP(unary("reciprocal", B(p, 9), B(p, 10)));
#undef STEP
}

static int program_equal(const program* a, const program* b) {
  size_t bytes = (size_t)a->n * tpurt_dtype_size((tpurt_dtype)a->dtype);
  for (int k = 0; k < NBUF; k++)
    if (memcmp(a->buf[k], b->buf[k], bytes)) return 0;
  return memcmp(a->zero_dim, b->zero_dim, tpurt_dtype_size((tpurt_dtype)a->dtype)) == 0;
}

/* Sizes: one tile, exactly two, three plus a one-element remainder, not a multiple, many. */
static const int64_t sizes[] = {5000, 65536, 3 * 32768 + 1, 100003, (1 << 20) + 7};

static void test_bit_identical(void) {
  int dtypes[] = {TPURT_F32, TPURT_BF16};
  for (size_t d = 0; d < 2; d++)
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
      for (int reduce_at = -1; reduce_at <= 5; reduce_at += 6) {
        program strict, fused;
        program_init(&strict, dtypes[d], sizes[i]);
        program_init(&fused, dtypes[d], sizes[i]);
        tpurt_set_eager_mode(TPURT_MODE_STRICT);
        program_issue(&strict, reduce_at);
        CHECK(tpurt_stream_synchronize(0) == TPURT_OK, "strict: %s", tpurt_last_error());
        tpurt_set_eager_mode(TPURT_MODE_FUSED);
        tpurt_metrics m0 = metrics();
        program_issue(&fused, reduce_at);
        /* nothing ran yet: the chain waits for the stream to be observed */
        if (reduce_at < 0)
          CHECK(((unsigned char*)fused.buf[10])[0] == 0x5a, "n=%lld: the chain ran before synchronize",
                (long long)sizes[i]);
        CHECK(tpurt_stream_synchronize(0) == TPURT_OK, "fused: %s", tpurt_last_error());
        tpurt_metrics m1 = metrics();
        tpurt_set_eager_mode(TPURT_MODE_STRICT);
        CHECK(program_equal(&strict, &fused), "%s n=%lld reduce_at=%d: fused differs from strict",
              tpurt_dtype_name((tpurt_dtype)dtypes[d]), (long long)sizes[i], reduce_at);
        int chains = reduce_at < 0 ? 1 : 2;
        CHECK(m1.fused_chains - m0.fused_chains == chains && m1.fused_ops - m0.fused_ops == 11,
              "n=%lld: %lld chains of %lld ops, expected %d of 11", (long long)sizes[i],
              (long long)(m1.fused_chains - m0.fused_chains), (long long)(m1.fused_ops - m0.fused_ops), chains);
        CHECK(m1.ops_executed - m0.ops_executed == 11 + (reduce_at >= 0), "each call counted once: %lld",
              (long long)(m1.ops_executed - m0.ops_executed));
        program_free(&strict);
        program_free(&fused);
      }
}

/* 40 in-place calls: chains of 16, 16 and 8; the same result as strict. */
static void test_length_limit(void) {
  int64_t n = 100003;
  float *a, *b;
  tpurt_malloc(0, (size_t)n * 4, 0, (void**)&a);
  tpurt_malloc(0, (size_t)n * 4, 0, (void**)&b);
  fill_input(a, n);
  memcpy(b, a, (size_t)n * 4);
  float* bufs[2] = {a, b};
  tpurt_metrics m0 = {0}, m1 = {0};
  for (int mode = 0; mode < 2; mode++) {
    tpurt_set_eager_mode(mode ? TPURT_MODE_FUSED : TPURT_MODE_STRICT);
    m0 = metrics();
    tpurt_tensor t = dense1d(bufs[mode], TPURT_F32, n);
    for (int k = 0; k < 40; k++) binary(k % 2 ? "mul_.Scalar" : "add_.Scalar", t, fv(k % 2 ? 1.01 : -0.03), t);
    CHECK(tpurt_stream_synchronize(0) == TPURT_OK, "%s", tpurt_last_error());
    m1 = metrics();
  }
  tpurt_set_eager_mode(TPURT_MODE_STRICT);
  CHECK(!memcmp(a, b, (size_t)n * 4), "40 chained calls differ from strict");
  CHECK(m1.fused_chains - m0.fused_chains == 3 && m1.fused_ops - m0.fused_ops == 40, "%lld chains, %lld ops",
        (long long)(m1.fused_chains - m0.fused_chains), (long long)(m1.fused_ops - m0.fused_ops));
  tpurt_free(a);
  tpurt_free(b);
}

/* A kernel failing inside a chain (gcd has no float kernel) is the stream's pending error,
 * raised at the next synchronization and naming gcd; the calls after it still ran. */
static void test_error(void) {
  int64_t n = 70000;
  float *x, *y, *z, *w;
  tpurt_malloc(0, (size_t)n * 4, 0, (void**)&x);
  tpurt_malloc(0, (size_t)n * 4, 0, (void**)&y);
  tpurt_malloc(0, (size_t)n * 4, 0, (void**)&z);
  tpurt_malloc(0, (size_t)n * 4, 0, (void**)&w);
  fill_input(x, n);
  tpurt_set_eager_mode(TPURT_MODE_FUSED);
  tpurt_metrics m0 = metrics();
  unary("sigmoid", dense1d(x, TPURT_F32, n), dense1d(y, TPURT_F32, n));
  binary("gcd", dense1d(y, TPURT_F32, n), tv(dense1d(y, TPURT_F32, n)), dense1d(z, TPURT_F32, n));
  unary("neg", dense1d(x, TPURT_F32, n), dense1d(w, TPURT_F32, n));
  tpurt_status s = tpurt_stream_synchronize(0);
  const char* msg = tpurt_last_error();
  CHECK(s == TPURT_ERR_UNSUPPORTED, "status %s", tpurt_status_name(s));
  CHECK(strstr(msg, "kernel 'gcd' failed") && strstr(msg, "not implemented for 'Float'") &&
            strstr(msg, "call 2 of a fused chain of 3"),
        "the message names the op: %s", msg);
  tpurt_metrics m1 = metrics();
  CHECK(m1.kernel_errors > m0.kernel_errors && m1.fused_chains == m0.fused_chains + 1, "counted");
  int later_ran = 1;
  for (int64_t i = 0; i < n; i++) later_ran &= w[i] == -x[i];
  CHECK(later_ran, "the call after the failing one ran");
  CHECK(tpurt_stream_synchronize(0) == TPURT_OK, "the error is reported once");
  tpurt_set_eager_mode(TPURT_MODE_STRICT);
  tpurt_free(x);
  tpurt_free(y);
  tpurt_free(z);
  tpurt_free(w);
}

/* A block freed while a pending chain still uses it is not given to another stream (nor to a
 * kernel temporary) until the chain ran; on its own stream it is, in stream order. */
static void test_free_while_pending(void) {
  int64_t n = 50000;
  size_t bytes = (size_t)n * 4;
  float *x, *y;
  tpurt_malloc(0, bytes, 0, (void**)&x);
  tpurt_malloc(0, bytes, 0, (void**)&y);
  fill_input(x, n);
  tpurt_set_eager_mode(TPURT_MODE_FUSED);
  unary("exp", dense1d(x, TPURT_F32, n), dense1d(y, TPURT_F32, n));
  unary("neg_", dense1d(y, TPURT_F32, n), dense1d(y, TPURT_F32, n));
  tpurt_free(x); /* the chain still reads x */
  int32_t side;
  tpurt_stream_create(0, &side);
  void* other;
  CHECK(tpurt_malloc(0, bytes, side, &other) == TPURT_OK && other != x, "another stream got a block the chain uses");
  void* same;
  CHECK(tpurt_malloc(0, bytes, 0, &same) == TPURT_OK && same == x, "the chain's own stream reuses it in order");
  tpurt_free(same);
  CHECK(tpurt_stream_synchronize(0) == TPURT_OK, "%s", tpurt_last_error());
  void* after;
  CHECK(tpurt_malloc(0, bytes, side, &after) == TPURT_OK && after == x, "reusable once the chain ran");
  tpurt_set_eager_mode(TPURT_MODE_STRICT);
  tpurt_free(other);
  tpurt_free(after);
  tpurt_free(y);
}

/* Calls meeting a chain's tensors shifted by one element end the chain: tile by tile they would
 * read elements the chain has not written yet (case 0: a shifted read of an output) or overwrite
 * elements it has yet to read (case 1: a shifted write over an input). Tiles racing on threads
 * may hide a wrong result, so the chain's split is checked too. */
static void test_shifted_view(void) {
  int64_t n = 100003;
  for (int shift_write = 0; shift_write < 2; shift_write++) {
    float *x[2], *buf[2], *res[2];
    int64_t chains = 0;
    for (int mode = 0; mode < 2; mode++) {
      tpurt_set_eager_mode(mode ? TPURT_MODE_FUSED : TPURT_MODE_STRICT);
      tpurt_malloc(0, (size_t)n * 4, 0, (void**)&x[mode]);
      tpurt_malloc(0, (size_t)(n + 1) * 4, 0, (void**)&buf[mode]);
      tpurt_malloc(0, (size_t)n * 4, 0, (void**)&res[mode]);
      fill_input(x[mode], n);
      fill_input(buf[mode], n + 1);
      tpurt_tensor xt = dense1d(x[mode], TPURT_F32, n), lo = dense1d(buf[mode], TPURT_F32, n),
                   hi = dense1d(buf[mode] + 1, TPURT_F32, n), rt = dense1d(res[mode], TPURT_F32, n);
      tpurt_metrics m0 = metrics();
      if (!shift_write) {
        unary("exp", xt, lo);
        unary("neg", hi, rt);
      } else {
        unary("neg", lo, rt);
        unary("exp", xt, hi);
      }
      CHECK(tpurt_stream_synchronize(0) == TPURT_OK, "%s", tpurt_last_error());
      chains += metrics().fused_chains - m0.fused_chains;
    }
    tpurt_set_eager_mode(TPURT_MODE_STRICT);
    CHECK(chains == 0, "shift_write=%d: the shifted call joined the chain", shift_write);
    CHECK(!memcmp(res[0], res[1], (size_t)n * 4) && !memcmp(buf[0], buf[1], (size_t)(n + 1) * 4),
          "shift_write=%d: fused differs from strict", shift_write);
    for (int mode = 0; mode < 2; mode++) tpurt_free(x[mode]), tpurt_free(buf[mode]), tpurt_free(res[mode]);
  }
}

/* No tile is one element long: bfloat16 * int32 rounds the integers to bfloat16 (257 -> 256), but
 * a one-element int32 operand is a "one value" operand taken unrounded (CPU's reduced-float
 * rule for mul), so a last tile of one element would differ from strict mode. */
static void test_one_element_tile(void) {
  int64_t n = 3 * 32768 + 1;
  uint16_t *x, *out[2];
  int32_t* y;
  tpurt_malloc(0, (size_t)n * 2, 0, (void**)&x);
  tpurt_malloc(0, (size_t)n * 4, 0, (void**)&y);
  for (int64_t i = 0; i < n; i++) x[i] = tpurt_f32_to_bf16(1.5f), y[i] = 257; /* 1.5 * 256 = 384; 1.5 * 257 -> 386 */
  for (int mode = 0; mode < 2; mode++) {
    tpurt_set_eager_mode(mode ? TPURT_MODE_FUSED : TPURT_MODE_STRICT);
    tpurt_malloc(0, (size_t)n * 2, 0, (void**)&out[mode]);
    tpurt_tensor o = dense1d(out[mode], TPURT_BF16, n);
    binary("mul.Tensor", dense1d(x, TPURT_BF16, n), tv(dense1d(y, TPURT_I32, n)), o);
    unary("neg_", o, o);
    CHECK(tpurt_stream_synchronize(0) == TPURT_OK, "%s", tpurt_last_error());
  }
  tpurt_set_eager_mode(TPURT_MODE_STRICT);
  CHECK(!memcmp(out[0], out[1], (size_t)n * 2), "bf16 * int32 over 3 tiles + 1 element differs from strict");
  CHECK(tpurt_bf16_to_f32(out[0][n - 1]) == -384.0f, "257 rounds to 256 in bfloat16");
  tpurt_free(x);
  tpurt_free(y);
  tpurt_free(out[0]);
  tpurt_free(out[1]);
}

/* A side stream's call comes after the default stream's earlier work, its pending chain too. */
static void test_side_stream(void) {
  int64_t n = 80000;
  float *x, *y, *z;
  tpurt_malloc(0, (size_t)n * 4, 0, (void**)&x);
  tpurt_malloc(0, (size_t)n * 4, 0, (void**)&y);
  tpurt_malloc(0, (size_t)n * 4, 0, (void**)&z);
  fill_input(x, n);
  for (int64_t i = 0; i < n; i++) y[i] = -1.0f; /* what y holds unless the chain ran */
  int32_t side;
  tpurt_stream_create(0, &side);
  tpurt_set_eager_mode(TPURT_MODE_FUSED);
  unary("exp", dense1d(x, TPURT_F32, n), dense1d(y, TPURT_F32, n));
  unary("sqrt_", dense1d(y, TPURT_F32, n), dense1d(y, TPURT_F32, n));
  tpurt_op_call c = make_call("neg", 1);
  c.args[0] = tv(dense1d(y, TPURT_F32, n));
  c.outs[0] = dense1d(z, TPURT_F32, n);
  launch(&c, side);
  CHECK(tpurt_stream_synchronize(side) == TPURT_OK, "%s", tpurt_last_error());
  int ok = 1;
  for (int64_t i = 0; i < n; i++) ok &= z[i] == -y[i] && y[i] > 0;
  CHECK(ok, "the side stream read the default stream's chain output");
  /* a mode change enqueues pending chains: y changes without any synchronization */
  unary("neg_", dense1d(x, TPURT_F32, n), dense1d(x, TPURT_F32, n));
  unary("neg_", dense1d(y, TPURT_F32, n), dense1d(y, TPURT_F32, n));
  float before = y[n - 1];
  tpurt_set_eager_mode(TPURT_MODE_STRICT);
  /* watch the stream's completion counter (which neither flushes nor waits), not y itself: reading
   * y while the chain writes it would be a data race (ThreadSanitizer reports it) */
  uint64_t enqueued = tpurt_stream_issued_seq(0);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    if (tpurt_stream_completed_seq(0) >= enqueued) break;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (t1.tv_sec - t0.tv_sec > 10) break;
  }
  CHECK(y[n - 1] == -before, "a mode change enqueued the pending chain");
  tpurt_stream_synchronize(0);
  tpurt_free(x);
  tpurt_free(y);
  tpurt_free(z);
}

/* A host kernel (torch.compile's loops) and an event recorded after a chain come after it: their
 * enqueue puts the chain first. The host kernel copies the chain's output; the event's
 * synchronization alone (no stream synchronize) sees the chain done. */
static int copy_kernel(const int64_t* args, char* msg, size_t msg_size) {
  memcpy((void*)(intptr_t)args[1], (const void*)(intptr_t)args[0], (size_t)args[2]);
  return 0;
}

static void test_host_kernel_and_event(void) {
  int64_t n = 60000;
  float *x, *y, *z;
  tpurt_malloc(0, (size_t)n * 4, 0, (void**)&x);
  tpurt_malloc(0, (size_t)n * 4, 0, (void**)&y);
  tpurt_malloc(0, (size_t)n * 4, 0, (void**)&z);
  fill_input(x, n);
  for (int64_t i = 0; i < n; i++) y[i] = z[i] = -1.0f;
  tpurt_set_eager_mode(TPURT_MODE_FUSED);
  unary("exp", dense1d(x, TPURT_F32, n), dense1d(y, TPURT_F32, n));
  unary("sqrt_", dense1d(y, TPURT_F32, n), dense1d(y, TPURT_F32, n));
  int64_t args[3] = {(int64_t)(intptr_t)y, (int64_t)(intptr_t)z, n * 4};
  CHECK(tpurt_host_kernel_launch(0, copy_kernel, args, 3, "copy", NULL, 0) == TPURT_OK, "%s", tpurt_last_error());
  unary("neg_", dense1d(y, TPURT_F32, n), dense1d(y, TPURT_F32, n));
  binary("mul_.Scalar", dense1d(y, TPURT_F32, n), fv(2.0), dense1d(y, TPURT_F32, n));
  tpurt_event* ev;
  tpurt_event_create(0, &ev);
  CHECK(tpurt_event_record(ev, 0) == TPURT_OK && tpurt_event_synchronize(ev) == TPURT_OK, "event");
  int ok = 1;
  for (int64_t i = 0; i < n; i++) ok &= z[i] > 0 && y[i] == -2 * z[i];
  CHECK(ok, "the host kernel ran after the chain before it, the event after the chain before it");
  tpurt_event_destroy(ev);
  tpurt_set_eager_mode(TPURT_MODE_STRICT);
  tpurt_free(x);
  tpurt_free(y);
  tpurt_free(z);
}

/* Foreach calls chain lane by lane: two lanes (3 tiles + 1 element, one short tile) through
 * mul_.Scalar, add_.List and sqrt_, bit-identical to strict in one chain; and a chain where lane 1
 * reads what lane 0 writes (add_.List of [a, b] and [b, a]) must not run lane by lane. */
static tpurt_value lv(const tpurt_tensor* ts, int n) {
  return (tpurt_value){.kind = TPURT_V_TENSORS, .n = n, .scalar_dtype = -1, .tensors = ts};
}
static void foreach_call(const char* op, tpurt_value a, tpurt_value b, const tpurt_tensor* outs, int n) {
  int two = b.kind != TPURT_V_NONE;
  tpurt_op_call c = make_call(op, two ? 3 : 2);
  c.nouts = 0;
  c.args[0] = a;
  if (two) c.args[1] = b;
  c.args[two ? 2 : 1] = lv(outs, n);
  launch(&c, 0);
}
static void test_foreach_lanes(void) {
  const int64_t n[2] = {3 * 32768 + 1, 5000};
  for (int crossed = 0; crossed < 2; crossed++) {
    float* buf[2][2];
    int64_t chains = 0, ops = 0;
    for (int mode = 0; mode < 2; mode++) {
      tpurt_set_eager_mode(mode ? TPURT_MODE_FUSED : TPURT_MODE_STRICT);
      tpurt_tensor t[2], swapped[2];
      for (int i = 0; i < 2; i++) {
        int64_t len = crossed ? n[0] : n[i]; /* crossed lanes hold tensors of one size */
        tpurt_malloc(0, (size_t)len * 4, 0, (void**)&buf[mode][i]);
        fill_input(buf[mode][i], len);
        for (int64_t k = 0; k < len; k++) buf[mode][i][k] = buf[mode][i][k] * buf[mode][i][k] + (float)i;
        t[i] = dense1d(buf[mode][i], TPURT_F32, len);
      }
      swapped[0] = t[1], swapped[1] = t[0];
      tpurt_metrics m0 = metrics();
      foreach_call("_foreach_mul_.Scalar", lv(t, 2), fv(0.75), t, 2);
      foreach_call("_foreach_add_.List", lv(t, 2), crossed ? lv(swapped, 2) : lv(t, 2), t, 2);
      foreach_call("_foreach_sqrt_", lv(t, 2), (tpurt_value){.kind = TPURT_V_NONE}, t, 2);
      CHECK(tpurt_stream_synchronize(0) == TPURT_OK, "%s", tpurt_last_error());
      chains += metrics().fused_chains - m0.fused_chains;
      ops += metrics().fused_ops - m0.fused_ops;
    }
    tpurt_set_eager_mode(TPURT_MODE_STRICT);
    if (crossed) CHECK(ops < 3, "crossed lanes: %lld calls fused lane by lane", (long long)ops);
    else CHECK(chains == 1 && ops == 3, "foreach: %lld chains of %lld calls, want 1 of 3", (long long)chains, (long long)ops);
    for (int i = 0; i < 2; i++) {
      int64_t len = crossed ? n[0] : n[i];
      CHECK(!memcmp(buf[0][i], buf[1][i], (size_t)len * 4), "crossed=%d lane %d: fused differs from strict", crossed, i);
      tpurt_free(buf[0][i]);
      tpurt_free(buf[1][i]);
    }
  }
}

int main(void) {
  CHECK(tpurt_init() == TPURT_OK, "%s", tpurt_last_error());
  CHECK(tpurt_get_eager_mode() == TPURT_MODE_STRICT, "strict by default");
  test_bit_identical();
  test_length_limit();
  test_error();
  test_free_while_pending();
  test_shifted_view();
  test_one_element_tile();
  test_side_stream();
  test_host_kernel_and_event();
  test_foreach_lanes();
  return CHECK_DONE();
}
