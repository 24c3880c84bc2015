"""Wrong results PyTorch's own device-generic suites (test_binary_ufuncs, test_shape_ops,
test_ops, ...) found on tpu, each reproduced here against PyTorch CPU so CI catches them
without the upstream test files. Results must match CPU bit for bit where CPU's are exact
(integers, rounding of one float16 operation); float64 decides elsewhere."""
import copy
import itertools
import re
import warnings

import pytest
import torch

import torch_tpu

REDUCED = [torch.float16, torch.bfloat16]


def tpu(x):
    return x.to("tpu") if isinstance(x, torch.Tensor) else x


def both(fn, *args):
    """fn on CPU and on tpu (the result brought back), warnings of the CPU fallback muted."""
    expected = fn(*args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        actual = fn(*[tpu(a) for a in args])
    return actual, expected


def check_like_cpu(fn, *args):
    """fn gives CPU's result on tpu, or raises CPU's exception type."""
    try:
        expected = fn(*args)
    except Exception as e:  # noqa: BLE001 - any CPU exception is the contract
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(type(e)):
                fn(*[tpu(a) for a in args])
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        actual = fn(*[tpu(a) for a in args])
    assert_same(actual, expected)


# dtypes assert_close cannot compare: their bytes are compared instead
_BYTEWISE = {torch.uint16, torch.uint32, torch.uint64, torch.complex32, torch.float8_e4m3fn, torch.float8_e5m2,
             torch.float8_e4m3fnuz, torch.float8_e5m2fnuz, torch.float8_e8m0fnu, torch.bits8}


def assert_same(actual, expected):
    assert actual.device.type == "tpu"
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if actual.dtype in _BYTEWISE:
        got, want = (t.cpu().reshape(-1).view(torch.uint8) for t in (actual, expected))
        assert torch.equal(got, want), (got, want)
        return
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0, equal_nan=True)


# ---------------------------------------------------------------- complex64 with float64
# The common dtype is complex128, which the runtime only stores: such ops must fall back,
# never write complex128 outputs from a complex64 kernel.
MIXED_COMPLEX = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "rsub": lambda a, b: b - a,
    "complex scalar ** float64": lambda a, b: (1.5 - 0.5j) ** b.abs(),
    "float64 ** complex64": lambda a, b: b.abs() ** a,
    "where": lambda a, b: torch.where(b > 0, a, b),
}


@pytest.mark.parametrize("name", list(MIXED_COMPLEX))
def test_complex64_with_float64_promotes_to_complex128(name):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(6, dtype=torch.complex64, generator=g)
    b = torch.randn(6, dtype=torch.float64, generator=g)
    actual, expected = both(MIXED_COMPLEX[name], a, b)
    assert expected.dtype == torch.complex128
    assert_same(actual, expected)


# ---------------------------------------------------------------- 0-dim tensors
ZERO_DIM = {
    "flip": lambda x: x.flip(0),
    "flip -1": lambda x: torch.flip(x, [-1]),
    "roll": lambda x: x.roll(1, 0),
    "roll flat": lambda x: x.roll(3),
    "sum dim": lambda x: x.sum(0),
    "cumsum": lambda x: x.cumsum(0),
    "cumprod": lambda x: x.cumprod(-1),
    "sort": lambda x: x.sort(0)[0],
    "argsort": lambda x: x.argsort(0),
    "argmax dim": lambda x: x.argmax(0),
    "max dim": lambda x: x.max(0)[0],
    "softmax": lambda x: x.softmax(0),
    "log_softmax": lambda x: x.log_softmax(-1),
    "topk": lambda x: x.topk(1)[0],
    "kthvalue": lambda x: x.kthvalue(1)[0],
    "gather": lambda x: x.gather(0, torch.tensor(0, device=x.device)),
    "index_select": lambda x: x.index_select(0, torch.tensor([0], device=x.device)),
    "narrow_copy": lambda x: x.unsqueeze(0).narrow_copy(0, 0, 1),
    "clone": lambda x: x.clone(),
    "contiguous of expand": lambda x: x.expand(3).contiguous(),
    "mean dim": lambda x: x.mean(0),
    "std": lambda x: x.unsqueeze(0).repeat(3).std(),
    "logsumexp": lambda x: x.logsumexp(0),
}


@pytest.mark.parametrize("name", list(ZERO_DIM))
def test_zero_dim_tensors(name):
    # a fresh 0-dim value after another tensor's, so stale memory would show
    for value in (7.0, -2.5):
        torch.full((4,), 123.0, device="tpu")
        check_like_cpu(ZERO_DIM[name], torch.tensor(value))


def test_zero_dim_integer_flip_item():
    torch.tensor(99, device="tpu") + 1
    assert torch.tensor(7, device="tpu").flip(0).item() == 7


# ---------------------------------------------------------------- out= with a wider dtype
# CPU computes in the common dtype of the inputs and casts the result to out's dtype:
# pow(2, uint8 17) wraps to 0 in uint8 before it becomes int64.
T = torch.tensor
WIDER_OUT = [  # name, fn(*inputs, out), inputs, out dtype
    ("pow scalar base", lambda e, out: torch.pow(2, e, out=out), [T([17, 3, 9], dtype=torch.uint8)], torch.int64),
    ("pow tensor", lambda b, e, out: torch.pow(b, e, out=out), [T([3, 5], dtype=torch.int8), T([5, 4], dtype=torch.int8)],
     torch.int64),
    ("add uint8", torch.add, [T([250, 7], dtype=torch.uint8), T([10, 1], dtype=torch.uint8)], torch.int32),
    ("add bool", torch.add, [T([True, False]), T([True, True])], torch.int64),
    ("mul int16", lambda a, out: torch.mul(a, 300, out=out), [T([300, -7], dtype=torch.int16)], torch.int64),
    ("sub int32", lambda a, out: torch.sub(a, 1, out=out), [T([-2**31], dtype=torch.int32)], torch.int64),
    ("mul float16", torch.mul, [T([1000.0, 3.3], dtype=torch.float16), T([70.0, 1.1], dtype=torch.float16)],
     torch.float32),
    ("add bfloat16", torch.add, [T([256.0], dtype=torch.bfloat16), T([1.0], dtype=torch.bfloat16)], torch.float64),
    ("lshift int8", lambda a, out: torch.bitwise_left_shift(a, 2, out=out), [T([64], dtype=torch.int8)], torch.int64),
    ("bitwise_and int8", torch.bitwise_and, [T([-1, 6], dtype=torch.int8), T([3, -3], dtype=torch.int8)], torch.int64),
    ("remainder int8 scalar", lambda a, out: torch.remainder(a, 3, out=out), [T([-7, 100], dtype=torch.int8)], torch.int64),
    ("addcmul float16 overflows", lambda a, b, c, out: torch.addcmul(a, b, c, out=out),
     [T([1.0], dtype=torch.float16), T([300.0], dtype=torch.float16), T([300.0], dtype=torch.float16)], torch.float32),
]


@pytest.mark.parametrize("name,fn,inputs,out_dtype", WIDER_OUT, ids=[w[0] for w in WIDER_OUT])
def test_out_wider_than_common_dtype(name, fn, inputs, out_dtype):
    expected = fn(*inputs, out=torch.empty(0, dtype=out_dtype))
    out = torch.empty(expected.shape, dtype=out_dtype, device="tpu")
    actual = fn(*[tpu(x) for x in inputs], out=out)
    assert actual is out
    assert_same(actual, expected)


# ---------------------------------------------------------------- in-place may not broadcast self
IN_PLACE = {
    "pow_": lambda s, o: s.pow_(o),
    "add_": lambda s, o: s.add_(o),
    "mul_": lambda s, o: s.mul_(o),
    "div_": lambda s, o: s.div_(o),
    "atan2_": lambda s, o: s.atan2_(o),
    "fmod_": lambda s, o: s.fmod_(o),
    "lerp_": lambda s, o: s.lerp_(o, 0.5),
    "clamp_min_": lambda s, o: s.clamp_min_(o),
    "copysign_": lambda s, o: s.copysign_(o),
    "hypot_": lambda s, o: s.hypot_(o),
    "maximum via copy_": lambda s, o: s.copy_(o),
}


@pytest.mark.parametrize("name", list(IN_PLACE))
def test_in_place_does_not_broadcast_self(name):
    fn = IN_PLACE[name]
    with pytest.raises(RuntimeError) as cpu:
        fn(torch.ones(3), torch.full((2, 3), 2.0))
    s = torch.ones(3, device="tpu")
    ptr = s.data_ptr()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError) as ours:
            fn(s, torch.full((2, 3), 2.0, device="tpu"))
    assert "doesn't match the broadcast shape" in str(ours.value)
    assert "doesn't match the broadcast shape" in str(cpu.value)
    assert s.shape == (3,) and s.data_ptr() == ptr
    assert_same(s, torch.ones(3))


# ---------------------------------------------------------------- float16 / bfloat16 arithmetic
def _reduced_values(dtype, n=4096, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn(n, generator=g, dtype=torch.float64) * 100).to(dtype)
    b = torch.randn(n, generator=g, dtype=torch.float64).to(dtype)
    b[b == 0] = 1
    return a, b


REDUCED_OPS = {
    "fmod scalar": lambda a, b: torch.fmod(a, 1.7),
    "remainder scalar": lambda a, b: torch.remainder(a, 1.7),
    "remainder negative scalar": lambda a, b: torch.remainder(a, -0.3),
    "fmod tensor": lambda a, b: torch.fmod(a, b),
    "remainder tensor": lambda a, b: torch.remainder(a, b),
    "div trunc tensor": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "div floor tensor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "div trunc scalar": lambda a, b: torch.div(a, 0.7, rounding_mode="trunc"),
    "div floor scalar": lambda a, b: torch.div(a, -0.7, rounding_mode="floor"),
    "floor_divide tensor": lambda a, b: torch.floor_divide(a, b),
    "div true scalar": lambda a, b: a / 0.3,
    "mul scalar": lambda a, b: a * 0.1,
    "add scalar": lambda a, b: a + 0.1,
    "sub scalar": lambda a, b: a - 1.3,
    "atan2 scalar tensor": lambda a, b: torch.atan2(a, torch.tensor(0.3, dtype=torch.float64)),
    "mul float32 0-dim": lambda a, b: a * torch.tensor(0.1),
    "maximum float32 0-dim": lambda a, b: torch.maximum(a, torch.tensor(0.1)),
    "lt float scalar": lambda a, b: a < 0.1,
    "clamp scalars": lambda a, b: a.clamp(-1.1, 1.1),
    "masked_fill": lambda a, b: a.masked_fill(b > 0, 0.1),
}


@pytest.mark.parametrize("dtype", REDUCED, ids=str)
@pytest.mark.parametrize("name", list(REDUCED_OPS))
def test_reduced_float_scalar_and_rounding_rules(name, dtype):
    a, b = _reduced_values(dtype)
    actual, expected = both(REDUCED_OPS[name], a, b)
    assert_same(actual, expected)


@pytest.mark.parametrize("dtype", REDUCED, ids=str)
def test_reduced_float_noncontiguous_divisor(dtype):
    a, b = _reduced_values(dtype, n=2048)
    b2 = torch.stack([b, b], 1)[:, 0]
    actual, expected = both(lambda x, y: torch.div(x, y, rounding_mode="floor"), a, b2)
    assert_same(actual, expected)


def test_uint8_compare_with_wider_0dim_tensor():
    # the 0-dim int64 value is cast to the common dtype uint8 first (300 -> 44), as on CPU
    x = torch.arange(0, 256, 3, dtype=torch.uint8)
    actual, expected = both(lambda a, b: a < b, x, torch.tensor(300))
    assert_same(actual, expected)


# ---------------------------------------------------------------- precision does not follow layout
def test_dot_precision_does_not_depend_on_layout():
    g = torch.Generator().manual_seed(0)
    p = torch.randn(4096, dtype=torch.float64, generator=g)
    q = torch.randn(4096, dtype=torch.float64, generator=g)
    exact = torch.dot(p, q).item()
    pf, qf = p.float().to("tpu"), q.float().to("tpu")
    strided = torch.stack([pf, pf], 1)[:, 0]
    cpu_err = abs(torch.dot(p.float(), q.float()).double().item() - exact)
    errors = {
        "dot contiguous": torch.dot(pf, qf),
        "inner contiguous": torch.inner(pf, qf),
        "inner strided": torch.inner(strided, qf),
        "vdot": torch.vdot(pf, qf),
        "matmul 1-D": pf @ qf,
    }
    bound = max(10 * cpu_err, 64 * 2**-24 * (p.abs() * q.abs()).sum().item())
    for name, r in errors.items():
        err = abs(r.double().item() - exact)
        assert err <= bound, f"{name}: error {err} vs f32 bound {bound} (bf16 operands give ~1e-1)"


