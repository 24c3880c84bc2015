"""The op-sample registry and the harness that compares tpu against PyTorch CPU.

Each kernel family registers samples (tests/samples_<family>.py); test_ops.py is
parametrised over the runtime's op table, so an op without a sample fails the suite."""
import dataclasses
from typing import Callable, Sequence

import torch

from torch_tpu.compare import check_like_cpu

FLOATS = (torch.float32, torch.bfloat16, torch.float16)
INTS = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)
NUMERIC = FLOATS + INTS
ALL = NUMERIC + (torch.bool,)
COMPLEX = (torch.complex64,)


@dataclasses.dataclass
class Sample:
    ops: tuple            # ATen overload names this sample must run natively
    fn: Callable          # fn(*inputs) -> Tensor | tuple of Tensors (may mutate inputs)
    inputs: Callable      # inputs(dtype) -> list of CPU tensors / Python values
    dtypes: tuple
    grad: bool            # compare gradients for floating dtypes
    atol: float = None
    rtol: float = None
    noncontig: bool = True
    name: str = ""


SAMPLES: list = []


def make(shape, dtype, low=None, high=None, seed=0):
    """Deterministic random CPU tensor of any dtype."""
    g = torch.Generator().manual_seed(seed + 7919 * len(shape) + sum(shape))
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_complex:
        re, im = make(shape, dtype.to_real(), low, high, seed), make(shape, dtype.to_real(), low, high, seed + 1)
        return torch.complex(re, im)
    if dtype.is_floating_point:
        lo = -3.0 if low is None else low
        hi = 3.0 if high is None else high
        return (torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo).to(dtype)
    info = torch.iinfo(dtype)
    lo = max(info.min, -9 if low is None else int(low))
    hi = min(info.max, 10 if high is None else int(high))
    return torch.randint(lo, hi, shape, generator=g, dtype=torch.int64).to(dtype)


def register(ops: str, fn: Callable, inputs, dtypes: Sequence = (torch.float32,), grad: bool = True,
             atol=None, rtol=None, noncontig=True, name=""):
    """Register a sample. `inputs` is a list of shapes (random tensors of the dtype under test),
    or a callable(dtype) returning the input list."""
    if not callable(inputs):
        shapes = list(inputs)

        def inputs(dtype, _shapes=shapes):
            return [make(s, dtype, seed=i) for i, s in enumerate(_shapes)]

    SAMPLES.append(Sample(tuple(ops.split()), fn, inputs, tuple(dtypes), grad, atol, rtol, noncontig,
                          name or ops.split()[0]))


def samples_for(op: str):
    return [s for s in SAMPLES if op in s.ops]


# ---------------------------------------------------------------- harness
def noncontiguous(t: torch.Tensor) -> torch.Tensor:
    """Same values, doubled strides (works on any device)."""
    if t.dim() == 0:
        return t.clone()
    base = torch.empty(t.shape + (2,), dtype=t.dtype, device=t.device)
    out = base.select(-1, 0)
    out.copy_(t)
    assert not out.is_contiguous() or t.numel() <= 1
    return out


def _to(x, device, nc, requires_grad):
    if not isinstance(x, torch.Tensor):
        return x
    y = x.to(device)
    if nc and y.dim() > 0:
        y = noncontiguous(y)
    if requires_grad:
        y = y.detach().requires_grad_(True)
    return y


