/* The runtime's own tests: chips, allocator, streams, events, copies, op table, the
 * elementwise engine and numerics helpers. Run under ASan + UBSan by `make test`. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "internal.h"

static tpurt_tensor tensor1d(void* data, int dtype, int64_t n) {
  tpurt_tensor t = {.data = data, .dtype = dtype, .ndim = 1};
  t.sizes[0] = n;
  t.strides[0] = 1;
  return t;
}

static void test_chips(void) {
  CHECK(tpurt_init() == TPURT_OK, "%s", tpurt_last_error());
  CHECK(tpurt_device_count() == 1, "default is one chip, got %d", tpurt_device_count());
  tpurt_chip_info i = {.struct_size = sizeof i};
  CHECK(tpurt_chip_get_info(0, &i) == TPURT_OK, "info");
  CHECK(strcmp(i.generation, "v6e") == 0, "generation %s", i.generation);
  CHECK(i.hbm_bytes == 32LL << 30, "hbm %lld", (long long)i.hbm_bytes);
  CHECK(i.mxu_dim == 256, "mxu %d", i.mxu_dim);
  CHECK(tpurt_chip_get_info(3, &i) == TPURT_ERR_VALUE, "bad device must fail");
  CHECK(strstr(tpurt_last_error(), "tpu:3") != NULL, "message names the device: %s", tpurt_last_error());
}

static void test_allocator(void) {
  tpurt_memory_stats s0 = {.struct_size = sizeof s0}, s1 = {.struct_size = sizeof s1};
  tpurt_memory_get_stats(0, &s0);
  void *a, *b;
  CHECK(tpurt_malloc(0, 1000, 0, &a) == TPURT_OK, "malloc");
  tpurt_memory_get_stats(0, &s1);
  CHECK(s1.allocated_bytes - s0.allocated_bytes == 1024, "rounded to 512: %lld",
        (long long)(s1.allocated_bytes - s0.allocated_bytes));
  CHECK(tpurt_pointer_device((char*)a + 10) == 0, "interior pointer maps to its device");
  tpurt_free(a);
  CHECK(tpurt_malloc(0, 900, 0, &b) == TPURT_OK && b == a, "freed block is reused on the same stream");
  tpurt_free(b);
  void* z;
  CHECK(tpurt_malloc(0, 0, 0, &z) == TPURT_OK && z != NULL, "zero-byte allocations are valid");
  tpurt_free(z);
  void* huge;
  CHECK(tpurt_malloc(0, (size_t)40e9, 0, &huge) == TPURT_ERR_OOM, "beyond HBM is OOM");
  const char* msg = tpurt_last_error();
  CHECK(strstr(msg, "37.25 GiB") && strstr(msg, "HBM capacity 32.00 GiB") && strstr(msg, "allocated"),
        "OOM message names request, capacity and use: %s", msg);
  tpurt_memory_get_stats(0, &s1);
  CHECK(s1.oom_count == s0.oom_count + 1, "OOM counted");
  tpurt_empty_cache();
  tpurt_memory_get_stats(0, &s1);
  CHECK(s1.reserved_bytes == s1.allocated_bytes, "empty_cache releases cached blocks");
  void* ok;
  CHECK(tpurt_malloc(0, 1 << 20, 0, &ok) == TPURT_OK, "allocations work after an OOM");
  tpurt_free(ok);
}

static tpurt_status sleepy(void* arg) {
  struct timespec ts = {0, 20 * 1000 * 1000};
  nanosleep(&ts, NULL);
  (*(int*)arg)++;
  return TPURT_OK;
}
static tpurt_status failing(void* arg) {
  (void)arg;
  return tpurt_fail(TPURT_ERR_INDEX, "index 9 is out of bounds");
}

static void test_streams_events(void) {
  int counter = 0;
  int32_t s = tpurt_stream_make(0, 0);
  tpurt_event *e0, *e1;
  tpurt_event_create(1, &e0);
  tpurt_event_create(1, &e1);
  tpurt_event_record(e0, s);
  tpurt_stream_enqueue(s, sleepy, &counter, NULL, "sleepy");
  tpurt_event_record(e1, s);
  CHECK(!tpurt_stream_query(s), "work is asynchronous");
  CHECK(tpurt_stream_synchronize(s) == TPURT_OK && counter == 1, "synchronize waits");
  double ms = 0;
  CHECK(tpurt_event_elapsed_ms(e0, e1, &ms) == TPURT_OK && ms >= 15, "elapsed %.2f ms", ms);
  /* cross-stream ordering: stream 1 waits for an event recorded after slow work on stream 0 */
  int32_t s1;
  tpurt_stream_create(0, &s1);
  tpurt_stream_enqueue(s, sleepy, &counter, NULL, "sleepy");
  tpurt_event_record(e0, s);
  tpurt_event_wait(e0, s1);
  int seen = -1;
  tpurt_stream_enqueue(s1, sleepy, &seen, NULL, "after");
  tpurt_stream_synchronize(s1);
  CHECK(counter == 2, "stream 1 ran after stream 0's work");
  /* a failing kernel surfaces at the next synchronization, once */
  tpurt_stream_enqueue(s, failing, NULL, NULL, "aten::embedding");
  CHECK(tpurt_stream_synchronize(s) == TPURT_ERR_INDEX, "error reported");
  CHECK(strstr(tpurt_last_error(), "aten::embedding") && strstr(tpurt_last_error(), "out of bounds"),
        "message names the op: %s", tpurt_last_error());
  CHECK(tpurt_stream_synchronize(s) == TPURT_OK, "error cleared after reporting");
  tpurt_event_destroy(e0);
  tpurt_event_destroy(e1);
}

