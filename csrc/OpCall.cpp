// The generic kernel path's reusable parts (see OpCall.h).
#include "OpCall.h"

#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>

#include <cctype>
#include <cstring>
#include <optional>

namespace torch_tpu {
namespace {

c10::IValue to_meta(const c10::IValue& v) {
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

// PyTorch's Python references word an unsafe out= cast in their own way; CPU's
// TensorIterator says "result type Float can't be cast to the desired output type Long"
// (same RuntimeError). Other errors are left as they are.
void rethrow_with_cpu_wording(const std::exception& e) {
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

}  // namespace

at::Tensor TensorMeta::allocate(c10::Device device) const {
  if (!defined) return at::Tensor();
  check_dtype(dtype);
  // Straight from the allocator, as the empty_strided kernel would (the caller's device
  // guard selects the chip); a dispatcher round trip per output costs more than the op.
  return at::detail::empty_strided_generic(sizes, strides, c10::GetAllocator(kTpu),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dtype);
}

TensorMeta TensorMeta::of(const at::Tensor& t) {
  TensorMeta m;
  if (!t.defined()) return m;
  m.defined = true;
  m.sizes = t.sizes().vec();
  m.strides = t.strides().vec();
  m.dtype = t.scalar_type();
  return m;
}

bool in_place_only(const c10::FunctionSchema& schema) {
  if (schema.returns().empty()) return false;
  for (size_t r = 0; r < schema.returns().size(); r++) {
    int a = aliased_arg(schema, r);
    if (a < 0 || schema.arguments()[a].is_out()) return false;
  }
  return true;
}
std::shared_ptr<const MetaResult> in_place_result(const c10::FunctionSchema& schema) {
  auto result = std::make_shared<MetaResult>();
  for (size_t r = 0; r < schema.returns().size(); r++) {
    MetaRet ret;
    ret.aliased_arg = aliased_arg(schema, r);
    result->rets.push_back(std::move(ret));
  }
  return result;
}

bool aliases_output(const c10::FunctionSchema& schema) {
  for (size_t r = 0; r < schema.returns().size(); r++)
    if (aliased_arg(schema, r) >= 0) return true;
  return false;
}

int aliased_arg(const c10::FunctionSchema& schema, size_t r) {
  const auto* ra = schema.returns()[r].alias_info();
  if (!ra || !ra->isWrite()) return -1;
  for (size_t i = 0; i < schema.arguments().size(); i++) {
    const auto* aa = schema.arguments()[i].alias_info();
    if (aa && aa->isWrite() && aa->beforeSets() == ra->beforeSets()) return static_cast<int>(i);
  }
  return -1;
}

MetaCache::Signature MetaCache::signature_of(c10::ArrayRef<c10::IValue> args) {
  Signature sig;
  auto& key = sig.key;
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
      return sig;
    }
  }
  sig.cacheable = true;
  size_t h = 1469598103934665603ull;
  for (auto v : key) h = (h ^ static_cast<size_t>(v)) * 1099511628211ull;
  sig.hash = h;
  return sig;
}

std::shared_ptr<const MetaResult> MetaCache::find(const Signature& sig) {
  if (!sig.cacheable) return nullptr;
  std::lock_guard<std::mutex> g(mu_);
  auto it = cache_.find(sig.hash);
  if (it == cache_.end()) return nullptr;
  for (const auto& [k, m] : it->second)
    if (k.size() == sig.key.size() && std::equal(k.begin(), k.end(), sig.key.begin())) return m;
  return nullptr;
}

void MetaCache::insert(const Signature& sig, std::shared_ptr<const MetaResult> meta) {
  if (!sig.cacheable) return;
  std::lock_guard<std::mutex> g(mu_);
  if (++entries_ > 4096) {
    cache_.clear();
    entries_ = 1;
  }
  cache_[sig.hash].emplace_back(std::vector<int64_t>(sig.key.begin(), sig.key.end()), std::move(meta));
}

namespace {
// args[i] shares memory with another tensor argument (add(a, b, out=a))
bool aliases_other_arg(c10::ArrayRef<c10::IValue> args, size_t i) {
  const auto& t = args[i].toTensor();
  for (size_t j = 0; j < args.size(); j++)
    if (j != i && args[j].isTensor() && args[j].toTensor().defined() && args[j].toTensor().is_alias_of(t)) return true;
  return false;
}
}  // namespace

std::shared_ptr<const MetaResult> MetaCache::compute(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  const auto& schema = op.schema();
  const std::string overload = hook_name(schema.operator_name());
  const bool pytorch_meta = !has_tpu_meta(overload);
  // The call as meta tensors, and the written arguments among them. With empty_outs, a non-empty
  // out= reaches PyTorch's meta function empty: allocate_outputs then resizes it with CPU's check
  // and warning (resize_output_check), where Python meta functions warn with another text,
  // identical for each out (so Python shows one of two). torch_tpu's own shape functions see
  // the out= as it is (a range factory keeps its shape).
  std::vector<std::pair<size_t, at::Tensor>> written;
  std::vector<size_t> emptied;
  auto meta_stack = [&](bool empty_outs) {
    torch::jit::Stack stack(args.begin(), args.end());
    for (auto& v : stack) v = to_meta(v);
    written.clear();
    emptied.clear();
    for (size_t i = 0; i < args.size(); i++) {
      const auto* ai = schema.arguments()[i].alias_info();
      if (!ai || !ai->isWrite() || !stack[i].isTensor()) continue;
      if (empty_outs && pytorch_meta && schema.arguments()[i].is_out() && stack[i].toTensor().numel() > 0 &&
          !aliases_other_arg(args, i)) {
        stack[i] = at::empty({0}, stack[i].toTensor().options());
        emptied.push_back(i);
      }
      written.emplace_back(i, stack[i].toTensor());
    }
    return stack;
  };
  auto run_meta = [&](torch::jit::Stack& stack) {
    try {
      if (!run_tpu_meta(schema, overload, stack)) op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &stack);
    } catch (const std::exception& e) {
      rethrow_with_cpu_wording(e);
      throw;
    }
  };
  torch::jit::Stack stack = meta_stack(false);
  bool uncached = run_op_check(schema, overload, stack);  // the checks see the out= as given
  std::vector<std::vector<int64_t>> before;
  for (auto& [i, m] : written) before.push_back(m.defined() ? m.sizes().vec() : std::vector<int64_t>{});
  stack = meta_stack(true);
  run_meta(stack);
  bool meta_warns_resize = !pytorch_meta;
  // A meta function that leaves its out= as it finds it (CPU's kernel resizes it later) would
  // size it empty: it runs again on the out= as given, and warns (or not) itself.
  bool unsized = false;
  for (auto& [i, m] : written)
    for (size_t e : emptied) unsized |= i == e && m.sizes() == c10::IntArrayRef({0});
  if (unsized) {
    stack = meta_stack(false);
    run_meta(stack);
    meta_warns_resize = true;
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
  result->uncached = uncached;
  result->meta_warns_resize = meta_warns_resize;
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

void allocate_outputs(const MetaResult& meta, c10::ArrayRef<c10::IValue> args, c10::Device device,
                      std::vector<c10::IValue>& results, bool cached) {
  for (const auto& [i, sizes] : meta.resized) {
    const auto& real = args[i].toTensor();
    if (real.sizes() == c10::IntArrayRef(sizes)) continue;
    if (cached || !meta.meta_warns_resize) at::native::resize_output_check(real, sizes);
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

tpurt_value argument_value(const c10::FunctionSchema& schema, size_t i, const c10::IValue& a, ArgStorage& store,
                           Describe describe_tensor) {
  if (i < schema.arguments().size() && schema.arguments()[i].is_out() && a.isTensor() && a.toTensor().defined() &&
      a.toTensor().is_contiguous()) {
    tpurt_value v{};
    v.kind = TPURT_V_NONE;
    v.scalar_dtype = -1;
    return v;
  }
  return value_of(a, store, describe_tensor);
}

tpurt_value value_of(const c10::IValue& a, ArgStorage& store, Describe describe_tensor) {
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
      v.t = describe_tensor(t);
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
      for (const auto& t : a.toTensorList()) l.push_back(describe_tensor(t));
    else
      for (std::optional<at::Tensor> t : a.toOptionalTensorList()) l.push_back(describe_tensor(t.has_value() ? *t : at::Tensor()));
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

int describe_outputs(tpurt_op_call& call, int& n, c10::ArrayRef<c10::IValue> results, const c10::FunctionSchema& schema,
                     c10::ArrayRef<c10::IValue> args, ArgStorage& store, Describe describe_tensor) {
  int nouts = 0;
  for (const auto& r : results) {
    if (r.isTensor()) {
      TORCH_CHECK(nouts < TPURT_MAX_OUTS, "too many outputs for the tpu runtime");
      call.outs[nouts++] = describe_tensor(r.toTensor());
    } else if (r.isTensorList()) {
      TORCH_CHECK(n < TPURT_MAX_ARGS, "too many arguments for the tpu runtime");
      auto& l = store.list();
      for (const auto& t : r.toTensorList()) l.push_back(describe_tensor(t));
      tpurt_value v{};
      v.kind = TPURT_V_TENSORS;
      v.scalar_dtype = -1;
      v.n = static_cast<int32_t>(l.size());
      v.tensors = l.data();
      call.args[n++] = v;
    }
  }
  if (results.empty()) {  // in-place list ops (_foreach_*_): the mutated list is the output list
    for (size_t i = 0; i < args.size(); i++) {
      const auto* ai = schema.arguments()[i].alias_info();
      if (ai && ai->isWrite() && args[i].isTensorList()) {
        TORCH_CHECK(n < TPURT_MAX_ARGS, "too many arguments for the tpu runtime");
        call.args[n++] = call.args[i];
        break;
      }
    }
  }
  return nouts;
}

void begin_call(tpurt_op_call& call, int op, c10::Device device) {
  std::memset(&call, 0, offsetof(tpurt_op_call, args));
  call.struct_size = sizeof call;
  call.op = op;
  call.device = device.index();
  call.precision = tpurt_get_matmul_precision();
}

void seal_call(tpurt_op_call& call, int nargs, int nouts) {
  call.nargs = nargs;
  call.nouts = nouts;
  for (int a = nargs; a < TPURT_MAX_ARGS; a++) call.args[a].kind = TPURT_V_NONE;
  for (int o = nouts; o < TPURT_MAX_OUTS; o++) {
    call.outs[o].data = nullptr;
    call.outs[o].ndim = 0;
  }
}

bool is_number_list(const c10::IValue& a) {
  for (const auto& e : a.toListRef())
    if (!e.isInt() && !e.isDouble() && !e.isBool()) return false;
  return true;
}

int64_t numel_of(const tpurt_tensor& t) {
  int64_t n = 1;
  for (int d = 0; d < t.ndim; d++) n *= t.sizes[d];
  return t.ndim < 0 ? 0 : n;
}

}  // namespace torch_tpu
