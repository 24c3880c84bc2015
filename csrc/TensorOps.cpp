// tpu tensors themselves: factories (empty*), views (as_strided, view, unfold, view_as_real/
// complex), resize_/set_, and copies between the host and the device or within it. They move
// bytes or metadata and never fall back.
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

// ------------------------------------------------------------------ factories, views, resize
// Dense tpu tensors hold every dtype a dense CPU tensor can; quantized dtypes are another
// tensor type with its own dispatch key (QuantizedPrivateUse1, Quantized.cpp), so a dense
// tensor never has one. Dtypes the runtime has no kernels for (complex128, complex32,
// uint16/32/64, the float8 formats, bits) live on tpu as storage and copies: every op on them
// takes the counted CPU fallback, so they compute exactly as on CPU, and raise where CPU raises.
}  // namespace

bool storable(c10::ScalarType dtype) { return dtype != c10::ScalarType::Undefined && !c10::isQIntType(dtype); }

void check_dtype(c10::ScalarType dtype) {
  TORCH_CHECK_NOT_IMPLEMENTED(storable(dtype), "dense tpu tensors cannot have dtype torch.",
                              std::get<0>(c10::getDtypeNames(dtype)), " (quantized tensors are their own type)");
}

namespace {

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> fmt) {
  auto dev = c10::device_or_default(device);
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided, "tpu tensors are strided only");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "Only dense CPU tensors can be pinned");
  check_dtype(c10::dtype_or_default(dtype));
  c10::DeviceGuard guard(dev);
  return at::detail::empty_generic(size, c10::GetAllocator(kTpu), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), fmt);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                         std::optional<bool> pin_memory) {
  auto dev = c10::device_or_default(device);
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided, "tpu tensors are strided only");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "Only dense CPU tensors can be pinned");
  check_dtype(c10::dtype_or_default(dtype));
  c10::DeviceGuard guard(dev);
  return at::detail::empty_strided_generic(size, stride, c10::GetAllocator(kTpu),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype));
}

at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                      std::optional<int64_t> offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, offset);
}
at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) { return at::native::view(self, size); }
at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}
at::Tensor unfold(const at::Tensor& self, int64_t dim, int64_t size, int64_t step) {
  return at::native::unfold(self, dim, size, step);
}

// Float views of complex storage and back (real / imag are built on view_as_real).
at::Tensor view_as_real(const at::Tensor& self) { return at::native::view_as_real(self); }
at::Tensor view_as_complex(const at::Tensor& self) { return at::native::view_as_complex(self); }

void ensure_storage(const at::Tensor& self) {
  auto* impl = self.unsafeGetTensorImpl();
  size_t need = self.numel() == 0 ? 0
                                  : at::detail::computeStorageNbytes(self.sizes(), self.strides(),
                                                                     self.dtype().itemsize(), self.storage_offset());
  if (need > impl->storage().nbytes())
    at::detail::getPrivateUse1Hooks().resizePrivateUse1Bytes(impl->storage(), need);
}

}  // namespace

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size, std::optional<c10::MemoryFormat> fmt) {
  auto* impl = self.unsafeGetTensorImpl();
  at::native::resize_impl_cpu_(impl, size, std::nullopt, /*resize_storage=*/false);
  if (fmt.has_value()) {
    TORCH_CHECK(*fmt != c10::MemoryFormat::Preserve, "Unsupported memory format", *fmt);
    impl->empty_tensor_restride(*fmt);
  }
  ensure_storage(self);
  return self;
}

namespace {

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, int64_t offset, c10::IntArrayRef size,
                        c10::IntArrayRef stride) {
  at::native::checkSetStorage(self, source, offset, size, stride);
  self.unsafeGetTensorImpl()->set_storage_offset(offset);
  at::OptionalIntArrayRef st = stride.data() != nullptr ? at::OptionalIntArrayRef(stride) : std::nullopt;
  at::native::resize_impl_cpu_(self.unsafeGetTensorImpl(), size, st, /*resize_storage=*/false);
  ensure_storage(self);
  return self;
}
at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  size_t n = source.nbytes() / self.dtype().itemsize();
  return set_storage(self, source, 0, {static_cast<int64_t>(n)}, {});
}
at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& src) {
  if (self.is_same(src)) return self;
  return set_storage(self, src.storage(), src.storage_offset(), src.sizes(), src.strides());
}
at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage s(c10::Storage::use_byte_size_t(), 0, c10::GetAllocator(kTpu), true);
  return set_storage(self, s, 0, {0}, {});
}

