"""Samples for the elementwise kernels: unary math, binary arithmetic, comparisons,
logical/bitwise ops, where/masked_fill/clamp, pointwise ternaries and activations.

Every op gets a functional sample (with gradients where the op is differentiable), an
in-place sample and an out= sample; special values (nan, inf, -0.0, ties) get their own."""
import torch

from samples import ALL, FLOATS, INTS, NUMERIC, make, register

F64 = (torch.float64,)
SHAPE = (4, 6)


def special(dtype):
    """nan, infinities, signed zeros, halves (rounding ties) and ordinary values."""
    vals = [float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 0.5, 1.5, 2.5, -0.5, -2.5, 1.0, -1.0,
            3.7, -3.7, 1e-3, 40.0]
    return torch.tensor(vals, dtype=torch.float64).to(dtype).reshape(4, 4)


def rand(low=None, high=None, shape=SHAPE, seed=0):
    return lambda dt: [make(shape, dt, low, high, seed)]


def out_like(dtype):
    """out= callable: an empty tensor of `dtype` (None: the input's dtype) on x's device."""
    return lambda x: torch.empty(0, dtype=dtype or x.dtype, device=x.device)


def unary(name, dtypes=FLOATS, low=None, high=None, grad=True, inplace=True, out=True,
          float_out=False, bool_out=False, atol=None, rtol=None, kw=None, specials=True):
    """Functional, in-place and out= samples of torch.<name>(x, **kw). float_out: integer
    inputs give float32; bool_out: the result is bool."""
    kw = kw or {}
    fn = getattr(torch, name)
    inp = rand(low, high)
    register(name, lambda x: fn(x, **kw), inp, dtypes=dtypes, grad=grad, atol=atol, rtol=rtol)
    fdt = tuple(d for d in dtypes if d.is_floating_point)
    if specials and fdt:
        register(name, lambda x: fn(x, **kw), lambda dt: [special(dt)], dtypes=fdt, grad=False,
                 atol=atol, rtol=rtol, name=f"{name} special values")
    if inplace:
        register(name + "_", lambda x: getattr(x, name + "_")(**kw), inp,
                 dtypes=fdt if (float_out or bool_out) else dtypes, grad=False, atol=atol, rtol=rtol)
    if out:
        def out_fn(x):
            odt = torch.bool if bool_out else (torch.float32 if float_out and not x.dtype.is_floating_point else None)
            f = getattr(torch.ops.aten, name).out if name in ("isnan", "isinf", "relu") else fn  # no out= in Python
            return f(x, **kw, out=out_like(odt)(x))
        register(name + ".out", out_fn, inp, dtypes=dtypes, grad=False, atol=atol, rtol=rtol)


# ---------------------------------------------------------------- unary, ints promote to float
for name, lo, hi in [("exp", None, None), ("exp2", None, None), ("expm1", None, None),
                     ("log", 0.1, 5), ("log2", 0.1, 5), ("log10", 0.1, 5), ("log1p", -0.9, 5),
                     ("sqrt", 0.1, 5), ("rsqrt", 0.2, 5), ("sin", None, None), ("cos", None, None),
                     ("tan", -1.2, 1.2), ("asin", -0.9, 0.9), ("acos", -0.9, 0.9), ("atan", None, None),
                     ("sinh", None, None), ("cosh", None, None), ("tanh", None, None),
                     ("asinh", None, None), ("acosh", 1.2, 5), ("atanh", -0.9, 0.9),
                     ("sigmoid", None, None), ("reciprocal", 0.2, 3), ("erf", None, None),
                     ("erfc", None, None), ("erfinv", -0.9, 0.9)]:
    ilo = 1 if lo is not None and lo > 0 else (0 if lo is not None else None)
    ihi = 2 if hi is not None and hi < 2 else hi
    unary(name, FLOATS + F64, lo, hi, float_out=True)
    if name not in ("asin", "acos", "atanh", "erfinv", "tan"):  # integer domain too narrow
        register(name, lambda x, f=getattr(torch, name): f(x), rand(ilo, ihi), dtypes=INTS + (torch.bool,),
                 grad=False, name=f"{name} integer input")
unary("logit", FLOATS, 0.05, 0.95, float_out=True)
unary("logit", FLOATS, 0.0, 1.0, kw=dict(eps=0.2), float_out=True, specials=False)
register("logit_backward.grad_input",
         lambda g, x: torch.ops.aten.logit_backward.grad_input(g, x, 0.2, grad_input=torch.empty_like(x)),
         lambda dt: [make(SHAPE, dt, seed=1), make(SHAPE, dt, 0, 1)], dtypes=FLOATS, grad=False)

# ---------------------------------------------------------------- unary, same dtype
for name, dts in [("neg", NUMERIC), ("abs", NUMERIC), ("sign", ALL), ("floor", NUMERIC),
                  ("ceil", NUMERIC), ("trunc", NUMERIC), ("round", NUMERIC), ("frac", FLOATS),
                  ("relu", NUMERIC)]:
    unary(name, dts + F64)
unary("sgn", ALL + F64, grad=False)  # its backward needs _efficientzerotensor
unary("angle", FLOATS + F64, inplace=False, float_out=True)  # pi for negatives, 0 otherwise, nan kept
register("angle", torch.angle, rand(), dtypes=INTS + (torch.bool,), grad=False, name="angle integer input")
register("round.decimals", lambda x: torch.round(x, decimals=1), rand(), dtypes=FLOATS)
register("round.decimals", lambda x: torch.round(x * 100, decimals=-1), rand(), dtypes=(torch.float32,),
         name="round negative decimals")
