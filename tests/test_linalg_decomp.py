"""SVD, eigh, lstsq, LDL, matrix_exp and householder_product against PyTorch CPU beyond the op
samples: the conventions CPU's LAPACK fixes (Bunch-Kaufman pivots, lstsq's outputs per driver),
the canonical sign of singular/eigen vectors, empty and rank-deficient inputs, and errors."""
import pytest
import torch

import torch_tpu

F64 = torch.float64


def rand(*shape, seed=0, dtype=F64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def no_fallback():
    assert not torch_tpu.metrics.fallback_ops()


@pytest.fixture(autouse=True)
def _reset():
    torch_tpu.metrics.reset()
    yield
    no_fallback()


# ---------------------------------------------------------------- SVD
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 6, 2), (1, 1)])
@pytest.mark.parametrize("full", [False, True])
def test_svd_factors_and_canonical_sign(shape, full):
    a = rand(*shape)
    U, S, Vh = (t.cpu() for t in torch.linalg.svd(a.to("tpu"), full_matrices=full))
    U0, S0, Vh0 = torch.linalg.svd(a, full_matrices=full)
    assert U.shape == U0.shape and S.shape == S0.shape and Vh.shape == Vh0.shape
    torch.testing.assert_close(S, S0)
    k = S.shape[-1]
    torch.testing.assert_close((U[..., :k] * S.unsqueeze(-2)) @ Vh[..., :k, :], a)
    eye = lambda n: torch.eye(n, dtype=F64).expand(*shape[:-2], n, n)  # noqa: E731
    torch.testing.assert_close(U.mT @ U, eye(U.shape[-1]))
    torch.testing.assert_close(Vh @ Vh.mT, eye(Vh.shape[-2]))
    # each pair's longer vector has its largest-magnitude component positive
    longer = U if shape[-2] >= shape[-1] else Vh.mT
    top = longer.abs().argmax(-2, keepdim=True)
    assert (longer.gather(-2, top) > 0).all()


