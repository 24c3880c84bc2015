"""`tpu_dist`: the process-group backend of tpu tensors, one process per chip.

`dist.init_process_group("tpu_dist")` (or "cpu:gloo,tpu:tpu_dist") under torchrun gives DDP,
FSDP2, DTensor and torch.distributed.checkpoint their collectives. The backend is C++
(csrc/Distributed.cpp, a c10d::Backend); the collectives are the runtime's, over shared memory
between the processes of the host (runtime/src/collective.c). CPU tensors are accepted too: both
live in host memory. A group whose ranks run on several hosts sends its collectives through
Gloo, PyTorch's engine for host-to-host collectives (the inter-host hop)."""
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
    hosts = {store.get(f"tpu_dist/host/{r}") for r in range(size)}
    gloo = None
    if len(hosts) > 1:
        gloo = dist.ProcessGroupGloo(dist.PrefixStore("tpu_dist/gloo", store), rank, size, timeout)
    return _C._create_tpu_dist_backend(store, rank, size, timeout, gloo)


def register():
    if dist.is_available() and BACKEND not in dist.Backend.backend_list:
        dist.Backend.register_backend(BACKEND, _create, devices=["cpu", "tpu"])
