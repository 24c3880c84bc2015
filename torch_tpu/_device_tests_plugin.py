"""pytest plugin of `python -m torch_tpu.device_tests`: one JSON line per test outcome, written
as each test ends (so a run that is killed keeps what it had) to $TORCH_TPU_DEVICE_TESTS_LOG."""
import json
import os

_log = None


def pytest_configure(config):
    global _log
    precision = os.environ.get("TORCH_TPU_DEVICE_TESTS_PRECISION")
    if precision:
        from torch_tpu.precision import set_matmul_precision
        set_matmul_precision(precision)
    path = os.environ.get("TORCH_TPU_DEVICE_TESTS_LOG")
    if path:
        _log = open(path, "a", buffering=1)


def _exception(report):
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr or "")
    kind, _, rest = text.partition(":")
    if not kind.replace(".", "").replace("_", "").isalnum() or " " in kind:
        kind, rest = "", text
    return kind.rsplit(".", 1)[-1], rest.strip()


def pytest_runtest_logreport(report):
    if _log is None:
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed") or \
            (report.when == "teardown" and report.outcome == "failed"):
        outcome = report.outcome
        if outcome == "failed" and report.when != "call":
            outcome = "error"
        kind, message = _exception(report) if outcome in ("failed", "error") else ("", "")
        # a test the file marks as an expected failure (unittest.expectedFailure): its body
        # failed ("xfailed") or, reported by pytest as a failure, passed ("xpassed")
        if outcome == "skipped" and hasattr(report, "wasxfail"):
            outcome = "xfailed"
        elif outcome == "failed" and message.startswith("Unexpected success"):
            outcome = "xpassed"
        if outcome == "skipped" and isinstance(report.longrepr, tuple):
            message = str(report.longrepr[2])
        _log.write(json.dumps({"test": report.nodeid, "outcome": outcome, "exception": kind,
                               "message": message[:2000], "seconds": round(report.duration, 3)}) + "\n")
