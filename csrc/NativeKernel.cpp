// The dispatcher side of tpu ops. One generic boxed kernel serves every op of the runtime's
// op table: it decides whether the call runs natively (devices, dtypes, a meta answer), gets
// the outputs' shapes/dtypes/strides and CPU's checks from the meta answer (OpCall.h), allocates
// the outputs from the caching allocator, and launches the C kernel on the current stream.
#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>

#include "Generator.h"
#include "OpCall.h"
#include "Runtime.h"

namespace torch_tpu {
namespace {

// ------------------------------------------------------------------ the generic native kernel
constexpr const char* kNoComplex = "complex64 not supported by this kernel";

struct NativeKernel final : c10::OperatorKernel {
  explicit NativeKernel(int op) : op_(op), flags_(tpurt_op_flags(op)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    const auto& schema = op.schema();
    const size_t nargs = schema.arguments().size();
    normalize_tensor_lists(*stack, nargs, flags_ & TPURT_OPF_HOST_INDICES);
    auto args = torch::jit::last(*stack, nargs);

    // Device, and what cannot run natively.
    std::optional<c10::Device> device;
    const char* decline = nullptr;
    const bool complex_ok = flags_ & TPURT_OPF_COMPLEX;
    bool math_bits = false;  // an input with the conj/neg bit (ops PyTorch's fallbacks let through)
    bool host_tensor = false;
    auto visit = [&](const at::Tensor& t) {
      if (!t.defined()) return;
      if (t.is_complex() && !complex_ok) decline = kNoComplex;
      math_bits |= t.is_conj() || t.is_neg();
      if (t.device().type() == kTpu) {
        TORCH_CHECK(!device || *device == t.device(),
                    "Expected all tensors to be on the same device, but found at least two devices, ", *device,
                    " and ", t.device(), "!");
        device = t.device();
        if (to_tpurt_dtype(t.scalar_type()) < 0) decline = "dtype not supported by the tpu runtime";
        if (t.dim() > TPURT_MAX_DIMS) decline = "more dimensions than the runtime supports";
      } else {
        host_tensor = true;
        if (t.dim() != 0 || (to_tpurt_dtype(t.scalar_type()) < 0 && !(complex_ok && t.is_complex())))
          decline = "non-tpu tensor argument";
      }
    };
    for (const auto& a : args) {
      if (a.isTensor()) visit(a.toTensor());
      else if (a.isTensorList()) for (const auto& t : a.toTensorList()) visit(t);
      else if (a.isOptionalTensorList())
        for (std::optional<at::Tensor> t : a.toOptionalTensorList()) if (t.has_value()) visit(*t);
    }
    if (host_tensor && device)
      for (size_t i = 0; i < nargs; i++) {
        const auto& a = args[i];
        if (!a.isTensor() || !a.toTensor().defined() || a.toTensor().device().type() == kTpu) continue;
        // a 0-dim CPU tensor may be read as a scalar, never written (out=, in-place self)
        const auto* ai = schema.arguments()[i].alias_info();
        // a host tensor indexed with tpu indices: CPU's (and CUDA's) words
        TORCH_CHECK(!(i == 0 && (flags_ & TPURT_OPF_HOST_INDICES)), "indices should be either on ", c10::kCPU,
                    " or on the same device as the indexed tensor (", a.toTensor().device(), ")");
        TORCH_CHECK(!(ai && ai->isWrite()), "Expected out tensor to have device ", *device, ", but got ",
                    a.toTensor().device(), " instead");
        TORCH_CHECK(a.toTensor().dim() == 0, "Expected all tensors to be on the same device, but found at least two devices, ",
                    *device, " and ", a.toTensor().device(), "!");
      }
    if (math_bits)
      for (size_t i = 0; i < nargs; i++) {  // a written tensor with a math bit needs its bit applied on store
        const auto* ai = schema.arguments()[i].alias_info();
        if (ai && ai->isWrite() && args[i].isTensor() && args[i].toTensor().defined() &&
            (args[i].toTensor().is_conj() || args[i].toTensor().is_neg()))
          decline = "output tensor has the conj/neg bit";
      }
    const bool data_sized = flags_ & TPURT_OPF_DATA_SIZED;
    if (!decline && !has_meta(op) && (!data_sized || aliases_output(schema))) decline = "no meta function to compute output shapes";
    if (decline || !device) {
      cpu_fallback(op, stack, decline ? decline : "no tpu tensor argument");
      return;
    }
    c10::DeviceGuard guard(*device);
    if ((flags_ & TPURT_OPF_EXPANDED_SELF_SERIAL) && expanded_self(schema, args)) {
      cpu_fallback(op, stack, "an expanded self, which CPU writes element by element");
      return;
    }
    check_in_place_overlap(schema, args);
    if (math_bits) {  // kernels see stored bytes: materialize the conjugated/negated inputs
      resolve_math_bits(*stack, nargs);
      args = torch::jit::last(*stack, nargs);
    }

    // Outputs: PyTorch's meta function decides shapes/dtypes/strides and validates; its
    // answer is cached per argument signature (meta functions are often Python, ~100 us).
    const auto sig = MetaCache::signature_of(args);
    std::shared_ptr<const MetaResult> meta = meta_cache_.find(sig);
    // No meta answer without reading data (nonzero, x[bool_mask]): a DATA_SIZED kernel
    // sizes the outputs itself (below), any other op runs on the CPU.
    bool sized_by_kernel = data_sized && !has_meta(op);
    const bool cached = meta != nullptr;
    if (!meta && !sized_by_kernel) {
      try {
        meta = MetaCache::compute(op, args);
      } catch (const c10::NotImplementedError&) {
        sized_by_kernel = true;
      } catch (const std::exception& e) {
        std::string message;
        auto kind = python_exception_kind(e, &message);
        // A Python meta function's assert is an argument check that CPU's kernel raises
        // as RuntimeError (embedding's 2-D weight).
        TORCH_CHECK(kind != PyExc::kAssertion, message);
        if (kind != PyExc::kNotImplemented) throw;
        sized_by_kernel = true;
      }
      // An in-place op's outputs are its arguments, whatever the data (index_put_ with a
      // mask): the kernel checks what the meta function could not. out= forms would need
      // their output resized after the arguments are described.
      if (sized_by_kernel && in_place_only(schema)) {
        meta = in_place_result(schema);
      } else if (sized_by_kernel && (!data_sized || aliases_output(schema))) {
        cpu_fallback(op, stack, "no meta answer: the output shape depends on tensor data, or PyTorch's meta refuses these arguments");
        return;
      } else if (meta && !meta->uncached) {
        meta_cache_.insert(sig, meta);
      }
    }
    auto written = [&](size_t i) {
      const auto* ai = schema.arguments()[i].alias_info();
      return ai && ai->isWrite() && args[i].isTensor() && args[i].toTensor().defined();
    };
    for (size_t i = 0; i < nargs; i++)  // as CPU: no out= through expanded views (in-place self: checked above)
      if (written(i) && schema.arguments()[i].is_out() && !(flags_ & TPURT_OPF_SELF_OVERLAP_OK))
        at::assert_no_internal_overlap(args[i].toTensor());
    if (meta && !complex_ok && meta->complex_output) {
      cpu_fallback(op, stack, kNoComplex);
      return;
    }
    if (meta && meta->unsupported_output) {  // complex64 with float64 gives complex128
      cpu_fallback(op, stack, meta->unsupported_output);
      return;
    }
    auto check_outs = [&] {
      for (size_t i = 0; i < nargs; i++)
        if (written(i) && schema.arguments()[i].is_out()) check_out_overlap(args, i, flags_ & TPURT_OPF_NO_OUT_OVERLAP, flags_ & TPURT_OPF_INDEXED_WRITE);
    };
    // As CPU: its elementwise ops (TensorIterator) check out= against the inputs before
    // resizing it (a smaller view of an input is a partial overlap, whatever resizing makes of
    // it); its other kernels check once out= has its final size.
    const bool elementwise = flags_ & TPURT_OPF_ALIAS_SAFE;
    if (elementwise) check_outs();
    std::vector<c10::IValue> results;
    if (meta) allocate_outputs(*meta, args, *device, results, cached);
    if (!elementwise) check_outs();

    // The call; argument and output slots past the ones in use are marked empty just before the launch.
    tpurt_op_call call;
    begin_call(call, op_, *device);
    ArgStorage store(nargs + results.size());
    std::optional<at::Generator> gen;
    int n = 0;
    for (size_t i = 0; i < nargs; i++) {
      const auto& a = args[i];
      if (a.isGenerator()) gen = a.toGenerator();
      TORCH_CHECK(n < TPURT_MAX_ARGS, "too many arguments for the tpu runtime");
      call.args[n++] = argument_value(schema, i, a, store);
    }
    if (!meta) {  // sized by the kernel: it reads its inputs once the stream has run up to here
      TORCH_CHECK(n <= TPURT_MAX_ARGS, "too many arguments for the tpu runtime");
      seal_call(call, n, 0);
      check(tpurt_op_size_outputs(current_stream(device->index()), &call));
      TORCH_CHECK(static_cast<size_t>(call.nouts) == schema.returns().size(), "tpu kernel ",
                  tpurt_op_kernel_name(op_), " declared ", call.nouts, " outputs, the schema has ",
                  schema.returns().size());
      for (int o = 0; o < call.nouts; o++) {
        const auto& t = call.outs[o];
        results.emplace_back(at::empty(c10::IntArrayRef(t.sizes, t.ndim),
                                       at::TensorOptions().dtype(from_tpurt_dtype(t.dtype)).device(*device)));
      }
    }
    const int nouts = describe_outputs(call, n, results, schema, args, store);
    seal_call(call, n, nouts);
    if (flags_ & TPURT_OPF_RANDOM) {
      auto g = gen && gen->defined() ? *gen : default_generator(device->index());
      auto* impl = at::check_generator<TpuGenerator>(g);
      int64_t counters = 0;
      for (int o = 0; o < nouts; o++) counters = std::max<int64_t>(counters, numel_of(call.outs[o]));
      auto [seed, offset] = impl->reserve(static_cast<uint64_t>((counters + 3) / 4 * 4));
      call.rng_seed = seed;
      call.rng_offset = offset;
    }
    if (meta && !meta->verified.load(std::memory_order_relaxed)) {
      // First call of this signature: the plan declines what no kernel takes (CPU's exception,
      // before anything runs), then the call runs blocking so any other shape-only error raises here.
      tpurt_plan plan{};
      plan.struct_size = sizeof plan;
      check(tpurt_op_plan(&call, &plan));
      check(tpurt_op_launch_blocking(current_stream(device->index()), &call));
      meta->verified.store(true, std::memory_order_relaxed);
    } else {
      note_issue_site();
      check(tpurt_op_launch(current_stream(device->index()), &call));
    }

    torch::jit::drop(*stack, nargs);
    for (auto& r : results) stack->push_back(std::move(r));
  }


