"""Samples for the index and shape kernels. Index tensors are int64 (never differentiated);
negative and duplicate indices are exercised where the op allows them."""
import torch

from samples import ALL, FLOATS, NUMERIC, make, register

ALL64 = ALL + (torch.float64,)


def _out(fn):
    """fn(*inputs, out=empty tensor of the first input's dtype)."""
    return lambda *xs: fn(*xs, out=torch.empty(0, dtype=xs[0].dtype, device=xs[0].device))


def idx(*v):
    return torch.tensor(v, dtype=torch.int64)


# embedding: weight rows (backward sums rows per index: duplicates, padding, frequency scaling)
emb_in = lambda dt: [make((10, 4), dt), idx(1, 3, 3, 9, 0, 3).view(2, 3)]  # noqa: E731
register("embedding embedding_dense_backward", lambda w, i: torch.nn.functional.embedding(i, w), emb_in, dtypes=FLOATS)
register("embedding_dense_backward", lambda w, i: torch.nn.functional.embedding(i, w, padding_idx=3),
         lambda dt: [make((10, 4), dt), idx(1, 3, 3, 9, 0, 3).view(2, 3)], dtypes=FLOATS, name="embedding padding_idx")
register("embedding_dense_backward", lambda w, i: torch.nn.functional.embedding(i, w, scale_grad_by_freq=True),
         lambda dt: [make((10, 4), dt), idx(1, 3, 3, 9, 0, 3)], dtypes=FLOATS, name="embedding scale_grad_by_freq")
register("embedding", lambda w, i: torch.nn.functional.embedding(i, w), emb_in, dtypes=ALL64, grad=False,
         name="embedding all dtypes")
register("embedding.out", lambda w, i: torch.ops.aten.embedding.out(w, i, out=torch.empty(0, dtype=w.dtype,
                                                                                          device=w.device)),
         emb_in, dtypes=FLOATS, grad=False)

sel_in = lambda dt: [make((5, 6, 3), dt), idx(4, 0, 2, 2)]  # noqa: E731
register("index_select", lambda x, i: torch.index_select(x, 1, i), sel_in, dtypes=ALL64, grad=False)
register("index_select index_add_", lambda x, i: torch.index_select(x, -1, i[2:]), sel_in,
         dtypes=FLOATS, name="index_select grad")
register("index_select.out", lambda x, i: torch.index_select(x, 0, i, out=torch.empty(0, dtype=x.dtype,
                                                                                      device=x.device)),
         sel_in, dtypes=ALL64, grad=False)
register("index_select", lambda x, i: torch.index_select(x, 0, i), lambda dt: [make((), dt), idx(0)], dtypes=FLOATS,
         grad=False, noncontig=False, name="index_select 0-dim")

add_in = lambda dt: [make((5, 3), dt), idx(4, 0, 4), make((3, 3), dt, seed=1)]  # noqa: E731
register("index_add", lambda x, i, s: torch.index_add(x, 0, i, s, alpha=2), add_in, dtypes=NUMERIC, grad=False)
register("index_add.out", lambda x, i, s: torch.index_add(x, 0, i, s, out=torch.empty_like(x)), add_in,
         dtypes=NUMERIC, grad=False)
register("index_add_", lambda x, i, s: x.index_add_(0, i, s), add_in, dtypes=NUMERIC, grad=False)

gat_in = lambda dt: [make((4, 5), dt), idx(0, 3, 3, 1, 2, 2, 0, 1).view(2, 4)]  # noqa: E731
register("gather scatter_add_", lambda x, i: torch.gather(x, 0, i), gat_in, dtypes=FLOATS)
register("gather", lambda x, i: torch.gather(x, 1, i), gat_in, dtypes=ALL64, grad=False, name="gather dim 1")
register("gather.out", lambda x, i: torch.gather(x, -1, i, out=torch.empty(0, dtype=x.dtype, device=x.device)),
         gat_in, dtypes=ALL64, grad=False)

# scatter: unique destinations where the order of duplicates would matter
sc_in = lambda dt: [make((4, 5), dt), idx(0, 3, 1, 2, 2, 0, 1, 3).view(2, 4), make((2, 4), dt, seed=3)]  # noqa: E731
register("scatter.src gather", lambda x, i, s: torch.scatter(x, 0, i, s), sc_in, dtypes=FLOATS)
register("scatter.src", lambda x, i, s: torch.scatter(x, 0, i, s), sc_in, dtypes=ALL64, grad=False,
         name="scatter.src dtypes")
