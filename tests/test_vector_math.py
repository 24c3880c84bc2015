"""float32 exp, exp2, expm1, log, log2, log10, log1p, sinh, cosh, tanh, sigmoid, erf, sin and cos run
vmath.h's vectorized versions (libm
computed them one element at a time, 6-20x slower than PyTorch CPU): checked here against
float64 within a bound in float32 ulps, over interesting, large and extremal values (sin and
cos past the vector reduction's range take libm, in place too), and against CPU for bfloat16."""
import math

import pytest
import torch

import torch_tpu  # noqa: F401

# PyTorch's own unary-ufunc test values (test_unary_ufuncs.py): interesting, large, extremal
VALUES = [0.0, -0.0, -0.001, 0.001, -0.25, 0.25, -1.0, 1.0, -math.pi / 2, math.pi / 2, -math.pi + 1e-5,
          math.pi - 1e-5, -math.pi, math.pi, 501, -1001.2, 13437.7, -4988429.2, 4988429.2, 1e20, -1e20,
          2.0 ** 20, -(2.0 ** 20) + 0.5, 1e-40, -1e-40, 88.7, -103.9, 9.0, -9.0, 3.9, -3.9,
          float("inf"), float("-inf"), float("nan")]

OPS = {  # op: (float64 reference, bound in float32 ulps)
    "exp": (torch.exp, 1.5), "log": (torch.log, 1.5), "tanh": (torch.tanh, 1.5),
    "sigmoid": (torch.sigmoid, 2.5), "erf": (torch.erf, 1.5), "sin": (torch.sin, 1.5), "cos": (torch.cos, 1.5),
    "expm1": (torch.expm1, 2.0), "log1p": (torch.log1p, 2.0),
    "exp2": (torch.exp2, 1.5), "log2": (torch.log2, 1.5), "log10": (torch.log10, 2.0),
    "sinh": (torch.sinh, 0.5), "cosh": (torch.cosh, 0.5),
}


def inputs():
    g = torch.Generator().manual_seed(0)
    rand = torch.cat([torch.randn(4000, generator=g) * s for s in (0.1, 1, 10, 1000)])
    return torch.cat([torch.tensor(VALUES), rand, -rand.abs()]).float()


def ulps(got, want64):
    """|got - want| in units of the float32 ulp at want (0 where both are the same inf/NaN)."""
    want = want64.float()
    same = (got == want) | (got.isnan() & want.isnan())
    ulp = (torch.nextafter(want.abs(), torch.tensor(float("inf"))) - want.abs()).double().clamp(min=2.0 ** -149)
    err = (got.double() - want64).abs() / ulp
    return torch.where(same, torch.zeros_like(err), err)


@pytest.mark.parametrize("name", OPS)
def test_float32_against_float64(name):
    ref, bound = OPS[name]
    x = inputs()
    got = getattr(torch, name)(x.to("tpu")).cpu()
    if name == "sigmoid":  # 1 / (1 + e^-x): e^-x overflows float32 below -88.7, where CPU gives 0 too
        low = x < -88.7
        assert torch.equal(got[low], torch.sigmoid(x[low])) and not got[low].any()
        x, got = x[~low], got[~low]
    err = ulps(got, ref(x.double()))
    worst = int(err.argmax())
    assert err.max() <= bound, f"{name}({x[worst].item()!r}) = {got[worst].item()!r}, {err.max().item():.2f} ulp"


@pytest.mark.parametrize("name", OPS)
def test_in_place_and_strided_equal_the_plain_call(name):
    x = inputs().to("tpu")
    want = getattr(torch, name)(x).cpu()
    inplace = x.clone()
    getattr(inplace, name + "_")()  # out == in: large arguments are fixed up from what the vector loop left
    torch.testing.assert_close(inplace.cpu(), want, rtol=0, atol=0, equal_nan=True)
    wide = torch.stack([x, x], 1)  # every other element
    torch.testing.assert_close(getattr(torch, name)(wide[:, 0]).cpu(), want, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("name", OPS)
def test_bfloat16_matches_cpu(name):
    x = inputs().bfloat16()
    want = getattr(torch, name)(x)
    if name in ("sinh", "cosh"):
        # CPU's vector kernel forms e^|x| in float, which overflows past 88.7 where sinh and cosh
        # are still finite (89 -> 2.24e38): there the reference is float64's value in bfloat16
        exact = getattr(torch, name)(x.double()).bfloat16()
        want = torch.where(want.isinf() & exact.isfinite(), exact, want)
        assert (want != getattr(torch, name)(x)).any()  # the inputs reach that range
    torch.testing.assert_close(getattr(torch, name)(x.to("tpu")).cpu(), want, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("exponent", [2, 3, -2, -1, 2.0])
def test_pow_small_exponents_as_cpu_computes_them(exponent, dtype):
    """x.pow(2) (RMSNorm's square) ran libm's pow per element, 26x CPU's time. CPU computes these
    exponents as products (pow_tensor_scalar_optimized_kernel): tpu now does too, bit for bit."""
    x = inputs().to(dtype)
    torch.testing.assert_close(x.to("tpu").pow(exponent).cpu(), x.pow(exponent), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("exponent, op", [(0.5, torch.sqrt), (-0.5, torch.rsqrt)])
def test_pow_half_exponents_are_the_roots(exponent, op):
    x = inputs().abs()
    torch.testing.assert_close(x.to("tpu").pow(exponent).cpu(), op(x.to("tpu")).cpu(), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("op", [torch.fmod, torch.remainder, torch.floor_divide])
def test_fmod_and_remainder_are_exact_as_cpu(op):
    """fmod is exact, so CPU's bits are the reference (and floor_divide's, which CPU computes
    from it). float32 takes a vector path where the quotient is below 2^28 (truncated in
    double, the remainder exact in double) and libm's fmodf elsewhere: huge quotients, zero,
    infinite and NaN operands, subnormals, signed zeros; also in place (the output is an
    input) and with a Python scalar divisor."""
    g = torch.Generator().manual_seed(0)
    special = torch.tensor([0.0, -0.0, 1.0, -1.0, 3.0, -3.0, 7.5, -7.5, 1e30, -1e30, float("inf"), float("-inf"),
                            float("nan"), 1e-40, -1e-40, 2.5, 0.1, 16777217.0, 3e8])
    a = torch.cat([torch.randn(4096, generator=g) * 10, torch.randn(512, generator=g) * 1e10, special])
    b = torch.cat([torch.randn(4096, generator=g), torch.randn(512, generator=g) * 1e-3,
                   torch.tensor([1.0, 1.0, 0.0, -0.0, 2.0, -2.0, float("inf"), float("-inf"), 3.0, -3.0, 1.0, 1.0,
                                 1.0, 1e-41, 3e-39, -0.5, 0.1, 3.0, 1e-30])])
    bits = lambda t: torch.where(t.isnan(), torch.zeros_like(t), t).view(torch.int32)  # noqa: E731
    want = op(a, b)
    assert torch.equal(bits(op(a.to("tpu"), b.to("tpu")).cpu()), bits(want))
    inplace = a.to("tpu")
    getattr(inplace, op.__name__ + "_")(b.to("tpu"))
    assert torch.equal(bits(inplace.cpu()), bits(want))
    assert torch.equal(bits(op(a.to("tpu"), 0.7).cpu()), bits(op(a, 0.7)))
