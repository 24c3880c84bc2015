"""Quantized tensors on tpu (csrc/Quantized.cpp; the arithmetic in runtime/src/kernels/
quantize.c): per-tensor and per-channel affine qint8 / quint8 / qint32 against PyTorch CPU, bit
for bit (integers, quantizer, dequantized floats, shapes, strides), views sharing storage,
copies between devices, and the scenarios of PyTorch's device-generic tests that build
quantized tensors on the device (test_view_ops' test_ravel, test_shape_ops' test_flatten)."""
import warnings

import pytest
import torch

import torch_tpu  # noqa: F401

# PyTorch deprecates quantized tensors (one UserWarning per process, on CPU and tpu alike)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

QTYPES = [torch.qint8, torch.quint8, torch.qint32]
ZERO_POINTS = {torch.qint8: [0, 3, -128, 100], torch.quint8: [0, 3, 128, 255], torch.qint32: [0, -5000, 100003, 2**30]}
SCALES = [0.1, 1.0, 0.5, 1 / 3, 0.00214854861, 7.3, 1e-3]


def values(n, scale, seed=0):
    """n float32 values around the quantization grid of `scale`: random ones, the half-way
    points where rounding ties, and values beyond any integer range, infinities and NaN."""
    g = torch.Generator().manual_seed(seed)
    special = torch.tensor([float("nan"), float("inf"), -float("inf"), 1e20, -1e20, 3e9, -3e9, 0.0, -0.0])
    k = torch.arange(-(n // 4), n // 4, dtype=torch.float32)
    x = torch.cat([torch.randn(n, generator=g) * 50 * scale, (k + 0.5) * scale, k * scale / 2, special])
    return x[torch.randperm(len(x), generator=g)]


def bits(t):
    return t.contiguous().view(torch.int32)


def assert_same_q(got, want):
    """A quantized tpu tensor is the CPU one: quantizer, layout, integers and dequantized floats."""
    assert got.device.type == "tpu" and got.is_quantized
    assert got.dtype == want.dtype and got.shape == want.shape and got.stride() == want.stride()
    assert got.qscheme() == want.qscheme()
    if want.qscheme() == torch.per_tensor_affine:
        assert (got.q_scale(), got.q_zero_point()) == (want.q_scale(), want.q_zero_point())
    else:
        assert torch.equal(got.q_per_channel_scales().cpu(), want.q_per_channel_scales())
        assert torch.equal(got.q_per_channel_zero_points().cpu(), want.q_per_channel_zero_points())
        assert got.q_per_channel_axis() == want.q_per_channel_axis()
    r = got.int_repr()
    assert r.device.type == "tpu" and r.stride() == want.int_repr().stride()
    assert torch.equal(r.cpu(), want.int_repr())
    d = got.dequantize()
    assert d.device.type == "tpu" and d.dtype == torch.float32
    assert torch.equal(bits(d.cpu()), bits(want.dequantize()))


def raises_like_cpu(fn, *args):
    """fn raises on tpu what it raises on CPU: the same exception type and message."""
    with pytest.raises(Exception) as cpu:
        fn(*args)
    with pytest.raises(type(cpu.value)) as tpu:
        fn(*[a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args])
    assert str(tpu.value).split("\n")[0] == str(cpu.value).split("\n")[0]


# ---------------------------------------------------------------- factories
@pytest.mark.parametrize("dtype", QTYPES, ids=str)
@pytest.mark.parametrize("shape", [[5, 5], [0, 2, 3], [3, 0, 2], [], [2, 3, 4, 5]], ids=str)
def test_empty_affine_quantized(dtype, shape):
    q = torch._empty_affine_quantized(shape, scale=2, zero_point=3, dtype=dtype, device="tpu")
    c = torch._empty_affine_quantized(shape, scale=2, zero_point=3, dtype=dtype)
    assert q.device == torch.device("tpu:0") and q.is_quantized and q.dtype == dtype
    assert q.shape == c.shape and q.stride() == c.stride() and q.is_contiguous()
    assert (q.qscheme(), q.q_scale(), q.q_zero_point()) == (torch.per_tensor_affine, 2.0, 3)
    assert q.int_repr().shape == c.shape


def test_empty_affine_quantized_channels_last():
    q = torch._empty_affine_quantized([2, 3, 4, 5], scale=0.5, zero_point=1, dtype=torch.quint8, device="tpu",
                                      memory_format=torch.channels_last)
    c = torch._empty_affine_quantized([2, 3, 4, 5], scale=0.5, zero_point=1, dtype=torch.quint8,
                                      memory_format=torch.channels_last)
    assert q.stride() == c.stride() and q.is_contiguous(memory_format=torch.channels_last)
    assert q.int_repr().stride() == c.int_repr().stride()


@pytest.mark.parametrize("dtype", QTYPES, ids=str)
def test_empty_per_channel_affine_quantized(dtype):
    scales, zps = torch.tensor([0.5, 0.25, 2.0], dtype=torch.float64), torch.tensor([1, 0, 2])
    q = torch._empty_per_channel_affine_quantized([2, 3, 4], scales=scales.to("tpu"), zero_points=zps.to("tpu"),
                                                  axis=1, dtype=dtype, device="tpu")
    assert q.device.type == "tpu" and q.qscheme() == torch.per_channel_affine and q.q_per_channel_axis() == 1
    # PyTorch keeps the parameters on the tensor's device, wherever they came from
    for s, z, device in ((scales, zps, "tpu"), (scales.to("tpu"), zps.to("tpu"), "cpu")):
        q = torch._empty_per_channel_affine_quantized([2, 3, 4], scales=s, zero_points=z, axis=1, dtype=dtype,
                                                      device=device)
        assert q.device.type == device and q.q_per_channel_scales().device.type == device
        assert q.q_per_channel_zero_points().device.type == device
        assert torch.equal(q.q_per_channel_scales().cpu(), scales)
        assert torch.equal(q.q_per_channel_zero_points().cpu(), zps)


def test_empty_likes_keep_the_quantizer():
    q = torch.quantize_per_tensor(torch.randn(3, 4, device="tpu"), 0.1, 2, torch.qint8)
    c = q.cpu()
    for e, w in ((torch.empty_like(q), torch.empty_like(c)), (torch.empty_like(q.t()), torch.empty_like(c.t()))):
        assert e.device.type == "tpu" and e.is_quantized and (e.q_scale(), e.q_zero_point()) == (0.1, 2)
        assert e.shape == w.shape and e.stride() == w.stride()
    e = torch.empty_quantized([2, 2], q, device="tpu")
    assert e.device.type == "tpu" and e.shape == (2, 2) and (e.q_scale(), e.q_zero_point()) == (0.1, 2)


def test_plain_factories_with_quantized_dtypes_match_cpu():
    # torch.empty with a quantized dtype gives, on CPU and tpu alike, a quantized tensor whose
    # quantizer is unknown: its metadata is usable, its quantizer not
    for device in ("cpu", "tpu"):
        e = torch.empty(3, dtype=torch.qint8, device=device)
        assert e.is_quantized and e.dtype == torch.qint8 and e.shape == (3,) and e.device.type == device
        with pytest.raises(RuntimeError, match="UnknownQuantizer"):
            e.qscheme()
    raises_like_cpu(lambda: torch.empty_strided((2, 2), (2, 1), dtype=torch.quint8))
    # the fills CPU has no quantized kernel for raise NotImplementedError on both
    for device in ("cpu", "tpu"):
        with pytest.raises(NotImplementedError, match="Quantized"):
            torch.zeros(3, dtype=torch.qint8, device=device)


def test_sub_byte_types_are_cpu_only():
    with pytest.raises(NotImplementedError, match="torch.quint4x2"):
        torch._empty_affine_quantized([4], scale=1, zero_point=0, dtype=torch.quint4x2, device="tpu")
    x = torch.randn(2, 4, device="tpu")
    with pytest.raises(NotImplementedError, match="sub-byte"):
        torch.quantize_per_tensor(x, 0.1, 0, torch.quint4x2)
    with pytest.raises(NotImplementedError, match="sub-byte"):
        torch.quantize_per_channel(x, torch.tensor([0.1, 0.2]), torch.tensor([0.0, 1.0]), 0, torch.quint2x4)


# ---------------------------------------------------------------- quantize / dequantize
@pytest.mark.parametrize("dtype", QTYPES, ids=str)
@pytest.mark.parametrize("scale", SCALES)
def test_quantize_per_tensor_matches_cpu(dtype, scale):
    x = values(1000, scale)
    for zp in ZERO_POINTS[dtype]:
        for n in (1, 7, 8, 33, len(x)):  # CPU's vector loop and its remainder
            xs = x[:n]
            assert_same_q(torch.quantize_per_tensor(xs.to("tpu"), scale, zp, dtype),
                          torch.quantize_per_tensor(xs, scale, zp, dtype))


@pytest.mark.parametrize("dtype", QTYPES, ids=str)
def test_quantize_per_tensor_layouts(dtype):
    x = torch.randn(2, 3, 4, 5)
    for src in (x, x.transpose(0, 2), x[:, ::2], x.contiguous(memory_format=torch.channels_last), x[0, 0, 0, 0]):
        assert_same_q(torch.quantize_per_tensor(src.to("tpu"), 0.05, 1, dtype),
                      torch.quantize_per_tensor(src, 0.05, 1, dtype))


def test_lists_of_tensors():
    xs = [torch.randn(2, 4), torch.randn(3) * 10]
    scales, zps = torch.tensor([0.1, 0.2]), torch.tensor([0, 3])
    got = torch.quantize_per_tensor([x.to("tpu") for x in xs], scales.to("tpu"), zps.to("tpu"), torch.quint8)
    want = torch.quantize_per_tensor(xs, scales, zps, torch.quint8)
    for g, w in zip(got, want):
        assert_same_q(g, w)
    for g, w in zip(torch.dequantize(list(got)), torch.dequantize(list(want))):
        assert g.device.type == "tpu" and torch.equal(bits(g.cpu()), bits(w))


def test_quantize_per_tensor_tensor_qparams_and_dynamic():
    x = values(200, 0.1)
    x = x[x.isfinite() & (x.abs() < 1e3)]
    s, z = torch.tensor(0.1), torch.tensor(4)
    assert_same_q(torch.quantize_per_tensor(x.to("tpu"), s.to("tpu"), z.to("tpu"), torch.quint8),
                  torch.quantize_per_tensor(x, s, z, torch.quint8))
    for dtype in (torch.qint8, torch.quint8):
        for reduce_range in (False, True):
            assert_same_q(torch.quantize_per_tensor_dynamic(x.to("tpu"), dtype, reduce_range),
                          torch.quantize_per_tensor_dynamic(x, dtype, reduce_range))


@pytest.mark.parametrize("dtype", QTYPES, ids=str)
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_quantize_per_channel_matches_cpu(dtype, axis):
    shape = [3, 4, 5]
    c = shape[axis]
    g = torch.Generator().manual_seed(axis)
    scales = torch.tensor(SCALES, dtype=torch.float64)[:c]
    zps = torch.tensor(ZERO_POINTS[dtype] * 2)[:c]
    x = values(30, 0.1, seed=axis)[: 3 * 4 * 5].reshape(shape) * torch.rand(shape, generator=g) * 10
    for src in (x, x.transpose(0, 2).contiguous().transpose(0, 2)):
        want = torch.quantize_per_channel(src, scales, zps, axis, dtype)
        assert_same_q(torch.quantize_per_channel(src.to("tpu"), scales, zps, axis, dtype), want)
        # the parameters may come from the device too
        assert_same_q(torch.quantize_per_channel(src.to("tpu"), scales.to("tpu"), zps.to("tpu"), axis, dtype), want)


def test_quantize_per_channel_ties_and_large_values():
    scales = torch.tensor(SCALES, dtype=torch.float64)
    for dtype in QTYPES:
        zps = torch.tensor((ZERO_POINTS[dtype] * 2)[:7])
        x = torch.stack([values(300, s, seed=i) for i, s in enumerate(SCALES)])
        assert_same_q(torch.quantize_per_channel(x.to("tpu"), scales, zps, 0, dtype),
                      torch.quantize_per_channel(x, scales, zps, 0, dtype))


def test_quantize_per_channel_float_qparams():
    scales = torch.tensor([0.1, 1.0, 0.0, 1 / 3])
    zps = torch.tensor([0.0, 3.5, 128.25, -1.3])
    x = torch.stack([values(300, 0.3, seed=i) for i in range(4)], 1)  # channels along dim 1
    for dtype in (torch.quint8, torch.qint8):
        want = torch.quantize_per_channel(x, scales, zps, 1, dtype)
        assert want.qscheme() == torch.per_channel_affine_float_qparams
        assert_same_q(torch.quantize_per_channel(x.to("tpu"), scales, zps, 1, dtype), want)


def test_zero_point_errors_match_cpu():
    x = torch.randn(2, 3)
    raises_like_cpu(lambda t: torch.quantize_per_tensor(t, 0.1, 300, torch.quint8), x)
    raises_like_cpu(lambda t: torch.quantize_per_tensor(t, 0.1, -1, torch.quint8), x)
    raises_like_cpu(lambda t: torch.quantize_per_tensor(t.double(), 0.1, 0, torch.quint8), x)
    s = torch.tensor([0.1, 0.2])
    raises_like_cpu(lambda t: torch.quantize_per_channel(t, s, torch.tensor([0, 200]), 0, torch.qint8), x)  # zero point
    raises_like_cpu(lambda t: torch.quantize_per_channel(t, s, torch.tensor([0, 1]), 1, torch.qint8), x)  # channels


def test_make_quantized_tensor_from_integers():
    for dtype, q in ((torch.uint8, torch.quint8), (torch.int8, torch.qint8), (torch.int32, torch.qint32)):
        ints = torch.randint(-100 if dtype != torch.uint8 else 0, 100, (3, 4), dtype=dtype)
        for src in (ints, ints.t()):
            want = torch._make_per_tensor_quantized_tensor(src, 0.25, 3)
            assert want.dtype == q
            assert_same_q(torch._make_per_tensor_quantized_tensor(src.to("tpu"), 0.25, 3), want)
        scales, zps = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64), torch.tensor([0, 1, 2])
        assert_same_q(torch._make_per_channel_quantized_tensor(ints.t().to("tpu"), scales, zps, 1),
                      torch._make_per_channel_quantized_tensor(ints.t(), scales, zps, 1))
    raises_like_cpu(lambda t: torch._make_per_tensor_quantized_tensor(t, 0.1, 0), torch.ones(2))


def test_dequantize_of_a_float_tensor_is_a_cast():
    x = torch.randn(5, dtype=torch.float64)
    d = torch.dequantize(x.to("tpu"))
    assert d.device.type == "tpu" and d.dtype == torch.float32 and torch.equal(d.cpu(), torch.dequantize(x))


# ---------------------------------------------------------------- views and copies
def pair(shape=(4, 6), dtype=torch.quint8, scale=0.1, zp=3):
    x = torch.randn(shape)
    return torch.quantize_per_tensor(x.to("tpu"), scale, zp, dtype), torch.quantize_per_tensor(x, scale, zp, dtype)


VIEWS = {
    "view": lambda q: q.view(2, 12),
    "reshape": lambda q: q.reshape(3, 8),
    "flatten": lambda q: q.flatten(),
    "transpose": lambda q: q.transpose(0, 1),
    "t": lambda q: q.t(),
    "permute": lambda q: q.permute(1, 0),
    "slice": lambda q: q[1:3, ::2],
    "select": lambda q: q[2],
    "narrow": lambda q: q.narrow(1, 2, 3),
    "unsqueeze": lambda q: q.unsqueeze(1),
    "squeeze": lambda q: q.unsqueeze(0).squeeze(),
    "squeeze.dim": lambda q: q.unsqueeze(2).squeeze(2),
    "squeeze.dims": lambda q: q.unsqueeze(0).unsqueeze(3).squeeze((0, 3)),
    "unfold": lambda q: q.unfold(1, 2, 2),
    "as_strided": lambda q: q.as_strided((3, 2), (2, 5), 1),
    "expand": lambda q: q[:1].expand(3, 6),
    "chunk": lambda q: q.chunk(2, 1)[1],
    "detach": lambda q: q.detach(),
}


@pytest.mark.parametrize("name", list(VIEWS))
def test_views_share_storage(name):
    q, c = pair()
    v, w = VIEWS[name](q), VIEWS[name](c)
    assert_same_q(v, w)
    assert v.untyped_storage().data_ptr() == q.untyped_storage().data_ptr()
    assert v.storage_offset() == w.storage_offset()


def test_views_see_writes():
    q, c = pair()
    v = q.t()
    q.copy_(torch.quantize_per_tensor(torch.ones(4, 6, device="tpu"), 0.1, 3, torch.quint8))
    assert torch.equal(v.int_repr().cpu(), torch.full((6, 4), 13, dtype=torch.uint8))


@pytest.mark.parametrize("fmt", [torch.contiguous_format, torch.preserve_format, torch.channels_last])
def test_clone_and_contiguous(fmt):
    x = torch.randn(2, 3, 4, 5)
    for src in (x, x.transpose(1, 3), x[:, :, ::2]):
        q = torch.quantize_per_tensor(src.to("tpu"), 0.1, 2, torch.qint8)
        c = torch.quantize_per_tensor(src, 0.1, 2, torch.qint8)
        assert_same_q(q.clone(memory_format=fmt), c.clone(memory_format=fmt))
        assert_same_q(q.transpose(0, 2).contiguous(), c.transpose(0, 2).contiguous())
        cl = q.clone()
        assert cl.untyped_storage().data_ptr() != q.untyped_storage().data_ptr()


def test_per_channel_views_and_clone():
    x = torch.randn(3, 4, 5)
    scales, zps = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64), torch.tensor([0, 1, 2, 3])
    q = torch.quantize_per_channel(x.to("tpu"), scales, zps, 1, torch.qint8)
    c = torch.quantize_per_channel(x, scales, zps, 1, torch.qint8)
    for fn in (lambda t: t.clone(), lambda t: t.view(3, 4, 5, 1), lambda t: t.reshape(3, 4, 5), lambda t: t.unsqueeze(0),
               lambda t: t.unsqueeze(3).squeeze(3), lambda t: t.contiguous(), lambda t: t[1:], lambda t: t[:, 1:3],
               lambda t: t.narrow(1, 1, 2), lambda t: t.select(0, 1), lambda t: t[..., 2]):
        v, w = fn(q), fn(c)
        assert v.shape == w.shape and v.stride() == w.stride() and v.q_per_channel_axis() == w.q_per_channel_axis()
        assert torch.equal(v.q_per_channel_scales().cpu(), w.q_per_channel_scales())
        assert torch.equal(v.int_repr().cpu(), w.int_repr())
        try:  # PyTorch keeps the axis of some views whose size no longer matches the scales
            want = w.dequantize()
        except RuntimeError:
            raises_like_cpu(lambda t, fn=fn: fn(torch.quantize_per_channel(t, scales, zps, 1, torch.qint8)).dequantize(),
                            x)
            continue
        assert torch.equal(bits(v.dequantize().cpu()), bits(want))
    # strides that do not follow from a slice: CPU refuses them for per-channel tensors, as tpu does
    raises_like_cpu(lambda t: torch.quantize_per_channel(t, scales, zps, 1, torch.qint8).transpose(0, 2), x)


