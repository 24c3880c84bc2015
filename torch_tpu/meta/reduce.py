"""Meta functions for reductions whose PyTorch meta function differs from CPU's kernel: amax/amin
over a zero-size dim (CPU: IndexError), all/any into an out= (CPU's dtype rule). tpu tensors only."""
import torch
from . import register, resize_output
from ..tpu_checks import C10_NAMES



def _no_identity(name, ref):
    def meta(self, dim=(), keepdim=False):
        dims = [dim] if isinstance(dim, int) else list(dim)
        if self.numel() == 0 and dims:
            for d in dims:
                d = d + self.dim() if d < 0 else d
                if 0 <= d < self.dim() and self.size(d) == 0:
                    raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
        return ref(self, dim, keepdim)
    return meta


register("amax", _no_identity("amax", torch._refs.amax))
register("amin", _no_identity("amin", torch._refs.amin))


def _all_any_out(name, overload):
    """all/any into an out=: CPU takes a bool or uint8 out= whatever the input (a uint8 input
    into a bool out= included, which PyTorch's reference refuses as an unsafe cast)."""
    functional = getattr(torch.ops.aten, name).__getattr__(overload)

    def meta(self, *args, out):
        if out.dtype not in (torch.bool, torch.uint8):
            raise RuntimeError(f"{name} only supports bool tensor for result, got: {C10_NAMES[out.dtype]}")
        return resize_output(out, functional(self, *args).shape)
    return meta


for _name in ("all", "any"):
    for _out, _functional in (("out", "dim"), ("dims_out", "dims"), ("all_out", "default")):
        register(f"{_name}.{_out}", _all_any_out(_name, _functional))
