"""`tpu_dist`: the process-group backend of tpu tensors, one process per chip.

`dist.init_process_group("tpu_dist")` (or "cpu:gloo,tpu:tpu_dist") under torchrun gives DDP,
FSDP2, DTensor and torch.distributed.checkpoint their collectives. The backend is C++
(csrc/Distributed.cpp, a c10d::Backend); the collectives are the runtime's, over shared memory
between the processes of the host (runtime/src/collective.c). CPU tensors are accepted too: both
live in host memory. A group whose ranks run on several hosts is hierarchical: shared memory
within each host, and Gloo, PyTorch's engine for host-to-host collectives, between the hosts' first
ranks (the inter-host hop); the collectives between arbitrary pairs of ranks go through a Gloo group
of every rank."""
import os
import socket

import torch.distributed as dist

from .. import _C

BACKEND = "tpu_dist"


def host_id():
    """This process's host: processes on one host share memory. TPU_WORKER_ID, which differs
    between the hosts of a slice, is part of it, so two launches on one machine with different
    worker ids are two hosts (how the tests emulate a multi-host slice)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    return f"{socket.gethostname()}/{boot}/worker{os.environ.get('TPU_WORKER_ID') or 0}"


def _create(store, rank, size, timeout):
    store.set(f"tpu_dist/host/{rank}", host_id())
    ids = [store.get(f"tpu_dist/host/{r}") for r in range(size)]
    hosts = list(dict.fromkeys(ids))  # in the order of their first ranks
    if len(hosts) == 1:
        return _C._create_tpu_dist_backend(store, rank, size, timeout)
    host_of = [hosts.index(i) for i in ids]
    host = host_of[rank]
    everyone = dist.ProcessGroupGloo(dist.PrefixStore("tpu_dist/gloo", store), rank, size, timeout)
    leaders = None
    if host_of.index(host) == rank:
        leaders = dist.ProcessGroupGloo(dist.PrefixStore("tpu_dist/leaders", store), host, len(hosts), timeout)
    return _C._create_tpu_dist_backend(store, rank, size, timeout, everyone, leaders, host_of)


def register():
    if dist.is_available() and BACKEND not in dist.Backend.backend_list:
        dist.Backend.register_backend(BACKEND, _create, devices=["cpu", "tpu"])