register("scatter.src_out", _out(lambda x, i, s, out: torch.scatter(x, 1, i, s, out=out)), sc_in, dtypes=ALL64,
         grad=False)
register("scatter_.src", lambda x, i, s: x.scatter_(1, i, s), sc_in, dtypes=ALL64, grad=False)
register("scatter.value", lambda x, i, s: torch.scatter(x, 0, i, 1.5), sc_in, dtypes=FLOATS)
register("scatter.value_out", _out(lambda x, i, s, out: torch.scatter(x, 0, i, 3, out=out)), sc_in, dtypes=NUMERIC,
         grad=False)
register("scatter_.value", lambda x, i, s: x.scatter_(1, i, -2), sc_in, dtypes=NUMERIC, grad=False)
dup_in = lambda dt: [make((4, 5), dt), idx(0, 3, 3, 2, 0, 0, 1, 3).view(2, 4), make((2, 4), dt, seed=3)]  # noqa: E731
for _r in ("add", "multiply"):
    register("scatter.reduce", lambda x, i, s, r=_r: torch.scatter(x, 0, i, s, reduce=r), dup_in, dtypes=NUMERIC,
             grad=False, name=f"scatter.reduce {_r}")
    register("scatter.reduce_out", _out(lambda x, i, s, out, r=_r: torch.scatter(x, 0, i, s, reduce=r, out=out)),
             dup_in, dtypes=NUMERIC, grad=False, name=f"scatter.reduce_out {_r}")
    register("scatter_.reduce", lambda x, i, s, r=_r: x.scatter_(0, i, s, reduce=r), dup_in, dtypes=NUMERIC,
             grad=False, name=f"scatter_.reduce {_r}")
    register("scatter.value_reduce", lambda x, i, s, r=_r: torch.scatter(x, 0, i, 2, reduce=r), dup_in,
             dtypes=NUMERIC, grad=False, name=f"scatter.value_reduce {_r}")
    register("scatter.value_reduce_out", _out(lambda x, i, s, out, r=_r: torch.scatter(x, 0, i, 2, reduce=r, out=out)),
             dup_in, dtypes=NUMERIC, grad=False, name=f"scatter.value_reduce_out {_r}")
    register("scatter_.value_reduce", lambda x, i, s, r=_r: x.scatter_(0, i, 2, reduce=r), dup_in, dtypes=NUMERIC,
             grad=False, name=f"scatter_.value_reduce {_r}")
register("scatter_add gather", lambda x, i, s: torch.scatter_add(x, 0, i, s), dup_in, dtypes=FLOATS)
register("scatter_add", lambda x, i, s: torch.scatter_add(x, 0, i, s), dup_in, dtypes=NUMERIC, grad=False,
         name="scatter_add dtypes")
register("scatter_add.out", _out(lambda x, i, s, out: torch.scatter_add(x, 1, i, s, out=out)), dup_in,
         dtypes=NUMERIC, grad=False)
register("scatter_add_", lambda x, i, s: x.scatter_add_(0, i, s), dup_in, dtypes=NUMERIC, grad=False)

# advanced indexing
adv_in = lambda dt: [make((4, 5, 6), dt), idx(3, -1, 0), idx(4, 4, -5)]  # noqa: E731
register("index.Tensor index_put_", lambda x, i, j: x[i, j], adv_in, dtypes=FLOATS)
register("index.Tensor", lambda x, i, j: x[i, j], adv_in, dtypes=ALL64, grad=False, name="index two tensors")
register("index.Tensor", lambda x, i, j: x[:, i], adv_in, dtypes=ALL64, grad=False, name="index after slice")
register("index.Tensor", lambda x, i, j: x[i, :, j], adv_in, dtypes=FLOATS, grad=False, name="index non-adjacent")
register("index.Tensor", lambda x, i, j: x[i.view(3, 1), :, j[:2]], adv_in, dtypes=FLOATS, grad=False,
         name="index broadcast")
register("index.Tensor", lambda x, i, j: x[..., i], adv_in, dtypes=FLOATS, grad=False,
         name="index last dim")
register("index.Tensor_out", lambda x, i, j: torch.ops.aten.index.Tensor_out(
    x, [i], out=torch.empty(0, dtype=x.dtype, device=x.device)), adv_in, dtypes=FLOATS, grad=False)


