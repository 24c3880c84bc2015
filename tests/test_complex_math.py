"""complex64 arithmetic kernels (elementwise, reductions, matmul) against PyTorch CPU:
contiguous and non-contiguous inputs, complex Python scalars, real results (abs, angle,
var, norms), and no CPU fallback. CPU complex64 is the reference; where CPU's own float32
rounding is the larger error (long sums, products) complex128 decides, as in samples.py."""
import cmath

import math

import pytest
import torch

import torch_tpu
from torch_tpu.compare import check_like_cpu
from samples import noncontiguous

C64 = torch.complex64


def crand(*shape, seed=0, scale=2.0):
    g = torch.Generator().manual_seed(seed + 31 * len(shape) + sum(shape))
    re = (torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1) * scale
    im = (torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1) * scale
    return torch.complex(re, im).to(C64)


# Values std::complex handles specially: zeros, infinities, NaN in either part, large
# magnitudes where a naive |z|^2 or division overflows.
def cspecial():
    inf, nan = float("inf"), float("nan")
    vals = [0j, complex(-0.0, 0.0), complex(inf, 0), complex(0, inf), complex(-inf, 1), complex(nan, 1),
            complex(1, nan), complex(3e30, 4e30), complex(-1e-30, 2e-30), 1 + 1j, -2.5 + 0.5j, complex(0, -1)]
    return torch.tensor(vals, dtype=C64)


def run_both(fn, inputs, noncontig=False):
    def to(x, dev):
        if not isinstance(x, torch.Tensor):
            return x
        y = x.to(dev)
        return noncontiguous(y) if noncontig and y.dim() > 0 else y

    expected = fn(*[to(x, "cpu") for x in inputs])
    torch_tpu.metrics.reset()
    with torch.tpu.precision("highest"):
        actual = fn(*[to(x, "tpu") for x in inputs])
        torch.tpu.synchronize()
    assert not torch_tpu.metrics.fallback_ops(), f"fell back: {torch_tpu.metrics.fallback_ops()}"
    return actual, expected


def check(fn, inputs, noncontig=False, exact128=False, **tol):
    actual, expected = run_both(fn, inputs, noncontig)
    outs_a = actual if isinstance(actual, tuple) else (actual,)
    outs_e = expected if isinstance(expected, tuple) else (expected,)
    for a, e in zip(outs_a, outs_e):
        assert a.device.type == "tpu" and a.dtype == e.dtype and a.shape == e.shape

        def exact(a=a):
            ref = fn(*[x.to(torch.complex128) if isinstance(x, torch.Tensor) and x.is_complex() else x
                       for x in inputs])
            ref = ref if isinstance(ref, tuple) else (ref,)
            return ref[outs_a.index(a)] if len(ref) > 1 else ref[0]
        # float32 accumulation order differs from CPU's (MKL's): the error against complex128 may
        # differ by a small factor either way, not by orders of magnitude (bf16 rounding would)
        check_like_cpu(a, e, exact if exact128 else None, factor=2, extra=1e-6, **tol)


UNARY = ["exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan", "asin",
         "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sigmoid", "reciprocal", "neg", "sgn",
         "abs", "angle", "square"]


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("noncontig", [False, True])
def test_unary(name, noncontig):
    fn = getattr(torch, name)
    check(fn, [crand(4, 6)], noncontig)


@pytest.mark.parametrize("name", sorted(set(UNARY) - {"square", "log2"}))
def test_unary_special_values(name):
    fn = getattr(torch, name)
    check(fn, [cspecial()])


def test_log2_special_values():
    # Reference: C99 Annex G's clog divided by the real ln 2, from CPU's complex log (which every
    # CPU path agrees on). CPU's own log2 depends on the host's vector path: its scalar path
    # (ATEN_CPU_CAPABILITY=default) divides by the complex number ln 2 + 0i, so log2(0) is
    # -inf+nanj there (0 * inf in the division) and -inf+0j in its AVX2/AVX-512 paths.
    x = cspecial()
    ln = torch.log(x)
    expected = torch.complex(ln.real / math.log(2), ln.imag / math.log(2))
    assert expected[0].imag == 0 and expected[1].imag > 4.5
    torch.testing.assert_close(torch.log2(x.to("tpu")).cpu(), expected, equal_nan=True)


