"""torch.tpu.distributed: the tpu_dist backend and TorchTPU's launch helpers (``set_tpu_launch_env``
and ``python -m torch.tpu.distributed.environment`` fill the TPU launch variables, environment.py)."""
from .backend import BACKEND  # noqa: F401
from .environment import set_tpu_launch_env  # noqa: F401