// Module.to("tpu") swaps parameter data in place (keeping tied weights tied) only when the
// CPU and tpu tensor types are shallow-copy compatible: dense tensors on either device are.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    return t.layout() == c10::kStrided && (t.device().type() == kTpu || t.device().is_cpu());
  };
  return dense(self) && dense(from);
}

// ------------------------------------------------------------------ copies
int copy_op_id() {
  static const int id = tpurt_op_lookup("tpurt::copy");
  return id;
}

void device_copy(const at::Tensor& dst, const at::Tensor& src) {
  tpurt_op_call call{};
  call.struct_size = sizeof call;
  call.op = copy_op_id();
  call.device = dst.device().index();
  call.nargs = 1;
  call.nouts = 1;
  call.args[0].kind = TPURT_V_TENSOR;
  call.args[0].t = describe(src);
  call.outs[0] = describe(dst);
  if (src.device() != dst.device()) synchronize_device(src.device().index());
  check(tpurt_op_launch(current_stream(dst.device().index()), &call));
}

// Whether the runtime's copy kernel copies src into dst: dtypes it converts (complex needs
// its flag) and no more dims than a descriptor holds (PyTorch allows more: those copies go
// through the host, which needs no descriptor).
bool device_copyable(const at::Tensor& src, const at::Tensor& dst) {
  c10::ScalarType a = src.scalar_type(), b = dst.scalar_type();
  if (to_tpurt_dtype(a) < 0 || to_tpurt_dtype(b) < 0) return false;
  if (src.dim() > TPURT_MAX_DIMS || dst.dim() > TPURT_MAX_DIMS) return false;
  return !(c10::isComplexType(a) || c10::isComplexType(b)) || (tpurt_op_flags(copy_op_id()) & TPURT_OPF_COMPLEX);
}

// The same memory as t without its conj/neg bits: the bytes as stored.
at::Tensor physical(at::Tensor t) {
  if (t.is_conj()) t = t._conj();
  if (t.is_neg()) t = t._neg_view();
  return t;
}

// Elements t spans in its storage from its first one (strides are non-negative).
}  // namespace

int64_t span_of(const at::Tensor& t) {
  int64_t n = 1;
  for (int64_t d = 0; d < t.dim(); d++) n += (t.size(d) - 1) * t.stride(d);
  return n;
}

