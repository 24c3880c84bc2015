"""Glue for safetensors, whose reader only knows a fixed list of devices (cpu, cuda, xpu, npu,
mps, ...). ``safe_open``/``load_file`` with a tpu device read the file on the CPU and copy each
tensor to the chip; every other device goes straight to safetensors."""
import torch


def _tpu(device):
    return isinstance(device, (str, torch.device)) and str(device).split(":")[0] == "tpu"


class _Slice:
    def __init__(self, cpu_slice, device):
        self._slice, self._device = cpu_slice, device

    def __getitem__(self, index):
        return self._slice[index].to(self._device)

    def __getattr__(self, name):
        return getattr(self._slice, name)


class _TpuFile:
    """A safetensors file opened on the CPU whose tensors come back on a tpu device."""

    def __init__(self, cpu_file, device):
        self._file, self._device = cpu_file, torch.device(device)

    def __enter__(self):
        self._file.__enter__()
        return self

    def __exit__(self, *exc):
        return self._file.__exit__(*exc)

    def get_tensor(self, name):
        return self._file.get_tensor(name).to(self._device)

    def get_tensors(self):
        return {name: t.to(self._device) for name, t in self._file.get_tensors().items()}

    def get_slice(self, name):
        return _Slice(self._file.get_slice(name), self._device)

    def __getattr__(self, name):  # keys, metadata, offset_keys, ...
        return getattr(self._file, name)


def _wrap(rust_safe_open):
    def safe_open(filename, framework, device="cpu", **kwargs):
        if _tpu(device):
            return _TpuFile(rust_safe_open(filename, framework, device="cpu", **kwargs), device)
        return rust_safe_open(filename, framework, device=device, **kwargs)

    safe_open.__doc__ = rust_safe_open.__doc__
    return safe_open


def install(mod):
    """Runs after ``safetensors`` or ``safetensors.torch`` is imported."""
    if getattr(mod.safe_open, "__module__", None) != __name__:
        mod.safe_open = _wrap(mod.safe_open)
