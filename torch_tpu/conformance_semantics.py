"""The semantics checks of the conformance sweep: what PyTorch's device-generic suites caught
on tpu that value comparisons of OpInfo samples did not.

For one OpInfo and dtype, each check builds calls from the op's first samples, runs them on
CPU and on tpu, and passes when tpu returns what CPU returns (dtype, shape, values) or raises
the exception type CPU raises:

- ``zero_dim``: the sample's input as a 0-dim tensor (one of its elements);
- ``high_dim``: the input with leading size-1 dims up to 17 (PyTorch allows more than the
  runtime's 16 dims in a descriptor);
- ``out_resize``: ``out=`` of the wrong (non-empty) shape: resized, with CPU's warning on
  every call;
- ``out_dtype``: ``out=`` of a dtype the result cannot be cast to;
- ``out_device``: a CPU tensor as ``out=`` of a tpu call, which must raise (CUDA's rule);
- ``out_alias``: ``out=`` the input itself (elementwise ops, where that is the in-place op);
- ``promotion``: binary ufuncs over every pair of the sweep's dtypes, a 0-dim operand and
  Python scalars.
"""
import itertools
import warnings

import torch

from .compare import check_like_cpu
from .conformance import CPU_ARGS, GAUGE_FREE, _flat

CHECKS = ("zero_dim", "high_dim", "out_resize", "out_dtype", "out_device", "out_alias", "promotion")
_SAMPLES = 3          # first samples per op and dtype
_SCALARS = (True, 3, -2.5, 1 + 2j)


def _tree(x, f):
    if isinstance(x, torch.Tensor):
        return f(x)
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(_tree(v, f) for v in x)
    if isinstance(x, dict):
        return {k: _tree(v, f) for k, v in x.items()}
    return x


def _to(x, device):
    if device == "cpu64":  # the float64 (complex128) computation that decides close calls
        wide = lambda t: t.to(torch.complex128 if t.is_complex() else torch.float64) \
            if t.is_floating_point() or t.is_complex() else t  # noqa: E731
        return _tree(x, lambda t: wide(t.detach().clone()))
    return _tree(x, lambda t: t.detach().to(device=device, copy=True))


def _run(fn, device, inputs):
    """fn on `device`: ("ok", outputs, resize warnings) or ("raise", exception type, message)."""
    args = _to(inputs, device)
    import contextlib
    # f32 matmuls at the MXU's f32 precision, as the value comparisons of the sweep run them
    precision = torch.tpu.precision("highest") if device == "tpu" else contextlib.nullcontext()
    try:
        with warnings.catch_warnings(record=True) as caught, precision:
            warnings.simplefilter("always")
            out = fn(*args)
            if device == "tpu":
                torch.tpu.synchronize()
    except Exception as e:  # noqa: BLE001 - the exception type is what is compared
        if device == "tpu":
            try:
                torch.tpu.synchronize()
            except Exception:  # noqa: BLE001 - a pending error belongs to this call
                pass
        return "raise", type(e), " ".join(str(e).split())[:160]
    resized = sum("was resized" in str(w.message) for w in caught)
    return "ok", out, resized


def _same(cpu, tpu, ref=None, values=True):
    """None when tpu did what CPU did, else why not. A floating output that differs from CPU's
    passes when it is as close to the float64 computation `ref` as CPU's (the sweep's rule);
    values=False compares dtypes and shapes only (outputs not determined by the inputs)."""
    if cpu[0] == "raise":
        if tpu[0] != "raise":
            return f"CPU raised {cpu[1].__name__} ({cpu[2]}), tpu did not"
        return None if tpu[1] is cpu[1] else f"CPU raised {cpu[1].__name__}, tpu {tpu[1].__name__}: {tpu[2]}"
    if tpu[0] == "raise":
        return f"tpu raised {tpu[1].__name__}: {tpu[2]}"
    if cpu[2] != tpu[2]:
        return f"{tpu[2]} resize warnings, CPU gave {cpu[2]}"
    a, e = _flat(tpu[1]), _flat(cpu[1])
    if len(a) != len(e):
        return f"{len(a)} tensor outputs, CPU {len(e)}"
    for i, (x, y) in enumerate(zip(a, e)):
        if x.dtype != y.dtype or x.shape != y.shape:
            return f"output {i}: {x.dtype}{tuple(x.shape)}, CPU {y.dtype}{tuple(y.shape)}"
        if x.device.type == "cpu" and y.numel():
            return f"output {i} is on the CPU"
        if not values:
            continue
        def exact(i=i):
            r = _flat(ref()[1]) if ref is not None else []
            return r[i] if i < len(r) else None
        try:
            check_like_cpu(x, y, exact, what=f"output {i}")
        except AssertionError as err:
            return " ".join(str(err).split())[:200]
        except (TypeError, RuntimeError, NotImplementedError):  # dtypes assert_close cannot compare
            if not torch.equal(_bytes(x), _bytes(y)):
                return f"output {i}: bytes differ"
    return None


def _bytes(t):
    t = t.detach().cpu()
    return (t if t.layout == torch.strided else t.to_dense()).contiguous().reshape(-1).view(torch.uint8)


def _equal(a, b):
    """Bit-equal outputs (dtypes torch.equal lacks, complex32 say, compare as bytes)."""
    fa, fb = _flat(a), _flat(b)
    return len(fa) == len(fb) and all(x.shape == y.shape and x.dtype == y.dtype and torch.equal(_bytes(x), _bytes(y))
                                      for x, y in zip(fa, fb))


class Tally:
    def __init__(self):
        self.total, self.passed, self.failures = 0, 0, []

    def add(self, why, what):
        self.total += 1
        if why is None:
            self.passed += 1
        elif len(self.failures) < 5:
            self.failures.append(f"{what}: {why}"[:300])

    def as_dict(self):
        return {"total": self.total, "pass": self.passed, "failures": self.failures}


