"""Samples for the linalg family: LU (factor, solve, P/L/U), det, slogdet, solve, inv,
Cholesky, QR, triangular solves, SVD, eigh, lstsq, LDL, matrix_exp, householder_product.
Inputs are well conditioned (diagonally dominant, or X X^H + n I for Cholesky) so float32
results agree with LAPACK's; singular inputs check the info outputs that the Python-side
error checks read. Every kernel runs complex64 too (LA)."""
import torch

from samples import COMPLEX, make, register

LA = (torch.float32, torch.float64) + COMPLEX


def dominant(*shape, seed=0):
    def inputs(dt):
        a = make(shape, dt, -1, 1, seed=seed)
        return [a + shape[-1] * torch.eye(shape[-1], dtype=dt)]
    return inputs


def spd(*shape):
    def inputs(dt):
        x = make(shape, dt, -1, 1)
        return [x @ x.mH + shape[-1] * torch.eye(shape[-1], dtype=dt)]
    return inputs


def general(*shape):
    return lambda dt: [make(shape, dt, -2, 2)]


def singular(dt):
    a = make((3, 3), dt, -2, 2)
    a[:, 2] = a[:, 0] + a[:, 1]
    a[2] = 0
    return [a]


def two(f, g):
    return lambda dt: f(dt) + g(dt)


# ---------------------------------------------------------------- LU family
register("linalg_lu_factor_ex", lambda a: torch.linalg.lu_factor_ex(a), general(4, 4), dtypes=LA, grad=False)
register("linalg_lu_factor_ex", lambda a: torch.linalg.lu_factor_ex(a), general(2, 3, 5), dtypes=LA, grad=False,
         name="lu_factor wide batched")
register("linalg_lu_factor_ex", lambda a: torch.linalg.lu_factor_ex(a), general(5, 3), dtypes=LA, grad=False,
         name="lu_factor tall")
register("linalg_lu_factor_ex", lambda a: torch.linalg.lu_factor_ex(a), singular, dtypes=LA, grad=False,
         name="lu_factor singular info")
register("linalg_lu", lambda a: torch.linalg.lu(a), general(4, 4), dtypes=LA)
register("linalg_lu", lambda a: torch.linalg.lu(a), general(2, 3, 5), dtypes=LA, name="lu wide batched")
register("linalg_lu", lambda a: torch.linalg.lu(a), general(5, 3), dtypes=LA, name="lu tall")
register("linalg_lu_solve linalg_lu_factor_ex",
         lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b), two(dominant(4, 4), general(4, 2)),
         dtypes=LA, grad=False)
register("linalg_lu_solve", lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b, adjoint=True),
         two(dominant(2, 3, 3), general(2, 3, 2)), dtypes=LA, grad=False, name="lu_solve adjoint")
register("linalg_lu_solve", lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b, left=False),
         two(dominant(3, 3), general(2, 3)), dtypes=LA, grad=False, name="lu_solve right")

# ---------------------------------------------------------------- det / slogdet
register("_linalg_det", lambda a: torch.linalg.det(a), dominant(4, 4), dtypes=LA)
register("_linalg_det", lambda a: torch.linalg.det(a), general(3, 3, 3), dtypes=LA, name="det batched")
register("_linalg_det", lambda a: torch.linalg.det(a.mT), general(4, 4), dtypes=LA, name="det non-contiguous")
register("_linalg_det", lambda a: torch.linalg.det(a), singular, dtypes=LA, grad=False, name="det singular")
register("_linalg_slogdet", lambda a: torch.linalg.slogdet(a), general(4, 4), dtypes=LA)
register("_linalg_slogdet", lambda a: torch.linalg.slogdet(a), general(2, 3, 3), dtypes=LA, name="slogdet batched")
register("_linalg_slogdet", lambda a: torch.linalg.slogdet(a), singular, dtypes=LA, grad=False, name="slogdet singular")

# ---------------------------------------------------------------- solve / inv
register("_linalg_solve_ex", lambda a, b: torch.linalg.solve(a, b), two(dominant(4, 4), general(4, 3)), dtypes=LA)
register("_linalg_solve_ex", lambda a, b: torch.linalg.solve(a, b), two(dominant(2, 3, 3), general(3,)), dtypes=LA,
         name="solve vector")
