"""``torch.tpu.metrics``: what the emulated chip did — ops executed (per kernel), ops that
fell back to the CPU and why, host<->device transfers, allocations, float64 use, collectives.

Reading or resetting the counters waits for every device's streams first: the chip counts an
op when it runs it, and a report read while ops are still queued would under-count them."""
import math
import sys

from . import _C


def _settled():
    for d in range(_C._device_count()):
        _C._synchronize(d)
    return _C._metrics()


def counters() -> dict:
    """All counters as a dict (kernels and fallbacks as nested dicts)."""
    return _settled()


def fallback_ops() -> dict:
    """{aten op: (count, reason)} for every op that ran on the CPU instead of the chip."""
    return {k: tuple(v) for k, v in _settled()["fallbacks"].items()}


def executed_ops() -> dict:
    """{kernel name: executions}."""
    return dict(_settled()["kernels"])


def unplanned_temporaries() -> dict:
    """{kernel name: bytes} of temporaries kernels took beyond what their plan counted (each
    call's scratch is allocated when it is issued, from the plan): empty when every plan is
    exact."""
    return dict(_settled()["unplanned_temp_bytes_by_kernel"])


def collectives() -> dict:
    """tpu_dist's collectives in this process, per kind that ran: calls, bytes (per rank:
    all_reduce/reduce_scatter's input, all_gather's output, all_to_all's sends), seconds they took
    here, and `ici_seconds`: what the emulated generation's ICI would take (the cost model over a
    ring of the group's chips; None for kinds it has no model of: broadcast, gather, scatter,
    reduce, barrier, send/recv)."""
    _settled()
    return {kind: {"calls": calls, "bytes": nbytes, "seconds": seconds,
                   "ici_seconds": None if math.isnan(ici) else ici}
            for kind, (calls, nbytes, seconds, ici) in _C._collective_stats().items() if calls}


def compile_counters() -> dict:
    """torch.compile(backend="tpu"): frames and graphs compiled, compile seconds, FX cache
    hits, recompiles with their causes, the bounds of dynamic dims, Dynamo's graph breaks;
    each counted since the last reset()."""
    from .compiler import report

    return report.counters()


def recompiles() -> list:
    """Each recompile as (function, input, dim, old size, new size) (compiler.report.Recompile)."""
    from .compiler import report

    return report.recompiles()


def reset() -> None:
    _settled()
    _C._metrics_reset()
    if "torch_tpu.compiler.report" in sys.modules:
        sys.modules["torch_tpu.compiler.report"].reset()


def _mib(n: int) -> str:
    return f"{n / (1 << 20):,.1f} MiB"


def short_report() -> str:
    m = _settled()
    lines = [
        f"ops executed: {m['ops_executed']:,} native, {sum(c for c, _ in m['fallbacks'].values()):,} CPU fallback",
        f"transfers: host->tpu {m['h2d_count']:,} ({_mib(m['h2d_bytes'])}), tpu->host {m['d2h_count']:,} "
        f"({_mib(m['d2h_bytes'])}), on-device copies {m['d2d_count']:,} ({_mib(m['d2d_bytes'])})",
        f"allocations: {m['alloc_count']:,}",
    ]
    if m["ops_f64"]:
        lines.append(f"float64 ops: {m['ops_f64']:,} (not native on real TPUs: XLA rewrites or rejects f64)")
    if m["kernel_errors"]:
        lines.append(f"kernel errors: {m['kernel_errors']:,}")
    for kind, c in collectives().items():
        ici = f", {c['ici_seconds'] * 1e3:,.3f} ms on the ICI" if c["ici_seconds"] is not None else ""
        lines.append(f"{kind}: {c['calls']:,} calls, {_mib(c['bytes'])}, {c['seconds'] * 1e3:,.1f} ms here{ici}")
    if "torch_tpu.compiler.report" in sys.modules:
        c = compile_counters()
        if c["frames_compiled"]:
            lines.append(f"torch.compile: {c['graphs_compiled']:,} graphs ({c['cache_hits']:,} from the cache), "
                         f"{c['recompiles']:,} recompiles, {c['compile_seconds']:.1f} s compiling")
    if m["fallbacks"]:
        lines.append("fell back to CPU:")
        for name, (count, why) in sorted(m["fallbacks"].items(), key=lambda kv: -kv[1][0]):
            lines.append(f"  {name}: {count:,} ({why})")
    else:
        lines.append("fell back to CPU: none")
    return "\n".join(lines)