register("round_.decimals", lambda x: x.round_(decimals=2), rand(), dtypes=FLOATS, grad=False)
register("round.decimals_out", lambda x: torch.round(x, decimals=1, out=torch.empty_like(x)), rand(),
         dtypes=FLOATS, grad=False)
unary("nan_to_num", NUMERIC + F64)
register("nan_to_num", lambda x: torch.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-2.0),
         lambda dt: [special(dt)], dtypes=FLOATS, grad=False, name="nan_to_num explicit")
unary("bitwise_not", INTS + (torch.bool,), grad=False, specials=False)
register("frexp.Tensor", torch.frexp, rand(), dtypes=FLOATS + F64)
register("frexp.Tensor", torch.frexp, lambda dt: [special(dt)], dtypes=FLOATS, grad=False, name="frexp special")
register("frexp.Tensor", torch.frexp, lambda dt: [torch.tensor([1e-30, 6e-8, 3e-5, 65504.0]).to(dt)], dtypes=FLOATS,
         grad=False, name="frexp tiny and huge")
register("frexp.Tensor_out", lambda x: torch.frexp(x, out=(torch.empty_like(x), torch.empty(0, dtype=torch.int32,
                                                                                           device=x.device))),
         rand(), dtypes=FLOATS, grad=False)

# ---------------------------------------------------------------- unary, bool result
for name in ("isnan", "isinf", "isposinf", "isneginf", "signbit"):
    unary(name, NUMERIC, grad=False, inplace=False, bool_out=True)
unary("logical_not", ALL, grad=False, bool_out=True)


# ---------------------------------------------------------------- binary
def two(lo=None, hi=None, shape2=SHAPE, lo2=None, hi2=None):
    return lambda dt: [make(SHAPE, dt, lo, hi, seed=0), make(shape2, dt, lo2, hi2, seed=1)]


def binary(ops, dtypes, kw=None, lo=None, hi=None, lo2=None, hi2=None, grad=True, inplace=True,
           out_dtype=None, scalar=2.5, int_scalar=3, atol=None, rtol=None, inplace_dtypes=None,
           out_name=".out", scalar_op=""):
    """torch.<base>(a, b, **kw) for ops = "base.Overload": same-shape tensors (with grad),
    broadcast, 0-dim tpu tensor, Python float and int scalars, in-place and out= samples;
    scalar_op: the Scalar overload, called through torch.ops with int_scalar."""
    kw = kw or {}
    base, _, ov = ops.partition(".")
    fn = getattr(torch, base)
    tol = dict(atol=atol, rtol=rtol)
    register(ops, lambda a, b: fn(a, b, **kw), two(lo, hi, SHAPE, lo2, hi2), dtypes=dtypes, grad=grad, **tol)
    register(ops, lambda a, b: fn(a, b, **kw), two(lo, hi, (6,), lo2, hi2), dtypes=dtypes, grad=False,
             name=f"{ops} broadcast", **tol)
    register(ops, lambda a, b: fn(a, b, **kw), two(lo, hi, (), lo2, hi2), dtypes=dtypes, grad=False,
             name=f"{ops} 0-dim tpu tensor", **tol)
    for sc in (scalar, int_scalar):
        if sc is not None:
            register(ops, lambda a, _s=sc: fn(a, _s, **kw), rand(lo, hi), dtypes=dtypes, grad=grad,
                     name=f"{ops} python {type(sc).__name__}", **tol)
    if scalar_op:
        sop = getattr(getattr(torch.ops.aten, base), scalar_op.split(".")[1])
        register(scalar_op, lambda a: sop(a, int_scalar, **kw), rand(lo, hi), dtypes=dtypes, grad=grad, **tol)
    if inplace:
        register(f"{base}_.{ov}" if ov else base + "_", lambda a, b: getattr(a, base + "_")(b, **kw),
                 two(lo, hi, (6,), lo2, hi2), dtypes=inplace_dtypes or dtypes, grad=False, **tol)

    def out_fn(a, b):
        return fn(a, b, **kw, out=torch.empty(0, dtype=out_dtype(a) if out_dtype else a.dtype, device=a.device))
    register(base + out_name, out_fn, two(lo, hi, SHAPE, lo2, hi2), dtypes=dtypes, grad=False, **tol)


FLOAT_OF = lambda a: a.dtype if a.dtype.is_floating_point else torch.float32
BOOL = lambda a: torch.bool

binary("sub.Tensor", NUMERIC + F64, dict(alpha=2), scalar_op="sub.Scalar")
binary("sub.Tensor", NUMERIC, inplace=False)
register("sub_.Scalar", lambda a: torch.ops.aten.sub_.Scalar(a, 3, alpha=2), rand(), dtypes=NUMERIC, grad=False)
register("sub.Scalar_out", lambda a: torch.ops.aten.sub.Scalar_out(a, 3, out=torch.empty_like(a)), rand(),
         dtypes=NUMERIC, grad=False)
binary("mul.Tensor", ALL + F64, scalar_op="mul.Scalar")
register("mul_.Scalar", lambda a: torch.ops.aten.mul_.Scalar(a, 3), rand(), dtypes=NUMERIC, grad=False)
register("mul.Scalar_out", lambda a: torch.ops.aten.mul.Scalar_out(a, 3, out=torch.empty_like(a)), rand(),
         dtypes=NUMERIC, grad=False)
