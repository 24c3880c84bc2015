"""Samples for the pooling kernels: max pooling with indices, average pooling (ceil_mode,
count_include_pad, divisor_override) and adaptive average / max pooling, 1-d (which
dispatches to 2-d), 2-d and 3-d, each with its backward, plus the out= overloads."""
import torch
import torch.nn.functional as F

from samples import FLOATS, INTS, make, register

A = torch.ops.aten
MAX2 = "max_pool2d_with_indices max_pool2d_with_indices_backward"
MAX3 = "max_pool3d_with_indices max_pool3d_with_indices_backward"
AVG2 = "avg_pool2d avg_pool2d_backward"
AVG3 = "avg_pool3d avg_pool3d_backward"
AAVG2 = "_adaptive_avg_pool2d _adaptive_avg_pool2d_backward"
AAVG3 = "_adaptive_avg_pool3d _adaptive_avg_pool3d_backward"
AMAX2 = "adaptive_max_pool2d adaptive_max_pool2d_backward"
AMAX3 = "adaptive_max_pool3d adaptive_max_pool3d_backward"


def mk(x, dtype=None):
    return torch.empty(0, dtype=dtype or x.dtype, device=x.device)


FWD = [
    # ops, name, fn, input shape
    (MAX2, "max_pool1d", lambda x: F.max_pool1d(x, 3, 2, 1), (2, 3, 11)),
    (MAX2, "max_pool2d", lambda x: F.max_pool2d(x, 3, 2, 1), (2, 3, 9, 8)),
    (MAX2, "max_pool2d indices", lambda x: F.max_pool2d(x, 2, return_indices=True), (2, 3, 6, 7)),
    (MAX2, "max_pool2d ceil dilation", lambda x: F.max_pool2d(x, (3, 2), (2, 1), (1, 0), (2, 1), ceil_mode=True),
     (2, 2, 11, 9)),
    (MAX2, "max_pool2d unbatched", lambda x: F.max_pool2d(x, 2), (3, 6, 6)),
    (MAX3, "max_pool3d", lambda x: F.max_pool3d(x, 2, return_indices=True), (2, 2, 4, 5, 6)),
    (MAX3, "max_pool3d pad ceil", lambda x: F.max_pool3d(x, 3, 2, 1, ceil_mode=True), (1, 2, 6, 5, 7)),
    (AVG2, "avg_pool1d", lambda x: F.avg_pool1d(x, 3, 2, 1), (2, 3, 10)),
    (AVG2, "avg_pool2d", lambda x: F.avg_pool2d(x, 3, 2, 1), (2, 3, 9, 8)),
    (AVG2, "avg_pool2d ceil no pad count", lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
     (2, 3, 10, 9)),
    (AVG2, "avg_pool2d divisor", lambda x: F.avg_pool2d(x, (2, 3), (1, 2), (1, 1), divisor_override=4), (2, 2, 7, 8)),
    (AVG2, "lp_pool2d", lambda x: F.lp_pool2d(x.abs() + 0.5, 2, 2), (2, 3, 6, 6)),
    (AVG3, "avg_pool3d", lambda x: F.avg_pool3d(x, 2), (2, 2, 4, 6, 5)),
    (AVG3, "avg_pool3d pad ceil", lambda x: F.avg_pool3d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
     (1, 2, 6, 5, 7)),
    (AVG3, "avg_pool3d divisor", lambda x: F.avg_pool3d(x, 2, divisor_override=3), (1, 2, 4, 4, 4)),
    (AVG2, "avg_pool2d negative divisor", lambda x: F.avg_pool2d(x, 2, divisor_override=-2), (1, 1, 4, 4)),
    (AAVG2, "adaptive_avg_pool1d", lambda x: F.adaptive_avg_pool1d(x, 4), (2, 3, 10)),
    (AAVG2, "adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, (3, 5)), (2, 3, 10, 7)),
    (AAVG2, "adaptive_avg_pool2d upsampling", lambda x: F.adaptive_avg_pool2d(x, (7, 3)), (2, 3, 4, 2)),
    (AAVG3, "adaptive_avg_pool3d", lambda x: F.adaptive_avg_pool3d(x, (2, 3, 4)), (2, 2, 5, 7, 6)),
    (AMAX2, "adaptive_max_pool1d", lambda x: F.adaptive_max_pool1d(x, 4, return_indices=True), (2, 3, 10)),
    (AMAX2, "adaptive_max_pool2d", lambda x: F.adaptive_max_pool2d(x, (3, 5), return_indices=True), (2, 3, 10, 7)),
    (AMAX3, "adaptive_max_pool3d", lambda x: F.adaptive_max_pool3d(x, (2, 3, 4), return_indices=True), (2, 2, 5, 7, 6)),
]
# CPU's avg_pool3d has no half-precision kernels
F64 = (torch.float32, torch.float64)
for ops, name, fn, shape in FWD:
    register(ops, fn, [shape], dtypes=F64 if ops == AVG3 else FLOATS, name=name)

register("max_pool2d_with_indices", lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), [(2, 3, 9, 8)],
         dtypes=INTS + (torch.float64,), grad=False, name="max_pool2d ints")
