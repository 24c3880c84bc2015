/* Adding many values into a float16/bfloat16 tensor (scatter_add, index_add, put_ and
 * index_put_ with accumulate, scatter_reduce's sum/prod/mean) combines them in a float32 copy
 * of it and rounds once, as PyTorch CPU's scatter_add and scatter_reduce do: repeated indices
 * would otherwise round at every step (CPU's index_add, put_ and index_put_ do; tpu is the more
 * exact there, and consistent across the family). f32_sums_begin gives the tensor to combine
 * into (the output itself for other dtypes); f32_sums_end writes it back and frees the copy. */
#ifndef TPURT_KERNELS_F32_SUMS_H
#define TPURT_KERNELS_F32_SUMS_H
#include "../internal.h"

static inline int f32_sums_needed(const tpurt_tensor* out) { return out->dtype == TPURT_F16 || out->dtype == TPURT_BF16; }

/* the plan's scratch for outs[0]'s copy */
static inline int64_t f32_sums_scratch(const tpurt_op_call* c) {
  return c->nouts > 0 && f32_sums_needed(&c->outs[0]) ? tpurt_temp_bytes(tpurt_numel(&c->outs[0]) * sizeof(float)) : 0;
}

static inline tpurt_status f32_sums_begin(const tpurt_tensor* out, tpurt_tensor* acc) {
  *acc = *out;
  if (!f32_sums_needed(out)) return TPURT_OK;
  acc->dtype = TPURT_F32;
  acc->data = tpurt_temp(tpurt_numel(out) * sizeof(float));
  if (!acc->data) return TPURT_ERR_OOM;
  int64_t stride = 1;
  for (int d = out->ndim - 1; d >= 0; stride *= out->sizes[d], d--) acc->strides[d] = stride;
  return tpurt_copy_tensor(acc, out);
}

static inline tpurt_status f32_sums_end(const tpurt_tensor* out, tpurt_tensor* acc, tpurt_status s) {
  if (acc->data == out->data) return s;
  if (acc->data && !s) s = tpurt_copy_tensor(out, acc);
  if (acc->data) tpurt_temp_release(acc->data);
  return s;
}
#endif
