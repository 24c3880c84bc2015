"""Diffusers on tpu: a tiny UNet2DConditionModel (DDPM training step, 10-step DDIM sampling) and a
tiny Flux transformer (rectified-flow training step, 10-step FlowMatchEulerDiscrete sampling),
built from configs with random weights (nothing is downloaded), each run on the tpu and on
PyTorch CPU from the same seed and compared.

    python demo/diffusers_tiny.py             # eager on tpu against eager CPU
    python demo/diffusers_tiny.py --compile   # torch.compile(model, backend="tpu") against eager CPU

Every input (latents, noise, timesteps, text embeddings) is drawn on the CPU from a fixed seed and
moved to the device, and the weights are built on the CPU from one seed and moved, so both
devices compute on the same numbers. Each function takes the device (and dtype: float64 on the
CPU is the reference a float32 result's error is measured against) and returns its results on
the CPU."""
import argparse
import contextlib
import math
import time

import diffusers.models.embeddings
import torch
from diffusers import (DDIMScheduler, DDPMScheduler, FlowMatchEulerDiscreteScheduler, FluxTransformer2DModel,
                       UNet2DConditionModel)

BATCH = 2
LATENT = (4, 8, 8)  # channels, height, width of the latents both models denoise
TEXT_LEN, TEXT_DIM = 5, 32
STEPS = 10
LR = 1e-3


def tiny_unet():
    torch.manual_seed(0)
    return UNet2DConditionModel(
        sample_size=LATENT[1], in_channels=LATENT[0], out_channels=LATENT[0], layers_per_block=1,
        block_out_channels=(32, 64), down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=TEXT_DIM, attention_head_dim=8,
        norm_num_groups=32)


def tiny_flux():
    torch.manual_seed(0)
    return FluxTransformer2DModel(
        patch_size=1, in_channels=LATENT[0] * 4, num_layers=1, num_single_layers=1, attention_head_dim=16,
        num_attention_heads=2, joint_attention_dim=TEXT_DIM, pooled_projection_dim=TEXT_DIM, axes_dims_rope=(4, 4, 8))


def _timestep_embedding_f64(timesteps, embedding_dim, flip_sin_to_cos=False, downscale_freq_shift=1, scale=1,
                            max_period=10000):
    """diffusers.models.embeddings.get_timestep_embedding computed in float64 throughout."""
    half = embedding_dim // 2
    exponent = -math.log(max_period) * torch.arange(half, dtype=torch.float64, device=timesteps.device)
    emb = scale * timesteps[:, None].double() * torch.exp(exponent / (half - downscale_freq_shift))[None, :]
    emb = torch.cat([emb.sin(), emb.cos()], dim=-1)
    if flip_sin_to_cos:
        emb = torch.cat([emb[:, half:], emb[:, :half]], dim=-1)
    return torch.nn.functional.pad(emb, (0, embedding_dim % 2))


@contextlib.contextmanager
def _float64_reference(dtype):
    """A float64 run computes the sinusoidal timestep embedding in float64 too. diffusers computes
    it in float32 whatever the model's dtype, and with timesteps up to 1000 (sin/cos of arguments
    up to 1000, where one float32 ulp is 6e-5) that rounding would be shared by the reference and
    CPU's float32 run, hiding CPU's own error from the comparison."""
    if dtype != torch.float64:
        yield
        return
    saved = diffusers.models.embeddings.get_timestep_embedding
    diffusers.models.embeddings.get_timestep_embedding = _timestep_embedding_f64
    try:
        yield
    finally:
        diffusers.models.embeddings.get_timestep_embedding = saved


def _inputs(seed):
    g = torch.Generator().manual_seed(seed)
    return {"latents": torch.randn(BATCH, *LATENT, generator=g), "noise": torch.randn(BATCH, *LATENT, generator=g),
            "text": torch.randn(BATCH, TEXT_LEN, TEXT_DIM, generator=g),
            "pooled": torch.randn(BATCH, TEXT_DIM, generator=g), "u": torch.rand(BATCH, generator=g)}


