/* Spatial geometry shared by the pooling and resampling families: spatial dims are padded to
 * 3 with leading size-1 dims, every leading dim (batch, channels) is a "plane", and each
 * family keeps one table entry per output position of each spatial dim (pooling windows,
 * resampling taps), all in one allocation. */
#ifndef TPURT_SPATIAL_H
#define TPURT_SPATIAL_H

#include <stdlib.h>

#include "../internal.h"

typedef struct {
  int nsp;
  int64_t P;            /* planes */
  int64_t is[3], os[3]; /* input / output spatial sizes */
} spatial;

/* Size / stride of padded spatial dim i (of 3) of a tensor with nsp spatial dims. */
static inline int64_t sp_size(const tpurt_tensor* t, int nsp, int i) {
  int j = i - (3 - nsp);
  return j < 0 ? 1 : t->sizes[t->ndim - nsp + j];
}
static inline int64_t sp_stride(const tpurt_tensor* t, int nsp, int i) {
  int j = i - (3 - nsp);
  return j < 0 ? 0 : t->strides[t->ndim - nsp + j];
}

/* Element offset of plane p of a tensor whose first `lead` dims are planes. */
static inline int64_t plane_off(const tpurt_tensor* t, int lead, int64_t p) {
  int64_t off = 0;
  for (int d = lead - 1; d >= 0; d--) {
    off += (p % t->sizes[d]) * t->strides[d];
    p /= t->sizes[d];
  }
  return off;
}

/* Bytes of the tables' block for a tensor `out` with the output's spatial sizes (the temporary
 * spatial_init takes, which its users' plan hooks count). */
static inline size_t spatial_table_bytes(int nsp, const tpurt_tensor* out, size_t entry) {
  int64_t tot = 0;
  for (int i = 0; i < 3; i++) tot += sp_size(out, nsp, i);
  return entry * (size_t)(tot ? tot : 1);
}

/* Bytes of a backward's dense double accumulator for grad_input gi. */
static inline size_t spatial_acc_bytes(const tpurt_tensor* gi) {
  int64_t n = tpurt_numel(gi);
  return sizeof(double) * (size_t)(n ? n : 1);
}

/* in / out: tensors with the input's / output's spatial sizes. Points tab[i] at os[i]
 * entries of `entry` bytes each, in one block (returned, for tpurt_temp_release(); NULL when out of
 * memory). */
static inline void* spatial_init(spatial* s, int nsp, const tpurt_tensor* in, const tpurt_tensor* out, size_t entry,
                                 void* tab[3]) {
  s->nsp = nsp;
  s->P = 1;
  for (int d = 0; d < in->ndim - nsp; d++) s->P *= in->sizes[d];
  for (int i = 0; i < 3; i++) {
    s->is[i] = sp_size(in, nsp, i);
    s->os[i] = sp_size(out, nsp, i);
  }
  char* block = tpurt_temp(spatial_table_bytes(nsp, out, entry));
  int64_t at = 0;
  for (int i = 0; i < 3; at += s->os[i], i++) tab[i] = block ? block + entry * (size_t)at : NULL;
  return block;
}

/* Loop over planes p and output positions (od, oh, ow). */
#define SPATIAL_FOR_OUTPUTS(s, ...)                      \
  for (int64_t p = 0; p < (s)->P; p++)                   \
    for (int64_t od = 0; od < (s)->os[0]; od++)          \
      for (int64_t oh = 0; oh < (s)->os[1]; oh++)        \
        for (int64_t ow = 0; ow < (s)->os[2]; ow++) __VA_ARGS__

#endif
