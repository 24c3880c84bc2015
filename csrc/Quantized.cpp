// Quantized tensors on tpu (the QuantizedPrivateUse1 key, "Quantizedtpu"): per-tensor and
// per-channel affine qint8, quint8 and qint32, as on CUDA. Their factories, views, quantizer
// accessors, clone, fill_ and dequantize are PyTorch's own device-generic kernels (those it
// registers for QuantizedCUDA); what CUDA has device kernels for is done here without per-op
// math: the quantize / dequantize arithmetic is the runtime's tpurt::quantize /
// tpurt::dequantize (kernels/quantize.c, CPU's arithmetic bit for bit), registered as the
// PrivateUse1 kernels of ATen's quantize stubs; int_repr, copies and equal move or compare the
// integers through plain tpu tensors that alias the quantized storage. Any other op on a
// quantized tpu tensor raises PyTorch's NotImplementedError for the Quantizedtpu backend.
#include <ATen/ATen.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/quantized/AffineQuantizer.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/dequantize_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/empty_quantized_native.h>
#include <ATen/ops/empty_strided_native.h>
#include <ATen/ops/_empty_affine_quantized_native.h>
#include <ATen/ops/_empty_per_channel_affine_quantized_native.h>
#include <ATen/ops/fill_native.h>
#include <ATen/ops/q_per_channel_axis_native.h>
#include <ATen/ops/q_per_channel_scales_native.h>
#include <ATen/ops/q_per_channel_zero_points_native.h>
#include <ATen/ops/q_scale_native.h>
#include <ATen/ops/q_zero_point_native.h>
#include <ATen/ops/qscheme_native.h>
#include <ATen/ops/quantize_per_channel_native.h>
#include <ATen/ops/quantize_per_tensor_dynamic_native.h>
#include <ATen/ops/quantize_per_tensor_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/squeeze_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/unsqueeze_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/quantized/Quantizer.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <limits>
#include <string>

#include "Runtime.h"