@pytest.mark.parametrize("dtype", QTYPES, ids=str)
def test_round_trips_between_devices(dtype):
    x = torch.randn(3, 4, 5) * 10
    c = torch.quantize_per_tensor(x, 0.1, 7, dtype)
    scales, zps = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64), torch.tensor([0, 1, 2, 3])
    pc = torch.quantize_per_channel(x, scales, zps, 1, dtype)
    # .to() of a quantized tensor gives a contiguous one on any device (PyTorch's _to_copy; a
    # tensor that is not dense, c[:, ::2], PyTorch copies with empty_like on its own device)
    for cpu in (c, pc, c.transpose(0, 2)):
        q = cpu.to("tpu")
        assert_same_q(q, cpu.contiguous())
        back = q.cpu()
        assert back.device.type == "cpu" and back.is_quantized and back.stride() == cpu.contiguous().stride()
        assert torch.equal(back.int_repr(), cpu.int_repr()) and torch.equal(back.dequantize(), cpu.dequantize())
        assert torch.equal(back, cpu.contiguous())
        if cpu.qscheme() == torch.per_channel_affine:  # the parameters follow to each device
            assert q.q_per_channel_scales().device.type == "tpu" and back.q_per_channel_scales().device.type == "cpu"


def test_copy_into_quantized_matches_cpu():
    x = values(200, 0.1)[:192].reshape(12, 16)
    # float values are quantized with the destination's quantizer
    q, c = pair((12, 16), torch.qint8, 0.1, 100)
    q.copy_(x.to("tpu"))
    c.copy_(x)
    assert_same_q(q, c)
    q.copy_(x)  # from the host
    assert_same_q(q, c)
    scales, zps = torch.linspace(0.05, 1, 12, dtype=torch.float64), torch.arange(12) - 6
    qc = torch.quantize_per_channel(torch.zeros(12, 16, device="tpu"), scales, zps, 0, torch.qint8)
    cc = torch.quantize_per_channel(torch.zeros(12, 16), scales, zps, 0, torch.qint8)
    qc.copy_(x.to("tpu"))
    cc.copy_(x)
    assert_same_q(qc, cc)
    # a quantized source lends its quantizer and integers (broadcast as copy_ does)
    src_c = torch.quantize_per_tensor(torch.randn(16), 0.5, 3, torch.qint8)
    for src in (src_c.to("tpu"), src_c):
        q, c = pair((12, 16), torch.qint8, 0.1, 100)
        q.copy_(src)
        c.copy_(src_c)
        assert_same_q(q, c)
    # a quantized tpu tensor into a CPU one; per-channel parameters follow to the host
    c2 = torch._empty_affine_quantized([12, 16], scale=1, zero_point=0, dtype=torch.qint8)
    c2.copy_(q)
    assert torch.equal(c2, c)
    c3 = torch.quantize_per_channel(torch.zeros(12, 16), scales, zps, 0, torch.qint8)
    c3.copy_(qc)
    assert c3.q_per_channel_scales().device.type == "cpu" and torch.equal(c3, cc)
    assert torch.equal(c3.dequantize(), cc.dequantize())


