"""Samples for the scan family: cumprod, logcumsumexp, cummax/cummin, searchsorted,
bucketize, histc, isin."""
import torch

from samples import ALL, FLOATS, INTS, NUMERIC, make, register


def mk(x, dtype=None):
    return torch.empty(0, dtype=dtype or x.dtype, device=x.device)


def small(shape, lo=-2, hi=3, seed=0):
    return lambda dt: [make(shape, dt, lo, hi, seed=seed)]


def nonzero(shape):
    """cumprod inputs away from 0 (its backward divides by the input when there is no zero)."""
    def inputs(dt):
        x = make(shape, dt, 0.5, 1.5)
        return [x * torch.where(make(shape, torch.bool), 1, -1).to(dt)]
    return inputs


def with_nan(dt):
    x = make((4, 6), dt, -2, 3)
    x[1, 2] = float("nan")
    x[3, 0] = float("nan")
    return [x]


def sorted_rows(shape, dt, seed=0):
    return make(shape, dt, -5, 6, seed=seed).sort(-1).values


# ---------------------------------------------------------------- cumulative ops
register("cumprod", lambda x: torch.cumprod(x, 1), nonzero((3, 7)), dtypes=FLOATS)
register("cumprod", lambda x: torch.cumprod(x, 0), small((5, 4)), dtypes=INTS + (torch.bool,), name="cumprod ints")
register("cumprod", lambda x: torch.cumprod(x, -1, dtype=torch.float32), small((3, 4)), dtypes=(torch.int32,),
         name="cumprod dtype=")
register("cumprod", lambda x: torch.cumprod(x, 1), small((3, 6)), dtypes=(torch.float32,), name="cumprod with zeros")
register("cumprod.out", lambda x: torch.cumprod(x, 0, out=mk(x)), small((4, 3)), dtypes=NUMERIC, grad=False)
register("cumprod_", lambda x: x.cumprod_(1), small((3, 4)), dtypes=NUMERIC, grad=False)
register("logcumsumexp", lambda x: torch.logcumsumexp(x, 1), [(4, 9)], dtypes=FLOATS)
register("logcumsumexp", lambda x: torch.logcumsumexp(x, 0), with_nan, dtypes=FLOATS, grad=False, name="logcumsumexp nan")
register("logcumsumexp", lambda x: torch.logcumsumexp(x, 0),
         lambda dt: [torch.tensor([-float("inf"), 1.0, float("inf"), 2.0, float("inf")], dtype=dt)], dtypes=FLOATS,
         grad=False, name="logcumsumexp inf")
register("logcumsumexp.out", lambda x: torch.logcumsumexp(x, -1, out=mk(x)), [(3, 5)], dtypes=FLOATS, grad=False)
for op in ("cummax", "cummin"):
    f = getattr(torch, op)
    register(op, lambda x, f=f: f(x, 1), small((4, 9)), dtypes=ALL)
    register(op, lambda x, f=f: f(x, 0), [(6, 3)], dtypes=FLOATS, name=f"{op} dim 0")
    register(op, lambda x, f=f: f(x, 1), with_nan, dtypes=FLOATS, name=f"{op} nan")
    register(f"{op}.out", lambda x, f=f: f(x, 0, out=(mk(x), mk(x, torch.int64))), small((5, 3)), dtypes=NUMERIC,
             grad=False)

# ---------------------------------------------------------------- searchsorted / bucketize
SEARCH = (torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.uint8)
register("searchsorted.Tensor", lambda s, v: torch.searchsorted(s, v),
         lambda dt: [sorted_rows((9,), dt), make((3, 4), dt, -6, 7, seed=1)], dtypes=SEARCH, grad=False)
register("searchsorted.Tensor", lambda s, v: torch.searchsorted(s, v, right=True, out_int32=True),
         lambda dt: [sorted_rows((3, 8), dt), make((3, 5), dt, -6, 7, seed=1)], dtypes=SEARCH, grad=False,
         name="searchsorted rows right int32")
register("searchsorted.Tensor", lambda s, v, o: torch.searchsorted(s, v, side="right", sorter=o),
         lambda dt: [make((2, 7), dt, -5, 6), make((2, 4), dt, -6, 7, seed=1),
                     make((2, 7), dt, -5, 6).argsort(dim=-1, stable=True)], dtypes=SEARCH, grad=False,
         name="searchsorted sorter")
register("searchsorted.Tensor", lambda s, v: torch.searchsorted(s, v),
         lambda dt: [torch.tensor([1.0, 2.0, float("nan")], dtype=dt), torch.tensor([float("nan"), 2.0, 0.0], dtype=dt)],
         dtypes=FLOATS, grad=False, name="searchsorted nan")
register("searchsorted.Tensor_out", lambda s, v: torch.searchsorted(s, v, out=mk(v, torch.int64)),
         lambda dt: [sorted_rows((6,), dt), make((5,), dt, -6, 7, seed=1)], dtypes=SEARCH, grad=False)