def test_svd_rank_deficient_full_matrices_orthogonal():
    a = rand(6, 4)
    a[:, 2] = a[:, 0] - a[:, 1]
    a[:, 3] = 0
    U, S, Vh = (t.cpu() for t in torch.linalg.svd(a.to("tpu")))
    torch.testing.assert_close(S, torch.linalg.svdvals(a), atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(U.mT @ U, torch.eye(6, dtype=F64))
    torch.testing.assert_close(Vh @ Vh.mT, torch.eye(4, dtype=F64))
    torch.testing.assert_close(U[:, :4] * S @ Vh, a)


# From 24 columns (of the tall orientation) the SVD bidiagonalizes (linalg_bidiag.c) instead of
# Jacobi: the same contract, checked across the switch, complex, rank-deficient and graded input.
@pytest.mark.parametrize("shape", [(23, 23), (24, 24), (60, 30), (30, 60), (3, 40, 25), (97, 97)])
@pytest.mark.parametrize("dtype", [F64, torch.complex64])
@pytest.mark.parametrize("full", [False, True])
def test_svd_bidiagonal_path(shape, dtype, full):
    a = rand(*shape, dtype=dtype)
    U, S, Vh = (t.cpu() for t in torch.linalg.svd(a.to("tpu"), full_matrices=full))
    S0 = torch.linalg.svdvals(a.to(torch.complex128 if dtype.is_complex else F64)).to(S.dtype)
    # the bidiagonal path's bound (LAPACK gesdd's): a small multiple of k eps |A|
    k = S.shape[-1]
    torch.testing.assert_close(S, S0, atol=k * torch.finfo(S.dtype).eps * S0.max().item(), rtol=0)
    k = S.shape[-1]
    torch.testing.assert_close((U[..., :k] * S.unsqueeze(-2).to(dtype)) @ Vh[..., :k, :], a)
    eye = lambda n: torch.eye(n, dtype=dtype).expand(*shape[:-2], n, n)  # noqa: E731
    torch.testing.assert_close(U.mH @ U, eye(U.shape[-1]))
    torch.testing.assert_close(Vh @ Vh.mH, eye(Vh.shape[-2]))
    assert (S[..., :-1] >= S[..., 1:]).all()
    longer = U if shape[-2] >= shape[-1] else Vh.mH
    top = longer.abs().argmax(-2, keepdim=True)
    lead = longer.gather(-2, top)
    assert (lead.real > 0).all() and (not lead.is_complex() or (lead.imag == 0).all())


@pytest.mark.parametrize("m,n,rank", [(200, 200, 12), (300, 40, 5), (40, 300, 40)])
def test_svd_bidiagonal_rank_deficient(m, n, rank):
    a = rand(m, rank, seed=1) @ rand(rank, n, seed=2)
    S = torch.linalg.svdvals(a.to("tpu")).cpu()
    S0 = torch.linalg.svdvals(a)
    torch.testing.assert_close(S, S0, atol=1e-12 * S0[0].item(), rtol=0)
    U, S, Vh = (t.cpu() for t in torch.linalg.svd(a.to("tpu"), full_matrices=True))
    torch.testing.assert_close(U.mT @ U, torch.eye(m, dtype=F64))
    torch.testing.assert_close(Vh @ Vh.mT, torch.eye(n, dtype=F64))
    k = min(m, n)
    torch.testing.assert_close(U[:, :k] * S @ Vh[:k], a)


def test_svd_bidiagonal_zero_and_graded_columns():
    # exact zeros in the bidiagonal (zero rows/columns) and singular values over 30 decades
    a = rand(50, 40)
    a[:, 7] = 0
    a[13, :] = 0
    a = a * torch.logspace(0, -30, 40, dtype=F64)
    U, S, Vh = (t.cpu() for t in torch.linalg.svd(a.to("tpu"), full_matrices=False))
    S0 = torch.linalg.svdvals(a)
    torch.testing.assert_close(S, S0, atol=1e-13 * S0[0].item(), rtol=0)
    torch.testing.assert_close(U * S @ Vh, a, atol=1e-14, rtol=0)
    torch.testing.assert_close(U.mT @ U, torch.eye(40, dtype=F64))
    z = torch.linalg.svd(torch.zeros(30, 30, dtype=F64).to("tpu"))
    assert (z.S.cpu() == 0).all()
    torch.testing.assert_close(z.U.cpu().mT @ z.U.cpu(), torch.eye(30, dtype=F64))


def test_svd_float32_large():
    a = rand(128, 96, dtype=torch.float32)
    U, S, Vh = (t.cpu() for t in torch.linalg.svd(a.to("tpu"), full_matrices=False))
    torch.testing.assert_close(S, torch.linalg.svdvals(a.double()).float())
    torch.testing.assert_close(U * S @ Vh, a, atol=1e-4, rtol=1e-4)


# From 24 columns eigh reduces to a real tridiagonal (linalg_householder.c) instead of Jacobi.
@pytest.mark.parametrize("shape", [(23, 23), (24, 24), (60, 60), (3, 30, 30), (97, 97)])
@pytest.mark.parametrize("dtype", [F64, torch.complex64])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_tridiagonal_path(shape, dtype, uplo):
    a = rand(*shape, dtype=dtype)
    a = a + a.mH
    w, v = (t.cpu() for t in torch.linalg.eigh(a.to("tpu"), UPLO=uplo))
    w0 = torch.linalg.eigvalsh(a.to(torch.complex128 if dtype.is_complex else F64)).to(w.dtype)
    n = shape[-1]
    torch.testing.assert_close(w, w0, atol=n * torch.finfo(w.dtype).eps * w0.abs().max().item(), rtol=0)
    torch.testing.assert_close((v * w.unsqueeze(-2).to(dtype)) @ v.mH, a)
    torch.testing.assert_close(v.mH @ v, torch.eye(n, dtype=dtype).expand_as(v))
    assert (w[..., :-1] <= w[..., 1:]).all()
    lead = v.gather(-2, v.abs().argmax(-2, keepdim=True))
    assert (lead.real > 0).all() and (not lead.is_complex() or (lead.imag == 0).all())
    torch.testing.assert_close(torch.linalg.eigvalsh(a.to("tpu"), UPLO=uplo).cpu(), w, rtol=0, atol=0)


def test_eigh_tridiagonal_repeated_and_graded():
    q, _ = torch.linalg.qr(rand(50, 50, seed=3))
    for values in (torch.cat([torch.ones(30), 2 * torch.ones(20)]), torch.logspace(0, -12, 50)):
        a = (q * values.double()) @ q.T
        a = (a + a.T) / 2
        w, v = (t.cpu() for t in torch.linalg.eigh(a.to("tpu")))
        torch.testing.assert_close(w, values.double().sort().values, atol=1e-13, rtol=0)
        torch.testing.assert_close(v.T @ v, torch.eye(50, dtype=F64))
        torch.testing.assert_close((v * w) @ v.T, a, atol=1e-14, rtol=0)


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0, 0), (0, 2, 2), (2, 0, 3)])
@pytest.mark.parametrize("full", [False, True])
def test_svd_empty(shape, full):
    exp = torch.linalg.svd(torch.zeros(shape), full_matrices=full)
    act = torch.linalg.svd(torch.zeros(shape, device="tpu"), full_matrices=full)
    for a, e in zip(act, exp):
        assert a.shape == e.shape
        torch.testing.assert_close(a.cpu(), e)


