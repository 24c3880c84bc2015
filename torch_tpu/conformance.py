"""OpInfo conformance: every PyTorch OpInfo, run on tpu and on CPU, compared.

    python -m torch_tpu.conformance                  # fast subset (~40 common ops, float32 + bfloat16)
    python -m torch_tpu.conformance --full           # every OpInfo, every dtype
    python -m torch_tpu.conformance --ops add,mul --dtypes float32,bfloat16
    python -m torch_tpu.conformance --full --resume  # continue an interrupted sweep
    python -m torch_tpu.conformance --full --reference-inputs   # OpInfo's larger reference inputs

For each OpInfo of ``torch.testing._internal.common_methods_invocations.op_db`` and each dtype
it supports on CPU, its sample inputs run on tpu (contiguous and non-contiguous) and on CPU;
outputs are compared with ``torch.testing.assert_close``'s default tolerances (a floating
result at least as close to the float64 computation as CPU's own also passes, as CPU rounds
intermediates), gradients too for differentiable ops, and ``error_inputs`` must raise the same
exception type. A sample that matches but used the CPU fallback counts as "fallback", not
"pass". Ops run in worker subprocesses that stream JSON lines to the parent, so a crash loses
one op (recorded as CRASH) and ``--resume`` continues where a sweep stopped.

Outputs (``--out``, default results/): conformance.jsonl (streamed records),
conformance.json (all records + summary), conformance.md (totals per family, gaps)."""
import argparse
import collections
import contextlib
import json
import math
import os
import re
import selectors
import signal
import subprocess
import sys
import time
import types
import warnings

import torch

from . import provenance
from .compare import check_like_cpu

DTYPES = {
    "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
    "int64": torch.int64, "int32": torch.int32, "uint8": torch.uint8, "bool": torch.bool,
    "complex64": torch.complex64,
}
FULL_DTYPES = list(DTYPES)
FAST_DTYPES = ["float32", "bfloat16"]
FAST_OPS = [
    "add", "sub", "mul", "div", "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "tanh", "sigmoid",
    "pow", "clamp", "where", "eq", "lt", "maximum", "sum", "mean", "amax", "argmax", "var", "cumsum",
    "softmax", "log_softmax", "mm", "bmm", "matmul", "addmm", "nn.functional.linear", "nn.functional.gelu",
    "nn.functional.relu", "nn.functional.layer_norm", "nn.functional.cross_entropy",
    "nn.functional.embedding", "index_select", "gather", "cat", "transpose", "tril",
]
STATUSES = ("pass", "fallback", "mismatch", "error", "timeout", "crash", "skip")
_WORST = {s: i for i, s in enumerate(("skip", "pass", "fallback", "timeout", "mismatch", "error", "crash"))}
# OpInfos whose outputs are not determined by their inputs: only shapes/dtypes are compared.
RANDOM_WORDS = ("bernoulli", "normal", "rand", "dropout", "multinomial", "uniform", "exponential",
                "geometric", "cauchy", "poisson", "empty", "rrelu", "fractional_max_pool", "lowrank")
LINALG = {"mm", "bmm", "matmul", "addmm", "addmv", "addbmm", "baddbmm", "addr", "mv", "dot", "vdot", "inner",
          "outer", "tensordot", "einsum", "kron", "cholesky", "cholesky_inverse", "cholesky_solve", "lu",
          "lu_solve", "lu_unpack", "qr", "svd", "pinverse", "triangular_solve", "logdet", "matrix_exp",
          "geqrf", "ormqr", "trace", "cdist", "chain_matmul", "__rmatmul__", "cross", "block_diag", "diag",
          "diag_embed", "diagflat", "norm", "dist", "renorm", "pca_lowrank", "svd_lowrank", "torch._scaled_mm",
          "torch._scaled_mm_v2", "sparse.mm", "sparse.sampled_addmm"}
REDUCTIONS = {"sum", "mean", "prod", "amax", "amin", "aminmax", "argmax", "argmin", "all", "any", "std",
              "std_mean", "var", "var_mean", "max", "min", "median", "nanmedian", "nanmean", "nansum", "mode",
              "kthvalue", "logsumexp", "count_nonzero", "cumsum", "cumprod", "cummax", "cummin",
              "logcumsumexp", "quantile", "nanquantile", "sort", "argsort", "msort", "topk", "histc",
              "histogram", "histogramdd", "bincount", "unique", "unique_consecutive", "softmax", "log_softmax",
              "equal", "allclose", "trapz", "trapezoid", "cumulative_trapezoid", "_segment_reduce"}
INDEXING_RE = re.compile(r"(index|gather|scatter|take|put|masked_|select|narrow|slice|nonzero|argwhere|where"
                         r"|searchsorted|bucketize|isin|embedding|one_hot|__getitem__|tril|triu|flip|roll"
                         r"|rot90|repeat_interleave|unravel)")
SHAPE_RE = re.compile(r"(view|reshape|flatten|squeeze|unsqueeze|permute|transpose|expand|broadcast|split|chunk"
                      r"|stack|cat$|unbind|movedim|ravel|^t$|^T$|^mT$|^mH$|^H$|atleast|unflatten|unfold|tile"
                      r"|repeat|as_strided|diagonal|contiguous|clone|alias|meshgrid|pad|resize|sum_to_size"
                      r"|column_stack|cartesian_prod|combinations|_copy$|^real$|^imag$|conj|resolve)")
FACTORY_RE = re.compile(r"(^(zeros|ones|full|arange|linspace|logspace|eye|scalar_tensor|tril_indices"
                        r"|triu_indices|randint|randn)|_like$|^new_|^signal\.windows)")
CONVERSIONS = {"bfloat16", "bool", "byte", "char", "double", "float", "half", "int", "long", "short", "cfloat",
               "cdouble", "chalf", "to", "item", "hash_tensor"}


# ---------------------------------------------------------------- classification
def op_key(op) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def family(op) -> str:
    from torch.testing._internal.opinfo.core import BinaryUfuncInfo, ReductionOpInfo, UnaryUfuncInfo
    n = op.name
    if any(w in n for w in RANDOM_WORDS) and "empty" not in n:
        return "random"
    for prefix, fam in (("fft.", "fft"), ("linalg.", "linalg"), ("special.", "special"), ("masked.", "masked"),
                        ("signal.", "factory"), ("nn.functional.", "nn.functional"), ("_foreach", "foreach")):
        if n.startswith(prefix):
            return fam
    if n in LINALG:
        return "linalg"
    if isinstance(op, ReductionOpInfo) or n in REDUCTIONS:
        return "reduction"
    if n in CONVERSIONS:
        return "conversion"
    if FACTORY_RE.search(n) or "empty" in n:
        return "factory"
    if INDEXING_RE.search(n):
        return "indexing"
    if SHAPE_RE.search(n):
        return "shape/view"
    if isinstance(op, UnaryUfuncInfo):
        return "elementwise unary"
    if isinstance(op, BinaryUfuncInfo):
        return "elementwise binary"
    return "other"


