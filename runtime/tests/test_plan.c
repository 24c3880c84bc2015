/* The op table's kinds, the plan step, kernel temporaries counted against HBM, and graphs of
 * planned calls. Run under ASan + UBSan by `make test`. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "internal.h"
#include "kernels/elementwise.h"

static tpurt_value tensor_value(tpurt_tensor t) { return (tpurt_value){.kind = TPURT_V_TENSOR, .scalar_dtype = -1, .t = t}; }
static tpurt_value int_value(int64_t i) { return (tpurt_value){.kind = TPURT_V_INT, .scalar_dtype = -1, .i = i}; }
static tpurt_value ints_value(const int64_t* v, int n) {
  return (tpurt_value){.kind = TPURT_V_INTS, .n = n, .scalar_dtype = -1, .ints = v};
}

static tpurt_tensor dense(void* data, int dtype, int ndim, const int64_t* sizes) {
  tpurt_tensor t = {.data = data, .dtype = dtype, .ndim = ndim};
  for (int d = ndim - 1, st = 1; d >= 0; d--) t.sizes[d] = sizes[d], t.strides[d] = st, st *= (int)sizes[d];
  return t;
}

static void* device_copy(const void* host, size_t n) {
  void* p;
  tpurt_malloc(0, n, 0, &p);
  tpurt_memcpy_h2d(0, p, host, n);
  return p;
}

/* Every table line's kind agrees with its flags and descriptors. */
static void test_kinds(void) {
  int nkind[TPURT_KIND_COUNT] = {0}, fusable = 0;
  for (int op = 0; op < tpurt_op_count(); op++) {
    tpurt_op_info i = {.struct_size = sizeof i};
    CHECK(tpurt_op_get_info(op, &i) == TPURT_OK, "info %d", op);
    CHECK(i.kind >= 0 && i.kind < TPURT_KIND_COUNT, "%s: kind %d", i.kernel, i.kind);
    nkind[i.kind]++;
    CHECK((i.kind == TPURT_KIND_DATA_SIZED) == !!(i.flags & TPURT_OPF_DATA_SIZED), "%s: data-sized kind vs flag", i.kernel);
    CHECK((i.kind == TPURT_KIND_RANDOM) == !!(i.flags & TPURT_OPF_RANDOM), "%s: random kind vs flag", i.kernel);
    CHECK((i.kind == TPURT_KIND_ELEMENTWISE) == (i.arity >= 0), "%s: arity only for elementwise", i.kernel);
    CHECK((i.kind == TPURT_KIND_MATMUL) == (i.contract[0] >= 0 && i.contract[1] > i.contract[0]), "%s: contracted operands",
          i.kernel);
    const ew_op* ew = tpurt_op_ew_desc(op);
    if (ew) CHECK(i.kind == TPURT_KIND_ELEMENTWISE && i.arity == ew->nin, "%s: arity %d, descriptor %d", i.kernel, i.arity, ew->nin);
    if (tpurt_op_red_desc(op)) CHECK(i.kind == TPURT_KIND_REDUCTION, "%s: a reduction descriptor", i.kernel);
    fusable += i.fusable;
  }
  CHECK(nkind[TPURT_KIND_ELEMENTWISE] > 150 && nkind[TPURT_KIND_REDUCTION] > 20 && nkind[TPURT_KIND_MATMUL] >= 9,
        "kinds: %d elementwise, %d reductions, %d matmul", nkind[TPURT_KIND_ELEMENTWISE], nkind[TPURT_KIND_REDUCTION],
        nkind[TPURT_KIND_MATMUL]);
  CHECK(fusable > 150, "%d ops have a linked descriptor", fusable);
  tpurt_op_info i = {.struct_size = sizeof i};
  tpurt_op_get_info(tpurt_op_lookup("addmm"), &i);
  CHECK(i.kind == TPURT_KIND_MATMUL && i.contract[0] == 1 && i.contract[1] == 2, "addmm contracts mat1, mat2");
  tpurt_op_get_info(tpurt_op_lookup("prod"), &i);
  CHECK(i.identity == TPURT_IDENTITY_ONE && !strcmp(tpurt_identity_name(i.identity), "one"), "prod's identity is one");
  tpurt_op_get_info(tpurt_op_lookup("exp"), &i);
  CHECK(i.arity == 1 && !strcmp(tpurt_op_kind_name(i.kind), "elementwise") && i.fusable, "exp: fusable unary");
  CHECK(tpurt_op_get_info(-1, &i) == TPURT_ERR_VALUE, "unknown op id");
}

