"""Samples for the reduction kernels: sum/mean/prod, max/min and friends, var/std, all/any,
norms, logsumexp, count_nonzero, cumsum."""
import torch

from samples import ALL, FLOATS, INTS, NUMERIC, make, register

F = (torch.float32,) + FLOATS[1:]
NO_BOOL_ARG = NUMERIC  # argmax/argmin/aminmax reject bool on CPU


def mk(x, dtype=None):
    """A fresh empty out= tensor on x's device."""
    return torch.empty(0, dtype=dtype or x.dtype, device=x.device)


def with_nan(dtype):
    x = make((4, 6), dtype)
    x[1, 2] = float("nan")
    x[3, 0] = float("nan")
    x[3, 4] = float("nan")
    return [x]


def ties(dtype):
    # repeated extremes: the first index must win
    x = make((5, 7), dtype, -2, 3)
    return [x]


# ---------------------------------------------------------------- sum
register("sum.dim_IntList", lambda x: x.sum(1), [(5, 7)], dtypes=ALL, name="sum dim")
register("sum.dim_IntList", lambda x: x.sum((0, -1), keepdim=True), [(3, 4, 5)], dtypes=NUMERIC, name="sum dims keepdim")
register("sum.dim_IntList", lambda x: x.sum(0), [(64, 33)], dtypes=FLOATS, atol=1e-4, rtol=1e-5, name="sum outer (bias grad)")
register("sum.dim_IntList", lambda x: x.sum(-1), [(3, 3000)], dtypes=(torch.float32,), atol=1e-3, rtol=1e-5, name="sum long rows")
register("sum.dim_IntList", lambda x: x.sum((0, 2)), [(6, 5, 4, 3)], dtypes=FLOATS + (torch.int32,), atol=1e-4, rtol=1e-5,
         name="sum dims 0,2")
register("sum.dim_IntList", lambda x: x.sum([]), [(3, 4)], dtypes=NUMERIC, name="sum empty dim list")
# kept dims that chain are walked as one (blocks of columns across the [40, 70] rows); ones
# that do not (transposed) keep their own order; out= with a transposed output
register("sum.dim_IntList", lambda x: x.sum(0), [(3, 40, 70)], dtypes=FLOATS, atol=1e-4, rtol=1e-5,
         name="sum outer, kept dims chained")
register("sum.dim_IntList", lambda x: x.transpose(1, 2).sum(0), [(3, 40, 70)], dtypes=FLOATS, atol=1e-4, rtol=1e-5,
         name="sum outer, kept dims transposed")
register("sum.IntList_out", lambda x: torch.sum(x, (0,), out=torch.empty(70, 40, dtype=x.dtype, device=x.device).t()),
         [(3, 40, 70)], dtypes=FLOATS, atol=1e-4, rtol=1e-5, grad=False, name="sum outer into a transposed out=")
register("sum.dim_IntList", lambda x: x.sum(1, dtype=torch.float32), [(4, 5)], dtypes=INTS + (torch.bfloat16,),
         name="sum dtype=")
register("sum.dim_IntList", lambda x: x.t().sum(0), [(6, 5)], dtypes=FLOATS, name="sum transposed")
register("sum.dim_IntList", lambda x: x.sum(0), [()], dtypes=FLOATS, name="sum 0-dim dim 0")
register("sum.dim_IntList", lambda a, b: a + b, [(4, 5), (5,)], dtypes=FLOATS, name="sum via broadcast add backward")
register("sum.IntList_out", lambda x: torch.sum(x, (0,), out=mk(x)), [(5, 4)], dtypes=NUMERIC, grad=False)
register("sum sum.out", lambda x: x.sum(), [(5, 6)], dtypes=ALL, name="sum all")
register("sum", lambda x: x.sum(), [()], dtypes=ALL, name="sum 0-dim")
register("sum", lambda x: x.sum(dtype=torch.float64), [(4, 3)], dtypes=F, name="sum all dtype=")
register("sum.out", lambda x: torch.ops.aten.sum.out(x, out=mk(x, torch.int64 if not x.is_floating_point() else None)),
         [(3, 5)], dtypes=NUMERIC, grad=False)
