"""Samples for the core kernels: fill, add."""
import torch

from samples import ALL, NUMERIC, make, register

register("fill_.Scalar", lambda x: x.fill_(2), [(3, 4)], dtypes=ALL, grad=False)
register("fill_.Tensor", lambda x: x.fill_(torch.tensor(1.5)), [(3, 4)], dtypes=ALL, grad=False)
register("zero_", lambda x: x.zero_(), [(5, 3)], dtypes=ALL, grad=False)
register("add.Tensor", lambda a, b: a + b, [(4, 5), (5,)], dtypes=NUMERIC)
register("add.Tensor", lambda a, b: torch.add(a, b, alpha=2), [(2, 3, 4), (3, 1)], dtypes=NUMERIC, name="add alpha")
register("add.Tensor", lambda a: a + 1.5, [(4, 6)], dtypes=NUMERIC, name="add python scalar")
register("add_.Tensor", lambda a, b: a.add_(b), [(4, 5), (4, 5)], dtypes=NUMERIC, grad=False)
register("add.out", lambda a, b: torch.add(a, b, out=torch.empty(0, dtype=a.dtype, device=a.device)),
         [(3, 4), (3, 4)], dtypes=NUMERIC, grad=False)
register("add.Scalar", lambda a: torch.ops.aten.add.Scalar(a, 3), [(7,)], dtypes=NUMERIC)
register("add_.Scalar", lambda a: torch.ops.aten.add_.Scalar(a, 3), [(7,)], dtypes=NUMERIC, grad=False)
