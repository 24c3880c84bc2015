"""The dry run of a user's own training script: the script runs as it is (runpy, as
`__main__`), but every tensor on the tpu device is a fake tensor (shape, dtype and device,
no memory, no computation) while CPU work stays real, so data loading and model
construction run unchanged. Each call on tpu is priced by the runtime's cost model, the
device's live bytes are counted as the fake tensors come and go, and each optimizer step
marks a step; the run stops after `steps` of them.

    python -m torch_tpu dryrun --script train.py --slice v6e-8 [--steps 3] [-- script args]

What the script sees: values read back to the host (`.item()`, `.cpu()`, `.tolist()`) are
zeros, so a logged loss reads 0; an op whose output shape depends on values (`nonzero`,
boolean masks) stops the run with a message naming it, as no dry run can know that shape.
Modules keep the identity of their parameters across `.to("tpu")` (tied weights stay tied,
an optimizer built before the move still holds them), as on a real device."""
import collections
import sys
import time
from pathlib import Path

import torch
from torch._subclasses.fake_tensor import (DataDependentOutputException, DynamicOutputShapeException, FakeTensor,
                                           FakeTensorMode)
from torch.multiprocessing.reductions import StorageWeakRef
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
from torch.utils._pytree import tree_flatten, tree_map

from torch_tpu.cost import CostRecorder, _is_free

aten = torch.ops.aten


class _Enough(BaseException):
    """Raised from the optimizer's step hook once the wanted steps are recorded: a
    BaseException so the script's own `except Exception` does not swallow it."""


def _is_tpu(x):
    return isinstance(x, torch.Tensor) and (isinstance(x, FakeTensor) or x.device.type == "tpu")


def _device_kwarg(kwargs):
    d = kwargs.get("device")
    return torch.device(d).type if d is not None else None


def _user_line():
    """The innermost frame outside torch and torch_tpu: where the script issued the call."""
    ours = (str(Path(torch.__file__).parent), str(Path(__file__).parent))
    f = sys._getframe(2)
    while f is not None and (f.f_code.co_filename.startswith(ours) or f.f_code.co_filename.startswith("<")):
        f = f.f_back
    return f"{f.f_code.co_filename}:{f.f_lineno}" if f is not None else "?"


