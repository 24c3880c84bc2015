/* The plan step: what the runtime will do with a call, from its descriptors alone. Generic
 * facts come from the op table (kind, flags, linked descriptors); a kernel with a plan hook
 * (tpurt_plan_<kernel>) adds its own dtype checks, scratch and flops. */
#include "internal.h"

static int64_t tensor_bytes(const tpurt_tensor* t) {
  return t->ndim < 0 ? 0 : tpurt_numel(t) * (int64_t)tpurt_dtype_size((tpurt_dtype)t->dtype);
}

static int64_t align64(int64_t n) { return (n + 63) & ~(int64_t)63; }

/* What launch.c's run_private takes, in its order: a copy of the call, then each output. */
static int64_t private_output_bytes(const tpurt_op_call* c) {
  int64_t n = align64(sizeof(tpurt_op_call));
  for (int o = 0; o < c->nouts; o++) n += align64(tensor_bytes(&c->outs[o]));
  return n;
}

int64_t tpurt_op_scratch_bytes(const tpurt_op_call* c) {
  int64_t n = tpurt_needs_private_outputs(c) ? private_output_bytes(c) : 0;
  tpurt_plan_fn hook = tpurt_op_plan_hook(c->op);
  if (hook) {
    tpurt_plan p = {.struct_size = sizeof p};
    if (hook(c, &p) == TPURT_OK) n += p.scratch_bytes; /* a refusal fails the kernel itself */
  }
  return n;
}

/* Every tensor of the call, inputs then outputs, for fn(t, arg). */
static void for_each_tensor(const tpurt_op_call* c, void (*fn)(const tpurt_tensor*, void*), void* arg) {
  for (int a = 0; a < c->nargs; a++) {
    const tpurt_value* v = &c->args[a];
    if (v->kind == TPURT_V_TENSOR) fn(&v->t, arg);
    else if (v->kind == TPURT_V_TENSORS)
      for (int k = 0; k < v->n; k++)
        if (v->tensors[k].ndim >= 0) fn(&v->tensors[k], arg);
  }
  for (int o = 0; o < c->nouts; o++) fn(&c->outs[o], arg);
}

typedef struct {
  int64_t bytes;
  int bad_dtype, complex, too_many_dims;
} survey;

static void look(const tpurt_tensor* t, void* p) {
  survey* s = p;
  s->bytes += tensor_bytes(t);
  if (t->dtype < 0 || t->dtype >= TPURT_DTYPE_COUNT) s->bad_dtype = 1;
  else if (tpurt_is_complex(t->dtype)) s->complex = 1;
  if (t->ndim > TPURT_MAX_DIMS) s->too_many_dims = 1;
}

/* The product a matrix op performs: a [batch.., m, k] times b [.., k, n], vectors as one row
 * or column (mv, dot); addbmm sums its batch into one output. */
static int generic_gemm(const tpurt_op_call* c, const tpurt_op_info* info, tpurt_gemm_shape* g) {
  const tpurt_value *a = &c->args[info->contract[0]], *b = &c->args[info->contract[1]];
  if (a->kind != TPURT_V_TENSOR || b->kind != TPURT_V_TENSOR || a->t.ndim < 1 || b->t.ndim < 1) return 0;
  g->k = a->t.sizes[a->t.ndim - 1];
  g->m = a->t.ndim >= 2 ? a->t.sizes[a->t.ndim - 2] : 1;
  g->n = b->t.ndim >= 2 ? b->t.sizes[b->t.ndim - 1] : 1;
  int64_t per = g->m * g->k;
  g->batch = per > 0 ? tpurt_numel(&a->t) / per : 0;
  g->causal = 0;
  return 1;
}

/* Operations of the common kinds; kernels with a hook refine it (convolution). */
static int64_t generic_flops(const tpurt_op_call* c, const tpurt_op_info* info, const tpurt_plan* p) {
  int64_t out = c->nouts > 0 && c->outs[0].ndim >= 0 ? tpurt_numel(&c->outs[0]) : 0;
  switch (info->kind) {
    case TPURT_KIND_ELEMENTWISE: return out * (info->arity > 1 ? info->arity - 1 : 1);
    case TPURT_KIND_REDUCTION:
    case TPURT_KIND_SCAN:
      return c->nargs > 0 && c->args[0].kind == TPURT_V_TENSOR ? tpurt_numel(&c->args[0].t) : 0;
    case TPURT_KIND_MATMUL:
      return p->ngemms ? 2 * p->gemms[0].batch * p->gemms[0].m * p->gemms[0].n * p->gemms[0].k : 0;
    default: return 0;
  }
}

tpurt_status tpurt_op_plan(const tpurt_op_call* c, tpurt_plan* out) {
  tpurt_status s = tpurt_check_call(c, 0);
  if (s) return s;
  tpurt_op_info info = {.struct_size = sizeof info};
  tpurt_op_get_info(c->op, &info);
  survey sv = {0};
  for_each_tensor(c, look, &sv);
  if (sv.bad_dtype) return tpurt_fail(TPURT_ERR_TYPE, "op %s: a tensor of unknown dtype", info.kernel);
  if (sv.too_many_dims)
    return tpurt_fail(TPURT_ERR_UNSUPPORTED, "op %s: more than %d dimensions", info.kernel, TPURT_MAX_DIMS);
  if (sv.complex && !(info.flags & TPURT_OPF_COMPLEX))
    return tpurt_fail(TPURT_ERR_UNSUPPORTED, "op %s: no complex64 kernel", info.kernel);
  const struct ew_op* ew = tpurt_op_ew_desc(c->op);
  if (ew && c->nouts > 0 && (s = tpurt_ew_plan(c, ew))) return s;

  tpurt_plan p;
  memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  p.kind = info.kind;
  p.outputs_from_data = (info.flags & TPURT_OPF_DATA_SIZED) != 0;
  p.runs_blocking = tpurt_op_runs_blocking(c);
  p.bytes_moved = sv.bytes;
  if (info.kind == TPURT_KIND_MATMUL) p.ngemms = generic_gemm(c, &info, &p.gemms[0]);
  p.flops = generic_flops(c, &info, &p);
  p.nouts = c->nouts;
  memcpy(p.outs, c->outs, sizeof(tpurt_tensor) * (size_t)c->nouts);
  p.private_outputs = tpurt_needs_private_outputs(c);
  if (p.private_outputs) p.scratch_bytes += private_output_bytes(c);
  tpurt_plan_fn hook = tpurt_op_plan_hook(c->op);
  if (hook && (s = hook(c, &p))) return s;
  size_t n = out->struct_size && out->struct_size < sizeof p ? out->struct_size : sizeof p;
  memcpy(out, &p, n);
  out->struct_size = n;
  return TPURT_OK;
}
