"""Samples for the fft family: _fft_r2c, _fft_c2c, _fft_c2r (what every torch.fft function
lowers to). tests/test_fft.py covers the public functions in depth."""
import torch

from samples import make, register

C64 = (torch.complex64,)


def cplx(*shapes):
    def inputs(dt):
        return [torch.complex(make(s, torch.float32, seed=i), make(s, torch.float32, seed=i + 9))
                for i, s in enumerate(shapes)]
    return inputs


def empty_like_out(x, dtype):
    return torch.empty(0, dtype=dtype, device=x.device)


# real-input transforms: gradients flow through view_as_real
register("_fft_r2c", lambda x: torch.view_as_real(torch.fft.rfft(x)), [(4, 9)], name="rfft")
register("_fft_r2c", lambda x: torch.view_as_real(torch.fft.rfft2(x, s=(3, 8), norm="ortho")), [(5, 6)],
         name="rfft2 s= ortho")
register("_fft_r2c", lambda x: torch.view_as_real(torch.fft.fft(x, dim=0)), [(7, 3)], name="fft of real")
register("_fft_r2c.out", lambda x: torch.fft.rfft(x, out=empty_like_out(x, torch.complex64)), [(3, 10)],
         grad=False, name="rfft out=")
# complex-input transforms
register("_fft_c2c", lambda x: torch.fft.fft(x), cplx((3, 17)), dtypes=C64, name="fft prime length")
register("_fft_c2c", lambda x: torch.fft.ifftn(x, s=(4, 5, 6), norm="forward"), cplx((3, 4, 5)), dtypes=C64,
         name="ifftn s= forward")
register("_fft_c2c.out", lambda x: torch.fft.fft2(x, out=empty_like_out(x, x.dtype)), cplx((6, 10)), dtypes=C64,
         name="fft2 out=")
register("_fft_c2r", lambda x: torch.fft.irfft(x, n=9), cplx((4, 5)), dtypes=C64, name="irfft odd n")
register("_fft_c2r", lambda x: torch.fft.hfft2(x, norm="ortho"), cplx((4, 6)), dtypes=C64, name="hfft2")
register("_fft_c2r.out", lambda x: torch.fft.irfftn(x, out=empty_like_out(x, torch.float32)), cplx((3, 4, 5)),
         dtypes=C64, name="irfftn out=")
