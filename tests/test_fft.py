"""torch.fft on tpu against PyTorch CPU: every public function (1-d, 2-d, n-d), every norm
mode, n=/s= padding and trimming, odd, even, prime (Bluestein) and mixed lengths, non-contiguous
inputs, out=, autograd, fftfreq/rfftfreq/fftshift/ifftshift and stft/istft. Results must match
CPU's complex64 answer within the usual tolerances and be no farther than CPU's from the
complex128 answer."""
import pytest
import torch

import torch_tpu
from torch_tpu.compare import assert_error_not_worse, check_like_cpu
from samples import make

F = torch.fft
NORMS = (None, "forward", "ortho")
LENGTHS = (1, 2, 5, 8, 12, 17, 30, 97, 128, 210, 1009)


def cplx(shape):
    return make(shape, torch.complex64)


def _double(x):
    return x.to(torch.complex128 if x.is_complex() else torch.float64)


def check(fn, *inputs, **kw):
    """fn(*inputs, **kw) on tpu == on CPU; no farther than CPU's result from the double one."""
    torch_tpu.metrics.reset()
    tpu_inputs = [x.to("tpu") if isinstance(x, torch.Tensor) else x for x in inputs]
    try:
        want = fn(*inputs, **kw)
    except Exception as e:  # e.g. irfft of one point: n = 0
        with pytest.raises(type(e)):
            fn(*tpu_inputs, **kw)
        return
    got = fn(*tpu_inputs, **kw)
    exact = fn(*[_double(x) for x in inputs], **kw)
    assert got.device.type == "tpu" and got.dtype == want.dtype and got.shape == want.shape
    # long unnormalized transforms: CPU's own float32 error can exceed the default tolerances
    check_like_cpu(got, want, exact)
    # and always: CPU rounds each butterfly to float32, ours rounds once (slack: half an ulp of
    # the largest value)
    assert_error_not_worse(got, want, exact, extra=2.0 ** -24 * exact.abs().max().item())
    assert not torch_tpu.metrics.fallback_ops(), torch_tpu.metrics.fallback_ops()
    ran = torch_tpu.metrics.executed_ops()
    assert any(k.startswith("fft_") for k in ran), ran


ONE_D_COMPLEX = (F.fft, F.ifft, F.irfft, F.hfft)
ONE_D_REAL = (F.fft, F.ifft, F.rfft, F.ihfft)


@pytest.mark.parametrize("fn", ONE_D_COMPLEX, ids=lambda f: f.__name__)
@pytest.mark.parametrize("n", LENGTHS)
def test_1d_complex_input(fn, n):
    x = cplx((3, n))
    for norm in NORMS:
        check(fn, x, norm=norm)
    check(fn, x, n=n + 3)  # zero padding
    if n > 1:
        check(fn, x, n=n - 1)  # trimming
    check(fn, x.t(), dim=0)  # non-contiguous, transform along dim 0


@pytest.mark.parametrize("fn", ONE_D_REAL, ids=lambda f: f.__name__)
@pytest.mark.parametrize("n", LENGTHS)
def test_1d_real_input(fn, n):
    x = make((4, n), torch.float32)
    for norm in NORMS:
        check(fn, x, norm=norm)
    check(fn, x, n=2 * n + 1)
    check(fn, make((n, 6), torch.float32)[:, ::2], dim=0)  # strided along the other dim


TWO_D = (F.fft2, F.ifft2, F.rfft2, F.irfft2, F.hfft2, F.ihfft2)
N_D = (F.fftn, F.ifftn, F.rfftn, F.irfftn, F.hfftn, F.ihfftn)
REAL_IN = (F.rfft2, F.ihfft2, F.rfftn, F.ihfftn)


def _input_for(fn, shape):
    return make(shape, torch.float32) if fn in REAL_IN else cplx(shape)


@pytest.mark.parametrize("fn", TWO_D, ids=lambda f: f.__name__)
def test_2d(fn):
    x = _input_for(fn, (2, 6, 9))
    for norm in NORMS:
        check(fn, x, norm=norm)
    check(fn, x, s=(5, 11))
    check(fn, x, dim=(0, 2))
    check(fn, x, s=(3, 4), dim=(2, 1))
    check(fn, x.transpose(0, 2))
    check(fn, _input_for(fn, (13, 7)))


@pytest.mark.parametrize("fn", N_D, ids=lambda f: f.__name__)
def test_nd(fn):
    x = _input_for(fn, (3, 4, 5, 6))
    for norm in NORMS:
        check(fn, x, norm=norm)
    check(fn, x, dim=(1, 3))
    check(fn, x, s=(2, 8), dim=(0, -1))
    check(fn, x.permute(3, 1, 0, 2), s=(7, 3, 4))
    check(fn, _input_for(fn, (11,)))