def test_copy_errors_match_cpu():
    cases = [
        lambda q, x: q.copy_(x.double()),  # only float32 values
        lambda q, x: x.copy_(q),  # no quantized -> float
        lambda q, x: q.copy_(torch.quantize_per_tensor(x, 0.1, 0, torch.quint8).to(q.device)),  # other dtype
        lambda q, x: q.copy_(x[:, :2]),  # other shape
        lambda q, x: q.copy_(x.t().contiguous().t()),  # not contiguous
        lambda q, x: q.copy_(torch.quantize_per_channel(x, torch.tensor([0.1] * 4), torch.tensor([0] * 4), 0,
                                                        torch.qint8).to(q.device)),  # other qscheme
    ]
    for case in cases:
        def run(q, x, case=case):
            return case(q, x)
        with pytest.raises(Exception) as cpu:
            run(torch._empty_affine_quantized([4, 4], scale=0.1, zero_point=0, dtype=torch.qint8), torch.randn(4, 4))
        with pytest.raises(type(cpu.value)) as tpu:
            run(torch._empty_affine_quantized([4, 4], scale=0.1, zero_point=0, dtype=torch.qint8, device="tpu"),
                torch.randn(4, 4, device="tpu"))
        assert str(tpu.value).split("\n")[0] == str(cpu.value).split("\n")[0]