register("_linalg_solve_ex", lambda a, b: torch.linalg.solve(a, b, left=False), two(dominant(3, 3), general(2, 3)),
         dtypes=LA, name="solve right")
register("_linalg_solve_ex", lambda a, b: torch.linalg.solve_ex(a, b)[1], two(singular, general(3, 2)), dtypes=LA,
         grad=False, name="solve singular info")
register("linalg_inv_ex", lambda a: torch.linalg.inv(a), dominant(4, 4), dtypes=LA)
register("linalg_inv_ex", lambda a: torch.linalg.inv(a), dominant(2, 3, 3), dtypes=LA, name="inv batched")
register("linalg_inv_ex", lambda a: torch.linalg.inv_ex(a)[1], singular, dtypes=LA, grad=False, name="inv singular info")

# ---------------------------------------------------------------- Cholesky / QR
register("linalg_cholesky_ex", lambda a: torch.linalg.cholesky(a), spd(4, 4), dtypes=LA)
register("linalg_cholesky_ex", lambda a: torch.linalg.cholesky(a, upper=True), spd(2, 3, 3), dtypes=LA,
         name="cholesky upper batched")
register("linalg_cholesky_ex", lambda a: torch.linalg.cholesky_ex(-a)[1], spd(3, 3), dtypes=LA, grad=False,
         name="cholesky not pd info")
register("cholesky", lambda a: torch.cholesky(a), spd(4, 4), dtypes=LA)
register("cholesky", lambda a: torch.cholesky(a, upper=True), spd(2, 3, 3), dtypes=LA, name="cholesky upper batched")
register("cholesky.out", lambda a: torch.cholesky(a, out=torch.empty_like(a)), spd(3, 3), dtypes=LA, grad=False)
register("linalg_qr", lambda a: torch.linalg.qr(a), general(5, 3), dtypes=LA)
register("geqrf", torch.geqrf, general(5, 3), dtypes=LA, grad=False)
register("geqrf", torch.geqrf, general(2, 3, 4), dtypes=LA, grad=False, name="geqrf wide batched")
register("geqrf.a", lambda a: torch.geqrf(a, out=(a.new_empty(0), a.new_empty(0))), general(4, 4), dtypes=LA,
         grad=False)


def reflectors(*shape, cshape):
    """geqrf's factors of a random matrix (computed on the CPU) and a matrix to multiply."""
    def inputs(dt):
        a, tau = torch.geqrf(make(shape, dt, -2, 2))
        return [a, tau, make(cshape, dt, -2, 2, seed=1)]
    return inputs


for _left in (True, False):
    for _tr in (False, True):
        register("ormqr", lambda a, t, c, _l=_left, _t=_tr: torch.ormqr(a, t, c, _l, _t),
                 reflectors(5, 3, cshape=(5, 2) if _left else (2, 5)), dtypes=LA,
                 name=f"ormqr left={_left} transpose={_tr}")
register("ormqr", lambda a, t, c: torch.ormqr(a, t, c), reflectors(2, 4, 4, cshape=(2, 4, 3)), dtypes=LA,
         name="ormqr batched")
register("ormqr.out", lambda a, t, c: torch.ormqr(a, t, c, out=c.new_empty(0)), reflectors(4, 3, cshape=(4, 2)),
         dtypes=LA, grad=False)
register("linalg_qr", lambda a: torch.linalg.qr(a), general(2, 3, 4), dtypes=LA, name="qr wide batched")
register("linalg_qr", lambda a: torch.linalg.qr(a, mode="complete"), general(5, 3), dtypes=LA, grad=False,
         name="qr complete")
register("linalg_qr", lambda a: torch.linalg.qr(a, mode="r")[1], general(4, 4), dtypes=LA, grad=False, name="qr r")
register("linalg_solve_triangular", lambda a, b: torch.linalg.solve_triangular(a, b, upper=True),
         two(dominant(4, 4), general(4, 2)), dtypes=LA)
register("linalg_solve_triangular", lambda a, b: torch.linalg.solve_triangular(a, b, upper=False, left=False),
         two(dominant(2, 3, 3), general(2, 4, 3)), dtypes=LA, name="solve_triangular lower right")