/* Host kernels (torch.compile's loops): in order with the stream's other work, arguments
 * copied at launch, a failure reported with the kernel's name, debug mode synchronous. */
static int host_scale(const int64_t* a, char* msg, size_t n) {
  float* x = (float*)(intptr_t)a[0];
  double by;
  memcpy(&by, &a[2], sizeof by);
  for (int64_t i = 0; i < a[1]; i++) x[i] *= (float)by;
  int* seen = (int*)(intptr_t)a[3];
  seen[1] = seen[0];  /* what the command before it had done by then */
  return 0;
}
static int host_scale_by_ref(const int64_t* a, char* msg, size_t n) {
  float* x = (float*)(intptr_t)a[0];
  const double* by = (const double*)(intptr_t)a[2];
  for (int64_t i = 0; i < a[1]; i++) x[i] *= (float)*by;
  return 0;
}
static int host_refuse(const int64_t* a, char* msg, size_t n) {
  snprintf(msg, n, "ZeroDivisionError at %lld", (long long)a[0]);
  return 1;
}
static void test_host_kernels(void) {
  int32_t s = tpurt_stream_make(0, 0);
  int counter[2] = {0, -1};
  float* x;
  tpurt_malloc(0, 4 * sizeof *x, 0, (void**)&x);
  for (int i = 0; i < 4; i++) x[i] = (float)i;
  tpurt_stream_enqueue(s, sleepy, &counter[0], NULL, "sleepy");
  double three = 3.0;
  int64_t args[4] = {(int64_t)(intptr_t)x, 4, 0, (int64_t)(intptr_t)counter};
  memcpy(&args[2], &three, sizeof three);
  CHECK(tpurt_host_kernel_launch(s, host_scale, args, 4, "cpp_fused_mul_0", NULL, 0) == TPURT_OK, "%s", tpurt_last_error());
  args[1] = 0;  /* copied at launch: changing it now changes nothing */
  CHECK(tpurt_stream_synchronize(s) == TPURT_OK && x[3] == 9.0f, "ran with its arguments: x[3] = %g", x[3]);
  CHECK(counter[1] == 1, "ran after the command before it (saw %d)", counter[1]);
  int64_t where = 7;
  CHECK(tpurt_host_kernel_launch(s, host_refuse, &where, 1, "cpp_fused_div_1", NULL, 0) == TPURT_OK, "queued");
  CHECK(tpurt_stream_synchronize(s) == TPURT_ERR_RUNTIME, "failure reported");
  CHECK(strstr(tpurt_last_error(), "cpp_fused_div_1") && strstr(tpurt_last_error(), "ZeroDivisionError at 7"),
        "message names the kernel and says why: %s", tpurt_last_error());
  /* a snapshot: the kernel reads the scale as it was at launch (the host changes it after) */
  double scale = 2.0;
  int64_t snap_args[4] = {(int64_t)(intptr_t)x, 4, 0, (int64_t)(intptr_t)counter};
  tpurt_host_arg_copy copy = {.arg = 2, .nbytes = sizeof scale, .src = &scale};
  tpurt_stream_enqueue(s, sleepy, &counter[0], NULL, "sleepy");
  CHECK(tpurt_host_kernel_launch(s, host_scale_by_ref, snap_args, 4, "cpp_fused_mul_2", &copy, 1) == TPURT_OK, "%s",
        tpurt_last_error());
  scale = 100.0;
  CHECK(tpurt_stream_synchronize(s) == TPURT_OK && x[3] == 18.0f, "read the launch-time value: x[3] = %g", x[3]);
  /* more than the command holds: the snapshot goes to a block of the chip, which the command
   * gives back once the kernel ran; still the launch-time value, and no wait at the launch */
  double scales[TPURT_HOST_KERNEL_COPY_BYTES / sizeof(double) + 1] = {0.5};
  tpurt_host_arg_copy big = {.arg = 2, .nbytes = sizeof scales, .src = scales};
  tpurt_memory_stats before, after;
  tpurt_stream_synchronize(s);
  tpurt_memory_get_stats(0, &before);
  tpurt_stream_enqueue(s, sleepy, &counter[0], NULL, "sleepy");
  CHECK(tpurt_host_kernel_launch(s, host_scale_by_ref, snap_args, 4, "big", &big, 1) == TPURT_OK, "%s",
        tpurt_last_error());
  CHECK(!tpurt_stream_query(s), "the launch did not wait for the stream");
  scales[0] = 100.0;
  CHECK(tpurt_stream_synchronize(s) == TPURT_OK && x[3] == 9.0f, "read the launch-time value: x[3] = %g", x[3]);
  tpurt_memory_get_stats(0, &after);
  CHECK(after.allocated_bytes == before.allocated_bytes, "the snapshot block was given back (%lld -> %lld bytes)",
        (long long)before.allocated_bytes, (long long)after.allocated_bytes);
  tpurt_set_eager_mode(TPURT_MODE_DEBUG);
  CHECK(tpurt_host_kernel_launch(s, host_refuse, &where, 1, "cpp_fused_div_1", NULL, 0) == TPURT_ERR_RUNTIME,
        "debug mode raises from the launch");
  tpurt_set_eager_mode(TPURT_MODE_STRICT);
  CHECK(tpurt_host_kernel_launch(s, NULL, NULL, 0, "none", NULL, 0) == TPURT_ERR_VALUE, "no function");
  CHECK(tpurt_host_kernel_launch(s, host_scale, args, TPURT_MAX_HOST_KERNEL_ARGS + 1, "many", NULL, 0) == TPURT_ERR_VALUE,
        "too many arguments");
  tpurt_free(x);
}

