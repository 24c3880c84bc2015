"""Bad input raises the exception type PyTorch's CPU backend raises, with a clear message;
never a crash. Data-dependent errors (an index out of range) surface at the next
synchronization in strict mode and at the issuing line in debug mode."""
import inspect
import re

import pytest
import torch

BAD_CALLS = {
    "add shape mismatch": lambda d: torch.ones(3, 4, device=d) + torch.ones(5, device=d),
    "in-place broadcast to a smaller output": lambda d: torch.ones(3, device=d).add_(torch.ones(2, 3, device=d)),
    "mm inner dims": lambda d: torch.ones(3, 4, device=d) @ torch.ones(5, 6, device=d),
    "mm dtype mismatch": lambda d: torch.ones(3, 4, device=d) @ torch.ones(4, 2, device=d, dtype=torch.float16),
    "cat rank mismatch": lambda d: torch.cat([torch.ones(2, 3, device=d), torch.ones(3, device=d)]),
    "view incompatible": lambda d: torch.ones(4, 6, device=d).t().view(24),
    "softmax bad dim": lambda d: torch.softmax(torch.ones(3, device=d), dim=3),
    "sum bad dim": lambda d: torch.ones(3, device=d).sum(dim=2),
    "layer_norm shape": lambda d: torch.nn.functional.layer_norm(torch.ones(3, 4, device=d), (5,)),
    "nll_loss target shape": lambda d: torch.nn.functional.nll_loss(torch.ones(3, 4, device=d),
                                                                   torch.zeros(5, dtype=torch.long, device=d)),
    "integer requires_grad": lambda d: torch.ones(3, dtype=torch.long, device=d).requires_grad_(),
    "bool subtraction": lambda d: torch.ones(3, dtype=torch.bool, device=d) - torch.ones(3, dtype=torch.bool, device=d),
    "fill_ with a 1-dim value": lambda d: torch.ones(3, device=d).fill_(torch.ones(2, device=d)),
    "normal_ negative std": lambda d: torch.empty(3, device=d).normal_(0, -1),
    "unfold of an integer tensor": lambda d: torch.nn.functional.unfold(torch.ones(1, 1, 3, 3, dtype=torch.long, device=d), 2),
    "fold of an integer tensor": lambda d: torch.nn.functional.fold(torch.ones(1, 4, 4, dtype=torch.uint8, device=d), (3, 3), 2),
    "geometric_ p outside (0, 1)": lambda d: torch.empty(3, device=d).geometric_(1.5),
    "cauchy_ non-positive sigma": lambda d: torch.empty(3, device=d).cauchy_(0, -1),
    "log_normal_ zero std": lambda d: torch.empty(3, device=d).log_normal_(0, 0),
    "in-place through an expanded view": lambda d: torch.ones(3, device=d).expand(2, 3).add_(1),
    "out= an expanded view": lambda d: torch.index_select(torch.ones(4, 6, device=d), 0,
                                                          torch.tensor([0, 1], device=d),
                                                          out=torch.ones(1, device=d).expand(2, 6)),
    # out-of-range indices: CPU raises RuntimeError for gather/scatter, IndexError for the rest
    "gather index out of range": lambda d: torch.gather(torch.ones(2, 2, device=d), 1,
                                                        torch.tensor([[0, 23], [0, 0]], device=d)),
    "scatter_ index out of range": lambda d: torch.ones(2, 3, device=d).scatter_(1, torch.tensor([[0, 9]], device=d), 1.0),
    "index_add_ index out of range": lambda d: torch.ones(3, device=d).index_add_(0, torch.tensor([5], device=d),
                                                                                  torch.ones(1, device=d)),
    "index_select index out of range": lambda d: torch.index_select(torch.ones(3, device=d), 0,
                                                                    torch.tensor([5], device=d)),
    # PyTorch's meta functions raise other types here than CPU does
    "embedding 0-dim weight": lambda d: torch.nn.functional.embedding(torch.tensor([0], device=d),
                                                                      torch.tensor(1.0, device=d)),
    "amax over a zero-size dim": lambda d: torch.amax(torch.ones(0, 3, device=d), 0),
    "amin over a zero-size dim": lambda d: torch.amin(torch.ones(2, 0, device=d), -1),
    "cat out= overlapping an input": lambda d: (lambda x: torch.cat([x[:2], x[2:]], out=x))(torch.ones(4, device=d)),
    "cat of 0-dim tensors": lambda d: torch.cat([torch.tensor(1.0, device=d), torch.tensor(2.0, device=d)]),
    "uniform_ from > to": lambda d: torch.empty(3, device=d).uniform_(3, -1),
    "multinomial integer input": lambda d: torch.multinomial(torch.ones(1, 2, dtype=torch.long, device=d), 2),
    "multinomial zero samples": lambda d: torch.multinomial(torch.ones(2, device=d), 0),
    "multinomial too many without replacement": lambda d: torch.multinomial(torch.ones(2, device=d), 3),
    "multinomial out= not long": lambda d: torch.multinomial(torch.ones(2, device=d), 1, out=torch.empty(1, device=d)),
    "bucketize 2-d boundaries": lambda d: torch.bucketize(torch.ones(3, device=d), torch.ones(2, 2, device=d)),
    "index_add source shape": lambda d: torch.ones(3, 2, device=d).index_add(0, torch.tensor([0, 1], device=d),
                                                                             torch.ones(2, device=d)),
    # CPU raises torch.linalg.LinAlgError where LAPACK reports failure
    "eigh of a NaN matrix": lambda d: torch.linalg.eigh(torch.full((3, 3), float("nan"), device=d)),
    "svd of a NaN matrix": lambda d: torch.linalg.svd(torch.full((2, 3, 3), float("nan"), device=d)),
    "cholesky of a non-PD matrix": lambda d: torch.linalg.cholesky(-torch.eye(3, device=d)),
    "solve with a singular matrix": lambda d: torch.linalg.solve(torch.zeros(3, 3, device=d), torch.ones(3, device=d)),
    "aminmax out= dtype": lambda d: torch.aminmax(torch.ones(4, 4, device=d), dim=0, out=(
        torch.empty(4, device=d), torch.empty(4, dtype=torch.float64, device=d))),
    # as CPU, out= may not share memory with an input of these ops (elementwise ops may)
    "gather out= is the input": lambda d: (lambda x: torch.gather(x, 0, torch.tensor([2, 1, 0], device=d), out=x))(
        torch.ones(3, device=d)),
    "take out= is the input": lambda d: (lambda x: torch.take(x, torch.tensor([2, 1, 0], device=d), out=x))(
        torch.ones(3, device=d)),
    "index_select out= is the input": lambda d: (lambda x: torch.index_select(x, 0, torch.tensor([2, 1, 0], device=d),
                                                                               out=x))(torch.ones(3, device=d)),
    "kthvalue out= is the input": lambda d: (lambda x: torch.kthvalue(x, 2, out=(x, torch.empty(0, dtype=torch.long,
                                                                                                 device=d))))(
        torch.ones(3, device=d)),
    # narrow_copy: CPU's kernel raises RuntimeError for a positive dim out of range
    "narrow_copy dim out of range": lambda d: torch.narrow_copy(torch.ones(2, 3, device=d), 2, 0, 1),
    "narrow_copy negative dim out of range": lambda d: torch.narrow_copy(torch.ones(2, 3, device=d), -3, 0, 1),
    "narrow_copy of a 0-dim tensor": lambda d: torch.narrow_copy(torch.tensor(1.0, device=d), 0, 0, 1),
    "narrow_copy start out of range": lambda d: torch.narrow_copy(torch.ones(2, 3, device=d), 1, 4, 0),
    "narrow_copy negative length": lambda d: torch.narrow_copy(torch.ones(2, 3, device=d), 1, 0, -1),
    "narrow_copy past the end": lambda d: torch.narrow_copy(torch.ones(2, 3, device=d), 1, -2, 3),
    "narrow_copy out= dtype": lambda d: torch.narrow_copy(torch.ones(2, 3, device=d), 1, 0, 1,
                                                          out=torch.empty(0, dtype=torch.long, device=d)),
    # the CPU fallback keeps arguments that share memory sharing it, so CPU's overlap checks see them
    "masked_select out= is the input": lambda d: (lambda x: torch.masked_select(x, x > 0, out=x))(torch.ones(4, device=d)),
    "masked_select out= is the mask": lambda d: (lambda m: torch.masked_select(m.clone(), m, out=m))(
        torch.ones(4, dtype=torch.bool, device=d)),
    "masked_select out= an expanded view": lambda d: torch.masked_select(
        torch.ones(4, device=d), torch.ones(4, dtype=torch.bool, device=d), out=torch.ones(1, device=d).expand(4)),
    "complex128 in-place add of its own transpose": lambda d: (lambda x: x.add_(x.t()))(
        torch.ones(3, 3, dtype=torch.complex128, device=d)),
    "copy_ of a shape that does not broadcast": lambda d: torch.empty(2, 3, device=d).copy_(torch.ones(4, device=d)),
    "copy_ into an empty tensor": lambda d: torch.empty(0, device=d).copy_(torch.ones(3, device=d)),
    # CPU's integer convolutions: int64 everywhere, other integers in the plain kernel only
    "conv_transpose2d of int32": lambda d: torch.nn.functional.conv_transpose2d(
        torch.ones(1, 2, 4, 4, dtype=torch.int32, device=d), torch.ones(2, 2, 3, 3, dtype=torch.int32, device=d)),
    "dilated conv2d of int8": lambda d: torch.nn.functional.conv2d(
        torch.ones(1, 2, 6, 6, dtype=torch.int8, device=d), torch.ones(2, 2, 3, 3, dtype=torch.int8, device=d), dilation=2),
    "conv3d of bool": lambda d: torch.nn.functional.conv3d(
        torch.ones(1, 2, 4, 4, 4, dtype=torch.bool, device=d), torch.ones(2, 2, 3, 3, 3, dtype=torch.bool, device=d)),
    # ops that size their outputs from the data validate their inputs themselves
    "masked_select non-bool mask": lambda d: torch.masked_select(torch.ones(3, device=d), torch.ones(3, device=d)),
    "masked_select shape mismatch": lambda d: torch.masked_select(torch.ones(3, device=d),
                                                                  torch.ones(4, dtype=torch.bool, device=d)),
    "x[mask] shape mismatch": lambda d: torch.ones(3, 4, device=d)[torch.ones(4, dtype=torch.bool, device=d)],
    "bincount negative": lambda d: torch.bincount(torch.tensor([-1, 2], device=d)),
    "bincount float": lambda d: torch.bincount(torch.tensor([1.0, 2.0], device=d)),
    "bincount weights length": lambda d: torch.bincount(torch.tensor([1, 2], device=d), torch.ones(3, device=d)),
    "repeat_interleave negative": lambda d: torch.repeat_interleave(torch.tensor([1, -2], device=d)),
    "repeat_interleave 2-d": lambda d: torch.repeat_interleave(torch.tensor([[1, 2]], device=d)),
    "masked_scatter short source": lambda d: torch.ones(3, device=d).masked_scatter(
        torch.ones(3, dtype=torch.bool, device=d), torch.ones(2, device=d)),
    "take index out of range": lambda d: torch.ones(3, device=d).take(torch.tensor([5], device=d)),
    "put_ index out of range": lambda d: torch.ones(3, device=d).put_(torch.tensor([-4], device=d),
                                                                      torch.ones(1, device=d)),
    "index_fill index out of range": lambda d: torch.ones(3, device=d).index_fill(0, torch.tensor([3], device=d), 1),
    "segment_reduce lengths not summing to the axis": lambda d: torch.segment_reduce(
        torch.ones(4, device=d), "sum", lengths=torch.tensor([1, 2], device=d)),
    "segment_reduce negative length": lambda d: torch.segment_reduce(
        torch.ones(4, device=d), "sum", lengths=torch.tensor([5, -1], device=d)),
    "segment_reduce unknown reduction": lambda d: torch.segment_reduce(
        torch.ones(4, device=d), "median", lengths=torch.tensor([4], device=d)),
    "segment_reduce integer data": lambda d: torch.segment_reduce(
        torch.ones(4, dtype=torch.long, device=d), "sum", lengths=torch.tensor([4], device=d)),
    "scatter_reduce index out of range": lambda d: torch.ones(3, device=d).scatter_reduce(
        0, torch.tensor([3], device=d), torch.ones(1, device=d), "amax"),
    "scatter_reduce mean of bools": lambda d: torch.ones(3, dtype=torch.bool, device=d).scatter_reduce(
        0, torch.tensor([1], device=d), torch.ones(1, dtype=torch.bool, device=d), "mean"),
    "histogram of integers": lambda d: torch.histogram(torch.arange(4, device=d), 2),
    "histogram zero bins": lambda d: torch.histogram(torch.ones(4, device=d), 0),
    "histogram non-finite data": lambda d: torch.histogram(torch.tensor([1.0, float("inf")], device=d), 2),
    "histogram reversed range": lambda d: torch.histogram(torch.ones(4, device=d), 2, range=(1.0, 0.0)),
    "histogram 2-d bins": lambda d: torch.histogram(torch.ones(4, device=d), torch.ones(1, 2, device=d)),
    "histogramdd 1-d input": lambda d: torch.histogramdd(torch.ones(4, device=d), [2]),
    "histogramdd weight shape": lambda d: torch.histogramdd(torch.ones(4, 2, device=d), [2, 2],
                                                            weight=torch.ones(3, device=d)),
    "binary_cross_entropy input outside [0, 1]": lambda d: torch.nn.functional.binary_cross_entropy(
        torch.tensor([1.5], device=d), torch.tensor([1.0], device=d)),
    "multi_margin_loss target out of range": lambda d: torch.nn.functional.multi_margin_loss(
        torch.ones(2, 3, device=d), torch.tensor([0, 3], device=d)),
    "multi_margin_loss in float16": lambda d: torch.nn.functional.multi_margin_loss(
        torch.ones(2, 3, dtype=torch.float16, device=d), torch.tensor([0, 1], device=d)),
    "glu of an odd dimension": lambda d: torch.nn.functional.glu(torch.ones(3, 5, device=d)),
    "glu of a scalar": lambda d: torch.nn.functional.glu(torch.tensor(1.0, device=d)),
    "hardshrink of integers": lambda d: torch.nn.functional.hardshrink(torch.ones(3, dtype=torch.long, device=d)),
    "index_copy index out of range": lambda d: torch.zeros(3, device=d).index_copy(0, torch.tensor([3], device=d),
                                                                                    torch.ones(1, device=d)),
    "max_unpool2d bad index": lambda d: torch.nn.functional.max_unpool2d(
        torch.ones(1, 1, 2, 2, device=d), torch.full((1, 1, 2, 2), 99, device=d), 2),
}


