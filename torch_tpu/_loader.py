"""TorchTPU's `torch_tpu._loader.load()`: makes the tpu device and the `tpu_dist` process-group
backend available. Ray Train calls it before `init_process_group` (its TPU device manager);
importing torch_tpu (which `import torch` does) has done it already."""


def load():
    from . import _registration

    _registration.register()
