"""Every kernel's plan counts the temporaries it takes: a call issued without scratch gets its
planned bytes at launch (tpurt_op_scratch_bytes), so a kernel that takes more from the
allocator while it runs has a plan that undercounts (torch.tpu.metrics.unplanned_temporaries).
Each case drives the paths of one kernel that take temporaries (strided operands, reductions
over inner dims, ...) and must match CPU."""
import warnings

import pytest
import torch

import torch_tpu  # noqa: F401


def _randn(*shape, dtype=torch.float32):
    g = torch.Generator().manual_seed(sum(shape) + len(shape))
    return torch.randn(*shape, generator=g).to(dtype)


# kernel name (as torch.tpu.metrics names it) -> calls f(device) that take its temporaries
CASES = {}

# ---------------------------------------------------------------- sort, scan, reduce, index, histogram
def _sorted_rows(*shape):
    return torch.sort(_randn(*shape), dim=-1).values


def _cx64_from_pairs(*shape):
    return torch.view_as_complex(_randn(*shape, 2))


def _nan_every(x, k):
    x = x.clone()
    x.view(-1)[::k] = float("nan")
    return x


def _hist_edges(*counts):
    return [torch.linspace(-2.0, 2.0, n) for n in counts]


CASES["sort"] = [lambda d: torch.sort(_randn(40, 30).to(d).t(), dim=1),
                 lambda d: torch.sort(_randn(70, 5).to(d), dim=0, descending=True)]
CASES["sort_stable"] = [lambda d: torch.sort((_randn(60, 4) * 3).to(torch.int32).to(d), dim=0, stable=True)]
CASES["topk"] = [lambda d: torch.topk(_randn(50, 8).to(d), 5, dim=0),
                 lambda d: torch.topk(_randn(6, 300).to(d).t(), 2, dim=0, largest=False)]
CASES["kthvalue"] = [lambda d: torch.kthvalue(_randn(33, 7).to(d), 4, dim=0)]
CASES["median"] = [lambda d: torch.median(_randn(9, 31).to(d).t()),
                   lambda d: torch.median((_randn(40) * 50).to(torch.int64).to(d))]
CASES["nanmedian"] = [lambda d: torch.nanmedian(_nan_every(_randn(12, 25), 7).to(d).t())]
CASES["median_dim"] = [lambda d: torch.median(_randn(41, 6).to(d), dim=0)]
CASES["nanmedian_dim"] = [lambda d: torch.nanmedian(_nan_every(_randn(6, 41), 5).to(d).t(), dim=0)]
CASES["mode"] = [lambda d: torch.mode((_randn(45, 5) * 2).round().to(d), dim=0)]
CASES["cumprod"] = [lambda d: torch.cumprod(_randn(30, 9).to(d), dim=0),
                    lambda d: torch.cumprod((_randn(20, 3) * 3).to(torch.int32).to(d), dim=0, dtype=torch.int64)]
CASES["logcumsumexp"] = [lambda d: torch.logcumsumexp(_randn(8, 40).to(d).t(), dim=0)]
CASES["cummax"] = [lambda d: torch.cummax(_randn(35, 6).to(d), dim=0)]
CASES["cummin"] = [lambda d: torch.cummin((_randn(35, 6) * 4).to(torch.int16).to(d), dim=0)]
CASES["searchsorted"] = [
    lambda d: torch.searchsorted(_sorted_rows(4, 50).to(d), _randn(4, 7).to(d)),
    lambda d: torch.searchsorted(_sorted_rows(60).double().to(d), _randn(9, 3).double().to(d), right=True),
    lambda d: torch.searchsorted(_randn(3, 40).to(d), _randn(3, 11).to(d), sorter=torch.argsort(_randn(3, 40)).to(d)),
    lambda d: torch.searchsorted((_sorted_rows(45) * 9).to(torch.int32).to(d), 2),
]
CASES["bucketize"] = [lambda d: torch.bucketize(_randn(13, 5).to(d).t(), _sorted_rows(33).to(d)),
                      lambda d: torch.bucketize((_randn(20) * 5).to(torch.int16).to(d),
                                                (_sorted_rows(21) * 5).to(torch.int16).to(d))]
CASES["histc"] = [lambda d: torch.histc(_randn(30, 20).to(d).t(), bins=17),
                  lambda d: torch.histc(_randn(200).double().to(d), bins=9, min=-1, max=1)]
CASES["isin"] = [lambda d: torch.isin((_randn(25, 4) * 3).round().to(d).t(), (_randn(30) * 3).round().to(d)),
                 lambda d: torch.isin((_randn(50) * 9).to(torch.int8).to(d), 3),
                 lambda d: torch.isin(2, (_randn(40) * 4).to(torch.int32).to(d))]
CASES["sum"] = [lambda d: torch.sum((_randn(70, 9) * 20).to(d).t(), dtype=torch.int64)]
CASES["sum_dim"] = [lambda d: torch.sum((_randn(60, 8) * 20).to(d), dim=0, dtype=torch.int32),
                    lambda d: torch.sum(_randn(0, 3).to(d), dim=0, dtype=torch.int64)]
