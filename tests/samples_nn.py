"""Samples for the nn kernels: softmax / log_softmax (+ backward), layer norm (+ backward),
nll_loss (1d, 2d, + backward), mse_loss (+ backward)."""
import torch
import torch.nn.functional as F

from samples import FLOATS, make, register

A = torch.ops.aten


def mk(x, dtype=None):
    return torch.empty(0, dtype=dtype or x.dtype, device=x.device)


# ---------------------------------------------------------------- softmax
register("_softmax _softmax_backward_data", lambda x: F.softmax(x, -1), [(4, 7)], dtypes=FLOATS)
register("_softmax _softmax_backward_data", lambda x: F.softmax(x, 0), [(5, 3, 2)], dtypes=FLOATS, name="softmax dim 0")
register("_softmax", lambda x: F.softmax(x, -1), lambda dt: [make((3, 5), dt, -3e4, 3e4)], dtypes=(torch.float32,),
         grad=False, name="softmax large")
register("_softmax _softmax_backward_data", lambda x: F.softmax(x, 0), [(3000, 10)], dtypes=(torch.float32,),
         name="softmax dim 0 partial tiles")
register("_log_softmax _log_softmax_backward_data", lambda x: F.log_softmax(x, 1), [(3, 2000, 9)],
         dtypes=(torch.bfloat16,), name="log_softmax channels")
register("_softmax.out", lambda x: A._softmax.out(x, 1, False, out=mk(x)), [(3, 6)], dtypes=FLOATS, grad=False)
register("_log_softmax _log_softmax_backward_data", lambda x: F.log_softmax(x, -1), [(4, 7)], dtypes=FLOATS)
register("_log_softmax _log_softmax_backward_data", lambda x: F.log_softmax(x, 1), [(2, 5, 3)], dtypes=FLOATS,
         name="log_softmax middle dim")
register("_log_softmax", lambda x: F.log_softmax(x, 0), [()], dtypes=FLOATS, name="log_softmax 0-dim")
register("_log_softmax.out", lambda x: A._log_softmax.out(x, 0, False, out=mk(x)), [(3, 6)], dtypes=FLOATS, grad=False)
register("_softmax_backward_data.out",
         lambda g, y: A._softmax_backward_data.out(g, y, 1, g.dtype, grad_input=mk(g)), [(3, 4), (3, 4)],
         dtypes=FLOATS, grad=False)
register("_log_softmax_backward_data.out",
         lambda g, y: A._log_softmax_backward_data.out(g, y, 1, g.dtype, out=mk(g)), [(3, 4), (3, 4)],
         dtypes=FLOATS, grad=False)

# ---------------------------------------------------------------- layer norm
register("native_layer_norm native_layer_norm_backward", lambda x, w, b: F.layer_norm(x, (5,), w, b),
         [(4, 5), (5,), (5,)], dtypes=FLOATS)
register("native_layer_norm native_layer_norm_backward", lambda x, w: F.layer_norm(x, (3, 4), w, None, eps=1e-3),
         [(2, 3, 3, 4), (3, 4)], dtypes=FLOATS, name="layer_norm 2 dims no bias")
register("native_layer_norm native_layer_norm_backward", lambda x: F.layer_norm(x, (6,)), [(3, 6)], dtypes=FLOATS,
         name="layer_norm no affine")
# CPU returns bf16/f16 mean/rstd for half inputs where the meta function says float32: f32 only
register("native_layer_norm", lambda x, w, b: A.native_layer_norm(x, [4], w, b, 1e-5), [(2, 3, 4), (4,), (4,)],
         grad=False, name="native_layer_norm outputs")
register("native_layer_norm_backward",
         lambda g, x, w: A.native_layer_norm_backward(g, x, [4], *A.native_layer_norm(x, [4], w, None, 1e-5)[1:],
                                                      w, None, [True, True, False]),
         [(3, 4), (3, 4), (4,)], dtypes=FLOATS, grad=False, name="layer_norm_backward mask")


# ---------------------------------------------------------------- nll_loss
def nll_inputs(shape, ncls, ignore=True, weight=False):
    def f(dt):
        x = make(shape, dt)
        tshape = (shape[0],) + tuple(shape[2:]) if len(shape) > 1 else ()
        t = make(tshape, torch.int64, 0, ncls, seed=3)
        if ignore and t.dim() > 0:
            t.view(-1)[1] = -100
        r = [x, t]
        if weight:
            r.append(make((ncls,), dt, 0.2, 2.0, seed=5))
        return r
    return f


