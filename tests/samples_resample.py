"""Samples for the resampling kernels: upsampling (nearest, nearest-exact, linear, bilinear,
bicubic, trilinear; sizes and scale factors, align_corners both ways) and reflection /
replication padding, each with its backward, plus the out= / grad_input= overloads."""
import torch
import torch.nn.functional as F

from samples import FLOATS, INTS, register

A = torch.ops.aten


def mk(x, dtype=None):
    return torch.empty(0, dtype=dtype or x.dtype, device=x.device)


def up(mode, **kw):
    return lambda x: F.interpolate(x, mode=mode, **kw)


NEAREST = {1: "upsample_nearest1d", 2: "upsample_nearest2d", 3: "upsample_nearest3d"}
EXACT = {1: "_upsample_nearest_exact1d", 2: "_upsample_nearest_exact2d", 3: "_upsample_nearest_exact3d"}
LINEAR = {1: "upsample_linear1d", 2: "upsample_bilinear2d", 3: "upsample_trilinear3d"}
SHAPE = {1: (2, 3, 5), 2: (2, 3, 5, 4), 3: (1, 2, 3, 4, 3)}


def both(op):
    return f"{op} {op}_backward"


for n in (1, 2, 3):
    register(both(NEAREST[n]), up("nearest", scale_factor=2), [SHAPE[n]], dtypes=FLOATS, name=f"nearest{n}d x2")
    register(both(NEAREST[n]), up("nearest", scale_factor=1.7), [SHAPE[n]], dtypes=FLOATS, name=f"nearest{n}d x1.7")
    register(both(NEAREST[n]), up("nearest", size=(3, 7, 4)[-n:]), [SHAPE[n]], dtypes=FLOATS, name=f"nearest{n}d size")
    register(both(EXACT[n]), up("nearest-exact", scale_factor=1.6), [SHAPE[n]], dtypes=FLOATS, name=f"nearest-exact{n}d")
    register(both(EXACT[n]), up("nearest-exact", size=(2, 9, 5)[-n:]), [SHAPE[n]], dtypes=FLOATS,
             name=f"nearest-exact{n}d size")
    lin = ("linear", "bilinear", "trilinear")[n - 1]
    for ac in (False, True):
        register(both(LINEAR[n]), up(lin, scale_factor=2.5, align_corners=ac), [SHAPE[n]], dtypes=FLOATS,
                 name=f"{lin} x2.5 align={ac}")
        register(both(LINEAR[n]), up(lin, size=(2, 7, 3)[-n:], align_corners=ac), [SHAPE[n]], dtypes=FLOATS,
                 name=f"{lin} size align={ac}")
    register(both(LINEAR[n]), up(lin, scale_factor=0.6, recompute_scale_factor=False), [SHAPE[n]],
             dtypes=(torch.float64,), name=f"{lin} downscale float64")
for ac in (False, True):
    register(both("upsample_bicubic2d"), up("bicubic", scale_factor=2.5, align_corners=ac), [(2, 3, 5, 4)],
             dtypes=FLOATS, name=f"bicubic x2.5 align={ac}")
    register(both("upsample_bicubic2d"), up("bicubic", size=(3, 7), align_corners=ac), [(2, 3, 5, 4)],
             dtypes=FLOATS, name=f"bicubic size align={ac}")
register("upsample_nearest2d", up("nearest", scale_factor=3), [(2, 3, 4, 4)], dtypes=(torch.uint8,),
         name="nearest2d uint8")

# ---------------------------------------------------------------- padding
PADS = {1: (2, 1), 2: (1, 2, 2, 0), 3: (1, 0, 2, 1, 0, 2)}
NEG = {1: (-1, 2), 2: (2, -1, -2, 1), 3: (1, -1, 0, 2, -1, 1)}
for kind, mode in (("reflection", "reflect"), ("replication", "replicate")):
    for n in (1, 2, 3):
        op = f"{kind}_pad{n}d"
        register(both(op), lambda x, p=PADS[n], mode=mode: F.pad(x, p, mode=mode), [SHAPE[n]], dtypes=FLOATS,
                 name=f"{op}")
        register(op, lambda x, p=PADS[n], mode=mode: F.pad(x, p, mode=mode), [SHAPE[n]], dtypes=INTS,
                 name=f"{op} ints")
        register(both(op), lambda x, p=NEG[n], mode=mode: F.pad(x, p, mode=mode), [SHAPE[n]], dtypes=FLOATS,
                 name=f"{op} negative")
        register(both(op), lambda x, p=PADS[n], mode=mode: F.pad(x, p, mode=mode), [SHAPE[n][1:]], dtypes=FLOATS,
                 name=f"{op} unbatched")

