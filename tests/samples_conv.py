"""Samples for the convolution kernels: conv1d/2d/3d and conv_transpose1d/2d/3d through
convolution_overrideable (+ backward): stride, padding, dilation, groups, output_padding,
bias, and the backward's output_mask; integer convolutions exactly as CPU's."""
import torch
import torch.nn.functional as F

from samples import FLOATS, INTS, make, register

A = torch.ops.aten
CONV = "convolution_overrideable convolution_backward_overrideable"


def conv_inputs(x, w, b=None):
    def f(dt):
        r = [make(x, dt, -2, 2, seed=1), make(w, dt, -1, 1, seed=2)]
        if b is not None:
            r.append(make(b, dt, -1, 1, seed=3))
        return r
    return f


FORWARD = [
    # name, functional, input, weight, bias, kwargs
    ("conv1d", F.conv1d, (2, 3, 11), (4, 3, 3), (4,), dict(padding=1)),
    ("conv1d stride dilation", F.conv1d, (2, 4, 17), (6, 2, 3), None, dict(stride=2, dilation=2, groups=2)),
    ("conv2d", F.conv2d, (2, 3, 9, 8), (5, 3, 3, 3), (5,), dict(padding=1)),
    ("conv2d stride pad", F.conv2d, (2, 4, 10, 9), (6, 4, 3, 2), (6,), dict(stride=(2, 3), padding=(2, 1))),
    ("conv2d dilation", F.conv2d, (1, 2, 12, 12), (3, 2, 3, 3), None, dict(dilation=(2, 3), padding=2)),
    ("conv2d groups", F.conv2d, (2, 6, 7, 7), (9, 2, 3, 3), (9,), dict(groups=3, padding=1)),
    ("conv2d depthwise", F.conv2d, (2, 4, 8, 8), (4, 1, 3, 3), (4,), dict(groups=4, stride=2, padding=1)),
    ("conv2d 1x1", F.conv2d, (3, 8, 5, 5), (4, 8, 1, 1), None, {}),
    ("conv2d same", F.conv2d, (2, 3, 7, 6), (4, 3, 4, 3), (4,), dict(padding="same")),
    ("conv2d unbatched", F.conv2d, (3, 6, 6), (2, 3, 3, 3), None, {}),
    ("conv3d", F.conv3d, (2, 2, 5, 6, 5), (3, 2, 3, 2, 3), (3,), dict(padding=(1, 0, 1), stride=(1, 2, 1))),
    ("conv_transpose1d", F.conv_transpose1d, (2, 3, 7), (3, 4, 3), (4,), dict(stride=2, output_padding=1)),
    ("conv_transpose2d", F.conv_transpose2d, (2, 4, 5, 6), (4, 3, 3, 3), (3,), dict(stride=2, padding=1, output_padding=1)),
    ("conv_transpose2d groups dilation", F.conv_transpose2d, (2, 4, 5, 5), (4, 3, 2, 3), None,
     dict(stride=(2, 1), groups=2, dilation=(1, 2), padding=(0, 1))),
    ("conv_transpose2d unit stride", F.conv_transpose2d, (2, 4, 5, 6), (4, 3, 3, 2), (6,),
     dict(groups=2, dilation=2, padding=(1, 3), output_padding=1)),
    ("conv_transpose3d", F.conv_transpose3d, (1, 2, 3, 4, 3), (2, 3, 2, 3, 2), (3,), dict(stride=2, output_padding=(1, 0, 1))),
]

for name, fn, x, w, b, kw in FORWARD:
    if b is None:
        register(CONV, lambda x, w, fn=fn, kw=kw: fn(x, w, **kw), conv_inputs(x, w), dtypes=FLOATS, name=name)
    else:
        register(CONV, lambda x, w, b, fn=fn, kw=kw: fn(x, w, b, **kw), conv_inputs(x, w, b), dtypes=FLOATS, name=name)

register("convolution_overrideable", lambda x, w: F.conv2d(x, w, padding=1), conv_inputs((2, 3, 6, 6), (4, 3, 3, 3)),
         dtypes=(torch.float64,), name="conv2d float64")

# Integers accumulate exactly in int64, wrapping like CPU's integer GEMM (the default value
# range overflows int8/uint8 sums). CPU runs int64 in every convolution, the other integer
# types only in its plain kernel (not transposed, not dilated).
def int_inputs(x, w, b=None, scale=1):
    return lambda dt: [make(s, dt, seed=i) * (scale if i < 2 else 1) for i, s in enumerate((x, w, b)) if s is not None]