for red in ("mean", "sum", "none"):
    register("nll_loss_forward nll_loss_backward", lambda x, t, red=red: F.nll_loss(x, t, reduction=red),
             nll_inputs((5, 4), 4), dtypes=FLOATS, name=f"nll_loss {red}")
    register("nll_loss_forward nll_loss_backward", lambda x, t, w, red=red: F.nll_loss(x, t, w.detach(), reduction=red),
             nll_inputs((6, 3), 3, weight=True), dtypes=FLOATS, name=f"nll_loss weight {red}")
    register("nll_loss2d_forward nll_loss2d_backward", lambda x, t, red=red: F.nll_loss(x, t, reduction=red),
             nll_inputs((2, 3, 4, 5), 3), dtypes=FLOATS, name=f"nll_loss2d {red}")
register("nll_loss_forward nll_loss_backward", lambda x, t: F.nll_loss(x, t, ignore_index=2), nll_inputs((5, 4), 4, False),
         dtypes=FLOATS, name="nll_loss ignore_index=2")
register("nll_loss_forward nll_loss_backward", lambda x, t: F.nll_loss(x, t), nll_inputs((4,), 4), dtypes=FLOATS,
         name="nll_loss unbatched")
register("nll_loss_forward nll_loss_backward", lambda x, t: F.cross_entropy(x, t), nll_inputs((5, 6), 6), dtypes=FLOATS,
         name="cross_entropy")
register("nll_loss_forward.output",
         lambda x, t: A.nll_loss_forward.output(x, t, None, 1, -100, output=mk(x), total_weight=mk(x)),
         nll_inputs((5, 4), 4), dtypes=FLOATS, grad=False)
register("nll_loss2d_forward.output",
         lambda x, t: A.nll_loss2d_forward.output(x, t, None, 2, -100, output=mk(x), total_weight=mk(x)),
         nll_inputs((2, 3, 2, 2), 3), dtypes=FLOATS, grad=False)
register("nll_loss_backward.grad_input",
         lambda g, x, t: A.nll_loss_backward.grad_input(g, x, t, None, 0, -100, torch.zeros((), dtype=x.dtype, device=x.device),
                                                        grad_input=mk(x)),
         lambda dt: [make((5,), dt)] + nll_inputs((5, 4), 4)(dt), dtypes=FLOATS, grad=False)
register("nll_loss2d_backward.grad_input",
         lambda g, x, t: A.nll_loss2d_backward.grad_input(g, x, t, None, 2, -100, torch.ones((), dtype=x.dtype, device=x.device),
                                                          grad_input=mk(x)),
         lambda dt: [make((), dt)] + nll_inputs((2, 3, 2, 2), 3)(dt), dtypes=FLOATS, grad=False)

# ---------------------------------------------------------------- mse_loss
for red in ("mean", "sum", "none"):
    register("mse_loss mse_loss_backward", lambda x, y, red=red: F.mse_loss(x, y, reduction=red), [(4, 5), (4, 5)],
             dtypes=FLOATS, name=f"mse_loss {red}")
register("mse_loss.out", lambda x, y: A.mse_loss.out(x, y, 1, out=mk(x)), [(4, 5), (4, 5)], dtypes=FLOATS, grad=False)
register("mse_loss_backward.grad_input", lambda g, x, y: A.mse_loss_backward.grad_input(g, x, y, 0, grad_input=mk(x)),
         [(4, 5), (4, 5), (4, 5)], dtypes=FLOATS, grad=False)

# ---------------------------------------------------------------- group norm, batch norm
register("native_group_norm native_group_norm_backward", lambda x, w, b: F.group_norm(x, 2, w, b),
         [(3, 4, 5), (4,), (4,)], dtypes=FLOATS)
register("native_group_norm native_group_norm_backward", lambda x: F.group_norm(x, 3, eps=1e-3),
         [(2, 6, 2, 3)], dtypes=FLOATS, name="group_norm no affine 4d")
register("native_group_norm", lambda x, w, b: A.native_group_norm(x, w, b, 2, 6, 4, 3, 1e-5),
         [(2, 6, 2, 2), (6,), (6,)], grad=False, noncontig=False, name="native_group_norm outputs")  # CPU needs contiguous


