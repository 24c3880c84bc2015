"""The sparse COO kernels PyTorch has only per device (`_coalesce` is `_coalesce_sparse_cpu` /
`_coalesce_sparse_cuda`; `_to_dense` adds the sparse tensor into zeros through the device's
sparse add; `add.out`, `mul.out` and `sparse_mask`, which sparse gradients accumulate and optimizers (SGD with
momentum, Adagrad, SparseAdam) step through), composed from native tpu ops and registered for the SparsePrivateUse1 key. The
device-generic ones (construction, indices/values, clone, copies, dense -> COO) are registered
in csrc/Sparse.cpp. Both follow CPU's kernels step by step. `_to_dense` is CPU's exactly
(duplicates summed in their original order). `_coalesce` gives CPU's indices exactly, and its
values too for integral and bool dtypes and wherever a position has at most two entries; a
float position with three or more may differ in the last bits: CPU sums each run in the order
of its unstable std::sort (which scrambles ties past 16 elements), this sums in original order."""

import math

import torch

_lib = torch.library.Library("aten", "IMPL")


def _flat_index(indices, sizes):
    """Each entry's row-major position within the sparse dims (ATen's flatten_indices):
    indices [sparse_dim, nnz] -> [nnz]; all zeros when there are no sparse dims."""
    strides = [math.prod(sizes[d + 1:]) for d in range(len(sizes))]
    weights = torch.tensor(strides, dtype=torch.int64, device=indices.device)
    return (indices * weights.unsqueeze(1)).sum(0)


def _sparse_like(template, indices, values, is_coalesced):
    """A COO tensor of template's shape and dims from these indices and values."""
    return torch.ops.aten._sparse_coo_tensor_with_dims_and_tensors(
        template.sparse_dim(), template.dense_dim(), template.shape, indices, values, dtype=values.dtype,
        layout=torch.sparse_coo, device=template.device, is_coalesced=is_coalesced)


def _coalesce(self):
    if self._nnz() < 2:  # CPU's fast path: a copy marked coalesced
        return self.clone()._coalesced_(True)
    sparse_dim = self.sparse_dim()
    indices, values = self._indices(), self._values()
    # Runs of equal positions summed one after another from their first entry, as CPU does (so
    # a lone -0.0 stays); the stable sort makes that order the original one, deterministically.
    flat, perm = _flat_index(indices, self.shape[:sparse_dim]).sort(stable=True)
    first = torch.ones_like(flat, dtype=torch.bool)
    first[1:] = flat[1:] != flat[:-1]
    group = first.cumsum(0) - 1
    heads = perm[first]
    new_values = values.index_select(0, heads)
    rest = ~first
    new_values.index_add_(0, group[rest], values.index_select(0, perm[rest]))
    return _sparse_like(self, indices.index_select(1, heads), new_values, True)


def _to_dense(self, dtype=None, masked_grad=None):
    torch._check(dtype is None, lambda: "dtype argument is not supported by sparse_to_dense")
    sparse_dim = self.sparse_dim()
    dense = torch.zeros(self.shape, dtype=self.dtype, device=self.device)
    if self._nnz() == 0:
        return dense
    # The sparse dims flattened into one, so entries (duplicates included, summed in order as
    # CPU's dense += sparse does) land with one index_add_ whatever the number of sparse dims.
    rows = dense.view((math.prod(self.shape[:sparse_dim]),) + tuple(self.shape[sparse_dim:]))
    rows.index_add_(0, _flat_index(self._indices(), self.shape[:sparse_dim]), self._values())
    return dense


def _add_out(self, other, *, alpha=1, out):
    # CPU's add_out_sparse_cpu: dense + sparse -> dense (each entry added into its position,
    # duplicates one after another), sparse + sparse -> the two sets of entries side by side,
    # coalesced when both were. add.Tensor and add_.Tensor reach here through PyTorch's
    # device-generic add_sparse / add_sparse_ (csrc/Sparse.cpp).
    torch._check(not (self.is_sparse and not other.is_sparse),
                 lambda: "add(sparse, dense) is not supported. Use add(dense, sparse) instead.")
    if not self.is_sparse:
        torch._check(self.shape == other.shape, lambda: (
            f"add: expected 'self' and 'other' to have same size, but self has size {list(self.shape)} while other "
            f"has size {list(other.shape)} (FYI: dense-sparse addition does not currently support broadcasting)"))
        if out is not self:
            out.resize_(self.shape).copy_(self)
        if other._nnz():
            values = other._values().to(out.dtype)
            out.index_put_(tuple(other._indices()), values if alpha == 1 else values * alpha, accumulate=True)
        return out
    torch._check(self.shape == other.shape, lambda: (
        f"add: expected sizes of 'self' and 'other' to match, but {list(self.shape)} != {list(other.shape)}"))
    torch._check(self.sparse_dim() == other.sparse_dim(), lambda: (
        f"add: expected 'self' and 'other' to have same density, but 'self' has {self.sparse_dim()} sparse dimensions "
        f"while 'other' has {other.sparse_dim()} sparse dimensions"))
    dtype = out.dtype
    other_values = other._values().to(dtype)
    values = torch.cat([self._values().to(dtype), other_values if alpha == 1 else other_values * alpha])
    result = _sparse_like(self, torch.cat([self._indices(), other._indices()], 1), values, False)
    if self.is_coalesced() and other.is_coalesced():
        result = result.coalesce()
    return out.copy_(result)