CASES["prod"] = [lambda d: torch.prod((_randn(8, 5) * 3).to(d), dtype=torch.int64)]
CASES["prod_dim"] = [lambda d: torch.prod((_randn(9, 6) * 3).to(d), dim=0, dtype=torch.int64)]
CASES["cumsum"] = [lambda d: torch.cumsum((_randn(50, 7) * 20).to(d), dim=0, dtype=torch.int64)]
CASES["var"] = [lambda d: torch.var(_cx64_from_pairs(30, 6).to(d), dim=0)]
CASES["std"] = [lambda d: torch.std(_cx64_from_pairs(6, 30).to(d), dim=1, correction=0)]
CASES["var_mean"] = [lambda d: torch.var_mean(_cx64_from_pairs(25, 7).to(d), dim=0)]
CASES["std_mean"] = [lambda d: torch.std_mean(_cx64_from_pairs(7, 25).to(d), dim=1, keepdim=True)]
CASES["vector_norm"] = [lambda d: torch.linalg.vector_norm(_cx64_from_pairs(20, 9).to(d), dim=0),
                        lambda d: torch.linalg.vector_norm(_cx64_from_pairs(40).to(d), ord=3)]
CASES["norm"] = [lambda d: torch.ops.aten.norm.Scalar(_cx64_from_pairs(30, 5).to(d), 2)]
CASES["norm_dim"] = [lambda d: torch.ops.aten.norm.ScalarOpt_dim(_cx64_from_pairs(30, 5).to(d), 1, [0])]
CASES["logsumexp"] = [lambda d: torch.logsumexp(_cx64_from_pairs(40, 6).to(d), dim=0),
                      lambda d: torch.logsumexp(_cx64_from_pairs(5, 6, 7).to(d), dim=(0, 2), keepdim=True)]
CASES["renorm"] = [lambda d: torch.renorm(_randn(40, 6).to(d), p=2, dim=1, maxnorm=3.0)]
CASES["embedding_dense_backward"] = [
    lambda d: torch.ops.aten.embedding_dense_backward(_randn(5, 6, 8).to(d), ((_randn(5, 6).abs() * 4).long() % 20).to(d),
                                                      20, -1, False),
    lambda d: torch.ops.aten.embedding_dense_backward(_randn(7, 8, 3).to(d), ((_randn(7, 8).abs() * 3).long() % 11).to(d),
                                                      11, 2, True),
]
CASES["index"] = [lambda d: _randn(9, 12).to(d)[(_randn(9, 12) > 0.3).to(d)],
                  lambda d: _randn(7, 8, 5).to(d)[:, (_randn(8) > 0).to(d)],
                  lambda d: _randn(10, 6).to(d)[((_randn(4).abs() * 5).long() % 10).to(d), 2]]
CASES["index_put"] = [
    lambda d: _randn(9, 12).to(d).index_put_(((_randn(9, 12) > 0.3).to(d),), torch.tensor(7.0).to(d)),
    lambda d: _randn(8, 5).to(d).index_put_(((_randn(8) > 0).to(d),), _randn(5).to(d), accumulate=True),
]
CASES["index_reduce"] = [
    lambda d: _randn(6, 5).to(d).index_reduce(0, ((_randn(9).abs() * 3).long() % 6).to(d), _randn(9, 5).to(d), "mean"),
    lambda d: _randn(4, 7).to(d).t().index_reduce(1, ((_randn(6).abs() * 2).long() % 4).to(d), _randn(7, 6).to(d),
                                                  "amax", include_self=False),
]
CASES["scatter_reduce"] = [
    lambda d: _randn(6, 5).to(d).scatter_reduce(0, ((_randn(9, 5).abs() * 3).long() % 6).to(d), _randn(9, 5).to(d), "mean")]
CASES["histogram_bin_ct"] = [lambda d: torch.histogram(_randn(30, 7).to(d).t(), bins=13)]
CASES["histogram_bins_tensor"] = [lambda d: torch.histogram(_randn(120).to(d), bins=_hist_edges(17)[0].to(d))]
CASES["histogramdd_bin_edges"] = [lambda d: torch.histogramdd(_randn(80, 3).to(d), bins=[4, 7, 9])]
CASES["histogramdd_from_bin_cts"] = [lambda d: torch.histogramdd(_randn(3, 90).to(d).t(), bins=[5, 6, 8], density=True)]
CASES["histogramdd_from_bin_tensors"] = [
    lambda d: torch.histogramdd(_randn(70, 2).to(d), bins=[b.to(d) for b in _hist_edges(11, 6)])]

# ---------------------------------------------------------------- data-sized, fft, misc, nn, matmul
def _ints(*shape, high=50):
    g = torch.Generator().manual_seed(sum(shape) + high)
    return torch.randint(0, high, shape, generator=g)


def _cplx(*shape):
    return torch.view_as_complex(_randn(*shape, 2))


def _at_highest(f):
    """f(d), at "highest" matmul precision on tpu (CPU's float matmuls are plain f32)."""
    def run(d):
        if d != "tpu":
            return f(d)
        with torch.tpu.precision("highest"):
            return f(d)
    return run


def _grad(f, x, d):
    """x's gradient through f for a fixed upstream gradient (backward kernels)."""
    x = x.detach().to(d).requires_grad_()
    y = f(x)
    y.backward(_randn(y.numel()).reshape(y.shape).to(d))
    return x.grad