# ---------------------------------------------------------------- more than 16 dims
HIGH_DIM = {
    "clone": lambda x: x.clone(),
    "contiguous of a permute": lambda x: x.permute(*reversed(range(x.dim()))).contiguous(),
    "add": lambda x: x + 1,
    "mul broadcast": lambda x: x * x.sum(0, keepdim=True),
    "sum": lambda x: x.sum(),
    "sum dim": lambda x: x.sum(3),
    "index": lambda x: x[0, ..., 1],
    "copy_ into a strided view": lambda x: torch.zeros_like(x).transpose(0, 1).copy_(x.transpose(0, 1)),
    "to float64": lambda x: x.double(),
    "unsqueeze to one more": lambda x: x.unsqueeze(0) * 2,
}


@pytest.mark.parametrize("ndim", [17, 25])
@pytest.mark.parametrize("name", list(HIGH_DIM))
def test_more_than_16_dims(name, ndim):
    shape = [1] * ndim
    shape[0], shape[1], shape[-1] = 2, 3, 2
    x = torch.arange(12, dtype=torch.float32).reshape(shape)
    actual, expected = both(HIGH_DIM[name], x)
    assert_same(actual, expected)


# ---------------------------------------------------------------- CPU's checks, CPU's messages
SAME_ERROR = {
    "bool - 1": lambda d: torch.tensor([True], device=d) - 1,
    "bool - bool": lambda d: torch.tensor([True], device=d) - torch.tensor([False], device=d),
    "1 - bool (rsub)": lambda d: torch.rsub(torch.tensor([True], device=d), 1),
    "int32 *= 1.5": lambda d: torch.ones(3, dtype=torch.int32, device=d).mul_(1.5),
    "int64 /= 2 (true division)": lambda d: torch.ones(3, dtype=torch.int64, device=d).div_(2),
    "int16 += float tensor": lambda d: torch.ones(3, dtype=torch.int16, device=d).add_(torch.ones(3, device=d)),
    "int atan2_": lambda d: torch.ones(3, dtype=torch.int64, device=d).atan2_(torch.ones(3, dtype=torch.int64, device=d)),
    "integer alpha=True": lambda d: torch.add(torch.ones(3, dtype=torch.int32, device=d),
                                              torch.ones(3, dtype=torch.int32, device=d), alpha=True),
    "float alpha=True": lambda d: torch.sub(torch.ones(3, device=d), torch.ones(3, device=d), alpha=True),
    "integer alpha=1.5": lambda d: torch.add(torch.ones(3, dtype=torch.int32, device=d),
                                             torch.ones(3, dtype=torch.int32, device=d), alpha=1.5),
    "complex alpha for floats": lambda d: torch.add(torch.ones(3, device=d), torch.ones(3, device=d),
                                                    alpha=complex(0.1, 0.2)),
    "heaviside mixed dtypes": lambda d: torch.heaviside(torch.ones(3, device=d),
                                                        torch.ones(3, dtype=torch.float64, device=d)),
    "heaviside with a 0-dim of another dtype": lambda d: torch.heaviside(torch.ones(3, device=d),
                                                                         torch.tensor(1, device=d)),
    "frexp exponent out= int64": lambda d: torch.frexp(torch.ones(3, device=d), out=(
        torch.empty(3, device=d), torch.empty(3, dtype=torch.int64, device=d))),
    "unsafe cast into out= (add)": lambda d: torch.add(torch.ones(3, device=d), 1,
                                                       out=torch.empty(3, dtype=torch.long, device=d)),
    "unsafe cast into out= (exp)": lambda d: torch.exp(torch.ones(3, device=d),
                                                       out=torch.empty(3, dtype=torch.long, device=d)),
    "unsafe cast into cat out= (TypeError)": lambda d: torch.cat([torch.ones(2, device=d)] * 2, out=torch.empty(
        0, dtype=torch.long, device=d)),
    "unsafe cast into stack out= (through cat)": lambda d: torch.stack([torch.ones(2, device=d)] * 3, out=torch.empty(
        0, dtype=torch.long, device=d)),
    "unsafe cast into cat out= of mixed inputs": lambda d: torch.cat([torch.ones(2, dtype=torch.int32, device=d),
                                                                     torch.ones(2, device=d), torch.ones(
        2, dtype=torch.int8, device=d)], out=torch.empty(0, dtype=torch.long, device=d)),
    "argmax of bool (found by a reduction sweep)": lambda d: torch.argmax(torch.ones(4, 3, dtype=torch.bool, device=d), 0),
    "argmin of bool, no dim": lambda d: torch.ones(4, 3, dtype=torch.bool, device=d).argmin(),
    "argmax of an empty bool (the dtype is checked first)": lambda d: torch.zeros(0, 3, dtype=torch.bool, device=d).argmax(0),
    "index tensors that do not broadcast": lambda d: torch.zeros(4, 5, device=d)[
        torch.tensor([0, 1], device=d), torch.tensor([0, 1, 2], device=d)],
    "index_put_ indices that do not broadcast": lambda d: torch.zeros(4, 5, device=d).index_put_(
        (torch.tensor([0, 1], device=d), torch.tensor([0, 1, 2], device=d)), torch.tensor(1.0, device=d)),
}


def assert_raises_like_cpu(fn, sync=True):
    """fn(device) raises on tpu what it raises on CPU: type and first line of the message
    (without C++'s "Triggered internally" note). sync=False: raised by the call itself."""
    with pytest.raises(Exception) as cpu:
        fn("cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception) as ours:
            fn("tpu")
            if sync:
                torch.tpu.synchronize()
    first = lambda e: str(e).split("\n")[0].split(" (Triggered internally")[0]  # noqa: E731
    assert type(ours.value) is type(cpu.value), (ours.value, cpu.value)
    assert first(ours.value) == first(cpu.value)
    torch.tpu.synchronize()  # nothing left pending


@pytest.mark.parametrize("name", list(SAME_ERROR))
def test_same_error_as_cpu(name):
    assert_raises_like_cpu(SAME_ERROR[name])


def test_out_resize_warns_on_every_call():
    for device in ("cpu", "tpu"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                torch.add(torch.ones(3, device=device), 1, out=torch.empty(5, device=device))
                torch.add(torch.ones(3, device=device), 1, out=torch.empty(0, device=device))  # empty: no warning
        resized = [w for w in caught if "was resized" in str(w.message)]
        assert len(resized) == 3, (device, [str(w.message) for w in caught])


@pytest.mark.parametrize("shape", [(), (2,)], ids=["0-dim", "1-dim"])
def test_cpu_tensor_as_out_is_refused(shape):
    out = torch.empty(shape)
    x = torch.ones(shape, device="tpu")
    with pytest.raises(RuntimeError, match="Expected out tensor to have device tpu:0, but got cpu instead"):
        torch.add(x, 1, out=out)
    with pytest.raises(RuntimeError, match="device"):
        out.add_(x)


# test_ops TestCommon.test_out: composites that take out= (PyTorch's copies into any device)
def test_composite_out_on_cpu_is_refused():
    x, v = torch.ones(2, 3, device="tpu"), torch.ones(2, device="tpu")
    with pytest.raises(RuntimeError, match="Expected out tensor to have device tpu:0, but got cpu instead"):
        torch.addr(x, v, torch.ones(3, device="tpu"), out=torch.empty(2, 3))


@pytest.mark.parametrize("out_shape,out_dtype", [((3, 4), torch.float32), ((0,), torch.float32),
                                                 ((2,), torch.float32), ((3, 4), torch.int64)],
                         ids=["same", "empty", "resized", "unsafe cast"])
def test_addr_out_as_cpu(out_shape, out_dtype):
    s, a, b = torch.randn(3, 4), torch.randn(3), torch.randn(4)
    check_like_cpu(lambda s, a, b: torch.addr(s, a, b, beta=2, alpha=0.5, out=torch.empty(
        out_shape, dtype=out_dtype, device=s.device)), s, a, b)


@pytest.mark.parametrize("out_dtype", [torch.float64, torch.float32, torch.int64], ids=str)
def test_cat_of_three_dtypes_into_an_out(out_dtype):
    a, b, c = torch.arange(3, dtype=torch.int32), torch.arange(2, dtype=torch.int8), torch.ones(2, dtype=torch.int16)
    check_like_cpu(lambda a, b, c: torch.cat([a, b, c], out=torch.empty(0, dtype=out_dtype, device=a.device)), a, b, c)


@pytest.mark.parametrize("out_dtype", [torch.int64, torch.bool, torch.float16], ids=str)
def test_bernoulli_draws_into_an_out_of_any_dtype(out_dtype):
    # CPU's bernoulli_out is bernoulli_ on out: an integer or bool out= is no unsafe cast
    p = torch.tensor([0.0, 1.0, 0.0, 1.0], device="tpu")
    out = torch.full((4,), 7, dtype=out_dtype, device="tpu")
    torch.bernoulli(p, out=out)
    assert out.dtype == out_dtype
    assert torch.equal(out.cpu(), torch.tensor([0, 1, 0, 1]).to(out_dtype))


def test_uint8_mask_indexes_like_bool():
    x = torch.arange(8.0).reshape(2, 4)
    m = torch.tensor([1, 0, 1, 1], dtype=torch.uint8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = x[:, m]
        actual = x.to("tpu")[:, m.to("tpu")]
    assert_same(actual, expected)


# ---------------------------------------------------------------- every dtype CPU stores
# Dtypes the runtime has no kernels for live on tpu as storage; their ops run on the CPU
# fallback, so results (and refusals) are CPU's.
EXTRA_DTYPES = [torch.uint16, torch.uint32, torch.uint64, torch.complex32, torch.float8_e4m3fn, torch.float8_e5m2,
                torch.float8_e4m3fnuz, torch.float8_e5m2fnuz, torch.float8_e8m0fnu, torch.bits8]
EXTRA_DTYPE_OPS = {
    "clone": lambda x: x.clone(),
    "copy_ into a transposed view": lambda x: torch.zeros_like(x).t().copy_(x.t()),
    "contiguous of a transpose": lambda x: x.t().contiguous(),
    "slice view": lambda x: x[1:, ::2].clone(),
    "to float32": lambda x: x.float() if x.dtype != torch.bits8 else x.view(torch.uint8).float(),
    "from float32": lambda x: torch.full((2, 3), 2.5).to(x.device).to(x.dtype),
    "add": lambda x: x + x,
    "mul": lambda x: x * x,
    "eq": lambda x: x == x,
    "abs": lambda x: x.abs(),
    "sum": lambda x: x.sum(),
    "sort": lambda x: x.sort()[0],
    "cat": lambda x: torch.cat([x, x]),
    "where": lambda x: torch.where(torch.ones(3, dtype=torch.bool, device=x.device), x, x),
    "index": lambda x: x[torch.tensor([1, 0], device=x.device)],
    "fill_": lambda x: x.fill_(1),
    "zero_": lambda x: x.zero_(),
    "mm": lambda x: x[:, :2] @ x[:, :2].t(),
    "view as uint8 bytes": lambda x: x.view(torch.uint8) if x.element_size() == 1 else x.view(torch.int16),
}


def _extra(dtype):
    if dtype == torch.bits8:
        return torch.tensor([[1, 2, 3], [4, 5, 6]], dtype=torch.uint8).view(torch.bits8)
    return torch.tensor([[1.0, 2.0, 0.5], [4.0, 0.25, 3.0]]).to(dtype)


@pytest.mark.parametrize("name", list(EXTRA_DTYPE_OPS))
@pytest.mark.parametrize("dtype", EXTRA_DTYPES, ids=str)
def test_dtypes_the_runtime_only_stores(dtype, name):
    check_like_cpu(EXTRA_DTYPE_OPS[name], _extra(dtype))


@pytest.mark.parametrize("dtype", EXTRA_DTYPES, ids=str)
def test_extra_dtype_factories(dtype):
    e = torch.empty(2, 0, 3, dtype=dtype, device="tpu")
    assert e.dtype == dtype and e.shape == (2, 0, 3) and e.device.type == "tpu"
    z = torch.zeros(2, 3, dtype=dtype, device="tpu")
    assert_same(z, torch.zeros(2, 3, dtype=dtype))


def test_quantized_tensors_live_on_the_device():
    # test_view_ops' test_ravel and test_shape_ops' test_flatten build quantized tensors on the
    # device (tests/test_quantized.py covers quantized tensors in full)
    q = torch._empty_affine_quantized([5, 5], scale=2, zero_point=3, dtype=torch.quint8, device="tpu")
    assert q.is_quantized and q.device.type == "tpu" and q.ravel()._base is q and q.flatten(0, 1).is_contiguous()
    nc = q.t().ravel()
    assert nc._base is not q and nc.is_contiguous() and (nc.q_scale(), nc.q_zero_point()) == (2.0, 3)
    assert torch.equal(nc.int_repr().cpu(), q.cpu().t().ravel().int_repr())
    # plain factories with a quantized dtype do what CPU does: empty gives a tensor whose
    # quantizer is unknown, zeros has no kernel
    for device in ("cpu", "tpu"):
        assert torch.empty(3, dtype=torch.qint8, device=device).is_quantized
        with pytest.raises(NotImplementedError, match="Quantized"):
            torch.zeros(3, dtype=torch.qint8, device=device)


@pytest.mark.parametrize("call", ["method", "in-place", "function"])
def test_clamp_without_bounds(call):
    fn = {"method": lambda x: x.clamp(), "in-place": lambda x: x.clamp_(), "function": lambda x: torch.clamp(x)}[call]
    for device in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="At least one of 'min' or 'max' must not be None"):
            fn(torch.ones(3, device=device))


def test_unique_dim_with_nan_orders_as_cpu():
    # CPU std::sorts the slices with a plain lexicographic <, under which NaN is unordered:
    # the order (and so values, inverse and counts) is what std::sort leaves
    x = torch.tensor([float("nan"), 0, 0, float("nan"), float("nan"), 1])
    g = torch.Generator().manual_seed(0)
    rows = torch.randint(0, 3, (60, 3), generator=g).float()
    rows[torch.rand(60, 3, generator=g) < 0.1] = float("nan")
    for t in (x, rows, rows.t().contiguous()):
        for dim in range(t.dim()):
            fn = lambda a: torch.unique(a, return_inverse=True, return_counts=True, dim=dim)  # noqa: E731
            for got, want in zip(fn(t.to("tpu")), fn(t)):
                assert_same(got, want)


# ---------------------------------------------------------------- advanced indexing (test_indexing)
def test_uint8_masks_warn_once_per_mask():
    for device in ("cpu", "tpu"):
        v = torch.randn(5, 7, 3, device=device)
        m1 = torch.tensor([1, 0, 1, 1, 0], dtype=torch.uint8, device=device)
        m2 = torch.tensor([1, 1, 1], dtype=torch.uint8, device=device)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert v[m1, :, m2].shape == (3, 7)
            v.index_put_((m1,), torch.ones(7, 3, device=device))
        messages = [str(w.message) for w in caught]
        assert len(messages) == 3 and all(m.startswith("indexing with dtype torch.uint8") for m in messages), \
            (device, messages)


INDEX_ERRORS = {
    "index into a size-0 dim": lambda d: torch.empty(10, 0, device=d)[:, [0, 1]],
    "out of bounds, second index": lambda d: torch.empty(3, 5, device=d)[:, [7]],
    "out of bounds, negative": lambda d: torch.empty(3, 5, device=d)[[-4]],
    "float index tensor": lambda d: torch.tensor([1, 2, 3], device=d)[torch.tensor([], device=d)],
    "int8 index tensor": lambda d: torch.tensor([1, 2, 3], device=d)[torch.tensor([0], dtype=torch.int8, device=d)],
    "index_put_ value shape": lambda d: torch.zeros(4, device=d).index_put_(
        (torch.tensor([0, 1], device=d),), torch.ones(3, device=d)),
    "setitem with a mask and too many values": lambda d: torch.zeros(4, device=d).__setitem__(
        torch.tensor([True, False, True, False], device=d), torch.ones(3, device=d)),
}


@pytest.mark.parametrize("name", list(INDEX_ERRORS))
def test_indexing_errors_raise_from_the_call_as_cpu(name):
    assert_raises_like_cpu(INDEX_ERRORS[name], sync=False)  # strict mode: not at a later synchronization


def test_torchscript_index_put_with_a_mask():
    def fill_small(x):
        x[x < 50] = 1.0
        return x
    import inspect
    if not inspect.getsourcefile(fill_small):
        pytest.skip("TorchScript needs the source")
    scripted = torch.jit.script(fill_small)
    x = torch.arange(100.0)
    assert_same(scripted(x.clone().to("tpu")), scripted(x.clone()))


# ---------------------------------------------------------------- reductions compute in the out= dtype
OUT_DTYPE_REDUCTIONS = {
    "sum dim": lambda x, o: torch.sum(x, 0, out=o),
    "prod dim": lambda x, o: torch.prod(x, 0, out=o),
    "cumsum": lambda x, o: torch.cumsum(x, 0, out=o),
    "cumprod": lambda x, o: torch.cumprod(x, 0, out=o),
    "nansum into an integer": lambda x, o: torch.nansum(x, 0, out=o),
    "logcumsumexp into another dtype": lambda x, o: torch.logcumsumexp(x, 0, out=o),
}


@pytest.mark.parametrize("out_dtype", [torch.int64, torch.int8, torch.float64], ids=str)
@pytest.mark.parametrize("name", list(OUT_DTYPE_REDUCTIONS))
def test_reductions_compute_in_the_out_dtype(name, out_dtype):
    # CPU casts the input to out='s dtype first: sum(x, out=int64) is sum(x.long())
    x = torch.tensor([[13.6, -2.5], [7.7, 3.9], [-4.5, 0.6], [-10.2, 1.5]])
    fn = OUT_DTYPE_REDUCTIONS[name]
    check_like_cpu(lambda t: fn(t, torch.empty(0, dtype=out_dtype, device=t.device)), x)


SCAN_CHECKS = {
    "logcumsumexp of integers": lambda d: torch.logcumsumexp(torch.ones(3, dtype=torch.int64, device=d), 0),
    "cummax int32 indices": lambda d: torch.cummax(torch.ones(3, device=d), 0, out=(
        torch.empty(0, device=d), torch.empty(0, dtype=torch.int32, device=d))),
    "cummin values of another dtype": lambda d: torch.cummin(torch.ones(3, device=d), 0, out=(
        torch.empty(0, dtype=torch.float64, device=d), torch.empty(0, dtype=torch.int64, device=d))),
}


@pytest.mark.parametrize("name", list(SCAN_CHECKS))
def test_scan_checks(name):
    assert_raises_like_cpu(SCAN_CHECKS[name])


@pytest.mark.parametrize("exponent", [1 + 2j, 2 + 0j, 0.5 - 1j])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16], ids=str)
def test_real_tensor_to_a_complex_scalar_power(dtype, exponent):
    x = torch.tensor([2.0, 3.0, 0.5, 1.0]).to(dtype)
    actual, expected = both(lambda t: torch.pow(t, exponent), x)
    assert actual.dtype == expected.dtype == torch.complex64
    torch.testing.assert_close(actual.cpu(), expected)