register("mul.Tensor", lambda a: a * 1000, rand(), dtypes=INTS, grad=False, name="mul wraps")

binary("div.Tensor", NUMERIC + F64, scalar_op="div.Scalar", lo2=0.5, hi2=3, out_dtype=FLOAT_OF,
       inplace_dtypes=FLOATS)
register("div_.Scalar", lambda a: torch.ops.aten.div_.Scalar(a, 3), rand(), dtypes=FLOATS, grad=False)
register("div.Scalar_out", lambda a: torch.ops.aten.div.Scalar_out(a, 3, out=torch.empty(0, dtype=FLOAT_OF(a), device=a.device)),
         rand(), dtypes=NUMERIC, grad=False)
for mode in ("trunc", "floor"):
    binary("div.Tensor_mode", NUMERIC + F64, dict(rounding_mode=mode), lo2=1, hi2=4, out_name=".out_mode",
           scalar=-2.5, int_scalar=-3)
    register("div.Scalar_mode", lambda a, _m=mode: torch.ops.aten.div.Scalar_mode(a, -3, rounding_mode=_m), rand(),
             dtypes=NUMERIC, name=f"div.Scalar_mode {mode}")
    register("div_.Scalar_mode", lambda a, _m=mode: torch.ops.aten.div_.Scalar_mode(a, 3, rounding_mode=_m), rand(),
             dtypes=NUMERIC, grad=False, name=f"div_.Scalar_mode {mode}")
    register("div.Scalar_mode_out", lambda a, _m=mode: torch.ops.aten.div.Scalar_mode_out(
        a, 2, rounding_mode=_m, out=torch.empty_like(a)), rand(), dtypes=NUMERIC, grad=False,
        name=f"div.Scalar_mode_out {mode}")
    register("div.Tensor_mode", lambda a, b, _m=mode: torch.div(a, b, rounding_mode=_m),
             lambda dt: [special(dt), special(dt).flip(0) * -1], dtypes=FLOATS, grad=False, name=f"div {mode} special")
register("div.Tensor_mode", lambda a, b: torch.div(a, b, rounding_mode=None), two(lo2=0.5, hi2=3), dtypes=FLOATS,
         name="div mode None")
register("div.Tensor", lambda a, b: a / b, lambda dt: [special(dt), special(dt).t()], dtypes=FLOATS, grad=False,
         name="div special")

binary("floor_divide", NUMERIC + F64, scalar_op="floor_divide.Scalar", lo2=1, hi2=4, scalar=-2.5, int_scalar=-3,
       grad=False, inplace=False)
register("floor_divide", torch.floor_divide, lambda dt: [make(SHAPE, dt, -9, 9), -make(SHAPE, dt, 1, 4, seed=3)],
         dtypes=NUMERIC, grad=False, name="floor_divide negative divisor")
register("floor_divide_.Tensor", lambda a, b: a.floor_divide_(b), two(lo2=1, hi2=4), dtypes=NUMERIC, grad=False)
register("floor_divide_.Scalar", lambda a: a.floor_divide_(-3), rand(), dtypes=NUMERIC, grad=False)
register("floor_divide.Scalar_out", lambda a: torch.ops.aten.floor_divide.Scalar_out(a, 3, out=torch.empty_like(a)),
         rand(), dtypes=NUMERIC, grad=False)

binary("pow.Tensor_Tensor", FLOATS + F64, lo=0.2, hi=3, lo2=-2, hi2=2,
       out_name=".Tensor_Tensor_out", inplace=False)
register("pow_.Tensor", lambda a, b: a.pow_(b), two(0.2, 3, SHAPE, -2, 2), dtypes=FLOATS, grad=False)
register("pow.Tensor_Tensor", torch.pow, two(-5, 5, SHAPE, -3, 4), dtypes=INTS, grad=False, name="pow ints")
register("pow.Tensor_Scalar", lambda a: torch.pow(a, 3), rand(-5, 5), dtypes=NUMERIC, name="pow cube")
register("pow.Tensor_Scalar", lambda a: torch.pow(a, 0.5), rand(0.1, 5), dtypes=FLOATS, name="pow sqrt")
register("pow.Tensor_Scalar", lambda a: torch.pow(a, -2), rand(0.5, 5), dtypes=FLOATS, name="pow -2")
register("pow.Tensor_Scalar", lambda a: torch.pow(a, 2.5), rand(1, 5), dtypes=INTS, grad=False, name="pow int^float")
register("pow_.Scalar", lambda a: a.pow_(2), rand(), dtypes=NUMERIC, grad=False)
register("pow.Tensor_Scalar_out", lambda a: torch.pow(a, 2, out=torch.empty_like(a)), rand(), dtypes=NUMERIC, grad=False)
register("pow.Scalar", lambda b: torch.pow(2.0, b), rand(-2, 3), dtypes=FLOATS)
register("pow.Scalar", lambda b: torch.pow(2, b), rand(0, 5), dtypes=INTS, grad=False, name="pow.Scalar ints")
register("pow.Scalar_out", lambda b: torch.pow(3, b, out=torch.empty_like(b)), rand(0, 4), dtypes=NUMERIC, grad=False)