def _put(x, i, j, v, acc):
    y = x.clone()
    return y.index_put_((i, j), v, accumulate=acc)


def _set_cols(x, j, v):
    y = x.clone()
    y[:, j] = v[:, None]
    return y


def _masked_put(x, m, v):
    y = x.clone()
    y[m] = v
    return y


put_in = lambda dt: [make((4, 5), dt), idx(3, -1, 0, 3), idx(4, 2, 1, 4), make((4,), dt, seed=5)]  # noqa: E731
register("index_put_", lambda x, i, j, v: _put(x, i, j, v, True), put_in, dtypes=NUMERIC, grad=False,
         name="index_put_ accumulate")
register("index_put_", lambda x, i, j, v: _put(x, i[1:], j[1:], v[1:], False), put_in, dtypes=ALL64, grad=False)
register("index_put_ index.Tensor", lambda x, i, j, v: _put(x, i[1:], j[1:], v[1:], False), put_in, dtypes=FLOATS,
         name="index_put_ grad")
register("index_put_", lambda x, i, j, v: _set_cols(x, j[1:3], v), put_in, dtypes=FLOATS, grad=False,
         name="index_put_ None then index, broadcast value")
register("index_put_", lambda x, i, j, v: x.clone().index_put_((i[0],), torch.tensor(4, dtype=x.dtype), accumulate=True),
         put_in, dtypes=NUMERIC, grad=False, name="index_put_ 0-dim index, CPU scalar value")
register("index_put_", _masked_put, lambda dt: [make((4, 5), dt), make((4, 5), torch.bool), make((), dt)],
         dtypes=ALL64, grad=False, name="index_put_ bool mask")
register("index_put", lambda x, i, j, v: torch.index_put(x, (i, j), v, accumulate=True), put_in, dtypes=NUMERIC,
         grad=False)
register("index_put.out", lambda x, i, j, v: torch.ops.aten.index_put.out(
    x, [i, j], v, True, out=torch.empty(0, dtype=x.dtype, device=x.device)), put_in, dtypes=NUMERIC, grad=False)
register("_index_put_impl_", lambda x, i, j, v: torch.ops.aten._index_put_impl_(x.clone(), [i, j], v, True),
         put_in, dtypes=NUMERIC, grad=False)


# cat / tril / triu / arange / flip / roll
cat_in = lambda dt: [make((2, 3), dt), make((4, 3), dt, seed=1), make((1, 3), dt, seed=2)]  # noqa: E731
register("cat", lambda a, b, c: torch.cat([a, b, c]), cat_in, dtypes=ALL64)
register("cat", lambda a, b, c: torch.stack([a, a, a]), cat_in, dtypes=FLOATS, grad=False, name="stack")
register("cat", lambda a, b, c: torch.cat([a.t(), b.t(), torch.empty(0, dtype=a.dtype, device=a.device)], 1),
         cat_in, dtypes=FLOATS, name="cat dim 1 legacy empty")
register("cat", lambda a, b, c: torch.cat([a, b.to(torch.float64)]), cat_in, dtypes=FLOATS, grad=False,
         name="cat promotes")
register("cat.out", lambda a, b, c: torch.cat([a, b], out=torch.empty(0, dtype=a.dtype, device=a.device)), cat_in,
         dtypes=ALL64, grad=False)

for _n, _f in (("tril", torch.tril), ("triu", torch.triu)):
    register(_n, lambda x, f=_f: f(x), [(5, 4)], dtypes=ALL64, name=f"{_n}")
    register(_n, lambda x, f=_f: f(x, 1), [(2, 3, 4)], dtypes=FLOATS, name=f"{_n} batched diag 1")
    register(_n, lambda x, f=_f: f(x, -2), [(4, 6)], dtypes=FLOATS, name=f"{_n} diag -2")
    register(f"{_n}.out", lambda x, f=_f: f(x, out=torch.empty(0, dtype=x.dtype, device=x.device)), [(4, 4)],
             dtypes=ALL64, grad=False)
    register(f"{_n}_", lambda x, n=_n: getattr(x, n + "_")(-1), [(4, 5)], dtypes=ALL64, grad=False)

register("arange.start_out", lambda x: torch.arange(10, dtype=x.dtype, device=x.device), [(1,)],
         dtypes=NUMERIC + (torch.float64,), grad=False, noncontig=False)
