"""The OpInfo conformance tool's machinery (python -m torch_tpu.conformance): records are
written, a known-good op passes, an op without a native kernel is reported as fallback (not
pass), a wrong result is a mismatch, and a crashing op costs only itself. Pass-rate targets
are the tool's report, not asserted here."""
import copy
import json

import pytest
import torch

from torch_tpu import conformance as conf

# An OpInfo whose aten op has no native kernel yet (runs on the CPU fallback); when it gets
# one, name another here.
FALLBACK_OP, FALLBACK_ATEN = "nn.functional.pdist", "aten::_pdist_forward"


@pytest.fixture(scope="module")
def inprocess(tmp_path_factory):
    out = tmp_path_factory.mktemp("conf")
    ops = conf.select_ops(["add", FALLBACK_OP, "index_select"])
    records = conf.sweep_inprocess(ops, ["float32", "int64"], str(out), time_limit=60, max_samples=8, quiet=True)
    summary = conf.write_outputs(records, str(out), "test")
    return out, records, summary


def _dtype_rec(records, op, dtype):
    return next(r for r in records if r["kind"] == "dtype" and r["op"] == op and r["dtype"] == dtype)


def test_records_streamed_for_every_op_and_dtype(inprocess):
    out, records, _ = inprocess
    lines = [json.loads(line) for line in (out / "conformance.jsonl").read_text().splitlines()]
    assert lines == json.loads(json.dumps(records))
    for op in ("add", FALLBACK_OP, "index_select"):
        for dtype in ("float32", "int64"):
            _dtype_rec(records, op, dtype)
        assert any(r["kind"] == "op_done" and r["op"] == op for r in records)
    assert any(r["kind"] == "errors" and r["op"] == "index_select" and r["total"] > 0 for r in records)


def test_known_good_op_passes_forward_and_backward(inprocess):
    _, records, _ = inprocess
    r = _dtype_rec(records, "add", "float32")
    assert r["status"] == "pass", r
    assert r["fwd"]["pass"] == r["fwd"]["total"] > 0
    assert r["bwd"]["pass"] == r["bwd"]["total"] > 0
    assert _dtype_rec(records, "add", "int64")["bwd"]["total"] == 0   # no gradients for integers


def test_cpu_fallback_is_reported_not_passed(inprocess):
    _, records, summary = inprocess
    r = _dtype_rec(records, FALLBACK_OP, "float32")
    assert r["status"] == "fallback", r
    assert r["fwd"]["pass"] == 0 and r["fwd"]["fallback"] > 0
    assert FALLBACK_ATEN in r["fallback_ops"]
    assert FALLBACK_ATEN in summary["fallback_aten_ops"]
    assert any(g["op"] == FALLBACK_OP for g in summary["gaps"])


def test_summary_and_report(inprocess):
    out, _, summary = inprocess
    assert summary["native_overloads_registered"] > 100
    assert 0 < summary["overloads_observed_native_in_table"] <= summary["overloads_observed_native"]
    assert summary["families"]["ALL"]["ops"] == 3
    md = (out / "conformance.md").read_text()
    assert "Remaining gaps" in md and FALLBACK_OP in md
    assert "tpu build" in md.splitlines()[2]   # the provenance line: commit, torch, build
    data = json.loads((out / "conformance.json").read_text())
    assert data["summary"]["families"]["ALL"]["fwd_samples"] > 0
    cols, rows = conf.render_table(summary)
    assert rows[-2][0] == "ALL"


def test_wrong_result_is_a_mismatch(tmp_path):
    op = copy.copy(conf.select_ops(["neg"])[0])
    real = op.op
    op.op = lambda x, *a, **k: real(x, *a, **k) + (1 if x.device.type == "tpu" else 0)
    records = []
    conf.run_op(op, ["float32"], records.append, time_limit=60, backward=False)
    r = records[0]
    assert r["status"] == "mismatch" and r["fwd"]["mismatch"] > 0, r


