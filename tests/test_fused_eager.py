"""Fused eager mode ("fused", TORCH_TPU_DEFER_AND_FUSE=1): elementwise chains run as one tiled
command, bit-identical to strict mode (torch.equal, not allclose) — across tile sizes, dtypes,
in-place ops, chains cut by reductions, .item(), matmuls, printing and freed tensors, the
AdamW step, threads and side streams; and the mode's switches (set_eager_mode, the context
manager, the environment variable, `python -m torch_tpu info`)."""
import os
import pathlib
import subprocess
import sys
import threading
import time

import pytest
from together import run_together
import torch

import torch_tpu  # noqa: F401

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "bench"))
from bench_fused import activation_chain  # noqa: E402  (the benchmark's ten-op chain)

TILE = 32 * 1024  # runtime/src/fuse.c TILE_ELEMENTS
# below the inline threshold, one tile, exact tiles, a one-element remainder, ragged, 2-D
SIZES = [(1000,), (5000,), (2 * TILE,), (3 * TILE + 1,), (100003,), (301, 707)]


def in_place_chain(x):
    y = x.clone()
    y.mul_(0.5).add_(x, alpha=0.25).sigmoid_()
    y.sub_(0.5).abs_().sqrt_().mul_(torch.tensor(3.0))  # a 0-dim CPU tensor operand
    z = torch.empty_like(y)
    torch.mul(y, x, out=z)
    return torch.where(z > 0, z, y).exp_()


def fused_counts():
    m = torch.tpu.metrics.counters()
    return m["fused_chains"], m["fused_ops"]


def run(mode, fn, *args):
    """fn(*args) in `mode`, results on the CPU, and the fused chains it ran."""
    c0, o0 = fused_counts()
    with torch.tpu.eager_mode(mode):
        out = fn(*args)
        out = [t.cpu() for t in out] if isinstance(out, (tuple, list)) else out.cpu()
    c1, o1 = fused_counts()
    return out, c1 - c0, o1 - o0


def assert_same(a, b):
    if isinstance(a, list):
        assert len(a) == len(b)
        for u, v in zip(a, b):
            assert_same(u, v)
        return
    assert a.dtype == b.dtype and a.shape == b.shape
    assert torch.equal(a, b), f"max difference {(a.double() - b.double()).abs().max().item()}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", SIZES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("chain", [activation_chain, in_place_chain])
def test_chain_bit_identical_to_strict(chain, shape, dtype):
    torch.manual_seed(0)
    x = (torch.randn(shape) * 2).to(dtype).to("tpu")
    strict, chains, _ = run("strict", chain, x)
    assert chains == 0
    fused, chains, ops = run("fused", chain, x)
    assert_same(strict, fused)
    if x.numel() > 4096:  # smaller ops stay on strict mode's inline path
        assert chains >= 1 and ops >= 8, (chains, ops)


def interrupted(x, w, cut):
    """The chain with a synchronising or non-elementwise op in the middle."""
    y = torch.tanh(x * 1.3) + x
    extra = []
    if cut == "sum":
        y = y * y.sum()  # a reduction (not fusable) reading the chain's output
    elif cut == "item":
        y = y - y[3, 5].item()  # a host read of a chained result
    elif cut == "matmul":
        extra.append(y.reshape(-1, w.shape[0]) @ w)
    elif cut == "print":
        extra.append(torch.tensor([len(str(y)), len(repr(y[:5]))]))
    elif cut == "free":
        t = torch.exp(y)
        y = y * t
        del t  # its block goes back to the cache while the chain still reads it
        u = torch.sigmoid(y)  # an allocation of the same size: the freed block, same stream
        y = y + u
        side = torch.tpu.Stream()
        with torch.tpu.stream(side):  # another stream must not get a block in use
            extra.append(torch.full_like(y, 2.0) * 3)
        torch.tpu.current_stream().wait_stream(side)
    y = torch.sqrt(torch.abs(y)) * torch.sigmoid(y)
    return [y, *extra]


@pytest.mark.parametrize("cut", ["sum", "item", "matmul", "print", "free"])
def test_interrupted_chain_bit_identical(cut):
    torch.manual_seed(1)
    x = torch.randn(64, 1031).to("tpu")
    w = torch.randn(1031, 16).to("tpu")
    strict, _, _ = run("strict", interrupted, x, w, cut)
    fused, chains, _ = run("fused", interrupted, x, w, cut)
    assert_same(strict, fused)
    assert chains >= 1


