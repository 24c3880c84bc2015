/* The cost model: what work would take on a real TPU generation, from its public figures
 * (torch_tpu/specs/tpu_specs.json through generations.gen.h). Every formula is here, with its
 * source; the dry run (torch_tpu/dryrun.py) composes these per-op and per-collective costs into
 * a step and names its own few calibration constants.
 *
 * One op: the MXU, the VPU and HBM work in parallel, so the op takes as long as the slowest
 * (the roofline; "All about rooflines", JAX scaling book, jax-ml.github.io/scaling-book).
 *   MXU  sum over the op's GEMMs of 2 * batch * pad(m, 8) * pad(n, D) * pad(k, D) / peak, halved
 *        for a causal GEMM (flash attention skips the blocks above the diagonal). D is the
 *        generation's MXU dimension (128 on v4, v5e, v5p; 256 on v6e, v7): the weight tile held
 *        in the systolic array is D x D and the other operand streams through it 8 rows (one
 *        vreg of sublanes) at a time (scaling book, "How to think about TPUs": bf16[8,128] @
 *        bf16[128,128] per 8 cycles). peak: the published dense bf16 FLOP/s (int8 ops at the
 *        published int8 rate where there is one), never derived from MXU geometry, where the
 *        sources disagree. f32 and f16 GEMMs count at the bf16 peak: TPUs run them as one bf16
 *        pass at DEFAULT precision.
 *   VPU  the op's other operations / (peak / VPU_SHARE): the VPU is 8 sublanes x 128 lanes x
 *        4 ALUs = 4,096 operations a cycle against 4 MXUs x 128 x 128 x 2 = 131,072 on v5e
 *        (scaling book, "How to think about TPUs"), 1/32; the same share for every generation.
 *   HBM  the bytes the op reads and writes / the published HBM bandwidth.
 *
 * One collective over the torus axes of a slice ("How to think about TPUs", ICI; "Sharded
 * matrices", the cost of each collective), V the full array per chip:
 *   all-gather, reduce-scatter  T = V / W,  all-reduce 2V / W,  all-to-all V / (4 W),
 *   W = sum over the axes of W_link * (1 on an axis that wraps around into a ring, 1/2 on one
 *   that does not), W_link the bidirectional bandwidth of one ICI link: the chip's published
 *   total over its 2 * dims links (4 on a 2-D torus, 6 on a 3-D one).
 *   A floor of HOP_LATENCY per hop: ceil(n/2) hops around a ring of n, n - 1 along a line;
 *   an all-reduce walks them twice. */
#include <math.h>

#include "internal.h"

enum { VPU_SHARE = 32, ROW_TILE = 8 };
static const double HOP_LATENCY_S = 1e-6; /* scaling book: "about 1 us" per ICI hop */

static double pad(int64_t x, int64_t to) { return (double)((x + to - 1) / to * to); }

static tpurt_status generation_of(const char* name, const generation** out) {
  *out = tpurt_generation_named(name);
  if (*out) return TPURT_OK;
  return tpurt_fail(TPURT_ERR_VALUE, "'%s' is not a TPU generation or slice name; expected one of v4, v5e (v5litepod), "
                    "v5p, v6e, v7 (tpu7x), optionally with a size (v6e-256)", name ? name : "(null)");
}

static void take_roofline(tpurt_cost* c) {
  const double t[] = {0, c->mxu_seconds, c->vpu_seconds, c->hbm_seconds, c->ici_seconds};
  c->seconds = 0;
  c->bound = TPURT_BOUND_NONE;
  for (int b = TPURT_BOUND_MXU; b <= TPURT_BOUND_ICI; b++)
    if (t[b] > c->seconds) c->seconds = t[b], c->bound = b;
}

static tpurt_status give(const tpurt_cost* c, tpurt_cost* out) {
  size_t n = out->struct_size && out->struct_size < sizeof *c ? out->struct_size : sizeof *c;
  memcpy(out, c, n);
  out->struct_size = n;
  return TPURT_OK;
}

static double gemm_flops(const tpurt_gemm_shape* g, int padded, int64_t tile) {
  double m = padded ? pad(g->m, ROW_TILE) : (double)g->m, n = padded ? pad(g->n, tile) : (double)g->n,
         k = padded ? pad(g->k, tile) : (double)g->k;
  return 2.0 * (double)g->batch * m * n * k * (g->causal ? 0.5 : 1.0);
}

/* The MXU and HBM parts of cost c for gemms (the VPU part is the caller's). */
static tpurt_status add_gemms(const generation* gen, const tpurt_gemm_shape* gemms, int ngemms, int32_t dtype, tpurt_cost* c) {
  if (ngemms < 0 || ngemms > TPURT_MAX_GEMMS || (ngemms && !gemms))
    return tpurt_fail(TPURT_ERR_VALUE, "cost model: %d GEMMs (at most %d)", ngemms, TPURT_MAX_GEMMS);
  double true_flops = 0;
  for (int i = 0; i < ngemms; i++) {
    const tpurt_gemm_shape* g = &gemms[i];
    if (g->batch < 0 || g->m < 0 || g->n < 0 || g->k < 0)
      return tpurt_fail(TPURT_ERR_VALUE, "cost model: negative GEMM size [%lld] %lldx%lldx%lld", (long long)g->batch,
                        (long long)g->m, (long long)g->n, (long long)g->k);
    true_flops += gemm_flops(g, 0, 1);
    c->mxu_flops += gemm_flops(g, 1, gen->mxu_dim);
  }
  int int8 = dtype == TPURT_I8 || dtype == TPURT_U8;
  double peak = (int8 && gen->int8_tops > 0 ? gen->int8_tops : gen->bf16_tflops) * 1e12;
  c->mxu_seconds = c->mxu_flops / peak;
  c->flops += true_flops;
  return TPURT_OK;
}

