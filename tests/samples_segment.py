"""Samples for segment_reduce and its backward: every reduction, lengths and offsets, an
inner axis, empty segments, `initial`, and ties / NaNs for max's shared gradient."""
import torch

from samples import FLOATS, make, register

F64 = FLOATS + (torch.float64,)
LENGTHS = torch.tensor([2, 0, 3, 1])
OFFSETS = torch.tensor([[0, 1, 1, 4], [0, 0, 2, 4], [0, 4, 4, 4]], dtype=torch.int32)

for red in ("sum", "mean", "max", "min", "prod"):
    register("segment_reduce _segment_reduce_backward",
             lambda x, r=red: torch.segment_reduce(x, r, lengths=LENGTHS.to(x.device)),
             lambda dt: [make((6, 3), dt, low=0.5, high=2)], dtypes=F64, name=f"segment_reduce {red} lengths")
    register("segment_reduce _segment_reduce_backward",
             lambda x, r=red: torch.segment_reduce(x, r, offsets=OFFSETS.to(x.device), axis=1, initial=1.5),
             lambda dt: [make((3, 4, 2), dt)], dtypes=FLOATS, name=f"segment_reduce {red} offsets axis 1 initial")


def ties(dt):
    return [torch.tensor([[1.0, 3.0, 3.0, 2.0, float("nan"), 0.0]], dtype=dt).t().contiguous()]


register("segment_reduce _segment_reduce_backward",
         lambda x: torch.segment_reduce(x, "max", lengths=torch.tensor([4, 2], device=x.device)),
         ties, dtypes=FLOATS, name="segment_reduce max ties and nan")
register("segment_reduce _segment_reduce_backward",
         lambda x: torch.segment_reduce(x, "prod", lengths=torch.tensor([3, 3], device=x.device), unsafe=True),
         ties, dtypes=FLOATS, name="segment_reduce prod with zero and nan")
register("_segment_reduce_backward.out",
         lambda g, y, x: torch.ops.aten._segment_reduce_backward.out(
             g, y, x, "mean", lengths=torch.tensor([1, 2], device=x.device), out=torch.empty(0, device=x.device,
                                                                                           dtype=x.dtype)),
         [(2, 2), (2, 2), (3, 2)], dtypes=FLOATS, grad=False, name="segment_reduce_backward out")
