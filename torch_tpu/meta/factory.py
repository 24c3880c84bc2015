"""Shape functions of the range factories into an out= (arange, linspace, logspace). CPU
resizes such an out= only when its element count differs from the result's, and then without
the out= deprecation warning (arange warns in its own words); an out= of the right count keeps
its shape and strides and takes the values in its logical order. PyTorch's reference resized
every out= of another shape to a contiguous vector at the same offset: a strided view then got
its values written over memory outside it."""
import math
import warnings

import torch

from . import register


def _into(out, count, warn_arange=False):
    if out.numel() != count:
        if warn_arange and out.numel() > 0:
            warnings.warn(f"The number of elements in the out tensor of shape {list(out.shape)} is {out.numel()} which "
                          f"does not match the computed number of elements {count}. Note that this may occur as a "
                          f"result of rounding error. The out tensor will be resized to a tensor of shape ({count},).")
        out.resize_([count])
    return out


def arange_out(start, end, step=1, *, out):
    for bound in (start, end):  # CPU's first check, before the step's sign
        if isinstance(bound, float) and not math.isfinite(bound):
            raise RuntimeError(f"unsupported range: {start:g} -> {end:g}")
    if step and (end - start) / step > 2 ** 63 - 1:  # before PyTorch's reference passes it to prims.iota
        raise RuntimeError("invalid size, possible overflow?")
    count = torch.ops.aten.arange.start_step(start, end, step, dtype=out.dtype, device="meta").numel()
    return _into(out, count, warn_arange=True)


def linspace_out(start, end, steps, *, out):
    torch.ops.aten.linspace.default(start, end, steps, dtype=out.dtype, device="meta")  # its checks
    return _into(out, steps)


def logspace_out(start, end, steps, base=10.0, *, out):
    torch.ops.aten.logspace.default(start, end, steps, base, dtype=out.dtype, device="meta")
    return _into(out, steps)


register("arange.start_out", arange_out)
register("linspace.out", linspace_out)
register("logspace.out", logspace_out)