for name in ("maximum", "minimum"):
    binary(name, NUMERIC + F64, scalar=None, int_scalar=None, inplace=False)
    register(name, getattr(torch, name), lambda dt: [special(dt), special(dt).t()], dtypes=FLOATS, grad=False,
             name=f"{name} nan")

for name in ("remainder", "fmod"):
    binary(f"{name}.Tensor", NUMERIC + F64, scalar_op=f"{name}.Scalar", lo2=1, hi2=5,
           out_name=".Tensor_out", scalar=-2.5, int_scalar=-3, grad=False)
    register(f"{name}.Tensor", getattr(torch, name), lambda dt: [make(SHAPE, dt, -9, 9), -make(SHAPE, dt, 1, 4, seed=3)],
             dtypes=NUMERIC, grad=False, name=f"{name} negative divisor")
    register(f"{name}_.Scalar", lambda a, _n=name: getattr(a, _n + "_")(3), rand(), dtypes=NUMERIC, grad=False)
    register(f"{name}.Scalar_out", lambda a, _n=name: getattr(torch, _n)(a, -3, out=torch.empty_like(a)), rand(),
             dtypes=NUMERIC, grad=False)
register("remainder.Scalar_Tensor", lambda b: torch.remainder(7, b), rand(1, 5), dtypes=NUMERIC, grad=False)
register("remainder.Scalar_Tensor_out", lambda b: torch.ops.aten.remainder.Scalar_Tensor_out(7, b, out=torch.empty_like(b)),
         rand(1, 5), dtypes=NUMERIC, grad=False)

for name in ("atan2", "hypot"):
    binary(name, FLOATS + F64, scalar=None, int_scalar=None, inplace_dtypes=FLOATS)
binary("copysign.Tensor", FLOATS + F64, scalar_op="copysign.Scalar", scalar=-2.5, int_scalar=-2)
register("copysign_.Scalar", lambda a: a.copysign_(-1.0), rand(), dtypes=FLOATS, grad=False)
register("copysign.Scalar_out", lambda a: torch.copysign(a, -1.0, out=torch.empty_like(a)), rand(), dtypes=FLOATS,
         grad=False)
register("atan2", torch.atan2, two(), dtypes=INTS, grad=False, name="atan2 ints")
binary("xlogy.Tensor", FLOATS + F64, scalar_op="xlogy.Scalar_Other", lo2=0.1, hi2=4, int_scalar=2,
       out_name=".OutTensor")
register("xlogy.Tensor", torch.xlogy, lambda dt: [special(dt), special(dt).t().abs()], dtypes=FLOATS, grad=False,
         name="xlogy special")
register("xlogy_.Scalar_Other", lambda a: a.xlogy_(2.0), rand(), dtypes=FLOATS, grad=False)
register("xlogy.OutScalar_Other", lambda a: torch.xlogy(a, 2.0, out=torch.empty_like(a)), rand(), dtypes=FLOATS, grad=False)
register("xlogy.Scalar_Self", lambda b: torch.xlogy(2.0, b), rand(0.1, 3), dtypes=FLOATS)
register("xlogy.OutScalar_Self", lambda b: torch.xlogy(2.0, b, out=torch.empty_like(b)), rand(0.1, 3), dtypes=FLOATS,
         grad=False)

for name in ("fmax", "fmin"):
    binary(name, NUMERIC + F64, scalar=None, int_scalar=None, inplace=False)
    register(name, getattr(torch, name), lambda dt: [special(dt), special(dt).t()], dtypes=FLOATS, grad=False,
             name=f"{name} nan")
for name in ("logaddexp", "logaddexp2"):
    binary(name, FLOATS + F64, scalar=None, int_scalar=None, inplace=False)
    register(name, getattr(torch, name), lambda dt: [special(dt), special(dt).t()], dtypes=FLOATS, grad=False,
             name=f"{name} special")
binary("heaviside", ALL + F64, grad=False, scalar=None, int_scalar=None, lo=-2, hi=2)
register("heaviside", torch.heaviside, lambda dt: [special(dt), special(dt).t()], dtypes=FLOATS, grad=False,
         name="heaviside special")
for name in ("gcd", "lcm"):
    binary(name, INTS, grad=False, scalar=None, int_scalar=None, lo=-20, hi=20, lo2=-20, hi2=20)
register("floor_divide", torch.floor_divide, lambda dt: [special(dt), special(dt).flip(0) * -1], dtypes=FLOATS,
         grad=False, name="floor_divide special")


def shift_counts(dt):
    """Values and counts, counts past the width and negative ones included."""
    return [make(SHAPE, dt, -100, 100), make(SHAPE, torch.int64, -3, 70, seed=1).to(dt)]