def test_cpu_index_tensors_index_a_tpu_tensor_natively():
    # as on CUDA, index tensors on the host move to the device: no CPU fallback
    x = torch.arange(12.0).reshape(3, 4)
    torch_tpu.metrics.reset()
    got = x.to("tpu")[torch.tensor([0, 2]), torch.tensor([1, 3])]
    assert_same(got, x[torch.tensor([0, 2]), torch.tensor([1, 3])])
    y, t = x.clone(), x.to("tpu")
    y[torch.tensor([True, False, True])] = 5.0
    t[torch.tensor([True, False, True])] = 5.0
    assert_same(t, y)
    assert not torch_tpu.metrics.fallback_ops(), torch_tpu.metrics.fallback_ops()


@pytest.mark.parametrize("op", [lambda x, i: x.index_select(0, i), lambda x, i: x.gather(0, i.view(-1, 1)),
                                lambda x, i: x.take(i), lambda x, i: torch.nn.functional.embedding(i, x)],
                         ids=["index_select", "gather", "take", "embedding"])
def test_cpu_index_tensors_of_other_ops_are_refused_as_on_cuda(op):
    # CUDA's generated wrappers check these ops' devices (only index/index_put take host indices)
    x = torch.arange(12.0, device="tpu").reshape(4, 3)
    with pytest.raises(RuntimeError, match="same device"):
        op(x, torch.tensor([0, 2]))
    assert_same(op(x, torch.tensor([0, 2], device="tpu")), op(x.cpu(), torch.tensor([0, 2])))


def test_every_tpu_check_names_a_native_overload():
    from torch_tpu.tpu_checks import CHECKS
    native = {n for n, _ in torch_tpu._C._native_ops()}
    assert not [n for n in CHECKS if n not in native]


MORE_CPU_CHECKS = {
    "index_add into a 0-dim self": lambda d: torch.tensor(1.0, device=d).index_add(
        0, torch.tensor([0], device=d), torch.tensor([2.0], device=d)),
    "index_reduce into a 0-dim self": lambda d: torch.tensor(1.0, device=d).index_reduce(
        0, torch.tensor([0], device=d), torch.tensor([2.0], device=d), "prod"),
    "index_add source shape": lambda d: torch.ones(5, 5, device=d).index_add(
        1, torch.tensor([0, 1, 1, 1, 2], device=d), torch.ones(1, 5, device=d)),
    "mv of a 0-dim matrix": lambda d: torch.mv(torch.tensor(1.0, device=d), torch.ones(3, device=d)),
    "softmax backward shapes": lambda d: torch.ops.aten._softmax_backward_data(
        torch.tensor(1.0, device=d), torch.ones(5, device=d), 0, torch.float32),
    "max_pool2d of a 0-dim input": lambda d: torch.nn.functional.max_pool2d(torch.tensor(1.0, device=d), 2),
    "max_pool2d backward of a 0-dim input": lambda d: torch.ops.aten.max_pool2d_with_indices_backward(
        torch.tensor(1.0, device=d), torch.tensor(1.0, device=d), [2, 2], [2, 2], [0, 0], [1, 1], False,
        torch.tensor(0, device=d)),
    "grid_sampler_2d of a 0-dim input": lambda d: torch.ops.aten.grid_sampler_2d(
        torch.tensor(1.0, device=d), torch.ones(1, 2, 2, 2, device=d), 0, 0, False),
    "angle into an integer out=": lambda d: torch.angle(torch.ones(3, device=d), out=torch.empty(3, dtype=torch.long,
                                                                                             device=d)),
    "histogram hist out= dtype": lambda d: torch.histogram(torch.ones(3, device=d), 4, out=(
        torch.empty(0, dtype=torch.long, device=d), torch.empty(0, device=d))),
    "in-place abs of complex": lambda d: torch.tensor([1 + 1j], device=d).abs_(),
    "remainder of bools": lambda d: torch.remainder(torch.tensor([True], device=d), torch.tensor([True], device=d)),
    "fmod of bools": lambda d: torch.fmod(torch.tensor([True], device=d), torch.tensor([True], device=d)),
    "floor division of bools": lambda d: torch.div(torch.tensor([True], device=d), torch.tensor([True], device=d),
                                                   rounding_mode="floor"),
    "trunc division of bools": lambda d: torch.div(torch.tensor([True], device=d), torch.tensor([True], device=d),
                                                   rounding_mode="trunc"),
    "pow of bool tensors": lambda d: torch.pow(torch.tensor([True], device=d), torch.tensor([True], device=d)),
    "isposinf into a float out=": lambda d: torch.isposinf(torch.ones(3, device=d), out=torch.empty(3, device=d)),
    "isneginf into an int out=": lambda d: torch.isneginf(torch.ones(3, device=d),
                                                          out=torch.empty(3, dtype=torch.long, device=d)),
    "solve_triangular out= dtype": lambda d: torch.linalg.solve_triangular(
        torch.eye(3, device=d), torch.ones(3, 2, device=d), upper=True, out=torch.empty(0, dtype=torch.float64,
                                                                                        device=d)),
}


@pytest.mark.parametrize("name", list(MORE_CPU_CHECKS))
def test_more_cpu_checks(name):
    assert_raises_like_cpu(MORE_CPU_CHECKS[name])


@pytest.mark.parametrize("op", ["native_batch_norm", "_native_batch_norm_legit", "_batch_norm_with_update"])
def test_batch_norm_of_a_0_dim_input_raises_cpu_type(op):
    fn = getattr(torch.ops.aten, op)
    args = lambda d: (torch.tensor(1.0, device=d), None, None, torch.zeros(1, device=d), torch.ones(1, device=d))  # noqa
    extra = (0.1, 1e-5) if op == "_batch_norm_with_update" else (True, 0.1, 1e-5)
    with pytest.raises(Exception) as cpu:
        fn(*args("cpu"), *extra)
    with pytest.raises(Exception) as ours:
        fn(*args("tpu"), *extra)
    assert type(ours.value) is type(cpu.value)


def test_out_resize_warns_in_torch_tpu_meta_functions():
    # aminmax, geqrf and histogram have torch_tpu meta functions: they warn as CPU does
    x = torch.randn(4, 4)
    for device in ("cpu", "tpu"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.aminmax(x.to(device), out=(torch.empty(3, device=device), torch.empty(3, device=device)))
            torch.geqrf(x.to(device), out=(torch.empty(3, device=device), torch.empty(3, device=device)))
        assert sum("was resized" in str(w.message) for w in caught) == 4, device


@pytest.mark.parametrize("name", ["special.zeta", "special.chebyshev_polynomial_t", "special.hermite_polynomial_h",
                                  "atan2", "special.xlog1py"])
@pytest.mark.parametrize("out_dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_integer_inputs_compute_in_float32_whatever_the_out_dtype(name, out_dtype):
    # CPU promotes integer inputs to the default float dtype and casts into out=: int16 inputs
    # into a float16 out= work even for ops without a float16 kernel
    fn = eval("torch." + name)
    a, b = torch.tensor([1, 2, 3], dtype=torch.int16), torch.tensor([1, 2, 3], dtype=torch.int32)
    actual, expected = both(lambda x, y: fn(x, y, out=torch.empty(3, dtype=out_dtype, device=x.device)), a, b)
    assert actual.dtype == expected.dtype == out_dtype
    torch.testing.assert_close(actual.cpu(), expected)  # special functions: float32 rounding, not bits


def test_abs_of_complex_into_a_complex_out():
    # CPU stores |z| as a complex number; PyTorch's meta function refuses it (tpu: CPU fallback)
    z = torch.tensor([1 + 1j, -2 + 0.5j])
    actual, expected = both(lambda t: torch.abs(t, out=torch.empty(2, dtype=torch.complex64, device=t.device)), z)
    assert_same(actual, expected)


# ---------------------------------------------------------------- every dtype pair, with and without out=
GRID_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
               torch.bfloat16, torch.float32, torch.float64]
GRID_OPS = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "floor division": lambda a, b, **k: torch.div(a, b, rounding_mode="floor", **k),
    "maximum": torch.maximum, "remainder": torch.remainder, "pow": torch.pow, "atan2": torch.atan2,
    "bitwise_and": torch.bitwise_and, "eq": torch.eq, "lt": torch.lt,
}