register("arange.start_out", lambda x: torch.arange(-1.5, 2.3, 0.25, dtype=x.dtype, device=x.device), [(1,)],
         dtypes=FLOATS + (torch.float64,), grad=False, noncontig=False, name="arange float step")
register("arange.start_out", lambda x: torch.arange(7, -5, -3, dtype=x.dtype, device=x.device), [(1,)],
         dtypes=(torch.int64, torch.int32, torch.int8, torch.float32), grad=False, noncontig=False,
         name="arange negative step")

register("flip", lambda x: torch.flip(x, (0, -1)), [(3, 4, 5)], dtypes=ALL64)
register("flip.out", lambda x: torch.ops.aten.flip.out(x, [1], out=torch.empty(0, dtype=x.dtype, device=x.device)),
         [(3, 4)], dtypes=ALL64, grad=False)
register("narrow_copy", lambda x: torch.narrow_copy(x, 1, 1, 2), [(3, 4, 5)], dtypes=ALL64)
# grad=False: CPU's backward of a negative start fails (slice_backward slices [start, start + length))
register("narrow_copy", lambda x: torch.narrow_copy(x, -1, -3, 3), [(3, 4, 5)], dtypes=FLOATS, grad=False,
         name="narrow_copy negative")
register("narrow_copy.out", lambda x: torch.narrow_copy(x, 0, 3, 0, out=torch.empty(0, dtype=x.dtype, device=x.device)),
         [(3, 4)], dtypes=ALL64, grad=False)
register("roll", lambda x: torch.roll(x, (2, -1), (0, 2)), [(3, 4, 5)], dtypes=ALL64)
register("roll", lambda x: torch.roll(x, 7), [(3, 4)], dtypes=FLOATS, name="roll flat")
register("roll.out", lambda x: torch.ops.aten.roll.out(x, [1], [1], out=torch.empty(0, dtype=x.dtype,
                                                                                    device=x.device)),
         [(3, 4)], dtypes=ALL64, grad=False)

# index_fill / index_reduce / take / put_ / masked_scatter / channel_shuffle / max_unpool
fill_in = lambda dt: [make((4, 3), dt), idx(3, -4, 3)]  # noqa: E731
register("index_fill.int_Scalar", lambda x, i: torch.index_fill(x, 0, i, 2), fill_in, dtypes=ALL64)
register("index_fill.int_Tensor", lambda x, i: x.index_fill(1, i[:1] % 3, torch.tensor(-1.5, device=x.device)),
         fill_in, dtypes=FLOATS)
register("index_fill.int_Tensor", lambda x, i: x.index_fill(0, i, torch.tensor(2.5)), fill_in, dtypes=FLOATS,
         name="index_fill CPU scalar value")
register("index_fill_.int_Scalar", lambda x, i: x.index_fill_(0, i, 1), fill_in, dtypes=ALL, grad=False)
register("index_fill_.int_Tensor", lambda x, i: x.index_fill_(-1, i[:2] % 3, torch.tensor(3, device=x.device)),
         fill_in, dtypes=ALL, grad=False)
register("index_fill.int_Scalar_out index_fill.int_Tensor_out",
         lambda x, i: torch.ops.aten.index_fill.int_Scalar_out(x, 0, i, 5, out=torch.empty_like(x)), fill_in,
         dtypes=FLOATS, grad=False)

red_in = lambda dt: [make((5, 3), dt), idx(4, 0, 4, 1), make((4, 3), dt, seed=1)]  # noqa: E731
for _r in ("prod", "mean", "amax", "amin"):
    register("index_reduce", lambda x, i, s, r=_r: torch.index_reduce(x, 0, i, s, r), red_in, dtypes=FLOATS,
             name=f"index_reduce {_r}")
    register("index_reduce", lambda x, i, s, r=_r: torch.index_reduce(x, 0, i, s, r, include_self=False), red_in,
             dtypes=FLOATS + (torch.int64, torch.int32), grad=False, name=f"index_reduce {_r} exclude self")
register("index_reduce_ index_reduce.out", lambda x, i, s: x.index_reduce_(0, i, s, "mean"), red_in,
         dtypes=(torch.float32, torch.int64), grad=False)

