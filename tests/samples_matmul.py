"""Samples for the matmul kernels (run under precision "highest": they must match CPU f32).
Gradients are compared where the backward only needs matmul ops (alpha = beta = 1, self
not broadcast); the other samples check forward values."""
import torch

from samples import FLOATS, INTS, NUMERIC, register

MM_DTYPES = NUMERIC + (torch.float64,)


def _out(fn):
    """fn(*inputs, out=empty tensor of the first input's dtype)."""
    return lambda *xs: fn(*xs, out=torch.empty(0, dtype=xs[-1].dtype, device=xs[-1].device))


register("mm", torch.mm, [(7, 19), (19, 11)], dtypes=MM_DTYPES)
register("mm", lambda a, b: a.t() @ b.t(), [(19, 7), (11, 19)], dtypes=FLOATS, name="mm transposed")
register("mm", lambda a, b: torch.mm(a, b), [(70, 300), (300, 40)], dtypes=(torch.float32,), name="mm blocked",
         atol=1e-4, rtol=1e-5)
register("mm", lambda a, b: torch.mm(a, b), [(5, 0), (0, 3)], dtypes=(torch.float32,), grad=False, name="mm empty K")
register("mm mv dot", lambda a, b, v: (a @ b, a @ v, v @ v), [(4, 6), (6, 3), (6,)], dtypes=FLOATS, grad=False,
         name="matmul 2d/1d")
register("mm.out", _out(torch.mm), [(5, 8), (8, 6)], dtypes=MM_DTYPES, grad=False)

register("bmm", torch.bmm, [(3, 5, 9), (3, 9, 4)], dtypes=MM_DTYPES)
register("bmm", lambda a, b: a @ b.expand(4, 9, 6), [(4, 5, 9), (9, 6)], dtypes=FLOATS, grad=False, name="bmm broadcast")
register("bmm.out", _out(torch.bmm), [(2, 4, 3), (2, 3, 5)], dtypes=MM_DTYPES, grad=False)

register("addmm", torch.addmm, [(6, 5), (6, 8), (8, 5)], dtypes=MM_DTYPES)
register("addmm", lambda s, a, b: torch.addmm(s, a, b, beta=0.5, alpha=2.0), [(5,), (6, 8), (8, 5)],
         dtypes=FLOATS, grad=False, name="addmm alpha beta broadcast")
register("addmm", lambda s, a, b: torch.addmm(s, a, b, beta=3, alpha=-2), [(6, 5), (6, 8), (8, 5)],
         dtypes=NUMERIC, grad=False, name="addmm int alpha beta")
register("addmm", lambda s, a, b: torch.addmm(s.fill_(float("nan")), a, b, beta=0), [(6, 5), (6, 8), (8, 5)],
         dtypes=FLOATS, grad=False, name="addmm beta 0 ignores nan")
register("addmm.out", _out(torch.addmm), [(3, 4), (3, 2), (2, 4)], dtypes=MM_DTYPES, grad=False)
register("addmm_", lambda s, a, b: s.addmm_(a, b, alpha=0.5), [(3, 4), (3, 2), (2, 4)], dtypes=FLOATS, grad=False)
register("addmm", lambda x, w, b: torch.nn.functional.linear(x, w, b), [(4, 7), (3, 7), (3,)], dtypes=FLOATS,
         grad=False, name="linear")

register("baddbmm", torch.baddbmm, [(2, 3, 4), (2, 3, 5), (2, 5, 4)], dtypes=MM_DTYPES)
register("baddbmm", lambda s, a, b: torch.baddbmm(s, a, b, beta=0.25, alpha=3.0), [(4,), (2, 3, 5), (2, 5, 4)],
         dtypes=FLOATS, grad=False, name="baddbmm alpha beta broadcast")
register("baddbmm.out", _out(torch.baddbmm), [(2, 3, 4), (2, 3, 5), (2, 5, 4)], dtypes=MM_DTYPES, grad=False)
register("baddbmm_", lambda s, a, b: s.baddbmm_(a, b, beta=2), [(2, 3, 4), (2, 3, 5), (2, 5, 4)], dtypes=FLOATS,
         grad=False)

# CPU sums the batches of a bf16/f16 addbmm with a rounding after each batch; the tpu
# accumulates all of them in f32 (more accurate), hence the looser half tolerance.
HALF = (torch.bfloat16, torch.float16)
for _dts, _tol in (((torch.float32, torch.float64) + INTS, {}), (HALF, dict(atol=0.1, rtol=0.05))):
    register("addbmm", lambda s, a, b: torch.addbmm(s, a, b, beta=0.5, alpha=2), [(3, 4), (5, 3, 6), (5, 6, 4)],
             dtypes=_dts, grad=False, **_tol)
    register("addbmm.out", _out(torch.addbmm), [(3, 4), (5, 3, 6), (5, 6, 4)], dtypes=_dts, grad=False, **_tol)
register("addbmm_", lambda s, a, b: s.addbmm_(a, b), [(3, 4), (2, 3, 6), (2, 6, 4)], dtypes=FLOATS, grad=False,
         atol=0.1, rtol=0.05)

register("mv", torch.mv, [(5, 7), (7,)], dtypes=MM_DTYPES, grad=False)
register("mv.out", _out(torch.mv), [(5, 7), (7,)], dtypes=MM_DTYPES, grad=False)
register("addmv", lambda s, a, v: torch.addmv(s, a, v, beta=2, alpha=3), [(5,), (5, 7), (7,)], dtypes=MM_DTYPES,
         grad=False)
register("addmv.out", _out(torch.addmv), [(5,), (5, 7), (7,)], dtypes=MM_DTYPES, grad=False)
register("addmv_", lambda s, a, v: s.addmv_(a, v), [(5,), (5, 7), (7,)], dtypes=FLOATS, grad=False)
register("dot", torch.dot, [(13,), (13,)], dtypes=MM_DTYPES, grad=False)
register("dot.out", _out(torch.dot), [(13,), (13,)], dtypes=MM_DTYPES, grad=False)
register("vdot", torch.vdot, [(13,), (13,)], dtypes=MM_DTYPES, grad=False)
register("vdot", torch.vdot, [(9,), (9,)], dtypes=FLOATS, name="vdot grad")
register("vdot.out", _out(torch.vdot), [(13,), (13,)], dtypes=MM_DTYPES, grad=False)
