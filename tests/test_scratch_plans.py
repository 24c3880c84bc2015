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

# ---------------------------------------------------------------- data-sized, fft, misc, nn, matmul

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
         lambda d: _sdpa(d, torch.float64, hk=2, mask=True, strided=True)]
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
        expected = case("cpu")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            actual = case("tpu")
        assert _runs(kernel) > ran, f"the case did not run kernel {kernel}"
        assert _unplanned(kernel) == before, (
            f"kernel {kernel} took {_unplanned(kernel) - before} bytes of temporaries its plan did not count")
        torch.testing.assert_close(_to_cpu(actual), expected, equal_nan=True)
