"""TPU compile semantics for backend "tpu": static shapes unless a dim is marked dynamic, every
compile and recompile counted with its cause (torch.tpu.metrics.compile_counters()), and the
cause printed when it happens with TPU_EXPLAIN_RECOMPILES=1.

Static: Dynamo makes a dim symbolic on its own once it saw two sizes (automatic dynamic); a TPU
compiler (TorchTPU runs dynamic=False) compiles each shape. The backend turns such a dim back
into its size, a guard Dynamo installs with the graph, so the next size recompiles, and says so.
Dims the user marked with torch._dynamo.mark_dynamic stay symbolic: one graph serves them
(with options={"bounded_dynamism": True} they must carry min and max, as TorchTPU's bounded
dynamism requires, and the bound is reported). torch.compile(dynamic=True) keeps every dim
symbolic."""
import dataclasses
import os
import sys
import time

import torch

from .. import _C


@dataclasses.dataclass
class Recompile:
    """One recompile of a compiled function: which input changed, in which dim, from what."""

    function: str
    input: str
    dim: int | None
    old: object
    new: object

    def __str__(self):
        if self.dim is None:
            return f"{self.function}: recompiled: {self.input}"
        return f"{self.function}: recompiled because {self.input} dim {self.dim} changed {self.old} -> {self.new}"


def _dynamo_graph_breaks():
    """Dynamo's graph breaks in this process (its counters, which torch_tpu never clears)."""
    return sum(torch._dynamo.utils.counters["graph_break"].values()) if "torch._dynamo" in sys.modules else 0


@dataclasses.dataclass
class _Counters:
    graphs_compiled: int = 0       # graphs Inductor compiled for tpu (forward and backward apart)
    compile_seconds: float = 0.0   # their compile time, C++ compilation included
    cache_hits: int = 0            # of those, served from Inductor's FX graph cache
    frames_compiled: int = 0       # Dynamo frames given to backend "tpu"
    recompiles: list = dataclasses.field(default_factory=list)
    bounds: dict = dataclasses.field(default_factory=dict)  # "fn: input dim d" -> (min, max)
    graph_breaks_before: int = dataclasses.field(default_factory=_dynamo_graph_breaks)  # Dynamo's, at the reset


_counters = _Counters()
_last_shapes = {}  # Dynamo frame id -> {input name: shape} of its latest compile


def counters():
    c = _counters
    graph_breaks = _dynamo_graph_breaks() - c.graph_breaks_before
    return {
        "frames_compiled": c.frames_compiled,
        "graphs_compiled": c.graphs_compiled,
        "compile_seconds": c.compile_seconds,
        "cache_hits": c.cache_hits,
        "recompiles": len(c.recompiles),
        "recompile_causes": [str(r) for r in c.recompiles],
        "dynamic_bounds": dict(c.bounds),
        "graph_breaks": graph_breaks,  # Dynamo's count since the last reset
    }


def recompiles():
    return list(_counters.recompiles)


def reset():
    global _counters
    _counters = _Counters()
    _last_shapes.clear()


def _explain():
    return next(v for name, _, v in _C._environment() if name == "TPU_EXPLAIN_RECOMPILES") not in (None, "", "0")


def _inputs(gm, example_inputs):
    """(name, real value, traced value) for each graph input: Dynamo hands the backend the real
    inputs; the fake values it traced (symbolic sizes) are the placeholders' example values."""
    found = []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, real in zip(placeholders, example_inputs):
        arg = node.meta.get("grapharg")
        source = getattr(arg, "source", None)
        name = source.name if source is not None else node.name
        found.append((name, real, node.meta.get("example_value", real)))
    return found


