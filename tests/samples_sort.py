"""Samples for the sort family: sort (stable or not, descending, out=), topk, kthvalue,
median/nanmedian, mode; argsort and msort decompose into sort (argsort(stable=True) into
sort.stable).

CPU's unstable sort picks an unspecified index among tied values, so its samples use
distinct values (`distinct`); stable sort is deterministic on ties and gets tied inputs, and
so do topk, kthvalue and mode, whose kernels follow CPU's own algorithms step by step
(libstdc++'s nth_element / sort / partial_sort, TH's quickselect), long lines and NaN
included."""
import torch

from samples import ALL, FLOATS, NUMERIC, make, register


def distinct(shape, seed=0):
    """Distinct values, exact in every dtype (|v| < 128; non-negative for uint8)."""
    def inputs(dtype):
        n = 1
        for s in shape:
            n *= s
        g = torch.Generator().manual_seed(seed + n)
        v = torch.randperm(n, generator=g)
        if dtype != torch.uint8:
            v = v - n // 2
        return [v.reshape(shape).to(dtype)]
    return inputs


def ties(shape, seed=0):
    return lambda dtype: [make(shape, dtype, -2, 3, seed=seed) if dtype.is_floating_point or dtype == torch.bool
                          else make(shape, dtype, 0, 4, seed=seed)]


def nan_line(dtype):
    x = distinct((4, 7))(dtype)[0]
    x[1, 3] = float("nan")
    x[2, 0] = float("nan")
    x[2, 5] = float("nan")
    return [x]


def nan_ties(shape, dtype):
    """Tied values with about a fifth NaN."""
    x = ties(shape)(dtype)[0]
    x[make(shape, torch.float32, 0, 1, seed=5) < 0.2] = float("nan")
    return x


def mk(x, dtype=None):
    return torch.empty(0, dtype=dtype or x.dtype, device=x.device)


# ---------------------------------------------------------------- sort
register("sort", lambda x: torch.sort(x), distinct((5, 9)), dtypes=NUMERIC)
register("sort", lambda x: torch.sort(x, 0, descending=True), distinct((6, 5, 3)), dtypes=NUMERIC, name="sort dim 0 desc")
register("sort", lambda x: torch.sort(x), distinct((40,)), dtypes=FLOATS, name="sort long line")
register("sort", lambda x: torch.sort(x, -1, True), nan_line, dtypes=FLOATS, name="sort nan")
register("sort", lambda x: torch.sort(x, 0), lambda dt: [torch.tensor(3.5, dtype=dt)], dtypes=FLOATS, name="sort 0-dim")
register("sort.values", lambda x: torch.sort(x, 1, out=(mk(x), mk(x, torch.int64))), distinct((4, 6)), dtypes=NUMERIC,
         grad=False)
register("sort.stable", lambda x: torch.sort(x, stable=True), ties((6, 37)), dtypes=ALL, name="sort stable ties")
register("sort.stable", lambda x: torch.sort(x, dim=0, descending=True, stable=True), ties((30, 4)), dtypes=ALL,
         name="sort stable desc ties")
register("sort.stable", lambda x: torch.argsort(x, dim=1, stable=True), ties((5, 20)), dtypes=NUMERIC, grad=False,
         name="argsort stable")
register("sort", lambda x: torch.argsort(x, descending=True), distinct((3, 8)), dtypes=NUMERIC, grad=False,
         name="argsort")
register("sort", lambda x: torch.msort(x), distinct((7, 3)), dtypes=NUMERIC, name="msort")
register("sort.values_stable", lambda x: torch.sort(x, stable=True, dim=0, out=(mk(x), mk(x, torch.int64))),
         ties((9, 4)), dtypes=ALL, grad=False)

# ---------------------------------------------------------------- topk
register("topk", lambda x: torch.topk(x, 3), distinct((4, 9)), dtypes=NUMERIC)
register("topk", lambda x: torch.topk(x, 2, dim=0, largest=False), distinct((5, 6)), dtypes=NUMERIC, name="topk smallest")
register("topk", lambda x: torch.topk(x, 2, dim=1), nan_line, dtypes=FLOATS, name="topk nan")
register("topk", lambda x: [t.sort(-1).values for t in torch.topk(x, 4, sorted=False)], distinct((3, 10)),
         dtypes=FLOATS, name="topk unsorted")