ic_in = lambda dt: [make((5, 3), dt), idx(4, 0, 2), make((3, 3), dt, seed=1)]  # noqa: E731
register("index_copy", lambda x, i, s: torch.index_copy(x, 0, i, s), ic_in, dtypes=ALL64)
register("index_copy", lambda x, i, s: torch.index_copy(x, 1, i, s.t()), lambda dt: [make((3, 5), dt), idx(1, 1, 3),
                                                                                      make((3, 3), dt, seed=2)],
         dtypes=FLOATS, grad=False, name="index_copy repeated index dim 1")
register("index_copy.out index_copy_", lambda x, i, s: (torch.index_copy(x, 0, i, s, out=torch.empty_like(x)),
                                                        x.clone().index_copy_(0, i, s)), ic_in, dtypes=FLOATS,
         grad=False, name="index_copy out and in-place")

# scatter_reduce: many duplicates per slot, so 16-bit sums check CPU's order of accumulation
sr_in = lambda dt: [make((3, 4), dt), idx(*([2, 0, 2, 1, 2, 2] * 4)).view(6, 4) % 3,  # noqa: E731
                    make((6, 4), dt, seed=2, low=0.5, high=1.5)]
for _r in ("sum", "prod", "mean", "amax", "amin"):
    for _s in (True, False):
        register("scatter_reduce.two", lambda x, i, s, r=_r, inc=_s: torch.scatter_reduce(x, 0, i, s, r, include_self=inc),
                 sr_in, dtypes=FLOATS, name=f"scatter_reduce {_r} include_self={_s}")
        register("scatter_reduce.two", lambda x, i, s, r=_r, inc=_s: torch.scatter_reduce(x, 1, i.t(), s.t(), r,
                                                                                        include_self=inc),
                 lambda dt: [make((4, 3), dt), *sr_in(dt)[1:]], dtypes=NUMERIC + (torch.bool,) if _r != "mean" else NUMERIC,
                 grad=False, name=f"scatter_reduce {_r} include_self={_s} dim 1 dtypes")
register("scatter_reduce.two_out scatter_reduce_.two",
         lambda x, i, s: (torch.scatter_reduce(x, 0, i, s, "sum", out=torch.empty_like(x)),
                          x.clone().scatter_reduce_(0, i, s, "amax", include_self=False)), sr_in, dtypes=FLOATS,
         grad=False, name="scatter_reduce out and in-place")

take_in = lambda dt: [make((3, 4), dt), idx(0, 11, -1, 5, 5).view(5, 1)]  # noqa: E731
register("take take.out", lambda x, i: torch.take(x, i), take_in, dtypes=ALL64)
register("put_", lambda x, i, s: x.put(i.flatten(), s), lambda dt: [make((3, 4), dt), idx(0, 11, -2, 6),
                                                                   make((4,), dt, seed=1)], dtypes=FLOATS)
register("put_", lambda x, i, s: x.put_(i, s, accumulate=True), lambda dt: [make((3, 4), dt), idx(0, 11, 0, 6),
                                                                          make((2, 2), dt, seed=1)],
         dtypes=(torch.float32, torch.int64, torch.int32), grad=False, name="put_ accumulate")

msc_in = lambda dt: [make((3, 4), dt), make((4,), torch.bool, seed=4), make((14,), dt, seed=1)]  # noqa: E731
register("masked_scatter masked_select", lambda x, m, s: x.masked_scatter(m, s), msc_in, dtypes=FLOATS)
register("masked_scatter_ masked_scatter.out", lambda x, m, s: x.masked_scatter_(m, s), msc_in, dtypes=ALL64,
         grad=False)

register("channel_shuffle channel_shuffle.out", lambda x: torch.nn.functional.channel_shuffle(x, 3),
         lambda dt: [make((2, 6, 2, 3), dt)], dtypes=ALL64, grad=False)

unpool_in = lambda dt: list(torch.nn.functional.max_pool2d(make((2, 3, 4, 6), dt), 2, return_indices=True))  # noqa
register("max_unpool2d max_unpool2d.out gather", lambda x, i: torch.nn.functional.max_unpool2d(x, i, 2), unpool_in,
         dtypes=FLOATS)
unpool3_in = lambda dt: list(torch.nn.functional.max_pool3d(make((1, 2, 4, 4, 2), dt), 2, return_indices=True))  # noqa
register("max_unpool3d max_unpool3d.out", lambda x, i: torch.nn.functional.max_unpool3d(x, i, 2), unpool3_in,
         dtypes=FLOATS)
