"""torch_tpu's Dynamo DeviceInterface (replaces PyTorch's stub for the name "tpu")."""
import torch
from torch._dynamo.device_interface import DeviceInterface

from . import _C


class TpuInterface(DeviceInterface):
    device = torch.tpu.device
    Event = torch.tpu.Event
    Stream = torch.tpu.Stream

    class Worker:
        @staticmethod
        def set_device(device: int):
            torch.tpu.set_device(device)

        @staticmethod
        def current_device() -> int:
            return torch.tpu.current_device()

        @staticmethod
        def get_device_properties(device=None):
            return torch.tpu.get_device_properties(device)

    current_device = staticmethod(torch.tpu.current_device)
    set_device = staticmethod(torch.tpu.set_device)
    device_count = staticmethod(torch.tpu.device_count)
    is_available = staticmethod(torch.tpu.is_available)
    synchronize = staticmethod(torch.tpu.synchronize)
    current_stream = staticmethod(torch.tpu.current_stream)
    set_stream = staticmethod(torch.tpu.set_stream)
    stream = staticmethod(torch.tpu.stream)

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        torch.tpu.set_stream(torch.tpu.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type))

    @staticmethod
    def exchange_device(device: int) -> int:
        """Makes `device` current, returning the previous one (Dynamo's device guard)."""
        prev = torch.tpu.current_device()
        if device >= 0 and device != prev:
            torch.tpu.set_device(device)
        return prev

    maybe_exchange_device = exchange_device
    get_raw_stream = staticmethod(lambda device_index: torch.tpu.current_stream(device_index).stream_id)
    get_device_properties = staticmethod(torch.tpu.get_device_properties)
    memory_allocated = staticmethod(torch.tpu.memory_allocated)

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return True

    @staticmethod
    def get_compute_capability(device=None):
        return torch.tpu.get_device_properties(device).generation

    @classmethod
    def is_dtype_supported(cls, dtype, including_emulation: bool = False) -> bool:
        """Native: the runtime's kernels compute in it. With emulation: any dtype a dense tpu
        tensor can hold (its ops run on the counted CPU fallback); quantized ones are not
        (quantized tpu tensors are an eager-only tensor type)."""
        if str(dtype).removeprefix("torch.") in _C._native_dtypes():
            return True
        return including_emulation and _C._can_hold_dtype(dtype)

    @staticmethod
    def raise_if_triton_unavailable(device=None):
        raise RuntimeError("tpu graphs are compiled by torch_tpu's compiler, not Triton")

    @staticmethod
    def is_triton_capable(device=None) -> bool:
        return False