namespace {

// Host image of a tpu view's bytes with the view's strides, copied without any device kernel
// (dtypes the copy kernel lacks; called from the CPU fallback, so it must not dispatch).
at::Tensor to_host_raw(const at::Tensor& t) {
  at::Tensor span = at::empty({span_of(t)}, t.options().device(c10::kCPU));
  check(tpurt_memcpy_d2h(current_stream(t.device().index()), span.data_ptr(), t.data_ptr(), span.nbytes()));
  return span.as_strided(t.sizes(), t.strides(), 0);
}

// Bytes of src into dst, converting the dtype; neither has conj/neg bits.
void copy_physical(const at::Tensor& src, const at::Tensor& dst) {
  const bool src_tpu = src.device().type() == kTpu, dst_tpu = dst.device().type() == kTpu;
  if (src_tpu && dst_tpu && device_copyable(src, dst)) {
    device_copy(dst, src);
  } else if (dst_tpu) {  // host -> device (or device -> device through the host)
    at::Tensor host = (src_tpu ? to_host_raw(src) : src).to(dst.scalar_type()).expand(dst.sizes()).contiguous();
    auto stream = current_stream(dst.device().index());
    if (dst.is_contiguous()) {
      check(tpurt_memcpy_h2d(stream, dst.data_ptr(), host.data_ptr(), host.nbytes()));
    } else if (device_copyable(dst, dst)) {
      at::Tensor staged = at::empty(dst.sizes(), dst.options());
      check(tpurt_memcpy_h2d(stream, staged.data_ptr(), host.data_ptr(), host.nbytes()));
      device_copy(dst, staged);
    } else {  // read-modify-write of the span dst covers
      at::Tensor image = to_host_raw(dst);
      image.copy_(host);
      at::Tensor span = image.as_strided({span_of(dst)}, {1}, 0);
      check(tpurt_memcpy_h2d(stream, dst.data_ptr(), span.data_ptr(), span.nbytes()));
    }
  } else {  // device -> host
    at::Tensor packed = src;
    if (!src.is_contiguous() && device_copyable(src, src)) {
      packed = at::empty(src.sizes(), src.options());
      device_copy(packed, src);
    }
    if (packed.is_contiguous() && dst.is_contiguous() && dst.scalar_type() == packed.scalar_type() &&
        dst.sizes() == packed.sizes())
      check(tpurt_memcpy_d2h(current_stream(packed.device().index()), dst.data_ptr(), packed.data_ptr(),
                             packed.nbytes()));
    else
      const_cast<at::Tensor&>(dst).copy_(to_host_raw(packed));
  }
}

// copy_ reaches here for any tpu side before it looks at conj/neg bits: the logical value of
// self goes into dst, so the stored bytes are copied and then conjugated/negated in place
// where the two bits differ (what CPU's copy_ does).
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  // As CPU's copy_ (a TensorIterator): self must broadcast to dst's shape, even when empty.
  auto shape = at::infer_size(dst.sizes(), self.sizes());
  TORCH_CHECK(c10::IntArrayRef(shape) == dst.sizes(), "output with shape ", dst.sizes(),
              " doesn't match the broadcast shape ", c10::IntArrayRef(shape));
  if (dst.numel() == 0) return dst;
  // The CPU fallback writing back an expanded self that CPU's kernel wrote (index_fill_ does,
  // with a warning): its host copy (to_cpu) has dst's layout, so the bytes it spans go back as
  // they are.
  if (dst.device().type() == kTpu && self.device().is_cpu() && in_cpu_fallback() &&
      at::has_internal_overlap(dst) == at::MemOverlap::Yes && self.scalar_type() == dst.scalar_type() &&
      self.sizes() == dst.sizes() && self.strides() == dst.strides() && self.is_conj() == dst.is_conj() &&
      self.is_neg() == dst.is_neg()) {
    check(tpurt_memcpy_h2d(current_stream(dst.device().index()), dst.data_ptr(), self.data_ptr(),
                           static_cast<size_t>(span_of(dst)) * dst.element_size()));
    return dst;
  }
  // As CPU's copy_: no writing through an expanded dst, no source sharing part of dst's memory.
  if (dst.device().type() == kTpu) {
    at::assert_no_internal_overlap(dst);
    if (self.device().type() == kTpu) at::assert_no_partial_overlap(dst, self);
  }
  check_dtype(dst.scalar_type());
  check_dtype(self.scalar_type());
  at::Tensor out = physical(dst);
  copy_physical(physical(self), out);
  if (self.is_conj() != dst.is_conj() && out.is_complex()) out.conj_physical_();
  if (self.is_neg() != dst.is_neg()) out.neg_();
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) resize_(dst, self.sizes(), std::nullopt);
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  at::Tensor host = at::empty({}, self.options().device(c10::kCPU));
  check(tpurt_memcpy_d2h(current_stream(self.device().index()), host.data_ptr(), self.data_ptr(),
                         self.element_size()));
  at::Scalar s = host.item();
  if (self.is_conj()) s = s.conj();
  return self.is_neg() ? -s : s;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", as_strided);
  m.impl("view", view);
  m.impl("_reshape_alias", reshape_alias);
  m.impl("unfold", unfold);
  m.impl("view_as_real", view_as_real);
  m.impl("view_as_complex", view_as_complex);
  m.impl("resize_", resize_);
  m.impl("set_.source_Storage_storage_offset", set_storage);
  m.impl("set_.source_Storage", set_source_storage);
  m.impl("set_.source_Tensor", set_source_tensor);
  m.impl("set_", set_empty);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
}

// copy_ hands a tpu copy to _copy_from before looking at conj/neg bits, and the Conjugate /
// Negative fallbacks would resolve those bits with a clone, which copies through _copy_from
// again (endless recursion): copy_from applies the bits itself.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace torch_tpu