def test_real_input_to_complex_transforms():
    """fft/fftn of real input (r2c with both halves) and of integer input (promoted)."""
    check(F.fft, make((5, 7), torch.float32))
    check(F.fftn, make((4, 6), torch.float32))
    check(F.ifft2, make((4, 6), torch.float32), norm="ortho")
    check(F.fft, make((3, 8), torch.int64))


def test_large_batch_and_length():
    """Many lines (split across the pool) and a long Bluestein length."""
    check(F.fft, cplx((512, 60)))
    check(F.rfft, make((2, 4099), torch.float32))
    check(F.ifft, cplx((8, 3 * 1031)), dim=-1)


def test_empty_and_one_point():
    # CPU's MKL backend raises on an empty batch; tpu returns the empty result (as CUDA and numpy)
    for fn in (F.fft, F.ifft, F.rfft, F.ihfft, F.irfft, F.hfft):
        x = torch.zeros(0, 5)
        got, meta = fn(x.to("tpu")), fn(x.to("meta"))
        assert got.shape == meta.shape and got.dtype == meta.dtype
    check(F.fft, cplx((4, 1)))
    check(F.irfft, cplx((4, 1)), n=1)
    check(F.rfft, make((3, 1), torch.float32))


@pytest.mark.parametrize("name", ["fft", "rfft", "irfft", "fft2", "rfftn", "irfftn", "hfft"])
def test_out(name):
    fn = getattr(F, name)
    x = make((4, 6), torch.float32) if name.startswith("rfft") else cplx((4, 6))
    want = fn(x)
    out = torch.empty(0, dtype=want.dtype, device="tpu")
    torch_tpu.metrics.reset()
    r = fn(x.to("tpu"), out=out)
    assert r is out
    torch.testing.assert_close(out.cpu(), want)
    assert not torch_tpu.metrics.fallback_ops()


GRAD = [
    (F.fft, False), (F.ifft, False), (F.rfft, True), (F.irfft, False), (F.hfft, False), (F.ihfft, True),
    (F.fft2, False), (F.rfft2, True), (F.irfftn, False), (F.fftn, True),
]


@pytest.mark.parametrize("fn,real_in", GRAD, ids=lambda v: getattr(v, "__name__", ""))
def test_backward(fn, real_in):
    base = make((4, 9), torch.float32) if real_in else cplx((4, 9))
    outs, grads = [], []
    for dev in ("cpu", "tpu"):
        x = base.to(dev).detach().requires_grad_(True)
        y = fn(x, norm="ortho")
        yr = torch.view_as_real(y.resolve_conj()) if y.is_complex() else y
        w = make(tuple(yr.shape), torch.float32, seed=5).to(dev)
        (yr * w).sum().backward()
        outs.append(y.detach().cpu())
        grads.append(x.grad.cpu())
    torch.testing.assert_close(outs[1], outs[0])
    torch.testing.assert_close(grads[1], grads[0])


def test_freq_and_shift():
    torch_tpu.metrics.reset()
    for n, d in ((1, 1.0), (7, 0.3), (8, 2.0)):
        torch.testing.assert_close(F.fftfreq(n, d, device="tpu").cpu(), F.fftfreq(n, d))
        torch.testing.assert_close(F.rfftfreq(n, d, device="tpu").cpu(), F.rfftfreq(n, d))
    for x in (make((5, 6), torch.float32), cplx((3, 4, 5))):
        for dim in (None, 0, (0, -1)):
            torch.testing.assert_close(F.fftshift(x.to("tpu"), dim=dim).cpu(), F.fftshift(x, dim=dim))
            torch.testing.assert_close(F.ifftshift(x.to("tpu"), dim=dim).cpu(), F.ifftshift(x, dim=dim))
    assert not torch_tpu.metrics.fallback_ops(), torch_tpu.metrics.fallback_ops()


def test_stft_istft():
    x = make((2, 400), torch.float32)
    win = torch.hann_window(64)
    kw = dict(n_fft=64, hop_length=16, window=win, return_complex=True)
    torch_tpu.metrics.reset()
    want = torch.stft(x, **kw)
    got = torch.stft(x.to("tpu"), **{**kw, "window": win.to("tpu")})
    torch.testing.assert_close(got.cpu(), want)
    assert not torch_tpu.metrics.fallback_ops(), torch_tpu.metrics.fallback_ops()
    back = torch.istft(got, n_fft=64, hop_length=16, window=win.to("tpu"), length=400)
    torch.testing.assert_close(back.cpu(), torch.istft(want, n_fft=64, hop_length=16, window=win, length=400))
    # istft's overlap-add (unfold_backward) has no native kernel yet; its transform is native
    assert set(torch_tpu.metrics.fallback_ops()) <= {"aten::unfold_backward"}, torch_tpu.metrics.fallback_ops()
    assert "fft_c2r" in torch_tpu.metrics.executed_ops()
