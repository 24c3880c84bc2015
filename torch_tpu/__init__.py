"""torch_tpu: a native ``tpu`` device for PyTorch, backed by an embedded software TPU in C.

Importing torch autoloads this package (entry point group ``torch.backends``); after that
``torch.tpu`` exists and tensors can live on ``device="tpu"``.
"""
__version__ = "0.1.0"


def _autoload():
    """Entry point for torch's device-backend autoloading (also run by a direct import).
    Defined before ``import torch`` because importing torch first re-enters here."""
    from . import _runtime

    _runtime.load()  # the runtime's build for this CPU, before the extension links to it
    from . import _registration

    _registration.register()


import torch  # noqa: E402

_autoload()

from . import _C, composite, meta, metrics, sparse, tpu_checks  # noqa: E402,F401
