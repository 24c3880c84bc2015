"""Ray on emulated chips: a Ray cluster whose nodes advertise `TPU` resources, (a) a pool of Ray
actors each driving one emulated chip, and (b) a Ray Train `TorchTrainer` with one worker per chip
and the `tpu_dist` process-group backend (DDP), each checked against CPU:

    python demo/ray_tpu.py                      # a local Ray cluster: one node, an emulated v6e-4
    python demo/ray_tpu.py --slice v6e-8 --steps 10
    python demo/ray_tpu.py --address auto       # an existing cluster (ray start, below)
    python demo/ray_tpu.py --json               # also prints the results as one JSON line (tests/test_ray.py)

The exit status is 0 only if every check passed.

How Ray's TPU support maps onto the emulated chips (Ray 2.60, ray/_private/accelerators/tpu.py):

- A node's chips are the resource "TPU". On a TPU VM Ray counts /dev/accel* (or VFIO groups); an
  emulating machine has none, so the node is told: `ray.init(resources={"TPU": 4})` here,
  `ray start --resources='{"TPU": 4}'` on a cluster.
- Ray reads the slice the way it does on GKE, from TPU_ACCELERATOR_TYPE, TPU_TOPOLOGY,
  TPU_WORKER_ID and TPU_NAME (a GCE TPU VM answers from its metadata server instead), and from them
  adds the resources `accelerator_type:TPU-V6E`, `<TPU_NAME>` and, on worker 0,
  `TPU-v6e-4-head`, and the node labels ray.io/tpu-slice-name, -worker-id, -topology, -pod-type
  that Ray Train uses to reserve a slice. These are the variables torch_tpu's emulated slice reads
  as well, so one environment describes the slice to both. This script sets them for the local
  node when they are unset (TPU_NAME: "emulated-<slice>").
- A task or actor that asks for {"TPU": 1} gets a chip id (ray.get_runtime_context()
  .get_accelerator_ids()["TPU"]), and Ray sets TPU_VISIBLE_CHIPS=<id>,
  TPU_CHIPS_PER_HOST_BOUNDS=1,1,1 and TPU_HOST_BOUNDS=1,1,1 in its process before it runs. The
  torch_tpu runtime reads TPU_VISIBLE_CHIPS: the process sees that chip of its host, and nothing
  else, as tpu:0 (global index TPU_WORKER_ID * chips per host + id). Nothing else is needed.
- The chip is bound once per process, at the first use of the device, as the real runtime does.
  Ray reuses a task's worker process for later tasks and then changes TPU_VISIBLE_CHIPS in it; a
  process that already used its chip keeps computing on that one. Ray avoids this for GPU tasks
  by giving them max_calls=1 by default, but it does not do so for TPU tasks. Drive chips from
  actors, as here (one process per chip for the actor's life), or give TPU tasks
  `@ray.remote(max_calls=1)`.
- Ray Train: `ScalingConfig(use_tpu=True, topology=..., accelerator_type="TPU-V6E",
  resources_per_worker={"TPU": 1})` reserves the slice and starts one worker per chip; Ray sets
  MASTER_ADDR/MASTER_PORT, RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE and NODE_RANK before
  it calls init_process_group, and `ray.train.torch.get_device()` is torch.device("tpu").
  Ray's default backend for use_tpu is "tpu_dist": it calls `torch_tpu._loader.load()`
  (TorchTPU's name, which torch_tpu provides) and then init_process_group("tpu_dist"), so the
  TorchConfig needs no backend. (`TorchConfig(backend="cpu:gloo,tpu:tpu_dist")` would add Gloo for
  CPU tensors in the same group.)

On a multi-host Ray cluster
---------------------------
Start Ray on every host of the slice, then run the same script on the head with `--address auto`:

    host 0:  ray start --head --port=6379
    host i:  ray start --address=<host 0's IP>:6379
    host 0:  python demo/ray_tpu.py --address auto --storage-path <a directory every host sees>

Ray 2.60 turns token authentication on for a head that finds a token (~/.ray/auth_token, which
the first local ray.init writes): give every host and the driver that token (the file, or
RAY_AUTH_TOKEN) and RAY_AUTH_MODE=token, or they are refused ("InvalidAuthToken").

On real TPU VMs Ray finds each host's chips and the slice itself (metadata server). To emulate a
multi-host slice with one machine per host, give each `ray start` what the metadata server would:
the same TPU_ACCELERATOR_TYPE, TPU_TOPOLOGY, TPU_NAME and TPU_WORKER_HOSTNAMES everywhere, the
host's own TPU_WORKER_ID, and its chip count. The workers inherit these variables from their
node's raylet, so do not pass them in a job's runtime_env, which would give every host the same
TPU_WORKER_ID. For example, for v5p-16 (2 hosts of 4 chips, 2x2x2):

    TPU_ACCELERATOR_TYPE=v5p-16 TPU_TOPOLOGY=2x2x2 TPU_NAME=my-slice TPU_WORKER_HOSTNAMES=h0,h1 \\
      TPU_WORKER_ID=<0 or 1> ray start ... --resources='{"TPU": 4}'

(Two such nodes can also run on one machine, `ray start --address=127.0.0.1:6379` for the second:
Ray then sees one slice of 8 chips on 2 hosts, and host 1's actors are chips 4..7. Ray Train
gives all 8 workers node rank 0 and local ranks 0..7 there, because it groups workers by IP address.)

What runs across hosts today:
- Part (a) does: actors are placed on any host, and each sees its host's chip Ray gave it as
  tpu:0 (global chips 4..7 on host 1 of v5p-16).
- Part (b) does too: tpu_dist sends the collectives of a group whose ranks are on several hosts
  through Gloo (hosts told apart by machine and TPU_WORKER_ID, which each worker inherits from its
  node), and torch.tpu.metrics counts them. Two Ray nodes on one machine as the two hosts of a
  v5p-16: 8 workers trained to single-process training's parameters.
- Ray Train's checkpoints, which return (b)'s trained model to the driver, go to
  `--storage-path`, which must be storage every node can reach (NFS, or gs://...) once the
  workers are not on the driver's machine.
"""
import argparse
import json
import math
import os
import shutil
import socket
import sys
import tempfile
import time