register("topk", lambda x: torch.topk(x, 3), lambda dt: [make((4, 40), dt, low=0, high=4)], dtypes=NUMERIC,
         grad=False, name="topk ties")
register("topk", lambda x: torch.topk(x, 5, largest=False, sorted=False), lambda dt: [make((3, 50), dt, low=0, high=3)],
         dtypes=NUMERIC, grad=False, name="topk ties unsorted")
register("topk", lambda x: torch.topk(x, 2), lambda dt: [make((2, 300), dt, low=0, high=6)], dtypes=NUMERIC,
         grad=False, name="topk ties partial sort")
register("topk.values", lambda x: torch.topk(x, 2, out=(mk(x), mk(x, torch.int64))), distinct((3, 7)), dtypes=NUMERIC,
         grad=False)

# ---------------------------------------------------------------- kthvalue / median / mode
register("kthvalue", lambda x: torch.kthvalue(x, 3, 1), distinct((4, 7)), dtypes=NUMERIC)
register("kthvalue", lambda x: torch.kthvalue(x, 2, 0, keepdim=True), distinct((5, 3)), dtypes=NUMERIC, name="kthvalue keepdim")
register("kthvalue.values", lambda x: torch.kthvalue(x, 1, out=(mk(x), mk(x, torch.int64))), distinct((3, 5)),
         dtypes=NUMERIC, grad=False)
register("kthvalue", lambda x: torch.kthvalue(x, 17, 1), ties((4, 40)), dtypes=NUMERIC, grad=False, name="kthvalue ties")
register("kthvalue", lambda x: torch.kthvalue(x, 5, 0), ties((33, 3)), dtypes=NUMERIC, grad=False,
         name="kthvalue ties dim 0")
register("kthvalue", lambda x: torch.kthvalue(x, 30, 1), lambda dt: [nan_ties((3, 45), dt)], dtypes=FLOATS, grad=False,
         name="kthvalue ties nan")
register("median", lambda x: torch.median(x), distinct((5, 6)), dtypes=NUMERIC)
register("median", lambda x: torch.median(x.t()), distinct((4, 5)), dtypes=FLOATS, name="median transposed")
register("median", lambda x: torch.median(x), nan_line, dtypes=FLOATS, name="median nan")
register("nanmedian", lambda x: torch.nanmedian(x), nan_line, dtypes=FLOATS)
register("nanmedian", lambda x: torch.nanmedian(x), distinct((3, 5)), dtypes=NUMERIC, name="nanmedian ints")
register("median.dim", lambda x: torch.median(x, 1), distinct((4, 6)), dtypes=NUMERIC)
register("median.dim", lambda x: torch.median(x, 0, keepdim=True), distinct((5, 3)), dtypes=FLOATS, name="median dim keepdim")
register("median.dim", lambda x: torch.median(x, 1), nan_line, dtypes=FLOATS, name="median dim nan")
register("median.dim_values", lambda x: torch.median(x, 0, out=(mk(x), mk(x, torch.int64))), distinct((5, 4)),
         dtypes=NUMERIC, grad=False)
register("nanmedian.dim", lambda x: torch.nanmedian(x, 1), nan_line, dtypes=FLOATS)
register("nanmedian.dim_values", lambda x: torch.nanmedian(x, 1, out=(mk(x), mk(x, torch.int64))), nan_line,
         dtypes=FLOATS, grad=False)
register("mode", lambda x: torch.mode(x, 1), ties((6, 11)), dtypes=ALL)
register("mode", lambda x: torch.mode(x, 0, keepdim=True), ties((9, 4)), dtypes=NUMERIC, name="mode dim 0 keepdim")
register("mode.values", lambda x: torch.mode(x, out=(mk(x), mk(x, torch.int64))), ties((4, 12)), dtypes=NUMERIC,
         grad=False)
register("mode", lambda x: torch.mode(x, 1), ties((3, 70)), dtypes=ALL, grad=False, name="mode long lines")
register("mode", lambda x: torch.mode(x, 0), ties((50, 4)), dtypes=NUMERIC, grad=False, name="mode long lines dim 0")
register("mode", lambda x: torch.mode(x, 1), lambda dt: [nan_ties((4, 40), dt)], dtypes=FLOATS, grad=False,
         name="mode nan")