static void add_hbm(const generation* gen, double bytes, tpurt_cost* c) {
  c->hbm_bytes += bytes;
  c->hbm_seconds = c->hbm_bytes / (gen->hbm_GBps * 1e9);
}

tpurt_status tpurt_gemm_cost(const char* generation_name, const tpurt_gemm_shape* gemms, int ngemms, int32_t dtype,
                             int64_t hbm_bytes, tpurt_cost* out) {
  const generation* gen;
  tpurt_status s = generation_of(generation_name, &gen);
  if (s) return s;
  tpurt_cost c = {.struct_size = sizeof c};
  if ((s = add_gemms(gen, gemms, ngemms, dtype, &c))) return s;
  add_hbm(gen, (double)hbm_bytes, &c);
  take_roofline(&c);
  return give(&c, out);
}

tpurt_status tpurt_op_cost(const tpurt_op_call* call, const char* generation_name, tpurt_cost* out) {
  const generation* gen;
  tpurt_status s = generation_of(generation_name, &gen);
  if (s) return s;
  tpurt_plan p = {.struct_size = sizeof p};
  if ((s = tpurt_op_plan(call, &p))) return s;
  tpurt_cost c = {.struct_size = sizeof c};
  int32_t dtype = TPURT_BF16;
  if (p.ngemms) {
    tpurt_op_info info = {.struct_size = sizeof info};
    tpurt_op_get_info(call->op, &info);
    const tpurt_value* a = &call->args[info.contract[0]];
    if (a->kind == TPURT_V_TENSOR) dtype = a->t.dtype;
  }
  if ((s = add_gemms(gen, p.gemms, p.ngemms, dtype, &c))) return s;
  double other = (double)p.flops - c.flops; /* what the GEMMs do not cover runs on the VPU */
  if (other > 0) {
    c.flops += other;
    c.vpu_seconds = other / (gen->bf16_tflops * 1e12 / VPU_SHARE);
  }
  add_hbm(gen, (double)p.bytes_moved, &c);
  take_roofline(&c);
  return give(&c, out);
}

tpurt_status tpurt_collective_cost(const char* generation_name, int32_t collective, int64_t bytes, const int32_t* axis_sizes,
                                   const int32_t* wraparound, int32_t naxes, tpurt_cost* out) {
  const generation* gen;
  tpurt_status s = generation_of(generation_name, &gen);
  if (s) return s;
  if (collective < 0 || collective >= TPURT_COLLECTIVE_COUNT)
    return tpurt_fail(TPURT_ERR_VALUE, "cost model: unknown collective %d", collective);
  if (bytes < 0 || naxes < 0 || naxes > 3 || (naxes && (!axis_sizes || !wraparound)))
    return tpurt_fail(TPURT_ERR_VALUE, "cost model: a collective of %lld bytes over %d axes (at most 3)", (long long)bytes, naxes);
  if (gen->ici_GBps_bidir <= 0)
    return tpurt_fail(TPURT_ERR_UNSUPPORTED, "cost model: %s's ICI bandwidth is not published (tpu_specs.json)", gen->name);
  double link = gen->ici_GBps_bidir * 1e9 / (2 * gen->topology_dims), bandwidth = 0;
  int hops = 0;
  for (int i = 0; i < naxes; i++) {
    if (axis_sizes[i] < 1) return tpurt_fail(TPURT_ERR_VALUE, "cost model: an axis of %d chips", axis_sizes[i]);
    if (axis_sizes[i] == 1) continue;
    bandwidth += wraparound[i] ? link : link / 2;
    hops += wraparound[i] ? (axis_sizes[i] + 1) / 2 : axis_sizes[i] - 1;
  }
  tpurt_cost c = {.struct_size = sizeof c};
  if (bandwidth > 0 && bytes > 0) {
    static const double volume[TPURT_COLLECTIVE_COUNT] = {[TPURT_COLLECTIVE_ALL_REDUCE] = 2, [TPURT_COLLECTIVE_ALL_GATHER] = 1,
                                                          [TPURT_COLLECTIVE_REDUCE_SCATTER] = 1, [TPURT_COLLECTIVE_ALL_TO_ALL] = 0.25};
    static const int walks[TPURT_COLLECTIVE_COUNT] = {[TPURT_COLLECTIVE_ALL_REDUCE] = 2, [TPURT_COLLECTIVE_ALL_GATHER] = 1,
                                                      [TPURT_COLLECTIVE_REDUCE_SCATTER] = 1, [TPURT_COLLECTIVE_ALL_TO_ALL] = 1};
    c.ici_bytes = volume[collective] * (double)bytes;
    c.ici_seconds = c.ici_bytes / bandwidth;
    double floor = walks[collective] * hops * HOP_LATENCY_S;
    take_roofline(&c);
    if (floor > c.seconds) c.seconds = floor, c.bound = TPURT_BOUND_LATENCY;
  }
  return give(&c, out);
}