register("searchsorted.Scalar", lambda s: torch.searchsorted(s, 2, right=True),
         lambda dt: [sorted_rows((8,), dt)], dtypes=SEARCH, grad=False)
register("searchsorted.Scalar_out", lambda s: torch.searchsorted(s, 1, out=mk(s, torch.int64)),
         lambda dt: [sorted_rows((8,), dt)], dtypes=SEARCH, grad=False)
register("bucketize.Tensor", lambda v, b: torch.bucketize(v, b),
         lambda dt: [make((4, 5), dt, -6, 7, seed=1), sorted_rows((7,), dt)], dtypes=SEARCH, grad=False)
register("bucketize.Tensor", lambda v, b: torch.bucketize(v, b, out_int32=True, right=True),
         lambda dt: [make((6,), dt, -6, 7, seed=1), sorted_rows((7,), dt)], dtypes=SEARCH, grad=False,
         name="bucketize right int32")
register("bucketize.Tensor_out", lambda v, b: torch.bucketize(v, b, out=mk(v, torch.int64)),
         lambda dt: [make((3, 4), dt, -6, 7, seed=1), sorted_rows((5,), dt)], dtypes=SEARCH, grad=False)
register("bucketize.Scalar", lambda b: torch.bucketize(3, b), lambda dt: [sorted_rows((7,), dt)], dtypes=SEARCH,
         grad=False)

# ---------------------------------------------------------------- histc
HIST = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
register("histc", lambda x: torch.histc(x, 7, -2, 2), [(6, 11)], dtypes=HIST, grad=False)
register("histc", lambda x: torch.histc(x, 10), [(50,)], dtypes=HIST, grad=False, name="histc data range")
register("histc", lambda x: torch.histc(x, 4), lambda dt: [torch.full((5,), 2.0, dtype=dt)], dtypes=HIST, grad=False,
         name="histc constant")
register("histc", lambda x: torch.histc(x, 5, 0, 1), with_nan, dtypes=(torch.float32,), grad=False, name="histc nan")
register("histc.out", lambda x: torch.histc(x, 6, -1, 3, out=mk(x)), [(40,)], dtypes=HIST, grad=False)


def on_edges(dt, lo=-3.7, hi=11.3, bins=97):
    """Every bin edge and the value below it: CPU bins by its linear formula in the input's
    arithmetic alone, so an element on an inner edge can land in the bin below (tpu searched
    the edges; found by OpInfo's reference inputs in bfloat16)."""
    e = torch.linspace(lo, hi, bins + 1, dtype=dt)
    return [torch.cat([e, torch.nextafter(e.float(), torch.full_like(e.float(), -1e9)).to(dt)])]


register("histc", lambda x: torch.histc(x, 97, -3.7, 11.3), on_edges, dtypes=(torch.float32, torch.float64, torch.bfloat16,
         torch.float16), grad=False, name="histc on the bin edges")

# ---------------------------------------------------------------- isin
register("isin.Tensor_Tensor", lambda a, b: torch.isin(a, b),
         lambda dt: [make((5, 6), dt, -4, 5), make((3, 3), dt, -4, 5, seed=1)], dtypes=NUMERIC, grad=False)
register("isin.Tensor_Tensor", lambda a, b: torch.isin(a, b, invert=True),
         lambda dt: [make((4, 5), dt, -4, 5), make((7,), dt, -4, 5, seed=3)], dtypes=NUMERIC, grad=False,
         name="isin invert")
register("isin.Tensor_Tensor", lambda a, b: torch.isin(a, b),
         lambda dt: [torch.tensor([1.0, float("nan"), 2.5, 3.0], dtype=dt),
                     torch.tensor([float("nan"), 3.0, 1.0], dtype=dt)], dtypes=FLOATS, grad=False, name="isin nan")
register("isin.Tensor_Tensor", lambda a, b: torch.isin(a, b),
         lambda dt: [make((3, 4), dt, -4, 5), make((5,), torch.int64, -4, 5, seed=2)], dtypes=FLOATS + (torch.int32,),
         grad=False, name="isin mixed dtypes")
register("isin.Tensor_Tensor_out", lambda a, b: torch.isin(a, b, out=mk(a, torch.bool)),
         lambda dt: [make((3, 4), dt, -4, 5), make((6,), dt, -4, 5, seed=2)], dtypes=NUMERIC, grad=False)
register("isin.Tensor_Scalar", lambda a: torch.isin(a, 2), small((4, 5)), dtypes=NUMERIC, grad=False)
register("isin.Tensor_Scalar_out", lambda a: torch.isin(a, 1, invert=True, out=mk(a, torch.bool)), small((4, 5)),
         dtypes=NUMERIC, grad=False)
register("isin.Scalar_Tensor", lambda b: torch.isin(2, b), small((6,)), dtypes=NUMERIC, grad=False)
register("isin.Scalar_Tensor_out", lambda b: torch.isin(1, b, out=mk(b, torch.bool)), small((6,)), dtypes=NUMERIC,
         grad=False)