/* Plans refuse what the kernel would, from descriptors alone (no data). */
static void test_plan(void) {
  int64_t n4[1] = {4};
  tpurt_op_call c = {.struct_size = sizeof c, .op = tpurt_op_lookup("gcd"), .nargs = 2, .nouts = 1};
  c.args[0] = tensor_value(dense(NULL, TPURT_BOOL, 1, n4));
  c.args[1] = tensor_value(dense(NULL, TPURT_BOOL, 1, n4));
  c.outs[0] = dense(NULL, TPURT_BOOL, 1, n4);
  tpurt_plan p = {.struct_size = sizeof p};
  CHECK(tpurt_op_plan(&c, &p) == TPURT_ERR_UNSUPPORTED && strstr(tpurt_last_error(), "'Bool'"), "gcd of bools: %s",
        tpurt_last_error());
  c.op = tpurt_op_lookup("atan2");
  c.args[0].t.dtype = c.args[1].t.dtype = TPURT_I64;
  c.outs[0].dtype = TPURT_F32;
  CHECK(tpurt_op_plan(&c, &p) == TPURT_OK && p.kind == TPURT_KIND_ELEMENTWISE && p.flops == 4 && p.bytes_moved == 80,
        "atan2 of int64 computes in float: %s; flops %lld bytes %lld", tpurt_last_error(), (long long)p.flops,
        (long long)p.bytes_moved);
  c.op = tpurt_op_lookup("bitwise_and.Tensor");
  c.args[0].t.dtype = c.args[1].t.dtype = c.outs[0].dtype = TPURT_F32;
  CHECK(tpurt_op_plan(&c, &p) == TPURT_ERR_UNSUPPORTED && strstr(tpurt_last_error(), "'Float'"),
        "bitwise_and of floats: %s", tpurt_last_error());
  c.op = tpurt_op_lookup("special_zeta");
  c.args[0].t.dtype = c.args[1].t.dtype = c.outs[0].dtype = TPURT_BF16;
  CHECK(tpurt_op_plan(&c, &p) == TPURT_ERR_UNSUPPORTED, "zeta has no bfloat16 kernel (the hook's check)");
  c.op = tpurt_op_lookup("erf");
  c.nargs = 1;
  c.args[0].t.dtype = c.outs[0].dtype = TPURT_C64;
  CHECK(tpurt_op_plan(&c, &p) == TPURT_ERR_UNSUPPORTED && strstr(tpurt_last_error(), "complex64"), "no complex erf");
  /* mm: 2*M*N*K */
  int64_t a_s[2] = {3, 5}, b_s[2] = {5, 7}, o_s[2] = {3, 7};
  tpurt_op_call m = {.struct_size = sizeof m, .op = tpurt_op_lookup("mm"), .nargs = 2, .nouts = 1};
  m.args[0] = tensor_value(dense(NULL, TPURT_F32, 2, a_s));
  m.args[1] = tensor_value(dense(NULL, TPURT_F32, 2, b_s));
  m.outs[0] = dense(NULL, TPURT_F32, 2, o_s);
  CHECK(tpurt_op_plan(&m, &p) == TPURT_OK && p.flops == 2 * 3 * 5 * 7 && p.nouts == 1 && p.outs[0].sizes[1] == 7,
        "mm plan: flops %lld", (long long)p.flops);
  /* attention: the fused kernel's limits are its plan hook's */
  int64_t qs[4] = {2, 4, 8, 16}, ks[4] = {2, 2, 8, 16};
  tpurt_op_call a = {.struct_size = sizeof a, .op = tpurt_op_lookup("_scaled_dot_product_fused_attention_overrideable"),
                     .nargs = 8};
  a.args[0] = tensor_value(dense(NULL, TPURT_F32, 4, qs));
  a.args[1] = a.args[2] = tensor_value(dense(NULL, TPURT_F32, 4, ks));
  a.args[3] = a.args[7] = (tpurt_value){.kind = TPURT_V_NONE, .scalar_dtype = -1};
  a.args[4] = (tpurt_value){.kind = TPURT_V_FLOAT, .scalar_dtype = -1, .f = 0};
  a.args[5] = a.args[6] = (tpurt_value){.kind = TPURT_V_BOOL, .scalar_dtype = -1};
  CHECK(tpurt_op_plan(&a, &p) == TPURT_OK && p.flops == 2LL * 2 * 4 * 8 * 8 * 32, "GQA attention plan: %s, flops %lld",
        tpurt_last_error(), (long long)p.flops);
  a.args[4].f = 0.1;
  CHECK(tpurt_op_plan(&a, &p) == TPURT_ERR_UNSUPPORTED && strstr(tpurt_last_error(), "dropout"), "dropout: math path");
  a.args[4].f = 0, a.args[1].t.sizes[1] = 3;
  CHECK(tpurt_op_plan(&a, &p) == TPURT_ERR_RUNTIME && strstr(tpurt_last_error(), "multiple"), "heads 4 over 3");
  c.op = tpurt_op_lookup("nonzero");
  c.args[0].t.dtype = TPURT_F32;
  c.nouts = 0;
  CHECK(tpurt_op_plan(&c, &p) == TPURT_OK && p.outputs_from_data && p.kind == TPURT_KIND_DATA_SIZED, "nonzero's plan");
}