CASES["unique"] = [  # both passes sort a copy of every element
    lambda d: torch.unique(_ints(3000, high=97).to(d), return_inverse=True, return_counts=True),
    lambda d: torch.unique(_randn(40, 50).round().t().to(d), return_inverse=True),
]
CASES["unique_dim"] = [
    lambda d: torch.unique(_ints(300, 4, high=3).to(d), dim=0, return_inverse=True, return_counts=True),
    lambda d: torch.unique(_ints(5, 200, high=2).to(d), dim=1),
]
CASES["bincount"] = [  # the run pass's accumulator has one bin per output element
    lambda d: torch.bincount(_ints(500, high=300).to(d)),
    lambda d: torch.bincount(_ints(500, high=300).to(d), weights=_randn(500).to(d), minlength=400),
]
CASES["fft_c2c"] = [
    lambda d: torch.fft.fft(_cplx(64).to(d)),
    lambda d: torch.fft.ifft(_cplx(67).to(d), norm="ortho"),  # a large prime: Bluestein
    lambda d: torch.fft.fft(_cplx(2048, 48).to(d), dim=0, norm="ortho"),  # strided lines, in groups
    lambda d: torch.fft.fft(_cplx(1500, 64).to(d)),  # lines over the pool's threads
    lambda d: torch.fft.fftn(_cplx(6, 10, 134).to(d).transpose(0, 2), norm="ortho"),  # passes through a work buffer
]
CASES["fft_r2c"] = [
    lambda d: torch.fft.rfft(_randn(64).to(d)),
    lambda d: torch.fft.rfft(_randn(3, 134).to(d), norm="forward"),
    lambda d: torch.fft.rfft2(_randn(40, 30).to(d).t()),
    lambda d: torch.fft.fft(_randn(1200, 96).to(d)),  # two-sided
    lambda d: torch.fft.rfftn(_randn(5, 7, 71).to(d), norm="ortho"),
]
CASES["fft_c2r"] = [
    lambda d: torch.fft.irfft(_cplx(64).to(d)),
    lambda d: torch.fft.irfft(_cplx(3, 68).to(d), n=134),
    lambda d: torch.fft.irfft2(_cplx(30, 21).to(d).t()),
    lambda d: torch.fft.irfftn(_cplx(5, 7, 36).to(d), s=(5, 7, 71)),
    lambda d: torch.fft.irfft(_cplx(1500, 33).to(d)),
]
CASES["randperm"] = [lambda d: torch.randperm(3000, device=d).sort().values]  # the draws are tpu's own
CASES["multinomial"] = [  # without replacement, all categories: a permutation per row
    lambda d: torch.multinomial(_randn(4, 300).abs().to(d), 300).sort().values,
    lambda d: torch.multinomial(_randn(500).abs().to(d), 500).sort().values,
]
_bag_w, _bag_i, _bag_o = _randn(30, 70), _ints(40, high=30), torch.tensor([0, 5, 5, 17, 30])
CASES["embedding_bag"] = [
    lambda d, m=m: torch.nn.functional.embedding_bag(_bag_i.to(d), _bag_w.to(d), _bag_o.to(d), mode=m)
    for m in ("sum", "mean", "max")
]
CASES["embedding_bag_dense_backward"] = [
    *(lambda d, m=m: _grad(lambda w: torch.nn.functional.embedding_bag(_bag_i.to(d), w, _bag_o.to(d), mode=m), _bag_w, d)
      for m in ("sum", "mean", "max")),
    # offset2bag and bag_size of _bag_o
    lambda d: torch.ops.aten._embedding_bag_dense_backward(
        _randn(5, 70).to(d), _bag_i.to(d), torch.tensor([0] * 5 + [2] * 12 + [3] * 13 + [4] * 10).to(d),
        torch.tensor([5, 0, 12, 13, 10]).to(d), torch.zeros(5, 70, dtype=torch.long).to(d), 30, False, 1, None, -1)
]
CASES["softmax"] = [
    lambda d: torch.softmax(_randn(512, 256).to(d), -1),  # rows over the pool's threads
    lambda d: torch.softmax(_randn(300, 40).to(d), 0),  # tiles of lines along a denser dim
    lambda d: torch.softmax(_randn(64, 96, 33).to(d).transpose(1, 2), 1),
]
CASES["log_softmax"] = [
    lambda d: torch.log_softmax(_randn(512, 256).to(d), -1),
    lambda d: torch.log_softmax(_randn(700, 130).to(d), 0),
]
CASES["softmax_backward"] = [
    lambda d: _grad(lambda x: torch.softmax(x, -1), _randn(512, 256), d),
    lambda d: _grad(lambda x: torch.softmax(x, 0), _randn(300, 40), d),
]
CASES["log_softmax_backward"] = [
    lambda d: _grad(lambda x: torch.log_softmax(x, -1), _randn(512, 256), d),
    lambda d: _grad(lambda x: torch.log_softmax(x, 1), _randn(20, 50, 70), d),
]
CASES["layer_norm"] = [
    lambda d: torch.nn.functional.layer_norm(_randn(256, 512).to(d), (512,), _randn(512).to(d), _randn(512).to(d)),
    lambda d: torch.nn.functional.layer_norm(_randn(64, 40, 33).to(d).transpose(0, 2), (40, 64)),  # strided rows
    lambda d: torch.nn.functional.layer_norm(_randn(3, 5).to(d), (5,)),
]
CASES["layer_norm_backward"] = [
    lambda d: _grad(lambda x: torch.nn.functional.layer_norm(x, (64,), _randn(64).to(d)), _randn(50, 64), d),
]
CASES["group_norm"] = [lambda d: torch.nn.functional.group_norm(_randn(4, 6, 9, 7).to(d), 3, _randn(6).to(d))]
CASES["group_norm_backward"] = [
    lambda d: _grad(lambda x: torch.nn.functional.group_norm(x, 2, _randn(6).to(d)), _randn(4, 6, 9, 7), d),
]
_bn_x = _randn(8, 5, 6, 7)
CASES["batch_norm"] = [
    lambda d: torch.nn.functional.batch_norm(_bn_x.to(d), torch.zeros(5).to(d), torch.ones(5).to(d), training=True),
    lambda d: torch.nn.functional.batch_norm(_bn_x.to(d).transpose(0, 3).transpose(1, 3), None, None, training=True),
]
CASES["batch_norm_no_stats"] = [
    lambda d: torch.ops.aten._native_batch_norm_legit.no_stats(_bn_x.to(d), None, None, True, 0.1, 1e-5),
]
CASES["batch_norm_no_training"] = [
    lambda d: torch.ops.aten._native_batch_norm_legit_no_training(
        _bn_x.to(d), _randn(5).to(d), None, _randn(5).to(d), _randn(5).abs().to(d), 0.1, 1e-5),
]
CASES["batch_norm_with_update"] = [
    lambda d: torch.ops.aten._batch_norm_with_update(_bn_x.to(d), _randn(5).to(d), _randn(5).to(d), torch.zeros(5).to(d),
                                                     torch.ones(5).to(d), 0.1, 1e-5)[:3],
]
CASES["batch_norm_backward"] = [
    lambda d: _grad(lambda x: torch.nn.functional.batch_norm(x, None, None, _randn(5).to(d), training=True), _bn_x, d),
]
_mlm_t = torch.tensor([[3, 0, -1, 1, 1, 1, 1, 1, 1], [8, 7, 1, 2, 5, -1, 0, 0, 0]] * 20)
CASES["multilabel_margin_loss"] = [
    lambda d: torch.nn.functional.multilabel_margin_loss(_randn(40, 9).to(d), _mlm_t.to(d), reduction="none"),
]
CASES["multilabel_margin_loss_backward"] = [
    lambda d: _grad(lambda x: torch.nn.functional.multilabel_margin_loss(x, _mlm_t.to(d)), _randn(40, 9), d),
]
# Accumulators: bf16 and int32 products accumulate in f32 / int64 apart from the output,
# complex64 ones in four float parts.
_bf = torch.bfloat16
CASES["mm"] = [
    lambda d: torch.mm(_randn(40, 30, dtype=_bf).to(d), _randn(30, 20, dtype=_bf).to(d)),
    lambda d: torch.mm(_ints(40, 30).int().to(d), _ints(30, 20).int().t().contiguous().t().to(d)),
    _at_highest(lambda d: torch.mm(_cplx(20, 30).to(d), _cplx(30, 10).to(d))),
]
CASES["bmm"] = [
    lambda d: torch.bmm(_ints(3, 40, 30).int().to(d), _ints(3, 30, 20).int().to(d)),
    _at_highest(lambda d: torch.bmm(_cplx(3, 20, 30).to(d), _cplx(3, 30, 10).to(d))),
]
CASES["addmm"] = [
    lambda d: torch.addmm(_randn(20, dtype=_bf).to(d), _randn(40, 30, dtype=_bf).to(d), _randn(30, 20, dtype=_bf).to(d)),
    _at_highest(lambda d: torch.addmm(_cplx(10).to(d), _cplx(20, 30).to(d), _cplx(30, 10).to(d), alpha=2)),
]
CASES["baddbmm"] = [
    lambda d: torch.baddbmm(_ints(3, 40, 20).int().to(d), _ints(3, 40, 30).int().to(d), _ints(3, 30, 20).int().to(d)),
    _at_highest(lambda d: torch.baddbmm(_cplx(3, 20, 10).to(d), _cplx(3, 20, 30).to(d), _cplx(3, 30, 10).to(d))),
]
CASES["addbmm"] = [
    lambda d: torch.addbmm(_ints(40, 20).int().to(d), _ints(3, 40, 30).int().to(d), _ints(3, 30, 20).int().to(d)),
    _at_highest(lambda d: torch.addbmm(_cplx(20, 10).to(d), _cplx(3, 20, 30).to(d), _cplx(3, 30, 10).to(d))),
]
CASES["mv"] = [
    lambda d: torch.mv(_ints(40, 30).int().to(d), _ints(30).int().to(d)),
    _at_highest(lambda d: torch.mv(_cplx(20, 30).to(d), _cplx(30).to(d))),
]
CASES["addmv"] = [
    lambda d: torch.addmv(_ints(40).int().to(d), _ints(40, 30).int().to(d), _ints(30).int().to(d)),
    _at_highest(lambda d: torch.addmv(_cplx(20).to(d), _cplx(20, 30).to(d), _cplx(30).to(d))),
]