def test_equal():
    q, c = pair()
    assert torch.equal(q, q.clone()) and torch.equal(q, c.to("tpu"))
    other = torch.quantize_per_tensor(q.dequantize(), 0.2, 3, torch.quint8)
    assert not torch.equal(q, other) and torch.equal(c, c.clone()) and not torch.equal(c, other.cpu())
    assert not torch.equal(q, torch.quantize_per_tensor(q.dequantize() + 1, 0.1, 3, torch.quint8))
    assert not torch.equal(q, q.dequantize())


def test_fill_():
    for value in (0.25, -3.0, 1e9):
        q, c = pair((3, 5), torch.qint8, 0.1, 2)
        assert_same_q(q.fill_(value), c.fill_(value))


def test_save_load_and_deepcopy():
    import copy
    import io

    x = torch.randn(3, 4)
    scales, zps = torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64), torch.tensor([0, 1, 2])
    for c in (torch.quantize_per_tensor(x, 0.1, 3, torch.quint8),
              torch.quantize_per_channel(x, scales, zps, 0, torch.qint8)):
        q = c.to("tpu")
        for t, want in ((q, c), (q.t(), c.t())) if c.qscheme() == torch.per_tensor_affine else ((q, c),):
            assert_same_q(copy.deepcopy(t), want)
            buf = io.BytesIO()
            torch.save(t, buf)
            buf.seek(0)
            assert_same_q(torch.load(buf, weights_only=True), want)
            buf.seek(0)
            back = torch.load(buf, map_location="cpu", weights_only=True)
            assert back.device.type == "cpu" and back.stride() == want.stride() and torch.equal(back, want)
        buf = io.BytesIO()
        torch.save(c, buf)
        buf.seek(0)
        assert_same_q(torch.load(buf, map_location="tpu", weights_only=True), c)