@pytest.mark.parametrize("name", list(BAD_CALLS))
def test_same_exception_type_as_cpu(name):
    call = BAD_CALLS[name]
    with pytest.raises(Exception) as cpu_err:
        call("cpu")
    with pytest.raises(Exception) as tpu_err:
        call("tpu")
        torch.tpu.synchronize()
    assert type(tpu_err.value) is type(cpu_err.value), f"cpu: {cpu_err.value!r}\ntpu: {tpu_err.value!r}"
    assert str(tpu_err.value), "message must not be empty"


def test_mixing_devices_is_rejected():
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(3, device="tpu") + torch.ones(3)


def test_index_out_of_range():
    weight = torch.randn(10, 4, device="tpu")
    bad = torch.tensor([1, 12], device="tpu")
    with pytest.raises(IndexError):
        torch.nn.functional.embedding(torch.tensor([1, 12]), weight.cpu())
    with torch.tpu.eager_mode("debug"):
        with pytest.raises(IndexError, match="out of range|out of bounds"):
            torch.nn.functional.embedding(bad, weight)
    # strict mode too: indexing ops check their indices before returning, as CPU does
    with pytest.raises(IndexError, match="out of range|out of bounds"):
        torch.nn.functional.embedding(bad, weight)
    for bad_call in (lambda: weight[torch.tensor([10], device="tpu")],
                     lambda: weight.index_select(0, torch.tensor([-11], device="tpu")),
                     lambda: weight.gather(1, torch.tensor([[4]], device="tpu")),
                     lambda: weight.clone().index_put_((torch.tensor([10], device="tpu"),), torch.ones(4, device="tpu"))):
        with pytest.raises((IndexError, RuntimeError), match="out of range|out of bounds"):
            bad_call()
    torch.tpu.synchronize()  # nothing left pending
    assert torch.equal(torch.nn.functional.embedding(torch.tensor([3], device="tpu"), weight).cpu(),
                       weight.cpu()[3:4])