class ScriptDryRun(CostRecorder):
    """Fakes the tpu device for a script and records its calls, live device bytes and steps."""

    def __init__(self, generation, steps=3):
        super().__init__(generation)
        self.fake = FakeTensorMode()
        self.steps = steps
        self.step_ends = []        # len(self.ops) after each optimizer step
        self.step_memory = []      # (parameters, gradients, optimizer state) bytes at each step's end
        self.grad_bytes = 0        # gradients an optimizer step updates (data parallelism all-reduces them)
        self.host_reads = collections.Counter()  # script line -> values read back (zeros here)
        self.live = {}             # device storage -> (weak reference, bytes)
        self.live_bytes = self.peak_bytes = 0
        self._saved_swap = None
        self._hooks = ()
        self._defaulted = []       # param groups whose foreach choice the dry run made for a step

    # ------------------------------------------------------------ the mode's life
    def __enter__(self):
        # Module.to keeps each Parameter object and swaps its contents (torch.utils.swap_tensors):
        # tied weights stay tied and optimizers built before the move keep working, as on a real
        # device. The default path would replace fake parameters with new objects.
        self._saved_swap = torch.__future__.get_swap_module_params_on_conversion()
        torch.__future__.set_swap_module_params_on_conversion(True)
        self._hooks = (register_optimizer_step_pre_hook(self._step_starts),
                       register_optimizer_step_post_hook(self._step_done))
        return super().__enter__()

    def __exit__(self, exc_type, exc, tb):
        super().__exit__(exc_type, exc, tb)
        for hook in self._hooks:
            hook.remove()
        torch.__future__.set_swap_module_params_on_conversion(self._saved_swap)
        return exc_type is not None and issubclass(exc_type, _Enough)

    def _step_starts(self, optimizer, args, kwargs):
        # Optimizers pick their multi-tensor (foreach) path by the parameters' exact type, which
        # fake tensors do not have; the device would take it, so the step takes it here too.
        for group in optimizer.param_groups:
            if group.get("foreach", False) is None and all(_is_tpu(p) for p in group["params"]):
                group["foreach"] = True
                self._defaulted.append(group)

    def _step_done(self, optimizer, args, kwargs):
        for group in self._defaulted:
            group["foreach"] = None
        self._defaulted.clear()
        params = [p for g in optimizer.param_groups for p in g["params"] if _is_tpu(p)]
        grads = [p.grad for p in params if p.grad is not None]
        state = [t for p in params for t in optimizer.state.get(p, {}).values() if _is_tpu(t)]
        self.grad_bytes = sum(g.numel() * g.element_size() for g in grads)
        self.step_memory.append(tuple(sum(t.numel() * t.element_size() for t in ts) for ts in (params, grads, state)))
        self.step_ends.append(len(self.ops))
        if len(self.step_ends) >= self.steps:
            raise _Enough

    # ------------------------------------------------------------ calls
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flat, _ = tree_flatten((args, kwargs))
        if not (any(_is_tpu(t) for t in flat) or _device_kwarg(kwargs) == "tpu"):
            return func(*args, **kwargs)  # CPU work stays real
        read = self._host_read(func, args, kwargs)
        if read is not None:
            self.host_reads[_user_line()] += 1
            self.ops.append(self._price(func, args, kwargs, read[0]))  # the transfer, priced as a real run's
            return read[0]
        with self.fake:
            # Real inputs (CPU data, literals) enter by their metadata only: the fake mode never
            # holds a reference to a real tensor, which would also keep Module.to from swapping it.
            args, kwargs = tree_map(self._metadata_only, (args, kwargs))
            try:
                out = func(*args, **kwargs)
            except (DynamicOutputShapeException, DataDependentOutputException):
                raise RuntimeError(f"dry run: {func._schema.name} at {_user_line()} has an output shape that depends "
                                   "on tensor values, which a dry run does not have; the estimate covers the calls "
                                   "before it") from None
        # The fake mode memoizes each output by a weak reference; module conversions cannot swap
        # a tensor that has one (pytorch/pytorch#148977), and the dry run never looks them up.
        self.fake.fake_tensor_converter.meta_converter.tensor_memo.clear()
        self._count_allocations(out)
        if not _is_free(func):
            self.ops.append(self._price(func, args, kwargs, out))
        return out

    def _metadata_only(self, t):
        if isinstance(t, torch.Tensor) and not isinstance(t, FakeTensor):
            return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
        return t

    @staticmethod
    def _host_read(func, args, kwargs):
        """What a call that reads device values into the host returns here: zeros."""
        if func is aten._local_scalar_dense.default:
            return (torch.zeros((), dtype=args[0].dtype).item(),)
        if func is aten._to_copy.default and _device_kwarg(kwargs) == "cpu":
            return (torch.zeros(args[0].shape, dtype=kwargs.get("dtype") or args[0].dtype),)
        if func is aten.copy_.default and not _is_tpu(args[0]):
            return (args[0].zero_(),)
        return None

    def _count_allocations(self, out):
        fresh = {}  # storage -> (weak reference, bytes); outputs may share one
        for t in tree_flatten(out)[0]:
            if isinstance(t, FakeTensor) and t.device.type == "tpu":
                st = t.untyped_storage()
                known = self.live.get(st._cdata)
                if known is not None and known[0].expired():  # a dead storage's address, given again
                    self.live_bytes -= self.live.pop(st._cdata)[1]
                    known = None
                if known is None:
                    fresh[st._cdata] = (StorageWeakRef(st), st.nbytes())
        if not fresh:
            return
        new = sum(n for _, n in fresh.values())
        if self.live_bytes + new > self.peak_bytes:  # a new peak only if what is live now says so
            self._sweep()
        self.live.update(fresh)
        self.live_bytes += new
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)

    def _sweep(self):
        for key in [k for k, (ref, _) in self.live.items() if ref.expired()]:
            self.live_bytes -= self.live.pop(key)[1]


def run(script, argv, generation, steps=3):
    """Runs the script on fake tpu tensors; returns the recorder, the error that stopped the
    script (None when it finished or reached `steps`) and the wall time."""
    from torch_tpu.port import run_script

    rec = ScriptDryRun(generation, steps)
    started = time.perf_counter()
    error = run_script(script, list(argv), rec)
    return rec, error, time.perf_counter() - started