register("linalg_solve_triangular", lambda a, b: torch.linalg.solve_triangular(a, b, upper=False, unitriangular=True),
         two(dominant(3, 3), general(3, 3)), dtypes=LA, name="solve_triangular unit")
register("linalg_solve_triangular.out",
         lambda a, b: torch.linalg.solve_triangular(a, b, upper=True, out=torch.empty(0, dtype=a.dtype, device=a.device)),
         two(dominant(3, 3), general(3, 2)), dtypes=LA, grad=False)


def factored(*shape):
    return lambda dt: list(torch.linalg.lu_factor(make(shape, dt, -2, 2)))


register("lu_unpack", lambda lu, p: torch.lu_unpack(lu, p), factored(4, 4), dtypes=LA)
register("lu_unpack", lambda lu, p: torch.lu_unpack(lu, p), factored(2, 3, 5), dtypes=LA, name="lu_unpack wide batched")
register("lu_unpack", lambda lu, p: torch.lu_unpack(lu, p, unpack_pivots=False)[1:], factored(5, 3), dtypes=LA,
         name="lu_unpack data only")
register("lu_unpack", lambda lu, p: torch.lu_unpack(lu, p, unpack_data=False)[0], factored(4, 4), dtypes=LA, grad=False,
         name="lu_unpack pivots only")
register("lu_unpack.out", lambda lu, p: torch.lu_unpack(lu, p, out=tuple(torch.empty(0, dtype=lu.dtype, device=lu.device)
                                                                         for _ in range(3))),
         factored(3, 3), dtypes=LA, grad=False)
register("triangular_solve", lambda b, a: torch.triangular_solve(b, a), two(general(4, 2), dominant(4, 4)), dtypes=LA)
register("triangular_solve", lambda b, a: torch.triangular_solve(b, a, upper=False, transpose=True, unitriangular=True),
         two(general(2, 3, 2), dominant(2, 3, 3)), dtypes=LA, name="triangular_solve lower transpose unit")
register("triangular_solve.X", lambda b, a: torch.triangular_solve(
    b, a, out=(torch.empty(0, dtype=a.dtype, device=a.device), torch.empty(0, dtype=a.dtype, device=a.device))),
         two(general(3, 2), dominant(3, 3)), dtypes=LA, grad=False)


def chol_and(rhs):
    return lambda dt: rhs(dt) + [torch.linalg.cholesky(spd(4, 4)(dt)[0])]


register("_cholesky_solve_helper", lambda b, l: torch.cholesky_solve(b, l), chol_and(general(4, 3)), dtypes=LA)
register("_cholesky_solve_helper", lambda b, l: torch.cholesky_solve(b, l.mT, upper=True), chol_and(general(4, 2)),
         dtypes=LA, name="cholesky_solve upper")
register("cholesky_inverse", lambda l: torch.cholesky_inverse(l), lambda dt: chol_and(lambda d: [])(dt), dtypes=LA)
register("cholesky_inverse", lambda l: torch.cholesky_inverse(l.mT, upper=True), lambda dt: chol_and(lambda d: [])(dt),
         dtypes=LA, name="cholesky_inverse upper")
register("cholesky_inverse.out", lambda l: torch.cholesky_inverse(l, out=torch.empty(0, dtype=l.dtype, device=l.device)),
         lambda dt: chol_and(lambda d: [])(dt), dtypes=LA, grad=False)


# ---------------------------------------------------------------- SVD / eigh
# Singular and eigen vectors are unique only up to sign: samples compare what is not (the
# reconstruction, the values, |vectors| over the k singular triplets), as PyTorch's own tests do.
def svd_invariants(a, full=False):
    U, S, Vh = torch.linalg.svd(a, full_matrices=full)
    k = S.shape[-1]
    return (U[..., :k] * S.unsqueeze(-2)) @ Vh[..., :k, :], S, U[..., :k].abs(), Vh[..., :k, :].abs()


