"""Meta (shape) functions for ATen ops that PyTorch ships without one, so the generic
dispatcher path can size their outputs. One module per kernel family; each registers with
``torch.library`` when imported (all modules here are imported by torch_tpu)."""
import importlib
import pkgutil

import torch


def resize_output(out, shape):
    """out resized to shape as CPU's out= kernels do (at::native::resize_output): with the
    deprecation warning when a non-empty out= changes shape."""
    torch.ops.aten._resize_output_(out, list(shape), out.device)
    return out


for _m in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_m.name}")