/* Teams (what torch.compile's OpenMP loops run on): members run at once (a barrier sees every
 * member's write), a single construct runs once per team, a nested team is one member, and a
 * member still sees the whole team after the barriers (Inductor's last loop splits by it). */
typedef struct {
  int seen[64];
  int sum_after_barrier[64];
  int size_at_end[64]; /* the size a member sees after the last barrier */
  int singles;
  int nested_size;
} team_probe;
static void nested_member(void* ctx, int member, int size) { ((team_probe*)ctx)->nested_size = size + member; }
static void probe_member(void* ctx, int member, int size) {
  team_probe* p = ctx;
  CHECK(tpurt_team_member() == member && tpurt_team_size() == size, "member %d of %d", member, size);
  p->seen[member] = 1;
  tpurt_team_barrier();
  int sum = 0;
  for (int i = 0; i < size; i++) sum += __atomic_load_n(&p->seen[i], __ATOMIC_ACQUIRE);
  p->sum_after_barrier[member] = sum;
  for (int k = 0; k < 3; k++) {
    if (tpurt_team_single()) __atomic_add_fetch(&p->singles, 1, __ATOMIC_RELAXED);
    tpurt_team_barrier();
  }
  p->size_at_end[member] = tpurt_team_size();
  if (member == 0) tpurt_parallel_team(0, nested_member, p);
}
static void test_teams(void) {
  team_probe p;
  memset(&p, 0, sizeof p);
  tpurt_parallel_team(0, probe_member, &p);
  int size = tpurt_pool_threads();
  for (int m = 0; m < size; m++) {
    CHECK(p.sum_after_barrier[m] == size, "member %d saw %d of %d", m, p.sum_after_barrier[m], size);
    CHECK(p.size_at_end[m] == size, "member %d saw a team of %d after the barriers", m, p.size_at_end[m]);
  }
  CHECK(p.singles == 3, "each single once: %d", p.singles);
  CHECK(p.nested_size == 1, "a nested team runs inline as one member: %d", p.nested_size);
  CHECK(tpurt_team_member() == 0 && tpurt_team_size() == 1, "outside a team");
}

