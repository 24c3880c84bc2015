"""An MLP and a GPT-2-style transformer train on tpu with losses matching PyTorch CPU step
by step (HIGHEST precision), and with zero CPU fallbacks."""
import copy
import pathlib
import sys

import pytest
import torch
import torch.nn as nn

import torch_tpu

sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "demo"))
from gpt import GPT, GPTConfig, batches, stdlib_corpus  # noqa: E402


def train(model, data, device, steps, opt_cls=torch.optim.AdamW):
    model = copy.deepcopy(model).to(device)
    opt = opt_cls(model.parameters(), lr=1e-2)
    losses = []
    for x, y in data[:steps]:
        loss = model(x.to(device), y.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 5))

    def forward(self, x, y):
        return nn.functional.cross_entropy(self.net(x), y)


@pytest.mark.parametrize("opt_cls", [torch.optim.AdamW, torch.optim.SGD])
def test_mlp_trains_like_cpu_without_fallbacks(opt_cls):
    torch.manual_seed(0)
    model = MLP()
    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(32, 20, generator=g), torch.randint(0, 5, (32,), generator=g)) for _ in range(5)]
    torch_tpu.metrics.reset()
    with torch.tpu.precision("highest"):
        tpu_losses, tpu_model = train(model, data, "tpu", 5, opt_cls)
    fallbacks = torch_tpu.metrics.fallback_ops()
    cpu_losses, cpu_model = train(model, data, "cpu", 5, opt_cls)
    torch.testing.assert_close(tpu_losses, cpu_losses, rtol=1e-5, atol=1e-5)
    for p, q in zip(tpu_model.parameters(), cpu_model.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-4, atol=1e-5)
    assert fallbacks == {}, fallbacks


def test_gpt_trains_like_cpu_without_fallbacks():
    torch.manual_seed(0)
    model = GPT(GPTConfig(seq=32, layers=2, d=32, heads=2, dropout=0.0))
    it = batches(stdlib_corpus(200_000), batch=4, seq=32)
    data = [next(it) for _ in range(4)]
    torch_tpu.metrics.reset()
    with torch.tpu.precision("highest"):
        tpu_losses, _ = train(model, data, "tpu", 4)
    fallbacks = torch_tpu.metrics.fallback_ops()
    cpu_losses, _ = train(model, data, "cpu", 4)
    torch.testing.assert_close(tpu_losses, cpu_losses, rtol=1e-4, atol=1e-4)
    assert tpu_losses[-1] < tpu_losses[0]
    assert fallbacks == {}, fallbacks


def test_issue_example_runs_natively():
    torch.manual_seed(0)
    model = GPT(GPTConfig(seq=16, layers=1, d=32, heads=2, dropout=0.1)).to("tpu")
    opt = torch.optim.AdamW(model.parameters())
    torch_tpu.metrics.reset()
    x = torch.randint(0, 256, (4, 16), device="tpu")
    loss = model(x).logsumexp(-1).mean()
    loss.backward()
    opt.step()
    assert torch.tpu.memory_allocated() > 0 and "fell back to CPU: none" in torch.tpu.metrics.short_report()
    assert torch.isfinite(loss).item()


def test_default_precision_is_bf16_level():
    torch.manual_seed(0)
    a, b = torch.randn(64, 256), torch.randn(256, 64)
    exact = a.double() @ b.double()
    assert torch.tpu.get_matmul_precision() == "default"
    err_default = ((a.tpu() @ b.tpu()).cpu().double() - exact).abs().max() / exact.abs().max()
    with torch.tpu.precision("highest"):
        err_highest = ((a.tpu() @ b.tpu()).cpu().double() - exact).abs().max() / exact.abs().max()
    assert 1e-4 < err_default < 2e-2 and err_highest < 1e-5
