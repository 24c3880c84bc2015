"""Samples for the foreach kernels (_foreach_*) and the fused Adam/AdamW step. Every sample
works on lists of three tensors of different shapes; the harness passes tensors one by one,
so the sample functions regroup them into lists (`_lists`)."""
import torch

from samples import ALL, FLOATS, INTS, NUMERIC, make, register

SHAPES = [(3, 4), (5,), (2, 3, 2)]
N = len(SHAPES)
SIGNED = FLOATS + (torch.int64, torch.int32, torch.int16, torch.int8)


def _inputs(k, low=None, high=None, extra=()):
    """k lists of len(SHAPES) random tensors (list j drawn from [low[j], high[j]) when given
    as tuples), then `extra(dtype)` values."""
    def inputs(dtype):
        r = []
        for j in range(k):
            lo = low[j] if isinstance(low, tuple) else low
            hi = high[j] if isinstance(high, tuple) else high
            r += [make(s, dtype, lo, hi, seed=17 * j + i) for i, s in enumerate(SHAPES)]
        return r + list(extra(dtype) if callable(extra) else extra)
    return inputs


def _lists(args, k):
    return [list(args[j * N:(j + 1) * N]) for j in range(k)] + list(args[k * N:])


def _fe(name, ov, fn_args, inputs, dtypes, inplace=True, functional=True, **kw):
    """Register the functional and in-place overloads of one foreach op: fn_args(lists and
    extra inputs) -> the op's arguments, a trailing dict being its keyword arguments."""
    fun = getattr(torch.ops.aten, f"_foreach_{name}")
    inp = getattr(torch.ops.aten, f"_foreach_{name}_")
    ovn = ov or "default"
    full = f"_foreach_{name}" + (f".{ov}" if ov else "")
    full_ = f"_foreach_{name}_" + (f".{ov}" if ov else "")
    def call(op):
        def run(*a):
            args = fn_args(*_lists(a, inputs.k))
            kwargs = args[-1] if isinstance(args[-1], dict) else {}
            return getattr(op, ovn)(*args[:len(args) - bool(kwargs)], **kwargs)
        return run

    if functional:
        register(full, call(fun), inputs.fn, dtypes=dtypes, grad=False, name=f"{full} {kw.get('tag', '')}".strip())
    if inplace:
        register(full_, call(inp), inputs.fn,
                 dtypes=[d for d in dtypes if kw.get("inplace_ok", lambda d: True)(d)], grad=False,
                 name=f"{full_} {kw.get('tag', '')}".strip())


class In:
    def __init__(self, k, low=None, high=None, extra=()):
        self.k, self.fn = k, _inputs(k, low, high, extra)


def _f32_scalar(v):
    return lambda dtype: [torch.tensor(v, dtype=torch.float32)]


def _same_scalar(v):
    return lambda dtype: [torch.tensor(v, dtype=dtype)]


def _is_float(d):
    return d.is_floating_point


# ---------------------------------------------------------------- binary ops
_fe("add", "List", lambda a, b: (a, b, {"alpha": 2}), In(2), NUMERIC)
_fe("add", "Scalar", lambda a, s: (a, s), In(1, extra=[3]), NUMERIC, tag="int")
_fe("add", "Scalar", lambda a, s: (a, s), In(1, extra=[2.5]), FLOATS, tag="float")
_fe("add", "Tensor", lambda a, t: (a, t, {"alpha": 2}), In(1, extra=_same_scalar(2)), NUMERIC)
_fe("add", "Tensor", lambda a, t: (a, t), In(1, extra=_f32_scalar(0.25)), FLOATS, tag="f32 scalar")
_fe("sub", "List", lambda a, b: (a, b, {"alpha": 3}), In(2), SIGNED)
_fe("sub", "Scalar", lambda a, s: (a, s), In(1, extra=[1.5]), FLOATS)
_fe("mul", "List", lambda a, b: (a, b), In(2), NUMERIC)
_fe("mul", "Scalar", lambda a, s: (a, s), In(1, extra=[0.9]), FLOATS)
_fe("mul", "Scalar", lambda a, s: (a, s), In(1, extra=[3]), NUMERIC, tag="int")
_fe("mul", "Tensor", lambda a, t: (a, t), In(1, extra=_f32_scalar(0.7)), FLOATS)
_fe("mul", "Tensor", lambda a, t: (a, t), In(1, extra=_same_scalar(3)), NUMERIC, tag="same dtype")
_fe("div", "List", lambda a, b: (a, b), In(2, low=(-3, 0.5), high=(3, 3)), NUMERIC, inplace_ok=_is_float)
_fe("div", "Scalar", lambda a, s: (a, s), In(1, extra=[0.3]), NUMERIC, inplace_ok=_is_float)
_fe("div", "Tensor", lambda a, t: (a, t), In(1, extra=_f32_scalar(1.7)), FLOATS)
for _op in ("maximum", "minimum", "clamp_min", "clamp_max"):
    _fe(_op, "List", lambda a, b: (a, b), In(2), NUMERIC)
    _fe(_op, "Scalar", lambda a, s: (a, s), In(1, extra=[0.5]), FLOATS)
