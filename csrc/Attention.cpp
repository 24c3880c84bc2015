// scaled_dot_product_attention's backend choice for tpu tensors (PyTorch's dispatch stub).
#include <ATen/SDPBackend.h>
#include <ATen/native/transformers/attention.h>
#include <torch/library.h>

#include "OpCall.h"
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
  // The plan reads descriptors only: no data pointer; symbolic sizes become concrete only for
  // the head counts (what it decides on), the others read as 1.
  Describe fake = [](const at::Tensor& t) {
    tpurt_tensor d{};
    d.dtype = to_tpurt_dtype(t.scalar_type());
    d.ndim = static_cast<int32_t>(t.dim());
    for (int64_t i = 0; i < t.dim(); i++) {
      const auto& size = t.sym_size(i);
      d.sizes[i] = size.maybe_as_int().value_or(i == kHeads ? size.guard_int(__FILE__, __LINE__) : 1);
      d.strides[i] = t.sym_stride(i).maybe_as_int().value_or(0);
    }
    return d;
  };
  // _scaled_dot_product_fused_attention_overrideable's arguments, in schema order
  const c10::IValue args[] = {q, k, v, has_mask ? c10::IValue(*mask) : c10::IValue(), dropout_p, is_causal,
                              /*return_debug_mask=*/false, scale ? c10::IValue(*scale) : c10::IValue()};
  tpurt_op_call call;
  begin_call(call, op, q.device().is_privateuseone() ? q.device() : c10::Device(kTpu, 0));
  ArgStorage store(0);
  int n = 0;
  for (const auto& a : args) call.args[n++] = value_of(a, store, fake);
  seal_call(call, n, 0);
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