namespace torch_tpu {
namespace {

// ------------------------------------------------------------------ the integers as a plain tensor
// A quantized tensor's integer representation as a plain tensor of its underlying dtype (uint8,
// int8, int32) over the same storage, sizes and strides: what the runtime's kernels read and
// write and the plain copy path moves. A CPU tensor gets a CPU view (copies between devices).
at::Tensor int_view(const at::Tensor& q) {
  auto key = q.device().type() == kTpu ? c10::DispatchKey::PrivateUse1 : c10::DispatchKey::CPU;
  at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(
      c10::TensorImpl::VIEW, c10::Storage(q.storage()), c10::DispatchKeySet(key),
      c10::scalarTypeToTypeMeta(c10::toUnderlying(q.scalar_type())));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(q.sizes(), q.strides(), q.storage_offset());
  return t;
}

// quint4x2 / quint2x4 pack several values per byte, which the elementwise kernels and the
// copies (one element, one address) cannot address: they stay CPU-only.
void check_not_sub_byte(c10::ScalarType dtype) {
  TORCH_CHECK_NOT_IMPLEMENTED(dtype != c10::kQUInt4x2 && dtype != c10::kQUInt2x4,
                              "quantized tpu tensors cannot have dtype torch.", std::get<0>(c10::getDtypeNames(dtype)),
                              " (sub-byte types are CPU-only; qint8, quint8 and qint32 are supported)");
}

// ------------------------------------------------------------------ quantize / dequantize stubs
int runtime_op(const char* name) {
  int id = tpurt_op_lookup(name);
  TORCH_INTERNAL_ASSERT(id >= 0, "the runtime has no ", name);
  return id;
}

tpurt_value tensor_value(const at::Tensor& t) {
  tpurt_value v{};
  v.kind = TPURT_V_TENSOR;
  v.scalar_dtype = -1;
  v.t = describe(t);
  return v;
}

// A per-channel parameter (scales, zero points) as a tensor of `dtype` on `like`'s device,
// shaped to broadcast along `axis` of `like`.
at::Tensor along_axis(const at::Tensor& param, c10::ScalarType dtype, const at::Tensor& like, int64_t axis) {
  std::vector<int64_t> shape(like.dim(), 1);
  shape[axis] = param.numel();
  return param.to(like.device(), dtype).reshape(shape);
}

// Runs tpurt::quantize (float values `in` -> integers `out`) or tpurt::dequantize (integers ->
// float32) on the current stream: the runtime computes CPU's arithmetic for `scheme`.
void launch_affine(const char* op, const at::Tensor& in, const at::Tensor& out, tpurt_value scale, tpurt_value zero_point,
                   tpurt_qscheme scheme) {
  if (out.numel() == 0) return;
  tpurt_op_call call{};
  call.struct_size = sizeof call;
  call.op = runtime_op(op);
  call.device = out.device().index();
  call.nargs = 4;
  call.nouts = 1;
  call.args[0] = tensor_value(in);
  call.args[1] = scale;
  call.args[2] = zero_point;
  call.args[3].kind = TPURT_V_INT;
  call.args[3].scalar_dtype = -1;
  call.args[3].i = scheme;
  call.outs[0] = describe(out);
  check(tpurt_op_launch(current_stream(out.device().index()), &call));
}

void affine_per_tensor(const char* op, const at::Tensor& in, const at::Tensor& out, double scale, int64_t zero_point) {
  tpurt_value s{}, z{};
  s.kind = TPURT_V_FLOAT;
  s.scalar_dtype = -1;
  s.f = scale;
  z.kind = TPURT_V_INT;
  z.scalar_dtype = -1;
  z.i = zero_point;
  launch_affine(op, in, out, s, z, TPURT_QSCHEME_PER_TENSOR_AFFINE);
}

// CPU checks each zero point against the integer range (AffineQuantizer.cpp checkZeroPoints,
// which PyTorch leaves to the device kernel for PrivateUse1): the same checks and messages, on
// the host copy of the zero points (int64, or CPU's "expected scalar type Long" error).
void check_zero_points(const char* fn_name, const at::Tensor& zero_points, c10::ScalarType qtype) {
  at::Tensor zp = zero_points.cpu();
  const int64_t* data = zp.data_ptr<int64_t>();
  int64_t lo = qtype == c10::kQUInt8 ? 0 : qtype == c10::kQInt8 ? -128 : std::numeric_limits<int32_t>::min();
  int64_t hi = qtype == c10::kQUInt8 ? 255 : qtype == c10::kQInt8 ? 127 : std::numeric_limits<int32_t>::max();
  for (int64_t i = 0; i < zp.numel(); i++) {
    TORCH_CHECK(data[i] <= hi, fn_name, " zero_point ", data[i], " is above upper bound.");
    TORCH_CHECK(data[i] >= lo, fn_name, " zero_point ", data[i], " is below lower bound.");
  }
}

void affine_per_channel(const char* op, const char* fn_name, const at::Tensor& in, const at::Tensor& out,
                        const at::Tensor& qtensor, const at::Tensor& scales, const at::Tensor& zero_points, int64_t axis,
                        bool float_qparams) {
  check_not_sub_byte(qtensor.scalar_type());
  if (!float_qparams) check_zero_points(fn_name, zero_points, qtensor.scalar_type());
  at::Tensor s = along_axis(scales, float_qparams ? at::kFloat : at::kDouble, in, axis);
  at::Tensor z = along_axis(zero_points, float_qparams ? at::kFloat : at::kLong, in, axis);
  launch_affine(op, in, out, tensor_value(s), tensor_value(z),
                float_qparams ? TPURT_QSCHEME_PER_CHANNEL_FLOAT_QPARAMS : TPURT_QSCHEME_PER_CHANNEL_AFFINE);
}

// The stubs' PrivateUse1 kernels. ATen's quantize_tensor_* / dequantize_tensor_* have checked
// dtypes, devices and sizes, and made the inputs contiguous in the output's memory format.
void quantize_per_tensor_stub(const at::Tensor& rtensor, at::Tensor& qtensor, double scale, int64_t zero_point) {
  affine_per_tensor("tpurt::quantize", rtensor, int_view(qtensor), scale, zero_point);
}
void quantize_per_channel_stub(const at::Tensor& rtensor, at::Tensor& qtensor, const at::Tensor& scales,
                               const at::Tensor& zero_points, int64_t axis) {
  affine_per_channel("tpurt::quantize", "quantize_tensor_per_channel_affine", rtensor, int_view(qtensor), qtensor, scales,
                     zero_points, axis, false);
}
void quantize_float_qparams_stub(const at::Tensor& rtensor, at::Tensor& qtensor, const at::Tensor& scales,
                                 const at::Tensor& zero_points, int64_t axis) {
  affine_per_channel("tpurt::quantize", "quantize_tensor_per_channel_float_qparams", rtensor, int_view(qtensor), qtensor,
                     scales, zero_points, axis, true);
}
void dequantize_per_tensor_stub(const at::Tensor& qtensor, at::Tensor& rtensor, double scale, int64_t zero_point) {
  affine_per_tensor("tpurt::dequantize", int_view(qtensor), rtensor, scale, zero_point);
}
void dequantize_per_channel_stub(const at::Tensor& qtensor, at::Tensor& rtensor, const at::Tensor& scales,
                                 const at::Tensor& zero_points, int64_t axis) {
  affine_per_channel("tpurt::dequantize", "dequantize_tensor_per_channel_affine", int_view(qtensor), rtensor, qtensor,
                     scales, zero_points, axis, false);
}
void dequantize_float_qparams_stub(const at::Tensor& qtensor, at::Tensor& rtensor, const at::Tensor& scales,
                                   const at::Tensor& zero_points, int64_t axis) {
  affine_per_channel("tpurt::dequantize", "dequantize_tensor_per_channel_float_qparams", int_view(qtensor), rtensor,
                     qtensor, scales, zero_points, axis, true);
}
void quantize_sub_byte_stub(const at::Tensor&, at::Tensor& qtensor, float, float) {
  check_not_sub_byte(qtensor.scalar_type());
}
void dequantize_sub_byte_stub(const at::Tensor& qtensor, at::Tensor&, float, float) {
  check_not_sub_byte(qtensor.scalar_type());
}

// ------------------------------------------------------------------ factories
// PyTorch's generated registrations put a device guard around factories; m.impl does not, and
// new_qtensor allocates on the current device.
at::Tensor empty_affine_quantized(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                                  std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                                  std::optional<bool> pin_memory, double scale, int64_t zero_point,
                                  std::optional<c10::MemoryFormat> fmt) {
  if (dtype) check_not_sub_byte(*dtype);
  c10::DeviceGuard guard(c10::device_or_default(device));
  return at::native::empty_affine_quantized(size, dtype, layout, device, pin_memory, scale, zero_point, fmt);
}

// PyTorch keeps per-channel scales and zero points on the tensor's device (it moves them
// there). This kernel is also reached for a CPU tensor when the parameters are tpu tensors (the
// highest backend among the arguments wins).
at::Tensor empty_per_channel_affine_quantized(c10::IntArrayRef size, const at::Tensor& scales,
                                              const at::Tensor& zero_points, int64_t axis,
                                              std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                                              std::optional<c10::Device> device, std::optional<bool> pin_memory,
                                              std::optional<c10::MemoryFormat> fmt) {
  auto dev = c10::device_or_default(device);
  if (dtype && dev.type() == kTpu) check_not_sub_byte(*dtype);
  c10::OptionalDeviceGuard guard;
  if (dev.type() == kTpu) guard.reset_device(dev);
  return at::native::empty_per_channel_affine_quantized(size, scales, zero_points, axis, dtype, layout, device,
                                                        pin_memory, fmt);
}

// torch.empty(..., dtype=torch.qint8): a quantized tensor with an unknown quantizer, as CPU
// and CUDA make it (only its metadata is usable).
at::Tensor empty_unknown_quantized(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                                   std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                                   std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> fmt) {
  if (dtype) check_not_sub_byte(*dtype);
  c10::DeviceGuard guard(c10::device_or_default(device));
  return at::native::empty_unknown_quantized(size, dtype, layout, device, pin_memory, fmt);
}

at::Tensor empty_quantized(c10::IntArrayRef size, const at::Tensor& qtensor, std::optional<c10::ScalarType> dtype,
                           std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                           std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> fmt) {
  c10::OptionalDeviceGuard guard(device ? device : std::optional<c10::Device>(qtensor.device()));
  return at::native::empty_quantized(size, qtensor, dtype, layout, device, pin_memory, fmt);
}

at::Tensor empty_like(const at::Tensor& self, std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                      std::optional<c10::Device> device, std::optional<bool> pin_memory,
                      std::optional<c10::MemoryFormat> fmt) {
  c10::OptionalDeviceGuard guard(device ? device : std::optional<c10::Device>(self.device()));
  return at::native::empty_like_quantized(self, dtype, layout, device, pin_memory, fmt);
}

at::Tensor clone(const at::Tensor& self, std::optional<c10::MemoryFormat> fmt) {
  c10::DeviceGuard guard(self.device());
  return at::native::quantized_clone(self, fmt);
}

at::Tensor dequantize(const at::Tensor& self) {
  c10::DeviceGuard guard(self.device());
  return at::native::dequantize_quantized(self);
}

// int_repr: the integers as a plain tensor, in the memory format CPU gives it.
at::Tensor int_repr(const at::Tensor& self) {
  c10::DeviceGuard guard(self.device());
  at::Tensor dst = at::empty(self.sizes(), self.options().dtype(c10::toUnderlying(self.scalar_type())),
                             self.suggest_memory_format());
  return dst.copy_(int_view(self));
}

// torch.equal: CPU's equal_quantized_cpu (same quantizer, sizes, element size and integers),
// with the integers compared on the device.
bool equal(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.device() == other.device(), "quantized_equal expects both tensors on one device, got ", self.device(),
              " and ", other.device());
  if (!other.is_quantized()) return false;
  if (!self.quantizer()->equalTo(other.quantizer())) return false;
  if (self.sizes() != other.sizes() || self.element_size() != other.element_size()) return false;
  return at::equal(int_view(self), int_view(other));
}

// ------------------------------------------------------------------ copies
// A quantizer whose per-channel parameters live on `device`: copy_ hands the source's quantizer
// to the destination, and a CPU destination must not keep tpu parameters (CPU's kernels read
// them through host pointers; PyTorch moves them to the tensor's device when it makes one).
at::QuantizerPtr on_device(const at::QuantizerPtr& quantizer, c10::Device device) {
  if (quantizer->qscheme() != at::kPerChannelAffine && quantizer->qscheme() != at::kPerChannelAffineFloatQParams)
    return quantizer;
  auto* pc = static_cast<at::PerChannelAffineQuantizer*>(quantizer.get());
  if (pc->scales().device() == device) return quantizer;
  return at::make_per_channel_affine_quantizer(pc->scales().to(device), pc->zero_points().to(device), pc->axis(),
                                               quantizer->scalar_type());
}

// copy_ hands every copy with a tpu side to _copy_from before it looks at quantization (tpu is
// not among the devices copy_ handles itself), so this is copy_'s quantized half as CPU runs it
// (Copy.cpp copy_impl, quantized_copy_from_float_), names and messages included: float values
// into a quantized tensor are quantized, a quantized source lends its quantizer and integers.
at::Tensor copy_from(const at::Tensor& src, const at::Tensor& self, bool non_blocking) {
  TORCH_CHECK(self.is_quantized() || !src.is_quantized(),
              "Copying from quantized Tensor to non-quantized Tensor is not allowed, please use dequantize to get a "
              "float Tensor from a quantized Tensor");
  at::Tensor dst = self;
  if (!src.is_quantized()) {
    TORCH_CHECK(src.scalar_type() == at::kFloat, "Quantized copy only works with kFloat as source Tensor");
    TORCH_CHECK((self.is_contiguous() && src.is_contiguous()) ||
                    (self.is_contiguous(at::MemoryFormat::ChannelsLast) &&
                     src.is_contiguous(at::MemoryFormat::ChannelsLast)),
                "Quantized copy only works with contiguous and NHWC Tensors");
    TORCH_CHECK(self.sizes().equals(src.sizes()), "Quantized copy only works with Tensors with the same shape");
    if (self.device().type() != kTpu) return dst.copy_(src.to(self.device()));  // CPU quantizes
    c10::DeviceGuard guard(self.device());
    at::Tensor values = src.to(self.device());
    if (self.qscheme() == at::kPerChannelAffine || self.qscheme() == at::kPerChannelAffineFloatQParams)
      at::native::quantize_tensor_per_channel_affine(values, dst, self.q_per_channel_scales(),
                                                     self.q_per_channel_zero_points(), self.q_per_channel_axis());
    else
      at::native::quantize_tensor_per_tensor_affine(values, dst, self.q_scale(), self.q_zero_point());
    return self;
  }
  TORCH_CHECK(self.qscheme() == src.qscheme(), "Quantized Copy only works with same qscheme");
  TORCH_CHECK(self.scalar_type() == src.scalar_type());
  check_not_sub_byte(self.scalar_type());
  at::set_quantizer_(self, on_device(src.quantizer(), self.device()));
  int_view(self).copy_(int_view(src), non_blocking);
  return self;
}

// ------------------------------------------------------------------ from float tensors
// PyTorch's quantize_per_tensor / quantize_per_channel run on the float input's key: these are
// their PrivateUse1 kernels (the arithmetic then reaches the stubs above).
at::Tensor quantize_per_tensor(const at::Tensor& self, double scale, int64_t zero_point, c10::ScalarType dtype) {
  c10::DeviceGuard guard(self.device());
  return at::native::quantize_per_tensor(self, scale, zero_point, dtype);
}
at::Tensor quantize_per_tensor_tensor_qparams(const at::Tensor& self, const at::Tensor& scale,
                                              const at::Tensor& zero_point, c10::ScalarType dtype) {
  c10::DeviceGuard guard(self.device());
  return at::native::quantize_per_tensor_tensor_qparams(self, scale, zero_point, dtype);
}
at::Tensor quantize_per_tensor_dynamic(const at::Tensor& self, c10::ScalarType dtype, bool reduce_range) {
  c10::DeviceGuard guard(self.device());
  return at::native::quantize_per_tensor_dynamic(self, dtype, reduce_range);
}
// Also reached for a CPU input when the parameters are tpu tensors: the parameters go to the
// input's device, where the quantizer keeps them (CPU's kernel reads them through host pointers).
at::Tensor quantize_per_channel(const at::Tensor& self, const at::Tensor& scales, const at::Tensor& zero_points,
                                int64_t axis, c10::ScalarType dtype) {
  c10::DeviceGuard guard(self.device());
  return at::native::quantize_per_channel(self, scales.to(self.device()), zero_points.to(self.device()), axis, dtype);
}

// _make_per_{tensor,channel}_quantized_tensor: a quantized tensor holding the given integers,
// as CPU builds it (a new tensor, then the integers copied in).
at::Tensor make_per_tensor_quantized_tensor(const at::Tensor& self, double scale, int64_t zero_point) {
  c10::DeviceGuard guard(self.device());
  at::Tensor dst = at::_empty_affine_quantized(self.sizes(), self.options().dtype(c10::toQIntType(self.scalar_type())),
                                               scale, zero_point, self.suggest_memory_format());
  int_view(dst).copy_(self);
  return dst;
}
at::Tensor make_per_channel_quantized_tensor(const at::Tensor& self, const at::Tensor& scales,
                                             const at::Tensor& zero_points, int64_t axis) {
  c10::DeviceGuard guard(self.device());
  at::Tensor dst = at::_empty_per_channel_affine_quantized(self.sizes(), scales, zero_points, axis,
                                                           self.options().dtype(c10::toQIntType(self.scalar_type())));
  int_view(dst).copy_(self);
  return dst;
}

}  // namespace
}  // namespace torch_tpu

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(quantize_tensor_per_tensor_affine_stub, &torch_tpu::quantize_per_tensor_stub)
REGISTER_PRIVATEUSE1_DISPATCH(quantize_tensor_per_channel_affine_stub, &torch_tpu::quantize_per_channel_stub)
REGISTER_PRIVATEUSE1_DISPATCH(quantize_tensor_per_channel_float_qparams_stub, &torch_tpu::quantize_float_qparams_stub)
REGISTER_PRIVATEUSE1_DISPATCH(dequantize_tensor_per_tensor_affine_stub, &torch_tpu::dequantize_per_tensor_stub)
REGISTER_PRIVATEUSE1_DISPATCH(dequantize_tensor_per_channel_affine_stub, &torch_tpu::dequantize_per_channel_stub)
REGISTER_PRIVATEUSE1_DISPATCH(dequantize_tensor_per_channel_float_qparams_stub,
                              &torch_tpu::dequantize_float_qparams_stub)
