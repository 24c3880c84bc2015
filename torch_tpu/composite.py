"""ATen ops whose result depends on tensor data beyond its shape, which the generic C++ path
(output shapes from meta functions) cannot size: a Python value (equal) or outputs whose size
is data (unique). Composed from native tpu kernels, registered for the tpu device; the one
device->host read is the result itself (equal) or the number of unique values."""
import math

import torch

_lib = torch.library.Library("aten", "IMPL")


def equal(self, other):
    # CPU's cpu_equal: same device required, different sizes are simply unequal, values
    # compare after type promotion and NaN equals nothing (not even itself)
    torch._check(self.device == other.device,
                 lambda: f"Cannot compare two tensors on different devices. Got: {self.device} and {other.device}")
    if self.shape != other.shape:
        return False
    return bool(torch.eq(self, other).all().item())


def _unique_rows(rows, n, inverse_shape, return_inverse, return_counts):
    """Unique runs of the already sorted `rows` (n of them, 1-D values or 2-D rows): the
    first element of each run, its length, and each sorted position's run index."""
    dev = rows.device
    new = torch.ones(n, dtype=torch.bool, device=dev)
    if n > 1:
        diff = torch.ne(rows[1:], rows[:-1])
        new[1:] = diff if diff.dim() == 1 else diff.any(1)
    run = torch.cumsum(new, 0) - 1
    k = int(run[-1].item()) + 1 if n else 0
    ids = torch.arange(k, device=dev)
    first = torch.searchsorted(run, ids)
    counts = (torch.searchsorted(run, ids, right=True) - first) if return_counts else None
    return rows.index_select(0, first), run, counts, k


def _unique_finish(values, run, counts, perm, n, inverse_shape, return_inverse, return_counts):
    dev = values.device
    empty = torch.empty(0, dtype=torch.long, device=dev)
    inverse = empty
    if return_inverse:
        inverse = torch.empty(n, dtype=torch.long, device=dev).scatter_(0, perm, run).reshape(inverse_shape)
    return values, inverse, counts if return_counts else empty


def _unique2(self, sorted=True, return_inverse=False, return_counts=False):
    # CPU sorts whatever `sorted` says; -0.0 and 0.0 are one value, every NaN its own
    flat = self.reshape(-1)
    n = flat.numel()
    s, perm = torch.sort(flat, stable=True)
    values, run, counts, _ = _unique_rows(s, n, self.shape, return_inverse, return_counts)
    return _unique_finish(values, run, counts, perm, n, self.shape, return_inverse, return_counts)


def unique_dim(self, dim, sorted=True, return_inverse=False, return_counts=False):
    # the slices along dim, compared as rows and ordered lexicographically
    dim = dim + self.dim() if dim < 0 else dim
    torch._check(0 <= dim < max(self.dim(), 1), lambda: f"Dimension out of range (got {dim})")
    n = self.shape[dim] if self.dim() else 1
    torch._check(self.numel() > 0 or n == 0,
                 lambda: "There are 0 sized dimensions, and they aren't selected, so unique cannot be applied")
    moved = self.movedim(dim, 0)
    rest = moved.shape[1:]
    rows = moved.reshape(n, math.prod(rest))
    perm = torch.arange(n, device=self.device)
    for c in reversed(range(rows.shape[1])):  # stable sorts from the last key to the first
        _, order = torch.sort(rows[:, c].index_select(0, perm), stable=True)
        perm = perm.index_select(0, order)
    values, run, counts, k = _unique_rows(rows.index_select(0, perm), n, (n,), return_inverse, return_counts)
    values = values.reshape(k, *rest).movedim(0, dim)
    return _unique_finish(values, run, counts, perm, n, (n,), return_inverse, return_counts)


def unique_consecutive(self, return_inverse=False, return_counts=False, dim=None):
    # runs of equal neighbours, no sorting
    if dim is None:
        flat = self.reshape(-1)
        n = flat.numel()
        values, run, counts, _ = _unique_rows(flat, n, self.shape, return_inverse, return_counts)
        perm = torch.arange(n, device=self.device)
        return _unique_finish(values, run, counts, perm, n, self.shape, return_inverse, return_counts)
    dim = dim + self.dim() if dim < 0 else dim
    n = self.shape[dim]
    moved = self.movedim(dim, 0)
    rest = moved.shape[1:]
    values, run, counts, k = _unique_rows(moved.reshape(n, math.prod(rest)), n, (n,), return_inverse, return_counts)
    values = values.reshape(k, *rest).movedim(0, dim)
    perm = torch.arange(n, device=self.device)
    return _unique_finish(values, run, counts, perm, n, (n,), return_inverse, return_counts)


_lib.impl("equal", equal, "PrivateUse1")
_lib.impl("_unique2", _unique2, "PrivateUse1")
_lib.impl("unique_dim", unique_dim, "PrivateUse1")
_lib.impl("unique_consecutive", unique_consecutive, "PrivateUse1")
