"""Meta functions for the norms whose saved statistics PyTorch's meta functions size as CUDA
does: tpu follows CPU. Saved mean / rstd keep a bf16/f16 input's dtype unless a parameter
is float32 ("mixed type"), and batch norm outside training saves empty [0] tensors. For tpu
tensors only: meta and FakeTensor runs keep PyTorch's shapes."""
import torch
from torch._C import DispatchKey
from . import register

A = torch.ops.aten
_REDUCED = (torch.bfloat16, torch.float16)


def _stats_dtype(input, *params):
    if input.dtype not in _REDUCED:
        return input.dtype
    defined = [p for p in params if p is not None]
    if not any(p.dtype == torch.float32 for p in defined):
        return input.dtype
    torch._check(all(p.dtype == torch.float32 for p in defined),
                 lambda: "mixed dtype (CPU): expect parameter to have scalar type of Float")
    return torch.float32


def _restat(op, params, training, extra=0):
    """Wrap op's own meta function: its checks and output, then CPU's saved statistics."""
    ref = op.py_kernels[DispatchKey.Meta]

    def meta(*args):
        outs = ref(*args)
        input = args[0]
        dt = _stats_dtype(input, *(args[i] for i in params))
        n = input.size(1) if training(args) else 0
        stats = tuple(input.new_empty((n,), dtype=dt) for _ in range(2))
        return (outs[0],) + stats + tuple(outs[3:3 + extra])
    return meta


def native_layer_norm(input, normalized_shape, weight, bias, eps):
    out, mean, rstd = _layer_norm_ref(input, normalized_shape, weight, bias, eps)
    dt = _stats_dtype(input, weight, bias)
    return out, mean.to(dt), rstd.to(dt)


_layer_norm_ref = A.native_layer_norm.default.py_kernels[DispatchKey.Meta]
register("native_layer_norm", native_layer_norm)
register("native_batch_norm", _restat(A.native_batch_norm.default, (1, 2, 3, 4), lambda a: a[5]))
register("_native_batch_norm_legit",
          _restat(A._native_batch_norm_legit.default, (1, 2, 3, 4), lambda a: a[5]))
register("_native_batch_norm_legit.no_stats",
          _restat(A._native_batch_norm_legit.no_stats, (1, 2), lambda a: a[3]))
register("_native_batch_norm_legit_no_training",
          _restat(A._native_batch_norm_legit_no_training.default, (1, 2, 3, 4), lambda a: False))
register("_batch_norm_with_update",
          _restat(A._batch_norm_with_update.default, (1, 2, 3, 4), lambda a: True, extra=1))
