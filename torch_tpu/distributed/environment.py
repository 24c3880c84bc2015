"""The TPU launch variables (shared/tpu_specs.json ``launch_env``) for one process per chip:
``torch.tpu.distributed.set_tpu_launch_env(nproc_per_node=N)`` in each process, or
``python -m torch.tpu.distributed.environment --nproc_per_node=N``, which prints them as ``export`` lines.

A Cloud TPU VM learns them from the metadata server; here they follow from the emulated slice, given
by the variables the runtime reads: TPU_ACCELERATOR_TYPE (default v6e-1), TPU_TOPOLOGY,
TPU_WORKER_ID and TPU_WORKER_HOSTNAMES. The values are those torch_xla's configure_topology
(torch_xla/_internal/tpu.py) writes for one process per chip: process bounds are the hosts' grid
times each host's grid of processes; every host's processes listen on BASE_PORT + local rank;
the task id is worker id * processes per host + local rank.

Chips on a host are numbered x fastest (runtime/src/chip.c gives host w the global chips
w * chips per host onwards), so the N processes of a host take its first N chips: N must divide
the host's chips and those chips must form a box (whole rows), which for the power-of-two hosts
of every generation means any power of two up to the host's chips.
"""
import argparse
import json
import math
import os
import shlex
import sys
from pathlib import Path
from typing import Optional

from torch_tpu import _C  # absolute: this file also runs as __main__ (python -m)

BASE_PORT = 8476  # torch_xla's: the process of local rank r listens on BASE_PORT + r
PER_RANK = ("TPU_VISIBLE_CHIPS", "TPU_PROCESS_PORT", "CLOUD_TPU_TASK_ID")
_SPECS = Path(__file__).resolve().parent.parent / "specs" / "tpu_specs.json"


def _specs() -> dict:
    return json.loads(_SPECS.read_text())


def _read_env() -> dict:
    """The variables the runtime reads, as it reads them (unset or empty: None)."""
    return {name: value for name, _, value in _C._environment()}


def _bounds(dims) -> str:
    return ",".join(map(str, dims))


