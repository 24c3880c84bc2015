"""torch.tpu.distributed: the tpu_dist backend and TorchTPU's launch helpers."""
from .backend import BACKEND  # noqa: F401