class WithinDotBound:
    """A float dot product whose reference is its float64 value within the float32 dot's error
    bound (Higham's gamma_K * sum |a_i||b_i|, complex parts counted apart), not CPU's bits: CPU's
    complex dot is the BLAS kernel of the host's ISA (300 terms on an AVX-512 FP16 host: CPU 1.5e-5
    from float64, tpu's four real dots 7.7e-5, the bound 1.7e-2; one element off by 0.1 is 0.14 off)."""

    def __init__(self, op, a, b):
        self.op, self.a, self.b = op, a, b

    def __call__(self, d):
        return self.op(self.a.to(d), self.b.to(d))

    def check(self, actual):
        wide = [x.to(torch.complex128 if x.is_complex() else torch.float64) for x in (self.a, self.b)]
        exact = self.op(*wide)
        mag = [(torch.view_as_real(x).abs().sum(-1) if x.is_complex() else x.abs()) for x in wide]
        k, u = self.a.numel() + 1, 2.0 ** -24
        bound = (k * u / (1 - k * u)) * torch.dot(*mag).item()
        err = exact - actual.cpu().to(exact.dtype)
        parts = [err.real, err.imag] if err.is_complex() else [err]
        assert all(abs(p.item()) <= bound for p in parts), f"{actual} is {err} from float64's {exact}, bound {bound}"


