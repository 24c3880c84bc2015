/* The trace (tpurt.h 0.8): nothing is recorded unless a trace records; while one does, every
 * command leaves a record on its stream with its name, its issuing thread's tag, its times (in
 * order on a stream) and args (emulator_us; the plan's flops and bytes for op calls), whether
 * the worker ran it, the issuing thread ran it inline (small op on an idle stream, debug mode),
 * or it was a fused chain (no tag), a copy or a compiled kernel (its own name); stop waits for the
 * work issued; a new trace starts empty. Run under ASan + UBSan by `make test`. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "internal.h"

static tpurt_tensor dense(void* data, int64_t rows, int64_t cols) {
  tpurt_tensor t = {.data = data, .dtype = TPURT_F32, .ndim = 2};
  t.sizes[0] = rows, t.sizes[1] = cols;
  t.strides[0] = cols, t.strides[1] = 1;
  return t;
}
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
  CHECK(tpurt_op_launch(stream, c) == TPURT_OK, "launch %s: %s", tpurt_op_kernel_name(c->op), tpurt_last_error());
}

static void mm(tpurt_tensor a, tpurt_tensor b, tpurt_tensor out, int32_t stream) {
  tpurt_op_call c = make_call("mm", 2);
  c.args[0] = tv(a);
  c.args[1] = tv(b);
  c.outs[0] = out;
  launch(&c, stream);
}

static void add(tpurt_tensor a, tpurt_tensor b, tpurt_tensor out, int32_t stream) {
  tpurt_op_call c = make_call("add.Tensor", 3);
  c.args[0] = tv(a);
  c.args[1] = tv(b);
  c.args[2] = fv(1.0);
  c.outs[0] = out;
  launch(&c, stream);
}

static void* device_zeros(size_t bytes) {
  void* p = NULL;
  CHECK(tpurt_malloc(0, bytes, 0, &p) == TPURT_OK, "malloc: %s", tpurt_last_error());
  memset(p, 0, bytes);
  return p;
}

static double arg(const tpurt_trace_record* r, const char* key) {
  for (int i = 0; i < r->nargs; i++)
    if (strcmp(r->args[i].key, key) == 0) return r->args[i].value;
  return NAN;
}

/* The records of the finished trace, checked for what every record holds. */
static int collect(const tpurt_trace_record** out, int max) {
  int n = (int)tpurt_trace_count();
  CHECK(n <= max, "%d records", n);
  for (int i = 0; i < n && i < max; i++) {
    const tpurt_trace_record* r = out[i] = tpurt_trace_get(i);
    CHECK(r != NULL, "record %d is closed after stop", i);
    if (!r) return 0;
    CHECK(r->struct_size == sizeof *r && r->end_ns > r->start_ns, "%s: times %lld..%lld", r->name,
          (long long)r->start_ns, (long long)r->end_ns);
    CHECK(fabs(arg(r, "emulator_us") - (double)(r->end_ns - r->start_ns) / 1e3) < 1e-6, "%s: emulator_us", r->name);
  }
  CHECK(tpurt_trace_get(n) == NULL && tpurt_trace_get(-1) == NULL, "out of range");
  CHECK(tpurt_trace_dropped() == 0, "nothing dropped");
  return n < max ? n : max;
}

static int find(const tpurt_trace_record** rs, int n, const char* name, int from) {
  for (int i = from; i < n; i++)
    if (strcmp(rs[i]->name, name) == 0) return i;
  return -1;
}

enum { M = 64, K = 96, N = 80 };

static void test_off_records_nothing(float* a, float* b, float* c) {
  mm(dense(a, M, K), dense(b, K, N), dense(c, M, N), 0);
  CHECK(tpurt_stream_synchronize(0) == TPURT_OK, "%s", tpurt_last_error());
  CHECK(tpurt_trace_count() == 0, "no trace, no records: %lld", (long long)tpurt_trace_count());
}

