"""The porting report: what will bite when a PyTorch script moves to TPUs.

    python -m torch_tpu port script.py [--generation v6e] [--out port_report] [-- script args]

Two halves. The static scan reads the script and the local .py files it imports (same
directory) with `ast` and lists hard-coded CUDA (PATTERNS below). The run executes the script
as it is (runpy, as `__main__`), on whatever device it chooses: it should pick its device from
a variable, so `device = "tpu"` is a one-line change; nothing in torch is patched. While it
runs, a dispatch mode (a CostRecorder that also notes the innermost user line of each call)
records CPU fallbacks, float64, host syncs, GEMM shapes that would recompile, MXU padding and
the eager op-by-op roofline on the chosen generation. Output: Markdown on stdout and in
OUT/report.md, a self-contained page in OUT/report.html (port_html.py)."""
import argparse
import ast
import collections
import functools
import linecache
import os
import re
import runpy
import sys
import time
import traceback
from pathlib import Path

import torch

import torch_tpu
from torch_tpu.cost import CostRecorder

# What the scan looks for: (kind, key, what to do instead). A node yields facts (kind, value):
# "name" imported modules (and names) and outermost dotted attributes, "call" the called name,
# "string" constants (":N" device indices dropped, *.cu for CUDA sources). A fact matches a key
# equal to it or a dotted prefix of it; the first matching row wins, so specific rows go first.
PATTERNS = (
    ("name", "torch.cuda.amp", "use torch.autocast(device_type=device.type) (bf16 on TPU, no GradScaler)"),
    ("name", "torch.backends.cudnn", "cuDNN settings do nothing on TPU: drop them"),
    ("name", "torch.cuda", "use the device-generic torch.accelerator / torch.<device> API or guard it"),
    ("name", "torch.utils.cpp_extension.CUDAExtension", "a custom CUDA extension: needs a TPU (Pallas) or "
                                                        "PyTorch-op rewrite"),
    ("call", "cuda", "`.cuda()`: use `.to(device)` with device chosen once"),
    ("call", "CUDAExtension", "a custom CUDA extension: needs a TPU (Pallas) or PyTorch-op rewrite"),
    ("string", "cuda", "hard-coded CUDA device: select the device from a variable"),
    ("string", "nccl", "NCCL is CUDA-only: use the device's collective backend"),
    ("string", "*.cu", "CUDA kernel source: needs a TPU (Pallas) or PyTorch-op rewrite"),
    ("name", "apex", "NVIDIA apex: use torch's own fused optimizers / norms"),
    ("name", "flash_attn", "use torch.nn.functional.scaled_dot_product_attention"),
    ("name", "xformers", "use torch.nn.functional.scaled_dot_product_attention"),
    ("name", "triton", "Triton kernels are GPU-only: rewrite as PyTorch ops (or Pallas)"),
    ("name", "bitsandbytes", "CUDA-only quantization: use torch.ao quantization"),
    ("name", "deepspeed", "CUDA/NCCL-centred: use FSDP on the device's collectives"),
)

# Calls that stop the host until the device answers, or whose output size depends on data.
SYNC_OPS = frozenset({"aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select", "aten::_unique",
                      "aten::_unique2", "aten::unique_dim", "aten::unique_consecutive"})
WIDE = (torch.float64, torch.complex128)
SHOWN_VISITS = 3  # distinct shapes listed per recompiling line (the count says how many)


# ---------------------------------------------------------------- static scan
def _dotted(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id] + parts[::-1]) if isinstance(node, ast.Name) else None


def _facts(tree):
    """(line, kind, value) for every node the patterns can match."""
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            yield from ((n.lineno, "name", a.name) for a in n.names)
        elif isinstance(n, ast.ImportFrom) and n.module and not n.level:
            yield n.lineno, "name", n.module
            yield from ((n.lineno, "name", f"{n.module}.{a.name}") for a in n.names)
        elif isinstance(n, ast.Attribute) and id(n) not in inner and _dotted(n):
            yield n.lineno, "name", _dotted(n)
        elif isinstance(n, ast.Call):
            f = n.func
            yield n.lineno, "call", f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            yield n.lineno, "string", "*.cu" if n.value.endswith(".cu") else re.sub(r":\d+$", "", n.value)


