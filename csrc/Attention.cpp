// scaled_dot_product_attention's backend choice for tpu tensors (PyTorch's dispatch stub).
#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/SDPBackend.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <c10/util/SmallVector.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "Generator.h"
#include "Runtime.h"

namespace torch_tpu {
namespace {

// ------------------------------------------------------------------ attention backend choice
// PyTorch picks an SDPA backend through a dispatch stub: the "overrideable" one reaches the
// runtime's fused kernel (op table) when the runtime's plan takes the call; PyTorch's own
// contract decides the rest (different head counts need enable_gqa; a mask that needs a
// gradient takes the math path, whose autograd gives it one).
// Under torch.compile the tensors are fake with symbolic sizes: nothing reads their data, and
// only the head counts (what the plan decides on) are made concrete, so batch and sequence
// dims stay dynamic (mark_dynamic on a train step compiles one graph).
int64_t fused_sdp_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const std::optional<at::Tensor>& mask, double dropout_p, bool is_causal,
                         std::optional<double> scale, bool enable_gqa) {
  static const int op = tpurt_op_lookup("_scaled_dot_product_fused_attention_overrideable");
  constexpr int kHeads = 1;
  const bool has_mask = mask.has_value() && mask->defined();
  auto math = static_cast<int64_t>(at::SDPBackend::math);
  if ((has_mask && mask->requires_grad()) ||
      (!enable_gqa && q.dim() > kHeads && k.dim() > kHeads && q.sym_size(kHeads) != k.sym_size(kHeads)))
    return math;
  for (const auto* t : {&q, &k, &v, has_mask ? &*mask : &q})
    if (t->dim() > TPURT_MAX_DIMS || to_tpurt_dtype(t->scalar_type()) < 0) return math;
  tpurt_op_call call{};
  call.struct_size = sizeof call;
  call.op = op;
  call.device = q.device().is_privateuseone() ? q.device().index() : 0;
  call.nargs = 8;
  auto tensor = [](const at::Tensor& t) {  // a plan reads descriptors only: no data pointer
    tpurt_value v{};
    v.kind = TPURT_V_TENSOR, v.scalar_dtype = -1;
    v.t.dtype = to_tpurt_dtype(t.scalar_type());
    v.t.ndim = static_cast<int32_t>(t.dim());
    for (int64_t i = 0; i < t.dim(); i++) {
      const auto& size = t.sym_size(i);
      v.t.sizes[i] = size.maybe_as_int().value_or(i == kHeads ? size.guard_int(__FILE__, __LINE__) : 1);
      v.t.strides[i] = t.sym_stride(i).maybe_as_int().value_or(0);
    }
    return v;
  };
  call.args[0] = tensor(q), call.args[1] = tensor(k), call.args[2] = tensor(v);
  call.args[3] = has_mask ? tensor(*mask) : tpurt_value{TPURT_V_NONE, 0, 0, -1, {}};
  call.args[4].kind = TPURT_V_FLOAT, call.args[4].scalar_dtype = -1, call.args[4].f = dropout_p;
  call.args[5].kind = call.args[6].kind = TPURT_V_BOOL, call.args[5].i = is_causal;
  call.args[5].scalar_dtype = call.args[6].scalar_dtype = -1;
  call.args[7] = scale ? tpurt_value{TPURT_V_FLOAT, 0, 0, -1, {}} : tpurt_value{TPURT_V_NONE, 0, 0, -1, {}};
  if (scale) call.args[7].f = *scale;
  tpurt_plan plan{};
  plan.struct_size = sizeof plan;
  return tpurt_op_plan(&call, &plan) == TPURT_OK ? static_cast<int64_t>(at::SDPBackend::overrideable) : math;
}

}  // namespace
}  // namespace torch_tpu

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_tpu::fused_sdp_choice)
}  // namespace at::native

namespace torch_tpu {
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("_fused_sdp_choice", fused_sdp_choice); }
}  // namespace torch_tpu
