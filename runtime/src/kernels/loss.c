/* Pointwise losses and their backward ops (huber_loss, smooth_l1_loss, binary_cross_entropy)
 * and multi_margin_loss, with CPU's formulas, computed in double: the element losses over the
 * broadcast shape of the operands, then reduced (0 none, 1 mean, 2 sum). Kept apart from
 * nn.c's mse_loss so families owned by other work stay untouched. */
#include "../internal.h"

enum { RED_NONE = 0, RED_MEAN = 1, RED_SUM = 2 };
typedef enum { L_HUBER, L_SMOOTH_L1, L_BCE } loss_kind;

/* Element loss: x = self, y = target, p = delta / beta. */
static double loss_of(loss_kind k, double x, double y, double p) {
  double z = fabs(x - y);
  switch (k) {
    case L_HUBER: return z < p ? 0.5 * z * z : p * (z - 0.5 * p);
    case L_SMOOTH_L1: return p == 0 ? z : z < p ? 0.5 * z * z / p : z - 0.5 * p;
    default: return (y - 1) * fmax(log1p(-x), -100.0) - y * fmax(log(x), -100.0);
  }
}
/* d loss / d self, times g (the incoming gradient, already scaled for mean). */
static double grad_of(loss_kind k, double x, double y, double p, double g) {
  double d = x - y;
  switch (k) {
    case L_HUBER: return d <= -p ? -g * p : d >= p ? g * p : d * g;
    case L_SMOOTH_L1: return d <= -p ? -g : d >= p ? g : d * g / p;
    default: return g * d / fmax((1 - x) * x, 1e-12);
  }
}

/* t viewed with `shape`'s sizes (broadcast: missing and size-1 dims get stride 0). */
static tpurt_tensor expand_to(const tpurt_tensor* t, const tpurt_tensor* shape) {
  tpurt_tensor v = *shape;
  v.data = t->data, v.dtype = t->dtype;
  for (int d = 0; d < shape->ndim; d++) {
    int td = d - (shape->ndim - t->ndim);
    v.strides[d] = td < 0 || t->sizes[td] == 1 ? 0 : t->strides[td];
  }
  return v;
}
/* The broadcast shape of n tensors (sizes only), or a RuntimeError like CPU's. */
static tpurt_status broadcast(int n, const tpurt_tensor* const* t, tpurt_tensor* shape) {
  memset(shape, 0, sizeof *shape);
  for (int k = 0; k < n; k++) shape->ndim = t[k]->ndim > shape->ndim ? t[k]->ndim : shape->ndim;
  for (int d = 0; d < shape->ndim; d++) {
    int64_t s = 1;
    for (int k = 0; k < n; k++) {
      int td = d - (shape->ndim - t[k]->ndim);
      int64_t sz = td < 0 ? 1 : t[k]->sizes[td];
      if (sz != 1 && s != 1 && sz != s)
        return tpurt_fail(TPURT_ERR_RUNTIME, "The size of tensor a (%lld) must match the size of tensor b (%lld) at "
                          "non-singleton dimension %d", (long long)s, (long long)sz, d);
      if (sz != 1) s = sz;
    }
    shape->sizes[d] = s;
  }
  return TPURT_OK;
}
static double ld(const tpurt_tensor* t, const int64_t* i) { return tpurt_load_f64(tpurt_elem_ptr(t, i), t->dtype); }

/* forward: (self, target, [weight,] reduction, [param]) */
_Static_assert(TPURT_ARG_smooth_l1_loss_self == TPURT_ARG_huber_loss_self && TPURT_ARG_smooth_l1_loss_target == TPURT_ARG_huber_loss_target &&
                   TPURT_ARG_binary_cross_entropy_self == TPURT_ARG_huber_loss_self &&
                   TPURT_ARG_binary_cross_entropy_target == TPURT_ARG_huber_loss_target,
               "pointwise_loss serves huber_loss, smooth_l1_loss and binary_cross_entropy");