def test_svd_values_only_and_nonfinite():
    a = rand(3, 4, 5, dtype=torch.float32)
    torch.testing.assert_close(torch.linalg.svdvals(a.to("tpu")).cpu(), torch.linalg.svdvals(a))
    a[1, 2, 3] = float("nan")
    with pytest.raises(RuntimeError, match="non-finite"):
        torch.linalg.svdvals(a.to("tpu")).cpu()


# ---------------------------------------------------------------- eigh
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_reads_one_triangle(uplo):
    a = rand(3, 5, 5)
    w, v = (t.cpu() for t in torch.linalg.eigh(a.to("tpu"), UPLO=uplo))
    w0, v0 = torch.linalg.eigh(a, UPLO=uplo)
    torch.testing.assert_close(w, w0)
    torch.testing.assert_close(v.abs(), v0.abs())
    sym = a.tril() + a.tril(-1).mT if uplo == "L" else a.triu() + a.triu(1).mT
    torch.testing.assert_close(v @ torch.diag_embed(w) @ v.mT, sym)
    top = v.abs().argmax(-2, keepdim=True)
    assert (v.gather(-2, top) > 0).all()


def test_eigh_repeated_eigenvalues():
    q, _ = torch.linalg.qr(rand(5, 5))
    a = q @ torch.diag(torch.tensor([1.0, 1.0, 2.0, 2.0, 2.0], dtype=F64)) @ q.mT
    w, v = (t.cpu() for t in torch.linalg.eigh(a.to("tpu")))
    torch.testing.assert_close(w, torch.linalg.eigvalsh(a))
    torch.testing.assert_close(v.mT @ v, torch.eye(5, dtype=F64))
    torch.testing.assert_close(v @ torch.diag(w) @ v.mT, a)


@pytest.mark.parametrize("call", [
    lambda d: torch.linalg.eigh(torch.ones(3, 4, device=d)),
    lambda d: torch.linalg.eigvalsh(torch.ones(3, device=d)),
    lambda d: torch.linalg.svd(torch.ones(3, device=d)),
])
def test_shape_and_dtype_errors_match_cpu(call):
    with pytest.raises(Exception) as cpu:
        call("cpu")
    with pytest.raises(Exception) as tpu:
        call("tpu")
    assert type(tpu.value) is type(cpu.value)


def test_eigh_integer_input_not_implemented_like_cpu():
    # the meta function refuses it with NotImplementedError, which the generic path hands to the
    # CPU fallback (as for geqrf): that raises CPU's own error, synchronously
    with pytest.raises(NotImplementedError, match="linalg_eigh_cpu"):
        torch.linalg.eigh(torch.ones(3, 3, dtype=torch.long, device="tpu"))
    torch_tpu.metrics.reset()


# ---------------------------------------------------------------- lstsq
@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
@pytest.mark.parametrize("shapes", [((5, 3), (5, 2)), ((3, 5), (3, 2)), ((2, 4, 4), (2, 4)), ((2, 5, 3), (2, 5)),
                                    ((2, 5, 3), (1, 5, 2)), ((0, 3), (0, 2)), ((4, 0), (4, 2))])