def test_repr():
    q, c = pair((2, 3))
    assert " ".join(repr(q).replace(", device='tpu:0'", "").split()) == " ".join(repr(c).split())
    assert q[1, 2].item() == c[1, 2].item()


def test_fused_eager_mode_gives_the_same_integers():
    x = values(5000, 0.1)
    want = torch.quantize_per_tensor(x, 0.1, 3, torch.qint8)
    with torch.tpu.eager_mode("fused"):
        got = torch.quantize_per_tensor(x.to("tpu") * 1.0, 0.1, 3, torch.qint8)
        d = got.dequantize() * 1.0
    assert_same_q(got, want)
    assert torch.equal(bits(d.cpu()), bits(want.dequantize()))


# ---------------------------------------------------------------- PyTorch's device-generic scenarios
def _ravel_like_upstream(tensors, size, nc=False):
    """test_view_ops.TestOldViewOps.test_ravel's checks"""
    for src in tensors:
        flat = src.ravel()
        assert flat.shape == torch.Size([size])
        assert torch.equal(src.view(-1).int_repr() if src.is_quantized else src.view(-1),
                           flat.int_repr() if src.is_quantized else flat)
        assert flat._base is src
        assert flat.is_contiguous()
        if nc:
            nc_src = src.t()
            nc_flat = nc_src.ravel()
            assert nc_flat.shape == torch.Size([size])
            want = nc_src.contiguous().view(-1)
            if src.is_quantized:
                assert_same_q(nc_flat, want.cpu())
                assert torch.equal(nc_flat, want)
            else:
                assert torch.equal(nc_flat, want)
            assert nc_flat._base is not src
            assert nc_flat.is_contiguous()


