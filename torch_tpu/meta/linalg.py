"""Meta functions for linalg ops PyTorch ships without one, with CPU's checks: geqrf (a in
column-major batches like LAPACK's output, tau with min(m, n) factors) and linalg_lstsq.out
(which outputs each driver produces); and _linalg_eigh, whose PyTorch meta function accepts
integer inputs that CPU refuses with NotImplementedError (on tpu only)."""
import torch
from . import register, resize_output



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
    resize_output(a, ra.shape)
    resize_output(tau, rt.shape)
    return a, tau


_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def lstsq_out(input, b, rcond=None, *, driver=None, solution, residuals, rank, singular_values):
    """CPU's shapes: solution (*, n, k) (a vector rhs, one dim fewer than input, gives (*, n));
    residuals (*, k) for m > n and a driver other than gelsy; rank (*) except for gels;
    singular_values (*, min(m, n)) for gelsd and gelss; the others empty."""
    api = "torch.linalg.lstsq: "
    torch._check(input.dim() >= 2, lambda: api + "input must have at least 2 dimensions.")
    torch._check(b.dim() >= 1, lambda: api + "other must have at least 1 dimension.")
    torch._check(input.dtype == b.dtype, lambda: api + "Expected input and other to have the same dtype, but got "
                 f"input's dtype {_aten_name(input.dtype)} and other's dtype {_aten_name(b.dtype)}")
    dim_diff = input.dim() - b.dim()
    torch._check(0 <= dim_diff <= 1, lambda: api + "input.dim() must be greater or equal to other.dim() and "
                 "(input.dim() - other.dim()) <= 1")
    vector = dim_diff == 1
    b2 = b.unsqueeze(-1) if vector else b
    torch._check(input.size(-2) == b2.size(-2),
                 lambda: api + f"input.size(-2) should match other.size({-1 if vector else -2})")
    torch._check(input.dtype in (torch.float32, torch.float64, torch.complex64, torch.complex128),
                 lambda: "This function doesn't handle types other than float and double")
    driver = driver or "gelsy"
    torch._check(driver in _LSTSQ_DRIVERS, lambda: api + "parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    *_, m, n = input.shape
    k = b2.size(-1)
    batch = tuple(torch.broadcast_shapes(input.shape[:-2], b2.shape[:-2]))
    resize_output(solution, (*batch, n) if vector else (*batch, n, k))
    resize_output(residuals, (*batch, k) if m > n and driver != "gelsy" else (0,))
    resize_output(rank, batch if driver != "gels" else (0,))
    resize_output(singular_values, (*batch, min(m, n)) if driver in ("gelsd", "gelss") else (0,))
    return solution, residuals, rank, singular_values


def _aten_name(dtype):
    return {torch.float32: "Float", torch.float64: "Double", torch.complex64: "ComplexFloat",
            torch.complex128: "ComplexDouble", torch.int64: "Long", torch.int32: "Int", torch.int16: "Short",
            torch.int8: "Char", torch.uint8: "Byte", torch.bool: "Bool", torch.float16: "Half",
            torch.bfloat16: "BFloat16"}.get(dtype, str(dtype))


def _eigh(A, UPLO="L", compute_v=True):
    from torch._meta_registrations import meta__linalg_eigh
    torch._check_not_implemented(A.dtype.is_floating_point or A.is_complex(),
                                 lambda: f'"linalg_eigh_cpu" not implemented for \'{_aten_name(A.dtype)}\'')
    return meta__linalg_eigh(A, UPLO, compute_v)


register("geqrf", geqrf)
register("_linalg_eigh", _eigh)
register("linalg_lstsq.out", lstsq_out)
register("geqrf.a", geqrf_out)
