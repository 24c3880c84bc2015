"""Samples for grid sampling (F.grid_sample): grid_sampler_2d / 3d and their backward, every
interpolation and padding mode, align_corners both ways, grids reaching past the edges."""
import itertools

import torch
import torch.nn.functional as F

from samples import FLOATS, make, register

A = torch.ops.aten
MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
PADDINGS = {"zeros": 0, "border": 1, "reflection": 2}


def inputs(x_shape, grid_shape):
    return lambda dt: [make(x_shape, dt), make(grid_shape, dt, -1.4, 1.4, seed=1)]


for nsp, (mode, padding), align in itertools.product((2, 3), itertools.product(MODES, PADDINGS), (False, True)):
    if nsp == 3 and mode == "bicubic":
        continue
    op = f"grid_sampler_{nsp}d"
    x_shape, grid_shape = ((2, 3, 4, 5), (2, 3, 4, 2)) if nsp == 2 else ((2, 2, 3, 4, 3), (2, 2, 3, 2, 3))
    register(f"{op} {op}_backward",
             lambda x, g, m=mode, p=padding, a=align: F.grid_sample(x, g, m, p, a),
             inputs(x_shape, grid_shape), dtypes=FLOATS, name=f"{op} {mode} {padding} align={align}")

register("grid_sampler_2d grid_sampler_2d_backward", lambda x, g: F.grid_sample(x, g, "bilinear", "reflection", False),
         inputs((1, 2, 1, 3), (1, 4, 2, 2)), dtypes=FLOATS, name="grid_sampler_2d size-1 dim")
register("grid_sampler_2d_backward",
         lambda go, x, g: A.grid_sampler_2d_backward(go, x, g, 0, 0, False, [False, True])[1],
         lambda dt: [make((2, 3, 3, 4), dt), make((2, 3, 4, 5), dt), make((2, 3, 4, 2), dt, -1.2, 1.2)],
         dtypes=FLOATS, grad=False, name="grid_sampler_2d_backward grid only")
register("grid_sampler_2d.out",
         lambda x, g: A.grid_sampler_2d.out(x, g, 2, 1, True, out=torch.empty(0, dtype=x.dtype, device=x.device)),
         inputs((2, 3, 4, 5), (2, 3, 4, 2)), grad=False)
register("grid_sampler_3d.out",
         lambda x, g: A.grid_sampler_3d.out(x, g, 0, 2, False, out=torch.empty(0, dtype=x.dtype, device=x.device)),
         inputs((1, 2, 3, 4, 3), (1, 2, 3, 2, 3)), grad=False)
