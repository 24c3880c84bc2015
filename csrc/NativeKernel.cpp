// The dispatcher side of tpu ops. One generic boxed kernel serves every op of the runtime's
// op table: PyTorch's meta function (or the op's tpu shape function) gives the outputs'
// shapes/dtypes/strides and checks the arguments exactly as the CPU backend does, outputs are
// allocated from the caching allocator, and the C kernel runs on the current stream.
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
    if (math_bits) {  // kernels see stored bytes: materialize the conjugated/negated inputs
      resolve_math_bits(*stack, nargs);
      args = torch::jit::last(*stack, nargs);
    }

    // Outputs: PyTorch's meta function decides shapes/dtypes/strides and validates; its
    // answer is cached per argument signature (meta functions are often Python, ~100 us).
    std::shared_ptr<const MetaResult> meta;
    Key key;
    bool cacheable = signature(args, key);
    const size_t key_hash = cacheable ? hash_of(key) : 0;
    if (cacheable) {
      std::lock_guard<std::mutex> g(cache_mu_);
      auto it = cache_.find(key_hash);
      if (it != cache_.end())
        for (const auto& [k, m] : it->second)
          if (k.size() == key.size() && std::equal(k.begin(), k.end(), key.begin())) {
            meta = m;
            break;
          }
    }
    // No meta answer without reading data (nonzero, x[bool_mask]): a DATA_SIZED kernel
    // sizes the outputs itself (below), any other op runs on the CPU.
    bool sized_by_kernel = data_sized && !has_meta(op);
    const bool cached = meta != nullptr;
    if (!meta && !sized_by_kernel) {
      try {
        meta = compute_meta(op, args);
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
      } else if (meta && cacheable) {
        std::lock_guard<std::mutex> g(cache_mu_);
        if (++cache_entries_ > 4096) {
          cache_.clear();
          cache_entries_ = 1;
        }
        cache_[key_hash].emplace_back(std::vector<int64_t>(key.begin(), key.end()), meta);
      }
    }
    auto written = [&](size_t i) {
      const auto* ai = schema.arguments()[i].alias_info();
      return ai && ai->isWrite() && args[i].isTensor() && args[i].toTensor().defined();
    };
    for (size_t i = 0; i < nargs; i++)  // as CPU: no writing through expanded (self-overlapping) views
      if (written(i)) at::assert_no_internal_overlap(args[i].toTensor());
    if (meta && !complex_ok && meta->complex_output) {
      cpu_fallback(op, stack, kNoComplex);
      return;
    }
    if (meta && meta->unsupported_output) {  // complex64 with float64 gives complex128
      cpu_fallback(op, stack, meta->unsupported_output);
      return;
    }
    std::vector<c10::IValue> results;
    if (meta) allocate_outputs(*meta, args, *device, results, cached);
    for (size_t i = 0; i < nargs; i++)  // as CPU, once out= has its final size: no overlap with inputs
      if (written(i) && schema.arguments()[i].is_out()) check_out_overlap(args, i, flags_ & TPURT_OPF_NO_OUT_OVERLAP);

    // The call.
    // The call struct is ~9 KiB: only its header is zeroed here; argument and output slots
    // past the ones in use are marked empty just before the launch.
    tpurt_op_call call;
    std::memset(&call, 0, offsetof(tpurt_op_call, args));
    call.struct_size = sizeof call;
    call.op = op_;
    call.device = device->index();
    call.precision = tpurt_get_matmul_precision();
    ArgStorage store(nargs + results.size());
    std::optional<at::Generator> gen;
    int n = 0;
    for (size_t i = 0; i < nargs; i++) {
      const auto& a = args[i];
      if (a.isGenerator()) gen = a.toGenerator();
      TORCH_CHECK(n < TPURT_MAX_ARGS, "too many arguments for the tpu runtime");
      call.args[n++] = value_of(a, store);
    }
    if (!meta) {  // sized by the kernel: it reads its inputs once the stream has run up to here
      TORCH_CHECK(n <= TPURT_MAX_ARGS, "too many arguments for the tpu runtime");
      for (int a = n; a < TPURT_MAX_ARGS; a++) call.args[a].kind = TPURT_V_NONE;
      call.nargs = n;
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
    int nouts = 0;
    for (const auto& r : results) {
      if (r.isTensor()) {
        TORCH_CHECK(nouts < TPURT_MAX_OUTS, "too many outputs for the tpu runtime");
        call.outs[nouts++] = describe(r.toTensor());
      } else if (r.isTensorList()) {
        auto& l = store.list();
        for (const auto& t : r.toTensorList()) l.push_back(describe(t));
        tpurt_value v{};
        v.kind = TPURT_V_TENSORS;
        v.scalar_dtype = -1;
        v.n = static_cast<int32_t>(l.size());
        v.tensors = l.data();
        call.args[n++] = v;
      }
    }
    if (results.empty()) {  // in-place list ops (_foreach_*_): the mutated list is the output list
      for (size_t i = 0; i < nargs; i++) {
        const auto* ai = schema.arguments()[i].alias_info();
        if (ai && ai->isWrite() && args[i].isTensorList()) {
          TORCH_CHECK(n < TPURT_MAX_ARGS, "too many arguments for the tpu runtime");
          call.args[n++] = call.args[i];
          break;
        }
      }
    }
    call.nargs = n;
    call.nouts = nouts;
    for (int a = n; a < TPURT_MAX_ARGS; a++) call.args[a].kind = TPURT_V_NONE;
    for (int o = nouts; o < TPURT_MAX_OUTS; o++) {
      call.outs[o].data = nullptr;
      call.outs[o].ndim = 0;
    }
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
      check(tpurt_op_launch(current_stream(device->index()), &call));
    }

    torch::jit::drop(*stack, nargs);
    for (auto& r : results) stack->push_back(std::move(r));
  }

 private:
  struct TensorMeta {
    bool defined = false;
    std::vector<int64_t> sizes, strides;
    c10::ScalarType dtype = c10::ScalarType::Undefined;
    at::Tensor allocate(c10::Device device) const {
      if (!defined) return at::Tensor();
      check_dtype(dtype);
      // Straight from the allocator, as the empty_strided kernel would (the caller's device
      // guard selects the chip); a dispatcher round trip per output costs more than the op.
      return at::detail::empty_strided_generic(sizes, strides, c10::GetAllocator(kTpu),
                                               c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dtype);
    }
    static TensorMeta of(const at::Tensor& t) {
      TensorMeta m;
      if (!t.defined()) return m;
      m.defined = true;
      m.sizes = t.sizes().vec();
      m.strides = t.strides().vec();
      m.dtype = t.scalar_type();
      return m;
    }
  };
  struct MetaRet {
    enum Kind { kTensor, kList, kOther } kind = kOther;
    int aliased_arg = -1;
    std::vector<TensorMeta> tensors;
    c10::IValue other;
  };
  struct MetaResult {
    // Whether a call of this signature ran to completion: the first call of a signature runs
    // blocking, so errors that depend only on shapes and dtypes (a dtype the kernel lacks)
    // raise from it; later calls go to the stream.
    mutable std::atomic<bool> verified{false};
    bool complex_output = false;
    const char* unsupported_output = nullptr;  // why no kernel can write some output
    std::vector<MetaRet> rets;
    std::vector<std::pair<size_t, std::vector<int64_t>>> resized;  // out= args the meta resized
  };

  // cached: the meta function did not run for this call, so CPU's warning for resizing a
  // non-empty out= (which it gives on every call) comes from here.
  static void allocate_outputs(const MetaResult& meta, c10::ArrayRef<c10::IValue> args, c10::Device device,
                               std::vector<c10::IValue>& results, bool cached) {
    for (const auto& [i, sizes] : meta.resized) {
      const auto& real = args[i].toTensor();
      if (real.sizes() == c10::IntArrayRef(sizes)) continue;
      if (cached) at::native::resize_output_check(real, sizes);
      resize_(real, sizes, std::nullopt);
    }
    results.reserve(meta.rets.size());
    for (const auto& r : meta.rets) {
      if (r.aliased_arg >= 0) {
        results.push_back(args[r.aliased_arg]);
      } else if (r.kind == MetaRet::kTensor) {
        results.emplace_back(r.tensors[0].allocate(device));
      } else if (r.kind == MetaRet::kList) {
        c10::List<at::Tensor> l;
        for (const auto& t : r.tensors) l.push_back(t.allocate(device));
        results.emplace_back(l);
      } else {
        results.push_back(r.other);
      }
    }
  }

  static std::shared_ptr<const MetaResult> compute_meta(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
    const auto& schema = op.schema();
    torch::jit::Stack stack(args.begin(), args.end());
    for (auto& v : stack) v = to_meta(v);
    std::vector<std::pair<size_t, at::Tensor>> written;
    for (size_t i = 0; i < args.size(); i++) {
      const auto* ai = schema.arguments()[i].alias_info();
      if (ai && ai->isWrite() && stack[i].isTensor()) written.emplace_back(i, stack[i].toTensor());
    }
    std::vector<std::vector<int64_t>> before;
    for (auto& [i, m] : written) before.push_back(m.defined() ? m.sizes().vec() : std::vector<int64_t>{});
    const auto& name = schema.operator_name();
    std::string overload = name.name.substr(name.name.find("::") + 2) +
                           (name.overload_name.empty() ? "" : "." + name.overload_name);
    run_op_check(overload, stack);
    try {
      if (!run_tpu_meta(schema, overload, stack)) op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &stack);
    } catch (const std::exception& e) {
      rethrow_with_cpu_wording(e);
      throw;
    }
    // Some Python meta functions of in-place ops (pow_) resize self like an out=: CPU's
    // TensorIterator refuses to broadcast self instead, and so must we.
    for (size_t w = 0; w < written.size(); w++) {
      const auto& [i, m] = written[w];
      if (!schema.arguments()[i].is_out() && m.defined() && m.sizes().vec() != before[w])
        TORCH_CHECK(false, "output with shape ", c10::IntArrayRef(before[w]), " doesn't match the broadcast shape ",
                    m.sizes());
    }
    auto result = std::make_shared<MetaResult>();
    for (auto& [i, m] : written) result->resized.emplace_back(i, m.defined() ? m.sizes().vec() : std::vector<int64_t>{});
    for (size_t r = 0; r < schema.returns().size(); r++) {
      MetaRet ret;
      ret.aliased_arg = aliased_arg(schema, r);
      if (ret.aliased_arg < 0) {
        if (stack[r].isTensor()) {
          ret.kind = MetaRet::kTensor;
          ret.tensors.push_back(TensorMeta::of(stack[r].toTensor()));
        } else if (stack[r].isTensorList()) {
          ret.kind = MetaRet::kList;
          for (const auto& t : stack[r].toTensorList()) ret.tensors.push_back(TensorMeta::of(t));
        } else {
          ret.other = stack[r];
        }
      }
      for (const auto& t : ret.tensors) {
        if (!t.defined) continue;
        result->complex_output |= c10::isComplexType(t.dtype);
        if (to_tpurt_dtype(t.dtype) < 0) result->unsupported_output = "output dtype not supported by the tpu runtime";
        if (t.sizes.size() > TPURT_MAX_DIMS) result->unsupported_output = "more dimensions than the runtime supports";
      }
      result->rets.push_back(std::move(ret));
    }
    return result;
  }

  // PyTorch's Python references word an unsafe out= cast in their own way; CPU's
  // TensorIterator says "result type Float can't be cast to the desired output type Long"
  // (same RuntimeError). Other errors are left as they are.
  static void rethrow_with_cpu_wording(const std::exception& e) {
    static const std::string kRef = "Attempting to cast from ";
    std::string what;
    if (dynamic_cast<const c10::Error*>(&e)) {
      what = e.what();
      if (what.find(kRef) == std::string::npos) return;
    } else if (python_exception_kind(e, &what, /*take_runtime=*/true) != PyExc::kRuntime) {
      return;
    }
    // From here on the error is ours to raise (a Python RuntimeError was taken off the interpreter).
    auto at = what.find(kRef);
    TORCH_CHECK(at != std::string::npos, what);
    auto dtype_at = [&](size_t pos, size_t* end) -> std::optional<c10::ScalarType> {
      for (int i = 0; i < static_cast<int>(c10::ScalarType::NumOptions); i++) {
        auto st = static_cast<c10::ScalarType>(i);
        std::string n = "torch." + std::string(std::get<0>(c10::getDtypeNames(st)));
        if (what.compare(pos, n.size(), n) == 0 && !std::isalnum(static_cast<unsigned char>(what[pos + n.size()]))) {
          *end = pos + n.size();
          return st;
        }
      }
      return std::nullopt;
    };
    size_t end = 0;
    auto from = dtype_at(at + kRef.size(), &end);
    auto to_at = what.find("with dtype ", end);
    auto to = from && to_at != std::string::npos ? dtype_at(to_at + 11, &end) : std::nullopt;
    TORCH_CHECK(to, what);
    TORCH_CHECK(false, "result type ", *from, " can't be cast to the desired output type ", *to);
  }

  // Everything a meta function can see of the arguments; false if some argument kind is not
  // understood (then the meta function runs every time).
  using Key = c10::SmallVector<int64_t, 64>;
  static bool signature(c10::ArrayRef<c10::IValue> args, Key& key) {
    key.push_back(static_cast<int64_t>(c10::get_default_dtype_as_scalartype()));
    auto tensor = [&](const at::Tensor& t) {
      if (!t.defined()) {
        key.push_back(-1);
        return;
      }
      key.push_back(t.dim());
      key.push_back(static_cast<int64_t>(t.scalar_type()) | (int64_t)(t.device().type() == kTpu) << 8 |
                    (int64_t)t.unsafeGetTensorImpl()->is_wrapped_number() << 9);
      for (auto v : t.sizes()) key.push_back(v);
      for (auto v : t.strides()) key.push_back(v);
    };
    auto bits = [](double d) {
      int64_t b;
      std::memcpy(&b, &d, 8);
      return b;
    };
    for (const auto& a : args) {
      if (a.isNone()) {
        key.push_back(100);
      } else if (a.isTensor()) {
        key.push_back(101);
        tensor(a.toTensor());
      } else if (a.isTensorList()) {
        key.push_back(102);
        key.push_back(static_cast<int64_t>(a.toTensorList().size()));
        for (const auto& t : a.toTensorList()) tensor(t);
      } else if (a.isOptionalTensorList()) {
        key.push_back(103);
        for (std::optional<at::Tensor> t : a.toOptionalTensorList()) tensor(t.has_value() ? *t : at::Tensor());
      } else if (a.isInt()) {
        key.push_back(104);
        key.push_back(a.toInt());
      } else if (a.isDouble()) {
        key.push_back(105);
        key.push_back(bits(a.toDouble()));
      } else if (a.isBool()) {
        key.push_back(106 + a.toBool());
      } else if (a.isIntList()) {
        key.push_back(108);
        for (auto v : a.toIntVector()) key.push_back(v);
        key.push_back(109);
      } else if (a.isDoubleList()) {
        key.push_back(110);
        for (auto v : a.toDoubleVector()) key.push_back(bits(v));
        key.push_back(111);
      } else if (a.isScalar()) {
        auto sc = a.toScalar();
        key.push_back(112 + static_cast<int64_t>(sc.type()));
        key.push_back(sc.isFloatingPoint() ? bits(sc.toDouble()) : sc.isComplex() ? 0 : sc.toLong());
      } else if (a.isList() && is_number_list(a)) {
        // Scalar[] (foreach ops): the floats are per-step coefficients (AdamW's step sizes)
        // that change no output and no check, so only their kind is part of the key; keyed
        // by value, every optimizer step would rerun the per-tensor meta functions.
        key.push_back(133);
        for (const auto& e : a.toListRef()) {
          key.push_back(e.isDouble() ? 1 : 0);
          key.push_back(e.isDouble() ? 0 : e.isBool() ? e.toBool() : e.toInt());
        }
        key.push_back(134);
      } else if (a.isGenerator()) {
        key.push_back(130);
      } else if (a.isDevice()) {
        key.push_back(131);
        key.push_back(a.toDevice().index());
      } else if (a.isString()) {
        key.push_back(132);
        key.push_back(static_cast<int64_t>(std::hash<std::string>{}(a.toStringRef())));
      } else {
        return false;
      }
    }
    return true;
  }

  static size_t hash_of(const Key& k) {
    size_t h = 1469598103934665603ull;
    for (auto v : k) h = (h ^ static_cast<size_t>(v)) * 1099511628211ull;
    return h;
  }
  // Keyed by the signature's hash; entries sharing a hash are told apart by the full key.
  std::mutex cache_mu_;
  std::unordered_map<size_t, std::vector<std::pair<std::vector<int64_t>, std::shared_ptr<const MetaResult>>>> cache_;
  size_t cache_entries_ = 0;

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

  static bool is_number_list(const c10::IValue& a) {
    for (const auto& e : a.toListRef())
      if (!e.isInt() && !e.isDouble() && !e.isBool()) return false;
    return true;
  }

  static int64_t numel_of(const tpurt_tensor& t) {
    int64_t n = 1;
    for (int d = 0; d < t.ndim; d++) n *= t.sizes[d];
    return t.ndim < 0 ? 0 : n;
  }

  bool has_meta(const c10::OperatorHandle& op) {
    if (meta_known_ < 0)
      meta_known_ = op.hasKernelForDispatchKey(c10::DispatchKey::Meta) ||
                    op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd);
    return meta_known_ == 1;
  }

  static c10::IValue to_meta(const c10::IValue& v) {
    // A 0-dim CPU tensor next to tpu tensors acts as a scalar on the device (as CUDA's CPU
    // scalars do), so it goes to Meta too: meta functions that check devices (masked_fill's
    // value, index_fill's, copysign's divisor) then see one device. Wrapped numbers stay:
    // Python meta functions receive them as Python numbers, which needs them on CPU.
    auto meta_of = [](const at::Tensor& t) -> at::Tensor {
      bool cpu_scalar = t.defined() && t.device().is_cpu() && t.dim() == 0 &&
                        !t.unsafeGetTensorImpl()->is_wrapped_number();
      if (!t.defined() || (t.device().type() != kTpu && !cpu_scalar)) return t;
      return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
    };
    if (v.isTensor()) return meta_of(v.toTensor());
    if (v.isTensorList()) {
      c10::List<at::Tensor> l;
      for (const auto& t : v.toTensorList()) l.push_back(meta_of(t));
      return l;
    }
    if (v.isOptionalTensorList()) {
      c10::List<std::optional<at::Tensor>> l;
      for (std::optional<at::Tensor> t : v.toOptionalTensorList())
        l.push_back(t.has_value() ? std::optional<at::Tensor>(meta_of(*t)) : std::nullopt);
      return l;
    }
    return v;
  }

  // As CPU: an out= tensor may not share some (but not all) of its memory with an input.
  // Elementwise kernels may write over an input they read in step (full overlap); the rest,
  // like CPU's, refuse an out= that shares any memory with an input.
  static void check_out_overlap(c10::ArrayRef<c10::IValue> args, size_t out, bool no_overlap) {
    const auto& o = args[out].toTensor();
    auto check = [&](const at::Tensor& t) {
      if (no_overlap) at::assert_no_overlap(o, t);
      else at::assert_no_partial_overlap(o, t);
    };
    for (size_t i = 0; i < args.size(); i++) {
      if (i == out) continue;
      if (args[i].isTensor() && args[i].toTensor().defined()) check(args[i].toTensor());
      else if (args[i].isTensorList())
        for (const auto& t : args[i].toTensorList()) check(t);
    }
  }

  // Every return is a written argument that is not an out= (self of an in-place op).
  static bool in_place_only(const c10::FunctionSchema& schema) {
    if (schema.returns().empty()) return false;
    for (size_t r = 0; r < schema.returns().size(); r++) {
      int a = aliased_arg(schema, r);
      if (a < 0 || schema.arguments()[a].is_out()) return false;
    }
    return true;
  }
  static std::shared_ptr<const MetaResult> in_place_result(const c10::FunctionSchema& schema) {
    auto result = std::make_shared<MetaResult>();
    for (size_t r = 0; r < schema.returns().size(); r++) {
      MetaRet ret;
      ret.aliased_arg = aliased_arg(schema, r);
      result->rets.push_back(std::move(ret));
    }
    return result;
  }

  static bool aliases_output(const c10::FunctionSchema& schema) {
    for (size_t r = 0; r < schema.returns().size(); r++)
      if (aliased_arg(schema, r) >= 0) return true;
    return false;
  }

  // Index of the argument a return aliases (out= and in-place ops), or -1.
  static int aliased_arg(const c10::FunctionSchema& schema, size_t r) {
    const auto* ra = schema.returns()[r].alias_info();
    if (!ra || !ra->isWrite()) return -1;
    for (size_t i = 0; i < schema.arguments().size(); i++) {
      const auto* aa = schema.arguments()[i].alias_info();
      if (aa && aa->isWrite() && aa->beforeSets() == ra->beforeSets()) return static_cast<int>(i);
    }
    return -1;
  }

  // Backing storage of the call's list and string arguments. Reserved on first use (most
  // calls have none) and never reallocated after: the call points into its elements.
  class ArgStorage {
   public:
    explicit ArgStorage(size_t max_items) : max_(max_items) {}
    std::vector<int64_t>& ints() { return next(ints_); }
    std::vector<double>& floats() { return next(floats_); }
    std::vector<tpurt_tensor>& list() { return next(lists_); }
    std::string& string() { return next(strings_); }

   private:
    template <typename T>
    T& next(std::vector<T>& v) {
      if (v.capacity() == 0) v.reserve(max_);
      TORCH_CHECK(v.size() < max_, "too many list arguments for the tpu runtime");
      return v.emplace_back();
    }
    size_t max_;
    std::vector<std::vector<int64_t>> ints_;
    std::vector<std::vector<double>> floats_;
    std::vector<std::vector<tpurt_tensor>> lists_;
    std::vector<std::string> strings_;
  };

  static tpurt_value value_of(const c10::IValue& a, ArgStorage& store) {
    tpurt_value v{};
    v.scalar_dtype = -1;
    auto scalar = [&](const at::Scalar& s) {
      if (s.isFloatingPoint()) {
        v.kind = TPURT_V_FLOAT;
        v.f = s.toDouble();
      } else if (s.isBoolean()) {
        v.kind = TPURT_V_BOOL;
        v.i = s.toBool();
      } else if (s.isIntegral(false)) {
        v.kind = TPURT_V_INT;
        v.i = s.toLong();
      } else {
        auto c = s.toComplexDouble();
        v.kind = TPURT_V_COMPLEX;
        v.c[0] = c.real();
        v.c[1] = c.imag();
      }
    };
    if (a.isNone()) {
      v.kind = TPURT_V_NONE;
    } else if (a.isTensor()) {
      const auto& t = a.toTensor();
      if (!t.defined()) {
        v.kind = TPURT_V_NONE;
      } else if (t.device().type() == kTpu) {
        v.kind = TPURT_V_TENSOR;
        v.t = describe(t);
      } else {  // 0-dim CPU tensor: a scalar operand
        scalar(t.item());
        v.wrapped = t.unsafeGetTensorImpl()->is_wrapped_number();
        v.scalar_dtype = to_tpurt_dtype(t.scalar_type());
      }
    } else if (a.isScalar()) {
      scalar(a.toScalar());
    } else if (a.isIntList()) {
      auto& l = store.ints();
      l = a.toIntVector();
      v.kind = TPURT_V_INTS;
      v.n = static_cast<int32_t>(l.size());
      v.ints = l.data();
    } else if (a.isDoubleList()) {
      auto& l = store.floats();
      l = a.toDoubleVector();
      v.kind = TPURT_V_FLOATS;
      v.n = static_cast<int32_t>(l.size());
      v.floats = l.data();
    } else if (a.isTensorList() || a.isOptionalTensorList()) {
      auto& l = store.list();
      if (a.isTensorList())
        for (const auto& t : a.toTensorList()) l.push_back(describe(t));
      else
        for (std::optional<at::Tensor> t : a.toOptionalTensorList()) l.push_back(describe(t.has_value() ? *t : at::Tensor()));
      v.kind = TPURT_V_TENSORS;
      v.n = static_cast<int32_t>(l.size());
      v.tensors = l.data();
    } else if (a.isList() && is_number_list(a)) {  // Scalar[]: ints stay exact, else doubles
      bool all_int = true;
      for (const auto& e : a.toListRef()) all_int &= e.isInt() || e.isBool();
      if (all_int) {
        auto& l = store.ints();
        for (const auto& e : a.toListRef()) l.push_back(e.isBool() ? e.toBool() : e.toInt());
        v.kind = TPURT_V_INTS;
        v.n = static_cast<int32_t>(l.size());
        v.ints = l.data();
      } else {
        auto& l = store.floats();
        for (const auto& e : a.toListRef()) l.push_back(e.toScalar().toDouble());
        v.kind = TPURT_V_FLOATS;
        v.n = static_cast<int32_t>(l.size());
        v.floats = l.data();
      }
    } else if (a.isString()) {
      auto& str = store.string();
      str = a.toStringRef();
      v.kind = TPURT_V_STRING;
      v.s = str.c_str();
    } else if (a.isDevice()) {
      v.kind = TPURT_V_INT;
      v.i = a.toDevice().index();
    } else if (a.isGenerator()) {
      v.kind = TPURT_V_NONE;
    } else if (a.isInt()) {  // also ScalarType / Layout / MemoryFormat enums
      v.kind = TPURT_V_INT;
      v.i = a.toInt();
    } else {
      TORCH_CHECK_NOT_IMPLEMENTED(false, "tpu runtime: unsupported argument type ", a.tagKind());
    }
    return v;
  }

  int op_;
  int flags_;
  int meta_known_ = -1;
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
