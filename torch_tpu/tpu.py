"""The ``torch.tpu`` device module: devices, streams, events, RNG, memory, precision,
eager modes and metrics of the emulated TPU."""
import contextlib
import threading
import warnings
from collections import namedtuple
from typing import Any, Optional, Union

import torch

from . import _C
from . import amp, distributed, metrics  # noqa: F401  (torch.tpu.amp, torch.tpu.distributed, torch.tpu.metrics)
from .modes import eager_mode, get_eager_mode, set_eager_mode  # noqa: F401
from .precision import get_matmul_precision, precision, set_matmul_precision  # noqa: F401

_Device = Union[torch.device, str, int, None]
_lock = threading.Lock()


def _index(device: _Device) -> int:
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "tpu":
        raise ValueError(f"Expected a tpu device, but got: {device}")
    return current_device() if device.index is None else device.index


# ---------------------------------------------------------------- devices
def is_available() -> bool:
    """False, with a warning that says why, when the TPU_* launch variables are invalid: as with
    CUDA, importing works and the first use of the device raises the error."""
    if _C._device_count() > 0:
        return True
    try:
        _C._init()
    except ValueError as e:
        warnings.warn(f"tpu initialization: {e}")
    return False


def is_initialized() -> bool:
    return True


def _is_in_bad_fork() -> bool:
    return False


def init() -> None:
    _C._init()


def device_count() -> int:
    return _C._device_count()


def current_device() -> int:
    return _C._current_device()


def set_device(device: _Device) -> None:
    """Makes `device` current. Under a launcher (torchrun: LOCAL_RANK, LOCAL_WORLD_SIZE) a process
    sees its own chip as tpu:0 (TorchTPU), so the index LOCAL_RANK, which scripts and DeviceMesh
    pass, selects tpu:0 when this process has no device of that index."""
    idx = _index(device)
    if idx >= device_count() and idx == _launcher_local_rank():
        idx = 0
    if idx >= 0:
        _C._set_device(idx)


def _launcher_local_rank() -> Optional[int]:
    env = {name: value for name, _, value in _C._environment() if name in ("LOCAL_RANK", "LOCAL_WORLD_SIZE")}
    rank = env["LOCAL_RANK"]
    return int(rank) if env["LOCAL_WORLD_SIZE"] is not None and rank is not None and rank.isdigit() else None


class device:
    """Context manager that changes the current tpu device."""

    def __init__(self, device: _Device):
        self.idx = -1 if device is None else _index(device)
        self.prev = -1

    def __enter__(self):
        self.prev = current_device()
        if self.idx >= 0 and self.idx != self.prev:
            set_device(self.idx)

    def __exit__(self, *exc):
        if self.idx >= 0 and self.idx != self.prev:
            set_device(self.prev)
        return False


class device_of(device):
    """Context manager that makes a tensor's tpu device current."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.device.type == "tpu" else -1)


def synchronize(device: _Device = None) -> None:
    _C._synchronize(_index(device))


_DeviceProperties = namedtuple(
    "_DeviceProperties",
    "name generation accelerator_type topology total_memory bf16_tflops hbm_GBps ici_GBps_bidir "
    "mxu_dim mxu_count tensorcores usd_per_chip_hour global_index multi_processor_count",
)


def get_device_properties(device: _Device = None):
    i = _C._chip_info(_index(device))
    return _DeviceProperties(
        name=f"TPU {i['generation']} (emulated)", generation=i["generation"],
        accelerator_type=i["accelerator_type"], topology=i["topology"], total_memory=i["hbm_bytes"],
        bf16_tflops=i["bf16_tflops"], hbm_GBps=i["hbm_GBps"], ici_GBps_bidir=i["ici_GBps_bidir"],
        mxu_dim=i["mxu_dim"], mxu_count=i["mxu_count"], tensorcores=i["tensorcores"],
        usd_per_chip_hour=i["usd_per_chip_hour"] if i["usd_per_chip_hour"] >= 0 else None,
        global_index=i["global_index"],
        # torch.compile's generated loops run on the host: Inductor sizes its reduction splits
        # by the threads they parallelise over (the name is Inductor's, from CUDA)
        multi_processor_count=torch.get_num_threads())


def get_device_name(device: _Device = None) -> str:
    return get_device_properties(device).name


def get_amp_supported_dtype():
    return [torch.bfloat16, torch.float16, torch.float32]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


# ---------------------------------------------------------------- streams and events
class Stream(torch.Stream):
    """A tpu stream: ops issued while it is current run in order on its worker."""

    def __new__(cls, device: _Device = None, priority: int = 0, **kwargs):
        if "stream_id" in kwargs:
            return super().__new__(cls, **kwargs)
        return super().__new__(cls, device=torch.device("tpu", _index(device)), priority=priority)

    def __enter__(self):
        self._prev = current_stream(self.device_index)
        set_stream(self)
        return self

    def __exit__(self, *exc):
        set_stream(self._prev)
        return False


class Event(torch.Event):
    """A tpu event. Instances are plain ``torch.Event`` objects on the tpu device, because
    PyTorch's ``elapsed_time``/``wait`` accept exactly that type."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        return torch.Event(device="tpu", enable_timing=enable_timing, blocking=blocking,
                           interprocess=interprocess)