/* conv2d(x [1, 2, 6, 6], w [3, 2, 3, 3], padding 1) */
static tpurt_op_call conv_call(void* x, void* w, void* out) {
  static const int64_t xs[4] = {1, 2, 6, 6}, ws[4] = {3, 2, 3, 3}, os[4] = {1, 3, 6, 6};
  static const int64_t one[2] = {1, 1}, zero[2] = {0, 0};
  tpurt_op_call c = {.struct_size = sizeof c, .op = tpurt_op_lookup("convolution_overrideable"), .nargs = 9, .nouts = 1,
                     .precision = TPURT_PRECISION_HIGHEST};
  c.args[0] = tensor_value(dense(x, TPURT_F32, 4, xs));
  c.args[1] = tensor_value(dense(w, TPURT_F32, 4, ws));
  c.args[2] = (tpurt_value){.kind = TPURT_V_NONE, .scalar_dtype = -1};
  c.args[3] = ints_value(one, 2);
  c.args[4] = ints_value(one, 2);
  c.args[5] = ints_value(one, 2);
  c.args[6] = (tpurt_value){.kind = TPURT_V_BOOL, .scalar_dtype = -1, .i = 0};
  c.args[7] = ints_value(zero, 2);
  c.args[8] = int_value(1);
  c.outs[0] = dense(out, TPURT_F32, 4, os);
  return c;
}

/* A convolution's temporaries (for this stride-1 one: the zero-padded image its columns are
 * read from, the product over padded positions) and accumulator are device memory: the peak
 * sees them, and with planned scratch of the plan's size the kernel takes nothing from the
 * allocator. */