import torch
from torch import nn

STEPS = 5
BATCH = 8  # rows per worker and step
LR = 0.1


# ---------------------------------------------------------------- the cluster
def emulated_node_env(slice_name=None):
    """The variables Ray and torch_tpu read to know the node's slice (as GKE sets them on a TPU
    pod), set in this process where unset: the local Ray node and its workers inherit them.
    Returns (chips per host, number of hosts)."""
    from torch_tpu.distributed.environment import launch_env

    if slice_name:
        os.environ["TPU_ACCELERATOR_TYPE"] = slice_name
    os.environ.setdefault("TPU_ACCELERATOR_TYPE", "v6e-4")
    env = launch_env()  # the slice's topology, hosts and chips per host, from torch_tpu
    hosts = math.prod(int(d) for d in env["TPU_HOST_BOUNDS"].split(","))
    chips = math.prod(int(d) for d in env["TPU_CHIPS_PER_HOST_BOUNDS"].split(","))
    for name in ("TPU_TOPOLOGY", "TPU_WORKER_ID", "TPU_WORKER_HOSTNAMES"):
        os.environ.setdefault(name, env[name])
    os.environ.setdefault("TPU_NAME", f"emulated-{env['TPU_ACCELERATOR_TYPE']}")
    return chips, hosts


def start_ray(address=None, slice_name=None, num_cpus=None, object_store_mb=None):
    """Connects to the cluster at `address`, or starts a one-node cluster whose node advertises the
    chips of one host of the emulated slice as the resource "TPU"."""
    import ray

    if address:
        ray.init(address=address)
        return
    chips, hosts = emulated_node_env(slice_name)
    if hosts > 1:
        raise SystemExit(f"{os.environ['TPU_ACCELERATOR_TYPE']} has {hosts} hosts: a local cluster is one host; "
                         "start one Ray node per host (see the module docstring) and pass --address")
    # "local": a new cluster, whatever /tmp/ray/ray_current_cluster names (a `ray start` left it)
    ray.init(address="local", num_cpus=num_cpus or max(chips, os.cpu_count() or 1), resources={"TPU": chips},
             include_dashboard=False,
             object_store_memory=object_store_mb * 2**20 if object_store_mb else None)