def bn_inputs(shape):
    def f(dt):
        c = shape[1]
        return [make(shape, dt), make((c,), dt, 0.5, 1.5, seed=1), make((c,), dt, seed=2),
                make((c,), torch.float32, seed=3), make((c,), torch.float32, 0.5, 2, seed=4)]
    return f


# running-stat updates are checked by the _native_batch_norm_legit sample (mutated inputs are compared
# only when they don't require grad)
register("native_batch_norm native_batch_norm_backward",
         lambda x, w, b, rm, rv: F.batch_norm(x, rm.detach(), rv.detach(), w, b, training=True, momentum=0.2),
         bn_inputs((4, 3, 5)), dtypes=(torch.float32,),
         name="batch_norm train")
register("native_batch_norm native_batch_norm_backward",
         lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), lambda dt: bn_inputs((5, 2, 2, 3))(dt)[:3],
         dtypes=FLOATS, name="batch_norm train no stats")
register("native_batch_norm native_batch_norm_backward",
         lambda x, w, b, rm, rv: F.batch_norm(x, rm.detach(), rv.detach(), w, b, training=False),
         lambda dt: bn_inputs((4, 3))(dt)[:3] + [make((3,), dt, seed=3), make((3,), dt, 0.5, 2, seed=4)],
         dtypes=(torch.float32,), name="batch_norm eval")
register("_native_batch_norm_legit",
         lambda x, w, b, rm, rv: A._native_batch_norm_legit(x, w, b, rm, rv, True, 0.1, 1e-5),
         bn_inputs((4, 3, 2)), dtypes=(torch.float32,), grad=False)
register("_native_batch_norm_legit.no_stats",
         lambda x, w, b: A._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-5),
         lambda dt: bn_inputs((4, 3, 2))(dt)[:3], dtypes=(torch.float32,), grad=False)
register("_native_batch_norm_legit_no_training",
         # [0]: CPU returns empty save_mean/save_invstd where the meta function gives [C]
         lambda x, w, b, rm, rv: A._native_batch_norm_legit_no_training(x, w, b, rm, rv, 0.1, 1e-5)[0],
         bn_inputs((4, 3, 2)), dtypes=(torch.float32,), grad=False)

# ---------------------------------------------------------------- multilabel margin loss
MLM_TARGET = torch.tensor([[3, 0, -1, 5, 1, 2], [-1, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0], [2, 2, -1, 0, 0, 0]])
for red in ("mean", "sum", "none"):
    register("multilabel_margin_loss_forward multilabel_margin_loss_backward",
             lambda x, t, red=red: F.multilabel_margin_loss(x, t, reduction=red),
             lambda dt: [make((4, 6), dt), MLM_TARGET], dtypes=(torch.float32, torch.float64),
             name=f"multilabel_margin_loss {red}")
register("multilabel_margin_loss_forward multilabel_margin_loss_backward",
         lambda x, t: F.multilabel_margin_loss(x, t, reduction="none"),
         lambda dt: [make((6,), dt), MLM_TARGET[0]], dtypes=(torch.float32,), name="multilabel_margin_loss 1-d")
register("multilabel_margin_loss_forward.output multilabel_margin_loss_backward.grad_input",
         lambda x, t: A.multilabel_margin_loss_backward.grad_input(
             torch.ones((), dtype=x.dtype, device=x.device), x, t, 1,
             A.multilabel_margin_loss_forward.output(x, t, 1, output=mk(x), is_target=mk(x))[1], grad_input=mk(x)),
         lambda dt: [make((4, 6), dt), MLM_TARGET], grad=False)

# _batch_norm_with_update (always training; reserve is empty) and batch_norm_backward, its
# backward; saved statistics keep a bf16/f16 input's dtype as on CPU
register("_batch_norm_with_update batch_norm_backward",
         lambda x, w, b, rm, rv: A._batch_norm_with_update(x, w, b, rm.detach(), rv.detach(), 0.1, 1e-5)[:3],
         lambda dt: bn_inputs((4, 3, 5))(dt)[:3] + [make((3,), dt, seed=3), make((3,), dt, 0.5, 2, seed=4)],
         dtypes=FLOATS)
register("_batch_norm_with_update",
         lambda x, w, b, rm, rv: A._batch_norm_with_update(x, w, b, rm, rv, 0.2, 1e-3)[:3] + (rm, rv),
         bn_inputs((3, 2, 2, 2)), dtypes=(torch.float32,), grad=False, name="_batch_norm_with_update running stats")
