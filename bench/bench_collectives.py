"""tpu_dist's collectives against Gloo on the same host, in one run: 4 ranks (emulated v6e-4),
all_reduce, all_gather and reduce_scatter from 1 KiB to 256 MiB in float32 and bfloat16, and the
8-byte all_reduce latency.

    python bench/bench_collectives.py                  # starts torchrun with 4 ranks itself
    python bench/bench_collectives.py --max-mib 64 --json
    python bench/bench_collectives.py --hosts 2        # 2 emulated hosts of a v5p-16, 2 ranks each

With --hosts 2 the four ranks are two torchrun launches on this machine (TPU_WORKER_ID 0 and 1),
so tpu_dist runs hierarchically: shared memory within each host, Gloo between the two hosts'
first ranks; Gloo's column is then the whole collective through Gloo.

One process group "cpu:gloo,tpu:tpu_dist": tpu tensors go to tpu_dist, CPU tensors to Gloo, the
same calls alternating per size so machine noise hits both alike. Bus bandwidth is nccl-tests'
(PERFORMANCE.md there): algbw = bytes / time with bytes the full buffer (all_gather's output,
reduce_scatter's input); busbw = algbw * 2(n-1)/n for all_reduce and algbw * (n-1)/n for the
other two, the traffic each rank's link carries. The host's memcpy bandwidth (one rank copying
64 MiB while the others wait) is the ceiling shared memory can reach. Gloo timings that vary by
more than 3x between repeats are flagged: a reference that collapsed under load is no measurement."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.distributed as dist

BUS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
              "reduce_scatter": lambda n: (n - 1) / n}


def call(kind, buf, out, world):
    if kind == "all_reduce":
        dist.all_reduce(buf)
    elif kind == "all_gather":
        dist.all_gather_into_tensor(out, buf)
    else:
        dist.reduce_scatter_tensor(out, buf)


def buffers(kind, nbytes, dtype, device, world):
    """(input, output, the bytes the bus-bandwidth definition counts)."""
    n = max(1, nbytes // torch.tensor([], dtype=dtype).element_size())
    n -= n % world or 0
    n = max(n, world)
    if kind == "all_reduce":
        return torch.ones(n, dtype=dtype, device=device), None, n
    if kind == "all_gather":
        return torch.ones(n // world, dtype=dtype, device=device), torch.empty(n, dtype=dtype, device=device), n
    return torch.ones(n, dtype=dtype, device=device), torch.empty(n // world, dtype=dtype, device=device), n


def timed(kind, buf, out, world, min_s=0.2, max_iters=500):
    """Seconds per call over about min_s (at least 2 calls, as many on every rank: rank 0's count)."""
    call(kind, buf, out, world)  # warm-up
    dist.barrier()
    t = time.perf_counter()
    call(kind, buf, out, world)
    one = time.perf_counter() - t
    iters = torch.tensor([max(2, min(max_iters, int(min_s / max(one, 1e-7))))])
    dist.broadcast(iters, 0)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(int(iters)):
        call(kind, buf, out, world)
    if buf.device.type == "tpu":  # tpu_dist's collectives are asynchronous, as NCCL's
        torch.tpu.synchronize()
    return (time.perf_counter() - start) / int(iters)


def memcpy_gbps():
    src = torch.ones(16 << 20)
    dst = torch.empty_like(src)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        dst.copy_(src)
        best = min(best, time.perf_counter() - t)
    return src.numel() * 4 / best / 1e9


def worker(args):
    dist.init_process_group("cpu:gloo,tpu:tpu_dist")
    rank, world = dist.get_rank(), dist.get_world_size()
    rows = []
    sizes = [1 << k for k in range(10, 29, 2) if (1 << k) <= args.max_mib << 20]
    for dtype in (torch.float32, torch.bfloat16):
        for kind in BUS_FACTOR:
            for nbytes in sizes:
                t = {}
                gloo_repeats = []
                for backend, device in (("tpu_dist", "tpu"), ("gloo", "cpu"), ("tpu_dist", "tpu"), ("gloo", "cpu")):
                    buf, out, n = buffers(kind, nbytes, dtype, device, world)
                    s = timed(kind, buf, out, world)
                    t[backend] = min(t.get(backend, float("inf")), s)
                    if backend == "gloo":
                        gloo_repeats.append(s)
                    del buf, out
                full = n * torch.tensor([], dtype=dtype).element_size()
                bus = {b: full / s / 1e9 * BUS_FACTOR[kind](world) for b, s in t.items()}
                rows.append({"kind": kind, "dtype": str(dtype).replace("torch.", ""), "bytes": full,
                             "tpu_dist_us": t["tpu_dist"] * 1e6, "gloo_us": t["gloo"] * 1e6,
                             "tpu_dist_busbw_gbps": bus["tpu_dist"], "gloo_busbw_gbps": bus["gloo"],
                             "speedup": t["gloo"] / t["tpu_dist"],
                             "gloo_unstable": max(gloo_repeats) > 3 * min(gloo_repeats)})
    latency = {}
    for backend, device in (("tpu_dist", "tpu"), ("gloo", "cpu")):
        x = torch.ones(2, dtype=torch.float32, device=device)  # 8 bytes
        latency[backend] = timed("all_reduce", x, None, world, min_s=0.5, max_iters=20000) * 1e6
    dist.barrier()
    copy = memcpy_gbps() if rank == 0 else 0.0
    dist.barrier()
    if rank == 0:
        report(rows, latency, copy, args.json, args.hosts)
    dist.destroy_process_group()


def fmt_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.0f} {unit}"
        n /= 1024
    return f"{n:.0f} TiB"


