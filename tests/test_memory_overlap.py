"""Writes whose memory overlaps what they read, as PyTorch CPU judges them: an in-place op may
not read an input sharing part of self's memory (`x[1:].add_(x[:-1])` would read values it
already overwrote), an indexed write (index_add_, scatter_, put_, index_put_, ...) may not read
any memory it writes, no op writes through an expanded tensor, and copy_ follows the same rule.
PyTorch's test_torch found tpu computing these (test_*_mem_overlap). Where CPU computes, tpu must
give CPU's result, except where CPU's is an accident of its loop order (below)."""
import warnings

import pytest
import torch

import torch_tpu  # noqa: F401


def _ind(d):
    return torch.tensor([2, 1, 0], device=d)


def _mask(d):
    return torch.tensor([True, False, True, True, False, False], device=d)


def _on(d, fn, *shapes, dtype=torch.float32):
    torch.manual_seed(0)
    return fn(*[torch.rand(s, dtype=dtype).to(d) for s in shapes])


CALLS = {
    # indexed writes: source, values or index sharing memory with self
    "index_add_ source is self": lambda d: _on(d, lambda y: y.index_add_(0, _ind(d), y[:3]), 6),
    "index_add_ index is self": lambda d: (lambda i: i.index_add_(0, i, i.clone()))(_ind(d)),
    "index_add_ source is index": lambda d: (lambda i: i.index_add_(0, i.clone(), i))(_ind(d)),
    "index_add out= is source": lambda d: _on(d, lambda a, s: torch.index_add(a, 0, _ind(d)[:2], s, out=s), 2, 2),
    "index_add out= is self": lambda d: _on(d, lambda a, s: torch.index_add(a, 0, _ind(d)[1:], s, out=a), 2, 2),
    "index_copy_ source is self": lambda d: _on(d, lambda y: y.index_copy_(0, _ind(d), y[:3]), 6),
    "index_copy_ index is self": lambda d: (lambda i: i.index_copy_(0, i, i.clone()))(_ind(d)),
    "index_copy out= is source": lambda d: _on(d, lambda a, s: torch.index_copy(a, 0, _ind(d)[1:], s, out=s), 2, 2),
    "index_fill_ index is self": lambda d: (lambda i: i.index_fill_(0, i, 0))(_ind(d)),
    "index_fill_ 0-dim value from self": lambda d: _on(d, lambda y: y.index_fill_(0, _ind(d), y[4]), 6),
    "index_reduce_ source is self": lambda d: _on(d, lambda y: y.index_reduce_(0, _ind(d)[1:], y[:2], "prod"), 6),
    "put_ 0-dim source from self": lambda d: _on(d, lambda y: y.put_(_ind(d)[0], y[0]), 6),
    "put_ source is self": lambda d: _on(d, lambda y: y.put_(_ind(d), y[:3]), 6),
    "put_ index and source are self": lambda d: (lambda i: i.put_(i, i))(_ind(d)),
    "put_ distinct tensors": lambda d: _on(d, lambda y, v: y.put_(_ind(d), v), 6, 3),
    "index_put_ values from self": lambda d: _on(d, lambda y: y.index_put_((_ind(d),), y[:3]), 6),
    "index_put_ accumulate values from self": lambda d: _on(
        d, lambda y: y.index_put_((_ind(d),), y[:3], accumulate=True), 6),
    "index_put_ index is self": lambda d: (lambda i: i.index_put_((i,), i.clone()))(_ind(d)),
    "scatter_ src is self": lambda d: _on(d, lambda s: s.scatter_(0, _ind(d), s), 3),
    "scatter_ index is self": lambda d: (lambda i: i.scatter_(0, i, i.clone()))(_ind(d)),
    "scatter out= is src": lambda d: _on(d, lambda a, s: torch.scatter(a, 0, _ind(d)[1:], s, out=s), 2, 2),
    "scatter_add_ src from self": lambda d: _on(d, lambda y: y.scatter_add_(0, _ind(d)[1:], y[:2]), 6),
    "scatter_reduce_ src from self": lambda d: _on(d, lambda y: y.scatter_reduce_(0, _ind(d)[1:], y[:2], "sum"), 6),
    # elementwise in-place: an input sharing part of self; the very same view is allowed
    "masked_fill_ mask shifted over self": lambda d: (lambda m: m[1:].masked_fill_(m[:-1], False))(_mask(d)),
    "masked_fill_ 0-dim value from self": lambda d: _on(d, lambda y: y.masked_fill_(_mask(d), y[0]), 6),
    "addcmul_ tensor1 is self": lambda d: _on(d, lambda y: y.addcmul_(y, y), 6),
    "addcmul_ tensor1 is self[0]": lambda d: _on(d, lambda y: y.addcmul_(y[0], y), 6),
    "where out= is self": lambda d: _on(d, lambda y: torch.where(y > 0.5, y, y[0], out=y), 6),
    "<<= shifted view (float: the overlap is found first)": lambda d: _on(d, lambda x: x[:-1].__ilshift__(x[1:]), 3),
    # copy_
    "copy_ shifted view": lambda d: _on(d, lambda z: z[:9].copy_(z[3:12]), 18, dtype=torch.float64),
    "copy_ transposed self": lambda d: _on(d, lambda a: a.copy_(a.t()), (3, 3)),
    "copy_ into an expanded tensor": lambda d: _on(d, lambda a, b: a.expand(3).copy_(b), 1, 3),
    "copy_ of itself": lambda d: _on(d, lambda a: a.copy_(a), 6),
    "copy_ same memory, same strides": lambda d: _on(d, lambda a: a.copy_(a.view(2, 3).view(6)), 6),
}