def tpu_slices():
    """The TPU slices of the cluster's live nodes, from the labels Ray gives TPU nodes:
    name -> {pod_type, topology, accelerator_type, chips, hosts}."""
    import ray

    slices = {}
    for node in ray.nodes():
        labels, tpus = node.get("Labels", {}), node["Resources"].get("TPU", 0)
        if not node["Alive"] or not tpus or "ray.io/tpu-slice-name" not in labels:
            continue
        s = slices.setdefault(labels["ray.io/tpu-slice-name"], {
            "pod_type": labels.get("ray.io/tpu-pod-type"), "topology": labels.get("ray.io/tpu-topology"),
            "accelerator_type": labels.get("ray.io/accelerator-type"), "chips": 0, "hosts": 0})
        s["chips"] += int(tpus)
        s["hosts"] += 1
    return slices


# ---------------------------------------------------------------- (a) one actor per chip
def linear_problem(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(64, 32, generator=g), torch.randn(64, 8, generator=g), torch.randn(32, 8, generator=g)


def linear_step(x, y, w):
    """One SGD step of least squares: the loss and the updated weights."""
    w = w.clone().requires_grad_(True)
    loss = nn.functional.mse_loss(x @ w, y)
    loss.backward()
    return loss.detach(), (w - LR * w.grad).detach()


def chip_worker_class():
    import ray

    @ray.remote(resources={"TPU": 1}, num_cpus=1)
    class ChipWorker:
        """Holds one chip for its lifetime: Ray set TPU_VISIBLE_CHIPS before this process started it."""

        def __init__(self):
            torch.tpu.set_matmul_precision("highest")  # float32 matmuls: compared to CPU tightly
            self.props = torch.tpu.get_device_properties(0)

        def info(self):
            from torch_tpu.distributed.environment import launch_env

            ids = ray.get_runtime_context().get_accelerator_ids()["TPU"]
            slice_env = launch_env()  # the slice as torch_tpu numbers its chips (Ray rewrites the bounds)
            per_host = math.prod(int(d) for d in slice_env["TPU_CHIPS_PER_HOST_BOUNDS"].split(","))
            return {"host": socket.gethostname(), "pid": os.getpid(), "ray_tpu_ids": ids,
                    "expected_chip": int(slice_env["TPU_WORKER_ID"]) * per_host + int(ids[0]),
                    "env": {k: os.environ.get(k) for k in ("TPU_VISIBLE_CHIPS", "TPU_CHIPS_PER_HOST_BOUNDS",
                                                           "TPU_HOST_BOUNDS", "TPU_WORKER_ID")},
                    "device_count": torch.tpu.device_count(), "chip": self.props.global_index}

        def step(self, seed):
            x, y, w = (t.to("tpu") for t in linear_problem(seed))
            loss, w = linear_step(x, y, w)
            return {"seed": seed, "chip": self.props.global_index, "pid": os.getpid(),
                    "device": str(w.device), "loss": loss.item(), "w": w.cpu()}

    return ChipWorker


def run_chip_pool(n_workers, items_per_worker=2):
    """(a): n_workers actors of {"TPU": 1}; the problems are spread over them with an ActorPool;
    every result is compared with the same step on CPU. Returns the report (a dict)."""
    import ray
    from ray.util import ActorPool

    ChipWorker = chip_worker_class()
    actors = [ChipWorker.remote() for _ in range(n_workers)]
    try:
        infos = ray.get([a.info.remote() for a in actors])
        seeds = list(range(n_workers * items_per_worker))
        results = list(ActorPool(actors).map_unordered(lambda a, s: a.step.remote(s), seeds))
    finally:
        for a in actors:  # frees their chips for the trainer
            ray.kill(a)
    worst = 0.0
    for r in results:
        loss, w = linear_step(*linear_problem(r["seed"]))  # the CPU reference, float32 as on tpu
        worst = max(worst, abs(r["loss"] - loss.item()) / max(1.0, abs(loss.item())),
                    (r.pop("w") - w).abs().max().item())
    chips = sorted((i["host"], i["chip"]) for i in infos)
    own_chip = all(i["device_count"] == 1 and i["env"]["TPU_VISIBLE_CHIPS"] == ",".join(i["ray_tpu_ids"])
                   and i["chip"] == i["expected_chip"] for i in infos)
    return {"workers": infos, "results": results, "max_error": worst,
            "distinct_chips": len(set(chips)) == n_workers, "own_chip": own_chip,
            "ok": len(set(chips)) == n_workers and own_chip and worst <= 1e-5
            and all(r["device"] == "tpu:0" for r in results)}


# ---------------------------------------------------------------- (b) Ray Train, tpu_dist, DDP
def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))