INT_NO_U8 = tuple(d for d in INTS if d != torch.uint8)
for side, a in (("left", "l"), ("right", "r")):
    name = f"bitwise_{side}_shift"
    f = getattr(torch, name)
    register(f"{name}.Tensor", f, shift_counts, dtypes=INT_NO_U8, grad=False)
    register(f"{name}.Tensor", f, two(0, 200, SHAPE, 0, 12), dtypes=(torch.uint8,), grad=False, name=f"{name} uint8")
    register(f"{name}_.Tensor", lambda x, n, _n=name: getattr(x, _n + "_")(n), shift_counts, dtypes=INT_NO_U8,
             grad=False)
    register(f"{name}.Tensor_out", lambda x, n, _f=f: _f(x, n, out=torch.empty_like(x)), shift_counts,
             dtypes=INT_NO_U8, grad=False)
    register(f"{name}.Tensor_Scalar", lambda x, _f=f: _f(x, 3), rand(), dtypes=INTS, grad=False)
    register(f"{name}_.Tensor_Scalar", lambda x, _n=name: getattr(x, _n + "_")(2), rand(), dtypes=INTS, grad=False)
    register(f"{name}.Tensor_Scalar_out", lambda x, _f=f: _f(x, 2, out=torch.empty_like(x)), rand(), dtypes=INTS,
             grad=False)
    register(f"{name}.Scalar_Tensor", lambda n, _f=f: _f(-77, n), rand(0, 9), dtypes=INTS, grad=False)
    register(f"{name}.Scalar_Tensor_out", lambda n, _n=name: getattr(torch.ops.aten, _n).Scalar_Tensor_out(
        -77, n, out=torch.empty_like(n)), rand(0, 9), dtypes=INTS, grad=False)
    op = getattr(torch.ops.aten, f"__{a}shift__")
    iop = getattr(torch.ops.aten, f"__i{a}shift__")
    register(f"__{a}shift__.Tensor", lambda x, n, _o=op: _o.Tensor(x, n), shift_counts, dtypes=INT_NO_U8, grad=False)
    register(f"__{a}shift__.Scalar", lambda x, _o=op: _o.Scalar(x, 3), rand(), dtypes=INTS, grad=False)
    register(f"__{a}shift__.Tensor_out", lambda x, n, _o=op: _o.Tensor_out(x, n, out=torch.empty_like(x)),
             shift_counts, dtypes=INT_NO_U8, grad=False)
    register(f"__{a}shift__.Scalar_out", lambda x, _o=op: _o.Scalar_out(x, 3, out=torch.empty_like(x)), rand(),
             dtypes=INTS, grad=False)
    register(f"__i{a}shift__.Tensor", lambda x, n, _o=iop: _o.Tensor(x, n), shift_counts, dtypes=INT_NO_U8,
             grad=False)
    register(f"__i{a}shift__.Scalar", lambda x, _o=iop: _o.Scalar(x, 2), rand(), dtypes=INTS, grad=False)

register("rsub.Tensor", lambda a, b: torch.rsub(a, b, alpha=2), two(), dtypes=NUMERIC + F64)
register("rsub.Tensor", lambda a, b: torch.rsub(a, b[0]), two(), dtypes=NUMERIC, grad=False, name="rsub broadcast")
register("rsub.Tensor", lambda a: 2.5 - a, rand(), dtypes=FLOATS, name="rsub python scalar")
register("rsub.Scalar", lambda a: torch.rsub(a, 3, 2), rand(), dtypes=NUMERIC, name="rsub.Scalar")
register("rsub.Tensor_out", lambda a, b: torch.ops.aten.rsub.Tensor_out(a, b, alpha=3, out=torch.empty_like(a)),
         two(), dtypes=NUMERIC, grad=False)
register("rsub.Scalar_out", lambda a: torch.ops.aten.rsub.Scalar_out(a, 4, out=torch.empty_like(a)), rand(),
         dtypes=NUMERIC, grad=False)
binary("nextafter", FLOATS + F64, grad=False, scalar=None, int_scalar=None)
register("nextafter", torch.nextafter, lambda dt: [special(dt), special(dt).t()], dtypes=FLOATS, grad=False,
         name="nextafter special")
register("nextafter", torch.nextafter, lambda dt: [torch.zeros(4, dtype=dt), torch.tensor([1.0, -1.0, 0.0, -0.0]).to(dt)],
         dtypes=FLOATS, grad=False, name="nextafter from zero")


# ---------------------------------------------------------------- comparisons, logical, bitwise
for name in ("eq", "ne", "lt", "le", "gt", "ge"):
    binary(f"{name}.Tensor", ALL + F64, scalar_op=f"{name}.Scalar", grad=False,
           out_dtype=BOOL, out_name=".Tensor_out", lo=-3, hi=3, lo2=-3, hi2=3, scalar=1.5, int_scalar=1)
    register(f"{name}.Tensor", getattr(torch, name), lambda dt: [special(dt), special(dt).t()], dtypes=FLOATS,
             grad=False, name=f"{name} special")
    register(f"{name}_.Scalar", lambda a, _n=name: getattr(a, _n + "_")(1), rand(-3, 3), dtypes=NUMERIC, grad=False)
    register(f"{name}.Scalar_out", lambda a, _n=name: getattr(torch, _n)(a, 1, out=torch.empty(0, dtype=torch.bool, device=a.device)),
             rand(-3, 3), dtypes=NUMERIC, grad=False)
register("eq.Scalar", lambda a: a == -1, rand(), dtypes=(torch.uint8,), grad=False, name="eq uint8 vs -1")
for name in ("logical_and", "logical_or", "logical_xor"):
    binary(name, ALL + F64, grad=False, out_dtype=BOOL, scalar=None, int_scalar=None,
           lo=-1, hi=2, lo2=-1, hi2=2)
