"""Fused eager mode ("fused", TORCH_TPU_DEFER_AND_FUSE=1) against strict, on the emulated chip,
with PyTorch CPU eager as the reference, in one run:

    python bench/bench_fused.py                 # chains on 16M float32 elements + the GPT step
    python bench/bench_fused.py --only chain    # sections: chain, optimizer, gpt
    python bench/bench_fused.py --n 4194304 --rounds 15 --gpt-steps 10

chain: the 10-op activation/normalisation chain of tests/test_fused_eager.py (x*sigmoid(x),
tanh, *1.7, +x, exp, clamp, abs, sqrt, reciprocal), and a 10-op chain of memory-bound ops (no
transcendental function: what fusion saves is the memory traffic between ops). Each round
times one call per label, labels alternating (strict, fused, cpu), so machine noise hits them
alike; medians over the rounds. fused/strict is the speedup of fused mode.

optimizer: the GPT step's AdamW step alone (foreach, the default; fixed gradients), strict,
fused and PyTorch CPU (foreach and fused=True), alternating.

gpt: the GPT training step of demo/gpt.py (bench/bench_gpt.py's default shape, AdamW) on tpu,
one model per mode from the same weights, steps alternating between the modes; medians of the
timed steps (--clock process: CPU time of the process, which a loaded machine disturbs less;
it does not see a worker waiting idle for a deferred chain, wall time does). The losses and
weights must be identical (fused mode is bit-identical to strict)."""
import argparse
import copy
import json
import pathlib
import statistics
import sys
import time

import torch

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "demo"))
import torch_tpu  # noqa: E402,F401  (registers the device)
from gpt import GPT, GPTConfig, batches, stdlib_corpus  # noqa: E402


def activation_chain(x):
    y = x * torch.sigmoid(x)
    y = torch.tanh(y)
    y = y * 1.7
    y = y + x
    y = torch.exp(y)
    y = torch.clamp(y, 0.1, 3.0)
    y = torch.abs(y)
    y = torch.sqrt(y)
    return torch.reciprocal(y)


def memory_chain(x):
    y = x * 1.3
    y = y + x
    y = torch.abs(y)
    y = torch.sqrt(y)
    y = y * x
    y = y + 2.0
    y = torch.reciprocal(y)
    y = y - x
    y = torch.maximum(y, x)
    return y * 0.5


def sync(label):
    if not label.startswith("cpu"):
        torch.tpu.synchronize()


def run_rounds(fns, rounds):
    """fns: {label: fn}; label "strict"/"fused" runs fn in that tpu eager mode. Returns
    {label: [seconds per round]} after one untimed warm-up call each."""
    times = {k: [] for k in fns}
    for r in range(rounds + 1):
        for label, fn in fns.items():
            if not label.startswith("cpu"):
                torch.tpu.set_eager_mode(label)
            sync(label)
            t0 = time.perf_counter()
            out = fn()
            sync(label)
            dt = time.perf_counter() - t0
            del out
            if r:
                times[label].append(dt)
    torch.tpu.set_eager_mode("strict")
    return times


def bench_chains(n, rounds):
    torch.manual_seed(0)
    xc = torch.randn(n)
    xt = xc.to("tpu")
    rows = {}
    for name, chain in (("activation", activation_chain), ("memory-bound", memory_chain)):
        torch.tpu.set_eager_mode("strict")
        ref = chain(xt).cpu()
        torch.tpu.set_eager_mode("fused")
        same = torch.equal(chain(xt).cpu(), ref)
        torch.tpu.set_eager_mode("strict")
        times = run_rounds({"strict": lambda: chain(xt), "fused": lambda: chain(xt), "cpu": lambda: chain(xc)}, rounds)
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        rows[name] = {"ms": med, "times_ms": {k: [t * 1e3 for t in v] for k, v in times.items()},
                      "fused_speedup": med["strict"] / med["fused"], "bit_identical": same}
    print(f"10-op elementwise chains on {n:,} float32 elements, median of {rounds} alternating rounds")
    print(f"{'chain':14} {'strict ms':>10} {'fused ms':>10} {'cpu ms':>10} {'fused/strict':>13} {'fused/cpu':>10}  bitwise")
    for name, r in rows.items():
        m = r["ms"]
        print(f"{name:14} {m['strict']:10.1f} {m['fused']:10.1f} {m['cpu']:10.1f} {r['fused_speedup']:12.2f}x "
              f"{m['cpu'] / m['fused']:9.2f}x  {'equal' if r['bit_identical'] else 'DIFFERENT'}")
    return rows