def _on(x, device, dtype):
    return {k: v.to(device=device, dtype=dtype) for k, v in x.items()}


def _prepare(build, device, dtype, compile):
    """(model, the callable to run it: the model, or torch.compile of it)."""
    model = build().to(device)
    if dtype != torch.float32:
        model = model.to(dtype)
    if not compile:
        return model, model
    return model, torch.compile(model, backend="tpu" if torch.device(device).type == "tpu" else "inductor")


def _train_result(model, loss):
    """Gradients, then one AdamW step; everything copied to the CPU."""
    grads = {n: p.grad.detach().cpu().clone() for n, p in model.named_parameters()}
    torch.optim.AdamW(model.parameters(), lr=LR).step()
    return {"loss": loss.detach().cpu(), "grads": grads,
            "grad_norm": torch.linalg.vector_norm(torch.stack([g.double().norm() for g in grads.values()])).item(),
            "params": {n: p.detach().cpu().clone() for n, p in model.named_parameters()}}


# ---- UNet2DConditionModel: DDPM training, DDIM sampling ----

def unet_train_step(device, dtype=torch.float32, compile=False):
    """One DDPM training step: add noise at random timesteps (DDPMScheduler.add_noise), predict it,
    MSE, backward, AdamW step. Returns {"loss", "grads": {name: gradient}, "grad_norm",
    "params": {name: parameter after the step}} on the CPU."""
    with _float64_reference(dtype):
        model, fwd = _prepare(tiny_unet, device, dtype, compile)
        model.train()
        sched = DDPMScheduler(num_train_timesteps=1000)
        cpu = _inputs(1)
        t = (cpu.pop("u") * sched.config.num_train_timesteps).long().clamp(max=999).to(device)
        x = _on(cpu, device, dtype)
        noisy = sched.add_noise(x["latents"], x["noise"], t)
        pred = fwd(noisy, t, encoder_hidden_states=x["text"]).sample
        loss = torch.nn.functional.mse_loss(pred, x["noise"])
        loss.backward()
        return _train_result(model, loss)


@torch.no_grad()
def unet_sample(device, dtype=torch.float32, compile=False, steps=STEPS):
    """A DDIM sampling loop (eta 0, deterministic) of `steps` steps from fixed noise; the latents on the CPU."""
    with _float64_reference(dtype):
        model, fwd = _prepare(tiny_unet, device, dtype, compile)
        model.eval()
        sched = DDIMScheduler(num_train_timesteps=1000)
        sched.set_timesteps(steps)
        x = _on(_inputs(2), device, dtype)
        latents = x["noise"] * sched.init_noise_sigma
        for t in sched.timesteps:
            eps = fwd(sched.scale_model_input(latents, t), t, encoder_hidden_states=x["text"]).sample
            latents = sched.step(eps, t, latents).prev_sample
        return latents.cpu()


# ---- Flux transformer: rectified-flow training, FlowMatchEulerDiscrete sampling ----

def _pack(latents):
    """(B, C, H, W) -> (B, H/2 * W/2, 4C): Flux's 2x2 patches as tokens (FluxPipeline._pack_latents)."""
    b, c, h, w = latents.shape
    return latents.view(b, c, h // 2, 2, w // 2, 2).permute(0, 2, 4, 1, 3, 5).reshape(b, h // 2 * w // 2, c * 4)


def _ids(device, dtype):
    """Flux's position ids: (row, column) per image token (FluxPipeline._prepare_latent_image_ids), zeros for text."""
    h, w = LATENT[1] // 2, LATENT[2] // 2
    img = torch.zeros(h, w, 3)
    img[..., 1] += torch.arange(h)[:, None]
    img[..., 2] += torch.arange(w)[None, :]
    return img.reshape(h * w, 3).to(device, dtype), torch.zeros(TEXT_LEN, 3, device=device, dtype=dtype)


def _flux(fwd, hidden, sigma, x, ids):
    return fwd(hidden_states=hidden, timestep=sigma, encoder_hidden_states=x["text"], pooled_projections=x["pooled"],
               img_ids=ids[0], txt_ids=ids[1]).sample


def flux_train_step(device, dtype=torch.float32, compile=False):
    """One rectified-flow training step: x_t = FlowMatchEulerDiscreteScheduler.scale_noise(x0, t,
    noise) at random training timesteps, predict the velocity noise - x0, MSE, backward, AdamW
    step. Returns as unet_train_step."""
    with _float64_reference(dtype):
        model, fwd = _prepare(tiny_flux, device, dtype, compile)
        model.train()
        sched = FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000)
        cpu = _inputs(3)
        n = len(sched.timesteps)
        t = sched.timesteps[(cpu.pop("u") * n).long().clamp(max=n - 1)].to(device)
        x = _on(cpu, device, dtype)
        x0, noise = _pack(x["latents"]), _pack(x["noise"])
        noisy = sched.scale_noise(x0, t, noise)
        pred = _flux(fwd, noisy, t.to(dtype) / sched.config.num_train_timesteps, x, _ids(device, dtype))
        loss = torch.nn.functional.mse_loss(pred, noise - x0)
        loss.backward()
        return _train_result(model, loss)