def report(rows, latency, copy_gbps, as_json, hosts):
    if as_json:
        print(json.dumps({"hosts": hosts, "rows": rows, "latency_us": latency, "memcpy_gbps": copy_gbps}))
        return
    where = "one host" if hosts == 1 else f"{hosts} emulated hosts on this machine"
    print(f"4 ranks, {where}. memcpy bandwidth of this host: {copy_gbps:.1f} GB/s")
    print(f"8-byte all_reduce latency: tpu_dist {latency['tpu_dist']:.1f} us, gloo {latency['gloo']:.1f} us")
    print(f"{'collective':<15}{'dtype':<10}{'size':>10}{'tpu_dist us':>13}{'gloo us':>11}"
          f"{'busbw GB/s':>12}{'gloo GB/s':>11}{'x gloo':>8}{'% memcpy':>10}")
    for r in rows:
        flag = "  (gloo unstable: collapsed under load?)" if r["gloo_unstable"] else ""
        print(f"{r['kind']:<15}{r['dtype']:<10}{fmt_bytes(r['bytes']):>10}{r['tpu_dist_us']:>13.1f}{r['gloo_us']:>11.1f}"
              f"{r['tpu_dist_busbw_gbps']:>12.2f}{r['gloo_busbw_gbps']:>11.2f}{r['speedup']:>8.1f}"
              f"{100 * r['tpu_dist_busbw_gbps'] / copy_gbps:>9.0f}%{flag}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--max-mib", type=int, default=256, help="largest buffer (MiB)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--hosts", type=int, choices=(1, 2), default=1, help="emulated hosts the 4 ranks run on")
    p.add_argument("--port", type=int, default=29611, help="the launches' rendezvous port (--hosts 2)")
    args = p.parse_args()
    if "RANK" in os.environ:
        return worker(args)
    if args.hosts == 1:
        env = dict(os.environ, TPU_ACCELERATOR_TYPE="v6e-4", OMP_NUM_THREADS="1")
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=4", "--standalone", __file__, *sys.argv[1:]]
        return subprocess.call(cmd, env=env)
    launches = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes=2", f"--node_rank={i}",
                                  "--nproc_per_node=2", "--master_addr=127.0.0.1", f"--master_port={args.port}",
                                  __file__, *sys.argv[1:]],
                                 env=dict(os.environ, TPU_ACCELERATOR_TYPE="v5p-16", OMP_NUM_THREADS="1",
                                          TPU_WORKER_ID=str(i), TPU_WORKER_HOSTNAMES="localhost,localhost"))
                for i in range(2)]
    return max(p.wait() for p in launches)


if __name__ == "__main__":
    sys.exit(main())
