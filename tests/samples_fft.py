"""Samples for the fft family: _fft_r2c, _fft_c2c, _fft_c2r (what every torch.fft function
lowers to). tests/test_fft.py covers the public functions in depth."""
import torch

from samples import COMPLEX, register


def _out(fn, dtype=None):
    return lambda x: fn(x, out=torch.empty(0, dtype=dtype or x.dtype, device=x.device))


C = dict(dtypes=COMPLEX, grad=False)

# real-input transforms: gradients flow through view_as_real
register("_fft_r2c", lambda x: torch.view_as_real(torch.fft.rfft(x)), [(4, 9)], name="rfft")
register("_fft_r2c", lambda x: torch.view_as_real(torch.fft.rfft2(x, s=(3, 8), norm="ortho")), [(5, 6)],
         name="rfft2 s= ortho")
register("_fft_r2c", lambda x: torch.view_as_real(torch.fft.fft(x, dim=0)), [(7, 3)], name="fft of real")
register("_fft_r2c.out", _out(torch.fft.rfft, torch.complex64), [(3, 10)], grad=False, name="rfft out=")
# complex-input transforms
register("_fft_c2c", lambda x: torch.fft.fft(x), [(3, 17)], **C, name="fft prime length")
register("_fft_c2c", lambda x: torch.fft.ifftn(x, s=(4, 5, 6), norm="forward"), [(3, 4, 5)], **C,
         name="ifftn s= forward")
register("_fft_c2c.out", _out(torch.fft.fft2), [(6, 10)], **C, name="fft2 out=")
register("_fft_c2r", lambda x: torch.fft.irfft(x, n=9), [(4, 5)], **C, name="irfft odd n")
register("_fft_c2r", lambda x: torch.fft.hfft2(x, norm="ortho"), [(4, 6)], **C, name="hfft2")
register("_fft_c2r.out", _out(torch.fft.irfftn, torch.float32), [(3, 4, 5)], **C, name="irfftn out=")