static void test_copies_and_ops(void) {
  float host[6] = {1, 2, 3, 4, 5, 6}, back[6] = {0};
  void* dev;
  tpurt_malloc(0, sizeof host, 0, &dev);
  CHECK(tpurt_memcpy_h2d(0, dev, host, sizeof host) == TPURT_OK, "h2d");
  /* add(dev[2x3], row [3]) through the op table, broadcasting */
  void* out;
  tpurt_malloc(0, sizeof host, 0, &out);
  float row[3] = {10, 20, 30};
  void* drow;
  tpurt_malloc(0, sizeof row, 0, &drow);
  tpurt_memcpy_h2d(0, drow, row, sizeof row);
  tpurt_op_call c = {.struct_size = sizeof c, .op = tpurt_op_lookup("add.Tensor"), .nargs = 2, .nouts = 1};
  CHECK(c.op >= 0, "add.Tensor is in the table");
  tpurt_tensor a = {.data = dev, .dtype = TPURT_F32, .ndim = 2, .sizes = {2, 3}, .strides = {3, 1}};
  c.args[0] = (tpurt_value){.kind = TPURT_V_TENSOR, .scalar_dtype = -1, .t = a};
  c.args[1] = (tpurt_value){.kind = TPURT_V_TENSOR, .scalar_dtype = -1, .t = tensor1d(drow, TPURT_F32, 3)};
  c.outs[0] = a;
  c.outs[0].data = out;
  CHECK(tpurt_op_launch(0, &c) == TPURT_OK, "launch");
  CHECK(tpurt_memcpy_d2h(0, back, out, sizeof back) == TPURT_OK, "d2h");
  CHECK(back[0] == 11 && back[4] == 25 && back[5] == 36, "broadcast add: %g %g %g", back[0], back[4], back[5]);
  /* in place on a transposed view: out == input view (alias-safe) */
  tpurt_tensor t = {.data = out, .dtype = TPURT_F32, .ndim = 2, .sizes = {3, 2}, .strides = {1, 3}};
  c.args[0].t = t;
  c.args[1] = (tpurt_value){.kind = TPURT_V_FLOAT, .scalar_dtype = -1, .f = 0.5};
  c.outs[0] = t;
  tpurt_op_launch(0, &c);
  tpurt_memcpy_d2h(0, back, out, sizeof back);
  CHECK(back[0] == 11.5f && back[5] == 36.5f, "in-place strided add: %g %g", back[0], back[5]);
  CHECK(tpurt_op_lookup("no_such_op.default") == -1, "unknown names are -1");
  tpurt_free(dev);
  tpurt_free(out);
  tpurt_free(drow);
}