def test_ravel():
    device = "tpu"
    _ravel_like_upstream([torch.randn(5, 5, 5, 5, device=device),
                          torch._empty_affine_quantized([5, 5, 5, 5], scale=2, zero_point=3, dtype=torch.quint8,
                                                        device=device)], 625)
    _ravel_like_upstream([torch.randn(0, 2, 3, device=device), torch.randn(3, 0, 2, device=device),
                          torch._empty_affine_quantized([0, 2, 3], scale=2, zero_point=3, dtype=torch.quint8,
                                                        device=device),
                          torch._empty_affine_quantized([3, 0, 2], scale=2, zero_point=3, dtype=torch.quint8,
                                                        device=device)], 0)
    _ravel_like_upstream([torch.randn(5, 5, device=device),
                          torch._empty_affine_quantized([5, 5], scale=2, zero_point=3, dtype=torch.quint8,
                                                        device=device)], 25, True)


def test_ravel_and_flatten_through_the_test_suite_helpers():
    # the assertEqual PyTorch's suites use compares quantized tensors by qscheme, quantizer and
    # dequantized values
    from torch.testing._internal.common_utils import TestCase

    tc = TestCase()
    src = torch._empty_affine_quantized([5, 5, 5, 5], scale=2, zero_point=3, dtype=torch.quint8, device="tpu")
    src.copy_(torch.randn(5, 5, 5, 5, device="tpu") * 100)
    tc.assertEqual(src.view(-1), src.ravel())
    tc.assertEqual(src.ravel().data_ptr(), src.data_ptr())
    for start, end, shape in [(0, -1, [625]), (0, 2, [125, 5]), (0, 1, [25, 5, 5]), (1, 2, [5, 25, 5]),
                              (2, 3, [5, 5, 25]), (-2, -1, [5, 5, 25])]:
        flat = src.flatten(start, end)
        tc.assertEqual(flat.shape, torch.Size(shape))
        tc.assertEqual(src.view(-1), flat.view(-1))
    tc.assertEqual(src.flatten(2, 2), src)
    with pytest.raises(IndexError, match="Dimension out of range"):
        src.flatten(5, 10)
    with pytest.raises(RuntimeError, match="start_dim cannot come after end_dim"):
        src.flatten(2, 0)
    nc = src[:, ::2]
    tc.assertEqual(nc.flatten(), nc.contiguous().view(-1))
    tc.assertEqual(nc.reshape(-1), nc.cpu().reshape(-1))
    assert nc.reshape(-1).data_ptr() != src.data_ptr()
    tc.assertEqual(src.transpose(0, 3).reshape(-1), src.cpu().transpose(0, 3).reshape(-1))