def test_square_special_values():
    # Reference per element: CPU's complex64 square of 3e30+4e30j depends on the host's vector
    # path (AVX2: a*a - b*b = inf - inf = NaN; AVX-512: fused, -inf). For finite inputs the
    # reference is the exact square rounded to complex64 (complex128, then cast); non-finite
    # inputs follow c10's formula, which both CPU paths agree on.
    x = cspecial()
    actual, cpu = run_both(torch.square, [x])
    exact = torch.square(x.to(torch.complex128)).to(C64)
    finite = torch.isfinite(x)
    expected = torch.where(finite, exact, cpu)
    assert expected[7].real == float("-inf") and expected[7].imag == float("inf")
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True)


@pytest.mark.parametrize("name", ["exp", "sqrt", "reciprocal", "sigmoid", "neg"])
def test_unary_inplace_and_out(name):
    x = crand(3, 5)
    check(lambda t: getattr(t.clone(), name + "_")(), [x])
    check(lambda t: getattr(torch, name)(t, out=torch.empty_like(t)), [x])
    check(lambda t: torch.abs(t, out=torch.empty(t.shape, device=t.device)), [x])


BINARY = {
    "sub": lambda a, b: a - b,
    "sub alpha": lambda a, b: torch.sub(a, b, alpha=0.5),
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "pow": lambda a, b: torch.pow(a, b),
    "rsub": lambda a, b: torch.rsub(a, b, alpha=1 + 2j),
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
}


@pytest.mark.parametrize("noncontig", [False, True])
def test_add(noncontig):
    check(lambda a, b: torch.add(a, b, alpha=2 - 1j), [crand(4, 6, seed=1), crand(6, seed=2)], noncontig)
    check(lambda a, b: a + b, [crand(4, 6, seed=3), crand(4, 1, seed=4)], noncontig)
    check(lambda a, b: a + b, [crand(5, seed=5), torch.randn(5)], noncontig)


def test_isnan_isinf():
    check(torch.isnan, [cspecial()])
    check(torch.isinf, [cspecial()])


@pytest.mark.parametrize("name", list(BINARY))
@pytest.mark.parametrize("noncontig", [False, True])
def test_binary(name, noncontig):
    check(BINARY[name], [crand(4, 6, seed=1), crand(6, seed=2)], noncontig)


@pytest.mark.parametrize("name", ["mul", "div", "sub", "pow"])
def test_binary_special_values(name):
    x = cspecial()
    check(BINARY[name], [x, x.flip(0)])


@pytest.mark.parametrize("scalar", [2, 3, -2, 0.5, -0.5, -1, 1.7, 2 + 0j, 0.5 - 1.5j])
def test_pow_scalar(scalar):
    check(lambda a: torch.pow(a, scalar), [crand(4, 6)])
    check(lambda a: torch.pow(scalar, a), [crand(4, 6)])


def test_mixed_real_complex_promotion():
    x, r = crand(4, 6), torch.randn(4, 6, generator=torch.Generator().manual_seed(3))
    check(lambda a, b: a * b, [x, r])
    check(lambda a, b: b / a, [x, r])
    check(lambda b: b * (1 - 2j), [r])
    check(lambda a: a - 3, [x])
    check(lambda a, b: torch.where(b > 0, a, 1j), [x, r])


def test_ternary():
    a, b, c = crand(4, 6, seed=1), crand(4, 6, seed=2), crand(6, seed=3)
    check(lambda x, y, z: torch.addcmul(x, y, z, value=0.5 + 1j), [a, b, c])
    check(lambda x, y, z: torch.addcdiv(x, y, z, value=2), [a, b, c])
    check(lambda x, y: torch.lerp(x, y, 0.3), [a, b])
    check(lambda x, y: torch.lerp(x, y, 0.8 - 0.2j), [a, b])
    check(lambda x, y, w: torch.lerp(x, y, w), [a, b, c])
    m = torch.rand(4, 6, generator=torch.Generator().manual_seed(5)) > 0.5
    check(lambda x, y: torch.where(m.to(x.device), x, y), [a, b])
    check(lambda x: x.masked_fill(m.to(x.device), 2 - 3j), [a])


REDUCE = {
    "sum all": lambda x: x.sum(),
    "sum dim": lambda x: x.sum(1),
    "sum dims keepdim": lambda x: x.sum((0, 2), keepdim=True),
    "mean": lambda x: x.mean(),
    "mean dim": lambda x: x.mean(0),
    "prod": lambda x: x.prod(),
    "prod dim": lambda x: x.prod(1),
    "cumsum": lambda x: x.cumsum(1),
    "var": lambda x: x.var(1),
    "std": lambda x: x.std((0, 2), correction=0),
    "var_mean": lambda x: torch.var_mean(x, 2),
    "std_mean": lambda x: torch.std_mean(x),
    "vector_norm": lambda x: torch.linalg.vector_norm(x),
    "vector_norm 1 dim": lambda x: torch.linalg.vector_norm(x, 1, dim=1),
    "vector_norm inf": lambda x: torch.linalg.vector_norm(x, float("inf"), dim=(0, 2)),
    "vector_norm 3": lambda x: torch.linalg.vector_norm(x, 3, dim=0, keepdim=True),
    "norm": lambda x: torch.norm(x),
    "norm dim": lambda x: torch.norm(x, dim=2),
    "logsumexp": lambda x: torch.logsumexp(x, 1),
    "logsumexp keepdim": lambda x: torch.logsumexp(x, (0, 2), keepdim=True),
}