BINARY_IN_PLACE = ["add_", "sub_", "mul_", "div_", "atan2_", "copysign_", "fmod_", "remainder_", "hypot_", "pow_",
                   "nextafter_", "xlogy_", "eq_", "lt_", "clamp_min_", "clamp_max_", "logical_and_", "heaviside_",
                   "lerp_"]
for _name in BINARY_IN_PLACE:
    _extra = (0.5,) if _name == "lerp_" else ()
    CALLS[f"{_name} of self[0]"] = lambda d, n=_name, e=_extra: _on(d, lambda y: getattr(y, n)(y[0], *e), 6)
    CALLS[f"{_name} of a shifted view"] = lambda d, n=_name, e=_extra: _on(d, lambda y: getattr(y[1:], n)(y[:-1], *e), 6)
    CALLS[f"{_name} of self"] = lambda d, n=_name, e=_extra: _on(d, lambda y: getattr(y, n)(y, *e), 6)


# Ops that read an input after they start writing an output sharing its memory: CPU's BLAS
# writes over its own operands (mm(a, a, out=a) is garbage on CPU) and its masked_scatter_ reads
# source values it already overwrote. tpu computes such calls into private outputs and copies
# them back (runtime/src/launch.c): the functional result a TPU (XLA) computes, checked against
# the same call with the inputs cloned, in float64 on CPU.
FUNCTIONAL = {
    "mm out= is both operands": (lambda a: torch.mm(a, a, out=a), lambda a: a @ a),
    "matmul out= is both operands": (lambda a: torch.matmul(a, a, out=a), lambda a: a @ a),
    "addmm_ mat1 and mat2 are self": (lambda a: a.addmm_(a, a), lambda a: a + a @ a),
    "addmm_ mat1 is self transposed": (lambda a: a.addmm_(a.t(), a), lambda a: a + a.t() @ a),
    "addmm out= is every input": (lambda a: torch.addmm(a, a, a, out=a), lambda a: a + a @ a),
    "baddbmm_ batches are self": (lambda a: a[None].baddbmm_(a[None], a[None])[0], lambda a: a + a @ a),
    "bmm out= is both operands": (lambda a: torch.bmm(a[None], a[None], out=a[None])[0], lambda a: a @ a),
    "addmv_ self is the vector": (lambda a: a[0].addmv_(a, a[0]), lambda a: a[0] + a @ a[0]),
    "matrix_power out= is the matrix": (lambda a: torch.linalg.matrix_power(a, 3, out=a), lambda a: a @ a @ a),
    "masked_scatter_ source is self": (lambda a: a.view(-1)[:6].masked_scatter_(_mask(a.device), a.view(-1)[:6]),
                                       lambda a: a.view(-1)[:6].clone().masked_scatter_(_mask("cpu"), a.view(-1)[:6])),
}


