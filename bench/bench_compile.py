"""torch.compile on tpu against its references, side by side in one run: a GPT training step
(forward, backward, AdamW) compiled with backend "tpu" vs eager tpu (strict), and vs PyTorch
CPU eager and CPU Inductor on the same model; matmuls at the tpu's default precision (bf16
operands) and at "highest" (like-for-like with CPU's f32). Also the first compile's time,
both compilers starting from an empty cache.

    python bench/bench_compile.py                    # d=128, 4 layers, seq 64, batch 8
    python bench/bench_compile.py --d 256 --seq 128  # bigger: matmul-bound, compile matters less
    TPU_NUM_THREADS=1 python bench/bench_compile.py --threads 1 --clock process  # load-robust ratios

Rounds alternate between the four variants (bench/run.py's compare), so machine noise hits all
alike. A reference whose rounds spread more than 1.5x (max/min) is reported as unstable: on a
shared 2-core host PyTorch's OpenMP threads collapse under load, and a ratio against a collapsed
reference is not a measurement."""
import argparse
import copy
import os
import pathlib
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="tpu_bench_compile_"))
import torch  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "demo"))
import run  # noqa: E402
from gpt import GPT, GPTConfig  # noqa: E402


def train_step(m, opt, x, y):
    loss = m(x, y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def variants(base, cfg, batch):
    """label -> (device, step function, first-call seconds)."""
    out = {}
    for label, dev, backend in (("tpu eager", "tpu", None), ("tpu compiled", "tpu", "tpu"),
                                ("cpu eager", "cpu", None), ("cpu inductor", "cpu", "inductor")):
        torch.manual_seed(1)
        m = copy.deepcopy(base).to(dev)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
        x = torch.randint(0, cfg.vocab, (batch, cfg.seq), device=dev)
        y = torch.randint(0, cfg.vocab, (batch, cfg.seq), device=dev)
        fn = torch.compile(train_step, backend=backend) if backend else train_step
        t0 = time.perf_counter()
        fn(m, opt, x, y).item()
        first = time.perf_counter() - t0

        def step(fn=fn, m=m, opt=opt, x=x, y=y):
            return fn(m, opt, x, y).item()

        out[label] = (dev, step, first)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="PyTorch CPU intra-op threads (0: its default)")
    ap.add_argument("--clock", choices=("wall", "process"), default="wall",
                    help="wall time, or CPU time of the whole process (all threads)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.clock == "process":
        run.CLOCK = time.process_time
    cfg = GPTConfig(seq=args.seq, layers=args.layers, d=args.d, heads=4, dropout=0.0)
    torch.manual_seed(0)
    base = GPT(cfg)
    print(f"GPT step d={args.d} layers={args.layers} seq={args.seq} batch={args.batch}; cpus {os.cpu_count()}, "
          f"load {os.getloadavg()[0]:.1f}, torch threads {torch.get_num_threads()}, tpu threads "
          f"{os.environ.get('TPU_NUM_THREADS', 'default')}, clock {args.clock}", flush=True)
    firsts = {}
    for precision in ("default", "highest"):
        with torch.tpu.precision(precision):
            torch._dynamo.reset()
            vs = variants(base, cfg, args.batch)
            if precision == "default":
                firsts = {k: v[2] for k, v in vs.items()}
            med, per = run.compare({k: (dev, fn) for k, (dev, fn, _) in vs.items()}, args.reps, args.rounds)
        unstable = [k for k, v in per.items() if max(v) / min(v) > 1.5]
        ms = {k: 1e3 * v for k, v in med.items()}
        print(f"matmul precision {precision}: " + ", ".join(f"{k} {v:.1f} ms" for k, v in ms.items()))
        print(f"  compiled tpu / Inductor CPU {ms['tpu compiled'] / ms['cpu inductor']:.2f}x   "
              f"eager tpu / compiled tpu {ms['tpu eager'] / ms['tpu compiled']:.2f}x (speedup)   "
              f"Inductor CPU / CPU eager {ms['cpu inductor'] / ms['cpu eager']:.2f}x")
        if unstable:
            print(f"  UNSTABLE (rounds spread > 1.5x, ratio not a measurement): {', '.join(unstable)}: " +
                  "; ".join(f"{k} {1e3 * min(per[k]):.1f}-{1e3 * max(per[k]):.1f} ms" for k in unstable))
    print(f"first call (compile from an empty cache + one step): tpu {firsts['tpu compiled']:.1f} s, "
          f"CPU Inductor {firsts['cpu inductor']:.1f} s, ratio {firsts['tpu compiled'] / firsts['cpu inductor']:.2f}x")
    c = torch.tpu.metrics.compile_counters()
    print(f"tpu compile counters: {c['graphs_compiled']} graphs, {c['recompiles']} recompiles, "
          f"{c['graph_breaks']} graph breaks, fallbacks {len(torch.tpu.metrics.fallback_ops())}")


if __name__ == "__main__":
    main()
