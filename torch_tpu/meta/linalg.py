"""Meta function for geqrf, which PyTorch ships without one: shapes and checks as CPU's
(a in column-major batches like LAPACK's output, tau with min(m, n) factors)."""
import torch

_lib = torch.library.Library("aten", "IMPL")


def geqrf(input):
    torch._check(input.dim() >= 2, lambda: "torch.geqrf: input must have at least 2 dimensions.")
    torch._check_not_implemented(input.dtype in (torch.float32, torch.float64, torch.complex64, torch.complex128),
                                 lambda: f"torch.geqrf: Expected a floating point or complex tensor as input. Got {input.dtype}")
    *batch, m, n = input.shape
    a = input.new_empty((*batch, n, m)).mT
    return a, input.new_empty((*batch, min(m, n)))


def geqrf_out(input, *, a, tau):
    ra, rt = geqrf(input)
    torch._check(a.dtype == input.dtype and tau.dtype == input.dtype,
                 lambda: f"Expected out tensors to have dtype {input.dtype}, but got {a.dtype} and {tau.dtype}")
    a.resize_(ra.shape)
    tau.resize_(rt.shape)
    return a, tau


_lib.impl("geqrf", geqrf, "Meta")
_lib.impl("geqrf.a", geqrf_out, "Meta")
