"""A representative set of tpu ops on fixed inputs, saved to argv[1] (tests/test_isa.py runs it
once per build of the runtime and compares). Run in a fresh interpreter: TPU_ISA is read at import."""
import sys

import torch
import torch.nn.functional as F

import torch_tpu._runtime


def results():
    g = torch.Generator().manual_seed(0)

    def r(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g).to(dtype).to("tpu")

    out = {}
    a, b = r(37, 129), r(129, 70)
    for p in ("default", "high", "highest"):
        with torch.tpu.precision(p):
            out[f"mm_{p}"] = a @ b
            out[f"mm_t_{p}"] = b.t() @ a.t()
            out[f"bmm_{p}"] = torch.bmm(r(3, 50, 600), r(3, 600, 45))
            out[f"addmm_{p}"] = torch.addmm(r(70), a, b, beta=0.5, alpha=2.0)
    out["mm_f64"] = r(33, 65, dtype=torch.float64) @ r(65, 31, dtype=torch.float64)
    out["mm_bf16"] = r(40, 300, dtype=torch.bfloat16) @ r(300, 50, dtype=torch.bfloat16)
    out["mm_large"] = r(256, 700) @ r(700, 300)
    out["mm_weight_grad"] = r(300, 40).t() @ r(300, 50)  # column-major A over two K blocks, a part tile

    x = r(2, 5, 17, 19).requires_grad_()
    w = r(8, 5, 3, 3).requires_grad_()
    y = F.conv2d(x, w, padding=1, stride=(1, 2))
    y.square().sum().backward()
    out.update(conv=y, conv_dx=x.grad, conv_dw=w.grad)

    q, k, v = (r(2, 3, 33, 16).requires_grad_() for _ in range(3))
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    o.square().sum().backward()
    out.update(sdpa=o, sdpa_dq=q.grad, sdpa_dk=k.grad, sdpa_dv=v.grad)

    h = r(6, 100).requires_grad_()
    ln = F.layer_norm(h, (100,), r(100), r(100))
    ln.sin().sum().backward()
    out.update(layer_norm=ln, layer_norm_dx=h.grad)

    out["sum01_wide"] = r(8, 130, 200).sum((0, 1))  # column sums 64 wide, then 8, in every build
    e = r(1000, 37) * 4
    for name in ("exp", "tanh", "sigmoid", "erf", "log1p", "sin"):
        out[name] = getattr(torch, name)(e.abs() if name == "log1p" else e)
    out.update(gelu=F.gelu(e), gelu_tanh=F.gelu(e, approximate="tanh"), silu=F.silu(e), softmax=e.softmax(-1),
               log_softmax=e.log_softmax(0), sum0=e.sum(0), sum1=e.sum(1), mean=e.mean(), cumsum=e.cumsum(1),
               norm=e.norm(dim=1), var=e.var(0), add_alpha=torch.add(e, e.flip(0), alpha=0.3),
               addcmul=torch.addcmul(e, e.cos(), e.sin(), value=0.7), lerp=torch.lerp(e, e.cos(), 0.25),
               bf16_gelu=F.gelu(e.bfloat16()), f16_softmax=e.half().softmax(-1))

    params = [r(64, 32).requires_grad_(), r(32).requires_grad_()]
    opt = torch.optim.AdamW(params, lr=1e-2)
    for _ in range(3):
        opt.zero_grad()
        (params[0].sin().sum() + params[1].square().sum()).backward()
        opt.step()
    out.update(adamw_w=params[0], adamw_b=params[1])
    return {name: t.detach().cpu() for name, t in out.items()}


if __name__ == "__main__":
    torch.save({"isa": torch_tpu._runtime.load(), "results": results()}, sys.argv[1])