@pytest.mark.parametrize("n", [3, 70])
@pytest.mark.parametrize("name", sorted(FUNCTIONAL))
def test_overlapping_operands_read_as_copies(name, n):
    aliased, reference = FUNCTIONAL[name]
    a = torch.rand(n, n, dtype=torch.float64, generator=torch.Generator().manual_seed(n))
    actual = aliased(a.to("tpu")).cpu()
    torch.testing.assert_close(actual, reference(a.clone()), rtol=1e-12, atol=1e-12)


def _run(fn, d):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(d), None
        except Exception as e:  # noqa: BLE001 - CPU's exception is the contract
            return None, e


@pytest.mark.parametrize("name", sorted(CALLS))
def test_overlapping_writes_as_cpu(name):
    expected, cpu_error = _run(CALLS[name], "cpu")
    actual, tpu_error = _run(CALLS[name], "tpu")
    if cpu_error is not None:
        assert tpu_error is not None, f"CPU raised {cpu_error!r}; tpu computed"
        assert type(tpu_error) is type(cpu_error)
        assert str(tpu_error).split(".")[0] == str(cpu_error).split(".")[0]
        return
    assert tpu_error is None, f"tpu raised {tpu_error!r}; CPU computed"
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True)


@pytest.mark.parametrize("op,args", [
    ("random_", ()), ("uniform_", ()), ("cauchy_", ()), ("log_normal_", ()), ("exponential_", ()),
    ("geometric_", (0.5,)), ("normal_", ()), ("bernoulli_", ()), ("bernoulli_", (0.1,)),
])
def test_random_fills_refuse_an_expanded_tensor(op, args):
    x = torch.rand((1, 3), device="tpu").expand((3, 3))
    with pytest.raises(RuntimeError, match="unsupported operation: more than one element"):
        getattr(x, op)(*args)


# CPU writes an expanded self element by element, with a deprecation warning, for these three
# ops (and x[mask] = v, x[idx] = v, which reach them): tpu runs such calls on the CPU fallback
# for that order. The whole base tensor is compared, so the gaps a strided expansion leaves
# (base[:, 1:2].expand(3, 4) spans the other columns) must come back unchanged.
EXPANDED_SELF = {
    "index_fill_": lambda x, d: x.index_fill_(1, torch.tensor([2], device=d), -1.0),
    "masked_fill_": lambda x, d: x.masked_fill_(torch.tensor([[False, True, False, False]] * 3, device=d), -2.0),
    "masked_fill_ 0-dim tensor value": lambda x, d: x.masked_fill_(torch.tensor([True, False, False, False], device=d),
                                                                   torch.tensor(-3.0, device=d)),
    "index_put_": lambda x, d: x.index_put_((torch.tensor([0, 2], device=d),), torch.tensor([-4.0], device=d)),
    "index_put_ accumulate (serial sums)": lambda x, d: x.index_put_(
        (torch.tensor([0, 1, 1], device=d), torch.tensor([3, 0, 2], device=d)), torch.tensor([1.0, 2.0, 4.0], device=d),
        accumulate=True),
    "setitem with a mask": lambda x, d: x.__setitem__(torch.tensor([[True, False, False, True]] * 3, device=d), -5.0),
    "setitem with indices": lambda x, d: x.__setitem__((torch.tensor([1], device=d), torch.tensor([3], device=d)), -6.0),
}


@pytest.mark.parametrize("name", sorted(EXPANDED_SELF))
def test_writes_through_an_expanded_self_as_cpu(name):
    results = {}
    for d in ("cpu", "tpu"):
        base = torch.arange(15.0).view(3, 5).to(d)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            EXPANDED_SELF[name](base[:, 1:2].expand(3, 4), d)
        results[d] = base.cpu(), {str(w.message).split(" (Triggered")[0] for w in caught if "on expanded tensors" in str(w.message)}
    assert results["cpu"][1], "CPU's deprecation warning"
    assert results["tpu"][1] == results["cpu"][1]
    assert torch.equal(results["tpu"][0], results["cpu"][0])
