"""complex64 linear algebra against PyTorch CPU beyond the op samples: the conventions CPU's
complex LAPACK fixes (cabs1 pivoting, zlarfg's reflectors, phases of det/slogdet), the gauge of
singular/eigen vectors (compared through what is invariant, against a complex128 reference),
the triangle Cholesky and eigh read, and LinAlgError for singular complex inputs."""
import pytest
import torch

import torch_tpu

C64, C128 = torch.complex64, torch.complex128


def crand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=C128).to(C64)


def tpu(*xs):
    return [x.to("tpu") for x in xs]


def cpu(out):
    return [t.cpu() for t in out] if isinstance(out, (tuple, list)) else out.cpu()


@pytest.fixture(autouse=True)
def _no_fallback():
    torch_tpu.metrics.reset()
    yield
    assert not torch_tpu.metrics.fallback_ops()


def test_lu_pivots_by_cabs1():
    # |re| + |im| ranks 3+3j (6) above 4.5 (4.5) though |3+3j| = 4.24 < 4.5: LAPACK's izamax
    a = torch.tensor([[4.5, 1, 2], [3 + 3j, 2j, 1], [1, 1 - 1j, 5]], dtype=C64)
    LU, piv, info = cpu(torch.linalg.lu_factor_ex(*tpu(a)))
    LU0, piv0, info0 = torch.linalg.lu_factor_ex(a)
    assert piv.tolist() == piv0.tolist() and piv[0] == 2
    torch.testing.assert_close(LU, LU0)
    assert info.item() == info0.item() == 0


def test_geqrf_reflector_conventions():
    # column 0 is zero below a complex diagonal entry: zlarfg still reflects (tau != 0) to make
    # R's diagonal real; below a real entry it does not (tau = 0)
    a = crand(5, 4)
    a[1:, 0] = 0
    a[0, 0] = 2 - 1j
    x, tau = cpu(torch.geqrf(*tpu(a)))
    x0, tau0 = torch.geqrf(a)
    torch.testing.assert_close(x, x0)
    torch.testing.assert_close(tau, tau0)
    assert tau[0] != 0 and x[0, 0].imag == 0
    r = torch.zeros(4, 4, dtype=C64)
    r[0, 0] = 3.0
    assert torch.geqrf(r.to("tpu"))[1].cpu()[0] == 0 == torch.geqrf(r)[1][0]


@pytest.mark.parametrize("shape", [(4, 4), (3, 5, 5), (1, 1)])
def test_det_slogdet_phase(shape):
    a = crand(*shape)
    for t in (a, a.mT):  # contiguous and not: ATen factors complex A itself either way
        torch.testing.assert_close(torch.linalg.det(t.to("tpu")).cpu(), torch.linalg.det(t))
        s, l = cpu(torch.linalg.slogdet(t.to("tpu")))
        s0, l0 = torch.linalg.slogdet(t)
        torch.testing.assert_close(s, s0)
        torch.testing.assert_close(l, l0)
        assert s.dtype == C64 and l.dtype == torch.float32


def test_slogdet_singular():
    a = crand(3, 3)
    a[:, 2] = 0
    s, l = cpu(torch.linalg.slogdet(a.to("tpu")))
    assert s.item() == 0 and l.item() == float("-inf")
    assert torch.linalg.det(a.to("tpu")).cpu().item() == 0


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 6, 2), (1, 1)])
@pytest.mark.parametrize("full", [False, True])
def test_svd_factors_and_canonical_phase(shape, full):
    a = crand(*shape)
    U, S, Vh = cpu(torch.linalg.svd(a.to("tpu"), full_matrices=full))
    U0, S0, Vh0 = torch.linalg.svd(a, full_matrices=full)
    assert (U.dtype, S.dtype, Vh.dtype) == (C64, torch.float32, C64)
    assert U.shape == U0.shape and S.shape == S0.shape and Vh.shape == Vh0.shape
    torch.testing.assert_close(S.double(), torch.linalg.svdvals(a.to(C128)), atol=1e-6, rtol=1e-6)
    k = S.shape[-1]
    U, Vh = U.to(C128), Vh.to(C128)
    torch.testing.assert_close((U[..., :k] * S.unsqueeze(-2)) @ Vh[..., :k, :], a.to(C128), atol=1e-6, rtol=1e-6)
    eye = lambda n: torch.eye(n, dtype=C128).expand(*shape[:-2], n, n)  # noqa: E731
    torch.testing.assert_close(U.mH @ U, eye(U.shape[-1]), atol=1e-6, rtol=0)
    torch.testing.assert_close(Vh @ Vh.mH, eye(Vh.shape[-2]), atol=1e-6, rtol=0)
    # the gauge: each pair's longer vector has its largest-magnitude component real and positive
    longer = U if shape[-2] >= shape[-1] else Vh.mH
    top = longer.gather(-2, longer.abs().argmax(-2, keepdim=True))
    assert (top.real > 0).all() and (top.imag.abs() < 1e-6).all()


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_reads_one_triangle_and_real_diagonal(uplo):
    a = crand(3, 5, 5)
    w, v = cpu(torch.linalg.eigh(a.to("tpu"), UPLO=uplo))
    w0 = torch.linalg.eigvalsh(a.to(C128), UPLO=uplo)
    assert w.dtype == torch.float32 and v.dtype == C64
    torch.testing.assert_close(w.double(), w0, atol=1e-5, rtol=1e-6)
    tri = a.to(C128).tril() if uplo == "L" else a.to(C128).triu()
    herm = tri + tri.mH
    herm.diagonal(dim1=-2, dim2=-1).copy_(tri.diagonal(dim1=-2, dim2=-1).real)  # LAPACK: real diagonal
    v = v.to(C128)
    torch.testing.assert_close(v @ torch.diag_embed(w.to(C128)) @ v.mH, herm, atol=1e-5, rtol=1e-6)
    torch.testing.assert_close(v.mH @ v, torch.eye(5, dtype=C128).expand(3, 5, 5), atol=1e-6, rtol=0)
    top = v.gather(-2, v.abs().argmax(-2, keepdim=True))
    assert (top.real > 0).all() and (top.imag.abs() < 1e-6).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, C64])