for name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    binary(f"{name}.Tensor", INTS + (torch.bool,), scalar_op=f"{name}.Scalar", grad=False,
           out_name=".Tensor_out", scalar=None, int_scalar=6, lo=-50, hi=50, lo2=-50, hi2=50)
    register(f"{name}_.Scalar", lambda a, _n=name: getattr(a, _n + "_")(5), rand(), dtypes=INTS, grad=False)
    register(f"{name}.Scalar_out", lambda a, _n=name: getattr(torch, _n)(a, 5, out=torch.empty_like(a)), rand(),
             dtypes=INTS, grad=False)
    register(f"{name}.Scalar_Tensor", lambda b, _n=name: getattr(torch.ops.aten, _n).Scalar_Tensor(12, b), rand(),
             dtypes=INTS, grad=False)
    register(f"{name}.Scalar_Tensor_out", lambda b, _n=name: getattr(torch.ops.aten, _n).Scalar_Tensor_out(
        12, b, out=torch.empty_like(b)), rand(), dtypes=INTS, grad=False)


# ---------------------------------------------------------------- ternary
def cond_xy(dt):
    return [make(SHAPE, torch.bool, seed=5), make(SHAPE, dt, seed=0), make(SHAPE, dt, seed=1)]


register("where.self", torch.where, cond_xy, dtypes=ALL + F64)
register("where.self", lambda c, a, b: torch.where(c, a, b[0]), cond_xy, dtypes=NUMERIC, grad=False,
         name="where broadcast")
register("where.self", lambda c, a: torch.where(c, a, 0.5), lambda dt: cond_xy(dt)[:2], dtypes=NUMERIC,
         name="where python scalar")
register("where.self", lambda c, a, b: torch.where(c, a.to(torch.int32), b), cond_xy, dtypes=FLOATS, grad=False,
         name="where mixed dtypes")
register("where.self_out", lambda c, a, b: torch.where(c, a, b, out=torch.empty_like(a)), cond_xy, dtypes=ALL,
         grad=False)


def x_mask(dt):
    return [make(SHAPE, dt, seed=0), make(SHAPE, torch.bool, seed=5)]


register("masked_fill.Scalar", lambda x, m: x.masked_fill(m, 2.5), x_mask, dtypes=ALL + F64)
register("masked_fill.Scalar", lambda x, m: x.masked_fill(m[0], -7), x_mask, dtypes=NUMERIC,
         name="masked_fill broadcast mask")
register("masked_fill_.Scalar", lambda x, m: x.masked_fill_(m, -3), x_mask, dtypes=ALL, grad=False)
# CPU 0-dim tensors next to tpu tensors are scalars on the device, as on CUDA
register("masked_fill.Tensor", lambda x, m: x.masked_fill(m, torch.tensor(-2.5)), x_mask, dtypes=FLOATS,
         name="masked_fill CPU scalar value")
register("copysign.Tensor", lambda a: torch.copysign(a, torch.tensor(-1.0)), rand(), dtypes=FLOATS,
         name="copysign CPU scalar")
register("masked_fill.Scalar_out", lambda x, m: torch.ops.aten.masked_fill.Scalar_out(x, m, 1, out=torch.empty_like(x)),
         x_mask, dtypes=ALL, grad=False)
register("masked_fill.Tensor", lambda x, m: x.masked_fill(m, torch.tensor(2.5, device=x.device)), x_mask, dtypes=NUMERIC)
register("masked_fill.Tensor", lambda x, m: x.masked_fill(m, x[0, 0]), x_mask, dtypes=NUMERIC, grad=False,
         name="masked_fill tpu value")
register("masked_fill_.Tensor", lambda x, m: x.masked_fill_(m, torch.tensor(4, device=x.device)), x_mask, dtypes=NUMERIC, grad=False)
register("masked_fill.Tensor_out", lambda x, m: torch.ops.aten.masked_fill.Tensor_out(
    x, m, torch.tensor(4, device=x.device), out=torch.empty_like(x)), x_mask, dtypes=NUMERIC, grad=False)

register("clamp", lambda x: torch.clamp(x, -1, 2), rand(), dtypes=NUMERIC + F64)
register("clamp", lambda x: torch.clamp(x, min=-1.5), rand(), dtypes=NUMERIC, name="clamp min only")
register("clamp", lambda x: torch.clamp(x, max=0.5), rand(), dtypes=FLOATS, name="clamp max only")
register("clamp", lambda x: torch.clamp(x, -1, 2), lambda dt: [special(dt)], dtypes=FLOATS, grad=False,
         name="clamp nan")
register("clamp", lambda x: torch.clamp(x, 2, -1), rand(), dtypes=NUMERIC, name="clamp min > max")
register("clamp_", lambda x: x.clamp_(-1, 2), rand(), dtypes=NUMERIC, grad=False)
register("clamp.out", lambda x: torch.clamp(x, -1, 2, out=torch.empty_like(x)), rand(), dtypes=NUMERIC, grad=False)
register("clamp.Tensor", lambda x, lo, hi: torch.clamp(x, lo, hi + 1),
         lambda dt: [make(SHAPE, dt, seed=0), make(SHAPE, dt, -2, 1, seed=1), make(SHAPE, dt, 0, 2, seed=2)],
         dtypes=NUMERIC)
register("clamp.Tensor", lambda x, lo: torch.clamp(x, min=lo), two(), dtypes=NUMERIC, name="clamp.Tensor min only")
register("clamp.Tensor", lambda x, lo: torch.clamp(x, max=lo), two(shape2=(6,)), dtypes=NUMERIC, grad=False,
         name="clamp.Tensor max only broadcast")
