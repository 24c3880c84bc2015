"""Glue for Hugging Face accelerate, which picks its device from a fixed list of backends
(cuda, xpu, npu, mps, ...) and otherwise settles on the CPU. With this, ``PartialState`` (and
so ``Accelerator`` and transformers' ``Trainer``) defaults to the tpu; ``cpu=True``
(``TrainingArguments(use_cpu=True)``) and ``ACCELERATE_TORCH_DEVICE`` still win."""
import torch


def install(state_module):
    cls = state_module.PartialState
    listed = cls.default_device

    def default_device(self) -> torch.device:
        device = listed.fget(self)
        if device.type == "cpu" and torch.tpu.is_available():
            return torch.device("tpu")
        return device

    cls.default_device = property(default_device, doc=listed.__doc__)