register("nansum", lambda x: torch.nansum(x, 1), with_nan, dtypes=F)
register("nansum.out", lambda x: torch.nansum(x, out=mk(x)), with_nan, dtypes=F, grad=False)

# ---------------------------------------------------------------- mean
register("mean", lambda x: x.mean(), [(5, 6)], dtypes=F)
register("mean.dim", lambda x: x.mean((0, 2), keepdim=True), [(4, 3, 5)], dtypes=F)
register("mean.dim", lambda x: x.mean(-1), [(4, 3, 5)], dtypes=F, name="mean last")
register("mean.dim", lambda x: x.mean((0, 1)), [(6, 5, 1100)], dtypes=F, name="mean outer, columns in blocks")
register("mean.dim", lambda x: x.mean(1, dtype=torch.float32), [(4, 5)], dtypes=(torch.int32, torch.int64), name="mean int dtype=")
register("mean.out", lambda x: torch.mean(x, 0, out=mk(x)), [(6, 3)], dtypes=F, grad=False)
register("mean.dtype_out", lambda x: torch.ops.aten.mean.dtype_out(x, out=mk(x)), [(6, 3)], dtypes=F, grad=False)

# ---------------------------------------------------------------- prod
# The full-reduction backward of prod asks nonzero() (output size depends on data), which
# runs via the CPU fallback; its gradients are covered by the prod.dim_int samples.
register("prod", lambda x: x.prod(), lambda dt: [make((3, 4), dt, 0.5, 1.5) if dt.is_floating_point else make((3, 4), dt, -2, 3)],
         dtypes=ALL, grad=False)
register("prod.out", lambda x: torch.ops.aten.prod.out(x, out=mk(x, torch.int64 if not x.is_floating_point() else None)),
         lambda dt: [make((3, 4), dt, -2, 3)], dtypes=NUMERIC, grad=False)
register("prod.dim_int", lambda x: x.prod(1, keepdim=True), lambda dt: [make((4, 5), dt, -2, 3)], dtypes=ALL)
register("prod.dim_int", lambda x: x.prod(0), lambda dt: [make((4, 5), dt, -2, 3)], dtypes=F, name="prod outer")
register("prod.int_out", lambda x: torch.prod(x, 0, out=mk(x, torch.int64 if not x.is_floating_point() else None)),
         lambda dt: [make((4, 5), dt, -2, 3)], dtypes=NUMERIC, grad=False)

# ---------------------------------------------------------------- count_nonzero
register("count_nonzero.dim_IntList", lambda x: torch.count_nonzero(x, (0, 1)), lambda dt: [make((3, 4, 5), dt, -1, 2)],
         dtypes=ALL, grad=False)
register("count_nonzero", lambda x: torch.ops.aten.count_nonzero(x, 1), lambda dt: [make((3, 4), dt, -1, 2)],
         dtypes=ALL, grad=False)

# ---------------------------------------------------------------- all / any
for name in ("all", "any"):
    f = getattr(torch, name)

    def inputs(dt):
        x = make((4, 5), dt, -1, 2) if dt != torch.bool else make((4, 5), dt)
        x[0] = 1
        x[2] = 0
        return [x]

    register(f"{name}", lambda x, f=f: f(x), inputs, dtypes=ALL, grad=False)
    register(f"{name}.all_out", lambda x, f=f: f(x, out=mk(x, torch.uint8 if x.dtype == torch.uint8 else torch.bool)),
             inputs, dtypes=ALL, grad=False)
    register(f"{name}.dim", lambda x, f=f: f(x, 1), inputs, dtypes=ALL, grad=False)
    register(f"{name}.dim", lambda x, f=f: f(x, 0, keepdim=True), inputs, dtypes=ALL, grad=False, name=f"{name} outer")
    register(f"{name}.out", lambda x, f=f: f(x, 1, out=mk(x, torch.uint8 if x.dtype == torch.uint8 else torch.bool)),
             inputs, dtypes=ALL, grad=False)
    register(f"{name}.dims", lambda x, f=f: f(x, (0, 1)), inputs, dtypes=ALL, grad=False)
    register(f"{name}.dims", lambda x, name=name: getattr(torch.ops.aten, name).dims(x, []), inputs, dtypes=ALL, grad=False,
             name=f"{name} empty dims")
    register(f"{name}.dims_out", lambda x, f=f: f(x, (1,), out=mk(x, torch.uint8 if x.dtype == torch.uint8 else torch.bool)),
             inputs, dtypes=ALL, grad=False)

