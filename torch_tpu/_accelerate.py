"""Glue for Hugging Face accelerate (1.x), which knows its accelerators by name (cuda, xpu, npu,
mlu, musa, sdaa, hpu, neuron, mps) and settles on the CPU for any other; it does not ask
``torch.accelerator``. Installed as ``accelerate.state`` and ``accelerate.utils.modeling`` are
imported (torch_tpu/_registration.py); each change applies only where accelerate found none of
its own accelerators and the tpu is available:

- ``PartialState.default_device`` is the tpu: ``Accelerator`` and transformers' ``Trainer``
  train on it. ``cpu=True`` (``TrainingArguments(use_cpu=True)``) and ``ACCELERATE_TORCH_DEVICE``
  still win.
- under a launcher (``LOCAL_RANK`` set, as torchrun does) the job is distributed over
  ``tpu_dist`` (or the backend the caller names: ``TrainingArguments(ddp_backend=...)``), one chip
  per process, as accelerate's multi-GPU type (``DistributedType.MULTI_GPU``, whose code is
  torch.distributed on ``state.device``): DDP, and FSDP/FSDP2 through the FSDP plugin. Where
  accelerate takes the local rank for a CUDA device index (DDP's ``device_ids``, the barrier of
  ``wait_for_everyone``), the process's chip is used (tpu:0 under a launcher).
- ``device_map="auto"`` (``accelerate.utils.get_max_memory``) lists the tpu chips with their free
  HBM (``torch.tpu.mem_get_info``).

Why not ``ACCELERATE_TORCH_DEVICE=tpu``: accelerate reads it in ``PartialState.__init__`` and it
then wins over ``cpu=True`` too (``TrainingArguments(use_cpu=True)`` would put the batches on the
tpu and the model on the CPU), it would also win over CUDA on a machine that has both, and it
selects neither a distributed type nor a backend nor ``device_map="auto"``'s devices. accelerate
has no other hook for a device it does not list (``get_max_memory``, ``_prepare_backend``,
``set_device``, ``wait_for_everyone`` and ``prepare_model`` branch on its own names or on CUDA's
numbering)."""
import os

import torch

BACKEND = "tpu_dist"


def install(module):
    """``module`` (accelerate.state or accelerate.utils.modeling) has just been imported."""
    if module.__name__ == "accelerate.utils.modeling":
        _install_max_memory(module)
    else:
        _install_state(module)


def _install_state(state_module):
    cls, kinds = state_module.PartialState, state_module.DistributedType
    listed_device, listed_backend, listed_set_device = cls.default_device, cls._prepare_backend, cls.set_device
    listed_wait = cls.wait_for_everyone

    def default_device(self) -> torch.device:
        device = listed_device.fget(self)
        if device.type == "cpu" and torch.tpu.is_available():
            return torch.device("tpu")
        return device

    def _prepare_backend(self, cpu=False, sagemaker_dp=False, backend=None):
        found, kind = listed_backend(self, cpu, sagemaker_dp, backend)
        if kind == kinds.NO and not cpu and int(os.environ.get("LOCAL_RANK", -1)) != -1 and _tpu_wanted():
            self._tpu_dist = True  # the state's shared dict: PartialState._reset_state clears it
            _install_accelerator()
            return found or BACKEND, kinds.MULTI_GPU
        return found, kind

    def set_device(self):
        if self.device is None and self.__dict__.get("_tpu_dist"):
            # accelerate would take torch.cuda's count; under a launcher each process sees its chip as tpu:0
            torch.tpu.set_device(self.local_process_index % torch.tpu.device_count())
            self.device = torch.device("tpu", torch.tpu.current_device())
            return
        listed_set_device(self)

    def wait_for_everyone(self):
        if self.__dict__.get("_tpu_dist") and self.distributed_type != kinds.NO:
            torch.distributed.barrier(device_ids=[_chip(self.device)])  # accelerate's: the local rank
            return
        listed_wait(self)

    wait_for_everyone.__doc__ = listed_wait.__doc__
    cls.default_device = property(default_device, doc=listed_device.__doc__)
    cls._prepare_backend = _prepare_backend
    cls.set_device = set_device
    cls.wait_for_everyone = wait_for_everyone


def _tpu_wanted():
    env = os.environ.get("ACCELERATE_TORCH_DEVICE")
    return (env is None or torch.device(env).type == "tpu") and torch.tpu.is_available()


def _chip(device):
    return device.index if device.index is not None else torch.tpu.current_device()


def _install_accelerator():
    """DDP: accelerate passes ``device_ids=[local rank]``, a CUDA device index; the process's chip
    is ``state.device`` (tpu:0 under a launcher). Installed by the first distributed tpu state,
    when ``accelerate.accelerator`` has long finished importing."""
    import accelerate.accelerator

    cls = accelerate.accelerator.Accelerator
    if getattr(cls.prepare_model, "_torch_tpu", False):
        return
    listed = cls.prepare_model

    def prepare_model(self, model, *args, **kwargs):
        model = listed(self, model, *args, **kwargs)
        ddp = getattr(model, "_orig_mod", model)  # accelerate compiles after wrapping
        if isinstance(ddp, torch.nn.parallel.DistributedDataParallel) and self.device.type == "tpu" and ddp.device_ids:
            ddp.device_ids, ddp.output_device = [_chip(self.device)], _chip(self.device)
        return model

    prepare_model._torch_tpu = True
    prepare_model.__doc__ = listed.__doc__
    cls.prepare_model = prepare_model


def _install_max_memory(modeling):
    listed = modeling.get_max_memory

    def get_max_memory(max_memory=None):
        if not _tpu_is_the_accelerator():
            return listed(max_memory)
        # integer keys are accelerator indices (torch.device(0) is tpu:0), listed before "cpu" and "disk"
        if max_memory is None:
            chips = {i: torch.tpu.mem_get_info(i)[0] for i in range(torch.tpu.device_count())}
            return {**chips, **listed(None)}
        for k in [k for k in max_memory if isinstance(max_memory[k], str)]:
            max_memory[k] = modeling.convert_file_size_to_int(max_memory[k])  # in place, as accelerate does
        chips = dict(sorted((k, v) for k, v in max_memory.items() if isinstance(k, int)))
        for k in chips:
            if not 0 <= k < torch.tpu.device_count():
                modeling.logger.warning(f"Device {k} is not available, available devices are "
                                        f"{list(range(torch.tpu.device_count()))}")
        return {**chips, **listed({k: v for k, v in max_memory.items() if not isinstance(k, int)})}

    get_max_memory.__doc__ = listed.__doc__
    modeling.get_max_memory = get_max_memory


def _tpu_is_the_accelerator():
    """torch's one accelerator (torch.accelerator) is the tpu: accelerate's (CUDA, XPU, HPU, MPS, or
    another PrivateUse1 device such as NPU) are absent."""
    accelerator = torch.accelerator.current_accelerator(check_available=True)
    return accelerator is not None and accelerator.type == "tpu"