def _match(kind, value):
    for k, key, advice in PATTERNS:
        if k == kind and (value == key or value.startswith(key + ".")):
            return key, advice
    return None


def _local_modules(tree, folder):
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and not n.level]
    for name in names:
        path = folder / (name.replace(".", "/") + ".py")
        if path.is_file():
            yield path


def scan(script):
    """Findings (file, line, pattern key, advice) in the script and the local files it imports."""
    found, todo, seen = [], [Path(script).resolve()], set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        tree = ast.parse(path.read_text(), str(path))
        hits = {(line, m) for line, kind, value in _facts(tree) if (m := _match(kind, value))}
        found += [(str(path), line, key, advice) for line, (key, advice) in hits]
        todo += _local_modules(tree, path.parent)
    return sorted(found)


# ---------------------------------------------------------------- the run
class PortRecorder(CostRecorder):
    """A CostRecorder that also keeps, per priced call, the innermost frame in the user's files
    (None for calls no user frame issued, such as autograd's backward)."""

    def __init__(self, generation, folder):
        super().__init__(generation)
        self.folder = os.path.join(str(folder), "")
        self.ours = (str(Path(torch.__file__).parent), str(Path(torch_tpu.__file__).parent))
        self.first_line = {}     # "aten::op" -> first user line that issued it
        self.wide = collections.Counter()
        self.syncs = collections.Counter()
        self.gemm_visits = collections.defaultdict(set)  # line -> {((op, shapes), ...) of one visit}
        self._run = (None, ())

    def is_user(self, filename):
        return (filename.startswith(self.folder) and not filename.startswith(self.ours)
                and "site-packages" not in filename)

    def _user_frame(self):
        f = sys._getframe(2)
        while f is not None and not self.is_user(f.f_code.co_filename):
            f = f.f_back
        return (f.f_code.co_filename, f.f_lineno) if f is not None else None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        n = len(self.ops)
        out = super().__torch_dispatch__(func, types, args, kwargs)
        if len(self.ops) == n:
            return out
        op, where, name = self.ops[-1], self._user_frame(), func._schema.name
        self.first_line.setdefault(name, where)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        if any(isinstance(t, torch.Tensor) and t.dtype in WIDE for t in outs):
            self.wide[where] += 1
        bool_index = name == "aten::index" and any(isinstance(i, torch.Tensor) and i.dtype == torch.bool
                                                   for i in args[1])
        if name in SYNC_OPS or bool_index:
            self.syncs[(where, "boolean indexing" if bool_index else name)] += 1
        self._note_gemm(where, op)
        return out

    def _note_gemm(self, where, op):
        """A line's calls between calls from other lines are one visit; a visit whose GEMM
        shapes are new at that line is what a static-shape compiler compiles anew."""
        line, gemms = self._run
        if line != where:
            self.finish()
            gemms = ()
        self._run = (where, gemms + ((op.name, op.shapes),) if op.mxu_flops else gemms)

    def finish(self):
        line, gemms = self._run
        if line is not None and gemms:
            self.gemm_visits[line].add(gemms)
        self._run = (None, ())


def run_script(script, argv, recorder):
    """Runs the script as __main__; returns the exception it raised, or None."""
    saved = sys.argv, sys.path[:]
    sys.argv = [script] + argv
    sys.path.insert(0, str(Path(script).resolve().parent))  # as `python script.py` would
    try:
        with recorder:
            # absolute, so the script's own frames name it as the recorder's folder does
            runpy.run_path(str(Path(script).resolve()), run_name="__main__")
    except SystemExit as e:
        return None if e.code in (None, 0) else e
    except Exception as e:  # the report is the point: the user's error is one of its findings
        return e
    finally:
        sys.argv, sys.path[:] = saved
    return None


# ---------------------------------------------------------------- findings
def _code(where):
    return linecache.getline(where[0], where[1]).strip() if where else ""