# ---------------------------------------------------------------- max / min family
register("amax", lambda x: torch.amax(x, 1), ties, dtypes=ALL)
register("amax", lambda x: torch.amax(x, (0, -1), keepdim=True), [(3, 4, 5)], dtypes=ALL, name="amax dims")
register("amax", lambda x: torch.amax(x), [(3, 4)], dtypes=F, name="amax all")
register("amax", lambda x: torch.amax(x, 1), with_nan, dtypes=F, name="amax nan")
register("amax.out", lambda x: torch.amax(x, 0, out=mk(x)), [(4, 6)], dtypes=ALL, grad=False)
register("amin", lambda x: torch.amin(x, 0), ties, dtypes=ALL)
register("amin", lambda x: torch.amin(x, 1), with_nan, dtypes=F, name="amin nan")
register("amin.out", lambda x: torch.amin(x, -1, out=mk(x)), [(4, 6)], dtypes=ALL, grad=False)
register("max", lambda x: x.max(), [(4, 5)], dtypes=ALL)
register("max", lambda x: x.max(), with_nan, dtypes=F, name="max all nan")
register("max.unary_out", lambda x: torch.max(x, out=mk(x)), [(4, 5)], dtypes=ALL, grad=False)
register("min", lambda x: x.min(), [(4, 5)], dtypes=ALL)
register("min.unary_out", lambda x: torch.min(x, out=mk(x)), [(4, 5)], dtypes=ALL, grad=False)
register("max.dim", lambda x: x.max(1), ties, dtypes=ALL)
register("max.dim", lambda x: x.max(0, keepdim=True), ties, dtypes=ALL, name="max dim outer")
register("max.dim", lambda x: x.max(1), with_nan, dtypes=F, name="max dim nan")
register("max.dim", lambda x: x.max(0), [()], dtypes=F, name="max dim 0-dim")
register("max.dim_max", lambda x: torch.max(x, 1, out=(mk(x), mk(x, torch.int64))), ties, dtypes=ALL, grad=False)
register("min.dim", lambda x: x.min(-1), ties, dtypes=ALL)
register("min.dim", lambda x: x.min(0), with_nan, dtypes=F, name="min dim nan outer")
register("min.dim_min", lambda x: torch.min(x, 0, out=(mk(x), mk(x, torch.int64))), ties, dtypes=ALL, grad=False)
register("argmax", lambda x: torch.argmax(x, 1), ties, dtypes=NO_BOOL_ARG, grad=False)
register("argmax", lambda x: torch.argmax(x), ties, dtypes=NO_BOOL_ARG, grad=False, name="argmax flat")
register("argmax", lambda x: torch.argmax(x, 0, keepdim=True), with_nan, dtypes=F, grad=False, name="argmax nan")
register("argmax.out", lambda x: torch.argmax(x, 0, out=mk(x, torch.int64)), ties, dtypes=NO_BOOL_ARG, grad=False)
register("argmin", lambda x: torch.argmin(x, 1), ties, dtypes=NO_BOOL_ARG, grad=False)
register("argmin", lambda x: torch.argmin(x), [(3, 4, 5)], dtypes=NO_BOOL_ARG, grad=False, name="argmin flat")
register("argmin.out", lambda x: torch.argmin(x, -1, out=mk(x, torch.int64)), ties, dtypes=NO_BOOL_ARG, grad=False)
register("aminmax", lambda x: torch.aminmax(x, dim=1), ties, dtypes=NO_BOOL_ARG, grad=False)
register("aminmax", lambda x: torch.aminmax(x), with_nan, dtypes=F, grad=False, name="aminmax all nan")
register("aminmax.out", lambda x: torch.aminmax(x, dim=0, keepdim=True, out=(mk(x), mk(x))), ties, dtypes=NO_BOOL_ARG,
         grad=False)