static void test_temporaries(void) {
  float hx[72], hw[54], ref[108], got[108];
  for (int i = 0; i < 72; i++) hx[i] = (float)((i * 7) % 11) - 5;
  for (int i = 0; i < 54; i++) hw[i] = (float)((i * 5) % 7) - 3;
  void *x = device_copy(hx, sizeof hx), *w = device_copy(hw, sizeof hw), *out;
  tpurt_malloc(0, sizeof ref, 0, &out);
  tpurt_op_call c = conv_call(x, w, out);
  tpurt_plan p = {.struct_size = sizeof p};
  CHECK(tpurt_op_plan(&c, &p) == TPURT_OK, "conv plan: %s", tpurt_last_error());
  /* padded image 2 x 8 x 8 (+ the GEMM's 64-element row slack), product 3 x (5 * 8 + 6) */
  int64_t temps = (2 * 8 * 8 + 64) * 4 + 3 * 46 * 4;
  CHECK(p.scratch_bytes >= temps + 108 * 4 && p.flops == 2 * 3 * 36 * 18, "conv plan: scratch %lld, flops %lld",
        (long long)p.scratch_bytes, (long long)p.flops);
  tpurt_device_synchronize(0);
  tpurt_memory_stats before = {.struct_size = sizeof before}, after = {.struct_size = sizeof after};
  tpurt_memory_reset_peak(0);
  tpurt_memory_get_stats(0, &before);
  CHECK(tpurt_op_launch_blocking(0, &c) == TPURT_OK, "conv: %s", tpurt_last_error());
  tpurt_memory_get_stats(0, &after);
  CHECK(after.allocated_peak - before.allocated_bytes >= temps, "the peak includes the padded image and product: +%lld",
        (long long)(after.allocated_peak - before.allocated_bytes));
  CHECK(after.allocated_bytes == before.allocated_bytes, "temporaries are given back");
  tpurt_memcpy_d2h(0, ref, out, sizeof ref);
  /* the same reference computed directly */
  double maxerr = 0;
  for (int co = 0; co < 3; co++)
    for (int i = 0; i < 6; i++)
      for (int j = 0; j < 6; j++) {
        double acc = 0;
        for (int ci = 0; ci < 2; ci++)
          for (int ki = 0; ki < 3; ki++)
            for (int kj = 0; kj < 3; kj++) {
              int y = i + ki - 1, xx = j + kj - 1;
              if (y >= 0 && y < 6 && xx >= 0 && xx < 6) acc += hx[(ci * 6 + y) * 6 + xx] * hw[((co * 2 + ci) * 3 + ki) * 3 + kj];
            }
        maxerr = fmax(maxerr, fabs(acc - ref[(co * 6 + i) * 6 + j]));
      }
  CHECK(maxerr < 1e-4, "conv result: max error %g", maxerr);
  /* planned scratch: the kernel's temporaries all come from it */
  void* scratch;
  tpurt_malloc(0, (size_t)p.scratch_bytes, 0, &scratch);
  c.scratch = scratch;
  c.scratch_bytes = p.scratch_bytes;
  tpurt_memory_get_stats(0, &before);
  tpurt_memory_reset_peak(0);
  CHECK(tpurt_op_launch_blocking(0, &c) == TPURT_OK, "conv with scratch: %s", tpurt_last_error());
  tpurt_memory_get_stats(0, &after);
  CHECK(after.allocated_peak == before.allocated_bytes, "with planned scratch nothing else is allocated: +%lld",
        (long long)(after.allocated_peak - before.allocated_bytes));
  tpurt_memcpy_d2h(0, got, out, sizeof got);
  CHECK(!memcmp(got, ref, sizeof got), "same result from planned scratch");
  tpurt_free(scratch);
  tpurt_free(x), tpurt_free(w), tpurt_free(out);
}