CASES["dot"] = [
    lambda d: torch.dot(_ints(300).int().to(d), _ints(300).int().to(d)),
    WithinDotBound(torch.dot, _cplx(300), _cplx(300)),
]
CASES["vdot"] = [
    lambda d: torch.vdot(_ints(300).int().to(d), _ints(300).int().to(d)),
    WithinDotBound(torch.vdot, _cplx(300), _cplx(300)),
]

# ---------------------------------------------------------------- attention, pooling, resampling, linalg, conv
from contextlib import nullcontext  # noqa: E402

_F = torch.nn.functional


def _highest(d):
    """tpu matmuls, convolutions and attention at f32 precision (their default is a bf16 pass)."""
    return torch.tpu.precision("highest") if d == "tpu" else nullcontext()


def _grads(d, f, *xs):
    """f(*xs) on device d and the gradients of its floating inputs for a fixed upstream gradient;
    f may reshape or transpose its inputs, so kernels see them strided."""
    xs = [x.detach().to(d).requires_grad_(x.is_floating_point()) for x in xs]
    with _highest(d):
        y = f(*xs)
        ys = [t for t in (y if isinstance(y, (tuple, list)) else (y,)) if t.is_floating_point()]
        torch.autograd.backward(ys, [_randn(*t.shape).to(t.dtype).to(d) for t in ys])
    return tuple(t.detach() for t in ys) + tuple(x.grad for x in xs if x.requires_grad)


# attention: several blocks / kv groups per thread; float64 outputs go through scratch
def _sdpa(d, dtype=torch.float32, hk=4, causal=False, mask=False, strided=False):
    q, k, v = _randn(2, 40, 4, 24), _randn(2, 56, hk, 24), _randn(2, 56, hk, 16)
    m = _randn(40, 56) if mask else None

    def f(q, k, v):
        q, k, v = q.to(dtype).transpose(1, 2), k.to(dtype).transpose(1, 2), v.to(dtype).transpose(1, 2)
        if not strided:
            q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        return _F.scaled_dot_product_attention(q, k, v, attn_mask=None if m is None else m.to(dtype).to(d),
                                               is_causal=causal, enable_gqa=hk != 4).float()
    return _grads(d, f, q, k, v)


_SDPA = [lambda d: _sdpa(d), lambda d: _sdpa(d, strided=True, causal=True),
         lambda d: _sdpa(d, hk=2, mask=True, strided=True)]
CASES["sdpa_fused"] = CASES["sdpa_fused_backward"] = _SDPA


# pooling: strided (transposed) inputs, forward and backward
def _pool(fn, *shape, t=(-1, -2)):
    return lambda d: _grads(d, lambda x: fn(x.transpose(*t)), _randn(*shape))


CASES["max_pool2d"] = CASES["max_pool2d_backward"] = [
    _pool(lambda x: _F.max_pool2d(x, 3, 2, 1, dilation=2, return_indices=True)[0], 2, 3, 13, 11),
    _pool(lambda x: _F.max_pool1d(x, 4, 3, ceil_mode=True), 3, 5, 17, t=(0, 1))]
CASES["max_pool3d"] = CASES["max_pool3d_backward"] = [
    _pool(lambda x: _F.max_pool3d(x, (2, 3, 2), (1, 2, 2), 1), 2, 3, 6, 7, 9)]
CASES["adaptive_max_pool2d"] = CASES["adaptive_max_pool2d_backward"] = [
    _pool(lambda x: _F.adaptive_max_pool2d(x, (4, 5)), 2, 3, 11, 13)]
CASES["adaptive_max_pool3d"] = CASES["adaptive_max_pool3d_backward"] = [
    _pool(lambda x: _F.adaptive_max_pool3d(x, (2, 3, 4)), 2, 3, 5, 7, 9)]
CASES["avg_pool2d"] = CASES["avg_pool2d_backward"] = [
    _pool(lambda x: _F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), 2, 3, 13, 11),
    _pool(lambda x: _F.avg_pool1d(x, 3, 2, 1), 3, 5, 17, t=(0, 1))]