_fe("pow", "List", lambda a, b: (a, b), In(2, low=(0.2, -2), high=(2, 2)), FLOATS)
_fe("pow", "Scalar", lambda a, s: (a, s), In(1, low=0.1, high=3, extra=[2.5]), FLOATS)
register("_foreach_pow.ScalarAndTensor", lambda *a: torch._foreach_pow(0.9, list(a)), _inputs(1), dtypes=FLOATS,
         grad=False)

# ---------------------------------------------------------------- ternary ops
_fe("addcmul", "Scalar", lambda a, b, c, v: (a, b, c, v), In(3, extra=[0.5]), FLOATS)
_fe("addcmul", "Scalar", lambda a, b, c, v: (a, b, c, v), In(3, extra=[2]), SIGNED, tag="int")
_fe("addcdiv", "Scalar", lambda a, b, c, v: (a, b, c, v), In(3, low=(-3, -3, 0.5), high=(3, 3, 3), extra=[-0.3]),
    FLOATS)
_fe("lerp", "List", lambda a, b, w: (a, b, w), In(3, low=(-3, -3, 0), high=(3, 3, 1)), FLOATS)
_fe("lerp", "Scalar", lambda a, b, w: (a, b, w), In(2, extra=[0.1]), FLOATS, tag="small weight")
_fe("lerp", "Scalar", lambda a, b, w: (a, b, w), In(2, extra=[0.8]), FLOATS, tag="large weight")

# ---------------------------------------------------------------- Scalar[] operands (one scalar per tensor)
for _op, _dt in (("add", NUMERIC), ("sub", SIGNED), ("mul", NUMERIC), ("maximum", NUMERIC), ("minimum", NUMERIC),
                 ("clamp_min", NUMERIC), ("clamp_max", NUMERIC)):
    _fe(_op, "ScalarList", lambda a, s: (a, s), In(1, extra=[[2, -1, 3]]), _dt, tag="ints")
    _fe(_op, "ScalarList", lambda a, s: (a, s), In(1, extra=[[0.5, -1.25, 2.0]]), FLOATS, tag="floats")
_fe("div", "ScalarList", lambda a, s: (a, s), In(1, extra=[[0.5, -1.25, 2.0]]), NUMERIC, inplace_ok=_is_float)
_fe("pow", "ScalarList", lambda a, s: (a, s), In(1, low=0.1, high=3, extra=[[2.0, 0.5, 3]]), FLOATS)
_fe("lerp", "ScalarList", lambda a, b, w: (a, b, w), In(2, extra=[[0.1, 0.5, 0.9]]), FLOATS)
_fe("addcmul", "ScalarList", lambda a, b, c, v: (a, b, c, v), In(3, extra=[[0.5, -2.0, 1.0]]), FLOATS)
_fe("addcdiv", "ScalarList", lambda a, b, c, v: (a, b, c, v),
    In(3, low=(-3, -3, 0.5), high=(3, 3, 3), extra=[[-0.3, 1.5, 2.0]]), FLOATS)

# ---------------------------------------------------------------- unary ops
_UNARY = {  # op: (low, high, dtypes)
    "abs": (None, None, SIGNED), "neg": (None, None, SIGNED), "sign": (None, None, SIGNED),
    "zero": (None, None, ALL), "reciprocal": (0.5, 3, FLOATS), "sqrt": (0.1, 3, FLOATS),
    "rsqrt": (0.1, 3, FLOATS), "exp": (None, None, FLOATS), "expm1": (None, None, FLOATS),
    "log": (0.1, 3, FLOATS), "log10": (0.1, 3, FLOATS), "log1p": (-0.5, 3, FLOATS), "log2": (0.1, 3, FLOATS),
    "sin": (None, None, FLOATS), "cos": (None, None, FLOATS), "tan": (-1, 1, FLOATS),
    "asin": (-0.9, 0.9, FLOATS), "acos": (-0.9, 0.9, FLOATS), "atan": (None, None, FLOATS),
    "sinh": (None, None, FLOATS), "cosh": (None, None, FLOATS), "tanh": (None, None, FLOATS),
    "sigmoid": (None, None, FLOATS), "erf": (None, None, FLOATS), "erfc": (None, None, FLOATS),
    "lgamma": (0.5, 3, FLOATS), "ceil": (None, None, FLOATS), "floor": (None, None, FLOATS),
    "round": (None, None, FLOATS), "trunc": (None, None, FLOATS), "frac": (None, None, FLOATS),
}
for _op, (_lo, _hi, _dt) in _UNARY.items():
    _fe(_op, None, lambda a: (a,), In(1, _lo, _hi), _dt)
# int inputs of float functions give float results
_fe("sqrt", None, lambda a: (a,), In(1, 0, 9), INTS, inplace=False, tag="int")

# ---------------------------------------------------------------- copy, reductions
_fe("copy", None, lambda a, b: (a, b), In(2), ALL)
register("_foreach_copy_", lambda *a: torch._foreach_copy_(*_lists(a, 2)),
         lambda dtype: _inputs(1)(dtype) + _inputs(1)(torch.float32), dtypes=ALL, grad=False, name="copy_ converting")
