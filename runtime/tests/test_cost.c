/* The cost model against hand-computed cases: GEMMs at and off the MXU tile, an op through
 * its plan, collectives on rings with and without wraparound, the generation table. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "internal.h"

static int close_to(double got, double want) { return fabs(got - want) <= 1e-9 * fabs(want) + 1e-30; }

static tpurt_tensor dense(int dtype, int ndim, const int64_t* sizes) {
  tpurt_tensor t = {.data = NULL, .dtype = dtype, .ndim = ndim};
  for (int d = ndim - 1, st = 1; d >= 0; d--) t.sizes[d] = sizes[d], t.strides[d] = st, st *= (int)sizes[d];
  return t;
}

static void test_generations(void) {
  tpurt_chip_info i = {.struct_size = sizeof i};
  CHECK(tpurt_generation_get_info("v6e-256", &i) == TPURT_OK, "%s", tpurt_last_error());
  CHECK(i.hbm_bytes == 32LL << 30, "v6e HBM is 32 GiB, got %lld", (long long)i.hbm_bytes);
  CHECK(strcmp(i.generation, "v6e") == 0 && i.mxu_dim == 256, "v6e: %s %d", i.generation, i.mxu_dim);
  CHECK(i.slice_chips == 256 && strcmp(i.topology, "16x16") == 0, "v6e-256: %d chips, %s", i.slice_chips, i.topology);
  CHECK(tpurt_generation_get_info("v5p-8", &i) == TPURT_OK && i.slice_chips == 4 && strcmp(i.topology, "2x2x1") == 0,
        "v5p-8 counts TensorCores: %d chips, %s", i.slice_chips, i.topology);
  CHECK(tpurt_generation_get_info("tpu7x-16384", &i) == TPURT_OK && i.slice_chips == 8192, "tpu7x-16384: %d", i.slice_chips);
  CHECK(tpurt_generation_get_info("v5litepod-8", &i) == TPURT_OK && i.hbm_bytes == 16LL << 30, "v5e HBM is 16 GiB");
  CHECK(tpurt_generation_get_info("tpu7x", &i) == TPURT_OK && i.bf16_tflops == 2307 && i.tensorcores == 2, "v7");
  CHECK(tpurt_generation_get_info("v5p-12288", &i) == TPURT_OK && strcmp(i.topology, "16x16x24") == 0,
        "the full v5p pod: %s", i.topology);
  CHECK(tpurt_generation_get_info("v6e-3", &i) == TPURT_ERR_VALUE && strstr(tpurt_last_error(), "powers of two"),
        "v6e-3 refused with the sizes v6e comes in: %s", tpurt_last_error());
  CHECK(tpurt_generation_get_info("v9z", &i) == TPURT_ERR_VALUE, "unknown generation refused");
  CHECK(strstr(tpurt_last_error(), "v9z") != NULL, "%s", tpurt_last_error());
}

static void test_gemm_tiles(void) {
  tpurt_cost c = {.struct_size = sizeof c};
  /* at the tile: 4096^3 bf16 on v6e, MXU-bound */
  tpurt_gemm_shape at = {1, 4096, 4096, 4096, 0};
  double bytes = 3.0 * 4096 * 4096 * 2;
  CHECK(tpurt_gemm_cost("v6e", &at, 1, TPURT_BF16, (int64_t)bytes, &c) == TPURT_OK, "%s", tpurt_last_error());
  double f = 2.0 * 4096 * 4096 * 4096;
  CHECK(close_to(c.flops, f) && close_to(c.mxu_flops, f), "flops %g %g", c.flops, c.mxu_flops);
  CHECK(close_to(c.mxu_seconds, f / 918e12), "mxu %g", c.mxu_seconds);
  CHECK(close_to(c.hbm_seconds, bytes / 1640e9), "hbm %g", c.hbm_seconds);
  CHECK(c.bound == TPURT_BOUND_MXU && close_to(c.seconds, c.mxu_seconds), "bound %d", c.bound);
  /* off the tile: k 4000 and n 4100 pad to 4096 and 4352 on v6e (256), 4096 and 4224 on v5e (128) */
  tpurt_gemm_shape off = {1, 4096, 4100, 4000, 0};
  CHECK(tpurt_gemm_cost("v6e", &off, 1, TPURT_BF16, 0, &c) == TPURT_OK, "v6e off tile");
  CHECK(close_to(c.flops, 2.0 * 4096 * 4100 * 4000), "true flops %g", c.flops);
  CHECK(close_to(c.mxu_flops, 2.0 * 4096 * 4352 * 4096), "v6e padded %g", c.mxu_flops);
  CHECK(tpurt_gemm_cost("v5e", &off, 1, TPURT_BF16, 0, &c) == TPURT_OK, "v5e off tile");
  CHECK(close_to(c.mxu_flops, 2.0 * 4096 * 4224 * 4096), "v5e padded %g", c.mxu_flops);
  CHECK(close_to(c.mxu_seconds, c.mxu_flops / 197e12), "v5e mxu %g", c.mxu_seconds);
  /* rows stream 8 at a time: m = 1 (a decode step) costs 8 rows */
  tpurt_gemm_shape row = {1, 1, 256, 256, 0};
  CHECK(tpurt_gemm_cost("v6e", &row, 1, TPURT_BF16, 0, &c) == TPURT_OK && close_to(c.mxu_flops, 2.0 * 8 * 256 * 256), "m=1");
  /* int8 at the int8 rate, causal at half */
  CHECK(tpurt_gemm_cost("v5e", &at, 1, TPURT_I8, 0, &c) == TPURT_OK && close_to(c.mxu_seconds, f / 393e12), "int8 %g", c.mxu_seconds);
  tpurt_gemm_shape causal = {1, 4096, 4096, 4096, 1};
  CHECK(tpurt_gemm_cost("v6e", &causal, 1, TPURT_BF16, 0, &c) == TPURT_OK && close_to(c.flops, f / 2), "causal %g", c.flops);
  tpurt_gemm_shape bad = {1, -1, 4, 4, 0};
  CHECK(tpurt_gemm_cost("v6e", &bad, 1, TPURT_BF16, 0, &c) == TPURT_ERR_VALUE, "negative size refused");
}