# ---------------------------------------------------------------- out= overloads
OUT_SIZE = {1: [7], 2: [7, 6], 3: [5, 6, 4]}
for n in (1, 2, 3):
    x_shape, out_size = SHAPE[n], OUT_SIZE[n]
    g_shape = x_shape[:2] + tuple(out_size)
    for op, interp in ((NEAREST[n], False), (EXACT[n], False), (LINEAR[n], True)) + (
            (("upsample_bicubic2d", True),) if n == 2 else ()):
        extra = [True] if interp else []
        scales = [None] * n
        fwd, bwd = getattr(A, op).out, getattr(A, op + "_backward").grad_input
        register(f"{op}.out", lambda x, fwd=fwd, o=out_size, e=extra, s=scales: fwd(x, o, *e, *s, out=mk(x)),
                 [x_shape], dtypes=FLOATS, grad=False)
        register(f"{op}_backward.grad_input",
                 lambda g, bwd=bwd, o=out_size, i=list(x_shape), e=extra, s=scales: bwd(g, o, i, *e, *s, grad_input=mk(g)),
                 [g_shape], dtypes=FLOATS, grad=False)
    for kind in ("reflection", "replication"):
        op = f"{kind}_pad{n}d"
        p = list(PADS[n])
        fwd, bwd = getattr(A, op).out, getattr(A, op + "_backward").grad_input
        padded = x_shape[:2] + tuple(s + p[2 * (n - 1 - i)] + p[2 * (n - 1 - i) + 1] for i, s in enumerate(x_shape[2:]))
        register(f"{op}.out", lambda x, fwd=fwd, p=p: fwd(x, p, out=mk(x)), [x_shape], dtypes=FLOATS, grad=False)
        register(f"{op}_backward.grad_input", lambda g, x, bwd=bwd, p=p: bwd(g, x, p, grad_input=mk(x)),
                 [padded, x_shape], dtypes=FLOATS, grad=False)

# ---------------------------------------------------------------- antialiased bilinear
# Downscaling widens the taps with the factor (7 taps at 3x); upscaling is plain bilinear.
AA = "_upsample_bilinear2d_aa _upsample_bilinear2d_aa_backward"
register(AA, lambda x: F.interpolate(x, size=(4, 3), mode="bilinear", antialias=True), [(2, 3, 12, 9)],
         dtypes=(torch.float32,), name="aa downscale 3x")
register(AA, lambda x: F.interpolate(x, scale_factor=(0.4, 1.7), mode="bilinear", antialias=True), [(1, 2, 10, 5)],
         dtypes=(torch.float32,), name="aa mixed scales")
register(AA, lambda x: F.interpolate(x, size=(3, 5), mode="bilinear", antialias=True, align_corners=True),
         [(2, 2, 7, 11)], dtypes=(torch.float32,), name="aa align_corners")
register(AA, lambda x: F.interpolate(x, size=(3, 4), mode="bilinear", antialias=True), [(1, 5, 8, 8)],
         dtypes=(torch.float64,), name="aa float64")
register("_upsample_bilinear2d_aa.out",
         lambda x: A._upsample_bilinear2d_aa.out(x, [3, 2], False, None, None, out=mk(x)), [(2, 3, 9, 7)], grad=False)
register("_upsample_bilinear2d_aa_backward.grad_input",
         lambda g: A._upsample_bilinear2d_aa_backward.grad_input(g, [3, 2], [2, 3, 9, 7], False, None, None,
                                                                 grad_input=mk(g)), [(2, 3, 3, 2)], grad=False)
