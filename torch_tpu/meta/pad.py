"""Reflection and replication padding keep a channels-last input channels-last, as CPU's and
CUDA's kernels do (PyTorch's meta functions return them contiguous): PyTorch's shapes and
checks, the input's memory format."""
import torch
from torch._prims_common import suggest_memory_format

from . import register


def _keeping_memory_format(op):
    def shape(input, padding):
        return op(input, padding).contiguous(memory_format=suggest_memory_format(input))
    return shape


for _name in ("reflection_pad2d", "reflection_pad3d", "replication_pad2d", "replication_pad3d"):
    register(_name, _keeping_memory_format(getattr(torch.ops.aten, _name).default))
