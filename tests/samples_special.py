"""Samples for the special-function kernels (kernels/special.c): gamma family, Bessel and
Airy functions, error-function relatives, incomplete gamma, zeta, orthogonal polynomials.
Functional (with gradients where PyTorch has a derivative), out=, in-place, integer inputs
and special values (nan, infinities, zeros, poles)."""
import torch

from samples import FLOATS, INTS, make, register

F64 = (torch.float64,)
FULL = (torch.float32,) + F64  # ops CPU has no float16/bfloat16 kernel for
SHAPE = (4, 6)
aten = torch.ops.aten


def special_values(dtype):
    vals = [float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 0.5, 1.5, 2.5, -0.5, -2.5, 1.0, -1.0,
            3.7, -3.7, 1e-3, 40.0]
    return [torch.tensor(vals, dtype=torch.float64).to(dtype).reshape(4, 4)]


def rand(lo, hi, shapes=(SHAPE,)):
    return lambda dt: [make(s, dt, lo, hi, seed=i) for i, s in enumerate(shapes)]


def empty_out(x):
    return torch.empty(0, dtype=x.dtype if x.dtype.is_floating_point else torch.float32, device=x.device)


# name, float dtypes, domain, differentiable ("f32": CPU's backward has no half kernel), in-place
# overload
UNARY = [
    ("lgamma", FLOATS, (0.2, 4), True, "lgamma_"),
    ("digamma", FLOATS, (0.2, 4), True, "digamma_"),
    ("sinc", FLOATS, (-3, 3), True, "sinc_"),
    ("i0", FLOATS, (-3, 3), True, "i0_"),
    ("special_i0e", FLOATS, (-9, 9), True, None),
    ("special_i1", FLOATS, (-9, 9), "f32", None),
    ("special_i1e", FLOATS, (-9, 9), "f32", None),
    ("special_entr", FLOATS, (0.05, 3), True, None),
    ("special_erfcx", FULL, (-3, 10), True, None),
    ("special_ndtri", FULL, (0.02, 0.98), True, None),
    ("special_log_ndtr", FULL, (-5, 3), True, None),
    ("special_airy_ai", FULL, (-6, 4), False, None),
    ("special_bessel_j0", FULL, (-12, 12), False, None),
    ("special_bessel_j1", FULL, (-12, 12), False, None),
    ("special_bessel_y0", FULL, (0.1, 12), False, None),
    ("special_bessel_y1", FULL, (0.1, 12), False, None),
    ("special_modified_bessel_i0", FULL, (-9, 9), False, None),
    ("special_modified_bessel_i1", FULL, (-9, 9), False, None),
    ("special_modified_bessel_k0", FULL, (0.1, 9), False, None),
    ("special_modified_bessel_k1", FULL, (0.1, 9), False, None),
    ("special_scaled_modified_bessel_k0", FULL, (0.1, 9), False, None),
    ("special_scaled_modified_bessel_k1", FULL, (0.1, 9), False, None),
    ("special_spherical_bessel_j0", FULL, (-12, 12), False, None),
]
for name, dts, (lo, hi), grad, inplace in UNARY:
    op = getattr(aten, name)
    if grad == "f32":
        register(name, op.default, rand(lo, hi), dtypes=FULL, grad=True)
        register(name, op.default, rand(lo, hi), dtypes=dts, grad=False, name=f"{name} forward")
    else:
        register(name, op.default, rand(lo, hi), dtypes=dts + F64, grad=grad)
    register(name, op.default, special_values, dtypes=dts, grad=False, name=f"{name} special values")
    register(name, op.default, rand(-3, 9), dtypes=INTS + (torch.bool,), grad=False, name=f"{name} integer input")
    register(name + ".out", lambda x, _o=op: _o.out(x, out=empty_out(x)), rand(lo, hi), dtypes=dts, grad=False)
    if inplace:
        register(inplace, lambda x, _n=inplace: getattr(x, _n)(), rand(lo, hi), dtypes=dts, grad=False)

# Negative arguments: forward only (near the poles CPU's float32 trigamma, the gradient of
# digamma, loses digits that the double evaluation here keeps).
for name in ("lgamma", "digamma"):
    register(name, getattr(torch, name), rand(-3, 0), dtypes=FLOATS + F64, grad=False, name=f"{name} negative")
for n in (0, 1, 2, 3):
    register("polygamma", lambda x, _n=n: torch.polygamma(_n, x), rand(0.2, 4), dtypes=FLOATS + F64,
             name=f"polygamma n={n}")
register("polygamma", lambda x: torch.polygamma(2, x), special_values, dtypes=FLOATS, grad=False,
         name="polygamma special values")
