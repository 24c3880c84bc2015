"""GPT training step: torch_tpu (strict eager, emulated chip) vs PyTorch CPU eager, same run.

    python bench/bench_gpt.py [--layers 4 --d 256 --seq 128 --batch 8 --steps 5]

Both devices train the same model from the same weights on the same batches; steps
alternate between devices so machine noise hits both alike. Prints median ms/step, the
ratio tpu/cpu and peak memory, and writes results/bench_gpt.json."""
import argparse
import copy
import json
import pathlib
import statistics
import sys
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "demo"))
from gpt import GPT, GPTConfig, batches, stdlib_corpus  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args()

    torch.manual_seed(0)
    cfg = GPTConfig(seq=args.seq, layers=args.layers, d=args.d, heads=args.heads, dropout=0.0)
    base = GPT(cfg)
    models = {dev: copy.deepcopy(base).to(dev) for dev in ("tpu", "cpu")}
    opts = {dev: torch.optim.AdamW(m.parameters(), lr=1e-3) for dev, m in models.items()}
    it = batches(stdlib_corpus(1_000_000), args.batch, args.seq)
    data = [next(it) for _ in range(args.warmup + args.steps)]
    times = {"tpu": [], "cpu": []}
    losses = {"tpu": [], "cpu": []}
    torch.tpu.reset_peak_memory_stats()
    for i, (x, y) in enumerate(data):
        for dev in ("tpu", "cpu"):
            m, opt = models[dev], opts[dev]
            t0 = time.perf_counter()
            loss = m(x.to(dev), y.to(dev))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            value = loss.item()  # waits for the chip
            dt = time.perf_counter() - t0
            if i >= args.warmup:
                times[dev].append(dt)
            losses[dev].append(value)
    med = {d: statistics.median(t) * 1e3 for d, t in times.items()}
    peak_tpu = torch.tpu.max_memory_allocated() / 2**20
    params = sum(p.numel() for p in base.parameters())
    print(f"GPT step: {cfg.layers} layers, d={cfg.d}, seq {cfg.seq}, batch {args.batch}, AdamW, "
          f"{params / 1e6:.2f}M params, median of {args.steps} steps")
    print(f"{'device':10} {'ms/step':>10} {'tokens/s':>10}")
    for dev in ("tpu", "cpu"):
        print(f"{dev:10} {med[dev]:10.1f} {args.batch * args.seq / med[dev] * 1e3:10,.0f}")
    print(f"ratio tpu/cpu time: {med['tpu'] / med['cpu']:.2f}x   peak tpu memory {peak_tpu:,.1f} MiB   "
          f"final loss tpu {losses['tpu'][-1]:.4f} cpu {losses['cpu'][-1]:.4f} "
          f"(tpu at matmul precision {torch.tpu.get_matmul_precision()})")
    fallbacks = torch.tpu.metrics.fallback_ops()
    if fallbacks:
        print("ops that fell back to CPU:", ", ".join(sorted(fallbacks)))
    out = pathlib.Path("results")
    out.mkdir(exist_ok=True)
    (out / "bench_gpt.json").write_text(json.dumps(
        {"config": vars(args), "ms_per_step": med, "ratio_tpu_over_cpu": med["tpu"] / med["cpu"],
         "peak_tpu_mib": peak_tpu, "fallbacks": sorted(fallbacks)}, indent=2))


if __name__ == "__main__":
    main()
