"""Meta functions for histc, histogram and histogramdd's parts (PyTorch ships none for the
latter; its histc meta treats any device but CPU as CUDA: it raises CUDA's determinism alert
under torch.use_deterministic_algorithms and skips CPU's out= dtype check):
output shapes follow from the bin counts or bin tensors, and the argument checks raise
what CPU's Histogram.cpp raises (RuntimeError, same wording). The data-dependent check
(a non-finite range) is the kernel's."""
import torch
from . import register, resize_output
from ..tpu_checks import _CPP_NAMES



def _check_inputs(self, bins, weight, flat):
    """histogramdd_check_inputs; bins is a list of bin-edge tensors or of ints."""
    if not flat:
        torch._check(self.dim() >= 2, lambda: "torch.histogramdd: input tensor should have at least 2 dimensions")
    n = 1 if flat else self.shape[-1]
    torch._check(len(bins) == n,
                 lambda: "histogramdd: The size of bins must be equal to the innermost dimension of the input.")
    for d, b in enumerate(bins):
        if isinstance(b, torch.Tensor):
            torch._check(b.dtype == self.dtype, lambda: "torch.histogramdd: input tensor and bins tensors should have the "
                         f"same dtype, but got input with dtype {self.dtype} and bins for dimension {d} with dtype {b.dtype}")
            torch._check(b.dim() == 1, lambda: "torch.histogramdd: bins tensor should have one dimension, but got "
                         f"{b.dim()} dimensions in the bins tensor for dimension {d}")
            torch._check(b.numel() > 0, lambda: "torch.histogramdd: bins tensor should have at least 1 element, but got "
                         f"{b.numel()} elements in the bins tensor for dimension {d}")
        else:
            torch._check(b > 0, lambda: f"torch.histogram(): bins must be > 0, but got {b} for dimension {d}")
    if weight is not None:
        torch._check(weight.dtype == self.dtype, lambda: "torch.histogramdd: if weight tensor is provided, input tensor "
                     f"and weight tensor should have the same dtype, but got input({self.dtype}), and weight({weight.dtype})")
        want = [self.numel()] if flat else list(self.shape[:-1])
        got = [weight.numel()] if flat else (list(weight.shape) or [1])
        torch._check(want == got, lambda: "torch.histogramdd: if weight tensor is provided it should have the same "
                     "shape as the input tensor excluding its innermost dimension, but got input with shape "
                     f"{list(self.shape)} and weight with shape {list(weight.shape)}")


def _check_range(rng, n):
    if rng is not None:
        torch._check(len(rng) == 2 * n, lambda: f"torch.histogramdd: for a {n}-dimensional histogram range should "
                     f"have {2 * n} elements, but got {len(rng)}")


def histogram_bin_ct(self, bins=100, *, range=None, weight=None, density=False):
    _check_inputs(self, [bins], weight, True)
    _check_range(range, 1)
    return self.new_empty(bins), self.new_empty(bins + 1)


def histogram_bins_tensor(self, bins, *, weight=None, density=False):
    _check_inputs(self, [bins], weight, True)
    return self.new_empty(bins.numel() - 1), self.new_empty(bins.numel())


def histogramdd_bin_edges(self, bins, *, range=None, weight=None, density=False):
    _check_inputs(self, bins, weight, False)
    _check_range(range, len(bins))
    return [self.new_empty(b + 1) for b in bins]


def histogramdd_from_bin_cts(self, bins, *, range=None, weight=None, density=False):
    _check_inputs(self, bins, weight, False)
    _check_range(range, len(bins))
    return self.new_empty(bins)


def histogramdd_from_bin_tensors(self, bins, *, weight=None, density=False):
    _check_inputs(self, bins, weight, False)
    return self.new_empty([b.numel() - 1 for b in bins])


def histc(self, bins=100, min=0, max=0, *, out=None):
    """CPU's histogram_histc_out checks: hist's dtype, the bin count, the range. Integer inputs
    count on tpu as on CUDA (MoE routing counts expert ids: tests/test_moe_routing.py), where
    CPU's kernel is float-only."""
    hist = out if out is not None else self
    torch._check(hist.dtype == self.dtype, lambda: "torch.histogram: input tensor and hist tensor should have the same "
                 f"dtype, but got input {_CPP_NAMES.get(self.dtype, self.dtype)} and hist "
                 f"{_CPP_NAMES.get(hist.dtype, hist.dtype)}")
    torch._check(bins > 0, lambda: f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    torch._check(not min > max, lambda: "torch.histc: max must be larger than min")
    if out is not None:
        resize_output(out, (bins,))
        return out
    return self.new_empty((bins,))


register("histc", histc)
register("histc.out", histc)


def _out(fn, n):
    """An out= overload: the functional meta function, outputs resized into the given tensors."""
    def impl(*args, **kwargs):
        outs = [kwargs.pop(k) for k in list(kwargs)[-n:]]
        res = fn(*args, **kwargs)
        res = res if isinstance(res, tuple) else (res,)
        for o, r in zip(outs, res):
            resize_output(o, r.shape)
        return tuple(outs) if n > 1 else outs[0]
    return impl


for _name, _fn, _nout in (("histogram.bin_ct", histogram_bin_ct, 2), ("histogram.bins_tensor", histogram_bins_tensor, 2),
                          ("_histogramdd_bin_edges", histogramdd_bin_edges, 0),
                          ("_histogramdd_from_bin_cts", histogramdd_from_bin_cts, 1),
                          ("_histogramdd_from_bin_tensors", histogramdd_from_bin_tensors, 1)):
    register(_name, _fn)
    if _nout:
        register(_name.split(".")[0] + (f".{_name.split('.')[1]}_out" if "." in _name else ".out"), _out(_fn, _nout))