def _wrap(s: torch.Stream) -> Stream:
    return Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)


def current_stream(device: _Device = None) -> Stream:
    return _wrap(torch.accelerator.current_stream(torch.device("tpu", _index(device))))


def default_stream(device: _Device = None) -> Stream:
    s = current_stream(device)
    return Stream(stream_id=0, device_index=s.device_index, device_type=s.device_type)


def set_stream(stream: torch.Stream) -> None:
    if stream is not None:
        torch.accelerator.set_stream(stream)


@contextlib.contextmanager
def stream(s: Optional[torch.Stream]):
    """Makes ``s`` the current stream of its device inside the block (None: no change)."""
    if s is None:
        yield
        return
    prev = current_stream(s.device_index)
    set_stream(s)
    try:
        yield
    finally:
        set_stream(prev)


# ---------------------------------------------------------------- RNG
def default_generator(device: _Device = None) -> torch.Generator:
    return _C._default_generator(_index(device))


def manual_seed(seed: int) -> None:
    default_generator().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for i in range(device_count()):
        default_generator(i).manual_seed(int(seed))


def seed() -> None:
    default_generator().seed()


def seed_all() -> None:
    s = default_generator(0).seed()
    for i in range(1, device_count()):
        default_generator(i).manual_seed(s)


def initial_seed() -> int:
    return default_generator().initial_seed()


def get_rng_state(device: _Device = "tpu") -> torch.Tensor:
    return default_generator(device).get_state()


def get_rng_state_all():
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state(new_state: torch.Tensor, device: _Device = "tpu") -> None:
    default_generator(device).set_state(new_state.clone())


def set_rng_state_all(new_states) -> None:
    for i, s in enumerate(new_states):
        set_rng_state(s, i)


# ---------------------------------------------------------------- memory
def memory_stats(device: _Device = None) -> dict:
    return dict(sorted(_C._memory_stats(_index(device)).items()))


def memory_allocated(device: _Device = None) -> int:
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device: _Device = None) -> int:
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device: _Device = None) -> int:
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device: _Device = None) -> int:
    return memory_stats(device)["reserved_bytes.all.peak"]


def mem_get_info(device: _Device = None):
    """(free, total) bytes of the chip's emulated HBM."""
    s = memory_stats(device)
    return s["capacity_bytes"] - s["reserved_bytes.all.current"], s["capacity_bytes"]


def empty_cache() -> None:
    _C._empty_cache()


def reset_peak_memory_stats(device: _Device = None) -> None:
    _C._reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device: _Device = None) -> None:
    _C._reset_accumulated_memory_stats(_index(device))


def memory_summary(device: _Device = None) -> str:
    s = memory_stats(device)
    mib = 1 << 20
    return (f"tpu:{_index(device)} HBM {s['capacity_bytes'] / mib:,.0f} MiB | allocated "
            f"{s['allocated_bytes.all.current'] / mib:,.1f} MiB (peak {s['allocated_bytes.all.peak'] / mib:,.1f}) | "
            f"reserved {s['reserved_bytes.all.current'] / mib:,.1f} MiB (peak {s['reserved_bytes.all.peak'] / mib:,.1f}) | "
            f"OOMs {s['num_ooms']}")
