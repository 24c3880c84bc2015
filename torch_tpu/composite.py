"""ATen ops composed from native tpu kernels and registered for the tpu device: equal (returns a
Python value, which the generic C++ path cannot express; the one device->host read is the result
itself), the foreach ops whose per-tensor scalars arrive packed in a CPU tensor
(`_foreach_addcdiv/addcmul(_).Tensor`), which run as their native Scalar[] overloads, and the
fused weight norm pair, whose CPU kernels are a norm and two broadcasts."""

import torch

_lib = torch.library.Library("aten", "IMPL")


def equal(self, other):
    # CPU's cpu_equal: same device required, different sizes are simply unequal, values
    # compare after type promotion and NaN equals nothing (not even itself)
    torch._check(self.device == other.device,
                 lambda: f"Cannot compare two tensors on different devices. Got: {self.device} and {other.device}")
    if self.shape != other.shape:
        return False
    return bool(torch.eq(self, other).all().item())


_lib.impl("equal", equal, "PrivateUse1")


def _scalar_list(self, tensor1, tensor2, scalars):
    """CPU's checks (foreach list lengths, then convert_tensor_to_scalar_list's), and the
    scalars as the Python numbers of their dtype, as CPU unpacks them."""
    for other in (tensor1, tensor2):
        torch._check(len(other) == len(self), lambda: "Tensor lists must have the same number of tensors, "
                     f"got {len(self)} and {len(other)}")
    torch._check(scalars.device.type == "cpu", lambda: f"Expected scalars to be on CPU, got {scalars.device} instead.")
    torch._check(scalars.is_contiguous(), lambda: "Expected scalars to be contiguous.")
    torch._check(scalars.dim() == 1,
                 lambda: f"Expected packed scalar Tensor to be of dimension 1. Got {scalars.dim()} instead.")
    torch._check(scalars.size(0) == len(self), lambda: "Expected length of scalars to match input of length "
                 f"{len(self)} but got {scalars.size(0)} instead.")
    return scalars.tolist()


def _packed_scalars(overload):
    return lambda self, tensor1, tensor2, scalars: overload(self, tensor1, tensor2,
                                                            _scalar_list(self, tensor1, tensor2, scalars))


for _name in ("_foreach_addcdiv", "_foreach_addcdiv_", "_foreach_addcmul", "_foreach_addcmul_"):
    _lib.impl(f"{_name}.Tensor", _packed_scalars(getattr(torch.ops.aten, _name).ScalarList), "PrivateUse1")


def _weight_norm_parts(v, dim):
    """The accumulation dtype of CPU's fused kernel (float for reduced floats), the dims the
    norm runs over (none for 1-D v: then the norm is |v|), and v in that dtype."""
    torch._check(dim == 0 or dim == v.dim() - 1, lambda: "fused kernels can only be applied for first or last dim")
    acc = torch.float64 if v.dtype == torch.float64 else torch.float32
    return acc, [d for d in range(v.dim()) if d != dim], v.to(acc)


def _weight_norm_interface(v, g, dim=0):
    # nn.utils.weight_norm's fused kernel (wav2vec2/HuBERT positional conv, VITS, EnCodec)
    acc, dims, va = _weight_norm_parts(v, dim)
    norm = torch.linalg.vector_norm(va, 2, dims, keepdim=True) if dims else va.abs()
    w = (va * (g.to(acc) / norm)).to(v.dtype).contiguous()
    return w, norm.reshape(g.shape)


def _weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms, dim):
    acc, dims, va = _weight_norm_parts(saved_v, dim)
    norm = saved_norms.to(acc)
    grad_w_times_v = grad_w.to(acc) * va
    grad_g = (grad_w_times_v.sum(dims, keepdim=True) if dims else grad_w_times_v) / norm
    grad_v = (saved_g.to(acc) / norm) * (grad_w.to(acc) - va * (grad_g / norm))
    return grad_v.to(saved_v.dtype), grad_g.to(saved_g.dtype).reshape(saved_g.shape)


_lib.impl("_weight_norm_interface", _weight_norm_interface, "PrivateUse1")
_lib.impl("_weight_norm_interface_backward", _weight_norm_interface_backward, "PrivateUse1")
