"""``torch.tpu.amp``: the CUDA-style spelling of ``torch.autocast("tpu")``. The cast policy is
PyTorch's CUDA one (csrc/Autocast.cpp); the default dtype is bfloat16, the MXU's input type.
bfloat16 keeps float32's exponent range, so no GradScaler is needed."""
import torch


class autocast(torch.amp.autocast):
    """``torch.tpu.amp.autocast(...)`` == ``torch.autocast("tpu", ...)``."""

    def __init__(self, enabled: bool = True, dtype: torch.dtype = torch.bfloat16, cache_enabled: bool = True):
        super().__init__("tpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