def test_freed_block_not_given_to_another_stream_while_chained():
    n = 200_000
    torch.tpu.empty_cache()  # the freed block below is then the only cached one of its size
    x = torch.randn(n).to("tpu")
    side = torch.tpu.Stream()
    (torch.sigmoid(torch.exp(x))).mul_(x)  # the signatures' first calls run blocking (never chained)
    with torch.tpu.eager_mode("fused"):
        a = torch.exp(x)
        b = torch.sigmoid(a)
        b.mul_(a)  # the chain reads a ...
        ptr = a.data_ptr()
        del a  # ... which is freed before the chain ran
        with torch.tpu.stream(side):
            c = torch.empty(n, device="tpu")
        assert c.data_ptr() != ptr
        strict_b = b.cpu()
    with torch.tpu.eager_mode("strict"):
        ref = torch.sigmoid(torch.exp(x)) * torch.exp(x)
    assert torch.equal(strict_b, ref.cpu())


def test_side_stream_sees_default_stream_chain():
    x = torch.randn(300_000).to("tpu")
    ref = (torch.sigmoid(x) * x + 1).neg()
    with torch.tpu.eager_mode("fused"):
        y = torch.sigmoid(x) * x
        y.add_(1)  # pending on the default stream
        s = torch.tpu.Stream()
        with torch.tpu.stream(s):
            z = y.neg()  # ordered after the default stream's earlier work
        s.synchronize()
        assert torch.equal(z.cpu(), ref.cpu())


def small_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.LayerNorm(256),
                               torch.nn.Linear(256, 256), torch.nn.SiLU(), torch.nn.Linear(256, 8))


@pytest.mark.parametrize("foreach", [None, False], ids=["default", "per_tensor"])
def test_adamw_steps_bit_identical(foreach):
    base = small_model()
    torch.manual_seed(2)
    data = [(torch.randn(32, 64), torch.randn(32, 8)) for _ in range(3)]
    results = {}
    for mode in ("strict", "fused"):
        model = __import__("copy").deepcopy(base).to("tpu")
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1, foreach=foreach)
        c0, o0 = fused_counts()
        with torch.tpu.eager_mode(mode):
            losses = []
            for x, y in data:
                loss = torch.nn.functional.mse_loss(model(x.to("tpu")), y.to("tpu"))
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
        results[mode] = (losses, [p.detach().cpu() for p in model.parameters()],
                         [s.cpu() for st in opt.state.values() for s in st.values() if torch.is_tensor(s)])
        if mode == "fused":
            assert fused_counts()[0] > c0  # the update chains fused (per parameter, or the foreach calls)
        if mode == "fused" and foreach is None:
            assert torch.tpu.metrics.counters()["fused_ops"] - o0 >= 8 * len(data)  # AdamW's 8 foreach calls
    assert results["strict"][0] == results["fused"][0]
    assert_same(results["strict"][1], results["fused"][1])
    assert_same(results["strict"][2], results["fused"][2])


def foreach_chain(xs, ys, w):
    """An optimizer-like run of foreach calls: scalar, list, scalar-list, 0-dim tensor
    operands, in-place and fresh outputs."""
    xs = [x.clone() for x in xs]
    torch._foreach_mul_(xs, 0.5)
    torch._foreach_add_(xs, ys, alpha=0.25)
    torch._foreach_lerp_(xs, ys, 0.3)
    torch._foreach_mul_(xs, w)  # one 0-dim tensor for every lane
    torch._foreach_div_(xs, [1.0 + i for i in range(len(xs))])
    s = torch._foreach_sqrt(torch._foreach_abs(xs))
    torch._foreach_addcdiv_(xs, ys, s, [0.1 * (i + 1) for i in range(len(xs))])
    return xs + list(s)