register("max_pool3d_with_indices", lambda x: F.max_pool3d(x, 2, return_indices=True), [(1, 2, 4, 4, 4)],
         dtypes=INTS, grad=False, name="max_pool3d ints")
register("max_pool2d_with_indices", lambda x: F.max_pool2d(x, (1, 4), return_indices=True),
         lambda dt: [torch.tensor([[[[1.0, float("nan"), float("nan"), 2.0, -1.0, 0.0, 3.0, 5.0]]]], dtype=dt)],
         dtypes=FLOATS, grad=False, name="max_pool2d nan")

# ---------------------------------------------------------------- out= overloads
K2, K3 = [2, 2], [2, 2, 2]
OUTS = [
    ("max_pool2d_with_indices.out",
     lambda x: A.max_pool2d_with_indices.out(x, K2, K2, [0, 0], [1, 1], False, out=mk(x), indices=mk(x, torch.int64)),
     (2, 3, 6, 6)),
    ("max_pool3d_with_indices.out",
     lambda x: A.max_pool3d_with_indices.out(x, K3, K3, [0] * 3, [1] * 3, False, out=mk(x), indices=mk(x, torch.int64)),
     (2, 2, 4, 4, 4)),
    ("max_pool2d_with_indices_backward.grad_input",
     lambda g, x: A.max_pool2d_with_indices_backward.grad_input(
         g, x, K2, K2, [0, 0], [1, 1], False, A.max_pool2d_with_indices(x, K2, K2)[1], grad_input=mk(x)),
     (2, 3, 3, 3), (2, 3, 6, 6)),
    ("max_pool3d_with_indices_backward.grad_input",
     lambda g, x: A.max_pool3d_with_indices_backward.grad_input(
         g, x, K3, K3, [0] * 3, [1] * 3, False, A.max_pool3d_with_indices(x, K3, K3)[1], grad_input=mk(x)),
     (2, 2, 2, 2, 2), (2, 2, 4, 4, 4)),
    ("adaptive_max_pool2d.out", lambda x: A.adaptive_max_pool2d.out(x, [3, 2], out=mk(x), indices=mk(x, torch.int64)),
     (2, 3, 7, 5)),
    ("adaptive_max_pool3d.out",
     lambda x: A.adaptive_max_pool3d.out(x, [3, 2, 2], out=mk(x), indices=mk(x, torch.int64)), (2, 2, 5, 4, 3)),
    ("adaptive_max_pool2d_backward.grad_input",
     lambda g, x: A.adaptive_max_pool2d_backward.grad_input(g, x, A.adaptive_max_pool2d(x, [3, 2])[1], grad_input=mk(x)),
     (2, 3, 3, 2), (2, 3, 7, 5)),
    ("adaptive_max_pool3d_backward.grad_input",
     lambda g, x: A.adaptive_max_pool3d_backward.grad_input(g, x, A.adaptive_max_pool3d(x, [3, 2, 2])[1],
                                                            grad_input=mk(x)),
     (2, 2, 3, 2, 2), (2, 2, 5, 4, 3)),
    ("avg_pool2d.out", lambda x: A.avg_pool2d.out(x, [3, 3], [2, 2], [1, 1], True, False, None, out=mk(x)),
     (2, 3, 8, 7)),
    ("avg_pool3d.out", lambda x: A.avg_pool3d.out(x, K3, K3, [1] * 3, False, True, 5, out=mk(x)), (2, 2, 4, 5, 4)),
    ("avg_pool2d_backward.grad_input",
     lambda g, x: A.avg_pool2d_backward.grad_input(g, x, [3, 3], [2, 2], [1, 1], True, False, None, grad_input=mk(x)),
     (2, 3, 5, 4), (2, 3, 8, 7)),
    ("avg_pool3d_backward.grad_input",
     lambda g, x: A.avg_pool3d_backward.grad_input(g, x, K3, K3, [1] * 3, False, True, 5, grad_input=mk(x)),
     (2, 2, 3, 3, 3), (2, 2, 4, 5, 4)),
    ("_adaptive_avg_pool2d.out", lambda x: A._adaptive_avg_pool2d.out(x, [3, 4], out=mk(x)), (2, 3, 7, 9)),
]
for name, fn, *shapes in OUTS:
    register(name, fn, shapes, dtypes=F64 if "avg_pool3d" in name else FLOATS, grad=False)

