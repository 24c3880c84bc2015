"""torch.compile on tpu: backend "tpu" (Inductor's C++ code generation registered for the
device, kernels launched on the tpu stream) against eager tpu, and CPU graphs compiled in the
same process exactly as without torch_tpu."""
import copy
import os
import pathlib
import subprocess
import sys

import pytest
from together import run_together
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "demo"))
from gpt import GPT, GPTConfig  # noqa: E402

CPU_CODE = """
import torch
from torch._inductor.utils import run_and_get_code
def f(x, y):
    return ((x.sin() + 1) * y).sum(1) + (x @ y.T).relu().sum(1)
x, y = torch.randn(33, 17), torch.randn(33, 17)
_, code = run_and_get_code(torch.compile(f), x, y)
print("".join(code))
"""


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_backend_is_registered():
    assert "tpu" in torch._dynamo.list_backends()


def test_dynamo_device_interface_is_complete():
    import inspect

    from torch._dynamo.device_interface import DeviceInterface, get_interface_for_device

    tpu = get_interface_for_device("tpu")
    stubs = [n for n, member in inspect.getmembers(DeviceInterface) if not n.startswith("__") and
             getattr(tpu, n) is member and "NotImplementedError" in inspect.getsource(member)]
    assert stubs == []
    s = torch.tpu.Stream()
    tpu._set_stream_by_id(s.stream_id, s.device_index, s.device_type)
    try:
        assert tpu.current_stream() == s
    finally:
        torch.tpu.set_stream(torch.tpu.default_stream())
    assert tpu.exchange_device(0) == 0 and tpu.get_device_properties(0).multi_processor_count >= 1


def test_compiled_graph_matches_eager_and_waits_for_eager_ops():
    def f(a, b):
        return ((a.sin() + 1) * b).sum(1) + (a @ b.T).relu().sum(1) / a.shape[1]

    torch.manual_seed(0)
    x, w = torch.randn(512, 512, device="tpu"), torch.randn(512, 512, device="tpu")
    y = torch.randn(512, 512, device="tpu")
    compiled = torch.compile(f, backend="tpu")
    for _ in range(3):
        # x @ w is still running on the stream when the compiled graph's kernels are issued:
        # they must run after it (on the host thread they would read an unfinished product).
        a = torch.tanh(x @ w)
        got = compiled(a, y)
        want = f(a, y)
        torch.testing.assert_close(got.cpu(), want.cpu(), rtol=1e-5, atol=1e-5)