def estimate_script(script, argv=(), slice_name="v6e-1", steps=3, tokens_per_step=None):
    """A dry run of the script on a slice: each chip runs the script's step (data parallelism;
    the gradients all-reduced over the slice, overlapped with the step's compute as XLA does),
    priced like the config dry run (torch_tpu.dryrun: the same calibration)."""
    from torch_tpu.dryrun import Slice, _calibrated

    sl = Slice(slice_name)
    if steps < 1:
        raise ValueError(f"steps {steps}: expected at least 1")
    rec, error, wall = run(script, argv, sl.generation, steps)
    ends = rec.step_ends
    if len(ends) >= 2:  # the first step also builds the optimizer's state: the later ones are the steady step
        window, nsteps = rec.ops[ends[0]:ends[-1]], len(ends) - 1
    else:
        window, nsteps = rec.ops[:ends[0]] if ends else rec.ops, 1
    compute = _calibrated(window) / nsteps
    all_reduce = sl.collective("all_reduce", rec.grad_bytes, sl.chips)
    exposed = max(0.0, all_reduce - compute)
    step = compute + exposed
    gemm_flops = sum(o.flops for o in window if o.mxu_flops) / nsteps
    params, grads, state = rec.step_memory[-1] if rec.step_memory else (0, 0, 0)
    memory = {"parameters": params, "gradients": grads, "optimizer_state": state,
              "activations_and_other": max(0, rec.peak_bytes - params - grads - state)}
    price = sl.usd_per_chip_hour
    usd_step = sl.chips * price * step / 3600 if price and step else None
    tokens = tokens_per_step * sl.chips if tokens_per_step else None
    return {
        "workload": "script",
        "script": str(script),
        "slice": sl.name,
        "generation": sl.generation,
        "chips": sl.chips,
        "tensorcores": sl.tensorcores,
        "steps_recorded": len(ends),
        "steps_priced": nsteps if ends else 0,
        "step_time_s": step,
        "eager_step_time_s": sum(o.seconds for o in window) / nsteps,
        "step_breakdown_s": {"compute": compute, "gradient_all_reduce": all_reduce, "exposed_collectives": exposed},
        "mfu": gemm_flops / (step * sl.peak_flops) if step else 0.0,
        "hbm_per_chip_bytes": rec.peak_bytes,
        "hbm_breakdown_bytes": memory,
        "hbm_capacity_bytes": sl.info["hbm_bytes"],
        "fits": rec.peak_bytes <= sl.info["hbm_bytes"],
        "usd_per_step": usd_step,
        "tokens_per_s_per_chip": tokens_per_step / step if tokens_per_step and step else None,
        "usd_per_mtok": usd_step / (tokens / 1e6) if usd_step and tokens else None,
        "host_reads": dict(rec.host_reads),
        "traced_calls": len(rec.ops),
        "unmodelled_calls": dict(rec.unmodelled),
        "notes": sorted(sl.notes),
        "error": f"{type(error).__name__}: {error}" if error is not None else None,
        "dryrun_seconds": wall,
        "_ops": rec.ops,
    }


def _size(n):
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def _time(s):
    return f"{s:.3f} s" if s >= 1 else f"{s * 1e3:.3f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} us"


def format_script(r):
    from torch_tpu.dryrun import _usd

    b, m = r["step_breakdown_s"], r["hbm_breakdown_bytes"]
    steps = (f"{r['steps_priced']} steady step(s) after the first" if r["steps_recorded"] >= 2 else
             "the first optimizer step" if r["steps_recorded"] else "the whole run (no optimizer step)")
    lines = [
        f"\ndry run of {r['script']} on {r['slice']} ({r['chips']} chip{'s' if r['chips'] > 1 else ''}, each running the script's step), priced over {steps}",
        f"  step time        {_time(r['step_time_s'])}   (compute {_time(b['compute'])}; gradient all-reduce "
        f"{_time(b['gradient_all_reduce'])} overlapped, {_time(b['exposed_collectives'])} exposed; "
        f"op by op without fusion {_time(r['eager_step_time_s'])})",
        f"  MFU              {r['mfu'] * 100:.1f}%",
        f"  HBM per chip     {_size(r['hbm_per_chip_bytes'])} peak of {_size(r['hbm_capacity_bytes'])}: "
        + ", ".join(f"{k.replace('_', ' ')} {_size(v)}" for k, v in m.items())
        + f" -> {'fits' if r['fits'] else 'DOES NOT FIT'}",
        f"  cost             {_usd(r['usd_per_step'])} per step"
        + (f", {r['tokens_per_s_per_chip']:,.0f} tokens/s per chip, {_usd(r['usd_per_mtok'])} per million tokens"
           if r["tokens_per_s_per_chip"] else " (--tokens-per-step gives tokens/s and $ per million tokens)"),
        f"  traced {r['traced_calls']} calls on fake tensors in {r['dryrun_seconds']:.1f} s"
        + (f"; priced by bytes only: {r['unmodelled_calls']}" if r["unmodelled_calls"] else ""),
    ]
    if r["host_reads"]:
        reads = ", ".join(f"{where} ({n})" for where, n in sorted(r["host_reads"].items()))
        lines.append(f"  values read back to the host (zeros in a dry run; each is a device sync on a real chip): {reads}")
    if r["error"]:
        lines.append(f"  the script stopped: {r['error']}")
    return "\n".join(lines + [f"  note: {n}" for n in r["notes"]])