static tpurt_status pointwise_loss(const tpurt_op_call* c, loss_kind k, int weight_arg, int red_arg, int par_arg) {
  const tpurt_tensor *x = &TPURT_ARG(c, huber_loss, self)->t, *y = &TPURT_ARG(c, huber_loss, target)->t, *out = &c->outs[0];
  const tpurt_tensor* w = weight_arg >= 0 && c->args[weight_arg].kind == TPURT_V_TENSOR ? &c->args[weight_arg].t : NULL;
  const tpurt_tensor* ops[3] = {x, y, w};
  tpurt_tensor shape;
  tpurt_status s = broadcast(w ? 3 : 2, ops, &shape);
  if (s) return s;
  int64_t red = c->args[red_arg].i, i[TPURT_MAX_DIMS] = {0}, n = tpurt_numel(&shape);
  double p = par_arg >= 0 ? tpurt_value_f(&c->args[par_arg]) : 0, sum = 0;
  tpurt_tensor xv = expand_to(x, &shape), yv = expand_to(y, &shape), wv = w ? expand_to(w, &shape) : shape;
  if (k == L_BCE && n) do {
      double v = ld(&xv, i);
      if (!(v >= 0 && v <= 1)) return tpurt_fail(TPURT_ERR_RUNTIME, "all elements of input should be between 0 and 1");
    } while (tpurt_next_index(i, shape.sizes, shape.ndim));
  memset(i, 0, sizeof i);
  if (n) do {
      double l = loss_of(k, ld(&xv, i), ld(&yv, i), p) * (w ? ld(&wv, i) : 1.0);
      if (red == RED_NONE) tpurt_store_f64(tpurt_elem_ptr(out, i), out->dtype, l);
      else sum += l;
    } while (tpurt_next_index(i, shape.sizes, shape.ndim));
  if (red != RED_NONE) tpurt_store_f64(out->data, out->dtype, red == RED_MEAN ? sum / (double)n : sum);
  return TPURT_OK;
}

/* backward: (grad_output, self, target, [weight,] reduction, [param]) -> grad_input (self's
 * shape); grad_output is a scalar when reduced. */
