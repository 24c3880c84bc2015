"""Meta functions for reductions whose PyTorch meta function raises a different exception
type than CPU: amax/amin over a zero-size dim (CPU: IndexError). tpu tensors only."""
import torch
from . import register



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