register("_linalg_svd", svd_invariants, general(5, 3), dtypes=LA)
register("_linalg_svd", svd_invariants, general(2, 3, 4), dtypes=LA, name="svd wide batched")
register("_linalg_svd", lambda a: svd_invariants(a, True), general(5, 3), dtypes=LA, name="svd full tall")
register("_linalg_svd", lambda a: svd_invariants(a, True), general(2, 4), dtypes=LA, name="svd full wide")
register("_linalg_svd", lambda a: torch.linalg.svdvals(a), singular, dtypes=LA, grad=False, name="svdvals rank-deficient")
register("_linalg_svd", lambda a: torch.linalg.pinv(a), general(2, 4, 3), dtypes=LA, name="pinv")
register("_linalg_svd", lambda a: torch.linalg.matrix_norm(a, "nuc"), general(3, 4), dtypes=LA, name="nuclear norm")
register("_linalg_svd.U", lambda a: torch.linalg.svd(a, out=(a.new_empty(0), a.real.new_empty(0), a.new_empty(0)))[1],
         general(4, 3), dtypes=LA, grad=False)


def eigh_invariants(a, uplo="L"):
    w, v = torch.linalg.eigh(a, UPLO=uplo)
    return w, v.abs()


register("_linalg_eigh", eigh_invariants, spd(4, 4), dtypes=LA)
register("_linalg_eigh", lambda a: eigh_invariants(a, "U"), general(2, 3, 3), dtypes=LA, grad=False,
         name="eigh upper, batched, indefinite")
register("_linalg_eigh", torch.linalg.eigvalsh, general(4, 4), dtypes=LA, grad=False, name="eigvalsh")
register("_linalg_eigh.eigenvalues", lambda a: torch.linalg.eigh(a, out=(a.real.new_empty(0), a.new_empty(0)))[0],
         spd(3, 3), dtypes=LA, grad=False)

# ---------------------------------------------------------------- lstsq / LDL / matrix_exp / householder
def well(*shape):
    """Well conditioned rectangular matrices (so float32 gradients agree with LAPACK's)."""
    return lambda dt: [make(shape, dt, -1, 1) + 3 * torch.eye(shape[-2], shape[-1], dtype=dt)]


for _driver in ("gelsy", "gels", "gelsd", "gelss"):
    register("linalg_lstsq.out", lambda a, b, _d=_driver: torch.linalg.lstsq(a, b, driver=_d),
             two(well(2, 5, 3), general(2, 5, 2)), dtypes=LA, name=f"lstsq tall {_driver}")
register("linalg_lstsq.out", lambda a, b: torch.linalg.lstsq(a, b), two(well(3, 5), general(3)), dtypes=LA,
         name="lstsq wide vector rhs")
register("linalg_lstsq.out", lambda a, b: torch.linalg.lstsq(a, b, driver="gelsd"), two(singular, general(3, 2)),
         dtypes=LA, grad=False, name="lstsq rank-deficient minimum norm")


def symmetric(n, seed=0, herm=False):
    """A + A^T, or A + A^H when herm: indefinite, so Bunch-Kaufman takes 2x2 pivots too."""
    def inputs(dt):
        a = make((n, n), dt, -2, 2, seed=seed)
        return [a + (a.mH if herm else a.mT)]
    return inputs


register("linalg_ldl_factor_ex", lambda a: torch.linalg.ldl_factor_ex(a), symmetric(6, 1), dtypes=LA, grad=False,
         name="ldl_factor indefinite")
register("linalg_ldl_factor_ex", lambda a: torch.linalg.ldl_factor_ex(a, hermitian=True), symmetric(6, 1, herm=True),
         dtypes=LA, grad=False, name="ldl_factor hermitian indefinite")
register("linalg_ldl_factor_ex.out", lambda a: torch.linalg.ldl_factor_ex(
    a, out=(a.new_empty(0), torch.empty(0, dtype=torch.int32, device=a.device),
            torch.empty(0, dtype=torch.int32, device=a.device))), spd(4, 4), dtypes=LA, grad=False)
register("linalg_ldl_solve", lambda a, b: torch.linalg.ldl_solve(*torch.linalg.ldl_factor(a), b),
         two(symmetric(6, seed=3), general(6, 2)), dtypes=LA, grad=False)
register("linalg_ldl_solve",
         lambda a, b: torch.linalg.ldl_solve(*torch.linalg.ldl_factor(a, hermitian=True), b, hermitian=True),
         two(symmetric(6, seed=3, herm=True), general(6, 2)), dtypes=LA, grad=False, name="ldl_solve hermitian")
