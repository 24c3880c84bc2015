/* segment_reduce and _segment_reduce_backward as CPU's SegmentReduce.cpp computes them: data
 * viewed as [outer, N, inner] around `axis`, segments of the axis given per outer row by
 * lengths [outer..., S] or offsets [outer..., S + 1], reduced in order from `initial` (or the
 * reduction's identity) with scalar_t arithmetic, i.e. rounding to the data dtype after every
 * operation. Segment bounds are checked even where CPU trusts them (unsafe, offsets), since
 * CPU would read out of bounds there. */
#include <stdlib.h>

#include "../internal.h"

typedef enum { SR_MAX, SR_MEAN, SR_MIN, SR_SUM, SR_PROD } sr_op;
static const char* const SR_NAMES[] = {"max", "mean", "min", "sum", "prod"};

/* A parsed call: segment k of outer row o covers [start(o, k), start(o, k) + len(o, k)). */
typedef struct {
  sr_op op;
  int dt, has_initial;
  double initial;
  int64_t outer, n, inner, segs;
  const tpurt_tensor* bounds; /* lengths or offsets */
  int offsets;
} seg_plan;

/* Offset of flat index k over dims [d0, d1) of t. */
static int64_t dims_offset(const tpurt_tensor* t, int d0, int d1, int64_t k) {
  int64_t off = 0;
  for (int d = d1 - 1; d >= d0; d--) off += (k % t->sizes[d]) * t->strides[d], k /= t->sizes[d];
  return off;
}
static int64_t bound_at(const seg_plan* p, int64_t o, int64_t k) {
  const tpurt_tensor* b = p->bounds;
  int last = b->ndim - 1;
  int64_t off = dims_offset(b, 0, last, o) + k * b->strides[last];
  return tpurt_load_i64((const char*)b->data + off * (int64_t)tpurt_dtype_size((tpurt_dtype)b->dtype), b->dtype);
}
static void segment_of(const seg_plan* p, int64_t o, int64_t k, int64_t* start, int64_t* len) {
  if (p->offsets) {
    *start = bound_at(p, o, k), *len = bound_at(p, o, k + 1) - *start;
    return;
  }
  int64_t s = 0;
  for (int64_t j = 0; j < k; j++) s += bound_at(p, o, j);
  *start = s, *len = bound_at(p, o, k);
}
/* Element (o, j, i) of a tensor shaped like data (or like the output, j a segment). */
static char* elem3(const tpurt_tensor* t, int axis, int64_t o, int64_t j, int64_t i) {
  int64_t off = dims_offset(t, 0, axis, o) + j * t->strides[axis] + dims_offset(t, axis + 1, t->ndim, i);
  return (char*)t->data + off * (int64_t)tpurt_dtype_size((tpurt_dtype)t->dtype);
}

/* Validates arguments shared by forward and backward; fills p. bounds_arg / offsets_arg are
 * the argument indices of lengths and offsets. */