/* An op of the table costs what its plan's GEMMs and bytes give. */
static void test_op_cost(void) {
  int64_t a_sz[] = {512, 300}, b_sz[] = {300, 1000}, o_sz[] = {512, 1000};
  tpurt_op_call c;
  memset(&c, 0, sizeof c);
  c.op = tpurt_op_lookup("mm");
  c.device = 0;
  c.nargs = 2;
  c.args[0] = (tpurt_value){.kind = TPURT_V_TENSOR, .scalar_dtype = -1, .t = dense(TPURT_BF16, 2, a_sz)};
  c.args[1] = (tpurt_value){.kind = TPURT_V_TENSOR, .scalar_dtype = -1, .t = dense(TPURT_BF16, 2, b_sz)};
  for (int i = 2; i < TPURT_MAX_ARGS; i++) c.args[i].kind = TPURT_V_NONE;
  c.nouts = 1;
  c.outs[0] = dense(TPURT_BF16, 2, o_sz);
  tpurt_cost cost = {.struct_size = sizeof cost};
  CHECK(tpurt_op_cost(&c, "v5p", &cost) == TPURT_OK, "%s", tpurt_last_error());
  double padded = 2.0 * 512 * 1024 * 384, bytes = 2.0 * (512 * 300 + 300 * 1000 + 512 * 1000);
  CHECK(close_to(cost.flops, 2.0 * 512 * 1000 * 300) && close_to(cost.mxu_flops, padded), "mm %g %g", cost.flops, cost.mxu_flops);
  CHECK(close_to(cost.mxu_seconds, padded / 459e12) && close_to(cost.hbm_bytes, bytes), "mm v5p %g %g", cost.mxu_seconds, cost.hbm_bytes);
  CHECK(cost.vpu_seconds == 0, "a GEMM has no VPU work: %g", cost.vpu_seconds);
  /* an elementwise add: VPU work, HBM-bound */
  int64_t n[] = {1 << 20};
  memset(&c, 0, sizeof c);
  c.op = tpurt_op_lookup("add.Tensor");
  c.nargs = 3;
  c.args[0] = (tpurt_value){.kind = TPURT_V_TENSOR, .scalar_dtype = -1, .t = dense(TPURT_F32, 1, n)};
  c.args[1] = c.args[0];
  c.args[2] = (tpurt_value){.kind = TPURT_V_INT, .scalar_dtype = -1, .i = 1};
  for (int i = 3; i < TPURT_MAX_ARGS; i++) c.args[i].kind = TPURT_V_NONE;
  c.nouts = 1;
  c.outs[0] = dense(TPURT_F32, 1, n);
  CHECK(tpurt_op_cost(&c, "v6e", &cost) == TPURT_OK, "%s", tpurt_last_error());
  CHECK(close_to(cost.hbm_bytes, 3.0 * 4 * (1 << 20)) && cost.bound == TPURT_BOUND_HBM, "add %g bound %d", cost.hbm_bytes, cost.bound);
  CHECK(close_to(cost.vpu_seconds, (double)(1 << 20) / (918e12 / 32)), "add vpu %g", cost.vpu_seconds);
  CHECK(tpurt_op_cost(&c, "nope", &cost) == TPURT_ERR_VALUE, "unknown generation");
}

