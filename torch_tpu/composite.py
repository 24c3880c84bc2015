"""ATen ops that return a Python value rather than tensors, which the generic C++ path cannot
express: equal. Composed from native tpu kernels and registered for the tpu device; the one
device->host read is the result itself."""

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
