"""The speed suite of the emulated chip: every case runs on tpu and on PyTorch CPU in the
same process, alternating, so a shared/noisy machine hits both alike. Reports medians and
tpu/cpu ratios (lower is better for tpu), GFLOP/s against this machine's measured FMA peak
and GB/s against its measured copy/triad bandwidth; writes results/bench.json.

    python bench/run.py                 # everything, GPT at a small default shape
    python bench/run.py --only gemm,ew  # sections: gemm, ew (incl. reductions), act (activations
                                        # and softmax on 1M f32), conv, overhead, train (the GPT
                                        # step's own kernels, AdamW), gpt
    python bench/run.py --gpt-issue     # GPT at the issue's shape (6 layers, d=384, seq 256, batch 8)
    python bench/run.py --quick         # fewer repeats (smoke test)
    TPU_NUM_THREADS=1 python bench/run.py --threads 1 --clock process   # load-robust ratios

Ceilings (bench/machine.c, built on the fly for the widest instruction set the host runs, the
-march of that build of the runtime): FMA peak = 12 independent one-vector FMA chains per thread
(16 lanes with AVX-512, 8 with AVX2), best of several short trials (1 thread and all threads); bandwidth = best of 5 memcpy / STREAM-triad passes over 256 MiB arrays.
Peak memory of the GPT step: tensor bytes above those allocated at the step's start, the
highest over the warm-up steps (the first creates gradients and optimizer state): tpu =
torch.tpu.max_memory_allocated, CPU = the profiler's allocation/free events summed in order
(bench_gpt.cpu_tensor_peak). RSS is not comparable: CPU's malloc reuses freed heap.

Reading the numbers: on a shared machine absolute times swing by 2-3x between runs, so
compare ratios from one run. Each case repeats in alternating rounds until its median
moves < 5% (at most --rounds); each turn starts once the other device's threads are idle
(PyTorch's OpenMP team spins ~4 ms after its work), short ones after 2 ms of untimed calls. A row is marked NOISY, not a measurement, when PyTorch CPU's
rounds spread more than 25% (its OpenMP threads collapse on a busy host) or other processes
used more than a quarter of the CPUs while it ran (/proc/stat minus this process). PyTorch CPU uses its default intra-op threads; the tpu
runtime uses TPU_NUM_THREADS (default: online CPUs) worker threads; the two never run at
the same time here (each device's turn ends synchronized). In strict mode, ops touching
<= 4096 elements run on the issuing thread when the stream is idle (launch.c), so the
eager-overhead rows measure that path; bigger ops are queued to the stream worker."""
import argparse
import copy
import ctypes
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import torch_tpu  # noqa: E402  (registers the device)
import torch_tpu._runtime  # noqa: E402


def sync(dev):
    if dev == "tpu":
        torch.tpu.synchronize()


CLOCK = time.perf_counter  # --clock process: CPU time of the whole process (all threads)


def timed(fn, dev, reps):
    """Median seconds per call of fn() over `reps` calls, each synchronized."""
    ts = []
    for _ in range(reps):
        t0 = CLOCK()
        fn()
        sync(dev)
        ts.append(CLOCK() - t0)
    return statistics.median(ts)


NOISY_SPREAD = 0.25  # the reference's rounds spread more than this (max-min over median): not measured
BUSY_SHARE = 0.25    # other processes used more than this share of the CPUs during the case


def _cpu_jiffies():
    """(busy jiffies of every CPU, of this process) from /proc: what others used is the difference."""
    with open("/proc/stat") as f:
        user, nice, system, idle, iowait, *rest = map(int, f.readline().split()[1:])
    with open("/proc/self/stat") as f:
        utime, stime = map(int, f.read().rsplit(")", 1)[1].split()[11:13])
    return user + nice + system + sum(rest[:3]), utime + stime


