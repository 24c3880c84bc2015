"""Meta functions for complex.out and polar.out with the dtype checks of CPU's kernel (one
complex_check_dtype for both): PyTorch's own metas promote mixed float inputs and accept any
complex out= (complex) or word the checks otherwise (polar), where CPU raises. tpu tensors only."""
import torch
from torch._meta_registrations import meta_complex
from . import register


_NAMES = {torch.float16: "Half", torch.float32: "Float", torch.float64: "Double", torch.complex32: "ComplexHalf",
          torch.complex64: "ComplexFloat", torch.complex128: "ComplexDouble"}


def _name(dtype):
    return _NAMES.get(dtype) or str(dtype).removeprefix("torch.").capitalize()


def _check_dtypes(real, imag, out):
    torch._check(real.dtype.is_floating_point and real.dtype != torch.bfloat16 and imag.dtype.is_floating_point
                 and imag.dtype != torch.bfloat16,
                 lambda: f"Expected both inputs to be Half, Float or Double tensors but got {_name(real.dtype)} and "
                         f"{_name(imag.dtype)}")
    torch._check(real.dtype == imag.dtype, lambda: f"Expected object of scalar type {_name(real.dtype)} but got scalar "
                                                   f"type {_name(imag.dtype)} for second argument")
    want = real.dtype.to_complex()
    torch._check(out.dtype == want, lambda: f"Expected object of scalar type {_name(want)} but got scalar type "
                                            f"{_name(out.dtype)} for argument 'out'")


def complex_out(real, imag, *, out):
    _check_dtypes(real, imag, out)
    return meta_complex(real, imag, out=out)


def polar_out(abs, angle, *, out):
    _check_dtypes(abs, angle, out)
    return meta_complex(abs, angle, out=out)  # the same shape rule: the operands broadcast


register("complex.out", complex_out)
register("polar.out", polar_out)
