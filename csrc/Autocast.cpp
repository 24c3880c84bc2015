// torch.autocast("tpu"): the AutocastPrivateUse1 dispatch key runs PyTorch's own CUDA cast
// policy lists (ATen/autocast_mode.h), so an op autocasts on tpu exactly as it does on a GPU.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace {

// The op lists spell argument types as PyTorch's own autocast_mode.cpp sees them.
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

// Ops outside the lists run unchanged under autocast.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define TPU_LOWER(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define TPU_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define TPU_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define TPU_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_LOWER_PRECISION_FP(TPU_LOWER)
  AT_FORALL_FP32(TPU_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(TPU_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(TPU_PROMOTE)
}

}  // namespace
