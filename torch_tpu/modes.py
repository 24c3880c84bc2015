"""Eager execution modes (TorchTPU's names), read from the runtime's table: "strict" runs ops
asynchronously on the chip's stream (the default, like PyTorch on CUDA); "debug" runs each op
synchronously and raises its error at the Python line that issued it (also
``TPU_LAUNCH_BLOCKING=1``); "fused" is strict, except that runs of elementwise ops over tensors
of one size wait in the stream's chain and execute as one command, tile by tile, when anything
observes the stream (a synchronize, ``.cpu()``/``.item()``/print, a non-elementwise op, a mode
switch): results are bit-identical to strict mode's (also ``TORCH_TPU_DEFER_AND_FUSE=1``;
``TPU_LAUNCH_BLOCKING=1`` wins). Switching modes synchronizes the current device first."""
import contextlib

from . import _C

_MODES = _C._eager_modes()  # the runtime's table: name -> value


def set_eager_mode(mode: str) -> None:
    if mode not in _MODES:
        raise ValueError(f"unknown tpu eager mode {mode!r}; expected one of {sorted(_MODES)}")
    _C._synchronize(_C._current_device())
    _C._set_eager_mode(_MODES[mode])


def get_eager_mode() -> str:
    code = _C._get_eager_mode()
    return next(name for name, c in _MODES.items() if c == code)


@contextlib.contextmanager
def eager_mode(mode: str):
    prev = get_eager_mode()
    set_eager_mode(mode)
    try:
        yield
    finally:
        set_eager_mode(prev)