def test_integer_and_linalg_data_errors_raise_from_the_call():
    # CPU checks these eagerly: integer division by zero, a singular / non-PD matrix
    a, b = torch.tensor([1, 2], device="tpu"), torch.tensor([1, 0], device="tpu")
    for call in (lambda: a // b, lambda: torch.remainder(a, b), lambda: torch.fmod(a, 0)):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            call()
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
        a ** -2
    with pytest.raises(torch.linalg.LinAlgError):
        torch.linalg.cholesky(-torch.eye(3, device="tpu"))
    with pytest.raises(torch.linalg.LinAlgError):
        torch.linalg.inv(torch.zeros(3, 3, device="tpu"))
    torch.tpu.synchronize()  # nothing left pending
    assert torch.equal((a // 2).cpu(), torch.tensor([0, 1]))  # float results never wait


def test_loss_target_errors_raise_at_the_next_synchronization():
    # a training step's loss stays asynchronous (as CUDA's device-side asserts): the error
    # names the kernel at the next synchronization. (The first call of a signature runs
    # blocking, so errors that depend on shapes and dtypes only raise from it: warm up first.)
    x = torch.randn(2, 3, device="tpu")
    torch.nn.functional.nll_loss(x, torch.tensor([0, 2], device="tpu"))
    loss = torch.nn.functional.nll_loss(x, torch.tensor([0, 5], device="tpu"))
    with pytest.raises(IndexError, match="asynchronous tpu kernel 'nll_loss' issued at .* failed: Target 5 is out of bounds"):
        torch.tpu.synchronize()
    del loss
    torch.tpu.synchronize()  # the error was raised once


def test_a_side_stream_kernel_error_names_the_line_that_issued_it():
    """Strict mode: the error surfaces at the next synchronization of the stream it ran on, and
    names the op and the user's line (not the line inside torch.nn.functional that called it)."""
    x = torch.randn(2, 3, device="tpu")
    torch.nn.functional.nll_loss(x, torch.tensor([0, 2], device="tpu"))  # the signature's blocking first call
    bad = torch.tensor([0, 5], device="tpu")
    side = torch.tpu.Stream()
    with torch.tpu.stream(side):
        loss = torch.nn.functional.nll_loss(x, bad); line = inspect.currentframe().f_lineno  # noqa: E702
    torch.tpu.current_stream().synchronize()  # the default stream ran nothing that failed
    with pytest.raises(IndexError, match=rf"'nll_loss' issued at {re.escape(__file__)}:{line} failed: Target 5"):
        side.synchronize()
    side.synchronize()  # raised once
    del loss


def test_first_call_of_a_signature_raises_dtype_errors_from_the_call():
    # special_zeta has no float16 kernel (nor has CPU): known from the first call, not at a
    # later synchronization inside some other code, in CPU's words
    x = torch.ones(3, dtype=torch.float16, device="tpu")
    with pytest.raises(NotImplementedError, match="\"special_zeta_cpu\" not implemented for 'Half'"):
        torch.special.zeta(x, x)
    with pytest.raises(NotImplementedError, match="'Half'"):
        torch.special.zeta(x, x)  # the signature never completed: still checked
    torch.tpu.synchronize()  # nothing left pending


def test_unsupported_dtype_is_refused_not_crashed():
    # every dtype a dense CPU tensor holds is stored on tpu (tests/test_upstream_regressions.py),
    # and qint8/quint8/qint32 quantized tensors (tests/test_quantized.py); the sub-byte quantized
    # types are refused, and so is every op without a quantized tpu kernel
    with pytest.raises(NotImplementedError, match="quint4x2"):
        torch._empty_affine_quantized([1, 0, 3], scale=1, zero_point=0, dtype=torch.quint4x2, device="tpu")
    q = torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.qint8).to("tpu")
    with pytest.raises(NotImplementedError, match="Quantizedtpu"):
        q + q

