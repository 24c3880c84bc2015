// The counted CPU fallback: every op without a native kernel (or whose native path declines)
// runs PyTorch's cpu_fallback, counted per op with its reason and warned once; its arguments
// reach the host through _to_cpu, which keeps arguments that share memory shared.
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

// ------------------------------------------------------------------ fallback accounting
namespace {
std::mutex fallback_mu;
std::map<std::string, std::pair<int64_t, std::string>> fallbacks;  // op -> (count, reason)
}  // namespace

std::map<std::string, std::pair<int64_t, std::string>> fallback_counts() {
  std::lock_guard<std::mutex> g(fallback_mu);
  return fallbacks;
}

void reset_fallback_counts() {
  std::lock_guard<std::mutex> g(fallback_mu);
  fallbacks.clear();
}

// The tpu device of a call's tensor arguments, if any.
std::optional<c10::Device> tpu_device_of(c10::ArrayRef<c10::IValue> args) {
  std::optional<c10::Device> device;
  for (const auto& a : args) {
    if (a.isTensor() && a.toTensor().defined() && a.toTensor().device().type() == kTpu) device = a.toTensor().device();
    if (a.isTensorList())
      for (const at::Tensor& t : a.toTensorList())
        if (t.device().type() == kTpu) device = t.device();
  }
  return device;
}

// As on CUDA, a CPU tensor the op writes (out=, an in-place self) next to tpu tensors is an
// error; the CPU fallback would otherwise compute into it as if the call were all-CPU.
void check_no_host_output(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  auto args = torch::jit::last(stack, nargs);
  auto device = tpu_device_of(args);
  if (!device) return;
  for (size_t i = 0; i < nargs; i++) {
    const auto* ai = schema.arguments()[i].alias_info();
    if (!ai || !ai->isWrite() || !args[i].isTensor() || !args[i].toTensor().defined()) continue;
    const auto& t = args[i].toTensor();
    TORCH_CHECK(t.device().type() == kTpu, "Expected out tensor to have device ", *device, ", but got ", t.device(),
                " instead");
  }
}

namespace {
thread_local int fallback_depth = 0;
}  // namespace

bool in_cpu_fallback() { return fallback_depth > 0; }

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, const char* why) {
  check_no_host_output(op, *stack);
  const auto& name = op.schema().operator_name();
  std::string key = name.name + (name.overload_name.empty() ? "" : "." + name.overload_name);
  bool first = false;
  {
    std::lock_guard<std::mutex> g(fallback_mu);
    auto& e = fallbacks[key];
    first = e.first++ == 0;
    if (first) e.second = why;
  }
  if (first)
    TORCH_WARN("torch_tpu: ", key, " runs on the CPU (", why,
               "); its tensors are copied to the host and back. torch.tpu.metrics lists these ops.");
  for (int d = 0; d < tpurt_device_count(); d++) synchronize_device(static_cast<c10::DeviceIndex>(d));
  // PyTorch's fallback returns new outputs on the device of the first tensor argument: a CPU
  // scalar first (cpu_scalar * tpu_tensor) would leave them on the CPU. They belong on tpu.
  const size_t nargs = op.schema().arguments().size();
  auto device = tpu_device_of(torch::jit::last(*stack, nargs));
  std::vector<c10::IValue> inputs(stack->end() - nargs, stack->end());
  {
    struct Scope {
      Scope() { fallback_depth++; }
      ~Scope() { fallback_depth--; }
    } scope;
    at::native::cpu_fallback(op, stack);
  }
  if (!device) return;
  const size_t nrets = op.schema().returns().size();
  auto is_input = [&](const at::Tensor& t) {
    for (const auto& a : inputs)
      if (a.isTensor() && a.toTensor().is_same(t)) return true;
    return false;
  };
  for (size_t i = stack->size() - nrets; i < stack->size(); i++) {
    auto& r = (*stack)[i];
    if (r.isTensor() && r.toTensor().defined() && r.toTensor().device().is_cpu() && !is_input(r.toTensor()))
      r = r.toTensor().to(*device);
  }
}

namespace {

void fallback_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  cpu_fallback(op, stack, "no native tpu kernel");
}

// ------------------------------------------------------------------ CPU fallback arguments
// The CPU fallback brings its tensor arguments to the host through _to_cpu, whose default
// copies each tensor on its own: an out= sharing memory with an input, or an expanded out=,
// would reach the CPU kernel unshared, pass the overlap checks CPU makes, and aliased writes
// would not see each other. Tensors whose byte ranges in one storage intersect, and tensors
// overlapping themselves, come over as one host copy of the range they cover, each a view
// into it; the rest are copied one by one as before.
std::vector<at::Tensor> to_cpu(at::TensorList tensors) {
  struct Range {
    size_t i;
    int64_t lo, hi;  // bytes of the storage the tensor spans
  };
  std::vector<at::Tensor> out(tensors.size());
  std::unordered_map<const c10::StorageImpl*, std::vector<Range>> by_storage;
  for (size_t i = 0; i < tensors.size(); i++) {
    const auto& t = tensors[i];
    if (!t.defined() || t.device().type() != kTpu || t.numel() == 0) {
      out[i] = t.defined() ? t.cpu() : t;
      continue;
    }
    int64_t lo = t.storage_offset() * t.element_size();
    by_storage[t.storage().unsafeGetStorageImpl()].push_back({i, lo, lo + span_of(t) * t.element_size()});
  }
  for (auto& [storage, ranges] : by_storage) {
    std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.lo < b.lo; });
    for (size_t a = 0, b; a < ranges.size(); a = b) {
      int64_t hi = ranges[a].hi;
      for (b = a + 1; b < ranges.size() && ranges[b].lo < hi; b++) hi = std::max(hi, ranges[b].hi);
      const auto& first = tensors[ranges[a].i];
      if (b == a + 1 && at::has_internal_overlap(first) != at::MemOverlap::Yes) {
        out[ranges[a].i] = first.cpu();
        continue;
      }
      int64_t lo = ranges[a].lo & ~int64_t{15};  // a multiple of every element size
      at::Tensor bytes = at::empty({hi - lo}, at::TensorOptions().dtype(at::kByte));
      check(tpurt_memcpy_d2h(current_stream(first.device().index()), bytes.data_ptr(),
                             static_cast<const char*>(storage->data()) + lo, static_cast<size_t>(hi - lo)));
      for (size_t r = a; r < b; r++) {
        const auto& t = tensors[ranges[r].i];
        at::Tensor v = at::empty({0}, t.options().device(c10::kCPU));
        v.set_(bytes.storage(), (ranges[r].lo - lo) / t.element_size(), t.sizes(), t.strides());
        if (t.is_conj()) v = v._conj();
        if (t.is_neg()) v = v._neg_view();
        out[ranges[r].i] = v;
      }
    }
  }
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("_to_cpu", to_cpu); }

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback_kernel>()); }

namespace {
// PyTorch's nested tensor kernels are CPU's and CUDA's; the common way to meet one is
// nn.TransformerEncoder's inference fast path, which packs a padded batch into a nested tensor
// for every device type it lists, tpu included.
void nested_unsupported(const c10::OperatorHandle& op, torch::jit::Stack*) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "torch_tpu: ", op.schema().operator_name(),
                              " of a nested tensor: tpu has no nested tensors. nn.TransformerEncoder in eval mode "
                              "makes one from its input when given src_key_padding_mask: construct it with "
                              "enable_nested_tensor=False (the same outputs, but for padding positions, which then hold "
                              "values instead of zeros).");
}
}  // namespace

TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&nested_unsupported>());
}

}  // namespace torch_tpu