CASES["avg_pool3d"] = CASES["avg_pool3d_backward"] = [
    _pool(lambda x: _F.avg_pool3d(x, 3, 2, 1, divisor_override=5), 2, 3, 6, 7, 9)]
CASES["adaptive_avg_pool2d"] = CASES["adaptive_avg_pool2d_backward"] = [
    _pool(lambda x: _F.adaptive_avg_pool2d(x, (4, 5)), 2, 3, 11, 13)]
CASES["adaptive_avg_pool3d"] = CASES["adaptive_avg_pool3d_backward"] = [
    _pool(lambda x: _F.adaptive_avg_pool3d(x, (2, 3, 4)), 2, 3, 5, 7, 9)]
CASES["fractional_max_pool2d"] = CASES["fractional_max_pool2d_backward"] = [
    _pool(lambda x: _F.fractional_max_pool2d(x, 3, output_size=(5, 4), _random_samples=torch.rand(
        2, 3, 2, generator=torch.Generator().manual_seed(0)).to(x.device)), 2, 3, 13, 11)]
CASES["fractional_max_pool3d"] = CASES["fractional_max_pool3d_backward"] = [
    _pool(lambda x: _F.fractional_max_pool3d(x, 2, output_size=(3, 4, 5), _random_samples=torch.rand(
        2, 3, 3, generator=torch.Generator().manual_seed(0)).to(x.device)), 2, 3, 9, 7, 8)]


# resampling: strided inputs, up- and downsampling, forward and backward
def _interp(nsp, **kw):
    return _pool(lambda x: _F.interpolate(x, **kw), 2, 3, *(7, 9, 6)[:nsp], t=(0, 1) if nsp == 1 else (-1, -2))


for _mode, _name, _align in (("nearest", "upsample_nearest", ()), ("nearest-exact", "upsample_nearest_exact", ()),
                             ("linear", "upsample_linear", (True, False)), ("bilinear", "upsample_bilinear", (True,)),
                             ("trilinear", "upsample_trilinear", (False,)), ("bicubic", "upsample_bicubic", (True,))):
    _nsp = {"linear": (1,), "bilinear": (2,), "trilinear": (3,), "bicubic": (2,)}.get(_mode, (1, 2, 3))
    for _n in _nsp:
        _kw = [dict(scale_factor=2.5), dict(size=(5, 13, 4)[:_n])]
        CASES[f"{_name}{_n}d"] = CASES[f"{_name}{_n}d_backward"] = [
            _interp(_n, mode=_mode, align_corners=a, **kw) for kw in _kw for a in (_align or (None,))]
CASES["upsample_bilinear2d_aa"] = CASES["upsample_bilinear2d_aa_backward"] = [
    _interp(2, mode="bilinear", antialias=True, size=(3, 4)), _interp(2, mode="bilinear", antialias=True,
                                                                    scale_factor=(0.3, 1.7), align_corners=True)]
for _mode, _name in (("reflect", "reflection_pad"), ("replicate", "replication_pad")):
    for _n in (1, 2, 3):
        CASES[f"{_name}{_n}d"] = CASES[f"{_name}{_n}d_backward"] = [
            _pool(lambda x, m=_mode, n=_n: _F.pad(x, (3, 2, 1, 4, 2, 1)[:2 * n], mode=m), 2, 3, *(7, 9, 6)[:_n],
                  t=(0, 1) if _n == 1 else (-1, -2))]


# grid sampling: strided input and grid, each interpolation and padding mode
def _grid(nsp, mode, pad, align, input_grad=True, dtype=torch.float32):
    x, g = _randn(2, 3, *(5, 6, 7)[:nsp], dtype=dtype), _randn(2, *(4, 3, 5)[:nsp], nsp, dtype=dtype) * 1.2
    f = (lambda x, g: _F.grid_sample(x.transpose(-1, -2), g.transpose(1, 2), mode, pad, align)) if input_grad else (
        lambda g: _F.grid_sample(x.to(g.device).transpose(-1, -2), g.transpose(1, 2), mode, pad, align))
    return lambda d: _grads(d, f, *((x, g) if input_grad else (g,)))


CASES["grid_sampler_2d"] = CASES["grid_sampler_2d_backward"] = [
    _grid(2, "bilinear", "zeros", False), _grid(2, "bicubic", "reflection", True, dtype=torch.float64),
    _grid(2, "nearest", "border", False, input_grad=False)]
CASES["grid_sampler_3d"] = CASES["grid_sampler_3d_backward"] = [
    _grid(3, "bilinear", "reflection", False), _grid(3, "nearest", "zeros", True, input_grad=False)]


# linalg: batched, strided (transposed) float64 inputs, well conditioned
def _mat(*shape, spd=False, dtype=torch.float64):
    a = _randn(*shape[:-2], shape[-1], shape[-2]).to(dtype).transpose(-1, -2)
    if spd:
        a = a @ a.mT.conj() / shape[-1]
    return a + shape[-1] * torch.eye(shape[-2], shape[-1], dtype=dtype) if shape[-1] == shape[-2] else a


def _lin(f, *xs):
    return lambda d: f(*[x.to(d) for x in xs])


