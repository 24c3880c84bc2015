"""GPT training step: torch_tpu (strict eager, emulated chip) vs PyTorch CPU eager, same run.

    python bench/bench_gpt.py [--layers 4 --d 256 --seq 128 --batch 8 --steps 5]
    TPU_NUM_THREADS=1 python bench/bench_gpt.py --threads 1 --clock process

On a machine shared with other work, wall time of 2-thread runs is dominated by the load
(PyTorch's OpenMP threads spin and lose their time slices); one thread per device timed by
process CPU time (--clock process) gives ratios that hold from run to run.

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
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "demo"))
from gpt import GPT, GPTConfig, batches, stdlib_corpus  # noqa: E402


def cpu_tensor_peak(fn):
    """(fn(), peak bytes of CPU tensor memory above what was allocated when fn began): the
    profiler's allocation and free events summed in time order (allocations are charged to
    the op making them, frees outside ops are [memory] events)."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        value = fn()
    cur = peak = 0
    for e in sorted(prof.events(), key=lambda e: e.time_range.start):
        cur += e.cpu_memory_usage if e.name == "[memory]" else e.self_cpu_memory_usage
        peak = max(peak, cur)
    return value, peak


def run_gpt(layers=4, d=256, heads=4, seq=128, batch=8, steps=5, warmup=2, clock=time.perf_counter):
    """Train the same model on tpu (current eager mode) and CPU, steps alternating; returns
    median ms/step per device, losses and peak memory. Peak memory is tensor bytes above
    what was allocated when a step began (weights, then also gradients and optimizer state
    once they exist), the highest over the warm-up steps (the first creates the optimizer
    state; later steps repeat the second): torch.tpu.max_memory_allocated on tpu, the
    profiler's allocation events on CPU (untimed, so warm-up steps only)."""
    torch.manual_seed(0)
    cfg = GPTConfig(seq=seq, layers=layers, d=d, heads=heads, dropout=0.0)
    base = GPT(cfg)
    models = {dev: copy.deepcopy(base).to(dev) for dev in ("tpu", "cpu")}
    opts = {dev: torch.optim.AdamW(m.parameters(), lr=1e-3) for dev, m in models.items()}
    it = batches(stdlib_corpus(1_000_000), batch, seq)
    data = [next(it) for _ in range(warmup + steps)]
    times = {"tpu": [], "cpu": []}
    losses = {"tpu": [], "cpu": []}
    cpu_peak = tpu_peak = 0
    for i, (x, y) in enumerate(data):
        for dev in ("tpu", "cpu"):
            m, opt = models[dev], opts[dev]

            def step():
                loss = m(x.to(dev), y.to(dev))
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                return loss.item()  # waits for the chip

            t0 = clock()
            if dev == "cpu" and i < warmup:
                value, peak = cpu_tensor_peak(step)
                cpu_peak = max(cpu_peak, peak)
            elif dev == "tpu":  # the previous step ended synchronized (loss.item())
                torch.tpu.reset_peak_memory_stats()
                start = torch.tpu.memory_allocated()
                value = step()
                tpu_peak = max(tpu_peak, torch.tpu.max_memory_allocated() - start)
            else:
                value = step()
            dt = clock() - t0
            if i >= warmup:
                times[dev].append(dt)
            losses[dev].append(value)
    med = {dev: statistics.median(t) * 1e3 for dev, t in times.items()}
    params = sum(p.numel() for p in base.parameters())
    return {"config": {"layers": layers, "d": d, "heads": heads, "seq": seq, "batch": batch, "steps": steps},
            "params": params, "ms_per_step": med, "times_ms": {k: [t * 1e3 for t in v] for k, v in times.items()},
            "losses": losses, "peak_tpu_bytes": tpu_peak,
            "peak_cpu_bytes": cpu_peak, "cpu_one_thread_ms": one_thread_ms(models["cpu"], opts["cpu"], data[0], clock)}


def one_thread_ms(model, opt, batch, clock):
    """A CPU step on one OpenMP thread, or None when CPU already runs on one. PyTorch's threads
    collapse on a busy 2-core host (a step 10x slower with 2 threads than with 1): a CPU median
    above this one is no reference (reference_collapsed)."""
    threads = torch.get_num_threads()
    if threads == 1:
        return None
    x, y = batch
    torch.set_num_threads(1)
    try:
        t0 = clock()
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return (clock() - t0) * 1e3
    finally:
        torch.set_num_threads(threads)


def reference_collapsed(result, slack=1.3):
    """Whether the CPU median is slower than one thread alone (beyond slack): then a ratio
    against it measures the host's load, not torch_tpu."""
    one = result.get("cpu_one_thread_ms")
    return one is not None and result["ms_per_step"]["cpu"] > slack * one


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="PyTorch CPU intra-op threads (0: its default)")
    ap.add_argument("--clock", choices=("wall", "process"), default="wall",
                    help="wall time, or CPU time of the whole process (all threads)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    clock = time.process_time if args.clock == "process" else time.perf_counter
    r = run_gpt(**{k: v for k, v in vars(args).items() if k not in ("threads", "clock")}, clock=clock)
    med = r["ms_per_step"]
    peak_tpu, peak_cpu = r["peak_tpu_bytes"] / 2**20, r["peak_cpu_bytes"] / 2**20
    print(f"GPT step: {args.layers} layers, d={args.d}, seq {args.seq}, batch {args.batch}, AdamW, "
          f"{r['params'] / 1e6:.2f}M params, median of {args.steps} steps")
    print(f"{'device':10} {'ms/step':>10} {'tokens/s':>10}")
    for dev in ("tpu", "cpu"):
        print(f"{dev:10} {med[dev]:10.1f} {args.batch * args.seq / med[dev] * 1e3:10,.0f}")
    print(f"ratio tpu/cpu time: {med['tpu'] / med['cpu']:.2f}x   peak tensor memory per step tpu {peak_tpu:,.1f} MiB "
          f"cpu {peak_cpu:,.1f} MiB ({peak_tpu / peak_cpu:.2f}x)   "
          f"final loss tpu {r['losses']['tpu'][-1]:.4f} cpu {r['losses']['cpu'][-1]:.4f} "
          f"(tpu at matmul precision {torch.tpu.get_matmul_precision()})")
    if reference_collapsed(r):
        print(f"CPU REFERENCE COLLAPSED: {med['cpu']:.1f} ms/step on {torch.get_num_threads()} threads against "
              f"{r['cpu_one_thread_ms']:.1f} on one: the ratio above is not a measurement (rerun on a quiet host "
              "or with --threads 1)")
    fallbacks = torch.tpu.metrics.fallback_ops()
    if fallbacks:
        print("ops that fell back to CPU:", ", ".join(sorted(fallbacks)))
    out = pathlib.Path("results")
    out.mkdir(exist_ok=True)
    (out / "bench_gpt.json").write_text(json.dumps(
        {"config": vars(args), "ms_per_step": med, "ratio_tpu_over_cpu": med["tpu"] / med["cpu"],
         "cpu_one_thread_ms": r["cpu_one_thread_ms"], "reference_collapsed": reference_collapsed(r),
         "peak_tpu_mib": peak_tpu, "peak_cpu_mib": peak_cpu, "fallbacks": sorted(fallbacks)}, indent=2))


if __name__ == "__main__":
    main()