RNG_PACKETS = {"native_dropout", "bernoulli", "bernoulli_", "normal", "normal_", "uniform_", "random_",
               "exponential_", "multinomial", "randperm", "rand", "randn", "randint"}


# Singular and eigen vectors are unique only up to sign (up to any rotation for repeated values
# and for the columns full_matrices=True adds), and LAPACK's choice is not reproducible: these
# OpInfos' outputs are compared after the sample's output_process_fn_grad (|U|, S, |Vh| over the
# k singular triplets, U Vh; eigenvalues, |eigenvectors|), as PyTorch's test_compare_cpu does.
# Tolerances are unchanged; gradients already go through the same function.
GAUGE_FREE = frozenset({"svd", "linalg.svd", "linalg.eigh"})


def is_random(op) -> bool:
    return bool(op.has_nondeterministic_output) or family(op) == "random" or "empty" in op.name


# ---------------------------------------------------------------- moving samples
def _tree(x, f):
    if isinstance(x, torch.Tensor):
        return f(x)
    if isinstance(x, torch.device) or isinstance(x, str) and x in ("cpu", "cpu:0"):
        return f(x)     # factory ops and .to() name the device
    if isinstance(x, list):
        return [_tree(v, f) for v in x]
    if isinstance(x, tuple) and not hasattr(x, "_fields"):
        return tuple(_tree(v, f) for v in x)
    if isinstance(x, dict):
        return {k: _tree(v, f) for k, v in x.items()}
    return x


def _move(t, device, noncontig, dtype=None, widen=None):
    """A leaf copy of `t` on `device` (optionally non-contiguous / recast: a floating or complex
    tensor is promoted with `dtype`, so float64 widens complex64 to complex128, and one of the
    integer dtype `widen` becomes `dtype`), keeping requires_grad."""
    from torch.testing._internal.common_utils import noncontiguous_like
    rg = t.requires_grad
    with torch.no_grad():
        y = t.detach()
        if dtype is not None and (y.is_floating_point() or y.is_complex()):
            y = y.to(torch.promote_types(y.dtype, dtype))
        elif widen is not None and y.dtype == widen:
            y = y.to(dtype)
        y = y.to(device)
        if noncontig and y.numel() > 1:
            y = noncontiguous_like(y)
    return y.detach().requires_grad_(rg) if rg and (y.is_floating_point() or y.is_complex()) else y


