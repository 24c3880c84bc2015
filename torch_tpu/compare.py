"""The one policy by which a tpu result is compared with PyTorch CPU's (the op tests, the
conformance tool, the FFT and complex tests):

1. `torch.testing.assert_close` with PyTorch's default tolerances for the dtype, unless the
   caller passes others and says why: passes.
2. Otherwise a floating or complex result passes only against its float64 / complex128
   computation `exact`, where CPU's own rounding is the larger error:
   - NaN where CPU has NaN and nowhere else, except where CPU lost a number that float64 has
     (a vector path's inf * 0, as CPU's AVX-512 gelu(+inf)): there the result must be close to
     float64's value rounded to the result's dtype (a float32 result of -1e112 is -inf);
   - where both are numbers, the largest error against float64 at most CPU's own, times
     `factor` plus `extra` (1 and 0 unless the caller states why: CPU rounds each butterfly of
     an FFT, or accumulates in another order), plus float64's own rounding (16 ulps of the
     largest magnitude), so a tie between two float16 numbers is not decided by noise.
Anything else raises AssertionError naming `what`."""
import torch


def _wide(t):
    return t.to(torch.complex128) if t.is_complex() else t.double() if t.is_floating_point() else t


def check_like_cpu(actual, expected, exact=None, *, rtol=None, atol=None, factor=1.0, extra=0.0, what="output"):
    """actual: the tpu result (any device); expected: CPU's; exact: the float64 computation, or
    a function giving it (called only when needed), or None."""
    tol = {} if rtol is None and atol is None else dict(rtol=rtol or 0, atol=atol or 0)
    actual = actual.detach().cpu()
    expected = expected.detach()
    try:
        torch.testing.assert_close(actual, expected, equal_nan=True, check_device=False, check_stride=False,
                                   msg=lambda m: f"{what}: {m}", **tol)
        return
    except AssertionError:
        if not (actual.is_floating_point() or actual.is_complex()):
            raise
        exact = exact() if callable(exact) else exact
        if exact is None or exact.shape != actual.shape:
            raise
    a, e, x = _wide(actual), _wide(expected), _wide(exact.detach().cpu())
    a_nan, e_nan, x_nan = torch.isnan(a), torch.isnan(e), torch.isnan(x)
    if ((a_nan & ~e_nan) | (~a_nan & e_nan & x_nan)).any():
        raise AssertionError(f"{what}: NaN where CPU has a number, or a number where CPU and float64 have NaN")
    lost = e_nan & ~x_nan
    x_rounded = _wide(exact.detach().cpu().to(actual.dtype))  # past the dtype's range: its infinity
    torch.testing.assert_close(a[lost], x_rounded[lost], check_dtype=False, msg=lambda m: f"{what}, where CPU lost a number: {m}",
                               **(tol or dict(rtol=1.3e-6, atol=1e-5)))
    assert_error_not_worse(a, e, x, factor=factor, extra=extra, what=what)


def assert_error_not_worse(actual, expected, exact, *, factor=1.0, extra=0.0, what="output"):
    """The largest error of actual against exact, where CPU's result and exact are numbers, is at
    most CPU's own times factor plus extra (equal infinities count as no error)."""
    a, e, x = _wide(actual.detach().cpu()), _wide(expected.detach().cpu()), _wide(exact.detach().cpu())
    judged = ~torch.isnan(e) & ~torch.isnan(x)  # where float64 has no number either, nothing says who is closer
    err = lambda t: torch.where(t == x, 0, (t - x).abs())[judged]  # noqa: E731
    ours, cpus = err(a), err(e)
    # float64's own rounding: a value exactly halfway between two float16 numbers computes as a
    # hair above or below it, which would decide the comparison by noise
    finite = x[judged & torch.isfinite(x)].abs()
    noise = 16 * torch.finfo(torch.float64).eps * finite.max() if finite.numel() else 0
    if ours.numel() and not ours.max() <= factor * cpus.max() + extra + noise:
        raise AssertionError(f"{what}: error {ours.max().item():.3g} against float64 is more than CPU's "
                             f"{cpus.max().item():.3g} (x{factor} + {extra:.3g})")