def prepare(gm, example_inputs, bounded_dynamism):
    """Before the graph is compiled: specialise the dims Dynamo made dynamic on its own, check
    bounds, and count the compile (with its cause when it is a recompile)."""
    compile_id = torch._guards.CompileContext.current_compile_id()
    frame = getattr(compile_id, "frame_id", None)
    fn = _function_name(gm, frame)
    keep_dynamic = not torch._dynamo.config.assume_static_by_default  # torch.compile(dynamic=True)
    shapes = {}
    for name, real, example in _inputs(gm, example_inputs):
        if isinstance(example, torch.Tensor):
            marked = getattr(real, "_dynamo_dynamic_indices", set()) if isinstance(real, torch.Tensor) else set()
            ranges = {r.dim: (r.min, r.max) for r in getattr(real, "_dynamo_dynamic_range", set())}
            size = []
            for d, s in enumerate(example.shape):
                if isinstance(s, torch.SymInt) and d in marked:
                    lo, hi = ranges.get(d, (None, None))
                    if bounded_dynamism and (lo is None or hi is None):
                        raise ValueError(f"bounded dynamism: {name} dim {d} is marked dynamic without a bound; "
                                         f"use torch._dynamo.mark_dynamic(x, {d}, min=..., max=...)")
                    _counters.bounds[f"{fn}: {name} dim {d}"] = (lo, hi)
                    size.append(f"{lo}..{hi}" if lo is not None or hi is not None else "dynamic")
                elif isinstance(s, torch.SymInt) and not keep_dynamic:
                    size.append(int(s))  # guards on the size: this graph serves it only
                else:
                    size.append(int(s) if not isinstance(s, torch.SymInt) else "dynamic")
            shapes[name] = tuple(size)
        elif isinstance(example, torch.SymInt) and not keep_dynamic and not _is_tensor_property(name):
            shapes[name] = int(example)  # an int argument Dynamo made dynamic
    _counters.frames_compiled += 1
    # Dynamo numbers the compiles of each frame (from 0 again after torch._dynamo.reset())
    if getattr(compile_id, "frame_compile_id", 0):
        previous = _last_shapes.get(frame)
        cause = (_cause(fn, previous, shapes) if previous is not None else
                 Recompile(fn, "an earlier compile of it, before torch.tpu.metrics.reset()", None, None, None))
        _counters.recompiles.append(cause)
        if _explain():
            print(f"[torch_tpu] {cause}", file=sys.stderr, flush=True)
    _last_shapes[frame] = shapes


def _is_tensor_property(name):
    # x.size()[0] as its own graph input: the tensor's dim decides (above)
    return ".size()" in name or ".stride()" in name or ".storage_offset()" in name


def _function_name(gm, frame):
    """The compiled function's name: the outermost frame of a node's stack trace
    ('File "train.py", line 3, in step')."""
    for node in gm.graph.nodes:
        frames = [line.strip() for line in (node.meta.get("stack_trace") or "").splitlines()
                  if line.strip().startswith("File ")]
        if frames:
            return frames[0].rsplit(", in ", 1)[-1]
    return f"frame {frame}"


def _cause(fn, old, new):
    for name, shape in new.items():
        before = old.get(name)
        if before is None:
            continue
        if isinstance(shape, tuple) and isinstance(before, tuple):
            if len(shape) != len(before):
                return Recompile(fn, name, -1, len(before), len(shape))
            for d, (a, b) in enumerate(zip(before, shape)):
                if a != b:
                    return Recompile(fn, name, d, a, b)
        elif shape != before:
            return Recompile(fn, name, 0, before, shape)
    return Recompile(fn, "no input shape changed (a guard on something else failed: TORCH_LOGS=recompiles names it)",
                     None, None, None)


def timed_inner_compile(inner):
    """Wraps Inductor's per-graph compile (forward and backward are graphs of their own)."""

    def compile_graph(gm, example_inputs, **kwargs):
        hits = torch._dynamo.utils.counters["inductor"]["fxgraph_cache_hit"]
        start = time.perf_counter()
        try:
            return inner(gm, example_inputs, **kwargs)
        finally:
            _counters.graphs_compiled += 1
            _counters.compile_seconds += time.perf_counter() - start
            _counters.cache_hits += torch._dynamo.utils.counters["inductor"]["fxgraph_cache_hit"] - hits

    return compile_graph