def test_plain_compile_of_tpu_graph_uses_tpu_code_generation():
    from torch._inductor.utils import run_and_get_code

    def f(a):
        return (a.exp() * 2).cumsum(0).amax(1)

    a = torch.randn(64, 48, device="tpu")
    got, code = run_and_get_code(torch.compile(f), a)
    assert "TpuAsyncCompile" in "".join(code)
    torch.testing.assert_close(got.cpu(), f(a).cpu())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_graphs_compile_as_on_cpu(dtype):
    """A kernel whose every pointer is bfloat16 or float16 (its entry declared at::BFloat16*
    without an ATen header: the C++ compile failed); tpu runs Inductor's code for CPU, so the
    result equals compiled CPU's bit for bit."""
    def f(t):
        return (t * t + 1).sin() * t

    x = (torch.randn(1000) * 3).to(dtype)
    got = torch.compile(f, backend="tpu")(x.to("tpu"))
    assert got.dtype == dtype
    assert torch.equal(got.cpu(), torch.compile(f)(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compiled_tanh_gelu_and_its_gradient_are_accurate(dtype):
    """backend "tpu" writes GELU's tanh approximation through exp (compiler.decompositions):
    output and gradient at least as close to float64 as CPU's, over the range where
    1 + tanh cancels, infinities and NaN."""
    from torch_tpu.compare import check_like_cpu

    import torch.nn.functional as F

    torch.manual_seed(0)
    x = torch.cat([torch.randn(4000) * 4, torch.tensor([-30.0, -9.0, -6.0, -1e-6, 0.0, 1e-6, 5.0, 30.0,
                                                        float("nan"), float("inf"), -float("inf")])]).to(dtype)
    g = torch.randn(x.shape).to(dtype)

    def gelu_and_grad(t, compiled):
        t = t.clone().requires_grad_()
        fn = (lambda v: F.gelu(v, approximate="tanh"))
        y = (torch.compile(fn, backend="tpu") if compiled else fn)(t)
        y.backward(g.to(t.device, t.dtype))
        return y.detach().cpu(), t.grad.cpu()

    (y, dy), (yc, dyc), (yx, dyx) = (gelu_and_grad(x.to("tpu"), True), gelu_and_grad(x, False),
                                     gelu_and_grad(x.double(), False))
    check_like_cpu(y, yc, yx)
    check_like_cpu(dy, dyc, dyx, what="gradient")


CACHED_GRAPH = """
import torch
def f(a):
    return (a.exp() * 2).cumsum(0).amax(1)
torch.manual_seed(0)
a = torch.randn(64, 48, device="tpu")
print((torch.compile(f)(a) - f(a)).abs().max().item())
"""


@pytest.mark.once
@pytest.mark.slow
def test_a_graph_cached_for_another_vector_isa_is_not_reused(tmp_path):
    """Inductor's FX graph cache key lacks the vector ISA (torch 2.13): a tpu graph cached for
    AVX-512 and loaded where Inductor generates AVX2 (another host sharing the cache dir,
    emulated by ATEN_CPU_CAPABILITY) gave results off by 52 here, and heap corruption."""
    from torch._inductor.cpu_vec_isa import pick_vec_isa

    other = "avx2" if "avx512" in str(pick_vec_isa()) else "default"
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path))
    for extra in ({}, {"ATEN_CPU_CAPABILITY": other}):
        p = subprocess.run([sys.executable, "-c", CACHED_GRAPH], env=dict(env, **extra), capture_output=True,
                           text=True, timeout=600)
        assert p.returncode == 0, p.stderr[-3000:]
        assert float(p.stdout.split()[-1]) < 1e-3, (extra, p.stdout)


