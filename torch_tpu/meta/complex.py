"""Meta function for complex.out with the dtype checks of CPU's kernel: PyTorch's own meta
promotes mixed float inputs and accepts any complex out=, where CPU raises. tpu tensors only."""
import torch
from torch._meta_registrations import meta_complex
from . import register


_NAMES = {torch.float16: "Half", torch.float32: "Float", torch.float64: "Double", torch.complex32: "ComplexHalf",
          torch.complex64: "ComplexFloat", torch.complex128: "ComplexDouble"}


def _name(dtype):
    return _NAMES.get(dtype) or str(dtype).removeprefix("torch.").capitalize()


def complex_out(real, imag, *, out):
    torch._check(real.dtype.is_floating_point and real.dtype != torch.bfloat16 and imag.dtype.is_floating_point
                 and imag.dtype != torch.bfloat16,
                 lambda: f"Expected both inputs to be Half, Float or Double tensors but got {_name(real.dtype)} and "
                         f"{_name(imag.dtype)}")
    torch._check(real.dtype == imag.dtype, lambda: f"Expected object of scalar type {_name(real.dtype)} but got scalar "
                                                   f"type {_name(imag.dtype)} for second argument")
    want = real.dtype.to_complex()
    torch._check(out.dtype == want, lambda: f"Expected object of scalar type {_name(want)} but got scalar type "
                                            f"{_name(out.dtype)} for argument 'out'")
    return meta_complex(real, imag, out=out)


register("complex.out", complex_out)
