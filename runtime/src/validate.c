/* What every entry point that takes a call checks of it before anything reads further: the
 * call's structure and each tensor descriptor. Whether the shapes suit the op is the caller's
 * (PyTorch's meta functions); whether the descriptors can be read and their memory addressed
 * without overflow is checked here, so a malformed call from C is refused, not a crash. */
#include "internal.h"

/* The lowest and highest element offsets a descriptor reaches; returns 0 when they overflow int64. */
static int extent(const tpurt_tensor* t, int64_t* lo, int64_t* hi) {
  *lo = *hi = 0;
  for (int d = 0; d < t->ndim; d++) {
    int64_t step;
    if (t->sizes[d] == 0) return *lo = *hi = 0, 1;
    if (__builtin_mul_overflow(t->sizes[d] - 1, t->strides[d], &step)) return 0;
    if (__builtin_add_overflow(step < 0 ? *lo : *hi, step, step < 0 ? lo : hi)) return 0;
  }
  return 1;
}

static tpurt_status check_tensor(const tpurt_tensor* t, int need_data, const char* kernel, const char* what, int k) {
  if (t->dtype < 0 || t->dtype >= TPURT_DTYPE_COUNT)
    return tpurt_fail(TPURT_ERR_TYPE, "op %s: %s %d has unknown dtype %d", kernel, what, k, t->dtype);
  if (t->ndim < 0 || t->ndim > TPURT_MAX_DIMS)
    return tpurt_fail(TPURT_ERR_VALUE, "op %s: %s %d has %d dimensions (0 to %d)", kernel, what, k, t->ndim,
                      TPURT_MAX_DIMS);
  int64_t numel = 1, lo, hi, span, bytes;
  for (int d = 0; d < t->ndim; d++) {
    if (t->sizes[d] < 0)
      return tpurt_fail(TPURT_ERR_VALUE, "op %s: %s %d has a negative size in dimension %d", kernel, what, k, d);
    if (__builtin_mul_overflow(numel, t->sizes[d], &numel))
      return tpurt_fail(TPURT_ERR_VALUE, "op %s: %s %d has more elements than int64 counts", kernel, what, k);
  }
  int64_t esize = (int64_t)tpurt_dtype_size((tpurt_dtype)t->dtype);
  if (!extent(t, &lo, &hi) || __builtin_sub_overflow(hi, lo, &span) || __builtin_add_overflow(span, 1, &span) ||
      __builtin_mul_overflow(span, esize, &bytes) ||
      __builtin_mul_overflow(lo, esize, &lo) || __builtin_mul_overflow(hi, esize, &hi))
    return tpurt_fail(TPURT_ERR_VALUE, "op %s: %s %d spans more bytes than int64 counts", kernel, what, k);
  if (need_data && numel > 0 && !t->data)
    return tpurt_fail(TPURT_ERR_VALUE, "op %s: %s %d has elements but no data", kernel, what, k);
  uintptr_t at = (uintptr_t)t->data, below = (uintptr_t)0 - (uintptr_t)lo, end;
  if (t->data && numel > 0 && (at < below || __builtin_add_overflow(at - below, (uintptr_t)bytes, &end)))
    return tpurt_fail(TPURT_ERR_VALUE, "op %s: %s %d reaches beyond the address space", kernel, what, k);
  return TPURT_OK;
}

/* None in a tensor list, or an output not asked for (layer_norm_backward's output_mask). */
static int absent(const tpurt_tensor* t) { return t->ndim == -1 && !t->data; }

static tpurt_status check_value(const tpurt_value* v, int need_data, const char* kernel, int a) {
  if (v->kind < TPURT_V_NONE || v->kind > TPURT_V_COMPLEX)
    return tpurt_fail(TPURT_ERR_VALUE, "op %s: argument %d has unknown kind %d", kernel, a, v->kind);
  int list = v->kind == TPURT_V_INTS || v->kind == TPURT_V_FLOATS || v->kind == TPURT_V_TENSORS;
  if (list && (v->n < 0 || (v->n > 0 && !v->ints)))
    return tpurt_fail(TPURT_ERR_VALUE, "op %s: argument %d is a list of %d elements at %p", kernel, a, v->n,
                      (const void*)v->ints);
  if (v->kind == TPURT_V_STRING && !v->s) return tpurt_fail(TPURT_ERR_VALUE, "op %s: argument %d is a NULL string", kernel, a);
  if (v->kind == TPURT_V_TENSOR) return check_tensor(&v->t, need_data, kernel, "argument", a);
  tpurt_status s = TPURT_OK;
  for (int k = 0; v->kind == TPURT_V_TENSORS && k < v->n && !s; k++) {
    const tpurt_tensor* t = &v->tensors[k];
    if (!absent(t)) s = check_tensor(t, need_data, kernel, "list argument", a);
  }
  return s;
}

static const char* const kind_names[] = {"None", "tensor", "int", "float", "bool", "int list", "float list",
                                         "tensor list", "string", "complex"};
_Static_assert(sizeof kind_names / sizeof *kind_names == TPURT_V_COMPLEX + 1, "a name per tpurt_value_kind");

tpurt_status tpurt_check_descriptors(const tpurt_op_call* c, int need_data) {
  const char* kernel = tpurt_op_kernel_name(c->op);
  if (c->nargs > TPURT_MAX_ARGS || c->nouts > TPURT_MAX_OUTS) /* a valid op the runtime cannot take */
    return tpurt_fail(TPURT_ERR_UNSUPPORTED, "op %s: too many arguments", kernel);
  if (c->nargs < 0 || c->nouts < 0)
    return tpurt_fail(TPURT_ERR_VALUE, "op %s: %d arguments and %d outputs", kernel, c->nargs, c->nouts);
  const uint16_t* kinds;
  int nkinds = tpurt_op_arg_kinds(c->op, &kinds);
  tpurt_status s = TPURT_OK;
  for (int a = 0; a < c->nargs && !s; a++) {
    int k = c->args[a].kind;
    s = check_value(&c->args[a], need_data, kernel, a);
    if (!s && a < nkinds && !(kinds[a] >> k & 1))
      s = tpurt_fail(TPURT_ERR_TYPE, "op %s: argument %d cannot be a %s", kernel, a, kind_names[k]);
  }
  for (int o = 0; o < c->nouts && !s; o++)
    if (!absent(&c->outs[o])) s = check_tensor(&c->outs[o], need_data, kernel, "output", o);
  return s;
}
