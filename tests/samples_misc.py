"""Samples for the misc family: diag/diag_embed, trace, cross, cdist, and the random ops
multinomial, randperm and normal with tensor parameters in their deterministic corners
(one-hot probabilities, std = 0, sorted permutations)."""
import torch

from samples import FLOATS, INTS, NUMERIC, make, register


def mk(x, dtype=None):
    return torch.empty(0, dtype=dtype or x.dtype, device=x.device)


# ---------------------------------------------------------------- diag_embed / trace
register("diag_embed", lambda x: torch.diag_embed(x), [(3, 4)], dtypes=NUMERIC)
register("diag_embed", lambda x: torch.diag_embed(x, 1, 0, 2), [(2, 3)], dtypes=FLOATS, name="diag_embed offset dims")
register("diag_embed", lambda x: torch.diag_embed(x, -2, -1, 0), [(2, 3)], dtypes=FLOATS, name="diag_embed negative offset")
register("diag_embed", lambda x: torch.diag(x, 1), [(4,)], dtypes=NUMERIC + (torch.bool,), name="diag of a vector")
register("diag_embed.out", lambda x: torch.ops.aten.diag_embed.out(x, out=mk(x)), [(2, 3)], dtypes=NUMERIC, grad=False)
register("trace", lambda x: torch.trace(x), [(4, 6)], dtypes=NUMERIC, grad=False)
register("trace", lambda x: torch.trace(x), [(5, 3)], dtypes=FLOATS, grad=False, name="trace tall")
register("trace.out", lambda x: torch.ops.aten.trace.out(x, out=mk(x)), [(3, 3)], dtypes=FLOATS, grad=False)

# ---------------------------------------------------------------- cross / cdist
register("linalg_cross", lambda a, b: torch.linalg.cross(a, b), [(4, 3), (4, 3)], dtypes=FLOATS + INTS[:3])
register("linalg_cross", lambda a, b: torch.linalg.cross(a, b, dim=0), [(3, 5), (3, 1)], dtypes=FLOATS,
         name="linalg_cross dim 0 broadcast")
register("linalg_cross", lambda a, b: torch.cross(a, b, dim=1), [(2, 3, 2), (2, 3, 2)], dtypes=FLOATS, name="cross")
register("linalg_cross.out", lambda a, b: torch.linalg.cross(a, b, out=mk(a)), [(2, 3), (2, 3)], dtypes=FLOATS,
         grad=False)
CDIST = (torch.float32,)
for p in (2.0, 1.0, 0.0, 3.0, 0.5, float("inf")):
    register("_cdist_forward _cdist_backward", lambda a, b, p=p: torch.cdist(a, b, p=p), [(5, 4), (3, 4)], dtypes=CDIST,
             name=f"cdist p={p}")
register("_cdist_forward _cdist_backward", lambda a, b: torch.cdist(a, b), [(2, 4, 3), (2, 6, 3)], dtypes=CDIST + (torch.float64,),
         name="cdist batched")
register("_cdist_backward.out",
         lambda g, a, b: torch.ops.aten._cdist_backward.out(g, a, b, 2.0, torch.cdist(a, b), out=torch.empty_like(a)),
         [(4, 3), (4, 2), (3, 2)], dtypes=CDIST, grad=False)

# ---------------------------------------------------------------- random ops
def one_hot_probs(dt):
    return [torch.tensor([[0.0, 0.0, 3.0, 0.0], [0.5, 0.0, 0.0, 0.0]], dtype=dt)]


register("multinomial", lambda p: torch.multinomial(p, 5, replacement=True), one_hot_probs, dtypes=FLOATS, grad=False)
register("multinomial", lambda p: torch.multinomial(p[0], 1), one_hot_probs, dtypes=FLOATS, grad=False,
         name="multinomial 1-D")
register("multinomial", lambda p: torch.multinomial(p, 3).sort(-1).values,
         lambda dt: [torch.tensor([[0.0, 2.0, 1.0, 0.0, 4.0], [1.0, 0.0, 0.0, 1.0, 1.0]], dtype=dt)], dtypes=FLOATS,
         grad=False, name="multinomial without replacement")
register("multinomial.out", lambda p: torch.multinomial(p, 2, True, out=mk(p, torch.int64)), one_hot_probs,
         dtypes=FLOATS, grad=False)
register("randperm.generator_out", lambda x: torch.randperm(50, device=x.device).sort().values + x, lambda dt: [make((50,), dt)],
         dtypes=(torch.int64,), grad=False)
register("randperm.generator_out", lambda x: torch.randperm(9, dtype=torch.float32, device=x.device).sort().values,
         lambda dt: [make((1,), dt)], dtypes=(torch.int64,), grad=False, name="randperm float")
register("normal.Tensor_float", lambda m: torch.normal(m, 0.0), [(3, 4)], dtypes=FLOATS, grad=False)
register("normal.float_Tensor", lambda s: torch.normal(1.5, s * 0), [(4, 2)], dtypes=FLOATS, grad=False)
register("normal.Tensor_Tensor", lambda m, s: torch.normal(m, s * 0), [(3, 4), (4,)], dtypes=FLOATS, grad=False)
register("normal.Tensor_float_out", lambda m: torch.normal(m, 0.0, out=torch.empty_like(m)), [(2, 5)], dtypes=FLOATS, grad=False)
register("normal.float_Tensor_out", lambda s: torch.normal(-2.0, s * 0, out=torch.empty_like(s)), [(5,)], dtypes=FLOATS, grad=False)
register("normal.Tensor_Tensor_out", lambda m, s: torch.normal(m, s * 0, out=mk(m)), [(2, 3), (2, 3)], dtypes=FLOATS,
         grad=False)
