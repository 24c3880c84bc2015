"""FlexAttention on tpu, eager and compiled: score_mod and block masks (causal, sliding window,
document masking, ALiBi), forward and backward, against a float64 reference on CPU written
with plain tensor ops (CPU's flex_attention has no backward)."""
import math

import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

import torch_tpu

B, H, S, D = 2, 4, 48, 16
WINDOW = 8
DOCS = torch.tensor([0] * 20 + [1] * 12 + [2] * 16)
SLOPES = torch.tensor([2.0 ** (-8 * (h + 1) / H) for h in range(H)])


def causal(b, h, q, k):
    return q >= k


def sliding_window(b, h, q, k):
    return (q >= k) & (q - k <= WINDOW)


def document_mask(docs):
    def mask(b, h, q, k):
        return (docs[q] == docs[k]) & (q >= k)
    return mask


def alibi(slopes):
    def score(s, b, h, q, k):
        return s + slopes[h] * (k - q)
    return score


def soft_cap(s, b, h, q, k):
    return 20.0 * torch.tanh(s / 20.0)


def cases(device):
    docs, slopes = DOCS.to(device), SLOPES.to(device)
    return {
        "causal": (None, causal),
        "sliding_window": (None, sliding_window),
        "document": (None, document_mask(docs)),
        "alibi_causal": (alibi(slopes), causal),
        "soft_cap_no_mask": (soft_cap, None),
    }


def reference(q, k, v, score_mod, mask_mod):
    """Dense float64 attention on CPU: the mods applied to broadcast index tensors."""
    b = torch.arange(q.size(0)).view(-1, 1, 1, 1)
    h = torch.arange(q.size(1)).view(1, -1, 1, 1)
    i = torch.arange(q.size(2)).view(1, 1, -1, 1)
    j = torch.arange(k.size(2)).view(1, 1, 1, -1)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.size(-1))
    if score_mod is not None:
        s = score_mod(s, b, h, i, j)
    if mask_mod is not None:
        s = s.masked_fill(~mask_mod(b, h, i, j).expand_as(s), float("-inf"))
    return s.softmax(-1) @ v


def inputs(dtype=torch.float64):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(B, H, S, D, generator=g, dtype=torch.float64).to(dtype) for _ in range(3)]


def run(fn, q, k, v, score_mod, mask_mod, device):
    block_mask = None if mask_mod is None else create_block_mask(mask_mod, B, H, S, S, device=device,
                                                                 BLOCK_SIZE=16)
    qs = [t.detach().to(device).requires_grad_() for t in (q, k, v)]
    out = fn(*qs, score_mod=score_mod, block_mask=block_mask)
    out.backward(torch.ones_like(out))
    return [out.detach().cpu()] + [t.grad.cpu() for t in qs]


def expected(name):
    q, k, v = inputs()
    score_mod, mask_mod = cases("cpu")[name]
    qs = [t.clone().requires_grad_() for t in (q, k, v)]
    out = reference(*qs, score_mod, mask_mod)
    out.backward(torch.ones_like(out))
    return [out.detach()] + [t.grad for t in qs]


@pytest.fixture(autouse=True)
def float32_matmuls():
    torch_tpu.metrics.reset()
    with torch.tpu.precision("highest"):
        yield


@pytest.mark.parametrize("name", list(cases("cpu")))
def test_eager_forward_and_backward_match_float64(name):
    got = run(flex_attention, *inputs(), *cases("tpu")[name], "tpu")
    for g, w in zip(got, expected(name)):
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-10)
    assert torch_tpu.metrics.fallback_ops() == {}


def test_eager_float32_forward_equals_cpu_flex_attention():
    q, k, v = inputs(torch.float32)
    score_mod, mask_mod = cases("cpu")["alibi_causal"]
    want = flex_attention(q, k, v, score_mod=score_mod,
                          block_mask=create_block_mask(mask_mod, B, H, S, S, device="cpu", BLOCK_SIZE=16))
    score_mod, mask_mod = cases("tpu")["alibi_causal"]
    got = flex_attention(q.to("tpu"), k.to("tpu"), v.to("tpu"), score_mod=score_mod,
                         block_mask=create_block_mask(mask_mod, B, H, S, S, device="tpu", BLOCK_SIZE=16))
    torch.testing.assert_close(got.cpu(), want)


def test_gqa_and_logsumexp():
    from torch.nn.attention.flex_attention import AuxRequest

    q = torch.randn(B, H, S, D, dtype=torch.float64)
    k, v = torch.randn(2, B, 1, S, D, dtype=torch.float64)
    block_mask = create_block_mask(causal, B, H, S, S, device="tpu", BLOCK_SIZE=16)
    out, aux = flex_attention(q.to("tpu"), k.to("tpu"), v.to("tpu"), block_mask=block_mask, enable_gqa=True,
                              return_aux=AuxRequest(lse=True))
    kk, vv = k.expand(B, H, S, D), v.expand(B, H, S, D)
    torch.testing.assert_close(out.cpu(), reference(q, kk, vv, None, causal))
    s = (q @ kk.transpose(-1, -2) / math.sqrt(D)).masked_fill(~causal(0, 0, torch.arange(S).view(-1, 1),
                                                                       torch.arange(S)), float("-inf"))
    torch.testing.assert_close(aux.lse.cpu(), s.logsumexp(-1))


def test_other_devices_keep_torchs_answers():
    q = torch.randn(1, 1, 16, 8, requires_grad=True)
    with pytest.raises(NotImplementedError, match="backward on CPU"):
        flex_attention(q, q, q)
    m = torch.randn(1, 1, 16, 8, device="meta")
    with pytest.raises(ValueError, match="only supported on"):
        flex_attention(m, m, m)


@pytest.mark.once
@pytest.mark.parametrize("name", ["document", "alibi_causal"])
def test_compiled_forward_and_backward_match_float64(name):
    torch._dynamo.reset()
    got = run(torch.compile(flex_attention, backend="tpu", fullgraph=True), *inputs(torch.float32),
              *cases("tpu")[name], "tpu")
    for g, w in zip(got, expected(name)):
        torch.testing.assert_close(g.double(), w, rtol=1e-4, atol=1e-5)
    assert torch_tpu.metrics.fallback_ops() == {}


@pytest.mark.once
def test_plain_torch_compile_of_a_module_with_flex_attention():
    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(D, 3 * D)

        def forward(self, x, block_mask):
            q, k, v = self.proj(x).chunk(3, -1)
            return flex_attention(q, k, v, block_mask=block_mask)

    torch.manual_seed(0)
    cpu = Attention()
    x = torch.randn(B, H, S, D)
    want = reference(*[t.double() for t in cpu.proj(x).chunk(3, -1)], None, sliding_window)
    torch._dynamo.reset()
    model = Attention()
    model.load_state_dict(cpu.state_dict())
    model = torch.compile(model.to("tpu"))
    got = model(x.to("tpu"), create_block_mask(sliding_window, B, H, S, S, device="tpu", BLOCK_SIZE=16))
    torch.testing.assert_close(got.cpu().double(), want.detach(), rtol=1e-4, atol=1e-5)