#define PW_BACKWARD_LAYOUT(k)                                                           \
  (TPURT_ARG_##k##_grad_output == TPURT_ARG_huber_loss_backward_grad_output &&           \
   TPURT_ARG_##k##_self == TPURT_ARG_huber_loss_backward_self &&                         \
   TPURT_ARG_##k##_target == TPURT_ARG_huber_loss_backward_target)
_Static_assert(PW_BACKWARD_LAYOUT(smooth_l1_loss_backward) && PW_BACKWARD_LAYOUT(binary_cross_entropy_backward),
               "pointwise_loss_backward serves huber_loss_backward, smooth_l1_loss_backward and binary_cross_entropy_backward");
#undef PW_BACKWARD_LAYOUT
static tpurt_status pointwise_loss_backward(const tpurt_op_call* c, loss_kind k, int weight_arg, int red_arg, int par_arg) {
  const tpurt_tensor *g = &TPURT_ARG(c, huber_loss_backward, grad_output)->t, *y = &TPURT_ARG(c, huber_loss_backward, target)->t, *gi = &c->outs[0];
  const tpurt_tensor* w = weight_arg >= 0 && c->args[weight_arg].kind == TPURT_V_TENSOR ? &c->args[weight_arg].t : NULL;
  tpurt_tensor xv = expand_to(&TPURT_ARG(c, huber_loss_backward, self)->t, gi), yv = expand_to(y, gi), gv = expand_to(g, gi);
  tpurt_tensor wv = w ? expand_to(w, gi) : *gi;
  int64_t red = c->args[red_arg].i, i[TPURT_MAX_DIMS] = {0}, n = tpurt_numel(gi);
  double p = par_arg >= 0 ? tpurt_value_f(&c->args[par_arg]) : 0, norm = red == RED_MEAN ? 1.0 / (double)n : 1.0;
  if (n) do {
      double v = grad_of(k, ld(&xv, i), ld(&yv, i), p, norm * ld(&gv, i));
      tpurt_store_f64(tpurt_elem_ptr(gi, i), gi->dtype, w ? v * ld(&wv, i) : v);
    } while (tpurt_next_index(i, gi->sizes, gi->ndim));
  return TPURT_OK;
}

tpurt_status tpurt_kernel_huber_loss(const tpurt_op_call* c) {
  /* huber_loss(self, target, reduction, delta) */
  return pointwise_loss(c, L_HUBER, -1, TPURT_ARG_huber_loss_reduction, TPURT_ARG_huber_loss_delta);
}
tpurt_status tpurt_kernel_huber_loss_backward(const tpurt_op_call* c) {
  /* huber_loss_backward(grad_output, self, target, reduction, delta) */
  return pointwise_loss_backward(c, L_HUBER, -1, TPURT_ARG_huber_loss_backward_reduction, TPURT_ARG_huber_loss_backward_delta);
}
tpurt_status tpurt_kernel_smooth_l1_loss(const tpurt_op_call* c) {
  /* smooth_l1_loss(self, target, reduction, beta) */
  return pointwise_loss(c, L_SMOOTH_L1, -1, TPURT_ARG_smooth_l1_loss_reduction, TPURT_ARG_smooth_l1_loss_beta);
}
tpurt_status tpurt_kernel_smooth_l1_loss_backward(const tpurt_op_call* c) {
  /* smooth_l1_loss_backward(grad_output, self, target, reduction, beta) */
  return pointwise_loss_backward(c, L_SMOOTH_L1, -1, TPURT_ARG_smooth_l1_loss_backward_reduction, TPURT_ARG_smooth_l1_loss_backward_beta);
}
tpurt_status tpurt_kernel_binary_cross_entropy(const tpurt_op_call* c) {
  /* binary_cross_entropy(self, target, weight, reduction) */
  return pointwise_loss(c, L_BCE, TPURT_ARG_binary_cross_entropy_weight, TPURT_ARG_binary_cross_entropy_reduction, -1);
}
tpurt_status tpurt_kernel_binary_cross_entropy_backward(const tpurt_op_call* c) {
  /* binary_cross_entropy_backward(grad_output, self, target, weight, reduction) */
  return pointwise_loss_backward(c, L_BCE, TPURT_ARG_binary_cross_entropy_backward_weight, TPURT_ARG_binary_cross_entropy_backward_reduction, -1);
}

/* ---------------------------------------------------------------- multi_margin_loss */
/* self [N, C] or [C] (N = 1), target [N]: checks shared by forward and backward. */
static tpurt_status margin_plan(const tpurt_tensor* x, const tpurt_tensor* t, const tpurt_value* weight, int64_t p,
                                tpurt_tensor* xv, int64_t* n, int64_t* cdim) {
  if (x->dtype != TPURT_F32 && x->dtype != TPURT_F64) /* CPU has no 16-bit kernels */
    return tpurt_fail(TPURT_ERR_UNSUPPORTED, "\"multi_margin_loss_cpu_kernel\" not implemented for '%s'",
                      tpurt_dtype_c10_name((tpurt_dtype)x->dtype));
  if (p != 1 && p != 2) return tpurt_fail(TPURT_ERR_RUNTIME, "only p == 1 and p == 2 supported");
  *xv = *x;
  if (x->ndim <= 1) xv->ndim = 2, xv->sizes[1] = x->ndim ? x->sizes[0] : 1, xv->strides[1] = x->ndim ? x->strides[0] : 0,
                    xv->sizes[0] = 1, xv->strides[0] = 0;
  *n = xv->sizes[0], *cdim = xv->sizes[1];
  if (*cdim == 0 || tpurt_numel(t) != *n)
    return tpurt_fail(TPURT_ERR_RUNTIME, "inconsistent target size, expected %lld but got %s", (long long)*n,
                      tpurt_shape_str(t));
  if (weight->kind == TPURT_V_TENSOR && tpurt_numel(&weight->t) != *cdim)
    return tpurt_fail(TPURT_ERR_RUNTIME, "inconsistent weight size, expected %lld but got %s", (long long)*cdim,
                      tpurt_shape_str(&weight->t));
  for (int64_t i = 0; i < *n; i++) {
    int64_t v = tpurt_load_i64((const char*)t->data + (t->ndim ? i * t->strides[0] : 0) * (int64_t)tpurt_dtype_size((tpurt_dtype)t->dtype), t->dtype);
    if (v < 0 || v >= *cdim) return tpurt_fail(TPURT_ERR_RUNTIME, "target out of range");
  }
  return TPURT_OK;
}
static double at2(const tpurt_tensor* t, int64_t i, int64_t j) {
  return tpurt_load_f64((const char*)t->data + (i * t->strides[0] + j * t->strides[1]) * (int64_t)tpurt_dtype_size((tpurt_dtype)t->dtype), t->dtype);
}
static int64_t target_at(const tpurt_tensor* t, int64_t i) {
  return tpurt_load_i64((const char*)t->data + (t->ndim ? i * t->strides[0] : 0) * (int64_t)tpurt_dtype_size((tpurt_dtype)t->dtype), t->dtype);
}
static double weight_at(const tpurt_value* w, int64_t k) {
  if (w->kind != TPURT_V_TENSOR) return 1.0;
  return tpurt_load_f64((const char*)w->t.data + (w->t.ndim ? k * w->t.strides[0] : 0) * (int64_t)tpurt_dtype_size((tpurt_dtype)w->t.dtype), w->t.dtype);
}

tpurt_status tpurt_kernel_multi_margin_loss(const tpurt_op_call* c) {
  /* multi_margin_loss(self, target, p, margin, weight, reduction): per sample the mean over
   * classes j != y of max(0, margin - x[y] + x[j])^p, weighted by weight[y] */
  const tpurt_tensor *t = &TPURT_ARG(c, multi_margin_loss, target)->t, *out = &c->outs[0];
  const tpurt_value* w = TPURT_ARG(c, multi_margin_loss, weight);
  int64_t p = tpurt_value_i(TPURT_ARG(c, multi_margin_loss, p)), red = TPURT_ARG(c, multi_margin_loss, reduction)->i, n, cdim;
  double margin = tpurt_value_f(TPURT_ARG(c, multi_margin_loss, margin)), total = 0;
  tpurt_tensor x;
  tpurt_status s = margin_plan(&TPURT_ARG(c, multi_margin_loss, self)->t, t, w, p, &x, &n, &cdim);
  if (s) return s;
  for (int64_t i = 0; i < n; i++) {
    int64_t y = target_at(t, i);
    double xy = at2(&x, i, y), sum = 0;
    for (int64_t j = 0; j < cdim; j++) {
      double z = margin - xy + at2(&x, i, j);
      if (j == y || z <= 0) continue;
      sum += (p == 1 ? z : z * z) * weight_at(w, y);
    }
    sum /= (double)cdim;
    if (red == RED_NONE)
      tpurt_store_f64((char*)out->data + (out->ndim ? i * out->strides[0] : 0) * (int64_t)tpurt_dtype_size((tpurt_dtype)out->dtype),
                      out->dtype, sum);
    total += sum;
  }
  if (red != RED_NONE) tpurt_store_f64(out->data, out->dtype, red == RED_MEAN ? total / (double)n : total);
  return TPURT_OK;
}

tpurt_status tpurt_kernel_multi_margin_loss_backward(const tpurt_op_call* c) {
  /* multi_margin_loss_backward(grad_output, self, target, p, margin, weight, reduction) */
  const tpurt_tensor *g = &TPURT_ARG(c, multi_margin_loss_backward, grad_output)->t, *t = &TPURT_ARG(c, multi_margin_loss_backward, target)->t;
  const tpurt_value* w = TPURT_ARG(c, multi_margin_loss_backward, weight);
  int64_t p = tpurt_value_i(TPURT_ARG(c, multi_margin_loss_backward, p)), red = TPURT_ARG(c, multi_margin_loss_backward, reduction)->i, n, cdim;
  double margin = tpurt_value_f(TPURT_ARG(c, multi_margin_loss_backward, margin));
  tpurt_tensor x, gi;
  tpurt_status s = margin_plan(&TPURT_ARG(c, multi_margin_loss_backward, self)->t, t, w, p, &x, &n, &cdim);
  if (s) return s;
  margin_plan(&c->outs[0], t, w, p, &gi, &n, &cdim);
  double scale = red == RED_MEAN ? 1.0 / (double)(n * cdim) : 1.0 / (double)cdim;
  for (int64_t i = 0; i < n; i++) {
    int64_t y = target_at(t, i);
    double xy = at2(&x, i, y), gy = 0;
    double go = red == RED_NONE && g->ndim ? tpurt_load_f64((const char*)g->data + i * g->strides[0] * (int64_t)tpurt_dtype_size((tpurt_dtype)g->dtype), g->dtype)
                                           : tpurt_load_f64(g->data, g->dtype);
    for (int64_t j = 0; j < cdim; j++) {
      double z = margin - xy + at2(&x, i, j), h = 0;
      if (j != y && z > 0) {
        h = (p == 1 ? scale : 2 * scale * z) * weight_at(w, y);
        gy -= h;
      }
      if (j != y)
        tpurt_store_f64((char*)gi.data + (i * gi.strides[0] + j * gi.strides[1]) * (int64_t)tpurt_dtype_size((tpurt_dtype)gi.dtype),
                        gi.dtype, h * go);
    }
    tpurt_store_f64((char*)gi.data + (i * gi.strides[0] + y * gi.strides[1]) * (int64_t)tpurt_dtype_size((tpurt_dtype)gi.dtype),
                    gi.dtype, gy * go);
  }
  return TPURT_OK;
}
