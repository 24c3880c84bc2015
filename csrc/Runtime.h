// What the C++ glue files share: status -> exception mapping and tensor descriptors.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/operator_name.h>
#include <c10/core/Device.h>

#include "tpurt.h"

namespace torch_tpu {

constexpr c10::DeviceType kTpu = c10::DeviceType::PrivateUse1;

// Raises the c10 exception that matches a runtime status (no-op for TPURT_OK).
void check(tpurt_status status);

// tpurt dtype for a c10 scalar type, or -1 when the runtime has no such dtype.
int to_tpurt_dtype(c10::ScalarType t);
c10::ScalarType from_tpurt_dtype(int d);

// Descriptor of a tpu tensor's view (borrowed pointers).
tpurt_tensor describe(const at::Tensor& t);

int32_t current_stream(c10::DeviceIndex device);

// Tells the runtime the Python line (outside torch and torch_tpu) issuing the calling thread's
// next launches, so an asynchronous kernel error names it when it surfaces at a later sync.
void note_issue_site();

// The current stream of the tensor's device, as a c10::Stream-compatible id.
void synchronize_device(c10::DeviceIndex device);

// The Python exception e carries when a Python meta function raised it through the
// dispatcher (NotImplementedError: it cannot size its output without the data, as nonzero's).
// A recognised kind is taken off the interpreter (the caller handles it); *message gets its text.
// A plain RuntimeError is recognised (kRuntime) only with take_runtime.
enum class PyExc { kOther, kNotImplemented, kAssertion, kRuntime };
PyExc python_exception_kind(const std::exception& e, std::string* message, bool take_runtime = false);

// The tpu-only check registered for an overload ("add.Tensor"), run on the meta arguments
// before its Meta kernel: CPU's checks that PyTorch's meta functions skip. Raises as CPU would.
// True when the check returned True: it warned, and must run on every call (as CPU warns).
bool run_op_check(const c10::FunctionSchema& schema, const std::string& name, const torch::jit::Stack& args);
// The tpu-only shape function registered for an overload in place of the Meta kernel PyTorch
// ships for it (whose behaviour must stay PyTorch's for every other device): runs it on the
// meta arguments, leaving its returns on the stack as a Meta kernel would. False if none.
bool run_tpu_meta(const c10::FunctionSchema& schema, const std::string& name, torch::jit::Stack& stack);
// Whether torch_tpu/meta registered a tpu-only shape function for this overload ("mish_backward").
bool has_tpu_meta(const std::string& name);
// The name the hooks are registered under: "add.Tensor", "mish_backward" (no namespace).
inline std::string hook_name(const c10::OperatorName& op) {
  return op.name.substr(op.name.find("::") + 2) + (op.overload_name.empty() ? "" : "." + op.overload_name);
}

// tpu tensors (TensorOps.cpp): whether a dense tpu tensor can hold a dtype (all but quantized ones,
// which are QTensorImpls: Quantized.cpp)
// and the refusal when not; resize_ as its registered kernel does; the elements a view's strides span.
bool storable(c10::ScalarType dtype);
void check_dtype(c10::ScalarType dtype);
const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size, std::optional<c10::MemoryFormat> fmt);
int64_t span_of(const at::Tensor& t);

// Counted CPU fallback entry (Fallback.cpp); also used for ops whose native path declines.
void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, const char* why);
// True on a thread while the CPU fallback runs (its copy-back of written arguments included).
bool in_cpu_fallback();

}  // namespace torch_tpu
