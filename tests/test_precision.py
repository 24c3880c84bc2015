"""Emulated MXU numerics of float32 matmuls: "default" is one bf16 pass with f32 accumulation,
"high" is bf16_3x, "highest" is about f32. Errors are measured against a float64 reference."""
import pytest
import torch

import torch_tpu  # noqa: F401  (registers the tpu device)

K = 256


def _inputs(seed=0, m=64, k=K, n=48):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)


def _rel_err(a, b):
    ref = a.double() @ b.double()
    with_tpu = (a.to("tpu") @ b.to("tpu")).cpu().double()
    return ((with_tpu - ref).norm() / ref.norm()).item()


def _err(p, a, b):
    with torch.tpu.precision(p):
        return _rel_err(a, b)


@pytest.fixture(autouse=True)
def _restore_precision():
    prev = torch.tpu.get_matmul_precision()
    yield
    torch.tpu.set_matmul_precision(prev)


def test_highest_matches_cpu_f32():
    a, b = _inputs()
    with torch.tpu.precision("highest"):
        got = (a.to("tpu") @ b.to("tpu")).cpu()
    torch.testing.assert_close(got, a @ b, rtol=1e-5, atol=1e-4)  # f32 summation order only
    assert _err("highest", a, b) < 1e-6


def test_error_levels_are_ordered():
    a, b = _inputs(1)
    default, high, highest = (_err(p, a, b) for p in ("default", "high", "highest"))
    assert 1e-4 < default < 1e-2, default            # bf16-level
    assert default > 100 * highest, (default, highest)
    assert high < default / 100, (high, default)      # bf16_3x: close to f32
    assert high < 1e-5, high


def test_default_is_one_bf16_pass():
    """default == f32 matmul of bf16-rounded inputs (products exact, f32 accumulation)."""
    a, b = _inputs(2)
    ab, bb = a.bfloat16().float(), b.bfloat16().float()
    want = (ab.double() @ bb.double()).float()
    with torch.tpu.precision("default"):
        got = (a.to("tpu") @ b.to("tpu")).cpu()
    # only the order of the f32 accumulation differs
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(got, a @ b, rtol=1e-5, atol=1e-5)


def test_high_is_bf16_3x():
    a, b = _inputs(3)
    split = lambda x: (x.bfloat16().float(), (x - x.bfloat16().float()).bfloat16().float())  # noqa: E731
    (ah, al), (bh, bl) = split(a), split(b)
    want = (ah.double() @ bh.double() + ah.double() @ bl.double() + al.double() @ bh.double()).float()
    with torch.tpu.precision("high"):
        got = (a.to("tpu") @ b.to("tpu")).cpu()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_set_matmul_precision_switches():
    a, b = _inputs(4)
    torch.tpu.set_matmul_precision("highest")
    assert torch.tpu.get_matmul_precision() == "highest"
    e_highest = _rel_err(a, b)
    torch.tpu.set_matmul_precision("default")
    assert torch.tpu.get_matmul_precision() == "default"
    e_default = _rel_err(a, b)
    assert e_default > 100 * e_highest
    with torch.tpu.precision("high"):
        assert torch.tpu.get_matmul_precision() == "high"
    assert torch.tpu.get_matmul_precision() == "default"


@pytest.mark.parametrize("op", ["bmm", "addmm", "baddbmm", "mv"])
def test_every_matmul_op_honours_precision(op):
    a, b = _inputs(5, m=8, n=8)
    s = torch.randn(8, 8)
    calls = {
        "bmm": lambda s, a, b: torch.bmm(a[None], b[None])[0],
        "addmm": lambda s, a, b: torch.addmm(s, a, b, beta=0),
        "baddbmm": lambda s, a, b: torch.baddbmm(s[None], a[None], b[None], beta=0)[0],
        "mv": lambda s, a, b: torch.mv(a, b[:, 0])[:, None],
    }
    fn = calls[op]
    ref = fn(s.double(), a.double(), b.double())
    errs = {}
    for p in ("default", "highest"):
        with torch.tpu.precision(p):
            errs[p] = ((fn(s.to("tpu"), a.to("tpu"), b.to("tpu")).cpu().double() - ref).norm() / ref.norm()).item()
    assert errs["default"] > 100 * errs["highest"], errs


def test_bf16_inputs_ignore_precision():
    a, b = (x.bfloat16() for x in _inputs(6))
    outs = []
    for p in ("default", "highest"):
        with torch.tpu.precision(p):
            outs.append((a.to("tpu") @ b.to("tpu")).cpu())
    assert torch.equal(outs[0], outs[1])