def _compare(tally, fn, inputs, what, values=True):
    torch.manual_seed(0)
    cpu = _run(fn, "cpu", inputs)
    if cpu[0] == "ok" and values:  # outputs not determined by the inputs (uninitialized memory)
        torch.manual_seed(1)
        again = _run(fn, "cpu", inputs)
        values = again[0] == "ok" and _equal(cpu[1], again[1])
    ref = lambda: _run(fn, "cpu64", inputs)  # noqa: E731
    torch.manual_seed(0)
    tally.add(_same(cpu, _run(fn, "tpu", inputs), ref if cpu[0] == "ok" else None, values), what)


def _call(op, sample, x=None, **extra):
    """The op on (x or the sample's input, args, kwargs) as a function of its tensors."""
    def fn(inp, args, kwargs):
        return op(inp, *args, **kwargs, **extra)
    return fn, [sample.input if x is None else x, sample.args, sample.kwargs]


def _names_device(sample):
    things = [*sample.args, *sample.kwargs.values()]
    return any(isinstance(a, (torch.device, str)) and str(a).split(":")[0] in ("cpu", "tpu", "cuda")
               for a in things) or "device" in sample.kwargs


def _wrong_shape_like(t):
    return torch.zeros(t.numel() + 1, dtype=t.dtype) if t.numel() else torch.zeros(2, dtype=t.dtype)


def _uncastable(dtype):
    return torch.bool if dtype == torch.bool else torch.bool if not (dtype.is_floating_point or dtype.is_complex) \
        else torch.int64


def run_semantics(op, dtype, binary=False, sweep_dtypes=(), elementwise=False):
    """{check: {total, pass, failures}} for one OpInfo and dtype."""
    tallies = {c: Tally() for c in CHECKS}
    try:
        samples = list(itertools.islice(op.sample_inputs("cpu", dtype, requires_grad=False), _SAMPLES))
    except Exception:  # noqa: BLE001 - no samples: nothing to check
        samples = []
    for k, s in enumerate(samples):
        # samples that name a device or keep arguments on the CPU (.to("cpu"), tensor_split's
        # indices) would need the sweep's own argument handling
        if not isinstance(s.input, torch.Tensor) or _names_device(s) or op.name in CPU_ARGS:
            continue
        x = s.input
        if x.numel():
            fn, ins = _call(op, s)
            _compare(tallies["zero_dim"], lambda i, a, kw: fn(i.reshape(-1)[0].clone(), a, kw), ins, f"sample {k}")
        if x.dim() < 17:
            _compare(tallies["high_dim"], lambda i, a, kw: op(i.reshape((1,) * (17 - i.dim()) + tuple(i.shape)), *a,
                                                              **kw), [x, s.args, s.kwargs], f"sample {k}")
        if not op.supports_out:
            continue
        try:
            expected = op(x, *s.args, **s.kwargs)
        except Exception:  # noqa: BLE001 - CPU refuses the sample: no out= to build
            continue
        outs = _flat(expected)
        if not outs:
            continue
        single = isinstance(expected, torch.Tensor)

        def with_out(make):
            def fn(i, a, kw, o):
                return op(i, *a, **kw, out=o if not single else o[0])
            return fn, [x, s.args, s.kwargs, [make(t) for t in outs]]

        fn, ins = with_out(_wrong_shape_like)
        _compare(tallies["out_resize"], fn, ins, f"sample {k}", values=op.name not in GAUGE_FREE)
        fn, ins = with_out(lambda t: torch.zeros(t.shape, dtype=_uncastable(t.dtype)))
        _compare(tallies["out_dtype"], fn, ins, f"sample {k}")
        tpu_in = _to([x, s.args, s.kwargs], "tpu")
        cpu_out = [torch.empty(t.shape, dtype=t.dtype) for t in outs]
        tpu = _run(lambda: op(tpu_in[0], *tpu_in[1], **tpu_in[2], out=cpu_out if not single else cpu_out[0]), "tpu", [])
        tallies["out_device"].add(None if tpu[0] == "raise" and tpu[1] is RuntimeError
                                  else f"a CPU out= was accepted ({tpu[1].__name__ if tpu[0] == 'raise' else 'no error'})",
                                  f"sample {k}")
        # out= the input is the in-place op for elementwise ops; elsewhere (a reduction writing
        # over what it reads) CPU's result is an artifact of its loop order, not a contract
        if elementwise and single and expected.shape == x.shape and expected.dtype == x.dtype:
            _compare(tallies["out_alias"], lambda i, a, kw: op(i, *a, **kw, out=i), [x.clone(), s.args, s.kwargs],
                     f"sample {k}")
    if binary:
        _promotion(op, tallies["promotion"], sweep_dtypes)
    return {c: t.as_dict() for c, t in tallies.items() if t.total}


def _promotion(op, tally, dtypes):
    from torch.testing import make_tensor
    supported = op.supported_dtypes("cpu")
    dts = [d for d in dtypes if d in supported]
    for da, db in itertools.product(dts, dts):
        a = make_tensor((3, 4), dtype=da, device="cpu", low=1, high=9)
        b = make_tensor((4,), dtype=db, device="cpu", low=1, high=9)
        _compare(tally, lambda x, y: op(x, y), [a, b], f"{da} with {db}")
        _compare(tally, lambda x, y: op(x, y.reshape(-1)[0].clone()), [a, b], f"{da} with a 0-dim {db}")
    for da in dts:
        a = make_tensor((3, 4), dtype=da, device="cpu", low=1, high=9)
        for s in _SCALARS:
            _compare(tally, lambda x, v=s: op(x, v), [a], f"{da} with {type(s).__name__} {s}")
