"""Diffusers on tpu (demo/diffusers_tiny.py): a tiny UNet2DConditionModel (DDPM training step,
10-step DDIM sampling) and a tiny Flux transformer (rectified-flow training step, 10-step
FlowMatchEulerDiscrete sampling), built from configs with random weights: the loss, every
parameter gradient, the AdamW step and the samples on tpu against PyTorch CPU from the same seed,
with no CPU fallback; and the Flux training step under torch.compile(backend="tpu") with no graph
break.

Comparisons follow torch_tpu.compare.check_like_cpu: within float32 tolerances of CPU's result,
or else no further from a float64 CPU run than CPU's own float32 result is. The tpu runs at
matmul precision "highest" (float32; the default rounds operands to bf16, as a TPU does)."""
import functools
import pathlib
import sys

import pytest
import torch

import torch_tpu
from torch_tpu.compare import check_like_cpu

diffusers = pytest.importorskip("diffusers")
sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "demo"))
import diffusers_tiny as demo  # noqa: E402

pytestmark = pytest.mark.once

F32_RTOL = 1.3e-6  # PyTorch's default rtol for float32
# A gradient's absolute tolerance, as a fraction of that tensor's largest CPU value: these float32
# gradients go through ~50 ops and sums of up to a few thousand terms, and through the sinusoidal
# timestep embedding (sin/cos of arguments up to 1000, one float32 ulp of which is 6e-5). CPU's own
# error against float64 reaches 1.8e-5 of a tensor's scale here. Where a tensor is not that close
# (a gradient that is exactly zero in float64, whose float32 value is rounding noise), the tpu must
# be as close to float64 as CPU is.
GRAD_ATOL = 2e-5
BUILD = {"unet": demo.tiny_unet, "flux": demo.tiny_flux}


@pytest.fixture(autouse=True)
def quiet():
    diffusers.utils.logging.set_verbosity_error()  # "casting with .to(dtype)" for the float64 reference


def on_tpu(fn, **kwargs):
    torch_tpu.metrics.reset()
    with torch.tpu.precision("highest"):
        out = fn("tpu", **kwargs)
    assert torch_tpu.metrics.fallback_ops() == {}
    return out


def check_training_step(name, got):
    train = demo.MODELS[name][0]
    want = train("cpu")
    exact = functools.cache(lambda: train("cpu", torch.float64))
    check_like_cpu(got["loss"], want["loss"], lambda: exact()["loss"], what=f"{name} loss")
    assert got["grads"].keys() == want["grads"].keys()
    for n, g in want["grads"].items():
        check_like_cpu(got["grads"][n], g, lambda: exact()["grads"][n], rtol=F32_RTOL,
                       atol=GRAD_ATOL * g.abs().max().item(), what=f"{name} gradient of {n}")
    # AdamW's step on the tpu, against CPU's AdamW applied to the same (the tpu's) gradients:
    # within a few float32 ulps of the parameters and of the lr=1e-3 step
    model = BUILD[name]()
    for n, p in model.named_parameters():
        p.grad = got["grads"][n].clone()
    torch.optim.AdamW(model.parameters(), lr=demo.LR).step()
    for n, p in model.named_parameters():
        torch.testing.assert_close(got["params"][n], p.detach(), rtol=F32_RTOL, atol=1e-8,
                                   msg=lambda m: f"{name} AdamW step of {n}: {m}")


@pytest.mark.parametrize("name", ["unet", "flux"])
def test_training_step_matches_cpu(name):
    check_training_step(name, on_tpu(demo.MODELS[name][0]))


@pytest.mark.parametrize("name", ["unet", "flux"])
def test_ten_step_sampling_matches_cpu(name):
    sample = demo.MODELS[name][1]
    got = on_tpu(sample)
    assert torch.isfinite(got).all()
    # DDIM's first step divides the predicted noise by sqrt(alpha_cumprod(901)) = 0.017 (and clips):
    # one UNet forward's float32 error, ~1e-6 of its scale on CPU and on tpu alike, becomes ~3e-4 in
    # the samples, CPU's and tpu's both (eager tpu 2.0e-4 from float64, CPU 2.7e-4)
    check_like_cpu(got, sample("cpu"), lambda: sample("cpu", torch.float64), what=f"{name} samples")


@pytest.mark.slow
def test_flux_training_step_compiled_matches_cpu_eager():
    """torch.compile(model, backend="tpu"): forward and backward of the Flux transformer (the
    faster of the two to compile) in one graph each, as eager CPU."""
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    got = on_tpu(demo.flux_train_step, compile=True)
    c = torch_tpu.metrics.compile_counters()
    assert (c["frames_compiled"], c["graphs_compiled"], c["recompiles"], c["graph_breaks"]) == (1, 2, 0, 0), c
    check_training_step("flux", got)
