/* Data-dependent checks of the segment, histogram, scatter_reduce, index_copy and
 * multi_margin_loss kernels: bad segment bounds (even with unsafe=True, where CPU trusts
 * them), out-of-range indices and targets, edges without bins, non-finite data. Each must
 * fail with CPU's status and never touch memory out of bounds (ASan + UBSan). */
#include <string.h>

#include "check.h"
#include "internal.h"

static tpurt_tensor vec(void* data, int dtype, int64_t n) {
  tpurt_tensor t = {.data = data, .dtype = dtype, .ndim = 1};
  t.sizes[0] = n, t.strides[0] = 1;
  return t;
}
static tpurt_value tv(tpurt_tensor t) { return (tpurt_value){.kind = TPURT_V_TENSOR, .scalar_dtype = -1, .t = t}; }
static tpurt_value iv(int64_t i) { return (tpurt_value){.kind = TPURT_V_INT, .scalar_dtype = -1, .i = i}; }
static tpurt_value sv(const char* s) { return (tpurt_value){.kind = TPURT_V_STRING, .scalar_dtype = -1, .s = s}; }
static const tpurt_value NONE = {.kind = TPURT_V_NONE, .scalar_dtype = -1};
static tpurt_op_call call_of(const char* name, int nargs, int nouts) {
  tpurt_op_call c;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  c.op = tpurt_op_lookup(name);
  c.nargs = nargs, c.nouts = nouts;
  return c;
}

static void test_segment_bounds(void) {
  float data[4] = {1, 2, 3, 4}, out[2] = {0, 0};
  int64_t long_lengths[2] = {3, 3}, offsets[3] = {0, 3, 1};
  /* segment_reduce(data, reduce, lengths, indices, offsets, axis, unsafe, initial) */
  tpurt_op_call c = call_of("segment_reduce", 8, 1);
  c.args[0] = tv(vec(data, TPURT_F32, 4));
  c.args[1] = sv("sum");
  c.args[2] = tv(vec(long_lengths, TPURT_I64, 2));
  c.args[3] = c.args[4] = c.args[7] = NONE;
  c.args[5] = iv(0);
  c.args[6] = iv(1);
  c.outs[0] = vec(out, TPURT_F32, 2);
  CHECK(tpurt_op_run(&c) == TPURT_ERR_RUNTIME, "segments past the data must fail even when unsafe");
  c.args[6] = iv(0);
  CHECK(tpurt_op_run(&c) == TPURT_ERR_RUNTIME && strstr(tpurt_last_error(), "sum to"), "lengths not summing: %s",
        tpurt_last_error());
  c.args[2] = NONE;
  c.args[4] = tv(vec(offsets, TPURT_I64, 3));
  CHECK(tpurt_op_run(&c) == TPURT_ERR_RUNTIME, "decreasing offsets must fail");
  c.args[1] = sv("median");
  CHECK(tpurt_op_run(&c) == TPURT_ERR_RUNTIME && strstr(tpurt_last_error(), "reduce argument must be either sum"),
        "reduce: %s", tpurt_last_error());
  CHECK(out[0] == 0 && out[1] == 0, "nothing written");
}

static void test_scatter_reduce_and_index_copy(void) {
  float self[3] = {1, 2, 3}, src[2] = {5, 6}, out[3] = {0, 0, 0};
  int64_t bad[2] = {0, 3};
  /* scatter_reduce.two(self, dim, index, src, reduce, include_self) */
  tpurt_op_call c = call_of("scatter_reduce.two", 6, 1);
  c.args[0] = tv(vec(self, TPURT_F32, 3));
  c.args[1] = iv(0);
  c.args[2] = tv(vec(bad, TPURT_I64, 2));
  c.args[3] = tv(vec(src, TPURT_F32, 2));
  c.args[4] = sv("amax");
  c.args[5] = iv(1);
  c.outs[0] = vec(out, TPURT_F32, 3);
  CHECK(tpurt_op_run(&c) == TPURT_ERR_RUNTIME && strstr(tpurt_last_error(), "out of bounds"), "scatter_reduce: %s",
        tpurt_last_error());
  CHECK(out[0] == 0, "nothing written before the failure");
  /* index_copy(self, dim, index, source) */
  tpurt_op_call ic = call_of("index_copy", 4, 1);
  ic.args[0] = c.args[0], ic.args[1] = iv(0), ic.args[2] = c.args[2], ic.args[3] = c.args[3];
  ic.outs[0] = c.outs[0];
  CHECK(tpurt_op_run(&ic) == TPURT_ERR_INDEX, "index_copy out of range must fail: %s", tpurt_last_error());
}

static void test_histogram(void) {
  float x[3] = {0.5f, 1, INFINITY}, edge[1] = {0.5f}, hist[1] = {-1}, edges[4];
  /* histogram.bins_tensor(self, bins, weight, density) with one edge: no bins to fill */
  tpurt_op_call c = call_of("histogram.bins_tensor", 4, 2);
  c.args[0] = tv(vec(x, TPURT_F32, 2));
  c.args[1] = tv(vec(edge, TPURT_F32, 1));
  c.args[2] = NONE;
  c.args[3] = iv(0);
  c.outs[0] = vec(hist, TPURT_F32, 0);
  c.outs[1] = vec(edges, TPURT_F32, 1);
  CHECK(tpurt_op_run(&c) == TPURT_OK, "no bins: %s", tpurt_last_error());
  CHECK(hist[0] == -1, "nothing written outside an empty hist");
  /* histogram.bin_ct(self, bins, range, weight, density) over data with an infinity */
  tpurt_op_call b = call_of("histogram.bin_ct", 5, 2);
  b.args[0] = tv(vec(x, TPURT_F32, 3));
  b.args[1] = iv(3);
  b.args[2] = b.args[3] = NONE;
  b.args[4] = iv(0);
  float h3[3], e4[4];
  b.outs[0] = vec(h3, TPURT_F32, 3);
  b.outs[1] = vec(e4, TPURT_F32, 4);
  CHECK(tpurt_op_run(&b) == TPURT_ERR_RUNTIME && strstr(tpurt_last_error(), "not finite"), "range: %s",
        tpurt_last_error());
}

static void test_multi_margin_target(void) {
  float x[6] = {0, 1, 2, 3, 4, 5}, out = 0;
  int64_t target[2] = {1, 3};
  /* multi_margin_loss(self, target, p, margin, weight, reduction) */
  tpurt_op_call c = call_of("multi_margin_loss", 6, 1);
  c.args[0] = tv((tpurt_tensor){.data = x, .dtype = TPURT_F32, .ndim = 2, .sizes = {2, 3}, .strides = {3, 1}});
  c.args[1] = tv(vec(target, TPURT_I64, 2));
  c.args[2] = iv(1);
  c.args[3] = iv(1);
  c.args[4] = NONE;
  c.args[5] = iv(1);
  c.outs[0] = (tpurt_tensor){.data = &out, .dtype = TPURT_F32, .ndim = 0};
  CHECK(tpurt_op_run(&c) == TPURT_ERR_RUNTIME && strstr(tpurt_last_error(), "target out of range"), "target: %s",
        tpurt_last_error());
}

int main(void) {
  test_segment_bounds();
  test_scatter_reduce_and_index_copy();
  test_histogram();
  test_multi_margin_target();
  return CHECK_DONE();
}