@pytest.mark.once
def test_cpu_graphs_compile_to_the_same_code_with_and_without_torch_tpu():
    runs = run_together([(["-c", "import torch_tpu\n" + CPU_CODE], dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="1")),
                         (["-c", CPU_CODE], dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0"))], timeout=600)
    for done in runs:
        assert done.returncode == 0, done.stderr[-3000:]
    with_tpu, without = (done.stdout for done in runs)
    assert "cpp_pybinding" in without and "TpuAsyncCompile" not in with_tpu
    assert with_tpu == without


def test_integer_division_by_zero_in_a_compiled_kernel_raises():
    def f(a, b):
        return (a // b) + 1

    a = torch.arange(8, device="tpu")
    b = torch.tensor([1, 2, 0, 1, 1, 1, 1, 1], device="tpu")
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.compile(f, backend="tpu")(a, b).cpu()
    torch.tpu.synchronize()  # the failure was taken: the stream works on
    assert torch.compile(f, backend="tpu")(a, b.clamp(min=1)).cpu()[2].item() == 3


def norm_gate(a):
    return torch.nn.functional.layer_norm(a * a.sigmoid(), a.shape[-1:]).sum(-1)


def test_static_shapes_recompile_per_shape_with_the_cause(monkeypatch, capfd):
    monkeypatch.setenv("TPU_EXPLAIN_RECOMPILES", "1")
    torch.tpu.metrics.reset()
    compiled = torch.compile(norm_gate, backend="tpu")
    for n in (4, 8, 8, 16):  # Dynamo alone would make dim 0 dynamic at the second size
        a = torch.randn(n, 24, device="tpu")
        torch.testing.assert_close(compiled(a).cpu(), norm_gate(a).cpu())
    c = torch.tpu.metrics.compile_counters()
    assert c["frames_compiled"] == 3 and c["recompiles"] == 2 and c["graph_breaks"] == 0
    assert [(r.input, r.dim, r.old, r.new) for r in torch.tpu.metrics.recompiles()] == [("L['a']", 0, 4, 8),
                                                                                       ("L['a']", 0, 8, 16)]
    assert c["graphs_compiled"] == 3 and c["compile_seconds"] > 0
    assert "norm_gate: recompiled because L['a'] dim 0 changed 8 -> 16" in capfd.readouterr().err


def test_bounded_dynamism_one_graph_for_every_size_in_the_bound():
    torch.tpu.metrics.reset()
    compiled = torch.compile(norm_gate, backend="tpu", options={"bounded_dynamism": True})
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    for n in (3, 8, 17, 40, 64, 2):
        a = torch.randn(n, 24, device="tpu")
        torch._dynamo.mark_dynamic(a, 0, min=2, max=64)
        torch.testing.assert_close(compiled(a).cpu(), norm_gate(a).cpu(), rtol=1e-5, atol=1e-5)
    c = torch.tpu.metrics.compile_counters()
    assert c["frames_compiled"] == 1 and c["recompiles"] == 0
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs == 1
    assert c["dynamic_bounds"] == {"norm_gate: L['a'] dim 0": (2, 64)}
    a = torch.randn(100, 24, device="tpu")  # outside the bound: a graph of its own, and why
    torch.testing.assert_close(compiled(a).cpu(), norm_gate(a).cpu(), rtol=1e-5, atol=1e-5)
    assert [str(r) for r in torch.tpu.metrics.recompiles()] == [
        "norm_gate: recompiled because L['a'] dim 0 changed 2..64 -> 100"]


def test_bounded_dynamism_requires_a_bound():
    compiled = torch.compile(norm_gate, backend="tpu", options={"bounded_dynamism": True})
    a = torch.randn(5, 24, device="tpu")
    torch._dynamo.mark_dynamic(a, 0)
    with pytest.raises(Exception, match="marked dynamic without a bound"):
        compiled(a)


@pytest.mark.once
def test_compiled_training_step_matches_eager():
    """At "highest" matmul precision: at the default (bf16 operands) a last-bit difference in a
    fused f32 value can round a matmul operand to the neighbouring bf16, and AdamW turns that
    into a visible parameter difference (1.8e-4 after two steps, where highest gives 8e-7)."""
    torch.manual_seed(0)
    cfg = GPTConfig(seq=16, layers=1, d=32, heads=2, dropout=0.0)
    base = GPT(cfg)
    x, y = torch.randint(0, cfg.vocab, (2, 16), device="tpu"), torch.randint(0, cfg.vocab, (2, 16), device="tpu")

    def step(m, opt):
        loss = m(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    models = [copy.deepcopy(base).to("tpu") for _ in range(2)]
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-3) for m in models]
    compiled = torch.compile(step, backend="tpu")
    with torch.tpu.precision("highest"):
        for _ in range(2):
            eager_loss, compiled_loss = step(models[0], opts[0]).item(), compiled(models[1], opts[1]).item()
            assert abs(compiled_loss - eager_loss) <= 1e-6 * abs(eager_loss)
    for pe, pc in zip(models[0].parameters(), models[1].parameters()):
        torch.testing.assert_close(pc.cpu(), pe.cpu())


@torch.library.custom_op("tpu_tests::scaled_gelu", mutates_args=())
def scaled_gelu(x: torch.Tensor, s: float) -> torch.Tensor:
    return torch.nn.functional.gelu(x) * s


@scaled_gelu.register_fake
def _(x, s):
    return torch.empty_like(x)


def test_custom_op_compiles_without_a_graph_break():
    def f(a):
        return scaled_gelu(a.sin() + 1, 2.0).cos().sum()

    a = torch.randn(1000, device="tpu")
    got = torch.compile(f, backend="tpu", fullgraph=True)(a)  # fullgraph: a graph break raises
    torch.testing.assert_close(got.cpu(), f(a).cpu())


def test_cpu_scalar_tensor_is_read_as_it_was_at_the_call():
    def f(a, s):
        return (a * s).sin() + s

    x, w = torch.randn(512, 512, device="tpu"), torch.randn(512, 512, device="tpu")
    s = torch.tensor(2.0)
    compiled = torch.compile(f, backend="tpu")
    compiled(x, s)
    a = x @ w  # still running when the graph's kernel is issued behind it
    got = compiled(a, s)
    s.fill_(100.0)  # after the call: the kernel must not see it
    torch.testing.assert_close(got.cpu(), f(a, torch.tensor(2.0)).cpu())


def test_many_cpu_scalar_tensors_neither_wait_nor_change_after_the_call():
    """A compiled AdamW step reads one CPU step counter per parameter: more snapshots than a
    stream command holds (52 made the launch wait for the whole backward every step)."""
    def f(a, scales):
        return sum(a * s for s in scales)

    scales = [torch.tensor(float(i % 7) / 8) for i in range(200)]
    x, w = torch.randn(64, device="tpu"), torch.randn(2048, 2048, device="tpu")
    compiled = torch.compile(f, backend="tpu")
    compiled(x, scales)
    w @ w  # a signature's first call runs blocking (its shape errors raise from the call)
    torch.tpu.synchronize()
    w @ w  # tens of milliseconds of work queued ahead of the graph's kernel
    got = compiled(x, scales)
    assert not torch.tpu.current_stream().query(), "the launch waited for the stream"
    for s in scales:
        s.fill_(100.0)  # after the call: the kernel must not see it
    want = f(x.cpu(), [torch.tensor(float(i % 7) / 8) for i in range(200)])
    torch.testing.assert_close(got.cpu(), want)


def test_compiled_dropout_random_streams():
    """Inductor's generator by default (reproducible, not eager's draws, as on CPU and CUDA);
    with fallback_random the op table's random ops stay tpu kernels: eager's exact draws."""
    def f(a):
        return torch.nn.functional.dropout(a, p=0.5, training=True) * 2

    a = torch.ones(10000, device="tpu")
    torch.manual_seed(0)
    eager = f(a).cpu()
    runs = []
    for options in (None, None, {"fallback_random": True}):
        torch._dynamo.reset()
        torch.manual_seed(0)
        runs.append(torch.compile(f, backend="tpu", options=options)(a).cpu())
    assert torch.equal(runs[0], runs[1]) and abs((runs[0] != 0).float().mean().item() - 0.5) < 0.03
    assert set(runs[0].unique().tolist()) == {0.0, 4.0}  # kept values scaled by 1 / (1 - p), then doubled
    assert torch.equal(runs[2], eager)


def test_metrics_reset_starts_the_graph_break_count_again():
    """compile_counters()["graph_breaks"] counts from torch.tpu.metrics.reset(); Dynamo's own
    process-wide counter is left as it was (an earlier compiled training step's breaks were
    reported by a later, break-free compile)."""
    def f(a):
        a = a.sin()
        torch._dynamo.graph_break()
        return a.cos()

    torch._dynamo.reset()
    torch.tpu.metrics.reset()
    x = torch.randn(8, device="tpu")
    torch.compile(f, backend="tpu")(x)
    dynamo_breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
    assert torch.tpu.metrics.compile_counters()["graph_breaks"] >= 1
    torch.tpu.metrics.reset()
    assert torch.tpu.metrics.compile_counters()["graph_breaks"] == 0
    assert sum(torch._dynamo.utils.counters["graph_break"].values()) == dynamo_breaks
    torch.compile(lambda a: a.exp(), backend="tpu")(x)
    assert torch.tpu.metrics.compile_counters()["graph_breaks"] == 0