for name, fn, x, w, b, kw in FORWARD:
    plain = fn in (F.conv1d, F.conv2d, F.conv3d) and "dilation" not in kw
    f = (lambda x, w, fn=fn, kw=kw: fn(x, w, **kw)) if b is None else (lambda x, w, b, fn=fn, kw=kw: fn(x, w, b, **kw))
    register("convolution_overrideable", f, int_inputs(x, w, b), dtypes=INTS if plain else (torch.int64,), grad=False,
             name=name + " ints")
register("convolution_overrideable", lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2),
         int_inputs((2, 3, 4, 4), (3, 2, 3, 3), (2,), scale=1 << 31), dtypes=(torch.int64,), grad=False,
         name="conv_transpose2d int64 wrapping")


def bwd_mask(mask, transposed=False):
    def fn(g, x, w):
        r = A.convolution_backward(g, x, w, [w.shape[0]], [1, 2], [1, 0], [1, 1], transposed, [0, 0], 1, mask)
        return [t for t, m in zip(r, mask) if m]  # CPU computes some masked outputs anyway
    return fn


register("convolution_backward_overrideable", bwd_mask([True, False, True]),
         lambda dt: [make((2, 4, 6, 2), dt, seed=1), make((2, 3, 6, 5), dt, seed=2), make((4, 3, 3, 3), dt, seed=3)],
         dtypes=FLOATS, grad=False, name="conv backward mask input+bias")
register("convolution_backward_overrideable", bwd_mask([False, True, False]),
         lambda dt: [make((2, 4, 6, 2), dt, seed=1), make((2, 3, 6, 5), dt, seed=2), make((4, 3, 3, 3), dt, seed=3)],
         dtypes=FLOATS, grad=False, name="conv backward mask weight")

# im2col / col2im (F.unfold / F.fold): padding, stride, dilation, unbatched, empty batch;
# col2im sums overlapping columns in CPU's order (exact match in every float dtype)
UNFOLD = dict(kernel_size=(2, 3), padding=1, stride=(2, 1), dilation=(1, 2))
register("im2col", lambda x: F.unfold(x, **UNFOLD), [(2, 3, 6, 7)], dtypes=FLOATS + (torch.bool,))
register("im2col", lambda x: F.unfold(x, 2), [(3, 4, 5)], dtypes=FLOATS, name="im2col unbatched")
register("im2col", lambda x: F.unfold(x, 2), [(0, 2, 4, 4)], dtypes=FLOATS, grad=False, name="im2col empty batch")
register("im2col.out", lambda x: torch.ops.aten.im2col.out(x, (2, 2), (1, 1), (0, 0), (1, 1), out=torch.empty(0, dtype=x.dtype, device=x.device)),
         [(1, 2, 4, 4)], dtypes=FLOATS, grad=False)
register("col2im", lambda x: F.fold(x, (6, 7), **UNFOLD), [(2, 18, 20)], dtypes=FLOATS + (torch.bool,))
register("col2im", lambda x: F.fold(x, (4, 4), 2), [(8, 9)], dtypes=FLOATS, name="col2im unbatched")
register("col2im.out", lambda x: torch.ops.aten.col2im.out(x, (4, 4), (2, 2), (1, 1), (0, 0), (1, 1), out=torch.empty(0, dtype=x.dtype, device=x.device)),
         [(1, 8, 9)], dtypes=FLOATS, grad=False)

# unfold_backward (Tensor.unfold's backward): overlapping windows (step < size) sum in CPU's
# order, gaps (step > size) stay zero, negative dim, 0-dim input
register("unfold_backward", lambda x: x.unfold(1, 4, 2), [(3, 9, 2)], dtypes=FLOATS, name="unfold_backward overlap")
register("unfold_backward", lambda x: x.unfold(-1, 2, 3), [(2, 8)], dtypes=FLOATS, name="unfold_backward gaps")
register("unfold_backward", lambda x: x.unfold(0, 1, 1), [()], dtypes=FLOATS, name="unfold_backward 0-dim")
register("unfold_backward", lambda g: A.unfold_backward(g, [7, 2], 0, 3, 2), [(3, 2, 3)], dtypes=INTS,
         grad=False, name="unfold_backward ints")
register("unfold_backward.out", lambda g: A.unfold_backward.out(g, [7, 2], 0, 3, 2, out=torch.empty(0, dtype=g.dtype, device=g.device)),
         [(3, 2, 3)], dtypes=FLOATS, grad=False)
