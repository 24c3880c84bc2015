"""torch.autocast("tpu", dtype=torch.bfloat16) runs PyTorch's CUDA cast policy: matmuls and
convolutions in bf16, reductions, softmax, norms and losses in f32. Checked against CPU autocast
for the ops on which CPU's policy agrees, and against the CUDA lists for the rest."""
import pytest
import torch
import torch.nn.functional as F

import torch_tpu

g = torch.Generator().manual_seed(0)
X, W, B = torch.randn(4, 8, generator=g), torch.randn(6, 8, generator=g), torch.randn(6, generator=g)
A3, B3, C3 = torch.randn(2, 4, 8, generator=g), torch.randn(2, 8, 5, generator=g), torch.randn(2, 4, 5, generator=g)
IMG, K2, K1 = torch.randn(2, 3, 8, 8, generator=g), torch.randn(4, 3, 3, 3, generator=g), torch.randn(3, 4, 3, generator=g)
XB, P = X.bfloat16(), torch.rand(4, 8, generator=g).bfloat16()
T = torch.tensor([1, 0, 3, 2])

# name -> op on the given inputs; inputs are float32 for the ops autocast lowers, bfloat16 for
# those it raises.
SAME_AS_CPU = {  # CPU's autocast policy agrees with CUDA's on these
    "linear": (lambda x, w, b: F.linear(x, w, b), (X, W, B)),
    "matmul": (lambda x, w: x @ w.t(), (X, W)),
    "mm": (lambda x, w: torch.mm(x, w.t()), (X, W)),
    "bmm": (torch.bmm, (A3, B3)),
    "addmm": (lambda b, x, w: torch.addmm(b, x, w.t()), (B, X, W)),
    "baddbmm": (torch.baddbmm, (C3, A3, B3)),
    "conv1d": (F.conv1d, (A3, K1)),
    "conv2d": (F.conv2d, (IMG, K2)),
    "gelu": (F.gelu, (XB,)),  # not listed: stays bf16
    "relu": (F.relu, (X,)),  # not listed: stays f32
    "mse_loss": (lambda a: F.mse_loss(a, a * 2), (XB,)),
    "l1_loss": (lambda a: F.l1_loss(a, a * 2), (XB,)),
    "cross_entropy": (lambda a: F.cross_entropy(a, T.to(a.device)), (X,)),
    "nll_loss": (lambda a: F.nll_loss(a, T.to(a.device)), (XB,)),
    "bce_with_logits": (F.binary_cross_entropy_with_logits, (XB, P)),
    "kl_div": (lambda a, p: F.kl_div(a, p, reduction="sum"), (XB, P)),
    "prod": (torch.prod, (XB,)),
    "add_promotes": (torch.add, (XB, X)),
    "addcmul_promotes": (torch.addcmul, (X, XB, X)),
}
CUDA_FP32 = {  # in CUDA's fp32 lists but not CPU's: tpu follows CUDA
    "softmax": lambda a: torch.softmax(a, -1),
    "log_softmax": lambda a: torch.log_softmax(a, -1),
    "layer_norm": lambda a: F.layer_norm(a, (8,)),
    "rms_norm": lambda a: F.rms_norm(a, (8,)),
    "sum": torch.sum,
    "cumsum": lambda a: a.cumsum(0),
    "exp": torch.exp,
    "log1p": lambda a: a.abs().log1p(),
    "pow": lambda a: a.pow(2),
    "logsumexp": lambda a: a.logsumexp(-1),
}


@pytest.fixture(autouse=True)
def no_fallbacks():
    torch_tpu.metrics.reset()
    yield
    assert torch_tpu.metrics.fallback_ops() == {}


@pytest.mark.parametrize("name", SAME_AS_CPU)
def test_dtype_and_values_match_cpu_autocast(name):
    op, args = SAME_AS_CPU[name]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = op(*args)
    with torch.autocast("tpu", dtype=torch.bfloat16):
        got = op(*(a.to("tpu") for a in args))
    assert got.device.type == "tpu" and got.dtype == want.dtype
    torch.testing.assert_close(got.cpu(), want)


def test_sdpa_runs_in_bf16_as_accurately_as_cpu():
    # tpu runs attention as its parts (bmm, softmax, bmm), each rounding to bf16; CPU's fused
    # kernel rounds once. Both must be bf16 and near the float64 result.
    q = A3[None]
    want = F.scaled_dot_product_attention(q.double(), q.double(), q.double())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cpu = F.scaled_dot_product_attention(q, q, q)
    with torch.autocast("tpu", dtype=torch.bfloat16):
        got = F.scaled_dot_product_attention(*(q.to("tpu"),) * 3)
    assert got.dtype == cpu.dtype == torch.bfloat16
    assert (got.cpu().double() - want).abs().max() <= 2 * (cpu.double() - want).abs().max()


def test_cross_entropy_of_bf16_logits_follows_cuda():
    # cross_entropy is in CPU's fp32 list but not CUDA's: on CUDA (and tpu) its log_softmax
    # keeps the logits' bf16 and only nll_loss runs in f32.
    with torch.autocast("tpu", dtype=torch.bfloat16):
        got = F.cross_entropy(XB.to("tpu"), T.to("tpu"))
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.cpu(), F.nll_loss(F.log_softmax(XB, -1).float(), T))


@pytest.mark.parametrize("name", CUDA_FP32)
def test_cuda_fp32_policy_ops_run_in_float32(name):
    op = CUDA_FP32[name]
    with torch.autocast("tpu", dtype=torch.bfloat16):
        got = op(XB.to("tpu"))
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.cpu(), op(XB.float()))


def test_disabled_nested_region_and_thin_amp_module():
    x = X.to("tpu")
    from torch.tpu.amp import autocast

    with autocast():
        assert torch.is_autocast_enabled("tpu") and torch.get_autocast_dtype("tpu") == torch.bfloat16
        assert (x @ x.t()).dtype == torch.bfloat16
        with torch.autocast("tpu", enabled=False):
            assert (x @ x.t()).dtype == torch.float32
    assert not torch.is_autocast_enabled("tpu")
    assert (x @ x.t()).dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):  # CPU autocast leaves tpu ops alone
        assert (x @ x.t()).dtype == torch.float32
    with torch.autocast("tpu", dtype=torch.float16):
        assert (x @ x.t()).dtype == torch.float16


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.GELU(), torch.nn.Linear(64, 64),
                                       torch.nn.GELU(), torch.nn.Linear(64, 4))

    def forward(self, x, y):
        return F.cross_entropy(self.net(x), y)


def train_bf16(device, steps):
    torch.manual_seed(0)
    model = MLP().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    data = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        x = torch.randn(32, 16, generator=data)
        y = x[:, :4].argmax(1)
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = model(x.to(device), y.to(device))
        assert loss.dtype == torch.float32
        opt.zero_grad()
        loss.backward()
        assert all(p.dtype == p.grad.dtype == torch.float32 for p in model.parameters())
        opt.step()
        losses.append(loss.item())
    return losses


def test_bf16_training_steps_match_cpu_autocast():
    tpu, cpu = train_bf16("tpu", 8), train_bf16("cpu", 8)
    torch.testing.assert_close(tpu, cpu, rtol=1.6e-2, atol=1e-5)  # bf16 resolution
    assert tpu[-1] < tpu[0]
