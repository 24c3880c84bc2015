"""`tpu_dist`: the process-group backend of tpu tensors, one process per chip.

`dist.init_process_group("tpu_dist")` (or "cpu:gloo,tpu:tpu_dist") under torchrun gives DDP,
FSDP2, DTensor and torch.distributed.checkpoint their collectives. The backend is C++
(csrc/Distributed.cpp, a c10d::Backend); the collectives are the runtime's, over shared memory
between the processes of the host (runtime/src/collective.c). CPU tensors are accepted too: both
live in host memory."""
import torch.distributed as dist

from .. import _C

BACKEND = "tpu_dist"


def _create(store, rank, size, timeout):
    return _C._create_tpu_dist_backend(store, rank, size, timeout)


def register():
    if dist.is_available() and BACKEND not in dist.Backend.backend_list:
        dist.Backend.register_backend(BACKEND, _create, devices=["cpu", "tpu"])