/* y = sum(exp(a) * b + a): three intermediates, two of which can share memory. */
static void test_graph(void) {
  enum { N = 1000 };
  float ha[N], hb[N], hy = 0;
  double want = 0;
  for (int i = 0; i < N; i++) {
    ha[i] = (float)(i % 17) * 0.01f, hb[i] = (float)(i % 5) - 2;
    want += (double)(expf(ha[i]) * hb[i]) + ha[i];
  }
  void *a = device_copy(ha, sizeof ha), *b = device_copy(hb, sizeof hb), *y;
  tpurt_malloc(0, 4, 0, &y);
  tpurt_graph* g;
  CHECK(tpurt_graph_create(0, &g) == TPURT_OK, "create");
  int32_t A, B, E, P, S, Y;
  tpurt_graph_add_buffer(g, TPURT_BUFFER_INPUT, sizeof ha, &A);
  tpurt_graph_add_buffer(g, TPURT_BUFFER_INPUT, sizeof hb, &B);
  tpurt_graph_add_buffer(g, TPURT_BUFFER_INTERMEDIATE, sizeof ha, &E);
  tpurt_graph_add_buffer(g, TPURT_BUFFER_INTERMEDIATE, sizeof ha, &P);
  tpurt_graph_add_buffer(g, TPURT_BUFFER_INTERMEDIATE, sizeof ha, &S);
  tpurt_graph_add_buffer(g, TPURT_BUFFER_OUTPUT, 4, &Y);
  int64_t n[1] = {N};
  tpurt_tensor v = dense(NULL, TPURT_F32, 1, n), scalar = dense(NULL, TPURT_F32, 0, n);
  tpurt_op_call c = {.struct_size = sizeof c, .op = tpurt_op_lookup("exp"), .nargs = 1, .nouts = 1};
  c.args[0] = tensor_value(v);
  c.outs[0] = v;
  tpurt_graph_ref r1[] = {{0, 0, A, 0}, {-1, 0, E, 0}};
  CHECK(tpurt_graph_add_call(g, &c, r1, 2) == TPURT_OK, "exp: %s", tpurt_last_error());
  c.op = tpurt_op_lookup("mul.Tensor"), c.nargs = 2, c.args[1] = tensor_value(v);
  tpurt_graph_ref r2[] = {{0, 0, E, 0}, {1, 0, B, 0}, {-1, 0, P, 0}};
  tpurt_graph_add_call(g, &c, r2, 3);
  c.op = tpurt_op_lookup("add.Tensor");
  tpurt_graph_ref r3[] = {{0, 0, P, 0}, {1, 0, A, 0}, {-1, 0, S, 0}};
  tpurt_graph_add_call(g, &c, r3, 3);
  c.op = tpurt_op_lookup("sum"), c.nargs = 2;
  c.args[1] = (tpurt_value){.kind = TPURT_V_NONE, .scalar_dtype = -1};
  c.outs[0] = scalar;
  tpurt_graph_ref r4[] = {{0, 0, S, 0}, {-1, 0, Y, 0}};
  tpurt_graph_add_call(g, &c, r4, 2);
  tpurt_graph_ref bad[] = {{5, 0, S, 0}};
  CHECK(tpurt_graph_add_call(g, &c, bad, 1) == TPURT_ERR_VALUE, "a reference to no tensor is refused");
  CHECK(tpurt_graph_instantiate(g) == TPURT_OK, "instantiate: %s", tpurt_last_error());
  tpurt_graph_stats st = {.struct_size = sizeof st};
  tpurt_graph_get_stats(g, &st);
  CHECK(st.ncalls == 4 && st.intermediate_bytes == 3 * (int64_t)sizeof ha, "stats: %d calls", st.ncalls);
  CHECK(st.arena_bytes < st.intermediate_bytes && st.arena_bytes >= 2 * (int64_t)sizeof ha,
        "liveness: E dies at mul, so S can take its bytes: arena %lld of %lld", (long long)st.arena_bytes,
        (long long)st.intermediate_bytes);
  CHECK(st.flops == 4 * N, "flops %lld", (long long)st.flops);
  void* bufs[6] = {a, b, NULL, NULL, NULL, y};
  for (int rep = 0; rep < 3; rep++) {
    hy = 0;
    tpurt_memcpy_h2d(0, y, &hy, 4);
    CHECK(tpurt_graph_launch(g, 0, bufs) == TPURT_OK, "launch: %s", tpurt_last_error());
    CHECK(tpurt_stream_synchronize(0) == TPURT_OK, "run: %s", tpurt_last_error());
    tpurt_memcpy_d2h(0, &hy, y, 4);
    CHECK(fabs(hy - want) < 1e-3 * fabs(want) + 1e-3, "launch %d: %g vs %g", rep, hy, want);
  }
  CHECK(tpurt_graph_launch(g, tpurt_stream_make(0, 1), bufs) == TPURT_ERR_VALUE, "one stream per graph");
  CHECK(tpurt_graph_add_buffer(g, TPURT_BUFFER_INPUT, 4, &A) == TPURT_ERR_VALUE, "a fixed graph");
  tpurt_graph_destroy(g);

  /* a tensor that does not fit its buffer, and an op sized by data, fail instantiation */
  tpurt_graph_create(0, &g);
  tpurt_graph_add_buffer(g, TPURT_BUFFER_INPUT, 16, &A);
  tpurt_graph_add_buffer(g, TPURT_BUFFER_OUTPUT, sizeof ha, &Y);
  c.op = tpurt_op_lookup("exp"), c.nargs = 1, c.args[0] = tensor_value(v), c.outs[0] = v;
  tpurt_graph_ref r5[] = {{0, 0, A, 0}, {-1, 0, Y, 0}};
  tpurt_graph_add_call(g, &c, r5, 2);
  CHECK(tpurt_graph_instantiate(g) == TPURT_ERR_VALUE && strstr(tpurt_last_error(), "buffer 0, which has 16"),
        "too small: %s", tpurt_last_error());
  tpurt_graph_destroy(g);
  tpurt_graph_create(0, &g);
  tpurt_graph_add_buffer(g, TPURT_BUFFER_INPUT, sizeof ha, &A);
  c.op = tpurt_op_lookup("nonzero"), c.nouts = 0;
  tpurt_graph_ref r6[] = {{0, 0, A, 0}};
  tpurt_graph_add_call(g, &c, r6, 1);
  CHECK(tpurt_graph_instantiate(g) == TPURT_ERR_UNSUPPORTED, "data-sized ops have no place in a graph");
  tpurt_graph_destroy(g);

  /* a convolution in a graph takes the graph's planned scratch */
  tpurt_graph_create(0, &g);
  float hx[72] = {0}, hw[54] = {0};
  hx[0] = 1, hw[4] = 2; /* centre tap of filter 0, channel 0 */
  void *x = device_copy(hx, sizeof hx), *w = device_copy(hw, sizeof hw), *out;
  tpurt_malloc(0, 108 * 4, 0, &out);
  int32_t X, W, O;
  tpurt_graph_add_buffer(g, TPURT_BUFFER_INPUT, sizeof hx, &X);
  tpurt_graph_add_buffer(g, TPURT_BUFFER_INPUT, sizeof hw, &W);
  tpurt_graph_add_buffer(g, TPURT_BUFFER_OUTPUT, 108 * 4, &O);
  tpurt_op_call cc = conv_call(NULL, NULL, NULL);
  tpurt_graph_ref r7[] = {{0, 0, X, 0}, {1, 0, W, 0}, {-1, 0, O, 0}};
  CHECK(tpurt_graph_add_call(g, &cc, r7, 3) == TPURT_OK, "conv call");
  CHECK(tpurt_graph_instantiate(g) == TPURT_OK, "conv graph: %s", tpurt_last_error());
  tpurt_graph_get_stats(g, &st);
  CHECK(st.scratch_bytes >= (2 * 8 * 8 + 64) * 4 + 3 * 46 * 4, "the graph plans the conv's scratch: %lld",
        (long long)st.scratch_bytes);
  tpurt_memory_stats before = {.struct_size = sizeof before}, after = {.struct_size = sizeof after};
  tpurt_device_synchronize(0);
  tpurt_memory_get_stats(0, &before);
  tpurt_memory_reset_peak(0);
  void* cbufs[3] = {x, w, out};
  tpurt_graph_launch(g, 0, cbufs);
  CHECK(tpurt_stream_synchronize(0) == TPURT_OK, "conv graph run: %s", tpurt_last_error());
  tpurt_memory_get_stats(0, &after);
  float ho[108];
  tpurt_memcpy_d2h(0, ho, out, sizeof ho);
  CHECK(ho[0] == 2 && ho[1] == 0 && ho[36] == 0, "conv graph result %g %g %g", ho[0], ho[1], ho[36]);
  CHECK(after.allocated_peak == before.allocated_bytes, "no allocation while the graph runs: +%lld",
        (long long)(after.allocated_peak - before.allocated_bytes));
  tpurt_graph_destroy(g);
  tpurt_free(x), tpurt_free(w), tpurt_free(out);
  tpurt_free(a), tpurt_free(b), tpurt_free(y);
}