def batch(step, rank, n=BATCH):
    g = torch.Generator().manual_seed(100 * step + rank)
    return torch.randn(n, 16, generator=g), torch.randn(n, 4, generator=g)


def reference_training(world, steps):
    """One CPU process, float64, on the union of the workers' batches: losses and parameters."""
    model = mlp().double()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for step in range(steps):
        xs, ys = zip(*(batch(step, r) for r in range(world)))
        loss = nn.functional.mse_loss(model(torch.cat(xs).double()), torch.cat(ys).double())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model.state_dict()


def train_loop(config):
    """Each Ray Train worker: DDP over the process group Ray set up, on its chip as tpu:0."""
    import ray.train
    import ray.train.torch
    import torch.distributed as dist

    torch.tpu.set_matmul_precision("highest")
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    device = ray.train.torch.get_device()
    torch.tpu.metrics.reset()
    t0 = time.time()
    model = ray.train.torch.prepare_model(mlp())  # to `device`, wrapped in DistributedDataParallel
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    t1 = time.time()
    losses = []
    for step in range(config["steps"]):
        x, y = batch(step, rank)
        loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        total = loss.detach().clone()
        dist.all_reduce(total)
        losses.append(total.item() / world)
    t2 = time.time()
    collectives = torch.tpu.metrics.collectives()  # before the all_gather below
    # every rank's chip and host (TPU_WORKER_ID: Ray's node rank groups nodes by IP address)
    mine = torch.tensor([torch.tpu.get_device_properties(0).global_index, int(os.environ.get("TPU_WORKER_ID") or 0)],
                        device=device)
    gathered = [torch.zeros_like(mine) for _ in range(world)]
    dist.all_gather(gathered, mine)
    metrics = {"losses": losses, "chips": [int(g[0]) for g in gathered], "tpu_hosts": sorted({int(g[1]) for g in gathered}),
               "backend": dist.get_backend(), "device": str(next(model.parameters()).device),
               "tpu_dist_all_reduces": collectives.get("all_reduce", {}).get("calls", 0),
               "seconds": {"prepare_model": round(t1 - t0, 2), "steps": round(t2 - t1, 2)},
               "env": {k: os.environ.get(k) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                                                      "MASTER_ADDR", "TPU_VISIBLE_CHIPS")}}
    if rank == 0:
        with tempfile.TemporaryDirectory() as d:
            torch.save({k: v.cpu() for k, v in model.module.state_dict().items()}, os.path.join(d, "model.pt"))
            ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(d))
    else:
        ray.train.report(metrics)


def run_trainer(n_workers, steps, storage_path, slice_info):
    """(b): a TorchTrainer with one worker per chip and tpu_dist; the trained parameters and the
    losses are compared with single-process float64 training on CPU. Returns the report."""
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    trainer = TorchTrainer(
        train_loop, train_loop_config={"steps": steps},
        torch_config=TorchConfig(),  # use_tpu's default backend: tpu_dist
        scaling_config=ScalingConfig(num_workers=n_workers, use_tpu=True, topology=slice_info["topology"],
                                     accelerator_type=slice_info["accelerator_type"],
                                     resources_per_worker={"TPU": 1, "CPU": 1}),
        run_config=RunConfig(storage_path=storage_path, name=time.strftime("ray_tpu_demo_%Y%m%d_%H%M%S")))
    result = trainer.fit()
    metrics = result.metrics
    with result.checkpoint.as_directory() as d:
        state = torch.load(os.path.join(d, "model.pt"))
    ref_losses, ref_state = reference_training(n_workers, steps)
    param_error = max((state[k].double() - ref_state[k]).abs().max().item() for k in ref_state)
    loss_error = max(abs(g - w) / max(1.0, abs(w)) for g, w in zip(metrics["losses"], ref_losses))
    counted = metrics["tpu_dist_all_reduces"] > 0  # torch.tpu.metrics, within a host and across
    ok = (param_error <= 1e-5 and loss_error <= 2e-5 and len(set(metrics["chips"])) == n_workers
          and metrics["device"] == "tpu:0" and counted)
    return {"metrics": metrics, "reference_losses": ref_losses, "param_error": param_error,
            "loss_error": loss_error, "ok": ok}


