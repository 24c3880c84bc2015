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
for dt_ in (torch.float32, torch.int64, torch.bool):
    register("eye.m_out", lambda x, _d=dt_: torch.eye(3, 5, dtype=_d, device=x.device), [(1,)], dtypes=(torch.float32,),
             grad=False, noncontig=False, name=f"eye {dt_}")
# linspace/logspace: both halves of the points (counted from each end), odd counts, one point,
# integer outputs (truncated endpoints), 16-bit floats (CPU rounds every step)
for steps in (1, 2, 7, 50):
    register("linspace.out", lambda x, n=steps: torch.linspace(-2.3, 3.7, n, out=mk(x)), [(1,)],
             dtypes=FLOATS + (torch.float64,), grad=False, name=f"linspace {steps}")
    register("linspace.out", lambda x, n=steps: torch.linspace(1.2, 9.7, n, out=mk(x)), [(1,)],
             dtypes=INTS, grad=False, name=f"linspace integer {steps}")
    register("logspace.out", lambda x, n=steps: torch.logspace(-1.3, 2.6, n, out=mk(x)), [(1,)],
             dtypes=FLOATS + (torch.float64,), grad=False, name=f"logspace {steps}")
register("logspace.out", lambda x: torch.logspace(4.3, 0, 4, base=2.0, out=mk(x)), [(1,)],
         dtypes=(torch.int64, torch.int32, torch.uint8), grad=False, name="logspace integer")
register("linspace.out", lambda x: torch.linspace(0, 1, 9, out=x.new_empty(18)[::2]), [(1,)], dtypes=FLOATS,
         grad=False, name="linspace strided out")
register("eye.out", lambda x: torch.eye(4, out=mk(x)), [(1,)], dtypes=NUMERIC + (torch.bool,), grad=False)
register("eye.m_out", lambda x: torch.eye(4, 2, out=x.new_empty(0).t()), [(1,)], dtypes=FLOATS, grad=False,
         name="eye.m_out resized")
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


def _cdist_dirty(a, b):
    """cdist after freeing NaN-filled blocks of the gradients' size, which the caching allocator
    hands out again: a backward that leaves its output unwritten shows up as NaN."""
    for _ in range(4):
        torch.full_like(b, float("nan"))
    return torch.cdist(a, b)


register("_cdist_forward _cdist_backward", _cdist_dirty, [(0, 4, 3), (6, 3)], dtypes=CDIST,
         name="cdist empty batch (x2's gradient is zeros)")
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

# ---------------------------------------------------------------- embedding_bag
# Only the bag results are compared: CPU's auxiliary outputs (offset2bag, bag_size,
# max_indices) differ between its fast and slow paths and from the meta shapes; the
# backward samples check that ours are consistent with our backward.
F = torch.nn.functional
BAG = (torch.float32, torch.bfloat16, torch.float16)


def bag_inputs(dt, n=10, with_psw=False):
    w = make((n, 3), dt)
    ind = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0])
    off = torch.tensor([0, 4, 4, 6])
    r = [w, ind, off]
    if with_psw:
        r.append(make((9,), dt, seed=5))
    return r


def dense_bag_backward(w, i, o, mode):
    """_embedding_bag_dense_backward straight from the forward's own auxiliary outputs (autograd
    reaches it through _embedding_bag_backward)."""
    i, o = i.contiguous(), o.contiguous()  # as F.embedding_bag hands them to the internal op (CPU's reads them raw)
    out, o2b, bsz, maxi = torch.ops.aten._embedding_bag(w, i, o, False, mode, False, None, False, -1)
    grad = torch.arange(out.numel(), dtype=torch.float32).reshape(out.shape).to(out.device, out.dtype)
    return torch.ops.aten._embedding_bag_dense_backward(grad, i, o2b, bsz, maxi, w.shape[0], False, mode, None, -1)


# (not "sum": CPU's fast sum path leaves offset2bag unfilled, which its own backward never reads)
for mode, code in (("mean", 1), ("max", 2)):
    register("_embedding_bag_dense_backward", lambda w, i, o, code=code: dense_bag_backward(w, i, o, code), bag_inputs,
             dtypes=(torch.float32,), grad=False, name=f"embedding_bag dense backward {mode}")
for mode in ("sum", "mean", "max"):
    register("_embedding_bag _embedding_bag_dense_backward",
             lambda w, i, o, mode=mode: F.embedding_bag(i, w, o, mode=mode), bag_inputs, dtypes=BAG,
             name=f"embedding_bag {mode}")
    register("_embedding_bag", lambda w, i, o, mode=mode: F.embedding_bag(i, w, o, mode=mode, include_last_offset=True,
                                                                        padding_idx=4),
             bag_inputs, dtypes=BAG, name=f"embedding_bag {mode} last offset padding")
register("_embedding_bag _embedding_bag_per_sample_weights_backward",
         lambda w, i, o, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p),
         lambda dt: bag_inputs(dt, with_psw=True), dtypes=BAG, name="embedding_bag per_sample_weights")
# CPU's scale_grad_by_freq backward divides the k-th distinct index's gradient by the count of
# the k-th smallest index *occurrence* (counts[indices_sorted[k]]): only the largest index may
# repeat for its answer to be the true frequency scaling, which is what we compute.
register("_embedding_bag", lambda w, i: F.embedding_bag(i, w, mode="mean", scale_grad_by_freq=True),
         lambda dt: [make((6, 4), dt), torch.tensor([[3, 0, 3], [1, 3, 2]])], dtypes=BAG, name="embedding_bag 2-D freq")
register("_embedding_bag_forward_only", lambda w, i, o: F.embedding_bag(i, w, o, mode="sum"), bag_inputs, dtypes=BAG,
         grad=False)
