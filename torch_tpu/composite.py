"""ATen ops composed from native tpu kernels and registered for the tpu device: equal (returns a
Python value, which the generic C++ path cannot express; the one device->host read is the result
itself) and the fused weight norm pair, whose CPU kernels are a norm and two broadcasts."""

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
