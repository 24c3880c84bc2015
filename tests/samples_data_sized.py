"""Samples for the kernels that size their outputs from the data (nonzero, masked_select,
x[mask], bincount, repeat_interleave, unique): zeros, all-false masks and empty inputs
included, as the sizes are what these kernels get wrong."""
import torch

from samples import ALL, FLOATS, make, register

ALL64 = ALL + (torch.float64,)


def sparse(shape, dt, seed=0):
    """About half the elements zero."""
    x = make(shape, dt, seed=seed)
    return x * make(shape, torch.bool, seed=seed + 1).to(dt) if dt != torch.bool else x


register("nonzero", lambda x: torch.nonzero(x), lambda dt: [sparse((4, 3, 2), dt)], dtypes=ALL64, grad=False)
register("nonzero", lambda x: torch.nonzero(x), lambda dt: [torch.zeros(3, 2, dtype=dt)], dtypes=ALL, grad=False,
         name="nonzero none")
register("nonzero", lambda x: torch.nonzero(x), lambda dt: [make((), dt)], dtypes=ALL, grad=False,
         noncontig=False, name="nonzero 0-dim")
register("nonzero", lambda x: torch.argwhere(x), lambda dt: [sparse((5,), dt)], dtypes=ALL, grad=False,
         name="argwhere")

ms_in = lambda dt: [make((3, 4), dt), make((4,), torch.bool, seed=2)]  # noqa: E731
register("nonzero_static", lambda x: torch.nonzero_static(x, size=30), lambda dt: [sparse((4, 3, 2), dt)],
         dtypes=ALL64, grad=False, name="nonzero_static padded")
register("nonzero_static", lambda x: torch.nonzero_static(x, size=3, fill_value=7), lambda dt: [sparse((4, 3), dt)],
         dtypes=ALL, grad=False, name="nonzero_static truncated")
register("nonzero_static", lambda x: torch.nonzero_static(x, size=2), lambda dt: [make((), dt)], dtypes=FLOATS,
         grad=False, noncontig=False, name="nonzero_static 0-dim")

register("nonzero_static.out",
         lambda x: torch.nonzero_static(x, size=5, out=torch.empty(0, dtype=torch.int64, device=x.device)),
         lambda dt: [sparse((3, 2), dt)], dtypes=FLOATS, grad=False, name="nonzero_static out")

register("masked_select", lambda x, m: torch.masked_select(x, m), ms_in, dtypes=ALL64)
register("masked_select", lambda x, m: torch.masked_select(x, m),
         lambda dt: [make((2, 1, 3), dt), make((4, 1), torch.bool, seed=3)], dtypes=FLOATS, name="masked_select bcast")
register("masked_select", lambda x, m: torch.masked_select(x, m),
         lambda dt: [make((3,), dt), torch.zeros(3, dtype=torch.bool)], dtypes=FLOATS, name="masked_select none")
register("masked_select", lambda x: str(x), lambda dt: [make((3, 2), dt)], dtypes=FLOATS, grad=False,
         name="print")

register("index.Tensor", lambda x, m: x[m], lambda dt: [make((3, 4, 2), dt), make((3, 4), torch.bool, seed=5)],
         dtypes=ALL64, name="index bool mask")
register("index.Tensor", lambda x, m, i: x[i, m], lambda dt: [make((3, 4), dt), make((4,), torch.bool, seed=6),
                                                             torch.tensor([[0], [2]])],
         dtypes=FLOATS, name="index mask and int")

bc_in = lambda dt: [torch.tensor([1, 3, 3, 0, 7, 1], dtype=dt)]  # noqa: E731
register("bincount", lambda x: torch.bincount(x), bc_in, dtypes=(torch.int64, torch.int32, torch.uint8))
register("bincount", lambda x, w: torch.bincount(x, w, minlength=10),
         lambda dt: [torch.tensor([1, 3, 3, 0, 7, 1]), make((6,), dt)], dtypes=FLOATS + (torch.float64,),
         grad=False, name="bincount weights")
register("bincount", lambda x: torch.bincount(x, minlength=4), lambda dt: [torch.zeros(0, dtype=dt)],
         dtypes=(torch.int64,), noncontig=False, name="bincount empty")

register("repeat_interleave.Tensor", lambda r: torch.repeat_interleave(r),
         lambda dt: [torch.tensor([2, 0, 3, 1], dtype=dt)], dtypes=(torch.int64, torch.int32))
register("repeat_interleave.Tensor index_select", lambda x, r: torch.repeat_interleave(x, r, dim=1),
         lambda dt: [make((2, 4), dt), torch.tensor([2, 0, 3, 1])], dtypes=FLOATS, name="repeat_interleave dim")

register("_unique2", lambda x: torch.unique(x, return_inverse=True, return_counts=True),
         lambda dt: [make((4, 5), dt, low=-3, high=3)], dtypes=ALL64, grad=False)
register("_unique2", lambda x: torch.unique(x), lambda dt: [make((7,), dt, low=0, high=4)], dtypes=ALL, grad=False,
         name="unique plain")
register("_unique2", lambda x: torch.unique(x, return_counts=True), lambda dt: [torch.zeros(0, dtype=dt)],
         dtypes=FLOATS, grad=False, noncontig=False, name="unique empty")

uc_in = lambda dt: [torch.tensor([[1, 1, 0], [1, 1, 0], [2, 2, 2], [1, 1, 0]]).to(dt)]  # noqa: E731
register("unique_consecutive", lambda x: torch.unique_consecutive(x, return_inverse=True, return_counts=True),
         uc_in, dtypes=ALL64, grad=False)
register("unique_consecutive", lambda x: torch.unique_consecutive(x, return_inverse=True, return_counts=True, dim=0),
         uc_in, dtypes=ALL64, grad=False, name="unique_consecutive dim")
register("unique_consecutive", lambda x: torch.unique_consecutive(x, dim=-1), uc_in, dtypes=FLOATS, grad=False,
         name="unique_consecutive last dim")
register("_unique", lambda x: torch._unique(x, return_inverse=True), lambda dt: [make((3, 4), dt, low=-2, high=2)],
         dtypes=ALL64, grad=False, name="_unique")
register("unique_dim", lambda x: torch.unique(x, dim=0, return_inverse=True, return_counts=True), uc_in,
         dtypes=ALL64, grad=False)
register("unique_dim", lambda x: torch.unique(x, dim=1), uc_in, dtypes=FLOATS, grad=False, name="unique_dim 1")