def noise(per, start, t0):
    """Why a case measured nothing ("" if it did): PyTorch CPU's rounds spread too far (its
    OpenMP threads collapse under load), or other processes took the CPUs while it ran."""
    reasons = []
    ref = per.get("cpu") or next(iter(per.values()))
    if len(ref) > 1 and (max(ref) - min(ref)) / statistics.median(ref) > NOISY_SPREAD:
        reasons.append(f"reference rounds spread {(max(ref) - min(ref)) / statistics.median(ref):.0%}")
    (busy0, self0), (busy1, self1) = start, _cpu_jiffies()
    hz, wall = os.sysconf("SC_CLK_TCK"), time.perf_counter() - t0
    others = ((busy1 - busy0) - (self1 - self0)) / hz / (wall * (os.cpu_count() or 1))
    if others > BUSY_SHARE:
        reasons.append(f"other processes used {others:.0%} of the CPUs")
    return "; ".join(reasons)


def noisy_note(why):
    return f"  NOISY ({why}): not a measurement" if why else ""


def settle(most=0.05):
    """Sleeps until this process's other threads stop running (at most `most` seconds). PyTorch
    CPU's OpenMP team spins about 4 ms after its last parallel region (its GOMP_SPINCOUNT; the
    tpu pool 50 us): a turn started inside that window shares the cores with the previous
    device's spinning threads (on 2 cores a synchronized tpu op of 0.07 ms ran at its one-thread
    0.15 ms for a whole turn after CPU's)."""
    clock = time.CLOCK_PROCESS_CPUTIME_ID
    end = time.perf_counter() + most
    while time.perf_counter() < end:
        c0 = time.clock_gettime(clock)
        time.sleep(0.001)
        if time.clock_gettime(clock) - c0 < 0.0002:
            return


# After settle() a device's own threads are parked too: a turn of calls shorter than this starts
# with untimed calls for TURN_WARMUP seconds (at least one). On a 2-core VM the first calls after
# a pause wake halted virtual CPUs: a synchronized tpu op of 0.08 ms took 0.56, 0.28, 0.24, 0.12 ms
# before its steady time, CPU's first 0.06-0.1 ms against 0.03; the overhead section measures
# the cost of a call from idle.
TURN_WARMUP_BELOW = 0.005
TURN_WARMUP = 0.002


def compare(fns, reps, rounds, min_rounds=3, tol=0.05):
    """fns: {label: (dev, fn)}. Rounds alternate between the labels, each turn started once the
    previous one's threads are idle (settle); stop once the median over rounds of every label
    moved less than tol in the last round (or at `rounds`).
    Returns the medians, each label's round medians, and noise()'s verdict."""
    start, t0 = _cpu_jiffies(), time.perf_counter()
    per = {k: [] for k in fns}
    for k, (dev, fn) in fns.items():  # warm-up (caches, meta cache, thread pools)
        fn()
        sync(dev)
    prev = None
    for r in range(rounds):
        for k, (dev, fn) in fns.items():
            settle()
            if not per[k] or statistics.median(per[k]) < TURN_WARMUP_BELOW:
                warm_end = time.perf_counter() + TURN_WARMUP
                while True:
                    fn()
                    sync(dev)
                    if time.perf_counter() >= warm_end:
                        break
            per[k].append(timed(fn, dev, reps))
        med = {k: statistics.median(v) for k, v in per.items()}
        if prev and r + 1 >= min_rounds and all(abs(med[k] / prev[k] - 1) < tol for k in med):
            break
        prev = med
    return {k: statistics.median(v) for k, v in per.items()}, per, noise(per, start, t0)


