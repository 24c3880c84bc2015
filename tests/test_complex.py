"""complex64 (and stored-only complex128) tpu tensors against PyTorch CPU: storage and
copies, conj/neg bit views, complex scalars, the float views (view_as_real, real, imag), and
the counted CPU fallback for ops without a complex kernel. Per-op kernels are checked by
tests/samples_complex.py through test_ops.py."""
import warnings

import pytest
import torch

import torch_tpu
from samples import make


def bits(t):
    """The exact bytes of a complex tensor, as int32 pairs (NaN payloads and -0.0 included)."""
    return t.resolve_conj().resolve_neg().contiguous().view(torch.int32 if t.dtype == torch.complex64 else torch.int64)


def specials(dtype=torch.complex64):
    x = make((6, 5), dtype)
    x[0, 0] = complex(-0.0, -0.0)
    x[1, 1] = complex(float("inf"), float("nan"))
    x[2, 2] = complex(float("-inf"), 0.0)
    return x


@pytest.fixture(autouse=True)
def _reset():
    torch_tpu.metrics.reset()
    yield


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_round_trip_is_bit_exact(dtype):
    x = specials(dtype)
    for src in (x, x.t(), x[::2, 1:]):
        y = src.to("tpu")
        assert y.device.type == "tpu" and y.dtype == dtype
        assert torch.equal(bits(y.cpu()), bits(src))
        z = torch.empty(src.shape, dtype=dtype).t().contiguous().t()  # strided host destination
        z.copy_(y)
        assert torch.equal(bits(z), bits(src))


def test_factories_and_printing():
    z = torch.zeros(2, 3, dtype=torch.complex64, device="tpu")
    assert z.dtype == torch.complex64 and torch.equal(z.cpu(), torch.zeros(2, 3, dtype=torch.complex64))
    f = torch.full((2, 2), 1 - 2j, device="tpu")
    assert f.dtype == torch.complex64 and torch.equal(f.cpu(), torch.full((2, 2), 1 - 2j))
    x = make((3,), torch.complex64)
    assert repr(x.to("tpu")).replace(", device='tpu:0'", "") == repr(x)
    assert x.to("tpu")[1].item() == x[1].item()
    assert not torch_tpu.metrics.fallback_ops()


@pytest.mark.parametrize("src,dst", [(torch.float32, torch.complex64), (torch.int64, torch.complex64),
                                     (torch.bool, torch.complex64), (torch.float64, torch.complex64),
                                     (torch.complex64, torch.float32), (torch.complex64, torch.int32),
                                     (torch.complex64, torch.bool), (torch.complex64, torch.float16),
                                     (torch.complex64, torch.complex128), (torch.complex128, torch.complex64)])
def test_casts_match_cpu(src, dst):
    x = specials() if src.is_complex else make((6, 5), src)
    if not (dst.is_floating_point or dst.is_complex):
        x = x.nan_to_num(0.0, 0.0, 0.0)  # inf/NaN to an integer is undefined behaviour in C++
    x = x.to(src)
    if src.is_complex and dst == torch.bool:
        x[3, 3] = complex(0.0, 2.0)  # nonzero only in the imaginary part
        x[4, 4] = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Casting complex values to real discards the imaginary part"
        want = x.to(dst)
        got = x.to("tpu").to(dst)
        got_nc = x.t().to("tpu").to(dst).t()
    for g in (got, got_nc):
        assert g.dtype == dst
        if dst.is_complex:
            assert torch.equal(bits(g.cpu()), bits(want))
        else:
            torch.testing.assert_close(g.cpu(), want, equal_nan=True, rtol=0, atol=0)


def test_complex128_ops_fall_back():
    x = specials(torch.complex128)
    y = x.to("tpu")
    got = (y * 2 + 1j).cpu()
    torch.testing.assert_close(got, x * 2 + 1j, equal_nan=True)
    assert torch_tpu.metrics.fallback_ops()