# lanes of one tile, several tiles with a one-element remainder, one element, 2-D
LANES = [(5000,), (3 * TILE + 1,), (1,), (301, 707), (2 * TILE,)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_foreach_chain_bit_identical_to_strict(dtype):
    torch.manual_seed(4)
    xs = [torch.randn(s).to(dtype).to("tpu") for s in LANES]
    ys = [torch.randn(s).to(dtype).to("tpu") for s in LANES]
    w = torch.tensor(1.5, dtype=dtype).to("tpu")
    strict, chains, _ = run("strict", foreach_chain, xs, ys, w)
    fused, chains, ops = run("fused", foreach_chain, xs, ys, w)
    assert_same(strict, fused)
    assert chains >= 1 and ops >= 8, (chains, ops)


def crossed_lanes(a, b):
    """Lane 1 reads what lane 0 writes: run lane by lane this would read a later value."""
    a, b = a.clone(), b.clone()
    torch._foreach_mul_([a, b], 3.0)
    torch._foreach_add_([a, b], [b, a])  # a += b, then b += (new) a
    torch._foreach_mul_([a, b], 2.0)
    torch._foreach_add_([b, a], 1.0)  # the lists in another order
    torch._foreach_sqrt_([a, b])
    return [a, b]


def test_foreach_lanes_sharing_a_tensor_keep_strict_order():
    torch.manual_seed(5)
    a, b = (torch.rand(3 * TILE).to("tpu") for _ in range(2))
    strict, _, _ = run("strict", crossed_lanes, a, b)
    fused, _, _ = run("fused", crossed_lanes, a, b)
    assert_same(strict, fused)


def test_threads_each_with_their_stream():
    torch.manual_seed(3)
    xs = [torch.randn(150_000).to("tpu") for _ in range(4)]
    refs = [activation_chain(x).cpu() for x in xs]
    outs = [None] * len(xs)

    def work(i):
        with torch.tpu.stream(torch.tpu.Stream()):
            for _ in range(3):
                outs[i] = activation_chain(xs[i])
            torch.tpu.current_stream().synchronize()

    with torch.tpu.eager_mode("fused"):
        threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for ref, out in zip(refs, outs):
        assert torch.equal(ref, out.cpu())


def test_asynchronous_error_after_a_chain_surfaces_at_sync():
    # (an elementwise kernel's own errors are dtype errors, raised by a signature's first, blocking
    # call, or integer division by zero, which runs blocking: a failing chained call is only
    # reachable from C, runtime/tests/test_fused.c)
    x = torch.randn(100_000).to("tpu")
    p = torch.full((100_000,), 2.0, device="tpu")  # bernoulli probabilities out of range: found in the data
    torch.empty(100_000, device="tpu").bernoulli_(torch.full((100_000,), 0.5, device="tpu"))  # a signature's first call blocks
    with torch.tpu.eager_mode("fused"):
        y = torch.sigmoid(x) * x
        torch.empty(100_000, device="tpu").bernoulli_(p)  # random: not fused, flushes the chain
        with pytest.raises(RuntimeError, match="bernoulli"):
            torch.tpu.synchronize()
        assert torch.equal(y.cpu(), (torch.sigmoid(x) * x).cpu())


def test_mode_switches_through_the_table():
    assert torch.tpu.get_eager_mode() == "strict"
    torch.tpu.set_eager_mode("fused")
    try:
        assert torch.tpu.get_eager_mode() == "fused"
        with torch.tpu.eager_mode("debug"):
            assert torch.tpu.get_eager_mode() == "debug"
        assert torch.tpu.get_eager_mode() == "fused"
    finally:
        torch.tpu.set_eager_mode("strict")
    with pytest.raises(ValueError, match="fused"):
        torch.tpu.set_eager_mode("lazy")


def test_switching_modes_mid_program_flushes():
    x = torch.randn(250_000).to("tpu")
    ref = torch.exp(torch.sigmoid(x) * 2).cpu()
    torch.tpu.set_eager_mode("fused")
    y = torch.sigmoid(x) * 2
    y.exp_()
    torch.tpu.set_eager_mode("strict")  # synchronizes the device, the pending chain included
    assert torch.equal(y.cpu(), ref)
    # the runtime's own switch (no synchronization) enqueues the pending chain: it runs by itself
    torch.tpu.set_eager_mode("fused")
    y = torch.sigmoid(x) * 2
    y.exp_()
    def chains_run():  # the runtime's own counter: torch.tpu.metrics would synchronize (and flush) first
        return torch_tpu._C._metrics()["fused_chains"]
    c0 = chains_run()
    torch_tpu._C._set_eager_mode(torch_tpu._C._eager_modes()["strict"])
    deadline = time.monotonic() + 30
    while chains_run() == c0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert chains_run() == c0 + 1
    assert torch.equal(y.cpu(), ref)


def test_environment_variable_selects_fused_and_debug_wins():
    code = ("import torch, torch_tpu; x = torch.randn(100000, device='tpu')\n"
            "for _ in range(2): y = (torch.sigmoid(x) * x).exp(); y.cpu()  # the first calls run blocking\n"
            "print(torch.tpu.get_eager_mode(), torch.tpu.metrics.counters()['fused_chains'])")
    cases = [({"TORCH_TPU_DEFER_AND_FUSE": "1"}, ["fused", "1"]), ({"TORCH_TPU_DEFER_AND_FUSE": "0"}, ["strict", "0"]),
             ({"TORCH_TPU_DEFER_AND_FUSE": "1", "TPU_LAUNCH_BLOCKING": "1"}, ["debug", "0"])]
    runs = run_together([(["-c", code], dict(os.environ, **env)) for env, _ in cases])
    for (env, expected), run in zip(cases, runs):
        assert run.returncode == 0, run.stderr[-3000:]
        assert run.stdout.split() == expected, env


def test_info_lists_the_variable():
    out = subprocess.run([sys.executable, "-m", "torch_tpu", "info"], capture_output=True, text=True, check=True,
                         env=dict(os.environ, TORCH_TPU_DEFER_AND_FUSE="1"), timeout=300).stdout
    assert "TORCH_TPU_DEFER_AND_FUSE" in out and "eager mode fused" in out
