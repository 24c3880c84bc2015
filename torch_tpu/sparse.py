"""The sparse COO kernels PyTorch has only per device (`_coalesce` is `_coalesce_sparse_cpu` /
`_coalesce_sparse_cuda`; `_to_dense` adds the sparse tensor into zeros through the device's
sparse add), composed from native tpu ops and registered for the SparsePrivateUse1 key. The
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
    return torch.ops.aten._sparse_coo_tensor_with_dims_and_tensors(
        sparse_dim, self.dense_dim(), self.shape, indices.index_select(1, heads), new_values,
        dtype=self.dtype, layout=torch.sparse_coo, device=self.device, is_coalesced=True)


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


_lib.impl("_coalesce", _coalesce, "SparsePrivateUse1")
_lib.impl("_to_dense", _to_dense, "SparsePrivateUse1")