# ---------------------------------------------------------------- var / std
register("var.correction", lambda x: torch.var(x, 1), [(5, 7)], dtypes=F)
register("var.correction", lambda x: torch.var(x, (0, 2), correction=0, keepdim=True), [(4, 3, 5)], dtypes=F,
         name="var dims correction=0")
register("var.correction", lambda x: torch.var(x, 0), [(40, 7)], dtypes=F, name="var outer")
register("var.correction", lambda x: torch.var(x), [(3, 2000)], dtypes=(torch.float32,), name="var all long")
register("var.correction", lambda x: torch.var(x, 0, correction=2), [(2, 3)], dtypes=(torch.float32,),
         grad=False, name="var correction > n")
register("var.correction_out", lambda x: torch.var(x, 1, out=mk(x)), [(4, 5)], dtypes=F, grad=False)
register("std.correction", lambda x: torch.std(x, -1), [(5, 7)], dtypes=F)
register("std.correction", lambda x: torch.std(x, 0, correction=0), [(6, 3)], dtypes=F, name="std outer")
register("std.correction_out", lambda x: torch.std(x, 1, out=mk(x)), [(4, 5)], dtypes=F, grad=False)
register("var_mean.correction", lambda x: torch.var_mean(x, 1), [(5, 7)], dtypes=F)
register("var_mean.correction", lambda x: torch.var_mean(x, (0, 1), keepdim=True), [(5, 3, 2)], dtypes=F,
         name="var_mean dims")
register("var_mean.correction_out", lambda x: torch.ops.aten.var_mean.correction_out(x, [0], out0=mk(x), out1=mk(x)),
         [(5, 3)], dtypes=F, grad=False)
register("std_mean.correction", lambda x: torch.std_mean(x, 0), [(5, 7)], dtypes=F)
register("std_mean.correction_out", lambda x: torch.ops.aten.std_mean.correction_out(x, [1], out0=mk(x), out1=mk(x)),
         [(5, 3)], dtypes=F, grad=False)

# ---------------------------------------------------------------- norms, logsumexp
for ord_ in (2, 1, float("inf"), float("-inf"), 0, 3, 0.5):
    register("linalg_vector_norm", lambda x, o=ord_: torch.linalg.vector_norm(x, o, dim=-1),
             lambda dt: [make((4, 6), dt, 0.1, 3.0) * (1 - 2 * (torch.arange(6) % 2)).to(dt)], dtypes=F,
             grad=ord_ not in (0,), name=f"vector_norm ord={ord_}")
register("linalg_vector_norm", lambda x: torch.linalg.vector_norm(x), [(5, 4)], dtypes=F, name="vector_norm all")
register("linalg_vector_norm", lambda x: torch.linalg.vector_norm(x, 2, (0,), keepdim=True), [(5, 4)], dtypes=F,
         name="vector_norm outer")
register("linalg_vector_norm.out", lambda x: torch.linalg.vector_norm(x, 1, 1, out=mk(x)), [(5, 4)], dtypes=F, grad=False)
NORM = torch.ops.aten.norm  # torch.norm itself mostly routes to linalg.vector_norm
for p in (2, 1, 3, float("inf"), 0):
    register("norm.Scalar", lambda x, _p=p: NORM.Scalar(x, _p), [(5, 4)], dtypes=F, grad=p != 0, name=f"norm p={p}")
    register("norm.ScalarOpt_dim", lambda x, _p=p: NORM.ScalarOpt_dim(x, _p, [1], True), [(5, 4)], dtypes=F,
             grad=p != 0, name=f"norm dim p={p}")