static tpurt_status plan(const tpurt_op_call* c, const tpurt_tensor* data, const char* reduce, int lengths_arg,
                         int offsets_arg, int64_t axis, const tpurt_value* initial, int check_sums, seg_plan* p,
                         int* axis_out) {
  int r = 0;
  while (r < 5 && strcmp(reduce, SR_NAMES[r])) r++;
  if (!strcmp(reduce, "amax")) r = SR_MAX; /* CPU's get_reduction_enum takes both names */
  if (!strcmp(reduce, "amin")) r = SR_MIN;
  if (r == 5)
    return tpurt_fail(TPURT_ERR_RUNTIME, "reduce argument must be either sum, prod, mean, amax or amin, got %s", reduce);
  if (!tpurt_is_float(data->dtype))
    return tpurt_fail(TPURT_ERR_UNSUPPORTED, "\"_segment_reduce_cpu\" not implemented for '%s'",
                      tpurt_dtype_c10_name((tpurt_dtype)data->dtype));
  const tpurt_value *lv = &c->args[lengths_arg], *ov = &c->args[offsets_arg];
  int offsets = ov->kind == TPURT_V_TENSOR;
  if (!offsets && lv->kind != TPURT_V_TENSOR)
    return tpurt_fail(TPURT_ERR_RUNTIME, "segment_reduce(): Either lengths or offsets must be defined.");
  const tpurt_tensor* b = offsets ? &ov->t : &lv->t;
  int nd = data->ndim ? data->ndim : 1;
  if (axis < -nd || axis >= nd)
    return tpurt_fail(TPURT_ERR_INDEX, "Dimension out of range (expected to be in range of [%d, %d], but got %lld)", -nd,
                      nd - 1, (long long)axis);
  axis = axis < 0 ? axis + nd : axis;
  if (data->ndim == 0 || b->ndim == 0 || data->ndim < b->ndim)
    return tpurt_fail(TPURT_ERR_RUNTIME, "segment_reduce(): expected data.dim() >= %s.dim() >= 1", offsets ? "offsets" : "lengths");
  if (axis != b->ndim - 1)
    return tpurt_fail(TPURT_ERR_RUNTIME, "segment_reduce(): Expected axis to be the last dimension of %s but got %lld.",
                      offsets ? "offsets" : "lengths", (long long)axis);
  if (b->dtype != TPURT_I32 && b->dtype != TPURT_I64)
    return tpurt_fail(TPURT_ERR_UNSUPPORTED, "\"_segment_reduce_%s_cpu_kernel1\" not implemented for '%s'",
                      offsets ? "offsets" : "lengths", tpurt_dtype_c10_name((tpurt_dtype)b->dtype));
  p->op = (sr_op)r, p->dt = data->dtype, p->bounds = b, p->offsets = offsets;
  p->has_initial = initial->kind != TPURT_V_NONE;
  p->initial = p->has_initial ? tpurt_round_to(data->dtype, tpurt_value_f(initial)) : 0;
  p->outer = 1, p->inner = 1, p->n = data->sizes[axis];
  for (int d = 0; d < axis; d++) {
    if (b->sizes[d] != data->sizes[d])
      return tpurt_fail(TPURT_ERR_RUNTIME, "segment_reduce(): %s %s does not match data %s before axis %lld",
                        offsets ? "offsets" : "lengths", tpurt_shape_str(b), tpurt_shape_str(data), (long long)axis);
    p->outer *= data->sizes[d];
  }
  for (int d = axis + 1; d < data->ndim; d++) p->inner *= data->sizes[d];
  p->segs = b->sizes[axis] - offsets;
  if (p->segs < 0) return tpurt_fail(TPURT_ERR_RUNTIME, "segment_reduce(): offsets must not be empty");
  /* CPU's checks first (negative lengths, then the row sums), then the bounds it trusts */
  int64_t bad = -1, bad_start = 0, bad_end = 0;
  for (int64_t o = 0; o < p->outer; o++) {
    int64_t total = 0;
    for (int64_t k = 0; k < p->segs; k++) {
      int64_t start, len;
      segment_of(p, o, k, &start, &len);
      if (len < 0)
        return tpurt_fail(TPURT_ERR_RUNTIME, offsets ? "segment_reduce(): offsets must be non-decreasing"
                                                     : "lengths contains negative value!");
      if ((start < 0 || start + len > p->n) && bad < 0) bad = o, bad_start = start, bad_end = start + len;
      total += len;
    }
    if (check_sums && total != p->n)
      return tpurt_fail(TPURT_ERR_RUNTIME, "segment_reduce(): Expected all rows of lengths along axis to sum to "
                                           "data.size(lengths.dim()-1) when !unsafe.");
  }
  if (bad >= 0)
    return tpurt_fail(TPURT_ERR_RUNTIME, "segment_reduce(): segment [%lld, %lld) is outside data.size(%lld) = %lld",
                      (long long)bad_start, (long long)bad_end, (long long)axis, (long long)p->n);
  *axis_out = (int)axis;
  return TPURT_OK;
}

tpurt_status tpurt_kernel_segment_reduce(const tpurt_op_call* c) {
  /* segment_reduce(data, reduce, *, lengths, indices, offsets, axis, unsafe, initial) */
  const tpurt_tensor *data = &TPURT_ARG(c, segment_reduce, data)->t, *out = &c->outs[0];
  if (TPURT_ARG(c, segment_reduce, indices)->kind == TPURT_V_TENSOR)
    return tpurt_fail(TPURT_ERR_RUNTIME, "segment_reduce(): indices based reduction is not supported yet.");
  seg_plan p;
  int axis;
  int check = TPURT_ARG(c, segment_reduce, offsets)->kind != TPURT_V_TENSOR && !TPURT_ARG(c, segment_reduce, unsafe)->i; /* CPU checks lengths only, unless unsafe */
  tpurt_status s = plan(c, data, TPURT_ARG(c, segment_reduce, reduce)->s, TPURT_ARG_segment_reduce_lengths, TPURT_ARG_segment_reduce_offsets, TPURT_ARG(c, segment_reduce, axis)->i, TPURT_ARG(c, segment_reduce, initial), check, &p, &axis);
  if (s) return s;
  int dt = p.dt;
  for (int64_t o = 0; o < p.outer; o++)
    for (int64_t k = 0; k < p.segs; k++) {
      int64_t start, len;
      segment_of(&p, o, k, &start, &len);
      for (int64_t i = 0; i < p.inner; i++) {
        double acc = p.has_initial ? p.initial
                   : p.op == SR_MAX ? -INFINITY : p.op == SR_MIN ? INFINITY : p.op == SR_PROD ? 1.0 : 0.0;
        for (int64_t j = start; j < start + len; j++) {
          double v = tpurt_load_f64(elem3(data, axis, o, j, i), dt);
          switch (p.op) {
            case SR_MAX: acc = isnan(v) ? v : acc < v ? v : acc; break;
            case SR_MIN: acc = isnan(v) ? v : v < acc ? v : acc; break;
            case SR_PROD: acc = tpurt_round_to(dt, acc * v); break;
            default: acc = tpurt_round_to(dt, acc + v); break;
          }
        }
        if (p.op == SR_MEAN && len == 0 && !p.has_initial) acc = NAN;
        else if (p.op == SR_MEAN && len > 0 && !isnan(acc)) acc = tpurt_round_to(dt, acc / tpurt_round_to(dt, (double)len));
        tpurt_store_f64(elem3(out, axis, o, k, i), dt, acc);
      }
    }
  return TPURT_OK;
}

