"""MXU precision of float32 matmuls and convolutions, as on TorchTPU: "default" is one bf16
pass with f32 accumulation (what a TPU does unless told otherwise), "high" three bf16
passes (bf16_3x), "highest" six passes (about f32). bf16 inputs are unaffected."""
from . import _C

_PRECISIONS = _C._matmul_precisions()  # the runtime's table: name -> bf16 passes
_NAMES = ", ".join(_PRECISIONS)


def set_matmul_precision(p: str) -> None:
    key = str(p).lower()
    if key not in _PRECISIONS:
        raise ValueError(f"unknown matmul precision {p!r}; expected one of {_NAMES}")
    _C._set_matmul_precision(_PRECISIONS[key])


def get_matmul_precision() -> str:
    code = _C._get_matmul_precision()
    return next(name for name, c in _PRECISIONS.items() if c == code)


class precision:
    """``with torch.tpu.precision("highest"): ...`` — the precision in force for ops issued
    inside the block; the previous one comes back after it."""

    def __init__(self, p: str):
        if str(p).lower() not in _PRECISIONS:
            raise ValueError(f"unknown matmul precision {p!r}; expected one of {_NAMES}")
        self.p = str(p).lower()

    def __enter__(self):
        self.prev = get_matmul_precision()
        set_matmul_precision(self.p)
        return self

    def __exit__(self, *exc):
        set_matmul_precision(self.prev)
        return False