register("clamp.Tensor", lambda x, lo, hi: torch.clamp(x, min=lo, max=hi),
         lambda dt: [special(dt), special(dt).t(), special(dt).flip(0)], dtypes=FLOATS, grad=False, name="clamp.Tensor nan")
register("clamp_.Tensor", lambda x, lo: x.clamp_(lo, lo + 2), two(), dtypes=NUMERIC, grad=False)
register("clamp.Tensor_out", lambda x, lo: torch.clamp(x, lo, lo + 2, out=torch.empty_like(x)), two(),
         dtypes=NUMERIC, grad=False)
for name in ("clamp_min", "clamp_max"):
    f = getattr(torch, name)
    register(name, lambda x, _f=f: _f(x, 0.5), rand(), dtypes=NUMERIC + F64)
    register(name, lambda x, _f=f: _f(x, 0.5), lambda dt: [special(dt)], dtypes=FLOATS, grad=False,
             name=f"{name} nan")
    register(name + "_", lambda x, _n=name: getattr(x, _n + "_")(1), rand(), dtypes=NUMERIC, grad=False)
    register(name + ".out", lambda x, _f=f: _f(x, 1, out=torch.empty_like(x)), rand(), dtypes=NUMERIC, grad=False)
    register(name + ".Tensor", lambda x, b, _f=f: _f(x, b), two(), dtypes=NUMERIC)
    register(name + "_.Tensor", lambda x, b, _n=name: getattr(x, _n + "_")(b), two(), dtypes=NUMERIC, grad=False)
    register(name + ".Tensor_out", lambda x, b, _f=f: _f(x, b, out=torch.empty_like(x)), two(), dtypes=NUMERIC,
             grad=False)


def three(lo3=None, hi3=None):
    return lambda dt: [make(SHAPE, dt, seed=0), make(SHAPE, dt, seed=1), make(SHAPE, dt, lo3, hi3, seed=2)]


register("addcmul", lambda a, b, c: torch.addcmul(a, b, c, value=0.5), three(), dtypes=FLOATS + F64)
register("addcmul", lambda a, b, c: torch.addcmul(a, b, c, value=3), three(), dtypes=INTS, name="addcmul ints")
register("addcmul_", lambda a, b, c: a.addcmul_(b, c, value=2), three(), dtypes=NUMERIC, grad=False)
register("addcmul.out", lambda a, b, c: torch.addcmul(a, b, c, out=torch.empty_like(a)), three(), dtypes=NUMERIC,
         grad=False)
register("addcdiv", lambda a, b, c: torch.addcdiv(a, b, c, value=0.5), three(0.5, 3), dtypes=FLOATS + F64)
register("addcdiv_", lambda a, b, c: a.addcdiv_(b, c, value=-2), three(0.5, 3), dtypes=FLOATS, grad=False)
register("addcdiv.out", lambda a, b, c: torch.addcdiv(a, b, c, out=torch.empty_like(a)), three(0.5, 3),
         dtypes=FLOATS, grad=False)
for w in (0.3, 0.8):
    register("lerp.Scalar", lambda a, b, _w=w: torch.lerp(a, b, _w), two(), dtypes=FLOATS + F64, name=f"lerp {w}")
register("lerp_.Scalar", lambda a, b: a.lerp_(b, 0.7), two(), dtypes=FLOATS, grad=False)
register("lerp.Scalar_out", lambda a, b: torch.lerp(a, b, 0.2, out=torch.empty_like(a)), two(), dtypes=FLOATS,
         grad=False)
register("lerp.Tensor", torch.lerp, three(-0.5, 1.5), dtypes=FLOATS + F64)
register("lerp_.Tensor", lambda a, b, w: a.lerp_(b, w), three(0, 1), dtypes=FLOATS, grad=False)
register("lerp.Tensor_out", lambda a, b, w: torch.lerp(a, b, w, out=torch.empty_like(a)), three(0, 1),
         dtypes=FLOATS, grad=False)

# ---------------------------------------------------------------- activations
F = torch.nn.functional
for name, fn, kws in [("gelu", F.gelu, [{}, dict(approximate="tanh")]),
                      ("silu", F.silu, [{}]), ("mish", F.mish, [{}]),
                      ("leaky_relu", F.leaky_relu, [{}, dict(negative_slope=0.2)]),
                      ("elu", F.elu, [{}, dict(alpha=0.5)]),
                      ("hardtanh", F.hardtanh, [{}, dict(min_val=-0.5, max_val=2.0)]),
                      ("softplus", F.softplus, [{}, dict(beta=2.0, threshold=3.0)]),
                      ("hardswish", F.hardswish, [{}]), ("hardsigmoid", F.hardsigmoid, [{}])]:
    for kw in kws:
        register(name, lambda x, _f=fn, _k=kw: _f(x, **_k), rand(-5, 5), dtypes=FLOATS + F64, name=f"{name} {kw}")
        register(name, lambda x, _f=fn, _k=kw: _f(x, **_k), lambda dt: [special(dt)], dtypes=FLOATS, grad=False,
                 name=f"{name} {kw} special")
    if name != "softplus":
        register(name + "_", lambda x, _n=name: getattr(torch.ops.aten, _n + "_")(x), rand(-5, 5), dtypes=FLOATS,
                 grad=False)
    register(name + ".out", lambda x, _n=name: getattr(torch.ops.aten, _n).out(x, out=torch.empty_like(x)),
             rand(-5, 5), dtypes=FLOATS, grad=False)