def test_lstsq_outputs_per_driver(driver, shapes):
    a = rand(*shapes[0]) + torch.eye(shapes[0][-2], shapes[0][-1], dtype=F64)
    b = rand(*shapes[1], seed=1)
    exp = torch.linalg.lstsq(a, b, driver=driver)
    act = torch.linalg.lstsq(a.to("tpu"), b.to("tpu"), driver=driver)
    for name in ("solution", "residuals", "rank", "singular_values"):
        x, e = getattr(act, name), getattr(exp, name)
        assert x.shape == e.shape and x.dtype == e.dtype, name
        torch.testing.assert_close(x.cpu(), e, msg=name)


def test_lstsq_rank_deficient_minimum_norm():
    a = rand(6, 4)
    a[:, 3] = a[:, 0] + a[:, 1]
    b = rand(6, 2, seed=1)
    for driver in ("gelsy", "gelsd", "gelss"):
        x, _, rank, _ = torch.linalg.lstsq(a.to("tpu"), b.to("tpu"), driver=driver)
        assert rank.item() == 3
        torch.testing.assert_close(x.cpu(), torch.linalg.pinv(a) @ b)
    # a cut-off above the smallest nonzero singular value lowers the rank
    s = torch.linalg.svdvals(a)
    rcond = (s[1] / s[0]).item() * 1.01
    assert torch.linalg.lstsq(a.to("tpu"), b.to("tpu"), rcond=rcond).rank.item() == 1


@pytest.mark.parametrize("call", [
    lambda d: torch.linalg.lstsq(torch.ones(3, device=d), torch.ones(3, device=d)),
    lambda d: torch.linalg.lstsq(torch.ones(3, 3, device=d), torch.ones(4, 3, device=d)),
    lambda d: torch.linalg.lstsq(torch.ones(3, 3, device=d), torch.ones(3, 3, device=d, dtype=F64)),
    lambda d: torch.linalg.lstsq(torch.ones(3, 3, device=d), torch.ones(3, 3, device=d), driver="nope"),
    lambda d: torch.linalg.lstsq(torch.ones(3, 3, 3, 3, device=d), torch.ones(3, 3, device=d)),
])
def test_lstsq_errors_match_cpu(call):
    with pytest.raises(Exception) as cpu:
        call("cpu")
    with pytest.raises(Exception) as tpu:
        call("tpu")
    assert type(tpu.value) is type(cpu.value) and str(tpu.value) == str(cpu.value)


# ---------------------------------------------------------------- LDL
def test_ldl_pivots_match_lapack():
    """Bunch-Kaufman picks 1x1 and 2x2 pivots from magnitudes alone: the pivots CPU's sytrf
    returns are reproduced exactly, over indefinite, definite and near-zero-diagonal inputs."""
    for n in range(1, 10):
        for seed in range(12):
            a = rand(n, n, seed=seed)
            a = [a + a.mT, a @ a.mT, (a + a.mT) * (1 - 0.99 * torch.eye(n, dtype=F64))][seed % 3]
            LD, piv, info = torch.linalg.ldl_factor_ex(a.to("tpu"))
            LD0, piv0, info0 = torch.linalg.ldl_factor_ex(a)
            assert torch.equal(piv.cpu(), piv0) and torch.equal(info.cpu(), info0), (n, seed)
            torch.testing.assert_close(LD.cpu(), LD0)
            b = rand(n, 3, seed=seed + 1)
            torch.testing.assert_close(torch.linalg.ldl_solve(LD, piv, b.to("tpu")).cpu(),
                                       torch.linalg.ldl_solve(LD0, piv0, b))


def test_ldl_singular_info_and_check_errors():
    a = torch.zeros(3, 3, dtype=F64)
    a[0, 1] = a[1, 0] = 1
    LD, piv, info = torch.linalg.ldl_factor_ex(a.to("tpu"))
    LD0, piv0, info0 = torch.linalg.ldl_factor_ex(a)
    assert torch.equal(piv.cpu(), piv0) and info.item() == info0.item() == 3
    torch.testing.assert_close(LD.cpu(), LD0)
    with pytest.raises(RuntimeError, match="ldl_factor_ex"):
        torch.linalg.ldl_factor_ex(a.to("tpu"), check_errors=True)[0].cpu()


