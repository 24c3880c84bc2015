"""Shape functions the generic tpu path sizes outputs with, one module per kernel family.

Where PyTorch ships no Meta kernel for an op (histogram, the convolution entry points for
out-of-tree backends, some backwards), ours is registered as its Meta kernel. Where PyTorch
ships one whose checks or shapes differ from CPU's kernel (batch norm's saved statistics, the
exception type of cat of 0-dim tensors), ours runs for tpu tensors only: meta tensors,
FakeTensor tracing and every other device keep PyTorch's behaviour."""
import importlib
import pkgutil

import torch

from .. import _C

_lib = torch.library.Library("aten", "IMPL")
# A kernel in any of these answers for meta tensors: PyTorch's own, which stays.
_META_ANSWERING_KEYS = ("Meta", "CompositeImplicitAutograd", "CompositeExplicitAutograd",
                        "CompositeExplicitAutogradNonFunctional")
# overload name -> "Meta" (registered with the dispatcher) or "tpu" (the tpu path only)
REGISTERED = {}


def pytorch_ships_meta(name):
    """Whether PyTorch itself answers op `name` ("cat", "geqrf.a") for meta tensors."""
    return any(torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", k) for k in _META_ANSWERING_KEYS)


def register(name, fn):
    """fn as op `name`'s shape function on the tpu path (see the module docstring)."""
    if name in REGISTERED:
        raise ValueError(f"a shape function for {name} is already registered")
    if pytorch_ships_meta(name):
        _C._set_op_meta(name, fn)
        REGISTERED[name] = "tpu"
    else:
        _lib.impl(name, fn, "Meta")
        REGISTERED[name] = "Meta"


def resize_output(out, shape):
    """out resized to shape as CPU's out= kernels do (at::native::resize_output): with the
    deprecation warning when a non-empty out= changes shape."""
    torch.ops.aten._resize_output_(out, list(shape), out.device)
    return out


for _m in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_m.name}")