# ---------------------------------------------------------------- main
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--address", help="an existing Ray cluster ('auto', or host:port); default: start a local one")
    p.add_argument("--slice", help="the emulated slice of the local cluster (default: TPU_ACCELERATOR_TYPE or v6e-4)")
    p.add_argument("--workers", type=int, help="chips to use (default: every TPU of the slice; Ray Train reserves whole "
                   "slices, so the trainer takes a multiple of the slice's chips)")
    p.add_argument("--steps", type=int, default=STEPS)
    p.add_argument("--num-cpus", type=int, help="the local node's CPUs (default: max(chips, CPUs))")
    p.add_argument("--object-store-mb", type=int, help="the local node's object store (default: Ray's)")
    p.add_argument("--storage-path", help="Ray Train's storage; default: a temporary directory, removed after")
    p.add_argument("--skip", choices=["pool", "trainer"], action="append", default=[])
    p.add_argument("--json", action="store_true", help="print the results as one JSON line at the end")
    args = p.parse_args(argv)

    import ray

    t0 = time.time()
    start_ray(args.address, args.slice, args.num_cpus, args.object_store_mb)
    storage = args.storage_path or tempfile.mkdtemp(prefix="ray_tpu_demo_")
    report = {"ray": ray.__version__}
    try:
        slices = tpu_slices()
        if len(slices) != 1:
            raise SystemExit(f"expected the cluster to hold one TPU slice, found {slices or 'none'}")
        (name, s), = slices.items()
        n = args.workers or s["chips"]
        report.update(slice=dict(s, name=name), start_s=round(time.time() - t0, 1))
        print(f"Ray {ray.__version__}: slice {name} ({s['pod_type']}, topology {s['topology']}, "
              f"{s['accelerator_type']}): {s['chips']} chips on {s['hosts']} host(s); using {n}", flush=True)
        if "pool" not in args.skip:
            t = time.time()
            a = report["pool"] = run_chip_pool(n)
            a["seconds"] = round(time.time() - t, 1)
            print(f"(a) {n} actors of {{'TPU': 1}}, {len(a['results'])} SGD steps in {a['seconds']} s:", flush=True)
            for i in sorted(a["workers"], key=lambda i: i["chip"]):
                print(f"    pid {i['pid']} on {i['host']} (TPU host {i['env']['TPU_WORKER_ID']}): Ray's TPU ids {i['ray_tpu_ids']}, "
                      f"TPU_VISIBLE_CHIPS={i['env']['TPU_VISIBLE_CHIPS']} -> tpu:0 is chip {i['chip']} "
                      f"({i['device_count']} device)")
            print(f"    distinct chips: {a['distinct_chips']}; max |tpu - CPU| {a['max_error']:.2e}: "
                  f"{'ok' if a['ok'] else 'FAILED'}", flush=True)
        if "trainer" not in args.skip:
            t = time.time()
            b = report["trainer"] = run_trainer(n, args.steps, storage, s)
            b["seconds"] = round(time.time() - t, 1)
            m = b["metrics"]
            print(f"(b) TorchTrainer, {n} workers, backend {m['backend']}, {args.steps} DDP steps in {b['seconds']} s: "
                  f"ranks on chips {m['chips']} (TPU hosts {m['tpu_hosts']}), {m['tpu_dist_all_reduces']} tpu_dist all_reduces on rank 0 "
                  f"(prepare_model {m['seconds']['prepare_model']} s, steps {m['seconds']['steps']} s)", flush=True)
            print(f"    losses {[round(v, 6) for v in m['losses']]}")
            print(f"    vs one CPU process (float64): params {b['param_error']:.2e}, losses {b['loss_error']:.2e}: "
                  f"{'ok' if b['ok'] else 'FAILED'}", flush=True)
    finally:
        ray.shutdown()
        if not args.storage_path:
            shutil.rmtree(storage, ignore_errors=True)
    report["seconds"] = round(time.time() - t0, 1)
    ok = all(report[k]["ok"] for k in ("pool", "trainer") if k in report)
    print(f"{'ok' if ok else 'FAILED'}: {report['seconds']} s", flush=True)
    if args.json:
        print(json.dumps(report, default=str))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