REGISTER_PRIVATEUSE1_DISPATCH(quantize_tensor_per_tensor_affine_sub_byte_stub, &torch_tpu::quantize_sub_byte_stub)
REGISTER_PRIVATEUSE1_DISPATCH(dequantize_tensor_per_tensor_affine_sub_byte_stub, &torch_tpu::dequantize_sub_byte_stub)
}  // namespace at::native

namespace torch_tpu {
namespace {

// Quantized tpu tensors: the kernels PyTorch registers for QuantizedCUDA, where they are
// device-generic, and the ones above.
TORCH_LIBRARY_IMPL(aten, QuantizedPrivateUse1, m) {
  m.impl("empty.memory_format", empty_unknown_quantized);
  m.impl("empty_strided", at::native::empty_strided_unknown_quantized);
  m.impl("_empty_affine_quantized", empty_affine_quantized);
  m.impl("_empty_per_channel_affine_quantized", empty_per_channel_affine_quantized);
  m.impl("empty_quantized", empty_quantized);
  m.impl("empty_like", empty_like);
  m.impl("as_strided", at::native::as_strided_qtensorimpl);
  m.impl("view", at::native::view);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("squeeze", TORCH_FN(static_cast<at::Tensor (*)(const at::Tensor&)>(at::native::squeeze_quantized)));
  m.impl("squeeze.dim", TORCH_FN(static_cast<at::Tensor (*)(const at::Tensor&, int64_t)>(at::native::squeeze_quantized)));
  m.impl("squeeze.dims",
         TORCH_FN(static_cast<at::Tensor (*)(const at::Tensor&, at::IntArrayRef)>(at::native::squeeze_quantized)));
  m.impl("unsqueeze", at::native::unsqueeze_quantized);
  m.impl("unfold", at::native::unfold);
  m.impl("set_.source_Storage_storage_offset", at::native::set_storage_quantized_);
  m.impl("clone", clone);
  m.impl("dequantize.self", dequantize);
  m.impl("dequantize.tensors", at::native::dequantize_tensors_quantized_cpu);  // a loop of dequantize.self
  m.impl("int_repr", int_repr);
  m.impl("q_scale", at::native::q_scale_quant);
  m.impl("q_zero_point", at::native::q_zero_point_quant);
  m.impl("q_per_channel_scales", at::native::q_per_channel_scales);
  m.impl("q_per_channel_zero_points", at::native::q_per_channel_zero_points);
  m.impl("q_per_channel_axis", at::native::q_per_channel_axis);
  m.impl("qscheme", at::native::qscheme_quant);
  m.impl("fill_.Scalar",
         TORCH_FN(static_cast<at::Tensor& (*)(at::Tensor&, const at::Scalar&)>(at::native::fill_quantized_)));
  m.impl("fill_.Tensor",
         TORCH_FN(static_cast<at::Tensor& (*)(at::Tensor&, const at::Tensor&)>(at::native::fill_quantized_)));
  m.impl("equal", equal);
  m.impl("_copy_from", copy_from);
}

// Float tpu tensors in, quantized tpu tensors out (these dispatch on the float input).
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("quantize_per_tensor", quantize_per_tensor);
  m.impl("quantize_per_tensor.tensor_qparams", quantize_per_tensor_tensor_qparams);
  m.impl("quantize_per_tensor.tensors", at::native::quantize_per_tensor_list_cpu);  // a loop of quantize_per_tensor
  m.impl("quantize_per_tensor_dynamic", quantize_per_tensor_dynamic);
  m.impl("quantize_per_channel", quantize_per_channel);
  m.impl("_make_per_tensor_quantized_tensor", make_per_tensor_quantized_tensor);
  m.impl("_make_per_channel_quantized_tensor", make_per_channel_quantized_tensor);
  m.impl("dequantize.self", at::native::dequantize_cpu_or_cuda);
}

}  // namespace
}  // namespace torch_tpu
