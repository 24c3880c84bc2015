"""What the property-based tests (test_fuzz_ops.py) and the C fuzz target (runtime/fuzz) found,
each kept as a plain regression test: the tpu gives CPU's result or CPU's exception, type and message."""
import pytest
import torch

import torch_tpu  # noqa: F401


def _outcome(fn, device):
    try:
        r = fn(device)
        torch.tpu.synchronize()
        return "ok", r
    except Exception as e:
        return type(e).__name__, str(e)


def _same_as_cpu(fn):
    cpu, tpu = _outcome(fn, "cpu"), _outcome(fn, "tpu")
    assert cpu[0] == tpu[0], (cpu, tpu)
    if cpu[0] == "ok":
        for c, t in zip(torch.utils._pytree.tree_leaves(cpu[1]), torch.utils._pytree.tree_leaves(tpu[1])):
            torch.testing.assert_close(t.cpu(), c)
    else:
        assert cpu[1] == tpu[1]


EMPTY = {
    # reductions without identity over a dim of size 0 returned 0 on tpu
    "max.dim": lambda d: torch.zeros(0, device=d).max(0),
    "min.dim 2-d": lambda d: torch.zeros(1, 0, device=d).min(1),
    "max.dim negative": lambda d: torch.zeros(1, 0, device=d).max(-1),
    "max.dim over the non-empty dim": lambda d: torch.zeros(1, 0, device=d).max(0),
    "max": lambda d: torch.zeros(0, device=d).max(),
    "min": lambda d: torch.zeros(2, 0, device=d).min(),
    "mode": lambda d: torch.zeros(0, device=d).mode(0),
    "kthvalue": lambda d: torch.zeros(0, device=d).kthvalue(1, 0),
    "aminmax": lambda d: torch.aminmax(torch.zeros(0, device=d), dim=0),
    "argmax": lambda d: torch.zeros(0, device=d).argmax(),
    "argmin dim": lambda d: torch.zeros(2, 0, device=d).argmin(1, keepdim=True),
    # indices are checked only where elements move, as CPU's kernels do
    "index of an empty result": lambda d: torch.zeros(1, 0, device=d)[torch.tensor([0, 1], device=d)],
    "index_put into an empty slice": lambda d: torch.zeros(1, 0, device=d).index_put(
        (torch.tensor([0, 1], device=d),), torch.tensor(1.0, device=d)),
    "index_add of nothing": lambda d: torch.zeros(1, 0, device=d).index_add(
        0, torch.tensor([0, 1], device=d), torch.zeros(2, 0, device=d)),
    "index_add into an empty self": lambda d: torch.zeros(0, 2, device=d).index_add(
        0, torch.tensor([0, 1], device=d), torch.zeros(2, 2, device=d)),
    "index_add 2-d out of range": lambda d: torch.zeros(1, 1, device=d).index_add(
        0, torch.tensor([0, 1], device=d), torch.zeros(2, 1, device=d)),
    "index_add 1-d out of range": lambda d: torch.zeros(1, device=d).index_add(
        0, torch.tensor([0, 1], device=d), torch.zeros(2, device=d)),
    # a max-pool window wholly in the padding gave 0 (CPU: -inf, the lowest integer)
    **{f"max_pool2d window in the padding {dt}": lambda d, dt=dt: torch.nn.functional.max_pool2d(
        torch.ones(1, 1, 1, 1, dtype=dt, device=d), 2, 1, 1, 2, return_indices=True)
       for dt in (torch.float32, torch.bfloat16, torch.int32, torch.int8, torch.uint8)},
    # a transposed convolution whose output has no rows gave an empty tensor (CPU raises)
    "conv_transpose2d output too small": lambda d: torch.nn.functional.conv_transpose2d(
        torch.ones(1, 1, 1, 2, device=d), torch.ones(1, 1, 2, 2, device=d), padding=1),
    "conv_transpose1d output too small": lambda d: torch.nn.functional.conv_transpose1d(
        torch.ones(1, 1, 1, device=d), torch.ones(1, 1, 1, device=d), padding=1),
}


@pytest.mark.parametrize("shape,normalized", [((6, 0, 5), [6, 0, 5]), ((2, 0), [0]), ((2, 0, 3), [0, 3])])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
def test_layer_norm_over_no_elements(shape, normalized, dtype):
    """The C fuzz target: a normalized shape with a 0 in a leading dim read a row of the empty input
    (out of bounds), and rstd was 1/sqrt(eps) where CPU's is NaN (the variance of nothing)."""
    x = torch.empty(shape, dtype=dtype)
    cpu = torch.native_layer_norm(x, normalized, None, None, 1e-5)
    tpu = torch.native_layer_norm(x.to("tpu"), normalized, None, None, 1e-5)
    for c, t in zip(cpu, tpu):
        torch.testing.assert_close(t.cpu(), c, equal_nan=True)
    assert tpu[2].isnan().all()


@pytest.mark.parametrize("case", sorted(EMPTY))
def test_empty_and_out_of_range(case):
    _same_as_cpu(EMPTY[case])


def _out_view(device, keep, strided):
    base = torch.arange(1.0, 5.0, device=device)
    x = (base[::2] if strided else base[:2]).clone()
    out = x.flatten()[:keep]
    torch.add(x, 1, out=out)
    return x


@pytest.mark.parametrize("keep,strided", [(0, False), (1, False), (0, True)])
def test_out_that_views_an_input(keep, strided):
    """CPU's elementwise ops check out= against the inputs before resizing it: a smaller
    non-empty view of an input is refused, an empty one is resized into the input."""
    _same_as_cpu(lambda d: _out_view(d, keep, strided))


def test_median_of_an_expanded_tensor():
    """PyTorch CPU's median(dim) of a stride-0 (expanded) tensor reads past the one stored
    element (0 or a denormal for [4., 4., 4.], found by the property tests); the tpu gives what
    CPU gives for the same values laid out densely."""
    x = torch.tensor([4.0]).expand(3)
    dense = x.contiguous().median(0)
    got = torch.tensor([4.0], device="tpu").expand(3).median(0)
    assert got.values.item() == dense.values.item() == 4.0 and got.indices.item() == dense.indices.item()


HUGE = {
    "2^62 elements": lambda d: torch.empty(2**62, device=d),
    "sizes whose product overflows int64": lambda d: torch.empty(2**40, 2**40, device=d),
    "bytes overflow int64": lambda d: torch.empty(2**31, 2**31, 4, device=d),
    "128 TiB": lambda d: torch.empty(2**45, device=d),
    "expand past int64 then copy": lambda d: torch.ones(1, device=d).expand(2**40, 2**30).contiguous(),
    "arange of 2^62": lambda d: torch.arange(2**62, device=d),
    "randn of 2^61": lambda d: torch.randn(2**61, device=d),
    "repeat past int64": lambda d: torch.ones(2, device=d).repeat(2**62),
}


@pytest.mark.parametrize("case", sorted(HUGE))
def test_requests_beyond_addressable_sizes_raise_as_cpu(case):
    """Never a crash: CPU's exception (an allocation CPU cannot make is an OutOfMemoryError
    here, which is a RuntimeError, as on CUDA)."""
    with pytest.raises(RuntimeError) as cpu:
        HUGE[case]("cpu")
    with pytest.raises(type(cpu.value)) as tpu:
        HUGE[case]("tpu")
        torch.tpu.synchronize()
    if not isinstance(tpu.value, torch.OutOfMemoryError):
        assert str(tpu.value) == str(cpu.value)