CASES["lu_factor_ex"] = [_lin(torch.linalg.lu_factor_ex, _mat(3, 6, 6)), _lin(torch.linalg.lu_factor_ex, _mat(2, 5, 7))]
CASES["lu"] = [_lin(torch.linalg.lu, _mat(3, 6, 6)), _lin(torch.linalg.lu, _mat(2, 7, 4))]
CASES["lu_unpack"] = [lambda d: torch.lu_unpack(*torch.linalg.lu_factor(_mat(3, 6, 6).to(d))),
                      lambda d: torch.lu_unpack(*torch.linalg.lu_factor(_mat(2, 7, 4).to(d)))]
CASES["lu_solve"] = [lambda d: torch.linalg.lu_solve(*torch.linalg.lu_factor(_mat(3, 6, 6).to(d)), _mat(3, 6, 4).to(d)),
                     lambda d: torch.linalg.lu_solve(*torch.linalg.lu_factor(_mat(3, 6, 6).to(d)), _mat(3, 4, 6).to(d),
                                                     left=False, adjoint=True)]
CASES["det"] = [_lin(torch.linalg.det, _mat(4, 6, 6)), _lin(torch.linalg.det, _mat(4, 6, 6).mT.contiguous())]
CASES["slogdet"] = [_lin(torch.linalg.slogdet, _mat(4, 6, 6))]
CASES["solve_ex"] = [_lin(torch.linalg.solve_ex, _mat(3, 6, 6), _mat(3, 6, 4)),
                     _lin(lambda a, b: torch.linalg.solve_ex(a, b, left=False), _mat(3, 6, 6), _mat(3, 4, 6)),
                     _lin(torch.linalg.solve_ex, _mat(3, 6, 6), _randn(3, 6).double())]
CASES["inv_ex"] = [_lin(torch.linalg.inv_ex, _mat(3, 6, 6))]
CASES["cholesky_ex"] = [_lin(torch.linalg.cholesky_ex, _mat(3, 6, 6, spd=True)),
                        _lin(lambda a: torch.linalg.cholesky_ex(a, upper=True), _mat(3, 6, 6, spd=True))]
CASES["cholesky"] = [_lin(torch.cholesky, _mat(3, 6, 6, spd=True))]
CASES["qr"] = [_lin(lambda a: torch.linalg.qr(a, m), _mat(2, 7, 5)) for m in ("reduced", "complete", "r")] + [
    _lin(torch.linalg.qr, _mat(2, 4, 6))]
CASES["geqrf"] = [_lin(torch.geqrf, _mat(2, 7, 5)), _lin(torch.geqrf, _mat(2, 4, 6))]
CASES["ormqr"] = [lambda d, l=l, t=t: torch.ormqr(*torch.geqrf(_mat(2, 7, 5).to(d)), _mat(2, 7, 3).to(d) if l else
                                                   _mat(2, 3, 7).to(d), left=l, transpose=t)
                  for l in (True, False) for t in (True, False)]
CASES["solve_triangular"] = [
    _lin(lambda a, b: torch.linalg.solve_triangular(a, b, upper=True), _mat(3, 6, 6), _mat(3, 6, 4)),
    _lin(lambda a, b: torch.linalg.solve_triangular(a, b, upper=False, left=False, unitriangular=True),
         _mat(3, 6, 6), _mat(3, 4, 6))]
CASES["triangular_solve"] = [_lin(lambda b, a: torch.triangular_solve(b, a, upper=False, transpose=True),
                                  _mat(3, 6, 4), _mat(3, 6, 6))]
CASES["cholesky_solve"] = [_lin(lambda b, a: torch.cholesky_solve(b, torch.linalg.cholesky(a)), _mat(3, 6, 4),
                                _mat(3, 6, 6, spd=True))]
CASES["cholesky_inverse"] = [_lin(lambda a: torch.cholesky_inverse(torch.linalg.cholesky(a, upper=True), upper=True),
                                  _mat(6, 6, spd=True))]


def _svd(a, full):
    u, s, vh = (t.cpu() for t in torch.linalg.svd(a, full_matrices=full))
    k = s.shape[-1]
    return s, (u[..., :k] * s.unsqueeze(-2)) @ vh[..., :k, :]


def _eigh(a):
    w, v = (t.cpu() for t in torch.linalg.eigh(a))
    return w, (v * w.unsqueeze(-2)) @ v.mH


# svd / eigh split their batch over the pool: a batch of several chunks per thread
CASES["svd"] = [_lin(lambda a: _svd(a, False), _mat(12, 18, 14)), _lin(lambda a: _svd(a, True), _mat(12, 14, 18)),
                _lin(torch.linalg.svdvals, _mat(12, 18, 14))]
CASES["eigh"] = [_lin(_eigh, _mat(12, 16, 16, spd=True)), _lin(torch.linalg.eigvalsh, _mat(12, 16, 16, spd=True))]
CASES["lstsq"] = [_lin(lambda a, b: torch.linalg.lstsq(a, b, driver="gelsd")[:2], _mat(3, 7, 5), _mat(3, 7, 4)),
                  _lin(lambda a, b: torch.linalg.lstsq(a, b, driver="gelsy")[0], _mat(3, 4, 6), _mat(3, 4, 2))]