def _at(where, base):
    return f"{os.path.relpath(where[0], base)}:{where[1]}" if where else "(autograd / library)"


def _shapes(shapes):
    return " ".join("x".join(map(str, s)) or "()" for s in shapes)


def _visit(gemms):
    return ", ".join(f"{op.split('.')[0]} {_shapes(shapes)}" for op, shapes in gemms)


def sections(script, rec, error, wall, fallbacks, findings):
    """The report as data: dicts with title, status (green, amber, red, info), text, columns,
    rows and an optional chart [(label, value)] with its unit."""
    base = Path(script).resolve().parent
    at = functools.partial(_at, base=base)
    out = []
    tpu_calls = len(rec.ops)
    run_rows = [["wall time of the emulated run", f"{wall:.2f} s"], ["priced tpu calls", f"{tpu_calls:,}"]]
    run_text = "The script ran to the end."
    if error is not None:
        tb = [f for f in traceback.extract_tb(error.__traceback__) if rec.is_user(f.filename)]
        where = (tb[-1].filename, tb[-1].lineno) if tb else None
        run_rows.insert(0, ["exception", f"{type(error).__name__}: {error}"])
        run_rows.insert(1, ["raised at", f"{at(where)} `{_code(where)}`"])
        run_text = "The script raised: the findings below cover what ran before it."
    if not tpu_calls:
        run_text += (" **No op ran on the tpu device**: the script chose another device. Select it from a variable"
                     " (`device = \"tpu\"`); the static scan lists hard-coded CUDA.")
    out.append(dict(title="Run", status="red" if error is not None or not tpu_calls else "green", text=run_text,
                    columns=["", ""], rows=run_rows))
    out.append(dict(title="Hard-coded CUDA (static scan)", status="red" if findings else "green",
                    text="CUDA calls and CUDA-only imports in the script and the local files it imports.",
                    columns=["where", "code", "pattern", "instead"],
                    rows=[[at((f, line)), _code((f, line)), key, advice] for f, line, key, advice in findings]))
    out.append(dict(title="CPU fallbacks", status="amber" if fallbacks else "green",
                    text="Ops with no tpu kernel: their tensors went to the host and back.",
                    columns=["op", "calls", "why", "first line", "code"],
                    rows=[[op, n, why, at(rec.first_line.get(op)), _code(rec.first_line.get(op))]
                          for op, (n, why) in sorted(fallbacks.items(), key=lambda kv: -kv[1][0])]))
    out.append(dict(title="float64 on tpu", status="amber" if rec.wide else "green",
                    text="TPUs have no native float64: XLA emulates it slowly or rejects it.",
                    columns=["where", "code", "calls"],
                    rows=[[at(w), _code(w), n] for w, n in rec.wide.most_common()]))
    out.append(dict(title="Host syncs and data-dependent shapes", status="amber" if rec.syncs else "green",
                    text="Each stops the host until the device is done; data-dependent sizes also break graphs.",
                    columns=["where", "code", "op", "calls"],
                    rows=[[at(w), _code(w), op, n] for (w, op), n in rec.syncs.most_common()]))
    recompiles = {k: v for k, v in rec.gemm_visits.items() if len(v) > 1}
    out.append(dict(title="Shapes that recompile", status="amber" if recompiles else "green",
                    text="TPU compilers specialise on shapes: every new input shape at a line is a new compile.",
                    columns=["where", "code", "compiles", "GEMM shapes of the first visits"],
                    rows=[[at(w), _code(w), len(visits), " ; ".join(sorted(_visit(v) for v in visits)[:SHOWN_VISITS])
                           + (" ; ..." if len(visits) > SHOWN_VISITS else "")]
                          for w, visits in recompiles.items()]))
    out += _mxu_sections(rec)
    return out


