"""torch.compile on tpu: backend "tpu" (Inductor's C++ code generation registered for the
device, kernels launched on the tpu stream) against eager tpu, and CPU graphs compiled in the
same process exactly as without torch_tpu."""
import copy
import os
import pathlib
import subprocess
import sys

import pytest
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


def test_cpu_graphs_compile_to_the_same_code_with_and_without_torch_tpu():
    def code(autoload):
        env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="1" if autoload else "0")
        prefix = "import torch_tpu\n" if autoload else ""
        done = subprocess.run([sys.executable, "-c", prefix + CPU_CODE], capture_output=True, text=True, env=env,
                              timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    with_tpu, without = code(True), code(False)
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


def test_mark_dynamic_compiles_one_graph_for_every_size():
    def f(a):
        return torch.nn.functional.layer_norm(a * a.sigmoid(), a.shape[-1:]).sum(-1)

    compiled = torch.compile(f, backend="tpu")
    frames = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    for n in (3, 8, 17, 40):
        a = torch.randn(n, 24, device="tpu")
        torch._dynamo.mark_dynamic(a, 0, min=2, max=64)
        torch.testing.assert_close(compiled(a).cpu(), f(a).cpu(), rtol=1e-5, atol=1e-5)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] - frames == 1


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
