"""ATen ops the generic C++ path cannot express, composed from native kernels and registered
for the tpu device: equal (returns a Python value; the one device->host read is the result
itself), and the foreach ops whose per-tensor scalars arrive packed in a CPU tensor
(`_foreach_addcdiv/addcmul(_).Tensor`), which run as their native Scalar[] overloads."""

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