def test_cholesky_reads_the_triangle_it_factors(dtype):
    x = crand(4, 4).to(dtype) if dtype.is_complex else torch.randn(4, 4, dtype=dtype)
    a = x @ x.mH + 4 * torch.eye(4, dtype=dtype)
    noise = 5 * (crand(4, 4, seed=1).to(dtype) if dtype.is_complex else torch.randn(4, 4, dtype=dtype))
    for upper, junk in ((True, noise.tril(-1)), (False, noise.triu(1))):  # the other triangle is not read
        b = a + junk
        torch.testing.assert_close(torch.linalg.cholesky(b.to("tpu"), upper=upper).cpu(),
                                   torch.linalg.cholesky(b, upper=upper))


def _zero_column(a):
    a[:, 1] = 0  # exactly singular: LU meets an exactly-zero pivot
    return a


@pytest.mark.parametrize("call, prep", [
    (lambda a: torch.linalg.solve(a, a), _zero_column),
    (lambda a: torch.linalg.inv(a), _zero_column),
    (lambda a: torch.linalg.cholesky(a), lambda a: a @ a.mH - torch.eye(3, dtype=C64)),
], ids=["solve", "inv", "cholesky"])
def test_singular_complex_raises_linalg_error(call, prep):
    a = prep(crand(3, 3))
    with pytest.raises(torch.linalg.LinAlgError) as e0:
        call(a)
    with pytest.raises(torch.linalg.LinAlgError) as e:
        call(a.to("tpu"))
    assert str(e.value) == str(e0.value)


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("unit", [False, True])
def test_triangular_solves_every_orientation(upper, unit):
    a = crand(2, 4, 4) + 4 * torch.eye(4, dtype=C64)
    b = crand(2, 4, 3, seed=1)
    for left in (True, False):
        rhs = b if left else b.mT
        torch.testing.assert_close(
            torch.linalg.solve_triangular(*tpu(a, rhs), upper=upper, left=left, unitriangular=unit).cpu(),
            torch.linalg.solve_triangular(a, rhs, upper=upper, left=left, unitriangular=unit))
    for transpose in (False, True):  # plain transpose, not the adjoint
        x, ac = cpu(torch.triangular_solve(*tpu(b, a), upper=upper, transpose=transpose, unitriangular=unit))
        x0, _ = torch.triangular_solve(b, a, upper=upper, transpose=transpose, unitriangular=unit)
        torch.testing.assert_close(x, x0)
        torch.testing.assert_close(ac, a)


@pytest.mark.parametrize("driver", ["gelsy", "gels", "gelsd", "gelss"])
def test_lstsq_outputs(driver):
    a = crand(2, 6, 3) + torch.eye(6, 3, dtype=C64)
    b = crand(2, 6, 2, seed=1)
    exp = torch.linalg.lstsq(a, b, driver=driver)
    act = torch.linalg.lstsq(*tpu(a, b), driver=driver)
    for name in ("solution", "residuals", "rank", "singular_values"):
        x, e = getattr(act, name), getattr(exp, name)
        assert x.shape == e.shape and x.dtype == e.dtype, name
        torch.testing.assert_close(x.cpu(), e, msg=name)


@pytest.mark.parametrize("hermitian", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_ldl_pivots_and_solve(hermitian, seed):
    # indefinite: Bunch-Kaufman takes 1x1 and 2x2 pivots (zsytf2 / zhetf2 choose them apart)
    x = crand(2, 7, 7, seed=seed)
    a = x + (x.mH if hermitian else x.mT)
    LD, piv, info = cpu(torch.linalg.ldl_factor_ex(a.to("tpu"), hermitian=hermitian))
    LD0, piv0, info0 = torch.linalg.ldl_factor_ex(a, hermitian=hermitian)
    assert piv.tolist() == piv0.tolist() and info.tolist() == info0.tolist()
    torch.testing.assert_close(LD, LD0)
    b = crand(2, 7, 3, seed=seed + 10)
    torch.testing.assert_close(torch.linalg.ldl_solve(*tpu(LD0, piv0, b), hermitian=hermitian).cpu(),
                               torch.linalg.ldl_solve(LD0, piv0, b, hermitian=hermitian))
