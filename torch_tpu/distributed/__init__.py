"""``torch.tpu.distributed``: one process per chip. ``set_tpu_launch_env`` and
``python -m torch.tpu.distributed.environment`` fill the TPU launch variables (environment.py)."""
from .environment import set_tpu_launch_env  # noqa: F401