CASES["ldl_factor_ex"] = [_lin(torch.linalg.ldl_factor_ex, _mat(3, 6, 6) + _mat(3, 6, 6).mT)]
CASES["ldl_solve"] = [lambda d: torch.linalg.ldl_solve(
    *torch.linalg.ldl_factor((_mat(3, 6, 6) + _mat(3, 6, 6).mT).to(d)), _mat(3, 6, 4).to(d))]
CASES["matrix_exp"] = [_lin(torch.linalg.matrix_exp, _mat(3, 6, 6) / 6)]
CASES["householder_product"] = [lambda d: torch.linalg.householder_product(*torch.geqrf(_mat(2, 7, 5).to(d)))]


# convolutions: strided, dilated, grouped, transposed, strided (transposed / channels-last) operands
def _conv(fn, x, w, b=None, **kw):
    return lambda d: _grads(d, lambda *a: fn(*a, **kw), *((x, w) if b is None else (x, w, b)))


_cl = torch.channels_last
CASES["convolution"] = CASES["convolution_backward"] = [
    _conv(_F.conv2d, _randn(2, 4, 11, 9), _randn(6, 2, 3, 3), _randn(6), stride=2, padding=1, dilation=2, groups=2),
    _conv(_F.conv2d, _randn(2, 4, 11, 9).to(memory_format=_cl), _randn(3, 3, 4, 6).permute(3, 2, 0, 1), padding=1),
    _conv(_F.conv1d, _randn(2, 4, 17).transpose(0, 1).contiguous().transpose(0, 1), _randn(6, 4, 3), stride=3),
    _conv(_F.conv3d, _randn(1, 2, 5, 6, 7), _randn(4, 1, 2, 3, 2), _randn(4), stride=(1, 2, 1), dilation=(2, 1, 1),
          groups=2),
    _conv(_F.conv_transpose2d, _randn(2, 4, 5, 6).to(memory_format=_cl), _randn(4, 3, 3, 3), _randn(6), stride=2,
          padding=1, output_padding=1, groups=2, dilation=2),
    _conv(_F.conv_transpose2d, _randn(2, 4, 5, 6), _randn(3, 3, 4, 6).permute(2, 3, 0, 1), padding=1),
    _conv(_F.conv_transpose1d, _randn(2, 4, 9).transpose(0, 1).contiguous().transpose(0, 1), _randn(4, 3, 3),
          _randn(3), stride=1, dilation=3),
    _conv(_F.conv_transpose3d, _randn(1, 2, 3, 4, 5), _randn(2, 3, 2, 2, 3), stride=(2, 1, 2)),
    _conv(lambda x, w: _F.conv_transpose2d(x.transpose(-1, -2), w, stride=(2, 1)), _randn(2, 4, 6, 5),
          _randn(4, 3, 2, 3)),
    _conv(lambda x, w: _F.conv2d(x, w, stride=2, dilation=(1, 2)).transpose(-1, -2), _randn(2, 4, 11, 9),
          _randn(3, 4, 3, 2)),
    _conv(lambda x, w: _F.conv_transpose2d(x.transpose(-1, -2), w, padding=1), _randn(2, 4, 6, 5),
          _randn(4, 3, 3, 3)),
    lambda d: _grads(d, lambda x, w: _F.conv2d(x, w, padding=1), _randn(2, 3, 8, 8).double(),
                     _randn(5, 3, 3, 3).double()),
    lambda d: _grads(d, lambda w: _F.conv2d(_randn(2, 3, 8, 8).to(d), w, stride=2), _randn(5, 3, 3, 3))]
CASES["im2col"] = [lambda d: _F.unfold(_randn(2, 3, 9, 8).to(d).transpose(-1, -2), (3, 2), 2, 1, (2, 1)),
                   lambda d: _F.unfold(_randn(3, 7, 6).to(d), 3, padding=1)]
CASES["col2im"] = [lambda d: _F.fold(_randn(2, 3 * 6, 32).to(d).transpose(0, 1).contiguous().transpose(0, 1),
                                     (9, 8), (3, 2), 2, 1, (2, 1)),
                   lambda d: _F.fold(_randn(2, 12, 20).to(d).double(), (6, 5), 2)]


def _unplanned(kernel):
    torch.tpu.synchronize()
    return torch.tpu.metrics.unplanned_temporaries().get(kernel, 0)


def _runs(kernel):
    torch.tpu.synchronize()
    return torch.tpu.metrics.executed_ops().get(kernel, 0)


def _to_cpu(x):
    if isinstance(x, torch.Tensor):
        return x.cpu()
    if isinstance(x, (tuple, list)):
        return type(x)(_to_cpu(v) for v in x)
    return x


@pytest.mark.parametrize("kernel", sorted(CASES))
def test_plan_counts_every_temporary(kernel):
    for case in CASES[kernel]:
        before, ran = _unplanned(kernel), _runs(kernel)
        expected = None if isinstance(case, WithinDotBound) else case("cpu")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            actual = case("tpu")
        assert _runs(kernel) > ran, f"the case did not run kernel {kernel}"
        assert _unplanned(kernel) == before, (
            f"kernel {kernel} took {_unplanned(kernel) - before} bytes of temporaries its plan did not count")
        if expected is None:
            case.check(actual)
        else:
            torch.testing.assert_close(_to_cpu(actual), expected, equal_nan=True)
