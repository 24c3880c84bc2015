"""Samples for the linalg family: LU (factor, solve, P/L/U), det, slogdet, solve, inv,
Cholesky, QR. Inputs are well conditioned (diagonally dominant, or X X^T + n I for
Cholesky) so float32 results agree with LAPACK's; singular inputs check the info
outputs that the Python-side error checks read."""
import torch

from samples import make, register

LA = (torch.float32, torch.float64)


def dominant(*shape, seed=0):
    def inputs(dt):
        a = make(shape, dt, -1, 1, seed=seed)
        return [a + shape[-1] * torch.eye(shape[-1], dtype=dt)]
    return inputs


def spd(*shape):
    def inputs(dt):
        x = make(shape, dt, -1, 1)
        return [x @ x.mT + shape[-1] * torch.eye(shape[-1], dtype=dt)]
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
register("linalg_qr", lambda a: torch.linalg.qr(a), general(5, 3), dtypes=LA)
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