def _grid_operand(dtype, shape, g):
    x = torch.randn(shape, generator=g, dtype=torch.float64) * 5
    if dtype == torch.bool:
        return x > 0
    return (x if dtype.is_floating_point else x.round().clamp(1, 9)).to(dtype)


@pytest.mark.parametrize("name", list(GRID_OPS))
def test_binary_ops_over_every_dtype_pair_and_out_dtype(name):
    """Promotion, the common dtype's rounding and CPU's refusals, over 10 x 10 dtypes, a tensor
    or 0-dim second operand and four out= choices: values as CPU (f16/bf16 to their rounding)."""
    fn, g = GRID_OPS[name], torch.Generator().manual_seed(0)
    for da, db in itertools.product(GRID_DTYPES, GRID_DTYPES):
        a, b = _grid_operand(da, (4, 5), g), _grid_operand(db, (5,), g)
        for other in (b, b[0].clone()):
            for out_dtype in (None, torch.float32, torch.int64, torch.float16):
                def call(x, y):
                    out = {} if out_dtype is None else {"out": torch.empty(0, dtype=out_dtype, device=x.device)}
                    return fn(x, y, **out)
                try:
                    expected = call(a, other)
                except Exception as e:  # noqa: BLE001 - CPU's refusal is the contract
                    with pytest.raises(type(e)):
                        call(a.to("tpu"), other.to("tpu"))
                    continue
                actual = call(a.to("tpu"), other.to("tpu")).cpu()
                what = (name, da, db, other.dim(), out_dtype)
                assert actual.dtype == expected.dtype and actual.shape == expected.shape, what
                if expected.is_floating_point():
                    low = expected.dtype in (torch.float16, torch.bfloat16)
                    torch.testing.assert_close(actual, expected, rtol=1e-3 if low else 1e-5, atol=1e-5, equal_nan=True,
                                               msg=str(what))
                else:
                    assert torch.equal(actual, expected), what