 private:
  static void resolve_math_bits(torch::jit::Stack& stack, size_t nargs) {
    auto resolve = [](const at::Tensor& t) { return t.defined() ? t.resolve_conj().resolve_neg() : t; };
    for (size_t i = stack.size() - nargs; i < stack.size(); i++) {
      auto& a = stack[i];
      if (a.isTensor()) {
        a = resolve(a.toTensor());
      } else if (a.isTensorList()) {
        c10::List<at::Tensor> l;
        for (const auto& t : a.toTensorList()) l.push_back(resolve(t));
        a = l;
      } else if (a.isOptionalTensorList()) {
        c10::List<std::optional<at::Tensor>> l;
        for (std::optional<at::Tensor> t : a.toOptionalTensorList())
          l.push_back(t.has_value() ? std::optional<at::Tensor>(resolve(*t)) : std::nullopt);
        a = l;
      }
    }
  }

  // TorchScript hands a Tensor?[] (index_put_'s indices) over as a generic list: made the
  // optional-tensor list the schema names, so one path handles both callers. With
  // host_indices, index tensors on the CPU move to self's device (CUDA's advanced indexing).
  static void normalize_tensor_lists(torch::jit::Stack& stack, size_t nargs, bool host_indices) {
    const size_t first = stack.size() - nargs;
    for (size_t i = first; i < stack.size(); i++) {
      auto& a = stack[i];
      if (!a.isList() || a.isTensorList() || a.toListRef().empty()) continue;
      bool tensors = true, host = false;
      for (const auto& e : a.toListRef()) {
        tensors &= e.isTensor() || e.isNone();
        host |= e.isTensor() && e.toTensor().defined() && e.toTensor().device().is_cpu();
      }
      if (!tensors || (a.isOptionalTensorList() && !(host && host_indices))) continue;
      const bool move = host && host_indices && stack[first].isTensor() && stack[first].toTensor().defined() &&
                        stack[first].toTensor().device().type() == kTpu;
      c10::List<std::optional<at::Tensor>> l;
      for (const auto& e : a.toListRef()) {
        if (e.isNone()) {
          l.push_back(std::nullopt);
          continue;
        }
        const auto& t = e.toTensor();
        l.push_back(move && t.defined() && t.device().is_cpu() ? t.to(stack[first].toTensor().device()) : t);
      }
      a = l;
    }
  }
  bool has_meta(const c10::OperatorHandle& op) {
    if (meta_known_ < 0)
      meta_known_ = op.hasKernelForDispatchKey(c10::DispatchKey::Meta) ||
                    op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) ||
                    has_tpu_meta(hook_name(op.operator_name()));
    return meta_known_ == 1;
  }
  // As CPU, before anything else looks at the arguments: an in-place op may not write through
  // an expanded self, nor read an input that shares part of self's memory (x[1:].add_(x[:-1])
  // would read values it already overwrote); indexed writes (index_add_, scatter_, put_, ...)
  // may not read any memory they write. A 0-dim tensor `value` (masked_fill_, fill_) is read as
  // a scalar before the write, as CPU reads it.
  void check_in_place_overlap(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args) const {
    const bool elementwise = flags_ & TPURT_OPF_ALIAS_SAFE, indexed = flags_ & TPURT_OPF_INDEXED_WRITE;
    for (size_t w = 0; w < args.size(); w++) {
      const auto& arg = schema.arguments()[w];
      if (arg.is_out() || !arg.alias_info() || !arg.alias_info()->isWrite() || !args[w].isTensor()) continue;
      const auto& self = args[w].toTensor();
      if (!self.defined()) continue;
      if (!(flags_ & TPURT_OPF_SELF_OVERLAP_OK)) at::assert_no_internal_overlap(self);
      if (!elementwise && !indexed) continue;
      for_each_tensor(args, w, [&](size_t i, const at::Tensor& t) {
        if (t.dim() == 0 && args[i].isTensor() && schema.arguments()[i].name() == "value") return;
        if (indexed) at::assert_no_overlap(self, t);
        else at::assert_no_partial_overlap(self, t);
      });
    }
  }
  // Whether an in-place op writes through an expanded (self-overlapping) self.
  static bool expanded_self(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args) {
    for (size_t w = 0; w < args.size(); w++) {
      const auto& arg = schema.arguments()[w];
      if (arg.is_out() || !arg.alias_info() || !arg.alias_info()->isWrite() || !args[w].isTensor()) continue;
      const auto& self = args[w].toTensor();
      if (self.defined() && at::has_internal_overlap(self) == at::MemOverlap::Yes) return true;
    }
    return false;
  }
  // fn(i, t) for every defined tensor of the arguments but args[skip], lists included.
  template <class Fn>
  static void for_each_tensor(c10::ArrayRef<c10::IValue> args, size_t skip, Fn&& fn) {
    for (size_t i = 0; i < args.size(); i++) {
      if (i == skip) continue;
      const auto& a = args[i];
      if (a.isTensor()) {
        if (a.toTensor().defined()) fn(i, a.toTensor());
      } else if (a.isTensorList()) {
        for (const at::Tensor t : a.toTensorList())
          if (t.defined()) fn(i, t);
      } else if (a.isOptionalTensorList()) {
        for (std::optional<at::Tensor> t : a.toOptionalTensorList())
          if (t.has_value() && t->defined()) fn(i, *t);
      }
    }
  }
  // As CPU: an out= tensor may not share some (but not all) of its memory with an input.
  // Elementwise kernels may write over an input they read in step (full overlap); the rest,
  // like CPU's, refuse an out= that shares any memory with an input.
  // An indexed write's out= (a copy of self, then written) may be self itself, and may share
  // no memory with the other inputs.
  static void check_out_overlap(c10::ArrayRef<c10::IValue> args, size_t out, bool no_overlap, bool indexed) {
    const auto& o = args[out].toTensor();
    for_each_tensor(args, out, [&](size_t i, const at::Tensor& t) {
      const bool may_be_it = indexed ? i == 0 : !no_overlap;  // the very same tensor allowed
      if (may_be_it) at::assert_no_partial_overlap(o, t);
      else at::assert_no_overlap(o, t);
    });
  }

  int op_;
  int flags_;
  int meta_known_ = -1;
  MetaCache meta_cache_;
};

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (int i = 0; i < tpurt_op_name_count(); i++) {
    std::string name = tpurt_op_name(i);
    if (name.rfind("tpurt::", 0) == 0) continue;
    m.impl(name.c_str(), torch::CppFunction::makeFromBoxedFunctor(std::make_unique<NativeKernel>(tpurt_op_lookup(name.c_str()))));
  }
}

}  // namespace torch_tpu