# ---------------------------------------------------------------- matrix_exp / householder_product
# ATen's thresholds on the 1-norm select the Taylor degree (1, 2, 4, 8, 12, 18, then scaling)
THETAS = {torch.float32: (1.19e-07, 5.97e-04, 5.11e-02, 5.80e-01, 1.46, 3.01),
          torch.float64: (2.22e-16, 2.58e-08, 3.39e-04, 4.99e-02, 2.99e-01, 1.09)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matrix_exp_each_degree(dtype):
    a = rand(4, 4, seed=2)
    a = a / torch.linalg.matrix_norm(a, 1)
    norms = [t * f for t in THETAS[dtype] for f in (0.9, 1.1)] + [40.0]
    batch = torch.stack([a * x for x in norms]).to(dtype)
    act, exp = torch.linalg.matrix_exp(batch.to("tpu")).cpu(), torch.linalg.matrix_exp(batch)
    exact = torch.linalg.matrix_exp(batch.double())
    for i in range(len(norms)):
        try:
            torch.testing.assert_close(act[i], exp[i])
        except AssertionError:  # float32 with squarings: ours accumulates in double
            assert (act[i].double() - exact[i]).abs().max() <= (exp[i].double() - exact[i]).abs().max(), norms[i]


@pytest.mark.parametrize("shape", [(0, 0), (1, 1), (3, 1, 1), (2, 0, 0)])
def test_matrix_exp_trivial_sizes(shape):
    a = rand(*shape)
    torch.testing.assert_close(torch.linalg.matrix_exp(a.to("tpu")).cpu(), torch.linalg.matrix_exp(a))


def test_matrix_exp_nonfinite():
    a = rand(2, 3, 3)
    a[1, 0, 0] = float("inf")
    torch.testing.assert_close(torch.linalg.matrix_exp(a.to("tpu")).cpu(), torch.linalg.matrix_exp(a), equal_nan=True)


def test_batched_failure_names_the_element():
    a = rand(4, 3, 3)
    a[2, 1, 1] = float("nan")
    with pytest.raises(RuntimeError, match=r"linalg.svd: \(Batch element 2\): The algorithm failed to converge"):
        torch.linalg.svd(a.to("tpu"))[1].cpu()
    with pytest.raises(RuntimeError, match=r"linalg.eigh: \(Batch element 2\): The algorithm failed to converge"):
        torch.linalg.eigvalsh(a.to("tpu")).cpu()


def test_large_batch_split_across_threads():
    a = rand(64, 9, 7)
    U, S, Vh = (t.cpu() for t in torch.linalg.svd(a.to("tpu"), full_matrices=False))
    torch.testing.assert_close(S, torch.linalg.svdvals(a))
    torch.testing.assert_close(U * S.unsqueeze(-2) @ Vh, a)
    s = a[..., :7, :] + a[..., :7, :].mT
    torch.testing.assert_close(torch.linalg.eigvalsh(s.to("tpu")).cpu(), torch.linalg.eigvalsh(s))


def test_householder_product_partial_reflectors():
    a, tau = torch.geqrf(rand(2, 6, 4))
    for k in (0, 2, 4):
        exp = torch.linalg.householder_product(a, tau[..., :k])
        torch.testing.assert_close(torch.linalg.householder_product(a.to("tpu"), tau[..., :k].to("tpu")).cpu(), exp)


def test_svd_of_a_very_wide_matrix_sizes_its_scratch_by_min_dim():
    # PyTorch's test_svd_memory_allocation: 3 x 2^20 asked for a 2^20 x 2^20 buffer (16 TiB)
    a = rand(3, 2 ** 20, dtype=torch.float32)
    S = torch.linalg.svdvals(a.to("tpu")).cpu()
    torch.testing.assert_close(S.double(), torch.linalg.svdvals(a.double()), atol=1e-3, rtol=1e-6)
    U, S, Vh = torch.linalg.svd(a.to("tpu"), full_matrices=False)
    assert U.shape == (3, 3) and Vh.shape == (3, 2 ** 20)
    torch.testing.assert_close((U.cpu() * S.cpu()) @ Vh.cpu(), a, atol=1e-5, rtol=1e-5)