def _flat(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        r = []
        for o in out:
            r += _flat(o)
        return r
    return []


def _close(actual, expected, sample, what, exact=None):
    """torch_tpu.compare's policy: CPU's result within PyTorch's own tolerance for the dtype (a
    sample may state others), else at least as close to the float64 computation `exact()` as
    CPU's, computed only when needed."""
    kw = {}
    if sample.atol is not None:
        kw = dict(atol=sample.atol, rtol=sample.rtol if sample.rtol is not None else 0)
    check_like_cpu(actual, expected, exact, what=what, **kw)


def _wide(t):
    """t in float64, or complex128 when complex; other dtypes as they are."""
    if t.dtype.is_complex:
        return t.to(torch.complex128)
    return t.double() if t.dtype.is_floating_point else t


def _exact(sample, base, grad_mask, noncontig):
    """float64 (complex128) outputs, input gradients and inputs after the op (what in-place ops
    wrote) for the same input values, or None."""
    try:
        ins = [_to(_wide(x) if isinstance(x, torch.Tensor) else x, "cpu", noncontig, g)
               for x, g in zip(base, grad_mask)]
        outs = _flat(sample.fn(*ins))
        grads = None
        diff = [o for o in outs if o.requires_grad]
        if diff:
            dt = base_dtype(base)
            ws = [make(o.shape, dt, seed=99 + i).double() for i, o in enumerate(diff)]
            torch.autograd.backward(diff, ws)
            grads = [x.grad if isinstance(x, torch.Tensor) and x.requires_grad else None for x in ins]
        after = [x.detach() if isinstance(x, torch.Tensor) else None for x in ins]
        return [o.detach() for o in outs], grads, after
    except Exception:
        return None


def base_dtype(base):
    return next(x.dtype for x in base if isinstance(x, torch.Tensor) and x.dtype.is_floating_point)


def check_sample(sample: Sample, dtype, noncontig: bool):
    import torch_tpu

    base = sample.inputs(dtype)
    want_grad = sample.grad and dtype.is_floating_point
    grad_mask = [isinstance(x, torch.Tensor) and x.dtype.is_floating_point and want_grad for x in base]

    cpu_in = [_to(x, "cpu", noncontig, g) for x, g in zip(base, grad_mask)]
    tpu_in = [_to(x, "tpu", noncontig, g) for x, g in zip(base, grad_mask)]
    memo, snap = [], [x.clone() if isinstance(x, torch.Tensor) else x for x in base]  # fn may mutate base

    def exact(kind, i):
        """float64 output (kind 0) / input gradient (1) / input after the op (2) i, or None."""
        if dtype == torch.float64:
            return None
        if not memo:
            memo.append(_exact(sample, snap, grad_mask, noncontig) or ([], None, None))
        found = memo[0][kind]
        return found[i] if found and i < len(found) else None
    torch_tpu.metrics.reset()
    with torch.tpu.precision("highest"):
        expected = sample.fn(*cpu_in)
        actual = sample.fn(*tpu_in)
        torch.tpu.synchronize()
        exp_flat, act_flat = _flat(expected), _flat(actual)
        assert len(exp_flat) == len(act_flat)
        for i, (a, e) in enumerate(zip(act_flat, exp_flat)):
            assert a.device.type == "tpu", f"output {i} is on {a.device}"
            assert a.dtype == e.dtype, f"output {i}: dtype {a.dtype} != {e.dtype}"
            assert a.shape == e.shape, f"output {i}: shape {tuple(a.shape)} != {tuple(e.shape)}"
            _close(a.detach(), e.detach(), sample, f"output {i}", lambda i=i: exact(0, i))
        for i, (a, e) in enumerate(zip(tpu_in, cpu_in)):  # in-place results
            if isinstance(a, torch.Tensor) and not a.requires_grad:
                _close(a, e, sample, f"input {i} after the op", lambda i=i: exact(2, i))
        if want_grad:
            diff = [(a, e) for a, e in zip(act_flat, exp_flat) if e.requires_grad and e.dtype.is_floating_point]
            if diff:
                ws = [make(e.shape, e.dtype, seed=99 + i) for i, (_, e) in enumerate(diff)]
                torch.autograd.backward([e for _, e in diff], [w for w in ws])
                torch.autograd.backward([a for a, _ in diff], [w.to("tpu") for w in ws])
                for i, (a, e) in enumerate(zip(tpu_in, cpu_in)):
                    if isinstance(e, torch.Tensor) and e.requires_grad:
                        assert (a.grad is None) == (e.grad is None), f"grad of input {i} presence differs"
                        if e.grad is not None:
                            _close(a.grad, e.grad, sample, f"grad of input {i}", lambda i=i: exact(1, i))
        torch.tpu.synchronize()
    fallbacks = torch_tpu.metrics.fallback_ops()
    assert not fallbacks, f"ops fell back to CPU: {fallbacks}"