@pytest.mark.parametrize("p", ["default", "high", "highest"])
@pytest.mark.parametrize("m,k,n", [(37, 300, 17), (64, 256, 33), (129, 1100, 100), (1024, 256, 768), (8, 513, 1030)])
def test_addmm_bias_is_the_rounded_product_plus_bias(p, m, k, n):
    """addmm with beta = alpha = 1 and a row bias adds the bias inside the GEMM's last store
    (no epilogue pass): the result must be exactly mm's rounded values plus the bias, for K
    within one run of the micro-kernel and past it, partial tiles, a NaN in the bias, and
    the bias as [N], [1, N] and expanded [M, N]."""
    g = torch.Generator().manual_seed(m + k + n)
    a, b, bias = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g), torch.randn(n, generator=g)
    bias[n // 2] = float("nan")
    a, b, bias = a.to("tpu"), b.to("tpu"), bias.to("tpu")
    with torch.tpu.precision(p):
        want = (a @ b + bias).cpu()
        for s in (bias, bias[None], bias.expand(m, n)):
            got = torch.addmm(s, a, b).cpu()
            assert torch.equal(got.view(torch.int32), want.view(torch.int32)), (s.shape, (got - want).abs().max())
        got = torch.nn.functional.linear(a, b.t().contiguous(), bias).cpu()
        assert torch.equal(got.view(torch.int32), want.view(torch.int32))


@pytest.mark.parametrize("p", ["default", "high"])
@pytest.mark.parametrize("m,k,n", [(8, 513, 1030), (64, 1025, 600), (96, 700, 2100)])
def test_few_row_gemm_equals_the_same_rows_of_a_taller_one(p, m, k, n):
    """Up to 96 rows, the GEMM's threads each pack their own columns of B and run the K blocks
    unsynchronized (a short last K block once moved one thread's packed columns onto those
    another was still reading: wrong sums, now and then). Every C element's sum is the same
    whatever the row split, so the rows of a taller product (one whose threads share a
    packed B) are the reference, repeated to give a race its chances."""
    g = torch.Generator().manual_seed(m + k + n)
    a, b = torch.randn(m, k, generator=g).to("tpu"), torch.randn(k, n, generator=g).to("tpu")
    tall = torch.cat([a, torch.zeros(400, k, device="tpu")])
    with torch.tpu.precision(p):
        want = (tall @ b)[:m].cpu()
        for _ in range(10):
            assert torch.equal((a @ b).cpu(), want)


_CONV_CASES = [  # (N, C, Co, H, W, k, stride, padding, dilation, groups): the paths of the kernel
    (2, 8, 16, 9, 12, 3, 1, 1, 1, 1),    # stride 1: columns read in place from a padded copy
    (2, 64, 64, 8, 8, 3, 1, 1, 1, 1),    # K = 576 spans two K blocks
    (1, 6, 4, 10, 7, (3, 2), 1, (2, 0), (2, 1), 2),  # dilated, grouped, uneven padding
    (2, 8, 16, 11, 9, 3, 2, 1, 1, 1),    # strided: columns produced line by line for packing
    (1, 4, 6, 7, 7, 1, 1, 0, 1, 1)]      # 1x1


@pytest.mark.parametrize("p", ["default", "high", "highest"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", _CONV_CASES)
def test_conv_is_the_matmul_of_its_columns(p, dtype, case):
    """A convolution is one GEMM of the weight with the image's columns (unfold): its paths
    (columns in place, packed from lines of the image, or im2col'ed), at every precision, must
    give exactly the bits of that matmul; so must its weight gradient (columns x grad^T) and a
    stride-1 transposed convolution (the input gradient's path) against the flipped weight's."""
    n, c, co, h, w_, k, st, pd, dl, groups = case
    g = torch.Generator().manual_seed(n + c + co + h)
    x = torch.randn(n, c, h, w_, generator=g, dtype=dtype)
    k2 = k if isinstance(k, tuple) else (k, k)
    w = torch.randn(co, c // groups, *k2, generator=g, dtype=dtype)
    xt, wt = x.to("tpu"), w.to("tpu")
    with torch.tpu.precision(p):
        got = torch.nn.functional.conv2d(xt, wt, stride=st, padding=pd, dilation=dl, groups=groups)
        cols = torch.nn.functional.unfold(xt, k2, dilation=dl, padding=pd, stride=st)  # [n, c*kh*kw, L]
        cols = cols.view(n, groups, -1, cols.shape[-1])
        want = torch.cat([wt.view(groups, co // groups, -1)[i] @ cols[:, i] for i in range(groups)], 1)
        assert torch.equal(got.reshape(n, co, -1).cpu(), want.cpu()), (got.reshape(n, co, -1) - want).abs().max()
        # the weight gradient: per sample columns x grad^T, added to the accumulator one run of
        # the micro-kernel at a time (256 positions; 85 with HIGH's three parts), in order
        go = torch.randn(got.shape, generator=g, dtype=dtype).to("tpu")
        gw = torch.ops.aten.convolution_backward(go, xt, wt, None, [st, st], list(pd) if isinstance(pd, tuple) else [pd, pd],
                                                 list(dl) if isinstance(dl, tuple) else [dl, dl], False, [0, 0], groups,
                                                 [False, True, False])[1]
        gos = go.reshape(n, groups, co // groups, -1)
        for i in range(groups):
            acc = torch.zeros(cols.shape[2], co // groups, dtype=dtype, device="tpu")
            run = 256 // 3 if p == "high" and dtype == torch.float32 else 256
            for s in range(n):
                for j in range(0, cols.shape[-1], run):
                    acc = acc + cols[s, i, :, j:j + run] @ gos[s, i, :, j:j + run].t()
            want = acc.t().reshape(co // groups, *wt.shape[1:])
            assert torch.equal(gw[i * (co // groups):(i + 1) * (co // groups)].cpu(), want.cpu()), i
        if st == 1 and groups == 1 and dl == 1 and isinstance(pd, int) and pd <= k2[0] - 1:
            y = torch.randn(n, co, h, w_, generator=g, dtype=dtype).to("tpu")
            got = torch.nn.functional.conv_transpose2d(y, wt, padding=pd)
            want = torch.nn.functional.conv2d(y, wt.transpose(0, 1).flip(-1, -2), padding=k2[0] - 1 - pd)
            assert torch.equal(got.cpu(), want.cpu())


@pytest.mark.parametrize("kw", [dict(dilation=2, output_padding=1, padding=4), dict(dilation=2, output_padding=1, padding=3),
                                dict(dilation=3, output_padding=2, padding=6), dict(dilation=2, output_padding=1),
                                dict(dilation=(3, 2), output_padding=(2, 1), padding=(2, 5)), dict(padding=2)])
def test_stride1_transposed_conv_matches_cpu(kw):
    """A stride-1 transposed convolution runs as a convolution with the flipped weight whose
    columns are read from a zero-padded image: output_padding (allowed below the dilation)
    makes the output longer than the padding alone covers, and the copy must be padded up to
    the last position read (it read the next row's values: 11 off)."""
    g = torch.Generator().manual_seed(7)
    x, w = torch.randn(2, 4, 7, 6, generator=g, dtype=torch.float64), torch.randn(4, 3, 3, 3, generator=g, dtype=torch.float64)
    want = torch.nn.functional.conv_transpose2d(x, w, stride=1, **kw)
    got = torch.nn.functional.conv_transpose2d(x.to("tpu"), w.to("tpu"), stride=1, **kw).cpu()
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape,dim", [((5,), 0), ((5, 3), 0), ((5, 3, 2), 1)])
def test_index_add_into_half_rounds_the_sum_once(dtype, shape, dim):
    """Forty sources onto five rows: each output is its float64 sum rounded once (CPU rounds at
    every add on some of these paths, once on others)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=g).to(dtype)
    idx = torch.randint(0, shape[dim], (40,), generator=g)
    src = torch.randn(shape[:dim] + (40,) + shape[dim + 1:], generator=g).to(dtype)
    got = x.to("tpu").index_add_(dim, idx.to("tpu"), src.to("tpu")).cpu()
    exact = x.double().index_add_(dim, idx, src.double())
    assert torch.equal(got, exact.to(dtype))
    cpu = x.clone().index_add_(dim, idx, src)
    assert (got.double() - exact).abs().max() <= (cpu.double() - exact).abs().max()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape,dim", [((5,), 0), ((5, 3), 1), ((4, 3, 2), 1)])
def test_scatter_add_into_half_rounds_the_sum_once_as_cpu(dtype, shape, dim):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(shape, generator=g).to(dtype)
    ishape = shape[:dim] + (30,) + shape[dim + 1:]
    idx = torch.randint(0, shape[dim], ishape, generator=g)
    src = torch.randn(ishape, generator=g).to(dtype)
    got = x.to("tpu").scatter_add(dim, idx.to("tpu"), src.to("tpu")).cpu()
    assert torch.equal(got, x.double().scatter_add(dim, idx, src.double()).to(dtype))
    assert torch.equal(got, x.scatter_add(dim, idx, src))  # CPU sums in float and rounds once too