static void test_collectives(void) {
  tpurt_cost c = {.struct_size = sizeof c};
  int32_t ring[] = {16}, wrap[] = {1}, line[] = {0};
  const double link = 400e9 / 4, V = 1 << 30; /* v5e: 400 GB/s over 4 links */
  CHECK(tpurt_collective_cost("v5e", TPURT_COLLECTIVE_ALL_REDUCE, 1 << 30, ring, wrap, 1, &c) == TPURT_OK, "%s", tpurt_last_error());
  CHECK(close_to(c.ici_seconds, 2 * V / link) && c.bound == TPURT_BOUND_ICI, "all-reduce ring %g", c.ici_seconds);
  CHECK(tpurt_collective_cost("v5e", TPURT_COLLECTIVE_ALL_REDUCE, 1 << 30, ring, line, 1, &c) == TPURT_OK, "line");
  CHECK(close_to(c.ici_seconds, 2 * V / (link / 2)), "all-reduce without wraparound at half bandwidth %g", c.ici_seconds);
  CHECK(tpurt_collective_cost("v5e", TPURT_COLLECTIVE_ALL_GATHER, 1 << 30, ring, wrap, 1, &c) == TPURT_OK &&
            close_to(c.seconds, V / link), "all-gather %g", c.seconds);
  CHECK(tpurt_collective_cost("v5e", TPURT_COLLECTIVE_ALL_TO_ALL, 1 << 30, ring, wrap, 1, &c) == TPURT_OK &&
            close_to(c.seconds, V / (4 * link)), "all-to-all %g", c.seconds);
  /* 8 bytes: the hop latency floor, 8 hops each way round a ring of 16 (twice for an all-reduce), 15 along a line */
  CHECK(tpurt_collective_cost("v5e", TPURT_COLLECTIVE_ALL_REDUCE, 8, ring, wrap, 1, &c) == TPURT_OK &&
            c.bound == TPURT_BOUND_LATENCY && close_to(c.seconds, 16e-6), "latency ring %g", c.seconds);
  CHECK(tpurt_collective_cost("v5e", TPURT_COLLECTIVE_ALL_REDUCE, 8, ring, line, 1, &c) == TPURT_OK &&
            close_to(c.seconds, 30e-6), "latency line %g", c.seconds);
  /* two axes add their bandwidth */
  int32_t plane[] = {16, 16}, wraps[] = {1, 1};
  CHECK(tpurt_collective_cost("v5e", TPURT_COLLECTIVE_ALL_GATHER, 1 << 30, plane, wraps, 2, &c) == TPURT_OK &&
            close_to(c.ici_seconds, V / (2 * link)), "two axes %g", c.ici_seconds);
  CHECK(tpurt_collective_cost("v4", TPURT_COLLECTIVE_ALL_REDUCE, 8, ring, wrap, 1, &c) == TPURT_ERR_UNSUPPORTED,
        "v4's ICI bandwidth is not published");
  CHECK(tpurt_collective_cost("v5e", 9, 8, ring, wrap, 1, &c) == TPURT_ERR_VALUE, "unknown collective");
}

int main(void) {
  test_generations();
  test_gemm_tiles();
  test_op_cost();
  test_collectives();
  return CHECK_DONE();
}