/* Worker, inline and side-stream records with their tags, in order on each stream. */
static void test_strict(float* a, float* b, float* c, float* d) {
  int32_t side = tpurt_stream_make(0, 3);
  CHECK(tpurt_trace_start() == TPURT_OK, "%s", tpurt_last_error());
  tpurt_trace_set_tag(7);
  mm(dense(a, M, K), dense(b, K, N), dense(c, M, N), 0); /* M*N outputs: past the inline limit */
  tpurt_trace_set_tag(8);
  add(dense(c, M, N), dense(c, M, N), dense(d, M, N), 0);
  tpurt_trace_set_tag(9);
  CHECK(tpurt_stream_synchronize(0) == TPURT_OK, "%s", tpurt_last_error());
  add(dense(c, 4, 4), dense(c, 4, 4), dense(d, 4, 4), 0); /* small, idle stream: runs here */
  tpurt_trace_set_tag(10);
  mm(dense(a, M, K), dense(b, K, N), dense(c, M, N), side);
  float host[16];
  CHECK(tpurt_memcpy_d2h(side, host, d, sizeof host) == TPURT_OK, "%s", tpurt_last_error());
  tpurt_trace_set_tag(0);
  tpurt_trace_stop();

  const tpurt_trace_record* rs[64];
  int n = collect(rs, 64);
  CHECK(n == 5, "5 commands, got %d", n);
  int i_mm = find(rs, n, "mm", 0), i_add = find(rs, n, "add", 0);
  int i_small = find(rs, n, "add", i_add + 1), i_side = find(rs, n, "mm", i_mm + 1);
  int i_copy = find(rs, n, "device-to-host copy", 0);
  CHECK(i_mm >= 0 && i_add > i_mm && i_small > i_add && i_side >= 0 && i_copy > i_side, "records %d %d %d %d %d",
        i_mm, i_add, i_small, i_side, i_copy);
  if (i_mm < 0 || i_add < 0 || i_small < 0 || i_side < 0 || i_copy < 0) return;
  CHECK(rs[i_mm]->tag == 7 && rs[i_add]->tag == 8 && rs[i_small]->tag == 9 && rs[i_side]->tag == 10 &&
            rs[i_copy]->tag == 10,
        "tags %llu %llu %llu %llu %llu", (unsigned long long)rs[i_mm]->tag, (unsigned long long)rs[i_add]->tag,
        (unsigned long long)rs[i_small]->tag, (unsigned long long)rs[i_side]->tag, (unsigned long long)rs[i_copy]->tag);
  CHECK(rs[i_mm]->stream == 0 && rs[i_small]->stream == 0 && rs[i_side]->stream == side && rs[i_copy]->stream == side,
        "streams");
  CHECK(rs[i_add]->start_ns >= rs[i_mm]->end_ns && rs[i_small]->start_ns >= rs[i_add]->end_ns &&
            rs[i_copy]->start_ns >= rs[i_side]->end_ns,
        "a stream's records follow each other");
  CHECK(arg(rs[i_mm], "flops") == 2.0 * M * N * K, "mm flops %g", arg(rs[i_mm], "flops"));
  CHECK(arg(rs[i_mm], "bytes") == 4.0 * (M * K + K * N + M * N), "mm bytes %g", arg(rs[i_mm], "bytes"));
  CHECK(arg(rs[i_small], "flops") == 16, "add flops %g", arg(rs[i_small], "flops"));
  CHECK(isnan(arg(rs[i_copy], "flops")) && rs[i_copy]->nargs == 1, "a copy has only its time");

  /* stopped: nothing more is recorded, the records stay */
  mm(dense(a, M, K), dense(b, K, N), dense(c, M, N), 0);
  CHECK(tpurt_stream_synchronize(0) == TPURT_OK, "%s", tpurt_last_error());
  CHECK(tpurt_trace_count() == n, "no records after stop");
}

/* Debug mode runs each op on the issuing thread; fused mode runs a chain as one untagged
 * command whose args sum its calls'. A new trace starts empty. */
static void test_debug_and_fused(float* c, float* d) {
  CHECK(tpurt_trace_start() == TPURT_OK && tpurt_trace_count() == 0, "a new trace starts empty");
  tpurt_set_eager_mode(TPURT_MODE_DEBUG);
  tpurt_trace_set_tag(11);
  add(dense(c, M, N), dense(c, M, N), dense(d, M, N), 0);
  tpurt_set_eager_mode(TPURT_MODE_FUSED);
  add(dense(c, M, N), dense(c, M, N), dense(d, M, N), 0);
  add(dense(d, M, N), dense(c, M, N), dense(d, M, N), 0);
  tpurt_set_eager_mode(TPURT_MODE_STRICT); /* enqueues the chain */
  tpurt_trace_set_tag(0);
  tpurt_trace_stop();
  const tpurt_trace_record* rs[8];
  int n = collect(rs, 8);
  CHECK(n == 2, "debug op and chain, got %d", n);
  if (n != 2) return;
  CHECK(strcmp(rs[0]->name, "add") == 0 && rs[0]->tag == 11, "debug: %s tag %llu", rs[0]->name,
        (unsigned long long)rs[0]->tag);
  CHECK(strcmp(rs[1]->name, "fused chain: add, add") == 0 && rs[1]->tag == 0, "chain: %s tag %llu", rs[1]->name,
        (unsigned long long)rs[1]->tag);
  CHECK(arg(rs[1], "flops") == 2.0 * M * N, "chain flops %g", arg(rs[1], "flops"));
}

static int copy_kernel(const int64_t* args, char* msg, size_t msg_size) {
  memcpy((void*)(intptr_t)args[1], (const void*)(intptr_t)args[0], (size_t)args[2]);
  return 0;
}

/* A compiled kernel's record carries its own name, though it lives only in the command. */
static void test_host_kernel_named(float* c, float* d) {
  CHECK(tpurt_trace_start() == TPURT_OK, "%s", tpurt_last_error());
  int64_t args[3] = {(int64_t)(intptr_t)c, (int64_t)(intptr_t)d, sizeof(float) * M * N};
  CHECK(tpurt_host_kernel_launch(0, copy_kernel, args, 3, "cpp_fused_copy_0", NULL, 0) == TPURT_OK, "%s",
        tpurt_last_error());
  tpurt_trace_stop();
  const tpurt_trace_record* rs[4];
  int n = collect(rs, 4);
  CHECK(n == 1 && strcmp(rs[0]->name, "cpp_fused_copy_0") == 0, "%d records, %s", n, n ? rs[0]->name : "");
}

int main(void) {
  CHECK(tpurt_init() == TPURT_OK, "%s", tpurt_last_error());
  float* a = device_zeros(sizeof(float) * M * K);
  float* b = device_zeros(sizeof(float) * K * N);
  float* c = device_zeros(sizeof(float) * M * N);
  float* d = device_zeros(sizeof(float) * M * N);
  test_off_records_nothing(a, b, c);
  test_strict(a, b, c, d);
  test_debug_and_fused(c, d);
  test_host_kernel_named(c, d);
  tpurt_free(a);
  tpurt_free(b);
  tpurt_free(c);
  tpurt_free(d);
  return CHECK_DONE();
}