for _ord in (2, 1, 3, 0, float("inf"), float("-inf")):
    register("_foreach_norm.Scalar", lambda *a, o=_ord: torch._foreach_norm(list(a), o), _inputs(1), dtypes=FLOATS,
             grad=False, name=f"_foreach_norm ord={_ord}")
register("_foreach_norm.Scalar", lambda *a: torch._foreach_norm(list(a), 2, dtype=torch.float32), _inputs(1),
         dtypes=FLOATS, grad=False, name="_foreach_norm dtype=float32")
for _ord in (2, 1, 3):
    register("_foreach_powsum.Scalar", lambda *a, o=_ord: torch.ops.aten._foreach_powsum.Scalar(list(a), o),
             _inputs(1), dtypes=FLOATS, grad=False, name=f"_foreach_powsum ord={_ord}")
register("_foreach_max", lambda *a: torch._foreach_max(list(a)), _inputs(1), dtypes=NUMERIC, grad=False)


# ---------------------------------------------------------------- fused Adam / AdamW
def _adam_inputs(dtype):
    p, g, m, v = ([make(s, dtype, lo, hi, seed=100 * j + i) for i, s in enumerate(SHAPES)]
                  for j, (lo, hi) in enumerate(((-3, 3), (-1, 1), (-0.5, 0.5), (0, 0.3))))
    vmax = [x * 1.1 for x in v]
    steps = [torch.tensor(float(i + 1)) for i in range(N)]
    return p + g + m + v + vmax + steps + [torch.tensor(2.0), torch.tensor(0.0)]


def _adam_inputs_inf(dtype):  # found_inf set: the step is skipped
    return _adam_inputs(dtype)[:-1] + [torch.tensor(1.0)]


def _fused(fn, amsgrad, maximize, wd, scaled):
    def run(*a):
        p, g, m, v, vmax, steps, scale, found = _lists(a, 6)
        fn(p, g, m, v, vmax if amsgrad else [], steps, lr=0.01, beta1=0.9, beta2=0.99, weight_decay=wd, eps=1e-8, amsgrad=amsgrad,
           maximize=maximize, grad_scale=scale if scaled else None, found_inf=found if scaled else None)
    return run


for _name, _fn in (("_fused_adam_", torch._fused_adam_), ("_fused_adamw_", torch._fused_adamw_)):
    for _ams, _max, _wd, _sc in ((False, False, 0.0, False), (True, True, 0.1, True), (False, False, 0.01, True)):
        # noncontig=False: PyTorch's CPU fused kernel walks non-contiguous tensors as if they
        # were contiguous (it updates the wrong elements), so it is no reference for them
        register(_name, _fused(_fn, _ams, _max, _wd, _sc), _adam_inputs, dtypes=FLOATS, grad=False, noncontig=False,
                 name=f"{_name} amsgrad={_ams} maximize={_max} wd={_wd} grad_scale={_sc}")
    register(_name, _fused(_fn, False, False, 0.0, True), _adam_inputs_inf, dtypes=FLOATS, grad=False,
             noncontig=False, name=f"{_name} found_inf")


# ---------------------------------------------------------------- fused SGD
def _sgd_inputs(dtype):
    p, g, b = ([make(s, dtype, lo, hi, seed=100 * j + i) for i, s in enumerate(SHAPES)]
               for j, (lo, hi) in enumerate(((-3, 3), (-1, 1), (-0.5, 0.5))))
    return p + g + b + [torch.tensor(2.0), torch.tensor(0.0)]


def _fused_sgd(momentum, nesterov, maximize, wd, first, scaled, tensor_lr=False, found=False):
    def run(*a):
        p, g, b, scale, found_inf = _lists(a, 3)
        lr = torch.tensor(0.05, device=p[0].device) if tensor_lr else 0.05
        torch._fused_sgd_(p, g, b if momentum else [], weight_decay=wd, momentum=momentum, lr=lr, dampening=0.1,
                          nesterov=nesterov, maximize=maximize, is_first_step=first,
                          grad_scale=scale if scaled else None,
                          found_inf=(found_inf + 1 if found else found_inf) if scaled else None)
    return run


for _cfg in ((0.0, False, False, 0.0, False, False), (0.9, False, False, 0.01, True, False),
             (0.9, True, True, 0.01, False, True), (0.5, False, False, 0.0, False, True)):
    register("_fused_sgd_", _fused_sgd(*_cfg), _sgd_inputs, dtypes=FLOATS, grad=False, noncontig=False,
             name="_fused_sgd_ momentum={} nesterov={} maximize={} wd={} first={} grad_scale={}".format(*_cfg))
register("_fused_sgd_", _fused_sgd(0.9, False, False, 0.0, False, True, found=True), _sgd_inputs, dtypes=FLOATS,
         grad=False, noncontig=False, name="_fused_sgd_ found_inf")
register("_fused_sgd_.tensor_lr", _fused_sgd(0.9, False, False, 0.01, False, False, tensor_lr=True), _sgd_inputs,
         dtypes=FLOATS, grad=False, noncontig=False)