tpurt_status tpurt_kernel_segment_reduce_backward(const tpurt_op_call* c) {
  /* _segment_reduce_backward(grad, output, data, reduce, *, lengths, offsets, axis, initial)
   * -> grad_input shaped like data. max/min share the gradient among the tied extremes (NaN
   * counting as one), dividing only the positive shares, exactly as CPU; prod divides the
   * output by each element, recomputing the product without it for zeros and NaNs. */
  const tpurt_tensor *grad = &TPURT_ARG(c, segment_reduce_backward, grad)->t, *output = &TPURT_ARG(c, segment_reduce_backward, output)->t, *data = &TPURT_ARG(c, segment_reduce_backward, data)->t, *gi = &c->outs[0];
  seg_plan p;
  int axis;
  tpurt_status s = plan(c, data, TPURT_ARG(c, segment_reduce_backward, reduce)->s, TPURT_ARG_segment_reduce_backward_lengths, TPURT_ARG_segment_reduce_backward_offsets, TPURT_ARG(c, segment_reduce_backward, axis)->i, TPURT_ARG(c, segment_reduce_backward, initial), 0, &p, &axis);
  if (s) return s;
  int dt = p.dt;
  int64_t idx[TPURT_MAX_DIMS] = {0};
  if (tpurt_numel(gi)) do
      tpurt_store_f64(tpurt_elem_ptr(gi, idx), gi->dtype, 0.0);
    while (tpurt_next_index(idx, gi->sizes, gi->ndim));
  double init_prod = p.has_initial ? p.initial : 1.0;
  for (int64_t o = 0; o < p.outer; o++)
    for (int64_t k = 0; k < p.segs; k++) {
      int64_t start, len;
      segment_of(&p, o, k, &start, &len);
      if (len == 0) continue;
      for (int64_t i = 0; i < p.inner; i++) {
        double g = tpurt_load_f64(elem3(grad, axis, o, k, i), dt), y = tpurt_load_f64(elem3(output, axis, o, k, i), dt);
        if (p.op == SR_MAX || p.op == SR_MIN) {
          int64_t ties = 0;
          for (int64_t j = start; j < start + len; j++) {
            double x = tpurt_load_f64(elem3(data, axis, o, j, i), dt);
            if (isnan(x) || x == y) tpurt_store_f64(elem3(gi, axis, o, j, i), dt, g), ties++;
          }
          if (ties < 2) continue;
          for (int64_t j = start; j < start + len; j++) {
            char* e = elem3(gi, axis, o, j, i);
            double v = tpurt_load_f64(e, dt);
            if (v > 0) tpurt_store_f64(e, dt, v / tpurt_round_to(dt, (double)ties));
          }
        } else if (p.op == SR_PROD) {
          double gy = tpurt_round_to(dt, g * y);
          for (int64_t j = start; j < start + len; j++) {
            double x = tpurt_load_f64(elem3(data, axis, o, j, i), dt), v;
            if (isnan(x) || x == 0) {
              double ex = init_prod;
              for (int64_t m = start; m < start + len; m++)
                if (m != j) ex = tpurt_round_to(dt, ex * tpurt_load_f64(elem3(data, axis, o, m, i), dt));
              v = g * ex;
            } else {
              v = gy / x;
            }
            tpurt_store_f64(elem3(gi, axis, o, j, i), dt, v);
          }
        } else {
          double v = p.op == SR_MEAN ? g / tpurt_round_to(dt, (double)len) : g;
          for (int64_t j = start; j < start + len; j++) tpurt_store_f64(elem3(gi, axis, o, j, i), dt, v);
        }
      }
    }
  return TPURT_OK;
}