register("norm.Scalar", lambda x: torch.dist(x[0], x[1], 3), [(2, 6)], dtypes=F, name="dist")
register("norm.ScalarOpt_dim", lambda x: NORM.ScalarOpt_dim(x, None, [0, 2]), [(3, 4, 2)], dtypes=F,
         name="norm p=None dims")
register("norm.Scalar_out", lambda x: NORM.Scalar_out(x, 2, out=mk(x)), [(5, 4)], dtypes=F, grad=False)
register("norm.out", lambda x: NORM.out(x, 3, [0], out=mk(x)), [(5, 4)], dtypes=F, grad=False)
register("norm.ScalarOpt_dtype", lambda x: NORM.ScalarOpt_dtype(x, 1, dtype=torch.float64), [(5, 4)], dtypes=F)
register("norm.ScalarOpt_dtype_out", lambda x: NORM.ScalarOpt_dtype_out(x, 2, dtype=torch.float64,
                                                                          out=mk(x, torch.float64)),
         [(5, 4)], dtypes=F, grad=False)
register("norm.ScalarOpt_dim_dtype", lambda x: NORM.ScalarOpt_dim_dtype(x, 2, [1], False, dtype=torch.float64),
         [(5, 4)], dtypes=F)
register("norm.dtype_out", lambda x: NORM.dtype_out(x, 1, [1], False, dtype=torch.float64, out=mk(x, torch.float64)),
         [(5, 4)], dtypes=F, grad=False)
for p_, dim_, max_ in ((2, 0, 1.0), (1, 1, 0.5), (3, -1, 2.0), (float("inf"), 2, 1.0), (2, 1, 100.0)):
    register("renorm", lambda x, _p=p_, _d=dim_, _m=max_: torch.renorm(x, _p, _d, _m), [(3, 4, 5)], dtypes=F,
             name=f"renorm p={p_} dim={dim_} maxnorm={max_}")
register("renorm_", lambda x: x.renorm_(2, 0, 1.0), [(3, 4)], dtypes=F, grad=False)
register("renorm.out", lambda x: torch.renorm(x, 1, 1, 0.5, out=mk(x)), [(3, 4)], dtypes=F, grad=False)
register("logsumexp", lambda x: torch.logsumexp(x, 1), [(4, 6)], dtypes=F)
register("logsumexp", lambda x: torch.logsumexp(x, (0, 2), keepdim=True), [(4, 3, 5)], dtypes=F, name="logsumexp dims")
register("logsumexp", lambda x: torch.logsumexp(x, 0), [(7, 5)], dtypes=F + (torch.int32,), name="logsumexp outer")


def lse_special(dt):
    x = make((4, 3), dt)
    x[0, 1] = float("inf")
    x[1, :] = float("-inf")
    x[2, 2] = float("nan")
    return [x]


register("logsumexp", lambda x: torch.logsumexp(x, 1), lse_special, dtypes=F, grad=False, name="logsumexp inf nan")
register("logsumexp.out", lambda x: torch.logsumexp(x, 1, out=mk(x)), [(4, 6)], dtypes=F, grad=False)

# ---------------------------------------------------------------- cumsum
register("cumsum", lambda x: torch.cumsum(x, 1), [(4, 6)], dtypes=ALL)
register("cumsum", lambda x: torch.cumsum(x, 0), [(5, 3, 2)], dtypes=F, name="cumsum outer")
register("cumsum", lambda x: torch.cumsum(x, 0, dtype=torch.float32), [(5,)], dtypes=INTS, name="cumsum dtype=")
register("cumsum", lambda x: torch.cumsum(x, 0), [()], dtypes=F, name="cumsum 0-dim")
register("cumsum.out", lambda x: torch.cumsum(x, -1, out=mk(x, torch.int64 if not x.is_floating_point() else None)),
         [(3, 5)], dtypes=NUMERIC, grad=False)
register("cumsum_", lambda x: x.cumsum_(0), [(5, 4)], dtypes=F + (torch.int64,), grad=False)
