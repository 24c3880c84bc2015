"""torch.optim on tpu: a small MLP trained a few steps on tpu and on CPU from the same weights
and data must end with the same parameters after every step, and the optimizer step (and
clip_grad_norm_) must run entirely on the chip: foreach=True is the default for tpu params,
fused=True uses _fused_adam(w)_ / _fused_sgd_."""
import pytest
import torch

import torch_tpu

STEPS = 5
TOL = dict(atol=1e-5, rtol=1e-5)
NATIVE = {name for name, _ in torch_tpu._C._native_ops()}

# Ops of other kernel families the step may still send to the CPU while they are missing from
# the op table (a listed op that falls back is always a failure):
PENDING = {
    # clip_grad_norm_'s total norm
    "linalg_vector_norm.out", "cat.out", "clamp.out", "reciprocal.out", "mul.out",
}


def _unexpected_fallbacks():
    names = {op.removeprefix("aten::") for op in torch_tpu.metrics.fallback_ops()}
    return {op for op in names if op in NATIVE or op not in PENDING}


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


OPTIMIZERS = {  # name: (make(params, device), kernels the tpu step must run)
    "adamw": (lambda ps, d: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1), {"foreach_lerp", "foreach_addcmul"}),
    "adamw_amsgrad_maximize": (lambda ps, d: torch.optim.AdamW(ps, lr=1e-2, amsgrad=True, maximize=True),
                               {"foreach_maximum", "foreach_neg"}),
    "adam": (lambda ps, d: torch.optim.Adam(ps, lr=1e-2), {"foreach_lerp", "foreach_sqrt"}),
    "adam_wd_amsgrad": (lambda ps, d: torch.optim.Adam(ps, lr=1e-2, weight_decay=0.05, amsgrad=True),
                        {"foreach_add", "foreach_maximum"}),
    # capturable keeps the step count on the chip (CPU does not support it: plain Adam there)
    "adam_capturable": (lambda ps, d: torch.optim.Adam(ps, lr=1e-2, capturable=d == "tpu"),
                        {"foreach_pow", "foreach_reciprocal", "foreach_addcdiv"}),
    "adamw_fused": (lambda ps, d: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, fused=True), {"fused_adamw"}),
    "adam_fused_amsgrad": (lambda ps, d: torch.optim.Adam(ps, lr=1e-2, amsgrad=True, fused=True), {"fused_adam"}),
    "sgd": (lambda ps, d: torch.optim.SGD(ps, lr=0.1), {"foreach_add"}),
    "sgd_momentum": (lambda ps, d: torch.optim.SGD(ps, lr=0.1, momentum=0.9), {"foreach_mul", "foreach_add"}),
    "sgd_nesterov_wd": (lambda ps, d: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
                        {"foreach_mul", "foreach_add"}),
    "sgd_fused_momentum": (lambda ps, d: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01,
                                                         fused=True), {"fused_sgd"}),
    "sgd_dampening_maximize": (lambda ps, d: torch.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.1, maximize=True,
                                                             weight_decay=0.01), {"foreach_neg", "foreach_mul"}),
}


def _train(name, clip=None):
    make_opt, kernels = OPTIMIZERS[name]
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(STEPS, 32, 8, generator=g), torch.randn(STEPS, 32, 4, generator=g)
    cpu = _mlp()
    tpu = _mlp().to("tpu")
    opt_cpu, opt_tpu = make_opt(list(cpu.parameters()), "cpu"), make_opt(list(tpu.parameters()), "tpu")
    ran = set()
    for step in range(STEPS):
        norms = []
        for model, opt, dev in ((cpu, opt_cpu, "cpu"), (tpu, opt_tpu, "tpu")):
            opt.zero_grad()
            with torch.tpu.precision("highest"):  # the backward's matmuls too
                loss = torch.nn.functional.mse_loss(model(x[step].to(dev)), y[step].to(dev))
                loss.backward()
            torch_tpu.metrics.reset()
            if clip is not None:
                norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), clip))
            opt.step()
            if dev == "tpu":
                torch.tpu.synchronize()
                assert not _unexpected_fallbacks(), f"step {step}: fell back to CPU: {torch_tpu.metrics.fallback_ops()}"
                ran |= set(torch_tpu.metrics.executed_ops())
        if clip is not None:
            torch.testing.assert_close(norms[1].cpu(), norms[0], **TOL)
        for (n, pc), pt in zip(cpu.named_parameters(), tpu.parameters()):
            torch.testing.assert_close(pt.detach().cpu(), pc.detach(), **TOL, msg=lambda m: f"step {step} {n}: {m}")
    if clip is not None:
        kernels = kernels | {"foreach_norm", "foreach_mul"}
    assert kernels <= ran, f"kernels {kernels - ran} did not run (ran {ran})"


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_optimizer_matches_cpu(name):
    _train(name)


@pytest.mark.parametrize("name", ["sgd_momentum", "adamw"])
def test_clip_grad_norm_matches_cpu(name):
    _train(name, clip=0.05)  # small enough that every step clips


def test_foreach_step_sizes_reuse_the_output_metadata():
    # AdamW passes its bias-corrected step sizes as Scalar[] lists that change every step;
    # the bridge's output metadata must not depend on those values, else PyTorch's meta
    # function (one addcdiv_ / div_ per parameter) reruns on every step
    model = _mlp().to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    opt.step()
    with torch.profiler.profile() as prof:
        opt.step()
        opt.step()
    per_tensor = {e.key for e in prof.key_averages()} & {"aten::addcdiv_", "aten::addcdiv", "aten::div_", "aten::div"}
    assert not per_tensor, f"per-parameter ops ran in the optimizer step: {per_tensor}"
