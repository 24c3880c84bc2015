"""torch.compile on tpu against its references, side by side in one run: a GPT training step
(forward, backward, AdamW) compiled with backend "tpu" vs eager tpu (strict), and vs PyTorch
CPU eager and CPU Inductor on the same model; matmuls at the tpu's default precision (bf16
operands) and at "highest" (like-for-like with CPU's f32). Also the first compile's time: each
compiler's first call in a fresh process with an empty cache, alternating, so neither pays the
other's one-time costs (importing Dynamo and Inductor, probing the vector ISA, the precompiled
header) as the one that ran first in a shared process did.

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


VARIANTS = {"tpu eager": ("tpu", None), "tpu compiled": ("tpu", "tpu"), "cpu eager": ("cpu", None),
            "cpu inductor": ("cpu", "inductor")}
COMPILED = ("tpu compiled", "cpu inductor")


def variants(base, cfg, batch, labels=VARIANTS):
    """label -> (device, step function, first-call seconds)."""
    out = {}
    for label in labels:
        dev, backend = VARIANTS[label]
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
    ap.add_argument("--first-rounds", type=int, default=2, help="fresh processes per compiler for the first compile")
    ap.add_argument("--first-call-of", choices=COMPILED, help=argparse.SUPPRESS)  # a child: print its first call's seconds
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.clock == "process":
        run.CLOCK = time.process_time
    cfg = GPTConfig(seq=args.seq, layers=args.layers, d=args.d, heads=4, dropout=0.0)
    torch.manual_seed(0)
    base = GPT(cfg)
    if args.first_call_of:
        print(variants(base, cfg, args.batch, [args.first_call_of])[args.first_call_of][2])
        return
    print(f"GPT step d={args.d} layers={args.layers} seq={args.seq} batch={args.batch}; cpus {os.cpu_count()}, "
          f"load {os.getloadavg()[0]:.1f}, torch threads {torch.get_num_threads()}, tpu threads "
          f"{os.environ.get('TPU_NUM_THREADS', 'default')}, clock {args.clock}", flush=True)
    firsts = first_compiles(args)
    for precision in ("default", "highest"):
        with torch.tpu.precision(precision):
            torch._dynamo.reset()
            vs = variants(base, cfg, args.batch)
            med, per, why = run.compare({k: (dev, fn) for k, (dev, fn, _) in vs.items()}, args.reps, args.rounds)
        unstable = [k for k, v in per.items() if max(v) / min(v) > 1.5]
        ms = {k: 1e3 * v for k, v in med.items()}
        print(f"matmul precision {precision}: " + ", ".join(f"{k} {v:.1f} ms" for k, v in ms.items()))
        print(f"  compiled tpu / Inductor CPU {ms['tpu compiled'] / ms['cpu inductor']:.2f}x   "
              f"eager tpu / compiled tpu {ms['tpu eager'] / ms['tpu compiled']:.2f}x (speedup)   "
              f"Inductor CPU / CPU eager {ms['cpu inductor'] / ms['cpu eager']:.2f}x{run.noisy_note(why)}")
        if unstable:
            print(f"  UNSTABLE (rounds spread > 1.5x, ratio not a measurement): {', '.join(unstable)}: " +
                  "; ".join(f"{k} {1e3 * min(per[k]):.1f}-{1e3 * max(per[k]):.1f} ms" for k in unstable))
    tpu, cpu = statistics.median(firsts["tpu compiled"]), statistics.median(firsts["cpu inductor"])
    print(f"first call (compile from an empty cache + one step, a fresh process each, median of "
          f"{args.first_rounds}): tpu {tpu:.1f} s ({', '.join(f'{t:.1f}' for t in firsts['tpu compiled'])}), "
          f"CPU Inductor {cpu:.1f} s ({', '.join(f'{t:.1f}' for t in firsts['cpu inductor'])}), ratio {tpu / cpu:.2f}x")
    c = torch.tpu.metrics.compile_counters()
    print(f"tpu compile counters: {c['graphs_compiled']} graphs, {c['recompiles']} recompiles, "
          f"{c['graph_breaks']} graph breaks, fallbacks {len(torch.tpu.metrics.fallback_ops())}")


def first_compiles(args):
    """label -> the first call's seconds in each of args.first_rounds fresh processes (the
    compilers alternating), each with its own empty Inductor cache."""
    import subprocess

    out = {k: [] for k in COMPILED}
    flags = ["--d", str(args.d), "--layers", str(args.layers), "--seq", str(args.seq), "--batch", str(args.batch)]
    for _ in range(args.first_rounds):
        for label in COMPILED:
            env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=tempfile.mkdtemp(prefix="tpu_bench_first_"))
            r = subprocess.run([sys.executable, __file__, *flags, "--first-call-of", label], env=env,
                               capture_output=True, text=True, check=True)
            out[label].append(float(r.stdout.strip().splitlines()[-1]))
    return out


if __name__ == "__main__":
    main()
