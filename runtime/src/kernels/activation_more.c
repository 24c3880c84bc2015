/* More activations on the elementwise engine (kernels/elementwise.h), in their own file so
 * the elementwise family's files stay with their owners: hardshrink / softshrink (+ backward),
 * threshold, prelu (+ backward) and glu (+ backward), whose halves
 * along `dim` are two views of one tensor. Formulas as PyTorch's CPU kernels. */
#include "elementwise.h"

/* x = self; PF(0) = lambd / threshold, PF(1) = value */
EW_DEF_F(hardshrink, EW_SAME, 1, x >= -PF(0) && x <= PF(0) ? 0 : x)
EW_KERNEL(hardshrink)
/* inside [-lambd, lambd]: x * 0 as CPU (NaN stays NaN, a negative x gives -0) */
EW_DEF_F(softshrink, EW_SAME, 1, x > PF(0) ? x - PF(0) : x < -PF(0) ? x + PF(0) : x * 0)
EW_KERNEL(softshrink)
/* x = grad, y = self: both shrinks pass the gradient outside [-lambd, lambd] */
EW_DEF_F(shrink_backward, EW_SAME, 2, y >= -PF(0) && y <= PF(0) ? 0 : x)
tpurt_status tpurt_kernel_shrink_backward(const tpurt_op_call* c) { return ew_apply(c, &shrink_backward_op); }
EW_DEF_FI(threshold, EW_SAME, 1, x <= PF(0) ? PF(1) : x, x <= PI(0) ? PI(1) : x)
EW_KERNEL(threshold)

/* _prelu_kernel(self, weight), weight already broadcastable to self */
EW_DEF_F(prelu, EW_SAME, 2, x > 0 ? x : y * x)
EW_KERNEL(prelu)
/* _prelu_kernel_backward(grad, self, weight) -> (grad_input, grad_weight): x = grad,
 * y = self, z = weight */
EW_DEF_F(prelu_grad_input, EW_SAME, 3, y > 0 ? x : z * x)
EW_DEF_F(prelu_grad_weight, EW_SAME, 3, y > 0 ? 0 : y * x)
tpurt_status tpurt_kernel_prelu_backward(const tpurt_op_call* c) {
  const tpurt_value* v[3];
  ew_par par;
  ew_operands(c, &prelu_grad_input_op, v);
  ew_params(c, &prelu_grad_input_op, &par);
  tpurt_status s = ew_run_op(&c->outs[0], &prelu_grad_input_op, v, &par);
  return s ? s : ew_run_op(&c->outs[1], &prelu_grad_weight_op, v, &par);
}

/* ---------------------------------------------------------------- glu */
/* x = first half a, y = second half b: a * sigmoid(b) */
EW_DEF_F(glu_fwd, EW_SAME, 2, x * (1 / (1 + exp(-y))))
/* x = grad, y = a, z = b: d/da = sigmoid(b) * grad, d/db = (1 - s) * s * a * grad */
EW_DEF_F(glu_grad_a, EW_SAME, 3, x * (1 / (1 + exp(-z))))
EW_DEF_F(glu_grad_b, EW_SAME, 3, (1 - 1 / (1 + exp(-z))) * (1 / (1 + exp(-z))) * y * x)

/* The two halves of t along dim as tensor values. */
static void halves(const tpurt_tensor* t, int64_t dim, tpurt_value* a, tpurt_value* b) {
  memset(a, 0, sizeof *a);
  a->kind = TPURT_V_TENSOR, a->scalar_dtype = -1, a->t = *t;
  a->t.sizes[dim] /= 2;
  *b = *a;
  b->t.data = (char*)t->data + a->t.sizes[dim] * t->strides[dim] * (int64_t)tpurt_dtype_size((tpurt_dtype)t->dtype);
}
static int64_t glu_dim(int64_t dim, const tpurt_tensor* t) { return dim < 0 ? dim + t->ndim : dim; }

tpurt_status tpurt_kernel_glu(const tpurt_op_call* c) {
  /* glu(self, dim); the meta function has checked that self.size(dim) is even */
  const tpurt_tensor* self = &TPURT_ARG(c, glu, self)->t;
  if (self->ndim == 0) return tpurt_fail(TPURT_ERR_RUNTIME, "glu does not support scalars because halving size must be even");
  tpurt_value a, b;
  halves(self, glu_dim(TPURT_ARG(c, glu, dim)->i, self), &a, &b);
  const tpurt_value* v[2] = {&a, &b};
  ew_par par = {0};
  return ew_run_op(&c->outs[0], &glu_fwd_op, v, &par);
}

tpurt_status tpurt_kernel_glu_backward(const tpurt_op_call* c) {
  /* glu_backward(grad_output, self, dim) -> grad_input (self's shape) */
  const tpurt_tensor *self = &TPURT_ARG(c, glu_backward, self)->t, *gi = &c->outs[0];
  int64_t dim = glu_dim(TPURT_ARG(c, glu_backward, dim)->i, self);
  tpurt_value a, b, ga, gb;
  halves(self, dim, &a, &b);
  halves(gi, dim, &ga, &gb);
  const tpurt_value* v[3] = {TPURT_ARG(c, glu_backward, grad_output), &a, &b};
  ew_par par = {0};
  tpurt_status s = ew_run_op(&ga.t, &glu_grad_a_op, v, &par);
  return s ? s : ew_run_op(&gb.t, &glu_grad_b_op, v, &par);
}
