/* The sampling kernels on edge inputs under ASan + UBSan: grid_sampler_2d with grid values
 * CPU's int64 cast would overflow (NaN, inf, huge) reads zeros and stays in bounds in every
 * mode; fractional_max_pool2d windows stay inside the input for extreme samples;
 * unfold_backward sums overlapping windows. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "internal.h"

static tpurt_tensor dense(float* data, int ndim, const int64_t* sizes) {
  tpurt_tensor t = {.data = data, .dtype = TPURT_F32, .ndim = ndim};
  for (int d = ndim - 1, st = 1; d >= 0; d--) {
    t.sizes[d] = sizes[d];
    t.strides[d] = st;
    st *= (int)sizes[d];
  }
  return t;
}
static tpurt_value tv(tpurt_tensor t) { return (tpurt_value){.kind = TPURT_V_TENSOR, .scalar_dtype = -1, .t = t}; }
static tpurt_value iv(int64_t i) { return (tpurt_value){.kind = TPURT_V_INT, .scalar_dtype = -1, .i = i}; }
static tpurt_value ints(const int64_t* v, int n) {
  return (tpurt_value){.kind = TPURT_V_INTS, .n = n, .scalar_dtype = -1, .ints = v};
}

static void test_grid_sampler_wild_grid(void) {
  float in[2 * 3 * 4], grid[6 * 2], out[2 * 6];
  for (int i = 0; i < 24; i++) in[i] = (float)i;
  float wild[12] = {NAN, 0, INFINITY, 0.5f, -INFINITY, -1, 1e30f, 1e30f, -1e30f, 0.2f, 0.1f, -0.3f};
  for (int i = 0; i < 12; i++) grid[i] = wild[i];
  int64_t si[4] = {1, 2, 3, 4}, sg[4] = {1, 2, 3, 2}, so[4] = {1, 2, 2, 3};
  for (int interp = 0; interp < 3; interp++)
    for (int pad = 0; pad < 3; pad++)
      for (int align = 0; align < 2; align++) {
        tpurt_op_call c = {.struct_size = sizeof c, .op = tpurt_op_lookup("grid_sampler_2d"), .nargs = 5, .nouts = 1};
        c.args[0] = tv(dense(in, 4, si));
        c.args[1] = tv(dense(grid, 4, sg));
        c.args[2] = iv(interp);
        c.args[3] = iv(pad);
        c.args[4] = (tpurt_value){.kind = TPURT_V_BOOL, .scalar_dtype = -1, .i = align};
        c.outs[0] = dense(out, 4, so);
        CHECK(tpurt_op_run(&c) == TPURT_OK, "grid_sampler_2d mode %d pad %d: %s", interp, pad, tpurt_last_error());
        if (pad == 0) CHECK(out[0] == 0 || isnan(out[0]), "a NaN coordinate reads zero with zeros padding (got %g)", out[0]);
        float bwd_gi[24], bwd_gg[12], go[12];
        for (int i = 0; i < 12; i++) go[i] = 1;
        tpurt_op_call b = {.struct_size = sizeof b, .op = tpurt_op_lookup("grid_sampler_2d_backward"), .nargs = 7, .nouts = 2};
        b.args[0] = tv(dense(go, 4, so));
        for (int k = 0; k < 5; k++) b.args[1 + k] = c.args[k];
        static const int64_t mask[2] = {1, 1};
        b.args[6] = ints(mask, 2);
        b.outs[0] = dense(bwd_gi, 4, si);
        b.outs[1] = dense(bwd_gg, 4, sg);
        CHECK(tpurt_op_run(&b) == TPURT_OK, "grid_sampler_2d_backward mode %d pad %d: %s", interp, pad, tpurt_last_error());
      }
}

static void test_fractional_extreme_samples(void) {
  float in[1 * 2 * 7 * 6], out[2 * 3 * 2];
  int64_t idx[2 * 3 * 2];
  for (int i = 0; i < 84; i++) in[i] = (float)((i * 37) % 11);
  float samples[2][4] = {{0, 0, 0.9999999f, 0.9999999f}, {1, 1, 0.5f, 0}};
  int64_t si[4] = {1, 2, 7, 6}, ss[3] = {1, 2, 2}, so[4] = {1, 2, 3, 2}, k[2] = {3, 2}, osz[2] = {3, 2};
  for (int s = 0; s < 2; s++) {
    tpurt_op_call c = {.struct_size = sizeof c, .op = tpurt_op_lookup("fractional_max_pool2d"), .nargs = 4, .nouts = 2};
    c.args[0] = tv(dense(in, 4, si));
    c.args[1] = ints(k, 2);
    c.args[2] = ints(osz, 2);
    c.args[3] = tv(dense(samples[s], 3, ss));
    c.outs[0] = dense(out, 4, so);
    c.outs[1] = dense((float*)idx, 4, so);
    c.outs[1].dtype = TPURT_I64;
    CHECK(tpurt_op_run(&c) == TPURT_OK, "fractional_max_pool2d: %s", tpurt_last_error());
    for (int i = 0; i < 12; i++) CHECK(idx[i] >= 0 && idx[i] < 42, "index %lld out of the plane", (long long)idx[i]);
  }
  float wild[4] = {1e30f, -1e30f, 3, -2};
  for (int s = 0; s < 4; s++) {
    float u[4] = {wild[s], 0.5f, 0.5f, wild[s]};
    tpurt_op_call c = {.struct_size = sizeof c, .op = tpurt_op_lookup("fractional_max_pool2d"), .nargs = 4, .nouts = 2};
    c.args[0] = tv(dense(in, 4, si));
    c.args[1] = ints(k, 2);
    c.args[2] = ints(osz, 2);
    c.args[3] = tv(dense(u, 3, ss));
    c.outs[0] = dense(out, 4, so);
    c.outs[1] = dense((float*)idx, 4, so);
    c.outs[1].dtype = TPURT_I64;
    tpurt_status st = tpurt_op_run(&c);
    CHECK(st == TPURT_ERR_RUNTIME || st == TPURT_OK, "sample %g: status %d", wild[s], (int)st);
    if (st == TPURT_OK)
      for (int i = 0; i < 12; i++) CHECK(idx[i] >= 0 && idx[i] < 42, "index %lld out of the plane", (long long)idx[i]);
  }
}

/* Samples for fewer planes than the input has (a batch of 2 with samples for 1, or for 1 of 2
 * channels), or of the wrong width, are refused before anything reads past them. */
