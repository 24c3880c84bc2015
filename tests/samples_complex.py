"""complex64 samples for the kernels that move, place or build complex elements without
complex arithmetic (flag TPURT_OPF_COMPLEX): copies and fills, conj_physical, indexing and
shape kernels, pads, factories, torch.complex / torch.polar. Values include signed zeros,
infinities and NaNs where the op only moves them (they must survive bit for bit)."""
import torch
import torch.nn.functional as F

from samples import COMPLEX, make, register


def idx(*v):
    return torch.tensor(v, dtype=torch.int64)


def special(dt):
    """[x]: complex values whose parts are -0.0, inf, -inf and NaN among ordinary ones."""
    x = make((4, 5), dt)
    x[0, 0] = complex(-0.0, 0.0)
    x[1, 1] = complex(float("inf"), -0.0)
    x[2, 2] = complex(float("nan"), 1.0)
    x[3, 3] = complex(2.0, float("-inf"))
    return [x]


def _out(fn):
    return lambda *xs: fn(*xs, out=torch.empty(0, dtype=xs[0].dtype, device=xs[0].device))


C = dict(dtypes=COMPLEX, grad=False)

# copies, fills, conj
register("fill_.Scalar", lambda x: x.fill_(1.5 - 2j), [(3, 4)], **C, name="fill_ complex scalar")
register("fill_.Scalar", lambda x: x.fill_(3), [(3, 4)], **C, name="fill_ real scalar into complex")
register("fill_.Tensor", lambda x: x.fill_(torch.tensor(-1 + 0.5j)), [(3, 4)], **C, name="fill_ complex tensor")
register("zero_", lambda x: x.zero_(), [(5, 3)], **C, name="zero_ complex")
register("conj_physical.out", lambda x: torch.conj_physical(x), special, **C)
register("conj_physical_", lambda x: x.conj_physical_(), special, **C)
register("conj_physical_", lambda x: x.conj().resolve_conj(), special, **C, name="resolve_conj")
register("conj_physical_", lambda x: x.conj().clone(), [(3, 4)], **C, name="clone of a conj view")
register("conj_physical_", lambda x, y: x.conj().copy_(y), [(3, 4), (3, 4)], **C, name="copy_ into a conj view")

# indexing and shape kernels
register("index_select", lambda x, i: torch.index_select(x, 1, i), lambda dt: special(dt) + [idx(4, 0, 2, 2)], **C)
register("gather", lambda x, i: torch.gather(x, 1, i),
         lambda dt: special(dt) + [idx(0, 3, 3, 1, 2, 2, 0, 1).view(2, 4)], **C)
sc_in = lambda dt: [make((4, 5), dt), idx(0, 3, 1, 2, 2, 0, 1, 3).view(2, 4), make((2, 4), dt, seed=3)]  # noqa: E731
register("scatter.src", lambda x, i, s: torch.scatter(x, 0, i, s), sc_in, **C)
register("scatter_.value", lambda x, i, s: x.scatter_(1, i, 2 - 1j), sc_in, **C)
dup_in = lambda dt: [make((4, 5), dt), idx(0, 3, 0, 2, 2, 0, 0, 3).view(2, 4), make((2, 4), dt, seed=3)]  # noqa: E731
register("scatter.reduce", lambda x, i, s: torch.scatter(x, 0, i, s, reduce="multiply"), dup_in, **C,
         name="scatter multiply")
register("scatter_add", lambda x, i, s: torch.scatter_add(x, 0, i, s), dup_in, **C)
adv_in = lambda dt: [make((4, 5, 6), dt), idx(3, -1, 0), idx(4, 4, -5)]  # noqa: E731
register("index.Tensor", lambda x, i, j: x[i, :, j], adv_in, **C)
register("index.Tensor", lambda x: x[x.real > 0], [(4, 5)], **C, name="index bool mask")
put_in = lambda dt: [make((4, 5), dt), idx(3, -1, 0, 3), idx(4, 2, 1, 4), make((4,), dt, seed=5)]  # noqa: E731
register("index_put_", lambda x, i, j, v: x.index_put_((i[1:], j[1:]), v[1:]), put_in, **C)
register("index_put_", lambda x, i, j, v: x.index_put_((i, j), v, accumulate=True), put_in, **C,
         name="index_put_ accumulate")
cat_in = lambda dt: [make((2, 3), dt), make((4, 3), dt, seed=1)]  # noqa: E731
register("cat", lambda a, b: torch.cat([a, b]), cat_in, **C)
register("cat", lambda a, b: torch.stack([a, b[:2]], 1), cat_in, **C, name="stack")
register("cat", lambda a, b: torch.cat([a, b.real]), cat_in, **C, name="cat real into complex")
register("masked_select", lambda x: torch.masked_select(x, x.real > 0), special, **C)
register("narrow_copy", lambda x: torch.narrow_copy(x, 1, 1, 3), special, **C)
register("tril", lambda x: torch.tril(x, 1), special, **C)
register("triu_", lambda x: x.triu_(-1), special, **C)
register("flip", lambda x: torch.flip(x, (0, -1)), special, **C)
register("roll", lambda x: torch.roll(x, (2, -1), (0, 1)), special, **C)
register("index_fill.int_Scalar", lambda x, i: torch.index_fill(x, 0, i, 1 + 2j), lambda dt: special(dt) + [idx(3, -4)],
         **C)
register("take", lambda x, i: torch.take(x, i), lambda dt: special(dt) + [idx(0, 11, -1, 5, 5)], **C)
register("put_", lambda x, i, s: x.put_(i, s), lambda dt: [make((3, 4), dt), idx(0, 11, -2, 6), make((4,), dt, seed=1)],
         **C)
register("put_", lambda x, i, s: x.put_(i, s, accumulate=True),
         lambda dt: [make((3, 4), dt), idx(0, 11, 0, 6), make((4,), dt, seed=1)], **C, name="put_ accumulate")
register("masked_scatter", lambda x, s: x.masked_scatter(x.real > 0, s),
         lambda dt: [make((4, 5), dt), make((20,), dt, seed=2)], **C)
register("reflection_pad1d", lambda x: F.pad(x, (2, 1), mode="reflect"), [(2, 3, 5)], **C)
register("replication_pad2d", lambda x: F.pad(x, (1, 2, 2, 1), mode="replicate"), [(2, 3, 4, 5)], **C)

# factories
register("eye.out", lambda x: torch.eye(3, 4, dtype=x.dtype, device=x.device), [(1,)], **C, noncontig=False)
register("diag_embed", lambda x: torch.diag_embed(x, 1), [(2, 3)], **C)
for _a, _b in ((0, 1), (1 + 1j, -2 + 3j), (-2.5j, 4), (3, 3)):
    for _n in (1, 2, 7, 50):
        register("linspace.out", lambda x, a=_a, b=_b, n=_n: torch.linspace(a, b, n, dtype=x.dtype, device=x.device),
                 [(1,)], **C, noncontig=False, name=f"linspace {_a} {_b} {_n}")
        for _base in (10.0, 2.0, 0.5, -2.0):
            register("logspace.out",
                     lambda x, a=_a, b=_b, n=_n, base=_base: torch.logspace(a, b, n, base, dtype=x.dtype,
                                                                             device=x.device),
                     [(1,)], **C, noncontig=False, name=f"logspace {_a} {_b} {_n} base {_base}")
register("complex.out", lambda x: torch.complex(x.real, x.imag[:1]), [(3, 4)], **C)
register("polar.out", lambda x: torch.polar(x.real.abs(), x.imag), [(3, 4)], **C)
