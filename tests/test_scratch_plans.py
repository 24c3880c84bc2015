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
CASES["embedding_bag_backward"] = [
    lambda d, m=m: _grad(lambda w: torch.nn.functional.embedding_bag(_bag_i.to(d), w, _bag_o.to(d), mode=m), _bag_w, d)
    for m in ("sum", "mean", "max")
]
CASES["embedding_bag_dense_backward"] = [  # offset2bag and bag_size of _bag_o
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
CASES["dot"] = [
    lambda d: torch.dot(_ints(300).int().to(d), _ints(300).int().to(d)),
    lambda d: torch.dot(_cplx(300).to(d), _cplx(300).to(d)),
]
CASES["vdot"] = [
    lambda d: torch.vdot(_ints(300).int().to(d), _ints(300).int().to(d)),
    lambda d: torch.vdot(_cplx(300).to(d), _cplx(300).to(d)),
]

# ---------------------------------------------------------------- attention, pooling, resampling, linalg, conv


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
        expected = case("cpu")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            actual = case("tpu")
        assert _runs(kernel) > ran, f"the case did not run kernel {kernel}"
        assert _unplanned(kernel) == before, (
            f"kernel {kernel} took {_unplanned(kernel) - before} bytes of temporaries its plan did not count")
        torch.testing.assert_close(_to_cpu(actual), expected, equal_nan=True)