def _mxu_sections(rec):
    gemm = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])  # calls, flops, mxu_flops, seconds
    by_op, by_bound = collections.Counter(), collections.Counter()
    for op in rec.ops:
        by_op[op.name] += op.seconds
        by_bound[op.bound] += op.seconds
        if op.mxu_flops:
            g = gemm[(op.name, _shapes(op.shapes))]
            g[0] += 1
            g[1] += op.flops
            g[2] += op.mxu_flops
            g[3] += op.seconds
    waste = {k: max(0.0, 1 - f / m) for k, (_, f, m, _) in gemm.items()}
    flops, mxu = sum(g[1] for g in gemm.values()), sum(g[2] for g in gemm.values())
    total_waste = max(0.0, 1 - flops / mxu) if mxu else 0.0
    top = sorted(gemm, key=lambda k: -gemm[k][3] * waste[k])[:20]
    total = sum(by_bound.values())
    return [
        dict(title="MXU padding waste", status="amber" if total_waste > 0.5 else "green",
             text=f"GEMMs are padded to the MXU tile ({rec.info['mxu_dim']} wide on {rec.generation}, 8 rows): "
                  f"{total_waste:.0%} of the matrix-unit work over all GEMMs is padding.",
             columns=["op", "shapes", "calls", "waste", "est. seconds lost"],
             rows=[[k[0], k[1], gemm[k][0], f"{waste[k]:.0%}", f"{gemm[k][3] * waste[k]:.3g}"] for k in top],
             chart=[(f"{k[0]} {k[1]}", 100 * waste[k]) for k in top[:10]], unit="% waste"),
        dict(title=f"Estimated time on {rec.generation}", status="info",
             text=f"{total:.3g} s of TPU time, the eager op-by-op roofline of every tpu call (no fusion, no "
                  f"overlap: a compiled step is faster).",
             columns=["bound", "est. seconds", "share"],
             rows=[[b, f"{s:.3g}", f"{s / total:.0%}"] for b, s in by_bound.most_common()] if total else [],
             chart=[(b, s * 1e3) for b, s in by_bound.most_common()], unit="ms"),
        dict(title="Top ops by estimated time", status="info", text="Summed over the run.",
             columns=["op", "est. seconds"], rows=[[n, f"{s:.3g}"] for n, s in by_op.most_common(15)],
             chart=[(n, s * 1e3) for n, s in by_op.most_common(10)], unit="ms"),
    ]


# ---------------------------------------------------------------- output
def _cell(v):
    return str(v).replace("|", "\\|").replace("\n", " ")


def markdown(script, generation, secs):
    lines = [f"# Porting report: {script} on {generation}", "", "| section | status | findings |", "|---|---|---|"]
    lines += [f"| {s['title']} | {s['status']} | {len(s['rows'])} |" for s in secs]
    for s in secs:
        lines += ["", f"## {s['title']} ({s['status']})", "", s["text"]]
        if s["rows"]:
            lines += ["", "| " + " | ".join(s["columns"]) + " |", "|" + "---|" * len(s["columns"])]
            lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in s["rows"]]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_tpu port", description=__doc__.split("\n\n")[0])
    parser.add_argument("script")
    parser.add_argument("--generation", default="v6e", help="TPU generation to price on (v5e, v5p, v6e, tpu7x)")
    parser.add_argument("--out", default="port_report", help="folder for report.md and report.html")
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)  # the script's own arguments follow "--"
    a = parser.parse_args(argv[:cut])
    try:
        rec = PortRecorder(a.generation, Path(a.script).resolve().parent)
    except ValueError as e:  # an unknown generation
        parser.error(str(e))
    findings = scan(a.script)
    before, start = torch_tpu.metrics.fallback_ops(), time.perf_counter()
    error = run_script(a.script, argv[cut + 1:], rec)
    rec.finish()
    wall = time.perf_counter() - start
    fallbacks = {op: (n - before.get(op, (0,))[0], why) for op, (n, why) in torch_tpu.metrics.fallback_ops().items()
                 if n > before.get(op, (0,))[0]}
    secs = sections(a.script, rec, error, wall, fallbacks, findings)
    from .port_html import page

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    md = markdown(a.script, rec.generation, secs)
    (out / "report.md").write_text(md)
    (out / "report.html").write_text(page(f"Porting report: {a.script} on {rec.generation}", secs))
    print(md)
    return 1 if error is not None else 0
