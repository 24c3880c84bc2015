"""Demo: train a small GPT on the Python standard library's sources, on the emulated TPU.

    python demo/train_gpt.py [--steps N] [--device tpu|cpu]

Prints a progress bar with the falling loss, then tokens/s, peak device memory and what the
chip did (torch.tpu.metrics)."""
import argparse
import pathlib
import sys
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from gpt import GPT, GPTConfig, batches, stdlib_corpus  # noqa: E402


def progress(step, total, loss, tok_s, width=30):
    done = int(width * step / total)
    sys.stdout.write(f"\r[{'#' * done}{'.' * (width - done)}] step {step:4d}/{total}  loss {loss:6.3f}  "
                     f"{tok_s:8,.0f} tok/s")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--device", default="tpu")
    args = ap.parse_args()

    torch.manual_seed(0)
    cfg = GPTConfig(seq=128, layers=4, d=128, heads=4, dropout=0.1)
    data = stdlib_corpus()
    model = GPT(cfg).to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    params = sum(p.numel() for p in model.parameters())
    dev = torch.device(args.device)
    where = (f"{torch.tpu.get_device_properties(0).name}, matmul precision {torch.tpu.get_matmul_precision()}"
             if dev.type == "tpu" else "PyTorch CPU")
    print(f"GPT {cfg.layers} layers, d={cfg.d}, {params / 1e6:.2f}M parameters, {len(data) / 1e6:.1f} MB of "
          f"stdlib source, on {where}")
    if dev.type == "tpu":
        torch.tpu.reset_peak_memory_stats()
        torch.tpu.metrics.reset()
    it = batches(data, args.batch, cfg.seq)
    first = None
    t0 = time.perf_counter()
    tokens = 0
    for step in range(1, args.steps + 1):
        x, y = next(it)
        loss = model(x.to(dev), y.to(dev))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        tokens += x.numel()
        if step == 1 or step % 5 == 0 or step == args.steps:
            value = loss.item()
            first = value if first is None else first
            progress(step, args.steps, value, tokens / (time.perf_counter() - t0))
    elapsed = time.perf_counter() - t0
    print(f"\nloss {first:.3f} -> {value:.3f} in {args.steps} steps, {tokens / elapsed:,.0f} tokens/s "
          f"({elapsed / args.steps * 1e3:.0f} ms/step)")
    if dev.type == "tpu":
        print(f"peak device memory {torch.tpu.max_memory_allocated() / 2**20:,.1f} MiB of "
              f"{torch.tpu.get_device_properties(0).total_memory / 2**30:.1f} GiB HBM")
        print(torch.tpu.metrics.short_report())
    # Sample a few bytes from a prompt (temperature 0.8, seeded), to show what it learned.
    model.eval()
    prompt = torch.tensor([list(b"def ")], device=dev)
    gen = torch.Generator(device=dev).manual_seed(0)
    with torch.no_grad():
        for _ in range(60):
            probs = torch.softmax(model(prompt[:, -cfg.seq:])[:, -1] / 0.8, dim=-1)
            prompt = torch.cat([prompt, torch.multinomial(probs, 1, generator=gen)], dim=1)
    print("sample:", bytes(prompt[0].cpu().tolist()).decode("utf-8", "replace").replace("\n", "\\n"))


if __name__ == "__main__":
    main()