@pytest.mark.parametrize("name", list(REDUCE))
@pytest.mark.parametrize("noncontig", [False, True])
def test_reduce(name, noncontig):
    scale = 1.1 if name.startswith("prod") else 2.0
    check(REDUCE[name], [crand(3, 5, 4, scale=scale)], noncontig, exact128=True)


def test_reduce_long_and_expanded():
    check(lambda x: x.sum(), [crand(100_000)], exact128=True)
    check(lambda x: x.sum(0), [crand(300, 70)], exact128=True)
    check(lambda x: x.expand(3, 7).prod(1), [crand(7, scale=1.1)], exact128=True)


MATMUL = {
    "mm": (lambda a, b: a @ b, [(5, 7), (7, 3)]),
    "mm transposed": (lambda a, b: a.t() @ b.t(), [(7, 5), (3, 7)]),
    "bmm": (lambda a, b: torch.bmm(a, b), [(2, 5, 7), (2, 7, 3)]),
    "addmm": (lambda s, a, b: torch.addmm(s, a, b, beta=0.5 - 1j, alpha=2j), [(3,), (5, 7), (7, 3)]),
    "baddbmm": (lambda s, a, b: torch.baddbmm(s, a, b, alpha=1 - 1j), [(2, 5, 3), (2, 5, 7), (2, 7, 3)]),
    "addbmm": (lambda s, a, b: torch.addbmm(s, a, b), [(5, 3), (2, 5, 7), (2, 7, 3)]),
    "mv": (lambda a, v: torch.mv(a, v), [(5, 7), (7,)]),
    "addmv": (lambda s, a, v: torch.addmv(s, a, v, beta=2), [(5,), (5, 7), (7,)]),
    "dot": (lambda a, b: torch.dot(a, b), [(9,), (9,)]),
    "vdot": (lambda a, b: torch.vdot(a, b), [(9,), (9,)]),
    "matmul batched": (lambda a, b: torch.matmul(a, b), [(2, 3, 4, 6), (6, 5)]),
    "matmul large": (lambda a, b: a @ b, [(70, 300), (300, 40)]),
}


@pytest.mark.parametrize("name", list(MATMUL))
@pytest.mark.parametrize("noncontig", [False, True])
def test_matmul(name, noncontig):
    fn, shapes = MATMUL[name]
    check(fn, [crand(*s, seed=i) for i, s in enumerate(shapes)], noncontig, exact128=True)


@pytest.mark.parametrize("precision", ["default", "high", "highest"])
def test_matmul_precision_is_that_of_float32(precision):
    """A complex product is the four real products of its parts, each with the float32 MXU
    numerics of the precision in force: bit for bit what real tpu matmuls give."""
    a, b = crand(16, 300, seed=1).to("tpu"), crand(300, 8, seed=2).to("tpu")
    with torch.tpu.precision(precision):
        got = (a @ b).cpu()
        ar, ai, br, bi = a.real.contiguous(), a.imag.contiguous(), b.real.contiguous(), b.imag.contiguous()
        want = torch.complex(ar @ br - ai @ bi, ar @ bi + ai @ br).cpu()
    torch.testing.assert_close(got, want, atol=0, rtol=0)
    err = (got.to(torch.complex128) - a.cpu().to(torch.complex128) @ b.cpu().to(torch.complex128)).abs().max()
    assert (err > 1e-3) == (precision == "default"), err


def test_complex_division_is_scaled():
    """c10's division scales by the larger part: no overflow where |b|^2 overflows float."""
    a = torch.tensor([complex(1e30, 1e30), 1 + 1j], dtype=C64)
    b = torch.tensor([complex(2e30, -1e30), complex(0, 0)], dtype=C64)
    got = (a.to("tpu") / b.to("tpu")).cpu()
    assert cmath.isclose(complex(got[0]), (1e30 + 1e30j) / (2e30 - 1e30j), rel_tol=1e-6)
    torch.testing.assert_close(got, a / b, equal_nan=True)