@torch.no_grad()
def flux_sample(device, dtype=torch.float32, compile=False, steps=STEPS):
    """A FlowMatchEulerDiscrete sampling loop of `steps` steps from fixed noise; the packed latents on the CPU."""
    with _float64_reference(dtype):
        model, fwd = _prepare(tiny_flux, device, dtype, compile)
        model.eval()
        sched = FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000)
        sched.set_timesteps(steps)
        x = _on(_inputs(4), device, dtype)
        latents, ids = _pack(x["noise"]), _ids(device, dtype)
        for t in sched.timesteps:
            sigma = t.expand(BATCH).to(device, dtype) / sched.config.num_train_timesteps
            latents = sched.step(_flux(fwd, latents, sigma, x, ids), t, latents).prev_sample
        return latents.cpu()


MODELS = {"unet": (unet_train_step, unet_sample), "flux": (flux_train_step, flux_sample)}


def _maxdiff(a, b):
    return (a.double() - b.double()).abs().max().item()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--compile", action="store_true",
                   help='torch.compile(model, backend="tpu") on the tpu (CPU stays eager)')
    p.add_argument("--precision", default="highest",
                   help='tpu matmul precision (default "highest": float32; "default" rounds operands to bf16, '
                        'as a TPU does)')
    a = p.parse_args()
    import torch_tpu

    diffusers.utils.logging.set_verbosity_error()  # casting a model with .to(dtype) warns
    for name, (train, sample) in MODELS.items():
        torch_tpu.metrics.reset()
        start = time.perf_counter()
        with torch.tpu.precision(a.precision):
            tr, smp = train("tpu", compile=a.compile), sample("tpu", compile=a.compile)
        seconds = time.perf_counter() - start
        fallbacks = torch_tpu.metrics.fallback_ops()
        graph_breaks = torch_tpu.metrics.compile_counters()["graph_breaks"] if a.compile else None
        cr, cs, exact = train("cpu"), sample("cpu"), sample("cpu", torch.float64)
        gmax = max(_maxdiff(tr["grads"][n], cr["grads"][n]) for n in cr["grads"])
        print(f"{name}: train loss tpu {tr['loss'].item():.7f} cpu {cr['loss'].item():.7f}, grad norm tpu "
              f"{tr['grad_norm']:.7f} cpu {cr['grad_norm']:.7f}, max |grad tpu - grad cpu| {gmax:.2e}")
        rel = ((smp.double() - cs.double()).abs() / cs.double().abs().clamp_min(1e-6)).max().item()
        print(f"{name}: {STEPS}-step samples tpu vs cpu: max abs diff {_maxdiff(smp, cs):.2e}, max rel diff {rel:.2e}; "
              f"error against float64: tpu {_maxdiff(smp, exact):.2e}, cpu {_maxdiff(cs, exact):.2e}")
        print(f"{name}: tpu {seconds:.1f} s{' (compiled), graph breaks ' + str(graph_breaks) if a.compile else ''}, "
              f"fallback ops {fallbacks}")


if __name__ == "__main__":
    main()
