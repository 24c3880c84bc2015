/* multilabel_margin_loss under ASan + UBSan: out-of-range targets (CPU: RuntimeError) and
 * half inputs (CPU: NotImplementedError) are refused before anything is written. */
#include <stdlib.h>

#include "check.h"
#include "internal.h"

static tpurt_tensor t2(void* data, int dtype, int64_t r, int64_t c) {
  return (tpurt_tensor){.data = data, .dtype = dtype, .ndim = 2, .sizes = {r, c}, .strides = {c, 1}};
}

static tpurt_status run(void* x, int dtype, int64_t* target) {
  float out[1], is_target[6];
  tpurt_op_call c = {.struct_size = sizeof c, .op = tpurt_op_lookup("multilabel_margin_loss_forward"), .nargs = 3,
                     .nouts = 2};
  c.args[0] = (tpurt_value){.kind = TPURT_V_TENSOR, .scalar_dtype = -1, .t = t2(x, dtype, 2, 3)};
  c.args[1] = (tpurt_value){.kind = TPURT_V_TENSOR, .scalar_dtype = -1, .t = t2(target, TPURT_I64, 2, 3)};
  c.args[2] = (tpurt_value){.kind = TPURT_V_INT, .scalar_dtype = -1, .i = 1};
  c.outs[0] = (tpurt_tensor){.data = out, .dtype = TPURT_F32, .ndim = 0};
  c.outs[1] = t2(is_target, TPURT_F32, 2, 3);
  return tpurt_op_run(&c);
}

int main(void) {
  float x[6] = {0.1f, -0.4f, 2, 1, 0, -1};
  int64_t ok[6] = {0, 2, -1, 1, -1, 7}, high[6] = {0, 3, -1, 1, -1, 0}, low[6] = {-2, 0, 1, 0, 0, 0};
  CHECK(run(x, TPURT_F32, ok) == TPURT_ERR_RUNTIME, "an entry after -1 is still range-checked");
  ok[5] = 2;
  CHECK(run(x, TPURT_F32, ok) == TPURT_OK, "valid targets: %s", tpurt_last_error());
  CHECK(run(x, TPURT_F32, high) == TPURT_ERR_RUNTIME, "target == D is out of range");
  CHECK(run(x, TPURT_F32, low) == TPURT_ERR_RUNTIME, "target < -1 is out of range");
  uint16_t h[6] = {0};
  CHECK(run(h, TPURT_BF16, ok) == TPURT_ERR_UNSUPPORTED, "bf16 is not implemented on CPU either");
  return CHECK_DONE();
}