# ------------------------------------------------------------------ machine ceilings
def machine():
    so = pathlib.Path(tempfile.gettempdir()) / f"tpu_bench_machine_{os.getpid()}.so"
    isa = torch_tpu._runtime.host_runs()[0]  # the widest build this host runs
    march = [f"-march={torch_tpu._runtime.level(isa)}"] if isa != "portable" else []
    if isa == "amx":  # the bf16 unit's rate too (runtime/Makefile's flags for that build)
        march += ["-mamx-tile", "-mamx-bf16"]
    elif isa == "avx512bf16":
        march += ["-mavx512bf16"]
    subprocess.run(["cc", "-O3", *march, "-shared", "-fPIC", "-pthread", str(HERE / "machine.c"), "-o", str(so)],
                   check=True)
    m = ctypes.CDLL(str(so))
    so.unlink()
    m.machine_isa.restype = ctypes.c_char_p
    m.peak_gflops.restype = ctypes.c_double
    m.peak_gflops.argtypes = [ctypes.c_int, ctypes.c_double]
    m.unit_peak_gflops.restype = ctypes.c_double
    m.unit_peak_gflops.argtypes = [ctypes.c_int, ctypes.c_double]
    m.bandwidth_gbps.restype = ctypes.c_double
    m.bandwidth_gbps.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_size_t]
    ncpu = os.cpu_count() or 1
    peak1 = max(m.peak_gflops(1, 0.2) for _ in range(5))
    peakn = max(m.peak_gflops(ncpu, 0.2) for _ in range(5))
    unit1 = max(m.unit_peak_gflops(1, 0.2) for _ in range(3))
    unit = max(m.unit_peak_gflops(ncpu, 0.2) for _ in range(3))
    # All threads at less than 1.5x one thread: another process held a core through every trial
    # (seen on this shared VM: 117 GFLOP/s on two threads against 117 on one, and DEFAULT GEMMs
    # then read 133-159% of the unit's "peak"). Measure again; failing that, scale one thread's.
    disturbed = False
    for _ in range(3):
        if ncpu == 1 or (peakn >= 1.5 * peak1 and (not unit1 or unit >= 1.5 * unit1)):
            break
        peakn = max(peakn, max(m.peak_gflops(ncpu, 0.2) for _ in range(5)))
        unit = max(unit, max(m.unit_peak_gflops(ncpu, 0.2) for _ in range(3)))
    else:
        disturbed = ncpu > 1 and (peakn < 1.5 * peak1 or (unit1 and unit < 1.5 * unit1))
        peakn, unit = max(peakn, peak1 * ncpu), max(unit, unit1 * ncpu)
    bw = {"copy_1t": m.bandwidth_gbps(0, 1, 1 << 28), "copy": m.bandwidth_gbps(0, ncpu, 1 << 28),
          "triad": m.bandwidth_gbps(1, ncpu, 1 << 28)}
    return {"cpus": ncpu, "isa": m.machine_isa().decode(), "peak_gflops_1t": peak1, "peak_gflops": peakn,
            "unit_peak_gflops": unit, "peak_disturbed": disturbed,
            "bandwidth_gbps": bw, "torch_threads": torch.get_num_threads(), "tpu_isa": torch_tpu._runtime.load()}


# ------------------------------------------------------------------ sections
def gemm(args, mach, rows):
    shapes = [(n, n, n) for n in (256, 512, 1024, 2048)] + [(2048, 768, 3072)]
    if args.quick:
        shapes = shapes[:3]
    out = []
    for M, K, N in shapes:
        flop = 2.0 * M * N * K
        reps = max(1, min(20, int(2e9 / flop)))
        a, b = torch.randn(M, K), torch.randn(K, N)
        ta, tb = a.to("tpu"), b.to("tpu")
        fns = {"cpu": ("cpu", lambda: a @ b)}
        for p in ("highest", "high", "default"):
            def f(p=p):
                with torch.tpu.precision(p):
                    ta @ tb
            fns[p] = ("tpu", f)
        med, _, why = compare(fns, reps, args.rounds)
        row = {"shape": f"{M}x{K}x{N}", "ms": {k: v * 1e3 for k, v in med.items()},
               "gflops": {k: flop / v / 1e9 for k, v in med.items()},
               "ratio": {k: med[k] / med["cpu"] for k in med if k != "cpu"},
               "high_over_default": med["high"] / med["default"],
               "default_over_highest": med["default"] / med["highest"], "noisy": why}
        # DEFAULT precision's products run on the bf16 unit where the loaded build has one
        unit_default = mach["unit_peak_gflops"] and mach["tpu_isa"] in ("amx", "avx512bf16")
        row["pct_peak"] = {k: 100 * g / (mach["unit_peak_gflops"] if k == "default" and unit_default else mach["peak_gflops"])
                           for k, g in row["gflops"].items()}
        out.append(row)
        g = row["gflops"]
        rows.append(f"gemm {row['shape']:>15}  GFLOP/s cpu {g['cpu']:6.1f} | tpu highest {g['highest']:6.1f} "
                    f"high {g['high']:6.1f} default {g['default']:6.1f} ({row['pct_peak']['default']:4.0f}% "
                    f"{'unit ' if unit_default else ''}peak) | "
                    f"tpu/cpu: highest {row['ratio']['highest']:5.2f}x default {row['ratio']['default']:5.2f}x  "
                    f"high/default {row['high_over_default']:4.2f}" + noisy_note(why))
    return out