class _Slice:
    """The emulated slice as the launch sees it: torus, hosts and this host, from the environment."""

    def __init__(self, env: dict):
        self.name = env["TPU_ACCELERATOR_TYPE"] or "v6e-1"
        if not self.name.rpartition("-")[2].isdigit():
            raise ValueError(f"TPU_ACCELERATOR_TYPE='{self.name}' is not a slice name: expected <generation>-<count>, "
                             "e.g. v6e-8 or v5p-16")
        try:
            info = _C._generation_info(self.name)  # the runtime's sizes, topology and generation facts
        except ValueError as e:
            raise ValueError(f"TPU_ACCELERATOR_TYPE: {e}") from None
        spec = _specs()["generations"][info["generation"]]
        self.chips = info["slice_chips"]
        self.topology = env["TPU_TOPOLOGY"] or info["topology"]
        dims = [int(d) if d.isdigit() else 0 for d in self.topology.split("x")]
        if len(dims) != info["topology"].count("x") + 1 or math.prod(dims) != self.chips:
            raise ValueError(f"TPU_TOPOLOGY='{self.topology}' is not a {info['topology'].count('x') + 1}-D topology of "
                             f"the {self.chips} chips of {self.name} (e.g. {info['topology']})")
        dims += [1] * (3 - len(dims))
        # a host holds chips_per_host chips as chips_per_host_bounds; a smaller slice is one host
        self.host_grid = dims if self.chips <= spec["chips_per_host"] else spec["chips_per_host_bounds"]
        if any(d % h for d, h in zip(dims, self.host_grid)):
            raise ValueError(f"TPU_TOPOLOGY='{self.topology}' does not divide into {info['generation']} hosts of "
                             f"{'x'.join(map(str, self.host_grid))} chips")
        self.host_bounds = [d // h for d, h in zip(dims, self.host_grid)]
        self.hosts = math.prod(self.host_bounds)
        self.host_chips = math.prod(self.host_grid)
        worker = env["TPU_WORKER_ID"] or "0"
        if not worker.isdigit() or int(worker) >= self.hosts:
            raise ValueError(f"TPU_WORKER_ID='{worker}': expected a host index 0..{self.hosts - 1} of {self.name} "
                             f"({self.hosts} host{'s' if self.hosts > 1 else ''} of {self.host_chips} chips)")
        self.worker = int(worker)
        names = env["TPU_WORKER_HOSTNAMES"]
        self.hostnames = names.split(",") if names else ["localhost"] * (self.hosts == 1)
        if len(self.hostnames) != self.hosts or not all(self.hostnames):  # the runtime's check, and unset
            plural = "s" if self.hosts > 1 else ""
            raise ValueError(f"TPU_WORKER_HOSTNAMES{'=' + repr(names) if names else ' is unset'}: {self.name} has "
                             f"{self.hosts} host{plural}; expected their {self.hosts} name{plural}, comma-separated, "
                             "host i (TPU_WORKER_ID=i) the i-th")

    def process_grid(self, n: int):
        """The box of chips the first n chips of a host form (x fastest), or None."""
        if self.host_chips % n:
            return None
        grid, left = [], n
        for h in self.host_grid:
            g = min(left, h)
            if left % g:
                return None
            grid.append(g)
            left //= g
        return grid

    def valid_counts(self):
        return [n for n in range(1, self.host_chips + 1) if self.process_grid(n)]


def launch_env(nproc_per_node: Optional[int] = None, local_rank: Optional[int] = None) -> dict:
    """The launch variables (name -> value, in shared/tpu_specs.json's order) for `nproc_per_node`
    processes on each host of the slice this process's environment describes (default: one per chip
    of a host); the per-rank ones (PER_RANK) only for a `local_rank`. Reads the environment, changes
    nothing. ValueError for a count a host cannot hold, listing those it can."""
    return _values(_Slice(_read_env()), nproc_per_node, local_rank)


def _values(s: _Slice, n: Optional[int], local_rank: Optional[int]) -> dict:
    n = s.host_chips if n is None else n
    grid = s.process_grid(n) if isinstance(n, int) and not isinstance(n, bool) and n >= 1 else None
    if grid is None:
        raise ValueError(f"nproc_per_node={n!r}: a host of {s.name} has {s.host_chips} chip"
                         f"{'s' if s.host_chips > 1 else ''} ({'x'.join(map(str, s.host_grid))}), one per process; "
                         f"valid counts: {', '.join(map(str, s.valid_counts()))}")
    if local_rank is not None and not 0 <= local_rank < n:
        raise ValueError(f"LOCAL_RANK={local_rank}: expected 0..{n - 1} for {n} processes per host")
    values = {
        "TPU_ACCELERATOR_TYPE": s.name,
        "TPU_TOPOLOGY": s.topology,
        "TPU_HOST_BOUNDS": _bounds(s.host_bounds),
        "TPU_CHIPS_PER_HOST_BOUNDS": _bounds(s.host_grid),
        "TPU_PROCESS_BOUNDS": _bounds(h * p for h, p in zip(s.host_bounds, grid)),
        "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,1,1",
        "TPU_PROCESS_ADDRESSES": ",".join(f"{host}:{BASE_PORT + r}" for host in s.hostnames for r in range(n)),
        "TPU_WORKER_ID": str(s.worker),
        "TPU_WORKER_HOSTNAMES": ",".join(s.hostnames),
        "TPU_SKIP_MDS_QUERY": "1",
    }
    if local_rank is not None:
        values.update(TPU_VISIBLE_CHIPS=str(local_rank), TPU_PROCESS_PORT=str(BASE_PORT + local_rank),
                      CLOUD_TPU_TASK_ID=str(s.worker * n + local_rank))
    return {name: values[name] for name in _specs()["launch_env"] if name in values}


def set_tpu_launch_env(nproc_per_node: Optional[int] = None) -> dict:
    """Sets the TPU launch variables of this process for `nproc_per_node` processes per host, one
    chip each, and returns them (name -> value in effect). Call it before the first use of the
    device: the runtime reads its configuration once.

    In a process a launcher started (torchrun sets LOCAL_RANK and LOCAL_WORLD_SIZE) it also sets
    the per-rank ones: TPU_VISIBLE_CHIPS (chip LOCAL_RANK of this host, seen as tpu:0),
    TPU_PROCESS_PORT (8476 + LOCAL_RANK, as torch_xla) and CLOUD_TPU_TASK_ID; `nproc_per_node`
    defaults to LOCAL_WORLD_SIZE and must equal it. Elsewhere it defaults to the host's chips.

    Any count a host can hold is accepted: one that divides the host's chips and takes whole rows
    of them, so 1, 2, 4 or 8 on a v6e host (TorchTPU accepts only 1, 4 or 8 on v6e); other counts
    raise ValueError listing the valid ones. A variable already set keeps its value (as in
    torch_xla's configure_topology), so an explicit TPU_VISIBLE_CHIPS wins."""
    env = _read_env()
    rank, size = env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]
    local_rank = None
    if rank is not None and size is not None:
        if not (rank.isdigit() and size.isdigit()):
            raise ValueError(f"LOCAL_RANK='{rank}', LOCAL_WORLD_SIZE='{size}': expected the launcher's numbers")
        if nproc_per_node is None:
            nproc_per_node = int(size)
        elif nproc_per_node != int(size):
            raise ValueError(f"nproc_per_node={nproc_per_node}, but the launcher started LOCAL_WORLD_SIZE={size} "
                             "processes on this host")
        local_rank = int(rank)
    values = launch_env(nproc_per_node, local_rank)
    for name, value in values.items():
        if not os.environ.get(name):
            os.environ[name] = value
    return {name: os.environ[name] for name in values}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m torch.tpu.distributed.environment",
        description="Print the TPU launch variables of the emulated slice (TPU_ACCELERATOR_TYPE, TPU_WORKER_ID, "
                    "TPU_WORKER_HOSTNAMES) as export lines: eval \"$(python -m torch.tpu.distributed.environment "
                    "--nproc_per_node=4)\"")
    parser.add_argument("--nproc_per_node", type=int, default=None,
                        help="processes per host, one chip each (default: one per chip of a host)")
    args = parser.parse_args(argv)
    try:
        s = _Slice(_read_env())
        n = s.host_chips if args.nproc_per_node is None else args.nproc_per_node
        values = _values(s, n, None)
    except ValueError as e:
        parser.error(str(e))
    plural = lambda k: "s" if k > 1 else ""  # noqa: E731
    print(f"# {s.name}: {s.hosts} host{plural(s.hosts)} of {s.host_chips} chip{plural(s.host_chips)}, "
          f"this is host {s.worker}; "
          f"{n} process{'es' if n > 1 else ''} per host, one chip each")
    for name, value in values.items():
        print(f"export {name}={shlex.quote(value)}")
    print(f"# Per rank, from the LOCAL_RANK the launcher (torchrun) gives each process: TPU_VISIBLE_CHIPS=LOCAL_RANK\n"
          f"# (the runtime takes chip LOCAL_RANK of the host itself while TPU_VISIBLE_CHIPS is unset),\n"
          f"# TPU_PROCESS_PORT={BASE_PORT}+LOCAL_RANK, CLOUD_TPU_TASK_ID={s.worker}*{n}+LOCAL_RANK;\n"
          f"# torch.tpu.distributed.set_tpu_launch_env() in the script sets all three.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