def bench_optimizer(rounds, layers=4, d=256, heads=4, seq=128):
    """The GPT step's optimizer alone: AdamW (foreach, the default) on the model's parameters
    with fixed gradients, one step per round and label; PyTorch CPU's foreach and fused=True
    steps as references. Weights and optimizer state must end identical in both tpu modes."""
    torch.manual_seed(0)
    base = GPT(GPTConfig(seq=seq, layers=layers, d=d, heads=heads, dropout=0.0))
    g = torch.Generator().manual_seed(0)
    grads = [torch.randn(p.shape, generator=g) for p in base.parameters()]
    models, opts = {}, {}
    for label in ("strict", "fused", "cpu", "cpu fused=True"):
        m = copy.deepcopy(base).to("cpu" if label.startswith("cpu") else "tpu")
        for p, gr in zip(m.parameters(), grads):
            p.grad = gr.to(p.device)
        models[label] = m
        opts[label] = torch.optim.AdamW(m.parameters(), lr=1e-3, **({"fused": True} if "fused=" in label else {}))
    times = run_rounds({label: opt.step for label, opt in opts.items()}, rounds)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    state = {k: [s.cpu() for st in opts[k].state.values() for s in st.values() if torch.is_tensor(s)] for k in ("strict", "fused")}
    same = all(torch.equal(a.cpu(), b.cpu()) for a, b in zip(models["strict"].parameters(), models["fused"].parameters())) and \
        all(torch.equal(a, b) for a, b in zip(state["strict"], state["fused"]))
    n = sum(p.numel() for p in base.parameters())
    print(f"AdamW step (foreach) on the GPT's {n / 1e6:.2f}M parameters in {len(grads)} tensors, median of {rounds} alternating rounds")
    print(f"strict {med['strict']:.2f} ms, fused {med['fused']:.2f} ms, fused/strict speedup {med['strict'] / med['fused']:.2f}x; "
          f"PyTorch CPU foreach {med['cpu']:.2f} ms, fused=True {med['cpu fused=True']:.2f} ms; "
          f"weights and state {'identical' if same else 'DIFFERENT'}")
    return {"ms": med, "times_ms": {k: [t * 1e3 for t in v] for k, v in times.items()},
            "fused_speedup": med["strict"] / med["fused"], "bit_identical": same}


def bench_gpt(steps, warmup=2, layers=4, d=256, heads=4, seq=128, batch=8, clock=time.perf_counter):
    torch.manual_seed(0)
    cfg = GPTConfig(seq=seq, layers=layers, d=d, heads=heads, dropout=0.0)
    base = GPT(cfg)
    models = {mode: copy.deepcopy(base).to("tpu") for mode in ("strict", "fused")}
    opts = {mode: torch.optim.AdamW(m.parameters(), lr=1e-3) for mode, m in models.items()}
    it = batches(stdlib_corpus(1_000_000), batch, seq)
    data = [next(it) for _ in range(warmup + steps)]
    times = {"strict": [], "fused": []}
    losses = {"strict": [], "fused": []}
    fused0 = torch.tpu.metrics.counters()
    for i, (x, y) in enumerate(data):
        for mode in ("strict", "fused"):
            m, opt = models[mode], opts[mode]
            torch.tpu.set_eager_mode(mode)
            t0 = clock()
            loss = m(x.to("tpu"), y.to("tpu"))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            value = loss.item()  # waits for the chip
            dt = clock() - t0
            if i >= warmup:
                times[mode].append(dt)
            losses[mode].append(value)
    torch.tpu.set_eager_mode("strict")
    fused1 = torch.tpu.metrics.counters()
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    same = losses["strict"] == losses["fused"] and all(
        torch.equal(a, b) for a, b in zip(models["strict"].parameters(), models["fused"].parameters()))
    chains = fused1["fused_chains"] - fused0["fused_chains"]
    ops = fused1["fused_ops"] - fused0["fused_ops"]
    print(f"GPT step: {layers} layers, d={d}, seq {seq}, batch {batch}, AdamW, median of {steps} alternating steps")
    print(f"strict {med['strict']:.1f} ms/step, fused {med['fused']:.1f} ms/step, fused/strict speedup "
          f"{med['strict'] / med['fused']:.2f}x; {chains} fused chains of {ops} ops in "
          f"{warmup + steps} steps; losses and weights {'identical' if same else 'DIFFERENT'}")
    return {"config": {"layers": layers, "d": d, "heads": heads, "seq": seq, "batch": batch, "steps": steps},
            "ms_per_step": med, "times_ms": {k: [t * 1e3 for t in v] for k, v in times.items()},
            "fused_speedup": med["strict"] / med["fused"], "fused_chains": chains, "fused_ops": ops,
            "bit_identical": same, "losses": losses}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated sections: chain, optimizer, gpt")
    ap.add_argument("--n", type=int, default=16 << 20, help="elements of the chains' input")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--gpt-steps", type=int, default=6)
    ap.add_argument("--clock", choices=("wall", "process"), default="wall",
                    help="GPT step: wall time, or CPU time of the whole process (all threads; with "
                         "TPU_NUM_THREADS=1 the load-robust figure bench_gpt.py uses)")
    ap.add_argument("--out", default="results/bench_fused.json")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    out = {}
    if not only or "chain" in only:
        out["chains"] = bench_chains(args.n, args.rounds)
    if not only or "optimizer" in only:
        out["optimizer"] = bench_optimizer(args.rounds)
    if not only or "gpt" in only:
        out["gpt"] = bench_gpt(args.gpt_steps, clock=time.process_time if args.clock == "process" else time.perf_counter)
    path = pathlib.Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