def ew(args, mach, rows):
    n = 1 << 24
    a, b = torch.randn(n), torch.randn(n)
    ta, tb = a.to("tpu"), b.to("tpu")
    x2 = torch.randn(n // 1024, 1024)
    tx2 = x2.to("tpu")
    w, bias = torch.randn(1024), torch.randn(1024)
    tw, tbias = w.to("tpu"), bias.to("tpu")
    cases = {  # name: (fn(x, y, w, b), bytes moved)
        "add": (lambda x, y, x2, w, bb: x + y, 3 * 4 * n),
        "mul": (lambda x, y, x2, w, bb: x * y, 3 * 4 * n),
        "gelu": (lambda x, y, x2, w, bb: F.gelu(x), 2 * 4 * n),
        "sum": (lambda x, y, x2, w, bb: x.sum(), 4 * n),
        "softmax": (lambda x, y, x2, w, bb: torch.softmax(x2, -1), 2 * 4 * n),
        "layer_norm": (lambda x, y, x2, w, bb: F.layer_norm(x2, (1024,), w, bb), 2 * 4 * n),
    }
    only = args.ew_only.split(",") if args.ew_only else list(cases)
    out = []
    for name in only:
        fn, nbytes = cases[name]
        med, _, why = compare({"cpu": ("cpu", lambda: fn(a, b, x2, w, bias)),
                          "tpu": ("tpu", lambda: fn(ta, tb, tx2, tw, tbias))}, 3 if args.quick else 5, args.rounds)
        gbs = {k: nbytes / v / 1e9 for k, v in med.items()}
        row = {"op": name, "numel": n, "ms": {k: v * 1e3 for k, v in med.items()}, "gbps": gbs,
               "pct_triad": {k: 100 * g / mach["bandwidth_gbps"]["triad"] for k, g in gbs.items()},
               "ratio": med["tpu"] / med["cpu"], "noisy": why}
        out.append(row)
        rows.append(f"{name:>10} 16M f32  ms cpu {row['ms']['cpu']:7.2f} tpu {row['ms']['tpu']:7.2f}  GB/s cpu "
                    f"{gbs['cpu']:5.1f} tpu {gbs['tpu']:5.1f} ({row['pct_triad']['tpu']:3.0f}% triad)  "
                    f"tpu/cpu {row['ratio']:5.2f}x" + noisy_note(why))
    return out


def act(args, mach, rows):
    """Activations, their backward ops, row-wise normalizations, fmod-based division, row
    reductions, index_select and random fills on 1M float32 elements (in
    cache on most hosts: these rows measure the kernels' arithmetic, not memory). Each sample
    is 10 calls back to back, then one synchronize: the kernels' throughput, not the cost of
    waking the device per call (the train rows include that)."""
    n, burst = 1 << 20, 10
    g = torch.Generator().manual_seed(0)
    base = {"x": torch.randn(n, generator=g), "g": torch.randn(n, generator=g)}
    base["y"] = torch.sigmoid(base["x"])
    base["rows"] = torch.arange(0, 1024, 2)
    base["r"] = torch.empty(n)
    on = {"cpu": base, "tpu": {k: v.to("tpu") for k, v in base.items()}}
    aten = torch.ops.aten
    cases = {  # name: fn(tensors of one device)
        "gelu": lambda t: F.gelu(t["x"]),
        "gelu_backward": lambda t: aten.gelu_backward(t["g"], t["x"]),
        "silu": lambda t: F.silu(t["x"]),
        "softplus": lambda t: F.softplus(t["x"]),
        "mish": lambda t: F.mish(t["x"]),
        "mish_backward": lambda t: aten.mish_backward(t["g"], t["x"]),
        "elu": lambda t: F.elu(t["x"]),
        "logsigmoid": lambda t: F.logsigmoid(t["x"]),
        "leaky_relu": lambda t: F.leaky_relu(t["x"], 0.1),
        "leaky_relu_backward": lambda t: aten.leaky_relu_backward(t["g"], t["x"], 0.1, False),
        "hardtanh_backward": lambda t: aten.hardtanh_backward(t["g"], t["x"], -1.0, 1.0),
        "threshold": lambda t: F.threshold(t["x"], 0.1, 2.0),
        "clamp": lambda t: t["x"].clamp(-1, 1),
        "softmax [1024,1024]": lambda t: torch.softmax(t["x"].view(1024, 1024), -1),
        "log_softmax [1024,1024]": lambda t: torch.log_softmax(t["x"].view(1024, 1024), -1),
        "remainder": lambda t: torch.remainder(t["x"], 0.7),
        "floor_divide": lambda t: torch.floor_divide(t["x"], t["g"]),
        "logaddexp": lambda t: torch.logaddexp(t["x"], t["g"]),
        "index_select rows [1024,1024]": lambda t: t["x"].view(1024, 1024).index_select(0, t["rows"]),
        "index_select cols [1024,1024]": lambda t: t["x"].view(1024, 1024).index_select(1, t["rows"]),
        "amax over rows [1024,1024]": lambda t: t["x"].view(1024, 1024).amax(1),
        "norm over rows [1024,1024]": lambda t: t["x"].view(1024, 1024).norm(dim=1),
        # random fills (each device its own generator: the rows time the draws, not the values)
        "uniform_": lambda t: t["r"].uniform_(),
        "normal_": lambda t: t["r"].normal_(),
        "bernoulli_": lambda t: t["r"].bernoulli_(0.9),
        "dropout (training)": lambda t: F.dropout(t["x"], 0.1, True),
    }
    out = []
    for name, fn in cases.items():
        med, _, why = compare({dev: (dev, lambda dev=dev: [fn(on[dev]) for _ in range(burst)])
                               for dev in ("cpu", "tpu")}, 3 if args.quick else 5, args.rounds)
        row = {"op": name, "numel": n, "us": {k: v * 1e6 / burst for k, v in med.items()}, "ratio": med["tpu"] / med["cpu"],
               "noisy": why}
        out.append(row)
        rows.append(f"{name:>24} 1M f32  us cpu {row['us']['cpu']:8.1f} tpu {row['us']['tpu']:8.1f}  "
                    f"tpu/cpu {row['ratio']:5.2f}x" + noisy_note(why))
    return out


def overhead(args, mach, rows):
    nops = 2000 if args.quick else 10000
    out = []
    for numel in (1, 64):
        a = torch.ones(numel)
        ta = a.to("tpu")
        res = {}

        def cpu_loop():
            y = a
            for _ in range(nops):
                y = y + a
            return y

        def tpu_loop(sync_at_end):
            y = ta
            t0 = time.perf_counter()
            for _ in range(nops):
                y = y + ta
            t1 = time.perf_counter()
            if sync_at_end:
                torch.tpu.synchronize()
            return t1 - t0, time.perf_counter() - t0

        reps = 3 if args.quick else 7
        cpu_t, strict_issue, strict_done, debug_t = [], [], [], []
        cpu_loop(), tpu_loop(True)
        for _ in range(reps):  # alternate devices and modes
            t0 = time.perf_counter()
            cpu_loop()
            cpu_t.append(time.perf_counter() - t0)
            with torch.tpu.eager_mode("strict"):
                i, d = tpu_loop(True)
            strict_issue.append(i)
            strict_done.append(d)
            with torch.tpu.eager_mode("debug"):
                debug_t.append(tpu_loop(True)[1])
        us = lambda v: statistics.median(v) / nops * 1e6  # noqa: E731
        res = {"numel": numel, "us_per_op": {"cpu": us(cpu_t), "strict_issue": us(strict_issue),
                                             "strict_done": us(strict_done), "debug": us(debug_t)}}
        u = res["us_per_op"]
        res["ratio"] = {k: u[k] / u["cpu"] for k in u if k != "cpu"}
        out.append(res)
        rows.append(f"{nops} x add[{numel:>2}]  us/op cpu {u['cpu']:5.1f} | strict issue {u['strict_issue']:5.1f} "
                    f"({res['ratio']['strict_issue']:4.2f}x) done {u['strict_done']:5.1f} "
                    f"({res['ratio']['strict_done']:4.2f}x) | debug {u['debug']:5.1f} ({res['ratio']['debug']:4.2f}x)")
    return out


def conv(args, mach, rows):
    """A ResNet basic block (conv3x3-BN-ReLU-conv3x3-BN + identity, ReLU), forward and
    backward, NCHW float32, training-mode batch norm."""
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
            self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

        def forward(self, x):
            return torch.relu(self.b2(self.c2(torch.relu(self.b1(self.c1(x))))) + x)

    out = []
    for n, c, hw in ((4, 64, 32),) if args.quick else ((4, 64, 32), (8, 128, 16)):
        torch.manual_seed(0)
        blocks = {"cpu": Block(c)}
        blocks["tpu"] = copy.deepcopy(blocks["cpu"]).to("tpu")
        xs = {"cpu": torch.randn(n, c, hw, hw)}
        xs["tpu"] = xs["cpu"].to("tpu")

        def step(dev):
            blk, x = blocks[dev], xs[dev]
            blk.zero_grad(set_to_none=True)
            blk(x).sum().backward()

        flop = 3 * 2 * (2.0 * n * c * c * 9 * hw * hw)  # two convs, forward + two backward GEMMs
        med, _, why = compare({d: (d, lambda d=d: step(d)) for d in ("cpu", "tpu")}, 3, args.rounds)
        row = {"shape": f"N{n} C{c} {hw}x{hw}", "ms": {k: v * 1e3 for k, v in med.items()},
               "gflops": {k: flop / v / 1e9 for k, v in med.items()}, "ratio": med["tpu"] / med["cpu"], "noisy": why}
        out.append(row)
        rows.append(f"conv ResNet block fwd+bwd {row['shape']:>16}  ms cpu {row['ms']['cpu']:7.1f} tpu "
                    f"{row['ms']['tpu']:7.1f}  GFLOP/s cpu {row['gflops']['cpu']:5.1f} tpu {row['gflops']['tpu']:5.1f}"
                    f"  tpu/cpu {row['ratio']:5.2f}x" + noisy_note(why))
    return out


def train(args, mach, rows):
    """The pieces of a transformer training step that are kernels of their own, at the GPT
    step's shapes (4 layers, d=256, 4 heads, seq 128, batch 8): fused causal attention
    forward+backward (q/k/v split from one qkv activation, as in the model), layer norm
    forward+backward, a bias gradient (sum over the token dims), the qkv gradient (cat of
    three transposed grads), embedding forward/backward, and the AdamW step on the model's
    parameters (foreach, the default, and fused=True)."""
    sys.path.insert(0, str(HERE.parent / "demo"))
    from gpt import GPT, GPTConfig
    B, H, L, E = 8, 4, 128, 64
    D = H * E
    g = torch.Generator().manual_seed(0)
    qkv, gy = torch.randn(B, L, 3 * D, generator=g), torch.randn(B, L, D, generator=g)
    x, w, b = torch.randn(B, L, D, generator=g), torch.randn(D, generator=g), torch.randn(D, generator=g)
    parts = [torch.randn(B, H, L, E, generator=g) for _ in range(3)]
    ids, table = torch.randint(0, 256, (B, L), generator=g), torch.randn(256, D, generator=g)
    wide = torch.randn(B, L, 3 * D, generator=g)
    on = {dev: {k: v.to(dev) for k, v in dict(qkv=qkv, gy=gy, x=x, w=w, b=b, ids=ids, table=table, wide=wide).items()}
          for dev in ("cpu", "tpu")}
    for dev in on:
        on[dev]["tiny"], on[dev]["tiny_gy"] = torch.ones(16, device=dev, requires_grad=True), torch.ones(16, device=dev)
        for k in ("qkv", "x", "w", "b", "table"):
            on[dev][k].requires_grad_()
        on[dev]["parts"] = [t.to(dev) for t in parts]

    def attention(t):
        t["qkv"].grad = None
        q, k, v = (u.view(B, L, H, E).transpose(1, 2) for u in t["qkv"].split(D, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y.transpose(1, 2).reshape(B, L, D).backward(t["gy"])

    def layer_norm(t):
        for k in ("x", "w", "b"):
            t[k].grad = None
        F.layer_norm(t["x"], (D,), t["w"], t["b"]).backward(t["gy"])

    def embedding(t):
        t["table"].grad = None
        F.embedding(t["ids"], t["table"]).backward(t["gy"])

    def tiny_backward(t):
        t["tiny"].grad = None
        (t["tiny"] * 2).backward(t["tiny_gy"])

    def on_caller_thread(fn):
        """fn with autograd's device work on the calling thread (PyTorch's public switch)."""
        def run(t):
            with torch.autograd.set_multithreading_enabled(False):
                fn(t)
        return run

    cases = {  # name: fn(tensors of one device)
        "attention fwd+bwd B8 H4 L128 E64 causal": attention,
        "layer_norm fwd+bwd [8,128,256]": layer_norm,
        "sum over dims (0,1) [8,128,768]": lambda t: t["wide"].sum((0, 1)),
        "cat 3 x [8,128,4,64] transposed, dim 3": lambda t: torch.cat([u.transpose(1, 2) for u in t["parts"]], 3),
        "embedding fwd+bwd [8,128] of [256,256]": embedding,
        # what each backward above pays on tpu for autograd running a device's backward on a
        # thread of its own (as for CUDA), and layer_norm's row without that hand-off
        "backward of x*2, 16 elements: autograd's hand-off": tiny_backward,
        "layer_norm fwd+bwd, backward on the caller thread": on_caller_thread(layer_norm),
    }
    torch.manual_seed(0)
    model = GPT(GPTConfig(seq=L, layers=4, d=D, heads=H, dropout=0.0))
    for fused in (False, True):
        opts = {}
        for dev in ("cpu", "tpu"):
            m = copy.deepcopy(model).to(dev)
            for p_ in m.parameters():
                p_.grad = torch.randn(p_.shape, generator=g).to(dev)
            # fused=False would pick the per-tensor for-loop, not the foreach default
            opts[dev] = torch.optim.AdamW(m.parameters(), lr=1e-3, **({"fused": True} if fused else {}))
        cases[f"AdamW step, GPT's {sum(p_.numel() for p_ in model.parameters()) / 1e6:.2f}M params"
              + (" (fused=True)" if fused else " (foreach)")] = lambda t, o=opts: o[t["dev"]].step()
    for dev in on:
        on[dev]["dev"] = dev
    out = []
    for name, fn in cases.items():
        med, _, why = compare({dev: (dev, lambda dev=dev: fn(on[dev])) for dev in ("cpu", "tpu")}, 3 if args.quick else 5,
                         args.rounds)
        row = {"case": name, "ms": {k: v * 1e3 for k, v in med.items()}, "ratio": med["tpu"] / med["cpu"], "noisy": why}
        out.append(row)
        rows.append(f"{name:>45}  ms cpu {row['ms']['cpu']:7.2f} tpu {row['ms']['tpu']:7.2f}  tpu/cpu {row['ratio']:5.2f}x"
                    + noisy_note(why))
    return out


def gpt(args, mach, rows):
    from bench_gpt import reference_collapsed, run_gpt
    shape = dict(layers=6, d=384, heads=6, seq=256, batch=8) if args.gpt_issue else \
        dict(layers=4, d=256, heads=4, seq=128, batch=8)
    steps = 3 if args.quick else args.gpt_steps
    with torch.tpu.eager_mode("strict"):
        r = run_gpt(**shape, steps=steps, warmup=2, clock=CLOCK)
    med = r["ms_per_step"]
    r["ratio"] = med["tpu"] / med["cpu"]
    c = r["config"]
    rows.append(f"GPT step {c['layers']}L d={c['d']} seq {c['seq']} batch {c['batch']} ({r['params'] / 1e6:.1f}M params)"
                f"  ms/step cpu {med['cpu']:7.1f} tpu(strict) {med['tpu']:7.1f}  tpu/cpu {r['ratio']:4.2f}x  "
                f"peak tensor MiB/step cpu {r['peak_cpu_bytes'] / 2**20:6.1f} tpu {r['peak_tpu_bytes'] / 2**20:6.1f}  "
                f"loss cpu {r['losses']['cpu'][-1]:.4f} tpu {r['losses']['tpu'][-1]:.4f}")
    r["reference_collapsed"] = reference_collapsed(r)
    if r["reference_collapsed"]:
        rows.append(f"  CPU REFERENCE COLLAPSED: {med['cpu']:.1f} ms/step on {torch.get_num_threads()} threads against "
                    f"{r['cpu_one_thread_ms']:.1f} on one: the tpu/cpu ratio above is not a measurement")
    return r


SECTIONS = {"gemm": gemm, "ew": ew, "act": act, "conv": conv, "overhead": overhead, "train": train, "gpt": gpt}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated sections: " + ",".join(SECTIONS))
    ap.add_argument("--ew-only", default="", help="comma-separated ew/reduction ops")
    ap.add_argument("--rounds", type=int, default=7, help="max alternating rounds per case")
    ap.add_argument("--gpt-issue", action="store_true", help="the issue's GPT shape (slow on 2 cores)")
    ap.add_argument("--gpt-steps", type=int, default=5)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default="results/bench.json")
    ap.add_argument("--threads", type=int, default=0, help="PyTorch CPU intra-op threads (0: its default)")
    ap.add_argument("--clock", choices=("wall", "process"), default="wall",
                    help="wall time, or CPU time of the whole process (all threads)")
    args = ap.parse_args()
    global CLOCK
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.clock == "process":
        CLOCK = time.process_time
    if args.quick:
        args.rounds = min(args.rounds, 3)
    only = [s for s in args.only.split(",") if s] or list(SECTIONS)
    rows = []
    mach = machine()
    rows.append(f"machine: {mach['cpus']} cpus, {mach['isa']} FMA peak {mach['peak_gflops_1t']:.1f} GFLOP/s (1 thread) "
                f"{mach['peak_gflops']:.1f} (all{': busy host, one thread x cpus' if mach['peak_disturbed'] else ''})"
                + (f", bf16 unit peak {mach['unit_peak_gflops']:.0f} (all)" if mach["unit_peak_gflops"] else "")
                + f"; copy {mach['bandwidth_gbps']['copy']:.1f} GB/s, "
                f"triad {mach['bandwidth_gbps']['triad']:.1f} GB/s; torch threads {mach['torch_threads']}, "
                f"tpu threads {os.environ.get('TPU_NUM_THREADS', 'default')}, tpu kernels {mach['tpu_isa']} build, "
                f"load {os.getloadavg()[0]:.1f}")
    print(rows[-1], flush=True)
    results = {"machine": mach}
    for name in only:
        n0 = len(rows)
        results[name] = SECTIONS[name](args, mach, rows)
        for r in rows[n0:]:
            print(r, flush=True)
    results["table"] = rows
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
