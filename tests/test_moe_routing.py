"""Mixture-of-experts routing on tpu matches PyTorch CPU. Regression for the Mixtral /
Qwen3-MoE forward error (~0.05): transformers' grouped_mm experts path counts tokens per
expert with histc on the int32 expert ids (float on CPU), and integer histc binned through
edges rounded to int, so the group offsets were wrong."""
import pytest
import torch

import torch_tpu


def integer_histc_reference(x, bins, lo, hi):
    """CUDA's integer histc, (x - min) * bins // (max - min) with the top bin closed; CPU has
    no integer histc."""
    x64 = x.long()
    keep = x64[(x64 >= lo) & (x64 <= hi)]
    b = ((keep - lo) * bins).div(hi - lo, rounding_mode="floor").clamp(max=bins - 1)
    return torch.bincount(b, minlength=bins).to(x.dtype)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8])
@pytest.mark.parametrize("bins,lo,hi", [(4, 0, 3), (8, 0, 7), (5, -3, 9), (3, 2, 2)])
def test_integer_histc(dtype, bins, lo, hi):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0 if dtype == torch.uint8 else -4, 12, (200,), generator=g).to(dtype)
    got = torch.histc(x.to("tpu"), bins=bins, min=lo, max=hi).cpu()
    if lo == hi:  # the data's range
        lo, hi = int(x.min()), int(x.max())
    assert torch.equal(got, integer_histc_reference(x, bins, lo, hi))


def test_expert_id_histc_matches_cpu_float_histc():
    ids = torch.randint(0, 4, (48,), generator=torch.Generator().manual_seed(1))
    cpu = torch.histc(ids.float(), bins=4, min=0, max=3)
    assert torch.equal(torch.histc(ids.int().to("tpu"), bins=4, min=0, max=3).cpu(), cpu.int())


def test_grouped_mm_experts_forward_and_backward_match_cpu():
    transformers = pytest.importorskip("transformers")
    from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock

    cfg = transformers.MixtralConfig(hidden_size=32, intermediate_size=48, num_local_experts=4,
                                     num_experts_per_tok=2)
    cfg._experts_implementation = "grouped_mm"
    torch.manual_seed(0)
    cpu_block = MixtralSparseMoeBlock(cfg)
    for p in cpu_block.parameters():
        torch.nn.init.normal_(p, std=0.1)
    tpu_block = MixtralSparseMoeBlock(cfg).to("tpu")
    tpu_block.load_state_dict(cpu_block.state_dict())
    x = torch.randn(2, 12, 32)
    torch_tpu.metrics.reset()
    with torch.tpu.precision("highest"):
        xt = x.to("tpu").requires_grad_()
        out_t = tpu_block(xt)
        out_t = out_t[0] if isinstance(out_t, tuple) else out_t
        out_t.square().sum().backward()
    xc = x.clone().requires_grad_()
    out_c = cpu_block(xc)
    out_c = out_c[0] if isinstance(out_c, tuple) else out_c
    out_c.square().sum().backward()
    torch.testing.assert_close(out_t.cpu(), out_c, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(xt.grad.cpu(), xc.grad, rtol=1e-4, atol=1e-5)
    for (n, p), (_, q) in zip(tpu_block.named_parameters(), cpu_block.named_parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-5, msg=n)
    assert torch_tpu.metrics.fallback_ops() == {}
