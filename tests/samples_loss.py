"""Samples for kernels/loss.c: huber, smooth L1 (beta 0 included), binary cross entropy
(weights, probabilities at 0 and 1) and multi-margin loss, every reduction, forward and
backward."""
import torch
import torch.nn.functional as F

from samples import FLOATS, make, register

RED = ("none", "mean", "sum")
MM = (torch.float32, torch.float64)  # CPU's multi_margin_loss has no 16-bit kernels


def _w(n, like):
    """Class weights (constants: the losses are not differentiable in them)."""
    return torch.linspace(0.5, 2.0, n, dtype=like.dtype, device=like.device)


def _out(fn):
    return lambda *xs: fn(*xs, out=torch.empty(0, dtype=xs[0].dtype, device=xs[0].device))


for r in RED:
    register("huber_loss huber_loss_backward", lambda x, y, r=r: F.huber_loss(x, y, reduction=r, delta=0.7),
             [(4, 5), (4, 5)], dtypes=FLOATS, name=f"huber_loss {r}")
    register("smooth_l1_loss smooth_l1_loss_backward", lambda x, y, r=r: F.smooth_l1_loss(x, y, reduction=r, beta=0.6),
             [(4, 5), (4, 5)], dtypes=FLOATS, name=f"smooth_l1_loss {r}")
    register("binary_cross_entropy binary_cross_entropy_backward",
             lambda x, y, r=r: F.binary_cross_entropy(x, y, weight=_w(4, x), reduction=r),
             lambda dt: [make((3, 4), dt, low=0.05, high=0.95), make((3, 4), dt, low=0, high=1, seed=1)],
             dtypes=FLOATS, name=f"binary_cross_entropy {r}")
    register("multi_margin_loss multi_margin_loss_backward",
             lambda x, t, r=r: F.multi_margin_loss(x, t, p=2, margin=0.8, weight=_w(5, x), reduction=r),
             lambda dt: [make((4, 5), dt), torch.tensor([0, 4, 2, 2])], dtypes=MM, name=f"multi_margin_loss p=2 {r}")
register("smooth_l1_loss smooth_l1_loss_backward", lambda x, y: torch.ops.aten.smooth_l1_loss(x, y, 1, 0.0), [(6,), (6,)],
         dtypes=FLOATS, name="smooth_l1_loss beta 0")
register("binary_cross_entropy binary_cross_entropy_backward", lambda x, y: F.binary_cross_entropy(x, y),
         lambda dt: [torch.tensor([0.0, 1.0, 0.5, 1e-3], dtype=dt), torch.tensor([0.0, 1.0, 1.0, 0.0], dtype=dt)],
         dtypes=FLOATS, name="binary_cross_entropy at 0 and 1")
register("multi_margin_loss multi_margin_loss_backward", lambda x, t: F.multi_margin_loss(x, t),
         lambda dt: [make((6,), dt), torch.tensor([3])], dtypes=MM, name="multi_margin_loss 1-d p=1")
# a 0-dim target: CPU's unreduced loss is 0-dim where PyTorch's meta function gives [1]
# (found by OpInfo's reference inputs)
register("multi_margin_loss multi_margin_loss_backward", lambda x, t: F.multi_margin_loss(x, t, reduction="none"),
         lambda dt: [make((6,), dt), torch.tensor(3)], dtypes=MM, name="multi_margin_loss 1-d, 0-dim target, unreduced")
register("multi_margin_loss.out", _out(lambda x, t, out: torch.ops.aten.multi_margin_loss.out(x, t, 1, 1, None, 0, out=out)),
         lambda dt: [make((6,), dt), torch.tensor(3)], dtypes=MM, grad=False, name="multi_margin_loss.out 0-dim target")
register("huber_loss.out", _out(lambda x, y, out: torch.ops.aten.huber_loss.out(x, y, 1, 1.0, out=out)),
         [(3, 2), (3, 2)], dtypes=FLOATS, grad=False)
register("huber_loss_backward.out",
         lambda g, x, y: torch.ops.aten.huber_loss_backward.out(g, x, y, 0, 0.5, grad_input=torch.empty_like(x)),
         [(3, 2), (3, 2), (3, 2)], dtypes=FLOATS, grad=False)
register("smooth_l1_loss.out", _out(lambda x, y, out: torch.ops.aten.smooth_l1_loss.out(x, y, 2, 1.0, out=out)),
         [(3, 2), (3, 2)], dtypes=FLOATS, grad=False)
register("smooth_l1_loss_backward.grad_input",
         lambda g, x, y: torch.ops.aten.smooth_l1_loss_backward.grad_input(g, x, y, 0, 0.5,
                                                                           grad_input=torch.empty_like(x)),
         [(3, 2), (3, 2), (3, 2)], dtypes=FLOATS, grad=False)
register("binary_cross_entropy.out",
         lambda x, y: torch.ops.aten.binary_cross_entropy.out(x, y, None, 0, out=torch.empty_like(x)),
         lambda dt: [make((3,), dt, low=0.1, high=0.9), make((3,), dt, low=0, high=1, seed=4)], dtypes=FLOATS,
         grad=False)
register("binary_cross_entropy_backward.grad_input",
         lambda g, x, y: torch.ops.aten.binary_cross_entropy_backward.grad_input(g, x, y, None, 0,
                                                                                 grad_input=torch.empty_like(x)),
         lambda dt: [make((3,), dt), make((3,), dt, low=0.1, high=0.9), make((3,), dt, low=0, high=1, seed=4)],
         dtypes=FLOATS, grad=False)
register("multi_margin_loss.out",
         _out(lambda x, t, out: torch.ops.aten.multi_margin_loss.out(x, t, 1, 1, None, 2, out=out)),
         lambda dt: [make((2, 3), dt), torch.tensor([1, 0])], dtypes=MM, grad=False)
register("multi_margin_loss_backward.grad_input",
         lambda g, x, t: torch.ops.aten.multi_margin_loss_backward.grad_input(g, x, t, 1, 1, None, 0,
                                                                              grad_input=torch.empty_like(x)),
         lambda dt: [make((2,), dt), make((2, 3), dt), torch.tensor([1, 0])], dtypes=MM, grad=False)