static void test_common_dtype_rounding(void) {
  /* uint8 + uint8 into an int32 out: CPU wraps in uint8 (250 + 10 = 4), then widens */
  uint8_t a[2] = {250, 7}, b[2] = {10, 1};
  int32_t out[2] = {0, 0};
  tpurt_op_call c = {.struct_size = sizeof c, .op = tpurt_op_lookup("add.out"), .nargs = 3, .nouts = 1};
  c.args[0] = (tpurt_value){.kind = TPURT_V_TENSOR, .scalar_dtype = -1, .t = tensor1d(a, TPURT_U8, 2)};
  c.args[1] = (tpurt_value){.kind = TPURT_V_TENSOR, .scalar_dtype = -1, .t = tensor1d(b, TPURT_U8, 2)};
  c.args[2] = (tpurt_value){.kind = TPURT_V_INT, .scalar_dtype = -1, .i = 1};
  c.outs[0] = tensor1d(out, TPURT_I32, 2);
  CHECK(tpurt_op_run(&c) == TPURT_OK, "%s", tpurt_last_error());
  CHECK(out[0] == 4 && out[1] == 8, "rounded through uint8: %d %d", out[0], out[1]);
  /* float16 fmod by a Python float: the scalar is rounded to float16 first (1.7 -> 1.7002) */
  uint16_t h = 0x4b80 /* 15.0 */, r = 0;
  c.op = tpurt_op_lookup("fmod.Scalar");
  c.nargs = 2;
  c.args[0].t = tensor1d(&h, TPURT_F16, 1);
  c.args[1] = (tpurt_value){.kind = TPURT_V_FLOAT, .scalar_dtype = -1, .wrapped = 1, .f = 1.7};
  c.outs[0] = tensor1d(&r, TPURT_F16, 1);
  CHECK(tpurt_op_run(&c) == TPURT_OK, "%s", tpurt_last_error());
  float want = fmodf(15.0f, tpurt_f16_to_f32(tpurt_f32_to_f16(1.7f)));
  CHECK(r == tpurt_f32_to_f16(want), "fmod(15, half(1.7)) = %g, got %g", want, tpurt_f16_to_f32(r));
}

static void test_blocking_launch(void) {
  /* an index out of range comes back from the launch itself, with the kernel's own message */
  float w[4] = {1, 2, 3, 4}, out[1];
  int64_t idx[1] = {9};
  tpurt_op_call c = {.struct_size = sizeof c, .op = tpurt_op_lookup("index_select"), .nargs = 3, .nouts = 1};
  c.args[0] = (tpurt_value){.kind = TPURT_V_TENSOR, .scalar_dtype = -1, .t = tensor1d(w, TPURT_F32, 4)};
  c.args[1] = (tpurt_value){.kind = TPURT_V_INT, .scalar_dtype = -1, .i = 0};
  c.args[2] = (tpurt_value){.kind = TPURT_V_TENSOR, .scalar_dtype = -1, .t = tensor1d(idx, TPURT_I64, 1)};
  c.outs[0] = tensor1d(out, TPURT_F32, 1);
  CHECK(tpurt_op_flags(c.op) & TPURT_OPF_EAGER_ERRORS, "index_select checks eagerly");
  CHECK(tpurt_op_launch(0, &c) == TPURT_ERR_INDEX, "raised from the launch");
  CHECK(strstr(tpurt_last_error(), "out of range") && !strstr(tpurt_last_error(), "asynchronous"),
        "the kernel's own message: %s", tpurt_last_error());
  CHECK(tpurt_stream_synchronize(0) == TPURT_OK, "nothing left pending");
  idx[0] = 2;
  CHECK(tpurt_op_launch_blocking(0, &c) == TPURT_OK && out[0] == 3, "blocking launch runs the kernel: %g", out[0]);
}

