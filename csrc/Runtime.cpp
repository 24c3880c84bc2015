// Shared glue: status -> exception, dtype mapping, tensor descriptors.
#include "Runtime.h"

#include <c10/util/Exception.h>

namespace torch_tpu {

void check(tpurt_status status) {
  if (status == TPURT_OK) return;
  std::string msg = tpurt_last_error();
  switch (status) {  // the exception column of the runtime's status table
#define TPURT_X(code, value, exc) \
  case code:                      \
    TORCH_CHECK_WITH(exc, false, msg);
    TPURT_STATUS_LIST(TPURT_X)
#undef TPURT_X
  }
  TORCH_CHECK(false, msg);
}

namespace {
// One table: c10 scalar type <-> runtime dtype.
const std::pair<c10::ScalarType, int> kDtypes[] = {
    {c10::kBool, TPURT_BOOL}, {c10::kByte, TPURT_U8},      {c10::kChar, TPURT_I8},
    {c10::kShort, TPURT_I16}, {c10::kInt, TPURT_I32},      {c10::kLong, TPURT_I64},
    {c10::kHalf, TPURT_F16},  {c10::kBFloat16, TPURT_BF16}, {c10::kFloat, TPURT_F32},
    {c10::kDouble, TPURT_F64}, {c10::kComplexFloat, TPURT_C64},
};
}  // namespace

int to_tpurt_dtype(c10::ScalarType t) {
  for (auto& [st, d] : kDtypes)
    if (st == t) return d;
  return -1;
}

c10::ScalarType from_tpurt_dtype(int d) {
  for (auto& [st, dd] : kDtypes)
    if (dd == d) return st;
  return c10::ScalarType::Undefined;
}

tpurt_tensor describe(const at::Tensor& t) {
  tpurt_tensor d{};
  if (!t.defined()) {
    d.ndim = -1;
    return d;
  }
  TORCH_CHECK_NOT_IMPLEMENTED(t.dim() <= TPURT_MAX_DIMS, "tpu tensors support at most ", TPURT_MAX_DIMS,
                              " dimensions, got ", t.dim());
  d.data = t.numel() ? t.data_ptr() : t.storage().mutable_data();
  d.dtype = to_tpurt_dtype(t.scalar_type());
  d.ndim = static_cast<int32_t>(t.dim());
  for (int64_t i = 0; i < t.dim(); i++) {
    d.sizes[i] = t.size(i);
    d.strides[i] = t.stride(i);
  }
  return d;
}

int32_t current_stream(c10::DeviceIndex device) {
  return tpurt_stream_get_current(device < 0 ? tpurt_device_get() : device);
}

void synchronize_device(c10::DeviceIndex device) {
  if (device >= 0) check(tpurt_device_synchronize(device));
}

}  // namespace torch_tpu
