"""Sparse COO tensors on tpu, against CPU: dense <-> COO, the structure queries, coalesce,
copies both ways, clone; and ops beyond those raising NotImplementedError."""
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
    for op in (lambda: s + s, lambda: torch.mm(s, d), lambda: s * 2, lambda: d + s, lambda: torch.equal(s, s)):
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