def _move_exact(t, device, storages):
    """`t` on `device` with the same strides, offset and storage sharing as on CPU (expanded
    inputs, `out=` aliasing an input), or None where that cannot be rebuilt."""
    if t.is_conj() or t.is_neg() or t.layout != torch.strided:
        return None
    st = t.untyped_storage()
    size = t.element_size()
    if st.nbytes() % size:
        return None
    key = (st.data_ptr(), st.nbytes(), t.dtype)
    if key not in storages:
        flat = torch.empty(0, dtype=t.dtype).set_(st, 0, (st.nbytes() // size,), (1,))
        storages[key] = flat.to(device)
    y = storages[key].as_strided(t.shape, t.stride(), t.storage_offset())
    # a grad leaf keeps its storage and offset too (as_strided's partial views read them)
    return y.detach().requires_grad_() if t.requires_grad else y


# Positional arguments (after the input) that PyTorch requires on the CPU whatever the device
# (OpInfo builds them on the CPU for CUDA too): they stay there.
CPU_ARGS = {"tensor_split": (0,)}


class Call:
    """One sample's (input, args, kwargs) on a device, with its grad leaves. Contiguous runs
    keep the CPU sample's strides and aliasing; non-contiguous runs use noncontiguous_like."""

    def __init__(self, sample, device, noncontig, dtype=None, cpu_args=(), widen=None):
        storages = {}
        self.on_device = False     # whether anything names the device (else it runs on CPU anyway)

        def mv(t):
            self.on_device = True
            if not isinstance(t, torch.Tensor):
                return torch.device(device) if isinstance(t, torch.device) else device
            if not noncontig and dtype is None:
                y = _move_exact(t, device, storages)
                if y is not None:
                    return y
            return _move(t, device, noncontig, dtype, widen)
        self.input = _tree(sample.input, mv)
        self.args = tuple(a if k in cpu_args else _tree(a, mv) for k, a in enumerate(sample.args))
        self.kwargs = _tree(sample.kwargs, mv)
        if self.kwargs.get("device") is not None and device != "cpu":
            self.kwargs["device"] = device
            self.on_device = True
        self.leaves = [t for t in _flat((self.input, self.args, self.kwargs)) if t.requires_grad]
        self.process = sample.output_process_fn_grad

    def __call__(self, fn):
        return fn(self.input, *self.args, **self.kwargs)


def _flat(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _flat(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _flat(v)]
    return []


def _scalars(x):
    """The non-tensor leaves of an output (ints, bools, sizes), compared by value."""
    if isinstance(x, torch.Tensor):
        return []
    if isinstance(x, (list, tuple)):
        return [s for v in x for s in _scalars(v)]
    return [x] if isinstance(x, (int, float, bool, complex, str, type(None))) else []


# ---------------------------------------------------------------- comparison
class Mismatch(Exception):
    pass


def _close(actual, expected, ref=None, what="output"):
    """torch_tpu.compare's policy, with PyTorch's default tolerances; `ref` is the float64 /
    complex128 computation."""
    if actual.dtype != expected.dtype:
        raise Mismatch(f"{what}: dtype {actual.dtype} != {expected.dtype}")
    if actual.shape != expected.shape:
        raise Mismatch(f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}")
    try:
        check_like_cpu(actual, expected, ref, what=what)
    except AssertionError as err:
        raise Mismatch(" ".join(str(err).split())[:400]) from None


def _compare_outputs(act, exp, refs, shapes_only):
    at, et = _flat(act), _flat(exp)
    if len(at) != len(et):
        raise Mismatch(f"{len(at)} tensor outputs != CPU's {len(et)}")
    for i, (a, e) in enumerate(zip(at, et)):
        if a.device.type != "tpu" and e.device.type == "cpu" and a.numel():
            raise Mismatch(f"output {i} is on {a.device}")
        if shapes_only:
            if a.dtype != e.dtype or a.shape != e.shape:
                raise Mismatch(f"output {i}: {a.dtype}{tuple(a.shape)} != {e.dtype}{tuple(e.shape)}")
        else:
            _close(a, e, refs[i] if refs is not None and i < len(refs) else None, f"output {i}")
    sa, se = _scalars(act), _scalars(exp)
    if not shapes_only and sa != se and not all(
            isinstance(x, float) and isinstance(y, float) and math.isclose(x, y, rel_tol=1e-5, abs_tol=1e-6)
            or x == y for x, y in zip(sa, se)):
        raise Mismatch(f"non-tensor outputs {sa!r} != {se!r}"[:300])


def _weights(outs):
    g = torch.Generator().manual_seed(1234)
    return [torch.rand(o.shape, generator=g, dtype=torch.float64).mul_(2).sub_(1).to(o.dtype) for o in outs]


def _diff_outputs(call, out):
    out = call.process(out) if call.process else out
    return [o for o in _flat(out) if o.requires_grad and (o.is_floating_point() or o.is_complex())]


def _grads(call, out, weights):
    outs = _diff_outputs(call, out)
    if not outs or not call.leaves:
        return None
    return torch.autograd.grad(outs, call.leaves, [w.to(o.device) for o, w in zip(outs, weights)],
                               allow_unused=True)


def _equal_outputs(a, b):
    fa, fb = _flat(a), _flat(b)
    return len(fa) == len(fb) and all(x.shape == y.shape and x.dtype == y.dtype and torch.equal(
        x.detach().nan_to_num(0) if x.is_floating_point() else x.detach(),
        y.detach().nan_to_num(0) if y.is_floating_point() else y.detach()) for x, y in zip(fa, fb))


# ---------------------------------------------------------------- observing overloads
def _dispatch_mode():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Observe(TorchDispatchMode):
        """Collects the ATen overloads dispatched with tpu tensors."""

        def __init__(self):
            super().__init__()
            self.seen = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if any(isinstance(t, torch.Tensor) and t.device.type == "tpu" for t in _flat((args, kwargs))):
                self.seen.add(func.name().replace("aten::", "", 1))
            return func(*args, **kwargs)

    return Observe()


def _packet(name):
    return name.replace("aten::", "", 1).split(".")[0]


class _OpTimeout(Exception):
    pass


@contextlib.contextmanager
def _time_limit(seconds):
    if not seconds or not hasattr(signal, "SIGALRM") or \
            __import__("threading").current_thread() is not __import__("threading").main_thread():
        yield
        return

    def fire(*_):
        raise _OpTimeout(f"over the per-op time limit of {seconds:.0f} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# ---------------------------------------------------------------- running one OpInfo
class Tally:
    def __init__(self):
        self.c = collections.Counter()
        self.first = {}          # status -> first reason

    def add(self, status, reason=""):
        self.c[status] += 1
        if reason and status not in self.first:
            self.first[status] = reason

    def as_dict(self):
        return {"total": sum(v for k, v in self.c.items() if k != "skip"), **{s: self.c[s] for s in STATUSES}}


def _sync():
    torch.tpu.synchronize()


def _clear_pending_error():
    try:
        torch.tpu.synchronize()
    except Exception:
        pass


def _compiled(fn):
    """fn through torch.compile(backend="tpu"), compiled afresh for each call: each sample is
    its own graph, and Dynamo's cache limit must not send later samples to eager unseen."""
    def run(*args, **kwargs):
        torch._dynamo.reset()
        # a Python frame for Dynamo to compile (op.op is often a builtin such as torch.mul)
        return torch.compile(lambda *a, **k: fn(*a, **k), backend="tpu", dynamic=False)(*args, **kwargs)
    return run


class OpRunner:
    def __init__(self, op, max_samples=None, backward=True, noncontig=True, compile=False, reference=False):
        self.op = op
        self.tpu_fn = _compiled(op.op) if compile else None  # the tpu side's callable; None: the OpInfo
        self.max_samples = max_samples
        self.backward = backward
        self.noncontig = noncontig
        self.reference = reference
        self.random = is_random(op)
        self.drew_random = False
        self.observed = set()
        self.fell_back = set()

    def _tpu_run(self, call, fn):
        """Runs fn(call) on tpu; returns (result, fallback op names)."""
        import torch_tpu
        torch_tpu.metrics.reset()
        # the overloads seen executing, through a dispatch mode; compiled graphs run without one
        # (Dynamo does not compile under a user mode): their kernels are not observed
        mode = _dispatch_mode() if self.tpu_fn is None else contextlib.nullcontext(types.SimpleNamespace(seen=set()))
        try:
            with torch.tpu.precision("highest"), mode as mode:
                out = fn(call)
            _sync()
        finally:
            fb = set(torch_tpu.metrics.fallback_ops())
            self.fell_back |= fb
            packets = {_packet(f) for f in fb}
            self.observed |= {s for s in mode.seen if _packet(s) not in packets}
        self.drew_random = bool(RNG_PACKETS & {_packet(s) for s in mode.seen})
        return out, sorted(fb)

    def _ref64(self, sample, fn, dtype=torch.float32):
        """CPU float64 (complex128 for a complex dtype) outputs and grads for the same inputs, or
        None. An integer dtype's tensors become float64 (a float result of integers: a special
        polynomial of int64 x and n, whose float32 CPU result can overflow to NaN)."""
        if (torch.complex128 if dtype.is_complex else torch.float64) not in self.op.supported_dtypes("cpu"):
            return None
        widen = dtype if not (dtype.is_floating_point or dtype.is_complex or dtype == torch.bool) else None
        try:
            c = Call(sample, "cpu", False, torch.float64, widen=widen)
            out = c(fn)
            return out, c
        except Exception:
            return None

    def run_dtype(self, dtype):
        op = self.op
        fwd, bwd = Tally(), Tally()
        fallbacks = set()
        want_grad = self.backward and op.supports_autograd and dtype.is_floating_point and not self.random
        try:
            # reference_inputs: sample_inputs plus OpInfo's larger, extremal and broadcast cases
            inputs = op.reference_inputs if self.reference else op.sample_inputs
            samples = list(inputs("cpu", dtype, requires_grad=want_grad))
        except Exception as e:
            return fwd, bwd, fallbacks, f"sample generation failed: {type(e).__name__}: {e}"[:300]
        if self.max_samples:
            samples = samples[: self.max_samples]
        if not samples:
            return fwd, bwd, fallbacks, "no samples for this dtype"
        fn = op
        # as_strided reads the storage itself: a non-contiguous copy has a different storage
        noncontig = self.noncontig and not op.name.startswith("as_strided")
        for sample in samples:
            for nc in ((False, True) if noncontig else (False,)):
                self._one(sample, dtype, nc, fn, fwd, bwd, fallbacks, want_grad and not nc)
        return fwd, bwd, fallbacks, None

    def _one(self, sample, dtype, nc, fn, fwd, bwd, fallbacks, grad):
        try:
            cpu = Call(sample, "cpu", nc)
            torch.manual_seed(0)
            expected = cpu(fn)
        except _OpTimeout:
            raise
        except Exception as e:
            fwd.add("skip", f"CPU raised {type(e).__name__}")
            return
        shapes_only = self.random
        if not shapes_only:
            try:
                torch.manual_seed(1)
                if not _equal_outputs(expected, Call(sample, "cpu", nc)(fn)):
                    shapes_only = self.random = True   # outputs not determined by inputs
            except _OpTimeout:
                raise
            except Exception:
                pass
        try:
            tpu = Call(sample, "tpu", nc, cpu_args=CPU_ARGS.get(self.op.name, ()))
            if not tpu.on_device:
                fwd.add("skip", "sample names no tensor or device (runs on the default device)")
                return
            actual, fb = self._tpu_run(tpu, lambda c: c(self.tpu_fn or fn))
        except _OpTimeout:
            raise
        except Exception as e:
            _clear_pending_error()
            fwd.add("error", f"{type(e).__name__}: {' '.join(str(e).split())}"[:300])
            return
        fallbacks.update(fb)
        # A sample that drew random numbers (dropout inside attention, say) cannot match
        # CPU's generator value for value, even when the OpInfo seeds it.
        shapes_only = shapes_only or self.drew_random
        gauge = (lambda o: o) if self.op.name not in GAUGE_FREE or not sample.output_process_fn_grad \
            else sample.output_process_fn_grad
        try:
            with torch.no_grad(), torch.tpu.precision("highest"):
                cmp_actual, cmp_expected = gauge(actual), gauge(expected)
            try:
                _compare_outputs(cmp_actual, cmp_expected, None, shapes_only)
            except Mismatch:
                # an integer dtype: only where every output is floating (an index stays exact)
                wanted = dtype.is_floating_point or dtype.is_complex or (dtype != torch.bool and all(
                    t.is_floating_point() or t.is_complex() for t in _flat(cmp_expected)))
                ref = self._ref64(sample, fn, dtype) if wanted else None
                _compare_outputs(cmp_actual, cmp_expected, _flat(gauge(ref[0])) if ref else None, shapes_only)
            fwd.add("fallback" if fb else "pass", "fell back: " + ", ".join(fb) if fb else "")
        except Mismatch as e:
            fwd.add("mismatch", ("noncontiguous " if nc else "") + str(e))
            return
        except _OpTimeout:
            raise
        except Exception as e:  # the tpu result cannot be read back (a chalf view, say)
            _clear_pending_error()
            fwd.add("error", f"reading the result: {type(e).__name__}: {' '.join(str(e).split())}"[:300])
            return
        if grad and not shapes_only:
            self._backward(cpu, expected, tpu, actual, sample, fn, bwd, fallbacks)

    def _backward(self, cpu, expected, tpu, actual, sample, fn, bwd, fallbacks):
        try:
            outs = _diff_outputs(cpu, expected)
            if not outs or not cpu.leaves:
                return
            ws = _weights(outs)
            g_cpu = _grads(cpu, expected, ws)
        except _OpTimeout:
            raise
        except Exception as e:
            bwd.add("skip", f"CPU backward raised {type(e).__name__}")
            return
        try:
            g_tpu, fb = self._tpu_run(tpu, lambda c: _grads(c, actual, ws))
        except _OpTimeout:
            raise
        except Exception as e:
            _clear_pending_error()
            bwd.add("error", f"backward {type(e).__name__}: {' '.join(str(e).split())}"[:300])
            return
        fallbacks.update(fb)
        refs = None
        for i, (a, e) in enumerate(zip(g_tpu, g_cpu)):
            if (a is None) != (e is None):
                bwd.add("mismatch", f"grad {i}: presence differs (tpu {a is not None}, cpu {e is not None})")
                return
            if a is None:
                continue
            try:
                _close(a, e, None, f"grad {i}")
            except Mismatch as err:
                if refs is None:
                    refs = self._ref_grads(sample, fn, ws)
                try:
                    _close(a, e, refs[i] if refs else None, f"grad {i}")
                except Mismatch:
                    bwd.add("mismatch", str(err))
                    return
        bwd.add("fallback" if fb else "pass", "backward fell back: " + ", ".join(fb) if fb else "")

    def _ref_grads(self, sample, fn, ws):
        r = self._ref64(sample, fn)
        if r is None:
            return None
        try:
            out, c = r
            outs = _diff_outputs(c, out)
            return torch.autograd.grad(outs, c.leaves, [w.double() for w in ws], allow_unused=True)
        except Exception:
            return None

    def run_errors(self):
        """error_inputs: same exception type on tpu as on CPU (message match reported apart)."""
        res = {"total": 0, "type_match": 0, "msg_match": 0, "cpu_no_raise": 0, "failures": []}
        if self.op.error_inputs_func is None:
            return None
        try:
            errs = list(self.op.error_inputs("cpu"))
        except Exception as e:
            res["failures"].append(f"error_inputs generation failed: {type(e).__name__}: {e}"[:200])
            return res
        fn = lambda c: c(self.op)  # noqa: E731
        for ei in errs:
            try:
                fn(Call(ei.sample_input, "cpu", False))
                res["cpu_no_raise"] += 1
                continue
            except _OpTimeout:
                raise
            except Exception as e:
                cpu_err = e
            res["total"] += 1
            tpu_err = None
            try:
                self._tpu_run(Call(ei.sample_input, "tpu", False, cpu_args=CPU_ARGS.get(self.op.name, ())), fn)
            except _OpTimeout:
                raise
            except Exception as e:
                tpu_err = e
            _clear_pending_error()
            if tpu_err is not None and type(tpu_err) is type(cpu_err):
                res["type_match"] += 1
                regex = ei.error_regex or ""
                if re.search(regex, str(tpu_err)) or str(tpu_err) == str(cpu_err):
                    res["msg_match"] += 1
            else:
                got = f"{type(tpu_err).__name__}: {' '.join(str(tpu_err).split())}"[:160] if tpu_err else "no error"
                res["failures"].append(f"CPU {type(cpu_err).__name__}, tpu {got}")
        return res


def _dtype_record(key, fam, dname, fwd, bwd, fallbacks, note, seconds):
    f, b = fwd.as_dict(), bwd.as_dict()
    worst = max((s for s in STATUSES if f[s] or b[s]), key=_WORST.get, default="skip")
    if note and worst == "skip":
        reason = note
    elif worst in ("pass", "skip"):
        reason = fwd.first.get("skip", "") if worst == "skip" else ""
    else:
        reason = fwd.first.get(worst) or bwd.first.get(worst) or ""
    return {"kind": "dtype", "op": key, "family": fam, "dtype": dname, "status": worst, "reason": reason,
            "fallback_ops": sorted(fallbacks), "fwd": f, "bwd": b, "seconds": round(seconds, 3)}


def run_op(op, dtype_names, emit, time_limit=None, max_samples=None, backward=True, noncontig=True, compile=False,
           reference=False):
    """Runs one OpInfo for the given dtypes; emit(record) for every (op, dtype), its error_inputs
    and a final op_done record with the overloads observed. compile: the tpu side runs each
    sample through torch.compile(backend="tpu"): its forward and the compiled backward (error
    inputs and the semantics checks are eager contracts, not run)."""
    key, fam = op_key(op), family(op)
    runner = OpRunner(op, max_samples, backward, noncontig, compile, reference)
    supported = op.supported_dtypes("cpu")
    t_end = time.monotonic() + time_limit if time_limit else None
    for dname in dtype_names:
        dtype = DTYPES[dname]
        t0 = time.monotonic()
        if dtype not in supported:
            emit({"kind": "dtype", "op": key, "family": fam, "dtype": dname, "status": "skip",
                  "reason": "dtype unsupported on CPU by the OpInfo", "fallback_ops": [],
                  "fwd": Tally().as_dict(), "bwd": Tally().as_dict(), "seconds": 0})
            continue
        left = t_end - time.monotonic() if t_end else None
        fwd, bwd, fbs = Tally(), Tally(), set()
        if left is not None and left <= 0:
            emit(_dtype_record(key, fam, dname, fwd, bwd, fbs, None, 0) | {
                "status": "timeout", "reason": f"per-op time limit ({time_limit:.0f} s) used up"})
            continue
        try:
            with warnings.catch_warnings(), _time_limit(left):
                warnings.simplefilter("ignore")
                fwd, bwd, fbs, note = runner.run_dtype(dtype)
            emit(_dtype_record(key, fam, dname, fwd, bwd, fbs, note, time.monotonic() - t0))
        except _OpTimeout as e:
            _clear_pending_error()
            emit(_dtype_record(key, fam, dname, fwd, bwd, fbs, None, time.monotonic() - t0) | {
                "status": "timeout", "reason": str(e)})
    left = t_end - time.monotonic() if t_end else None
    errs = None
    if not compile and (left is None or left > 0):
        try:
            with warnings.catch_warnings(), _time_limit(left):
                warnings.simplefilter("ignore")
                errs = runner.run_errors()
        except _OpTimeout as e:
            errs = {"total": 0, "type_match": 0, "msg_match": 0, "cpu_no_raise": 0, "failures": [str(e)]}
        except Exception as e:
            errs = {"total": 0, "type_match": 0, "msg_match": 0, "cpu_no_raise": 0,
                    "failures": [f"{type(e).__name__}: {e}"[:200]]}
    if errs is not None:
        emit({"kind": "errors", "op": key, "family": fam, **errs})
    left = t_end - time.monotonic() if t_end else None
    sem_dtype = next((DTYPES[d] for d in dtype_names if DTYPES[d] in supported), None)
    if sem_dtype is not None and not runner.random and not compile and (left is None or left > 0):
        from torch.testing._internal.opinfo.core import BinaryUfuncInfo, UnaryUfuncInfo
        from .conformance_semantics import run_semantics
        try:
            with warnings.catch_warnings(), _time_limit(left):
                warnings.simplefilter("ignore")
                checks = run_semantics(op, sem_dtype, isinstance(op, BinaryUfuncInfo),
                                       [DTYPES[d] for d in dtype_names],
                                       elementwise=isinstance(op, (BinaryUfuncInfo, UnaryUfuncInfo)))
        except _OpTimeout as e:
            _clear_pending_error()
            checks = {"timeout": {"total": 1, "pass": 0, "failures": [str(e)]}}
        except Exception as e:  # noqa: BLE001 - a harness failure is recorded, not fatal to the worker
            _clear_pending_error()
            checks = {"harness": {"total": 1, "pass": 0, "failures": [f"{type(e).__name__}: {e}"[:300]]}}
        emit({"kind": "semantics", "op": key, "family": fam, "dtype": str(sem_dtype).split(".")[-1], "checks": checks})
    emit({"kind": "op_done", "op": key, "family": fam, "random": runner.random,
          "observed": sorted(runner.observed), "fell_back": sorted(runner.fell_back)})


# ---------------------------------------------------------------- selecting ops
def select_ops(names=None):
    """OpInfos by name (every variant of each name), or all of op_db."""
    from torch.testing._internal.common_methods_invocations import op_db
    if names is None:
        return list(op_db)
    wanted = list(dict.fromkeys(names))
    by_name = collections.defaultdict(list)
    for op in op_db:
        by_name[op.name].append(op)
        by_name[op_key(op)].append(op)
    missing = [n for n in wanted if n not in by_name]
    if missing:
        raise SystemExit(f"unknown OpInfo name(s): {', '.join(missing)}")
    out = {}
    for n in wanted:
        for op in by_name[n]:
            out[op_key(op)] = op
    return list(out.values())


# ---------------------------------------------------------------- worker protocol
def _worker(args):
    """Runs ops in this process, streaming JSON lines on fd args.fd: one 'ops' message with the
    op keys, then per op a 'start' message and its records."""
    import faulthandler
    faulthandler.enable()   # a segfault's Python stack goes to worker.log
    torch.set_num_threads(1)
    out = os.fdopen(args.fd, "w", buffering=1)

    def send(msg):
        out.write(json.dumps(msg, default=str) + "\n")
        out.flush()

    ops = select_ops(args.ops.split(",") if args.ops else None)
    skip = set(args.skip_keys.split("\x1f")) if args.skip_keys else set()
    ops = [op for op in ops if op_key(op) not in skip]
    send({"t": "ops", "keys": [op_key(op) for op in ops]})
    crash_on = os.environ.get("TORCH_TPU_CONFORMANCE_CRASH_ON")   # tests: simulate a segfault
    for op in ops:
        send({"t": "start", "op": op_key(op), "family": family(op)})
        if op_key(op) == crash_on:
            os.kill(os.getpid(), signal.SIGSEGV)
        run_op(op, args.dtypes.split(","), lambda r: send({"t": "rec", **r}), args.time_limit,
               args.max_samples, not args.no_backward, not args.no_noncontig, args.compile, args.reference_inputs)
    send({"t": "end"})


class Progress:
    def __init__(self, total, stream=None):
        self.total, self.done, self.stream = total, 0, stream or sys.stderr
        self.c = collections.Counter()
        self.t0 = time.monotonic()
        self.current = ""

    def record(self, rec):
        if rec["kind"] == "dtype" and rec["status"] != "skip":
            self.c[rec["status"]] += 1
        elif rec["kind"] in ("op_done", "crash"):
            self.done += 1
        self.show()

    def show(self, current=None):
        if current is not None:
            self.current = current
        width = 24
        filled = int(width * self.done / max(self.total, 1))
        counts = " ".join(f"{k} {self.c[k]}" for k in ("pass", "fallback", "mismatch", "error", "timeout", "crash")
                          if self.c[k] or k == "pass")
        line = (f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} ops "
                f"{time.monotonic() - self.t0:5.0f}s | {counts} | {self.current[:28]:<28}")
        self.stream.write(line)
        self.stream.flush()

    def close(self):
        self.stream.write("\n")
        self.stream.flush()


def _spawn(args, keys_or_none, skip, log):
    r, w = os.pipe()
    cmd = [sys.executable, "-m", "torch_tpu.conformance", "--worker", "--fd", str(w),
           "--dtypes", ",".join(args.dtypes), "--time-limit", str(args.time_limit)]
    if keys_or_none is not None:
        cmd += ["--ops", ",".join(keys_or_none)]
    if skip:
        cmd += ["--skip-keys", "\x1f".join(sorted(skip))]
    if args.max_samples:
        cmd += ["--max-samples", str(args.max_samples)]
    if args.no_backward:
        cmd.append("--no-backward")
    if args.no_noncontig:
        cmd.append("--no-noncontig")
    if args.compile:
        cmd.append("--compile")
    if args.reference_inputs:
        cmd.append("--reference-inputs")
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, pass_fds=(w,))
    os.close(w)
    return proc, os.fdopen(r, "r")


def _read_existing(path):
    recs = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    recs.append(json.loads(line))
                except ValueError:
                    pass   # a line cut by a crash of the parent
    return recs


def sweep(args):
    """Runs the selected ops in worker subprocesses (chunks of --chunk ops); a worker that dies
    costs the op it was running (recorded as crash) and the rest go to a new worker."""
    os.makedirs(args.out, exist_ok=True)
    jsonl = os.path.join(args.out, "conformance.jsonl")
    previous = _read_existing(jsonl) if args.resume or args.append else []
    done = {r["op"] for r in previous if r["kind"] in ("op_done", "crash")} if args.resume else set()
    if not (args.resume or args.append) and os.path.exists(jsonl):
        os.remove(jsonl)
    sink = open(jsonl, "a", buffering=1)
    log = open(os.path.join(args.out, "worker.log"), "a")
    names = args.ops            # None means every OpInfo
    pending = None              # op keys still to run, known after the first worker reports them
    progress = None
    crashes = 0
    commit = provenance.stamp()["commit"]
    while pending is None or pending:
        chunk = pending[: args.chunk] if pending is not None else None
        proc, pipe = _spawn(args, chunk if chunk is not None else names, done, log)
        sel = selectors.DefaultSelector()
        sel.register(pipe, selectors.EVENT_READ)
        current, finished, last = None, False, time.monotonic()
        hard = args.time_limit * 1.5 + 60
        buf = ""
        while True:
            ready = sel.select(timeout=1.0)
            if ready:
                data = os.read(pipe.fileno(), 1 << 16).decode()
                if not data:
                    break
                buf += data
                while "\n" in buf:
                    line, buf = buf.split("\n", 1)
                    msg = json.loads(line)
                    last = time.monotonic()
                    t = msg.pop("t")
                    if t == "ops":
                        if pending is None:
                            pending = list(msg["keys"])
                            progress = Progress(len(pending) + len(done))
                            progress.done = len(done)
                        if chunk is None:   # first worker: keep it on the first chunk only
                            chunk = pending[: args.chunk]
                    elif t == "start":
                        current, current_family = msg["op"], msg["family"]
                        progress.show(current)
                        if chunk is not None and current not in chunk:
                            current, finished = None, True   # chunk complete: next worker
                            proc.kill()
                    elif t == "rec":
                        if msg["kind"] == "op_done":
                            msg["commit"] = commit
                        sink.write(json.dumps(msg) + "\n")
                        progress.record(msg)
                        if msg["kind"] == "op_done":
                            done.add(msg["op"])
                            pending.remove(msg["op"])
                            current = None
                            if chunk is not None and all(k in done for k in chunk):
                                finished = True
                    elif t == "end":
                        finished = True
                if finished:
                    break
            elif proc.poll() is not None:
                break
            elif current is not None and time.monotonic() - last > hard:
                proc.kill()   # stuck inside a kernel, beyond the reach of the in-process alarm
                rec = {"kind": "crash", "op": current, "family": current_family, "status": "timeout",
                       "reason": f"no progress for {hard:.0f} s; worker killed"}
                sink.write(json.dumps(rec) + "\n")
                done.add(current)
                pending.remove(current)
                progress.record(rec)
                current = None
                break
        sel.close()
        pipe.close()
        if finished:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        else:
            if proc.poll() is None:
                proc.kill()
            rc = proc.wait()
            if current is not None:
                rec = {"kind": "crash", "op": current, "family": current_family, "status": "crash",
                       "reason": f"worker died (exit status {rc}); see worker.log"}
                sink.write(json.dumps(rec) + "\n")
                done.add(current)
                pending.remove(current)
                progress.record(rec)
                crashes += 1
            elif pending is None:
                raise SystemExit(f"conformance worker failed before starting (exit status {rc}); "
                                 f"see {os.path.join(args.out, 'worker.log')}")
    if progress:
        progress.close()
    sink.close()
    log.close()
    return _read_existing(jsonl)


def sweep_inprocess(ops, dtype_names, out_dir, time_limit=None, max_samples=None, backward=True,
                    noncontig=True, quiet=False, compile=False, reference=False):
    """The same sweep in this process (no crash isolation): for tests and debugging."""
    os.makedirs(out_dir, exist_ok=True)
    jsonl = os.path.join(out_dir, "conformance.jsonl")
    recs = []
    progress = Progress(len(ops), open(os.devnull, "w") if quiet else sys.stderr)
    with open(jsonl, "w", buffering=1) as sink:
        def emit(r):
            recs.append(r)
            sink.write(json.dumps(r, default=str) + "\n")
            progress.record(r)

        for op in ops:
            progress.show(op_key(op))
            run_op(op, dtype_names, emit, time_limit, max_samples, backward, noncontig, compile, reference)
    progress.close()
    return recs


# ---------------------------------------------------------------- summary
def _latest(records):
    """Last record per (kind, op, dtype): a resumed sweep re-runs ops a crash interrupted."""
    out = {}
    for r in records:
        if r["kind"] == "op_done":
            out.pop(("crash", r["op"], None), None)   # a later run of a crashed op completed
        out[(r["kind"], r["op"], r.get("dtype"))] = r
    crashed = {r["op"]: r for r in out.values() if r["kind"] == "crash"}
    return list(out.values()), crashed


def summarize(records, native_registered=None):
    recs, crashed = _latest(records)
    dt = [r for r in recs if r["kind"] == "dtype"]
    fam_of = {r["op"]: r["family"] for r in recs if "family" in r}
    fams = collections.defaultdict(lambda: {"ops": set(), "status": collections.Counter(),
                                            "fwd": collections.Counter(), "bwd": collections.Counter()})

    def add(fam, r, status):
        f = fams[fam]
        f["ops"].add(r["op"])
        f["status"][status] += 1
        for part in ("fwd", "bwd"):
            for k, v in r.get(part, {}).items():
                f[part][k] += v

    for r in dt:
        add(r["family"], r, r["status"])
        add("ALL", r, r["status"])
        if r["dtype"] != "complex64":
            add("ALL (no complex)", r, r["status"])
    for op, r in crashed.items():
        for name in (fam_of.get(op) or r.get("family", "other"), "ALL", "ALL (no complex)"):
            fams[name]["ops"].add(op)
            fams[name]["status"][r["status"]] += 1
    errs = collections.Counter()
    for r in recs:
        if r["kind"] == "errors":
            for k in ("total", "type_match", "msg_match", "cpu_no_raise"):
                errs[k] += r[k]
    observed, fell = set(), collections.Counter()
    for r in recs:
        if r["kind"] == "op_done":
            observed |= set(r["observed"])
    for r in dt:
        for f in r["fallback_ops"]:
            fell[f] += 1
    table = {}
    for name, f in fams.items():
        fw, bw = f["fwd"], f["bwd"]
        table[name] = {
            "ops": len(f["ops"]), **{s: f["status"][s] for s in STATUSES},
            "fwd_samples": fw["total"], "fwd_pass": fw["pass"], "fwd_fallback": fw["fallback"],
            "bwd_comparisons": bw["total"], "bwd_pass": bw["pass"], "bwd_fallback": bw["fallback"],
        }
    native = set(native_registered or [])
    semantics = collections.defaultdict(lambda: {"total": 0, "pass": 0, "failing_ops": []})
    for r in recs:
        if r["kind"] == "semantics":
            for check, t in r["checks"].items():
                sem = semantics[check]
                sem["total"] += t["total"]
                sem["pass"] += t["pass"]
                if t["pass"] < t["total"]:
                    sem["failing_ops"].append(f"{r['op']}: {t['failures'][0] if t['failures'] else ''}"[:300])
    return {
        "commits": sorted({r["commit"] for r in recs if r["kind"] == "op_done" and r.get("commit")}),
        "families": table,
        "semantics": dict(semantics),
        "error_inputs": dict(errs),
        "native_overloads_registered": len(native),
        "overloads_observed_native": len(observed),
        "overloads_observed_native_in_table": len(observed & native) if native else None,
        "fallback_aten_ops": dict(fell.most_common()),
        "gaps": gaps(recs, crashed),
    }


def gaps(recs, crashed):
    """Each op that fails or falls back, with its reasons, worst first."""
    by_op = collections.defaultdict(lambda: {"statuses": collections.Counter(), "dtypes": [], "reasons": [],
                                             "fallback_ops": set(), "samples": 0})
    for r in recs:
        if r["kind"] == "dtype" and r["status"] not in ("pass", "skip"):
            g = by_op[r["op"]]
            g["family"] = r["family"]
            g["statuses"][r["status"]] += 1
            g["dtypes"].append(r["dtype"])
            g["fallback_ops"] |= set(r["fallback_ops"])
            g["samples"] += sum(r[p][s] for p in ("fwd", "bwd") for s in ("mismatch", "error", "fallback", "timeout"))
            if r["reason"] and r["reason"] not in g["reasons"]:
                g["reasons"].append(r["reason"])
        elif r["kind"] == "errors" and r["failures"]:
            g = by_op[r["op"]]
            g["family"] = r["family"]
            g["statuses"]["error_inputs"] += 1
            g["samples"] += len(r["failures"])
            g["reasons"].append("error_inputs: " + r["failures"][0])
    for op, r in crashed.items():
        g = by_op[op]
        g.setdefault("family", r.get("family", ""))
        g["statuses"][r["status"]] += 1
        g["samples"] += 10
        g["reasons"].insert(0, r["reason"])
    out = []
    for op, g in by_op.items():
        out.append({"op": op, "family": g.get("family", ""), "statuses": dict(g["statuses"]),
                    "dtypes": g["dtypes"], "samples_affected": g["samples"],
                    "fallback_ops": sorted(g["fallback_ops"]), "reasons": g["reasons"][:3]})
    out.sort(key=lambda g: -(g["samples_affected"] + 5 * len(g["dtypes"])))   # most affected first
    return out


def _pct(a, b):
    return f"{100.0 * a / b:.1f}%" if b else "-"


def render_table(summary):
    cols = ("family", "ops", "pass", "fallback", "mismatch", "error", "timeout", "crash", "skip",
            "fwd match", "bwd match")
    rows = []
    for name, t in sorted(summary["families"].items(), key=lambda kv: (kv[0].startswith("ALL"), kv[0])):
        rows.append((name, t["ops"], t["pass"], t["fallback"], t["mismatch"], t["error"], t["timeout"], t["crash"],
                     t["skip"], f"{t['fwd_pass']}/{t['fwd_samples']} {_pct(t['fwd_pass'], t['fwd_samples'])}",
                     f"{t['bwd_pass']}/{t['bwd_comparisons']} {_pct(t['bwd_pass'], t['bwd_comparisons'])}"))
    return cols, rows


def render_md(summary, args_desc):
    cols, rows = render_table(summary)
    e = summary["error_inputs"]
    lines = [
        "# torch_tpu OpInfo conformance", "", provenance.describe(summary.get("commits", ())), "",
        f"Run: `{args_desc}`. Statuses per (OpInfo, dtype): pass = every sample matched CPU and ran natively; "
        "fallback = matched but some aten op ran on the CPU fallback; mismatch / error (raised on tpu only) / "
        "timeout / crash; skip = dtype unsupported on CPU or no runnable sample. fwd/bwd match = samples "
        "(contiguous + non-contiguous) and gradient comparisons that matched natively.", "",
        "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols),
    ]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    lines += [
        "",
        f"- error_inputs: {e.get('type_match', 0)}/{e.get('total', 0)} raise the same exception type as CPU "
        f"({_pct(e.get('type_match', 0), e.get('total', 0))}); message also matches in "
        f"{e.get('msg_match', 0)}/{e.get('total', 0)}; {e.get('cpu_no_raise', 0)} error inputs do not raise on "
        "CPU (not counted).",
        f"- ATen overloads registered natively (op table, without tpurt::): {summary['native_overloads_registered']}",
        f"- distinct ATen overloads observed executing on tpu without fallback during this run: "
        f"{summary['overloads_observed_native']} (of which in the native op table: "
        f"{summary['overloads_observed_native_in_table']}; the rest are views/composites the bridge handles)",
        "", "## Semantics checks (out=, 0-dim and >16-dim inputs, dtype promotion; see "
        "torch_tpu/conformance_semantics.py)", "",
        "| check | calls | same as CPU | ops failing |", "|---|---|---|---|",
    ]
    sem = summary.get("semantics", {})
    lines += [f"| {c} | {t['total']} | {t['pass']} ({_pct(t['pass'], t['total'])}) | {len(t['failing_ops'])} |"
              for c, t in sorted(sem.items())]
    for c, t in sorted(sem.items()):
        for f in t["failing_ops"][:15]:
            lines.append(f"- {c}: " + f.replace("|", "\\|"))
    lines += [
        "", "## ATen ops that fell back to the CPU (number of (OpInfo, dtype) pairs)", "",
    ]
    lines += [f"- `{k}`: {v}" for k, v in list(summary["fallback_aten_ops"].items())[:80]] or ["- none"]
    lines += ["", "## Remaining gaps (worst first)", "",
              "| op | family | statuses | dtypes | fell back | reason |", "|---|---|---|---|---|---|"]
    for g in summary["gaps"]:
        st = ", ".join(f"{k} {v}" for k, v in g["statuses"].items())
        reason = " / ".join(g["reasons"]).replace("|", "\\|").replace("\n", " ")[:300]
        lines.append(f"| {g['op']} | {g['family']} | {st} | {','.join(g['dtypes'])} | "
                     f"{', '.join(g['fallback_ops'])[:120]} | {reason} |")
    return "\n".join(lines) + "\n"


def write_outputs(records, out_dir, args_desc):
    import torch_tpu
    native = [n for n, _ in torch_tpu._C._native_ops() if not n.startswith("tpurt::")]
    summary = summarize(records, native)
    with open(os.path.join(out_dir, "conformance.json"), "w") as f:
        json.dump({"args": args_desc, "summary": summary, "records": records}, f, indent=1, default=str)
    with open(os.path.join(out_dir, "conformance.md"), "w") as f:
        f.write(render_md(summary, args_desc))
    return summary


def print_table(summary, stream=None):
    stream = stream or sys.stdout
    cols, rows = render_table(summary)
    widths = [max(len(str(c)), *(len(str(r[i])) for r in rows)) for i, c in enumerate(cols)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    print(fmt.format(*cols), file=stream)
    for r in rows:
        print(fmt.format(*(str(c) for c in r)), file=stream)
    e = summary["error_inputs"]
    print(f"error_inputs same type: {e.get('type_match', 0)}/{e.get('total', 0)}, same message: "
          f"{e.get('msg_match', 0)}/{e.get('total', 0)}", file=stream)
    for c, t in sorted(summary.get("semantics", {}).items()):
        print(f"semantics {c}: {t['pass']}/{t['total']} calls as on CPU; ops failing: "
              f"{', '.join(f.split(':')[0] for f in t['failing_ops'][:8]) or 'none'}", file=stream)
    print(f"native overloads: {summary['native_overloads_registered']} registered, "
          f"{summary['overloads_observed_native']} observed executing natively "
          f"({summary['overloads_observed_native_in_table']} of them in the op table)", file=stream)


# ---------------------------------------------------------------- CLI
def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m torch_tpu.conformance", description=__doc__.split("\n\n")[0])
    p.add_argument("--full", action="store_true", help="every OpInfo and every dtype")
    p.add_argument("--ops", help="comma-separated OpInfo names (all variants) or name.variant keys")
    p.add_argument("--dtypes", help=f"comma-separated, from {','.join(DTYPES)}")
    p.add_argument("--resume", action="store_true", help="skip ops already recorded in OUT/conformance.jsonl")
    p.add_argument("--append", action="store_true",
                   help="re-run the selected ops, appending to OUT/conformance.jsonl (later records win)")
    p.add_argument("--out", default="results", help="output folder (default results/)")
    p.add_argument("--time-limit", type=float, default=None,
                   help="seconds per op (default 60, 120 with --full, 600 with --compile)")
    p.add_argument("--max-samples", type=int, default=None, help="cap samples per (op, dtype)")
    p.add_argument("--chunk", type=int, default=150, help="ops per worker process")
    p.add_argument("--no-backward", action="store_true")
    p.add_argument("--no-noncontig", action="store_true")
    p.add_argument("--reference-inputs", action="store_true",
                   help="OpInfo's reference_inputs (samples plus larger, extremal and broadcast cases) instead of sample_inputs")
    p.add_argument("--compile", action="store_true",
                   help="the tpu side through torch.compile(backend=\"tpu\"), each sample its own graph, "
                        "forward and backward")
    p.add_argument("--inprocess", action="store_true", help="no worker processes (a crash ends the run)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--fd", type=int, help=argparse.SUPPRESS)
    p.add_argument("--skip-keys", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return _worker(args)
    args.dtypes = args.dtypes.split(",") if args.dtypes else (FULL_DTYPES if args.full or args.ops else FAST_DTYPES)
    bad = [d for d in args.dtypes if d not in DTYPES]
    if bad:
        raise SystemExit(f"unknown dtype(s): {', '.join(bad)} (choose from {', '.join(DTYPES)})")
    args.ops = args.ops.split(",") if args.ops else (None if args.full else FAST_OPS)
    if args.time_limit is None:  # a compiled sample costs seconds of Inductor's C++ compiler
        args.time_limit = 600.0 if args.compile else 120.0 if args.full else 60.0
    desc = "python -m torch_tpu.conformance " + " ".join(argv if argv is not None else sys.argv[1:])
    warnings.simplefilter("ignore")
    if args.inprocess:
        records = sweep_inprocess(select_ops(args.ops), args.dtypes, args.out, args.time_limit, args.max_samples,
                                  not args.no_backward, not args.no_noncontig, compile=args.compile,
                                  reference=args.reference_inputs)
    else:
        records = sweep(args)
    summary = write_outputs(records, args.out, desc)
    print_table(summary)
    print(f"records: {os.path.join(args.out, 'conformance.json')}, report: {os.path.join(args.out, 'conformance.md')}")


if __name__ == "__main__":
    main()