register("polygamma", lambda x: torch.polygamma(1, x), rand(0, 9), dtypes=INTS, grad=False,
         name="polygamma integer input")
register("polygamma.out", lambda x: torch.polygamma(3, x, out=empty_out(x)), rand(0.2, 4), dtypes=FLOATS, grad=False)
register("polygamma_", lambda x: x.polygamma_(2), rand(0.2, 4), dtypes=FLOATS, grad=False)
register("lgamma", lambda x: torch.mvlgamma(x, 3), rand(1.5, 5), dtypes=FLOATS + F64, name="mvlgamma")


def pair(lo, hi, lo2, hi2, dt2=None):
    return lambda dt: [make(SHAPE, dt, lo, hi, seed=0), make(SHAPE, dt2 or dt, lo2, hi2, seed=1)]


# name, float dtypes, x domain, y domain, differentiable in x, Scalar-overload prefixes
BINARY = [
    ("special_xlog1py", FLOATS, (-3, 3), (-0.9, 4), True, ("self", "other")),
    ("special_zeta", FULL, (1.5, 5), (0.5, 4), False, ("self", "other")),
]
POLY = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
        "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
        "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
        "laguerre_polynomial_l", "legendre_polynomial_p"]
BINARY += [(f"special_{p}", FULL, (-1, 1), (-1, 9), False, ("x", "n")) for p in POLY]
for name, dts, (lo, hi), (lo2, hi2), grad, (a, b) in BINARY:
    op = getattr(aten, name)
    is_poly = a == "x"
    ys = pair(lo, hi, lo2, hi2)
    if is_poly:  # degrees are whole numbers
        ys = lambda dt, _lo=lo, _hi=hi, _lo2=lo2, _hi2=hi2: [make(SHAPE, dt, _lo, _hi), make(SHAPE, dt, _lo2, _hi2, seed=1).round()]
    register(name, op.default, ys, dtypes=dts + F64, grad=grad)
    if not is_poly:  # CPU's u/v/w/... recurrences return uninitialised memory for a NaN x
        register(name, op.default, lambda dt: special_values(dt) * 2, dtypes=dts, grad=False,
                 name=f"{name} special values")
    register(name, op.default, pair(0, 5, 1, 6), dtypes=INTS, grad=False, name=f"{name} integer inputs")
    register(name + ".out", lambda x, y, _o=op: _o.out(x, y, out=torch.empty_like(x)), ys, dtypes=dts, grad=False)
    sx, sy = (0.5, 3) if is_poly else (2.5, 1.5)
    register(f"{name}.{a}_scalar", lambda y, _o=op, _a=a, _s=sx: getattr(_o, f"{_a}_scalar")(_s, y), lambda dt: ys(dt)[1:],
             dtypes=dts, grad=False)
    register(f"{name}.{a}_scalar_out", lambda y, _o=op, _a=a, _s=sx: getattr(_o, f"{_a}_scalar_out")(
        _s, y, out=torch.empty_like(y)), lambda dt: ys(dt)[1:], dtypes=dts, grad=False)
    register(f"{name}.{b}_scalar", lambda x, _o=op, _b=b, _s=sy: getattr(_o, f"{_b}_scalar")(x, _s), lambda dt: ys(dt)[:1],
             dtypes=dts, grad=False)
    register(f"{name}.{b}_scalar_out", lambda x, _o=op, _b=b, _s=sy: getattr(_o, f"{_b}_scalar_out")(
        x, _s, out=torch.empty_like(x)), lambda dt: ys(dt)[:1], dtypes=dts, grad=False)

for name in ("igamma", "igammac"):
    f = getattr(torch, name)
    register(name, f, pair(0.5, 4, 0.1, 5), dtypes=FLOATS + F64, grad=False)
    # PyTorch differentiates igamma in x only: a is a constant made on x's device
    register(name, lambda x, _f=f: _f(torch.full_like(x, 1.7), x), rand(0.1, 5), dtypes=FLOATS + F64,
             name=f"{name} grad")
    register(name, f, lambda dt: [special_values(dt)[0].abs(), special_values(dt)[0].t().abs()], dtypes=FLOATS,
             grad=False, name=f"{name} special values")
    register(name + "_", lambda a, x, _n=name: getattr(a, _n + "_")(x), pair(0.5, 4, 0.1, 5), dtypes=FLOATS, grad=False)
    register(name + ".out", lambda a, x, _f=f: _f(a, x, out=torch.empty_like(a)), pair(0.5, 4, 0.1, 5), dtypes=FLOATS,
             grad=False)