/* A kernel's temporary never takes a block the host freed while work issued after the kernel
 * still reads it: the kernel is earlier in stream order than that work. */
typedef struct {
  void* x;
  void* temp;
  int intact;
} hazard;

static tpurt_status early_kernel(void* p) {
  hazard* h = p;
  struct timespec ts = {0, 50 * 1000 * 1000};
  nanosleep(&ts, NULL); /* meanwhile the host frees x */
  if (tpurt_malloc_in_kernel(0, 1 << 20, &h->temp)) return TPURT_ERR_OOM;
  memset(h->temp, 0xff, 1 << 20);
  tpurt_free_in_kernel(h->temp);
  return TPURT_OK;
}

static tpurt_status later_reader(void* p) {
  hazard* h = p;
  const unsigned char* b = h->x;
  h->intact = 1;
  for (int i = 0; i < 1 << 20; i++) h->intact &= b[i] == 1;
  return TPURT_OK;
}

static void test_temporary_reuse_order(void) {
  hazard h = {0};
  tpurt_device_synchronize(0);
  tpurt_empty_cache();
  tpurt_malloc(0, 1 << 20, 0, &h.x);
  memset(h.x, 1, 1 << 20);
  tpurt_stream_enqueue(0, early_kernel, &h, NULL, "early");
  tpurt_stream_enqueue(0, later_reader, &h, NULL, "reader");
  tpurt_free(h.x); /* still read by `reader`, issued after `early` */
  CHECK(tpurt_stream_synchronize(0) == TPURT_OK, "%s", tpurt_last_error());
  CHECK(h.temp != h.x && h.intact, "the kernel's temporary took a block queued work still reads");
}

int main(void) {
  test_temporary_reuse_order();
  test_kinds();
  test_plan();
  test_temporaries();
  test_graph();
  return CHECK_DONE();
}