# ---------------------------------------------------------------- everything else refuses
UNSUPPORTED = {
    "add": lambda q: q + q,
    "add scalar": lambda q: q + 1,
    "mul": lambda q: torch.mul(q, q),
    "relu": lambda q: torch.relu(q),
    "sum": lambda q: q.sum(),
    "max.dim": lambda q: q.max(0),
    "index_select": lambda q: q.index_select(0, torch.tensor([0], device="tpu")),
    "advanced indexing": lambda q: q[torch.tensor([0], device="tpu")],
    "masked_fill_": lambda q: q.masked_fill_(torch.ones(4, 6, dtype=torch.bool, device="tpu"), 1.0),
    "resize_": lambda q: q.resize_(30),
    "quantized::add": lambda q: torch.ops.quantized.add(q, q, 0.1, 0),
    "quantized::linear": lambda q: torch.ao.nn.quantized.Linear(6, 3)(q),
    "quantized::conv2d": lambda q: torch.ao.nn.quantized.Conv2d(1, 1, 1)(q.view(1, 1, 4, 6)),
    "cat": lambda q: torch.cat([q, q]),
}


@pytest.mark.parametrize("name", list(UNSUPPORTED))
def test_other_ops_raise_not_implemented(name):
    q, _ = pair()
    before = torch.tpu.metrics.fallback_ops()
    with pytest.raises(NotImplementedError, match="Quantizedtpu"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            UNSUPPORTED[name](q)
    assert torch.tpu.metrics.fallback_ops() == before  # nothing ran on the CPU fallback


@pytest.mark.parametrize("qdtype", [torch.quint8, torch.qint8, torch.qint32], ids=str)
@pytest.mark.parametrize("dims", [[0], [1, 2], [-1], [0, 1, 2]], ids=str)
def test_flip_as_cpu(qdtype, dims):
    # PyTorch's TestShapeOps.test_flip flips quantized tensors on the device
    x = torch.randn(3, 4, 5)
    cpu = torch.quantize_per_tensor(x, 0.1, 5, qdtype).flip(dims)
    ours = torch.quantize_per_tensor(x.to("tpu"), 0.1, 5, qdtype).flip(dims)
    assert ours.device.type == "tpu" and ours.shape == cpu.shape
    assert torch.equal(ours.int_repr().cpu(), cpu.int_repr())
    assert (ours.q_scale(), ours.q_zero_point()) == (cpu.q_scale(), cpu.q_zero_point())


def test_flip_of_a_per_channel_tensor_raises_as_cpu():
    x, scales, zero_points = torch.randn(3, 4), torch.tensor([0.1, 0.2, 0.3]), torch.tensor([1, 2, 3])
    for device in ("cpu", "tpu"):
        q = torch.quantize_per_channel(x.to(device), scales.to(device), zero_points.to(device), 0, torch.quint8)
        with pytest.raises(RuntimeError, match="only on uniformly quantized tensor"):
            q.flip([0])