register("linalg_ldl_solve.out", lambda a, b: torch.linalg.ldl_solve(*torch.linalg.ldl_factor(a), b, out=b.new_empty(0)),
         two(spd(3, 3), general(3, 2)), dtypes=LA, grad=False)


def scaled(*shape, scales):
    return lambda dt: [make(shape, dt, -1, 1) * torch.tensor(scales, dtype=dt).view(-1, 1, 1)]


register("linalg_matrix_exp", torch.linalg.matrix_exp, scaled(4, 4, 4, scales=(1e-8, 0.01, 0.3, 6.0)), dtypes=LA,
         name="matrix_exp every degree and squaring")
# CPU takes 16-bit floats too (tpu refused them; found by OpInfo's reference inputs); its own
# results there are far from float64 (NaN past a small norm), so float64 rounded decides
register("linalg_matrix_exp", torch.linalg.matrix_exp, scaled(4, 4, 4, scales=(1e-8, 0.01, 0.3, 2.0)),
         dtypes=(torch.bfloat16, torch.float16), grad=False, name="matrix_exp 16-bit")
register("linalg_householder_product", lambda a, t: torch.linalg.householder_product(a, t),
         lambda dt: list(torch.geqrf(make((5, 3), dt, -2, 2))), dtypes=LA)
register("linalg_householder_product.out",
         lambda a, t: torch.linalg.householder_product(a, t, out=a.new_empty(0)),
         lambda dt: list(torch.geqrf(make((2, 4, 4), dt, -2, 2))), dtypes=LA, grad=False)

# ---------------------------------------------------------------- out= overloads (the functional
# results written into the given tensors; a wrong dtype is tests/test_upstream_regressions.py's)
def _e(t, dtype=None):
    return torch.empty(0, dtype=dtype or t.dtype, device=t.device)


register("_linalg_det.result", lambda a: torch.linalg.det(a, out=_e(a)), dominant(2, 3, 3), dtypes=LA, grad=False)
register("_linalg_slogdet.sign", lambda a: torch.linalg.slogdet(a, out=(_e(a), _e(a.real))), general(2, 3, 3),
         dtypes=LA, grad=False)
register("_linalg_solve_ex.result", lambda a, b: torch.linalg.solve_ex(a, b, out=(_e(b), _e(a, torch.int32))),
         two(dominant(2, 3, 3), general(2, 3, 2)), dtypes=LA, grad=False)
register("linalg_inv_ex.inverse", lambda a: torch.linalg.inv_ex(a, out=(_e(a), _e(a, torch.int32))),
         dominant(2, 3, 3), dtypes=LA, grad=False)
register("linalg_cholesky_ex.L", lambda a: torch.linalg.cholesky_ex(a, out=(_e(a), _e(a, torch.int32))),
         spd(2, 3, 3), dtypes=LA, grad=False)
register("linalg_lu_factor_ex.out", lambda a: torch.linalg.lu_factor_ex(
    a, out=(_e(a), _e(a, torch.int32), _e(a, torch.int32))), general(2, 4, 3), dtypes=LA, grad=False)
register("linalg_lu.out", lambda a: torch.linalg.lu(a, out=(_e(a), _e(a), _e(a))), general(4, 3), dtypes=LA,
         grad=False)
register("linalg_lu_solve.out", lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b, out=_e(b)),
         two(dominant(3, 3), general(3, 2)), dtypes=LA, grad=False)
register("linalg_qr.out", lambda a: torch.linalg.qr(a, out=(_e(a), _e(a))), general(5, 3), dtypes=LA, grad=False)
register("linalg_matrix_exp.out", lambda a: torch.ops.aten.linalg_matrix_exp.out(a, out=_e(a)), general(3, 3),
         dtypes=LA, grad=False)
register("_cholesky_solve_helper.out", lambda l, b: torch.ops.aten._cholesky_solve_helper.out(b, l, False, out=_e(b)),
         two(lambda dtype: [torch.linalg.cholesky(spd(3, 3)(dtype)[0])], general(3, 2)), dtypes=LA, grad=False)