# ---------------------------------------------------------------- fractional max pooling
# The random samples are an argument (generated on CPU here), so outputs are deterministic;
# bf16/f16 samples exercise CPU's rounding of the window starts in the samples' dtype.
FRAC = [
    # N, kernel, output size, input shape
    (2, (2, 3), (4, 3), (2, 3, 9, 8)),
    (2, 3, (3, 3), (3, 7, 7)),
    (3, (2, 1, 3), (3, 4, 2), (2, 2, 6, 7, 6)),
    (3, 2, (2, 3, 2), (2, 5, 6, 4)),
]
for n, k, out, shape in FRAC:
    op = f"fractional_max_pool{n}d"
    planes = (shape[0], shape[1]) if len(shape) == n + 2 else (1, shape[0])
    fn = getattr(F, f"fractional_max_pool{n}d")
    register(f"{op} {op}_backward",
             lambda x, u, fn=fn, k=k, out=out: fn(x, k, output_size=out, return_indices=True, _random_samples=u.detach()),
             lambda dt, shape=shape, planes=planes, n=n: [make(shape, dt), make(planes + (n,), dt, 0, 1, seed=5)],
             dtypes=FLOATS, name=f"{op} {shape}")
register("fractional_max_pool2d.output fractional_max_pool2d_backward.grad_input",
         lambda x, u: A.fractional_max_pool2d_backward.grad_input(
             torch.ones(2, 3, 3, 4, dtype=x.dtype, device=x.device), x, [2, 2], [3, 4],
             A.fractional_max_pool2d.output(x, [2, 2], [3, 4], u, output=mk(x), indices=mk(x, torch.int64))[1],
             grad_input=mk(x)),
         lambda dt: [make((2, 3, 7, 9), dt), make((2, 3, 2), dt, 0, 1, seed=5)], dtypes=FLOATS, grad=False)
register("fractional_max_pool3d.output fractional_max_pool3d_backward.grad_input",
         lambda x, u: A.fractional_max_pool3d_backward.grad_input(
             torch.ones(1, 2, 2, 3, 2, dtype=x.dtype, device=x.device), x, [2, 2, 2], [2, 3, 2],
             A.fractional_max_pool3d.output(x, [2, 2, 2], [2, 3, 2], u, output=mk(x), indices=mk(x, torch.int64))[1],
             grad_input=mk(x)),
         lambda dt: [make((1, 2, 5, 6, 4), dt), make((1, 2, 3), dt, 0, 1, seed=5)], dtypes=FLOATS, grad=False)
