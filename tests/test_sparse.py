"""Sparse COO tensors on tpu, against CPU: dense <-> COO, the structure queries, coalesce,
copies both ways, clone; add, mul and sparse_mask, and the sparse gradients of nn.Embedding and
nn.EmbeddingBag (sparse=True) trained with the optimizers that take them; and ops beyond those
raising NotImplementedError."""
import warnings

import pytest
import torch

import torch_tpu

DTYPES = [torch.float32, torch.int64, torch.bool, torch.bfloat16]


def dense_input(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    x[torch.rand(shape, generator=g) < 0.5] = 0  # about half the entries are zero
    return x.to(dtype)


def assert_same_coo(t, c):
    """A tpu COO tensor equals a CPU one: layout, sizes, dims, nnz, flag, indices, values."""
    assert t.device.type == "tpu" and t.layout == torch.sparse_coo == c.layout
    assert t.shape == c.shape and t.dtype == c.dtype
    assert (t.sparse_dim(), t.dense_dim(), t._nnz()) == (c.sparse_dim(), c.dense_dim(), c._nnz())
    assert t.is_coalesced() == c.is_coalesced()
    assert t._indices().device.type == "tpu" and t._values().device.type == "tpu"
    assert torch.equal(t._indices().cpu(), c._indices())
    assert torch.equal(t._values().cpu(), c._values())


SHAPES = [(), (5,), (3, 4), (2, 3, 4), (0, 3), (4, 0, 2)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_to_sparse_and_back(shape, dtype):
    x = dense_input(shape, dtype)
    s = x.to("tpu").to_sparse()
    assert_same_coo(s, x.to_sparse())
    assert torch.equal(s.to_dense().cpu(), x)
    assert s.to_dense().device.type == "tpu"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("sparse_dim", [1, 2])
def test_to_sparse_dim_gives_dense_values(sparse_dim, dtype):
    x = dense_input((4, 3, 2), dtype, seed=1)
    x[1] = 0  # a whole row is absent from the indices
    s = x.to("tpu").to_sparse(sparse_dim)
    assert_same_coo(s, x.to_sparse(sparse_dim))
    assert s.dense_dim() == 3 - sparse_dim
    assert torch.equal(s.to_dense().cpu(), x)


def test_all_zero_and_noncontiguous_inputs():
    z = torch.zeros(3, 4)
    assert_same_coo(z.to("tpu").to_sparse(), z.to_sparse())
    x = dense_input((6, 5), torch.float32, seed=2)
    for view in (lambda a: a.t(), lambda a: a[::2, 1:], lambda a: a.unsqueeze(1).expand(6, 3, 5)):
        s = view(x.to("tpu")).to_sparse()
        assert_same_coo(s, view(x).to_sparse())
        assert torch.equal(s.to_dense().cpu(), view(x))


def test_indices_values_require_coalesced_as_on_cpu():
    x = dense_input((3, 4), torch.float32)
    s = x.to("tpu").to_sparse()
    assert torch.equal(s.indices().cpu(), x.to_sparse().indices())
    assert torch.equal(s.values().cpu(), x.to_sparse().values())
    i, v = torch.tensor([[1, 0, 1]]), torch.tensor([1.0, 2.0, 3.0])
    for t in (torch.sparse_coo_tensor(i, v, (2,)), torch.sparse_coo_tensor(i, v, (2,), device="tpu")):
        with pytest.raises(RuntimeError, match="coalesced"):
            t.indices()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_coalesce_sums_duplicates_as_cpu(dtype):
    i = torch.tensor([[1, 0, 1, 1, 0, 2, 1], [2, 0, 2, 1, 0, 0, 2]])
    v = torch.tensor([1.5, -0.0, 2.25, 3.0, 4.0, 0.1, 7.0]).to(dtype)
    c = torch.sparse_coo_tensor(i, v, (3, 4))
    t = torch.sparse_coo_tensor(i.to("tpu"), v.to("tpu"), (3, 4), device="tpu")
    assert_same_coo(t, c)
    assert not t.is_coalesced()
    tc, cc = t.coalesce(), c.coalesce()
    assert_same_coo(tc, cc)
    assert torch.equal(tc._values().cpu().float().signbit(), cc._values().float().signbit())
    assert tc.coalesce() is tc  # already coalesced: returned as is
    assert torch.equal(t.to_dense().cpu(), c.to_dense())  # duplicates summed in to_dense too


def test_coalesce_hybrid_and_small():
    i = torch.tensor([[2, 0, 2, 1], [1, 1, 1, 0]])
    v = torch.randn(4, 3, generator=torch.Generator().manual_seed(3))
    c = torch.sparse_coo_tensor(i, v, (3, 2, 3))
    t = c.to("tpu")
    assert_same_coo(t.coalesce(), c.coalesce())
    assert torch.equal(t.to_dense().cpu(), c.to_dense())
    for nnz in (0, 1):  # CPU's fast path: a copy marked coalesced
        c = torch.sparse_coo_tensor(i[:, :nnz], v[:nnz], (3, 2, 3))
        assert_same_coo(c.to("tpu").coalesce(), c.coalesce())


def test_copies_between_cpu_and_tpu_and_clone():
    x = dense_input((4, 3, 2), torch.float32, seed=4)
    c = x.to_sparse(2)
    t = c.to("tpu")
    assert_same_coo(t, c)
    back = t.to("cpu")
    assert back.device.type == "cpu" and back.layout == torch.sparse_coo
    assert torch.equal(back.to_dense(), x)
    assert_same_coo(t.clone(), c)
    assert t.clone()._values().data_ptr() != t._values().data_ptr()
    assert_same_coo(t.to(torch.float64), c.to(torch.float64))
    dst = torch.empty(0, layout=torch.sparse_coo, device="tpu")
    dst.copy_(c)  # CPU -> tpu into an existing sparse tensor
    assert_same_coo(dst, c)
    host = torch.empty(0, layout=torch.sparse_coo)
    host.copy_(t)
    assert host.device.type == "cpu" and torch.equal(host.to_dense(), x)


def test_empty_zero_and_structure():
    e = torch.empty((2, 3), layout=torch.sparse_coo, device="tpu")
    assert (e.device.type, e._nnz(), e.sparse_dim(), e.dense_dim()) == ("tpu", 0, 2, 0)
    assert torch.equal(e.to_dense().cpu(), torch.zeros(2, 3))
    s = dense_input((3, 4), torch.float32).to("tpu").to_sparse()
    s.zero_()
    assert s._nnz() == 0 and s.shape == (3, 4)
    z = torch.zeros_like(dense_input((3, 4), torch.float32).to_sparse().to("tpu"))
    assert z.layout == torch.sparse_coo and z.device.type == "tpu" and z._nnz() == 0


def test_unsupported_sparse_ops_raise_not_implemented():
    s = dense_input((3, 3), torch.float32).to("tpu").to_sparse()
    d = torch.ones(3, 3, device="tpu")
    torch_tpu.metrics.reset()
    for op in (lambda: torch.mm(s, d), lambda: s.sum(0), lambda: torch.equal(s, s), lambda: s - s):
        with pytest.raises(NotImplementedError, match="Sparsetpu"):
            op()
    assert torch_tpu.metrics.fallback_ops() == {}  # nothing reached the dense CPU fallback


def test_cpu_sparse_tensors_unchanged():
    x = dense_input((3, 4), torch.float32)
    s = x.to_sparse()
    assert s.device.type == "cpu" and torch.equal((s + s).to_dense(), 2 * x)
    assert torch.equal(s.coalesce().to_dense(), x)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_to_sparse_opinfo_samples_and_out(dtype):
    # What PyTorch's TestCommon.test_out / test_out_warning do with the to_sparse OpInfo: run
    # each sample on the device, then require that out= (unsupported) raises
    from torch.testing._internal.common_methods_invocations import op_db
    op = next(o for o in op_db if o.name == "to_sparse")
    for sample in op.sample_inputs("tpu", dtype):
        result = op(sample.input, *sample.args, **sample.kwargs)
        assert_same_coo(result, op(sample.input.cpu(), *sample.args, **sample.kwargs))
        with pytest.raises(TypeError):
            op(sample.input, *sample.args, **sample.kwargs, out=torch.empty_like(result.to_dense()))


def test_coalesce_many_duplicates():
    # indices exact; float runs of 3+ entries round as their summation order does (CPU's
    # unstable sort order vs the original order here), integers exact
    g = torch.Generator().manual_seed(5)
    i = torch.randint(0, 5, (2, 3000), generator=g)
    for v in (torch.randn(3000, 2, generator=g), torch.randint(-9, 9, (3000, 2), generator=g)):
        c = torch.sparse_coo_tensor(i, v, (5, 5, 2))
        t, cc = c.to("tpu").coalesce(), c.coalesce()
        assert torch.equal(t._indices().cpu(), cc._indices())
        torch.testing.assert_close(t._values().cpu(), cc._values(), rtol=1e-5, atol=1e-4)
        assert v.is_floating_point() or torch.equal(t._values().cpu(), cc._values())
        assert torch.equal(c.to("tpu").to_dense().cpu(), c.to_dense())


def _coo(d, indices, values, size):
    return torch.sparse_coo_tensor(torch.tensor(indices), torch.tensor(values), size, device=d)


_S = lambda d: _coo(d, [[2, 0, 2]], [1.0, 2.0, 3.0], (4,))  # noqa: E731 - uncoalesced: two entries at 2
_H = lambda d: _coo(d, [[0, 2]], [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], (4, 3))  # noqa: E731 - hybrid
ARITHMETIC = {
    "dense + sparse": lambda d: torch.arange(4.0, device=d) + _S(d),
    "dense.add_(sparse, alpha)": lambda d: torch.ones(4, device=d).add_(_S(d), alpha=-0.5),
    "dense float64 + sparse float32": lambda d: torch.ones(4, dtype=torch.float64, device=d).add_(_S(d)),
    "integer dense + float sparse": lambda d: torch.ones(4, dtype=torch.int64, device=d) + _S(d),
    "hybrid dense.add_(sparse)": lambda d: torch.ones(4, 3, device=d).add_(_H(d), alpha=0.5),
    "add out=": lambda d: torch.add(torch.ones(4, device=d), _S(d), out=torch.empty(2, device=d)),
    "sparse + sparse": lambda d: _S(d) + _S(d).coalesce(),
    "coalesced + coalesced": lambda d: torch.add(_S(d).coalesce(), _S(d).coalesce(), alpha=2),
    "sparse.add_(sparse)": lambda d: _S(d).add_(_S(d)),
    "hybrid + hybrid": lambda d: _H(d) + _H(d),
    "sparse * scalar": lambda d: _S(d) * 2,
    "coalesced * scalar": lambda d: _S(d).coalesce() * 2,
    "coalesced.mul_(0-dim)": lambda d: _S(d).coalesce().mul_(torch.tensor(0.5, device=d)),
    "integer sparse * 0.5": lambda d: _coo(d, [[2, 0, 2]], [1, 2, 3], (4,)) * 0.5,
    "sparse * dense": lambda d: _S(d) * torch.arange(4.0, device=d),
    "coalesced * coalesced": lambda d: _S(d).coalesce() * _S(d).coalesce(),
    "sparse * coalesced": lambda d: _S(d) * _S(d).coalesce(),
    "coalesced * sparse": lambda d: _S(d).coalesce() * _S(d),
    "sparse * disjoint sparse": lambda d: _S(d) * _coo(d, [[1]], [5.0], (4,)),
    "sparse * empty sparse": lambda d: _S(d) * _coo(d, [[]], [], (4,)).to(torch.float32),
    "hybrid * hybrid": lambda d: _H(d) * _H(d),
    "conj of a complex sparse tensor, resolved": lambda d: _coo(d, [[0, 1]], [1 + 2j, 3 - 1j], (2,)).conj().resolve_conj(),
    "conj_physical of a real sparse tensor": lambda d: torch.conj_physical(_S(d)),
    "sparse_mask": lambda d: torch.arange(12.0, device=d).view(4, 3).sparse_mask(_H(d)),
    "sparse_mask of an uncoalesced mask": lambda d: torch.arange(12.0, device=d).view(4, 3).sparse_mask(
        _coo(d, [[2, 0, 2], [1, 1, 1]], [1.0, 1.0, 1.0], (4, 3))),
}
ARITHMETIC_ERRORS = {
    "sparse + dense": lambda d: _S(d) + torch.ones(4, device=d),
    "dense + sparse of another size": lambda d: torch.ones(5, device=d) + _S(d),
    "sparse + sparse of another size": lambda d: _S(d) + _coo(d, [[0]], [1.0], (5,)),
    "sparse + sparse of another density": lambda d: _H(d) + _coo(d, [[0, 1], [0, 1]], [1.0, 1.0], (4, 3)),
    "sparse_mask of another size": lambda d: torch.ones(3, 4, device=d).sparse_mask(_H(d)),
}


@pytest.mark.parametrize("name", list(ARITHMETIC))
def test_arithmetic_as_cpu(name):
    expected, actual = ARITHMETIC[name]("cpu"), ARITHMETIC[name]("tpu")
    assert actual.device.type == "tpu"
    if expected.is_sparse and not expected.is_coalesced():
        # which entries an uncoalesced sum lists is CPU's loop's (its merge of an unsorted operand
        # reorders them): the tensor they make, and the flag, are the contract
        assert not actual.is_coalesced()
        assert_same_coo(actual.coalesce(), expected.coalesce())
    elif expected.is_sparse:
        assert_same_coo(actual, expected)
    else:
        assert actual.dtype == expected.dtype and torch.equal(actual.cpu(), expected)


@pytest.mark.parametrize("name", list(ARITHMETIC_ERRORS))
def test_arithmetic_errors_as_cpu(name):
    with pytest.raises(RuntimeError) as cpu:
        ARITHMETIC_ERRORS[name]("cpu")
    with pytest.raises(type(cpu.value)) as tpu:
        ARITHMETIC_ERRORS[name]("tpu")
    first_line = lambda e: str(e).split("\n")[0].split(" (Triggered internally")[0]  # noqa: E731
    assert first_line(tpu.value) == first_line(cpu.value)


def _train(device, module, optimizer, micro_batches):
    torch.manual_seed(0)
    model = module().double().to(device)
    opt = optimizer(model.parameters())
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        opt.zero_grad()
        for _ in range(micro_batches):  # two: the sparse gradients accumulate
            out = model(torch.randint(0, 50, (6, 4), generator=g).to(device))
            (out * torch.arange(out.numel(), device=device).view_as(out)).sum().backward()
        assert model.weight.grad.is_sparse
        opt.step()
    return model.weight.detach().cpu()


MODULES = {"Embedding": lambda: torch.nn.Embedding(50, 8, sparse=True),
           "EmbeddingBag sum": lambda: torch.nn.EmbeddingBag(50, 8, mode="sum", sparse=True),
           "EmbeddingBag mean": lambda: torch.nn.EmbeddingBag(50, 8, mode="mean", sparse=True)}
OPTIMIZERS = {"SGD": lambda p: torch.optim.SGD(p, lr=0.1),
              "SGD momentum": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
              "SparseAdam": lambda p: torch.optim.SparseAdam(p, lr=0.01),
              "Adagrad": lambda p: torch.optim.Adagrad(p, lr=0.1)}


@pytest.mark.parametrize("micro_batches", [1, 2])
@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
@pytest.mark.parametrize("module", list(MODULES))
def test_sparse_embedding_gradients_train_as_cpu(module, optimizer, micro_batches):
    # float64: CPU adds duplicate entries into the weight one after another, tpu's index_put_
    # sums them first, so the weights agree to rounding, not bit for bit
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a CPU fallback would warn
        warnings.filterwarnings("ignore", "Sparse invariant checks")
        actual = _train("tpu", MODULES[module], OPTIMIZERS[optimizer], micro_batches)
    expected = _train("cpu", MODULES[module], OPTIMIZERS[optimizer], micro_batches)
    torch.testing.assert_close(actual, expected, rtol=1e-13, atol=1e-13)