register("hardtanh", lambda x: F.hardtanh(x, -2, 3), rand(), dtypes=INTS[:-1], grad=False, name="hardtanh ints")
register("elu", lambda x: F.elu(x, alpha=0.5) if False else torch.ops.aten.elu(x, 0.5, 2.0, 1.5), rand(),
         dtypes=FLOATS, name="elu scale input_scale")
register("elu_backward", lambda x: torch.selu(x), rand(), dtypes=FLOATS, name="selu (elu_backward from input)")
register("elu_backward", lambda x: F.elu(x, inplace=True) if False else F.elu(x.clone(), inplace=True), rand(),
         dtypes=FLOATS, name="elu_ (elu_backward from result)")
register("log_sigmoid_forward log_sigmoid_backward", F.logsigmoid, rand(-5, 5), dtypes=FLOATS + F64)
register("log_sigmoid_forward.output", lambda x: torch.ops.aten.log_sigmoid_forward.output(
    x, output=torch.empty_like(x), buffer=torch.empty_like(x)), rand(), dtypes=FLOATS, grad=False)


def grad_x(dt, lo=-5, hi=5):
    return [make(SHAPE, dt, seed=1), make(SHAPE, dt, lo, hi)]


for op, call in [
        ("gelu_backward.grad_input", lambda g, x: torch.ops.aten.gelu_backward.grad_input(g, x, approximate="tanh", grad_input=torch.empty_like(x))),
        ("silu_backward.grad_input", lambda g, x: torch.ops.aten.silu_backward.grad_input(g, x, grad_input=torch.empty_like(x))),
        ("sigmoid_backward.grad_input", lambda g, x: torch.ops.aten.sigmoid_backward.grad_input(g, x, grad_input=torch.empty_like(x))),
        ("tanh_backward.grad_input", lambda g, x: torch.ops.aten.tanh_backward.grad_input(g, x, grad_input=torch.empty_like(x))),
        ("threshold_backward.grad_input", lambda g, x: torch.ops.aten.threshold_backward.grad_input(g, x, 0.5, grad_input=torch.empty_like(x))),
        ("leaky_relu_backward.grad_input", lambda g, x: torch.ops.aten.leaky_relu_backward.grad_input(g, x, 0.1, False, grad_input=torch.empty_like(x))),
        ("elu_backward.grad_input", lambda g, x: torch.ops.aten.elu_backward.grad_input(g, 1.0, 1.0, 1.0, False, x, grad_input=torch.empty_like(x))),
        ("hardtanh_backward.grad_input", lambda g, x: torch.ops.aten.hardtanh_backward.grad_input(g, x, -1, 1, grad_input=torch.empty_like(x))),
        ("softplus_backward.grad_input", lambda g, x: torch.ops.aten.softplus_backward.grad_input(g, x, 1, 20, grad_input=torch.empty_like(x))),
        ("hardswish_backward.out", lambda g, x: torch.ops.aten.hardswish_backward.out(g, x, out=torch.empty_like(x))),
        ("hardsigmoid_backward.grad_input", lambda g, x: torch.ops.aten.hardsigmoid_backward.grad_input(g, x, grad_input=torch.empty_like(x))),
        ("log_sigmoid_backward.grad_input", lambda g, x: torch.ops.aten.log_sigmoid_backward.grad_input(g, x, torch.exp(-x.abs()), grad_input=torch.empty_like(x)))]:
    register(op, call, grad_x, dtypes=FLOATS, grad=False)
    # infinities, signed zeros and the thresholds themselves (hardswish's +-3 gave CPU's other
    # side). NaN: test_upstream_regressions.py (CPU's vector and scalar loops disagree)
    register(op, call, lambda dt: [make((4, 5), dt, seed=1), torch.cat([special(dt).flatten()[1:], torch.tensor(
        [3.0, -3.0, 0.25, -0.25, 3.0], dtype=dt)]).reshape(4, 5)], dtypes=FLOATS, grad=False, name=f"{op} special")
for op, fn in [("leaky_relu_backward", F.leaky_relu), ("hardtanh_backward", F.hardtanh),
               ("softplus_backward", F.softplus), ("hardswish_backward", F.hardswish),
               ("hardsigmoid_backward", F.hardsigmoid)]:
    register(op, fn, rand(-5, 5), dtypes=FLOATS, name=f"{op} via autograd")
register("logit_backward", lambda x: torch.logit(x, eps=0.1), rand(0, 1), dtypes=FLOATS, name="logit backward")
register("logit_backward", torch.logit, rand(0.05, 0.95), dtypes=FLOATS, name="logit backward no eps")
register("threshold_backward relu", torch.relu, rand(), dtypes=FLOATS, name="relu backward")
register("threshold_backward", lambda g, x: torch.ops.aten.threshold_backward(g, x, 1), grad_x, dtypes=INTS,
         grad=False, name="threshold_backward ints")
register("gelu_backward sigmoid_backward tanh_backward", lambda x: torch.tanh(torch.sigmoid(F.gelu(x))), rand(),
         dtypes=FLOATS, name="chained backward ops")
register("silu_backward", F.silu, rand(), dtypes=FLOATS, name="silu backward")
register("mish_backward", F.mish, rand(-5, 5), dtypes=FLOATS + F64, name="mish backward")
register("mish_backward", lambda g, x: torch.ops.aten.mish_backward(g, x), grad_x, dtypes=FLOATS + F64, grad=False,
         name="mish_backward direct")
