"""Runs every op torch_tpu has a shape function for on meta tensors and on CPU FakeTensors and
prints what comes out (shapes, strides, dtypes, or the exception type and message), one line
per call. tests/test_meta_isolation.py runs it with and without torch_tpu loaded."""
import json
import sys

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

A = torch.ops.aten


def t(*shape, dtype=torch.float32):
    return torch.randn(shape).to(dtype) if dtype.is_floating_point or dtype.is_complex else torch.ones(shape, dtype=dtype)


bf = torch.bfloat16
# overload name -> calls (functions of a tensor factory) that exercise it
SAMPLES = {
    "uniform_": [lambda: A.uniform_(t(3), 2.0, 1.0), lambda: A.uniform_(t(3), 0.0, 1.0)],
    "multinomial": [lambda: A.multinomial(t(2, 3, 4).abs(), 2), lambda: A.multinomial(t(4).abs(), 2)],
    "multinomial.out": [lambda: A.multinomial.out(t(4).abs(), 2, out=t(2))],
    "bucketize.Tensor": [lambda: A.bucketize(t(3), t(2, 2)), lambda: A.bucketize(t(3), t(4))],
    "bucketize.Tensor_out": [lambda: A.bucketize.Tensor_out(t(3), t(2, 2), out=t(3, dtype=torch.int64))],
    "cat": [lambda: A.cat([t(), t()]), lambda: A.cat([t(2), t(3)])],
    "aminmax.out": [lambda: A.aminmax.out(t(3, 4), dim=1, min=t(0, dtype=torch.float64), max=t(0))],
    "narrow_copy": [lambda: A.narrow_copy(t(4, 5), 3, 0, 1), lambda: A.narrow_copy(t(4, 5), 1, 1, 2)],
    "narrow_copy.out": [lambda: A.narrow_copy.out(t(4, 5), 1, 1, 2, out=t(7))],
    "complex.out": [lambda: A.complex.out(t(3), t(3, dtype=torch.float64), out=t(3, dtype=torch.complex128))],
    "convolution_overrideable": [lambda: A.convolution_overrideable(t(1, 2, 5, 5), t(3, 2, 3, 3), None, [1, 1], [0, 0],
                                                                    [1, 1], False, [0, 0], 1)],
    "convolution_backward_overrideable": [lambda: A.convolution_backward_overrideable(
        t(1, 3, 3, 3), t(1, 2, 5, 5), t(3, 2, 3, 3), [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, True])],
    "convolution_overrideable.channels_last": [lambda: A.convolution_overrideable(
        t(1, 2, 5, 5).contiguous(memory_format=torch.channels_last), t(3, 2, 3, 3), None, [1, 1], [0, 0], [1, 1], False,
        [0, 0], 1)],
    **{pad: [lambda pad=pad: getattr(A, pad)(t(2, 3, 4, 4).contiguous(memory_format=torch.channels_last), [1, 1, 2, 2]),
             lambda pad=pad: getattr(A, pad)(t(3, 4, 4), [1, 1, 2, 2])] for pad in ("reflection_pad2d", "replication_pad2d")},
    **{pad: [lambda pad=pad: getattr(A, pad)(t(2, 3, 4, 4, 4).contiguous(memory_format=torch.channels_last_3d), [1] * 6),
             lambda pad=pad: getattr(A, pad)(t(3, 4, 4, 4), [1] * 6)] for pad in ("reflection_pad3d", "replication_pad3d")},
    **{name: [lambda call=call, dt=dt: call(dt) for dt in (torch.int64, torch.uint8, torch.int32)] for name, call in {
        "nll_loss_forward": lambda dt: A.nll_loss_forward(t(5, 3), t(5, dtype=dt), None, 1, -100),
        "nll_loss_forward.output": lambda dt: A.nll_loss_forward.output(t(5, 3), t(5, dtype=dt), None, 1, -100,
                                                                        output=t(0), total_weight=t(0)),
        "nll_loss_backward": lambda dt: A.nll_loss_backward(t(), t(5, 3), t(5, dtype=dt), None, 1, -100, t()),
        "nll_loss_backward.grad_input": lambda dt: A.nll_loss_backward.grad_input(
            t(), t(5, 3), t(5, dtype=dt), None, 1, -100, t(), grad_input=t(0)),
        "nll_loss2d_forward": lambda dt: A.nll_loss2d_forward(t(2, 3, 2, 2), t(2, 2, 2, dtype=dt), None, 1, -100),
        "nll_loss2d_forward.output": lambda dt: A.nll_loss2d_forward.output(
            t(2, 3, 2, 2), t(2, 2, 2, dtype=dt), None, 1, -100, output=t(0), total_weight=t(0)),
        "nll_loss2d_backward": lambda dt: A.nll_loss2d_backward(t(), t(2, 3, 2, 2), t(2, 2, 2, dtype=dt), None, 1,
                                                                -100, t()),
        "nll_loss2d_backward.grad_input": lambda dt: A.nll_loss2d_backward.grad_input(
            t(), t(2, 3, 2, 2), t(2, 2, 2, dtype=dt), None, 1, -100, t(), grad_input=t(0)),
    }.items()},
    "histc": [lambda: A.histc(t(5), 4), lambda: A.histc(t(5, dtype=torch.int64), 4), lambda: A.histc(t(5), 0)],
    "histc.out": [lambda: A.histc.out(t(5), 4, out=t(0, dtype=torch.float64)), lambda: A.histc.out(t(5), 4, out=t(0))],
    "_histogramdd_from_bin_cts.out": [lambda: A._histogramdd_from_bin_cts.out(t(5, 2), [3, 4], out=t(1))],
    "_histogramdd_from_bin_tensors.out": [lambda: A._histogramdd_from_bin_tensors.out(t(5, 2), [t(3), t(4)], out=t(1))],
    "repeat_interleave.Tensor": [lambda: A.repeat_interleave.Tensor(t(3, dtype=torch.int64)),
                                 lambda: A.repeat_interleave.Tensor(t(3, dtype=torch.int64), output_size=3)],
    "_linalg_eigh": [lambda: A._linalg_eigh(t(3, 3, dtype=torch.int64)), lambda: A._linalg_eigh(t(3, 3))],
    "multilabel_margin_loss_forward": [lambda: A.multilabel_margin_loss_forward(t(4), t(4, dtype=torch.int64), 0)],
    "multi_margin_loss": [lambda: A.multi_margin_loss(t(5), t(dtype=torch.int64), 1, 1, None, 0),
                          lambda: A.multi_margin_loss(t(3, 5), t(3, dtype=torch.int64), 2, 0.5, t(5), 1)],
    "multi_margin_loss.out": [lambda: A.multi_margin_loss.out(t(5), t(dtype=torch.int64), 1, 1, None, 0, out=t(0))],
    "native_layer_norm": [lambda: A.native_layer_norm(t(2, 3, dtype=bf), [3], t(3), t(3), 1e-5),
                          lambda: A.native_layer_norm(t(2, 3, dtype=bf), [3], None, None, 1e-5)],
    "native_batch_norm": [lambda: A.native_batch_norm(t(2, 3, 4, dtype=bf), None, None, None, None, True, 0.1, 1e-5),
                          lambda: A.native_batch_norm(t(2, 3, 4, dtype=bf), t(3), t(3), t(3), t(3), False, 0.1, 1e-5)],
    "_native_batch_norm_legit": [lambda: A._native_batch_norm_legit(t(2, 3, dtype=bf), None, None, t(3, dtype=bf),
                                                                    t(3, dtype=bf), True, 0.1, 1e-5)],
    "_native_batch_norm_legit.no_stats": [lambda: A._native_batch_norm_legit.no_stats(t(2, 3, dtype=bf), None, None,
                                                                                      True, 0.1, 1e-5)],
    "_native_batch_norm_legit_no_training": [lambda: A._native_batch_norm_legit_no_training(
        t(2, 3, 4), t(3), t(3), t(3), t(3), 0.1, 1e-5)],
    "_batch_norm_with_update": [lambda: A._batch_norm_with_update(t(2, 3, dtype=bf), None, None, t(3, dtype=bf),
                                                                  t(3, dtype=bf), 0.1, 1e-5)],
    "bernoulli.out": [lambda: A.bernoulli.out(t(3), out=t(3, dtype=torch.int64))],
    "amax": [lambda: A.amax(t(0, 3), [0]), lambda: A.amax(t(2, 3), [1])],
    "amin": [lambda: A.amin(t(3, 0), [1]), lambda: A.amin(t(2, 3), [0], True)],
    **{f"{name}.out": [(lambda name: lambda: getattr(A, name).out(t(3, 4), 1, out=t(3, dtype=torch.float32)))(name),
                       (lambda name: lambda: getattr(A, name).out(t(3, 4, dtype=torch.uint8), 1,
                                                                out=t(3, dtype=torch.bool)))(name)]
       for name in ("all", "any")},
    **{f"{name}.dims_out": [(lambda name: lambda: getattr(A, name).dims_out(t(3, 4), [0, 1], out=t(0, dtype=torch.bool)))(name)]
       for name in ("all", "any")},
    **{f"{name}.all_out": [(lambda name: lambda: getattr(A, name).all_out(t(3, 4), out=t(0, dtype=torch.int32)))(name)]
       for name in ("all", "any")},
    "arange.start_out": [lambda: A.arange.start_out(0, 4, 1, out=t(2, 2)), lambda: A.arange.start_out(0, 4, 1, out=t(5))],
    "linspace.out": [lambda: A.linspace.out(0, 1, 4, out=t(2, 2)), lambda: A.linspace.out(0, 1, 4, out=t(3))],
    "logspace.out": [lambda: A.logspace.out(0, 1, 4, 2.0, out=t(4, 1))],
    "polar.out": [lambda: A.polar.out(t(3), t(3, dtype=torch.float64), out=t(3, dtype=torch.complex128)),
                  lambda: A.polar.out(t(3), t(3), out=t(3))],
    "mish_backward": [lambda: A.mish_backward(t(2, 3), t(2, 3)), lambda: A.mish_backward(t(3), t(2, 3, dtype=bf))],
}


def describe(r):
    if isinstance(r, torch.Tensor):
        return [list(r.shape), list(r.stride()), str(r.dtype)]
    if isinstance(r, (tuple, list)):
        return [describe(x) for x in r]
    return repr(r)


def run(call, mode):
    try:
        if mode == "meta":
            with torch.device("meta"):
                return describe(call())
        with FakeTensorMode():
            return describe(call())
    except Exception as e:  # the exception is the result being compared
        return [type(e).__name__, str(e).split("\n")[0]]


if __name__ == "__main__":
    if sys.argv[1:] == ["names"]:
        print(json.dumps(sorted(SAMPLES)))
    else:
        print(json.dumps({f"{name}#{i}:{mode}": run(call, mode) for name, calls in SAMPLES.items()
                          for i, call in enumerate(calls) for mode in ("meta", "fake")}, indent=0))
