"""Samples for kernels/activation_more.c: shrinks, threshold, prelu and glu, forward
and backward, with values on the thresholds."""
import torch
import torch.nn.functional as F

from samples import FLOATS, INTS, make, register


def edgy(shape, dt):
    """Random values with some exactly on +-0.5 and 0."""
    x = make(shape, dt)
    x.view(-1)[:3] = torch.tensor([0.5, -0.5, 0.0], dtype=dt)
    return x


def _out(fn):
    return lambda *xs: fn(*xs, out=torch.empty(0, dtype=xs[0].dtype, device=xs[0].device))


register("hardshrink hardshrink_backward", lambda x: F.hardshrink(x, 0.5),
         lambda dt: [edgy((4, 5), dt)], dtypes=FLOATS, name="hardshrink")
register("softshrink softshrink_backward", lambda x: F.softshrink(x, 0.5), lambda dt: [edgy((4, 5), dt)],
         dtypes=FLOATS, name="softshrink")
# NaN stays NaN inside [-lambd, lambd] (softshrink gave 0; found by OpInfo's reference inputs)
register("hardshrink softshrink", lambda x: (F.hardshrink(x, 0.5), F.softshrink(x, 0.5)),
         lambda dt: [torch.tensor([float("nan"), 0.3, -0.3, 0.5, -0.5, float("inf"), -float("inf")], dtype=dt)],
         dtypes=FLOATS, grad=False, name="shrinks of specials")
register("hardshrink.out", _out(lambda x, out: torch.ops.aten.hardshrink.out(x, 0.3, out=out)), [(3, 4)],
         dtypes=FLOATS, grad=False)
register("softshrink.out", _out(lambda x, out: torch.ops.aten.softshrink.out(x, 0.3, out=out)), [(3, 4)],
         dtypes=FLOATS, grad=False)
register("hardshrink_backward.grad_input softshrink_backward.grad_input",
         lambda g, x: (torch.ops.aten.hardshrink_backward.grad_input(g, x, 0.5, grad_input=torch.empty_like(x)),
                       torch.ops.aten.softshrink_backward.grad_input(g, x, 0.5, grad_input=torch.empty_like(x))),
         lambda dt: [make((3, 4), dt), edgy((3, 4), dt)], dtypes=FLOATS, grad=False, name="shrink backward out")
register("threshold", lambda x: F.threshold(x, 0.5, -2.0), lambda dt: [edgy((4, 5), dt)], dtypes=FLOATS)
register("threshold", lambda x: torch.threshold(x, 2, -7), [(4, 5)], dtypes=INTS, grad=False,
         name="threshold integers")
register("threshold_ threshold.out",
         lambda x: (torch.threshold_(x.clone(), 0.0, 1.0), torch.threshold(x, 0.5, 3.0, out=torch.empty_like(x))),
         lambda dt: [edgy((4, 5), dt)], dtypes=FLOATS, grad=False, name="threshold_ and out")
register("_prelu_kernel _prelu_kernel_backward", lambda x, w: F.prelu(x, w), [(2, 3, 4), (3,)], dtypes=FLOATS,
         name="prelu per channel")
register("_prelu_kernel _prelu_kernel_backward", lambda x, w: F.prelu(x, w), [(5, 2), (1,)], dtypes=FLOATS,
         name="prelu shared weight")
register("glu glu_backward", lambda x: F.glu(x, 1), [(3, 6, 2)], dtypes=FLOATS, name="glu dim 1")
register("glu glu_backward", lambda x: F.glu(x), [(4, 8)], dtypes=FLOATS, name="glu last dim")
register("glu.out", _out(lambda x, out: torch.ops.aten.glu.out(x, 0, out=out)), [(4, 3)], dtypes=FLOATS, grad=False)
register("glu_backward.grad_input",
         lambda g, x: torch.ops.aten.glu_backward.grad_input(g, x, 0, grad_input=torch.empty_like(x)),
         [(2, 3), (4, 3)], dtypes=FLOATS, grad=False)