# ---------------------------------------------------------------- lerp, bit for bit
@pytest.mark.parametrize("dtype", REDUCED + [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("weight", [0.3, 0.7, -0.2, 1.5, "tensor"])
def test_lerp_as_cpu_bit_for_bit(dtype, weight):
    # CPU keeps a Scalar weight in float (opmath): rounding it to bfloat16/float16 first changed
    # a third of the results by an ulp (found by PyTorch's own half tolerances); and CPU's
    # vectorized lerp is one fused multiply-add (two roundings changed a quarter of float32's)
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(1003, generator=g).to(dtype) for _ in range(2))
    w = (torch.rand(1003, generator=g) * 2 - 0.5).to(dtype) if weight == "tensor" else weight
    actual, expected = both(lambda a, b, w: torch.lerp(a, b, w), a, b, w)
    assert_same(actual, expected)


@pytest.mark.parametrize("dtype", REDUCED + [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("op", ["add", "sub", "rsub", "sub_", "addcmul"])
def test_alpha_as_cpu_bit_for_bit(dtype, op):
    # CPU's vectorized add is one fused multiply-add with alpha in the tensors' dtype (rounded to
    # float16/bfloat16 there); two roundings, or alpha in float, changed up to a quarter of the
    # results. 4096 elements: CPU's scalar tail (the last few of other sizes) rounds twice.
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(4096, generator=g).to(dtype) for _ in range(2))
    fn = {"add": lambda a, b: torch.add(a, b, alpha=0.3), "sub": lambda a, b: torch.sub(a, b, alpha=0.3),
          "rsub": lambda a, b: torch.rsub(a, b, alpha=0.3), "sub_": lambda a, b: a.clone().sub_(b, alpha=0.3),
          "addcmul": lambda a, b: torch.addcmul(a, b, b.flip(0), value=0.3)}[op]
    actual, expected = both(fn, a, b)
    assert_same(actual, expected)


@pytest.mark.parametrize("dtype", REDUCED + [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("op", ["lerp", "add", "sub", "addcmul"])
def test_foreach_alpha_and_lerp_as_cpu_bit_for_bit(dtype, op):
    # AdamW's default path on tpu: the foreach forms round as CPU's per-tensor kernels
    g = torch.Generator().manual_seed(0)
    selves, others = ([torch.randn(4096, generator=g).to(dtype) for _ in range(3)] for _ in range(2))
    fn = {"lerp": lambda s, o: torch._foreach_lerp_(s, o, 0.3),
          "add": lambda s, o: torch._foreach_add_(s, o, alpha=0.3),
          "sub": lambda s, o: torch._foreach_sub_(s, o, alpha=0.3),
          "addcmul": lambda s, o: torch._foreach_addcmul_(s, o, o, value=0.3)}[op]
    ours = [t.to("tpu") for t in selves]
    fn(selves, others)
    fn(ours, [t.to("tpu") for t in others])
    for actual, expected in zip(ours, selves):
        assert_same(actual, expected)


# ---------------------------------------------------------------- where CPU is wrong
def test_embedding_bag_scale_grad_by_freq_divides_by_each_index_count():
    # CPU 2.13 divides by the count of another index (pytorch/pytorch#190063, fixed after
    # 2.13); tpu gives the documented gradient, as CUDA: each row's by its own frequency
    idx, offsets = torch.tensor([1, 1, 3, 5, 1]), torch.tensor([0, 3])
    for mode, per_bag in (("sum", [1, 1]), ("mean", [3, 2])):
        w = torch.ones(6, 2, device="tpu", requires_grad=True)
        out = torch.nn.functional.embedding_bag(idx.to("tpu"), w, offsets.to("tpu"), mode=mode,
                                                scale_grad_by_freq=True)
        out.backward(torch.ones_like(out))
        expected = torch.zeros(6, 2)
        for bag, ids in enumerate((idx[:3], idx[3:])):
            for i in ids:
                expected[i] += 1 / per_bag[bag] / int((idx == i).sum())
        torch.testing.assert_close(w.grad.cpu(), expected)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_uint8_interpolation_rounds_and_saturates(mode):
    # bicubic overshoots below 0 and above 255; CPU saturates, the tpu kernel's plain conversion
    # wrapped -1.6 to 255 (found by the full conformance sweep). CPU's uint8 path is PIL-SIMD's
    # separable fixed-point resampler (up to 21 from float64 for bicubic), so the reference is
    # float64, rounded and saturated (source coordinates in float32 below float64, as on CPU: 1e-4).
    x = torch.randint(0, 256, (1, 3, 30, 40), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    f = lambda t: torch.nn.functional.interpolate(t, size=(45, 71), mode=mode, align_corners=False)  # noqa: E731
    want = f(x.double()).clamp(0, 255)
    got = f(x.to("tpu")).cpu()
    assert got.dtype == torch.uint8
    assert (got.double() - want).abs().max().item() <= 0.5 + 1e-4


# ---------------------------------------------------------------- NaN into activations' backwards
# CPU's vectorized loop and its scalar loop send a NaN input to different sides of these ops'
# comparisons; tpu takes the scalar loop's side: the formula CPU states, and what CPU computes
# for small and strided tensors (every OpInfo sample and gradcheck) and a tensor's tail.
_A = torch.ops.aten
NAN_BACKWARDS = {
    "hardtanh_backward": lambda g, x: _A.hardtanh_backward(g, x, -1, 1),
    "hardshrink_backward": lambda g, x: _A.hardshrink_backward(g, x, 0.5),
    "softshrink_backward": lambda g, x: _A.softshrink_backward(g, x, 0.5),
    "elu_backward": lambda g, x: _A.elu_backward(g, 1.0, 1.0, 1.0, False, x),
    "elu_backward from the result": lambda g, x: _A.elu_backward(g, 1.0, 1.0, 1.0, True, x),
    "hardswish_backward": _A.hardswish_backward,
    "logit_backward": lambda g, x: _A.logit_backward(g, x, 0.1),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", list(NAN_BACKWARDS))
def test_nan_input_of_an_activation_backward_takes_cpus_scalar_side(name, dtype):
    x = torch.linspace(-2, 2, 128, dtype=dtype)[::2].clone()
    x[0] = float("nan")
    g = torch.linspace(0.5, 1.5, 64, dtype=dtype)
    # strided operands: CPU's scalar loop on every instruction set
    actual, expected = both(lambda g, x: NAN_BACKWARDS[name](g[::2], x[::2]), g.repeat_interleave(2), x.repeat_interleave(2))
    actual = actual.cpu()
    torch.testing.assert_close(actual[:1], expected[:1], rtol=0, atol=0, equal_nan=True)  # the NaN's side, bit for bit
    torch.testing.assert_close(actual, expected, equal_nan=True)  # the rest to rounding (exp: vector math vs libm)


# ---------------------------------------------------------------- float to integer casts
# CPU's casts compile to x86's truncating conversions: NaN and out-of-range values become the
# "integer indefinite" (INT32_MIN for int32 and every narrower type, whose bits are its low
# ones; INT64_MIN for int64). tpu wrapped an int64 conversion instead (1e10 -> int32 gave
# 1410065408 where CPU gives -2147483648; found by OpInfo's reference inputs).
OUT_OF_RANGE = [1e10, -1e10, float("inf"), -float("inf"), float("nan"), 2.5e9, -2.5e9, 2147483520.0, -2147483648.0,
                1e20, 65536.7, -32769.2, 300.5, -129.9, 255.9, -1.5, 4294967296.0, -2147483904.0]


@pytest.mark.parametrize("src", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("dst", [torch.int32, torch.int16, torch.int8, torch.uint8, torch.int64])
def test_float_to_integer_casts_out_of_range_as_cpu(src, dst):
    x = torch.tensor(OUT_OF_RANGE * 4, dtype=torch.float64).to(src)
    for cast in (lambda t: t.to(dst), lambda t: t[::3].to(dst),
                 lambda t: torch.empty(t.shape, dtype=dst, device=t.device).copy_(t)):
        actual, expected = both(cast, x)
        assert_same(actual, expected)


# test_reductions.py (torch 2.1's revision): out= dtypes CPU's reduction kernels refuse, which
# tpu wrote into (mode's indices into a float64 tensor), and CPU's wording of the checks.
def _pair_out(op, values_dtype, indices_dtype, *args):
    return lambda d: op(torch.arange(12.0, device=d).reshape(3, 4), *args, out=(
        torch.empty(3, dtype=values_dtype, device=d), torch.empty(3, dtype=indices_dtype, device=d)))


REDUCTION_CHECKS = {
    **{f"{name} out=({v}, {i})": _pair_out(op, v, i, *args)
       for name, op, args in [("mode", torch.mode, (1,)), ("median", torch.median, (1,)),
                              ("nanmedian", torch.nanmedian, (1,)), ("kthvalue", torch.kthvalue, (2, 1)),
                              ("sort", torch.sort, (1,))]
       for v, i in [(torch.float64, torch.int64), (torch.float32, torch.int32), (torch.float64, torch.int32),
                    (torch.int32, torch.int64)]},
    "aminmax out= dtype": lambda d: torch.aminmax(torch.ones(3, 4, device=d), dim=1, out=(
        torch.empty(3, dtype=torch.float64, device=d), torch.empty(3, dtype=torch.float64, device=d))),
    **{f"{name} into a {dt} out=": (lambda name, dt: lambda d: getattr(torch, name)(
        torch.ones(3, 4, device=d), 1, out=torch.empty(3, dtype=dt, device=d)))(name, dt)
       for name in ("all", "any") for dt in (torch.float32, torch.int32, torch.int64)},
    "all over everything into a float out=": lambda d: torch.all(torch.ones(3, device=d),
                                                                 out=torch.empty((), device=d)),
    **{f"{name} over a repeated dim {dims}": (lambda name, dims: lambda d: getattr(torch, name)(
        torch.ones(3, 3, device=d), dim=dims))(name, dims)
       for name in ("sum", "mean", "nansum", "std", "var", "logsumexp", "norm", "amax", "amin", "std_mean",
                    "var_mean", "count_nonzero") for dims in [(0, 0), (1, -1)]},
    "linalg.vector_norm over a repeated dim": lambda d: torch.linalg.vector_norm(torch.ones(3, 3, device=d),
                                                                                 dim=(0, 0)),
    "median over an empty dim": lambda d: torch.median(torch.ones(2, 0, 3, device=d), dim=1),
    "nanmedian over an empty dim": lambda d: torch.nanmedian(torch.ones(0, 3, device=d), dim=0),
    "mean of ints": lambda d: torch.mean(torch.ones(3, dtype=torch.int32, device=d)),
    "mean with an integer dtype=": lambda d: torch.mean(torch.ones(3, device=d), 0, dtype=torch.int32),
    "logsumexp into an integer out=": lambda d: torch.logsumexp(torch.ones(3, 4, device=d), 1,
                                                                out=torch.empty(3, dtype=torch.int32, device=d)),
    "bincount of floats": lambda d: torch.bincount(torch.ones(3, device=d)),
}


@pytest.mark.parametrize("name", list(REDUCTION_CHECKS))
def test_reduction_checks_as_cpu(name):
    assert_raises_like_cpu(REDUCTION_CHECKS[name])


@pytest.mark.parametrize("name", ["all", "any"])
@pytest.mark.parametrize("in_dtype,out_dtype", [(torch.uint8, torch.bool), (torch.float32, torch.uint8),
                                                (torch.int32, torch.bool), (torch.uint8, torch.uint8)], ids=str)
def test_all_any_into_a_bool_or_uint8_out(name, in_dtype, out_dtype):
    x = torch.tensor([[0, 1, 2], [3, 4, 5]], dtype=in_dtype)
    for args in [(1,), ((0, 1),), ()]:
        expected = getattr(torch, name)(x, *args, out=torch.empty(0, dtype=out_dtype))
        actual = getattr(torch, name)(tpu(x), *args, out=torch.empty(0, dtype=out_dtype, device="tpu"))
        assert_same(actual, expected)


def test_nansum_with_a_dtype():
    # the check received dtype= as an int (the dispatcher's ScalarType) and raised AttributeError
    x = torch.tensor([1.0, float("nan"), 2.5], dtype=torch.float16)
    for dtype in (torch.float32, torch.float64):
        assert_same(torch.nansum(tpu(x), dtype=dtype), torch.nansum(x, dtype=dtype))


# test_reductions.py's nansum(dtype=float16): a reduction's dtype= casts the input first (sum of
# x.half()), as PyTorch documents and CPU does; tpu summed the float32/float64 values and rounded
# once. The reference: the cast input reduced in float64, correctly rounded to dtype.
NARROWING_REDUCTIONS = {
    "sum": lambda x, dt: torch.sum(x, dtype=dt), "sum dim": lambda x, dt: torch.sum(x, 1, dtype=dt),
    "nansum": lambda x, dt: torch.nansum(x, dtype=dt), "nansum dim": lambda x, dt: torch.nansum(x, 1, dtype=dt),
    "mean": lambda x, dt: torch.mean(x, dtype=dt), "mean dim": lambda x, dt: torch.mean(x, 1, dtype=dt),
    "prod dim": lambda x, dt: torch.prod(x, 1, dtype=dt), "cumsum": lambda x, dt: torch.cumsum(x, 1, dtype=dt),
    "cumprod": lambda x, dt: torch.cumprod(x, 1, dtype=dt),
    "sum into an out=": lambda x, dt: torch.sum(x, 1, out=torch.empty(0, dtype=dt, device=x.device)),
}


@pytest.mark.parametrize("src,dst", [(torch.float64, torch.float32), (torch.float64, torch.float16),
                                     (torch.float32, torch.float16), (torch.float32, torch.bfloat16)], ids=str)
@pytest.mark.parametrize("name", list(NARROWING_REDUCTIONS))
def test_reduction_dtype_casts_the_input_first(name, src, dst):
    fn = NARROWING_REDUCTIONS[name]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 37, generator=g, dtype=torch.float64)
    x = (x * 0.2 + 1 if "prod" in name else x * 3).to(src)
    expected = fn(x.to(dst).double(), torch.float64).to(dst)
    assert_same(fn(tpu(x), dst), expected)


# test_tensor_creation_ops.py (torch 2.1's revision): range factories into an out= of the right
# element count keep its shape and strides (tpu resized a strided view to a vector at its offset
# and wrote over memory outside the view), random_'s integers in int64 (an int64 random_() drew
# only below 2^53), and CPU's checks of random_/uniform_/randperm/arange bounds.
RANGE_INTO_VIEWS = {
    "arange": lambda out: torch.arange(0, out.numel(), out=out),
    "arange, float step": lambda out: torch.arange(1, 1 + 0.25 * out.numel() - 0.1, 0.25, out=out),
    "linspace": lambda out: torch.linspace(-2, 7, out.numel(), out=out),
    "logspace": lambda out: torch.logspace(-1, 1, out.numel(), base=3, out=out),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.complex64], ids=str)
@pytest.mark.parametrize("view", ["narrow", "permute", "transpose"])
@pytest.mark.parametrize("name", list(RANGE_INTO_VIEWS))
def test_range_factories_into_a_strided_out(name, view, dtype):
    if dtype == torch.complex64 and name.startswith("arange"):
        pytest.skip("CPU has no complex arange")
    if dtype == torch.int64 and name == "arange, float step":
        pytest.skip("a step truncated to 0: CPU raises (the checks' tests)")
    def run(device):
        base = torch.full((4, 5, 6), -1, dtype=dtype, device=device)
        out = {"narrow": lambda b: b.narrow(2, 1, 3), "permute": lambda b: b.permute(2, 0, 1),
               "transpose": lambda b: b[1].t()}[view](base)
        shape, strides = out.shape, out.stride()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no resize warning: the element count is right
            RANGE_INTO_VIEWS[name](out)
        assert out.shape == shape and out.stride() == strides
        return base
    # float32 values within rounding of CPU's (tpu spaces points in double); every element
    # outside the view keeps its -1
    torch.testing.assert_close(run("tpu").cpu(), run("cpu"))


def test_arange_into_an_out_of_another_count_warns_and_resizes():
    for device in ("cpu", "tpu"):
        out = torch.zeros(5, device=device)
        with pytest.warns(UserWarning, match="does not match the computed number of elements 4"):
            torch.arange(0, 4, out=out)
        assert out.shape == (4,)


@pytest.mark.parametrize("args,lo,hi", [((), 0, 2**63 - 1), ((-2**63, None), -2**63, 2**63 - 1),
                                        ((2**62, None), 2**62, 2**63 - 1), ((-2**63, 2**63 - 1), -2**63, 2**63 - 2),
                                        ((2**53, 2**53 + 8), 2**53, 2**53 + 7)], ids=str)
def test_int64_random_covers_its_range_exactly(args, lo, hi):
    t = torch.empty(4000, dtype=torch.int64, device="tpu").random_(*args).cpu()
    assert lo <= t.min().item() and t.max().item() <= hi
    span = hi - lo + 1
    # uniform over the span: the extremes lie within 1% of the ends (4000 draws)
    assert t.min().item() - lo <= span // 100 and hi - t.max().item() <= span // 100
    if span <= 8:
        assert set(t.tolist()) == set(range(lo, hi + 1))  # exact integers above 2^53


RANDOM_CHECKS = {
    **{f"random_ of {dt} from {a}": (lambda dt, a: lambda d: torch.empty(3, dtype=dt, device=d).random_(*a))(dt, a)
       for dt in (torch.int8, torch.uint8, torch.bool, torch.float16)
       for a in [(-200, 5), (0, 300), (5, None), (-2**63, None), (0, 2**17), (3, 3), (0, -2**31 - 1)]},
    "uniform_ beyond float": lambda d: torch.empty(3, device=d).uniform_(-1e308, 1e308),
    "uniform_ wider than double": lambda d: torch.empty(3, dtype=torch.float64, device=d).uniform_(-1.7e308, 1.7e308),
    "uniform_ reversed": lambda d: torch.empty(3, device=d).uniform_(1, 0),
    "randperm into half": lambda d: torch.randperm(2**12, out=torch.empty(0, dtype=torch.float16, device=d)),
    "randperm into int8": lambda d: torch.randperm(300, out=torch.empty(0, dtype=torch.int8, device=d)),
    "arange to nan": lambda d: torch.arange(-5, float("nan"), device=d),
    "arange from -inf": lambda d: torch.arange(float("-inf"), 10, device=d),
}


@pytest.mark.parametrize("name", [n for n in RANDOM_CHECKS])
def test_random_checks_as_cpu(name):
    try:
        RANDOM_CHECKS[name]("cpu")
    except Exception:  # noqa: BLE001 - CPU's exception is the contract
        assert_raises_like_cpu(RANDOM_CHECKS[name])
        return
    RANDOM_CHECKS[name]("tpu")  # CPU accepts: so must tpu
    torch.tpu.synchronize()


def test_random_precision_warning_on_every_call():
    # CPU warns on every call; the tpu check's signature is not cached once it warned
    for device in ("cpu", "tpu"):
        t = torch.empty(8, device=device)
        for _ in range(2):
            with pytest.warns(UserWarning, match="from is out of bounds"):
                t.random_(-2**30, 5)


@pytest.mark.parametrize("reduce", [None, "add", "multiply"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.complex64], ids=str)
def test_scatter_of_a_value_rounds_it_to_self_dtype_first(dtype, reduce):
    # test_scatter_gather_ops.py: CPU combines value.to<scalar_t>(); tpu added the double value
    g = torch.Generator().manual_seed(0)
    base = torch.randn(5, 6, generator=g).to(dtype)
    idx = torch.tensor([[0, 1, 2, 3, 4, 0]])
    kw = {} if reduce is None else {"reduce": reduce}
    for value in (0.1, 1 / 3, 123.456789, 2.0 ** -20 + 1):
        assert_same(tpu(base).scatter_(0, tpu(idx), value, **kw), base.clone().scatter_(0, idx, value, **kw))


# test_type_promotion.py (torch 2.1's revision): ops whose CPU kernel keeps the input dtype refuse
# an out= of another (tpu cast into it: neg, round, clamp, the activations), integer inputs of
# float-only activations raise NotImplementedError, index_put of another dtype is refused.
def _unary_out(fn):
    return lambda src, dst: lambda d: fn(torch.tensor([1.5, -2.0, 0.25], device=d).to(src),
                                         torch.empty(0, dtype=dst, device=d))


SAME_DTYPE_OUTS = {
    "neg": lambda x, o: torch.neg(x, out=o), "floor": lambda x, o: torch.floor(x, out=o),
    "round": lambda x, o: torch.round(x, out=o), "round decimals": lambda x, o: torch.round(x, decimals=1, out=o),
    "abs": lambda x, o: torch.abs(x, out=o), "sgn": lambda x, o: torch.sgn(x, out=o),
    "bitwise_not": lambda x, o: torch.bitwise_not(x, out=o), "conj_physical": lambda x, o: torch.conj_physical(x, out=o),
    "clamp": lambda x, o: torch.clamp(x, -1, 1, out=o), "clamp_max": lambda x, o: torch.clamp_max(x, 0, out=o),
    "hardtanh": lambda x, o: torch._C._nn.hardtanh(x, out=o), "elu": lambda x, o: torch._C._nn.elu(x, out=o),
    "leaky_relu": lambda x, o: torch._C._nn.leaky_relu(x, out=o), "gelu": lambda x, o: torch._C._nn.gelu(x, out=o),
    "softshrink": lambda x, o: torch._C._nn.softshrink(x, out=o),
    "log_sigmoid": lambda x, o: torch._C._nn.log_sigmoid(x, out=o), "nan_to_num": lambda x, o: torch.nan_to_num(x, out=o),
    "signbit": lambda x, o: torch.signbit(x, out=o), "heaviside": lambda x, o: torch.heaviside(x, x, out=o),
    "hypot": lambda x, o: torch.hypot(x, x, out=o),
    "linalg.cross": lambda x, o: torch.linalg.cross(torch.stack([x] * 3), torch.stack([x] * 3), dim=0, out=o),
    "abs of complex": lambda x, o: torch.abs(torch.complex(x.double(), x.double()).to(torch.complex64), out=o),
}


@pytest.mark.parametrize("src,dst", [(torch.float32, torch.float64), (torch.float64, torch.float32),
                                     (torch.int64, torch.int32), (torch.int32, torch.float32),
                                     (torch.float32, torch.int64), (torch.int64, torch.int64)], ids=str)
@pytest.mark.parametrize("name", list(SAME_DTYPE_OUTS))
def test_out_dtype_rules_as_cpu(name, src, dst):
    call = _unary_out(SAME_DTYPE_OUTS[name])(src, dst)
    try:
        expected = call("cpu")
    except Exception:  # noqa: BLE001 - CPU's exception is the contract
        assert_raises_like_cpu(call)
        return
    assert_same(call("tpu"), expected)


MORE_TYPE_CHECKS = {
    **{f"{name} of integers": (lambda fn: lambda d: fn(torch.tensor([1, -2, 3], device=d)))(fn) for name, fn in [
        ("elu", torch._C._nn.elu), ("leaky_relu", torch._C._nn.leaky_relu), ("gelu", torch._C._nn.gelu),
        ("softshrink", torch._C._nn.softshrink), ("softplus", torch._C._nn.softplus), ("mish", torch._C._nn.mish),
        ("softmax", lambda x: torch._softmax(x, 0, False)), ("log_softmax", lambda x: torch._log_softmax(x, 0, False)),
        ("hypot", lambda x: torch.hypot(x, x)), ("bitwise_not of floats", lambda x: torch.bitwise_not(x.float())),
        ("addcdiv", lambda x: torch.addcdiv(x, x, x)), ("round decimals", lambda x: torch.round(x, decimals=1))]},
    "index_put of another dtype": lambda d: torch.ones(5, 2, dtype=torch.double, device=d).index_put_(
        (torch.tensor([0, 1], device=d),), torch.tensor(1, dtype=torch.int32, device=d)),
    "setitem of another dtype": lambda d: torch.ones(5, 2, dtype=torch.double, device=d).__setitem__(
        (slice(None), [1]), torch.zeros(5, 1, dtype=torch.int, device=d)),
}


@pytest.mark.parametrize("name", list(MORE_TYPE_CHECKS))
def test_type_checks_as_cpu(name):
    assert_raises_like_cpu(MORE_TYPE_CHECKS[name])


# test_tensor_creation_ops.py: fill_ and zero_ write through an expanded view as CPU does (its
# Tensor overload refuses), roll checks shifts before wrapping dims, polar checks dtypes as complex.
def test_fill_through_an_expanded_view():
    for make in (lambda d: torch.empty_strided((4, 3, 2), (10, 0, 3), device=d).fill_(1.5),
                 lambda d: torch.ones(3, device=d).expand(4, 3).zero_()):
        assert_same(make("tpu"), make("cpu"))


CREATION_CHECKS = {
    "fill_ of a tensor through an expanded view": lambda d: torch.zeros(3, device=d).expand(4, 3).fill_(
        torch.tensor(2.0, device=d)),
    "roll without shifts": lambda d: torch.ones(2, 4, device=d).roll(shifts=(), dims=()),
    "roll with more dims than shifts": lambda d: torch.ones(2, 4, device=d).roll(shifts=(1,), dims=(1, 2)),
    "roll with more shifts than dims": lambda d: torch.ones(2, 4, device=d).roll(shifts=(1, 2), dims=(1,)),
    "polar of mixed dtypes": lambda d: torch.polar(torch.ones(2, device=d), torch.ones(2, device=d, dtype=torch.float64)),
    "polar into a real out=": lambda d: torch.polar(torch.ones(2, device=d), torch.ones(2, device=d),
                                                    out=torch.zeros(2, device=d)),
}


@pytest.mark.parametrize("name", list(CREATION_CHECKS))
def test_creation_checks_as_cpu(name):
    assert_raises_like_cpu(CREATION_CHECKS[name])


def test_searchsorted_warns_about_non_contiguous_operands():
    # test_reductions.py's test_bucketization: CPU's TORCH_WARN_ONCE (every call with warn_always)
    torch.set_warn_always(True)
    try:
        for device in ("cpu", "tpu"):
            boundaries = torch.arange(10.0, device=device).view(2, 5).t().contiguous().t()
            values = torch.tensor([[1.5, 3.5], [2.5, 7.5]], device=device).t()
            for _ in range(2):
                with pytest.warns(UserWarning) as record:
                    torch.searchsorted(boundaries, values)
                assert sorted(str(w.message).split(" tensor")[0] for w in record) == [
                    "torch.searchsorted(): boundary", "torch.searchsorted(): input value"]
            with pytest.warns(UserWarning, match="input value tensor is non-contiguous"):
                torch.bucketize(values, boundaries[0].contiguous())
    finally:
        torch.set_warn_always(False)


DRAW_CHECKS = {
    **{f"{name} into {dt}": (lambda fn, dt: lambda d: fn(torch.empty(3, dtype=dt, device=d)))(fn, dt)
       for name, fn in [("uniform_", lambda t: t.uniform_()), ("normal_", lambda t: t.normal_()),
                        ("exponential_", lambda t: t.exponential_()), ("cauchy_", lambda t: t.cauchy_()),
                        ("log_normal_", lambda t: t.log_normal_()), ("geometric_", lambda t: t.geometric_(0.5)),
                        ("rand", lambda t: torch.rand(t.shape, dtype=t.dtype, device=t.device))]
       for dt in (torch.int32, torch.bool)},
    "arange past int64": lambda d: torch.arange(1.175494351e-38, 3.402823466e38, device=d),
    "searchsorted of a scalar in 2-d boundaries": lambda d: torch.searchsorted(torch.ones(2, 3, device=d), 1),
}


@pytest.mark.parametrize("name", list(DRAW_CHECKS))
def test_draw_checks_as_cpu(name):
    if name == "geometric_ into torch.int32":
        DRAW_CHECKS[name]("tpu")  # CPU draws integers: so does tpu
        return
    assert_raises_like_cpu(DRAW_CHECKS[name])


@pytest.mark.parametrize("dtype,out_int32", [(torch.float32, False), (torch.int32, False), (torch.int64, True),
                                             (torch.int16, False)], ids=str)
@pytest.mark.parametrize("op", ["searchsorted", "bucketize"])
def test_searchsorted_out_dtype_as_cpu(op, dtype, out_int32):
    # test_reductions.py's test_bucketization: tpu wrote indices into a float out=
    def call(d):
        values, boundaries = torch.tensor([[1.0, 2.5], [3.5, 4.0]], device=d), torch.tensor([1.0, 2.0, 3.0], device=d)
        out = torch.empty(2, 2, dtype=dtype, device=d)
        if op == "searchsorted":
            return torch.searchsorted(boundaries, values, out=out, out_int32=out_int32)
        return torch.bucketize(values, boundaries, out=out, out_int32=out_int32)
    assert_raises_like_cpu(call)


SEARCHSORTED_CHECKS = {
    "side 'bad'": lambda d: torch.searchsorted(torch.tensor([1.0, 2, 3], device=d), torch.ones(2, device=d), side="bad"),
    "a float sorter": lambda d: torch.searchsorted(torch.tensor([1.0, 2, 3], device=d), torch.ones(2, device=d),
                                                   sorter=torch.tensor([0.0, 1, 2], device=d)),
    "a sorter of another size": lambda d: torch.searchsorted(torch.tensor([1.0, 2, 3], device=d), torch.ones(2, device=d),
                                                             sorter=torch.tensor([0, 1], device=d)),
}


@pytest.mark.parametrize("name", list(SEARCHSORTED_CHECKS))
def test_searchsorted_checks_as_cpu(name):
    assert_raises_like_cpu(SEARCHSORTED_CHECKS[name])


# ---------------------------------------------------------------- linalg (test_linalg)
def _singular_batch(d, n=3, batch=5, bad=3):
    a = torch.eye(n, dtype=torch.float64).repeat(batch, 1, 1)
    a[bad, -2, -2] = 0
    return a.to(d)


LINALG_BATCH_ERRORS = {
    "cholesky_ex": lambda d: torch.linalg.cholesky_ex(_singular_batch(d), check_errors=True),
    "cholesky": lambda d: torch.linalg.cholesky(_singular_batch(d)),
    "cholesky of one matrix": lambda d: torch.linalg.cholesky_ex(_singular_batch(d)[3], check_errors=True),
    "lu_factor_ex": lambda d: torch.linalg.lu_factor_ex(_singular_batch(d), check_errors=True),
    "inv": lambda d: torch.linalg.inv(_singular_batch(d)),
    "inv_ex": lambda d: torch.linalg.inv_ex(_singular_batch(d), check_errors=True),
    "solve": lambda d: torch.linalg.solve(_singular_batch(d), torch.ones(5, 3, 2, dtype=torch.float64, device=d)),
    "solve_ex": lambda d: torch.linalg.solve_ex(_singular_batch(d), torch.ones(5, 3, 2, dtype=torch.float64, device=d),
                                                check_errors=True),
    # A's batch (1, 5) broadcast over B's (2, 5): the element is A's
    "solve, broadcast": lambda d: torch.linalg.solve(_singular_batch(d)[None],
                                                     torch.ones(2, 5, 3, 2, dtype=torch.float64, device=d)),
    # no right-hand sides at all: A is still factored and its singularity still raises
    "solve, empty broadcast batch": lambda d: torch.linalg.solve(_singular_batch(d)[3],
                                                                 torch.ones(2, 0, 3, 2, dtype=torch.float64, device=d)),
}


@pytest.mark.parametrize("name", list(LINALG_BATCH_ERRORS))
def test_linalg_errors_name_the_batch_element(name):
    assert_raises_like_cpu(LINALG_BATCH_ERRORS[name])


def test_solve_ex_with_empty_broadcast_batch_factors_a():
    # X has no elements (B's batch has a 0), but LU, pivots and info describe A, as on CPU
    a = torch.randn(5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    b = torch.randn(2, 0, 5, 3, dtype=torch.float64)
    for _ in range(3):  # fresh outputs may reuse memory holding anything
        expected = torch.ops.aten._linalg_solve_ex(a, b)
        actual = torch.ops.aten._linalg_solve_ex(a.to("tpu"), b.to("tpu"))
        for x, y in zip(actual, expected):
            assert x.shape == y.shape
            torch.testing.assert_close(x.cpu(), y, rtol=1e-14, atol=1e-14)


def test_svd_of_a_large_matrix_is_quick_and_right():
    # pca_lowrank's check took minutes per 1000 x 1000 svdvals with Jacobi
    a = torch.randn(400, 12, dtype=torch.float64) @ torch.randn(12, 400, dtype=torch.float64)
    s = torch.linalg.svdvals(a.to("tpu")).cpu()
    torch.testing.assert_close(s, torch.linalg.svdvals(a), atol=1e-11 * s[0].item(), rtol=0)


def _r(*shape, d, dtype=torch.float32):
    return torch.ones(*shape, dtype=dtype, device=d)


# CPU's messages for the matrix products (PyTorch's meta functions word them differently) and
# the calls the meta functions accept where CPU refuses (addmv of a 2-D input, addr's scalars)
MATRIX_PRODUCT_ERRORS = {
    "mm shapes": lambda d: torch.mm(_r(2, 3, d=d), _r(2, 4, d=d)),
    "mm of a vector": lambda d: torch.mm(_r(3, d=d), _r(3, 4, d=d)),
    "mm dtypes": lambda d: torch.mm(_r(2, 3, d=d), _r(3, 4, d=d, dtype=torch.float64)),
    "linear shapes": lambda d: torch.nn.functional.linear(_r(2, 5, 3, d=d), _r(4, 2, d=d), _r(4, d=d)),
    "matmul shapes": lambda d: torch.matmul(_r(2, 3, d=d), _r(4, 5, d=d)),
    "addmm shapes": lambda d: torch.addmm(_r(2, 4, d=d), _r(2, 3, d=d), _r(2, 4, d=d)),
    "addmm input": lambda d: torch.addmm(_r(3, 4, d=d), _r(2, 3, d=d), _r(3, 4, d=d)),
    "addmm dtypes": lambda d: torch.addmm(_r(2, 4, d=d, dtype=torch.float64), _r(2, 3, d=d), _r(3, 4, d=d)),
    "addmm_ shape": lambda d: _r(3, 4, d=d).addmm_(_r(2, 3, d=d), _r(3, 4, d=d)),
    "mv sizes": lambda d: torch.mv(_r(2, 3, d=d), _r(4, d=d)),
    "mv dtypes": lambda d: torch.mv(_r(2, 3, d=d), _r(3, d=d, dtype=torch.float64)),
    "addmv of a 2-D input": lambda d: torch.addmv(_r(2, 2, d=d), _r(2, 3, d=d), _r(3, d=d)),
    "dot sizes": lambda d: torch.dot(_r(2, d=d), _r(3, d=d)),
    "vdot dtypes": lambda d: torch.vdot(_r(3, d=d), _r(3, d=d, dtype=torch.float64)),
    "bmm dtypes": lambda d: torch.bmm(_r(2, 2, 3, d=d), _r(2, 3, 4, d=d, dtype=torch.float64)),
    "baddbmm dtypes": lambda d: torch.baddbmm(_r(2, 2, 4, d=d, dtype=torch.float64), _r(2, 2, 3, d=d),
                                              _r(2, 3, 4, d=d)),
    "addr float beta on integers": lambda d: torch.addr(_r(3, 3, d=d, dtype=torch.int64), _r(3, d=d, dtype=torch.int64),
                                                        _r(3, d=d, dtype=torch.int64), beta=2.0),
    "addr_ float alpha on integers": lambda d: _r(3, 3, d=d, dtype=torch.int64).addr_(
        _r(3, d=d, dtype=torch.int64), _r(3, d=d, dtype=torch.int64), alpha=1.5),
    "addr Boolean beta on floats": lambda d: torch.addr(_r(3, 3, d=d), _r(3, d=d), _r(3, d=d), beta=True),
    "addr of a matrix": lambda d: torch.addr(_r(2, 3, d=d), _r(2, 2, d=d), _r(3, d=d)),
}


@pytest.mark.parametrize("name", list(MATRIX_PRODUCT_ERRORS))
def test_matrix_product_errors_as_cpu(name):
    assert_raises_like_cpu(MATRIX_PRODUCT_ERRORS[name])


def test_addr_valid_scalars_still_compute():
    v = torch.arange(3)
    for self, beta, alpha in [(torch.ones(3, 3, dtype=torch.int64), 2, 3), (torch.ones(3, 3), 0.5, 2.5),
                              (torch.ones(3, 3, dtype=torch.bool), True, False)]:
        vec = v.to(self.dtype)
        expected = torch.addr(self, vec, vec, beta=beta, alpha=alpha)
        actual = torch.addr(tpu(self), tpu(vec), tpu(vec), beta=beta, alpha=alpha).cpu()
        assert actual.dtype == expected.dtype
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)


def test_out_resize_warns_once_per_output_with_cpu_text():
    # PyTorch's Python meta functions warn with one text for every out= (a literal
    # "{str(shape)}"), so Python's default filter showed one warning of eigh's two
    a = torch.randn(3, 3, dtype=torch.float64)
    a = a + a.T
    texts = {}
    for device in ("cpu", "tpu"):
        for call in range(2):  # the call that runs the meta function, then a cached one
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("default")
                torch.linalg.eigh(a.to(device), out=(torch.empty(7, 7, dtype=torch.float64, device=device),
                                                     torch.empty(7, 7, dtype=torch.float64, device=device)))
            # (the order of the two differs: CPU resizes the vectors first)
            texts[device, call] = sorted(str(w.message) for w in caught if "was resized" in str(w.message))
    assert texts["tpu", 0] == texts["tpu", 1] == texts["cpu", 0]
    assert len(texts["cpu", 0]) == 2 and texts["cpu", 0][0] != texts["cpu", 0][1]


def _spd(d):
    a = torch.randn(3, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    return (a @ a.T + torch.eye(3, dtype=torch.float64)).to(d)


def _rhs(d):
    return torch.ones(3, 2, dtype=torch.float64, device=d)


def _e(d, dtype):
    return torch.empty(0, dtype=dtype, device=d)


_F, _I, _L = torch.float64, torch.int32, torch.int64
# out= of another dtype: structured kernels want each output's exact dtype (PyTorch's meta
# functions cast, so an int64 pivots, a float info or an int32 solution was written)
LINALG_OUT_DTYPES = {
    "slogdet": lambda d: torch.linalg.slogdet(_spd(d), out=(_e(d, _I), _e(d, _F))),
    "solve": lambda d: torch.linalg.solve(_spd(d), _rhs(d), out=_e(d, _I)),
    "solve_ex float info": lambda d: torch.linalg.solve_ex(_spd(d), _rhs(d), out=(_e(d, _F), _e(d, _F))),
    "lu_factor int64 pivots": lambda d: torch.linalg.lu_factor(_spd(d), out=(_e(d, _F), _e(d, _L))),
    "lu": lambda d: torch.linalg.lu(_spd(d), out=(_e(d, _I), _e(d, _F), _e(d, _F))),
    "lu_solve": lambda d: torch.linalg.lu_solve(*torch.linalg.lu_factor(_spd(d)), _rhs(d), out=_e(d, _I)),
    "qr": lambda d: torch.linalg.qr(_spd(d), out=(_e(d, _I), _e(d, _F))),
    "eigh": lambda d: torch.linalg.eigh(_spd(d), out=(_e(d, _F), _e(d, _I))),
    "eigvalsh": lambda d: torch.linalg.eigvalsh(_spd(d), out=_e(d, _I)),
    "ldl_factor": lambda d: torch.linalg.ldl_factor(_spd(d), out=(_e(d, _I), _e(d, _I))),
    "triangular_solve": lambda d: torch.triangular_solve(_rhs(d), _spd(d), out=(_e(d, _I), _e(d, _F))),
    "matrix_exp": lambda d: torch.ops.aten.linalg_matrix_exp.out(_spd(d), out=_e(d, _I)),
    "vector_norm": lambda d: torch.linalg.vector_norm(_spd(d), out=_e(d, _I)),
    "cholesky_inverse": lambda d: torch.cholesky_inverse(_spd(d), out=_e(d, _I)),
    "householder_product": lambda d: torch.linalg.householder_product(_spd(d), _spd(d)[:, 0], out=_e(d, _I)),
    "lstsq int32 solution": lambda d: torch.linalg.lstsq(_spd(d), _rhs(d), out=(_e(d, _I), _e(d, _F), _e(d, _L),
                                                                                _e(d, _F))),
    "lstsq int32 residuals": lambda d: torch.linalg.lstsq(_spd(d), _rhs(d), out=(_e(d, _F), _e(d, _I), _e(d, _L),
                                                                                 _e(d, _F))),
    "geqrf": lambda d: torch.geqrf(_spd(d), out=(_e(d, _F), _e(d, _I))),
    "ormqr": lambda d: torch.ormqr(_spd(d), _spd(d)[:, 0], _rhs(d), out=_e(d, _I)),
    "householder_product of an int32 tau": lambda d: torch.linalg.householder_product(
        _spd(d), torch.ones(3, dtype=_I, device=d)),
    "lstsq of a vector of another length": lambda d: torch.linalg.lstsq(_spd(d), torch.ones(4, dtype=_F, device=d)),
}


@pytest.mark.parametrize("name", list(LINALG_OUT_DTYPES))
def test_linalg_out_dtypes_checked_as_cpu(name):
    assert_raises_like_cpu(LINALG_OUT_DTYPES[name])


def test_linalg_out_variants_run_natively():
    # the out= overloads of det, slogdet, solve_ex, inv_ex, cholesky_ex, lu*, qr and matrix_exp
    # ran on the CPU fallback, in CPU's float32 where the functional ones compute in double
    torch_tpu.metrics.reset()
    a = _spd("tpu").float()
    sign, logabsdet = torch.linalg.slogdet(a)
    out = (torch.empty(0, device="tpu"), torch.empty(0, device="tpu"))
    torch.linalg.slogdet(a, out=out)
    assert torch.equal(out[0].cpu(), sign.cpu()) and torch.equal(out[1].cpu(), logabsdet.cpu())
    for call in (lambda o: torch.linalg.det(a, out=o), lambda o: torch.linalg.inv(a, out=o),
                 lambda o: torch.linalg.cholesky(a, out=o), lambda o: torch.ops.aten.linalg_matrix_exp.out(a, out=o)):
        o = torch.empty(0, device="tpu")
        call(o)
    torch.linalg.lu_factor(a, out=(torch.empty(0, device="tpu"), torch.empty(0, dtype=torch.int32, device="tpu")))
    torch.linalg.qr(a, out=(torch.empty(0, device="tpu"), torch.empty(0, device="tpu")))
    assert not torch_tpu.metrics.fallback_ops()


# ---------------------------------------------------------------- reduced-float accumulation (test_torch)
@pytest.mark.parametrize("dtype", REDUCED, ids=str)
@pytest.mark.parametrize("reduce", ["sum", "prod"])
def test_scatter_reduce_of_reduced_floats_combines_in_float32_as_cpu(dtype, reduce):
    # tpu rounded at every step where CPU combines in float32: now bit for bit CPU's
    g = torch.Generator().manual_seed(0)
    for include_self in (True, False):
        x = torch.randn(20, generator=g).to(dtype)
        idx = torch.randint(0, 20, (60,), generator=g)
        v = (torch.rand(60, generator=g) + 0.5).to(dtype)
        actual, expected = both(lambda a, i, s: a.clone().scatter_reduce_(0, i, s, reduce, include_self=include_self),
                                x, idx, v)
        assert torch.equal(actual.cpu(), expected)


@pytest.mark.parametrize("dtype", REDUCED, ids=str)
def test_accumulating_writes_of_reduced_floats_agree(dtype):
    # put_ and index_put_ with accumulate, index_add_ and scatter_add_ all sum duplicates in
    # float32 and round once: one result on tpu (PyTorch's test_put compares put_ with
    # index_add_), never further from float64 than CPU's (which rounds per step in three of them)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(20, generator=g).to(dtype)
    idx = torch.randint(0, 20, (80,), generator=g)
    v = torch.randn(80, generator=g).to(dtype)
    calls = [lambda a, i, s: a.put_(i, s, accumulate=True), lambda a, i, s: a.index_put_((i,), s, accumulate=True),
             lambda a, i, s: a.index_add_(0, i, s), lambda a, i, s: a.scatter_add_(0, i, s)]
    exact = x.double().index_add_(0, idx, v.double())
    results = [f(x.to("tpu"), idx.to("tpu"), v.to("tpu")).cpu() for f in calls]
    for r in results[1:]:
        assert torch.equal(r, results[0])
    assert torch.equal(results[0], exact.to(dtype))  # float32 sums of these round like float64's
    for f in calls:
        cpu = f(x.clone(), idx, v)
        assert (results[0].double() - exact).abs().sum() <= (cpu.double() - exact).abs().sum()


# ---------------------------------------------------------------- histc (test_torch)
HISTC_ERRORS = {
    "no bins": lambda d: torch.histc(torch.ones(5, device=d), bins=0),
    "min above max": lambda d: torch.histc(torch.ones(5, device=d), bins=4, min=3, max=1),
    "a float64 out= of float32": lambda d: torch.histc(torch.ones(5, device=d), bins=4,
                                                       out=torch.empty(0, dtype=torch.float64, device=d)),
}


@pytest.mark.parametrize("name", list(HISTC_ERRORS))
def test_histc_checks_as_cpu(name):
    # PyTorch's histc meta function treats every device but CPU as CUDA: it skipped CPU's out=
    # dtype check (integer inputs count on tpu as on CUDA: tests/test_moe_routing.py)
    assert_raises_like_cpu(HISTC_ERRORS[name])


def test_histc_is_deterministic():
    # ... and raised CUDA's "_histc_cuda ... does not have a deterministic implementation"
    # under torch.use_deterministic_algorithms(True); tpu's histc is deterministic
    x = torch.tensor([0.1, 0.5, 0.7, 2.0, -1.0])
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        assert torch.equal(torch.histc(tpu(x), bins=4).cpu(), torch.histc(x, bins=4))
    finally:
        torch.use_deterministic_algorithms(previous)


# test_modules' test_memory_format: convolutions and reflection/replication padding return a
# channels-last result (and gradients) when CPU's float32 kernels (oneDNN) and CUDA's do: when
# the input or the weight is channels-last (CPU's float64 Conv3d answers contiguous: its slow path).
_CL_MODULES = {
    "Conv2d": (lambda: torch.nn.Conv2d(3, 4, 3), (2, 3, 6, 6)),
    "Conv2d 1x1": (lambda: torch.nn.Conv2d(3, 4, 1), (2, 3, 6, 6)),
    "ConvTranspose2d": (lambda: torch.nn.ConvTranspose2d(3, 4, 3, stride=2), (2, 3, 6, 6)),
    "Conv3d": (lambda: torch.nn.Conv3d(3, 4, 2), (2, 3, 4, 4, 4)),
    "ReflectionPad2d": (lambda: torch.nn.ReflectionPad2d(2), (2, 3, 6, 6)),
    "ReplicationPad2d": (lambda: torch.nn.ReplicationPad2d(2), (2, 3, 6, 6)),
    "ReflectionPad3d": (lambda: torch.nn.ReflectionPad3d(1), (2, 3, 4, 4, 4)),
    "ReplicationPad3d": (lambda: torch.nn.ReplicationPad3d(1), (2, 3, 4, 4, 4)),
}


@pytest.mark.parametrize("module_cl", [False, True])
@pytest.mark.parametrize("input_cl", [False, True])
@pytest.mark.parametrize("name", sorted(_CL_MODULES))
def test_memory_format_of_results_as_cpu(name, input_cl, module_cl):
    make, shape = _CL_MODULES[name]
    fmt = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
    torch.manual_seed(0)
    cpu = make()
    x = torch.randn(shape)
    results = []
    for model, d in ((cpu, "cpu"), (copy.deepcopy(cpu).to("tpu"), "tpu")):
        model.to(memory_format=fmt if module_cl else torch.contiguous_format)
        xd = x.to(d).clone(memory_format=fmt if input_cl else torch.contiguous_format).requires_grad_()
        with torch.tpu.precision("highest"):
            y = model(xd)
            y.backward(torch.linspace(-1, 1, y.numel(), device=d).view(y.shape))
        results.append((y, xd.grad))
    for (e, a) in zip(*results):
        assert a.stride() == e.stride()
        torch.testing.assert_close(a.cpu(), e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dim", [-1, 0])
@pytest.mark.parametrize("dtype,offset", [(torch.float32, 1e7), (torch.float64, 1e15), (torch.float16, 1.5e3)])
def test_log_softmax_of_large_values_as_of_small_ones(dtype, offset, dim):
    # test_nn's test_log_softmax_big: x - (max + log(sum)) rounded the sum to x's magnitude (0.31 off
    # at 1e7); CPU computes (x - max) - log(sum)
    x = torch.randint(100, (16, 4), dtype=dtype, generator=torch.Generator().manual_seed(0)).to("tpu")
    small = torch.nn.functional.log_softmax(x, dim)
    assert torch.equal(torch.nn.functional.log_softmax(x + offset, dim), small)
    torch.testing.assert_close(small.cpu(), torch.nn.functional.log_softmax(x.cpu().double(), dim).to(dtype))


_NLL_CALLS = {
    "nll_loss_forward": lambda x, t, x2, t2, g: torch.ops.aten.nll_loss_forward(x, t, None, 1, -100)[0],
    "nll_loss_backward": lambda x, t, x2, t2, g: torch.ops.aten.nll_loss_backward(g, x, t, None, 1, -100, g),
    "nll_loss2d_forward": lambda x, t, x2, t2, g: torch.ops.aten.nll_loss2d_forward(x2, t2, None, 1, -100)[0],
    "nll_loss2d_backward": lambda x, t, x2, t2, g: torch.ops.aten.nll_loss2d_backward(g, x2, t2, None, 1, -100, g),
    "nll_loss_forward.output": lambda x, t, x2, t2, g: torch.ops.aten.nll_loss_forward.output(
        x, t, None, 0, -100, output=torch.empty(0, device=x.device), total_weight=torch.empty(0, device=x.device))[0],
}


@pytest.mark.parametrize("target_dtype", [torch.int64, torch.uint8, torch.int32, torch.int16])
@pytest.mark.parametrize("name", sorted(_NLL_CALLS))
def test_nll_loss_target_dtypes_as_cpu(name, target_dtype):
    # test_nn's test_nll_loss_byte_target_matches_long: PyTorch's meta refused uint8 targets
    # (a decomposition through gather) and took int32 ones, which CPU refuses
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(10, 4, generator=gen).log_softmax(-1)
    x2 = torch.randn(2, 4, 3, 3, generator=gen).log_softmax(1)
    t, t2 = torch.randint(0, 4, (10,), generator=gen), torch.randint(0, 4, (2, 3, 3), generator=gen)
    args = (x, t.to(target_dtype), x2, t2.to(target_dtype), torch.tensor(1.0))
    try:
        expected = _NLL_CALLS[name](*args)
    except RuntimeError as e:
        with pytest.raises(RuntimeError, match=re.escape(str(e))):
            _NLL_CALLS[name](*[tpu(a) for a in args])
        return
    torch.testing.assert_close(_NLL_CALLS[name](*[tpu(a) for a in args]).cpu(), expected)  # sums: not bit for bit


@pytest.mark.parametrize("forward", [
    lambda x: torch.nn.functional.elu_(x, alpha=-2), lambda x: torch.nn.functional.celu_(x, alpha=-2),
    lambda x: torch.nn.functional.leaky_relu_(x, -2), lambda x: torch.nn.functional.rrelu_(x, -5.0, 1.0)])
def test_in_place_activation_with_negative_slope_refuses_backward(forward):
    # test_nn: an in-place activation with a negative slope cannot recover its input
    for device in ("cpu", "tpu"):
        a = torch.tensor([-1.0, 1.0], device=device, requires_grad=True)
        b = forward(a.clone())
        with pytest.raises(RuntimeError, match="call out-of-place version"):
            b.backward(torch.ones(2, device=device))


def test_threshold_in_place_through_an_expanded_view():
    # test_nn's test_threshold_inplace_overlap: CPU allows it (threshold is idempotent)
    base = torch.randn(1, 6, generator=torch.Generator().manual_seed(0))
    results = []
    for device in ("cpu", "tpu"):
        x = base.to(device).expand(6, 6)
        torch.nn.functional.threshold(x, 0.5, 0.5, inplace=True)
        torch.nn.functional.threshold_(x, 0.5, -1.0)
        results.append(x.cpu())
    assert torch.equal(results[0], results[1])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_softshrink_negative_lambda_in_cpu_words(dtype):
    # test_nn's test_softshrink_negative: PyTorch's meta words the bound and dtype its own way
    with pytest.raises(RuntimeError) as cpu:
        torch.nn.functional.softshrink(torch.ones(3, dtype=dtype), -1)
    with pytest.raises(RuntimeError, match=re.escape(str(cpu.value))):
        torch.nn.functional.softshrink(torch.ones(3, dtype=dtype, device="tpu"), -1)


@pytest.mark.parametrize("mask_shape", [(4, 3), (2, 3), (3,), (1, 3)])
def test_masked_scatter_in_place_mask_broadcasts_to_self_only(mask_shape):
    # test_torch's test_broadcast_fn_masked_scatter: a mask larger than self computed on tpu
    gen = torch.Generator().manual_seed(0)
    self_, mask, source = torch.randn(3, generator=gen), torch.randn(mask_shape, generator=gen) < 0.5, torch.randn(12)
    try:
        expected = self_.clone().masked_scatter_(mask, source)
    except RuntimeError as e:
        with pytest.raises(RuntimeError, match=re.escape(str(e).split("):")[-1])):
            self_.to("tpu").masked_scatter_(mask.to("tpu"), source.to("tpu"))
        return
    assert torch.equal(self_.to("tpu").masked_scatter_(mask.to("tpu"), source.to("tpu")).cpu(), expected)


@pytest.mark.parametrize("index", [
    lambda x, i: x[:, i, None, i, 0], lambda x, i: x[i], lambda x, i: x[i.cpu(), None, i],
    lambda x, i: x.index_put_((i,), torch.tensor(1.0))])
def test_host_tensor_indexed_with_tpu_indices_in_cpu_words(index):
    # test_torch's test_advancedindex_mixed_devices_error (CUDA's indices on a CPU tensor say the same)
    x, i = torch.randn(3, 4, 4, 4, 3), torch.tensor([0, 2, 1], device="tpu")
    with pytest.raises(RuntimeError, match=re.escape("indices should be either on cpu or on the same device as the "
                                                     "indexed tensor (cpu)")):
        index(x, i)


# ---------------------------------------------------------------- fifth round: test/nn (embedding_bag, pooling), test_foreach
_W, _IDX, _OFF = (lambda: torch.zeros(5, 2)), (lambda: torch.tensor([1, 2, 3])), (lambda: torch.tensor([0, 1]))
ROUND5_ERRORS = {
    # CPU's _embedding_bag checks, which PyTorch's meta function lacks (tpu read a 5-D input's offsets)
    "embedding_bag 5-D input": lambda d: torch._embedding_bag(
        torch.zeros(2, 6, dtype=torch.float64, device=d), torch.full((2, 0, 0, 6, 6), 2, device=d),
        torch.zeros((2, 0, 0, 6, 6), dtype=torch.int64, device=d)),
    "embedding_bag 0-dim input": lambda d: torch._embedding_bag_forward_only(_W().to(d), torch.tensor(1, device=d),
                                                                           _OFF().to(d)),
    "embedding_bag 2-D offsets": lambda d: torch._embedding_bag(_W().to(d), _IDX().to(d),
                                                               torch.zeros(1, 2, dtype=torch.long, device=d)),
    "embedding_bag 3-D weight": lambda d: torch._embedding_bag(torch.zeros(2, 2, 2, device=d), _IDX().to(d), _OFF().to(d)),
    "embedding_bag float indices": lambda d: torch._embedding_bag(_W().to(d), _IDX().float().to(d), _OFF().to(d)),
    "embedding_bag integer weight": lambda d: torch._embedding_bag(_W().long().to(d), _IDX().to(d), _OFF().to(d)),
    "embedding_bag per_sample_weights of another dtype": lambda d: torch._embedding_bag(
        _W().to(d), _IDX().to(d), _OFF().to(d), False, 0, False, torch.ones(3, dtype=torch.float64, device=d)),
    **{f"embedding_bag {mode} of index {i}": (lambda d, mode=mode, i=i: torch.nn.functional.embedding_bag(
        torch.tensor([[i, 1]], device=d), torch.randn(10, 2, device=d), padding_idx=0, mode=mode))
       for mode in ("sum", "mean", "max") for i in (-1, 10)},  # CPU's RuntimeError, not IndexError
    # fractional max pooling reads one row of samples per plane: too few rows were read past
    "fractional_max_pool3d samples for fewer samples than the batch": lambda d: torch.nn.FractionalMaxPool3d(
        [3, 2, 2], output_size=[1, 1, 1], _random_samples=torch.rand([0, 16, 3], device=d))(
        torch.randn([1, 16, 10, 8, 8], device=d)),
    "fractional_max_pool3d samples for fewer channels": lambda d: torch.ops.aten.fractional_max_pool3d(
        torch.randn([2, 16, 10, 8, 8], device=d), [3, 2, 2], [1, 1, 1], torch.rand([2, 15, 3], device=d)),
    "fractional_max_pool3d samples of 2 dims": lambda d: torch.ops.aten.fractional_max_pool3d(
        torch.randn([2, 16, 10, 8, 8], device=d), [3, 2, 2], [1, 1, 1], torch.rand([2, 16, 2], device=d)),
    "fractional_max_pool3d 2-D samples": lambda d: torch.ops.aten.fractional_max_pool3d(
        torch.randn([2, 16, 10, 8, 8], device=d), [3, 2, 2], [1, 1, 1], torch.rand([2, 16], device=d)),
    "fractional_max_pool2d kernel_size of 3": lambda d: torch.ops.aten.fractional_max_pool2d(
        torch.randn(1, 1, 8, 8, device=d), [2, 2, 2], [4, 4], torch.rand(1, 1, 2, device=d)),
    "fractional_max_pool3d output_size of 2": lambda d: torch.ops.aten.fractional_max_pool3d(
        torch.randn(1, 1, 8, 8, 8, device=d), [2, 2, 2], [4, 4], torch.rand(1, 1, 3, device=d)),
    # CPU's adaptive pooling takes floating point only (tpu computed integers)
    **{f"adaptive {kind} pool {n}d of {dt}": (lambda d, kind=kind, n=n, dt=dt: getattr(
        torch.nn, f"Adaptive{kind}Pool{n}d")((2,) * n)(torch.ones((4,) * (n + 1), device=d).to(dt)))
       for kind in ("Avg", "Max") for n in (1, 2, 3) for dt in (torch.int32, torch.uint8, torch.bool)},
    # CPU's words where PyTorch's meta functions have others
    **{f"{fn.__name__} backward of an empty output size": (lambda d, fn=fn: fn(
        torch.randn(1, 64, 10, 9, device=d, requires_grad=True), 0).sum().backward())
       for fn in (torch.nn.functional.adaptive_avg_pool2d, torch.nn.functional.adaptive_max_pool2d,
                  torch.nn.functional.adaptive_avg_pool3d, torch.nn.functional.adaptive_max_pool3d)},
    # PyTorch's meta function of _foreach_sub checks two bool lists only
    "_foreach_sub of bools and an int": lambda d: torch._foreach_sub([torch.ones(3, dtype=torch.bool, device=d)], 1),
    "_foreach_sub of expanded bools": lambda d: torch._foreach_sub(
        [torch.ones(1, 1, dtype=torch.bool, device=d).expand(2, 1, 3)], 1),
    "_foreach_sub_ of bools and True": lambda d: torch._foreach_sub_([torch.ones(3, dtype=torch.bool, device=d)], True),
    "_foreach_sub of floats and [True]": lambda d: torch._foreach_sub([torch.ones(3, device=d)], [True]),
    "max_pool2d of no channels": lambda d: torch.nn.MaxPool2d(3, stride=2)(torch.randn(1, 0, 50, 32, device=d)),
    "max_pool2d of a 5-D input": lambda d: torch.ops.aten.max_pool2d_with_indices(torch.randn(1, 3, 3, 5, 8, device=d),
                                                                                  [3, 3], [2, 2]),
}


@pytest.mark.parametrize("name", list(ROUND5_ERRORS))
def test_fifth_round_errors_as_cpu(name):
    assert_raises_like_cpu(ROUND5_ERRORS[name], sync=False)


@pytest.mark.parametrize("reduction", ["none", "mean"])
@pytest.mark.parametrize("inp,target", [(0.5, [0]), (0.5, 0), ([0.5], 0), ([0.5, 0.2, 0.9], [2, 0, -1]),
                                        ([0.5, 0.2], [[1, -1]]), ([[0.5, 0.2]], [1, -1]), (0.5, [0, 0])], ids=str)
def test_multilabel_margin_loss_target_shapes_as_cpu(inp, target, reduction):
    # test_torch: CPU takes a 0-dim or 1-d input with any target of at most one dim holding as
    # many elements; PyTorch's meta function wanted the input's shape
    def run(d):
        x = torch.tensor(inp, device=d, requires_grad=True)
        loss = torch.nn.functional.multilabel_margin_loss(x, torch.tensor(target, device=d), reduction=reduction)
        loss.sum().backward()
        return loss, x.grad

    try:
        expected = run("cpu")
    except RuntimeError as e:
        with pytest.raises(RuntimeError, match=re.escape(str(e))):
            run("tpu")
        return
    for a, b in zip(run("tpu"), expected):
        assert a.shape == b.shape and torch.equal(a.cpu(), b)
