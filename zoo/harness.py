"""What the zoo tiers share: the comparison of one tensor with its CPU reference, the
per-model sweep (a forked child per model with a time limit, resumable JSONL log, progress
line) and the parts of the Markdown summary every tier has."""
import argparse
import json
import os
import pathlib
import select
import signal
import sys
import tempfile
import time


def max_error(a, b):
    """(max |a - b|, max finite |b|) in float64, where NaN matches only NaN and an infinity
    only itself (else the error is inf); a shape mismatch raises ValueError."""
    a, b = a.detach().cpu().double(), b.detach().cpu().double()
    if a.shape != b.shape:
        raise ValueError(f"shape {tuple(a.shape)} vs CPU {tuple(b.shape)}")
    if not a.numel():
        return 0.0, 0.0
    same = (a == b) | (a.isnan() & b.isnan())
    err = (a - b).abs().masked_fill(same, 0).nan_to_num(nan=float("inf"))
    return err.max().item(), b.masked_fill(~b.isfinite(), 0).abs().max().item()


def main_tensor(out):
    """(name, tensor): the output a model is judged by."""
    import torch

    for key in ("logits", "last_hidden_state", "prediction_logits", "pooler_output"):
        v = getattr(out, key, None)
        if isinstance(v, torch.Tensor):
            return key, v
    seq = out.to_tuple() if hasattr(out, "to_tuple") else out
    for i, v in enumerate(seq if isinstance(seq, (tuple, list)) else [seq]):
        if isinstance(v, torch.Tensor) and v.dtype.is_floating_point:
            return f"output[{i}]", v
    return None, None


def fallbacks():
    """{op: count} of the ops that ran on the CPU fallback since the last metrics reset."""
    import torch_tpu

    return {k: v[0] for k, v in torch_tpu.metrics.fallback_ops().items()}


def progress(done, total, counts, current):
    width = 24
    bar = "#" * int(width * done / max(total, 1))
    summary = " ".join(f"{k}={v}" for k, v in sorted(counts.items()))
    sys.stdout.write(f"\r[{bar:<{width}}] {done}/{total} {summary} {current[:24]:<24}")
    sys.stdout.flush()


def run_forked(fn, args, timeout):
    """fn(*args) -> record, in a forked child (so torch and transformers are imported once
    by the parent) killed after `timeout` seconds; its stdout/stderr go to a scratch file
    whose tail explains a crash. A child that dies or times out gives a CRASH record."""
    err = tempfile.TemporaryFile()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(r)
        os.dup2(err.fileno(), 1)
        os.dup2(err.fileno(), 2)
        try:
            data = json.dumps(fn(*args))
        except BaseException as e:  # run_one never raises; anything here is a harness bug
            data = json.dumps({"verdict": "CRASH", "reason": f"{type(e).__name__}: {e}"[:300]})
        with os.fdopen(w, "w") as f:
            f.write(data)
        os._exit(0)
    os.close(w)
    chunks, deadline = [], time.time() + timeout
    with os.fdopen(r, "rb") as f:
        while True:
            ready, _, _ = select.select([f], [], [], max(0.0, deadline - time.time()))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return {"verdict": "CRASH", "reason": f"timed out after {timeout}s"}
            chunk = os.read(f.fileno(), 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    data = b"".join(chunks).decode()
    if data:
        return json.loads(data)
    err.seek(0)
    tail = err.read().decode(errors="replace").strip()[-200:]
    return {"verdict": "CRASH", "reason": f"exit status {status}: {tail}"}


def sweep(fn, models, log, timeout, resume, args=(), rerun=()):
    """Runs fn(model, *args) -> record for each model in its own forked child (run_forked);
    appends records to `log` (JSONL) as they come, and with `resume` keeps the records
    already there, but for those whose verdict is in `rerun`: those run again, and their new
    record, appended later, is the one that counts. Returns {model: record}."""
    done = {}
    if resume and log.exists():
        for line in log.read_text().splitlines():
            r = json.loads(line)
            done[r["model_type"]] = r
        done = {m: r for m, r in done.items() if r["verdict"] not in rerun}
    elif log.exists():
        log.unlink()
    counts = {}
    for r in done.values():
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    from torch_tpu import provenance
    commit = provenance.stamp()["commit"]
    for i, m in enumerate(models):
        progress(i, len(models), counts, m)
        if m in done:
            continue
        t0 = time.time()
        rec = {"model_type": m, "fallbacks": {}, **run_forked(fn, (m, *args), timeout), "commit": commit}
        rec["wall_s"] = round(time.time() - t0, 1)
        done[m] = rec
        counts[rec["verdict"]] = counts.get(rec["verdict"], 0) + 1
        with log.open("a") as f:
            f.write(json.dumps(rec) + "\n")
    progress(len(models), len(models), counts, "")
    return done


def summary_sections(records):
    """(counts, Markdown lines): where the records came from, the verdict table and the ops that fell back."""
    from torch_tpu import provenance
    counts = {}
    for r in records:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    lines = [provenance.describe(r.get("commit") for r in records), "",
             "| verdict | count |", "|---|---|"] + [f"| {k} | {v} |" for k, v in sorted(counts.items())]
    fb = {}
    for r in records:
        for op in r.get("fallbacks", {}):
            fb[op] = fb.get(op, 0) + 1
    if fb:
        lines += ["", "## Ops that fell back to CPU (models affected)", ""]
        lines += [f"- `{op}`: {n}" for op, n in sorted(fb.items(), key=lambda kv: -kv[1])]
    return counts, lines


def tier_arguments(timeout):
    """The command line every tier takes; a tier adds its own options to the parser."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", help="comma-separated model types")
    ap.add_argument("--subset", choices=["ci"])
    ap.add_argument("--timeout", type=int, default=timeout, help="seconds per model")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--rerun", default="", type=lambda s: {v for v in s.split(",") if v},
                    help="with --resume: comma-separated verdicts (e.g. NOT_BUILDABLE,CRASH) whose records run again")
    ap.add_argument("--out", default="results")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    return ap


def run_tier(name, run_one, models, args, summarize, extra=()):
    """Sweeps `models` into OUT/name.jsonl, writes OUT/name.md with summarize(records, path)
    -> (counts, buildable, passed) and prints the one-line result."""
    out_dir = pathlib.Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    if args.rerun and not args.resume:
        raise SystemExit("--rerun needs --resume")
    done = sweep(run_one, models, out_dir / f"{name}.jsonl", args.timeout, args.resume, extra, args.rerun)
    counts, buildable, passed = summarize([done[m] for m in models if m in done], out_dir / f"{name}.md")
    print(f"\n{len(models)} models in {time.time() - t0:.0f}s: {passed}/{buildable} buildable PASS; "
          f"{dict(sorted(counts.items()))}; details in {out_dir / (name + '.md')}")
    return 0
