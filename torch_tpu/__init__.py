"""torch_tpu: a native ``tpu`` device for PyTorch, backed by an embedded software TPU in C.

Importing torch autoloads this package (entry point group ``torch.backends``); after that
``torch.tpu`` exists and tensors can live on ``device="tpu"``.
"""
import torch

from . import _C  # noqa: F401  (loads the runtime and registers the kernels)
from . import _registration

__version__ = "0.1.0"

_registration.register()


def _autoload():
    """Entry point for torch's device-backend autoloading; the import above did the work."""