def _mul_out(self, other, *, out):
    # CPU's mul_out_sparse_cpu: by a 0-dim dense tensor (a scalar: SGD's momentum), the values
    # scaled, the indices and coalesced flag kept; sparse x dense of the same shape, each value
    # times the dense one at its place; sparse x sparse below. mul.Tensor and mul_.Tensor reach
    # here through PyTorch's mul_sparse / mul_sparse_.
    dtype = out.dtype
    # a wrapped Python number (x * 0.9) arrives as the number itself
    self, other = (torch.scalar_tensor(t, dtype=dtype) if not isinstance(t, torch.Tensor) else t for t in (self, other))
    if not self.is_sparse:
        self, other = other, self
    if other.is_sparse:
        torch._check(self.shape == other.shape, lambda: (
            f"mul: expected 'self' and 'other' to have same sizes, but {list(self.shape)} != {list(other.shape)}"))
        # CPU's: both coalesced give the coalesced intersection; otherwise every entry of the
        # uncoalesced one (self first), times the other's value at its place or 0, uncoalesced
        if self._nnz() == 0 or other._nnz() == 0:
            empty = self if self._nnz() == 0 else other
            return out.copy_(_sparse_like(self, empty._indices()[:, :0], empty._values()[:0].to(dtype), True))
        a, b = (self, other) if not self.is_coalesced() or other.is_coalesced() else (other, self)
        b = b.coalesce()
        fa, fb = _flat_index(a._indices(), a.shape[:a.sparse_dim()]), _flat_index(b._indices(), b.shape[:b.sparse_dim()])
        at = torch.searchsorted(fb, fa).clamp_(max=fb.numel() - 1)
        keep = fb.index_select(0, at) == fa
        if a.is_coalesced():
            values = a._values()[keep].to(dtype) * b._values().index_select(0, at[keep]).to(dtype)
            return out.copy_(_sparse_like(a, a._indices()[:, keep], values, True))
        other_values = b._values().index_select(0, at).to(dtype)
        keep = keep.view((-1,) + (1,) * (other_values.dim() - 1))
        values = a._values().to(dtype) * torch.where(keep, other_values, torch.zeros((), dtype=dtype, device=a.device))
        return out.copy_(_sparse_like(a, a._indices(), values, False))
    if other.dim() == 0:
        values = self._values().to(dtype) * other.to(dtype)
    else:
        torch._check(self.shape == other.shape, lambda: (
            f"mul(sparse, dense): expected the dense tensor's shape {list(other.shape)} to be the sparse one's "
            f"{list(self.shape)}"))
        values = self._values().to(dtype) * other[tuple(self._indices())].to(dtype)
    # (CPU marks an in-place product uncoalesced)
    return out.copy_(_sparse_like(self, self._indices(), values, self.is_coalesced() and out is not self))


def _sparse_mask(self, mask):
    # self's values at mask's entries (duplicates and their order kept), coalesced as mask is
    torch._check(mask.is_sparse, lambda: f"sparse_mask expects mask to be a sparse COO tensor, got {mask.layout}")
    torch._check(self.shape == mask.shape, lambda: (
        "sparse_mask(): operands have incompatible sizes; self has size "
        f"{list(self.shape)} but mask has size {list(mask.shape)}"))
    dense = self.to_dense() if self.is_sparse else self
    return _sparse_like(mask, mask._indices().clone(), dense[tuple(mask._indices())], mask.is_coalesced())


_lib.impl("add.out", _add_out, "SparsePrivateUse1")
_lib.impl("mul.out", _mul_out, "SparsePrivateUse1")
_lib.impl("sparse_mask", _sparse_mask, "SparsePrivateUse1")
_lib.impl("_coalesce", _coalesce, "SparsePrivateUse1")
_lib.impl("_to_dense", _to_dense, "SparsePrivateUse1")