def test_op_without_complex_kernel_falls_back():
    torch_tpu.metrics.reset()
    a, b = make((4, 5), torch.complex64), make((4, 5), torch.complex64, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for fn in (lambda p, q: torch.index_add(p, 0, torch.tensor([3, 0, 3], device=p.device), q[:3]),
                   lambda p, q: torch.trace(p)):
            torch.testing.assert_close(fn(a.to("tpu"), b.to("tpu")).cpu(), fn(a, b))
    reasons = torch_tpu.metrics.fallback_ops()
    assert reasons and all(reason == "complex64 not supported by this kernel" for _, reason in reasons.values())


def test_complex_output_from_real_inputs_falls_back_when_kernel_lacks_complex():
    a = make((4,), torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # a real input, a complex result: cumprod has no complex kernel yet
        got = torch.cumprod(a.to("tpu"), 0, dtype=torch.complex64).cpu()
    torch.testing.assert_close(got, torch.cumprod(a, 0, dtype=torch.complex64))
    reasons = torch_tpu.metrics.fallback_ops()
    assert reasons and all(reason == "complex64 not supported by this kernel" for _, reason in reasons.values())


def test_conj_and_neg_views():
    x = specials()
    t = x.to("tpu")
    c = t.conj()
    assert c.is_conj()
    assert torch.equal(bits(c.cpu()), bits(x.conj()))
    assert torch.equal(bits(c.clone().cpu()), bits(x.conj().clone()))
    assert torch.equal(bits(c.resolve_conj().cpu()), bits(x.conj().resolve_conj()))
    assert c[3, 2].item() == x.conj()[3, 2].item()
    im = c.imag  # a float32 view with the negative bit
    assert im.is_neg()
    torch.testing.assert_close(im.cpu(), x.conj().imag, equal_nan=True, rtol=0, atol=0)
    assert im[3, 2].item() == x.conj().imag[3, 2].item()
    # writing through conj / neg views
    y, yc = make((6, 5), torch.complex64, seed=9), x.clone()
    t.conj().copy_(y.to("tpu"))
    yc.conj().copy_(y)
    assert torch.equal(bits(t.cpu()), bits(yc))
    r = make((6, 5), torch.float32, seed=4)
    t.conj().imag.copy_(r.to("tpu"))
    yc.conj().imag.copy_(r)
    assert torch.equal(bits(t.cpu()), bits(yc))


def test_float_views_are_views_without_fallback():
    x = specials()
    t = x.to("tpu")
    r = torch.view_as_real(t)
    assert r.shape == (6, 5, 2) and r.dtype == torch.float32 and r.data_ptr() == t.data_ptr()
    torch.testing.assert_close(r.cpu(), torch.view_as_real(x), equal_nan=True, rtol=0, atol=0)
    torch.testing.assert_close(t.real.cpu(), x.real, equal_nan=True, rtol=0, atol=0)
    torch.testing.assert_close(t.imag.cpu(), x.imag, equal_nan=True, rtol=0, atol=0)
    back = torch.view_as_complex(r)
    assert back.data_ptr() == t.data_ptr() and torch.equal(bits(back.cpu()), bits(x))
    t.real.fill_(7)
    t.imag[0].zero_()
    x.real.fill_(7)
    x.imag[0].zero_()
    assert torch.equal(bits(t.cpu()), bits(x))
    assert not torch_tpu.metrics.fallback_ops()
    with pytest.raises(RuntimeError):
        torch.view_as_real(t.conj())
    with pytest.raises(RuntimeError):
        torch.view_as_complex(torch.zeros(3, 3, device="tpu"))


def test_python_complex_scalars():
    x = make((3, 4), torch.complex64)
    t = x.to("tpu")
    t.fill_(2 - 3.5j)
    assert torch.equal(t.cpu(), torch.full((3, 4), 2 - 3.5j, dtype=torch.complex64))
    t2 = x.to("tpu").index_fill(1, torch.tensor([0, 2], device="tpu"), -1j)
    assert torch.equal(t2.cpu(), x.index_fill(1, torch.tensor([0, 2]), -1j))
    assert not torch_tpu.metrics.fallback_ops()


@pytest.mark.parametrize("fn", [lambda d: torch.zeros(2, device=d).fill_(1 + 1j),
                                lambda d: torch.zeros(2, 2, device=d).scatter_(0, torch.tensor([[0, 1]], device=d), 1j),
                                lambda d: torch.zeros(2, device=d).index_fill_(0, torch.tensor([0], device=d), 1j)])
def test_complex_scalar_into_real_tensor_raises_like_cpu(fn):
    with pytest.raises(RuntimeError) as cpu_err:
        fn("cpu")
    with pytest.raises(RuntimeError) as tpu_err:
        fn("tpu")
        torch.tpu.synchronize()
    # the kernel finds it, so strict mode reports it at the next synchronization, naming the kernel
    assert str(cpu_err.value).split(" type ")[0] in str(tpu_err.value)


def test_complex_scalar_with_zero_imaginary_part_fits_a_real_tensor():
    assert torch.equal(torch.zeros(2, dtype=torch.int32, device="tpu").fill_(2 + 0j).cpu(),
                       torch.full((2,), 2, dtype=torch.int32))


@pytest.mark.parametrize("fn", [lambda a: torch.complex(a, a.double()), lambda a: torch.complex(a, a.int()),
                                lambda a: torch.complex(a.double(), a.double(),
                                                        out=torch.empty(2, dtype=torch.complex64, device=a.device))])
def test_torch_complex_dtype_errors_match_cpu(fn):
    with pytest.raises(RuntimeError) as cpu_err:
        fn(torch.ones(2))
    with pytest.raises(RuntimeError) as tpu_err:
        fn(torch.ones(2, device="tpu"))
    assert str(tpu_err.value) == str(cpu_err.value)


def test_unfold_moves_complex_elements_natively():
    x = make((2, 3, 5, 6), torch.complex64)
    for kw in ({"kernel_size": 2}, {"kernel_size": (2, 3), "dilation": (1, 2), "padding": 1, "stride": (2, 1)}):
        got = torch.nn.functional.unfold(x.to("tpu"), **kw).cpu()
        torch.testing.assert_close(got, torch.nn.functional.unfold(x, **kw), rtol=0, atol=0)
    assert not torch_tpu.metrics.fallback_ops()
