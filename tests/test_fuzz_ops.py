"""Property-based tests of the op path (Hypothesis): random shapes (0- and 1-size dims
included), strides (transposed, sliced with steps, expanded), dtypes, broadcasting and out=
that overlaps an input, for ops of every family. Each example either matches PyTorch CPU by
torch_tpu.compare's policy or raises CPU's exception type.

CI runs the "ci" profile (derandomized, a few hundred examples); the full run is

    HYPOTHESIS_PROFILE=long python -m pytest tests/test_fuzz_ops.py
"""
import os

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import torch_tpu  # noqa: F401
from torch_tpu.compare import check_like_cpu

settings.register_profile("ci", max_examples=40, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("long", max_examples=2000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

FLOATS = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
INTS = [torch.int64, torch.int32, torch.int16, torch.uint8, torch.int8]
SMALL_DIM = st.integers(0, 5)


@st.composite
def shapes(draw, min_dims=0, max_dims=4):
    return tuple(draw(st.lists(SMALL_DIM, min_size=min_dims, max_size=max_dims)))


def _values(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g, dtype=torch.float64) * 3).to(dtype)
    lo, hi = (0, 50) if dtype == torch.uint8 else (-40, 40)
    return torch.randint(lo, hi, shape, generator=g).to(dtype)


@st.composite
def laid_out(draw, shape, dtype):
    """A CPU tensor of `shape` with one of the layouts users make: contiguous, transposed,
    sliced with a step, or expanded from a size-1 dim (stride 0). The tpu copy is made with the
    same view of the base moved to the device (`on_tpu`), so the kernels see the layout too."""
    seed = draw(st.integers(0, 2**16))
    kind = draw(st.sampled_from(["contiguous", "transposed", "stepped", "expanded"]))
    if kind == "transposed" and len(shape) >= 2:
        base, view = _values(shape[:-2] + (shape[-1], shape[-2]), dtype, seed), lambda b: b.transpose(-1, -2)
    elif kind == "stepped" and len(shape) >= 1:
        base, view = _values(shape[:-1] + (shape[-1] * 2,), dtype, seed), lambda b: b[..., ::2]
    elif kind == "expanded" and len(shape) >= 1 and shape[0] != 1:
        base, view = _values((1,) + shape[1:], dtype, seed), lambda b: b.expand(shape)
    else:
        base, view = _values(shape, dtype, seed), lambda b: b
    t = view(base)
    t.fuzz_layout = (base, view)
    return t


def on_tpu(a):
    if not isinstance(a, torch.Tensor):
        return a
    if hasattr(a, "fuzz_layout"):
        base, view = a.fuzz_layout
        return view(base.to("tpu"))
    return a.to("tpu")


def _exact(fn, args):
    """fn on contiguous float64 (complex128) copies of the floating arguments, or None."""
    def wide(a):
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            return a.double().contiguous()
        if isinstance(a, torch.Tensor) and a.is_complex():
            return a.to(torch.complex128).contiguous()
        return a
    try:
        return fn(*[wide(a) for a in args])
    except Exception:
        return None


def _flat(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return []


def _same(a, b):
    fa, fb = _flat(a), _flat(b)
    return len(fa) == len(fb) and all(x.shape == y.shape and x.dtype == y.dtype and (torch.equal(x, y) or (
        (x.is_floating_point() or x.is_complex()) and torch.equal(x.nan_to_num(), y.nan_to_num()))) for x, y in zip(fa, fb))


def agrees_with_cpu(fn, *args):
    """fn on tpu copies of args matches fn on the CPU ones, or raises the same exception type.
    Where CPU's own result changes when its inputs are made contiguous (median of an expanded
    tensor gives 0 on CPU), the contiguous result is the reference: the values are the same."""
    try:
        expected = fn(*args)
    except Exception as e:
        _raises_the_same(fn, args, e)
        return
    if any(isinstance(a, torch.Tensor) and not a.is_contiguous() for a in args):
        try:
            dense = fn(*[a.contiguous() if isinstance(a, torch.Tensor) else a for a in args])
        except Exception:  # layout decides legitimately (an out= that aliases an input only when dense)
            dense = expected
        if not _same(expected, dense):
            expected = dense
    _close_to(fn, args, expected)


def _raises_the_same(fn, args, e):
    with pytest.raises(type(e)):
        fn(*[on_tpu(a) for a in args])
        torch.tpu.synchronize()


def _close_to(fn, args, expected):
    with torch.tpu.precision("highest"):
        actual = fn(*[on_tpu(a) for a in args])
        torch.tpu.synchronize()
    exp, act = _flat(expected), _flat(actual)
    assert len(exp) == len(act)
    exact = None
    for i, (a, e) in enumerate(zip(act, exp)):
        assert a.device.type == "tpu" and a.dtype == e.dtype and a.shape == e.shape, (i, a.dtype, a.shape, e.dtype, e.shape)
        if exact is None and (e.is_floating_point() or e.is_complex()):
            wide = _exact(fn, args)
            exact = _flat(wide) if wide is not None else []
        check_like_cpu(a, e, exact[i] if exact and i < len(exact) and exact[i].shape == e.shape else None,
                       what=f"output {i}")


# ---------------------------------------------------------------- elementwise
UNARY = {
    "abs": torch.abs, "neg": torch.neg, "exp": torch.exp, "log1p": torch.log1p, "sin": torch.sin,
    "sqrt": torch.sqrt, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "floor": torch.floor, "sign": torch.sign,
    "reciprocal": torch.reciprocal, "erf": torch.erf, "rsqrt": torch.rsqrt, "expm1": torch.expm1,
    "gelu": torch.nn.functional.gelu, "silu": torch.nn.functional.silu, "round": torch.round,
    "clamp": lambda x: torch.clamp(x, -1.5, 2), "nan_to_num": torch.nan_to_num,
}


@given(st.sampled_from(sorted(UNARY)), st.sampled_from(FLOATS), shapes(), st.data())
def test_unary(op, dtype, shape, data):
    agrees_with_cpu(UNARY[op], data.draw(laid_out(shape, dtype)))


BINARY = {
    "add": torch.add, "sub": lambda a, b: torch.sub(a, b, alpha=2), "mul": torch.mul, "div": torch.div,
    "floor_divide": torch.floor_divide, "remainder": torch.remainder, "fmod": torch.fmod,
    "maximum": torch.maximum, "minimum": torch.minimum, "pow": torch.pow, "atan2": torch.atan2,
    "eq": torch.eq, "lt": torch.lt, "ge": torch.ge, "hypot": torch.hypot, "copysign": torch.copysign,
    "where": lambda a, b: torch.where(a > b, a, b), "lerp": lambda a, b: torch.lerp(a, b, 0.3),
}
FLOAT_ONLY = {"atan2", "hypot", "copysign", "lerp"}


@st.composite
def broadcast_pair(draw):
    """Two shapes that broadcast: the second drops leading dims and sets some dims to 1."""
    a = draw(shapes(max_dims=4))
    cut = draw(st.integers(0, len(a)))
    b = tuple(1 if draw(st.booleans()) else d for d in a[cut:])
    return (a, b) if draw(st.booleans()) else (b, a)


@given(st.sampled_from(sorted(BINARY)), st.sampled_from(FLOATS + INTS), broadcast_pair(), st.data())
def test_binary_broadcast(op, dtype, pair, data):
    if op in FLOAT_ONLY and not dtype.is_floating_point:
        dtype = torch.float32
    other = data.draw(st.sampled_from([dtype, torch.float32, torch.int64]))  # type promotion too
    a, b = data.draw(laid_out(pair[0], dtype)), data.draw(laid_out(pair[1], other))
    agrees_with_cpu(BINARY[op], a, b)


@given(st.sampled_from(["add", "mul", "sub", "div"]), st.sampled_from(FLOATS + [torch.int64]), shapes(min_dims=1),
       st.sampled_from(["same", "view", "other"]), st.data())
def test_out_overlapping_an_input(op, dtype, shape, alias, data):
    """out= that is an input (allowed, elementwise in step) or a different view of its memory
    (CPU refuses partial overlap: the same error here)."""
    if op == "div" and not dtype.is_floating_point:
        dtype = torch.float32
    a, b = data.draw(laid_out(shape, dtype)), data.draw(laid_out(shape, dtype))
    f = getattr(torch, op)

    def call(x, y):
        x = x.clone()
        if alias == "same":
            out = x
        elif alias == "view":
            out = x.flatten()[: max(0, x.numel() - 1)] if x.dim() else x
        else:
            out = torch.empty_like(x)
        f(x, y, out=out)
        return x, out
    agrees_with_cpu(call, a, b)


# ---------------------------------------------------------------- reductions and scans
REDUCE = {
    "sum": lambda x, d, k: torch.sum(x, d, keepdim=k), "mean": lambda x, d, k: torch.mean(x, d, keepdim=k),
    "amax": lambda x, d, k: torch.amax(x, d, keepdim=k), "argmax": lambda x, d, k: torch.argmax(x, d, keepdim=k),
    "prod": lambda x, d, k: torch.prod(x, d, keepdim=k), "var": lambda x, d, k: torch.var(x, d, keepdim=k),
    "std": lambda x, d, k: torch.std(x, d, keepdim=k, correction=0), "norm": lambda x, d, k: torch.norm(x, 2, d, k),
    "logsumexp": lambda x, d, k: torch.logsumexp(x, d, keepdim=k), "max": lambda x, d, k: torch.max(x, d, keepdim=k),
    "cumsum": lambda x, d, k: torch.cumsum(x, d), "cumprod": lambda x, d, k: torch.cumprod(x, d),
    "softmax": lambda x, d, k: torch.softmax(x, d), "log_softmax": lambda x, d, k: torch.log_softmax(x, d),
    "sort": lambda x, d, k: torch.sort(x, d, stable=True), "all": lambda x, d, k: torch.all(x, d, keepdim=k),
}
REDUCE_FLOAT_ONLY = {"mean", "var", "std", "norm", "logsumexp", "softmax", "log_softmax"}


@given(st.sampled_from(sorted(REDUCE)), st.sampled_from(FLOATS + INTS), shapes(min_dims=1), st.data())
def test_reduce_over_a_dim(op, dtype, shape, data):
    if op in REDUCE_FLOAT_ONLY and not dtype.is_floating_point:
        dtype = torch.float32
    x = data.draw(laid_out(shape, dtype))
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    keep = data.draw(st.booleans())
    agrees_with_cpu(lambda t: REDUCE[op](t, dim, keep), x)


@given(st.sampled_from(FLOATS + INTS), shapes(), st.data())
def test_full_reductions(dtype, shape, data):
    x = data.draw(laid_out(shape, dtype))
    agrees_with_cpu(lambda t: (t.sum(), t.amax() if t.numel() else t.sum(), t.float().mean(), t.count_nonzero()), x)


# ---------------------------------------------------------------- matmul family
@given(st.sampled_from([torch.float32, torch.bfloat16, torch.float16, torch.float64]),
       st.tuples(st.integers(0, 3), SMALL_DIM, SMALL_DIM, SMALL_DIM), st.sampled_from(["mm", "bmm", "matmul", "addmm", "baddbmm"]),
       st.data())
def test_matmul_family(dtype, dims, op, data):
    b, m, k, n = dims
    if op in ("mm", "addmm"):
        x, y = data.draw(laid_out((m, k), dtype)), data.draw(laid_out((k, n), dtype))
        fn = torch.mm if op == "mm" else (lambda p, q: torch.addmm(torch.ones(n, dtype=p.dtype, device=p.device), p, q,
                                                                   beta=0.5, alpha=2))
    else:
        x, y = data.draw(laid_out((b, m, k), dtype)), data.draw(laid_out((b, k, n), dtype))
        fn = {"bmm": torch.bmm, "matmul": torch.matmul,
              "baddbmm": lambda p, q: torch.baddbmm(torch.zeros(b, m, n, dtype=p.dtype, device=p.device), p, q)}[op]
    agrees_with_cpu(fn, x, y)


# ---------------------------------------------------------------- movement and indexing
@given(st.sampled_from(FLOATS + INTS + [torch.bool]), shapes(min_dims=1), st.data())
def test_movement(dtype, shape, data):
    x = data.draw(laid_out(shape, dtype))
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    op = data.draw(st.sampled_from(["cat", "stack", "flip", "roll", "narrow", "repeat", "tril", "contiguous_t",
                                    "index_select", "gather", "unbind", "chunk", "masked_fill"]))
    n = shape[dim]
    idx = torch.randint(0, max(n, 1), (data.draw(st.integers(0, 6)),)) if n else torch.zeros(0, dtype=torch.long)
    fns = {
        "cat": lambda t: torch.cat([t, t.flip(dim)], dim),
        "stack": lambda t: torch.stack([t, t], dim),
        "flip": lambda t: t.flip(dim),
        "roll": lambda t: t.roll(2, dim),
        "narrow": lambda t: t.narrow(dim, 0, max(0, n - 1)),
        "repeat": lambda t: t.repeat(*([2] + [1] * (t.dim() - 1))),
        "tril": lambda t: t.tril(-1) if t.dim() >= 2 else t,
        "contiguous_t": lambda t: t.transpose(0, -1).contiguous(),
        "index_select": lambda t: t.index_select(dim, idx.to(t.device)),
        "gather": lambda t: t.gather(dim, torch.zeros_like(t, dtype=torch.long)),
        "unbind": lambda t: t.unbind(dim),
        "chunk": lambda t: t.chunk(3, dim),
        "masked_fill": lambda t: t.masked_fill(torch.ones_like(t, dtype=torch.bool).tril() if t.dim() >= 2 else
                                               torch.ones_like(t, dtype=torch.bool), 1),
    }
    agrees_with_cpu(fns[op], x)


@given(st.sampled_from(FLOATS + [torch.int64]), shapes(min_dims=1, max_dims=3), st.data())
def test_advanced_indexing_and_writes(dtype, shape, data):
    x = data.draw(laid_out(shape, dtype))
    n = shape[0]
    k = data.draw(st.integers(0, 6))
    idx = torch.randint(-n, n, (k,)) if n else torch.zeros(0, dtype=torch.long)
    bad = data.draw(st.booleans()) and n > 0
    if bad:
        idx = torch.cat([idx, torch.tensor([n])])  # out of range: CPU's IndexError
    op = data.draw(st.sampled_from(["getitem", "index_put", "index_put_acc", "index_add", "scatter_add", "bool_mask"]))
    src = _values((idx.numel(),) + shape[1:], dtype, 7)

    def fn(t, s):
        i = idx.to(t.device)
        if op == "getitem":
            return t[i]
        if op == "index_put":
            return t.index_put((i,), s[-1] if s.numel() else s)
        if op == "index_put_acc":
            return t.index_put((i,), s, accumulate=True)
        if op == "index_add":
            return t.index_add(0, i.clamp(min=0) if not bad else i, s)
        if op == "scatter_add":
            j = (i.clamp(min=0) if not bad else i).view(-1, *([1] * (t.dim() - 1))).expand_as(s)
            return t.scatter_add(0, j, s)
        return t[t > 0]
    agrees_with_cpu(fn, x, src)


# ---------------------------------------------------------------- nn
@given(st.sampled_from([torch.float32, torch.bfloat16, torch.float64]), st.tuples(st.integers(1, 3), st.integers(1, 4),
       st.integers(0, 9)), st.sampled_from(["layer_norm", "conv1d", "max_pool1d", "avg_pool1d", "embedding",
                                            "cross_entropy", "group_norm", "sdpa"]), st.data())
def test_nn(dtype, dims, op, data):
    F = torch.nn.functional
    b, c, length = dims
    x = data.draw(laid_out((b, c, length), dtype))
    causal = data.draw(st.booleans())
    w = _values((2, c, min(3, max(length, 1))), dtype, 3)
    fns = {
        "layer_norm": lambda t, w: F.layer_norm(t, t.shape[-1:]),
        "conv1d": lambda t, w: F.conv1d(t, w, padding=1),
        "max_pool1d": lambda t, w: F.max_pool1d(t, 2, ceil_mode=True),
        "avg_pool1d": lambda t, w: F.avg_pool1d(t, 2, ceil_mode=True, count_include_pad=False),
        "embedding": lambda t, w: F.embedding((t.abs() * 3).long() % 5, w.flatten(1)[:, :2].repeat(3, 1)[:5]),
        "cross_entropy": lambda t, w: F.cross_entropy(t, torch.zeros(t.shape[0], t.shape[2], dtype=torch.long,
                                                                     device=t.device)),
        "group_norm": lambda t, w: F.group_norm(t, 1),
        "sdpa": lambda t, w: F.scaled_dot_product_attention(t, t, t, is_causal=causal),
    }
    agrees_with_cpu(fns[op], x, w)


# ---------------------------------------------------------------- more families
@given(st.sampled_from([torch.float32, torch.float64, torch.bfloat16]),
       st.tuples(st.integers(1, 2), st.integers(1, 4), st.integers(1, 7), st.integers(1, 7)),
       st.tuples(st.integers(1, 3), st.integers(1, 2), st.integers(0, 2), st.integers(1, 2), st.sampled_from([1, 2])),
       st.sampled_from(["conv2d", "conv_transpose2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d",
                        "interpolate_bilinear", "pad_reflect"]), st.data())
def test_spatial(dtype, dims, geom, op, data):
    F = torch.nn.functional
    b, c, h, w = dims
    k, stride, pad, dil, groups = geom
    c = c * groups if op in ("conv2d", "conv_transpose2d") else c
    x = data.draw(laid_out((b, c, h, w), dtype))
    weight = _values((c, c // groups, k, k), dtype, 5)
    fns = {
        "conv2d": lambda t, wt: F.conv2d(t, wt, stride=stride, padding=pad, dilation=dil, groups=groups),
        # padding at most (k - 1) / 2: an output with no rows is refused or not by CPU depending
        # on its dtype and groups path (tests/test_fuzz_regressions.py keeps the float32 cases)
        "conv_transpose2d": lambda t, wt: F.conv_transpose2d(t, wt, stride=stride, padding=min(pad, (k - 1) // 2),
                                                             groups=groups),
        "max_pool2d": lambda t, wt: F.max_pool2d(t, k, stride, min(pad, k // 2), dil, ceil_mode=stride > 1),
        "avg_pool2d": lambda t, wt: F.avg_pool2d(t, k, stride, min(pad, k // 2), ceil_mode=stride > 1),
        "adaptive_avg_pool2d": lambda t, wt: F.adaptive_avg_pool2d(t, (k + 1, k)),
        "interpolate_bilinear": lambda t, wt: F.interpolate(t, scale_factor=1.5 + pad, mode="bilinear",
                                                            align_corners=bool(stride - 1)),
        "pad_reflect": lambda t, wt: F.pad(t, (pad, pad, pad, 0), mode="reflect"),
    }
    agrees_with_cpu(fns[op], x, weight)


COMPLEX_OPS = {
    "abs": torch.abs, "exp": torch.exp, "sqrt": torch.sqrt, "log": torch.log, "sin": torch.sin, "tanh": torch.tanh,
    "angle": torch.angle, "reciprocal": torch.reciprocal, "sigmoid": torch.sigmoid,
    "mul": lambda a: a * a.conj(), "div": lambda a: a / (a + 1), "sum": lambda a: a.sum(-1) if a.dim() else a.sum(),
    "matmul": lambda a: a @ a.transpose(-1, -2) if a.dim() >= 2 else a * a,
}


@given(st.sampled_from(sorted(COMPLEX_OPS)), st.sampled_from([torch.complex64, torch.complex128]), shapes(max_dims=3),
       st.data())
def test_complex(op, dtype, shape, data):
    seed = data.draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    x = torch.complex(torch.randn(shape, generator=g, dtype=torch.float64),
                      torch.randn(shape, generator=g, dtype=torch.float64)).to(dtype) * 2
    agrees_with_cpu(COMPLEX_OPS[op], x)


@given(st.sampled_from(FLOATS + INTS + [torch.bool]), st.sampled_from(FLOATS + INTS + [torch.bool]), shapes(), st.data())
def test_dtype_conversions(src, dst, shape, data):
    x = data.draw(laid_out(shape, src))
    if src.is_floating_point and not (dst.is_floating_point or dst == torch.bool):
        x = x.clamp(-100, 100)  # float -> int outside the target's range is undefined in C++ (and differs by ISA)
        if dst == torch.uint8:
            x = x.abs()
    agrees_with_cpu(lambda t: (t.to(dst), t.to(dst).to(src)), x)


@given(st.sampled_from(FLOATS + [torch.int64, torch.int32]), shapes(min_dims=1, max_dims=3), st.data())
def test_selection(dtype, shape, data):
    x = data.draw(laid_out(shape, dtype))
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[dim]
    k = data.draw(st.integers(0, max(n, 0)))
    op = data.draw(st.sampled_from(["topk", "topk_smallest", "kthvalue", "median", "argsort", "unique", "msort",
                                    "cummax", "searchsorted", "bucketize"]))
    fns = {
        "topk": lambda t: t.topk(k, dim, sorted=True).values,
        "topk_smallest": lambda t: t.topk(k, dim, largest=False, sorted=True).values,
        "kthvalue": lambda t: t.kthvalue(max(k, 1), dim).values,
        "median": lambda t: t.median(dim).values,
        "argsort": lambda t: t.argsort(dim, stable=True),
        "unique": lambda t: torch.unique(t, sorted=True, return_counts=True),
        "msort": lambda t: torch.msort(t),
        "cummax": lambda t: t.cummax(dim),
        "searchsorted": lambda t: torch.searchsorted(t.flatten().sort().values, t),
        "bucketize": lambda t: torch.bucketize(t, torch.tensor([-1, 0, 2], dtype=t.dtype, device=t.device)),
    }
    agrees_with_cpu(fns[op], x)


@given(st.sampled_from([torch.float32, torch.float16, torch.bfloat16, torch.float64]), shapes(min_dims=1, max_dims=3),
       st.integers(1, 4), st.sampled_from(["add", "mul", "addcmul", "lerp", "norm", "maximum", "sqrt", "zero"]), st.data())
def test_foreach(dtype, shape, n, op, data):
    xs = [data.draw(laid_out(shape, dtype)) for _ in range(n)]
    ys = [data.draw(laid_out(shape, dtype)) for _ in range(n)]

    def fn(*ts):
        a, b = [t.clone() for t in ts[:n]], list(ts[n:])
        if op == "add":
            torch._foreach_add_(a, b, alpha=0.5)
        elif op == "mul":
            torch._foreach_mul_(a, 1.5)
        elif op == "addcmul":
            torch._foreach_addcmul_(a, b, b, value=0.25)
        elif op == "lerp":
            torch._foreach_lerp_(a, b, 0.3)
        elif op == "norm":
            return torch._foreach_norm(a)
        elif op == "maximum":
            return torch._foreach_maximum(a, b)
        elif op == "sqrt":
            return torch._foreach_sqrt([t.abs() for t in a])
        else:
            torch._foreach_zero_(a)
        return a
    agrees_with_cpu(fn, *xs, *ys)