static void test_numerics(void) {
  CHECK(tpurt_f32_to_bf16(1.0f) == 0x3f80, "1.0");
  CHECK(tpurt_bf16_to_f32(tpurt_f32_to_bf16(1.00390625f)) == 1.0f, "ties round to even (down)");
  CHECK(tpurt_bf16_to_f32(tpurt_f32_to_bf16(1.01171875f)) == 1.015625f, "ties round to even (up)");
  CHECK(isinf(tpurt_round_bf16(3.4e38f)), "overflow becomes inf");
  CHECK(isnan(tpurt_round_bf16(NAN)), "nan stays nan");
  CHECK(tpurt_promote_types(TPURT_U8, TPURT_I8) == TPURT_I16, "u8+i8 -> i16");
  CHECK(tpurt_promote_types(TPURT_F16, TPURT_BF16) == TPURT_F32, "f16+bf16 -> f32");
  CHECK(tpurt_promote_types(TPURT_I64, TPURT_F16) == TPURT_F16, "int+f16 -> f16");
  tpurt_promo p;
  tpurt_promo_init(&p);
  tpurt_tensor t = {.dtype = TPURT_BF16, .ndim = 1};
  tpurt_promo_add_tensor(&p, &t);
  tpurt_value py = {.kind = TPURT_V_FLOAT, .wrapped = 1, .scalar_dtype = TPURT_F64};
  tpurt_promo_add_value(&p, &py);
  CHECK(tpurt_promo_result(&p) == TPURT_BF16, "bf16 tensor + python float stays bf16");
  uint32_t r1[4], r2[4];
  tpurt_philox(42, 7, r1);
  tpurt_philox(42, 7, r2);
  CHECK(memcmp(r1, r2, sizeof r1) == 0, "philox is deterministic");
  tpurt_philox(42, 8, r2);
  CHECK(memcmp(r1, r2, sizeof r1) != 0, "philox counters differ");
  /* dtype conversion through the engine: f32 -> bf16 -> f32 with a strided source */
  float src[4] = {1.0f, 99.f, 1.01171875f, 99.f};
  uint16_t mid[2];
  tpurt_tensor s = tensor1d(src, TPURT_F32, 2);
  s.strides[0] = 2;
  tpurt_tensor m = tensor1d(mid, TPURT_BF16, 2);
  CHECK(tpurt_copy_tensor(&m, &s) == TPURT_OK && mid[0] == 0x3f80 && tpurt_bf16_to_f32(mid[1]) == 1.015625f,
        "strided f32->bf16 copy");
}

/* nonzero through tpurt_op_size_outputs: the kernel declares [count, ndim] int64, then fills it. */
static void test_data_sized_outputs(void) {
  float host[6] = {0, 2, 0, 4, 5, 0};
  void* dev;
  tpurt_malloc(0, sizeof host, 0, &dev);
  tpurt_memcpy_h2d(0, dev, host, sizeof host);
  tpurt_op_call c = {.struct_size = sizeof c, .op = tpurt_op_lookup("nonzero"), .nargs = 1};
  CHECK(c.op >= 0 && (tpurt_op_flags(c.op) & TPURT_OPF_DATA_SIZED), "nonzero is data-sized");
  tpurt_tensor x = {.data = dev, .dtype = TPURT_F32, .ndim = 2, .sizes = {2, 3}, .strides = {3, 1}};
  c.args[0] = (tpurt_value){.kind = TPURT_V_TENSOR, .scalar_dtype = -1, .t = x};
  CHECK(tpurt_op_size_outputs(0, &c) == TPURT_OK, "size nonzero: %s", tpurt_last_error());
  CHECK(c.nouts == 1 && c.outs[0].dtype == TPURT_I64 && c.outs[0].ndim == 2 && c.outs[0].sizes[0] == 3 &&
            c.outs[0].sizes[1] == 2 && c.outs[0].strides[0] == 2,
        "nonzero declares [3, 2] int64");
  int64_t back[6] = {0};
  void* out;
  tpurt_malloc(0, sizeof back, 0, &out);
  c.outs[0].data = out;
  CHECK(tpurt_op_launch(0, &c) == TPURT_OK, "launch nonzero");
  tpurt_memcpy_d2h(0, back, out, sizeof back);
  CHECK(back[0] == 0 && back[1] == 1 && back[2] == 1 && back[3] == 0 && back[4] == 1 && back[5] == 1,
        "nonzero coordinates");
  tpurt_op_call add = {.struct_size = sizeof add, .op = tpurt_op_lookup("add.Tensor")};
  CHECK(tpurt_op_size_outputs(0, &add) == TPURT_ERR_VALUE, "ops not flagged data-sized are refused");
  tpurt_free(dev);
  tpurt_free(out);
}

int main(void) {
  test_chips();
  test_allocator();
  test_streams_events();
  test_host_kernels();
  test_teams();
  test_copies_and_ops();
  test_data_sized_outputs();
  test_common_dtype_rounding();
  test_blocking_launch();
  test_numerics();
  return CHECK_DONE();
}