static void test_fractional_samples_cover_every_plane(void) {
  float in[2 * 2 * 7 * 6] = {0}, out[2 * 2 * 3 * 2], samples[2 * 2 * 2] = {0};
  int64_t idx[2 * 2 * 3 * 2];
  int64_t si[4] = {2, 2, 7, 6}, so[4] = {2, 2, 3, 2}, k[2] = {3, 2}, osz[2] = {3, 2};
  int64_t bad[4][3] = {{1, 2, 2}, {2, 1, 2}, {2, 2, 1}, {2, 2, 2}};
  for (int b = 0; b < 4; b++) {
    tpurt_op_call c = {.struct_size = sizeof c, .op = tpurt_op_lookup("fractional_max_pool2d"), .nargs = 4, .nouts = 2};
    c.args[0] = tv(dense(in, 4, si));
    c.args[1] = ints(k, 2);
    c.args[2] = ints(osz, 2);
    c.args[3] = tv(dense(samples, b == 3 ? 2 : 3, bad[b]));
    c.outs[0] = dense(out, 4, so);
    c.outs[1] = dense((float*)idx, 4, so);
    c.outs[1].dtype = TPURT_I64;
    CHECK(tpurt_op_run(&c) == TPURT_ERR_RUNTIME, "samples %lld x %lld x %lld (%d-D) accepted", (long long)bad[b][0],
          (long long)bad[b][1], (long long)bad[b][2], b == 3 ? 2 : 3);
  }
}

static void test_unfold_backward_overlap(void) {
  float g[3 * 3], out[7];
  for (int i = 0; i < 9; i++) g[i] = 1;
  int64_t sg[2] = {3, 3}, so[1] = {7}, isz[1] = {7};
  tpurt_op_call c = {.struct_size = sizeof c, .op = tpurt_op_lookup("unfold_backward"), .nargs = 5, .nouts = 1};
  c.args[0] = tv(dense(g, 2, sg));
  c.args[1] = ints(isz, 1);
  c.args[2] = iv(0);
  c.args[3] = iv(3);
  c.args[4] = iv(2);
  c.outs[0] = dense(out, 1, so);
  CHECK(tpurt_op_run(&c) == TPURT_OK, "unfold_backward: %s", tpurt_last_error());
  float want[7] = {1, 1, 2, 1, 2, 1, 1};
  for (int i = 0; i < 7; i++) CHECK(out[i] == want[i], "unfold_backward[%d] = %g, want %g", i, out[i], want[i]);
}

int main(void) {
  test_grid_sampler_wild_grid();
  test_fractional_extreme_samples();
  test_fractional_samples_cover_every_plane();
  test_unfold_backward_overlap();
  return CHECK_DONE();
}