@pytest.mark.once
def test_worker_crash_costs_one_op(tmp_path, monkeypatch, capsys):
    """One worker process (importing op_db costs seconds): abs runs, then neg segfaults."""
    monkeypatch.setenv("TORCH_TPU_CONFORMANCE_CRASH_ON", "neg")
    conf.main(["--ops", "abs,neg", "--dtypes", "float32", "--no-backward", "--no-noncontig", "--out", str(tmp_path)])
    recs = [json.loads(line) for line in (tmp_path / "conformance.jsonl").read_text().splitlines()]
    crash = [r for r in recs if r["kind"] == "crash"]
    assert [r["op"] for r in crash] == ["neg"] and crash[0]["status"] == "crash"
    assert _dtype_rec(recs, "abs", "float32")["status"] == "pass"
    assert "ALL" in capsys.readouterr().out
    summary = json.loads((tmp_path / "conformance.json").read_text())["summary"]
    assert summary["families"]["ALL"]["crash"] == 1


def test_semantics_checks_are_recorded(inprocess):
    _, records, summary = inprocess
    sem = {r["op"]: r["checks"] for r in records if r["kind"] == "semantics"}
    assert sem["add"]["promotion"]["total"] > 0 and sem["add"]["promotion"]["pass"] == sem["add"]["promotion"]["total"]
    for check in ("zero_dim", "high_dim", "out_resize", "out_dtype", "out_device", "out_alias"):
        assert sem["add"][check]["pass"] == sem["add"][check]["total"] > 0, (check, sem["add"][check])
    assert summary["semantics"]["promotion"]["total"] > 0
    assert "Semantics checks" in (inprocess[0] / "conformance.md").read_text()


def test_semantics_checks_catch_what_the_value_comparison_misses():
    """An op that is right on every sample but ignores a 0-dim input's value, accepts a CPU out=,
    and promotes a float64 operand wrongly is caught by the matching checks."""
    from torch_tpu.conformance_semantics import run_semantics
    op = copy.copy(conf.select_ops(["mul"])[0])
    real = op.op

    def wrong(x, y, *a, out=None, **k):
        if x.device.type == "tpu":
            if x.dim() == 0:
                x = x + 1
            if isinstance(y, torch.Tensor) and y.dtype == torch.float64:
                y = y.float()
            if out is not None and out.device.type == "cpu":
                return out.copy_(real(x.cpu(), y.cpu() if isinstance(y, torch.Tensor) else y, *a, **k))
        return real(x, y, *a, out=out, **k) if out is not None else real(x, y, *a, **k)
    op.op = wrong
    checks = run_semantics(op, torch.float32, binary=True, sweep_dtypes=[torch.float32, torch.float64],
                           elementwise=True)
    for check in ("zero_dim", "out_device", "promotion"):
        assert checks[check]["pass"] < checks[check]["total"], (check, checks[check])
    assert checks["high_dim"]["pass"] == checks["high_dim"]["total"]


def test_compile_mode_runs_each_sample_through_the_tpu_backend(tmp_path):
    """--compile: the tpu side of every sample is a graph compiled by torch.compile(backend="tpu")
    (counted by the compile metrics), forward and backward, compared with CPU eager by the same
    rule; a wrong compiled result would be a mismatch as an eager one is."""
    ops = conf.select_ops(["mul"])
    records = conf.sweep_inprocess(ops, ["float32"], str(tmp_path), time_limit=120, max_samples=2,
                                   noncontig=False, quiet=True, compile=True)
    r = _dtype_rec(records, "mul", "float32")
    assert r["status"] == "pass" and r["fwd"]["pass"] == r["fwd"]["total"] == 2, r
    assert r["bwd"]["pass"] == r["bwd"]["total"] == 2 and not any(rec["kind"] == "errors" for rec in records)
    assert torch.tpu.metrics.compile_counters()["graphs_compiled"] >= 1  # the last sample's (reset per sample)
